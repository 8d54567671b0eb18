#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The cost of a cxltier call from Python: ns per call and per block, for the calls an engine
makes every step. Lower is better. The floor is cxlt_version() through ctypes (no argument, no
work): what any ctypes call costs on this machine and interpreter; "C access_handles, bare
ctypes" is the same C call as access() without the package, so the difference between the two
is what the package adds.

    CXLTIER_LIBRARY=build/libcxltier.so.0 PYTHONPATH=python /usr/bin/python3 python/bench_calls.py
"""
import time

import numpy as np

import cxltier
from cxltier import _native


def per_call(fn, reps):
    best = float("inf")
    for _ in range(5):  # the best of 5 rounds: the machine is shared
        t = time.perf_counter_ns()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter_ns() - t) / reps)
    return best


def main():
    lib = _native.library()
    floor = per_call(lib.cxlt_version, 20000)
    print(f"ctypes floor (cxlt_version): {floor:.0f} ns per call")
    cfg = {"topology": "emulated", "runtime": {"huge_pages": "none"},
           "geometry": {"layers": 1, "kv_heads": 1, "head_dim": 64, "bytes_per_element": 2, "tokens_per_block": 16},
           "tiers": [{"kind": "dram", "budget": 8192 * 4096}]}
    rows = []
    with cxltier.Runtime(cfg) as rt:
        for n in (1, 16, 256, 4096):
            keys = [cxltier.key_from_sequence(n, i) for i in range(n)]
            blocks = rt.admit_batch(keys)
            handles = np.array([b.handle for b in blocks], dtype=np.uint64)
            karr = cxltier.keys_array(keys)
            att = np.full(n, 0.5, dtype=np.float32)
            reps = max(20, 20000 // n)
            hp, ap, h = handles.ctypes.data, att.ctypes.data, rt._rt
            rows.append(("C access_handles, bare ctypes", n,
                         per_call(lambda: lib.cxlt_block_access_handles(h, hp, ap, n), reps)))
            rows.append(("access(handles ndarray)", n, per_call(lambda: rt.access(handles, att), reps)))
            rows.append(("access(keys ndarray)", n, per_call(lambda: rt.access(karr, att), reps)))
            rows.append(("access(list of Blocks)", n, per_call(lambda: rt.access(blocks, att), reps)))
            rows.append(("admit_batch (resident)", n, per_call(lambda: rt.admit_batch(keys), max(5, reps // 10))))

            def pin_unpin():
                for b in rt.prefix_lookup(keys):
                    rt.unpin(b.key)
            rows.append(("prefix_lookup(pin) + unpin each", n, per_call(pin_unpin, max(5, reps // 10))))
        k = keys[0]
        rows.append(("lookup", 1, per_call(lambda: rt.lookup(k), 20000)))
        rows.append(("step", 1, per_call(rt.step, 20000)))
        toks = np.arange(16, dtype=np.int32)
        rows.append(("key_from_tokens(16 tokens)", 1, per_call(lambda: cxltier.key_from_tokens(cxltier.ROOT, toks), 20000)))
    print(f"{'call':<34} {'blocks':>6} {'ns/call':>10} {'ns/block':>9} {'x floor':>8}")
    for name, n, ns in rows:
        print(f"{name:<34} {n:>6} {ns:>10.0f} {ns / n:>9.0f} {ns / floor:>8.1f}")


if __name__ == "__main__":
    main()
