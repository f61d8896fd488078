"""vkfuse.function (tf.function) over the C API's vf_function.

The Python function is converted by AutoGraph once, then traced by the C
library: its body is a ctypes callback that runs the converted function on
symbolic tensors. The cache follows TF: the Python values of non-tensor
arguments (and the nesting of the arguments) select one C vf_function;
inside it the C library keys concrete functions by the dtypes and shapes
of the tensor arguments (or follows the input_signature, -1 dims for
None). A call that traces again logs why at INFO level on the "vkfuse"
logger (the argument that changed), and a function whose last 5 calls all
traced logs TF's warning.
"""
from __future__ import annotations

import collections
import ctypes
import functools
import gc
import inspect
import logging
import os
import re
import weakref

import numpy as np

from . import _context, _fn_lib, _var_args, autograph, dtypes, graph_control
from . import tensor as _tensor
from .tensor import Tensor, TensorShape, constant, wrap
from .variables import Variable as _Variable

L = _fn_lib.L
_call = L.vf_function_call
logger = logging.getLogger("vkfuse")
_run_eagerly = [False]
_T = object()  # stands for a tensor leaf in a cache key


def run_functions_eagerly(run_eagerly):
    """tf.config.run_functions_eagerly: every vkfuse.function runs its
    Python body as written (no tracing, no AutoGraph), for pdb and
    breakpoints; False traces again."""
    _run_eagerly[0] = bool(run_eagerly)


def functions_run_eagerly():
    return _run_eagerly[0] or _ENV_EAGER


_ENV_EAGER = os.environ.get("VKFUSE_EAGER") == "1"  # the C library's switch, read once as it does


class TensorSpec:
    """tf.TensorSpec: the dtype and shape (None dims: any size) an argument
    must have, for input_signature."""

    __slots__ = ("shape", "dtype", "name")

    def __init__(self, shape, dtype=dtypes.float32, name=None):
        self.shape = TensorShape(None if d is None else int(d) for d in shape)
        self.dtype = dtypes.as_dtype(dtype)
        self.name = name

    @classmethod
    def from_tensor(cls, tensor, name=None):
        return cls(tensor.shape, tensor.dtype, name)

    def is_compatible_with(self, x):
        return x.dtype == self.dtype and self.shape.is_compatible_with(x.shape)

    def _c(self):
        s = _fn_lib.TensorSpecC()
        s.dtype = self.dtype._vf
        s.rank = len(self.shape)
        for i, d in enumerate(self.shape):
            s.shape[i] = -1 if d is None else d
        return s

    def __eq__(self, other):
        return isinstance(other, TensorSpec) and (self.shape, self.dtype, self.name) == (other.shape, other.dtype,
                                                                                         other.name)

    def __hash__(self):
        return hash((tuple(self.shape), self.dtype))

    def __repr__(self):
        return "TensorSpec(shape=%s, dtype=vkfuse.%s, name=%r)" % (self.shape, self.dtype.name, self.name)


# ---- arguments: flattening with names, and the cache key --------------------------------

def _flatten(value, path, leaves, names):
    """The argument's structure with tensor leaves as _T (appended to
    leaves, their names to names): hashable, so it can key the cache. A
    variable (passed by value, _var_args.py) is ("var", position of its
    first occurrence): the key holds which arguments are the same variable."""
    if _var_args.by_value(value):
        first = next((k for k, t in enumerate(leaves) if t is value), len(leaves))
        leaves.append(value)
        names.append(path)
        return ("var", first)
    if isinstance(value, Tensor):
        leaves.append(value)
        names.append(path)
        return _T
    if isinstance(value, np.ndarray):
        leaves.append(constant(value))
        names.append(path)
        return _T
    if isinstance(value, (list, tuple)):
        items = tuple(_flatten(v, "%s[%d]" % (path, i), leaves, names) for i, v in enumerate(value))
        return (type(value), items)
    if isinstance(value, dict):
        return (dict, tuple((k, _flatten(value[k], "%s[%r]" % (path, k), leaves, names)) for k in sorted(value)))
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))  # TF keys unhashable Python objects by identity
    return (type(value), value)


