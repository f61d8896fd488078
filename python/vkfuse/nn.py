"""``vkfuse.nn``: tf.nn's names for what vkfuse has."""
from __future__ import annotations

import ctypes
from typing import Any, Optional, Sequence

import numpy as np

from . import _core, dtypes, errors, random as _random
from ._core import L, same_context
from ._core import tensor as _t
from .math_ops import (add, cast, exp, log_sigmoid, maximum, minimum, multiply, negative,  # noqa: F401
                       reduce_mean, reduce_sum, sigmoid, softplus, square, subtract, tanh, where,
                       l2_normalize, erf, log1p, abs as _abs, greater, clip_by_value)
from .tensor import Tensor, wrap


def relu(features: Any, name: Optional[str] = None) -> Tensor:
    return _core.unary(L.vf_relu, features)


def relu6(features: Any, name: Optional[str] = None) -> Tensor:
    return clip_by_value(features, 0.0, 6.0)


def leaky_relu(features: Any, alpha: float = 0.2, name: Optional[str] = None) -> Tensor:
    x = _t(features)
    return wrap(x._ctx, L.vf_leaky_relu(x._ctx.handle, x._h, float(alpha)))


def elu(features: Any, name: Optional[str] = None) -> Tensor:
    x = _t(features)
    return where(greater(x, 0.0), x, subtract(exp(minimum(x, 0.0)), 1.0))


def selu(features: Any, name: Optional[str] = None) -> Tensor:
    a, s = 1.6732632423543772, 1.0507009873554805
    x = _t(features)
    return multiply(where(greater(x, 0.0), x, multiply(subtract(exp(minimum(x, 0.0)), 1.0), a)), s)


def silu(features: Any, beta: float = 1.0) -> Tensor:
    return multiply(features, sigmoid(multiply(features, beta) if beta != 1.0 else features))


swish = silu


def gelu(features: Any, approximate: bool = False, name: Optional[str] = None) -> Tensor:
    """0.5 x (1 + erf(x / sqrt 2)); approximate=True: the tanh form (vkfuse's gelu op)."""
    x = _t(features)
    if approximate:
        return _core.unary(L.vf_gelu, x)
    return multiply(multiply(x, 0.5), add(erf(multiply(x, 0.7071067811865476)), 1.0))


def softmax(logits: Any, axis: Optional[int] = None, name: Optional[str] = None) -> Tensor:
    x = _t(logits)
    return wrap(x._ctx, L.vf_softmax(x._ctx.handle, x._h, -1 if axis is None else int(axis)))


def log_softmax(logits: Any, axis: Optional[int] = None, name: Optional[str] = None) -> Tensor:
    x = _t(logits)
    return wrap(x._ctx, L.vf_log_softmax(x._ctx.handle, x._h, -1 if axis is None else int(axis)))


def sparse_softmax_cross_entropy_with_logits(labels: Any = None, logits: Any = None,
                                             name: Optional[str] = None) -> Tensor:
    if labels is None or logits is None:
        raise ValueError("vkfuse.nn.sparse_softmax_cross_entropy_with_logits: give labels= and logits=")
    lg = _t(logits)
    lb = labels if isinstance(labels, Tensor) else _t(np.asarray(labels, np.int32), lg._ctx)
    ctx = same_context("sparse_softmax_cross_entropy_with_logits", lb, lg)
    return wrap(ctx, L.vf_sparse_softmax_cross_entropy(ctx.handle, lb._h, lg._h))


def softmax_cross_entropy_with_logits(labels: Any = None, logits: Any = None, axis: int = -1,
                                      name: Optional[str] = None) -> Tensor:
    if labels is None or logits is None:
        raise ValueError("vkfuse.nn.softmax_cross_entropy_with_logits: give labels= and logits=")
    lg = _t(logits)
    return negative(reduce_sum(multiply(labels, log_softmax(lg, axis)), axis))


def sigmoid_cross_entropy_with_logits(labels: Any = None, logits: Any = None,
                                      name: Optional[str] = None) -> Tensor:
    x = _t(logits)
    z = labels
    return add(subtract(relu(x), multiply(x, z)), log1p(exp(negative(_abs(x)))))


def l2_loss(t: Any, name: Optional[str] = None) -> Tensor:
    return multiply(reduce_sum(square(t)), 0.5)


def bias_add(value: Any, bias: Any, data_format: Optional[str] = None, name: Optional[str] = None) -> Tensor:
    if data_format not in (None, "NHWC", "N...C"):
        raise errors.UnimplementedError(None, None, "vkfuse.nn.bias_add: only channels-last data",
                                        "VF_ERROR_UNSUPPORTED")
    return add(value, bias)


def moments(x: Any, axes: Sequence[int], shift: Any = None, keepdims: bool = False,
            name: Optional[str] = None) -> Any:
    m = reduce_mean(x, axes, True)
    v = reduce_mean(square(subtract(x, m)), axes, keepdims)
    if not keepdims:
        from .array_ops import squeeze
        m = squeeze(m, list(axes))
    return m, v


def batch_normalization(x: Any, mean: Any, variance: Any, offset: Any, scale: Any,
                        variance_epsilon: float, name: Optional[str] = None) -> Tensor:
    from .math_ops import rsqrt
    inv = rsqrt(add(variance, variance_epsilon))
    if scale is not None:
        inv = multiply(inv, scale)
    y = multiply(subtract(x, mean), inv)
    return add(y, offset) if offset is not None else y


