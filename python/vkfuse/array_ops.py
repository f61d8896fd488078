"""Making tensors and moving their elements (TF's array ops), and indexing."""
from __future__ import annotations

import builtins
import ctypes
from typing import Any, List, Optional, Sequence

import numpy as np

from . import _context, dtypes, errors
from ._core import (L, axis_arg, i64s, ints, same_context, shape_arg)
from ._core import tensor as _t
from .math_ops import add, cast, multiply, subtract
from .tensor import Tensor, TensorShape, constant, wrap

_INT64_MAX = 2 ** 63 - 1


def fill(dims: Any, value: Any, name: Optional[str] = None, dtype: Any = None) -> Tensor:
    """tf.fill: a tensor of shape dims, every element value (dtype inferred from value)."""
    shape = shape_arg(dims, "fill")
    if isinstance(value, Tensor):
        dt = value.dtype
        value = value.numpy()
    else:
        dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.as_dtype(np.asarray(value).dtype)
    ctx = _context.context()
    return wrap(ctx, L.vf_fill(ctx.handle, dt._vf, len(shape), i64s(shape), float(value)))


def zeros(shape: Any, dtype: Any = dtypes.float32, name: Optional[str] = None) -> Tensor:
    return fill(shape, 0, dtype=dtype)


def ones(shape: Any, dtype: Any = dtypes.float32, name: Optional[str] = None) -> Tensor:
    return fill(shape, 1, dtype=dtype)


def zeros_like(input: Any, dtype: Any = None, name: Optional[str] = None) -> Tensor:  # noqa: A002
    x = _t(input)
    return fill(x.shape, 0, dtype=dtype if dtype is not None else x.dtype)


def ones_like(input: Any, dtype: Any = None, name: Optional[str] = None) -> Tensor:  # noqa: A002
    x = _t(input)
    return fill(x.shape, 1, dtype=dtype if dtype is not None else x.dtype)


def range(start: Any, limit: Any = None, delta: Any = 1, dtype: Any = None,
          name: str = "range") -> Tensor:  # noqa: A001
    """tf.range: [start, limit) by delta; int32 unless an argument is a float."""
    if limit is None:
        start, limit = 0, start
    vals = [v.numpy() if isinstance(v, Tensor) else v for v in (start, limit, delta)]
    if dtype is None:
        dt = dtypes.float32 if any(np.asarray(v).dtype.kind == "f" for v in vals) else dtypes.int32
    else:
        dt = dtypes.as_dtype(dtype)
    ctx = _context.context()
    return wrap(ctx, L.vf_range(ctx.handle, dt._vf, float(vals[0]), float(vals[1]), float(vals[2])))


def linspace(start: Any, stop: Any, num: int, name: Optional[str] = None, axis: int = 0) -> Tensor:
    """tf.linspace: num evenly spaced values from start to stop inclusive (float32)."""
    a = float(start.numpy() if isinstance(start, Tensor) else start)
    b = float(stop.numpy() if isinstance(stop, Tensor) else stop)
    n = int(num)
    return constant(np.linspace(a, b, n, dtype=np.float64).astype(np.float32))


def identity(input: Any, name: Optional[str] = None) -> Tensor:  # noqa: A002
    x = _t(input)
    return wrap(x._ctx, L.vf_reshape(x._ctx.handle, x._h, x.ndim, i64s(x.shape)))


def reshape(tensor: Any, shape: Any, name: Optional[str] = None) -> Tensor:
    x = _t(tensor)
    s = shape_arg(shape, "reshape")
    return wrap(x._ctx, L.vf_reshape(x._ctx.handle, x._h, len(s), i64s(s)))


