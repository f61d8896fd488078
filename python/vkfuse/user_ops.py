"""Your own elementwise ops from Python: ``vkfuse.elementwise``.

A GLSL expression runs on Vulkan (and fuses with the ops around it in a
traced function); a Python / NumPy callable computing the same runs on the
CPU backend (and for constant folding and VKFUSE_CHECK). The library calls
the callable through a ctypes callback, which takes the GIL for it; an
exception it raises is re-raised by the op's call that ran it (the
elements it should have written are NaN).
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable, List, Optional, Sequence

import numpy as np

from . import _context, _lib, dtypes, errors
from ._core import same_context
from ._core import tensor as _t
from .tensor import Tensor, wrap

_L = _lib.lib
_FLOATP = ctypes.POINTER(ctypes.c_float)
ElementwiseFn = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.POINTER(_FLOATP), _FLOATP, ctypes.c_void_p)
_MAX = 3


class _ElementwiseDesc(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("n_inputs", ctypes.c_int), ("dtypes", ctypes.c_uint32),
                ("expr", ctypes.c_char_p), ("helpers", ctypes.c_char_p), ("cpu", ElementwiseFn),
                ("grad_expr", ctypes.c_char_p * _MAX), ("grad_cpu", ElementwiseFn * _MAX),
                ("user", ctypes.c_void_p)]


_L.vf_elementwise_create.restype = ctypes.c_void_p
_L.vf_elementwise_create.argtypes = [ctypes.c_void_p, ctypes.POINTER(_ElementwiseDesc)]
_L.vf_elementwise_call.restype = ctypes.c_void_p
_L.vf_elementwise_call.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
_L.vf_elementwise_destroy.restype = None
_L.vf_elementwise_destroy.argtypes = [ctypes.c_void_p]


class ElementwiseOp:
    """An elementwise op made by ``vkfuse.elementwise``; call it on tensors."""

    def __init__(self, name: str, n_inputs: int, expr: str, fn: Callable[..., Any],
                 grad: Optional[Sequence[Any]], helpers: Optional[str], float16: bool,
                 ctx: "_context.Context") -> None:
        self.name = name
        self.n_inputs = n_inputs
        self._ctx = ctx
        self._error: Optional[BaseException] = None
        self._h = None
        d = _ElementwiseDesc()
        d.name = name.encode()
        d.n_inputs = n_inputs
        d.dtypes = (1 << dtypes.VF_F32) | ((1 << dtypes.VF_F16) if float16 else 0)
        d.expr = expr.encode()
        d.helpers = helpers.encode() if helpers else None
        self._cbs: List[Any] = [self._callback(fn, n_inputs)]
        d.cpu = self._cbs[0]
        if grad is not None:
            grad = list(grad)
            if len(grad) != n_inputs:
                raise ValueError(f"vkfuse.elementwise: grad needs one (expr, fn) per input ({n_inputs})")
            for i, (gexpr, gfn) in enumerate(grad):
                d.grad_expr[i] = gexpr.encode()
                cb = self._callback(gfn, n_inputs + 1)
                self._cbs.append(cb)
                d.grad_cpu[i] = cb
        # The library keeps calling these from tapes and traced functions
        # that use the op after it is dropped: they live as long as the context.
        ctx.__dict__.setdefault("_callbacks", []).extend(self._cbs)
        h = _L.vf_elementwise_create(ctx.handle, ctypes.byref(d))
        if not h:
            ctx.raise_error()
        self._h = h

    def _callback(self, fn: Callable[..., Any], n_in: int) -> Any:
        def run(n: int, ins: Any, out: Any, user: Any) -> None:
            o = np.ctypeslib.as_array(out, shape=(n,)) if n else np.empty(0, np.float32)
            try:
                args = [np.ctypeslib.as_array(ins[i], shape=(n,)) if n else np.empty(0, np.float32)
                        for i in range(n_in)]
                o[...] = np.broadcast_to(np.asarray(fn(*args), np.float32), (n,))
            except BaseException as e:  # noqa: BLE001 (re-raised by __call__)
                if self._error is None:
                    self._error = e
                o[...] = np.nan
        return ElementwiseFn(run)

    def __call__(self, *inputs: Any) -> Tensor:
        if len(inputs) != self.n_inputs:
            raise TypeError(f"vkfuse elementwise op '{self.name}' takes {self.n_inputs} inputs, got {len(inputs)}")
        if self._h is None:
            raise errors.FailedPreconditionError(None, None, f"elementwise op '{self.name}' was destroyed",
                                                 "VF_ERROR_INVALID_ARGUMENT")
        first = next((x for x in inputs if isinstance(x, Tensor)), None)
        ts = [_t(x, self._ctx, first.dtype if first is not None else dtypes.float32) for x in inputs]
        ctx = same_context(self.name, *ts)
        if ctx is not self._ctx:
            raise errors.invalid(f"elementwise op '{self.name}' belongs to another context than its inputs")
        arr = (ctypes.c_void_p * len(ts))(*[t._h for t in ts])
        self._error = None
        r = _L.vf_elementwise_call(self._h, len(ts), arr)
        err, self._error = self._error, None
        if err is not None:
            if r:
                _L.vf_tensor_release(r)
            raise err
        return wrap(ctx, r)

    def __del__(self) -> None:
        h, self._h = getattr(self, "_h", None), None
        if h:
            _L.vf_elementwise_destroy(h)


def elementwise(expr: str, fn: Callable[..., Any], grad: Optional[Sequence[Any]] = None,
                name: str = "user_elementwise", n_inputs: Optional[int] = None,
                helpers: Optional[str] = None, float16: bool = False) -> ElementwiseOp:
    """An elementwise op: ``expr`` a GLSL float expression over x0, x1, x2; ``fn`` the same in
    NumPy (called with float32 arrays); ``grad`` per input an (expr, fn) pair for dy/dx_i over
    x0.. and y (fn gets the inputs then y)."""
    if n_inputs is None:
        n_inputs = 1 + max((i for i in range(_MAX) if f"x{i}" in expr), default=0)
    return ElementwiseOp(name, int(n_inputs), expr, fn, grad, helpers, float16, _context.context())
