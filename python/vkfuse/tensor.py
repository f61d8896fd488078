"""The Tensor class, TensorShape, and conversion of Python / NumPy values.

A ``Tensor`` wraps one ``vf_tensor*`` of a context. The C op put the new
tensor in the context's root scope; the Tensor's ``__del__`` releases that
ownership (``vf_tensor_release``), which frees it unless a tape or a
variable still uses it, so that tensors go when Python drops them. A
tensor whose context was closed releases nothing (the context freed it).
"""
from __future__ import annotations

import ctypes
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _context, _lib, dtypes, errors

_L = _lib.lib
_release = _L.vf_tensor_release
_status_get = _L.vf_status_get
_error_clear = _L.vf_error_clear
_read = _L.vf_tensor_read
_rank = _L.vf_tensor_rank
_dim = _L.vf_tensor_dim
_dtype = _L.vf_tensor_dtype
_from_host = _L.vf_tensor_from_host
_I64 = ctypes.c_int64
# While a vkfuse.function traces, released handles are collected here and
# released after the trace (function.py): the trace's scope frees its
# symbolic tensors itself, and the library reads a body's outputs after
# the body returned (a tape holds what it recorded by itself).
deferred: Optional[List[int]] = None
# > 0 while Python code runs as a body the library calls (graph_control.py):
# what it makes belongs to the body's scope, so it must not be cached
body_depth = 0


class TensorShape(tuple):
    """A shape: a tuple of ints (``None`` for a dim that is not known)."""

    @property
    def rank(self) -> int:
        return len(self)

    ndims = rank

    @property
    def dims(self) -> List[Optional[int]]:
        return list(self)

    def as_list(self) -> List[Optional[int]]:
        return list(self)

    def num_elements(self) -> Optional[int]:
        if any(d is None for d in self):
            return None
        n = 1
        for d in self:
            n *= d
        return n

    def is_fully_defined(self) -> bool:
        return all(d is not None for d in self)

    def is_compatible_with(self, other: Iterable[Optional[int]]) -> bool:
        other = tuple(other)
        return len(other) == len(self) and all(a is None or b is None or a == b
                                                for a, b in zip(self, other))

    def __getitem__(self, key: Any) -> Any:
        r = tuple.__getitem__(self, key)
        return TensorShape(r) if isinstance(key, slice) else r

    # TF's shapes compare equal to lists and concatenate with them
    def __eq__(self, other: Any) -> bool:
        if isinstance(other, list):
            other = tuple(other)
        return tuple.__eq__(self, other)

    def __ne__(self, other: Any) -> bool:
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = tuple.__hash__

    def __add__(self, other: Any) -> "TensorShape":
        return TensorShape(tuple(self) + tuple(other))

    def __radd__(self, other: Any) -> "TensorShape":
        return TensorShape(tuple(other) + tuple(self))

    def concatenate(self, other: Any) -> "TensorShape":
        return self + other

    def __repr__(self) -> str:
        return f"TensorShape({list(self)})"

    def __str__(self) -> str:
        return "(" + ", ".join("None" if d is None else str(d) for d in self) + \
            ("," if len(self) == 1 else "") + ")"


