"""Personalization sensitivity: does a scorer use *this* user's profile?

A scorer run on the same pairs with the user's own profile, another user's (``swapped``), random
posts of the user (``shuffled``) and none (:mod:`prbench.profiles.sources`) tells a reward model
that reads this user (accuracy drops under the swap) from one that merely likes more context (no
drop; the gain over no profile stays). For each scorer and domain this module gives the accuracy
under each source on the pairs all its sources share, and own minus each other source with a
paired bootstrap interval and the exact McNemar test on the discordant pairs
(:func:`prbench.analysis.paired.compare`).

Runs are grouped by scorer (its id and options as recorded, so the own and swapped runs of one
scorer may sit in different results files); pairs are matched by their id, read from the samples
files: the runs must be made with ``--log_samples``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from prbench.analysis.paired import PairedComparison, compare
from prbench.metrics import (
    DEFAULT_CONFIDENCE,
    DEFAULT_SEED,
    Estimate,
    bootstrap_ci,
)

#: the sources in the order tables and plots show them
SOURCES = ("own", "shuffled", "swapped", "none")
#: a run's cell (:attr:`prbench.analysis.summary.TaskRow.cell`) -> its profile source
CELL_SOURCES = {
    "profile": "own",
    "profile:shuffled": "shuffled",
    "profile:swapped": "swapped",
    "profile:none": "none",
    "noprofile": "none",
}
#: label of the row over every domain of a scorer
ALL = "all domains"


@dataclasses.dataclass
class ScorerSources:
    """One scorer's per-pair outcomes under each profile source (from one or more runs).

    Attributes:
        name: the scorer's label.
        diagnostic: whether it reads the hidden rubric (an upper bound, not a reward model).
        outcomes: source -> pair id -> 1.0 correct / 0.0 not.
        domains: pair id -> domain.
        data: the data sources of its runs.
        files: the results files read.
    """

    name: str
    diagnostic: bool
    outcomes: dict[str, dict[str, float]]
    domains: dict[str, str]
    data: set[str]
    files: list[str]


@dataclasses.dataclass(frozen=True)
class SensitivityRow:
    """One scorer and domain (or :data:`ALL`).

    Attributes:
        scorer: the scorer's label.
        domain: the domain, or :data:`ALL`.
        n: pairs every source of the scorer has (the accuracies are on these).
        acc: source -> accuracy with its bootstrap interval.
        diffs: source -> own minus that source on the same pairs (paired CI, McNemar).
    """

    scorer: str
    domain: str
    n: int
    acc: dict[str, Estimate]
    diffs: dict[str, PairedComparison]


def _scorer_key(run: Any) -> str:
    scorer = run.scorer or {}
    ident = scorer.get("label") or scorer.get("id") or run.path.parent.name
    return json.dumps([ident, scorer.get("options") or {}], sort_keys=True, default=str)


def gather(runs: Sequence[Any]) -> tuple[list[ScorerSources], list[str]]:
    """Group runs by scorer and pool their per-pair outcomes by profile source.

    Returns:
        The scorers with per-pair outcomes under at least two sources, one being ``own``; and
        notes on the runs left out (no samples files, one source only, the same pair scored
        twice under one source with different outcomes).
    """
    from prbench.analysis.runs import conditions

    groups: dict[str, ScorerSources] = {}
    notes: list[str] = []
    unpaired: dict[str, set[str]] = {}
    for run in runs:
        key = _scorer_key(run)
        name = str((run.scorer or {}).get("label") or (run.scorer or {}).get("id") or run.label)
        group = groups.setdefault(key, ScorerSources(
            name=name, diagnostic=run.diagnostic, outcomes={}, domains={}, data=set(), files=[],
        ))
        group.files.append(str(run.path))
        group.data |= {r.data for sec in run.sections for r in sec.rows}
        group.domains.update(run.domains)
        for cell in conditions(run):
            source = CELL_SOURCES.get(cell)
            if source is None:
                continue
            if cell not in run.outcomes:
                unpaired.setdefault(name, set()).add(source)
                continue
            pool = group.outcomes.setdefault(source, {})
            clash = [p for p, v in run.outcomes[cell].items() if p in pool and pool[p] != v]
            if clash:
                notes.append(
                    f"{name}: pair(s) {', '.join(sorted(clash)[:3])} scored twice under profile "
                    f"source {source!r} with different outcomes ({run.path}); the last run is used"
                )
            pool.update(run.outcomes[cell])
    kept = []
    for group in groups.values():
        missing = unpaired.get(group.name, set())
        if missing:
            notes.append(
                f"{group.name}: no per-pair samples for profile source(s) "
                f"{', '.join(s for s in SOURCES if s in missing)}: personalization sensitivity "
                "pairs the outcomes by pair id and needs runs made with --log_samples"
            )
        if "own" in group.outcomes and len(group.outcomes) > 1:
            kept.append(group)
    return kept, notes


def _on(outcomes: Mapping[str, float], ids: Sequence[str]) -> dict[str, float]:
    return {i: outcomes[i] for i in ids}


def sensitivity_rows(
    scorers: Sequence[ScorerSources],
    *,
    resamples: int,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[SensitivityRow]:
    """Per scorer: one row per domain and one over every domain (see :class:`SensitivityRow`)."""
    rows = []
    for sc in scorers:
        sources = [s for s in SOURCES if s in sc.outcomes]
        common = set.intersection(*(set(sc.outcomes[s]) for s in sources))
        by_domain: dict[str, list[str]] = {}
        for pid in sorted(common):
            by_domain.setdefault(sc.domains.get(pid, "?"), []).append(pid)
        parts = [(d, by_domain[d]) for d in sorted(by_domain)]
        if len(parts) != 1:
            parts.append((ALL, sorted(common)))
        for domain, ids in parts:
            if not ids:
                continue
            acc = {
                s: bootstrap_ci([sc.outcomes[s][i] for i in ids], resamples=resamples,
                                confidence=confidence, seed=seed)
                for s in sources
            }
            diffs = {
                s: compare(_on(sc.outcomes["own"], ids), _on(sc.outcomes[s], ids),
                           resamples=resamples, confidence=confidence, seed=seed)
                for s in sources if s != "own"
            }
            rows.append(SensitivityRow(sc.name, domain, len(ids), acc, diffs))
    return rows


def _sources_of(rows: Sequence[SensitivityRow]) -> list[str]:
    present = {s for r in rows for s in r.acc}
    return [s for s in SOURCES if s in present]


def table(rows: Sequence[SensitivityRow]) -> tuple[list[str], list[list[str]]]:
    """The table's head and rows (strings): accuracies, then own minus each other source."""
    sources = _sources_of(rows)
    others = [s for s in sources if s != "own"]
    head = ["scorer", "domain", "pairs", *(f"acc({s})" for s in sources)]
    for s in others:
        head += [f"own-{s} [CI]", f"only own/{s}", "McNemar p"]
    body = []
    for r in rows:
        cells = [r.scorer, r.domain, str(r.n)]
        cells += [f"{r.acc[s].value:.3f}" if s in r.acc else "-" for s in sources]
        for s in others:
            c = r.diffs.get(s)
            if c is None:
                cells += ["-", "-", "-"]
            else:
                cells += [f"{c.diff.value:+.3f} [{c.diff.low:+.3f}, {c.diff.high:+.3f}]",
                          f"{c.only_a}/{c.only_b}", f"{c.p_mcnemar:.3g}"]
        body.append(cells)
    return head, body


