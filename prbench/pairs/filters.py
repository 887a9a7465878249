"""Checks a generated chosen/rejected pair must pass to be kept.

Every check that fails adds a reason code to the pair's verdict, so the build report can say how
many pairs each check dropped (a pair can fail several). The checks:

- ``empty-chosen`` / ``empty-rejected``: an answer is empty once reasoning blocks and labels are
  removed (or the model never closed a ``<think>`` block).
- ``identical``: the two answers are the same text.
- ``too-long``: an answer has more than ``max_words`` words (``0`` turns the check off).
- ``unfinished``: an answer does not end like a finished sentence (``.``, ``!``, ``?``, a closing
  quote or bracket), the usual sign that generation hit ``max_new_tokens``; ``drop_unfinished``.
- ``length-ratio``: shorter / longer word count is below ``min_length_ratio``, so length alone
  could tell the answers apart.
- ``leak-lexical``: the rejected answer mentions an aspect -- at least ``lexical_threshold`` of
  the aspect's content words occur in it -- for more than ``max_leaked_aspects`` aspects.
- ``leak-embedding``: the same with meaning: some sentence of the rejected answer has cosine
  similarity of at least ``embedding_threshold`` with the aspect (sentence-embedding model,
  default the bundled MiniLM).
- ``leak-judge`` / ``judge-failure``: optionally, the rubric judge scores the rejected answer and
  an aspect scored ``judge_leak_score`` or more counts as covered; an unreadable judge reply drops
  the pair (``judge-failure``), it is never read as "not covered". A judge reply the backend
  could not produce is ``generation-failed``: the pair is not finished and is tried again.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from prbench.pairs.base import GENERATION_FAILED
from prbench.text import content_words

if TYPE_CHECKING:
    from prbench.judges.rubric import RubricJudge
    from prbench.records import RubricAspect


#: the bound of ``max_words`` and ``max_leaked_aspects``: an answer has no more words than
#: tokens (``max_new_tokens`` is at most this too), a rubric far fewer aspects; more is a typo
MOST_COUNT = 1_048_576


@dataclasses.dataclass(frozen=True)
class FilterOptions:
    """Thresholds of the pair checks (embedded in pair-generator options)."""

    max_words: int = dataclasses.field(
        default=0, metadata={"help": "drop an answer longer than this many words (0 = no limit)",
                             "ge": 0, "le": MOST_COUNT}
    )
    drop_unfinished: bool = dataclasses.field(
        default=True, metadata={"help": "drop answers cut off mid-sentence (token limit)"}
    )
    min_length_ratio: float = dataclasses.field(
        default=0.75,
        metadata={"help": "drop pairs whose shorter/longer word-count ratio is below this",
                  "ge": 0, "le": 1},
    )
    leak_check: Literal["lexical", "embedding", "both", "none"] = dataclasses.field(
        default="lexical",
        metadata={"help": "how to detect rubric aspects in the rejected answer"},
    )
    lexical_threshold: float = dataclasses.field(
        default=0.6,
        metadata={"help": "share of an aspect's content words that marks it as mentioned",
                  "gt": 0, "le": 1},
    )
    embedding_model: str = dataclasses.field(
        default="minilm", metadata={"help": "sentence-embedding model for leak_check=embedding"}
    )
    embedding_threshold: float = dataclasses.field(
        default=0.6, metadata={"help": "cosine similarity that marks an aspect as mentioned",
                             "ge": -1, "le": 1}
    )
    max_leaked_aspects: int = dataclasses.field(
        default=0, metadata={"help": "aspects the rejected answer may mention before it is dropped",
                             "ge": 0, "le": MOST_COUNT}
    )
    judge_check: bool = dataclasses.field(
        default=False, metadata={"help": "also ask the rubric judge if rejected covers aspects"}
    )
    judge_leak_score: int = dataclasses.field(
        default=2, metadata={"help": "a judge score (0/1/2) at or above this counts as covered",
                             "ge": 1, "le": 2}
    )

    def __post_init__(self) -> None:
        if not 0 <= self.min_length_ratio <= 1:
            raise ValueError("min_length_ratio must be in [0, 1]")
        if not 0 < self.lexical_threshold <= 1:
            raise ValueError("lexical_threshold must be in (0, 1]")
        if not -1 <= self.embedding_threshold <= 1:
            raise ValueError("embedding_threshold must be in [-1, 1]")
        if self.max_words < 0 or self.max_leaked_aspects < 0:
            raise ValueError("max_words and max_leaked_aspects must be >= 0")
        if self.judge_leak_score not in (1, 2):
            raise ValueError("judge_leak_score must be 1 or 2")


@dataclasses.dataclass
class PairCheck:
    """The outcome of the checks on one pair.

    Attributes:
        reasons: reason codes of the failed checks (empty = keep).
        metrics: numbers behind the decisions (word counts, per-aspect leak scores, ...).
    """

    reasons: list[str] = dataclasses.field(default_factory=list)
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def kept(self) -> bool:
        """True when no check failed."""
        return not self.reasons


def word_count(text: str) -> int:
    """Whitespace-separated words."""
    return len(text.split())


def lexical_coverage(aspect: str, answer: str) -> float:
    """Share of the aspect's content words found in the answer (0 when it has none)."""
    words = content_words(aspect)
    if not words:
        return 0.0
    return len(words & content_words(answer)) / len(words)


