"""Strict JSON for every file prbench writes: no bare ``NaN`` or ``Infinity``.

Python's ``json`` writes ``NaN``, ``Infinity`` and ``-Infinity``, which are not JSON: strict
parsers (browsers, ``jq``, most other languages) reject the whole file. prbench's results,
manifests, Best-of-N and correlation files follow one convention instead:

- a non-finite number is written as ``null``;
- next to it, in the same object, the key ``<key>_nonfinite`` says what it was: ``"NaN"``,
  ``"Infinity"`` or ``"-Infinity"``. For numbers inside a list (or nested lists), that key holds
  an object mapping each position (``"3"``, or ``"3.1"`` for nested lists) to what was there.

:func:`restore` turns such a file back into NaN and infinities (prbench's readers use it).
So ``{"margin": NaN}`` is written as ``{"margin": null, "margin_nonfinite": "NaN"}`` and
``{"scores": [1.0, NaN]}`` as ``{"scores": [1.0, null], "scores_nonfinite": {"1": "NaN"}}``. A
NaN score or margin means "no verdict" (e.g. an unreadable judge reply); NaN statistics mean the
statistic is undefined (e.g. a correlation over constant values).
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: suffix of the key that records what a ``null`` stood for
NONFINITE_SUFFIX = "_nonfinite"


def _nonfinite(value: Any) -> str | None:
    """``"NaN"``/``"Infinity"``/``"-Infinity"`` for a non-finite real number, else ``None``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    if isinstance(value, numbers.Integral):
        return None
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    return None


def _in_list(items: list[Any] | tuple[Any, ...], prefix: str, found: dict[str, str]) -> list[Any]:
    out = []
    for i, item in enumerate(items):
        where = f"{prefix}{i}"
        kind = _nonfinite(item)
        if kind is not None:
            found[where] = kind
            out.append(None)
        elif isinstance(item, list | tuple):
            out.append(_in_list(item, f"{where}.", found))
        else:
            out.append(strict(item))
    return out


def strict(value: Any) -> Any:
    """A copy of ``value`` with every non-finite number replaced as the module docstring says.

    Mappings (keys as strings), lists and tuples (as lists) are copied recursively; numpy ints
    and floats become Python ones; anything else is returned as it is.
    """
    kind = _nonfinite(value)
    if kind is not None:
        return None  # a bare number has no place for the reason; callers pass containers
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        notes: dict[str, Any] = {}
        for key, item in value.items():
            name = str(key)
            kind = _nonfinite(item)
            if kind is not None:
                out[name] = None
                notes[name + NONFINITE_SUFFIX] = kind
            elif isinstance(item, list | tuple):
                found: dict[str, str] = {}
                out[name] = _in_list(item, "", found)
                if found:
                    notes[name + NONFINITE_SUFFIX] = found
            else:
                out[name] = strict(item)
        for name, note in notes.items():
            out.setdefault(name, note)
        return out
    if isinstance(value, list | tuple):
        return _in_list(value, "", {})
    kind = getattr(getattr(value, "dtype", None), "kind", "")
    if kind == "b" and getattr(value, "ndim", None) == 0:
        return bool(value)  # numpy bool
    if isinstance(value, numbers.Integral) and not isinstance(value, int):
        return int(value)  # numpy ints as JSON numbers
    if isinstance(value, numbers.Real) and not isinstance(value, int | float):
        return float(value)  # numpy floats as JSON numbers, not strings
    return value


_VALUES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _restore_list(items: list[Any], prefix: str, notes: Mapping[str, Any]) -> list[Any]:
    out = []
    for i, item in enumerate(items):
        where = f"{prefix}{i}"
        if item is None and where in notes:
            out.append(_VALUES.get(str(notes[where]), math.nan))
        elif isinstance(item, list):
            out.append(_restore_list(item, f"{where}.", notes))
        else:
            out.append(restore(item))
    return out


def restore(value: Any) -> Any:
    """The inverse of :func:`strict`: each recorded ``null`` back to its NaN or infinity.

    Files written before this convention (with bare ``NaN``, which Python's ``json`` reads) pass
    through unchanged.
    """
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            note = value.get(key + NONFINITE_SUFFIX) if isinstance(key, str) else None
            if key.endswith(NONFINITE_SUFFIX) and key[: -len(NONFINITE_SUFFIX)] in value:
                continue  # the note itself
            if item is None and isinstance(note, str):
                out[key] = _VALUES.get(note, math.nan)
            elif isinstance(item, list):
                out[key] = _restore_list(item, "", note if isinstance(note, Mapping) else {})
            else:
                out[key] = restore(item)
        return out
    if isinstance(value, list):
        return [restore(item) for item in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`strict` ``(value)`` that refuses any non-finite number left."""
    kwargs.setdefault("ensure_ascii", False)
    return json.dumps(strict(value), allow_nan=False, **kwargs)


def write_json(path: str | Path, value: Any, *, indent: int = 2) -> Path:
    """Write ``value`` as strict, indented JSON (plus a newline), atomically; returns the path.

    Raises:
        OutputWriteError: the file could not be written (it is then not left half-written).
    """
    from prbench.outputs import write_text

    return write_text(path, dumps(value, indent=indent, default=str) + "\n")


__all__ = ["NONFINITE_SUFFIX", "dumps", "restore", "strict", "write_json"]