def format_table(rows: Sequence[SensitivityRow]) -> str:
    """The table as aligned text (what ``prbench report`` prints)."""
    from prbench.tables import text_table

    head, body = table(rows)
    return text_table(head, body, strip=True)


def plot_series(rows: Sequence[SensitivityRow]) -> list[dict[str, Any]]:
    """One series per scorer over its sources (the rows over every domain, else its one domain)."""
    series = []
    scorers = list(dict.fromkeys(r.scorer for r in rows))
    for name in scorers:
        mine = [r for r in rows if r.scorer == name]
        row = next((r for r in mine if r.domain == ALL), mine[-1])
        series.append({
            "label": name,
            "points": [{"x": s, "value": e.value, "low": e.low, "high": e.high}
                       for s, e in ((s, row.acc[s]) for s in SOURCES if s in row.acc)],
        })
    return series


def blocks(runs: Sequence[Any], resamples: int, seed: int) -> tuple[list[tuple[Any, ...]], str]:
    """The report's section and the text ``prbench report`` prints.

    One section holds the personalization gap (own profile minus no profile) and the
    sensitivity to the profile's source; its heading names only the sources that were run.

    Returns:
        Blocks as :mod:`prbench.analysis.report` renders them, and the printed table ("" when no
        scorer has its own profile and another source).
    """
    scorers, notes = gather(runs)
    ran = [s for s in SOURCES if s != "own" and any(s in sc.outcomes for sc in scorers)]
    names = {"none": "no profile", "swapped": "another user's (swapped)",
             "shuffled": "random own posts (shuffled)"}
    head = ("h2", "Personalization gap and sensitivity" + (
        f": own profile vs {' / '.join(names[s] for s in ran)}" if ran else ""))
    out: list[tuple[Any, ...]] = [head, *(("p", n) for n in notes)]
    if not scorers:
        out.append(("p", "No scorer has per-pair results with its own profile and another "
                         "profile source (run the profile tasks and the _swapped, _shuffled or "
                         "_noprofile tasks of the same data with --log_samples)."))
        return out, ""
    rows = sensitivity_rows(scorers, resamples=resamples, seed=seed)
    level = round(100 * rows[0].acc["own"].confidence)
    diagnostic = sorted(s.name for s in scorers if s.diagnostic)
    sample = any("sample" in s.data for s in scorers)
    head_row, body = table(rows)
    out += [
        ("table", head_row, body),
        ("p", f"On the pairs every source of a scorer has: accuracy under each profile source; "
              f"own-X = accuracy with the user's own profile minus with X, {level}% paired "
              f"bootstrap interval ({resamples} resamples, seed {seed}); only own/X = pairs only "
              "that source gets right; exact McNemar test on them. A scorer that reads this "
              "user drops under 'swapped'; one that only likes more context does not."),
        ("lines", plot_series(rows), "sensitivity.png",
         {"level": level, "sample": sample, "diagnostic": diagnostic}),
    ]
    text = format_table(rows)
    flags = []
    if sample:
        flags.append("bundled SAMPLE data, not the benchmark")
    if diagnostic:
        flags.append(f"DIAGNOSTIC (reads the hidden rubric): {', '.join(diagnostic)}")
    caption = (f"personalization sensitivity ({level}% paired bootstrap CI, exact McNemar"
               + (f"; {'; '.join(flags)}" if flags else "") + ")")
    return out, caption + "\n" + text + "".join(f"\nnote: {n}" for n in notes)