class _Slot:
    """Where a tensor argument goes in a stored call template."""

    __slots__ = ()

    def __repr__(self):
        return "<tensor>"


_SLOT = _Slot()


def _strip(value):
    """value with its tensor leaves replaced by _SLOT: a template that
    keeps no tensor alive."""
    if isinstance(value, (list, tuple)):
        items = [_strip(v) for v in value]
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            return type(value)(*items)
        return type(value)(items)
    if isinstance(value, dict):
        return type(value)((k, _strip(v)) for k, v in value.items())
    if isinstance(value, (Tensor, np.ndarray)):
        return _SLOT
    return value


def _rebuild(value, it):
    if value is _SLOT:
        return next(it)
    if isinstance(value, (list, tuple)):
        items = [_rebuild(v, it) for v in value]
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            return type(value)(*items)
        return type(value)(items)
    if isinstance(value, dict):
        vals = {k: _rebuild(value[k], it) for k in sorted(value)}
        return type(value)((k, vals[k]) for k in value)
    return value


def _flatten_out(value, leaves):
    """A result's structure: tensors become leaves; anything else stays
    as it is (returned as a Python constant, as TF does)."""
    if isinstance(value, Tensor):
        leaves.append(value)
        return _T
    if isinstance(value, (list, tuple)):
        items = [_flatten_out(v, leaves) for v in value]
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            return type(value)(*items)
        return type(value)(items)
    if isinstance(value, dict):
        return type(value)((k, _flatten_out(v, leaves)) for k, v in value.items())
    return value


def _pack_out(structure, it):
    if structure is _T:
        return next(it)
    if isinstance(structure, (list, tuple)):
        items = [_pack_out(v, it) for v in structure]
        if isinstance(structure, tuple) and hasattr(structure, "_fields"):
            return type(structure)(*items)
        return type(structure)(items)
    if isinstance(structure, dict):
        return type(structure)((k, _pack_out(v, it)) for k, v in structure.items())
    return structure


# ---- one C function per Python key -----------------------------------------------------

