"""AutoGraph's run-time operators: what converted code calls (as `ag__.*`).

The converter (converter.py) turns `if`, `while` and `for` statements into
calls of if_stmt / while_stmt / for_stmt with the branches and loop bodies
as nested functions that take the variables they change and return them.
Each operator decides at run time, as TensorFlow's AutoGraph does: a Python
value as condition (or a Python iterable) runs plain Python control flow,
exactly as the unconverted code would; a tensor hands the branches or the
body to the tensor backend's graph control flow (vf_cond / vf_while_loop).

The backend is whatever tensor layer registers itself with set_backend():
the vkfuse package registers its own; the tests register a NumPy fake. It
provides:
    is_tensor(x) -> bool
    convert(value) -> tensor            Python bool/int/float to a tensor
    cond(pred, true_fn, false_fn, n) -> list of n tensors
                                        (each fn takes no argument and
                                        returns a list of n tensors)
    while_loop(cond_fn, body_fn, init) -> list of tensors
                                        (cond_fn(*vars) -> bool tensor,
                                        body_fn(*vars) -> list)
    logical_not(x), logical_and(a, b), logical_or(a, b)
    length(t) -> int                    the size of dim 0
    element(t, i) -> tensor             t[i] for a scalar int tensor i
"""

import contextlib
import threading

_state = threading.local()
_backend = None


class ConversionError(ValueError):
    """Code that AutoGraph cannot turn into graph control flow; the message
    names the line in the user's file and says how to write it instead."""


def set_backend(backend):
    """Registers the tensor layer whose tensors select graph control flow."""
    global _backend
    _backend = backend


def get_backend():
    return _backend


@contextlib.contextmanager
def use_backend(backend):
    """Temporarily another backend (tests use a NumPy fake)."""
    global _backend
    old = _backend
    _backend = backend
    try:
        yield backend
    finally:
        _backend = old


def _is_tensor(x):
    return _backend is not None and _backend.is_tensor(x)


def _where(line, filename):
    return "%s:%d" % (filename, line) if filename else "line %d" % line


# ---- Undefined values ------------------------------------------------------

class Undefined:
    """The value of a variable that has not been assigned yet where converted
    control flow needs one (a variable first assigned inside a branch). Any
    use of it fails with what Python itself would have said."""

    __slots__ = ("name", "reason")

    def __init__(self, name, reason=None):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "reason", reason)

    def _fail(self, *args, **kwargs):
        msg = self.reason or ("local variable '%s' referenced before assignment" % self.name)
        raise UnboundLocalError(msg)

    def __getattr__(self, attr):
        self._fail()

    def __repr__(self):
        return "<undefined '%s'>" % self.name


for _op in ("add radd sub rsub mul rmul truediv rtruediv floordiv rfloordiv mod rmod pow rpow "
            "matmul rmatmul neg pos abs invert and rand or ror xor rxor lt le gt ge "
            "bool int float index len iter getitem setitem call array").split():
    setattr(Undefined, "__%s__" % _op, Undefined._fail)


def is_undefined(x):
    return type(x) is Undefined


def ld(getter, name):
    """The value of a variable that may be unassigned here (no NameError)."""
    try:
        return getter()
    except NameError:
        return Undefined(name)


_converter = [None]  # set by the package: f -> f converted (or f)


def converted(f):
    """What a call in converted code calls: the user's Python functions and
    methods converted (once each), anything else as it is."""
    conv = _converter[0]
    return conv(f) if conv is not None else f


def retval(value):
    """A function's return value: None where no return statement ran."""
    return None if is_undefined(value) else value


# ---- Logical operators -----------------------------------------------------

def not_(x):
    if _is_tensor(x):
        return _backend.logical_not(x)
    return not x


def and_(a, b):
    """`a and b` with b a thunk: Python's short circuit for Python values."""
    av = a()
    if not _is_tensor(av):
        return b() if av else av
    bv = b()
    if not _is_tensor(bv):
        bv = _backend.convert(bool(bv))
    return _backend.logical_and(av, bv)


def or_(a, b):
    av = a()
    if not _is_tensor(av):
        return av if av else b()
    bv = b()
    if not _is_tensor(bv):
        bv = _backend.convert(bool(bv))
    return _backend.logical_or(av, bv)


def if_exp(cond, true_fn, false_fn, line=0, filename=None):
    """`a if cond else b`."""
    if not _is_tensor(cond):
        return true_fn() if cond else false_fn()
    out = if_stmt(cond, lambda v: (true_fn(),), lambda v: (false_fn(),), (Undefined("<if-expression>"),),
                  ("<if-expression>",), ("<if-expression>",), line, filename)
    return out[0]


# ---- Checks shared by the statements ---------------------------------------

_CONTAINERS = (list, dict, set, bytearray)


