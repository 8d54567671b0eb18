# SPDX-License-Identifier: Apache-2.0
"""The reference engine (examples/engine): its tokens and logits with the KV cache in cxltier
equal, bit for bit, those with a numpy KV cache that never evicts, over 60 requests with
demotions, drops, recomputes and restored re-admissions happening; corrupted block bytes never
pass silently; the attention trace it records replays and sweeps with the cxltier tool."""
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.environ["CXLT_SOURCE_ROOT"], "examples", "engine"))
import cxltier  # noqa: E402
import engine  # noqa: E402
from model import Model  # noqa: E402

REQUESTS = 60


class Identical(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.trace = os.path.join(cls.tmp.name, "engine.jsonl")
        model = Model(1)
        cls.base = engine.Engine(model, engine.NumpyKV()).serve(engine.make_requests(REQUESTS))
        with cxltier.Runtime(engine.runtime_config()) as rt:
            cls.ours = engine.Engine(model, engine.CxltierKV(rt), trace_path=cls.trace).serve(
                engine.make_requests(REQUESTS))
            cls.stats = rt.stats()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_tokens_and_logits_are_bit_identical(self):
        self.assertEqual(len(self.ours.tokens), REQUESTS)
        self.assertEqual(engine.compare(self.base, self.ours), [])
        for rid in range(REQUESTS):
            self.assertEqual(self.ours.logits[rid].dtype, np.float32)
            self.assertTrue(np.isfinite(self.ours.logits[rid]).all())
        # Not a degenerate model: requests generate different tokens.
        self.assertGreater(len({tuple(t) for t in self.ours.tokens.values()}), REQUESTS // 2)

    def test_the_runtime_evicted_and_the_engine_recomputed(self):
        s = self.stats
        print(f"\nstats: demotions {s['demotions']}, drops {s['drops']}, restored {s['readmissions_restored']}; "
              f"engine: {self.ours.recomputed_blocks} blocks recomputed, {self.ours.prefill_saved} prefill tokens "
              f"from prefix hits, {self.ours.prefill_computed} computed; {self.ours.runtime_s:.3f} s of "
              f"{self.ours.wall_s:.3f} s in cxltier calls")
        self.assertGreater(s["demotions"], 0)
        self.assertGreater(s["drops"], 0)
        self.assertGreater(s["readmissions_restored"], 0)
        self.assertGreater(self.ours.recomputed_blocks, 0)
        self.assertGreater(self.ours.prefill_saved, 0)
        self.assertEqual(self.base.recomputed_blocks, 0)  # the baseline never evicts
        # Recomputing is the only extra work: the baseline computed every other token once.
        self.assertEqual(self.ours.forwards - self.ours.recomputed_tokens, self.base.forwards)
        with open(self.trace) as f:
            refs = sum(len(json.loads(line)["blocks"]) for line in f.readlines()[1:])
        self.assertEqual(s["accesses"], refs)

    def test_the_trace_is_attention_the_model_computed(self):
        with open(self.trace) as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual(lines[0]["format"], "cxltier-attention")
        steps = lines[1:]
        self.assertEqual(len(steps), self.ours.steps)
        self.assertEqual([s["step"] for s in steps], list(range(1, len(steps) + 1)))
        for s in steps:
            self.assertEqual(sum(s["count"]), len(s["blocks"]))
            at = np.array(s["attn"])
            self.assertTrue(((at >= 0) & (at <= 1)).all())
            start = 0
            for c in s["count"]:  # one request's masses add up to 1
                self.assertAlmostEqual(float(at[start:start + c].sum()), 1.0, places=4)
                start += c
        self.assertEqual(sum(len(s["done"]) for s in steps), REQUESTS)
        self.assertGreater(len({a for s in steps for a in s["attn"]}), 100)  # not a constant 1.0

    def test_the_trace_replays_and_sweeps(self):
        tool = os.environ["CXLT_TOOL"]
        out = subprocess.run([tool, "replay", "--trace", self.trace, "--policy", "lrfu", "--tiers",
                              "hbm=384KiB,dram=640KiB,cxl=1MiB", "--block-bytes", "64KiB", "--json", "--quiet"],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        j = json.loads(out.stdout)
        self.assertEqual(j["format"], "attention")
        self.assertEqual(j["requests"], self.ours.steps)  # one trace line per decode step
        self.assertEqual(j["references"], self.stats["accesses"])
        self.assertGreater(j["hits"], 0)
        self.assertNotIn("1.0", str(j.get("attention_source", "")))
        out = subprocess.run([tool, "sweep", "--trace", self.trace, "--capacity-blocks", "8,32", "--alpha",
                              "0.3,0.05", "--beta", "0,0.001", "--policies", "lrfu,lru", "--jobs", "1",
                              "--json", "--quiet"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("lrfu", out.stdout)


class Corruption(unittest.TestCase):
    """Bytes of a block changed behind the runtime's back, while it is cached between steps."""

    def run_corrupted(self, verify: bool):
        model = Model(1)
        reqs = engine.make_requests(8)
        base = engine.Engine(model, engine.NumpyKV()).serve(engine.make_requests(8))
        with cxltier.Runtime(engine.runtime_config()) as rt:
            store = engine.CxltierKV(rt, verify=verify)
            hit, calls = [], []
            acquire = store.acquire

            def corrupting_acquire(keys):
                # From the 8th acquire on, once: block 0 (a full system-prompt block computed
                # earlier) gets 64 bytes overwritten through its address, not through a pin.
                calls.append(1)
                if not hit and len(calls) >= 8:
                    rt.wait_idle()
                    try:
                        b = rt.lookup(keys[0])
                    except cxltier.NotFoundError:
                        b = None
                    if b is not None:
                        ctypes.memset(b.data + 128, 0x3F, 64)  # 16 floats become 0.747: finite, wrong
                        hit.append(b.key)
                return acquire(keys)

            store.acquire = corrupting_acquire
            try:
                ours = engine.Engine(model, store).serve(reqs)
            finally:
                store.acquire = acquire
        self.assertEqual(len(hit), 1, "no block was corrupted: the test did not test anything")
        return base, ours

    def test_caught_by_the_checksum(self):
        with self.assertRaises(engine.CorruptBlock) as cm:
            self.run_corrupted(verify=True)
        self.assertIn("checksum", str(cm.exception))

    def test_caught_by_the_comparison(self):
        base, ours = self.run_corrupted(verify=False)
        self.assertNotEqual(engine.compare(base, ours), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
