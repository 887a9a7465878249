"""Pair explorer data: every scored pair of a run, with what the scorer read and replied.

After a number, a researcher wants the pairs behind it: which pairs did the reward model get
wrong, and why. :func:`explorer_pairs` reads a run's samples files (``prbench eval
--log_samples``) and gives, per pair and cell (condition + profile source), what the scorer saw
and what it said: the domain, the question, the profile text as built for the scorer, both
answers, the outcome (right / wrong / tie / invalid), the margin, whether the length baseline
(the longer answer wins) agrees, the user's hidden rubric aspects (DIAGNOSTIC: the scorer never
saw them), and why the pair counted as it did under each metric:

- a pointwise reward model: both scores, the margin, and for an answer it left unscored the
  scorer's reason (the line's ``invalid_reason``);
- a pairwise judge: per order shown (chosen first / chosen second) the judge's raw reply (as the
  samples file keeps it: at most :data:`prbench.judges.common.REPLY_KEEP_CHARS` characters), the
  parsed verdict, why an unreadable order was unreadable, and the pair's strict ``acc`` and
  ``acc_single_order`` with the rule that gave each
  (:func:`prbench.judges.order_metrics.explain_pair`; the definitions are not repeated here).

What the scorer was sent, when the run recorded it (the line's ``scored_input``, written by
:func:`prbench.harness.scored.annotate_sample`): per answer of a pointwise scorer the input text
as scored (where a truncation cut it, where the profile sits, the tokens sent and before the cut,
its length and sha256, whether the page holds only its head, whether the score came from the score
cache), per order of a judge the messages as sent and the raw reply (:func:`scored_input`); the
pair's input tokens and time are their sums. A line without it (a run made without the option, or
before prbench recorded it) has ``input`` ``None``. Each pair keeps its samples line as read
(``raw``), for the page's raw view, less the dataset record the line carries (``record_json``:
the user's posts and rubric, often most of the line; the page shows the rubric aspects), which a
note of its length replaces (:func:`raw_line`).

A number on a line that does not match what its parts give (a samples line whose ``acc`` is not
the strict win of its orders) is kept and flagged in the pair's ``notes``, never replaced.
The page itself is :mod:`prbench.analysis.explorer`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

#: the outcomes a pair can have, in the order the page counts them
OUTCOMES = ("right", "wrong", "tie", "invalid")

#: the flags a pair can carry (the page's "flags" filter): an order without a verdict, two
#: read orders preferring different answers, an answer a pointwise scorer left unscored
FLAGS = ("unreadable", "order-flip", "unscored")

#: what the page says where a judge's raw reply is not in the samples file
NO_REPLY_LOGGED = (
    "the raw reply is not in the samples file: the judge does not record its replies, the "
    "verdict was read from a score cache written before replies were kept, or the pair was "
    "scored by another process of a data-parallel run"
)

#: what the page says for a line without ``scored_input``
NO_INPUT = "input not recorded (the run was made without it, or before prbench recorded it)"

_NAMES = {"first": "chosen", "second": "rejected", None: "unreadable"}


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

    For a line without ``judge_replies`` (a judge that records no replies, or a file written
    before they were logged). A row carries ``judge_counts`` (the pair's per-order counts,
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
        out.append({"order": order, "verdict": _NAMES[winner]})
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


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def pair_orders(line: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    """A judged pair's orders as the explorer shows them, and the pair's order outcome.

    From the line's ``judge_replies`` (:data:`prbench.judges.order_metrics.SAMPLE_KEY`) when
    the judge recorded its replies, else rebuilt from the metrics (:func:`judge_orders`).

    Returns:
        ``(orders, outcome)``: per order ``order`` (``"chosen first"``/``"chosen second"``),
        ``verdict`` (``"chosen"``/``"rejected"``/``"unreadable"``), ``parsed`` (the judge's
        ``"A"``/``"B"``, ``None`` when it gave none or it is not known), ``reply`` (the kept
        text, ``None`` when no text came back or it is not logged), ``logged`` (whether the
        reply was in the samples file), ``failure`` and ``detail`` (why the order is
        unreadable); and the outcome (:func:`prbench.judges.order_metrics.order_outcome`) the
        metrics are computed from. ``None`` for a pointwise scorer.

    Raises:
        ValueError: ``judge_replies`` is malformed.
    """
    from prbench.judges.order_metrics import SAMPLE_KEY, outcome_of_sample

    fallback = {"fallback": "A"} if "released_acc" in line else {}
    rows = line.get(SAMPLE_KEY)
    if rows is not None:
        outcome = {**outcome_of_sample(rows), **fallback}
        orders = [{
            "order": "chosen first" if r["shown_first"] == "first" else "chosen second",
            "verdict": _NAMES[r.get("winner")],
            "parsed": _text(r.get("verdict")),
            "reply": _text(r.get("reply")),
            "logged": True,
            "failure": _text(r.get("failure")),
            "detail": _text(r.get("detail")),
        } for r in rows]
        return orders, outcome
    rebuilt = judge_orders(line)
    if rebuilt is None:
        return None
    winner = {"chosen": "first", "rejected": "second", "unreadable": None}
    outcome = {"orders": [["first" if o["order"] == "chosen first" else "second",
                           winner[o["verdict"]]] for o in rebuilt], **fallback}
    orders = [{**o, "parsed": None, "reply": None, "logged": False, "failure": None,
               "detail": None} for o in rebuilt]
    return orders, outcome


def _judge_reasons(line: Mapping[str, Any], outcome: Mapping[str, Any], p_chosen: float | None,
                   notes: list[str]) -> list[dict[str, Any]]:
    """Why a judged pair counted as it did; a line value that disagrees goes to ``notes``."""
    from prbench.judges.order_metrics import explain_pair

    reasons = explain_pair(outcome)
    for r in reasons:
        logged = line.get(r["metric"])
        if r["metric"] in ("acc", "acc_single_order") and logged is not None and (
                _number(logged) != r["value"]):
            notes.append(f"the samples line says {r['metric']} = {logged}, but its orders give "
                         f"{r['value']:g}; the page shows the line's outcome")
    if p_chosen is None:
        reasons.append({"metric": "invalid", "value": 1.0,
                        "why": "no order gave a readable verdict, so the judge's probability "
                               "P(chosen) is undefined: invalid, never a win"})
    elif p_chosen == 0.5:
        reasons.append({"metric": "tie", "value": 1.0,
                        "why": "P(chosen) = 0.5: the readable orders split, a tie"})
    return reasons


def _pointwise_reasons(scores: list[float | None],
                       unscored: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Why a pointwise pair counted as it did (strict ``acc``: a tie or a missing score is 0)."""
    from prbench.metrics import pair_outcome

    c, r = (math.nan if s is None else s for s in scores)
    out = pair_outcome(c, r)
    if out.invalid:
        missing = [f"{k}: {unscored[k]}" if k in unscored else f"{k}: no score"
                   for k, s in zip(("chosen", "rejected"), scores, strict=True) if s is None]
        why = ("an answer has no score (" + "; ".join(missing) + "): invalid, never a win")
        return [{"metric": "acc", "value": 0.0, "why": why},
                {"metric": "invalid", "value": 1.0, "why": why}]
    if out.tie:
        return [{"metric": "acc", "value": 0.0,
                 "why": "score(chosen) = score(rejected): a tie is never a win"},
                {"metric": "tie", "value": 1.0, "why": "both answers scored the same"}]
    rel = ">" if out.correct else "<"
    return [{"metric": "acc", "value": out.correct,
             "why": f"score(chosen) {rel} score(rejected) (margin {out.margin:+.4g})"}]


