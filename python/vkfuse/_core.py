"""Shared machinery of the op modules: converting arguments, calling C, axes.

Every op goes through ``unary`` / ``binary`` / ``call``: they convert
Python numbers and NumPy arrays to tensors of the other operand's dtype
(TF's rule for ``x * 2``), check that all tensors belong to one live
context, call the C function and wrap its result, or raise the context's
error as an exception.
"""
from __future__ import annotations

import ctypes
import math
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from . import _context, _lib, dtypes, errors
from . import tensor as _tensor_mod
from .tensor import Tensor, constant, from_numpy, wrap, _np_value

L = _lib.lib
_c_int = ctypes.c_int
_c_i64 = ctypes.c_int64
_SCALARS = (int, float, bool)
_CACHE_MAX = 512


def other_context(op: str) -> errors.InvalidArgumentError:
    return errors.invalid(f"vkfuse.{op}: the inputs belong to different contexts (devices); copy one "
                          "with vkfuse.copy_to(tensor, context) first")


def scalar_like(v: Any, like: Tensor) -> Tensor:
    """A constant of like's dtype and context holding v (cached for Python numbers)."""
    ctx = like._ctx
    vf = L.vf_tensor_dtype(like.handle)
    if type(v) in _SCALARS and v == v:
        key = (vf, type(v), v, math.copysign(1.0, v) if type(v) is float else 0)
        t = ctx._scalars.get(key)
        if t is None:
            t = from_numpy(ctx, _np_value(v, dtypes.BY_VF[vf]))
            if _tensor_mod.active and _tensor_mod.here.body_depth:  # made in a body the library calls: it dies with the body's scope
                return t
            if len(ctx._scalars) >= _CACHE_MAX:
                ctx._scalars.clear()
            ctx._scalars[key] = t
        return t
    return from_numpy(ctx, _np_value(v, dtypes.BY_VF[vf]))


def tensor(x: Any, ctx: Optional["_context.Context"] = None, dtype: Any = None) -> Tensor:
    """x as a tensor (of ctx when given: a tensor of another context is an error)."""
    if isinstance(x, Tensor):
        if ctx is not None and x._ctx is not ctx:
            raise other_context("op")
        return x
    if ctx is None or ctx is _context.context():
        return constant(x, dtype)
    return from_numpy(ctx, _np_value(x, dtypes.as_dtype(dtype) if dtype is not None else None))


def unary(f: Any, x: Any) -> Tensor:
    if not isinstance(x, Tensor):
        x = constant(x)
    ctx = x._ctx
    return wrap(ctx, f(ctx.handle, x._h))


def binary(f: Any, a: Any, b: Any, op: str = "op") -> Tensor:
    # The path of every eager binary op and operator: kept short (see
    # docs/PYTHON.md, "Speed").
    if isinstance(a, Tensor):
        ctx = a._ctx
        if not isinstance(b, Tensor):
            b = scalar_like(b, a)
        elif b._ctx is not ctx:
            raise other_context(op)
    elif isinstance(b, Tensor):
        ctx = b._ctx
        a = scalar_like(a, b)
    else:
        a = constant(a)
        ctx = a._ctx
        b = scalar_like(b, a)
    h = ctx._h
    if h is None:
        ctx.handle  # raises: the context was closed
    return wrap(ctx, f(h, a._h, b._h))


def binary_op(f: Any, op: str) -> Any:
    """A two-tensor function over C function f, for operators (one frame less)."""
    def run(a: Any, b: Any) -> Tensor:
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            ctx = a._ctx
            h = ctx._h
            if b._ctx is ctx and h is not None:
                return wrap(ctx, f(h, a._h, b._h))
        return binary(f, a, b, op)
    return run


def binary_rop(f: Any, op: str) -> Any:
    def run(a: Any, b: Any) -> Tensor:
        return binary(f, b, a, op)
    return run


def same_context(op: str, *ts: Tensor) -> "_context.Context":
    ctx = ts[0]._ctx
    for t in ts[1:]:
        if t._ctx is not ctx:
            raise other_context(op)
    ctx.handle
    return ctx


def shape_arg(shape: Any, op: str) -> Tuple[int, ...]:
    """A shape given as a list, tuple, TensorShape, ndarray or 1-D tensor."""
    if isinstance(shape, Tensor):
        shape = shape.numpy()  # a StaticTensor (tf.shape while tracing) gives its host value
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        out = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    except (TypeError, ValueError):
        raise TypeError(f"vkfuse.{op}: shape must be a list of ints, got {shape!r}") from None
    return out


def i64s(vals: Sequence[int]) -> Any:
    return (_c_i64 * max(len(vals), 1))(*vals)


def ints(vals: Sequence[int]) -> Any:
    return (_c_int * max(len(vals), 1))(*vals)


def axes_arg(axis: Any) -> Tuple[int, Any]:
    """(naxes, int array) for a reduction's axis (None: all)."""
    if axis is None:
        return 0, None
    if isinstance(axis, Tensor):
        axis = axis.numpy()
    a = [int(v) for v in np.asarray(axis).reshape(-1)]
    if not a:
        return -1, None  # an empty list reduces nothing (TF): the caller returns x
    return len(a), ints(a)


def axis_arg(axis: Any) -> int:
    if isinstance(axis, Tensor):
        axis = axis.numpy()
    return int(axis)


def dtype_vf(dtype: Any) -> int:
    return dtypes.as_dtype(dtype)._vf


def lib_desc_conv() -> Any:
    return _lib.Conv2dDesc()


def lib_desc_pool() -> Any:
    return _lib.Pool2dDesc()
