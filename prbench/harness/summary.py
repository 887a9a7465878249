"""prbench's compact summary of an lm-eval run, printed after lm-eval's tables.

The statistics (per-domain accuracy with seeded percentile-bootstrap 95% intervals, micro and
macro accuracy, ties, pairs without a verdict) are :mod:`prbench.analysis.summary`'s; this module
adds what only the running harness knows (the length baseline, "the longer answer wins", on the
rows it loaded, and the profile builder each task asks for) and prints the result. For a pairwise
judge it also shows the judge metrics per domain and over all pairs, each row from the summed
per-pair counts (:mod:`prbench.judges.order_metrics`), and says which number is the headline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prbench.analysis.summary import (
    Section,
    TaskRow,
    domain_rows,
    order_totals,
    row_keys,
)
from prbench.analysis.summary import summarize as _summarize
from prbench.analysis.summary import task_rows as _task_rows
from prbench.metrics import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    pair_outcome,
)


def _length_acc(data: str, domain: str, condition: str, n: int) -> float | None:
    from prbench.harness.task_rows import LENGTHS

    lengths = LENGTHS.get((data, domain, condition))
    if not lengths or n <= 0 or n > len(lengths):
        return None
    return sum(pair_outcome(c, r).correct for c, r in lengths[:n]) / n


def task_rows(results: Mapping[str, Any], *, length_baseline: bool = True) -> dict[str, TaskRow]:
    """:func:`prbench.analysis.summary.task_rows` with the length baseline of this process's rows.

    ``length_baseline=False`` leaves the baseline out (it assumes the first ``n`` pairs were
    evaluated, not ``--samples``).
    """
    return _task_rows(results, length_of=_length_acc if length_baseline else None)


def summarize(
    results: Mapping[str, Any],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
    length_baseline: bool = True,
) -> list[Section]:
    """The summary's sections (:func:`prbench.analysis.summary.summarize`) for a run just made.

    The length baseline is that of the rows this process loaded, and each section's profile
    label is the builder its tasks ask for (:func:`prbench.harness.task_options.task_profile`).
    """
    from prbench.harness.task_options import task_profile

    return _summarize(
        results, resamples=resamples, confidence=confidence, seed=seed,
        length_baseline=length_baseline, length_of=_length_acc, profile_of=task_profile,
    )


def table_view(result_dict: dict[str, Any]) -> dict[str, Any]:
    """lm-eval's results for its printed table, without what only prbench's summary reads.

    ``acc_macro`` is the group's mean over domains; every domain task must compute it (lm-eval
    aggregates a group metric from its tasks' values), where it only repeats ``acc``: the table
    shows it once, on the group's row. ``domains`` (per-domain counts of a task over every
    domain) and ``judge_counts`` (a pairwise judge's per-domain counts) are tables of their own,
    shown by the summary. The results file keeps every value.
    """
    configs = result_dict.get("configs") or {}
    rows = {}
    for task, values in (result_dict.get("results") or {}).items():
        kwargs = (configs.get(task) or {}).get("dataset_kwargs") or {}
        if isinstance(values, dict) and "prbench_condition" in kwargs:
            values = {
                k: v for k, v in values.items()
                if not k.startswith(("acc_macro", "domains", "judge_counts"))
            }
        rows[task] = values
    return {**result_dict, "results": rows}


def _fmt(x: float | None) -> str:
    return "   -  " if x is None else f"{x:6.3f}"


def _interval(est: Any) -> str:
    """``[low, high]``, marked ``*`` when it has zero width (explained under the table)."""
    mark = "*" if est.high - est.low == 0 else " "
    return f"[{est.low:.3f}, {est.high:.3f}]{mark}"


def _count(x: float | None) -> str:
    return "-" if x is None else str(int(x))


def _order_lines(sec: Section, width: int) -> list[str]:
    """The judge block of a section whose scorer is a pairwise judge (else nothing).

    One line per domain and one over all the section's pairs, each computed from the summed
    per-pair counts of its pairs (:mod:`prbench.judges.order_metrics`), then the released
    script's outputs when the judge ran with ``protocol=released``.
    """
    totals = order_totals(sec.rows)
    if totals is None:
        return []
    lines = [
        "  pairwise judge (headline: strict acc and single-order acc side by side; see below):",
        f"  {'domain'.ljust(width)}  {'strict':>6}  {'single':>6}  {'chosen A':>8}  "
        f"{'chosen B':>8}  {'pos.bias':>8}  {'A won':>6}  {'unread.':>7}  {'flips':>5}",
    ]
    rows = [(key, row.order_metrics or {}) for key, row in
            zip(row_keys(sec.rows), sec.rows, strict=True)]
    for key, m in [*rows, ("all pairs", totals)]:
        lines.append(
            f"  {key.ljust(width)}  {_fmt(m.get('acc'))}  {_fmt(m.get('acc_single_order'))}  "
            f"{_fmt(m.get('acc_chosen_first')):>8}  {_fmt(m.get('acc_chosen_second')):>8}  "
            f"{_fmt(m.get('position_bias')):>8}  {_fmt(m.get('first_shown_win_rate'))}  "
            f"{_count(m.get('n_unreadable')):>7}  {_count(m.get('n_order_flips')):>5}"
        )
    if "released_acc" in totals:
        lines.append(
            "  released protocol (as the released pairwise.py; an unreadable reply counts as "
            f"'A'): accuracy {_fmt(totals['released_acc']).strip()}, chosen in A "
            f"{_fmt(totals['released_acc_chosen_a']).strip()}, chosen in B "
            f"{_fmt(totals['released_acc_chosen_b']).strip()}, position bias "
            f"{_fmt(totals['released_position_bias']).strip()}, predicted A "
            f"{_count(totals['released_n_pred_a'])} / B {_count(totals['released_n_pred_b'])}, "
            f"failed parses {_count(totals['n_unreadable'])}"
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
        from prbench.analysis.sensitivity import summary_lines

        sensitivity = summary_lines(sections)
        if sensitivity:
            lines += ["", *sensitivity]
        first = sections[0].summary.micro
        lines.append("")
        lines.append(
            f"acc is strict (a tie is wrong); CI: percentile bootstrap stratified by domain "
            f"(pairs are redrawn within each domain; micro and macro combine the same draws), "
            f"{first.resamples} resamples, seed {first.seed}; length = the longer answer wins, "
            "on the same pairs"
        )
        judged = any(order_totals(sec.rows) is not None for sec in sections)
        lines.append(
            "headline: strict acc"
            + (" and, beside it, single-order acc (pairwise judge)" if judged else
               " (pointwise scorer; a pairwise judge shows its single-order acc beside it)")
        )
        if judged:
            lines.append(
                "pairwise judge: strict = a pair counts only if every order judged picked the "
                "chosen answer (an unreadable order is never a win); single = mean over all "
                "single-order verdicts, unreadable or tie = 0 (what RM-R1, SynthesizeMe and the "
                "released pairwise.py report); chosen A / B = accuracy of the orders with the "
                "chosen answer shown first / second (unreadable = 0); pos.bias = |chosen A - "
                "chosen B|; A won = share of readable verdicts won by the answer shown first; "
                "unread. = orders without a verdict; flips = pairs whose two orders preferred "
                "different answers"
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