_FINISHED = re.compile(r"[.!?…][\"'”’)\]*_]*\s*$")


def finished(text: str) -> bool:
    """True when the text ends like a finished sentence (not cut off by a token limit)."""
    return bool(_FINISHED.search(text.strip()))


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def sentences(text: str) -> list[str]:
    """The answer split into sentences (non-empty)."""
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


class PairFilter:
    """Runs the checks of :class:`FilterOptions` on generated pairs.

    Args:
        options: the thresholds.
        judge: the rubric judge used when ``options.judge_check`` is on.
    """

    def __init__(self, options: FilterOptions, judge: RubricJudge | None = None) -> None:
        if options.judge_check and judge is None:
            raise ValueError("judge_check needs a rubric judge")
        self.options = options
        self.judge = judge
        self._encoder: Any = None

    def _embedding_leaks(
        self, pairs: Sequence[tuple[Sequence[RubricAspect], str]]
    ) -> list[list[float]]:
        """Per pair, per aspect: the highest cosine between the aspect and a rejected sentence."""
        import numpy as np

        if self._encoder is None:
            from prbench.profiles.embed import Encoder, EncoderSpec

            self._encoder = Encoder(EncoderSpec(model=self.options.embedding_model))
        texts: list[str] = []
        layout: list[tuple[list[int], list[int]]] = []
        for aspects, rejected in pairs:
            a_idx = list(range(len(texts), len(texts) + len(aspects)))
            texts.extend(a.aspect for a in aspects)
            sents = sentences(rejected) or [rejected]
            s_idx = list(range(len(texts), len(texts) + len(sents)))
            texts.extend(sents)
            layout.append((a_idx, s_idx))
        vectors = np.asarray(self._encoder.encode(texts), dtype=np.float64)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.where(norms == 0, 1.0, norms)
        out = []
        for a_idx, s_idx in layout:
            sims = vectors[a_idx] @ vectors[s_idx].T
            out.append([float(v) for v in sims.max(axis=1)])
        return out

    def check(
        self,
        items: Sequence[tuple[str, str, Sequence[RubricAspect], str]],
    ) -> list[PairCheck]:
        """Check pairs given as ``(chosen, rejected, aspects, question)``; one result each.

        ``chosen``/``rejected`` must already be cleaned (``""`` for an unusable answer).
        """
        o = self.options
        results = [PairCheck() for _ in items]
        for (chosen, rejected, aspects, _question), res in zip(items, results, strict=True):
            cw, rw = word_count(chosen), word_count(rejected)
            res.metrics.update({"chosen_words": cw, "rejected_words": rw})
            if not chosen.strip():
                res.reasons.append("empty-chosen")
            if not rejected.strip():
                res.reasons.append("empty-rejected")
            if not (chosen.strip() and rejected.strip()):
                continue
            if chosen.strip() == rejected.strip():
                res.reasons.append("identical")
            if o.max_words and max(cw, rw) > o.max_words:
                res.reasons.append("too-long")
            if o.drop_unfinished:
                cut = [side for side, text in (("chosen", chosen), ("rejected", rejected))
                       if not finished(text)]
                if cut:
                    res.reasons.append("unfinished")
                    res.metrics["unfinished"] = cut
            ratio = min(cw, rw) / max(cw, rw)
            res.metrics["length_ratio"] = round(ratio, 4)
            if ratio < o.min_length_ratio:
                res.reasons.append("length-ratio")
            if o.leak_check in ("lexical", "both"):
                cover = [round(lexical_coverage(a.aspect, rejected), 4) for a in aspects]
                res.metrics["leak_lexical"] = cover
                if sum(c >= o.lexical_threshold for c in cover) > o.max_leaked_aspects:
                    res.reasons.append("leak-lexical")
        if o.leak_check in ("embedding", "both"):
            todo = [i for i, (c, r, _a, _q) in enumerate(items) if c.strip() and r.strip()]
            sims = self._embedding_leaks([(items[i][2], items[i][1]) for i in todo])
            for i, row in zip(todo, sims, strict=True):
                results[i].metrics["leak_embedding"] = [round(v, 4) for v in row]
                if sum(v >= o.embedding_threshold for v in row) > o.max_leaked_aspects:
                    results[i].reasons.append("leak-embedding")
        if o.judge_check and self.judge is not None:
            self._judge(items, results)
        return results

    def _judge(
        self,
        items: Sequence[tuple[str, str, Sequence[RubricAspect], str]],
        results: list[PairCheck],
    ) -> None:
        from prbench.judges.rubric import RubricItem

        todo = [i for i, res in enumerate(results) if res.kept]
        if not todo:
            return
        judged = self.judge.judge(  # type: ignore[union-attr]
            [
                RubricItem(question=items[i][3], aspects=tuple(items[i][2]), answer=items[i][1])
                for i in todo
            ]
        )
        for i, verdict in zip(todo, judged, strict=True):
            if verdict.failure is not None:
                failed = verdict.failure.reason == GENERATION_FAILED
                results[i].reasons.append(GENERATION_FAILED if failed else "judge-failure")
                results[i].metrics["judge_failure"] = verdict.failure.reason
                continue
            scores = list(verdict.aspect_scores)
            results[i].metrics["leak_judge"] = scores
            covered = sum(s is not None and s >= self.options.judge_leak_score for s in scores)
            if covered > self.options.max_leaked_aspects:
                results[i].reasons.append("leak-judge")
