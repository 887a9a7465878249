"""prbench's lm-eval tasks: where their folders are, and the functions their YAMLs name.

:func:`task_dirs` is the ``lm_eval.tasks`` entry point: prbench's own folder plus the folders that
plugins register. The task YAMLs (through ``tasks/personalized_rewardbench/utils.py``) call
:func:`prbench.harness.task_rows.load_docs` for their rows,
:func:`prbench.harness.profile_rows.process_docs` to fill in the profiles built, and the functions
here: the prompt (:func:`doc_to_text`), the choices (:func:`doc_to_choice`), the strict pair
metrics (:func:`process_results`) and the per-domain counts (:func:`domain_counts`). The task
YAML fixes ``prbench_domain``, ``prbench_condition`` and ``prbench_default_data`` through
``dataset_kwargs``; :mod:`prbench.harness.task_options` reads them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from prbench.harness.profile_rows import row_view
from prbench.harness.task_dirs import builtin_task_dir, task_dirs
from prbench.harness.task_options import ALL_DOMAINS

log = logging.getLogger(__name__)


def task_names(dirs: Sequence[str] | None = None) -> set[str]:
    """Every task, group and tag name defined in ``dirs`` (default :func:`task_dirs`)."""
    from prbench.harness.lm_eval_compat import task_index_names

    return task_index_names(task_dirs() if dirs is None else dirs)


def doc_to_text(doc: Mapping[str, Any]) -> str:
    """The prompt of a row: the profile (if any), then the question; the answer follows it.

    A reward model reads the structured row; this text is what a likelihood baseline
    (``--model hf``) conditions on and what logged samples show. A profile not built yet is
    built here for the one row, unless a ``prbench`` model is open: it builds the profiles of the
    rows it scores itself, all at once, and the prompt then names the builder instead.
    """
    from prbench.profiles import lazy

    profile = doc["profile_text"]
    if doc.get("profile_status") == lazy.STATUS_PENDING:
        if lazy.deferred():
            # the key names the builder, its options and the record's content, so lm-eval's
            # response cache (keyed on this prompt) never mixes two profile conditions
            profile = (
                f"[profile {doc['profile_builder']} {doc['profile_key']}: built when scored]"
            )
        else:
            profile = row_view(doc).text
    parts = []
    if profile:
        parts.append("Earlier posts by the user:\n" + profile)
    parts.append("Question: " + doc["question"])
    return "\n\n".join(parts) + "\nAnswer: "


def doc_to_choice(doc: Mapping[str, Any]) -> list[str]:
    """``[chosen, rejected]``: the gold answer is always the first."""
    return [doc["chosen"], doc["rejected"]]


def process_results(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, Any]:
    """Strict pair metrics from the two scores (chosen first).

    ``acc`` and ``acc_macro`` are the same number for one task; a group averages ``acc`` over
    pairs (micro) and ``acc_macro`` over domains (macro). A task over every domain (``*``, e.g.
    ``personalized_rewardbench_custom``) has no ``acc_macro`` (it would only repeat ``acc``);
    it reports ``domains`` instead, ``[domain, correct, tie, invalid, longer_chosen]`` per pair,
    which :func:`domain_counts` sums per domain, so the summary shows one row per domain and a
    true macro average, as for the published groups.

    For a pairwise judge that reported the pair's per-order verdicts (they come with the
    results, :mod:`prbench.harness.scored`), ``acc`` is the strict
    order-based win (every order judged picked the chosen answer; an unreadable order is never
    a win) and the judge metrics of :func:`prbench.judges.order_metrics.pair_metrics` are
    added; the judge's probability still gives ``tie``, ``margin`` and ``invalid``.
    """
    from prbench.harness.scored import pair_extras
    from prbench.judges.order_metrics import pair_metrics
    from prbench.metrics import pair_outcome

    if len(results) != 2:
        raise ValueError(
            f"expected 2 results (chosen, rejected) for {doc.get('id')}, got {results}"
        )
    chosen, rejected = (r[0] if isinstance(r, tuple | list) else r for r in results)
    out = pair_outcome(chosen, rejected)
    metrics: dict[str, Any] = {
        "acc": out.correct,
        "acc_macro": out.correct,
        "tie": out.tie,
        "margin": out.margin,
        "invalid": out.invalid,
    }
    outcome, _reasons = pair_extras(results)  # what the scorer said of this pair's answers
    judged = pair_metrics(outcome, str(doc.get("domain", ""))) if outcome else {}
    if judged:  # a pairwise judge's strict acc comes from its orders (unreadable: never a win)
        metrics["acc"] = metrics["acc_macro"] = judged["acc"]
        metrics.update(judged)
    if doc.get("task_domain") == ALL_DOMAINS:
        del metrics["acc_macro"]
        longer = pair_outcome(len(str(doc["chosen"]).split()), len(str(doc["rejected"]).split()))
        metrics["domains"] = [
            str(doc.get("domain", "")), metrics["acc"], out.tie, out.invalid, longer.correct
        ]
    return metrics


#: the counts :func:`domain_counts` gives per domain
DOMAIN_COUNT_KEYS = ("n", "correct", "ties", "invalid", "length_correct")


def domain_counts(items: Sequence[Sequence[Any]]) -> dict[str, dict[str, int]]:
    """Aggregation of the ``domains`` metric: per-domain pair counts (domains sorted).

    Args:
        items: ``[domain, correct, tie, invalid, longer_chosen]`` per pair (see
            :func:`process_results`); lm-eval gathers them from every process first.

    Returns:
        ``{domain: {"n", "correct", "ties", "invalid", "length_correct"}}``.
    """
    counts: dict[str, dict[str, int]] = {}
    for domain, correct, tie, invalid, longer in items:
        row = counts.setdefault(str(domain), dict.fromkeys(DOMAIN_COUNT_KEYS, 0))
        row["n"] += 1
        row["correct"] += int(correct)
        row["ties"] += int(tie)
        row["invalid"] += int(invalid)
        row["length_correct"] += int(longer)
    return {d: counts[d] for d in sorted(counts)}


def reset() -> None:
    """Forget loaded records, built profiles and provenance (tests)."""
    from prbench.harness import profile_rows, record_store
    from prbench.harness.task_rows import LENGTHS

    profile_rows.PROVENANCE.clear()
    LENGTHS.clear()
    record_store.reset()
    profile_rows.reset()


__all__ = [
    "DOMAIN_COUNT_KEYS",
    "builtin_task_dir",
    "doc_to_choice",
    "doc_to_text",
    "domain_counts",
    "process_results",
    "reset",
    "task_dirs",
    "task_names",
]
