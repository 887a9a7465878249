"""Best-of-N candidate pools with gold per-aspect coverage labels.

A pool file is jsonl, one object per benchmark record::

    {"id": "<record id>",
     "pair_labels": {"chosen": [2, 2, 2], "rejected": [0, 1, 0]},
     "candidates": [{"id": "...", "text": "...", "coverage": [2, 1, 0], "note": "..."}, ...]}

``coverage`` has one label per rubric aspect of the record, in rubric order: 0 absent, 1 partly
covered, 2 well covered (the LaMP-QA judging scale). ``pair_labels`` labels the record's own
chosen and rejected answers in the same format.

Pools written by ``prbench bon`` from a policy have no gold labels: their candidates carry no
``coverage`` and the pool no ``pair_labels`` (quality then comes from the ``rubric-judge``), and
the pool records how it was generated under ``policy``. A candidate with ``coverage`` is checked;
a pool must label all of its candidates or none.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prbench.jsonio import Issue, Row, read_rows
from prbench.records import Record

LABELS = (0, 1, 2)


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One candidate answer with its gold coverage labels."""

    id: str
    text: str
    coverage: tuple[int, ...] | None
    note: str = ""

    @property
    def quality(self) -> float | None:
        """Mean coverage on the 0-1 scale (labels / 2); ``None`` without gold labels."""
        if self.coverage is None:
            return None
        return statistics.fmean(self.coverage) / 2 if self.coverage else 0.0


@dataclasses.dataclass(frozen=True)
class Pool:
    """The candidates for one record, plus the labels of its chosen/rejected answers."""

    record_id: str
    candidates: tuple[Candidate, ...]
    chosen_labels: tuple[int, ...] | None
    rejected_labels: tuple[int, ...] | None
    source: str = ""
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)

    @property
    def labelled(self) -> bool:
        """True when every candidate has gold coverage labels."""
        return all(c.coverage is not None for c in self.candidates)

    def to_dict(self) -> dict[str, Any]:
        """The pool in the file format (``extra`` keys such as ``policy`` kept)."""
        out: dict[str, Any] = {"id": self.record_id, **self.extra}
        if self.chosen_labels is not None and self.rejected_labels is not None:
            out["pair_labels"] = {
                "chosen": list(self.chosen_labels), "rejected": list(self.rejected_labels)
            }
        cands = []
        for c in self.candidates:
            item: dict[str, Any] = {"id": c.id, "text": c.text}
            if c.coverage is not None:
                item["coverage"] = list(c.coverage)
            if c.note:
                item["note"] = c.note
            cands.append(item)
        out["candidates"] = cands
        return out


@dataclasses.dataclass
class PoolReport:
    """Valid pools and every issue found."""

    pools: list[Pool]
    issues: list[Issue]
    records: Mapping[str, Record]

    def stats(self) -> dict[str, Any]:
        """Counts and checks of the pools (printed by ``prbench validate``).

        The label statistics are over the labelled pools only (``labelled_pools`` of them).
        """
        n_cand = [len(p.candidates) for p in self.pools]
        gold = [p for p in self.pools if p.labelled]
        paired = [p for p in gold if p.chosen_labels is not None and p.rejected_labels is not None]
        best_is_longest = 0
        for p in gold:
            top = max(sum(c.coverage or ()) for c in p.candidates)
            longest = max(p.candidates, key=lambda c: len(c.text.split()))
            if sum(longest.coverage or ()) == top:
                best_is_longest += 1
        all_cover = sum(1 for p in paired if all(v == 2 for v in p.chosen_labels or ()))
        out: dict[str, Any] = {
            "pools": len(self.pools),
            "candidates_per_pool": statistics.fmean(n_cand) if n_cand else 0.0,
            "mean_quality": statistics.fmean(
                c.quality for p in gold for c in p.candidates if c.quality is not None
            )
            if gold
            else 0.0,
            "best_is_longest": best_is_longest / len(gold) if gold else 0.0,
            "chosen_covers_all": all_cover / len(paired) if paired else 0.0,
            "rejected_mean_quality": statistics.fmean(
                statistics.fmean(p.rejected_labels or (0,)) / 2 for p in paired
            )
            if paired
            else 0.0,
        }
        if len(gold) != len(self.pools):
            out["labelled_pools"] = len(gold)
        return out

    def format(self, *, markdown: bool = False) -> str:
        """The statistics as a two-column table."""
        s = self.stats()
        rows = [
            ("Best-of-N pools", f"{s['pools']}"),
            ("candidates per pool", f"{s['candidates_per_pool']:.1f}"),
            ("mean candidate coverage (0-1)", f"{s['mean_quality']:.2f}"),
            ("best-covered candidate is also the longest", f"{s['best_is_longest']:.0%}"),
            ("chosen answer covers every aspect", f"{s['chosen_covers_all']:.0%}"),
            ("rejected answer coverage (0-1)", f"{s['rejected_mean_quality']:.2f}"),
        ]
        if markdown:
            return "\n".join(["| pools | |", "|---|---|", *(f"| {a} | {b} |" for a, b in rows)])
        width = max(len(a) for a, _ in rows)
        return "\n".join(f"{a.ljust(width)}  {b}" for a, b in rows)