class _Entry:
    """One vf_function: the calls whose non-tensor arguments are equal."""

    def __init__(self, owner, ctx, key, template, names, n_in, specs=None, leaves=()):
        self.owner = weakref.ref(owner)
        # variables passed by value (_var_args.py): their leaf positions, the
        # first position of each distinct one, each position's distinct one,
        # and (fixed by the first trace) the distinct ones the body assigns,
        # whose final values are extra outputs
        self.var_pos = tuple(i for i, t in enumerate(leaves) if _var_args.by_value(t))
        self.var_first = tuple(i for i in self.var_pos if not any(leaves[k] is leaves[i] for k in range(i)))
        self.var_of = {i: next(j for j, f in enumerate(self.var_first) if leaves[f] is leaves[i])
                       for i in self.var_pos}
        # the body can run again after the call (a tape's gradient traces it):
        # the proxies are made from what the first call's variables were
        self.var_meta = [(leaves[i]._ctx, leaves[i]._name, leaves[i]._trainable) for i in self.var_first]
        self.assigned = None
        self.call_vars = ()       # this call's distinct variables, while it runs
        self.ctx = ctx
        self.key = key
        self.template = template  # (args, kwargs) of the first call: rebuilt with the body's tensors
        self.names = names        # per input: the argument it comes from ("x", "batch[0]")
        self.structure = None     # the outputs' structure (fixed by the first trace)
        self.n_out = None
        self.traced = False
        self.lifted_traces = 0    # traces stopped to create a variable (not counted)
        self.keep = []            # host callbacks its graphs call (vkfuse.print)
        self.cb = graph_control.Callback(ctx, self._body)
        self.cb.n_in = n_in
        desc = _fn_lib.FunctionDesc()
        desc.name = owner.__name__.encode()
        desc.body = self.cb.c
        desc.n_inputs = n_in
        desc.n_outputs = -1
        self._sig = None
        # specs: the flat signature of a generalised trace (reduce_retracing,
        # get_concrete_function with None dims), else the owner's
        flat = specs if specs is not None else owner._flat_signature if owner.input_signature is not None else None
        if flat is not None:
            specs = (_fn_lib.TensorSpecC * max(n_in, 1))(*[s._c() for s in flat])
            self._sig = specs
            desc.input_signature = specs
        # unseeded random ops in the body draw from the context's generator,
        # which cannot be made while tracing: make it now
        from . import random as _random
        _random.get_global_generator(ctx)
        self.handle = L.vf_function_create(ctx.handle, ctypes.byref(desc))
        if not self.handle:
            ctx.raise_error()
        self.ins = _fn_lib.handles(n_in)
        self.outs = _fn_lib.handles(_fn_lib.MAX_OUTPUTS)

    def _body(self, tensors):
        owner = self.owner()
        self.traced = True
        args, kwargs = self.template
        # a variable argument is the variable itself in the body: assignable
        tensors = [graph_control.borrow_variable(self.ctx, t._h) if L.vf_tensor_is_variable(t._h) else t
                   for t in tensors]
        proxies = [_var_args.proxy(m, tensors[i]) for m, i in zip(self.var_meta, self.var_first)]
        for i in self.var_pos:
            tensors[i] = proxies[self.var_of[i]]
        named = {t._h: "%s:0" % n for t, n in zip(tensors, self.names)}
        graph_control.input_names.update(named)
        it = iter(tensors)
        args = _rebuild(args, it)
        kwargs = _rebuild(kwargs, it)
        graph_control._var_scopes().append(graph_control._VarScope(owner.__name__, owner._variables,
                                                                 not owner._traced_once))
        prints = _tensor.here.prints
        first_print = len(prints)
        _var_args.poison(self.call_vars)
        try:
            result = owner._traced_fn()(*args, **kwargs)
        finally:
            _var_args.unpoison(self.call_vars)
            graph_control._var_scopes().pop()
            for h in named:
                graph_control.input_names.pop(h, None)
            # the graph's print callbacks live as long as this function
            self.keep.extend(prints[first_print:])
            del prints[first_print:]
        leaves = []
        structure = _flatten_out(result, leaves)
        leaves += self._finals(proxies)
        if self.n_out is not None and len(leaves) != self.n_out:
            raise ValueError("vkfuse.function '%s': this trace returns %d tensors, an earlier trace %d: a function "
                             "must return the same structure for every signature" % (owner.__name__, len(leaves),
                                                                                      self.n_out))
        if len(leaves) > _fn_lib.MAX_OUTPUTS:
            raise ValueError("vkfuse.function '%s' returns %d tensors; at most %d (stack them into fewer)"
                             % (owner.__name__, len(leaves), _fn_lib.MAX_OUTPUTS))
        self.structure = structure
        del args, kwargs, result, tensors, it, proxies
        # Tensors of this trace held only by reference cycles (closures of
        # converted code) must be released before the trace ends: after it,
        # their handles are gone.
        gc.collect()
        return leaves

    def _finals(self, proxies):
        """The final values of the assigned proxies, as extra outputs: the
        first trace fixes which (every concrete function of the entry
        returns as many tensors)."""
        done = [j for j, p in enumerate(proxies) if p.assigned]
        if self.assigned is None:
            self.assigned = done
        elif any(j not in self.assigned for j in done):
            raise ValueError("vkfuse.function '%s': this trace assigns the variable argument '%s', which an "
                             "earlier trace did not; pass it by closure instead" %
                             (self.owner().__name__, self.names[self.var_first[done[0]]]))
        return [proxies[j]._cur for j in self.assigned]

    def _run_eagerly(self, scope, tensors):
        """The Python body run eagerly on this call's tensors, under scope
        (to compute a lifted variable's initial value)."""
        owner = self.owner()
        args, kwargs = self.template
        it = iter(tensors)
        args, kwargs = _rebuild(args, it), _rebuild(kwargs, it)
        graph_control._var_scopes().append(scope)
        try:
            owner._traced_fn()(*args, **kwargs)
        finally:
            graph_control._var_scopes().pop()

    def call(self, tensors):
        """Runs the function (tracing on a new signature); sets self.traced.
        Variables passed by value: their values in, their final values
        assigned to them after."""
        if not self.var_pos:
            return self._run(tensors, tensors)
        self.call_vars = [tensors[i] for i in self.var_first]
        try:
            values = list(tensors)
            for i in self.var_pos:
                values[i] = tensors[i].read_value()  # the value now, as an input: recorded by a tape
            out = self._run(values, tensors)
            n_user = self.n_out - len(self.assigned)
            for k, j in enumerate(self.assigned):
                self.call_vars[j].assign(wrap(self.ctx, self.outs[n_user + k]))
            return out
        finally:
            self.call_vars = ()

    def _run(self, tensors, given):
        """The C call on tensors (given: the call's own, variables included,
        for a lifted variable's eager run); the user's outputs."""
        ins = self.ins
        for i, t in enumerate(tensors):
            ins[i] = t._h
        self.traced = False
        while True:
            opened = _tensor.defer_open(self.ctx)
            try:
                st = _call(self.handle, ins, self.outs)
            finally:
                if opened:
                    graph_control.defer_end(self.ctx)
            if st == 0 and self.cb.pending is None:
                break
            try:
                self.cb.check(st)
                break
            except _var_args.Alias:
                self.lifted_traces += 1  # a stopped trace: the Function traces again by reference
                raise
            except graph_control.Lift as lift:
                # a variable made on the first trace: create it eagerly and trace again
                self.lifted_traces += 1
                self.owner()._variables.append(lift.make(lambda scope: self._run_eagerly(scope, given)))
        if self.n_out is None:
            self.owner()._traced_once = True
            self.n_out = _fn_lib.io_count(self.handle)[1]
        ctx = self.ctx
        outs = self.outs
        n_user = self.n_out - (len(self.assigned) if self.var_pos else 0)
        if self.structure is _T:
            return wrap(ctx, outs[0])
        return _pack_out(self.structure, iter([wrap(ctx, outs[k]) for k in range(n_user)]))

    def stats(self):
        s = _fn_lib.FunctionStats()
        L.vf_function_stats_get(self.handle, ctypes.byref(s))
        return s

    def __del__(self):
        h, self.handle = getattr(self, "handle", None), None
        if h and self.ctx._h is not None:
            if _tensor.here.collecting:  # see tensor.stray
                _tensor.stray(self.ctx, lambda: L.vf_function_destroy(h))
            else:
                L.vf_function_destroy(h)


