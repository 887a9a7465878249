"""pydantic's validation errors read as prbench's one-line messages.

The shapes of user input (component options, the reward server's ``/score`` body, the sweep
file) are pydantic models: strict types (a string is not taken for a number unless prbench's own
text grammar turns it into one first) and ``extra="forbid"`` (an unknown key is an error, never
dropped). Pydantic reports every problem at once, in its own words; prbench reports one, in its
words, naming the field. This module picks that one (:func:`first_error`), writes its place
(:func:`place`) and says what was expected (:data:`EXPECTED`); each reader words the line itself.
It imports no pydantic: the errors are :meth:`pydantic.ValidationError.errors` dicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: the model configuration every input model shares (a ``pydantic.ConfigDict`` is a dict)
STRICT = {"extra": "forbid", "strict": True}

#: pydantic error type -> what the value should have been, in prbench's words
EXPECTED = {
    "bool_type": "true/false",
    "bool_parsing": "true/false",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a mapping",
    "model_type": "an object",
    "model_attributes_type": "an object",
}


def first_error(errors: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The error to report: the first, but an unknown key before the fields next to it.

    Pydantic lists a mapping's field errors before its unknown keys; prbench reads a mapping's
    keys first (a misspelt key is the likelier cause of a missing field), outermost first.
    Errors of a union's ``None`` arm (``none_required``) are never the one: the other arm says
    what was wrong.
    """
    useful = [e for e in errors if e["type"] != "none_required"] or list(errors)
    first = useful[0]
    loc = tuple(first["loc"])
    extras = [e for e in useful if e["type"] == "extra_forbidden"
              and loc[: len(e["loc"]) - 1] == tuple(e["loc"][:-1])]
    return min(extras, key=lambda e: len(e["loc"])) if extras else first


def place(loc: Sequence[str | int], *, indices_only: bool = False) -> str:
    """A place as prbench writes it: ``("items", 0, "question")`` -> ``items[0].question``.

    Args:
        loc: pydantic's location of the error.
        indices_only: keep only the list indices (``[0][2]``), for a place whose name the caller
            writes itself; the names of union arms pydantic puts in a location are dropped.
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not indices_only:
            out += f".{part}" if out else str(part)
    return out


__all__ = ["EXPECTED", "STRICT", "first_error", "place"]
