"""Graph control flow for AutoGraph (vf_cond / vf_while_loop) and the
plumbing every C body callback shares: Python callables as vf_body.

Ownership inside a body: the inputs C passes belong to C, so they are
wrapped as Borrowed tensors (never released by Python). An output must
outlive the Python objects of the body, which die when it returns, so it
gets a reference of its own (vf_tensor_retain); in a trace that is a
symbolic tensor's small record, kept until the context goes, once per
trace, never per call.

Outside a trace (a converted function called as plain Python, eager
tensors), cond and while_loop run in Python: the host knows the values.
"""
from __future__ import annotations

from . import _context, _fn_lib
from . import tensor as _tensor
from .autograph import operators
from .tensor import Tensor, wrap

L = _fn_lib.L


class Borrowed(Tensor):
    """A tensor C lent to a body: its reference stays C's."""

    __slots__ = ()

    def __del__(self):
        pass


def borrow(ctx, h):
    t = Borrowed.__new__(Borrowed)
    t._h = h
    t._ctx = ctx
    return t


def out_handle(t):
    if type(t) is Borrowed:
        return t._h
    return L.vf_tensor_retain(t._h)


class BodyError(Exception):
    """Carries a Python exception raised inside a C callback back out."""


class Callback:
    """fn(list of input tensors) -> list of tensors, as a vf_body. A Python
    exception is kept (pending) and the body returns an error status; the
    caller re-raises it once the C call has returned."""

    def __init__(self, ctx, fn, n_out=None):
        self.ctx = ctx
        self.fn = fn
        self.n_out = n_out
        self.n_in = 0
        self.pending = None
        self.c = _fn_lib.BODY(self._call)

    def _call(self, ctx_h, ins, outs, user):
        try:
            args = [borrow(self.ctx, ins[i]) for i in range(self.n_in)]
            res = self.fn(args)
            if self.n_out is not None and len(res) != self.n_out:
                raise ValueError("a traced body returned %d tensors where %d are needed" % (len(res), self.n_out))
            for k, t in enumerate(res):
                if not isinstance(t, Tensor):
                    raise TypeError("a traced body returned %r where a tensor is needed" % (t,))
                outs[k] = out_handle(t)
            return 0
        except BaseException as e:  # noqa: B902 - carried out, re-raised by the caller
            if self.pending is None:
                self.pending = e
            return _fn_lib.VF_ERROR_INVALID_ARGUMENT

    def check(self, status):
        """Raises the pending Python exception, else the context's error."""
        e, self.pending = self.pending, None
        if e is not None:
            try:
                L.vf_error_clear(self.ctx.handle)
            except Exception:
                pass
            raise e.with_traceback(e.__traceback__)
        if status != 0:
            self.ctx.raise_error()


def tracing(ctx=None):
    ctx = ctx or _context.context()
    return bool(L.vf_context_tracing(ctx.handle))


class Backend:
    """AutoGraph's tensor backend (autograph/operators.py)."""

    def is_tensor(self, x):
        return isinstance(x, Tensor)

    def convert(self, value):
        import numpy as np
        dt = np.bool_ if isinstance(value, bool) else np.int32 if isinstance(value, int) else np.float32
        return _tensor.constant(np.asarray(value, dtype=dt))

    def cond(self, pred, true_fn, false_fn, n):
        ctx = pred._ctx
        if not tracing(ctx):
            return list(true_fn() if bool(pred) else false_fn())
        t = Callback(ctx, lambda _: list(true_fn()), n)
        f = Callback(ctx, lambda _: list(false_fn()), n)
        outs = _fn_lib.handles(n)
        st = L.vf_cond(ctx.handle, pred._h, t.c, f.c, 0, None, n, outs, None)
        t.check(0)
        f.check(st)
        return [wrap(ctx, outs[k]) for k in range(n)]

    def while_loop(self, cond_fn, body_fn, init):
        if not init:
            raise operators.ConversionError("a tensor-dependent loop must change at least one variable")
        ctx = init[0]._ctx
        if not tracing(ctx):
            vals = list(init)
            while bool(cond_fn(*vals)):
                vals = list(body_fn(*vals))
            return vals
        n = len(init)
        c = Callback(ctx, lambda v: [cond_fn(*v)], 1)
        b = Callback(ctx, lambda v: list(body_fn(*v)), n)
        c.n_in = b.n_in = n
        vars_ = _fn_lib.handles(n)
        for i, t in enumerate(init):
            vars_[i] = t._h
        st = L.vf_while_loop(ctx.handle, c.c, b.c, n, vars_, 0, None)
        c.check(0)
        b.check(st)
        return [wrap(ctx, vars_[k]) for k in range(n)]

    def logical_not(self, x):
        from .math_ops import logical_not
        return logical_not(x)

    def logical_and(self, a, b):
        from .math_ops import logical_and
        return logical_and(a, b)

    def logical_or(self, a, b):
        from .math_ops import logical_or
        return logical_or(a, b)

    def length(self, t):
        return t.shape[0]

    def element(self, t, i):
        ctx = t._ctx
        return wrap(ctx, L.vf_gather(ctx.handle, t._h, i._h, 0))


operators.set_backend(Backend())


# ---- vkfuse.print inside traced functions -----------------------------------------

prints_traced = [0]  # vf_print nodes recorded so far (a call that may print flushes Python's stdout first)


def graph_print(*inputs, sep=" "):
    """tf.print while tracing: each tensor becomes a vf_print node of the
    graph, labelled with the text before it, so it prints at every call
    (one line per tensor: "label: values"); text after the last tensor is
    printed at trace time only (there is nothing in the graph to hold it)."""
    ctx = _context.context()
    label = []
    for x in inputs:
        if isinstance(x, Tensor):
            text = sep.join(label).rstrip()
            if text.endswith(":"):
                text = text[:-1]
            if L.vf_print(ctx.handle, text.encode(), x._h) != 0:
                ctx.raise_error()
            prints_traced[0] += 1
            label = []
        else:
            label.append(str(x))
    if label:
        print(sep.join(label))


def traced_print(eager_print):
    """vkfuse.print: eager_print outside traced functions, graph_print in them."""
    def print_(*inputs, output_stream=None, sep=" ", end="\n"):
        if tracing():
            return graph_print(*inputs, sep=sep)
        return eager_print(*inputs, output_stream=output_stream, sep=sep, end=end)
    print_.__doc__ = eager_print.__doc__
    print_.__name__ = "print"
    return print_
