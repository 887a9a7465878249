"""How deeply a decoded JSON value nests: the one check of records and request bodies.

Arrays and objects inside each other beyond a limit break recursive code later on (``json``,
Arrow, pydantic, a results file written back), so input that nests too deeply is refused where it
comes in: a benchmark record (:data:`prbench.record_schema.MAX_DEPTH`, through
:func:`prbench.unicode_text.text_problems`) and a ``/score`` request body
(:data:`prbench.downstream.serve_schema.MAX_DEPTH`). Both ask :func:`too_deep`, which walks the
value without recursion (so it never hits Python's recursion limit itself) and stops at the first
container past the limit. The parser's own limit (``RecursionError`` from ``json.loads``) is
reported by the readers where it happens.

Ground floor: imports nothing from prbench.
"""

from __future__ import annotations

from typing import Any

__all__ = ["too_deep"]


def too_deep(value: Any, max_depth: int) -> tuple[Any, ...] | None:
    """The path to the first array/object nested more than ``max_depth`` levels deep, or ``None``.

    ``value`` itself, when an array or object, is level 1. The path lists the keys and indices
    from ``value`` down to that container (``("profile", 3, "meta")``); it is ``()`` only when
    ``max_depth`` is below 1 and ``value`` is a container.

    Args:
        value: a decoded JSON value (dicts, lists, scalars).
        max_depth: the deepest level allowed.
    """
    if not isinstance(value, dict | list):
        return None
    stack: list[tuple[tuple[Any, ...], Any, int]] = [((), value, 1)]
    while stack:
        path, node, depth = stack.pop()
        if depth > max_depth:
            return path
        items = node.items() if isinstance(node, dict) else enumerate(node)
        children = [((*path, key), child, depth + 1) for key, child in items
                    if isinstance(child, dict | list)]
        stack.extend(reversed(children))
    return None
