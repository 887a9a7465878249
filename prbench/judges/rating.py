"""``llm-rating``: an LLM grades each answer for one user on a 0-10 scale (pointwise).

Being pointwise, it works wherever a reward model does: pairs are compared by their two grades, and
Best-of-N picks the highest-graded candidate.

Invalid grades: a reply without a readable ``Rating: N`` line, or no reply at all (the backend
failed for that answer), scores ``nan`` (never a number it did not state), and is counted by reason
and listed in :meth:`LLMRatingScorer.stats`. With ``on_failure="raise"`` the
scorer raises :class:`JudgeParseError` after reading the whole batch instead. ``nan`` makes the
harness's comparison ``score(chosen) > score(rejected)`` false, so an unreadable grade never counts
as a win; the count of such grades is in the results next to the accuracy.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, Literal

from prbench.errors import PrbenchUserError
from prbench.judges import prompts
from prbench.judges.common import BackendOptions, LLMJudgeBase, asked_order
from prbench.judges.parsing import ParseFailure, parse_rating
from prbench.scoring.base import ScoreRequest


class JudgeParseError(PrbenchUserError, RuntimeError):
    """Replies could not be parsed and the component was told to raise (``on_failure=raise``).

    Attributes:
        failures: ``(record id, failure)`` for every unreadable reply.
    """

    def __init__(self, component: str, failures: Sequence[tuple[str, ParseFailure]]) -> None:
        self.failures = list(failures)
        shown = "; ".join(f"record {rid!r}: {f}" for rid, f in self.failures[:5])
        more = f" (and {len(self.failures) - 5} more)" if len(self.failures) > 5 else ""
        super().__init__(f"{component}: {len(self.failures)} unreadable replies: {shown}{more}")


@dataclasses.dataclass(frozen=True)
class LLMRatingOptions(BackendOptions):
    """Options of ``llm-rating`` (backend and decoding options, see :class:`BackendOptions`)."""

    low: int = dataclasses.field(default=0, metadata={"help": "lowest grade"})
    high: int = dataclasses.field(default=10, metadata={"help": "highest grade"})
    on_failure: Literal["nan", "raise"] = dataclasses.field(
        default="nan", metadata={"help": "an unreadable grade scores nan (counted), or raises"}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.low >= self.high:
            raise ValueError("low must be below high")


class LLMRatingScorer(LLMJudgeBase):
    """A generative pointwise judge; implements :class:`prbench.scoring.base.Scorer`.

    Args:
        options: the scorer's options.
        backend: a ready backend (tests, sharing one model); built from ``options`` otherwise.
    """

    name = "llm-rating"
    options: LLMRatingOptions

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """One grade per request, ``nan`` where the reply had no readable grade."""
        o = self.options
        chats = [
            prompts.rating_chat(r.question, r.profile.text, r.response, o.low, o.high)
            for r in requests
        ]
        replies = self._generate(chats, unit="grade")
        # for request_inputs (the input as scored), asked right after
        self._last_asked = {id(r): asked_order("", chat, reply)
                            for r, chat, reply in zip(requests, chats, replies, strict=True)}
        out: list[float] = []
        failures: list[tuple[str, ParseFailure]] = []

        def parse(text: str) -> float | ParseFailure:
            return parse_rating(text, low=o.low, high=o.high, integer=True)

        for request, reply in zip(requests, replies, strict=True):
            parsed = self._read(reply, parse, request.record_id)
            if isinstance(parsed, ParseFailure):
                failures.append((request.record_id, parsed))
                out.append(math.nan)
            else:
                out.append(parsed)
        if failures and o.on_failure == "raise":
            raise JudgeParseError(self.name, failures)
        return out

    def request_inputs(self, requests: Sequence[ScoreRequest], *, sent: bool
                       ) -> list[dict[str, Any]]:
        """The input as scored (:mod:`prbench.scoring.inputs`): the chat sent for each answer,
        with the judge's reply and the prompt tokens the server counted (if it said).

        Args:
            requests: the requests of the last :meth:`score` call (``sent=True``), or score-cache
                hits (``sent=False``: the chat rebuilt, nothing asked, no reply).
            sent: which of the two.
        """  # noqa: D205
        o = self.options
        asked = getattr(self, "_last_asked", {})
        out = []
        for r in requests:
            order = asked.get(id(r)) if sent else None
            if order is None:
                chat = prompts.rating_chat(r.question, r.profile.text, r.response, o.low, o.high)
                order = asked_order("", chat, None)
            out.append({"messages": order["messages"], "tokens": order["tokens"],
                        "reply": order["reply"]})
        return out

    def stats(self) -> dict[str, Any]:
        """Counts since the last :meth:`reset_stats`, JSON-ready (for results files)."""
        return {
            **self._stats_head(),
            "scale": [self.options.low, self.options.high],
            "on_failure": self.options.on_failure,
            **self._stats_tail(),
        }
