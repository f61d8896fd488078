"""Elementwise math, comparisons, reductions, matmul and casts (TF's math ops)."""
from __future__ import annotations

import ctypes
from collections import namedtuple
from typing import Any, Optional, Sequence

import numpy as np

from . import _core, dtypes, errors
from ._core import (L, axes_arg, axis_arg, binary, dtype_vf, same_context, tensor, unary)
from .tensor import Tensor, constant, wrap


# ---- binary ------------------------------------------------------------------
def add(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    return binary(L.vf_add, x, y, "add")


def subtract(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    return binary(L.vf_sub, x, y, "subtract")


def multiply(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    return binary(L.vf_mul, x, y, "multiply")


def divide(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    """x / y: true division (integers are converted to float32 first, as TF's truediv)."""
    if isinstance(x, Tensor) and not x.dtype.is_floating:
        x = cast(x, dtypes.float32)
        y = cast(y, dtypes.float32) if isinstance(y, Tensor) else y
    elif isinstance(y, Tensor) and not y.dtype.is_floating and not isinstance(x, Tensor):
        y = cast(y, dtypes.float32)
    return binary(L.vf_div, x, y, "divide")


truediv = divide


def realdiv(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    return binary(L.vf_div, x, y, "realdiv")


def truncatediv(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    return binary(L.vf_div, x, y, "truncatediv")


def floormod(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    return binary(L.vf_mod, x, y, "floormod")


mod = floormod


def floordiv(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    """x // y rounded toward -inf (floats: floor(x / y); integers: (x - x mod y) / y, exact)."""
    q = binary(L.vf_div, x, y, "floordiv")
    if q.dtype.is_floating:
        return floor(q)
    xt = x if isinstance(x, Tensor) else constant(x, q.dtype)
    return binary(L.vf_div, subtract(xt, floormod(xt, y)), y, "floordiv")


def pow(x: Any, y: Any, name: Optional[str] = None) -> Tensor:  # noqa: A001 (TF's name)
    """x ** y; integers (which the library's pow does not take) through float32, rounded back."""
    r = _int_through_float(x, y)
    if r is not None:
        xf, yf, dt = r
        return cast(round(binary(L.vf_pow, xf, yf, "pow")), dt)
    return binary(L.vf_pow, x, y, "pow")


def _int_through_float(x: Any, y: Any) -> Any:
    """(x, y as float32 tensors, the integer dtype) when the op's tensor operands are integers."""
    tx = x if isinstance(x, Tensor) else None
    ty = y if isinstance(y, Tensor) else None
    t = tx if tx is not None else ty
    if t is None:
        t = _core.tensor(x)
        tx = t
    if not t.dtype.is_integer:
        return None
    if tx is None:
        tx = _core.scalar_like(x, t)
    if ty is None:
        ty = _core.scalar_like(y, t)
    return cast(tx, dtypes.float32), cast(ty, dtypes.float32), t.dtype


def maximum(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    return binary(L.vf_maximum, x, y, "maximum")


def minimum(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    return binary(L.vf_minimum, x, y, "minimum")


def squared_difference(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    return square(subtract(x, y))


def greater(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    return binary(L.vf_greater, x, y, "greater")


def greater_equal(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    return binary(L.vf_greater_equal, x, y, "greater_equal")


def less(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    return binary(L.vf_less, x, y, "less")


def less_equal(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    return binary(L.vf_less_equal, x, y, "less_equal")


def equal(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    return binary(L.vf_equal, x, y, "equal")


def not_equal(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    return binary(L.vf_not_equal, x, y, "not_equal")


def logical_and(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    return binary(L.vf_logical_and, x, y, "logical_and")


def logical_or(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    return binary(L.vf_logical_or, x, y, "logical_or")


def logical_xor(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    return binary(L.vf_not_equal, x, y, "logical_xor")


def logical_not(x: Any, name: Optional[str] = None) -> Tensor:
    return unary(L.vf_logical_not, x)


# ---- unary -------------------------------------------------------------------
def _u(cfn: Any, doc: str) -> Any:
    def op(x: Any, name: Optional[str] = None) -> Tensor:
        return unary(cfn, x)
    op.__doc__ = doc
    return op


negative = _u(L.vf_neg, "-x")
exp = _u(L.vf_exp, "e^x (float)")
log = _u(L.vf_log, "natural log (float)")
sqrt = _u(L.vf_sqrt, "square root (float)")
rsqrt = _u(L.vf_rsqrt, "1 / sqrt(x) (float)")
abs = _u(L.vf_abs, "|x|")  # noqa: A001
tanh = _u(L.vf_tanh, "tanh (float)")
sigmoid = _u(L.vf_sigmoid, "1 / (1 + e^-x) (float)")
sin = _u(L.vf_sin, "sine (float)")
cos = _u(L.vf_cos, "cosine (float)")
square = _u(L.vf_square, "x * x")
sign = _u(L.vf_sign, "-1, 0 or 1")
floor = _u(L.vf_floor, "rounded toward -inf")
ceil = _u(L.vf_ceil, "rounded toward +inf")
round = _u(L.vf_round, "rounded half to even")  # noqa: A001
erf = _u(L.vf_erf, "the error function (float)")
log1p = _u(L.vf_log1p, "log(1 + x), accurate near 0")
expm1 = _u(L.vf_expm1, "e^x - 1, accurate near 0")
softplus = _u(L.vf_softplus, "log(1 + e^x), stable")
stop_gradient = _u(L.vf_stop_gradient, "x, with no gradient through it")
neg = negative


def reciprocal(x: Any, name: Optional[str] = None) -> Tensor:
    x = tensor(x)
    return divide(1.0, x) if x.dtype.is_floating else divide(1, x)


def log_sigmoid(x: Any, name: Optional[str] = None) -> Tensor:
    return negative(softplus(negative(x)))


def tan(x: Any, name: Optional[str] = None) -> Tensor:
    return divide(sin(x), cos(x))


def is_nan(x: Any, name: Optional[str] = None) -> Tensor:
    return not_equal(x, x)


def is_inf(x: Any, name: Optional[str] = None) -> Tensor:
    return equal(abs(x), float("inf"))


def is_finite(x: Any, name: Optional[str] = None) -> Tensor:
    return logical_not(logical_or(is_nan(x), is_inf(x)))


def cast(x: Any, dtype: Any, name: Optional[str] = None) -> Tensor:
    """tf.cast: float to int truncates toward zero; to bool is x != 0."""
    if not isinstance(x, Tensor):
        return constant(np.asarray(x).astype(dtypes.as_dtype(dtype)._stored._np))
    vf = dtype_vf(dtype)
    if L.vf_tensor_dtype(x.handle) == vf:
        return x
    return wrap(x._ctx, L.vf_cast(x._ctx.handle, x._h, vf))


saturate_cast = cast


def clip_by_value(t: Any, clip_value_min: Any, clip_value_max: Any, name: Optional[str] = None) -> Tensor:
    t = tensor(t)
    if all(isinstance(v, (int, float, np.number)) for v in (clip_value_min, clip_value_max)):
        return wrap(t._ctx, L.vf_clip(t._ctx.handle, t._h, float(clip_value_min), float(clip_value_max)))
    return minimum(maximum(t, clip_value_min), clip_value_max)


def where(condition: Any, x: Any = None, y: Any = None, name: Optional[str] = None) -> Tensor:
    """tf.where: x where condition else y (broadcast); with one argument, the true indices."""
    if x is None and y is None:
        c = tensor(condition)
        return constant(np.argwhere(np.asarray(c.numpy())).astype(np.int32))
    if x is None or y is None:
        raise ValueError("vkfuse.where: give both x and y, or neither")
    c = tensor(condition)
    if not isinstance(x, Tensor) and isinstance(y, Tensor):
        x = tensor(x, c._ctx, y.dtype) if not isinstance(x, (int, float)) else _scalar_like(x, y)
    xt = tensor(x, c._ctx)
    yt = y if isinstance(y, Tensor) else _scalar_like(y, xt)
    ctx = same_context("where", c, xt, yt)
    return wrap(ctx, L.vf_where(ctx.handle, c._h, xt._h, yt._h))


def _scalar_like(v: Any, like: Tensor) -> Tensor:
    return _core.scalar_like(v, like)


# ---- reductions --------------------------------------------------------------
def _reduce(cfn: Any, x: Any, axis: Any, keepdims: Any) -> Tensor:
    x = tensor(x)
    n, arr = axes_arg(axis)
    if n < 0:
        return x
    return wrap(x._ctx, cfn(x._ctx.handle, x._h, n, arr, bool(keepdims)))


def reduce_sum(input_tensor: Any, axis: Any = None, keepdims: bool = False,
               name: Optional[str] = None) -> Tensor:
    x = tensor(input_tensor)
    if x.dtype.is_bool:
        x = cast(x, dtypes.int32)
    return _reduce(L.vf_reduce_sum, x, axis, keepdims)


def reduce_mean(input_tensor: Any, axis: Any = None, keepdims: bool = False,
                name: Optional[str] = None) -> Tensor:
    """The mean; of an integer tensor, the integer quotient (as TF)."""
    x = tensor(input_tensor)
    if x.dtype.is_integer or x.dtype.is_bool:
        s = reduce_sum(x, axis, keepdims)
        n = x.shape.num_elements() // max(s.shape.num_elements(), 1) if x.shape.num_elements() else 1
        return cast(cast(s, dtypes.float32) / float(n), x.dtype if x.dtype.is_integer else dtypes.int32)
    return _reduce(L.vf_reduce_mean, x, axis, keepdims)


def reduce_max(input_tensor: Any, axis: Any = None, keepdims: bool = False,
               name: Optional[str] = None) -> Tensor:
    return _reduce(L.vf_reduce_max, input_tensor, axis, keepdims)


def reduce_min(input_tensor: Any, axis: Any = None, keepdims: bool = False,
               name: Optional[str] = None) -> Tensor:
    return _reduce(L.vf_reduce_min, input_tensor, axis, keepdims)


def reduce_prod(input_tensor: Any, axis: Any = None, keepdims: bool = False,
                name: Optional[str] = None) -> Tensor:
    return _reduce(L.vf_reduce_prod, input_tensor, axis, keepdims)


def reduce_any(input_tensor: Any, axis: Any = None, keepdims: bool = False,
               name: Optional[str] = None) -> Tensor:
    return _reduce(L.vf_reduce_any, input_tensor, axis, keepdims)


def reduce_all(input_tensor: Any, axis: Any = None, keepdims: bool = False,
               name: Optional[str] = None) -> Tensor:
    return _reduce(L.vf_reduce_all, input_tensor, axis, keepdims)


def reduce_logsumexp(input_tensor: Any, axis: Any = None, keepdims: bool = False,
                     name: Optional[str] = None) -> Tensor:
    return _reduce(L.vf_logsumexp, input_tensor, axis, keepdims)


def reduce_variance(input_tensor: Any, axis: Any = None, keepdims: bool = False,
                    name: Optional[str] = None) -> Tensor:
    x = tensor(input_tensor)
    m = reduce_mean(x, axis, True)
    return reduce_mean(square(subtract(x, m)), axis, keepdims)


def reduce_std(input_tensor: Any, axis: Any = None, keepdims: bool = False,
               name: Optional[str] = None) -> Tensor:
    return sqrt(reduce_variance(input_tensor, axis, keepdims))


def count_nonzero(input: Any, axis: Any = None, keepdims: bool = False, dtype: Any = dtypes.int64,
                  name: Optional[str] = None) -> Tensor:  # noqa: A002
    x = tensor(input)
    nz = not_equal(x, False if x.dtype.is_bool else 0)
    return cast(reduce_sum(cast(nz, dtypes.int32), axis, keepdims), dtype)


def argmax(input: Any, axis: Any = None, output_type: Any = dtypes.int64,
           name: Optional[str] = None) -> Tensor:  # noqa: A002
    """Index of the first maximum along axis (default 0); int32 (int64 is narrowed)."""
    x = tensor(input)
    ax = 0 if axis is None else axis_arg(axis)
    return cast(wrap(x._ctx, L.vf_argmax(x._ctx.handle, x._h, ax)), output_type)


def argmin(input: Any, axis: Any = None, output_type: Any = dtypes.int64,
           name: Optional[str] = None) -> Tensor:  # noqa: A002
    x = tensor(input)
    return argmax(negative(x) if not x.dtype.is_unsigned else subtract(reduce_max(x), x), axis, output_type)


def cumsum(x: Any, axis: Any = 0, exclusive: bool = False, reverse: bool = False,
           name: Optional[str] = None) -> Tensor:
    x = tensor(x)
    return wrap(x._ctx, L.vf_cumsum(x._ctx.handle, x._h, axis_arg(axis), bool(exclusive), bool(reverse)))


def add_n(inputs: Sequence[Any], name: Optional[str] = None) -> Tensor:
    if not inputs:
        raise ValueError("vkfuse.add_n: inputs must not be empty")
    out = tensor(inputs[0])
    for t in inputs[1:]:
        out = add(out, t)
    return out


def top_k(input: Any, k: int = 1, sorted: bool = True, name: Optional[str] = None) -> Any:  # noqa: A002
    """tf.math.top_k: (values, indices) of the k largest along the last axis."""
    x = tensor(input)
    idx = ctypes.c_void_p()
    v = wrap(x._ctx, L.vf_top_k(x._ctx.handle, x._h, int(k), ctypes.byref(idx)))
    return _TopK(v, wrap(x._ctx, idx.value))


_TopK = namedtuple("TopKV2", ["values", "indices"])


# ---- matmul, norms -----------------------------------------------------------
def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False,
           adjoint_a: bool = False, adjoint_b: bool = False, a_is_sparse: bool = False,
           b_is_sparse: bool = False, output_type: Any = None, name: Optional[str] = None) -> Tensor:
    a = tensor(a)
    b = tensor(b, a._ctx)
    ctx = same_context("matmul", a, b)
    if a.dtype.is_integer and b.dtype == a.dtype:
        # Integer matmul (TF has it, the library's is float): exact while
        # the sums stay within float32's 2^24.
        fa, fb = cast(a, dtypes.float32), cast(b, dtypes.float32)
        return cast(round(matmul(fa, fb, transpose_a, transpose_b, adjoint_a, adjoint_b)), a.dtype)
    return wrap(ctx, L.vf_matmul_ex(ctx.handle, a._h, b._h, bool(transpose_a or adjoint_a),
                                    bool(transpose_b or adjoint_b)))


def norm(tensor: Any, ord: Any = "euclidean", axis: Any = None, keepdims: Any = None,
         name: Optional[str] = None) -> Tensor:  # noqa: A002
    """tf.norm: the Euclidean norm (over all elements, or along axis); ord 1 and inf too."""
    x = _core.tensor(tensor)
    if ord not in ("euclidean", 2, 2.0, "fro"):
        if ord in (1, 1.0):
            return reduce_sum(abs(x), axis, bool(keepdims))
        if ord == np.inf:
            return reduce_max(abs(x), axis, bool(keepdims))
        raise errors.UnimplementedError(None, None, f"vkfuse.norm: ord={ord!r} is not available "
                                        "(euclidean, 1 and inf are)", "VF_ERROR_UNSUPPORTED")
    if axis is None and not keepdims:
        return wrap(x._ctx, L.vf_norm(x._ctx.handle, x._h))
    return sqrt(reduce_sum(square(x), axis, bool(keepdims)))


def l2_normalize(x: Any, axis: Any = None, epsilon: float = 1e-12, name: Optional[str] = None) -> Tensor:
    ss = reduce_sum(square(x), axis, True)
    return multiply(x, rsqrt(maximum(ss, epsilon)))


def clip_by_norm(t: Any, clip_norm: Any, axes: Any = None, name: Optional[str] = None) -> Tensor:
    """t scaled so that its L2 norm (over axes) is at most clip_norm."""
    t = _core.tensor(t)
    n = sqrt(reduce_sum(square(t), axes, True))
    return divide(multiply(t, clip_norm), maximum(n, clip_norm))


def global_norm(t_list: Sequence[Any], name: Optional[str] = None) -> Tensor:
    return sqrt(add_n([reduce_sum(square(t)) for t in t_list if t is not None]))


def clip_by_global_norm(t_list: Sequence[Any], clip_norm: Any, use_norm: Any = None,
                        name: Optional[str] = None) -> Any:
    gn = use_norm if use_norm is not None else global_norm(t_list)
    scale = divide(clip_norm, maximum(gn, clip_norm))
    return [None if t is None else multiply(t, scale) for t in t_list], gn


def divide_no_nan(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    """x / y, 0 where y is 0."""
    yt = _core.tensor(y) if not isinstance(y, Tensor) else y
    zero = equal(yt, 0)
    safe = where(zero, _core.scalar_like(1, yt), yt)
    q = divide(x, safe)
    return where(zero, _core.scalar_like(0, q), q)


def unsorted_segment_sum(data: Any, segment_ids: Any, num_segments: Any, name: Optional[str] = None) -> Tensor:
    """Sums of data's rows (along segment_ids' dims) per segment id: scatter_add into zeros."""
    d = _core.tensor(data)
    ids = segment_ids if isinstance(segment_ids, Tensor) else _core.tensor(np.asarray(segment_ids, np.int32), d._ctx)
    k = ids.ndim
    if k != 1:
        from .array_ops import reshape
        d = reshape(d, [-1] + list(d.shape[k:]))
        ids = reshape(ids, [-1])
    n = int(num_segments.numpy() if isinstance(num_segments, Tensor) else num_segments)
    from .array_ops import fill
    z = fill([n] + list(d.shape[1:]), 0, dtype=d.dtype)
    ctx = same_context("unsorted_segment_sum", z, ids, d)
    return wrap(ctx, L.vf_scatter_add(ctx.handle, z._h, ids._h, d._h, 0))


def segment_sum(data: Any, segment_ids: Any, name: Optional[str] = None) -> Tensor:
    ids = np.asarray(segment_ids.numpy() if isinstance(segment_ids, Tensor) else segment_ids)
    return unsorted_segment_sum(data, ids, int(ids.max()) + 1 if ids.size else 0)


def unsorted_segment_mean(data: Any, segment_ids: Any, num_segments: Any, name: Optional[str] = None) -> Tensor:
    d = _core.tensor(data)
    s = unsorted_segment_sum(d, segment_ids, num_segments)
    from .array_ops import ones, reshape
    ids = np.asarray(segment_ids.numpy() if isinstance(segment_ids, Tensor) else segment_ids)
    cnt = unsorted_segment_sum(ones(list(ids.shape), d.dtype), ids, num_segments)
    cnt = reshape(maximum(cnt, 1), list(cnt.shape) + [1] * (s.ndim - 1))
    return divide(s, cnt)


def segment_mean(data: Any, segment_ids: Any, name: Optional[str] = None) -> Tensor:
    ids = np.asarray(segment_ids.numpy() if isinstance(segment_ids, Tensor) else segment_ids)
    return unsorted_segment_mean(data, ids, int(ids.max()) + 1 if ids.size else 0)


def sort(values: Any, axis: int = -1, direction: str = "ASCENDING", name: Optional[str] = None) -> Tensor:
    """tf.sort along axis (top_k of the whole axis; differentiable for floats)."""
    return _sorted(values, axis, direction, False)


def argsort(values: Any, axis: int = -1, direction: str = "ASCENDING", stable: bool = False,
            name: Optional[str] = None) -> Tensor:
    return _sorted(values, axis, direction, True)


def _sorted(values: Any, axis: int, direction: str, indices: bool) -> Tensor:
    from .array_ops import transpose
    x = _core.tensor(values)
    if direction not in ("ASCENDING", "DESCENDING"):
        raise ValueError(f"vkfuse.sort: direction must be 'ASCENDING' or 'DESCENDING', got {direction!r}")
    ax = int(axis) % max(x.ndim, 1)
    perm = list(range(x.ndim))
    perm[ax], perm[-1] = perm[-1], perm[ax]
    xt = transpose(x, perm) if ax != x.ndim - 1 else x
    asc = direction == "ASCENDING"
    if asc and x.dtype.is_unsigned:
        raise errors.UnimplementedError(None, None, "vkfuse.sort: ascending uint32 is not available",
                                        "VF_ERROR_UNSUPPORTED")
    key = negative(xt) if asc else xt
    v, i = top_k(key, k=xt.shape[-1])
    r = i if indices else (negative(v) if asc else v)
    return transpose(r, perm) if ax != x.ndim - 1 else r


def reduce_euclidean_norm(input_tensor: Any, axis: Any = None, keepdims: bool = False,
                          name: Optional[str] = None) -> Tensor:
    return sqrt(reduce_sum(square(input_tensor), axis, keepdims))
