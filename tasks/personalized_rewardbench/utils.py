"""Functions the personalized_rewardbench task YAMLs call (``!function utils.<name>``).

They are thin: the logic lives in :mod:`prbench.harness.tasks` (tested there), so a task folder
copied elsewhere keeps working as long as prbench is installed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prbench.analysis.metrics import finite_mean as _finite_mean
from prbench.harness import tasks as _tasks


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


def process_results(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, float]:
    """Strict accuracy (a tie is wrong), tie, margin and invalid (no verdict) for one pair."""
    return _tasks.process_results(doc, results)


def finite_mean(values: Sequence[float]) -> float:
    """Mean over the pairs whose margin is defined."""
    return _finite_mean(values)
