"""vkfuse.profile(fn, *args): one traced call's per-kernel report as data,
over the C profile API (include/vkfuse_profile.h, docs/PROFILING.md), and
a Perfetto / Chrome trace file of it when asked.

Profiling is a context option (``vkfuse.Context(profile=True)`` or
``VKFUSE_PROFILE=1``): with it on every traced call waits for its work and
times its kernels, so it is not switched on behind the user's back; a
context without it is an error that says how to turn it on.
"""
from __future__ import annotations

import ctypes
from ctypes import POINTER, Structure, c_bool, c_char_p, c_int, c_int64, c_uint64, c_void_p
from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple

from . import _context, errors
from ._lib import lib as L


class _KernelC(Structure):
    _fields_ = [("name", c_char_p), ("dispatches", c_int), ("barriers", c_int), ("gpu_ns", c_uint64),
                ("start_ns", c_uint64), ("bytes_read", c_int64), ("bytes_written", c_int64),
                ("n_nodes", c_int), ("nodes", POINTER(c_int)), ("node_ops", POINTER(c_char_p))]


class _ProfileC(Structure):
    _fields_ = [("profiled", c_bool), ("planned", c_bool), ("timestamps", c_bool), ("note", c_char_p),
                ("n_kernels", c_int), ("kernels", POINTER(_KernelC)), ("dispatches", c_int),
                ("barriers", c_int), ("gpu_ns", c_uint64), ("wall_ns", c_uint64), ("start_ns", c_uint64),
                ("bytes_read", c_int64), ("bytes_written", c_int64), ("peak_bytes", c_int64),
                ("call", c_int64)]


for _n, _r, _a in (("vf_function_profile_get", c_int, [c_void_p, POINTER(_ProfileC)]),
                   ("vf_context_profiling", c_bool, [c_void_p]),
                   ("vf_trace_file_create", c_void_p, []),
                   ("vf_trace_file_add", c_int, [c_void_p, c_char_p, POINTER(_ProfileC)]),
                   ("vf_trace_file_write", c_int, [c_void_p, c_char_p]),
                   ("vf_trace_file_error", c_char_p, [c_void_p]),
                   ("vf_trace_file_destroy", None, [c_void_p])):
    getattr(L, _n).restype = _r
    getattr(L, _n).argtypes = _a


@dataclass(frozen=True)
class KernelProfile:
    """One kernel of the call (a fused group is one kernel)."""
    name: str
    dispatches: int
    barriers: int
    gpu_ns: int          # 0 without timestamps
    start_ns: int        # after the call's first dispatch
    bytes_read: int
    bytes_written: int
    nodes: Tuple[int, ...]      # graph node ids, as graph_text() numbers them
    node_ops: Tuple[str, ...]   # their op names


@dataclass(frozen=True)
class Profile:
    """The profiled call: ``result`` is what fn returned, ``kernels`` in execution order."""
    result: Any
    planned: bool        # ran a recorded plan (Vulkan): kernels are listed
    timestamps: bool     # gpu_ns values are measured
    note: str            # "" or what is missing and why
    kernels: List[KernelProfile] = field(default_factory=list)
    dispatches: int = 0
    barriers: int = 0
    gpu_ns: int = 0
    wall_ns: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    peak_bytes: int = 0
    call: int = 0
    trace_path: Optional[str] = None


def _kernel(k: _KernelC) -> KernelProfile:
    n = k.n_nodes
    return KernelProfile((k.name or b"").decode(errors="replace"), k.dispatches, k.barriers, k.gpu_ns,
                         k.start_ns, k.bytes_read, k.bytes_written,
                         tuple(k.nodes[i] for i in range(n)),
                         tuple((k.node_ops[i] or b"").decode(errors="replace") for i in range(n)))


def _write_trace(p: _ProfileC, path: str, track: str) -> None:
    t = L.vf_trace_file_create()
    if not t:
        raise errors.ResourceExhaustedError(None, None, "vkfuse.profile: out of host memory for the trace file",
                                            "VF_ERROR_OUT_OF_MEMORY")
    try:
        if L.vf_trace_file_add(t, track.encode(), ctypes.byref(p)) != 0 or \
                L.vf_trace_file_write(t, str(path).encode()) != 0:
            why = (L.vf_trace_file_error(t) or b"").decode(errors="replace")
            raise OSError(f"vkfuse.profile: cannot write the trace file {path!r}: {why}")
    finally:
        L.vf_trace_file_destroy(t)


def profile(fn: Any, *args: Any, trace: Optional[str] = None, **kwargs: Any) -> Profile:
    """Calls ``fn(*args, **kwargs)`` (a ``vkfuse.function``, or a plain callable,
    which is traced as one) once and returns its :class:`Profile`; with
    ``trace=path`` also writes the call as a Perfetto / Chrome trace (JSON).
    The first call of a signature traces and plans too; profile a later
    call to see the steady state."""
    from .function import Function, function
    ctx = _context.context()
    if not L.vf_context_profiling(ctx.handle):
        raise errors.FailedPreconditionError(
            None, None, "vkfuse.profile: the current context does not profile; run it in "
            "`with vkfuse.Context(profile=True):` or set VKFUSE_PROFILE=1 before the first context",
            "VF_ERROR_INVALID_ARGUMENT")
    f = fn if isinstance(fn, Function) else function(fn)
    result = f(*args, **kwargs)
    entry = f._entries.get(f._last_key)
    p = _ProfileC()
    if entry is None or L.vf_function_profile_get(entry.handle, ctypes.byref(p)) != 0:
        ctx.raise_error()
    if not p.profiled:
        raise errors.FailedPreconditionError(None, None, "vkfuse.profile: the call was not profiled (the library "
                                             "recorded no profile for it)", "VF_ERROR_INVALID_ARGUMENT")
    kernels = [_kernel(p.kernels[i]) for i in range(p.n_kernels)]
    if trace is not None:
        _write_trace(p, trace, f.__name__)
    return Profile(result, p.planned, p.timestamps, (p.note or b"").decode(errors="replace"), kernels,
                   p.dispatches, p.barriers, p.gpu_ns, p.wall_ns, p.bytes_read, p.bytes_written, p.peak_bytes,
                   p.call, str(trace) if trace is not None else None)