def transpose(a: Any, perm: Any = None, conjugate: bool = False, name: str = "transpose") -> Tensor:
    x = _t(a)
    if perm is None:
        return wrap(x._ctx, L.vf_transpose(x._ctx.handle, x._h, None))
    p = shape_arg(perm, "transpose")
    if len(p) != x.ndim:
        raise errors.invalid(f"vkfuse.transpose: perm {list(p)} has {len(p)} entries, the tensor has "
                             f"rank {x.ndim}; give one entry per dim", "VF_ERROR_SHAPE")
    return wrap(x._ctx, L.vf_transpose(x._ctx.handle, x._h, ints(p)))


def _handles(op: str, values: Sequence[Any]) -> Any:
    ts = [_t(v) for v in values]
    if not ts:
        raise ValueError(f"vkfuse.{op}: needs at least one tensor")
    ctx = same_context(op, *ts)
    arr = (ctypes.c_void_p * len(ts))(*[t._h for t in ts])
    return ctx, ts, arr


def concat(values: Sequence[Any], axis: Any, name: str = "concat") -> Tensor:
    if isinstance(values, Tensor):
        values = list(values)
    ctx, ts, arr = _handles("concat", values)
    if len(ts) == 1:
        return ts[0]
    return wrap(ctx, L.vf_concat(ctx.handle, len(ts), arr, axis_arg(axis)))


def stack(values: Sequence[Any], axis: int = 0, name: str = "stack") -> Tensor:
    ctx, ts, arr = _handles("stack", values)
    return wrap(ctx, L.vf_stack(ctx.handle, len(ts), arr, int(axis)))


def split(value: Any, num_or_size_splits: Any, axis: Any = 0, num: Optional[int] = None,
          name: str = "split") -> List[Tensor]:
    x = _t(value)
    ax = axis_arg(axis)
    if isinstance(num_or_size_splits, (int, np.integer)):
        n, sizes = int(num_or_size_splits), None
    else:
        s = shape_arg(num_or_size_splits, "split")
        n, sizes = len(s), i64s(s)
    if n < 1:
        raise errors.invalid(f"vkfuse.split: num_or_size_splits must give at least one part, got {n}")
    out = (ctypes.c_void_p * n)()
    x._ctx.check(L.vf_split(x._ctx.handle, x._h, n, sizes, ax, out))
    return [wrap(x._ctx, h) for h in out]


def unstack(value: Any, num: Optional[int] = None, axis: int = 0, name: str = "unstack") -> List[Tensor]:
    x = _t(value)
    n = x.shape[axis]
    if n == 0:
        return []
    return [squeeze(p, [axis]) for p in split(x, n, axis)]


def expand_dims(input: Any, axis: Any, name: Optional[str] = None) -> Tensor:  # noqa: A002
    x = _t(input)
    return wrap(x._ctx, L.vf_expand_dims(x._ctx.handle, x._h, axis_arg(axis)))


def squeeze(input: Any, axis: Any = None, name: Optional[str] = None) -> Tensor:  # noqa: A002
    x = _t(input)
    a = [] if axis is None else list(shape_arg(axis, "squeeze"))
    return wrap(x._ctx, L.vf_squeeze(x._ctx.handle, x._h, len(a), ints(a) if a else None))


def tile(input: Any, multiples: Any, name: Optional[str] = None) -> Tensor:  # noqa: A002
    x = _t(input)
    m = shape_arg(multiples, "tile")
    if len(m) != x.ndim:
        raise errors.invalid(f"vkfuse.tile: multiples {list(m)} must have one entry per dim of the "
                             f"input (rank {x.ndim})", "VF_ERROR_SHAPE")
    return wrap(x._ctx, L.vf_tile(x._ctx.handle, x._h, i64s(m)))


