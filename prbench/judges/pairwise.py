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
:meth:`LLMPairwiseJudge.details` keeps every reply's verdict. Each pair's per-order verdicts reach
the harness through ``request_extras`` (see :class:`~prbench.judges.common.LLMJudgeBase`), from
which the tasks report ``acc_split_half``, the per-order accuracies, ``position_bias`` and
``n_order_flips`` (:mod:`prbench.judges.order_metrics`). A reply cut at ``max_new_tokens`` is an
invalid order (``truncated``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal

from prbench.hashing import seeded_unit
from prbench.judges import prompts
from prbench.judges.common import BackendOptions, LLMJudgeBase, OrderTally
from prbench.judges.parsing import parse_pairwise
from prbench.scoring.base import PairRequest


@dataclasses.dataclass(frozen=True)
class LLMJudgeOptions(BackendOptions):
    """Options of ``llm-judge`` (backend and decoding options, see :class:`BackendOptions`)."""

    orders: Literal["both", "one"] = dataclasses.field(
        default="both",
        metadata={"help": "'both' judges each pair in both orders; 'one' a seeded single order"},
    )


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
        self._tally = OrderTally()

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
        per_pair: list[list[dict[str, Any]]] = [[] for _ in pairs]
        for (i, shown_first), reply in zip(plan, replies, strict=True):
            parsed = self._read(
                reply, parse_pairwise, pairs[i].record_id, shown_first=shown_first
            )
            per_pair[i].append(self._tally.order(shown_first, parsed))
        return [
            self._tally.pair(pair.record_id, orders)
            for pair, orders in zip(pairs, per_pair, strict=True)
        ]

    def stats(self) -> dict[str, Any]:
        """Counts since the last :meth:`reset_stats`, JSON-ready (for results files)."""
        return {
            **self._stats_head(),
            "orders": self.options.orders,
            "seed": self.options.seed,
            **self._tally.stats(),
            **self._stats_tail(),
        }

    def details(self) -> list[dict[str, Any]]:
        """One entry per judged pair: the verdict of every order, or why it failed."""
        return list(self._tally.details)