class Tensor:
    """An immutable tensor of one context (``tf.Tensor``)."""

    __slots__ = ("_h", "_ctx", "_in_body", "__weakref__")
    # ndarray <op> Tensor gives a Tensor: NumPy defers to the higher priority.
    __array_priority__ = 100

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("vkfuse.Tensor cannot be made directly; use vkfuse.constant, "
                        "vkfuse.convert_to_tensor or an op")

    def __del__(self, _release: Any = _release) -> None:
        # The context's handle is None once it was closed: then it freed
        # this tensor already. Default argument: still bound at shutdown.
        try:
            h = self._h
            if h and self._ctx._h is not None:
                self._h = None
                if deferred is not None:
                    deferred.append(h)  # a vkfuse.function is tracing: released after it
                elif getattr(self, "_in_body", False):
                    # Made in a body the library called and dropped after it
                    # (kept alive by a traceback, say): the body's scope or
                    # the trace may have freed it already, and releasing it
                    # again must not leave that error on the context.
                    ctx = self._ctx._h
                    clean = _status_get(ctx) == 0
                    _release(h)
                    if clean:
                        _error_clear(ctx)
                else:
                    _release(h)
        except AttributeError:
            pass

    # ---- identity --------------------------------------------------------
    @property
    def handle(self) -> int:
        """The ``vf_tensor*`` as an int (raises if the context is gone)."""
        self._ctx.handle
        return self._h

    @property
    def context(self) -> "_context.Context":
        return self._ctx

    @property
    def device(self) -> str:
        return self._ctx.device_name

    @property
    def dtype(self) -> dtypes.DType:
        self._ctx.handle
        return dtypes.BY_VF[_dtype(self._h)]

    @property
    def shape(self) -> TensorShape:
        self._ctx.handle
        h = self._h
        return TensorShape([_dim(h, i) for i in range(_rank(h))])

    @property
    def ndim(self) -> int:
        self._ctx.handle
        return _rank(self._h)

    def get_shape(self) -> TensorShape:
        return self.shape

    @property
    def name(self) -> str:
        return ""

    # ---- values ----------------------------------------------------------
    def numpy(self) -> Any:
        """The value as a NumPy array (a NumPy scalar for a rank-0 tensor): one copy."""
        ctx = self._ctx
        ctx.handle
        h = self._h
        r = _rank(h)
        shape = tuple(_dim(h, i) for i in range(r))
        a = np.empty(shape, dtypes.BY_VF[_dtype(h)]._np)
        if a.nbytes:
            st = _read(h, a.ctypes.data, a.nbytes)
            if st != 0:
                ctx.raise_error()
        return a[()] if r == 0 else a

    def __format__(self, spec: str) -> str:
        # f"{loss:.4f}" as with TF's eager tensors: a scalar formats as its value.
        if not spec:
            return str(self)
        return format(self.numpy().item() if self.ndim == 0 else self.numpy(), spec)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = np.asarray(self.numpy())
        return a if dtype is None else a.astype(dtype, copy=False)

    def __bool__(self) -> bool:
        if self.shape.num_elements() != 1:
            raise ValueError("vkfuse: the truth value of a tensor of more than one element is "
                             "ambiguous; use reduce_any or reduce_all")
        return bool(self.numpy())

    def __float__(self) -> float:
        return float(self.numpy())

    def __int__(self) -> int:
        return int(self.numpy())

    def __index__(self) -> int:
        if not self.dtype.is_integer:
            raise TypeError("vkfuse: only integer scalar tensors can be used as an index")
        return int(self.numpy())

    def __len__(self) -> int:
        s = self.shape
        if not s:
            raise TypeError("vkfuse: len() of a scalar tensor (rank 0)")
        return s[0]

    def __iter__(self) -> Any:
        n = len(self)
        for i in range(n):
            yield self[i]

    def _symbolic_text(self) -> Optional[str]:
        """While a vkfuse.function traces: TF's text for a graph tensor
        (None dims where the input_signature has them), else None."""
        if deferred is None:
            return None
        from ._fn_lib import L as fl
        if not fl.vf_context_tracing(self._ctx._h):
            return None
        sym = fl.vf_tensor_symbolic_dims(self._h)
        shape = TensorShape(None if sym >> i & 1 else d for i, d in enumerate(self.shape))
        from .graph_control import input_names
        name = input_names.get(self._h, "symbolic")
        return f'Tensor("{name}", shape={shape}, dtype={self.dtype.name})'

    def __repr__(self) -> str:
        if self._ctx._h is None:
            return "<vkfuse.Tensor (its context was closed)>"
        s = self._symbolic_text()
        if s is not None:
            return s
        return f"<vkfuse.Tensor: shape={self.shape}, dtype={self.dtype.name}, numpy={self._numpy_text(True)}>"

    def __str__(self) -> str:
        if self._ctx._h is None:
            return "<vkfuse.Tensor (its context was closed)>"
        s = self._symbolic_text()
        if s is not None:
            return s
        return f"vkfuse.Tensor({self._numpy_text(False)}, shape={self.shape}, dtype={self.dtype.name})"

    def _numpy_text(self, is_repr: bool) -> str:
        """The value as TF writes it in repr and str: NumPy's repr (with
        ``array(`` and the dtype) or str of the array, a scalar as NumPy
        prints it, and a newline first when the text spans lines."""
        a = self.numpy()
        if not self.ndim:
            return str(a)
        text = repr(a) if is_repr else str(a)
        return "\n" + text if "\n" in text else text

    # TF2 tensors compare elementwise and so are unhashable; .ref() keys a dict.
    __hash__ = None  # type: ignore[assignment]

    def ref(self) -> "_Ref":
        return _Ref(self)

    def __reduce__(self) -> Any:
        return (_rebuild, (self.numpy(),))

    def __copy__(self) -> "Tensor":
        return self

    def __deepcopy__(self, memo: Any) -> "Tensor":
        return self


class _Ref:
    __slots__ = ("_t",)

    def __init__(self, t: Tensor) -> None:
        self._t = t

    def deref(self) -> Tensor:
        return self._t

    def __hash__(self) -> int:
        return id(self._t)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Ref) and other._t is self._t


