"""vkfuse.print (tf.print): TF's text for tensors, eagerly and inside
traced functions.

Eagerly it prints at once. While a vkfuse.function traces, each tensor of
the print becomes a host-callback node of the graph (vf_host_map, an effect
the optimiser keeps in order), so the line is printed at every call of the
function, with the values of that call; a print without tensors hangs on a
constant. The last tensor's callback writes the whole line. A function
holding such a print cannot be saved (the saved format has no Python to
call back); the save says so.

Format, as TF's: elements with %g (6 significant digits), booleans as 1/0,
rows of a matrix on lines of their own, and along each dim at most
`summarize` (3) elements from each end with "..." between; the default
stream is sys.stderr, as TF's.
"""
from __future__ import annotations

import ctypes
import sys

import numpy as np

from . import _context, _fn_lib
from .tensor import Tensor, constant, wrap

L = _fn_lib.L
HOST_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_void_p,
                           ctypes.c_void_p, ctypes.c_size_t)
L.vf_host_map.restype = ctypes.c_void_p
L.vf_host_map.argtypes = [ctypes.c_void_p, ctypes.c_void_p, HOST_FN, ctypes.c_void_p, ctypes.c_char_p]
_NP = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint32, 4: np.uint8}

# host callbacks of graph prints made during the current trace: the
# function being traced keeps them alive for as long as its graphs live
made = []


def _elem(v):
    if isinstance(v, (np.bool_, bool)):
        return "1" if v else "0"
    if isinstance(v, (np.floating, float)):
        return "%g" % v
    return str(v)


def format_value(a, summarize=3):
    """TF's tf.print text for an array."""
    a = np.asarray(a)
    if a.ndim == 0:
        return _elem(a[()])

    def rows(x, depth):
        n = x.shape[0]
        idx = list(range(n)) if summarize < 0 or n <= 2 * summarize else \
            list(range(summarize)) + [None] + list(range(n - summarize, n))
        if x.ndim == 1:
            return "[" + " ".join("..." if i is None else _elem(x[i]) for i in idx) + "]"
        glue = "\n" + " " * (depth + 1)
        return "[" + glue.join("..." if i is None else rows(x[i], depth + 1) for i in idx) + "]"
    return rows(a, 0)


def _write(stream, text):
    stream = sys.stderr if stream is None else stream
    if callable(getattr(stream, "write", None)):
        stream.write(text)
        stream.flush()
    elif callable(stream):  # a logging function, as TF accepts
        stream(text.rstrip("\n"))
    else:
        raise TypeError("vkfuse.print: output_stream must be a file-like object or a logging function")


def eager_print(*inputs, output_stream=None, sep=" ", end="\n", summarize=3):
    parts = [format_value(x.numpy(), summarize) if isinstance(x, Tensor) else str(x) for x in inputs]
    _write(output_stream, sep.join(parts) + end)


def graph_print(*inputs, output_stream=None, sep=" ", end="\n", summarize=3):
    ctx = _context.context()
    line = [None if isinstance(x, Tensor) else str(x) for x in inputs]
    slots = [i for i, x in enumerate(inputs) if isinstance(x, Tensor)]
    carriers = [inputs[i] for i in slots] or [constant(0)]
    sym = [L.vf_tensor_symbolic_dims(t._h) for t in carriers]
    shapes = [list(t.shape) for t in carriers]

    for k, t in enumerate(carriers):
        def fn(user, dtype, numel, data, msg, msg_len, k=k):
            try:
                a = np.ctypeslib.as_array(ctypes.cast(data, ctypes.POINTER(np.ctypeslib.as_ctypes_type(
                    _NP[dtype]))), (numel,)) if numel else np.zeros(0, _NP[dtype])
                a = a.astype(bool) if dtype == 4 else a.copy()
                shape = list(shapes[k])
                free = [d for d in range(len(shape)) if sym[k] >> d & 1]
                if len(free) == 1:
                    rest = int(np.prod([s for d, s in enumerate(shape) if d != free[0]]))
                    shape[free[0]] = numel // rest if rest else 0
                if len(free) <= 1:
                    a = a.reshape(shape)
                if slots:
                    line[slots[k]] = format_value(a, summarize)
                if k == len(carriers) - 1:
                    _write(output_stream, sep.join(line) + end)
                return 0
            except Exception as e:  # reported by the call as the callback's failure
                text = ("vkfuse.print: %s" % e).encode()[:msg_len - 1]
                ctypes.memmove(msg, text + b"\0", len(text) + 1)
                return 1
        cb = HOST_FN(fn)
        made.append(cb)
        h = L.vf_host_map(ctx.handle, t._h, cb, None, b"print")
        wrap(ctx, h)  # the node stays in the graph (an effect); its value is not needed


def print_(*inputs, output_stream=None, sep=" ", end="\n", summarize=3, name=None):
    """tf.print: prints tensors' values (TF's format) and Python values, by
    default to sys.stderr; inside a vkfuse.function, at every call."""
    if L.vf_context_tracing(_context.context().handle):
        return graph_print(*inputs, output_stream=output_stream, sep=sep, end=end, summarize=summarize)
    return eager_print(*inputs, output_stream=output_stream, sep=sep, end=end, summarize=summarize)


print_.__name__ = "print"
