"""``llm-judge``: an LLM compares two answers for one user, in both orders.

For each pair the judge is shown the user's profile view, the question and the two answers as
"Answer A" and "Answer B". By default every pair is judged twice, once in each order, and
P(first ≻ second) is the mean over the orders whose reply could be read: 1.0 or 0.0 when the two
readable orders agree (or only one was readable), 0.5 when they disagree. A pair whose every order
failed (the backend gave no reply, or the reply did not parse) gets ``nan``, an ``invalid`` item:
an unreadable or missing reply is never turned into a verdict.

``orders="one"`` judges a single order per pair; which answer is shown first is a seeded choice
that depends only on the seed and the pair (not on the batch), as in the released evaluation,
which shuffles positions with a fixed seed.

:meth:`LLMPairwiseJudge.stats` reports the generation and parse failures (by reason, and listed
per item), the position bias (how often the answer shown first won, among readable verdicts; 0.5
is unbiased) and the agreement between the two orders of a pair;
:meth:`LLMPairwiseJudge.details` keeps every reply's verdict.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, Literal

from prbench.judges import prompts
from prbench.judges.common import BackendOptions, LLMJudgeBase, seeded_unit
from prbench.judges.parsing import ParseFailure, parse_pairwise
from prbench.scoring.base import PairRequest


@dataclasses.dataclass(frozen=True)
class LLMJudgeOptions(BackendOptions):
    """Options of ``llm-judge`` (backend and decoding options, see :class:`BackendOptions`)."""

    orders: Literal["both", "one"] = dataclasses.field(
        default="both",
        metadata={"help": "'both' judges each pair in both orders; 'one' a seeded single order"},
    )


@dataclasses.dataclass
class _OrderResult:
    shown_first: str  # "first" or "second": which answer of the pair was shown as A
    verdict: str | None  # "A" / "B", or None on a parse failure
    failure: ParseFailure | None

    @property
    def winner(self) -> str | None:
        """``"first"`` or ``"second"``: which answer of the pair the verdict picked."""
        if self.verdict is None:
            return None
        if self.verdict == "A":
            return self.shown_first
        return "second" if self.shown_first == "first" else "first"


class LLMPairwiseJudge(LLMJudgeBase):
    """A generative pairwise judge; implements :class:`prbench.scoring.base.PairwiseJudge`.

    Args:
        options: the judge's options.
        backend: a ready backend (tests, sharing one model); built from ``options`` otherwise.
    """

    name = "llm-judge"
    options: LLMJudgeOptions

    def reset_stats(self) -> None:
        """Forget the counts and details gathered so far."""
        super().reset_stats()
        self._pairs = 0
        self._unjudged = 0
        self._parsed = 0
        self._first_shown_won = 0
        self._both_parsed = 0
        self._orders_agree = 0
        self._details: list[dict[str, Any]] = []

    def _orders(self, pair: PairRequest) -> list[str]:
        if self.options.orders == "both":
            return ["first", "second"]
        u = seeded_unit("order", self.options.seed, pair.record_id, pair.first, pair.second)
        return ["first" if u < 0.5 else "second"]

    def compare(self, pairs: Sequence[PairRequest]) -> list[float]:
        """P(first ≻ second) per pair, ``nan`` where no order could be read."""
        chats = []
        plan: list[tuple[int, str]] = []
        for i, pair in enumerate(pairs):
            for shown_first in self._orders(pair):
                a, b = (pair.first, pair.second) if shown_first == "first" else (
                    pair.second, pair.first
                )
                chats.append(prompts.pairwise_chat(pair.question, pair.profile.text, a, b))
                plan.append((i, shown_first))
        replies = self._generate(chats, unit="verdict")
        per_pair: list[list[_OrderResult]] = [[] for _ in pairs]
        for (i, shown_first), reply in zip(plan, replies, strict=True):
            parsed = self._read(
                reply, parse_pairwise, pairs[i].record_id, shown_first=shown_first
            )
            if isinstance(parsed, ParseFailure):
                result = _OrderResult(shown_first, None, parsed)
            else:
                result = _OrderResult(shown_first, parsed, None)
                self._parsed += 1
                self._first_shown_won += parsed == "A"
            per_pair[i].append(result)
        out: list[float] = []
        for pair, results in zip(pairs, per_pair, strict=True):
            self._pairs += 1
            winners = [r.winner for r in results if r.winner is not None]
            if winners:
                p_first = sum(w == "first" for w in winners) / len(winners)
            else:
                p_first = math.nan
                self._unjudged += 1
            if len(results) == 2 and len(winners) == 2:
                self._both_parsed += 1
                self._orders_agree += winners[0] == winners[1]
            out.append(p_first)
            self._details.append(
                {
                    "record_id": pair.record_id,
                    "p_first": p_first,
                    "orders": [
                        {
                            "shown_first": r.shown_first,
                            "verdict": r.verdict,
                            "winner": r.winner,
                            "failure": None if r.failure is None else r.failure.reason,
                            "failure_detail": None if r.failure is None else r.failure.detail,
                        }
                        for r in results
                    ],
                }
            )
        return out

    def stats(self) -> dict[str, Any]:
        """Counts since the last :meth:`reset_stats`, JSON-ready (for results files)."""
        return {
            **self._stats_head(),
            "orders": self.options.orders,
            "seed": self.options.seed,
            "n_pairs": self._pairs,
            "n_pairs_unjudged": self._unjudged,
            "n_verdicts": self._parsed,
            "position_bias": self._first_shown_won / self._parsed if self._parsed else None,
            "n_pairs_both_orders_read": self._both_parsed,
            "order_agreement": (
                self._orders_agree / self._both_parsed if self._both_parsed else None
            ),
            **self._stats_tail(),
        }

    def details(self) -> list[dict[str, Any]]:
        """One entry per judged pair: the verdict of every order, or why it failed."""
        return list(self._details)