class ConcreteFunction:
    """One traced signature of a vkfuse.function: callable with tensors of
    that signature; .graph_text() (and str()) is the optimised graph."""

    def __init__(self, function, entry, tensors, names):
        self._function = function
        self._entry = entry
        # tensors: the traced leaves, or the TensorSpecs (None dims) traced with
        self.structured_input_signature = tuple(TensorSpec(t.shape, t.dtype, n) for t, n in zip(tensors, names))

    def __call__(self, *tensors):
        got = list(tensors)
        for t, spec in zip(got, self.structured_input_signature):
            if not isinstance(t, Tensor) or not spec.is_compatible_with(t):
                raise ValueError("vkfuse ConcreteFunction '%s': expected %s for '%s', got %r"
                                 % (self._function.__name__, spec, spec.name, t))
        if len(got) != len(self.structured_input_signature):
            raise TypeError("vkfuse ConcreteFunction '%s' takes %d tensors, got %d"
                            % (self._function.__name__, len(self.structured_input_signature), len(got)))
        return self._entry.call(got)

    def graph_text(self):
        return _fn_lib.graph_text(self._entry.handle) or ""

    def __str__(self):
        return self.graph_text()

    def __repr__(self):
        return "<vkfuse ConcreteFunction %s%s>" % (self._function.__name__, self.structured_input_signature)


