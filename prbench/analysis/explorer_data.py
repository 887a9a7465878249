"""The pairs of a run as the pair explorer shows them, read from its samples files.

:func:`explorer_pairs` reads a run's samples files (``prbench eval --log_samples``) and gives, per
pair and cell (condition + profile source), what the scorer saw and what it said: the domain, the
question, the profile text as built for the scorer, both answers with both scores (or a pairwise
judge's per-order verdicts, unreadable replies counted: :func:`judge_orders`), the outcome
(right / wrong / tie / invalid), the margin, whether the length baseline (the longer answer wins)
agrees, and the user's hidden rubric aspects (DIAGNOSTIC: the scorer never saw them).
:func:`run_data` adds the run's label and flags. The page itself is
:mod:`prbench.analysis.explorer`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

#: the outcomes a pair can have, in the order the page counts them
OUTCOMES = ("right", "wrong", "tie", "invalid")


def _number(value: Any) -> float | None:
    """A finite float, else ``None`` (strict JSON has no NaN)."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _outcome(line: Mapping[str, Any]) -> str:
    if _number(line.get("invalid")):
        return "invalid"
    if _number(line.get("tie")):
        return "tie"
    return "right" if _number(line.get("acc")) else "wrong"


def _scores(line: Mapping[str, Any]) -> list[float | None]:
    """(chosen, rejected) scores from lm-eval's ``filtered_resps`` (``[[score, greedy], ...]``)."""
    resps = line.get("filtered_resps")
    if not isinstance(resps, list) or len(resps) != 2:
        return [None, None]
    return [_number(r[0] if isinstance(r, list | tuple) and r else r) for r in resps]


def judge_orders(line: Mapping[str, Any]) -> list[dict[str, str]] | None:
    """A pairwise judge's per-order verdicts, rebuilt from the pair's both-order metrics.

    A row carries ``judge_counts`` (the pair's per-order counts,
    :mod:`prbench.judges.order_metrics`), which name each order's verdict: the chosen answer,
    the rejected one, or none (an unreadable reply). A row written before those counts existed
    carries ``acc_chosen_first`` / ``acc_chosen_second`` (1, 0, or nan when that order was not
    asked) and ``position_bias`` = ``[verdicts won by the answer shown first, readable
    verdicts]``, which determine the same.

    Returns:
        ``[{"order": "chosen first" | "chosen second", "verdict": "chosen" | "rejected" |
        "unreadable"}]``; ``None`` for a scorer without orders (a pointwise reward model).
    """
    counts = line.get("judge_counts")
    if isinstance(counts, list) and len(counts) == 2 and isinstance(counts[1], Mapping):
        return _orders_from_counts(counts[1])
    if "acc_chosen_first" not in line and "acc_chosen_second" not in line:
        return None
    first = _number(line.get("acc_chosen_first"))
    second = _number(line.get("acc_chosen_second"))
    bias = line.get("position_bias")
    won_first, readable = (int(bias[0]), int(bias[1])) if isinstance(bias, list) and len(
        bias) == 2 else (0, 0)
    # winners per order: "first" = the chosen answer (the harness asks chosen first)
    w1: str | None = "first" if first == 1.0 else None
    w2: str | None = "first" if second == 1.0 else None
    # a second-order verdict for the rejected answer is a win of the answer shown first
    if second == 0.0 and won_first - (1 if w1 == "first" else 0) >= 1:
        w2 = "second"
    read_known = (w1 is not None) + (w2 is not None)
    if first == 0.0 and readable - read_known >= 1:
        w1 = "second"
    out = []
    for order, asked, winner in (("chosen first", first, w1), ("chosen second", second, w2)):
        if asked is None:
            continue
        verdict = "unreadable" if winner is None else (
            "chosen" if winner == "first" else "rejected")
        out.append({"order": order, "verdict": verdict})
    return out


def _orders_from_counts(counts: Mapping[str, Any]) -> list[dict[str, str]]:
    """Each order's verdict from one pair's ``judge_counts`` (:func:`pair_counts` of the judge).

    A pair has at most one order with the chosen answer first and one with it second, so the
    counts name each order's verdict exactly.
    """

    def n(key: str) -> int:
        value = _number(counts.get(key))
        return int(value) if value is not None else 0

    unreadable_second = n("n_unreadable") - n("n_chosen_first_unreadable")
    out = []
    for order, asked, won, unreadable in (
        ("chosen first", n("n_chosen_first"), n("n_chosen_first_won"),
         n("n_chosen_first_unreadable")),
        ("chosen second", n("n_chosen_second"), n("n_chosen_second_won"), unreadable_second),
    ):
        if not asked:
            continue
        verdict = "chosen" if won else "unreadable" if unreadable else "rejected"
        out.append({"order": order, "verdict": verdict})
    return out


def _aspects(record: Mapping[str, Any]) -> list[dict[str, str]]:
    aspects = record.get("rubric_aspects")
    if not isinstance(aspects, list):
        return []
    return [{k: str(a.get(k, "")) for k in ("aspect", "evidence", "reason")}
            for a in aspects if isinstance(a, Mapping)]


def explorer_pairs(run: Any) -> list[dict[str, Any]]:
    """Every logged pair of a run (:class:`prbench.analysis.runs.Run`), JSON-ready.

    Raises:
        prbench.analysis.runs.RunFileError: a samples line that is not a prbench task row, or a
            ``record_json`` that is not JSON (naming the file and line).
    """
    from prbench.analysis.metrics import pair_outcome
    from prbench.analysis.runs import RunFileError, read_sample_lines, samples_file
    from prbench.analysis.summary import task_rows

    rows = task_rows(run.results)
    out: list[dict[str, Any]] = []
    for task in run.samples_found:
        file = samples_file(run.path, task)
        if file is None or task not in rows:
            continue
        row = rows[task]
        for n, line in enumerate(read_sample_lines(file), start=1):
            doc = line["doc"]
            try:
                record = json.loads(doc["record_json"]) if doc.get("record_json") else {}
            except json.JSONDecodeError as exc:
                raise RunFileError(f"{file}:{n}: record_json is not JSON ({exc.msg})") from exc
            chosen, rejected = str(doc.get("chosen", "")), str(doc.get("rejected", ""))
            length_right = pair_outcome(len(chosen.split()), len(rejected.split())).correct
            outcome = _outcome(line)
            out.append({
                "id": str(doc.get("id", "")),
                "task": task,
                "cell": row.cell,
                "domain": str(doc.get("domain") or (row.domain if row.domain != "*" else "")),
                "question": str(doc.get("question", "")),
                "profile": str(doc.get("profile_text") or ""),
                "profile_status": str(doc.get("profile_status") or ""),
                "profile_source": str(doc.get("profile_source") or row.source),
                "chosen": chosen,
                "rejected": rejected,
                "scores": _scores(line),
                "margin": _number(line.get("margin")),
                "outcome": outcome,
                "length_agrees": (length_right == 1.0) == (outcome == "right"),
                "orders": judge_orders(line),
                "aspects": _aspects(record),
            })
    return out


def run_data(run: Any) -> dict[str, Any]:
    """A run as the page reads it: label, flags and its pairs."""
    data = {r.data for sec in run.sections for r in sec.rows}
    return {
        "label": str(run.label),
        "diagnostic": bool(run.diagnostic),
        "sample": "sample" in data,
        "file": str(run.path),
        "pairs": explorer_pairs(run),
    }


__all__ = ["OUTCOMES", "explorer_pairs", "judge_orders", "run_data"]