def _labels(
    row: Row, rid: str, field: str, value: Any, n_aspects: int, issues: list[Issue]
) -> tuple[int, ...] | None:
    if not isinstance(value, list) or any(isinstance(v, bool) or v not in LABELS for v in value):
        message = f"expected a list of labels 0/1/2, got {value!r}"
    elif len(value) != n_aspects:
        message = f"has {len(value)} labels but the record has {n_aspects} rubric aspects"
    else:
        return tuple(value)
    issues.append(row.issue(rid, field, message, "bad-coverage"))
    return None


def validate_pools(path: str | os.PathLike[str], records: Sequence[Record]) -> PoolReport:
    """Read a pool file and check it against the records it belongs to."""
    by_id = {r.id: r for r in records}
    issues: list[Issue] = []
    pools: list[Pool] = []
    seen: set[str] = set()
    for item in read_rows(Path(path)):
        if isinstance(item, Issue):
            issues.append(item)
            continue
        pool = _pool(item, by_id, seen, issues)
        if pool is not None:
            pools.append(pool)
    return PoolReport(pools=pools, issues=issues, records=by_id)


def _pool(
    row: Row, by_id: Mapping[str, Record], seen: set[str], issues: list[Issue]
) -> Pool | None:
    data = row.data
    n_before = len(issues)

    def bad(rid: str | None, field: str | None, msg: str, code: str) -> None:
        issues.append(row.issue(rid, field, msg, code))

    if not isinstance(data, dict):
        bad(None, None, "expected a JSON object", "not-object")
        return None
    rid = data.get("id")
    if not isinstance(rid, str) or rid not in by_id:
        bad(
            None if not isinstance(rid, str) else rid,
            "id",
            "does not name a record of the data set",
            "unknown-record",
        )
        return None
    if rid in seen:
        bad(rid, "id", "a second pool for this record", "duplicate-id")
        return None
    seen.add(rid)
    n_aspects = len(by_id[rid].rubric_aspects)
    labels = data.get("pair_labels")
    chosen = rejected = None
    cands = data.get("candidates")
    unlabelled = isinstance(cands, list) and not any(
        isinstance(c, dict) and "coverage" in c for c in cands
    )
    if labels is None and unlabelled:
        pass  # a generated pool: no gold labels anywhere
    elif not isinstance(labels, dict):
        bad(rid, "pair_labels", "expected {chosen: [...], rejected: [...]}", "missing-field")
    else:
        chosen = _labels(row, rid, "pair_labels.chosen", labels.get("chosen"), n_aspects, issues)
        rejected = _labels(
            row, rid, "pair_labels.rejected", labels.get("rejected"), n_aspects, issues
        )
    out: list[Candidate] = []
    if not isinstance(cands, list) or not cands:
        bad(rid, "candidates", "expected a non-empty list", "missing-field")
        return None
    ids: set[str] = set()
    for i, c in enumerate(cands):
        field = f"candidates[{i}]"
        if not isinstance(c, dict):
            bad(rid, field, "expected an object {id, text, coverage, note}", "bad-candidate")
            continue
        cid, text, note = c.get("id"), c.get("text"), c.get("note", "")
        if not isinstance(cid, str) or not cid or cid in ids:
            bad(rid, f"{field}.id", f"missing or duplicate candidate id {cid!r}", "bad-candidate")
            continue
        ids.add(cid)
        if not isinstance(text, str) or not text.strip():
            bad(rid, f"{field}.text", "must be a non-empty string", "bad-candidate")
            continue
        if not isinstance(note, str):
            bad(rid, f"{field}.note", "must be a string", "bad-candidate")
            continue
        if unlabelled:
            out.append(Candidate(id=cid, text=text, coverage=None, note=note))
            continue
        if "coverage" not in c:
            bad(rid, f"{field}.coverage", "missing: label every candidate of a pool or none",
                "bad-coverage")
            continue
        cov = _labels(row, rid, f"{field}.coverage", c.get("coverage"), n_aspects, issues)
        if cov is not None:
            out.append(Candidate(id=cid, text=text, coverage=cov, note=note))
    if len(issues) > n_before or (not unlabelled and (chosen is None or rejected is None)):
        return None
    extra = {k: v for k, v in data.items() if k not in ("id", "pair_labels", "candidates")}
    return Pool(rid, tuple(out), chosen, rejected, f"{row.file}:{row.line}", extra)


def load_pools(path: str | os.PathLike[str], records: Sequence[Record]) -> list[Pool]:
    """Load pools; any issue stops the load.

    Raises:
        prbench.records.RecordValidationError: listing every problem.
    """
    from prbench.records import RecordValidationError

    report = validate_pools(path, records)
    if report.issues:
        raise RecordValidationError(report.issues)
    return report.pools


def write_pools(path: str | os.PathLike[str], pools: Sequence[Pool]) -> Path:
    """Write pools as jsonl (atomically: a temporary file renamed over ``path``)."""
    from prbench.outputs import write_jsonl

    return write_jsonl(path, (pool.to_dict() for pool in pools))