def dropout(x: Any, rate: float, noise_shape: Any = None, seed: Optional[int] = None,
            rng: Any = None, name: Optional[str] = None) -> Tensor:
    """Inverted dropout: kept elements scaled by 1 / (1 - rate). Draws from the global generator
    (or Generator.from_seed(seed) when seed is given)."""
    if noise_shape is not None:
        raise errors.UnimplementedError(None, None, "vkfuse.nn.dropout: noise_shape is not available",
                                        "VF_ERROR_UNSUPPORTED")
    xt = _t(x)
    gen = rng if rng is not None else (_random.Generator.from_seed(seed, xt._ctx) if seed is not None
                                       else _random.get_global_generator(xt._ctx))
    r = float(rate.numpy() if isinstance(rate, Tensor) else rate)
    return wrap(xt._ctx, L.vf_dropout(xt._ctx.handle, gen._handle(xt._ctx), xt._h, r))


# ---- convolution and pooling (NHWC) ------------------------------------------
def _pair(v: Any, what: str, op: str) -> Sequence[int]:
    if isinstance(v, (int, np.integer)):
        return (int(v), int(v))
    v = [int(a) for a in v]
    if len(v) == 1:
        return (v[0], v[0])
    if len(v) == 2:
        return tuple(v)
    if len(v) == 4:
        if v[0] != 1 or v[3] != 1:
            raise errors.invalid(f"vkfuse.nn.{op}: {what} {v} must be 1 in the batch and channel dims")
        return (v[1], v[2])
    raise errors.invalid(f"vkfuse.nn.{op}: {what} must be an int or a list of 1, 2 or 4 ints, got {v}")


def _padding(padding: Any, op: str, desc: Any) -> None:
    if isinstance(padding, str):
        p = padding.upper()
        if p not in ("VALID", "SAME"):
            raise errors.invalid(f"vkfuse.nn.{op}: padding must be 'VALID', 'SAME' or explicit pairs, "
                                 f"got {padding!r}")
        desc.padding = 0 if p == "VALID" else 1
        return
    pads = np.asarray(padding, np.int64)
    if pads.shape == (4, 2):
        pads = pads[1:3]
    if pads.shape != (2, 2):
        raise errors.invalid(f"vkfuse.nn.{op}: explicit padding must be [[0,0],[t,b],[l,r],[0,0]]")
    desc.padding = 2
    desc.pads[:] = [int(pads[0, 0]), int(pads[0, 1]), int(pads[1, 0]), int(pads[1, 1])]


def _nhwc(data_format: Optional[str], op: str) -> None:
    if data_format not in (None, "NHWC"):
        raise errors.UnimplementedError(None, None, f"vkfuse.nn.{op}: data_format {data_format!r} is not "
                                        "available (NHWC is; transpose NCHW input first)",
                                        "VF_ERROR_UNSUPPORTED")


def conv2d(input: Any, filters: Any, strides: Any = 1, padding: Any = "VALID",  # noqa: A002
           data_format: str = "NHWC", dilations: Any = None, name: Optional[str] = None) -> Tensor:
    _nhwc(data_format, "conv2d")
    x = _t(input)
    w = _t(filters, x._ctx)
    ctx = same_context("conv2d", x, w)
    d = _core.lib_desc_conv()
    d.strides[:] = _pair(strides, "strides", "conv2d")
    d.dilations[:] = _pair(1 if dilations is None else dilations, "dilations", "conv2d")
    _padding(padding, "conv2d", d)
    cin = x.shape[-1]
    if w.shape[2] and cin != w.shape[2] and cin % w.shape[2] == 0:
        d.groups = cin // w.shape[2]
    return wrap(ctx, L.vf_conv2d(ctx.handle, x._h, w._h, ctypes.byref(d)))


def depthwise_conv2d(input: Any, filter: Any, strides: Any, padding: Any,  # noqa: A002
                     data_format: Optional[str] = None, dilations: Any = None,
                     name: Optional[str] = None) -> Tensor:
    from .array_ops import reshape
    w = _t(filter)
    kh, kw, c, m = w.shape
    return conv2d(input, reshape(w, [kh, kw, 1, c * m]), strides, padding, "NHWC", dilations)


def _pool(cfn: Any, op: str, input: Any, ksize: Any, strides: Any, padding: Any,  # noqa: A002
          data_format: Optional[str]) -> Tensor:
    _nhwc(data_format, op)
    x = _t(input)
    d = _core.lib_desc_pool()
    d.window[:] = _pair(ksize, "ksize", op)
    d.strides[:] = _pair(strides, "strides", op)
    if not isinstance(padding, str) or padding.upper() not in ("VALID", "SAME"):
        raise errors.invalid(f"vkfuse.nn.{op}: padding must be 'VALID' or 'SAME', got {padding!r}")
    d.padding = 0 if padding.upper() == "VALID" else 1
    return wrap(x._ctx, cfn(x._ctx.handle, x._h, ctypes.byref(d)))


def max_pool2d(input: Any, ksize: Any, strides: Any, padding: Any, data_format: str = "NHWC",  # noqa: A002
               name: Optional[str] = None) -> Tensor:
    return _pool(L.vf_max_pool2d, "max_pool2d", input, ksize, strides, padding, data_format)


def avg_pool2d(input: Any, ksize: Any, strides: Any, padding: Any, data_format: str = "NHWC",  # noqa: A002
               name: Optional[str] = None) -> Tensor:
    return _pool(L.vf_avg_pool2d, "avg_pool2d", input, ksize, strides, padding, data_format)


max_pool = max_pool2d
avg_pool = avg_pool2d


def embedding_lookup(params: Any, ids: Any, max_norm: Any = None, name: Optional[str] = None) -> Tensor:
    """The rows of params at ids (tf.gather along axis 0)."""
    from .array_ops import gather
    return gather(params, ids, axis=0)
