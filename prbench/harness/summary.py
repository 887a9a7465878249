"""prbench's compact summary of an lm-eval run: per-domain accuracy with bootstrap intervals.

lm-eval's table gives each task's mean and a normal-approximation standard error. The summary
adds what a reward-model comparison needs: a seeded percentile-bootstrap 95% interval per domain,
the tie rate (ties count as wrong), pairs without a verdict, the micro (all pairs) and macro (mean
of domains) overall accuracy, and the length baseline ("the longer answer wins") on the same pairs.

Accuracy over 0/1 outcomes is fully described by the number of correct pairs, so the intervals
are computed from lm-eval's per-task accuracy and pair count: no per-sample log is needed, and a
multi-process run summarises like a single-process one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from prbench.analysis.metrics import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    DomainSummary,
    domain_summary,
    outcomes_from_counts,
    pair_outcome,
)


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
        }


def _metric(values: Mapping[str, Any], name: str) -> float:
    value = values.get(f"{name},none")
    return float(value) if isinstance(value, int | float) else 0.0


def _length_acc(data: str, domain: str, condition: str, n: int) -> float | None:
    from prbench.harness.tasks import LENGTHS

    lengths = LENGTHS.get((data, domain, condition))
    if not lengths or n <= 0 or n > len(lengths):
        return None
    return sum(pair_outcome(c, r).correct for c, r in lengths[:n]) / n


def task_rows(results: Mapping[str, Any], *, length_baseline: bool = True) -> dict[str, TaskRow]:
    """The prbench tasks of an lm-eval results dict (recognised by their ``dataset_kwargs``).

    Tasks without an ``acc`` (``--predict_only``) are left out. ``length_baseline=False`` leaves
    the baseline out too (it assumes the first ``n`` pairs were evaluated, not ``--samples``).
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
            task=task, domain=domain, condition=condition, data=data, n=n,
            correct=round(_metric(values, "acc") * n), ties=round(_metric(values, "tie") * n),
            invalid=round(_metric(values, "invalid") * n),
            length_acc=_length_acc(data, domain, condition, n) if length_baseline else None,
        )
    return rows


def _profile_label(results: Mapping[str, Any], rows: list[TaskRow]) -> str:
    conditions = {r.condition for r in rows}
    if conditions == {"noprofile"}:
        return "question only (no profile)"
    from prbench.harness.tasks import task_profile

    labels = set()
    for r in rows:
        builder, options = task_profile((results.get("configs") or {}).get(r.task) or {})
        if r.condition == "noprofile" or builder == "none":
            labels.add("none")
        else:
            shown = ",".join(f"{k}={v}" for k, v in sorted(options.items()))
            labels.add(f"{builder}({shown})" if shown else builder)
    return ", ".join(sorted(labels)) + _not_built(results)


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
) -> list[Section]:
    """One section per benchmark group in the run, plus one for prbench tasks outside a group."""
    rows = task_rows(results, length_baseline=length_baseline)
    sections: list[Section] = []
    used: set[str] = set()
    for group, subtasks in (results.get("group_subtasks") or {}).items():
        members = [rows[t] for t in subtasks if t in rows]
        if not members:
            continue
        used.update(r.task for r in members)
        sections.append(_section(results, group, members, resamples, confidence, seed))
    rest = [r for t, r in rows.items() if t not in used]
    if rest:
        sections.append(_section(results, "tasks", rest, resamples, confidence, seed))
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
    confidence: float, seed: int,
) -> Section:
    kept = [r for r in rows if r.n > 0]
    outcomes = {
        key: outcomes_from_counts(r.correct, r.n)
        for key, r in zip(row_keys(kept), kept, strict=True)
    }
    summary = domain_summary(outcomes, resamples=resamples, confidence=confidence, seed=seed)
    return Section(title=title, rows=kept, summary=summary,
                   profile=_profile_label(results, rows))


def _fmt(x: float | None) -> str:
    return "   -  " if x is None else f"{x:6.3f}"


def _interval(est: Any) -> str:
    """``[low, high]``, marked ``*`` when it has zero width (explained under the table)."""
    mark = "*" if est.high - est.low == 0 else " "
    return f"[{est.low:.3f}, {est.high:.3f}]{mark}"


