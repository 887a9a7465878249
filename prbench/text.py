"""Word-level text helpers: the content words of a text, for rubric-overlap checks.

Used by the ``oracle-rubric`` baseline scorer and by the pair generator's aspect-leakage filter,
so that both count overlap the same way. Imports nothing from prbench (ground floor).
"""

from __future__ import annotations

import re

__all__ = ["content_words"]

_WORD = re.compile(r"[a-z0-9]+")
_STOP_TEXT = """a an and are as at be but by for from has have how i if in into is it its my of
on or so that the their them they this to was were what when which while with without you
your"""
_STOP = frozenset(_STOP_TEXT.split())


def content_words(text: str) -> set[str]:
    """Lower-cased words minus stop words and very short tokens, crudely stemmed."""
    words = set()
    for w in _WORD.findall(text.lower()):
        if w in _STOP or len(w) < 3:
            continue
        for suffix in ("ing", "es", "ed", "s"):
            if w.endswith(suffix) and len(w) - len(suffix) >= 3:
                w = w[: -len(suffix)]
                break
        words.add(w)
    return words
