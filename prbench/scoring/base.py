"""What a scorer receives and returns.

A *pointwise* scorer (a reward model) maps each :class:`ScoreRequest` to one float; a *pairwise*
judge maps each :class:`PairRequest` to P(first answer is better). Both see the question, the
profile view built for the task condition, and the answer(s) -- never the hidden ``narrative`` or
``rubric_aspects``, except a component registered with ``diagnostic=True``, which gets them in
``hidden`` and is flagged as a diagnostic in every report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from prbench.profiles.base import ProfileView

EMPTY_PROFILE = ProfileView(text="")


@dataclasses.dataclass(frozen=True)
class ScoreRequest:
    """One (user, question, response) to score.

    Attributes:
        record_id: the record's id.
        question: the user's question.
        response: the answer to score.
        profile: the profile view for this task condition (empty for question-only).
        category: the record's category.
        domain: the record's domain (config) name.
        hidden: ``narrative`` and ``rubric_aspects``; only filled for diagnostic scorers.
    """

    record_id: str
    question: str
    response: str
    profile: ProfileView = EMPTY_PROFILE
    category: str = ""
    domain: str = ""
    hidden: Mapping[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class PairRequest:
    """Two answers to one question, for a pairwise judge (P(first ≻ second) is asked)."""

    record_id: str
    question: str
    first: str
    second: str
    profile: ProfileView = EMPTY_PROFILE
    category: str = ""
    domain: str = ""
    hidden: Mapping[str, Any] | None = None


@runtime_checkable
class Scorer(Protocol):
    """A pointwise reward model: one float per request, same order, higher is better."""

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """Score every request; the result has one float per request, in request order."""
        ...


@runtime_checkable
class PairwiseJudge(Protocol):
    """A pairwise judge: P(first ≻ second) per pair, ``nan`` where the verdict was unreadable."""

    def compare(self, pairs: Sequence[PairRequest]) -> list[float]:
        """Judge every pair; one probability per pair, in order."""
        ...


def check_scores(scores: Sequence[float], n: int, scorer: str) -> list[float]:
    """Check a scorer returned exactly ``n`` numbers; return them as floats.

    Raises:
        RuntimeError: a wrong count or a non-numeric value, naming the scorer.
    """
    if len(scores) != n:
        raise RuntimeError(f"scorer {scorer!r} returned {len(scores)} scores for {n} requests")
    out = []
    for i, s in enumerate(scores):
        try:
            out.append(float(s))
        except (TypeError, ValueError) as exc:
            raise RuntimeError(f"scorer {scorer!r} returned a non-number {s!r} at {i}") from exc
    return out