def _aspects(record: Mapping[str, Any]) -> list[dict[str, str]]:
    aspects = record.get("rubric_aspects")
    if not isinstance(aspects, list):
        return []
    return [{k: str(a.get(k, "")) for k in ("aspect", "evidence", "reason")}
            for a in aspects if isinstance(a, Mapping)]


def _unscored(line: Mapping[str, Any]) -> dict[str, str]:
    reasons = line.get("invalid_reason")
    if not isinstance(reasons, Mapping):
        return {}
    return {str(k): str(v) for k, v in reasons.items() if k in ("chosen", "rejected")}


def explorer_pair(line: Mapping[str, Any]) -> dict[str, Any]:
    """The scorer's side of one samples line: scores or orders, outcome, reasons, flags.

    Returns:
        ``kind`` (``"judge"``/``"pointwise"``), ``scores``, ``margin``, ``outcome``, ``orders``
        (:func:`pair_orders`, ``None`` for a pointwise scorer), ``reasons`` (``[{"metric",
        "value", "why"}]``), ``unscored`` (answer -> the scorer's reason), ``flags``
        (:data:`FLAGS`) and ``notes`` (numbers on the line that disagree with their parts).

    Raises:
        ValueError: the line's ``judge_replies`` is malformed.
    """
    scores = _scores(line)
    unscored = _unscored(line)
    notes: list[str] = []
    judged = pair_orders(line)
    flags: list[str] = []
    if judged is None:
        orders = None
        reasons = _pointwise_reasons(scores, unscored)
        if unscored:
            flags.append("unscored")
    else:
        orders, outcome = judged
        reasons = _judge_reasons(line, outcome, scores[0], notes)
        if any(o["verdict"] == "unreadable" for o in orders):
            flags.append("unreadable")
        if any(r["metric"] == "n_order_flips" for r in reasons):
            flags.append("order-flip")
    return {
        "kind": "pointwise" if orders is None else "judge",
        "scores": scores,
        "margin": _number(line.get("margin")),
        "outcome": _outcome(line),
        "orders": orders,
        "reasons": reasons,
        "unscored": unscored,
        "flags": flags,
        "notes": notes,
    }


