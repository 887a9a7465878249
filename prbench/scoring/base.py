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
    """A pointwise reward model: one float per request, same order, higher is better.

    ``score()`` is all a scorer must have. The harness never calls it directly: every scorer runs
    inside a :class:`prbench.scoring.runtime.ScorerRuntime` (dedup, score cache, chunks,
    out-of-memory back-off, stats). A scorer may also have the optional methods of
    :class:`ScorerExtras` (``fingerprint()``, ``describe()``, ``close()``, ``request_extras()``);
    the same holds for a :class:`PairwiseJudge`.
    """

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """Score every request; the result has one float per request, in request order."""
        ...


@runtime_checkable
class PairwiseJudge(Protocol):
    """A pairwise judge: P(first ≻ second) per pair, ``nan`` where the verdict was unreadable."""

    def compare(self, pairs: Sequence[PairRequest]) -> list[float]:
        """Judge every pair; one probability per pair, in order."""
        ...


@runtime_checkable
class ScorerExtras(Protocol):
    """The OPTIONAL parts of the scorer protocol; the runtime uses each one a scorer has.

    A scorer may define any subset of these methods (the runtime looks each one up by name).
    """

    def fingerprint(self) -> str:
        """A hex hash of everything that changes this scorer's outputs (the score-cache key).

        Cover the model identity (hub id with revision and resolved commit, or the local files),
        dtype, templates and every option that changes scores; leave out what does not (batch
        size, device, progress). Build it with :func:`prbench.scoring.cache.fingerprint_of`. A
        scorer WITHOUT ``fingerprint()`` is never cached on disk, only deduplicated.
        """
        ...

    def describe(self) -> dict[str, Any]:
        """JSON-ready settings recorded in the results manifest.

        E.g. checkpoint, revision and resolved commit, resolved dtype and device, pooling; the
        runtime records it under ``scorer`` in its own ``describe()``.
        """
        ...

    def close(self) -> None:
        """Release what the scorer holds (models, connections, worker pools).

        Called once, by :meth:`prbench.scoring.runtime.ScorerRuntime.close`, when the run ends.
        """
        ...

    def request_extras(self, requests: Sequence[Any]) -> list[Any]:
        """One JSON-ready value (or ``None``) per request of the ``score``/``compare`` call just
        made, kept with the score in the cache and read back with
        :meth:`prbench.scoring.runtime.ScorerRuntime.extras`.

        A pairwise judge returns each pair's per-order verdicts
        (:func:`prbench.judges.order_metrics.order_outcome`), from which the tasks compute the
        both-order metrics; :class:`prbench.judges.common.LLMJudgeBase` provides it for judges
        that keep an :class:`~prbench.judges.common.OrderTally`.
        """  # noqa: D205
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
