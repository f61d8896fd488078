"""Graph control flow for AutoGraph (vf_cond / vf_while_loop) and the
plumbing every C body callback shares: Python callables as vf_body.

Ownership inside a body: the inputs C passes belong to C, so they are
wrapped as Borrowed tensors (never released by Python). Tensors the body
makes belong to the body's scope; Python's releases of them wait until the
library is done with the body (release_dropped), so an output's own handle
stays valid after the body's Python objects are gone.

Outside a trace (a converted function called as plain Python, eager
tensors), cond and while_loop run in Python: the host knows the values.
"""
from __future__ import annotations

import weakref

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


# While a function traces: its inputs' handles -> "x:0" (TF's names for a
# traced function's arguments, shown when a symbolic tensor is printed)
input_names = {}


def borrow_variable(ctx, h):
    """A variable C lent to a traced body (a variable passed as an argument
    goes by reference): a Variable, so that the body can assign it."""
    from .variables import Variable

    class _BorrowedVariable(Variable):
        __slots__ = ()

        def __del__(self):
            pass
    t = _BorrowedVariable.__new__(_BorrowedVariable)
    t._h, t._ctx, t._name, t._trainable = h, ctx, "Variable:0", True
    return t


def borrow(ctx, h):
    t = Borrowed.__new__(Borrowed)
    t._h = h
    t._ctx = ctx
    return t


def release_dropped(ctx, handles):
    """Releases handles Python dropped while the library ran a body. The
    library frees what a body made when the body's scope (or the trace)
    ends and reads the body's outputs after it returned, so Python's
    releases wait until the library is done; a handle already freed then only records an error, cleared
    here unless one was there before."""
    _tensor.release_handles(ctx, handles)


def defer_end(ctx):
    """Closes the deferral this thread opened around a C call on ctx
    (tensor.defer_open) and releases what was dropped meanwhile, with what
    bodies the library ran outside any call of ours dropped and ctx's
    strays (tensor.stray)."""
    handles = _tensor.defer_close(ctx)
    orphans = _tensor.here.orphans
    if orphans:
        handles += [h for c, h in orphans if c is ctx]
        orphans[:] = [(c, h) for c, h in orphans if c is not ctx]
    more, calls = _tensor.take_strays(ctx)
    handles += more
    if ctx._h is None:
        return
    if handles:
        release_dropped(ctx, handles)
    for f in calls:
        f()


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
        _tensor.body_enter()
        # None open: the library runs the body outside any call of ours (a tape's gradient)
        opened = _tensor.defer_open(self.ctx)
        try:
            args = [borrow(self.ctx, ins[i]) for i in range(self.n_in)]
            res = self.fn(args)
            if self.n_out is not None and len(res) != self.n_out:
                raise ValueError("a traced body returned %d tensors where %d are needed" % (len(res), self.n_out))
            for k, t in enumerate(res):
                if not isinstance(t, Tensor):
                    raise TypeError("a traced body returned %r where a tensor is needed" % (t,))
                outs[k] = t._h  # alive until the library is done: Python's release waits (release_dropped)
            return 0
        except BaseException as e:  # noqa: B902 - carried out, re-raised by the caller
            if self.pending is None:
                self.pending = e
            return _fn_lib.VF_ERROR_INVALID_ARGUMENT
        finally:
            _tensor.body_leave()
            if opened:
                _tensor.here.orphans.extend((self.ctx, h) for h in _tensor.defer_close(self.ctx))

    def done(self, status):
        """check() for a one-shot callback, then drops fn: its closures may
        hold the trace's tensors, which must go while the trace is open
        (self.c and the bound method form a cycle that only the garbage
        collector frees, after the trace)."""
        self.fn = None
        self.check(status)

    def check(self, status):
        """Raises the pending Python exception, else the context's error.
        """
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
        t.done(0)
        f.done(st)
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
        c.done(0)
        b.done(st)
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


# ---- variables created inside a traced function ---------------------------------------
# The library refuses vf_variable while tracing, so a variable the body
# creates on the first trace is lifted out, as TF lifts its initializer: the
# trace stops (_Lift), the variable is made eagerly from the recorded
# initial value, and the trace runs again, where the body's Variable(...)
# adopts it. A later trace that would create another is an error.

