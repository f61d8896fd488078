"""``vkfuse.random``: tf.random's normal / uniform / Generator / set_seed.

Draws come from counter-based Philox generators on the device
(``vf_generator``): the same seed gives the same numbers on every backend.
Without a seed, ops draw from the context's global generator, seeded by
``set_seed`` (else from the OS's randomness at first use).
"""
from __future__ import annotations

import os
from typing import Any, Optional

from . import _context, dtypes, errors
from ._core import L, i64s, shape_arg
from . import tensor as _tensor
from .tensor import Tensor, wrap


class Generator:
    """tf.random.Generator: a random stream whose state lives on the device."""

    def __init__(self, seed: int, ctx: Optional["_context.Context"] = None) -> None:
        self._ctx = ctx if ctx is not None else _context.context()
        self._h = L.vf_generator_create(self._ctx.handle, int(seed) & (2 ** 64 - 1))
        if not self._h:
            self._ctx.raise_error()

    @classmethod
    def from_seed(cls, seed: int, alg: Any = None, ctx: Optional["_context.Context"] = None) -> "Generator":
        if isinstance(alg, _context.Context):
            ctx, alg = alg, None
        return cls(seed, ctx)

    @classmethod
    def from_non_deterministic_state(cls, alg: Any = None) -> "Generator":
        return cls(int.from_bytes(os.urandom(8), "little"))

    def _handle(self, ctx: "_context.Context") -> int:
        if self._h is None or self._ctx._h is None:
            raise errors.FailedPreconditionError(None, None, "vkfuse.random.Generator: its context was "
                                                 "closed; make a new generator", "VF_ERROR_INVALID_ARGUMENT")
        if ctx is not self._ctx:
            raise errors.invalid("vkfuse.random.Generator: the generator belongs to another context")
        return self._h

    def __del__(self) -> None:
        h, self._h = getattr(self, "_h", None), None
        if h and self._ctx._h is not None:
            if _tensor.here.collecting:  # see tensor.stray
                _tensor.stray(self._ctx, lambda: L.vf_generator_destroy(h))
            else:
                L.vf_generator_destroy(h)

    def _draw(self, cfn: Any, shape: Any, dtype: Any) -> Tensor:
        s = shape_arg(shape, "random")
        dt = dtypes.as_dtype(dtype)
        if not dt.is_floating:
            raise errors.invalid(f"vkfuse.random: draws are float32 or float16, not {dt.name}",
                                 "VF_ERROR_DTYPE")
        ctx = self._ctx
        return wrap(ctx, cfn(ctx.handle, self._handle(ctx), dt._vf, len(s), i64s(s)))

    def normal(self, shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = dtypes.float32,
               name: Optional[str] = None) -> Tensor:
        x = self._draw(L.vf_generator_normal, shape, dtype)
        return _affine(x, stddev, mean)

    def uniform(self, shape: Any, minval: Any = 0, maxval: Any = None, dtype: Any = dtypes.float32,
                name: Optional[str] = None) -> Tensor:
        dt = dtypes.as_dtype(dtype)
        if dt.is_integer:
            if maxval is None:
                raise ValueError("vkfuse.random.uniform: an integer dtype needs maxval")
            from .math_ops import cast, floor
            u = self._draw(L.vf_generator_uniform, shape, dtypes.float32)
            return cast(floor(_affine(u, float(maxval) - float(minval), float(minval))), dt)
        u = self._draw(L.vf_generator_uniform, shape, dt)
        hi = 1.0 if maxval is None else maxval
        if isinstance(hi, (int, float)) and isinstance(minval, (int, float)):
            return _affine(u, float(hi) - float(minval), float(minval))
        from .math_ops import subtract
        return _affine(u, subtract(hi, minval), minval)

    def truncated_normal(self, shape: Any, mean: Any = 0.0, stddev: Any = 1.0,
                         dtype: Any = dtypes.float32, name: Optional[str] = None) -> Tensor:
        """Normals redrawn where |x| > 2 (a few rounds, then clipped to +-2)."""
        from .math_ops import abs as _abs, clip_by_value, greater, reduce_any, where
        x = self._draw(L.vf_generator_normal, shape, dtype)
        traced = _tracing(self._ctx)
        for _ in range(8):
            bad = greater(_abs(x), 2.0)
            if traced and _ > 2:
                break  # no host check in a graph: 3 rounds leave ~1e-6 of the draws clipped
            if not traced and not bool(reduce_any(bad)):
                break
            x = where(bad, self._draw(L.vf_generator_normal, shape, dtype), x)
        return _affine(clip_by_value(x, -2.0, 2.0), stddev, mean)


def _affine(x: Tensor, scale: Any, shift: Any) -> Tensor:
    from .math_ops import add, multiply
    if not (isinstance(scale, (int, float)) and scale == 1):
        x = multiply(x, scale)
    if not (isinstance(shift, (int, float)) and shift == 0):
        x = add(x, shift)
    return x


_global_seed: Optional[int] = None


def set_seed(seed: int) -> None:
    """tf.random.set_seed: reseeds the global generator of every context made from now on and the
    current one."""
    global _global_seed
    _global_seed = int(seed)
    ctx = _context.context()
    ctx._generator = Generator(_global_seed, ctx)


