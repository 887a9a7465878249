"""Functions the personalized_rewardbench task YAMLs call (``!function utils.<name>``).

They are thin: the logic lives in :mod:`prbench.harness.tasks` (tested there), so a task folder
copied elsewhere keeps working as long as prbench is installed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prbench.analysis.metrics import finite_mean as _finite_mean
from prbench.harness import tasks as _tasks
from prbench.judges import order_metrics as _order


def load_docs(**kwargs: Any) -> dict[str, Any]:
    """``custom_dataset``: records of the task's domain; profiles are built when scored."""
    return _tasks.load_docs(**kwargs)


def process_docs(dataset: Any) -> Any:
    """``process_docs``: the rows with the profiles built so far filled in (logged samples)."""
    return _tasks.process_docs(dataset)


def doc_to_text(doc: Mapping[str, Any]) -> str:
    """The prompt: the rendered profile (if any) and the question."""
    return _tasks.doc_to_text(doc)


def doc_to_choice(doc: Mapping[str, Any]) -> list[str]:
    """``[chosen, rejected]``."""
    return _tasks.doc_to_choice(doc)


def process_results(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, Any]:
    """Strict accuracy (a tie is wrong), tie, margin and invalid (no verdict) for one pair.

    For a pairwise judge that reported its per-order verdicts, also the both-order metrics
    (``acc_split_half``, ``acc_chosen_first``, ``acc_chosen_second``, ``position_bias``,
    ``n_order_flips``; see :mod:`prbench.judges.order_metrics`); for other scorers they are
    absent.
    """
    out: dict[str, Any] = dict(_tasks.process_results(doc, results))
    out.update(_order.doc_metrics(doc))
    return out


def finite_mean(values: Sequence[float]) -> float:
    """Mean over the pairs whose value is defined (``margin``, the per-order accuracies)."""
    return _finite_mean(values)


def ratio_of_sums(items: Sequence[Sequence[float]]) -> float:
    """``position_bias``: verdicts won by the answer shown first over all readable verdicts."""
    return _order.ratio_of_sums(items)


def total(items: Sequence[float]) -> int:
    """``n_order_flips``: the number of pairs whose two orders preferred different answers."""
    return _order.total(items)


def domain_counts(items: Sequence[Sequence[Any]]) -> dict[str, dict[str, int]]:
    """Per-domain pair counts of a task over every domain (the ``domains`` metric)."""
    return _tasks.domain_counts(items)