class Lift(Exception):
    """Stops a trace to create a variable outside it (not an error).
    make(run_eagerly) creates it; run_eagerly(scope) runs the body eagerly
    with the call's arguments under that variable scope (for an initial
    value computed by ops in the body: see _Captured)."""

    def __init__(self, make):
        Exception.__init__(self, "variable lifted out of a trace")
        self.make = make


class _Captured(Exception):
    """Ends the eager run of a body at the variable being lifted, whose
    initial value it now has: the rest of the body does not run there."""

    def __init__(self, make):
        Exception.__init__(self, "variable initial value captured")
        self.make = make


class _VarScope:
    def __init__(self, name, lifted, may_create):
        self.name = name
        self.lifted = lifted          # the function's variables, in creation order
        self.may_create = may_create  # False once a trace has completed
        self.used = 0
        self.collected = False
        self.capture = False          # an eager run computing a lifted variable's initial value


def _var_scopes():
    """The traces in progress on this thread, innermost last."""
    return _tensor.here.var_scopes


_claims = {}  # id(lifted variable) -> weakref to the Variable that adopted it


def _user_line():
    import traceback
    here = __file__.rsplit("/", 2)[0]
    for f in reversed(traceback.extract_stack()[:-2]):
        if not f.filename.startswith(here):
            return "%s:%d" % (f.filename, f.lineno)
    return "?"


def variable_hook(var, initial_value, trainable, name, dtype):
    """Called by Variable.__init__ first: True when var adopted a lifted variable."""
    scopes = _var_scopes()
    if not scopes or not (tracing() or scopes[-1].capture):
        return False
    scope = scopes[-1]
    if not scope.may_create:
        where = _user_line()
        raise ValueError(
            "%s: vkfuse.function '%s' creates a variable on a trace after its first one; a function may create "
            "variables on its first call only (as tf.function). Create it once (e.g. 'if self.v is None:') or "
            "outside the function." % (where, scope.name))
    if not scope.collected:
        # adopters made by a stopped trace attempt must be gone before they are counted below
        scope.collected = True
        if scope.lifted:
            import gc
            gc.collect()
    for pre in scope.lifted:
        # The first lifted variable no live Variable adopted: a body that
        # keeps what it made ('if self.v is None: self.v = Variable(...)',
        # an optimizer's slots) does not make it again on the next attempt,
        # so adopting by position alone would give a later variable an
        # earlier one's storage.
        claim = _claims.get(id(pre))
        if claim is not None and claim() is not None:
            continue
        _claims[id(pre)] = weakref.ref(var)
        scope.used += 1
        var._ctx = pre._ctx
        var._h = L.vf_tensor_retain(pre._h)
        var._name = pre._name
        var._trainable = pre._trainable
        return True
    def make_from(value):
        def make(run_eagerly=None):
            from .variables import Variable
            return Variable(value, trainable=trainable, name=name, dtype=dtype)
        return make

    if scope.capture:  # the eager run reached the variable: its initial value is known now
        raise _Captured(make_from(initial_value))
    if isinstance(initial_value, Tensor) and not callable(initial_value) and tracing():
        # Computed by ops in the body (tf.Variable(tf.zeros([3])) there): as
        # TF lifts that initializer, the body runs eagerly with this call's
        # arguments up to this variable, which takes the value computed there.
        where = _user_line()

        def lift_by_running(run_eagerly):
            sc = _VarScope(scope.name, scope.lifted, True)
            sc.capture = True
            try:
                run_eagerly(sc)
            except _Captured as c:
                return c.make()
            raise ValueError(
                "%s: vkfuse.Variable in vkfuse.function '%s': its initial value is computed inside the traced "
                "function, and running the body eagerly did not create it again (it depends on values only the "
                "trace has); give a Python or NumPy value or a callable, or create it outside the function"
                % (where, scope.name))
        raise Lift(lift_by_running)
    raise Lift(make_from(initial_value))


from . import variables as _variables  # noqa: E402

_variables.creation_hook = variable_hook
