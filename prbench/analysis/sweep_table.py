"""The paper-style table of a sweep: rows = scorers, columns = conditions x domains, with CIs.

Reads a sweep's output folder (``sweep.json`` and the cell records of
:mod:`prbench.harness.sweep`). Each finished cell contributes, per domain and over all its pairs
(micro), the strict accuracy with a percentile-bootstrap interval stratified by domain
(:func:`prbench.metrics.domain_summary`, from the pair counts of lm-eval's results). The
last row is the length baseline ("the longer answer wins") on the pairs of each condition, from
the logged samples. A cell that failed or has not run shows ``failed`` / ``-``. Under each
pairwise judge's row, a second row gives its single-order accuracy (``acc_single_order``: every
single-order verdict, unreadable = 0, the number RM-R1, SynthesizeMe and the released pairwise
script report) per domain and over all pairs, from the judge's summed per-pair counts.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prbench.metrics import DEFAULT_RESAMPLES, DEFAULT_SEED, Estimate
from prbench.outputs import write_text

LENGTH_ROW = "length baseline (longer answer wins)"
SINGLE_ORDER = "single-order acc"  # the label suffix of a judge's second row
OVERALL = "all (micro)"
SWEEP_FILE = "sweep.json"  # the sweep's own record in its output folder


def leaf_tasks(results: Mapping[str, Any], tasks: Sequence[str]) -> list[str]:
    """The tasks (not groups) of ``tasks`` in a results dict, groups expanded."""
    groups = results.get("group_subtasks") or {}
    out: list[str] = []
    todo = list(tasks)
    while todo:
        name = todo.pop(0)
        if name in groups:
            todo = [*groups[name], *todo]
        elif name not in out:
            out.append(name)
    return out


@dataclasses.dataclass
class SweepTable:
    """The table's content.

    Attributes:
        conditions: column groups, in sweep order.
        domains: condition -> its columns (domains, then ``all (micro)``).
        rows: row label -> condition -> column -> estimate, or a status string for a cell
            without results (``failed``, ``not run``).
        diagnostic: row labels whose scorer reads the hidden rubric.
        sample: whether any cell ran on the bundled sample.
        limited: whether any cell ran with ``--limit``.
        single_order: pairwise judges only: row label -> condition -> column -> single-order
            accuracy (no interval).
    """

    conditions: list[str]
    domains: dict[str, list[str]]
    rows: dict[str, dict[str, dict[str, Estimate] | str]]
    diagnostic: set[str]
    sample: bool
    limited: bool
    single_order: dict[str, dict[str, dict[str, float]]] = dataclasses.field(
        default_factory=dict)
    stand_ins: dict[str, str] = dataclasses.field(default_factory=dict)


def _single_order(parts: list[Any]) -> dict[str, float] | None:
    """A judge cell's single-order accuracy per domain and over all pairs (``None``: no judge)."""
    from prbench.analysis.summary import judge_metrics
    from prbench.judges.order_metrics import add_counts

    if not parts or any(p.judge_counts is None for p in parts):
        return None
    by_domain: dict[str, list[Any]] = {}
    for part in parts:
        by_domain.setdefault(part.domain, []).append(part.judge_counts)
    out: dict[str, float] = {}
    for key, counts in [*by_domain.items(), (OVERALL, [p.judge_counts for p in parts])]:
        value = (judge_metrics(add_counts(counts)) or {}).get("acc_single_order")
        if value is not None:
            out[key] = float(value)
    return out


def _cell_estimates(results_file: Path, tasks: list[str], resamples: int, seed: int
                    ) -> tuple[dict[str, Estimate], dict[str, list[float]], bool, bool,
                               dict[str, float] | None]:
    """Per-domain + micro estimates of one cell, the length outcomes per domain, flags, and a
    judge's single-order accuracy per domain and overall (``None`` for other scorers).
    """  # noqa: D205
    from prbench.analysis.runs import read_json, read_sample_lines, samples_file
    from prbench.analysis.summary import domain_rows, task_rows
    from prbench.metrics import domain_summary, outcomes_from_counts, pair_outcome

    results = read_json(results_file)
    rows = task_rows(results)
    split = domain_rows(results, length_baseline=False)
    counts: dict[str, list[float]] = {}
    length: dict[str, list[float]] = {}
    parts: list[Any] = []
    sample = False
    for task in leaf_tasks(results, tasks):
        row = rows[task]
        sample |= row.data == "sample"
        for part in split.get(task, [row]):
            parts.append(part)
            counts.setdefault(part.domain, []).extend(outcomes_from_counts(part.correct, part.n))
        file = samples_file(results_file, task)
        for line in read_sample_lines(file) if file else []:
            doc = line["doc"]
            domain = str(doc.get("domain") or row.domain) if row.domain == "*" else row.domain
            length.setdefault(domain, []).append(pair_outcome(
                len(str(doc["chosen"]).split()), len(str(doc["rejected"]).split())).correct)
    summary = domain_summary(counts, resamples=resamples, seed=seed)
    estimates = {**summary.domains, OVERALL: summary.micro}
    limited = bool((results.get("config") or {}).get("limit"))
    return estimates, length, sample, limited, _single_order(parts)


