# SPDX-License-Identifier: Apache-2.0
"""The reference engine with the remote tier on a real Redis Cluster (run by
tests/remote/cluster.sh, which sets CXLT_TEST_REDIS_SEEDS): blocks dropped from the last tier
are written out, blocks found in the cluster come back not `placed` and the engine uses their
bytes (checked against the checksums it took when it computed them) instead of recomputing
them; tokens and logits stay bit-identical to the never-evicting baseline."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.environ["CXLT_SOURCE_ROOT"], "examples", "engine"))
import cxltier  # noqa: E402
import engine  # noqa: E402
from model import Model  # noqa: E402

REQUESTS = 30


class Remote(unittest.TestCase):
    def test_blocks_from_the_cluster_are_used_and_identical(self):
        seeds = os.environ.get("CXLT_TEST_REDIS_SEEDS")
        if not seeds:
            self.skipTest("no cluster: run under tests/remote/cluster.sh")
        model = Model(1)
        base = engine.Engine(model, engine.NumpyKV()).serve(engine.make_requests(REQUESTS))
        cfg = engine.runtime_config()
        cfg["remote"] = {"enabled": True, "seeds": seeds, "namespace": f"engine-test-{os.getpid()}"}
        crc = {}
        # Two runtimes one after the other, as two engine processes sharing a cluster: the second
        # starts empty and finds in the cluster what the first dropped.
        with cxltier.Runtime(cfg) as rt:
            store = engine.CxltierKV(rt)
            first = engine.Engine(model, store).serve(engine.make_requests(REQUESTS))
            rt.wait_idle()
            crc.update(store.crc)
            s1 = rt.stats()
        with cxltier.Runtime(cfg) as rt:
            store = engine.CxltierKV(rt)
            store.crc.update(crc)  # the bytes the cluster returns are checked against the first run's
            # New sequence ids: the first run's private blocks, left in the cluster by drops
            # mid-request, are not this run's (with the same ids the checksums catch them stale).
            second = engine.Engine(model, store).serve(engine.make_requests(REQUESTS, sequence_base=1 << 32))
            s2 = rt.stats()
        print(f"\nfirst run: {s1['drops']} drops, remote {s1['remote']}; second: remote {s2['remote']}, "
              f"{second.prefill_saved} prefill tokens from hits (first run {first.prefill_saved})")
        self.assertEqual(engine.compare(base, first), [])
        self.assertEqual(engine.compare(base, second), [])
        self.assertGreater(s1["remote"]["writeouts"], 0)
        self.assertGreater(s2["remote"]["hits"], 0)
        self.assertGreater(second.prefill_saved, first.prefill_saved)  # the cluster kept prefixes


if __name__ == "__main__":
    unittest.main(verbosity=2)
