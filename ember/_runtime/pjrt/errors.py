"""PjrtError, the one exception of the binding, and the names of the PJRT_Error_Code values it reports.

A plugin reports a failure as a PJRT_Error with a code and a message; Plugin.error (in plugin.py) turns it into
a PjrtError that names the failing call and the code. A misuse of the binding (a deleted buffer, a closed
client) raises a PjrtError too, with neither."""
from __future__ import annotations


class PjrtError(RuntimeError):
    """An error reported by a PJRT plugin, or a misuse of this binding (a deleted buffer, a closed client).

    `call` is the PJRT function that failed (e.g. "PJRT_Client_Compile") and `code` its PJRT_Error_Code name,
    when the plugin reported the error."""

    def __init__(self, message: str, call: str | None = None, code: str | None = None):
        super().__init__(message)
        self.call = call
        self.code = code


class PjrtOutOfMemoryError(PjrtError, MemoryError):
    """The plugin could not allocate memory (PJRT code RESOURCE_EXHAUSTED): both a PjrtError and a MemoryError."""


def is_out_of_memory(message: str, code: str) -> bool:
    """Whether a plugin's error is a failed allocation: code RESOURCE_EXHAUSTED, or (the CPU plugin's allocations
    deferred to when a program starts, reported by its outputs' events as INTERNAL) XLA's message for one."""
    return code == "RESOURCE_EXHAUSTED" or "Out of memory allocating" in message


def error_for(message: str, call: str, code: str) -> PjrtError:
    """The exception for an error a plugin reported: out of memory becomes a PjrtOutOfMemoryError."""
    if is_out_of_memory(message, code):
        return PjrtOutOfMemoryError(f"out of memory: {message}", call=call, code=code)
    return PjrtError(message, call=call, code=code)


# enum PJRT_Error_Code
_ERROR_CODE_NAMES = (
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
    "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
    "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
)
