"""Contexts: one device each. The default context is made lazily.

A ``Context`` owns a ``vf_context``. The first op that needs a device uses
the default context, created then on the default device (what
``vf_context_create(NULL)`` picks: the best GPU, else the CPU backend;
``VKFUSE_BACKEND=cpu|vulkan`` and ``VKFUSE_DEVICE`` are honoured by the
library itself). ``vkfuse.device(...)`` makes others and makes one current
for a ``with`` block (a thread's own stack).

A context's tensors hold a reference to it; closing it (``close()``, or at
interpreter exit for the default one) destroys the C context and every
tensor of it, after which using one of those tensors raises
``FailedPreconditionError`` rather than touching freed memory.
"""
from __future__ import annotations

import atexit
import ctypes
import threading
import time
from typing import Any, Dict, List, Optional

from . import _lib, errors

_L = _lib.lib
_BACKENDS = {None: 0, "auto": 0, "vulkan": 1, "gpu": 1, "cpu": 2}
_BACKEND_NAMES = {0: "auto", 1: "vulkan", 2: "cpu"}


class Context:
    """One vkfuse context (a device, its caches, its tensors)."""

    def __init__(self, backend: Optional[str] = None, device_index: Optional[int] = None,
                 validation: bool = False, profile: bool = False,
                 device_memory_limit: int = 0) -> None:
        if backend not in _BACKENDS:
            raise ValueError(f"vkfuse: unknown backend {backend!r}; use 'cpu', 'vulkan' or None (auto)")
        desc = _lib.ContextDesc()
        desc.backend = _BACKENDS[backend]
        if device_index is not None:
            desc.device_index = int(device_index)
            desc.pick_device = True
        desc.validation = bool(validation)
        desc.profile = bool(profile)
        desc.device_memory_limit = int(device_memory_limit)
        out = ctypes.c_void_p()
        st = _L.vf_context_create(ctypes.byref(desc), ctypes.byref(out))
        if st != 0:
            # A failed create may still hand back a context holding the message.
            msg = ""
            if out.value:
                msg = (_L.vf_error_message(out.value) or b"").decode(errors="replace")
                _L.vf_context_destroy(out.value)
            raise errors.from_status(st, msg or "vkfuse: vf_context_create failed "
                                     f"({_L.vf_status_name(st).decode()}); check VKFUSE_BACKEND / "
                                     "VKFUSE_DEVICE and the Vulkan driver")
        self._h: Optional[int] = out.value
        self._scalars: Dict[Any, Any] = {}   # small constants of binary ops with Python numbers
        self._generator: Any = None          # the global random generator (vkfuse.random)
        self._lock = threading.Lock()

    # ---- state -----------------------------------------------------------
    @property
    def handle(self) -> int:
        h = self._h
        if h is None:
            raise errors.FailedPreconditionError(
                None, None, "vkfuse: this context was closed; its tensors are gone (make new ones in "
                "a live context, e.g. the default one)", "VF_ERROR_INVALID_ARGUMENT")
        return h

    @property
    def closed(self) -> bool:
        return self._h is None

    @property
    def device_name(self) -> str:
        return _L.vf_device_name(self.handle).decode(errors="replace")

    @property
    def backend(self) -> str:
        return _BACKEND_NAMES.get(_L.vf_backend_get(self.handle), "?")

    def raise_error(self) -> None:
        """Raises the context's recorded error and clears it (the context stays usable)."""
        h = self.handle
        st = _L.vf_status_get(h)
        msg = (_L.vf_error_message(h) or b"").decode(errors="replace")
        _L.vf_error_clear(h)
        if st == 0:
            msg = msg or "vkfuse: an op failed without recording an error"
            st = 1
        raise errors.from_status(st, msg)

    def check(self, status: int) -> None:
        if status != 0:
            self.raise_error()

    def sync(self) -> None:
        """Waits for every queued op (GIL released while waiting)."""
        self.check(_L.vf_context_sync(self.handle))

    def trim(self) -> None:
        self.check(_L.vf_context_trim(self.handle))

    def stats(self) -> Dict[str, Any]:
        s = _lib.ContextStats()
        self.check(_L.vf_context_stats_get(self.handle, ctypes.byref(s)))
        return {name: getattr(s, name) for name, _ in s._fields_}

    def close(self) -> None:
        """Destroys the C context and every tensor of it."""
        h, self._h = self._h, None
        self._scalars = {}
        if self._generator is not None:
            self._generator._h = None
            self._generator = None
        if h is not None:
            # The garbage collector may be releasing a tensor of this context
            # on another thread (it checked _h before it became None): let
            # that collection end first. Its releases never wait for a lock.
            from .tensor import collectors, _get_ident, take_strays
            me = _get_ident()
            while any(t != me for t in collectors):
                time.sleep(0.0005)
            take_strays(self)  # what was left to this context: destroy frees it
            _L.vf_context_destroy(h)

    def __del__(self) -> None:
        # Unreachable: no tensor, variable, tape or generator of it is left
        # (they all hold the context), so destroying it frees only the device.
        try:
            self.close()
        except Exception:
            pass

    # ---- as a current device -------------------------------------------
    def __enter__(self) -> "Context":
        _stack().append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _stack().pop()

    def __repr__(self) -> str:
        if self._h is None:
            return "<vkfuse.Context (closed)>"
        return f"<vkfuse.Context backend={self.backend} device={self.device_name!r}>"


_default: Optional[Context] = None
_default_lock = threading.Lock()
_tls = threading.local()


def _stack() -> List[Context]:
    s = getattr(_tls, "stack", None)
    if s is None:
        s = _tls.stack = []
    return s


def default_context() -> Context:
    """The default context, created on first use."""
    global _default
    c = _default
    if c is None:
        with _default_lock:
            if _default is None:
                _default = Context()
            c = _default
    return c


def context() -> Context:
    """The current context: the innermost ``with vkfuse.device(...)``, else the default."""
    s = getattr(_tls, "stack", None)
    if s:
        return s[-1]
    return _default if _default is not None else default_context()


def _close_default() -> None:
    global _default
    c, _default = _default, None
    if c is not None:
        c.close()


atexit.register(_close_default)