class Function:
    """What vkfuse.function returns: call it like the Python function."""

    def __init__(self, python_function, input_signature=None, autograph=True, name=None, reduce_retracing=False,
                 jit_compile=None, **unused):
        functools.update_wrapper(self, python_function)
        self.python_function = python_function
        self.__name__ = name or getattr(python_function, "__name__", "function")
        self._autograph = autograph
        self._converted = None
        self._sig = inspect.signature(python_function)
        self.input_signature = None if input_signature is None else tuple(input_signature)
        self._flat_signature = None
        if self.input_signature is not None:
            flat = []
            for s in self.input_signature:
                _flatten_spec(s, flat)
            self._flat_signature = flat
        self._entries = {}
        # per context (id): whether each of its last 5 calls traced; threads
        # calling one function on their own contexts retrace apart
        self._recent = {}
        self._last_key = None
        self._warned = False
        self._fast = {}           # (context, number of args) -> entry, for calls of tensors only
        self._variables = []      # variables its body created (lifted out of the first trace)
        self._traced_once = False
        # reduce_retracing: after a call whose shapes differ from the first
        # trace's, trace once with the differing dims as None (TF's
        # relaxation); experimental_relax_shapes is its old name
        self._reduce = bool(reduce_retracing or unused.get("experimental_relax_shapes"))
        self._first_shapes = {}   # Python key -> the leaves' (dtype, shape) at its first call
        self._general = {}        # Python key -> flat TensorSpec tuples traced with None dims
        self._aliased = set()     # Python keys whose variable arguments go by reference (_var_args.py)

    def __get__(self, instance, owner):
        """A method: one Function per instance, as TF binds them."""
        if instance is None:
            return self
        cache = self.__dict__.setdefault("_bound", weakref.WeakKeyDictionary())
        try:
            return cache[instance]
        except (KeyError, TypeError):
            pass
        f = Function(self.python_function.__get__(instance, owner), self.input_signature, self._autograph,
                     self.__name__, reduce_retracing=self._reduce)
        try:
            cache[instance] = f
        except TypeError:
            pass
        return f

    def _traced_fn(self):
        if self._converted is None:
            self._converted = autograph.convert(self.python_function) if self._autograph else self.python_function
        return self._converted

    # ---- the call ----------------------------------------------------------------------
    def _canonical(self, args, kwargs):
        if kwargs or len(args) != len(self._sig.parameters):
            try:
                bound = self._sig.bind(*args, **kwargs)
            except TypeError as e:
                raise TypeError("vkfuse.function '%s': %s" % (self.__name__, e)) from None
            bound.apply_defaults()
            return bound.args, bound.kwargs
        return args, {}

    def _key(self, args, kwargs):
        leaves, names = [], []
        params = list(self._sig.parameters)
        parts = []
        for i, a in enumerate(args):
            parts.append(_flatten(a, params[i] if i < len(params) else "args[%d]" % i, leaves, names))
        for k in sorted(kwargs):
            parts.append((k, _flatten(kwargs[k], k, leaves, names)))
        return tuple(parts), leaves, names

    def _signature_args(self, args, kwargs):
        """With an input_signature, the arguments follow its structure:
        each value at a TensorSpec is a tensor of that spec (NumPy arrays,
        lists and Python numbers are converted to its dtype)."""
        if kwargs or len(args) != len(self.input_signature):
            raise TypeError("vkfuse.function '%s' has an input_signature of %d arguments; the call passed %d%s"
                            % (self.__name__, len(self.input_signature), len(args),
                               " and keyword-only ones" if kwargs else ""))
        leaves, names = [], []
        params = list(self._sig.parameters)
        for i, (spec, a) in enumerate(zip(self.input_signature, args)):
            _match_spec(spec, a, leaves, params[i] if i < len(params) else "args[%d]" % i, names)
        return leaves, names

    def __call__(self, *args, **kwargs):
        if _run_eagerly[0] or _ENV_EAGER:
            return self.python_function(*args, **kwargs)
        if _tensor.here.deferring and graph_control.tracing():
            # called while another function traces: inlined, as TF traces
            # a nested function into the outer graph
            return self._traced_fn()(*args, **kwargs)
        ctx = _context.context()
        # the common call: tensors only, positionally, a known entry
        fast = None
        if not kwargs and self.input_signature is None:
            for a in args:
                if not isinstance(a, Tensor) or type(a) is _Variable:  # a variable: _entry_for
                    break
            else:
                fast = None if self._reduce else self._fast.get((ctx, len(args)))
        if fast is not None:
            entry, leaves = fast, args
            self._prev_key, self._last_key = self._last_key, entry.key
        else:
            entry, leaves = self._entry_for(ctx, args, kwargs)
        try:
            out = entry.call(leaves)
        except _var_args.Alias:
            entry, leaves = self._by_reference(entry, ctx, args, kwargs)
            out = entry.call(leaves)
        traced = entry.traced
        recent = self._recent.get(id(ctx))
        if recent is None:
            recent = self._recent[id(ctx)] = collections.deque(maxlen=5)
        recent.append(traced)
        if traced:
            self._note_trace(entry, recent)
        return out

    def _entry_for(self, ctx, args, kwargs, specs=None):
        args, kwargs = self._canonical(args, kwargs)
        if self.input_signature is not None:
            leaves, names = self._signature_args(args, kwargs)
            key = ("signature",)
        else:
            key, leaves, names = self._key(args, kwargs)
        key = (id(ctx), key)
        by_value = self.input_signature is None
        if key in self._aliased:
            key, by_value = (key[0], ("by reference", key[1])), False
        if self.input_signature is None:
            specs = self._relaxed(key, leaves, specs)
            if specs is not None:
                key = key + (("specs", specs),)
        entry = self._entries.get(key)
        if entry is None:
            if self.input_signature is not None:
                template = (tuple(_strip_spec(s, a) for s, a in zip(self.input_signature, args)), {})
            else:
                template = (_strip(tuple(args)), {k: _strip(v) for k, v in kwargs.items()})
            entry = _Entry(self, ctx, key, template, names, len(leaves), specs, leaves if by_value else ())
            self._entries[key] = entry
            if self.input_signature is None and specs is None and not kwargs and all(p is _T for p in key[1]):
                self._fast[(ctx, len(args))] = entry
        self._last_key, self._prev_key = key, self._last_key
        return entry, leaves

    def _by_reference(self, entry, ctx, args, kwargs, specs=None):
        """After a trace found a variable argument also used by closure: the
        entry for passing this key's variables by reference."""
        self._aliased.add(entry.key[:2])
        logger.info("vkfuse.function '%s': a variable argument is also used by closure; its variable arguments "
                    "go by reference (a trace per variable)", self.__name__)
        return self._entry_for(ctx, args, kwargs, specs)

    def _relaxed(self, key, leaves, specs):
        """The flat TensorSpecs (None dims) of a generalised trace that serves
        these leaves, or None for an exact one. specs: asked for explicitly
        (get_concrete_function's TensorSpecs with None dims)."""
        shapes = tuple((t.dtype, tuple(t.shape)) for t in leaves)
        general = self._general.setdefault(key, [])
        if specs is not None:
            specs = tuple(specs)
            if specs not in general:
                general.append(specs)
            return specs
        for g in general:
            if all(s.dtype == dt and s.shape.is_compatible_with(sh) for s, (dt, sh) in zip(g, shapes)):
                return g
        if not self._reduce:
            return None
        first = self._first_shapes.setdefault(key, shapes)
        if first == shapes or [(d, len(s)) for d, s in first] != [(d, len(s)) for d, s in shapes]:
            return None  # the first trace's shapes, or a dtype or rank change: an exact trace
        g = tuple(TensorSpec([a if a == b else None for a, b in zip(s0, s1)], dt)
                  for (dt, s0), (_, s1) in zip(first, shapes))
        self._first_shapes[key] = tuple((s.dtype, tuple(s.shape)) for s in g)
        general.append(g)
        return g

    def _note_trace(self, entry, recent):
        # the traces of entry's context only: another context's entries may
        # be in use by their threads (stats() would wait for that context,
        # whose thread may be waiting for this one in a collective)
        n = sum(e.stats().traces - e.lifted_traces for e in list(self._entries.values()) if e.ctx is entry.ctx)
        if n > 1:
            logger.info("vkfuse.function '%s' traced again (trace %d): %s", self.__name__, n, self._why(entry))
        if len(recent) == 5 and all(recent) and not self._warned:
            self._warned = True
            logger.warning(
                "5 out of the last 5 calls to vkfuse.function '%s' triggered retracing (last: %s). Tracing is "
                "expensive; this could be due to (1) creating the vkfuse.function repeatedly in a loop (define it "
                "once, outside), (2) passing tensors with different shapes (give input_signature with None "
                "dims), (3) passing Python values instead of tensors (each new value traces).",
                self.__name__, self._why(entry))

    def _why(self, entry):
        reason = (L.vf_function_retrace_reason(entry.handle) or b"").decode(errors="replace")
        if reason and entry.stats().traces > 1:
            return re.sub(r"input (\d+)", lambda m: "argument '%s'" % entry.names[int(m.group(1))], reason)
        if len(entry.key) > 2:  # a generalised trace (reduce_retracing or get_concrete_function)
            return "shapes generalised to None dims: " + ", ".join(
                "'%s' %s" % (n, tuple(s.shape)) for n, s in zip(entry.names, entry.key[2][1]))
        prev = self._prev_key
        if prev is None or prev[0] != entry.key[0]:
            return "a new context (device)"
        old, new = prev[1], entry.key[1]
        params = list(self._sig.parameters)
        for i, (a, b) in enumerate(zip(old, new)):
            if a != b:
                name = params[i] if i < len(params) else "args[%d]" % i
                return "argument '%s' changed: %s, traced with %s" % (name, _describe(b), _describe(a))
        return "the arguments' structure changed"

    # ---- introspection -------------------------------------------------------------------
    def experimental_get_tracing_count(self):
        return sum(e.stats().traces - e.lifted_traces for e in list(self._entries.values()))

    def get_concrete_function(self, *args, **kwargs):
        """The concrete function for these arguments (tensors or TensorSpecs),
        traced if needed (tracing runs the body on symbolic tensors)."""
        ctx = _context.context()
        specs = None
        if not args and not kwargs and self.input_signature is not None:
            args = tuple(_spec_value(s) for s in self.input_signature)
        else:
            # TensorSpecs with None dims and no input_signature: a trace with
            # those dims symbolic, which later calls that fit reuse (as TF)
            flat = []
            _spec_leaves(args, flat)
            _spec_leaves([kwargs[k] for k in sorted(kwargs)], flat)
            if self.input_signature is None and any(d is None for s in flat if isinstance(s, TensorSpec)
                                                    for d in s.shape):
                specs = tuple(s if isinstance(s, TensorSpec) else TensorSpec(s.shape, s.dtype) for s in flat)
            args = tuple(_spec_value(a) for a in args)
            kwargs = {k: _spec_value(v) for k, v in kwargs.items()}
        entry, leaves = self._entry_for(ctx, args, kwargs, specs)
        before = entry.stats().traces
        try:
            entry.call(leaves)
        except _var_args.Alias:
            entry, leaves = self._by_reference(entry, ctx, args, kwargs, specs)
            before = entry.stats().traces
            entry.call(leaves)
        if entry.stats().traces != before:
            self._note_trace(entry, self._recent.get(id(ctx), ()))
        if self.input_signature is not None:
            specs = self._flat_signature
        return ConcreteFunction(self, entry, specs if specs is not None else leaves, entry.names)

    def graph_text(self):
        """The optimised graph of the concrete function called last."""
        e = self._entries.get(self._last_key)
        return _fn_lib.graph_text(e.handle) if e is not None else None

    def __repr__(self):
        return "<vkfuse.function %s>" % self.__name__


