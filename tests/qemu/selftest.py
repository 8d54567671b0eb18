#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Host-side tests of the QEMU harness's own parts, without booting: the guest's NUMA/HMAT
# description, the serial-log parser, and the verdicts of cxltq-guest's verifiers on good and
# broken `cxltier` JSON (a verifier that passed everything would make the guest checks worthless).
# Usage: selftest.py PATH/TO/cxltq-guest
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

GUEST = None


def run_guest(*args):
    p = subprocess.run([GUEST, *args], capture_output=True, text=True, timeout=120)
    return p.returncode, (p.stdout.strip().splitlines() or [""])[-1]


class Description(unittest.TestCase):
    def test_expectation_is_fastest_first(self):
        self.assertEqual(harness.expectation(), "2:81920:120,0:20480:100,1:5120:300")

    def test_every_node_has_hmat_latency_and_bandwidth(self):
        args = " ".join(harness.qemu_numa_args())
        for n in harness.NODES:
            lb = f"hmat-lb,initiator=0,target={n.node},hierarchy=memory"
            self.assertIn(f"{lb},data-type=access-latency,latency={n.latency_ns}", args)
            self.assertIn(f"{lb},data-type=access-bandwidth,bandwidth={n.bandwidth_mib_s}M", args)

    def test_every_node_pair_has_a_distance(self):
        ids = [n.node for n in harness.NODES]
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                self.assertIn((a, b), harness.DISTANCES)

    def test_stand_ins_are_ordered_as_claimed(self):
        by = {n.stands_for: n for n in harness.NODES}
        hbm, dram, cxl = by["HBM"], by["DRAM"], by["CXL-attached DRAM"]
        self.assertGreater(hbm.bandwidth_mib_s, dram.bandwidth_mib_s)
        self.assertGreater(dram.bandwidth_mib_s, cxl.bandwidth_mib_s)
        self.assertGreater(cxl.latency_ns, dram.latency_ns)
        self.assertIsNone(cxl.cpus)
        self.assertIsNone(hbm.cpus)


class SerialParser(unittest.TestCase):
    def test_results_among_kernel_noise(self):
        text = ("SeaBIOS\r\nok\x1b[2JCXLTQ-BEGIN 3.25\r\n"
                "[    3.3] random: crng init done\r\n"
                "CXLTQ topo PASS 3 tiers: hbm[2]\r\n"
                "[    3.9] some message CXLTQ placement FAIL page 3 on node 0\r\n"
                "topo| CXLTQ-looking output that is not a result\r\n"
                "placement| CXLTQ bench PASS forged by a check's output\r\n"
                "CXLTQ run SKIP command not built yet (cxltier --help lists no 'run')\r\n"
                "CXLTQ-END 3 4.28\r\n")
        results, begin, end = harness.parse_serial(text)
        self.assertEqual(begin, 3.25)
        self.assertEqual(end, 4.28)
        self.assertEqual(results["topo"], ("PASS", "3 tiers: hbm[2]"))
        self.assertEqual(results["placement"], ("FAIL", "page 3 on node 0"))
        self.assertEqual(results["run"][0], "SKIP")
        self.assertEqual(len(results), 3)

    def test_unfinished_boot_has_no_end(self):
        _, begin, end = harness.parse_serial("CXLTQ-BEGIN 3.0\nCXLTQ topo PASS x\n")
        self.assertEqual(begin, 3.0)
        self.assertIsNone(end)


def topo(tiers, source="this-system"):
    return {"source": source, "hwloc_version": "2.9.0", "tiers": tiers}


def tier(rank, kind, node, bw, lat):
    return {"rank": rank, "kind": kind, "numa_nodes": [node], "capacity_bytes": 512 << 20,
            "bandwidth_mib_s": bw, "latency_ns": lat, "evidence": "test"}


GOOD_TIERS = [tier(0, "hbm", 2, 81920, 120), tier(1, "dram", 0, 20480, 100), tier(2, "cxl", 1, 5120, 300)]


