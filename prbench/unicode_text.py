r"""Unicode checks of text: what draws nothing, what counts as the same, what cannot be carried.

Used by the record checks (:mod:`prbench.record_schema`) and the preference-data converters:
:func:`invisible_only` (text whose every character draws nothing), :func:`comparable` (text as
compared for sameness, never stored), :func:`id_character_problem` (control, format and bidi
characters in an id) and :func:`text_problems` (a lone surrogate, a NUL character, nesting too
deep: text that later steps cannot take). Imports nothing from prbench but
:mod:`prbench.nesting`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from typing import Any

from prbench.nesting import too_deep

_SURROGATE = re.compile("[\ud800-\udfff]")
#: characters that control the direction of bidirectional text (Unicode's Bidi_Control)
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
#: letters and symbols that draw as blank space (Hangul fillers, the braille blank, ...)
_BLANK_LOOKALIKES = "\u115f\u1160\u3164\uffa0\u2800"


#: Unicode categories that draw nothing: control, format (zero-width, bidi, BOM), separators
_INVISIBLE_CATEGORIES = frozenset(("Cc", "Cf", "Zs", "Zl", "Zp"))
#: categories an id must not contain (a plain space is allowed; NUL has its own check)
_BAD_ID_CATEGORIES = frozenset(("Cc", "Cf", "Zl", "Zp"))


def _draws_nothing(char: str) -> bool:
    return (
        char.isspace()
        or char in _BLANK_LOOKALIKES
        or unicodedata.category(char) in _INVISIBLE_CATEGORIES
    )


def invisible_only(text: str) -> bool:
    """True when ``text`` has characters but none that draws anything.

    Whitespace of every kind, control and format characters (zero-width space, joiners, bidi
    controls, the BOM) and blank-looking letters (Hangul fillers, the braille blank) draw nothing.
    Stops at the first visible character (usually the first one).
    """
    return bool(text) and all(_draws_nothing(c) for c in text)


def comparable(text: str) -> str:
    """``text`` as compared for sameness (never stored: records keep their text exactly).

    NFKC (composed forms, NBSP and other space variants become a plain space), format characters
    (zero-width, bidi, soft hyphen, BOM) removed, whitespace runs made one space, stripped.
    """
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
        text = "".join(c for c in text if c.isascii() or unicodedata.category(c) != "Cf")
    return " ".join(text.split())


def id_character_problem(rid: str) -> tuple[str, str] | None:
    """``(message, code)`` when an id holds a control, format or line-separator character.

    Such characters make two different ids look the same on screen, and bidi controls reorder
    the text shown after them; NUL is left to the ``nul-character`` check.
    """
    if rid.isprintable():
        return None
    for index, char in enumerate(rid):
        if char == "\x00" or unicodedata.category(char) not in _BAD_ID_CATEGORIES:
            continue
        name = unicodedata.name(char, "a control character")
        what = f"U+{ord(char):04X} ({name}) at character {index + 1}"
        if char in BIDI_CONTROLS:
            return (
                f"contains the bidirectional-text control {what}, which reorders how the text "
                "around it is displayed; remove it",
                "bidi-control-in-id",
            )
        return (
            f"contains {what}, a control or invisible formatting character that makes different "
            "ids look the same; remove it",
            "control-character-in-id",
        )
    return None


def invisible_message(text: str) -> str:
    """The message for text made only of invisible characters, naming the first few."""
    kinds = sorted({c for c in text if not c.isspace() or c not in " \t\n\r"})[:4]
    named = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, 'control')}" for c in kinds)
    return (
        f"holds only invisible characters ({named or 'spaces'}): it would look empty; write the "
        "text or remove the record"
    )


def text_problems(data: Any, max_depth: int) -> Iterator[tuple[str | None, str, str]]:
    r"""``(field, message, code)`` for each text of decoded JSON that later steps cannot take.

    ``json`` decodes an escape such as ``\ud800`` without its pair into a string that cannot be
    encoded as UTF-8 (code ``lone-surrogate``, for a value or a key); a NUL character (``\u0000``,
    code ``nul-character``) truncates the text in C libraries, tokenizers and terminals; nesting
    deeper than ``max_depth`` lists/objects (code ``too-deeply-nested``, reported once, at the
    top-level field, and then nothing else: :func:`prbench.nesting.too_deep`, ``data`` itself being
    the first level) breaks recursive JSON and Arrow code. Walks ``data`` without recursion.
    """
    deep = too_deep(data, max_depth)
    if deep is not None:
        top = deep[0] if deep and isinstance(deep[0], str) else None
        yield top, f"is nested more than {max_depth} lists/objects deep", "too-deeply-nested"
        return
    stack: list[tuple[Any, Any]] = [(None, data)]  # (path chain, value)
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            found = None if value.isascii() else _SURROGATE.search(value)
            if found is not None:
                yield (
                    _field(path),
                    f"contains a lone UTF-16 surrogate U+{ord(found.group()):04X} at character "
                    f"{found.start() + 1} (an escape like \\ud83d without its pair), which is "
                    "not valid Unicode text; fix or remove the escape",
                    "lone-surrogate",
                )
            if "\x00" in value:
                yield (
                    _field(path),
                    f"contains a NUL character (U+0000, written \\u0000) at character "
                    f"{value.index(chr(0)) + 1}; remove it (it cuts the text short in "
                    "tokenizers, C libraries and terminals)",
                    "nul-character",
                )
        elif isinstance(value, dict):
            children: list[tuple[Any, Any]] = []
            for key, item in value.items():
                child = (path, key)
                children += [(child, key), (child, item)]
            stack.extend(reversed(children))
        elif isinstance(value, list):
            stack.extend(reversed([((path, i), item) for i, item in enumerate(value)]))


def _field(path: Any) -> str | None:
    """The dotted field (``profile[3].text``) of a path chain ``(parent, key or index)``."""
    parts: list[Any] = []
    while path is not None:
        path, key = path
        parts.append(key)
    out = ""
    for key in reversed(parts):
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else str(key))
    return out or None
