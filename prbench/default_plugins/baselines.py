"""Trivial baseline scorers, reported next to real reward models.

- ``random``: a seeded random score per (record, response); expected accuracy 50%.
- ``length``: the longer (or shorter) answer wins; exposes length bias in a benchmark.
- ``constant``: the same score for every answer; every pair is a tie (accuracy 0, tie 1).
- ``oracle-rubric``: reads the hidden rubric; a diagnostic upper bound, never a real RM.

None of them reads the profile (registered with ``reads_profile=False``), so a run of one builds
no profile.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from typing import Any, Literal

from prbench.hookspecs import ComponentRegister, hookimpl
from prbench.scoring.base import ScoreRequest
from prbench.scoring.inputs import response_inputs
from prbench.text import content_words


@dataclasses.dataclass(frozen=True)
class RandomOptions:
    """Options of the ``random`` scorer."""

    seed: int = dataclasses.field(
        default=0, metadata={"help": "seed of the per-answer scores", "ge": 0, "le": 2**63 - 1})


class RandomScorer:
    """A seeded score in [0, 1) per (record id, response), independent of batch and order."""

    def __init__(self, options: RandomOptions) -> None:
        self.options = options

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """Hash (seed, record id, response) into a uniform number."""
        out = []
        for r in requests:
            key = f"{self.options.seed}\x00{r.record_id}\x00{r.response}".encode()
            digest = hashlib.sha256(key).digest()
            out.append(int.from_bytes(digest[:8], "big") / 2**64)
        return out

    def request_inputs(self, requests: Sequence[ScoreRequest], *, sent: bool
                       ) -> list[dict[str, Any]]:
        """The input as scored (:mod:`prbench.scoring.inputs`): the answer hashed, no tokens."""
        return response_inputs(requests)


@dataclasses.dataclass(frozen=True)
class LengthOptions:
    """Options of the ``length`` scorer."""

    prefer: Literal["longer", "shorter"] = dataclasses.field(
        default="longer", metadata={"help": "which answer wins"}
    )
    unit: Literal["words", "chars"] = dataclasses.field(
        default="words", metadata={"help": "how length is counted"}
    )


class LengthScorer:
    """Scores an answer by its length (negated when shorter wins)."""

    def __init__(self, options: LengthOptions) -> None:
        self.options = options

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """Word or character count, signed by ``prefer``."""
        sign = 1.0 if self.options.prefer == "longer" else -1.0
        if self.options.unit == "words":
            return [sign * len(r.response.split()) for r in requests]
        return [sign * len(r.response) for r in requests]

    def request_inputs(self, requests: Sequence[ScoreRequest], *, sent: bool
                       ) -> list[dict[str, Any]]:
        """The input as scored (:mod:`prbench.scoring.inputs`): the answer measured, no tokens."""
        return response_inputs(requests)


@dataclasses.dataclass(frozen=True)
class ConstantOptions:
    """Options of the ``constant`` scorer."""

    value: float = dataclasses.field(default=0.0, metadata={"help": "the score of every answer"})


class ConstantScorer:
    """The same score for everything: a sanity check that ties are not counted as correct."""

    def __init__(self, options: ConstantOptions) -> None:
        self.options = options

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """``value`` for every request."""
        return [self.options.value for _ in requests]


@dataclasses.dataclass(frozen=True)
class OracleOptions:
    """Options of the ``oracle-rubric`` diagnostic."""

    use_evidence: bool = dataclasses.field(
        default=True,
        metadata={"help": "also match the aspects' evidence text, not only the aspect"},
    )


class OracleRubricScorer:
    """Diagnostic upper bound: the fraction of hidden rubric aspects an answer mentions.

    An aspect counts as mentioned in proportion to the share of its content words that occur in
    the answer. It reads ``rubric_aspects``, which no real reward model sees.
    """

    def __init__(self, options: OracleOptions) -> None:
        self.options = options

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """Mean over aspects of the share of the aspect's content words found in the answer."""
        out = []
        for r in requests:
            if r.hidden is None:
                raise RuntimeError(
                    "oracle-rubric is a diagnostic that needs the hidden rubric; the harness "
                    "passes it only to components registered with diagnostic=True"
                )
            answer = content_words(r.response)
            aspects = r.hidden.get("rubric_aspects") or []
            if not aspects:
                out.append(0.0)
                continue
            total = 0.0
            for aspect in aspects:
                text = aspect["aspect"]
                if self.options.use_evidence:
                    text += " " + aspect.get("evidence", "")
                words = content_words(text)
                total += len(words & answer) / len(words) if words else 0.0
            out.append(total / len(aspects))
        return out


@hookimpl
def register_scorers(register: ComponentRegister) -> None:
    """Register the baseline scorers."""
    register(
        "random",
        RandomScorer,
        options=RandomOptions,
        description="seeded random score per answer (chance baseline)",
        reads_profile=False,
    )
    register(
        "length",
        LengthScorer,
        options=LengthOptions,
        description="the longer (or shorter) answer wins (length-bias baseline)",
        reads_profile=False,
    )
    register(
        "constant",
        ConstantScorer,
        options=ConstantOptions,
        description="the same score for every answer (every pair is a tie)",
        reads_profile=False,
    )
    register(
        "oracle-rubric",
        OracleRubricScorer,
        options=OracleOptions,
        diagnostic=True,
        description="DIAGNOSTIC upper bound: reads the hidden rubric (not a reward model)",
        reads_profile=False,
    )
