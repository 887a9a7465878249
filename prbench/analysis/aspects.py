"""Where does a reward model fail? Per-pair accuracy against properties of the record.

From the logged samples of ``prbench eval --log_samples`` (each row carries the full record in
``record_json``), every pair gets its outcome (1 correct, 0 not: strict, a tie is wrong) and
three factors:

- ``rubric_aspects``: the number of aspects in the user's hidden rubric (more aspects = more
  for the chosen answer to cover, and for the scorer to notice);
- ``profile_posts``: the size of the user's profile (posts available to a profile builder);
- ``length_diff``: words of the chosen answer minus words of the rejected one (a length-biased
  scorer does well where it is positive and badly where it is negative).

Each factor is binned once over all the pairs of every run (so every scorer is cut at the same
places, :func:`bin_edges`), and per run, condition and bin the accuracy gets a percentile-bootstrap
interval (:func:`prbench.metrics.bootstrap_ci`). The report shows a table and a plot per
factor.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from prbench.metrics import DEFAULT_RESAMPLES, DEFAULT_SEED, Estimate

#: factor id -> axis title
FACTORS = {
    "rubric_aspects": "rubric aspects (count)",
    "profile_posts": "profile size (posts)",
    "length_diff": "chosen minus rejected answer length (words)",
}
#: factor id -> figure title
TITLES = {
    "rubric_aspects": "Accuracy by the number of rubric aspects",
    "profile_posts": "Accuracy by profile size",
    "length_diff": "Accuracy by answer-length difference (chosen minus rejected)",
}
#: a cell (:attr:`prbench.analysis.summary.TaskRow.cell`) -> a panel title
CELL_TITLES = {
    "profile": "own profile",
    "noprofile": "no profile",
    "profile:swapped": "another user's profile (swapped)",
    "profile:shuffled": "random own posts (shuffled)",
}
DEFAULT_BINS = 4


@dataclasses.dataclass(frozen=True)
class PairPoint:
    """One scored pair with its factors."""

    run: str
    condition: str
    pair: str
    correct: float
    factors: dict[str, float]
    cell: str = ""


@dataclasses.dataclass(frozen=True)
class Bin:
    """Values ``lo <= v < hi`` (``hi`` included for the last bin); ``label`` shows the values."""

    lo: float
    hi: float
    last: bool
    label: str

    def holds(self, value: float) -> bool:
        """Whether ``value`` falls in the bin."""
        return self.lo <= value < self.hi or (self.last and value == self.hi)


def factors_of(doc: Mapping[str, Any]) -> dict[str, float]:
    """The three factors of one logged task row.

    Raises:
        ValueError: a row without the fields (not a prbench sample).
    """
    record = json.loads(doc["record_json"]) if doc.get("record_json") else {}
    aspects = record.get("rubric_aspects")
    posts = record.get("profile")
    return {
        "rubric_aspects": float(len(aspects)) if isinstance(aspects, list) else float("nan"),
        "profile_posts": float(len(posts)) if isinstance(posts, list)
        else float(doc.get("n_posts", float("nan"))),
        "length_diff": float(len(str(doc["chosen"]).split()) - len(str(doc["rejected"]).split())),
    }


def _fmt(x: float) -> str:
    return f"{x:g}"


def bin_edges(values: Sequence[float], max_bins: int = DEFAULT_BINS) -> list[Bin]:
    """Bins over ``values``, cut once for every run.

    One bin per distinct value when there are at most ``max_bins``, else cut at the quantiles
    ``i / max_bins`` (equal values stay together, so there may be fewer bins). A bin's label
    names the smallest and largest value in it.
    """
    data = sorted(v for v in values if v == v)  # drop nan
    if not data:
        return []
    distinct = sorted(set(data))
    if len(distinct) <= max_bins:
        cuts = distinct
    else:
        cuts = sorted({data[(i * len(data)) // max_bins] for i in range(max_bins)})
    bins = []
    for i, lo in enumerate(cuts):
        last = i == len(cuts) - 1
        hi = data[-1] if last else cuts[i + 1]
        inside = [v for v in data if lo <= v < hi or (last and v == hi)]
        a, b = inside[0], inside[-1]
        bins.append(Bin(lo, hi, last, _fmt(a) if a == b else f"{_fmt(a)} to {_fmt(b)}"))
    return bins


def points_of_run(run: Any) -> list[PairPoint]:
    """Every logged pair of a run (:class:`prbench.analysis.runs.Run`) with its factors.

    The condition is the benchmark group the task belongs to in the run (e.g.
    ``personalized_rewardbench_sample_noprofile``), else the task's own condition.
    """
    from prbench.analysis.runs import read_sample_lines, samples_file
    from prbench.analysis.summary import task_rows

    groups = {t: g for g, subtasks in (run.results.get("group_subtasks") or {}).items()
              for t in subtasks}
    rows = task_rows(run.results)
    out = []
    for task in run.samples_found:
        file = samples_file(run.path, task)
        if file is None or task not in rows:
            continue
        condition = groups.get(task, rows[task].condition)
        for line in read_sample_lines(file):
            doc = line["doc"]
            out.append(PairPoint(run.label, condition, str(doc["id"]), float(line["acc"]),
                                 factors_of(doc), rows[task].cell))
    return out


@dataclasses.dataclass(frozen=True)
class FactorTable:
    """Binned accuracy of one factor: ``cells[(run, condition)][bin label]``."""

    factor: str
    bins: list[Bin]
    cells: dict[tuple[str, str], dict[str, Estimate]]


def binned_accuracy(
    points: Sequence[PairPoint],
    factor: str,
    *,
    max_bins: int = DEFAULT_BINS,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> FactorTable:
    """Accuracy with a bootstrap interval per (run, condition) and bin of ``factor``."""
    from prbench.metrics import bootstrap_ci

    bins = bin_edges([p.factors[factor] for p in points], max_bins)
    grouped: dict[tuple[str, str], dict[str, list[float]]] = {}
    for p in points:
        value = p.factors[factor]
        for b in bins:
            if b.holds(value):
                grouped.setdefault((p.run, p.condition), {}).setdefault(b.label, []).append(
                    p.correct)
                break
    cells = {
        key: {label: bootstrap_ci(v, resamples=resamples, seed=seed) for label, v in by.items()}
        for key, by in grouped.items()
    }
    return FactorTable(factor, bins, cells)


def panel_titles(points: Sequence[PairPoint]) -> dict[str, str]:
    """A readable title per condition: its profile source (the condition's name if ambiguous)."""
    cells: dict[str, set[str]] = {}
    for p in points:
        cells.setdefault(p.condition, set()).add(p.cell)
    titles = {c: CELL_TITLES.get(next(iter(v)), c) if len(v) == 1 else c
              for c, v in cells.items()}
    shared = [t for t in titles.values() if list(titles.values()).count(t) > 1]
    return {c: (f"{t} ({c})" if t in shared else t) for c, t in titles.items()}


def _plotter(table: FactorTable, titles: Mapping[str, str], sample: bool,
             diagnostic: Sequence[str]) -> Callable[[Path], Path]:
    def draw(path: Path) -> Path:
        from prbench.analysis.plots import binned_panels

        xs = [b.label for b in table.bins]
        panels: dict[str, list[dict[str, Any]]] = {}
        for (run, cond), by in table.cells.items():
            panels.setdefault(cond, []).append({
                "label": run,
                "points": [None if x not in by else
                           {"value": by[x].value, "low": by[x].low, "high": by[x].high,
                            "n": by[x].n} for x in xs],
            })
        return binned_panels(
            xs, [{"title": titles.get(c, c), "series": s} for c, s in panels.items()], path,
            xlabel=FACTORS[table.factor], title=TITLES[table.factor],
            level=next((round(100 * e.confidence) for by in table.cells.values()
                        for e in by.values()), 95), sample=sample, diagnostic=diagnostic)

    return draw


def report_blocks(runs: Sequence[Any], resamples: int, seed: int) -> list[tuple[Any, ...]]:
    """The report's section on accuracy by record property.

    Per factor a table (rows = run / condition, columns = bins) and a plot (one panel per
    condition, one marker set per run, 95% interval bars, n per bin).
    """
    points = [p for run in runs for p in points_of_run(run)]
    blocks: list[tuple[Any, ...]] = [("h2", "Where scorers fail: accuracy by record property")]
    if not points:
        return [*blocks, ("p", "No per-pair samples (run `prbench eval` with --log_samples).")]
    blocks.append(("p", "Per-pair strict accuracy binned by the number of rubric aspects, the "
                        "profile size and the answer-length difference (chosen minus rejected "
                        "words); bins are cut once over all pairs (one per value when few, else "
                        "at quartiles); 95% percentile-bootstrap intervals; n = pairs in the "
                        "bin. Small bins have wide intervals."))
    sample = any(r.data == "sample" for run in runs for sec in run.sections for r in sec.rows)
    diagnostic = [run.label for run in runs if run.diagnostic]
    titles = panel_titles(points)
    for factor in FACTORS:
        table = binned_accuracy(points, factor, resamples=resamples, seed=seed)
        if not table.bins:
            continue
        head = ["scorer / condition", *(f"{b.label}" for b in table.bins)]
        rows = []
        for (run, cond), by in table.cells.items():
            rows.append([f"{run} / {titles.get(cond, cond)}", *(
                "-" if b.label not in by else
                f"{by[b.label].value:.3f} [{by[b.label].low:.3f}, {by[b.label].high:.3f}] "
                f"(n={by[b.label].n})" for b in table.bins)])
        blocks.append(("p", f"{TITLES[factor]} ({FACTORS[factor]}):"))
        blocks.append(("table", head, rows))
        blocks.append(("figure", _plotter(table, titles, sample, diagnostic),
                       f"accuracy_by_{factor}.png"))
    return blocks


__all__ = ["CELL_TITLES", "FACTORS", "TITLES", "Bin", "FactorTable", "PairPoint", "bin_edges",
           "binned_accuracy", "factors_of", "panel_titles", "points_of_run", "report_blocks"]