def _check_mutated(mutated, what, line, filename):
    """A tensor-dependent branch or loop body runs once, at trace time, so a
    change it makes to a Python container would not follow the condition."""
    if mutated is None:
        return
    for name, getter in mutated:
        try:
            value = getter()
        except NameError:
            continue
        if isinstance(value, _CONTAINERS):
            raise ConversionError(
                "%s: %s changes the Python %s '%s', but its condition is a tensor: it is traced once, so "
                "the change would not depend on the condition. Build a tensor instead (vkfuse.stack / "
                "vkfuse.concat of the values, or vkfuse.where), or decide the condition in Python."
                % (_where(line, filename), what, type(value).__name__, name))


def _as_tensor(value):
    if _is_tensor(value):
        return value
    if isinstance(value, (bool, int, float)):
        return _backend.convert(value)
    return None


def _one_branch_message(name, which, line, filename):
    where = _where(line, filename)
    this, other = ("if", "else") if which == "true" else ("else", "if")
    if name.startswith("retval"):
        return ("%s: the if whose condition is a tensor returns a value in its %s branch only: both branches "
                "are traced, so both must return (or the code after the if must)." % (where, other))
    return ("%s: '%s' is assigned in the %s branch only of an if whose condition is a tensor, and is used "
            "after the if: both branches are traced, so it needs a value in both. Assign it before the if "
            "or in the %s branch too." % (where, name, other, this))


# ---- if ---------------------------------------------------------------------

def if_stmt(cond, true_fn, false_fn, init, names, live, line, filename=None, mutated=None):
    """`if cond:` over the variables `names` (their values before the if are
    init); returns their values after it. With a tensor condition, the
    variables in `live` (those read after the if) become the outputs of one
    graph cond: tensors and Python numbers (converted to tensors, as TF
    does) are its outputs; other Python values must be the same object in
    both branches."""
    if not _is_tensor(cond):
        return true_fn(*init) if cond else false_fn(*init)
    _check_mutated(mutated, "the if statement", line, filename)
    live_idx = [i for i, n in enumerate(names) if n in live]
    outs = {}

    def branch(fn, which):
        res = tuple(fn(*init))
        outs[which] = res
        vals = []
        for i in live_idx:
            v = res[i]
            if is_undefined(v):
                raise ConversionError(_one_branch_message(names[i], which, line, filename))
            t = _as_tensor(v)
            vals.append(t if t is not None else _backend.convert(False))
        return vals

    res = list(_backend.cond(cond, lambda: branch(true_fn, "true"), lambda: branch(false_fn, "false"),
                             len(live_idx)))
    ran = [outs[k] for k in ("true", "false") if k in outs]
    final = list(ran[0]) if len(ran) == 1 else [Undefined(n) for n in names]
    for j, i in enumerate(live_idx):
        vals = [r[i] for r in ran]
        if all(_is_tensor(v) or isinstance(v, (bool, int, float)) for v in vals):
            final[i] = res[j]
        elif len(vals) == 2 and vals[0] is not vals[1]:
            raise ConversionError(
                "%s: '%s' holds a Python %s that differs between the branches of an if whose condition "
                "is a tensor: only tensors (and Python numbers) can depend on a tensor condition."
                % (_where(line, filename), names[i], type(vals[0]).__name__))
        else:
            final[i] = vals[0]
    if len(ran) == 2:
        for i, n in enumerate(names):
            if i not in live_idx:
                final[i] = Undefined(n, "'%s' was assigned in an if whose condition is a tensor (%s) and "
                                        "is not defined after it" % (n, _where(line, filename)))
    return tuple(final)


# ---- while ------------------------------------------------------------------

def _tensor_loop(test, body, vals, names, live, line, filename, what, mutated):
    """The loop from here on as one graph while loop over the variables that
    have a value (the others are local to the body)."""
    _check_mutated(mutated, what, line, filename)
    carried, fixed = [], {}
    for i, v in enumerate(vals):
        if is_undefined(v):
            if names[i] in live and names[i].startswith("retval"):
                raise ConversionError(
                    "%s: a return inside %s, whose condition is a tensor, cannot give the function its "
                    "value: a graph loop's variables need a value before it. Assign the result to a "
                    "variable set before the loop, break, and return it after the loop."
                    % (_where(line, filename), what))
            if names[i] in live:
                raise ConversionError(
                    "%s: '%s' is first assigned inside %s, whose condition is a tensor, and is used after "
                    "it: a graph loop needs every variable it changes to have a value before it. Assign "
                    "'%s' before the loop." % (_where(line, filename), names[i], what, names[i]))
            continue
        t = _as_tensor(v)
        if t is None:
            fixed[i] = v
            continue
        vals[i] = t
        carried.append(i)

    def full(cv):
        out = list(vals)
        for j, i in enumerate(carried):
            out[i] = cv[j]
        return out

    def cond_fn(*cv):
        c = test(*full(cv))
        return c if _is_tensor(c) else _backend.convert(bool(c))

    def body_fn(*cv):
        res = list(body(*full(cv)))
        for i, v in fixed.items():
            if res[i] is not v:
                raise ConversionError(
                    "%s: %s, whose condition is a tensor, changes '%s', a Python %s: it is traced once, "
                    "so only tensors (and Python numbers, made tensors) can change from one iteration to "
                    "the next.%s" % (_where(line, filename), what, names[i], type(v).__name__,
                                     getattr(v, "_graph_loop_hint", "")))
        out = []
        for i in carried:
            t = _as_tensor(res[i])
            if t is None:
                raise ConversionError(
                    "%s: %s, whose condition is a tensor, sets '%s' to a Python %s; loop variables must "
                    "stay tensors." % (_where(line, filename), what, names[i], type(res[i]).__name__))
            out.append(t)
        return out

    res = _backend.while_loop(cond_fn, body_fn, [vals[i] for i in carried])
    out = full(list(res))
    for i, v in enumerate(out):
        if is_undefined(v):
            out[i] = Undefined(names[i], "'%s' was assigned only inside the loop at %s, whose condition is "
                                         "a tensor" % (names[i], _where(line, filename)))
    return tuple(out)


