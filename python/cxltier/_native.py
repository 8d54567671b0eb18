# SPDX-License-Identifier: Apache-2.0
"""The C ABI of include/cxltier/cxltier.h, declared for ctypes.

Only this module knows the C layout. The library is found, in order, at $CXLTIER_LIBRARY (a
path), then as libcxltier.so.0 through the dynamic loader (LD_LIBRARY_PATH, the cache).
"""
import ctypes
import os
import threading
from typing import Optional

c_u64 = ctypes.c_uint64
c_size = ctypes.c_size_t
c_void = ctypes.c_void_p

CXLT_MAX_TIERS = 8
CXLT_STATS_VERSION = 1
ADMIT_PIN = 1
MOVE_WAIT = 1
LOOKUP_PIN = 1
LOOKUP_FETCH = 2


class KeyStruct(ctypes.Structure):
    _fields_ = [("hi", c_u64), ("lo", c_u64)]


class BlockStruct(ctypes.Structure):
    _fields_ = [("data", c_void), ("bytes", c_size), ("tier", ctypes.c_int), ("handle", c_u64)]


class PolicyStateStruct(ctypes.Structure):
    _fields_ = [("score", ctypes.c_double), ("last_access_step", c_u64), ("accesses", c_u64),
                ("tier", ctypes.c_int)]


class TierInfoStruct(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int), ("kind", ctypes.c_int), ("name", ctypes.c_char * 32),
                ("backend", ctypes.c_char * 16), ("budget_bytes", c_u64), ("used_bytes", c_u64),
                ("blocks", c_u64), ("bandwidth_mib_s", ctypes.c_double), ("latency_ns", ctypes.c_double),
                ("emulated", ctypes.c_int)]


class GpuInfoStruct(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int), ("name", ctypes.c_char * 96), ("pci_bus_id", ctypes.c_char * 32),
                ("numa_node", ctypes.c_int), ("total_bytes", c_u64), ("compute_major", ctypes.c_int),
                ("compute_minor", ctypes.c_int), ("copy_engines", ctypes.c_int)]


P = ctypes.POINTER
_rc = ctypes.c_int  # cxlt_result_t
# name: (restype, argtypes)
_SIGNATURES = {
    "cxlt_version": (ctypes.c_uint32, []),
    "cxlt_result_string": (ctypes.c_char_p, [ctypes.c_int]),
    "cxlt_last_error": (ctypes.c_char_p, []),
    "cxlt_key_from_sequence": (KeyStruct, [c_u64, c_u64]),
    "cxlt_key_from_tokens": (KeyStruct, [KeyStruct, c_void, c_size]),
    "cxlt_block_bytes": (_rc, [ctypes.c_uint32] * 5 + [P(c_u64)]),
    "cxlt_tier_kind_name": (ctypes.c_char_p, [ctypes.c_int]),
    "cxlt_config_create": (_rc, [P(c_void)]),
    "cxlt_config_load_file": (_rc, [c_void, ctypes.c_char_p]),
    "cxlt_config_set": (_rc, [c_void, ctypes.c_char_p, ctypes.c_char_p]),
    "cxlt_config_validate": (_rc, [c_void]),
    "cxlt_config_dump": (_rc, [c_void, ctypes.c_char_p, c_size, P(c_size)]),
    "cxlt_config_destroy": (None, [c_void]),
    "cxlt_runtime_open": (_rc, [ctypes.c_char_p, P(c_void)]),
    "cxlt_runtime_open_config": (_rc, [c_void, P(c_void)]),
    "cxlt_runtime_close": (None, [c_void]),
    "cxlt_runtime_close_ex": (_rc, [c_void]),
    "cxlt_block_admit": (_rc, [c_void, KeyStruct, P(BlockStruct)]),
    "cxlt_block_admit_ex": (_rc, [c_void, KeyStruct, ctypes.c_uint, P(BlockStruct), P(ctypes.c_int)]),
    "cxlt_block_access": (_rc, [c_void, c_void, c_void, c_size]),
    "cxlt_block_access_handles": (_rc, [c_void, c_void, c_void, c_size]),
    "cxlt_block_lookup": (_rc, [c_void, KeyStruct, P(BlockStruct)]),
    "cxlt_block_move": (_rc, [c_void, KeyStruct, ctypes.c_int, ctypes.c_uint, P(BlockStruct)]),
    "cxlt_block_pin": (_rc, [c_void, KeyStruct, P(BlockStruct)]),
    "cxlt_block_unpin": (_rc, [c_void, KeyStruct]),
    "cxlt_block_release": (_rc, [c_void, KeyStruct, ctypes.c_int]),
    "cxlt_block_admit_batch": (_rc, [c_void, c_void, c_size, ctypes.c_uint, c_void, c_void]),
    "cxlt_prefix_lookup": (_rc, [c_void, c_void, c_size, ctypes.c_uint, P(c_size), c_void]),
    "cxlt_block_release_batch": (_rc, [c_void, c_void, c_size, ctypes.c_int]),
    "cxlt_block_unpin_batch": (_rc, [c_void, c_void, c_size]),
    "cxlt_runtime_policy_state": (_rc, [c_void, KeyStruct, P(PolicyStateStruct)]),
    "cxlt_runtime_step": (_rc, [c_void]),
    "cxlt_runtime_current_step": (_rc, [c_void, P(c_u64)]),
    "cxlt_runtime_wait_idle": (_rc, [c_void, ctypes.c_int64]),
    "cxlt_runtime_checkpoint": (_rc, [c_void]),
    "cxlt_runtime_tier_count": (_rc, [c_void, P(c_size)]),
    "cxlt_runtime_tier_info": (_rc, [c_void, c_size, P(TierInfoStruct)]),
    "cxlt_stats_json": (_rc, [c_void, ctypes.c_char_p, c_size, P(c_size)]),
    "cxlt_gpu_count": (_rc, [P(ctypes.c_int)]),
    "cxlt_gpu_info": (_rc, [ctypes.c_int, P(GpuInfoStruct)]),
}

_lib: Optional[ctypes.CDLL] = None
_lock = threading.Lock()


def library() -> ctypes.CDLL:
    """The loaded libcxltier, declared on first use (thread-safe)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            path = os.environ.get("CXLTIER_LIBRARY") or "libcxltier.so.0"
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                raise ImportError(f"cxltier: cannot load the C library {path!r} ({e}); set CXLTIER_LIBRARY "
                                  "to the path of libcxltier.so.0 or put its folder in LD_LIBRARY_PATH") from e
            for name, (res, args) in _SIGNATURES.items():
                fn = getattr(lib, name)
                fn.restype = res
                fn.argtypes = args
            _lib = lib
    return _lib


def has(name: str) -> bool:
    """Whether the loaded library exports `name` (batch calls added by later versions)."""
    return hasattr(library(), name)
