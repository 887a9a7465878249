"""prbench's compact summary of an lm-eval run: per-domain accuracy with bootstrap intervals.

lm-eval's table gives each task's mean and a normal-approximation standard error. The summary
adds what a reward-model comparison needs: a seeded percentile-bootstrap 95% interval per domain,
the tie rate (ties count as wrong), pairs without a verdict, the micro (all pairs) and macro (mean
of domains) overall accuracy, and the length baseline ("the longer answer wins") on the same pairs.
For a pairwise judge that swaps the answers it also shows the both-order metrics per domain
(:mod:`prbench.judges.order_metrics`).

Accuracy over 0/1 outcomes is fully described by the number of correct pairs, so the intervals
are computed from lm-eval's per-task accuracy and pair count: no per-sample log is needed, and a
multi-process run summarises like a single-process one.
"""

from __future__ import annotations

import dataclasses
import math
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
        order_metrics: a pairwise judge's both-order metrics (``acc_split_half``,
            ``acc_chosen_first``, ``acc_chosen_second``, ``position_bias``, ``n_order_flips``;
            :mod:`prbench.judges.order_metrics`); ``None`` for scorers without orders.
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
            "order_metrics": _order_totals(self.rows),
        }


def _metric(values: Mapping[str, Any], name: str) -> float:
    value = values.get(f"{name},none")
    return float(value) if isinstance(value, int | float) else 0.0


def _order_metrics(values: Mapping[str, Any]) -> dict[str, float | None] | None:
    """A task's both-order metrics from lm-eval's values (``None``: the scorer has no orders)."""
    from prbench.judges.order_metrics import ORDER_METRICS

    if "acc_split_half,none" not in values:
        return None
    out: dict[str, float | None] = {}
    for name in ORDER_METRICS:
        value = values.get(f"{name},none")
        ok = isinstance(value, int | float) and not math.isnan(value)
        out[name] = float(value) if ok else None
    return out


def _order_totals(rows: list[TaskRow]) -> dict[str, float | None] | None:
    """``acc_split_half`` over all pairs and the total ``n_order_flips`` of judged rows."""
    judged = [r for r in rows if r.order_metrics is not None and r.n > 0]
    if not judged or len(judged) != len(rows):
        return None
    half = [r.order_metrics.get("acc_split_half") for r in judged]  # type: ignore[union-attr]
    flips = [r.order_metrics.get("n_order_flips") for r in judged]  # type: ignore[union-attr]
    n = sum(r.n for r in judged)
    return {
        "acc_split_half": (
            sum(h * r.n for h, r in zip(half, judged, strict=True)) / n  # type: ignore[operator]
            if None not in half else None
        ),
        "n_order_flips": sum(flips) if None not in flips else None,  # type: ignore[arg-type]
    }


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
            order_metrics=_order_metrics(values),
        )
    return rows


def domain_rows(
    results: Mapping[str, Any], *, length_baseline: bool = True
) -> dict[str, list[TaskRow]]:
    """One row per domain for each task over every domain that reports ``domains``.

    A task over every domain (``prbench_domain: "*"``, e.g. ``personalized_rewardbench_custom``)
    is one lm-eval task, so its counts alone would give one row and a macro equal to the micro.
    Its ``domains`` metric (:func:`prbench.harness.tasks.domain_counts`) holds the pair counts of
    each domain; the rows here are built from them, like the rows of a published group's domain
    tasks. Tasks without the metric are left out.
    """
    out: dict[str, list[TaskRow]] = {}
    for task, row in task_rows(results, length_baseline=length_baseline).items():
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
                correct=int(c.get("correct", 0)), ties=int(c.get("ties", 0)),
                invalid=int(c.get("invalid", 0)),
                length_acc=float(length) / n if length_baseline and n and length is not None
                else None,
            ))
        if sum(r.n for r in parts) == row.n:  # counts that do not add up are not used
            out[task] = parts
    return out


