# SPDX-License-Identifier: Apache-2.0
"""The cxltier package against the C ABI: every call, every error class, the view-lifetime rule,
and two Python threads on one runtime. Run with Debian's interpreter and python3-numpy:
CXLTIER_LIBRARY=build/libcxltier.so.0 PYTHONPATH=python /usr/bin/python3 python/tests/test_api.py
"""
import ctypes
import gc
import os
import subprocess
import sys
import tempfile
import threading
import unittest

import numpy as np

import cxltier

BLOCK = 2 * 1 * 1 * 64 * 4 * 16  # bytes per block of GEOMETRY: 8 KiB


def config(**extra):
    """Two emulated tiers of 4 and 8 blocks of 8 KiB; extra keys override (dotted names)."""
    c = {"topology": "emulated",
         "geometry": {"layers": 1, "kv_heads": 1, "head_dim": 64, "bytes_per_element": 4, "tokens_per_block": 16},
         "runtime": {"huge_pages": "none"},
         "tiers": [{"kind": "hbm", "budget": 4 * BLOCK}, {"kind": "dram", "budget": 8 * BLOCK}]}
    for k, v in extra.items():
        c[k] = v
    return c


class Keys(unittest.TestCase):
    def test_keys_match_the_c_functions_and_each_other(self):
        lib = ctypes.CDLL(os.environ["CXLTIER_LIBRARY"])
        lib.cxlt_key_from_sequence.restype = cxltier._native.KeyStruct
        lib.cxlt_key_from_sequence.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
        c = lib.cxlt_key_from_sequence(9, 3)
        self.assertEqual(cxltier.key_from_sequence(9, 3), cxltier.Key(c.hi, c.lo))
        self.assertNotEqual(cxltier.key_from_sequence(9, 3), cxltier.key_from_sequence(9, 4))
        toks = [5, 6, 7, 8]
        a = cxltier.key_from_tokens(cxltier.ROOT, toks)
        self.assertEqual(a, cxltier.key_from_tokens(cxltier.ROOT, np.array(toks, dtype=np.int32)))
        self.assertEqual(a, cxltier.key_from_tokens(cxltier.ROOT, np.array(toks, dtype=np.int64)))
        self.assertNotEqual(a, cxltier.key_from_tokens(cxltier.ROOT, [5, 6, 7, 9]))
        b = cxltier.key_from_tokens(a, toks)
        self.assertNotEqual(a, b)  # chained: the parent is part of the key
        self.assertNotEqual(cxltier.key_from_tokens(cxltier.ROOT, []), a)

    def test_library_facts(self):
        self.assertEqual(cxltier.version(), "0.1.0")
        self.assertEqual(cxltier.block_bytes(80, 8, 128, 2, 16), 5242880)
        with self.assertRaises(cxltier.InvalidArgumentError):
            cxltier.block_bytes(0, 8, 128, 2, 16)
        try:
            gs = cxltier.gpus()
        except cxltier.NotSupportedError as e:
            self.assertTrue(e.message)
        else:
            self.assertTrue(all(g["total_bytes"] > 0 for g in gs))


