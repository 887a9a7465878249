"""Answers a scorer could not score, with the scorer's reason, for the samples files.

A scorer that leaves an answer unscored (``nan``; e.g. ``hf-classifier`` when the answer alone is
longer than ``max_length``) reports why through its per-request extras (``{"invalid": reason}``,
:mod:`prbench.scoring.extras`). The pair then counts as ``invalid`` (never a win); the reason is
kept here by (task, record id, answer) while the run scores, and written into that pair's line of
the samples file (``--log_samples``) as ``invalid_reason``: ``{"chosen": ..., "rejected": ...}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: (task name, record id) -> answer (``chosen``/``rejected``) -> reason
UNSCORED: dict[tuple[str, str], dict[str, str]] = {}

ANSWERS = ("chosen", "rejected")


def record(task: str, record_id: str, which: int, extras: Any) -> None:
    """Keep the reason of an unscored answer (``which``: 0 chosen, 1 rejected); ignore others."""
    if isinstance(extras, Mapping) and isinstance(extras.get("invalid"), str):
        UNSCORED.setdefault((task, str(record_id)), {})[ANSWERS[which]] = extras["invalid"]


def annotate(task: str, samples: Sequence[Any]) -> list[Any]:
    """The samples of ``task``, each unscored pair's with its ``invalid_reason`` added."""
    out = []
    for sample in samples:
        doc = sample.get("doc") if isinstance(sample, Mapping) else None
        reasons = UNSCORED.get((task, str(doc.get("id")))) if isinstance(doc, Mapping) else None
        out.append({**sample, "invalid_reason": dict(reasons)} if reasons else sample)
    return out


def reset() -> None:
    """Forget every reason (a new run)."""
    UNSCORED.clear()


__all__ = ["ANSWERS", "UNSCORED", "annotate", "record", "reset"]
