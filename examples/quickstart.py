#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The README's Python example: the C ABI through ctypes, nothing else.

Usage: quickstart.py [path/to/libcxltier.so] [config.toml]
"""
import ctypes
import sys


class Key(ctypes.Structure):
    _fields_ = [("hi", ctypes.c_uint64), ("lo", ctypes.c_uint64)]


class Block(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("bytes", ctypes.c_size_t), ("tier", ctypes.c_int), ("handle", ctypes.c_uint64)]


class PolicyState(ctypes.Structure):
    _fields_ = [("score", ctypes.c_double), ("last_access_step", ctypes.c_uint64), ("accesses", ctypes.c_uint64),
                ("tier", ctypes.c_int)]


def main():
    lib = ctypes.CDLL(sys.argv[1] if len(sys.argv) > 1 else "libcxltier.so.0")
    config = (sys.argv[2] if len(sys.argv) > 2 else "examples/quickstart.toml").encode()
    lib.cxlt_key_from_sequence.restype = Key
    lib.cxlt_key_from_sequence.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
    lib.cxlt_last_error.restype = ctypes.c_char_p
    lib.cxlt_block_admit.argtypes = [ctypes.c_void_p, Key, ctypes.POINTER(Block)]
    lib.cxlt_block_access.argtypes = [ctypes.c_void_p, ctypes.POINTER(Key), ctypes.POINTER(ctypes.c_float), ctypes.c_size_t]
    lib.cxlt_runtime_policy_state.argtypes = [ctypes.c_void_p, Key, ctypes.POINTER(PolicyState)]
    lib.cxlt_runtime_step.argtypes = [ctypes.c_void_p]
    lib.cxlt_runtime_close.argtypes = [ctypes.c_void_p]
    lib.cxlt_runtime_wait_idle.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.cxlt_block_release.argtypes = [ctypes.c_void_p, Key, ctypes.c_int]

    def check(rc, what):
        if rc != 0:
            raise RuntimeError(f"{what}: {lib.cxlt_last_error().decode()}")

    rt = ctypes.c_void_p()
    check(lib.cxlt_runtime_open(config, ctypes.byref(rt)), "open")
    first = lib.cxlt_key_from_sequence(9, 0)
    block = Block()
    check(lib.cxlt_block_admit(rt, first, ctypes.byref(block)), "admit")
    ctypes.memset(block.data, 7, block.bytes)  # the engine writes the block's KV here
    attention = ctypes.c_float(0.6)
    for _ in range(4):
        check(lib.cxlt_block_access(rt, ctypes.byref(first), ctypes.byref(attention), 1), "access")
        check(lib.cxlt_runtime_step(rt), "step")
    before = PolicyState()
    check(lib.cxlt_runtime_policy_state(rt, first, ctypes.byref(before)), "policy_state")
    for i in range(1, 40):  # more than the three tiers hold together (28 blocks)
        check(lib.cxlt_block_admit(rt, lib.cxlt_key_from_sequence(9, i), ctypes.byref(block)), "admit")
        check(lib.cxlt_runtime_step(rt), "step")
    check(lib.cxlt_runtime_wait_idle(rt, -1), "wait_idle")
    later = PolicyState()
    check(lib.cxlt_runtime_policy_state(rt, first, ctypes.byref(later)), "policy_state")
    if later.tier >= 0:  # LRFU kept it resident: the sequence ends, free its bytes, keep its state
        check(lib.cxlt_block_release(rt, first, 1), "release")
    gone = PolicyState()
    check(lib.cxlt_runtime_policy_state(rt, first, ctypes.byref(gone)), "policy_state")
    check(lib.cxlt_block_admit(rt, first, ctypes.byref(block)), "admit again")
    after = PolicyState()
    check(lib.cxlt_runtime_policy_state(rt, first, ctypes.byref(after)), "policy_state")
    print(f"score {before.score:.6f} in tier {before.tier}; later tier {later.tier}, then {gone.tier}; "
          f"re-admitted with score {after.score:.6f} in tier {after.tier}")
    lib.cxlt_runtime_close(rt)
    if gone.tier != -1 or after.tier < 0 or after.score != before.score:
        print("unexpected", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