def while_stmt(test, body, init, names, live, line, filename=None, mutated=None):
    """`while test:` over the loop variables `names`. A Python condition
    loops in Python (and turns into a graph loop from the iteration where
    it first becomes a tensor); a tensor condition makes one graph loop."""
    vals = list(init)
    while True:
        c = test(*vals)
        if _is_tensor(c):
            return _tensor_loop(test, body, vals, names, live, line, filename, "the while loop", mutated)
        if not c:
            return tuple(vals)
        vals = list(body(*vals))


class TensorRange:
    """range(start, limit, delta) with a tensor bound: for_stmt counts in a
    graph loop instead of making the values (whose number is not known
    while tracing)."""

    def __init__(self, start, limit, delta):
        self.start, self.limit, self.delta = start, limit, delta


def range_(fn, *args):
    """`for i in <module>.range(...)`: fn(*args) unless a bound is a tensor."""
    if not any(_is_tensor(a) for a in args):
        return fn(*args)
    start, limit, delta = (0, args[0], 1) if len(args) == 1 else (tuple(args) + (1,))[:3]
    if _is_tensor(delta) or delta == 0:
        raise ConversionError("a range over a tensor bound needs a nonzero Python step, got %r" % (delta,))
    return TensorRange(start, limit, delta)


def _counted_loop(start, more, element, delta, extra_test, body, vals, names, live, line, filename, mutated):
    """A for loop as one graph loop over a counter (the last loop variable)
    from start: it goes on while more(counter) and extra_test allow, the
    body gets element(counter)."""
    vals = list(vals) + [start]
    k = len(vals) - 1
    names = tuple(names) + ("<loop counter>",)

    def test(*v):
        go_on = more(v[k])
        if extra_test is None:
            return go_on
        go = extra_test(*v[:k])
        if not _is_tensor(go):
            return go_on if go else _backend.convert(False)
        return _backend.logical_and(go_on, go)

    def step(*v):
        return list(body(element(v[k]), *v[:k])) + [v[k] + delta]

    return _tensor_loop(test, step, vals, names, live, line, filename, "the for loop", mutated)[:k]


def for_stmt(iterable, extra_test, body, init, names, live, line, filename=None, mutated=None):
    """`for x in iterable:` (body takes the element first). A tensor iterates
    over its dim 0 in one graph loop (`for i in vkfuse.range(n)` is this
    case); anything else is a Python loop. extra_test (a thunk over the
    variables, or None) stops it early: it carries break and return."""
    vals = list(init)
    if isinstance(iterable, TensorRange):
        r = iterable
        start = r.start if _is_tensor(r.start) else _backend.convert(int(r.start))
        more = (lambda i: i < r.limit) if r.delta > 0 else (lambda i: i > r.limit)
        return _counted_loop(start, more, lambda i: i, r.delta, extra_test, body, vals, names, live, line,
                             filename, mutated)
    if not _is_tensor(iterable):
        for elem in iterable:
            if extra_test is not None:
                go = extra_test(*vals)
                if _is_tensor(go):
                    raise ConversionError(
                        "%s: the for loop iterates over a Python %s but stops (break or return) on a "
                        "tensor condition, which a Python loop cannot wait for. Iterate over a tensor "
                        "(vkfuse.range(n)) instead." % (_where(line, filename), type(iterable).__name__))
                if not go:
                    break
            vals = list(body(elem, *vals))
        return tuple(vals)

    n = _backend.length(iterable)
    return _counted_loop(_backend.convert(0), lambda i: i < n, lambda i: _backend.element(iterable, i), 1,
                         extra_test, body, vals, names, live, line, filename, mutated)
