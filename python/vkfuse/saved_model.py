"""tf.saved_model.save / load for vkfuse.function, over vf_function_save /
vf_function_load: one file in the library's saved-function format
(docs/FORMAT.md) holding every concrete function the function has traced
(their optimised graphs, input signatures, captured values and variables).
Loading needs neither the Python source nor Python: C programs load the
same file with vf_function_load.
"""
from __future__ import annotations

import ctypes
import os

from . import _context, _fn_lib
from .function import Function
from .tensor import Tensor, constant, wrap

L = _fn_lib.L


def save(obj, export_dir, signatures=None, options=None):
    """Writes obj's concrete functions to the file export_dir. obj is a
    vkfuse.function (or an object, such as a Module, whose __call__ is one)
    that has been called (or has an input_signature, or signatures= gives
    its concrete function); its calls with other shapes
    than the saved ones fail in the loaded copy unless the signature has
    None dims."""
    if not isinstance(obj, Function) and isinstance(getattr(type(obj), "__call__", None), Function):
        obj = obj.__call__  # a tf.Module whose __call__ is a vkfuse.function: save that, as TF serves it
    if signatures is not None and hasattr(signatures, "_entry"):
        entries = [signatures._entry]
    elif isinstance(obj, Function):
        if not obj._entries and obj.input_signature is not None:
            obj.get_concrete_function()
        entries = list(obj._entries.values())
    else:
        raise TypeError("vkfuse.saved_model.save: give a vkfuse.function (or a concrete function as signatures=), "
                        "got %r" % (obj,))
    if not entries:
        raise ValueError("vkfuse.saved_model.save: '%s' has not been traced yet: call it (or give it an "
                         "input_signature) before saving, so that there is a graph to save" % obj.__name__)
    if len(entries) > 1:
        raise ValueError("vkfuse.saved_model.save: '%s' was traced for %d different values of its Python "
                         "(non-tensor) arguments; a saved file holds one function, whose inputs are tensors. "
                         "Save a function per value (or pass those values as tensors)" % (obj.__name__, len(entries)))
    e = entries[0]
    if e.assigned:
        raise ValueError("vkfuse.saved_model.save: '%s' assigns its variable argument '%s'; a saved function takes "
                         "a variable argument as an input (its value), so the assign could not reach the caller's "
                         "variable. Capture the variable by closure instead (then it is saved with the function) "
                         "to save it" % (obj.__name__, e.names[e.var_first[e.assigned[0]]]))
    path = os.fspath(export_dir)
    if L.vf_function_save(e.handle, path.encode()) != 0:
        e.ctx.raise_error()


class Loaded:
    """A function loaded from a saved file: call it with tensors (or NumPy
    arrays) in the saved order; it returns one tensor, a tuple of them, or
    None, as many as the saved function returns."""

    def __init__(self, path, ctx):
        self._ctx = ctx
        out = ctypes.c_void_p()
        if L.vf_function_load(ctx.handle, os.fspath(path).encode(), ctypes.byref(out)) != 0:
            ctx.raise_error()
        self._h = out.value
        self.n_inputs, self.n_outputs = _fn_lib.io_count(self._h)
        self._ins = _fn_lib.handles(self.n_inputs)
        self._outs = _fn_lib.handles(self.n_outputs)

    def __call__(self, *args):
        if len(args) != self.n_inputs:
            raise TypeError("vkfuse.saved_model: the loaded function takes %d tensors, got %d"
                            % (self.n_inputs, len(args)))
        ts = [a if isinstance(a, Tensor) else constant(a) for a in args]
        for i, t in enumerate(ts):
            self._ins[i] = t._h
        if L.vf_function_call(self._h, self._ins, self._outs) != 0:
            self._ctx.raise_error()
        res = tuple(wrap(self._ctx, self._outs[k]) for k in range(self.n_outputs))
        return None if not res else res[0] if len(res) == 1 else res

    @property
    def variables(self):
        """The saved variables (the loaded function's own copies)."""
        out = []
        for i in range(L.vf_function_variable_count(self._h)):
            h = L.vf_function_variable(self._h, i)
            out.append(wrap(self._ctx, L.vf_tensor_retain(h)))
        return out

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h and self._ctx._h is not None:
            L.vf_function_destroy(h)


def load(export_dir, tags=None, options=None):
    """The function saved at export_dir, in the current context."""
    return Loaded(export_dir, _context.context())
