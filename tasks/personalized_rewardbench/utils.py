"""Functions the personalized_rewardbench task YAMLs call (``!function utils.<name>``).

They are thin: the logic lives in :mod:`prbench.harness.tasks`, :mod:`prbench.harness.task_rows`
and :mod:`prbench.harness.profile_rows` (tested there), so a task folder
copied elsewhere keeps working as long as prbench is installed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prbench.harness import profile_rows as _profile_rows
from prbench.harness import task_rows as _task_rows
from prbench.harness import tasks as _tasks
from prbench.judges import order_metrics as _order
from prbench.metrics import finite_mean as _finite_mean


def load_docs(**kwargs: Any) -> dict[str, Any]:
    """``custom_dataset``: records of the task's domain; profiles are built when scored."""
    return _task_rows.load_docs(**kwargs)


def process_docs(dataset: Any) -> Any:
    """``process_docs``: the rows with the profiles built so far filled in (logged samples)."""
    return _profile_rows.process_docs(dataset)


def doc_to_text(doc: Mapping[str, Any]) -> str:
    """The prompt: the rendered profile (if any) and the question."""
    return _tasks.doc_to_text(doc)


def doc_to_choice(doc: Mapping[str, Any]) -> list[str]:
    """``[chosen, rejected]``."""
    return _tasks.doc_to_choice(doc)


def process_results(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, Any]:
    """Strict accuracy (a tie is wrong), tie, margin and invalid (no verdict) for one pair.

    For a pairwise judge that reported its per-order verdicts, ``acc`` is strict over the
    orders (an unreadable order is never a win) and the judge metrics are added
    (``acc_single_order``, ``acc_chosen_first``, ``acc_chosen_second``, ``position_bias``,
    ``first_shown_win_rate``, ``n_unreadable``, ``n_order_flips``, ``judge_counts``, and the
    released script's outputs under ``protocol=released``; see
    :mod:`prbench.judges.order_metrics`); for other scorers they are absent.
    """
    return dict(_tasks.process_results(doc, results))


def finite_mean(values: Sequence[float]) -> float:
    """Mean over the pairs whose value is defined (``margin``, the per-order accuracies)."""
    return _finite_mean(values)


def ratio_of_sums(items: Sequence[Sequence[float]]) -> float:
    """``first_shown_win_rate`` and the released accuracies: pooled numerators over denominators."""
    return _order.ratio_of_sums(items)


def position_bias(items: Sequence[Sequence[float]]) -> float:
    """``position_bias``: ``|acc_chosen_first - acc_chosen_second|`` over the task's orders."""
    return _order.position_bias(items)


def released_ratio(items: Sequence[Sequence[float]]) -> float:
    """The released accuracies (with the chosen answer in A / in B): 0.0 for an empty position."""
    return _order.released_ratio(items)


def released_position_bias(items: Sequence[Sequence[float]]) -> float:
    """``released_position_bias``: the script's ``|acc_A - acc_B|`` (an empty position is 0.0)."""
    return _order.released_position_bias(items)


def total(items: Sequence[float]) -> int:
    """``n_unreadable``, ``n_order_flips`` and the prediction counts: sums over the pairs."""
    return _order.total(items)


def judge_counts(items: Sequence[Sequence[Any]]) -> dict[str, dict[str, float]]:
    """``judge_counts``: a judge's per-domain counts, from which the summary builds every row."""
    return _order.judge_counts(items)


def domain_counts(items: Sequence[Sequence[Any]]) -> dict[str, dict[str, int]]:
    """Per-domain pair counts of a task over every domain (the ``domains`` metric)."""
    return _tasks.domain_counts(items)