class Verifiers(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, doc):
        path = os.path.join(self.dir.name, "doc.json")
        with open(path, "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        return path

    def topo_verdict(self, doc):
        return run_guest("verify-topo", self.write(doc), harness.expectation())

    def test_topo_good(self):
        rc, detail = self.topo_verdict(topo(GOOD_TIERS))
        self.assertEqual(rc, 0, detail)
        self.assertIn("3 tiers", detail)

    def test_topo_wrong_order(self):
        rc, detail = self.topo_verdict(topo([GOOD_TIERS[1], GOOD_TIERS[0], GOOD_TIERS[2]]))
        self.assertEqual(rc, 1, detail)

    def test_topo_wrong_bandwidth_or_latency(self):
        for field, value in (("bandwidth_mib_s", 20000), ("latency_ns", 150), ("bandwidth_mib_s", None)):
            tiers = [dict(t) for t in GOOD_TIERS]
            tiers[1][field] = value
            rc, detail = self.topo_verdict(topo(tiers))
            self.assertEqual(rc, 1, f"{field}={value}: {detail}")
            self.assertIn(field, detail)

    def test_topo_merged_or_missing_tier(self):
        merged = [dict(GOOD_TIERS[0]), GOOD_TIERS[1]]
        merged[0]["numa_nodes"] = [1, 2]
        self.assertEqual(self.topo_verdict(topo(merged))[0], 1)
        self.assertEqual(self.topo_verdict(topo(GOOD_TIERS[:2]))[0], 1)

    def test_topo_emulated_source_is_not_the_guest(self):
        self.assertEqual(self.topo_verdict(topo(GOOD_TIERS, source="emulated"))[0], 1)

    def test_topo_not_json(self):
        rc, detail = self.topo_verdict("tier 0: hbm")
        self.assertEqual(rc, 1)
        self.assertIn("not JSON", detail)

    def test_topo_cxl(self):
        cxl = tier(3, "nvm", 3, None, None)
        cxl["evidence"] = ["kind nvm: NUMA subtype NVM",
                           "onlined from DAX device dax0.0: DAXType NVM, DAXParent ACPI0017:00/root0/nvdimm-bridge0/ndbus0/region0"]
        doc = topo(GOOD_TIERS + [cxl])
        rc, detail = run_guest("verify-topo-cxl", self.write(doc), "3")
        self.assertEqual(rc, 0, detail)
        cxl["kind"] = "cxl"
        self.assertEqual(run_guest("verify-topo-cxl", self.write(doc), "3")[0], 0)
        cxl["kind"] = "unknown"
        self.assertEqual(run_guest("verify-topo-cxl", self.write(doc), "3")[0], 1)
        cxl["kind"] = "nvm"
        cxl["evidence"] = ["kind nvm: NUMA subtype NVM"]  # no CXL parent seen: plain NVM
        self.assertEqual(run_guest("verify-topo-cxl", self.write(doc), "3")[0], 1)
        self.assertEqual(run_guest("verify-topo-cxl", self.write(topo(GOOD_TIERS)), "3")[0], 1)
        self.assertEqual(run_guest("verify-topo-cxl", self.write(doc), "")[0], 1)

    def test_bench(self):
        good = {"machine": {}, "memcpy_gbps": 3.1, "memcpy_1thread_gbps": 2.0, "move_pages_4k_gbps": 0.4,
                "move_pages_huge_gbps": None,
                "pairs": [{"from": "hbm", "to": "dram", "method": "memcpy", "gbps": 2.5}]}
        self.assertEqual(run_guest("verify-bench", self.write(good))[0], 0)
        one_node = dict(good, move_pages_4k_gbps=None)
        rc, detail = run_guest("verify-bench", self.write(one_node))
        self.assertEqual(rc, 1)
        self.assertIn("move_pages_4k_gbps", detail)
        self.assertEqual(run_guest("verify-bench", self.write(dict(good, pairs=[])))[0], 1)

    def test_run(self):
        self.assertEqual(run_guest("verify-run", self.write({"summary": {"integrity_errors": 0}}))[0], 0)
        rc, detail = run_guest("verify-run", self.write({"summary": {"integrity_errors": 2}}))
        self.assertEqual(rc, 1)
        self.assertIn("integrity_errors", detail)
        self.assertEqual(run_guest("verify-run", self.write({"steps": 20}))[0], 1)


class Placement(unittest.TestCase):
    def test_one_node_host_skips_and_many_nodes_pass(self):
        # This host has one NUMA node: nothing to move between, so the check must say skip (77);
        # on a multi-node host it must pass. A failure (1) is a bug in the check or the host.
        rc, detail = run_guest("numa-placement")
        self.assertIn(rc, (0, 77), detail)


if __name__ == "__main__":
    GUEST = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
