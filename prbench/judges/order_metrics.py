"""Both-order metrics of a pairwise judge: one rule for every judge that swaps the answers.

A pairwise judge (``llm-judge``, ``rm-r1``, the SynthesizeMe judge, ...) shows each pair in one or
both orders and keeps, per pair, an **order outcome** (:func:`order_outcome`): for every order
judged, which answer was shown first (``"first"`` or ``"second"`` of the pair) and which answer
won (``None`` when that order gave no verdict). The harness asks the pair with the chosen answer
first, so ``"first"`` is the chosen answer. From one outcome, :func:`pair_metrics` gives the
pair's share of each metric, and lm-eval aggregates them over the pairs of a task:

- ``acc_split_half`` (aggregation ``mean``): the pair earns the share of its readable orders
  that preferred the chosen answer -- 1, 0 or, for split orders, 0.5 (SynthesizeMe's own
  evaluation counts a split pair this way); a pair with no readable order earns 0. The headline
  ``acc`` stays strict: a split pair is a tie, and a tie is wrong.
- ``acc_chosen_first`` / ``acc_chosen_second`` (aggregation: the mean of the defined values):
  the accuracy of the single orders in which the chosen answer was shown first / second; an
  order without a verdict counts as wrong (as in ``acc``), a pair not judged in that order is
  left out (``nan``; with ``orders=one`` each pair has one of the two).
- ``position_bias`` (aggregation :func:`ratio_of_sums`): the share of readable verdicts won by
  the answer shown first, pooled over the task's verdicts (0.5 = no position preference); a pair
  contributes ``(verdicts won by the first-shown answer, readable verdicts)``.
- ``n_order_flips`` (aggregation :func:`total`): pairs whose two orders were both read and
  preferred different answers -- the judge followed the position, not the answer.

Pointwise scorers have no orders: the harness emits none of these metrics for them, so they are
absent from the results rather than zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from prbench.analysis.metrics import finite_mean

#: The metric names, in the order the summary shows them.
ORDER_METRICS = (
    "acc_split_half",
    "acc_chosen_first",
    "acc_chosen_second",
    "position_bias",
    "n_order_flips",
)

_SIDES = ("first", "second")


def order_outcome(orders: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The compact, JSON-ready outcome of one pair from its order rows.

    Args:
        orders: rows with ``shown_first`` (``"first"``/``"second"``) and ``winner``
            (``"first"``/``"second"``, or ``None`` when the order gave no verdict), as
            :meth:`prbench.judges.common.OrderTally.order` returns them.

    Returns:
        ``{"orders": [[shown_first, winner], ...]}`` (no orders when the judge could not ask
        at all, e.g. a persona that failed: the pair then earns nothing and has no per-order
        accuracy).
    """
    return {"orders": [[str(o["shown_first"]), o.get("winner")] for o in orders]}


def check_outcome(outcome: Any) -> list[tuple[str, str | None]]:
    """The ``(shown_first, winner)`` rows of an outcome.

    Raises:
        ValueError: not an outcome of :func:`order_outcome` (names the bad part).
    """
    rows = outcome.get("orders") if isinstance(outcome, Mapping) else None
    if not isinstance(rows, list) or len(rows) > 2:
        raise ValueError(f"an order outcome holds at most 2 orders, got {outcome!r}")
    out: list[tuple[str, str | None]] = []
    for row in rows:
        if not isinstance(row, list | tuple) or len(row) != 2:
            raise ValueError(f"an order row is [shown_first, winner], got {row!r}")
        shown, winner = row
        if shown not in _SIDES or (winner is not None and winner not in _SIDES):
            raise ValueError(f"an order row is [shown_first, winner], got {row!r}")
        out.append((shown, winner))
    if len({shown for shown, _ in out}) != len(out):
        raise ValueError(f"an order outcome shows the same answer first twice: {outcome!r}")
    return out


def pair_metrics(outcome: Any) -> dict[str, Any]:
    """One pair's share of each both-order metric (the pair's first answer is the chosen one).

    Returns:
        ``acc_split_half`` (float), ``acc_chosen_first`` / ``acc_chosen_second`` (1.0, 0.0 or
        ``nan`` when not judged in that order), ``position_bias`` (``[won by the first-shown
        answer, readable verdicts]``) and ``n_order_flips`` (0 or 1).

    Raises:
        ValueError: ``outcome`` is malformed.
    """
    rows = check_outcome(outcome)
    winners = [w for _, w in rows if w is not None]
    by_shown = dict(rows)
    nan = float("nan")
    return {
        "acc_split_half": sum(w == "first" for w in winners) / len(winners) if winners else 0.0,
        "acc_chosen_first": float(by_shown["first"] == "first") if "first" in by_shown else nan,
        "acc_chosen_second": (
            float(by_shown["second"] == "first") if "second" in by_shown else nan
        ),
        "position_bias": [sum(w == shown for shown, w in rows if w is not None), len(winners)],
        "n_order_flips": int(len(winners) == 2 and winners[0] != winners[1]),
    }


def ratio_of_sums(items: Sequence[Sequence[float]]) -> float:
    """``sum(numerators) / sum(denominators)`` of ``[numerator, denominator]`` items.

    The pooled ``position_bias`` of a task; ``nan`` when no pair had a readable verdict.
    """
    num = sum(float(i[0]) for i in items)
    den = sum(float(i[1]) for i in items)
    return num / den if den else float("nan")


def total(items: Sequence[float]) -> int:
    """The sum of per-pair counts (``n_order_flips``)."""
    return int(sum(items))


def aggregate(outcomes: Iterable[Any]) -> dict[str, float | int]:
    """The both-order metrics of a list of pair outcomes, aggregated as lm-eval does.

    Raises:
        ValueError: an outcome is malformed.
    """
    per_pair = [pair_metrics(o) for o in outcomes]
    if not per_pair:
        return {}
    return {
        "acc_split_half": sum(p["acc_split_half"] for p in per_pair) / len(per_pair),
        "acc_chosen_first": finite_mean([p["acc_chosen_first"] for p in per_pair]),
        "acc_chosen_second": finite_mean([p["acc_chosen_second"] for p in per_pair]),
        "position_bias": ratio_of_sums([p["position_bias"] for p in per_pair]),
        "n_order_flips": total([p["n_order_flips"] for p in per_pair]),
    }


# -- the side channel from the lm-eval model to the task's process_results ------------------------

#: Order outcomes of the pairs judged in this process, by :func:`doc_key` (filled by the
#: ``prbench`` lm-eval model, read by the tasks' ``process_results``).
PAIR_OUTCOMES: dict[str, dict[str, Any]] = {}


def doc_key(doc: Mapping[str, Any]) -> str:
    """The key of a task row's pair: its id, question, profile view and both answers."""
    from prbench.hashing import stable_hash

    return stable_hash(
        "pair-outcome", doc.get("id"), doc.get("question"), doc.get("profile_text"),
        doc.get("chosen"), doc.get("rejected"),
    )


def doc_metrics(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The both-order metrics of a task row, ``{}`` when no order outcome was recorded for it
    (a pointwise scorer, or a judge that keeps none): then the metrics are absent, never zero.
    """  # noqa: D205
    outcome = PAIR_OUTCOMES.get(doc_key(doc))
    return pair_metrics(outcome) if outcome is not None else {}


__all__ = [
    "ORDER_METRICS",
    "PAIR_OUTCOMES",
    "aggregate",
    "check_outcome",
    "doc_key",
    "doc_metrics",
    "order_outcome",
    "pair_metrics",
    "ratio_of_sums",
    "total",
]
