"""Your own compute shaders as ops from Python: ``vkfuse.kernel``.

A GLSL compute shader (the interface of docs/KERNELS.md: inputs then
outputs as storage buffers of set 0, one push-constant block of the params
then the element counts) runs on Vulkan; an optional NumPy function runs on
the CPU backend. Outputs have fixed shapes, or shapes computed from the
inputs' by a Python function. Parameters are packed with ``struct`` by a
format (``params="ff"``: two floats). ``grad=`` makes the kernel
differentiable: a Python function building the inputs' gradients from
vkfuse ops, which the library calls while a tape computes gradients (eager
or traced).
"""
from __future__ import annotations

import ctypes
import struct
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _context, _lib, dtypes, errors
from ._core import same_context
from ._core import tensor as _t
from .tensor import Tensor, wrap

_L = _lib.lib
_MAXIO = 8


class _Spec(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("rank", ctypes.c_int), ("shape", ctypes.c_int64 * 8)]


class _Shapes(ctypes.Structure):
    _fields_ = [("n_inputs", ctypes.c_int), ("n_outputs", ctypes.c_int), ("inp", ctypes.POINTER(_Spec)),
                ("out", ctypes.POINTER(_Spec)), ("params", ctypes.c_void_p)]


ShapeFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_Shapes), ctypes.c_void_p)
CpuFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_Shapes), ctypes.POINTER(ctypes.c_void_p),
                         ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)
# vf_status (*)(vf_context *, const vf_kernel_shapes *, vf_tensor *const *in, vf_tensor *const *out,
#               vf_tensor *const *grad_out, vf_tensor **grad_in, void *user)
GradFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_Shapes), ctypes.POINTER(ctypes.c_void_p),
                          ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p),
                          ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)

# A Python exception a gradient callback raised, kept until the tape's
# gradient call returns (the library only sees an error status): take_pending.
# Per thread (tensor.here.pending): the callback runs on the thread of that call.


def take_pending() -> Optional[BaseException]:
    """The first exception a kernel's grad raised on this thread since the last call (cleared)."""
    from . import tensor as _tensor
    pending = _tensor.here.pending
    e = pending[0] if pending else None
    pending.clear()
    return e


class _KernelDesc(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("glsl", ctypes.c_char_p), ("spirv", ctypes.c_void_p),
                ("spirv_words", ctypes.c_size_t), ("n_inputs", ctypes.c_int), ("n_outputs", ctypes.c_int),
                ("inputs", ctypes.c_int * _MAXIO), ("outputs", _Spec * _MAXIO), ("output_shapes", ShapeFn),
                ("param_bytes", ctypes.c_uint32), ("workgroup_size", ctypes.c_uint32),
                ("groups", ctypes.c_uint32 * 3), ("dispatch", ctypes.c_void_p), ("cpu", CpuFn),
                ("grad", GradFn), ("user", ctypes.c_void_p), ("uninitialized_outputs", ctypes.c_bool),
                ("side_effect", ctypes.c_bool), ("check_bounds", ctypes.c_bool)]


_L.vf_kernel_create.restype = ctypes.c_void_p
_L.vf_kernel_create.argtypes = [ctypes.c_void_p, ctypes.POINTER(_KernelDesc)]
_L.vf_kernel_call.restype = ctypes.c_int
_L.vf_kernel_call.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                              ctypes.POINTER(ctypes.c_void_p)]
_L.vf_kernel_destroy.restype = None
_L.vf_kernel_destroy.argtypes = [ctypes.c_void_p]

OutputSpec = Tuple[Any, Sequence[int]]


def _spec_shape(s: _Spec) -> Tuple[int, ...]:
    return tuple(s.shape[i] for i in range(s.rank))


