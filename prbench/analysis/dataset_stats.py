"""Per-domain statistics of a set of records (``prbench validate`` prints them)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from prbench.records import Record


def _words(text: str) -> int:
    return len(text.split())


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def domain_stats(records: Sequence[Record]) -> list[dict[str, Any]]:
    """One row per domain (sorted), then an ``all`` row.

    Columns: records, categories, profile posts (mean/min/max), question words, narrative words,
    rubric aspects, chosen and rejected words (mean), and how often the chosen answer is the longer
    one (a length-bias check: near 0.5 is healthy).
    """
    by_domain: dict[str, list[Record]] = {}
    for r in records:
        by_domain.setdefault(r.domain or "(none)", []).append(r)
    rows = [_row(name, by_domain[name]) for name in sorted(by_domain)]
    if len(by_domain) > 1:
        rows.append(_row("all", list(records)))
    return rows


def _row(name: str, recs: Sequence[Record]) -> dict[str, Any]:
    profile = [len(r.profile) for r in recs]
    chosen = [_words(r.chosen) for r in recs]
    rejected = [_words(r.rejected) for r in recs]
    longer = [c > j for c, j in zip(chosen, rejected, strict=True)]
    return {
        "domain": name,
        "records": len(recs),
        "categories": len({r.category for r in recs}),
        "profile_mean": _mean(profile),
        "profile_min": min(profile, default=0),
        "profile_max": max(profile, default=0),
        "question_words": _mean([_words(r.question) for r in recs]),
        "narrative_words": _mean([_words(r.narrative) for r in recs]),
        "aspects": _mean([len(r.rubric_aspects) for r in recs]),
        "chosen_words": _mean(chosen),
        "rejected_words": _mean(rejected),
        "chosen_longer": _mean([float(x) for x in longer]),
    }


COLUMNS = (
    ("domain", "domain", "{}"),
    ("records", "records", "{}"),
    ("categories", "categories", "{}"),
    ("profile posts (mean/min/max)", None, ""),
    ("question words", "question_words", "{:.1f}"),
    ("narrative words", "narrative_words", "{:.1f}"),
    ("rubric aspects", "aspects", "{:.2f}"),
    ("chosen words", "chosen_words", "{:.1f}"),
    ("rejected words", "rejected_words", "{:.1f}"),
    ("chosen is longer", "chosen_longer", "{:.0%}"),
)


def _cells(row: dict[str, Any]) -> list[str]:
    cells = []
    for _, key, fmt in COLUMNS:
        if key is None:
            cells.append(f"{row['profile_mean']:.1f} / {row['profile_min']} / {row['profile_max']}")
        else:
            cells.append(fmt.format(row[key]))
    return cells


def format_table(rows: Sequence[dict[str, Any]], *, markdown: bool = False) -> str:
    """Render :func:`domain_stats` rows as an aligned text table or a Markdown table."""
    header = [c[0] for c in COLUMNS]
    body = [_cells(r) for r in rows]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(cells) + " |" for cells in body]
        return "\n".join(lines)
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) for cells in body]
    return "\n".join(lines)
