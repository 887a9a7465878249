"""The metrics of a pairwise judge, defined once: per pair, per task, per domain and per group.

A pairwise judge (``llm-judge``, ``rm-r1``, the SynthesizeMe judge, ...) shows each pair in one or
both orders and keeps, per pair, an **order outcome** (:func:`order_outcome`): for every order
judged, which answer was shown first (``"first"`` or ``"second"`` of the pair) and which answer
won (``None`` when that order gave no verdict: an *unreadable* order). The harness asks the pair
with the chosen answer first, so ``"first"`` is the chosen answer.

Every metric is a ratio or a sum of integer **counts** (:data:`COUNT_KEYS`, :func:`pair_counts`),
so a domain row and a group row are computed from the counts of their pairs
(:func:`metrics_from_counts` of :func:`add_counts`), never as a mean of domain means. The
metrics (see also the table in the docs):

- ``acc`` (strict; the pair's share, :func:`strict_win`): a pair is a win only when it was judged
  in at least one order and *every* order judged picked the chosen answer. An unreadable order is
  never a win, so a pair with one unreadable order and one right order is not a win.
- ``acc_single_order``: the mean over all single-order verdicts, an unreadable order or a tie
  counting 0 -- the number RM-R1, SynthesizeMe and the released ``pairwise.py`` report. Per pair
  it is the share of its orders that picked the chosen answer (0 for a pair the judge could not
  ask at all); with every pair judged in the same number of orders this mean over pairs *is* the
  mean over verdicts.
- ``acc_chosen_first`` / ``acc_chosen_second``: the accuracy of the orders with the chosen answer
  shown first (as "A") / second (as "B"), unreadable = 0; ``nan`` when no order of that kind.
- ``position_bias``: ``|acc_chosen_first - acc_chosen_second|``, the released script's "position
  bias" (0 = none).
- ``first_shown_win_rate``: the share of readable verdicts won by the answer shown first (0.5 =
  no preference for a position).
- ``n_unreadable``: orders without a verdict (failed generation, a reply that did not parse, a
  cut reply); always reported for a judge.
- ``n_order_flips``: pairs whose two orders were both read and preferred different answers.

Under ``protocol=released`` (:mod:`prbench.judges.released`) the outcome also says that the
released script's fallback applies: an unreadable order counts as the verdict "A". The
script's own outputs are then reported beside the metrics above (:data:`RELEASED_METRICS`):
``released_acc`` (accuracy with the fallback), ``released_acc_chosen_a`` /
``released_acc_chosen_b`` (the chosen answer shown as A / B; 0.0 when no pair had it there, as
the script prints), ``released_position_bias`` (their absolute difference) and
``released_n_pred_a`` / ``released_n_pred_b`` (predictions); ``n_unreadable`` is the script's
"failed parses". The lm-eval group rows get all of them from counts too
(:func:`add_group_metrics`).

Pointwise scorers have no orders: the harness emits none of these metrics for them, so they are
absent from the results rather than zero.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: The judge metrics, in the order the summary shows them (``acc`` itself is the task's own).
ORDER_METRICS = (
    "acc_single_order",
    "acc_chosen_first",
    "acc_chosen_second",
    "position_bias",
    "first_shown_win_rate",
    "n_unreadable",
    "n_order_flips",
)

#: The released script's own outputs, reported only under ``protocol=released``.
RELEASED_METRICS = (
    "released_acc",
    "released_acc_chosen_a",
    "released_acc_chosen_b",
    "released_position_bias",
    "released_n_pred_a",
    "released_n_pred_b",
)

#: The per-pair counts every judge metric is computed from (summed over pairs for any row).
COUNT_KEYS = (
    "n_pairs",
    "n_strict",  # pairs won under strict acc
    "single_order_credit",  # the pair's share of orders that picked the chosen answer
    "n_orders",
    "n_unreadable",
    "n_chosen_first",  # orders with the chosen answer shown first
    "n_chosen_first_won",
    "n_chosen_first_unreadable",
    "n_chosen_second",
    "n_chosen_second_won",
    "n_verdicts",  # readable orders
    "n_first_shown_won",
    "n_order_flips",
    "n_released",  # pairs judged under the released protocol (unreadable = "A")
)

#: The one fallback verdict an outcome may carry (the released script's).
FALLBACK_VERDICTS = ("A",)

#: What an outcome's ``replies`` hold per order (:func:`order_outcome`).
REPLY_KEYS = ("verdict", "reply", "failure", "detail")

#: The key of a samples-file line that holds the pair's judged orders with the judge's replies
#: (:func:`prbench.harness.scored.annotate_sample`).
SAMPLE_KEY = "judge_replies"

_SIDES = ("first", "second")


def order_outcome(
    orders: Iterable[Mapping[str, Any]], fallback: str | None = None
) -> dict[str, Any]:
    """The compact, JSON-ready outcome of one pair from its order rows.

    Args:
        orders: rows with ``shown_first`` (``"first"``/``"second"``) and ``winner``
            (``"first"``/``"second"``, or ``None`` when the order gave no verdict), as
            :meth:`prbench.judges.order_tally.OrderTally.order` returns them.
        fallback: ``"A"`` when the released protocol's fallback applies to unreadable orders
            (:mod:`prbench.judges.released`); ``None`` otherwise.

    Returns:
        ``{"orders": [[shown_first, winner], ...]}`` (no orders when the judge could not ask
        at all, e.g. a persona that failed: the pair then earns nothing), plus
        ``"fallback": "A"`` under the released protocol, plus ``"replies"`` when the order
        rows carry the judge's reply (:meth:`prbench.judges.order_tally.OrderTally.order`): per
        order, in the same order, :data:`REPLY_KEYS` -- the parsed ``verdict`` (``"A"``/``"B"``
        or ``None``), the kept ``reply`` text (``None`` when none came back), the ``failure``
        reason and its ``detail`` (``None`` when the reply was read). The metrics never read
        the replies; the samples file and the pair explorer show them
        (:func:`prbench.harness.scored.annotate_sample`).
    """
    rows = list(orders)
    out: dict[str, Any] = {"orders": [[str(o["shown_first"]), o.get("winner")] for o in rows]}
    if fallback is not None:
        out["fallback"] = fallback
    if any("reply" in o for o in rows):
        out["replies"] = [
            {"verdict": o.get("verdict"), "reply": o.get("reply"), "failure": o.get("failure"),
             "detail": o.get("failure_detail")}
            for o in rows
        ]
    return out


def check_outcome(outcome: Any) -> list[tuple[str, str | None]]:
    """The ``(shown_first, winner)`` rows of an outcome.

    Raises:
        ValueError: not an outcome of :func:`order_outcome` (names the bad part).
    """
    rows = outcome.get("orders") if isinstance(outcome, Mapping) else None
    if not isinstance(rows, list) or len(rows) > 2:
        raise ValueError(f"an order outcome holds at most 2 orders, got {outcome!r}")
    fallback = outcome.get("fallback")
    if fallback is not None and fallback not in FALLBACK_VERDICTS:
        raise ValueError(f"an order outcome's fallback is 'A' or absent, got {outcome!r}")
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


def strict_win(outcome: Any) -> float:
    """Strict ``acc`` of one pair: 1.0 only when every order judged picked the chosen answer.

    A pair judged in no order, or with any unreadable order, is not a win.

    Raises:
        ValueError: ``outcome`` is malformed.
    """
    rows = check_outcome(outcome)
    return float(bool(rows) and all(w == "first" for _, w in rows))


def pair_counts(outcome: Any) -> dict[str, float]:
    """The counts of one pair (:data:`COUNT_KEYS`), from which every judge metric follows.

    Raises:
        ValueError: ``outcome`` is malformed.
    """
    rows = check_outcome(outcome)
    winners = [w for _, w in rows if w is not None]
    chosen_won = sum(w == "first" for _, w in rows)
    return {
        "n_pairs": 1,
        "n_strict": strict_win(outcome),
        "single_order_credit": chosen_won / len(rows) if rows else 0.0,
        "n_orders": len(rows),
        "n_unreadable": len(rows) - len(winners),
        "n_chosen_first": sum(s == "first" for s, _ in rows),
        "n_chosen_first_won": sum(s == "first" and w == "first" for s, w in rows),
        "n_chosen_first_unreadable": sum(s == "first" and w is None for s, w in rows),
        "n_chosen_second": sum(s == "second" for s, _ in rows),
        "n_chosen_second_won": sum(s == "second" and w == "first" for s, w in rows),
        "n_verdicts": len(winners),
        "n_first_shown_won": sum(w == s for s, w in rows if w is not None),
        "n_order_flips": int(len(winners) == 2 and winners[0] != winners[1]),
        "n_released": int(outcome.get("fallback") == "A"),
    }


def add_counts(counts: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """The sum of count dicts (a domain's, a task's, a group's)."""
    total = dict.fromkeys(COUNT_KEYS, 0.0)
    for c in counts:
        for key in COUNT_KEYS:
            total[key] += float(c.get(key, 0.0))
    return total


def _ratio(num: float, den: float) -> float:
    return num / den if den else math.nan


def _script_ratio(num: float, den: float) -> float:
    """The released script's ratio: 0.0 where there is nothing to divide by."""
    return num / den if den else 0.0


def metrics_from_counts(counts: Mapping[str, float]) -> dict[str, float]:
    """Every judge metric of a set of pairs from their summed counts.

    Returns:
        ``acc`` (strict), the :data:`ORDER_METRICS` and, when every pair was judged under the
        released protocol, the :data:`RELEASED_METRICS`; ratios are ``nan`` where their
        denominator is 0, counts are ints.
    """
    c = {key: float(counts.get(key, 0.0)) for key in COUNT_KEYS}
    first = _ratio(c["n_chosen_first_won"], c["n_chosen_first"])
    second = _ratio(c["n_chosen_second_won"], c["n_chosen_second"])
    out: dict[str, float] = {
        "acc": _ratio(c["n_strict"], c["n_pairs"]),
        "acc_single_order": _ratio(c["single_order_credit"], c["n_pairs"]),
        "acc_chosen_first": first,
        "acc_chosen_second": second,
        "position_bias": abs(first - second),
        "first_shown_win_rate": _ratio(c["n_first_shown_won"], c["n_verdicts"]),
        "n_unreadable": int(c["n_unreadable"]),
        "n_order_flips": int(c["n_order_flips"]),
    }
    if c["n_pairs"] and c["n_released"] == c["n_pairs"]:
        # the script's accuracy of an empty position is 0.0, not undefined: its outputs as printed
        in_a = _script_ratio(
            c["n_chosen_first_won"] + c["n_chosen_first_unreadable"], c["n_chosen_first"]
        )
        second = _script_ratio(c["n_chosen_second_won"], c["n_chosen_second"])
        out.update({
            "released_acc": _ratio(
                c["n_chosen_first_won"] + c["n_chosen_first_unreadable"] + c["n_chosen_second_won"],
                c["n_orders"],
            ),
            "released_acc_chosen_a": in_a,
            "released_acc_chosen_b": second,
            "released_position_bias": abs(in_a - second),
            "released_n_pred_a": int(c["n_first_shown_won"] + c["n_unreadable"]),
            "released_n_pred_b": int(c["n_verdicts"] - c["n_first_shown_won"]),
        })
    return out


def pair_metrics(outcome: Any, domain: str = "") -> dict[str, Any]:
    """One pair's items for the task's metrics (lm-eval aggregates them over the task's pairs).

    Args:
        outcome: the pair's order outcome (the pair's first answer is the chosen one).
        domain: the pair's domain (keys the ``judge_counts`` item).

    Returns:
        ``acc`` (strict, replaces the score-based value), ``acc_single_order`` (float),
        ``acc_chosen_first`` / ``acc_chosen_second`` (1.0, 0.0 or ``nan`` when not judged in
        that order), ``position_bias`` (``[first-orders, won, second-orders, won]``,
        aggregated by :func:`position_bias`), ``first_shown_win_rate`` (``[won by the
        first-shown answer, readable verdicts]``, :func:`ratio_of_sums`), ``n_unreadable`` and
        ``n_order_flips`` (counts, :func:`total`), ``judge_counts`` (``[domain, counts]``,
        :func:`judge_counts`) and, under the released protocol, the released script's outputs.

    Raises:
        ValueError: ``outcome`` is malformed.
    """
    c = pair_counts(outcome)
    nan = float("nan")
    out: dict[str, Any] = {
        "acc": c["n_strict"],
        "acc_single_order": c["single_order_credit"],
        "acc_chosen_first": (
            c["n_chosen_first_won"] / c["n_chosen_first"] if c["n_chosen_first"] else nan
        ),
        "acc_chosen_second": (
            c["n_chosen_second_won"] / c["n_chosen_second"] if c["n_chosen_second"] else nan
        ),
        "position_bias": [c["n_chosen_first"], c["n_chosen_first_won"],
                          c["n_chosen_second"], c["n_chosen_second_won"]],
        "first_shown_win_rate": [c["n_first_shown_won"], c["n_verdicts"]],
        "n_unreadable": c["n_unreadable"],
        "n_order_flips": c["n_order_flips"],
        "judge_counts": [domain, c],
    }
    if c["n_released"]:
        in_a_won = c["n_chosen_first_won"] + c["n_chosen_first_unreadable"]
        out.update({
            "released_acc": [in_a_won + c["n_chosen_second_won"], c["n_orders"]],
            "released_acc_chosen_a": [in_a_won, c["n_chosen_first"]],
            "released_acc_chosen_b": [c["n_chosen_second_won"], c["n_chosen_second"]],
            "released_position_bias": [c["n_chosen_first"], in_a_won,
                                       c["n_chosen_second"], c["n_chosen_second_won"]],
            "released_n_pred_a": c["n_first_shown_won"] + c["n_unreadable"],
            "released_n_pred_b": c["n_verdicts"] - c["n_first_shown_won"],
        })
    return out


def ratio_of_sums(items: Sequence[Sequence[float]]) -> float:
    """``sum(numerators) / sum(denominators)`` of ``[numerator, denominator]`` items.

    ``first_shown_win_rate`` and the released accuracies of a task; ``nan`` when the
    denominators sum to 0.
    """
    num = sum(float(i[0]) for i in items)
    den = sum(float(i[1]) for i in items)
    return num / den if den else float("nan")


def position_bias(items: Sequence[Sequence[float]]) -> float:
    """``|acc_chosen_first - acc_chosen_second|`` of a task from per-pair
    ``[first-orders, won, second-orders, won]`` items (``nan`` when one kind is missing).
    """  # noqa: D205
    first = ratio_of_sums([(i[1], i[0]) for i in items])
    second = ratio_of_sums([(i[3], i[2]) for i in items])
    return abs(first - second)


def _leaf_tasks(group: str, subtasks: Mapping[str, Any], seen: frozenset[str]) -> list[str]:
    """The tasks under ``group`` of lm-eval's ``group_subtasks`` (nested groups walked)."""
    out: list[str] = []
    for name in subtasks.get(group) or ():
        if name in seen:
            continue
        out += _leaf_tasks(name, subtasks, seen | {name}) if subtasks.get(name) else [name]
    return out


def add_group_metrics(results: Mapping[str, Any]) -> list[str]:
    """Put every judge metric on the group rows of an lm-eval results dict, from counts.

    lm-eval gives a group row only the metrics its ``aggregate_metric_list`` names, as
    size-weighted means of the task rows. For a group whose every task carries ``judge_counts``
    (a pairwise judge's run), the :data:`ORDER_METRICS` and, under the released protocol, the
    :data:`RELEASED_METRICS` are computed here from the tasks' summed counts
    (:func:`metrics_from_counts`), as prbench's summary computes its group row, and written to
    the group's entry in ``results["results"]`` and ``results["groups"]`` (``nan`` where a
    ratio has no denominator; the results file writes it as null). The dict is changed in place.

    Returns:
        The names of the groups given the metrics.
    """
    rows = results.get("results")
    subtasks = results.get("group_subtasks")
    if not isinstance(rows, dict) or not isinstance(subtasks, Mapping):
        return []
    done = []
    for group in subtasks:
        tasks = _leaf_tasks(group, subtasks, frozenset({group}))
        counts = [(rows.get(t) or {}).get("judge_counts,none") for t in tasks]
        if not tasks or not all(isinstance(c, Mapping) and c for c in counts):
            continue
        summed = add_counts(c for per_domain in counts for c in per_domain.values())
        values = {
            name: value for name, value in metrics_from_counts(summed).items()
            if name in ORDER_METRICS or name in RELEASED_METRICS
        }
        for table in (rows, results.get("groups")):
            if isinstance(table, dict) and isinstance(table.get(group), dict):
                row = table[group]
                for name, value in values.items():
                    row[f"{name},none"] = value
                    row.setdefault(f"{name}_stderr,none", "N/A")
        done.append(group)
    return done


def released_ratio(items: Sequence[Sequence[float]]) -> float:
    """The released accuracies of a task: :func:`ratio_of_sums`, but 0.0 when nothing to divide
    (the script prints 0.0 for a position no pair had).
    """  # noqa: D205
    den = sum(float(i[1]) for i in items)
    return ratio_of_sums(items) if den else 0.0


def released_position_bias(items: Sequence[Sequence[float]]) -> float:
    """``released_position_bias`` of a task: the script's ``|acc_A - acc_B|``, an empty
    position's accuracy 0.0 (items as :func:`position_bias`'s).
    """  # noqa: D205
    in_a = released_ratio([(i[1], i[0]) for i in items])
    in_b = released_ratio([(i[3], i[2]) for i in items])
    return abs(in_a - in_b)


def total(items: Sequence[float]) -> int:
    """The sum of per-pair counts (``n_unreadable``, ``n_order_flips``, predictions)."""
    return int(sum(items))


def judge_counts(items: Sequence[Sequence[Any]]) -> dict[str, dict[str, float]]:
    """Aggregation of ``judge_counts``: the summed counts per domain (domains sorted).

    The summary builds every judge row -- per domain, per task, per group -- from these counts
    (:func:`metrics_from_counts`), so no row is a mean of means.
    """
    by_domain: dict[str, list[Mapping[str, float]]] = {}
    for domain, counts in items:
        by_domain.setdefault(str(domain), []).append(counts)
    return {d: add_counts(by_domain[d]) for d in sorted(by_domain)}


def _count(n: float, one: str, many: str) -> str:
    return f"{int(n)} {one if int(n) == 1 else many}"


def explain_pair(outcome: Any) -> list[dict[str, Any]]:
    """Why one pair counted as it did under each per-pair judge metric, in words.

    The values are this module's own (:func:`strict_win`, :func:`pair_counts`,
    :func:`pair_metrics`); the words say which rule gave them.

    Returns:
        ``[{"metric", "value", "why"}]``: ``acc`` (strict), ``acc_single_order``, then
        ``n_order_flips`` when the two orders were read and disagree, and ``released_acc``
        (the pair's ``[orders credited, orders]``) under the released protocol.

    Raises:
        ValueError: ``outcome`` is malformed.
    """
    rows = check_outcome(outcome)
    c = pair_counts(outcome)
    n = c["n_orders"]
    rejected = [s for s, w in rows if w is not None and w != "first"]
    if not rows:
        strict_why = "the judge asked no order of this pair (e.g. its persona failed): never a win"
    elif c["n_unreadable"]:
        strict_why = (f"{_count(c['n_unreadable'], 'order', 'orders')} of {int(n)} gave no "
                      "verdict; a pair counts only when every order judged picked the chosen "
                      "answer, and an unreadable order never does")
    elif rejected:
        where = " and ".join(f"with the chosen answer shown {s}" for s in rejected)
        strict_why = f"the order {where} picked the rejected answer"
    else:
        strict_why = f"every order judged ({int(n)}) picked the chosen answer"
    won = c["n_chosen_first_won"] + c["n_chosen_second_won"]
    single_why = (f"{int(won)} of {int(n)} orders picked the chosen answer (an unreadable order "
                  "counts 0)" if rows else "no order was judged: 0")
    out: list[dict[str, Any]] = [
        {"metric": "acc", "value": strict_win(outcome), "why": strict_why},
        {"metric": "acc_single_order", "value": c["single_order_credit"], "why": single_why},
    ]
    if c["n_order_flips"]:
        shown = "first" if rows[0][1] == rows[0][0] else "second"
        out.append({"metric": "n_order_flips", "value": c["n_order_flips"],
                    "why": "both orders were read and preferred different answers: the answer "
                           f"shown {shown} won both times"})
    if c["n_released"]:
        credited, asked = pair_metrics(outcome)["released_acc"]
        out.append({"metric": "released_acc", "value": [credited, asked],
                    "why": f"{int(credited)} of {int(asked)} orders credited under "
                           "protocol=released, where an unreadable order counts as the "
                           "verdict 'A' (the answer shown first)"})
    return out


def aggregate(outcomes: Iterable[Any]) -> dict[str, float]:
    """Every judge metric of a list of pair outcomes (the same numbers as the task's).

    Raises:
        ValueError: an outcome is malformed.
    """
    counts = [pair_counts(o) for o in outcomes]
    return metrics_from_counts(add_counts(counts)) if counts else {}


# -- a pair's orders in the samples file --------------------------------------------------------


def sample_orders(outcome: Any) -> list[dict[str, Any]] | None:
    """A pair's judged orders with the judge's replies, as a samples-file line holds them.

    Returns:
        Per order: ``shown_first``, ``winner`` and the :data:`REPLY_KEYS`; ``None`` when the
        outcome carries no replies (a judge that does not record them, or a score cache
        written before replies were kept).
    """
    if not isinstance(outcome, Mapping) or not isinstance(outcome.get("replies"), list):
        return None
    return [{"shown_first": shown, "winner": winner,
             **{k: (r.get(k) if isinstance(r, Mapping) else None) for k in REPLY_KEYS}}
            for (shown, winner), r in zip(outcome["orders"], outcome["replies"], strict=True)]


def outcome_of_sample(rows: Any) -> dict[str, Any]:
    """The order outcome of a samples-file line's :data:`SAMPLE_KEY` rows.

    Raises:
        ValueError: the rows are not a list of ``{"shown_first", "winner", ...}`` orders.
    """
    if not isinstance(rows, list) or not all(isinstance(r, Mapping) for r in rows):
        raise ValueError(f"{SAMPLE_KEY} is a list of orders, got {rows!r:.200}")
    outcome = {"orders": [[r.get("shown_first"), r.get("winner")] for r in rows]}
    check_outcome(outcome)
    return outcome


__all__ = [
    "COUNT_KEYS",
    "ORDER_METRICS",
    "RELEASED_METRICS",
    "REPLY_KEYS",
    "SAMPLE_KEY",
    "add_counts",
    "aggregate",
    "check_outcome",
    "explain_pair",
    "judge_counts",
    "metrics_from_counts",
    "order_outcome",
    "outcome_of_sample",
    "pair_counts",
    "pair_metrics",
    "position_bias",
    "ratio_of_sums",
    "sample_orders",
    "strict_win",
    "total",
]
