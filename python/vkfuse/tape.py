"""tf.GradientTape over ``vf_tape``.

The C tape records every op of its context from ``vf_tape_begin`` to
``vf_tape_end`` and holds what it recorded. TF's tape stops recording at the
end of its ``with`` block but its gradient is taken afterwards, so the C
tape stays open until the gradient is taken (a non-persistent tape: its
first ``gradient`` call) or the tape object is dropped (a persistent one):
ops run between the block's end and then are recorded too, which changes
no gradient of a target computed in the block. ``stop_recording`` marks the
results made inside it with stop_gradient, so no gradient flows through
them (as if they were not recorded). A source the target does not depend
on (or only through stop_gradient) gets ``None``, as TF's default
``unconnected_gradients=UnconnectedGradients.NONE``; ``'zero'`` gives zeros
of its shape (the C tape's VF_TAPE_UNCONNECTED_NULL flag tells which).
"""
from __future__ import annotations

import contextlib
import ctypes
from typing import Any, Iterator, List, Optional

from . import _context, errors, nest
from . import tensor as _tensor
from ._core import L
from .tensor import Tensor, wrap


class UnconnectedGradients:
    """tf.UnconnectedGradients: what gradient() gives a source the target does not depend on."""
    NONE = "none"
    ZERO = "zero"


def _unconnected_is_zero(u: Any) -> bool:
    v = getattr(u, "value", u)  # an enum member from TF-style code
    if isinstance(v, str) and v.lower() in ("none", "zero"):
        return v.lower() == "zero"
    raise ValueError(f"vkfuse.GradientTape.gradient: unconnected_gradients={u!r}; pass "
                     "UnconnectedGradients.NONE ('none', the default) or UnconnectedGradients.ZERO ('zero')")


class GradientTape:
    """Records ops for gradients: ``with GradientTape() as tape: ...; tape.gradient(y, x)``."""

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True) -> None:
        self._persistent = bool(persistent)
        self._watch_vars = bool(watch_accessed_variables)
        self._h: Optional[int] = None
        self._ctx: Optional[_context.Context] = None
        self._used = False
        self._watched: List[Tensor] = []

    def __enter__(self) -> "GradientTape":
        if self._h is not None:
            raise ValueError("vkfuse.GradientTape: this tape is already recording; use a new tape")
        ctx = _context.context()
        h = L.vf_tape_begin(ctx.handle)
        if not h:
            ctx.raise_error()
        self._h, self._ctx, self._used = h, ctx, False
        return self

    def __exit__(self, *exc: object) -> None:
        if exc and exc[0] is not None:
            self._end()

    def _end(self) -> None:
        h, self._h = self._h, None
        if h is not None and self._ctx is not None and self._ctx._h is not None:
            L.vf_tape_end(h)

    def __del__(self) -> None:
        try:
            self._end()
        except Exception:
            pass

    def watch(self, tensor: Any) -> None:
        """Watches tensors (any nested structure): the C tape records every op, so this only checks them."""
        for t in nest.flatten(tensor):
            if not isinstance(t, Tensor):
                raise ValueError(f"vkfuse.GradientTape.watch: {t!r} is not a tensor")
            self._watched.append(t)

    def watched_variables(self) -> tuple:
        return tuple(self._watched)

    def reset(self) -> None:
        self._end()
        self.__enter__()

    @contextlib.contextmanager
    def stop_recording(self) -> Iterator[None]:
        _tensor.stop_recording += 1
        try:
            yield
        finally:
            _tensor.stop_recording -= 1

    def gradient(self, target: Any, sources: Any, output_gradients: Any = None,
                 unconnected_gradients: Any = "none") -> Any:
        """d sum(target) / d source for each source, in sources' structure."""
        if self._h is None and self._ctx is None:
            raise RuntimeError("vkfuse.GradientTape.gradient: the tape never recorded; use it as "
                               "`with vkfuse.GradientTape() as tape:` around the computation")
        if self._h is None:
            raise RuntimeError("vkfuse.GradientTape.gradient: a non-persistent tape can be used for "
                               "one gradient call only (and not after it was reset or its context "
                               "closed); use GradientTape(persistent=True) for several")
        ctx = self._ctx
        assert ctx is not None
        zero = _unconnected_is_zero(unconnected_gradients)
        from .math_ops import add, multiply, reduce_sum
        targets = nest.flatten(target)
        ogs = nest.flatten(output_gradients) if output_gradients is not None else [None] * len(targets)
        if len(ogs) != len(targets):
            raise ValueError("vkfuse.GradientTape.gradient: output_gradients must match target's structure")
        total: Optional[Tensor] = None
        for t, og in zip(targets, ogs):
            if not isinstance(t, Tensor):
                raise ValueError(f"vkfuse.GradientTape.gradient: target {t!r} is not a tensor")
            if og is not None:
                t = reduce_sum(multiply(t, og))
            elif len(targets) > 1:
                t = reduce_sum(t)
            total = t if total is None else add(total, t)
        flat = nest.flatten(sources)
        for s in flat:
            if not isinstance(s, Tensor):
                raise ValueError(f"vkfuse.GradientTape.gradient: source {s!r} is not a tensor or variable")
            if s._ctx is not ctx:
                raise errors.invalid("vkfuse.GradientTape.gradient: a source belongs to another context "
                                     "than the tape's")
        n = len(flat)
        srcs = (ctypes.c_void_p * max(n, 1))(*[s.handle for s in flat])
        out = (ctypes.c_void_p * max(n, 1))()
        if total is None or total._ctx is not ctx:
            raise errors.invalid("vkfuse.GradientTape.gradient: the target belongs to another context")
        outer = _tensor.deferred
        if outer is None:  # a kernel's Python grad may run: its releases wait (kernels.py)
            _tensor.deferred = []
        try:
            st = L.vf_tape_gradient_ex(self._h, total.handle, n, srcs, out, 0 if zero else 1)
        finally:
            if outer is None:
                from . import graph_control
                handles, _tensor.deferred = _tensor.deferred, None
                handles += graph_control.orphans
                graph_control.orphans.clear()
                if handles:
                    graph_control.release_dropped(ctx, handles)
        if not self._persistent:
            self._end()
        from .kernels import take_pending
        err = take_pending()
        if err is not None:
            L.vf_error_clear(ctx.handle)
            raise err
        if st != 0:
            ctx.raise_error()
        grads = [wrap(ctx, out[i]) if out[i] else None for i in range(n)]
        return nest.pack_sequence_as(sources, grads)

    def jacobian(self, target: Any, sources: Any, **kw: Any) -> Any:
        raise errors.UnimplementedError(None, None, "vkfuse.GradientTape.jacobian is not available; "
                                        "take gradient of each element", "VF_ERROR_UNSUPPORTED")