def pad(tensor: Any, paddings: Any, mode: str = "CONSTANT", constant_values: Any = 0,
        name: Optional[str] = None) -> Tensor:
    x = _t(tensor)
    if str(mode).upper() != "CONSTANT":
        raise errors.UnimplementedError(None, None, f"vkfuse.pad: mode {mode!r} is not available "
                                        "(CONSTANT is)", "VF_ERROR_UNSUPPORTED")
    p = np.asarray(paddings.numpy() if isinstance(paddings, Tensor) else paddings, dtype=np.int64)
    if p.shape != (x.ndim, 2):
        raise errors.invalid(f"vkfuse.pad: paddings must have shape [{x.ndim}, 2] (before, after per "
                             f"dim), got {list(p.shape)}", "VF_ERROR_SHAPE")
    return wrap(x._ctx, L.vf_pad(x._ctx.handle, x._h, i64s(p[:, 0].tolist()), i64s(p[:, 1].tolist()),
                                 float(constant_values)))


def broadcast_to(input: Any, shape: Any, name: Optional[str] = None) -> Tensor:  # noqa: A002
    x = _t(input)
    s = shape_arg(shape, "broadcast_to")
    return wrap(x._ctx, L.vf_broadcast_to(x._ctx.handle, x._h, len(s), i64s(s)))


def gather(params: Any, indices: Any, validate_indices: Any = None, axis: Any = None,
           batch_dims: int = 0, name: Optional[str] = None) -> Tensor:
    x = _t(params)
    i = indices if isinstance(indices, Tensor) else _t(np.asarray(indices, np.int32), x._ctx)
    if batch_dims:
        raise errors.UnimplementedError(None, None, "vkfuse.gather: batch_dims is not available (0 is)",
                                        "VF_ERROR_UNSUPPORTED")
    ctx = same_context("gather", x, i)
    return wrap(ctx, L.vf_gather(ctx.handle, x._h, i._h, 0 if axis is None else axis_arg(axis)))


def one_hot(indices: Any, depth: int, on_value: Any = None, off_value: Any = None, axis: Any = None,
            dtype: Any = None, name: Optional[str] = None) -> Tensor:
    i = indices if isinstance(indices, Tensor) else _t(np.asarray(indices, np.int32))
    if dtype is None:
        dtype = dtypes.as_dtype(np.asarray(on_value).dtype) if on_value is not None else dtypes.float32
    dt = dtypes.as_dtype(dtype)
    out = wrap(i._ctx, L.vf_one_hot(i._ctx.handle, i._h, int(depth), dt._vf))
    if on_value is not None or off_value is not None:
        on = 1 if on_value is None else on_value
        off = 0 if off_value is None else off_value
        out = add(multiply(out, subtract(constant(on, dt), constant(off, dt))), constant(off, dt))
    if axis is not None and axis != -1 and axis != out.ndim - 1:
        perm = list(builtins.range(out.ndim - 1))
        perm.insert(axis, out.ndim - 1)
        out = transpose(out, perm)
    return out


def reverse(tensor: Any, axis: Any, name: Optional[str] = None) -> Tensor:
    x = _t(tensor)
    r = x.ndim
    begin = [0] * r
    end = [_INT64_MAX] * r
    step = [1] * r
    for a in shape_arg(axis, "reverse"):
        a = a % r
        begin[a], step[a] = _INT64_MAX, -1
    return wrap(x._ctx, L.vf_slice(x._ctx.handle, x._h, i64s(begin), i64s(end), i64s(step)))


def shape(input: Any, out_type: Any = dtypes.int32, name: Optional[str] = None) -> Tensor:  # noqa: A002
    return constant(np.asarray(_t(input).shape, np.int32), out_type)


def size(input: Any, out_type: Any = dtypes.int32, name: Optional[str] = None) -> Tensor:  # noqa: A002
    return constant(_t(input).shape.num_elements(), out_type)


def rank(input: Any, name: Optional[str] = None) -> Tensor:  # noqa: A002
    return constant(_t(input).ndim, dtypes.int32)


def copy_to(t: Any, context: "_context.Context") -> Tensor:
    """A tensor of context holding t's value (t of any context, e.g. another device)."""
    t = _t(t)
    t._ctx.handle
    return wrap(context, L.vf_tensor_copy_to(context.handle, t._h))


