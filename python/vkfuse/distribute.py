"""Data-parallel training: ``vkfuse.distribute`` over ``libvkfuse_dist``
(docs/DISTRIBUTED.md), with MPI through ``mpi4py`` (Debian
``python3-mpi4py``) or as an in-process group of threads.

    from mpi4py import MPI
    import vkfuse as tf
    comm = tf.distribute.Communicator(MPI.COMM_WORLD)    # one rank per process (mpirun)
    comm.broadcast([w, b])                              # every rank starts from rank 0's weights
    ...
    grads = comm.allreduce(tape.gradient(loss, [w, b]))  # the mean over the ranks

``LocalGroup(n)`` makes n ranks in one process (one context and one
thread each, collectives through shared memory): ``Communicator(local=g,
rank=i, context=ctx)`` on thread i.

The dist library is found as the core one is (docs/PYTHON.md): first
``$VKFUSE_DIST_LIBRARY``, then next to the loaded ``libvkfuse`` (and its
build tree's ``src/dist``), then the system's loader. It is built where MPI
is (``libopenmpi-dev``).
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any, List, Optional, Sequence

from . import _context, _lib, errors
from .tensor import Tensor, wrap

_dl: Optional[ctypes.CDLL] = None


def _dist_lib() -> ctypes.CDLL:
    global _dl
    if _dl is not None:
        return _dl
    names = ["libvkfuse_dist.so.0", "libvkfuse_dist.so"]
    cands: List[str] = []
    env = os.environ.get("VKFUSE_DIST_LIBRARY")
    if env:
        cands.append(env)
    core = Path(_lib.path) if _lib.path else None
    if core is not None and core.parent.is_dir():
        cands += [str(core.parent / n) for n in names] + [str(core.parent / "src" / "dist" / n) for n in names]
    cands += names
    tried = []
    for c in cands:
        try:
            # RTLD_GLOBAL: Open MPI's plugins resolve the MPI symbols the dist library brought in.
            lib = ctypes.CDLL(c, mode=ctypes.RTLD_GLOBAL)
            break
        except OSError as e:
            tried.append(f"{c}: {e}")
    else:
        raise errors.UnimplementedError(None, None, "vkfuse.distribute: libvkfuse_dist.so not found (it is "
                                        "built where MPI is: libopenmpi-dev); tried " + "; ".join(tried),
                                        "VF_ERROR_UNSUPPORTED")
    P = ctypes.c_void_p
    protos = {
        "vf_dist_local_create": (P, [ctypes.c_int]), "vf_dist_local_destroy": (None, [P]),
        "vf_dist_create": (ctypes.c_int, [P, ctypes.POINTER(_DistDesc), ctypes.POINTER(P)]),
        "vf_dist_create_error": (ctypes.c_char_p, []), "vf_dist_rank": (ctypes.c_int, [P]),
        "vf_dist_size": (ctypes.c_int, [P]),
        "vf_dist_broadcast": (ctypes.c_int, [P, ctypes.c_int, ctypes.POINTER(P), ctypes.c_int]),
        "vf_dist_allreduce": (ctypes.c_int, [P, ctypes.c_int, ctypes.POINTER(P), ctypes.c_int, ctypes.POINTER(P)]),
        "vf_dist_error_message": (ctypes.c_char_p, [P]), "vf_dist_destroy": (None, [P]),
    }
    for name, (res, args) in protos.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    _dl = lib
    return lib


class _DistDesc(ctypes.Structure):
    # MPI_Comm is a pointer in Open MPI (an int in MPICH: pass mpi4py's
    # handle either way; 0 means MPI_COMM_WORLD).
    _fields_ = [("comm", ctypes.c_void_p), ("timeout_s", ctypes.c_double), ("chunk_bytes", ctypes.c_size_t),
                ("local", ctypes.c_void_p), ("local_rank", ctypes.c_int)]


class LocalGroup:
    """n ranks in one process (threads), no MPI."""

    def __init__(self, n: int) -> None:
        L = _dist_lib()
        self.size = int(n)
        self._h = L.vf_dist_local_create(self.size)
        if not self._h:
            raise errors.invalid(f"vkfuse.distribute.LocalGroup: cannot make a group of {n} ranks (1 or more)")

    def close(self) -> None:
        h, self._h = self._h, None
        if h:
            _dist_lib().vf_dist_local_destroy(h)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class Communicator:
    """A rank of a data-parallel group: ``allreduce``, ``broadcast``, ``rank``, ``size``."""

    def __init__(self, comm: Any = None, local: Optional[LocalGroup] = None, rank: int = 0,
                 context: Optional["_context.Context"] = None, timeout: float = 0.0) -> None:
        L = _dist_lib()
        self._ctx = context if context is not None else _context.context()
        self._local = local  # kept alive: destroyed after every member
        d = _DistDesc()
        if comm is not None:
            from mpi4py import MPI  # noqa: F401  (only with an MPI communicator)
            d.comm = MPI._handleof(comm)
        d.timeout_s = float(timeout)
        if local is not None:
            d.local = local._h
            d.local_rank = int(rank)
        out = ctypes.c_void_p()
        st = L.vf_dist_create(self._ctx.handle, ctypes.byref(d), ctypes.byref(out))
        if st != 0 or not out.value:
            msg = (L.vf_dist_create_error() or b"").decode(errors="replace")
            raise errors.from_status(st or 1, msg or "vf_dist_create failed")
        self._h = out.value

    @property
    def rank(self) -> int:
        return _dist_lib().vf_dist_rank(self._handle())

    @property
    def size(self) -> int:
        return _dist_lib().vf_dist_size(self._handle())

    def _handle(self) -> int:
        if self._h is None:
            raise errors.FailedPreconditionError(None, None, "vkfuse.distribute: this communicator was closed",
                                                 "VF_ERROR_INVALID_ARGUMENT")
        return self._h

    def _fail(self, st: int) -> None:
        ctx = self._ctx
        msg = (_lib.lib.vf_error_message(ctx.handle) or b"").decode(errors="replace")
        _lib.lib.vf_error_clear(ctx.handle)
        raise errors.from_status(st, msg or (_dist_lib().vf_dist_error_message(self._h) or b"").decode())

    def _arr(self, ts: Sequence[Tensor]) -> Any:
        for t in ts:
            if not isinstance(t, Tensor) or t._ctx is not self._ctx:
                raise errors.invalid("vkfuse.distribute: every tensor must be a tensor of the communicator's context")
        return (ctypes.c_void_p * max(len(ts), 1))(*[t.handle for t in ts])

    def allreduce(self, tensors: Any, op: str = "mean") -> Any:
        """The sum or mean over the ranks of each tensor (a list in, a list out; one tensor in, one out)."""
        single = isinstance(tensors, Tensor)
        ts = [tensors] if single else list(tensors)
        if op not in ("sum", "mean"):
            raise ValueError(f"vkfuse.distribute.allreduce: op must be 'sum' or 'mean', got {op!r}")
        out = (ctypes.c_void_p * max(len(ts), 1))()
        st = _dist_lib().vf_dist_allreduce(self._handle(), len(ts), self._arr(ts), 0 if op == "sum" else 1, out)
        if st != 0:
            self._fail(st)
        res = [wrap(self._ctx, out[i]) for i in range(len(ts))]
        return res[0] if single else res

    def broadcast(self, variables: Any, root: int = 0) -> None:
        """Sets each variable to root's value, in place."""
        vs = [variables] if isinstance(variables, Tensor) else list(variables)
        st = _dist_lib().vf_dist_broadcast(self._handle(), len(vs), self._arr(vs), int(root))
        if st != 0:
            self._fail(st)

    def close(self) -> None:
        h, self._h = self._h, None
        if h and self._ctx._h is not None:
            _dist_lib().vf_dist_destroy(h)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
