"""Device choice: ``vkfuse.devices()`` lists the Vulkan devices,
``vkfuse.device(spec)`` gives the context for a device, usable as
``with vkfuse.device("cpu"): ...``.

vkfuse's names make a context of their own (one per name, kept):
``"cpu"`` (the CPU backend), ``"vulkan"`` (the best Vulkan device, a
driver on the CPU such as lavapipe included), ``"vulkan:N"`` (device N of
``devices()``). TensorFlow's names (``"/CPU:0"``, ``"/GPU:0"``,
``"/device:GPU:1"``, ``"gpu"``) select the default context, as TF's soft
placement would when vkfuse picks the device: tensors made under them mix
freely with the rest of a TF program.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Any, Dict, List

from . import _context, _lib, errors

_L = _lib.lib
_made: Dict[str, _context.Context] = {}
_lock = threading.Lock()


def devices() -> List[Dict[str, Any]]:
    """The Vulkan devices (vf_devices) as dicts; ``chosen`` marks the one a Vulkan context uses."""
    arr = (_lib.DeviceInfo * 16)()
    err = ctypes.create_string_buffer(512)
    n = _L.vf_devices(arr, 16, err, len(err))
    out = []
    for i in range(min(max(n, 0), 16)):
        d = arr[i]
        row = {}
        for name, _ in d._fields_:
            v = getattr(d, name)
            row[name] = v.decode(errors="replace") if isinstance(v, bytes) else v
        row["index"] = i
        out.append(row)
    return out


def auto_backend() -> str:
    """What the default context picks here: 'vulkan' or 'cpu', and why."""
    why = ctypes.create_string_buffer(512)
    dev = ctypes.c_int(-1)
    b = _L.vf_auto_backend(ctypes.byref(dev), why, len(why))
    return {0: "none", 1: f"vulkan:{dev.value}", 2: "cpu"}.get(b, "?") + ": " + why.value.decode(errors="replace")


def device(device_name: str) -> _context.Context:
    """The context for device_name (see the module doc); use it with ``with``."""
    spec = str(device_name).strip()
    low = spec.lower()
    if low.startswith("/") or low.startswith("gpu") or low.startswith("/device:") or low == "":
        return _context.default_context()
    with _lock:
        c = _made.get(low)
        if c is not None and not c.closed:
            return c
        if low == "cpu":
            c = _context.Context(backend="cpu")
        elif low == "vulkan":
            c = _context.Context(backend="vulkan")
        elif low.startswith("vulkan:"):
            try:
                idx = int(low.split(":", 1)[1])
            except ValueError:
                raise errors.invalid(f"vkfuse.device: {spec!r}: the index after 'vulkan:' must be a number") from None
            c = _context.Context(backend="vulkan", device_index=idx)
        else:
            raise errors.invalid(f"vkfuse.device: unknown device {spec!r}; use 'cpu', 'vulkan', 'vulkan:N' "
                                 "(N from vkfuse.devices()) or TF's '/CPU:0', '/GPU:0'")
        _made[low] = c
        return c