def build_table(folder: str | Path, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
                ) -> SweepTable:
    """The table of the sweep in ``folder``.

    Raises:
        prbench.analysis.runs.RunFileError: no ``sweep.json`` or an unreadable results file.
    """
    from prbench.analysis.runs import RunFileError, read_json
    from prbench.metrics import domain_summary, outcomes_from_counts

    out = Path(folder)
    if not (out / SWEEP_FILE).is_file():
        raise RunFileError(f"{out}: no {SWEEP_FILE} (not a prbench sweep folder)")
    sweep = read_json(out / SWEEP_FILE)
    conditions = [c["name"] for c in sweep["conditions"]]
    tasks = {c["name"]: list(c["tasks"]) for c in sweep["conditions"]}
    rows: dict[str, dict[str, dict[str, Estimate] | str]] = {s: {} for s in sweep["scorers"]}
    length: dict[str, dict[str, list[float]]] = {}
    domains: dict[str, list[str]] = {c: [] for c in conditions}
    diagnostic: set[str] = set()
    single: dict[str, dict[str, dict[str, float]]] = {}
    sample = limited = False
    for cell in sweep["cells"]:
        scorer, cond = cell["scorer"], cell["condition"]
        try:
            record = json.loads((out / cell["record"]).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            record = {}
        if record.get("status") != "done" or not record.get("results"):
            rows[scorer][cond] = "failed" if record.get("status") == "failed" else "not run"
            continue
        file = Path(record["results"])
        estimates, lengths, is_sample, is_limited, single_order = _cell_estimates(
            file, tasks[cond], resamples, seed)
        if single_order is not None:
            single.setdefault(scorer, {})[cond] = single_order
        sample |= is_sample
        limited |= is_limited
        rows[scorer][cond] = estimates
        for d in estimates:
            if d != OVERALL and d not in domains[cond]:
                domains[cond].append(d)
        if lengths and cond not in length:
            length[cond] = lengths  # the same pairs for every scorer of the condition
        info = ((read_json(file).get("config") or {}).get("prbench") or {}).get("scorer") or {}
        if info.get("diagnostic"):
            diagnostic.add(scorer)
    for cond in conditions:
        domains[cond] = [*sorted(domains[cond]), OVERALL]
    rows[LENGTH_ROW] = {}
    for cond, outcomes in length.items():
        # as counts, like the scorers' rows: a length-only scorer gets exactly this row
        counted = {d: outcomes_from_counts(int(sum(v)), len(v)) for d, v in outcomes.items()}
        summary = domain_summary(counted, resamples=resamples, seed=seed)
        rows[LENGTH_ROW][cond] = {**summary.domains, OVERALL: summary.micro}
    return SweepTable(conditions, domains, rows, diagnostic, sample, limited, single,
                      dict(sweep.get("stand_ins") or {}))


def _columns(table: SweepTable) -> list[tuple[str, str]]:
    return [(c, d) for c in table.conditions for d in table.domains[c]]


def _label(table: SweepTable, row: str) -> str:
    label = f"{row} (DIAGNOSTIC)" if row in table.diagnostic else row
    return f"{label} (STAND-IN)" if row in table.stand_ins else label


def _condition_label(table: SweepTable, condition: str) -> str:
    return f"{condition} (STAND-IN)" if condition in table.stand_ins else condition


def _cell_text(value: dict[str, Estimate] | str | None, domain: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    est = value.get(domain)
    return "-" if est is None else f"{est.value:.3f} [{est.low:.3f}, {est.high:.3f}]"


def notes(table: SweepTable) -> list[str]:
    """The lines printed under the table."""
    lines = ["Strict pairwise accuracy (a tie is wrong) with 95% percentile-bootstrap intervals "
             "(stratified by domain); 'all (micro)' pools the pairs of the condition; the length "
             "row is 'the longer answer wins' on the same pairs."]
    if table.single_order:
        lines.append(f"'{SINGLE_ORDER}' rows (pairwise judges): the mean over all single-order "
                     "verdicts, an unreadable one counting 0 -- the number RM-R1, SynthesizeMe "
                     "and the released pairwise script report; strict acc (the judge's own row) "
                     "counts a pair only if every order picked the chosen answer. No interval.")
    if table.sample:
        lines.append("Data: the bundled SAMPLE (hand-written), not the benchmark.")
    if table.limited:
        lines.append("--limit was given: only part of each task was evaluated; not benchmark "
                     "results.")
    if table.diagnostic:
        lines.append("DIAGNOSTIC rows read the hidden rubric: upper bounds, not reward models.")
    lines += [f"STAND-IN {name}: {text}" for name, text in table.stand_ins.items()]
    return lines


def header(table: SweepTable) -> list[str]:
    """Column titles: ``scorer`` then ``<condition>: <domain>``."""
    return ["scorer", *(f"{_condition_label(table, c)}: {d}" for c, d in _columns(table))]


def _single_rows(table: SweepTable, row: str) -> list[tuple[str, dict[str, dict[str, float]]]]:
    """A judge's single-order row under its own (none for other rows)."""
    cells = table.single_order.get(row)
    return [(f"{_label(table, row)}: {SINGLE_ORDER}", cells)] if cells else []


def body(table: SweepTable) -> list[list[str]]:
    """One list of cell texts per row (a judge's single-order row under its own)."""
    out = []
    for row, cells in table.rows.items():
        out.append([_label(table, row),
                    *(_cell_text(cells.get(c), d) for c, d in _columns(table))])
        for label, single in _single_rows(table, row):
            out.append([label, *(f"{single[c][d]:.3f}" if d in single.get(c, {}) else "-"
                                 for c, d in _columns(table))])
    return out


def to_markdown(table: SweepTable) -> str:
    """The table as markdown, notes below."""
    from prbench.tables import markdown_table

    return "\n".join([markdown_table(header(table), body(table)), "", *notes(table)]) + "\n"


def to_csv(table: SweepTable) -> str:
    """The table as CSV: per column the accuracy, interval ends and pairs, or a status."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    head = ["scorer", "diagnostic"]
    for c, d in _columns(table):
        head += [f"{c}: {d} {x}" for x in ("acc", "ci_low", "ci_high", "n")]
    writer.writerow(head)
    for row, cells in table.rows.items():
        line: list[Any] = [row, row in table.diagnostic]
        for c, d in _columns(table):
            value = cells.get(c)
            est = value.get(d) if isinstance(value, dict) else None
            if est is None:
                status = value if isinstance(value, str) else ""
                line += [status, "", "", ""]
            else:
                line += [f"{est.value:.6f}", f"{est.low:.6f}", f"{est.high:.6f}", est.n]
        writer.writerow(line)
        for label, single in _single_rows(table, row):
            line = [label, row in table.diagnostic]
            for c, d in _columns(table):
                value = single.get(c, {}).get(d)
                line += ["" if value is None else f"{value:.6f}", "", "", ""]
            writer.writerow(line)
    return buf.getvalue()


def write_table(folder: str | Path, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
                ) -> tuple[SweepTable, Path, Path]:
    """Write ``sweep_table.md`` and ``sweep_table.csv`` into the sweep folder."""
    table = build_table(folder, resamples=resamples, seed=seed)
    md = Path(folder) / "sweep_table.md"
    write_text(md, to_markdown(table))
    path_csv = Path(folder) / "sweep_table.csv"
    write_text(path_csv, to_csv(table))
    return table, md, path_csv


def report_blocks(paths: list[Any], resamples: int, seed: int) -> list[tuple[Any, ...]]:
    """Report blocks: the table of every sweep folder among the report's inputs."""
    blocks: list[tuple[Any, ...]] = []
    for raw in paths:
        folder = Path(raw)
        if not (folder / SWEEP_FILE).is_file():
            continue
        table = build_table(folder, resamples=resamples, seed=seed)
        blocks.append(("h2", f"Sweep ({folder.name}): scorers x conditions"))
        blocks.append(("table", header(table), body(table)))
        blocks += [("p", line) for line in notes(table)]
    return blocks


__all__ = ["LENGTH_ROW", "OVERALL", "SweepTable", "body", "build_table", "header", "notes",
           "report_blocks", "to_csv", "to_markdown", "write_table"]