def _describe(part):
    if part is _T:
        return "a tensor"
    if isinstance(part, tuple) and len(part) == 2 and part[0] == "var":
        return "a variable (the same as argument %d)" % part[1]
    if isinstance(part, tuple) and len(part) == 2 and isinstance(part[0], type):
        if part[0] in (list, tuple, dict):
            return "a %s" % part[0].__name__
        return repr(part[1])
    return repr(part)


def _flatten_spec(s, out):
    if isinstance(s, TensorSpec):
        out.append(s)
    elif isinstance(s, (list, tuple)):
        for x in s:
            _flatten_spec(x, out)
    else:
        raise TypeError("vkfuse.function: input_signature holds TensorSpecs (in lists or tuples), got %r" % (s,))


def _match_spec(spec, value, out, path, names):
    if isinstance(spec, TensorSpec):
        out.append(value if isinstance(value, Tensor) else constant(value, dtype=spec.dtype))
        names.append(spec.name or path)
        return
    if not isinstance(value, (list, tuple)) or len(value) != len(spec):
        raise TypeError("vkfuse.function: an argument must have the structure of its input_signature entry %r, "
                        "got %r" % (spec, value))
    for i, (s, v) in enumerate(zip(spec, value)):
        _match_spec(s, v, out, "%s[%d]" % (path, i), names)