class Errors(unittest.TestCase):
    def test_one_class_per_result_code(self):
        self.assertEqual(len(cxltier.ERROR_CLASSES), 14)
        for code, cls in cxltier.ERROR_CLASSES.items():
            self.assertTrue(issubclass(cls, cxltier.Error))
            e = cxltier.error_for(code, "the message")
            self.assertIs(type(e), cls)
            self.assertEqual((e.code, e.message), (code, "the message"))
            self.assertNotEqual(cxltier.result_string(code), "")
        self.assertEqual(len({c.__name__ for c in cxltier.ERROR_CLASSES.values()}), 14)
        odd = cxltier.error_for(4242, "x")
        self.assertIs(type(odd), cxltier.Error)
        self.assertEqual(odd.code, 4242)

    def test_each_error_from_a_real_call(self):
        with self.assertRaises(cxltier.ConfigError) as cm:
            cxltier.Config().set("policy.nonsense", "1")
        self.assertIn("policy.nonsense", cm.exception.message)
        self.assertEqual(cm.exception.code, 11)
        with self.assertRaises(cxltier.IoError):
            cxltier.Config("/nonexistent/cxltier.toml")
        with self.assertRaises(cxltier.TopologyError):
            cxltier.Runtime(config(topology="/nonexistent/topology.xml"))
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "store.bin")
            with open(bad, "wb") as f:
                f.write(b"not a checkpoint" * 8)
            with self.assertRaises(cxltier.CorruptError):
                cxltier.Runtime(config(store={"path": bad}))
        with cxltier.Runtime(config()) as rt:
            with self.assertRaises(cxltier.NotFoundError):
                rt.lookup(cxltier.key_from_sequence(1, 99))
            b = rt.admit(cxltier.key_from_sequence(1, 0), pin=True)
            with self.assertRaises(cxltier.BusyError):
                rt.release(b.key)
            with self.assertRaises(cxltier.InvalidArgumentError):
                rt.access([b], [1.5])
            b.unpin()
            with self.assertRaises(cxltier.InvalidArgumentError):
                rt.unpin(b.key)  # not pinned
            rt.admit_batch([cxltier.key_from_sequence(2, i) for i in range(11)], pin=True)  # 12 slots in all
            rt.wait_idle()  # b must not be mid-move (then no block could make room)
            with self.assertRaises(cxltier.OutOfTierMemoryError) as cm:
                rt.admit_batch([cxltier.key_from_sequence(3, i) for i in range(2)], pin=True)
            self.assertIn("nothing admitted", str(cm.exception))  # the first fits (b is unpinned), the second does not
            with self.assertRaises(cxltier.NotFoundError):
                rt.lookup(cxltier.key_from_sequence(3, 0))  # checked first: not even the first was admitted
            rt.lookup(b.key)  # nor was b evicted for it
        with self.assertRaises(cxltier.ClosedError):
            rt.step()
        slow = config(runtime={"huge_pages": "none"},
                      tiers=[{"kind": "hbm", "budget": 4 * BLOCK},
                             {"kind": "dram", "budget": 8 * BLOCK, "pace_mib_s": 0.05}])
        with cxltier.Runtime(slow) as rt:  # a copy into dram takes 8 KiB / 0.05 MiB/s = 156 ms
            k = cxltier.key_from_sequence(4, 0)
            rt.admit(k)
            rt.move(k, 1)
            with self.assertRaises(cxltier.TimedOutError):
                rt.wait_idle(0)
            rt.wait_idle(-1)
            self.assertEqual(rt.lookup(k).tier, 1)
        with cxltier.Runtime(config(tiers=[{"kind": "hbm", "budget": 4 * BLOCK, "backend": "null"}])) as rt:
            b = rt.admit(cxltier.key_from_sequence(5, 0), pin=True)
            with self.assertRaises(cxltier.NotSupportedError):
                b.array()  # the null backend has no bytes to view
            b.unpin()