def summary_lines(sections: Sequence[Any]) -> list[str]:
    """A run's accuracy per domain under each profile source it ran (from counts, unpaired).

    For the summary printed after ``prbench eval``: empty unless some domain of one data source
    was run with the user's own profile and another source. Paired intervals and the McNemar test
    need the pairs (``prbench report`` of a run made with ``--log_samples``).
    """
    cells: dict[tuple[str, str], dict[str, tuple[int, int]]] = {}
    for sec in sections:
        for row in sec.rows:
            source = "none" if row.condition == "noprofile" else row.source
            if source in SOURCES and row.n:
                got = cells.setdefault((row.data, row.domain), {})
                n, correct = got.get(source, (0, 0))
                got[source] = (n + row.n, correct + row.correct)
    shown = {k: v for k, v in cells.items() if "own" in v and len(v) > 1}
    if not shown:
        return []
    sources = [s for s in SOURCES if any(s in v for v in shown.values())]
    others = [s for s in sources if s != "own"]
    width = max([len(d) for _, d in shown] + [16])
    lines = [
        "personalization sensitivity (accuracy per profile source; unpaired, from counts):",
        "  " + "domain".ljust(width) + "".join(f"  {s:>8}" for s in sources)
        + "".join(f"  {'own-' + s:>12}" for s in others),
    ]
    for (_data, domain), got in sorted(shown.items()):
        acc = {s: got[s][1] / got[s][0] for s in got}
        line = "  " + domain.ljust(width)
        line += "".join(f"  {acc[s]:8.3f}" if s in acc else f"  {'-':>8}" for s in sources)
        line += "".join(
            f"  {acc['own'] - acc[s]:+12.3f}" if s in acc else f"  {'-':>12}" for s in others
        )
        lines.append(line)
    lines.append(
        "  own-X > 0: the scorer does better with this user's own profile than with X. Paired "
        "CIs and the exact McNemar test: `prbench report` on this run (needs --log_samples)"
    )
    return lines


__all__ = [
    "ALL",
    "CELL_SOURCES",
    "SOURCES",
    "ScorerSources",
    "SensitivityRow",
    "blocks",
    "format_table",
    "gather",
    "plot_series",
    "sensitivity_rows",
    "summary_lines",
    "table",
]
