"""Variables passed as arguments to a vkfuse.function go by value, as in TF 2.

TF keys a tf.Variable argument by its dtype and shape, so calling a
function with another variable of the same shape reuses the trace. The C
library captures a variable *input* by reference per concrete function, so
passing it as it is would trace once per variable. Instead the call passes
the variable's current value as an ordinary input; the body sees a Proxy
(a Variable whose value is a symbolic tensor: reads see the latest assign,
assign* make a new symbolic value); the final values of the proxies the
body assigned come back as extra outputs, and the call assigns them to the
variables actually passed.

Aliasing: the same variable passed twice is one proxy (the cache key holds
which arguments are the same variable, so a call aliasing differently
traces again, as TF). A passed variable that the body also uses directly
(a closure) cannot be a proxy: during the trace the passed variables are
Poisoned, and touching one raises Alias, on which the function falls back
to passing those variables by reference (one trace per variable).
"""
from __future__ import annotations

from . import errors
from .variables import Variable


class Alias(ValueError):
    """A variable passed as an argument was also used directly by the body."""


class Proxy(Variable):
    """A passed variable inside the trace: its value is a symbolic tensor."""

    __slots__ = ("_cur", "assigned")

    # Tensor's methods read self._h: here the current symbolic value's handle
    _h = property(lambda self: self._cur._h, lambda self, h: None)

    def __del__(self):
        pass

    def _set(self, value, what):
        from .array_ops import broadcast_to, zeros_like
        from .math_ops import add
        from ._core import tensor as _t
        from .tensor import Tensor
        cur = self._cur
        v = value if isinstance(value, Tensor) else _t(value, self._ctx, self.dtype)
        if v.dtype != cur.dtype:
            raise errors.invalid(f"vkfuse.Variable.{what} (a variable argument of a vkfuse.function): the value's "
                                 f"dtype is {v.dtype.name}, the variable's {cur.dtype.name}; cast it first")
        if tuple(v.shape) != tuple(cur.shape):
            if not cur.shape.is_fully_defined():
                v = add(v, zeros_like(cur))
            else:
                try:
                    v = broadcast_to(v, list(cur.shape))
                except errors.InvalidArgumentError:
                    raise errors.invalid(f"vkfuse.Variable.{what} (a variable argument of a vkfuse.function): the "
                                         f"value has shape {v.shape}, the variable {cur.shape}",
                                         "VF_ERROR_SHAPE") from None
        self._cur = v
        self.assigned = True
        return self

    def assign(self, value, use_locking=None, name=None, read_value=True):
        return self._set(value, "assign")

    def assign_add(self, delta, use_locking=None, name=None, read_value=True):
        from .math_ops import add
        return self._set(add(self._cur, delta), "assign_add")

    def assign_sub(self, delta, use_locking=None, name=None, read_value=True):
        from .math_ops import subtract
        return self._set(subtract(self._cur, delta), "assign_sub")


def proxy(meta, value):
    """The body's stand-in for a variable (meta: its context, name and
    trainable), whose value is the input value."""
    p = Proxy.__new__(Proxy)
    p._cur, p.assigned = value, False
    p._ctx, p._name, p._trainable = meta
    return p


class Poisoned(Variable):
    """A passed variable while its proxy traces: any direct use is aliasing."""

    __slots__ = ()

    @property
    def _h(self):
        raise Alias("vkfuse.function: the variable '%s' is passed as an argument and also used directly (by "
                    "closure) in the body" % Variable.name.fget(self))

    def __del__(self):
        pass


def poison(variables):
    """Marks the passed variables for the trace (undone by unpoison)."""
    for v in variables:
        v.__class__ = Poisoned


def unpoison(variables):
    for v in variables:
        v.__class__ = Variable


def by_value(value):
    """Whether an argument is a variable this module passes by value."""
    return type(value) is Variable
