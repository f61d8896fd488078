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
Sources TF's tape would not watch (integer ones; variables not trainable,
or with ``watch_accessed_variables=False``, and not ``watch``ed) are
unconnected too, as in TF.
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
        _tensor.here.stop_recording += 1  # this thread's ops only, as TF's tapes
        _tensor.mark(1)
        try:
            yield
        finally:
            _tensor.here.stop_recording -= 1
            _tensor.mark(-1)

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
        dead = [self._unwatched(s) for s in flat]
        if n and all(dead):  # TF's answer without the C tape (which refuses an integer target)
            if not self._persistent:
                self._end()
            if zero:
                from .array_ops import zeros_like
                return nest.pack_sequence_as(sources, [zeros_like(s) for s in flat])
            return nest.pack_sequence_as(sources, [None] * n)
        srcs = (ctypes.c_void_p * max(n, 1))(*[s.handle for s in flat])
        out = (ctypes.c_void_p * max(n, 1))()
        if total is None or total._ctx is not ctx:
            raise errors.invalid("vkfuse.GradientTape.gradient: the target belongs to another context")
        opened = _tensor.defer_open(ctx)  # a kernel's Python grad may run: its releases wait (kernels.py)
        try:
            st = L.vf_tape_gradient_ex(self._h, total.handle, n, srcs, out, 0 if zero else 1)
        finally:
            if opened:
                from . import graph_control
                graph_control.defer_end(ctx)
        if not self._persistent:
            self._end()
        from .kernels import take_pending
        err = take_pending()
        if err is not None:
            L.vf_error_clear(ctx.handle)
            raise err
        if st != 0:
            ctx.raise_error()
        grads = [None if dead[i] or not out[i] else wrap(ctx, out[i]) for i in range(n)]
        if zero:
            from .array_ops import zeros_like
            grads = [zeros_like(s) if g is None else g for s, g in zip(flat, grads)]
        return nest.pack_sequence_as(sources, grads)

    def _unwatched(self, s: Tensor) -> bool:
        """Sources TF's tape does not watch get None from it: non-float ones
        (integers, bools: no gradient), and variables that were neither
        watched automatically (trainable, watch_accessed_variables=True) nor
        watched by hand. The C tape records them all; this keeps TF's answer."""
        from .variables import Variable
        if not s.dtype.is_floating:
            return True
        if isinstance(s, Variable) and not (s.trainable and self._watch_vars):
            return not any(w is s for w in self._watched)
        return False

    def jacobian(self, target: Any, sources: Any, unconnected_gradients: Any = "none",
                 parallel_iterations: Any = None, experimental_use_pfor: bool = True) -> Any:
        """d target[i...] / d source[j...] for each source, shaped
        target.shape + source.shape. One gradient per element of target
        (TF vectorises them; vkfuse loops), so it suits small targets."""
        return self._jacobian(target, sources, batch=False)

    def batch_jacobian(self, target: Any, source: Any, unconnected_gradients: Any = "none",
                       parallel_iterations: Any = None, experimental_use_pfor: bool = True) -> Any:
        """d target[b, i...] / d source[b, j...], shaped [B] + target.shape[1:]
        + source.shape[1:]: rows b are independent examples, so one gradient
        per element of a target row gives every row at once."""
        return self._jacobian(target, source, batch=True)

    def _jacobian(self, target: Any, sources: Any, batch: bool) -> Any:
        import numpy as np
        from .array_ops import reshape, stack
        if not isinstance(target, Tensor):
            raise ValueError(f"vkfuse.GradientTape.jacobian: target {target!r} is not a tensor")
        tshape = list(target.shape)
        if batch and not tshape:
            raise ValueError("vkfuse.GradientTape.batch_jacobian: the target needs a batch dimension "
                             "(rank >= 1), got a scalar")
        inner = tshape[1:] if batch else tshape
        n = int(np.prod(inner)) if inner else 1
        flat = nest.flatten(sources)
        keep, self._persistent = self._persistent, True  # n gradient calls on the one tape
        try:
            cols: List[List[Any]] = [[] for _ in flat]
            for i in range(n):
                seed = np.zeros([n], np.float32)
                seed[i] = 1.0
                seed = np.broadcast_to(seed.reshape(inner), tshape).astype(target.dtype.as_numpy_dtype)
                gs = self.gradient(target, flat, output_gradients=_tensor.constant(seed))
                for c, g in zip(cols, gs):
                    c.append(g)
        finally:
            self._persistent = keep
        if not keep:
            self._end()
        out = []
        for s, c in zip(flat, cols):
            sshape = list(s.shape)
            if any(g is None for g in c):
                out.append(None)  # a source TF's tape does not watch, as gradient()
            elif batch:
                j = stack(c, axis=1)  # [B, n, source row...]
                out.append(reshape(j, sshape[:1] + inner + sshape[1:]))
            else:
                out.append(reshape(stack(c, axis=0), inner + sshape))
        return nest.pack_sequence_as(sources, out)