class Api(unittest.TestCase):
    def test_config(self):
        with cxltier.Config(values={"policy": {"alpha": 0.25}}) as c:
            c.set("tiers.0.kind", "dram")
            c.set("tiers.0.budget", "8MiB")
            c.set("runtime.verify_copies", True)
            c.validate()
            text = c.dump()
            self.assertIn("alpha = 0.25", text)
            self.assertIn("verify_copies = true", text)
            c.set("runtime.high_watermark", 0.5)
            c.set("runtime.low_watermark", 0.9)
            with self.assertRaises(cxltier.ConfigError):
                c.validate()
        with self.assertRaises(cxltier.ClosedError):
            c.dump()
        src = os.environ["CXLT_SOURCE_ROOT"]
        with cxltier.Runtime(os.path.join(src, "examples", "quickstart.toml")) as rt:
            self.assertEqual([t.name for t in rt.tiers()], ["hbm", "dram", "cxl"])
        with cxltier.Config(os.path.join(src, "examples", "quickstart.toml")) as c:
            c.set("tiers.2.budget", "32MiB")
            with cxltier.Runtime(c) as rt:
                self.assertEqual(rt.tiers()[2].budget_bytes, 32 << 20)
                self.assertEqual(rt.stats()["block_bytes"], 1 << 20)

    def test_close_reports_a_final_checkpoint_that_failed(self):
        import shutil
        with tempfile.TemporaryDirectory() as d:
            sub = os.path.join(d, "gone")
            os.mkdir(sub)
            rt = cxltier.Runtime(config(store={"path": os.path.join(sub, "s.bin")}))
            rt.admit(cxltier.key_from_sequence(3, 0))
            shutil.rmtree(sub)  # the directory writable at open is gone at close
            with self.assertRaises(cxltier.IoError):
                rt.close()
            rt.close()  # closed either way: a second close is a no-op
        with tempfile.TemporaryDirectory() as d:
            rt = cxltier.Runtime(config(store={"path": os.path.join(d, "s.bin")}))
            rt.close()
            self.assertTrue(os.path.exists(os.path.join(d, "s.bin")))

    def test_every_block_call(self):
        with tempfile.TemporaryDirectory() as d, cxltier.Runtime(config(store={"path": os.path.join(d, "s.bin")})) as rt:
            keys = [cxltier.key_from_sequence(7, i) for i in range(6)]
            blocks = rt.admit_batch(keys[:3])
            self.assertTrue(all(b.placed for b in blocks))
            self.assertEqual([b.bytes for b in blocks], [BLOCK] * 3)
            self.assertFalse(rt.admit(keys[0]).placed)  # resident already: bytes as last written
            # prefix_lookup: the resident prefix, pinned; the first absent key ends it.
            hit = rt.prefix_lookup([keys[0], keys[1], keys[4], keys[2]])
            self.assertEqual([b.key for b in hit], keys[:2])
            self.assertTrue(all(b.pinned for b in hit))
            self.assertEqual(len(rt.prefix_lookup(keys[:3], pin=False)), 3)
            self.assertFalse(rt.lookup(keys[2]).pinned)
            for b in hit:
                b.unpin()
            # access by Blocks (handles), by Keys, by numpy handles and numpy keys: one call each.
            rt.access(blocks, [0.5, 0.25, 0.125])
            rt.access(keys[:3], None)
            rt.access(np.array([b.handle for b in blocks], dtype=np.uint64), np.full(3, 0.5, dtype=np.float32))
            rt.access(cxltier.keys_array(keys[:3]), np.array([1.0, 0.0, 0.5]))
            rt.access(np.array([[k.hi, k.lo] for k in keys[:3]], dtype=np.uint64))
            rt.access([], None)
            with self.assertRaises(cxltier.InvalidArgumentError):
                rt.access(blocks, [0.5])  # lengths differ
            with self.assertRaises(cxltier.NotFoundError):
                rt.access([keys[5]])
            st = rt.policy_state(keys[0])
            self.assertEqual(st.accesses, 5)
            self.assertEqual(st.tier, 0)
            step = rt.current_step
            rt.step()
            self.assertEqual(rt.current_step, step + 1)
            moved = rt.move(keys[0], 1, wait=True)
            self.assertEqual(moved.tier, 1)
            self.assertEqual(rt.policy_state(keys[0]).tier, 1)
            with rt.pin(keys[1]) as b:
                self.assertTrue(b.pinned)
                with self.assertRaises(cxltier.BusyError):
                    rt.move(keys[1], 1)
            self.assertFalse(b.pinned)
            rt.release(keys[1])
            self.assertEqual(rt.lookup(keys[1]).tier, 0)  # released, still cached
            with rt.pin(keys[2]):  # checked whole first: a pinned key releases none of the batch
                with self.assertRaises(cxltier.BusyError):
                    rt.release_batch(keys[1:3], forget=True)
            self.assertEqual(rt.lookup(keys[1]).tier, 0)
            rt.release_batch(keys[1:3], forget=True)
            with self.assertRaises(cxltier.NotFoundError):
                rt.lookup(keys[2])
            self.assertEqual(rt.policy_state(keys[2]).tier, -1)  # state kept
            rt.wait_idle()
            rt.checkpoint()
            self.assertGreater(os.path.getsize(os.path.join(d, "s.bin")), 0)
            s = rt.stats()
            self.assertGreaterEqual(s["accesses"], 15)
            self.assertEqual(s["step"], step + 1)
            self.assertEqual(sum(t.blocks for t in rt.tiers()), 1)
            self.assertIn("Block(", repr(moved))

    def test_view_lifetime(self):
        with cxltier.Runtime(config()) as rt:
            k = cxltier.key_from_sequence(8, 0)
            b = rt.admit(k)
            with self.assertRaises(cxltier.InvalidArgumentError):
                b.array()  # admitted, not pinned: refused
            p = rt.pin(k)
            rt.pin(k)  # pins nest
            a = p.array(np.float32, (2, 16, 64))
            self.assertEqual(a.nbytes, BLOCK)
            a[:] = np.arange(a.size, dtype=np.float32).reshape(a.shape)
            again = b.array(np.float32)  # the same bytes through another Block of the key
            self.assertEqual(again[17], 17.0)
            self.assertEqual(ctypes.string_at(p.data, 8), a.tobytes()[:8])  # zero-copy
            with self.assertRaises(cxltier.InvalidArgumentError):
                p.array(np.float32, (2, 16, 65))  # more bytes than the block has
            rt.unpin(k)  # one pin of two: views stay valid
            row = a[1]  # a derived view keeps the block's views alive
            del a, again
            gc.collect()
            with self.assertRaises(cxltier.BusyError):
                rt.unpin(k)
            self.assertEqual(row[0, 0], 1024.0)
            del row
            rt.unpin(k)
            with self.assertRaises(cxltier.InvalidArgumentError):
                p.array()
            self.assertFalse(p.pinned)

    def test_tensor_needs_torch_only_there(self):
        try:
            import torch  # noqa: F401
        except ImportError:
            with cxltier.Runtime(config()) as rt, rt.admit(cxltier.key_from_sequence(9, 0), pin=True) as b:
                with self.assertRaises(ImportError):
                    b.tensor()
            return
        with cxltier.Runtime(config()) as rt, rt.admit(cxltier.key_from_sequence(9, 0), pin=True) as b:
            t = b.tensor(torch.float32, (2, 16, 64))
            t.fill_(3.0)
            self.assertEqual(b.array(np.float32)[5], 3.0)
            del t

    def test_two_threads(self):
        with cxltier.Runtime(config(runtime={"huge_pages": "none"})) as rt:
            errors = []

            def worker(seq):
                try:
                    for i in range(300):
                        k = cxltier.key_from_sequence(seq, i % 20)
                        with rt.admit(k, pin=True) as b:
                            a = b.array(np.uint32)
                            a[:] = seq * 1000 + i
                            if int(a[-1]) != seq * 1000 + i:
                                raise AssertionError("another thread wrote this block")
                            rt.access([b], [0.5])
                            del a
                        if i % 10 == 0:
                            rt.step()
                except Exception as e:  # reported by the main thread
                    errors.append(e)

            ts = [threading.Thread(target=worker, args=(s,)) for s in (1, 2)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            self.assertEqual(errors, [])
            self.assertEqual(rt.stats()["accesses"], 600)
            self.assertGreater(rt.stats()["drops"], 0)

    def test_main_module(self):
        env = dict(os.environ)
        src = os.environ["CXLT_SOURCE_ROOT"]
        out = subprocess.run([sys.executable, "-m", "cxltier", "topo", "--config",
                              os.path.join(src, "examples", "quickstart.toml")], env=env, capture_output=True,
                             text=True, check=True).stdout
        self.assertIn("cxl", out)
        out = subprocess.run([sys.executable, "-m", "cxltier", "stats", "--config",
                              os.path.join(src, "examples", "quickstart.toml")], env=env, capture_output=True,
                             text=True, check=True).stdout
        self.assertIn('"drops"', out)
        bad = subprocess.run([sys.executable, "-m", "cxltier", "topo", "--config", "/nonexistent.toml"], env=env,
                             capture_output=True, text=True)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("nonexistent", bad.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
