"""Loading libvkfuse and the ctypes prototypes of its C API.

Every C function the package calls is declared here, once, with its
argument and result types, so that ctypes converts and checks arguments
(a wrong type is a Python TypeError, never a bad pointer). The library is
loaded as a ``ctypes.CDLL``: ctypes releases the GIL around every call into
it, so other Python threads run while vkfuse waits for the device
(``vf_tensor_read``, ``vf_context_sync``) or computes on the CPU backend.

Search order for the shared library (the first that loads wins):

1. ``$VKFUSE_LIBRARY``: a path to ``libvkfuse.so`` (an error if it does not
   load: an explicit choice is never silently replaced);
2. in a source checkout (this package in ``<repo>/python/vkfuse``): the
   build tree, ``build/release`` then ``build/dev``;
3. next to the installed package: ``<prefix>/lib`` (and
   ``<prefix>/lib/<multiarch>``) above the site-packages directory this
   package was installed into (``cmake --install`` puts both there);
4. the system's loader (``libvkfuse.so.0`` from ``ld.so``'s paths).
"""
from __future__ import annotations

import ctypes
import os
import sys
from ctypes import (POINTER, c_bool, c_char_p, c_double, c_int, c_int64,
                    c_size_t, c_uint32, c_uint64, c_void_p)
from pathlib import Path
from typing import List, Optional

_NAMES = ("libvkfuse.so.0", "libvkfuse.so")


def _candidates() -> List[Path]:
    here = Path(__file__).resolve().parent
    out: List[Path] = []
    repo = here.parent.parent
    if (repo / "include" / "vkfuse.h").is_file():
        for preset in ("release", "dev"):
            out += [repo / "build" / preset / n for n in _NAMES]
    # <prefix>/lib/python3/dist-packages/vkfuse or
    # <prefix>/lib/python3.X/site-packages/vkfuse: the library is in
    # <prefix>/lib or <prefix>/lib/<multiarch>.
    for parent in here.parents:
        if parent.name == "lib":
            multiarch = getattr(sys.implementation, "_multiarch", "")
            dirs = [parent] + ([parent / multiarch] if multiarch else [])
            out += [d / n for d in dirs for n in _NAMES]
            break
    return out


def _load() -> ctypes.CDLL:
    env = os.environ.get("VKFUSE_LIBRARY")
    if env:
        try:
            return ctypes.CDLL(env)
        except OSError as e:
            raise ImportError(f"vkfuse: VKFUSE_LIBRARY={env!r} does not load ({e}); point it at "
                              "libvkfuse.so (build/release/libvkfuse.so after the README's build) "
                              "or unset it") from None
    tried = []
    for p in _candidates():
        if p.is_file():
            try:
                return ctypes.CDLL(str(p))
            except OSError as e:
                tried.append(f"{p}: {e}")
    for n in _NAMES:
        try:
            return ctypes.CDLL(n)
        except OSError as e:
            tried.append(f"{n}: {e}")
    raise ImportError("vkfuse: libvkfuse.so not found (tried " + "; ".join(tried) + "). Build it "
                      "(cmake --preset release && cmake --build --preset release), install it "
                      "(cmake --install build/release), or set VKFUSE_LIBRARY to its path")


lib = _load()
path = getattr(lib, "_name", "")

_P = c_void_p  # every opaque handle (vf_context*, vf_tensor*, vf_tape*, ...)
_T = c_void_p


class ContextDesc(ctypes.Structure):
    _fields_ = [("backend", c_int), ("device_index", c_int), ("validation", c_bool),
                ("profile", c_bool), ("cache_dir", c_char_p), ("pick_device", c_bool),
                ("device_memory_limit", c_int64), ("eager_fuse_off", c_bool)]


class ContextStats(ctypes.Structure):
    _fields_ = [("shader_compiles", c_int64), ("shader_memory_hits", c_int64),
                ("shader_disk_hits", c_int64), ("submits", c_int64), ("dispatches", c_int64),
                ("barriers", c_int64), ("device_bytes_in_use", c_int64),
                ("shader_compile_ms", c_double), ("pipelines_created", c_int64),
                ("pipeline_create_ms", c_double), ("device_bytes_cached", c_int64),
                ("device_bytes_reserved", c_int64), ("device_bytes_peak", c_int64),
                ("device_allocations", c_int64), ("device_alloc_retries", c_int64),
                ("eager_fuse_swaps", c_int64), ("eager_fused_windows", c_int64),
                ("eager_fused_ops", c_int64), ("device_memory_budget", c_int64),
                ("device_memory_budget_usage", c_int64), ("tier_quick_kernels", c_int64),
                ("tier_swaps", c_int64)]


class DeviceInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 256), ("vendor_id", c_uint32), ("device_id", c_uint32),
                ("driver_version", c_uint32), ("api_version", c_uint32),
                ("vendor", ctypes.c_char * 32), ("type", ctypes.c_char * 16),
                ("driver", ctypes.c_char * 256), ("subgroup_size", c_uint32),
                ("subgroup_arithmetic", c_bool), ("shared_memory_bytes", c_uint32),
                ("max_storage_buffer_range", c_uint64), ("fp16", c_bool), ("storage16", c_bool),
                ("chosen", c_bool), ("memory_heap_bytes", c_uint64),
                ("memory_budget_bytes", c_uint64)]


class Conv2dDesc(ctypes.Structure):
    _fields_ = [("strides", c_int * 2), ("dilations", c_int * 2), ("padding", c_int),
                ("pads", c_int * 4), ("groups", c_int)]


class Pool2dDesc(ctypes.Structure):
    _fields_ = [("window", c_int * 2), ("strides", c_int * 2), ("padding", c_int)]


I64P = POINTER(c_int64)
INTP = POINTER(c_int)

_PROTOS = {
    # context
    "vf_context_create": (c_int, [POINTER(ContextDesc), POINTER(c_void_p)]),
    "vf_context_destroy": (None, [_P]),
    "vf_status_get": (c_int, [_P]),
    "vf_context_lost": (c_bool, [_P]),
    "vf_error_message": (c_char_p, [_P]),
    "vf_error_clear": (None, [_P]),
    "vf_device_name": (c_char_p, [_P]),
    "vf_backend_get": (c_int, [_P]),
    "vf_status_name": (c_char_p, [c_int]),
    "vf_context_sync": (c_int, [_P]),
    "vf_context_stats_get": (c_int, [_P, POINTER(ContextStats)]),
    "vf_context_trim": (c_int, [_P]),
    "vf_devices": (c_int, [POINTER(DeviceInfo), c_int, c_char_p, c_size_t]),
    "vf_auto_backend": (c_int, [INTP, c_char_p, c_size_t]),
    # tensors
    "vf_scope_begin": (None, [_P]),
    "vf_scope_end": (None, [_P]),
    "vf_tensor_retain": (_T, [_T]),
    "vf_tensor_release": (None, [_T]),
    "vf_tensor_from_host": (_T, [_P, c_int, c_int, I64P, c_void_p]),
    "vf_fill": (_T, [_P, c_int, c_int, I64P, c_double]),
    "vf_random_normal": (_T, [_P, c_int, c_int, I64P, c_uint64]),
    "vf_generator_create": (_P, [_P, c_uint64]),
    "vf_generator_destroy": (None, [_P]),
    "vf_generator_uniform": (_T, [_P, _P, c_int, c_int, I64P]),
    "vf_generator_normal": (_T, [_P, _P, c_int, c_int, I64P]),
    "vf_dropout": (_T, [_P, _P, _T, c_double]),
    "vf_tensor_read": (c_int, [_T, c_void_p, c_size_t]),
    "vf_tensor_dtype": (c_int, [_T]),
    "vf_tensor_rank": (c_int, [_T]),
    "vf_tensor_dim": (c_int64, [_T, c_int]),
    "vf_tensor_numel": (c_int64, [_T]),
    "vf_tensor_bytes": (c_size_t, [_T]),
    "vf_tensor_context": (_P, [_T]),
    "vf_tensor_copy_to": (_T, [_P, _T]),
    # ops
    "vf_where": (_T, [_P, _T, _T, _T]),
    "vf_leaky_relu": (_T, [_P, _T, c_double]),
    "vf_clip": (_T, [_P, _T, c_double, c_double]),
    "vf_cast": (_T, [_P, _T, c_int]),
    "vf_argmax": (_T, [_P, _T, c_int]),
    "vf_matmul_ex": (_T, [_P, _T, _T, c_bool, c_bool]),
    "vf_softmax": (_T, [_P, _T, c_int]),
    "vf_log_softmax": (_T, [_P, _T, c_int]),
    "vf_sparse_softmax_cross_entropy": (_T, [_P, _T, _T]),
    "vf_norm": (_T, [_P, _T]),
    "vf_reshape": (_T, [_P, _T, c_int, I64P]),
    "vf_transpose": (_T, [_P, _T, INTP]),
    "vf_slice": (_T, [_P, _T, I64P, I64P, I64P]),
    "vf_concat": (_T, [_P, c_int, POINTER(c_void_p), c_int]),
    "vf_stack": (_T, [_P, c_int, POINTER(c_void_p), c_int]),
    "vf_split": (c_int, [_P, _T, c_int, I64P, c_int, POINTER(c_void_p)]),
    "vf_pad": (_T, [_P, _T, I64P, I64P, c_double]),
    "vf_tile": (_T, [_P, _T, I64P]),
    "vf_broadcast_to": (_T, [_P, _T, c_int, I64P]),
    "vf_expand_dims": (_T, [_P, _T, c_int]),
    "vf_squeeze": (_T, [_P, _T, c_int, INTP]),
    "vf_gather": (_T, [_P, _T, _T, c_int]),
    "vf_scatter_add": (_T, [_P, _T, _T, _T, c_int]),
    "vf_one_hot": (_T, [_P, _T, c_int64, c_int]),
    "vf_range": (_T, [_P, c_int, c_double, c_double, c_double]),
    "vf_cumsum": (_T, [_P, _T, c_int, c_bool, c_bool]),
    "vf_top_k": (_T, [_P, _T, c_int, POINTER(c_void_p)]),
    "vf_conv2d": (_T, [_P, _T, _T, POINTER(Conv2dDesc)]),
    "vf_max_pool2d": (_T, [_P, _T, POINTER(Pool2dDesc)]),
    "vf_avg_pool2d": (_T, [_P, _T, POINTER(Pool2dDesc)]),
    # variables
    "vf_variable": (_T, [_P, _T]),
    "vf_tensor_is_variable": (c_bool, [_T]),
    "vf_assign": (c_int, [_T, _T]),
    "vf_assign_add": (c_int, [_T, _T]),
    "vf_assign_sub": (c_int, [_T, _T]),
    # tapes
    "vf_tape_begin": (_P, [_P]),
    "vf_tape_gradient": (c_int, [_P, _T, c_int, POINTER(c_void_p), POINTER(c_void_p)]),
    "vf_tape_gradient_ex": (c_int, [_P, _T, c_int, POINTER(c_void_p), POINTER(c_void_p), ctypes.c_uint]),
    "vf_tape_end": (None, [_P]),
    "vf_print": (c_int, [_P, c_char_p, _T]),
}

BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "greater", "greater_equal",
          "less", "less_equal", "equal", "not_equal", "mod", "logical_and", "logical_or")
UNARY = ("neg", "exp", "log", "sqrt", "rsqrt", "abs", "tanh", "sigmoid", "relu", "gelu", "sin",
         "cos", "square", "sign", "floor", "ceil", "round", "logical_not", "erf", "log1p", "expm1",
         "softplus", "stop_gradient")
REDUCE = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_any",
          "reduce_all", "logsumexp")
for _n in BINARY:
    _PROTOS["vf_" + _n] = (_T, [_P, _T, _T])
for _n in UNARY:
    _PROTOS["vf_" + _n] = (_T, [_P, _T])
for _n in REDUCE:
    _PROTOS["vf_" + _n] = (_T, [_P, _T, c_int, INTP, c_bool])

for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

# Strings the library returns malloc'd (vf_function_graph_text, ...) are
# freed by this one helper, so that it can switch to the library's own
# deallocator where the library has one.
try:
    _free = lib.vf_free
except AttributeError:
    _free = ctypes.CDLL(None).free
_free.restype = None
_free.argtypes = [c_void_p]


def free(p: Optional[int]) -> None:
    """Frees memory the library returned for the caller to free."""
    if p:
        _free(p)


def version() -> str:
    """The library's version string (vf_version where the library has it)."""
    f = getattr(lib, "vf_version", None)
    if f is not None:
        f.restype = c_char_p
        f.argtypes = []
        return f().decode()
    return "0.1.0"
