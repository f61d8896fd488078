"""``vkfuse.linalg`` and the linear-algebra names of TF's top level:
einsum, tensordot, eye, matmul, norm, matvec, matrix_transpose, trace.

einsum and tensordot are built of transposes, reshapes, broadcast
multiplies and sums (so they are differentiable like those ops); a
two-operand contraction that is a matrix product goes through matmul.
"""
from __future__ import annotations

import string
from typing import Any, List, Optional, Sequence

import numpy as np

from . import dtypes, errors
from ._core import tensor as _t
from .array_ops import expand_dims, reshape, transpose
from .math_ops import l2_normalize, matmul, multiply, norm, reduce_sum  # noqa: F401
from .tensor import Tensor, constant


def eye(num_rows: int, num_columns: Optional[int] = None, batch_shape: Optional[Sequence[int]] = None,
        dtype: Any = dtypes.float32, name: Optional[str] = None) -> Tensor:
    m = np.eye(int(num_rows), int(num_columns) if num_columns is not None else None,
               dtype=dtypes.as_dtype(dtype)._stored._np)
    if batch_shape:
        m = np.broadcast_to(m, tuple(batch_shape) + m.shape).copy()
    return constant(m)


def matrix_transpose(a: Any, name: str = "matrix_transpose", conjugate: bool = False) -> Tensor:
    x = _t(a)
    perm = list(range(x.ndim))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    return transpose(x, perm)


def matvec(a: Any, b: Any, transpose_a: bool = False, adjoint_a: bool = False, name: Optional[str] = None) -> Tensor:
    return reshape_last(matmul(a, expand_dims(b, -1), transpose_a=transpose_a or adjoint_a))


def reshape_last(x: Tensor) -> Tensor:
    return reshape(x, list(x.shape[:-1]))


def trace(x: Any, name: Optional[str] = None) -> Tensor:
    x = _t(x)
    n = min(x.shape[-2:])
    return reduce_sum(multiply(x[..., :n, :n], eye(n, dtype=x.dtype)), axis=[-2, -1])


def tensordot(a: Any, b: Any, axes: Any, name: Optional[str] = None) -> Tensor:
    """tf.tensordot: sum over a's axes[0] and b's axes[1] (an int n: a's last n, b's first n)."""
    a, b = _t(a), _t(b)
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        ax_a, ax_b = list(range(a.ndim - n, a.ndim)), list(range(n))
    else:
        ax_a, ax_b = ([axes[0]] if isinstance(axes[0], int) else list(axes[0]),
                      [axes[1]] if isinstance(axes[1], int) else list(axes[1]))
    ax_a = [x % a.ndim for x in ax_a]
    ax_b = [x % b.ndim for x in ax_b]
    if [a.shape[i] for i in ax_a] != [b.shape[i] for i in ax_b]:
        raise errors.invalid(f"vkfuse.tensordot: contracted dims {[a.shape[i] for i in ax_a]} and "
                             f"{[b.shape[i] for i in ax_b]} differ", "VF_ERROR_SHAPE")
    free_a = [i for i in range(a.ndim) if i not in ax_a]
    free_b = [i for i in range(b.ndim) if i not in ax_b]
    k = int(np.prod([a.shape[i] for i in ax_a], dtype=np.int64))
    ma = reshape(transpose(a, free_a + ax_a), [-1, k]) if a.ndim else reshape(a, [1, 1])
    mb = reshape(transpose(b, ax_b + free_b), [k, -1]) if b.ndim else reshape(b, [1, 1])
    return reshape(matmul(ma, mb), [a.shape[i] for i in free_a] + [b.shape[i] for i in free_b])


def einsum(equation: str, *inputs: Any, **kwargs: Any) -> Tensor:
    """tf.einsum for explicit or implicit output (no ellipsis)."""
    eq = equation.replace(" ", "")
    if "..." in eq:
        raise errors.UnimplementedError(None, None, "vkfuse.einsum: '...' is not available",
                                        "VF_ERROR_UNSUPPORTED")
    lhs, _, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(inputs):
        raise ValueError(f"vkfuse.einsum: {equation!r} names {len(terms)} operands, {len(inputs)} given")
    if "->" not in eq:
        counts = {c: lhs.count(c) for c in set(lhs) if c in string.ascii_letters}
        out = "".join(sorted(c for c, n in counts.items() if n == 1))
    ts = [_t(x) for x in inputs]
    sizes = {}
    for term, t in zip(terms, ts):
        if len(term) != t.ndim:
            raise errors.invalid(f"vkfuse.einsum: operand {term!r} has rank {t.ndim}", "VF_ERROR_SHAPE")
        for c, d in zip(term, t.shape):
            if sizes.setdefault(c, d) != d and d != 1 and sizes[c] != 1:
                raise errors.invalid(f"vkfuse.einsum: label {c!r} has sizes {sizes[c]} and {d}", "VF_ERROR_SHAPE")
            sizes[c] = max(sizes[c], d)
    # Every label in one order: the output's, then the summed ones.
    labels: List[str] = list(out) + sorted(set("".join(terms)) - set(out))
    acc: Optional[Tensor] = None
    for term, t in zip(terms, ts):
        # Repeated labels in one operand (a diagonal): multiply by an identity mask.
        seen = []
        for i, c in enumerate(term):
            if c in seen:
                j = term.index(c)
                n = sizes[c]
                mask_shape = [1] * t.ndim
                mask_shape[j], mask_shape[i] = n, n
                mask = np.eye(n, dtype=t.dtype._stored._np).reshape(mask_shape)
                t = reduce_sum(multiply(t, constant(mask)), axis=i, keepdims=True)
            seen.append(c)
        keep = [i for i, c in enumerate(term) if term.index(c) == i]
        cur = "".join(term[i] for i in keep)
        t = reshape(t, [t.shape[i] for i in keep]) if len(keep) != len(term) else t
        present = [c for c in labels if c in cur]
        t = transpose(t, [cur.index(c) for c in present]) if present != list(cur) else t
        t = reshape(t, [sizes[c] if c in cur and t.shape[present.index(c)] != 1 else 1 for c in labels]) \
            if labels else t
        acc = t if acc is None else multiply(acc, t)
    assert acc is not None
    summed = list(range(len(out), len(labels)))
    if summed:
        acc = reduce_sum(acc, axis=summed)
    return reshape(acc, [sizes[c] for c in out])
