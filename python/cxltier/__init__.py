# SPDX-License-Identifier: Apache-2.0
"""cxltier: the memory-tier runtime for LLM KV caches, from Python (ctypes over the C ABI).

    import cxltier
    with cxltier.Runtime("examples/quickstart.toml") as rt:
        b = rt.admit(cxltier.key_from_sequence(9, 0), pin=True)
        b.array("float16")[:] = 0          # the block's KV bytes, zero-copy
        rt.access([b], [0.6]); rt.step(); b.unpin()

docs/python.md describes the whole API. The C library is $CXLTIER_LIBRARY, else libcxltier.so.0.
"""
from .errors import (BackendError, ClosedError, ConfigError, CorruptError, Error, ERROR_CLASSES, InvalidArgumentError,
                     IoError, BusyError, NotFoundError, NotSupportedError, OutOfHostMemoryError, OutOfTierMemoryError,
                     TimedOutError, TopologyError, UnknownError, error_for)
from .runtime import (KEY_DTYPE, ROOT, Block, Config, Key, PolicyState, Runtime, TierInfo, block_bytes, gpus,
                      key_from_sequence, key_from_tokens, keys_array, result_string, version)

__all__ = [
    "Runtime", "Config", "Block", "Key", "ROOT", "KEY_DTYPE", "PolicyState", "TierInfo", "key_from_sequence",
    "key_from_tokens", "keys_array", "block_bytes", "result_string", "version", "gpus", "Error", "ERROR_CLASSES",
    "error_for", "InvalidArgumentError", "OutOfHostMemoryError", "OutOfTierMemoryError", "NotFoundError",
    "NotSupportedError", "BackendError", "IoError", "CorruptError", "BusyError", "ClosedError", "ConfigError",
    "TopologyError", "TimedOutError", "UnknownError",
]
