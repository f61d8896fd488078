"""ctypes declarations of the C API's traced functions and control flow
(vf_function_*, vf_cond, vf_while_loop, vf_print), used by function.py,
graph_control.py and saved_model.py. Kept apart from _lib.py's table so
that tracing stays one module's business."""
from __future__ import annotations

import ctypes
from ctypes import CFUNCTYPE, POINTER, Structure, c_bool, c_char_p, c_int, c_int64, c_void_p

from . import _lib

L = _lib.lib
MAX_RANK = 8
MAX_OUTPUTS = 64  # VF_FUNCTION_MAX_OUTPUTS
VF_ERROR_INVALID_ARGUMENT = 1

# vf_status (*vf_body)(vf_context *, vf_tensor *const *in, vf_tensor **out, void *user)
BODY = CFUNCTYPE(c_int, c_void_p, POINTER(c_void_p), POINTER(c_void_p), c_void_p)


class TensorSpecC(Structure):
    _fields_ = [("dtype", c_int), ("rank", c_int), ("shape", c_int64 * MAX_RANK)]


class FunctionDesc(Structure):
    _fields_ = [("name", c_char_p), ("body", BODY), ("user", c_void_p), ("n_inputs", c_int),
                ("n_outputs", c_int), ("input_signature", POINTER(TensorSpecC)), ("unfused", c_bool)]


class FunctionStats(Structure):
    _fields_ = [("traces", c_int), ("calls", c_int64), ("kernels", c_int), ("dispatches_per_call", c_int),
                ("peak_bytes", c_int64), ("unplanned_bytes", c_int64), ("retraces", c_int), ("eager", c_bool),
                ("planned", c_bool), ("submits_per_call", c_int), ("barriers_per_call", c_int),
                ("plans", c_int), ("arena_bytes", c_int64)]


_P = c_void_p
_PROTOS = {
    "vf_function_create": (_P, [_P, POINTER(FunctionDesc)]),
    "vf_function_call": (c_int, [_P, POINTER(c_void_p), POINTER(c_void_p)]),
    "vf_function_stats_get": (c_int, [_P, POINTER(FunctionStats)]),
    "vf_function_retrace_reason": (c_char_p, [_P]),
    "vf_function_graph_text": (c_void_p, [_P]),
    "vf_function_destroy": (None, [_P]),
    "vf_function_save": (c_int, [_P, c_char_p]),
    "vf_function_load": (c_int, [_P, c_char_p, POINTER(c_void_p)]),
    "vf_function_io_count": (c_int, [_P, POINTER(c_int), POINTER(c_int)]),
    "vf_function_variable_count": (c_int, [_P]),
    "vf_function_variable": (_P, [_P, c_int]),
    "vf_context_tracing": (c_bool, [_P]),
    "vf_cond": (c_int, [_P, _P, BODY, BODY, c_int, POINTER(c_void_p), c_int, POINTER(c_void_p), _P]),
    "vf_while_loop": (c_int, [_P, BODY, BODY, c_int, POINTER(c_void_p), c_int, _P]),
    "vf_print": (c_int, [_P, c_char_p, _P]),
    "vf_tensor_retain": (_P, [_P]),
    "vf_tensor_symbolic_dims": (ctypes.c_uint32, [_P]),
    "vf_gather": (_P, [_P, _P, _P, c_int]),
}
for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(L, _name)
    _f.restype = _res
    _f.argtypes = _args


def handles(n):
    """A C array of n vf_tensor* (at least one element)."""
    return (c_void_p * max(n, 1))()


def graph_text(fn_handle):
    p = L.vf_function_graph_text(fn_handle)
    if not p:
        return None
    try:
        return ctypes.string_at(p).decode(errors="replace")
    finally:
        _lib.free(p)


def io_count(handle) -> "tuple[int, int]":
    """A function's input and output counts (-1 outputs before the first
    trace of a function whose first trace decides them)."""
    n_in, n_out = ctypes.c_int(-1), ctypes.c_int(-1)
    L.vf_function_io_count(handle, ctypes.byref(n_in), ctypes.byref(n_out))
    return n_in.value, n_out.value
