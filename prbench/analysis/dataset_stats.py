"""Per-domain statistics of a set of records (``prbench validate`` prints them).

:class:`StatsAccumulator` takes records one at a time and keeps running sums only, so statistics
of a source of any size cost memory for the domain and category names, not for the records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from prbench.records import Record


def _words(text: str) -> int:
    return len(text.split())


@dataclasses.dataclass
class _Sums:
    """Running sums of one row of the table."""

    records: int = 0
    categories: set[str] = dataclasses.field(default_factory=set)
    profile: int = 0
    profile_min: int | None = None
    profile_max: int = 0
    question: int = 0
    narrative: int = 0
    aspects: int = 0
    chosen: int = 0
    rejected: int = 0
    chosen_longer: int = 0

    def add(self, r: Record) -> None:
        posts, chosen, rejected = len(r.profile), _words(r.chosen), _words(r.rejected)
        self.records += 1
        self.categories.add(r.category)
        self.profile += posts
        self.profile_min = posts if self.profile_min is None else min(self.profile_min, posts)
        self.profile_max = max(self.profile_max, posts)
        self.question += _words(r.question)
        self.narrative += _words(r.narrative)
        self.aspects += len(r.rubric_aspects)
        self.chosen += chosen
        self.rejected += rejected
        self.chosen_longer += chosen > rejected

    def row(self, name: str) -> dict[str, Any]:
        n = self.records or 1
        return {
            "domain": name,
            "records": self.records,
            "categories": len(self.categories),
            "profile_mean": self.profile / n,
            "profile_min": self.profile_min or 0,
            "profile_max": self.profile_max,
            "question_words": self.question / n,
            "narrative_words": self.narrative / n,
            "aspects": self.aspects / n,
            "chosen_words": self.chosen / n,
            "rejected_words": self.rejected / n,
            "chosen_longer": self.chosen_longer / n,
        }


class StatsAccumulator:
    """Per-domain statistics built one record at a time (pass :meth:`add` as a callback)."""

    def __init__(self) -> None:
        self._domains: dict[str, _Sums] = {}
        self._all = _Sums()

    def add(self, record: Record) -> None:
        """Count one record."""
        self._domains.setdefault(record.domain or "(none)", _Sums()).add(record)
        self._all.add(record)

    def rows(self) -> list[dict[str, Any]]:
        """One row per domain (sorted), then an ``all`` row when there are several domains.

        Columns: records, categories, profile posts (mean/min/max), question words, narrative
        words, rubric aspects, chosen and rejected words (mean), and how often the chosen answer
        is the longer one (a length-bias check: near 0.5 is healthy). No record, no row.
        """
        rows = [self._domains[name].row(name) for name in sorted(self._domains)]
        if len(self._domains) > 1:
            rows.append(self._all.row("all"))
        return rows


def domain_stats(records: Iterable[Record]) -> list[dict[str, Any]]:
    """The rows of :meth:`StatsAccumulator.rows` for these records."""
    stats = StatsAccumulator()
    for record in records:
        stats.add(record)
    return stats.rows()


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
    from prbench.tables import markdown_table, text_table

    header = [c[0] for c in COLUMNS]
    body = [_cells(r) for r in rows]
    return markdown_table(header, body) if markdown else text_table(header, body, rule=True)
