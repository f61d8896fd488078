"""tf.nest's flatten / pack_sequence_as / map_structure, for lists, tuples,
namedtuples and dicts (sorted keys, as TF)."""
from __future__ import annotations

from typing import Any, Callable, List


def _is_seq(x: Any) -> bool:
    return isinstance(x, (list, tuple, dict))


def flatten(structure: Any, expand_composites: bool = False) -> List[Any]:
    if isinstance(structure, dict):
        return [v for k in sorted(structure) for v in flatten(structure[k])]
    if isinstance(structure, (list, tuple)):
        return [v for s in structure for v in flatten(s)]
    return [structure]


def pack_sequence_as(structure: Any, flat_sequence: Any, expand_composites: bool = False) -> Any:
    it = iter(flat_sequence)

    def build(s: Any) -> Any:
        if isinstance(s, dict):
            vals = {k: build(s[k]) for k in sorted(s)}
            return type(s)((k, vals[k]) for k in s)
        if isinstance(s, (list, tuple)):
            items = [build(v) for v in s]
            if isinstance(s, tuple) and hasattr(s, "_fields"):
                return type(s)(*items)
            return type(s)(items)
        return next(it)
    return build(structure)


def map_structure(func: Callable[..., Any], *structures: Any, **kw: Any) -> Any:
    flats = [flatten(s) for s in structures]
    return pack_sequence_as(structures[0], [func(*xs) for xs in zip(*flats)])


def is_nested(x: Any) -> bool:
    return _is_seq(x)
