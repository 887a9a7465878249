"""Per-domain summary of prbench tasks in an lm-eval results dict (the statistics, no printing).

The rows come from lm-eval's per-task accuracy and pair counts (``acc``, ``tie``, ``invalid``,
``n-samples``); a task over every domain contributes one row per domain from its ``domains``
metric. :func:`summarize` groups them into sections (one per benchmark group, one per task over
every domain, one for the other tasks) with a seeded percentile-bootstrap interval per domain and
the micro (all pairs) and macro (mean of domains) accuracy. Accuracy over 0/1 outcomes is fully
described by the number of correct pairs, so no per-sample log is needed.

This module reads results files only; it does not import the lm-eval bridge
(:mod:`prbench.harness`). What only the running harness knows is passed in: ``length_of`` (the
length baseline of the rows it loaded) and ``profile_of`` (the builder a task config asks for).
Without them the length baseline is unknown and the profile label is the one the run recorded in
``config.prbench.data``. :mod:`prbench.harness.summary` prints the summary after a run.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

from prbench.metrics import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    DomainSummary,
    domain_summary,
    outcomes_from_counts,
)

#: ``length_of(data, domain, condition, n)``: the length baseline's accuracy on a task's first
#: ``n`` pairs, or ``None`` when unknown
LengthOf = Callable[[str, str, str, int], "float | None"]
#: ``profile_of(task_config)``: the profile builder id and options a task asks for
ProfileOf = Callable[[Mapping[str, Any]], "tuple[str, dict[str, Any]]"]


@dataclasses.dataclass
class TaskRow:
    """One prbench task of the run.

    Attributes:
        task: the lm-eval task name.
        domain: the domain (``*`` for the all-records task).
        condition: ``profile`` or ``noprofile``.
        data: the data source.
        n: pairs evaluated.
        correct: pairs with score(chosen) > score(rejected).
        ties: pairs with equal scores.
        invalid: pairs with a non-finite score (no verdict).
        length_acc: accuracy of the length baseline on the same pairs (``None`` if unknown).
        source: whose posts the profile was built from: ``own``, ``swapped``, ``shuffled`` or
            ``none`` (always ``none`` for ``noprofile``; :mod:`prbench.profiles.sources`).
        order_metrics: a pairwise judge's metrics (``acc`` strict, ``acc_single_order``,
            ``acc_chosen_first``, ``acc_chosen_second``, ``position_bias``,
            ``first_shown_win_rate``, ``n_unreadable``, ``n_order_flips`` and, under
            ``protocol=released``, the released script's outputs), computed from
            :attr:`judge_counts` (:func:`prbench.judges.order_metrics.metrics_from_counts`);
            ``None`` for scorers without orders.
        judge_counts: the judge's summed per-pair counts of this row
            (:data:`prbench.judges.order_metrics.COUNT_KEYS`); ``None`` for scorers without
            orders.
    """

    task: str
    domain: str
    condition: str
    data: str
    n: int
    correct: int
    ties: int
    invalid: int
    length_acc: float | None = None
    order_metrics: dict[str, float | None] | None = None
    source: str = "own"
    judge_counts: dict[str, float] | None = None

    @property
    def cell(self) -> str:
        """The condition and profile source as one key: ``profile``, ``profile:swapped``, ...

        ``profile`` (own posts) and ``noprofile`` keep their names, so two runs of one scorer
        under the same cell are the same pairs under the same condition.
        """
        if self.condition == "noprofile" or self.source == "own":
            return self.condition
        return f"{self.condition}:{self.source}"


@dataclasses.dataclass
class Section:
    """A group of tasks summarised together (one benchmark group, or the ungrouped tasks)."""

    title: str
    rows: list[TaskRow]
    summary: DomainSummary
    profile: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "title": self.title,
            "profile": self.profile,
            "tasks": [dataclasses.asdict(r) for r in self.rows],
            "accuracy": self.summary.as_dict(),
            "ties": sum(r.ties for r in self.rows) / max(1, sum(r.n for r in self.rows)),
            "invalid": sum(r.invalid for r in self.rows),
            "order_metrics": order_totals(self.rows),
        }


def _metric(values: Mapping[str, Any], name: str) -> float:
    value = values.get(f"{name},none")
    return float(value) if isinstance(value, int | float) else 0.0


def _judge_counts(values: Mapping[str, Any]) -> dict[str, dict[str, float]] | None:
    """A task's per-domain judge counts from lm-eval's values (``None``: no orders)."""
    counts = values.get("judge_counts,none")
    if not isinstance(counts, Mapping) or not counts:
        return None
    return {str(d): dict(c) for d, c in counts.items() if isinstance(c, Mapping)}


def judge_metrics(counts: Mapping[str, float] | None) -> dict[str, float | None] | None:
    """The judge metrics of summed counts, ``nan`` shown as ``None`` (JSON-ready)."""
    from prbench.judges.order_metrics import metrics_from_counts

    if counts is None:
        return None
    out: dict[str, float | None] = {}
    for name, value in metrics_from_counts(counts).items():
        out[name] = None if isinstance(value, float) and math.isnan(value) else value
    return out


def order_totals(rows: list[TaskRow]) -> dict[str, float | None] | None:
    """A section's judge metrics over all its pairs, from the summed counts of its rows.

    ``None`` unless every row with pairs has judge counts (pointwise scorers, old files).
    """
    from prbench.judges.order_metrics import add_counts

    judged = [r for r in rows if r.judge_counts is not None and r.n > 0]
    if not judged or len(judged) != len([r for r in rows if r.n > 0]):
        return None
    return judge_metrics(add_counts(r.judge_counts for r in judged))  # type: ignore[misc]


def task_rows(
    results: Mapping[str, Any], *, length_of: LengthOf | None = None
) -> dict[str, TaskRow]:
    """The prbench tasks of an lm-eval results dict (recognised by their ``dataset_kwargs``).

    Tasks without an ``acc`` (``--predict_only``) are left out. ``length_of`` gives the length
    baseline of a task (see :data:`LengthOf`); without it the baseline is ``None``.
    """
    rows: dict[str, TaskRow] = {}
    configs = results.get("configs") or {}
    for task, values in (results.get("results") or {}).items():
        cfg = configs.get(task) or {}
        kwargs = cfg.get("dataset_kwargs") or {}
        if "prbench_condition" not in kwargs or "acc,none" not in values:
            continue
        meta = cfg.get("metadata") or {}
        n = int(((results.get("n-samples") or {}).get(task) or {}).get("effective", 0))
        data = str(meta.get("prbench_data") or kwargs.get("prbench_default_data"))
        domain = str(kwargs.get("prbench_domain"))
        condition = str(kwargs.get("prbench_condition"))
        rows[task] = TaskRow(
            source=_source({**meta, **kwargs}),
            task=task, domain=domain, condition=condition, data=data, n=n,
            correct=round(_metric(values, "acc") * n), ties=round(_metric(values, "tie") * n),
            invalid=round(_metric(values, "invalid") * n),
            length_acc=length_of(data, domain, condition, n) if length_of else None,
        )
        per_domain = _judge_counts(values)
        if per_domain is not None:
            from prbench.judges.order_metrics import add_counts

            rows[task].judge_counts = add_counts(per_domain.values())
            rows[task].order_metrics = judge_metrics(rows[task].judge_counts)
    return rows


def _source(kwargs: Mapping[str, Any]) -> str:
    """A task's profile source (``?`` when its settings are invalid)."""
    from prbench.options import OptionsError
    from prbench.profiles.sources import resolve_source

    try:
        return resolve_source(kwargs)
    except OptionsError:
        return "?"


