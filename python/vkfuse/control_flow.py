"""tf.cond, tf.while_loop, tf.map_fn, tf.scan, tf.foldl / foldr: TF2's
functional control flow, over the graph control flow AutoGraph uses
(graph_control.Backend: vf_cond / vf_while_loop while a vkfuse.function
traces, plain Python eagerly).

map_fn, scan and the folds run their function once per element of dim 0
in Python (unrolled while tracing: the dim must not vary between calls,
i.e. no input_signature None dim there); TF runs them as a graph loop.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional

from . import graph_control, nest
from .tensor import Tensor

# vf_cond needs the output count before either branch is traced: the
# branches' outputs are padded to this many (unused pads are dropped with
# the rest of the dead code).
_COND_OUTPUTS = 16


def _as_tensor(x: Any, what: str) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (bool, int, float)):
        return graph_control.Backend().convert(x)
    from ._core import tensor
    try:
        return tensor(x)
    except Exception:
        raise TypeError(f"vkfuse.{what}: {x!r} is not a tensor (nor a number or array)") from None


def cond(pred: Any, true_fn: Optional[Callable[[], Any]] = None, false_fn: Optional[Callable[[], Any]] = None,
         name: Optional[str] = None) -> Any:
    """true_fn() if pred else false_fn(); with a tensor pred while tracing,
    both are traced into one graph cond and must return the same structure
    of tensors (Python numbers become tensors)."""
    if not callable(true_fn) or not callable(false_fn):
        raise TypeError("vkfuse.cond: true_fn and false_fn must be callables of no arguments")
    if not isinstance(pred, Tensor):
        return true_fn() if pred else false_fn()
    if not graph_control.tracing(pred._ctx):
        return true_fn() if bool(pred) else false_fn()
    got = {}

    def branch(fn: Callable[[], Any], key: str) -> Callable[[], List[Tensor]]:
        def run() -> List[Tensor]:
            r = fn()
            leaves = [] if r is None else [_as_tensor(x, "cond") for x in nest.flatten(r)]
            if len(leaves) > _COND_OUTPUTS:
                raise ValueError(f"vkfuse.cond: a branch returns {len(leaves)} tensors; at most "
                                 f"{_COND_OUTPUTS} (stack them into fewer)")
            got[key] = (r, len(leaves))
            other = got.get("false" if key == "true" else "true")
            if other is not None and other[1] != len(leaves):
                raise ValueError(f"vkfuse.cond: true_fn and false_fn return {got['true'][1]} and "
                                 f"{got['false'][1]} tensors: both branches must return the same structure")
            return leaves + [graph_control.Backend().convert(False)] * (_COND_OUTPUTS - len(leaves))
        return run

    outs = graph_control.Backend().cond(pred, branch(true_fn, "true"), branch(false_fn, "false"), _COND_OUTPUTS)
    (rt, nt), (rf, nf) = got["true"], got["false"]
    if nt != nf or (rt is None) != (rf is None):
        raise ValueError(f"vkfuse.cond: true_fn returns {nt} tensors and false_fn {nf}: both branches must "
                         "return the same structure")
    return None if rt is None else nest.pack_sequence_as(rt, outs[:nt])


def while_loop(cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Any, shape_invariants: Any = None,
               parallel_iterations: int = 10, back_prop: bool = True, swap_memory: bool = False,
               maximum_iterations: Any = None, name: Optional[str] = None) -> Any:
    """Repeats loop_vars = body(*loop_vars) while cond(*loop_vars); returns
    the loop variables in loop_vars' structure (one graph loop while
    tracing: their dtypes and shapes must not change)."""
    if not callable(cond) or not callable(body):
        raise TypeError("vkfuse.while_loop: cond and body must be callables")
    seq = isinstance(loop_vars, (list, tuple))
    struct = loop_vars if seq else [loop_vars]  # cond and body get *struct, as TF's
    flat = [_as_tensor(x, "while_loop") for x in nest.flatten(struct)]
    n = len(flat)
    if not n:
        raise ValueError("vkfuse.while_loop: loop_vars is empty")
    counted = maximum_iterations is not None
    if counted:
        flat.append(_as_tensor(0, "while_loop"))

    def unpack(v: Any) -> List[Any]:
        return list(nest.pack_sequence_as(struct, list(v[:n])))

    def c(*v: Any) -> Any:
        r = cond(*unpack(v))
        if counted:
            from .math_ops import logical_and, less
            r = logical_and(_as_tensor(r, "while_loop"), less(v[n], maximum_iterations))
        return r

    def b(*v: Any) -> List[Tensor]:
        r = body(*unpack(v))
        if not seq or not isinstance(r, (list, tuple)) and len(struct) == 1:
            r = [r]
        leaves = [_as_tensor(x, "while_loop") for x in nest.flatten(r)]
        if len(leaves) != n:
            raise ValueError(f"vkfuse.while_loop: body returns {len(leaves)} tensors for {n} loop variables")
        return leaves + ([v[n] + 1] if counted else [])

    res = graph_control.Backend().while_loop(c, b, flat)[:n]
    out = nest.pack_sequence_as(struct, res)
    return out if seq else out[0]


def _rows(elems: Any, what: str) -> Any:
    flat = [_as_tensor(x, what) for x in nest.flatten(elems)]
    if not flat or any(t.ndim == 0 for t in flat):
        raise ValueError(f"vkfuse.{what}: elems must be tensors of rank >= 1")
    n = flat[0].shape[0]
    if any(t.shape[0] != n for t in flat):
        raise ValueError(f"vkfuse.{what}: every tensor of elems needs the same dim 0")
    from .array_ops import unstack
    cols = [unstack(t, axis=0) for t in flat]
    return n, [nest.pack_sequence_as(elems, [c[i] for c in cols]) for i in range(n)]


def _stack_all(results: List[Any], what: str) -> Any:
    from .array_ops import stack
    if not results:
        raise ValueError(f"vkfuse.{what}: elems has no elements (dim 0 is 0)")
    flats = [[_as_tensor(x, what) for x in nest.flatten(r)] for r in results]
    return nest.pack_sequence_as(results[0], [stack(list(col), axis=0) for col in zip(*flats)])


def map_fn(fn: Callable[[Any], Any], elems: Any, dtype: Any = None, parallel_iterations: Any = None,
           back_prop: bool = True, swap_memory: bool = False, infer_shape: bool = True, name: Any = None,
           fn_output_signature: Any = None) -> Any:
    """fn on each element of dim 0 of elems (a tensor or a structure of them), results stacked."""
    _, rows = _rows(elems, "map_fn")
    return _stack_all([fn(r) for r in rows], "map_fn")


def scan(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any = None, parallel_iterations: Any = None,
         back_prop: bool = True, swap_memory: bool = False, infer_shape: bool = True, reverse: bool = False,
         name: Any = None) -> Any:
    """acc = fn(acc, x) over dim 0 of elems; every acc stacked (the first
    element is the start when there is no initializer)."""
    _, rows = _rows(elems, "scan")
    if reverse:
        rows = rows[::-1]
    out = []
    if initializer is None:
        acc, rows = rows[0], rows[1:]
        out.append(acc)
    else:
        acc = initializer
    for r in rows:
        acc = fn(acc, r)
        out.append(acc)
    if reverse:
        out = out[::-1]
    return _stack_all(out, "scan")


def foldl(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any = None, parallel_iterations: Any = None,
          back_prop: bool = True, swap_memory: bool = False, name: Any = None) -> Any:
    _, rows = _rows(elems, "foldl")
    acc, rows = (rows[0], rows[1:]) if initializer is None else (initializer, rows)
    for r in rows:
        acc = fn(acc, r)
    return acc


def foldr(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any = None, parallel_iterations: Any = None,
          back_prop: bool = True, swap_memory: bool = False, name: Any = None) -> Any:
    _, rows = _rows(elems, "foldr")
    rows = rows[::-1]
    acc, rows = (rows[0], rows[1:]) if initializer is None else (initializer, rows)
    for r in rows:
        acc = fn(acc, r)
    return acc