def _rebuild(a: np.ndarray) -> Tensor:
    return constant(a)


_new = object.__new__


# > 0 inside GradientTape.stop_recording: results are wrapped in
# stop_gradient so that no gradient flows through them (tape.py).
stop_recording = 0


def wrap(ctx: "_context.Context", h: Optional[int]) -> Tensor:
    """A Tensor owning handle h (an op's result), or the context's error raised."""
    if not h:
        ctx.raise_error()
    if stop_recording:
        g = _L.vf_stop_gradient(ctx._h, h)
        _release(h)
        if not g:
            ctx.raise_error()
        h = g
    t = _new(Tensor)
    t._h = h
    t._ctx = ctx
    if body_depth:
        t._in_body = True
    return t


def _np_value(value: Any, dt: Optional[dtypes.DType]) -> np.ndarray:
    """value as a contiguous ndarray of vkfuse's storage type for dt (inferred when None)."""
    if dt is None:
        a = np.asarray(value)
        if a.dtype == object:
            a = np.asarray(_flatten_tensors(value))
        try:
            dt = dtypes.as_dtype(a.dtype)
        except TypeError:
            raise TypeError(f"vkfuse: cannot make a tensor of {type(value).__name__} with NumPy "
                            f"dtype {a.dtype}; vkfuse has float32, float16, int32, uint32 and bool") from None
        if a.dtype.kind == "f" and a.size == 0 and a.dtype != np.float16:
            dt = dtypes.float32
    else:
        a = np.asarray(value) if not isinstance(value, (list, tuple)) else np.asarray(_flatten_tensors(value))
    npt = dt._stored._np
    if a.dtype != npt:
        if dt.is_integer and a.dtype.kind == "f" and np.any(np.asarray(a) != np.trunc(a)):
            raise TypeError(f"vkfuse: cannot convert {value!r} to {dt.name} (it has a fraction); "
                            "cast it explicitly with vkfuse.cast")
        a = a.astype(npt)
    return a if a.flags.c_contiguous else a.copy(order="C")


def _flatten_tensors(value: Any) -> Any:
    """Lists that hold tensors (``[t0, t1]``) as plain values for np.asarray."""
    if isinstance(value, Tensor):
        return value.numpy()
    if isinstance(value, (list, tuple)):
        return [_flatten_tensors(v) for v in value]
    return value


def from_numpy(ctx: "_context.Context", a: np.ndarray) -> Tensor:
    """A tensor of ctx holding the contiguous array a (of a vkfuse storage type)."""
    dt = dtypes.as_dtype(a.dtype)
    shape = (_I64 * max(a.ndim, 1))(*a.shape)
    return wrap(ctx, _from_host(ctx.handle, dt._vf, a.ndim, shape, a.ctypes.data if a.size else None))


def constant(value: Any, dtype: Any = None, shape: Optional[Sequence[int]] = None,
             name: Optional[str] = None) -> Tensor:
    """tf.constant: a tensor from a Python value, a NumPy array or a tensor."""
    dt = dtypes.as_dtype(dtype) if dtype is not None else None
    ctx = _context.context()
    if isinstance(value, Tensor):
        if dt is not None and value.dtype != dt:
            from . import _ops
            value = _ops.cast(value, dt)
        if shape is not None:
            from . import _ops
            value = _ops.reshape(value, shape)
        return value
    a = _np_value(value, dt)
    if shape is not None:
        shape = tuple(int(d) for d in shape)
        if a.size == 1:
            a = np.broadcast_to(a.reshape(()), shape).copy()
        elif int(np.prod(shape)) == a.size:
            a = a.reshape(shape)
        else:
            raise TypeError(f"vkfuse.constant: {a.size} values do not fill shape {list(shape)} "
                            f"(expected {int(np.prod(shape))} values or one)")
    return from_numpy(ctx, a)


def convert_to_tensor(value: Any, dtype: Any = None, dtype_hint: Any = None,
                      name: Optional[str] = None) -> Tensor:
    """tf.convert_to_tensor: a tensor as it is, anything else through constant."""
    if isinstance(value, Tensor):
        if dtype is not None and value.dtype != dtypes.as_dtype(dtype):
            raise errors.invalid(f"vkfuse.convert_to_tensor: the tensor has dtype {value.dtype.name}, "
                                 f"{dtypes.as_dtype(dtype).name} was requested; cast it with vkfuse.cast",
                                 "VF_ERROR_DTYPE")
        return value
    if dtype is None and dtype_hint is not None:
        try:
            return constant(value, dtype_hint)
        except (TypeError, ValueError):
            pass
    return constant(value, dtype)


def is_tensor(x: Any) -> bool:
    return isinstance(x, Tensor)
