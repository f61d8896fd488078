"""AutoGraph: plain Python control flow over tensors becomes graph control
flow (TensorFlow's tf.autograph, for vkfuse.function).

    converted = vkfuse.autograph.convert(f)   # what vkfuse.function traces
    print(vkfuse.autograph.to_code(f))        # the converted source

`if`/`elif`/`else`, `while`, `for x in <tensor>` (`vkfuse.range(n)`
included), `break`, `continue`, `return` anywhere, `and`/`or`/`not` and
`a if c else b` are converted. Whether one becomes graph control flow is
decided when it runs: a tensor condition gives a graph cond / while loop,
a Python value plain Python (so `if training:` on a Python bool still
selects code at trace time). What cannot be converted raises
ConversionError naming the file and line.
"""

import inspect
import logging
import os
import sys
import types
import weakref

from . import operators
from .converter import NoSource as _NoSource
from .converter import convert_function
from .operators import ConversionError, Undefined, get_backend, set_backend, use_backend

__all__ = ["convert", "to_code", "do_not_convert", "ConversionError", "set_backend", "get_backend",
           "use_backend", "Undefined"]

_cache = weakref.WeakKeyDictionary()


def _target(f):
    f = getattr(f, "python_function", f)  # a vkfuse.function: its Python function
    if inspect.ismethod(f):
        return f.__func__, f.__self__
    if not inspect.isfunction(f):
        raise ConversionError("AutoGraph converts Python functions, not %r" % (f,))
    return f, None


def _converted(f):
    entry = _cache.get(f)
    if entry is None:
        entry = convert_function(f)
        _cache[f] = entry
    return entry


def convert(f):
    """f with its control flow converted (conversion happens once per
    function; methods stay bound). Functions marked do_not_convert and
    lambdas come back unchanged."""
    func, self = _target(f)
    if getattr(func, "__ag_do_not_convert__", False) or func.__name__ == "<lambda>":
        return f
    try:
        g = _converted(func)[0]
    except _NoSource as e:
        # as TF: without the source, the function runs as written
        logging.getLogger("vkfuse").warning("AutoGraph could not convert %s (%s); it runs as written, so its "
                                            "Python control flow cannot depend on tensors", func.__qualname__, e)
        func.__ag_do_not_convert__ = True
        return f
    return g.__get__(self) if self is not None else g


_LIBRARY_DIRS = tuple({os.path.dirname(os.path.dirname(os.path.abspath(__file__))), sys.prefix, sys.base_prefix,
                       os.path.dirname(os.__file__)})


def _user_function(f):
    """The plain Python function behind f if it is user code (not the
    library's, the standard library's or an installed package's), else None."""
    func = f.__func__ if inspect.ismethod(f) else f
    if not inspect.isfunction(func) or func.__name__ == "<lambda>" or getattr(func, "__ag_do_not_convert__", False):
        return None
    path = os.path.abspath(func.__code__.co_filename)
    if path.startswith(_LIBRARY_DIRS) or "site-packages" in path or "dist-packages" in path or path.startswith("<"):
        return None
    return func


def _convert_call(f):
    if type(f) is types.FunctionType or type(f) is types.MethodType:
        if _user_function(f) is not None:
            return convert(f)
    return f


operators._converter[0] = _convert_call


def to_code(f):
    """The source of f after conversion, as a string."""
    func, _ = _target(f)
    return _converted(func)[1]


def do_not_convert(f):
    """Marks f to be traced as written (no AutoGraph)."""
    f.__ag_do_not_convert__ = True
    return f