def domain_rows(
    results: Mapping[str, Any], *, length_baseline: bool = True,
    length_of: LengthOf | None = None,
) -> dict[str, list[TaskRow]]:
    """One row per domain for each task over every domain that reports ``domains``.

    A task over every domain (``prbench_domain: "*"``, e.g. ``personalized_rewardbench_custom``)
    is one lm-eval task, so its counts alone would give one row and a macro equal to the micro.
    Its ``domains`` metric (:func:`prbench.harness.tasks.domain_counts`) holds the pair counts of
    each domain; the rows here are built from them, like the rows of a published group's domain
    tasks. Tasks without the metric are left out. The per-domain length baseline comes from the
    metric itself (``length_baseline=False`` leaves it out).
    """
    out: dict[str, list[TaskRow]] = {}
    for task, row in task_rows(results, length_of=length_of).items():
        values = (results.get("results") or {}).get(task) or {}
        counts = values.get("domains,none")
        if row.domain != "*" or not isinstance(counts, Mapping) or not counts:
            continue
        parts = []
        for domain, c in counts.items():
            n = int(c.get("n", 0))
            length = c.get("length_correct")
            parts.append(TaskRow(
                task=task, domain=str(domain), condition=row.condition, data=row.data, n=n,
                source=row.source,
                correct=int(c.get("correct", 0)), ties=int(c.get("ties", 0)),
                invalid=int(c.get("invalid", 0)),
                length_acc=float(length) / n if length_baseline and n and length is not None
                else None,
            ))
            judged = _judge_counts(values)
            if judged is not None and str(domain) in judged:
                parts[-1].judge_counts = judged[str(domain)]
                parts[-1].order_metrics = judge_metrics(parts[-1].judge_counts)
        if sum(r.n for r in parts) == row.n:  # counts that do not add up are not used
            out[task] = parts
    return out


def recorded_profile(results: Mapping[str, Any], row: TaskRow) -> tuple[str, dict[str, Any]]:
    """The profile builder a run recorded for a row's data, domain, condition and source.

    Read from ``config.prbench.data`` (the provenance :func:`prbench.harness.task_rows.load_docs`
    records): the options as the task asked for them (``requested_options``), else every option
    the builder resolved; ``("?", {})`` when the run recorded none (not written by prbench).
    """
    data = ((results.get("config") or {}).get("prbench") or {}).get("data") or []
    for entry in data:
        if not isinstance(entry, Mapping):
            continue
        domain = str(entry.get("domain"))
        condition = str(entry.get("condition"))
        source = entry.get("profile_source") or ("none" if condition == "noprofile" else "own")
        if (
            (str(entry.get("data")), condition, source) == (row.data, row.condition, row.source)
            and domain in (row.domain, "*")
        ):
            info = entry.get("profile_builder") or {}
            options = info.get("requested_options", info.get("options"))
            return str(info.get("id") or "?"), dict(options or {})
    return "?", {}