def format_sections(
    sections: list[Section],
    *,
    scorer: Mapping[str, Any] | None = None,
    limit: float | None = None,
) -> str:
    """The summary as text (printed after lm-eval's tables).

    Args:
        sections: from :func:`summarize`.
        scorer: the run's scorer record (id, options, diagnostic), if the model was prbench's.
        limit: lm-eval's ``--limit`` when it was given: the summary then says that only part of
            each task was evaluated.
    """
    lines = []
    if scorer:
        shown = scorer.get("changed_options", scorer.get("options")) or {}
        opts = ", ".join(f"{k}={v}" for k, v in shown.items())
        lines.append(f"prbench summary: scorer {scorer.get('id')}" + (f" ({opts})" if opts else ""))
        if scorer.get("diagnostic"):
            lines.append(
                "  DIAGNOSTIC: this scorer reads the hidden rubric/narrative; it is an upper "
                "bound, not a reward model"
            )
    else:
        lines.append("prbench summary")
    if limit:
        shown = f"{limit:g}" if limit >= 1 else f"{limit:.0%} of the pairs"
        lines.append(
            f"  --limit {shown}: only part of each task was evaluated; these are not "
            "benchmark results"
        )
    zero_width = False
    for sec in sections:
        pct = round(sec.summary.micro.confidence * 100)
        lines.append("")
        data = sorted({r.data for r in sec.rows})
        sample = " [bundled SAMPLE data, not the benchmark]" if "sample" in data else ""
        lines.append(f"{sec.title}: profile {sec.profile}; data {', '.join(data)}{sample}")
        width = max([len(k) for k in sec.summary.domains] + [16])
        lines.append(
            f"  {'domain'.ljust(width)}  {'n':>5}  {'acc':>6}  {f'{pct}% CI':<14}  {'ties':>6}  "
            f"{'length':>6}"
        )
        by_key = dict(zip(row_keys(sec.rows), sec.rows, strict=True))
        for key, est in sec.summary.domains.items():
            row = by_key[key]
            zero_width |= est.high == est.low
            lines.append(
                f"  {key.ljust(width)}  {est.n:>5}  {est.value:6.3f}  "
                f"{_interval(est)} {row.ties / row.n:6.3f}  {_fmt(row.length_acc)}"
            )
        total = sum(r.n for r in sec.rows)
        ties = sum(r.ties for r in sec.rows) / total
        known = [r for r in sec.rows if r.length_acc is not None]
        length_micro = (
            sum(r.length_acc * r.n for r in known) / total if len(known) == len(sec.rows) else None  # type: ignore[operator]
        )
        length_macro = (
            sum(r.length_acc for r in known) / len(known) if len(known) == len(sec.rows) else None  # type: ignore[misc]
        )
        for label, est, base in (
            ("micro (pairs)", sec.summary.micro, length_micro),
            ("macro (domains)", sec.summary.macro, length_macro),
        ):
            zero_width |= est.high == est.low
            lines.append(
                f"  {label.ljust(width)}  {est.n:>5}  {est.value:6.3f}  "
                f"{_interval(est)} {ties:6.3f}  {_fmt(base)}"
            )
        invalid = sum(r.invalid for r in sec.rows)
        if invalid:
            lines.append(f"  {invalid} pair(s) without a verdict (non-finite score), counted wrong")
    if sections:
        first = sections[0].summary.micro
        lines.append("")
        lines.append(
            f"acc is strict (a tie is wrong); CI: percentile bootstrap stratified by domain "
            f"(pairs are redrawn within each domain; micro and macro combine the same draws), "
            f"{first.resamples} resamples, seed {first.seed}; length = the longer answer wins, "
            "on the same pairs"
        )
        if zero_width:
            lines.append(
                "* zero-width interval: every pair behind it had the same outcome (all right or "
                "all wrong, e.g. all ties), so every resample gives the same accuracy; it does "
                "not mean the accuracy is known exactly"
            )
    return "\n".join(lines)


__all__ = ["Section", "TaskRow", "format_sections", "row_keys", "summarize", "task_rows"]
