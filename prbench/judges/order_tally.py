"""A pairwise judge's bookkeeping: each order's verdict and reply, each pair's outcome.

Every pairwise judge (``llm-judge`` and the judges plugins ship) shows a pair in one or both orders
and keeps the same record of it through :class:`OrderTally`: the verdict of each order, the reply
it came from (as reports keep it, :func:`kept_reply`) and the pair's order outcome, from which the
metrics of :mod:`prbench.judges.order_metrics` are computed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prbench.backends.base import GenerationFailure, Reply
from prbench.judges.order_metrics import order_outcome
from prbench.judges.parsing import ParseFailure

#: The most characters of one judge reply kept for reports (the samples file, the explorer):
#: replies can be long (RM-R1 traces run to 50k tokens), so a longer one keeps its first and
#: last halves around a visible ``[cut: N more characters]`` marker (the verdict is at the end).
REPLY_KEEP_CHARS = 4000


def kept_reply(reply: Reply | None, limit: int = REPLY_KEEP_CHARS) -> str | None:
    """The text of a judge's reply as reports keep it, at most ``limit`` characters of it.

    Args:
        reply: the backend's reply: text, or a
            :class:`~prbench.backends.base.GenerationFailure` (its :attr:`text` when the reply
            was cut at ``max_new_tokens``; no text otherwise).
        limit: the characters kept; a longer reply keeps its first ``limit // 2`` and last
            ``limit - limit // 2`` characters, a line ``[cut: N more characters]`` between.

    Returns:
        The kept text, or ``None`` when no text came back (a failed generation).
    """
    if reply is None:
        return None
    text = reply.text if isinstance(reply, GenerationFailure) else str(reply)
    if isinstance(reply, GenerationFailure) and not text:
        return None
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    return f"{text[:head]}\n[cut: {len(text) - limit} more characters]\n{text[len(text) - tail:]}"


class OrderTally:
    """Bookkeeping of a pairwise judge that shows each pair in one or both orders.

    Every pairwise judge (``llm-judge`` and the judges plugins ship) counts the same things the
    same way: :meth:`order` reads one order's verdict, :meth:`pair` turns a pair's orders into
    P(first ≻ second) (``nan`` when no order gave a readable verdict; split orders give 0.5) and
    :meth:`stats` reports position bias and order flips under one set of keys. Each pair's order
    outcome (:attr:`outcomes`, :meth:`recent_outcomes`) reaches the harness through
    :meth:`LLMJudgeBase.request_extras`, and the task's metrics (strict ``acc`` over the orders,
    ``acc_single_order``, per-order accuracy, ``position_bias``, ``n_unreadable``, ...;
    :mod:`prbench.judges.order_metrics`) are computed from it per pair.
    """

    def __init__(self, fallback: str | None = None) -> None:
        """Start empty.

        Args:
            fallback: ``"A"`` when the released protocol's fallback applies to unreadable
                orders (recorded in each outcome for the ``released_*`` metrics; the order
                stays unreadable for every other metric).
        """
        self.fallback = fallback
        self.pairs = self.orders = self.verdicts = self.first_shown_won = 0
        self.unjudged = self.both_read = self.flips = 0
        self.details: list[dict[str, Any]] = []
        self.outcomes: list[dict[str, Any]] = []

    def order(self, shown_first: str, verdict: Any, reply: Reply | None = None) -> dict[str, Any]:
        """Count one order's verdict and return its detail row.

        Args:
            shown_first: ``"first"`` or ``"second"``: which answer of the pair was shown as A.
            verdict: ``"A"``/``"B"``, or a :class:`ParseFailure` (no verdict: never guessed).
            reply: the reply the verdict was read from (text or the backend's failure); kept,
                capped by :func:`kept_reply`, as the row's ``reply`` so that the samples file
                and the pair explorer show what the judge said. ``None``: not recorded.

        Returns:
            ``shown_first``, ``verdict``, ``winner``, ``failure``, ``failure_detail`` and
            ``reply`` (the kept text; ``None`` when no text came back or none was given).
        """
        self.orders += 1
        text = kept_reply(reply)
        if isinstance(verdict, ParseFailure):
            return {"shown_first": shown_first, "verdict": None, "winner": None,
                    "failure": verdict.reason, "failure_detail": verdict.detail, "reply": text}
        self.verdicts += 1
        self.first_shown_won += verdict == "A"
        other = "second" if shown_first == "first" else "first"
        return {"shown_first": shown_first, "verdict": verdict,
                "winner": shown_first if verdict == "A" else other,
                "failure": None, "failure_detail": None, "reply": text}

    def pair(self, record_id: str, orders: Sequence[Mapping[str, Any]], **extra: Any) -> float:
        """P(first ≻ second) for one pair from its order rows; keeps a detail entry."""
        self.pairs += 1
        winners = [o["winner"] for o in orders if o["winner"] is not None]
        p_first = sum(w == "first" for w in winners) / len(winners) if winners else float("nan")
        self.unjudged += not winners
        if len(orders) == 2 and len(winners) == 2:
            self.both_read += 1
            self.flips += winners[0] != winners[1]
        self.details.append(
            {"record_id": record_id, "p_first": p_first, **extra, "orders": list(orders)}
        )
        self.outcomes.append(order_outcome(orders, self.fallback))
        return p_first

    def recent_outcomes(self, n: int) -> list[dict[str, Any]]:
        """The order outcomes (:func:`prbench.judges.order_metrics.order_outcome`) of the last
        ``n`` pairs, in order: what a judge's ``request_extras`` hands the harness.

        Raises:
            ValueError: fewer than ``n`` pairs were counted.
        """  # noqa: D205
        if n > len(self.outcomes):
            raise ValueError(f"asked for the outcomes of {n} pairs, {len(self.outcomes)} counted")
        return [dict(o) for o in self.outcomes[len(self.outcomes) - n :]] if n else []

    def stats(self) -> dict[str, Any]:
        """``n_pairs``, ``n_orders``, ``n_verdicts``, ``n_invalid_orders``, ``n_pairs_unjudged``,
        ``first_shown_win_rate`` (share of verdicts won by the answer shown first; 0.5 = no
        preference), ``n_pairs_both_orders_read``, ``n_order_flips`` and ``order_agreement``.
        The position bias of the released script (``|acc_chosen_first - acc_chosen_second|``)
        needs to know which answer is right, so it is a task metric
        (:mod:`prbench.judges.order_metrics`), not a judge statistic.
        """  # noqa: D205
        return {
            "n_pairs": self.pairs,
            "n_orders": self.orders,
            "n_verdicts": self.verdicts,
            "n_invalid_orders": self.orders - self.verdicts,
            "n_pairs_unjudged": self.unjudged,
            "first_shown_win_rate": (
                self.first_shown_won / self.verdicts if self.verdicts else None
            ),
            "n_pairs_both_orders_read": self.both_read,
            "n_order_flips": self.flips,
            "order_agreement": 1 - self.flips / self.both_read if self.both_read else None,
        }