def profile_label(
    results: Mapping[str, Any], rows: list[TaskRow], profile_of: ProfileOf | None = None
) -> str:
    """The section's profile condition as text: the builders and their options.

    Args:
        results: lm-eval's results dict.
        rows: the section's rows.
        profile_of: the builder a task config asks for (the harness knows); default: what the
            run recorded (:func:`recorded_profile`).
    """
    conditions = {r.condition for r in rows}
    if conditions == {"noprofile"}:
        return "question only (no profile)"
    labels = set()
    for r in rows:
        if profile_of is not None:
            builder, options = profile_of((results.get("configs") or {}).get(r.task) or {})
        else:
            builder, options = recorded_profile(results, r)
        if r.condition == "noprofile" or builder == "none":
            labels.add("none")
        else:
            shown = ",".join(f"{k}={v}" for k, v in sorted(options.items()))
            label = f"{builder}({shown})" if shown else builder
            if r.source == "none":
                label = "none"
            elif r.source != "own":
                label += f" [{r.source} profile: {SOURCE_NOTES.get(r.source, r.source)}]"
            labels.add(label)
    return ", ".join(sorted(labels)) + _not_built(results)


#: how a section's profile label explains a control source
SOURCE_NOTES = {
    "swapped": "another user's posts, same domain",
    "shuffled": "k random posts of the user, not the top-k",
}


def _not_built(results: Mapping[str, Any]) -> str:
    """`` (not built: ...)`` when the scorer read no profile, so none was built."""
    from prbench.profiles.lazy import STATUS_SKIPPED

    data = ((results.get("config") or {}).get("prbench") or {}).get("data") or []
    statuses = {
        (d.get("profile_builder") or {}).get("status")
        for d in data if isinstance(d, Mapping) and d.get("condition") == "profile"
    }
    return f" ({STATUS_SKIPPED})" if statuses == {STATUS_SKIPPED} else ""


def summarize(
    results: Mapping[str, Any],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
    length_baseline: bool = True,
    length_of: LengthOf | None = None,
    profile_of: ProfileOf | None = None,
) -> list[Section]:
    """The summary's sections, one per table.

    One section per benchmark group in the run, one per task over every domain (a row per domain,
    see :func:`domain_rows`), and one for the other prbench tasks outside a group.

    Args:
        results: lm-eval's results dict.
        resamples: bootstrap resamples.
        confidence: interval level.
        seed: bootstrap seed.
        length_baseline: False leaves the length baseline out.
        length_of: the length baseline of a task (the harness knows it; see :data:`LengthOf`).
        profile_of: the profile builder of a task config (see :func:`profile_label`).
    """
    length = length_of if length_baseline else None
    rows = task_rows(results, length_of=length)
    split = domain_rows(results, length_baseline=length_baseline, length_of=length)
    sections: list[Section] = []
    used: set[str] = set()
    for group, subtasks in (results.get("group_subtasks") or {}).items():
        members = [rows[t] for t in subtasks if t in rows]
        if not members:
            continue
        used.update(r.task for r in members)
        sections.append(_section(results, group, members, resamples, confidence, seed, profile_of))
    for task, parts in split.items():
        if task not in used:
            used.add(task)
            sections.append(_section(results, task, parts, resamples, confidence, seed, profile_of))
    rest = [r for t, r in rows.items() if t not in used]
    if rest:
        sections.append(_section(results, "tasks", rest, resamples, confidence, seed, profile_of))
    return sections


def row_keys(rows: list[TaskRow]) -> list[str]:
    """The summary's label of each row: its domain, or its task where the domain is not unique.

    Tasks outside a group may share a domain (one domain under both profile conditions, or the
    sample's and the benchmark's task of one domain); each keeps its own line, none is merged.
    """
    domains = [r.domain for r in rows]
    return [
        r.domain if r.domain != "*" and domains.count(r.domain) == 1 else r.task for r in rows
    ]


def _section(
    results: Mapping[str, Any], title: str, rows: list[TaskRow], resamples: int,
    confidence: float, seed: int, profile_of: ProfileOf | None = None,
) -> Section:
    kept = [r for r in rows if r.n > 0]
    outcomes = {
        key: outcomes_from_counts(r.correct, r.n)
        for key, r in zip(row_keys(kept), kept, strict=True)
    }
    summary = domain_summary(outcomes, resamples=resamples, confidence=confidence, seed=seed)
    return Section(title=title, rows=kept, summary=summary,
                   profile=profile_label(results, rows, profile_of))


__all__ = [
    "LengthOf",
    "ProfileOf",
    "Section",
    "TaskRow",
    "domain_rows",
    "judge_metrics",
    "order_totals",
    "profile_label",
    "recorded_profile",
    "row_keys",
    "summarize",
    "task_rows",
]