def get_global_generator(ctx: Optional["_context.Context"] = None) -> Generator:
    ctx = ctx if ctx is not None else _context.context()
    g = ctx._generator
    if g is None:
        seed = _global_seed if _global_seed is not None else int.from_bytes(os.urandom(8), "little")
        g = ctx._generator = Generator(seed, ctx)
    return g


def set_global_generator(generator: Generator) -> None:
    generator._ctx._generator = generator


def _tracing(ctx: "_context.Context") -> bool:
    return bool(L.vf_context_tracing(ctx.handle))


def _gen(seed: Optional[int]) -> Generator:
    """The generator an op draws from. An op seed makes a generator of its
    own, eagerly; while a function is traced (where no generator can be
    made) it draws from the context's generator, which a traced function
    made beforehand: the draws then change at every call, as TF's seeded
    ops in a tf.function do (with other numbers)."""
    if seed is not None and not _tracing(_context.context()):
        return Generator(seed)
    return get_global_generator()


def normal(shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = dtypes.float32,
           seed: Optional[int] = None, name: Optional[str] = None) -> Tensor:
    return _gen(seed).normal(shape, mean, stddev, dtype)


def uniform(shape: Any, minval: Any = 0, maxval: Any = None, dtype: Any = dtypes.float32,
            seed: Optional[int] = None, name: Optional[str] = None) -> Tensor:
    return _gen(seed).uniform(shape, minval, maxval, dtype)


def truncated_normal(shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = dtypes.float32,
                     seed: Optional[int] = None, name: Optional[str] = None) -> Tensor:
    return _gen(seed).truncated_normal(shape, mean, stddev, dtype)


def shuffle(value: Any, seed: Optional[int] = None, name: Optional[str] = None) -> Tensor:
    """Shuffles along the first dim (a permutation drawn from the generator's uniforms)."""
    from .array_ops import gather
    from ._core import tensor
    import numpy as np
    x = tensor(value)
    u = _gen(seed).uniform([x.shape[0]]).numpy()
    return gather(x, np.argsort(u, kind="stable").astype(np.int32))


def categorical(logits: Any, num_samples: int, dtype: Any = None, seed: Optional[int] = None,
                name: Optional[str] = None) -> Tensor:
    """Samples class indices from [batch, classes] logits (Gumbel-max over the generator's uniforms)."""
    from ._core import tensor
    from .array_ops import expand_dims
    from .math_ops import argmax, log, maximum, negative, subtract
    lg = tensor(logits)
    b, k = lg.shape
    u = _gen(seed).uniform([b, int(num_samples), k])
    gumbel = negative(log(negative(log(maximum(u, 1e-20)))))
    return argmax(subtract(expand_dims(lg, 1), negative(gumbel)), axis=-1,
                  output_type=dtypes.int32 if dtype is None else dtype)


def _stateless_seed(seed: Any) -> int:
    import numpy as np
    s = np.asarray(seed.numpy() if isinstance(seed, Tensor) else seed, np.int64).reshape(-1)
    if s.size != 2:
        raise errors.invalid("vkfuse.random.stateless_*: seed must be a pair of integers ([a, b])")
    return (int(s[0]) & 0xFFFFFFFF) << 32 | (int(s[1]) & 0xFFFFFFFF)


def stateless_normal(shape: Any, seed: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = dtypes.float32,
                     name: Optional[str] = None, alg: Any = None) -> Tensor:
    """The same numbers for the same seed pair at every call, traced too (not TF's numbers)."""
    return _affine(_stateless_normal(shape, seed, dtype), stddev, mean)


def _stateless_normal(shape: Any, seed: Any, dtype: Any) -> Tensor:
    # vf_random_normal: a host seed, no state, so it may run in a traced function
    s = shape_arg(shape, "random")
    dt = dtypes.as_dtype(dtype)
    if not dt.is_floating:
        raise errors.invalid(f"vkfuse.random: draws are float32 or float16, not {dt.name}", "VF_ERROR_DTYPE")
    ctx = _context.context()
    return wrap(ctx, L.vf_random_normal(ctx.handle, dt._vf, len(s), i64s(s), _stateless_seed(seed)))


def stateless_uniform(shape: Any, seed: Any, minval: Any = 0, maxval: Any = None, dtype: Any = dtypes.float32,
                      name: Optional[str] = None, alg: Any = None) -> Tensor:
    """Uniforms as the normal CDF of stateless normals (u = (1 + erf(z / sqrt 2)) / 2):
    the same numbers for the same seed pair, traced too."""
    from .math_ops import cast, erf, floor, minimum
    dt = dtypes.as_dtype(dtype)
    if dt.is_integer and maxval is None:
        raise ValueError("vkfuse.random.stateless_uniform: an integer dtype needs maxval")
    z = _stateless_normal(shape, seed, dtypes.float32)
    u = minimum(_affine(erf(_affine(z, 0.7071067811865476, 0.0)), 0.5, 0.5), 1.0 - 2.0 ** -24)
    if dt.is_integer:
        return cast(floor(_affine(u, float(maxval) - float(minval), float(minval))), dt)
    hi = 1.0 if maxval is None else maxval
    return cast(_affine(u, float(hi) - float(minval), float(minval)), dt)
