"""tf.Variable: a persistent, mutable tensor (a ``vf_variable``)."""
from __future__ import annotations

import itertools
from typing import Any, Optional

from . import _context, dtypes, errors
from ._core import L, tensor as _t
from .tensor import Tensor, _new, constant, wrap

_ids = itertools.count()
creation_hook = None  # graph_control's: variables created while a vkfuse.function traces


class Variable(Tensor):
    """A variable: it keeps its dtype and shape; ``assign*`` changes its value for later readers.

    It is a Tensor, so that ops and operators take it as it is (they read
    the value it has when they run). Tapes watch trainable variables.
    """

    __slots__ = ("_name", "_trainable")

    def __init__(self, initial_value: Any = None, trainable: bool = True, validate_shape: bool = True,
                 caching_device: Any = None, name: Optional[str] = None, variable_def: Any = None,
                 dtype: Any = None, import_scope: Any = None, constraint: Any = None,
                 synchronization: Any = None, aggregation: Any = None, shape: Any = None,
                 experimental_enable_variable_lifting: Any = None) -> None:
        self._h = None
        if creation_hook is not None and creation_hook(self, initial_value, trainable, name, dtype):
            return  # a variable lifted out of a vkfuse.function trace (graph_control.py)
        if initial_value is None:
            raise ValueError("vkfuse.Variable: initial_value must be given")
        if callable(initial_value):
            initial_value = initial_value()
        init = _t(initial_value, dtype=dtype) if not isinstance(initial_value, Tensor) else initial_value
        if dtype is not None and init.dtype != dtypes.as_dtype(dtype):
            from .math_ops import cast
            init = cast(init, dtype)
        ctx = init._ctx
        self._ctx = ctx
        self._h = wrap(ctx, L.vf_variable(ctx.handle, init._h))._detach()
        self._name = (name or "Variable") + ":0"
        self._trainable = bool(trainable)

    @property
    def name(self) -> str:
        return self._name

    @property
    def trainable(self) -> bool:
        return self._trainable

    def _assign(self, f: Any, value: Any, what: str) -> "Variable":
        ctx = self._ctx
        ctx.handle
        v = value if isinstance(value, Tensor) else _t(value, ctx, self.dtype)
        if v._ctx is not ctx:
            raise errors.invalid(f"vkfuse.Variable.{what}: the value belongs to another context (device); "
                                 "copy it with vkfuse.copy_to first")
        ctx.check(f(self._h, v._h))
        return self

    def assign(self, value: Any, use_locking: Any = None, name: Any = None, read_value: bool = True) -> Any:
        return self._assign(L.vf_assign, value, "assign")

    def assign_add(self, delta: Any, use_locking: Any = None, name: Any = None,
                   read_value: bool = True) -> Any:
        return self._assign(L.vf_assign_add, delta, "assign_add")

    def assign_sub(self, delta: Any, use_locking: Any = None, name: Any = None,
                   read_value: bool = True) -> Any:
        return self._assign(L.vf_assign_sub, delta, "assign_sub")

    def read_value(self) -> Tensor:
        """The current value as a tensor that later assigns do not change."""
        from .math_ops import add
        return add(self, 0) if not self.dtype.is_bool else _t(self.numpy())

    def value(self) -> Tensor:
        return self.read_value()

    def __getitem__(self, key: Any) -> "VariableSlice":
        """v[key] is a tensor (its value now) with ``assign``, ``assign_add``
        and ``assign_sub`` that change those elements of v, as TF's."""
        from .array_ops import getitem
        t = getitem(self, key)
        sl = _new(VariableSlice)
        sl._ctx, sl._h = t._ctx, t._detach()
        sl._var, sl._key = self, key
        return sl

    def __repr__(self) -> str:
        if self._ctx._h is None:
            return "<vkfuse.Variable (its context was closed)>"
        import numpy as np
        return (f"<vkfuse.Variable '{self._name}' shape={self.shape} dtype={self.dtype.name}, "
                f"numpy={np.array2string(np.asarray(self.numpy()), separator=', ')}>")

    __str__ = __repr__
    __hash__ = None  # type: ignore[assignment]  # as TF2's: use .ref() for dict keys


class VariableSlice(Tensor):
    """``v[key]``: the elements' value, and assigns that write them into v.
    An assign writes the whole variable: v's other elements are kept with a
    mask (where), so the written ones are exactly the new values."""

    __slots__ = ("_var", "_key")

    def _write(self, value: Any, what: str) -> Variable:
        import numpy as np
        from .array_ops import broadcast_to, reshape, tensor_scatter_nd_add, zeros_like
        from .math_ops import where
        var = self._var
        shape = [int(d) for d in var.shape]
        n = int(np.prod(shape)) if shape else 1
        pos = np.arange(n, dtype=np.int32).reshape(shape)[self._key]  # the flat positions the key names
        pos = np.asarray(pos, np.int32).reshape(-1, 1)
        v = value if isinstance(value, Tensor) else _t(value, var._ctx, var.dtype)
        try:
            v = broadcast_to(v, list(self.shape))
        except errors.InvalidArgumentError:
            raise errors.invalid(f"vkfuse.Variable[...].{what}: the value has shape {v.shape}, the slice "
                                 f"{self.shape} of the variable's {var.shape}", "VF_ERROR_SHAPE") from None
        flat = reshape(var, [-1])
        mask = np.zeros([n], np.bool_)
        mask[pos[:, 0]] = True
        new = where(mask, tensor_scatter_nd_add(zeros_like(flat), pos, reshape(v, [-1])), flat)
        return var.assign(reshape(new, shape))

    def assign(self, value: Any, use_locking: Any = None, name: Any = None, read_value: bool = True) -> Any:
        return self._write(value, "assign")

    def assign_add(self, delta: Any, use_locking: Any = None, name: Any = None,
                   read_value: bool = True) -> Any:
        from .math_ops import add
        return self._write(add(self, delta), "assign_add")

    def assign_sub(self, delta: Any, use_locking: Any = None, name: Any = None,
                   read_value: bool = True) -> Any:
        from .math_ops import subtract
        return self._write(subtract(self, delta), "assign_sub")


def _detach(self: Tensor) -> int:
    """Takes the handle out of a Tensor so that only the new owner releases it."""
    h, self._h = self._h, None
    return h


Tensor._detach = _detach  # type: ignore[attr-defined]