def _strip_spec(spec, value):
    """The template of a signature argument: _SLOT at each TensorSpec."""
    if isinstance(spec, TensorSpec):
        return _SLOT
    return type(value)(_strip_spec(s, v) for s, v in zip(spec, value))


def _spec_leaves(value, out):
    """The tensor-like leaves (TensorSpecs, tensors, arrays) of an argument, in _flatten's order."""
    if isinstance(value, (TensorSpec, Tensor, np.ndarray)):
        out.append(value if not isinstance(value, np.ndarray) else constant(value))
    elif isinstance(value, (list, tuple)):
        for v in value:
            _spec_leaves(v, out)
    elif isinstance(value, dict):
        for k in sorted(value):
            _spec_leaves(value[k], out)


def _spec_value(s):
    """A TensorSpec as a tensor of its dtype and shape (None dims: 1), to trace with."""
    if isinstance(s, TensorSpec):
        from .array_ops import zeros
        return zeros([1 if d is None else d for d in s.shape], dtype=s.dtype)
    if isinstance(s, (list, tuple)):
        return type(s)(_spec_value(x) for x in s)
    return s


def function(func=None, input_signature=None, autograph=True, jit_compile=None, reduce_retracing=False,
             experimental_implements=None, experimental_autograph_options=None, experimental_relax_shapes=None,
             experimental_compile=None, experimental_follow_type_hints=None, name=None):
    """tf.function: @vkfuse.function, or @vkfuse.function(input_signature=[...])."""
    def decorate(f):
        return Function(f, input_signature=input_signature, autograph=autograph, name=name,
                        reduce_retracing=reduce_retracing or bool(experimental_relax_shapes), jit_compile=jit_compile)
    return decorate(func) if func is not None else decorate