def _int(value: Any) -> int | None:
    number = _number(value)
    return None if number is None or isinstance(value, bool) else int(number)


def _messages(value: Any, where: str) -> list[dict[str, str]] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(m, Mapping) for m in value):
        raise ValueError(f"scored_input: {where}.messages is not a list of "
                         "{\"role\", \"content\"} objects")
    return [{"role": str(m.get("role", "")), "content": str(m.get("content", ""))}
            for m in value]


def _common(entry: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The fields an answer's and an order's input share."""
    return {
        "messages": _messages(entry.get("messages"), where),
        "chars": _int(entry.get("chars")),
        "sha256": str(entry.get("sha256") or ""),
        "clipped": bool(entry.get("clipped")),
        "tokens": _int(entry.get("tokens")),
        "time_s": _number(entry.get("time_s")),
        "cached": bool(entry.get("cached")),
    }


def _cut(cut: Any, where: str) -> dict[str, Any] | None:
    """An answer's cut, checked: which side, and where.

    ``left`` keeps ``text[char:]``, ``right`` keeps ``text[:char]``, ``middle`` keeps
    ``text[:char] + text[end_char:]`` (``text_sent`` where that is not what was tokenised);
    ``char`` is ``None`` where the tokenizer gave no offsets.
    """
    if cut is None:
        return None
    shape = (f"scored_input: {where}.cut is not {{\"side\": \"left\" | \"right\" | "
             "\"middle\", \"char\": N | null, ...} (a middle cut also gives end_char)")
    if not isinstance(cut, Mapping) or cut.get("side") not in ("left", "right", "middle"):
        raise ValueError(shape)
    char = _int(cut.get("char"))
    end = _int(cut.get("end_char"))
    if (cut.get("char") is not None and char is None) or (
            cut["side"] == "middle" and (char is None or end is None or end < char)):
        raise ValueError(shape)
    return {"side": str(cut["side"]), "char": None if char is None else max(0, char),
            "end_char": end if cut["side"] == "middle" else None,
            "tokens_dropped": _int(cut.get("tokens_dropped")),
            "text_sent": _text(cut.get("text_sent"))}


def _answer_input(entry: Any, name: str) -> dict[str, Any]:
    where = f"answers.{name}"
    if not isinstance(entry, Mapping):
        raise ValueError(f"scored_input: {where} is not an object")
    text = str(entry.get("text") or "")
    cut = _cut(entry.get("cut"), where)
    profile = entry.get("profile")
    span = None
    if isinstance(profile, list) and len(profile) == 2:
        start, end = _int(profile[0]), _int(profile[1])
        if start is not None and end is not None and 0 <= start <= end:
            span = [start, end]
    return {"text": text, **_common(entry, where), "tokens_full": _int(entry.get("tokens_full")),
            "cut": cut, "profile": span, "reply": _text(entry.get("reply"))}


def _order_input(entry: Any, n: int) -> dict[str, Any]:
    where = f"orders[{n}]"
    if not isinstance(entry, Mapping) or entry.get("shown_first") not in ("chosen", "rejected"):
        raise ValueError(f"scored_input: {where} is not an object with shown_first "
                         "\"chosen\" or \"rejected\"")
    return {"shown_first": str(entry["shown_first"]), **_common(entry, where),
            "reply": _text(entry.get("reply"))}


def scored_input(line: Mapping[str, Any]) -> dict[str, Any] | None:
    """The input as scored (the line's ``scored_input``), checked and normalised for the page.

    Returns:
        ``{"kind", "answers": {"chosen": ANS, "rejected": ANS} | None, "orders": [ORDER] |
        None}`` with every field of the samples contract present (``None`` where the line has
        none); ``None`` for a line without ``scored_input``.

    Raises:
        ValueError: ``scored_input`` is not shaped as the contract says (naming the field).
    """
    given = line.get("scored_input")
    if given is None:
        return None
    if not isinstance(given, Mapping):
        raise ValueError("scored_input is not an object")
    answers = given.get("answers")
    orders = given.get("orders")
    if answers is not None and not isinstance(answers, Mapping):
        raise ValueError("scored_input: answers is not an object")
    if orders is not None and not isinstance(orders, list):
        raise ValueError("scored_input: orders is not a list")
    return {
        "kind": str(given.get("kind") or ""),
        "answers": None if answers is None else {
            name: _answer_input(answers[name], name)
            for name in ("chosen", "rejected") if name in answers},
        "orders": None if orders is None else [_order_input(o, n) for n, o in enumerate(orders)],
    }


def input_totals(given: Mapping[str, Any] | None) -> tuple[int | None, float | None]:
    """A pair's input tokens and time: the sums over its answers or orders.

    Returns:
        ``(tokens, time_s)``, each ``None`` where no answer or order has the number (no input
        recorded, a scorer without a tokenizer, scores from the score cache).
    """
    if given is None:
        return None, None
    parts = list((given.get("answers") or {}).values()) + list(given.get("orders") or [])
    tokens = [p["tokens"] for p in parts if p.get("tokens") is not None]
    times = [p["time_s"] for p in parts if p.get("time_s") is not None]
    return (sum(tokens) if tokens else None), (sum(times) if times else None)


def raw_line(line: Mapping[str, Any]) -> dict[str, Any]:
    """A samples line for the page's raw view: ``doc.record_json`` replaced by a note.

    The dataset record (the user's posts, the rubric) is most of a line's size and not what the
    scorer saw; the note says how long it is and where it is.
    """
    doc = line.get("doc")
    if not isinstance(doc, Mapping) or not isinstance(doc.get("record_json"), str):
        return dict(line)
    note = (f"[left out of the page: the dataset record, {len(doc['record_json']):,} "
            "characters of JSON; it is in the samples file]")
    return {**line, "doc": {**doc, "record_json": note}}


def explorer_pairs(run: Any) -> list[dict[str, Any]]:
    """Every logged pair of a run (:class:`prbench.analysis.runs.Run`), JSON-ready.

    Raises:
        prbench.analysis.runs.RunFileError: a samples line that is not a prbench task row, a
            ``record_json`` that is not JSON, a malformed ``judge_replies`` or ``scored_input``
            (naming the file and line).
    """
    from prbench.analysis.runs import RunFileError, read_sample_lines, samples_file
    from prbench.analysis.summary import task_rows
    from prbench.metrics import pair_outcome

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
            try:
                scored = explorer_pair(line)
                given = scored_input(line)
            except ValueError as exc:
                raise RunFileError(f"{file}:{n}: {exc}") from exc
            chosen, rejected = str(doc.get("chosen", "")), str(doc.get("rejected", ""))
            length_right = pair_outcome(len(chosen.split()), len(rejected.split())).correct
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
                **scored,
                "length_agrees": (length_right == 1.0) == (scored["outcome"] == "right"),
                "aspects": _aspects(record),
                "input": given,
                "tokens": input_totals(given)[0],
                "time_s": input_totals(given)[1],
                "raw": raw_line(line),
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


__all__ = ["FLAGS", "NO_INPUT", "NO_REPLY_LOGGED", "OUTCOMES", "explorer_pair",
           "explorer_pairs", "input_totals", "judge_orders", "pair_orders", "raw_line",
           "run_data", "scored_input"]