def table_view(result_dict: dict[str, Any]) -> dict[str, Any]:
    """lm-eval's results for its printed table, without what only prbench's summary reads.

    ``acc_macro`` is the group's mean over domains; every domain task must compute it (lm-eval
    aggregates a group metric from its tasks' values), where it only repeats ``acc``: the table
    shows it once, on the group's row. ``domains`` (per-domain counts of a task over every
    domain) is a table of its own, shown by the summary. The results file keeps every value.
    """
    configs = result_dict.get("configs") or {}
    rows = {}
    for task, values in (result_dict.get("results") or {}).items():
        kwargs = (configs.get(task) or {}).get("dataset_kwargs") or {}
        if isinstance(values, dict) and "prbench_condition" in kwargs:
            values = {
                k: v for k, v in values.items() if not k.startswith(("acc_macro", "domains"))
            }
        rows[task] = values
    return {**result_dict, "results": rows}


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
    """The summary's sections, one per table.

    One section per benchmark group in the run, one per task over every domain (a row per domain,
    see :func:`domain_rows`), and one for the other prbench tasks outside a group.
    """
    rows = task_rows(results, length_baseline=length_baseline)
    split = domain_rows(results, length_baseline=length_baseline)
    sections: list[Section] = []
    used: set[str] = set()
    for group, subtasks in (results.get("group_subtasks") or {}).items():
        members = [rows[t] for t in subtasks if t in rows]
        if not members:
            continue
        used.update(r.task for r in members)
        sections.append(_section(results, group, members, resamples, confidence, seed))
    for task, parts in split.items():
        if task not in used:
            used.add(task)
            sections.append(_section(results, task, parts, resamples, confidence, seed))
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


def _order_lines(sec: Section, width: int) -> list[str]:
    """The both-order block of a section whose scorer is a pairwise judge (else nothing)."""
    totals = _order_totals(sec.rows)
    if totals is None:
        return []
    lines = [
        "  both orders (pairwise judge; see below):",
        f"  {'domain'.ljust(width)}  {'split½':>6}  {'chosen 1st':>10}  {'chosen 2nd':>10}  "
        f"{'pos.bias':>8}  {'flips':>5}",
    ]
    for key, row in zip(row_keys(sec.rows), sec.rows, strict=True):
        m = row.order_metrics or {}
        flips = m.get("n_order_flips")
        lines.append(
            f"  {key.ljust(width)}  {_fmt(m.get('acc_split_half'))}  "
            f"{_fmt(m.get('acc_chosen_first')):>10}  {_fmt(m.get('acc_chosen_second')):>10}  "
            f"{_fmt(m.get('position_bias')):>8}  {'-' if flips is None else int(flips):>5}"
        )
    flips = totals["n_order_flips"]
    lines.append(
        f"  {'micro (pairs)'.ljust(width)}  {_fmt(totals['acc_split_half'])}  {'':>10}  "
        f"{'':>10}  {'':>8}  {'-' if flips is None else int(flips):>5}"
    )
    return lines


def format_sections(
    sections: list[Section],
    *,
    scorer: Mapping[str, Any] | None = None,
    limit: float | None = None,
) -> str:
    """The summary as text (printed after lm-eval's tables).

    Args:
        sections: from :func:`summarize`.
        scorer: the run's scorer record (id, options, diagnostic), if the model was prbench's;
            the lines a scorer returns under ``diagnostics`` in its ``stats()`` are printed
            under the header.
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
        stats = scorer.get("stats")
        if isinstance(stats, Mapping):
            lines.extend(f"  {line}" for line in stats.get("diagnostics") or ())
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
        lines.extend(_order_lines(sec, width))
    if sections:
        first = sections[0].summary.micro
        lines.append("")
        lines.append(
            f"acc is strict (a tie is wrong); CI: percentile bootstrap stratified by domain "
            f"(pairs are redrawn within each domain; micro and macro combine the same draws), "
            f"{first.resamples} resamples, seed {first.seed}; length = the longer answer wins, "
            "on the same pairs"
        )
        if any(_order_totals(sec.rows) is not None for sec in sections):
            lines.append(
                "both orders: split½ = acc where a pair whose two orders disagree earns 0.5 (acc "
                "counts it as a wrong tie); chosen 1st / 2nd = accuracy of the single verdicts "
                "with the chosen answer shown first / second (an unreadable one is wrong); "
                "pos.bias = share of readable verdicts won by the answer shown first (0.5 = "
                "none); flips = pairs whose two orders preferred different answers"
            )
        if zero_width:
            lines.append(
                "* zero-width interval: every pair behind it had the same outcome (all right or "
                "all wrong, e.g. all ties), so every resample gives the same accuracy; it does "
                "not mean the accuracy is known exactly"
            )
    return "\n".join(lines)


__all__ = [
    "Section",
    "TaskRow",
    "domain_rows",
    "format_sections",
    "row_keys",
    "summarize",
    "table_view",
    "task_rows",
]