# ---- NumPy-style indexing ----------------------------------------------------
def getitem(x: Tensor, key: Any) -> Tensor:
    """x[key]: ints, slices (negative, steps), None (new axis) and ``...``."""
    if isinstance(key, Tensor) and key.ndim == 0 and key.dtype.is_integer and L.vf_context_tracing(x._ctx.handle):
        # an index computed in the graph (a converted loop's x[i]): a gather
        return wrap(x._ctx, L.vf_gather(x._ctx.handle, x._h, key._h, 0))
    if not isinstance(key, tuple):
        key = (key,)
    dims = list(x.shape)
    if builtins.any(isinstance(k, (Tensor, list, np.ndarray)) and not _is_int(k) for k in key):
        raise TypeError("vkfuse: tensors index with ints, slices, None and ..., not with lists or "
                        "tensors; use vkfuse.gather (or boolean_mask) for those")
    n_real = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    if n_real > len(dims):
        raise errors.invalid(f"vkfuse: index {key!r} has {n_real} entries for a tensor of rank "
                             f"{len(dims)}", "VF_ERROR_SHAPE")
    expanded: List[Any] = []
    for k in key:
        if k is Ellipsis:
            expanded += [slice(None)] * (len(dims) - n_real)
            n_real = len(dims)  # a second ... adds nothing
        else:
            expanded.append(k)
    begin, end, step, out_shape = [], [], [], []
    d = 0
    trivial = True
    for k in expanded:
        if k is None:
            out_shape.append(1)
            continue
        if d >= len(dims):
            break
        n = dims[d]
        if isinstance(k, slice):
            b, e, s = k.start, k.stop, k.step
            b, e, s = (_int_or_none(v) for v in (b, e, s))
            s = 1 if s is None else s
            if s == 0:
                raise errors.invalid("vkfuse: slice step cannot be zero")
            begin.append((0 if s > 0 else _INT64_MAX) if b is None else b)
            end.append(_INT64_MAX if e is None else e)
            step.append(s)
            out_shape.append(len(builtins.range(*slice(b, e, s).indices(n))))
            if not (b in (None, 0) and e is None and s == 1):
                trivial = False
        else:
            if not _is_int(k):
                raise TypeError(f"vkfuse: only integers, slices (`:`), ellipsis (`...`), vkfuse.newaxis "
                                f"(`None`) and scalar integer tensors are valid indices, got {k!r}")
            i = int(k)
            if not -n <= i < n:
                raise errors.invalid(f"vkfuse: index {i} is out of bounds for dim {d} of size {n} "
                                     f"(shape {list(dims)})")
            i %= n
            begin.append(i)
            end.append(i + 1)
            step.append(1)
            trivial = False
        d += 1
    while d < len(dims):
        begin.append(0)
        end.append(_INT64_MAX)
        step.append(1)
        out_shape.append(dims[d])
        d += 1
    ctx = x._ctx
    y = x if trivial else wrap(ctx, L.vf_slice(ctx.handle, x._h, i64s(begin), i64s(end), i64s(step)))
    if list(y.shape) != out_shape:
        y = wrap(ctx, L.vf_reshape(ctx.handle, y._h, len(out_shape), i64s(out_shape)))
    return y


def _is_int(k: Any) -> bool:
    if isinstance(k, Tensor):
        return k.ndim == 0 and k.dtype.is_integer
    return isinstance(k, (int, np.integer))


def _int_or_none(v: Any) -> Optional[int]:
    return None if v is None else int(v)


def boolean_mask(tensor: Any, mask: Any, axis: Optional[int] = None, name: str = "boolean_mask") -> Tensor:
    """tf.boolean_mask (eager: the mask is read to the host)."""
    x = _t(tensor)
    m = np.asarray(_t(mask).numpy(), bool)
    ax = 0 if axis is None else int(axis)
    lead = x.shape[:ax]
    flat = reshape(x, list(lead) + [-1] + list(x.shape[ax + m.ndim:]))
    idx = np.nonzero(m.reshape(-1))[0].astype(np.int32)
    return gather(flat, idx, axis=ax)


