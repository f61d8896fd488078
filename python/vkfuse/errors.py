"""Exceptions named as TensorFlow's (``tf.errors``), carrying vkfuse's message.

Every failed call of the C library records a status and a message saying
what was wrong, where and how to fix it; the package raises the class
below that matches the status, with that message. ``status`` holds the C
status name (``"VF_ERROR_SHAPE"``, ...).
"""
from __future__ import annotations

from typing import Dict, Optional, Type


class OpError(Exception):
    """The base of every error the library reports (tf.errors.OpError)."""

    def __init__(self, node_def: object = None, op: object = None, message: str = "",
                 status: str = "", *args: object) -> None:
        # TF's signature is (node_def, op, message, ...): keep it, so that
        # code constructing TF errors works; OpError("text") is accepted too.
        if op is None and not message and isinstance(node_def, str):
            message, node_def = node_def, None
        super().__init__(message)
        self.node_def = node_def
        self.op = op
        self.message = message
        self.status = status

    def __str__(self) -> str:
        return self.message


class CancelledError(OpError): pass
class UnknownError(OpError): pass
class InvalidArgumentError(OpError, ValueError): pass
class DeadlineExceededError(OpError): pass
class NotFoundError(OpError): pass
class AlreadyExistsError(OpError): pass
class PermissionDeniedError(OpError): pass
class ResourceExhaustedError(OpError): pass
class FailedPreconditionError(OpError): pass
class AbortedError(OpError): pass
class OutOfRangeError(OpError): pass
class UnimplementedError(OpError): pass
class InternalError(OpError): pass
class UnavailableError(OpError): pass
class DataLossError(OpError): pass
class UnauthenticatedError(OpError): pass

# vf_status values (include/vkfuse.h) -> class. SHAPE and DTYPE are
# InvalidArgumentError as in TF's eager mode; a lost device, a compile or
# validation failure are InternalError; an I/O failure NotFoundError (TF's
# class for a file that cannot be opened); a bad saved file DataLossError.
_BY_STATUS: Dict[int, Type[OpError]] = {
    1: InvalidArgumentError, 2: InvalidArgumentError, 3: InvalidArgumentError,
    4: ResourceExhaustedError, 5: InternalError, 6: UnimplementedError, 7: InternalError,
    8: FailedPreconditionError, 9: NotFoundError, 10: DataLossError,
}
_NAMES = ("VF_OK", "VF_ERROR_INVALID_ARGUMENT", "VF_ERROR_SHAPE", "VF_ERROR_DTYPE",
          "VF_ERROR_OUT_OF_MEMORY", "VF_ERROR_DEVICE", "VF_ERROR_UNSUPPORTED", "VF_ERROR_COMPILE",
          "VF_ERROR_TRACE", "VF_ERROR_IO", "VF_ERROR_FORMAT")


def from_status(status: int, message: str) -> OpError:
    """The exception for a C status and its message."""
    cls = _BY_STATUS.get(status, UnknownError)
    name = _NAMES[status] if 0 <= status < len(_NAMES) else f"status {status}"
    return cls(None, None, message or f"{name} (no message)", name)


def invalid(message: str, status: Optional[str] = "VF_ERROR_INVALID_ARGUMENT") -> InvalidArgumentError:
    """An InvalidArgumentError raised by the Python layer itself."""
    return InvalidArgumentError(None, None, message, status or "")
