"""Element types, named as TensorFlow's (``vkfuse.float32``, ...).

vkfuse has f32, f16, i32, u32 and bool. TensorFlow's wider types are
accepted as names and narrowed, so that TF code asking for them runs:
``float64`` is stored as float32, ``int64``/``int16``/``int8`` as int32,
``uint64``/``uint16``/``uint8`` as uint32 (a tensor's ``.dtype`` says what it
holds). Complex, string and the quantized types are not available.
"""
from __future__ import annotations

import builtins as _builtins
from typing import Any, Dict

import numpy as np

VF_F32, VF_F16, VF_I32, VF_U32, VF_BOOL = 0, 1, 2, 3, 4


class DType:
    """An element type: ``name``, ``as_numpy_dtype``, ``size``, ``is_floating``..."""

    __slots__ = ("name", "_vf", "_np", "_stored")

    def __init__(self, name: str, vf: int, npt: Any, stored: "DType" = None) -> None:
        self.name = name
        self._vf = vf
        self._np = np.dtype(npt)
        self._stored = stored if stored is not None else self

    @property
    def as_numpy_dtype(self) -> type:
        return self._np.type

    @property
    def base_dtype(self) -> "DType":
        return self

    @property
    def size(self) -> int:
        return self._stored._np.itemsize

    @property
    def is_floating(self) -> bool:
        return self._vf in (VF_F32, VF_F16)

    @property
    def is_integer(self) -> bool:
        return self._vf in (VF_I32, VF_U32)

    @property
    def is_bool(self) -> bool:
        return self._vf == VF_BOOL

    @property
    def is_unsigned(self) -> bool:
        return self._vf in (VF_U32, VF_BOOL)

    @property
    def is_complex(self) -> bool:
        return False

    @property
    def is_numpy_compatible(self) -> bool:
        return True

    @property
    def min(self) -> Any:
        if self.is_bool:
            return False
        i = np.finfo(self._stored._np) if self.is_floating else np.iinfo(self._stored._np)
        return i.min

    @property
    def max(self) -> Any:
        if self.is_bool:
            return True
        i = np.finfo(self._stored._np) if self.is_floating else np.iinfo(self._stored._np)
        return i.max

    def __repr__(self) -> str:
        return f"vkfuse.{self.name}"

    def __str__(self) -> str:
        # as TF prints a dtype: print(x.dtype) gives <dtype: 'float32'>
        return f"<dtype: '{self.name}'>"

    def __eq__(self, other: object) -> bool:
        if other is None:
            return False
        try:
            return as_dtype(other)._vf == self._vf  # type: ignore[arg-type]
        except TypeError:
            return False

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self._vf)

    def __reduce__(self) -> Any:
        return as_dtype, (self.name,)


float32 = DType("float32", VF_F32, np.float32)
float16 = DType("float16", VF_F16, np.float16)
int32 = DType("int32", VF_I32, np.int32)
uint32 = DType("uint32", VF_U32, np.uint32)
bool = DType("bool", VF_BOOL, np.bool_)  # noqa: A001 (TF's name)
half = float16
# Narrowed names (see the module doc): they compare equal to what they store.
float64 = DType("float64", VF_F32, np.float32, float32)
double = float64
int64 = DType("int64", VF_I32, np.int32, int32)
int16 = DType("int16", VF_I32, np.int32, int32)
int8 = DType("int8", VF_I32, np.int32, int32)
uint64 = DType("uint64", VF_U32, np.uint32, uint32)
uint16 = DType("uint16", VF_U32, np.uint32, uint32)
uint8 = DType("uint8", VF_U32, np.uint32, uint32)

BY_VF = {VF_F32: float32, VF_F16: float16, VF_I32: int32, VF_U32: uint32, VF_BOOL: bool}

_BY_NAME: Dict[str, DType] = {d.name: d for d in (float32, float16, int32, uint32, bool, float64,
                                                   int64, int16, int8, uint64, uint16, uint8)}
_BY_NAME.update({"half": float16, "double": float64, "float": float32, "f32": float32,
                 "f16": float16, "i32": int32, "u32": uint32})
_BY_NP: Dict[np.dtype, DType] = {
    np.dtype(np.float32): float32, np.dtype(np.float16): float16, np.dtype(np.float64): float64,
    np.dtype(np.int32): int32, np.dtype(np.int64): int64, np.dtype(np.int16): int16,
    np.dtype(np.int8): int8, np.dtype(np.uint32): uint32, np.dtype(np.uint64): uint64,
    np.dtype(np.uint16): uint16, np.dtype(np.uint8): uint8, np.dtype(np.bool_): bool,
}


def as_dtype(type_value: Any) -> DType:
    """tf.as_dtype: a DType from a DType, a name, a NumPy dtype or a Python type."""
    if isinstance(type_value, DType):
        return type_value
    if isinstance(type_value, str) and type_value in _BY_NAME:
        return _BY_NAME[type_value]
    if type_value is float:
        return float32
    if type_value is int:
        return int32
    if type_value is _builtins.bool:
        return bool
    try:
        npt = np.dtype(type_value)
    except TypeError:
        npt = None
    if npt is not None and npt in _BY_NP:
        return _BY_NP[npt]
    raise TypeError(f"vkfuse: cannot convert {type_value!r} to a dtype; vkfuse has float32, float16, "
                    "int32, uint32 and bool (float64 and int64 are narrowed to float32 and int32)")


def cast(x, dtype, name=None):  # noqa: ANN001,ANN201  (tf.dtypes.cast is tf.cast)
    from .math_ops import cast as _cast
    return _cast(x, dtype)
