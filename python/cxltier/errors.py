# SPDX-License-Identifier: Apache-2.0
"""One exception class per cxlt_result_t, all under cxltier.Error."""
from typing import Dict, Type


class Error(Exception):
    """A failed cxltier call: `code` is the cxlt_result_t, `message` cxlt_last_error()'s text."""

    code = -1
    c_name = ""

    def __init__(self, message: str = "", code=None):
        if code is not None:
            self.code = code
        self.message = message
        super().__init__(f"{self.c_name or 'cxltier error ' + str(self.code)}: {message}" if message
                         else (self.c_name or f"cxltier error {self.code}"))


def _define(name: str, code: int, c_name: str, doc: str) -> Type[Error]:
    return type(name, (Error,), {"code": code, "c_name": c_name, "__doc__": doc, "__module__": "cxltier"})


InvalidArgumentError = _define("InvalidArgumentError", 1, "CXLT_ERROR_INVALID_ARGUMENT",
                               "A NULL pointer, a value out of range, a misused API.")
OutOfHostMemoryError = _define("OutOfHostMemoryError", 2, "CXLT_ERROR_OUT_OF_HOST_MEMORY",
                               "The process could not allocate its own metadata.")
OutOfTierMemoryError = _define("OutOfTierMemoryError", 3, "CXLT_ERROR_OUT_OF_TIER_MEMORY",
                               "No tier has room and nothing can be demoted.")
NotFoundError = _define("NotFoundError", 4, "CXLT_ERROR_NOT_FOUND",
                        "An unknown key or handle, or a block resident nowhere.")
NotSupportedError = _define("NotSupportedError", 5, "CXLT_ERROR_NOT_SUPPORTED",
                            "The build or the machine lacks the feature.")
BackendError = _define("BackendError", 6, "CXLT_ERROR_BACKEND",
                       "A tier backend failed (allocation, placement, copy).")
IoError = _define("IoError", 7, "CXLT_ERROR_IO", "A file could not be read or written.")
CorruptError = _define("CorruptError", 8, "CXLT_ERROR_CORRUPT", "A file is truncated, damaged or foreign.")
BusyError = _define("BusyError", 9, "CXLT_ERROR_BUSY", "The block is pinned or in use.")
ClosedError = _define("ClosedError", 10, "CXLT_ERROR_CLOSED", "The runtime handle is closed or was never opened.")
ConfigError = _define("ConfigError", 11, "CXLT_ERROR_CONFIG",
                      "The configuration is invalid (the message names the field).")
TopologyError = _define("TopologyError", 12, "CXLT_ERROR_TOPOLOGY", "The topology could not be loaded or read.")
TimedOutError = _define("TimedOutError", 13, "CXLT_ERROR_TIMEOUT", "A wait ran past its deadline.")
UnknownError = _define("UnknownError", 0x7FFFFFFE, "CXLT_ERROR_UNKNOWN", "An internal error; please report it.")

ERROR_CLASSES: Dict[int, Type[Error]] = {
    c.code: c for c in (InvalidArgumentError, OutOfHostMemoryError, OutOfTierMemoryError, NotFoundError,
                        NotSupportedError, BackendError, IoError, CorruptError, BusyError, ClosedError,
                        ConfigError, TopologyError, TimedOutError, UnknownError)
}


def error_for(code: int, message: str) -> Error:
    """The exception for result `code` (a code this package does not know becomes a plain Error)."""
    cls = ERROR_CLASSES.get(code)
    return cls(message) if cls is not None else Error(message, code=code)