def roll(input: Any, shift: Any, axis: Any, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """tf.roll: elements shifted along axis (several axes: shift and axis lists), wrapping around."""
    x = _t(input)
    shifts = shape_arg(shift, "roll")
    axes = shape_arg(axis, "roll")
    if len(shifts) != len(axes):
        raise errors.invalid("vkfuse.roll: shift and axis must have the same length")
    for s, a in zip(shifts, axes):
        a %= x.ndim
        n = x.shape[a]
        k = s % n if n else 0
        if k:
            head = getitem(x, (slice(None),) * a + (slice(n - k, None),))
            tail = getitem(x, (slice(None),) * a + (slice(None, n - k),))
            x = concat([head, tail], a)
    return x


def _linear_nd(x: Tensor, indices: Any, op: str) -> Any:
    """(x with its first k dims flattened into one, indices [...] as i32 linear indices into it)."""
    idx = np.asarray(indices.numpy() if isinstance(indices, Tensor) else indices, np.int64)
    k = idx.shape[-1]
    if k > x.ndim:
        raise errors.invalid(f"vkfuse.{op}: indices' last dim {k} is more than the tensor's rank {x.ndim}",
                             "VF_ERROR_SHAPE")
    dims = np.asarray(x.shape[:k], np.int64)
    if np.any(idx < 0) or np.any(idx >= dims):
        raise errors.invalid(f"vkfuse.{op}: an index is out of range for dims {dims.tolist()}")
    strides = np.cumprod(np.r_[dims[1:], 1][::-1])[::-1]
    lin = (idx * strides).sum(-1).astype(np.int32)
    flat = reshape(x, [-1] + list(x.shape[k:]))
    return flat, lin


def gather_nd(params: Any, indices: Any, batch_dims: int = 0, name: Optional[str] = None) -> Tensor:
    """tf.gather_nd: slices of params at the index tuples of indices' last dim (indices read to the host)."""
    if batch_dims:
        raise errors.UnimplementedError(None, None, "vkfuse.gather_nd: batch_dims is not available",
                                        "VF_ERROR_UNSUPPORTED")
    x = _t(params)
    flat, lin = _linear_nd(x, indices, "gather_nd")
    return gather(flat, lin, axis=0)


def tensor_scatter_nd_add(tensor: Any, indices: Any, updates: Any, name: Optional[str] = None) -> Tensor:
    """tensor with updates added at the index tuples (duplicates accumulate)."""
    x = _t(tensor)
    flat, lin = _linear_nd(x, indices, "tensor_scatter_nd_add")
    u = _t(updates, x._ctx)
    u = reshape(u, [-1] + list(flat.shape[1:]))
    i = _t(lin.reshape(-1), x._ctx)
    ctx = same_context("tensor_scatter_nd_add", flat, i, u)
    return reshape(wrap(ctx, L.vf_scatter_add(ctx.handle, flat._h, i._h, u._h, 0)), list(x.shape))


def meshgrid(*args: Any, **kwargs: Any) -> List[Tensor]:
    """tf.meshgrid (indexing 'xy' or 'ij')."""
    indexing = kwargs.get("indexing", "xy")
    ts = [reshape(_t(a), [-1]) for a in args]
    n = len(ts)
    sizes = [t.shape[0] for t in ts]
    if indexing == "xy" and n >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, t in enumerate(ts):
        shape = [1] * n
        axis = i
        if indexing == "xy" and n >= 2 and i < 2:
            axis = 1 - i
        shape[axis] = t.shape[0]
        out.append(broadcast_to(reshape(t, shape), sizes))
    return out