class Kernel:
    """A user kernel made by ``vkfuse.kernel``: ``k(*inputs, params=(...))`` returns its outputs."""

    def __init__(self, glsl: str, inputs: Sequence[Any], outputs: Sequence[Any], name: str,
                 params: str, output_shapes: Optional[Callable[..., Any]], cpu: Optional[Callable[..., Any]],
                 workgroup_size: int, groups: Optional[Sequence[int]], ctx: "_context.Context",
                 grad: Optional[Callable[..., Any]] = None) -> None:
        self.name = name
        self._ctx = ctx
        self._h = None
        self._error: Optional[BaseException] = None
        self._fmt = "<" + params
        self._param_bytes = struct.calcsize(self._fmt) if params else 0
        self._n_in, self._n_out = len(inputs), len(outputs)
        if not 1 <= self._n_out <= _MAXIO or self._n_in > _MAXIO:
            raise ValueError(f"vkfuse.kernel: 0..{_MAXIO} inputs and 1..{_MAXIO} outputs")
        d = _KernelDesc()
        d.name = name.encode()
        d.glsl = glsl.encode()
        d.n_inputs, d.n_outputs = self._n_in, self._n_out
        for i, dt in enumerate(inputs):
            d.inputs[i] = dtypes.as_dtype(dt)._vf
        for j, o in enumerate(outputs):
            dt, shape = (o, None) if not isinstance(o, (tuple, list)) else (o[0], o[1])
            d.outputs[j].dtype = dtypes.as_dtype(dt)._vf
            if shape is not None:
                d.outputs[j].rank = len(shape)
                for k, v in enumerate(shape):
                    d.outputs[j].shape[k] = int(v)
            elif output_shapes is None:
                raise ValueError("vkfuse.kernel: give each output as (dtype, shape), or output_shapes=")
        d.param_bytes = self._param_bytes
        d.workgroup_size = int(workgroup_size)
        if groups:
            for k, g in enumerate(groups):
                d.groups[k] = int(g)
        self._cbs: List[Any] = []
        if output_shapes is not None:
            d.output_shapes = self._shape_cb(output_shapes)
        if cpu is not None:
            d.cpu = self._cpu_cb(cpu)
        if grad is not None:
            d.grad = self._grad_cb(grad)
        ctx.__dict__.setdefault("_callbacks", []).extend(self._cbs)
        h = _L.vf_kernel_create(ctx.handle, ctypes.byref(d))
        if not h:
            ctx.raise_error()
        self._h = h

    def _params(self, s: Any) -> Tuple[Any, ...]:
        if not self._param_bytes:
            return ()
        return struct.unpack(self._fmt, ctypes.string_at(s.params, self._param_bytes))

    def _shape_cb(self, fn: Callable[..., Any]) -> Any:
        def run(sp: Any, user: Any) -> int:
            s = sp.contents
            try:
                shapes = fn(*[_spec_shape(s.inp[i]) for i in range(s.n_inputs)], *self._params(s))
                if self._n_out == 1 and shapes and not isinstance(shapes[0], (tuple, list)):
                    shapes = [shapes]
                for j, shape in enumerate(shapes):
                    s.out[j].rank = len(shape)
                    for k, v in enumerate(shape):
                        s.out[j].shape[k] = int(v)
                return 0
            except BaseException as e:  # noqa: BLE001 (re-raised by __call__)
                self._error = self._error or e
                return 1
        cb = ShapeFn(run)
        self._cbs.append(cb)
        return cb

    def _cpu_cb(self, fn: Callable[..., Any]) -> Any:
        def arr(ptr: Any, spec: Any) -> np.ndarray:
            shape = _spec_shape(spec)
            dt = dtypes.BY_VF[spec.dtype]._np
            n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
            if n == 0:
                return np.zeros(shape, dt)
            buf = (ctypes.c_char * n).from_address(ptr)
            return np.frombuffer(buf, dt).reshape(shape)

        def run(sp: Any, ins: Any, outs: Any, user: Any) -> int:
            s = sp.contents
            try:
                xs = [arr(ins[i], s.inp[i]) for i in range(s.n_inputs)]
                res = fn(*xs, *self._params(s))
                if self._n_out == 1:
                    res = [res]
                for j, r in enumerate(res):
                    o = arr(outs[j], s.out[j])
                    o[...] = np.asarray(r, o.dtype)
                return 0
            except BaseException as e:  # noqa: BLE001
                self._error = self._error or e
                return 1
        cb = CpuFn(run)
        self._cbs.append(cb)
        return cb

    def _grad_cb(self, fn: Callable[..., Any]) -> Any:
        from . import graph_control
        from . import tensor as _tensor

        def run(ctx_h: Any, sp: Any, ins: Any, outs: Any, gouts: Any, gins: Any, user: Any) -> int:
            # The library lends in/out/grad_out (Borrowed: never released
            # here) and takes grad_in from the gradient's scope; Python's
            # releases of what fn made wait until the tape is done with
            # them (graph_control.release_dropped, via GradientTape).
            s = sp.contents
            opened = _tensor.defer_open(self._ctx)
            _tensor.body_enter()  # its scalars die with the gradient's scope: not cached
            try:
                b = graph_control.borrow
                xs = [b(self._ctx, ins[i]) for i in range(s.n_inputs)]
                ys = [b(self._ctx, outs[j]) for j in range(s.n_outputs)]
                gs = [b(self._ctx, gouts[j]) if gouts[j] else None for j in range(s.n_outputs)]
                res = fn(xs, ys, gs, *self._params(s))
                if self._n_in == 1 and (res is None or isinstance(res, Tensor)):
                    res = [res]
                res = list(res)
                if len(res) != s.n_inputs:
                    raise ValueError(f"kernel '{self.name}': grad returned {len(res)} gradients for "
                                     f"{s.n_inputs} inputs; return one per input (None: no gradient)")
                for i, g in enumerate(res):
                    if g is not None and not isinstance(g, Tensor):
                        raise TypeError(f"kernel '{self.name}': grad returned {g!r} for input {i}; "
                                        "return a vkfuse tensor made by ops, or None")
                    # a reference of the library's own: the scope the tape runs
                    # in drops one, Python's deferred release of g the other
                    # (a tensor the library lent, returned as is, stays its own)
                    lent = isinstance(g, graph_control.Borrowed)
                    gins[i] = None if g is None else g._h if lent else _L.vf_tensor_retain(g._h)
                return 0
            except BaseException as e:  # noqa: BLE001 (re-raised by GradientTape.gradient)
                _tensor.here.pending.append(e)
                return 1
            finally:
                _tensor.body_leave()
                if opened:
                    _tensor.here.orphans.extend((self._ctx, h) for h in _tensor.defer_close(self._ctx))
        cb = GradFn(run)
        self._cbs.append(cb)
        return cb

    def __call__(self, *inputs: Any, params: Sequence[Any] = ()) -> Union[Tensor, List[Tensor]]:
        if self._h is None:
            raise errors.FailedPreconditionError(None, None, f"kernel '{self.name}' was destroyed",
                                                 "VF_ERROR_INVALID_ARGUMENT")
        ts = [_t(x, self._ctx) for x in inputs]
        ctx = same_context(self.name, *ts) if ts else self._ctx
        if ctx is not self._ctx:
            raise errors.invalid(f"kernel '{self.name}' belongs to another context than its inputs")
        p = struct.pack(self._fmt, *params) if self._param_bytes else None
        arr = (ctypes.c_void_p * max(len(ts), 1))(*[t._h for t in ts])
        out = (ctypes.c_void_p * self._n_out)()
        self._error = None
        st = _L.vf_kernel_call(self._h, len(ts), arr, p, out)
        err, self._error = self._error, None
        if st != 0:
            if err is not None:
                _L.vf_error_clear(ctx.handle)
                raise err
            ctx.raise_error()
        res = [wrap(ctx, h) for h in out]
        return res[0] if self._n_out == 1 else res

    def __del__(self) -> None:
        h, self._h = getattr(self, "_h", None), None
        if h:
            from . import tensor as _tensor
            if _tensor.here.collecting and self._ctx._h is not None:  # see tensor.stray
                _tensor.stray(self._ctx, lambda: _L.vf_kernel_destroy(h))
            else:
                _L.vf_kernel_destroy(h)


def kernel(glsl: str, inputs: Sequence[Any] = (), outputs: Sequence[Any] = (dtypes.float32,),
           name: str = "user_kernel", params: str = "", output_shapes: Optional[Callable[..., Any]] = None,
           cpu: Optional[Callable[..., Any]] = None, workgroup_size: int = 0,
           groups: Optional[Sequence[int]] = None, grad: Optional[Callable[..., Any]] = None) -> Kernel:
    """A user kernel. inputs: each input's dtype; outputs: (dtype, shape) each, or dtypes with
    output_shapes(*input_shapes, *params) -> shape(s); params: a struct format of the
    push-constant parameters; cpu(*inputs, *params) -> output(s) in NumPy for the CPU backend;
    grad(inputs, outputs, grad_outputs, *params) -> each input's gradient (a tensor made by
    vkfuse ops, or None; one tensor for one input), grad_outputs[j] None where none reaches."""
    return Kernel(glsl, inputs, outputs, name, params, output_shapes, cpu, workgroup_size, groups,
                  _context.context(), grad)
