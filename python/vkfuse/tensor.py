"""The Tensor class, TensorShape, and conversion of Python / NumPy values.

A ``Tensor`` wraps one ``vf_tensor*`` of a context. The C op put the new
tensor in the context's root scope; the Tensor's ``__del__`` releases that
ownership (``vf_tensor_release``), which frees it unless a tape or a
variable still uses it, so that tensors go when Python drops them. A
tensor whose context was closed releases nothing (the context freed it).
"""
from __future__ import annotations

import ctypes
import gc
import threading
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

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


class _ThreadState(threading.local):
    """What the calling thread is inside of. Per thread, because threads run
    their own calls at once (ranks of a LocalGroup, a function per thread):
    a list or count shared between them mixed one thread's handles into
    another's, which then released them on the wrong context (blocking on
    its lock while that context's thread waited in an allreduce for this one:
    a hang)."""

    # > 0 while Python code runs as a body the library calls: what it makes
    # belongs to the body's scope, so it must not be cached
    body_depth = 0
    # > 0 inside GradientTape.stop_recording: results are wrapped in
    # vf_stop_gradient, so no gradient flows through them
    stop_recording = 0
    # the garbage collector runs on this thread (_gc_phase): what it frees
    # may belong to any context; a call that may wait for that context's
    # lock is left to the context's users (stray)
    collecting = False

    def __init__(self) -> None:
        # While a C call on a context that may run Python bodies is in
        # progress on this thread (a vkfuse.function's call or trace, a
        # tape's gradient), the handles of that context released here are
        # collected in deferring[context] and released after it
        # (graph_control.defer_end): the trace's scope frees its symbolic
        # tensors itself, and the library reads a body's outputs after the
        # body returned.
        self.deferring: Dict[Any, List[int]] = {}
        self.orphans: List[Tuple[Any, int]] = []  # (context, handle) dropped by bodies run outside our calls
        self.pending: List[BaseException] = []   # exceptions of kernels' grads (kernels.py)
        self.var_scopes: List[Any] = []          # the traces in progress (graph_control.py)
        self.prints: List[Any] = []              # print callbacks of the trace in progress (printing.py)


here = _ThreadState()
# One entry per thread state away from rest (a deferral open, a body
# running, stop_recording) and per stray: the per-op paths (wrap, __del__)
# test this one global and look at `here` only when it is not empty. A
# list: its append and pop are atomic under the GIL without a lock (a lock
# is not reentrant, and the garbage collector, whose finalizers may stray,
# can start inside any code, mark's included).
active: List[int] = []


def mark(delta: int) -> None:
    if delta > 0:
        active.append(1)
    else:
        active.pop()


_get_ident = threading.get_ident
# id(context) -> handles and callables left to a thread of that context
# (stray); by id, so that it does not keep the context alive (Context.close
# takes its entry).
strays: Dict[int, List[Any]] = {}


def stray(ctx: Any, what: Any) -> None:
    """Leaves the release of a tensor handle (or a call that frees another
    object of ctx) to a thread using ctx, at its next op or at the end of
    its function call or gradient (release_strays). For what is dropped
    where a C call that may wait for ctx's lock (all but vf_tensor_release,
    which never waits) could deadlock against ctx's thread waiting for this
    one (a LocalGroup rank in an allreduce): while the garbage collector
    runs (on whichever thread allocated), or a body's tensor dropped on
    another thread."""
    active.append(1)  # first: `active` never counts fewer than the strays
    strays.setdefault(id(ctx), []).append(what)  # each of the two calls is atomic


def take_strays(ctx: Any) -> Tuple[List[int], List[Any]]:
    """ctx's strays, taken off the table: handles and calls."""
    got = strays.pop(id(ctx), None)
    if not got:
        return [], []
    for _ in got:
        active.pop()
    return [w for w in got if not callable(w)], [w for w in got if callable(w)]


def release_handles(ctx: Any, handles: List[int]) -> None:
    """Releases handles Python dropped while the library was not done with
    them (a body's, a trace's): one it freed meanwhile only records an
    error, cleared here unless one was there before."""
    h = ctx.handle
    clean = _status_get(h) == 0
    for t in handles:
        _release(t)
    if clean:
        _error_clear(h)


def release_strays(ctx: Any) -> None:
    """Releases ctx's strays; the caller uses ctx on this thread and is not
    inside a call of it that runs bodies."""
    handles, calls = take_strays(ctx)
    if handles and ctx._h is not None:
        release_handles(ctx, handles)
    for f in calls:
        f()


# The threads collecting garbage now (their idents): Context.close waits for
# the others' collections to end before it destroys the context, so that a
# release the collector makes of one of its tensors is done first.
collectors: List[int] = []


def _gc_phase(phase: str, info: Any) -> None:
    try:
        if phase == "start":
            here.collecting = True
            collectors.append(_get_ident())
        elif here.collecting:
            here.collecting = False
            collectors.remove(_get_ident())
    except Exception:  # interpreter shutdown
        pass


gc.callbacks.append(_gc_phase)


def defer_open(ctx: Any) -> bool:
    """Opens this thread's release deferral for ctx unless one is open; True
    when this call opened it (and must close it with defer_close)."""
    d = here.deferring
    if ctx in d:
        return False
    d[ctx] = []
    mark(1)
    return True


def defer_close(ctx: Any) -> List[int]:
    """Closes this thread's deferral for ctx: the handles dropped while it was open."""
    handles = here.deferring.pop(ctx)
    mark(-1)
    return handles


def body_enter() -> None:
    here.body_depth += 1
    mark(1)


def body_leave() -> None:
    here.body_depth -= 1
    mark(-1)


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
                if active:
                    d = here.deferring.get(self._ctx)
                    if d is not None:
                        d.append(h)  # this thread is in a traced call: released after it
                        return
                if getattr(self, "_in_body", 0):
                    # Made in a body the library called and dropped after it
                    # (kept alive by a traceback, say): the body's scope or
                    # the trace may have freed it already, and releasing it
                    # again must not leave that error on the context.
                    if self._in_body != _get_ident() or here.collecting:
                        # dropped on another thread, or by the garbage
                        # collector (on any): the status calls below would
                        # wait for the context's lock, which its thread may
                        # hold while it waits for this one
                        stray(self._ctx, h)
                        return
                    ctx = self._ctx._h
                    clean = _status_get(ctx) == 0
                    _release(h)
                    if clean:
                        _error_clear(ctx)
                else:
                    _release(h)  # never waits for another thread (vf_tensor_release)
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
        if self._ctx not in here.deferring:
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


def wrap(ctx: "_context.Context", h: Optional[int]) -> Tensor:
    """A Tensor owning handle h (an op's result), or the context's error raised."""
    if not h:
        ctx.raise_error()
    if active:
        return _wrap_marked(ctx, h)
    t = _new(Tensor)
    t._h = h
    t._ctx = ctx
    return t


def _wrap_marked(ctx: "_context.Context", h: int) -> Tensor:
    """wrap when some thread is in a body or stop_recording, or strays wait:
    this one may be, or may release them (it uses ctx, outside its calls)."""
    s = here
    if strays and id(ctx) in strays and ctx not in s.deferring and not s.collecting:
        release_strays(ctx)
    if s.stop_recording:
        g = _L.vf_stop_gradient(ctx._h, h)
        _release(h)
        if not g:
            ctx.raise_error()
        h = g
    t = _new(Tensor)
    t._h = h
    t._ctx = ctx
    if s.body_depth:
        t._in_body = _get_ident()  # the body's thread (__del__)
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
