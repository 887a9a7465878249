"""An answer's score and what the scorer said of it, carried through lm-eval to the task.

lm-eval hands the model's return value for each request, unchanged, to the task's
``process_results`` (through its ``take_first`` filter) and to the logged samples. The
``prbench`` model returns each answer's score as a :class:`Scored`: to lm-eval an ordinary
``(log-likelihood, is_greedy)`` pair, which also keeps the scorer's extras for that answer:

- ``invalid``: why an answer could not be scored (``hf-classifier`` when the answer alone is
  longer than ``max_length``, an unreadable judge reply); the pair counts as ``invalid``;
- ``orders``: a pairwise judge's per-order verdicts (and replies) for the pair, on the chosen
  answer's result; the task's judge metrics are computed from them;
- ``input``: the input the scorer built for the answer (a pairwise judge: the messages of each
  order asked, on the chosen answer's result), as :mod:`prbench.scoring.inputs` records it.

So per-pair extras travel with the pair's own results, never through module state: two runs in
one process cannot see each other's pairs. :func:`annotate_sample` writes them into the pair's
line of the samples file (``invalid_reason``, the judge's orders under
:data:`prbench.judges.order_metrics.SAMPLE_KEY`, and the input as scored under
:data:`INPUT_KEY`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

ANSWERS = ("chosen", "rejected")
#: The samples-file key of the input each answer (or each judge order) was scored from.
INPUT_KEY = "scored_input"
#: A pairwise judge's ``shown_first`` as the samples file names it (the pair's first answer is
#: the chosen one).
_SHOWN = {"first": "chosen", "second": "rejected"}


def _rebuild(score: float, extras: dict[str, Any] | None) -> Scored:
    return Scored(score, extras)


class Scored(tuple):
    """``(score, False)`` as lm-eval expects of ``loglikelihood``, with the scorer's extras.

    Attributes:
        extras: ``{"invalid": reason}``, ``{"orders": outcome}`` and/or ``{"input": record}``
            (see the module doc), or ``None``.
    """

    extras: dict[str, Any] | None

    def __new__(cls, score: float, extras: dict[str, Any] | None = None) -> Scored:
        """``(score, False)`` carrying ``extras``."""
        self = super().__new__(cls, (float(score), False))
        self.extras = dict(extras) if extras else None
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with its extras (lm-eval gathers the samples of data-parallel processes)."""
        return (_rebuild, (self[0], self.extras))


def extras_of(result: Any) -> dict[str, Any]:
    """The extras a result carries (``{}`` for a plain ``(score, is_greedy)`` pair)."""
    extras = getattr(result, "extras", None)
    return extras if isinstance(extras, dict) else {}


def pair_extras(results: Sequence[Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """A pair's judge outcome and its answers' invalid reasons, from its two results.

    Returns:
        ``(outcome, reasons)``: the judge's order outcome (``{}`` when none was recorded) and
        ``{"chosen"|"rejected": reason}`` for the answers that could not be scored.
    """
    outcome: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    for answer, result in zip(ANSWERS, results, strict=False):
        extras = extras_of(result)
        if isinstance(extras.get("orders"), Mapping) and not outcome:
            outcome = dict(extras["orders"])
        if isinstance(extras.get("invalid"), str):
            reasons[answer] = extras["invalid"]
    return outcome, reasons


def scored_input(results: Sequence[Any]) -> dict[str, Any] | None:
    """The pair's :data:`INPUT_KEY` value from its two results (``None`` when none was recorded).

    A pairwise judge's orders (on the chosen answer's result) give ``{"kind": "messages",
    "orders": [...]}`` with ``shown_first`` as ``chosen``/``rejected``; a pointwise scorer's
    answers give ``{"kind": "text"|"messages", "answers": {"chosen": ..., "rejected": ...}}``
    (``messages`` when the scorer sent chat messages).
    """
    records = [extras_of(r).get("input") for r in results]
    for record in records:
        if isinstance(record, Mapping) and isinstance(record.get("orders"), list):
            orders = [{**o, "shown_first": _SHOWN.get(o.get("shown_first"), o.get("shown_first"))}
                      for o in record["orders"] if isinstance(o, Mapping)]
            return {"kind": "messages", "orders": orders}
    answers = {answer: dict(record) for answer, record in zip(ANSWERS, records, strict=False)
               if isinstance(record, Mapping) and "text" in record}
    if not answers:
        return None
    kind = "messages" if any("messages" in a for a in answers.values()) else "text"
    return {"kind": kind, "answers": answers}


def annotate_sample(sample: Any) -> Any:
    """A samples-file line with its pair's extras added (unchanged when it has none).

    ``invalid_reason`` (``{"chosen"|"rejected": reason}``) for answers that could not be
    scored; the judge's orders and replies under
    :data:`prbench.judges.order_metrics.SAMPLE_KEY`; the input as scored under
    :data:`INPUT_KEY` (:func:`scored_input`).
    """
    from prbench.judges.order_metrics import SAMPLE_KEY, sample_orders

    if not isinstance(sample, Mapping):
        return sample
    results = sample.get("filtered_resps")
    if not isinstance(results, list | tuple):
        return sample
    outcome, reasons = pair_extras(results)
    added: dict[str, Any] = {}
    if reasons:
        added["invalid_reason"] = reasons
    rows = sample_orders(outcome) if outcome else None
    if rows is not None:
        added[SAMPLE_KEY] = rows
    given = scored_input(results)
    if given is not None:
        added[INPUT_KEY] = given
    return {**sample, **added} if added else sample


__all__ = ["ANSWERS", "INPUT_KEY", "Scored", "annotate_sample", "extras_of", "pair_extras",
           "scored_input"]
