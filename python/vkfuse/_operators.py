"""Python operators and methods of Tensor (``+ - * / @ ** // %``, comparisons,
``& | ~ ^`` on bools, indexing), attached to the class at import."""
from __future__ import annotations

from typing import Any

from . import array_ops, math_ops as m
from ._core import L, binary, binary_op, binary_rop, unary
from .tensor import Tensor, wrap


def _swap(f: Any) -> Any:
    return lambda a, b: f(b, a)


def _and(a: Any, b: Any) -> Tensor:
    return binary(L.vf_logical_and, a, b, "logical_and")


def _or(a: Any, b: Any) -> Tensor:
    return binary(L.vf_logical_or, a, b, "logical_or")


def _xor(a: Any, b: Any) -> Tensor:
    return binary(L.vf_not_equal, a, b, "logical_xor")


def _neg(a: Tensor, _f: Any = L.vf_neg) -> Tensor:
    ctx = a._ctx
    return wrap(ctx, _f(ctx.handle, a._h))


def _abs(a: Tensor) -> Tensor:
    return unary(L.vf_abs, a)


_METHODS = {
    "__add__": binary_op(L.vf_add, "add"),
    "__radd__": binary_rop(L.vf_add, "add"),
    "__sub__": binary_op(L.vf_sub, "subtract"),
    "__rsub__": binary_rop(L.vf_sub, "subtract"),
    "__mul__": binary_op(L.vf_mul, "multiply"),
    "__rmul__": binary_rop(L.vf_mul, "multiply"),
    "__truediv__": m.divide,
    "__rtruediv__": _swap(m.divide),
    "__floordiv__": m.floordiv,
    "__rfloordiv__": _swap(m.floordiv),
    "__mod__": m.floormod,
    "__rmod__": _swap(m.floormod),
    "__pow__": m.pow,
    "__rpow__": _swap(m.pow),
    "__matmul__": m.matmul,
    "__rmatmul__": _swap(m.matmul),
    "__neg__": _neg,
    "__pos__": lambda a: a,
    "__abs__": _abs,
    "__invert__": lambda a: unary(L.vf_logical_not, a),
    "__and__": _and,
    "__rand__": _swap(_and),
    "__or__": _or,
    "__ror__": _swap(_or),
    "__xor__": _xor,
    "__rxor__": _swap(_xor),
    "__lt__": m.less,
    "__le__": m.less_equal,
    "__gt__": m.greater,
    "__ge__": m.greater_equal,
    "__eq__": lambda a, b: NotImplemented if b is None else m.equal(a, b),
    "__ne__": lambda a, b: NotImplemented if b is None else m.not_equal(a, b),
    "__getitem__": array_ops.getitem,
}

for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)


def _set_shape(self: Tensor, shape: Any) -> None:
    if not self.shape.is_compatible_with(shape):
        raise ValueError(f"vkfuse: shape {list(self.shape)} is not compatible with {list(shape)}")


Tensor.set_shape = _set_shape  # type: ignore[attr-defined]
