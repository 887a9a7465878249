"""The ``bm25`` profile builder: the top-k posts by BM25 against the question (``bm25s``).

Each user's posts form their own corpus (term statistics come from that user's posts only). Text
is lower-cased and split into letter/digit runs, English stop words are dropped (``stopwords=en``)
and words are reduced by a light English suffix stripper (``stemmer=simple``) unless turned off.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from prbench.profiles.base import ProfileView, with_progress
from prbench.profiles.budget import (
    TokenCounter,
    builder_id,
    check_ranked_options,
    doc_text,
    query_text,
    ranked_option,
    ranked_view,
)

if TYPE_CHECKING:
    from prbench.records import Record

_WORD = re.compile(r"[^\W_]+")
# (suffix, replacement), longest first; the stem must keep at least three letters.
_SUFFIXES = (
    ("ational", "ate"), ("ization", "ize"), ("fulness", "ful"), ("iveness", "ive"),
    ("ement", "e"), ("ingly", ""), ("edly", ""), ("ing", ""), ("ed", ""), ("ly", ""),
)
_INFLECTIONS = frozenset({"ing", "ed", "ingly", "edly"})
_ES_AFTER = ("ss", "sh", "ch", "x", "z")
_KEEP_DOUBLE = frozenset("lszaeiou")


def _strip_plural(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("es") and word[:-2].endswith(_ES_AFTER) and len(word) >= 5:
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) >= 4:
        return word[:-1]
    return word


def simple_stem(word: str) -> str:
    """Reduce an English word with a few suffix rules (``paintings`` -> ``paint``).

    A deliberately small rule set: first a plural (``-s``, ``-es`` after a sibilant, ``-ies`` ->
    ``-y``), then one of ``-ing``/``-ed`` (undoubling a final consonant: ``running`` -> ``run``),
    ``-ly`` and a few derivational endings. Words of three letters or fewer, and words with digits,
    are kept as they are.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    word = _strip_plural(word)
    for suffix, repl in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: -len(suffix)] + repl
            doubled = len(stem) >= 4 and stem[-1] == stem[-2] and stem[-1] not in _KEEP_DOUBLE
            if suffix in _INFLECTIONS and doubled:
                stem = stem[:-1]
            return stem
    return word


@dataclasses.dataclass(frozen=True)
class BM25Options:
    """Options of the ``bm25`` profile builder."""

    k: int = ranked_option("k")
    k1: float = dataclasses.field(
        default=1.5, metadata={"help": "BM25 term-frequency saturation", "ge": 0, "le": 100})
    b: float = dataclasses.field(
        default=0.75, metadata={"help": "BM25 length normalisation", "ge": 0, "le": 1})
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = dataclasses.field(
        default="lucene", metadata={"help": "BM25 variant (bm25s)"}
    )
    stemmer: Literal["simple", "none"] = dataclasses.field(
        default="simple", metadata={"help": "simple English suffix stripping, or none"}
    )
    stopwords: Literal["en", "none"] = dataclasses.field(
        default="en", metadata={"help": "drop English stop words (bm25s list), or none"}
    )
    query_format: str = ranked_option("query_format")
    doc_format: str = ranked_option("doc_format")
    format: str = ranked_option("format")
    max_tokens: int | None = ranked_option("max_tokens")
    tokenizer: str | None = ranked_option("tokenizer")
    trust_remote_code: bool = ranked_option("trust_remote_code")

    def __post_init__(self) -> None:
        if self.k1 < 0 or not 0 <= self.b <= 1:
            raise ValueError(f"options need k1 >= 0 and 0 <= b <= 1, got k1={self.k1}, b={self.b}")
        check_ranked_options(self)


class BM25Builder:
    """Ranks each user's posts against the question with BM25; keeps the top k."""

    def __init__(self, options: BM25Options | None = None) -> None:
        self.options = options or BM25Options()
        self.counter = TokenCounter(
            self.options.tokenizer, trust_remote_code=self.options.trust_remote_code
        )
        self.id = builder_id("bm25", self.options, ["k"])
        self._stop: frozenset[str] = frozenset()
        if self.options.stopwords == "en":
            from bm25s.stopwords import STOPWORDS_EN

            self._stop = frozenset(STOPWORDS_EN)

    def tokenize(self, text: str) -> list[str]:
        """Lower-case word runs, minus stop words, stemmed (as configured)."""
        words = [w for w in _WORD.findall(text.lower()) if w not in self._stop]
        if self.options.stemmer == "simple":
            words = [simple_stem(w) for w in words]
        return words

    def scores(self, record: Record) -> list[float]:
        """The BM25 score of each of the record's posts (post order) against its query."""
        if not record.profile:
            return []
        import bm25s

        o = self.options
        corpus = [self.tokenize(doc_text(item, o.doc_format)) for item in record.profile]
        vocab = {w for doc in corpus for w in doc}
        # Query words absent from every post score nothing (bm25s rejects unknown tokens).
        query = [w for w in self.tokenize(query_text(record, o.query_format)) if w in vocab]
        if not query:
            return [0.0] * len(record.profile)
        retriever = bm25s.BM25(k1=o.k1, b=o.b, method=o.method)
        retriever.index(corpus, show_progress=False)
        return [float(s) for s in retriever.get_scores(query)]

    def build(self, records: Sequence[Record]) -> list[ProfileView]:
        """One view per record: its top-k posts by BM25, in rank order, scores in extra."""
        return [
            ranked_view(
                r, self.scores(r), k=self.options.k, counter=self.counter,
                max_tokens=self.options.max_tokens, fmt=self.options.format, builder=self.id,
            )
            for r in with_progress(records, desc="profiles: bm25")
        ]
