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
lists, tuples and dicts as Python prints them with their tensors as values,
rows of a matrix on lines of their own, and along each dim at most
`summarize` (3) elements from each end with "..." between; the default
stream is sys.stderr, as TF's.
"""
from __future__ import annotations

import ctypes
import sys

import numpy as np

from . import _context, _fn_lib
from . import tensor as _tensor
from .tensor import Tensor, constant, wrap

L = _fn_lib.L
HOST_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_void_p,
                           ctypes.c_void_p, ctypes.c_size_t)
L.vf_host_map.restype = ctypes.c_void_p
L.vf_host_map.argtypes = [ctypes.c_void_p, ctypes.c_void_p, HOST_FN, ctypes.c_void_p, ctypes.c_char_p]
_NP = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint32, 4: np.uint8}

# host callbacks of graph prints made during the current trace are kept in
# the tracing thread's tensor.here.prints: the function being traced keeps
# them alive for as long as its graphs live


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


def _tensors(x, out):
    """The tensors in x (a value, or lists, tuples and dicts of them), in the order _render meets them."""
    if isinstance(x, Tensor):
        out.append(x)
    elif isinstance(x, dict):
        for v in x.values():
            _tensors(v, out)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _tensors(v, out)
    return out


def _render(x, texts, top=True):
    """x's text with each tensor's from the iterator texts: TF prints a
    structure as Python would, its tensors as values ({'a': 1, 'b': [1 2]})."""
    if isinstance(x, Tensor):
        return next(texts)
    if isinstance(x, dict):
        return "{" + ", ".join("%r: %s" % (k, _render(v, texts, False)) for k, v in x.items()) + "}"
    if isinstance(x, list):
        return "[" + ", ".join(_render(v, texts, False) for v in x) + "]"
    if isinstance(x, tuple):
        return "(" + ", ".join(_render(v, texts, False) for v in x) + ("," if len(x) == 1 else "") + ")"
    return str(x) if top else repr(x)


def _line(inputs, texts, sep, end):
    it = iter(texts)
    return sep.join(_render(x, it) for x in inputs) + end


def eager_print(*inputs, output_stream=None, sep=" ", end="\n", summarize=3):
    texts = [format_value(t.numpy(), summarize) for t in _tensors(list(inputs), [])]
    _write(output_stream, _line(inputs, texts, sep, end))


def graph_print(*inputs, output_stream=None, sep=" ", end="\n", summarize=3):
    ctx = _context.context()
    tensors = _tensors(list(inputs), [])
    texts = [None] * len(tensors)
    carriers = tensors or [constant(0)]
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
                if tensors:
                    texts[k] = format_value(a, summarize)
                if k == len(carriers) - 1:
                    _write(output_stream, _line(inputs, texts, sep, end))
                return 0
            except Exception as e:  # reported by the call as the callback's failure
                text = ("vkfuse.print: %s" % e).encode()[:msg_len - 1]
                ctypes.memmove(msg, text + b"\0", len(text) + 1)
                return 1
        cb = HOST_FN(fn)
        _tensor.here.prints.append(cb)
        h = L.vf_host_map(ctx.handle, t._h, cb, None, b"print")
        wrap(ctx, h)  # the node stays in the graph (an effect); its value is not needed


def print_(*inputs, output_stream=None, sep=" ", end="\n", summarize=3, name=None):
    """tf.print: prints tensors' values (TF's format) and Python values, by
    default to sys.stderr; inside a vkfuse.function, at every call."""
    if L.vf_context_tracing(_context.context().handle):
        return graph_print(*inputs, output_stream=output_stream, sep=sep, end=end, summarize=summarize)
    return eager_print(*inputs, output_stream=output_stream, sep=sep, end=end, summarize=summarize)


print_.__name__ = "print"
