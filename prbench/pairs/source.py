"""Loading *source* records: LaMP-QA-style rows that do not have chosen/rejected answers yet.

A source row has the benchmark schema minus the answers: ``id``, ``question``, ``profile``,
``narrative``, ``rubric_aspects`` (at least one), ``category`` and optionally ``domain``. The
checks are those of :mod:`prbench.records` (same messages, with file, line, record id and field),
except that ``chosen``/``rejected`` are not required and at least one rubric aspect is.

If a row already has ``chosen``/``rejected`` (e.g. a benchmark file being regenerated), they are
kept as the extra fields ``previous_chosen``/``previous_rejected`` of the output and counted; they
are never used for generation.

Source records are returned as :class:`prbench.records.Record` objects whose ``chosen`` and
``rejected`` are empty strings, so that profile builders (which take records) work on them.
"""

from __future__ import annotations

import os
from typing import Any

from prbench.jsonio import Issue, Row, read_rows
from prbench.records import (
    KNOWN_FIELDS,
    LoadReport,
    Record,
    RecordChecker,
    RecordValidationError,
    domain_from_path,
    resolve_files,
)

PREVIOUS = {"chosen": "previous_chosen", "rejected": "previous_rejected"}
#: Fields prbench build writes into each output row; an input row must not carry them.
RESERVED = ("previous_chosen", "previous_rejected", "pair_meta")


class _SourceChecker(RecordChecker):
    """The record checks of :mod:`prbench.records`, with the answers optional."""

    def source_record(self, row: Row, domain: str) -> Record | None:
        data = row.data
        n_before = len(self.issues)
        if not isinstance(data, dict):
            self.problem(
                row, None, None, f"expected a JSON object, got {type(data).__name__}", "not-object"
            )
            return None
        rid = self._id(row, data)
        self.check_strings(row, rid, data)
        self.check_keys(row, rid, data, (*KNOWN_FIELDS, *RESERVED))
        question = self._text(row, rid, data, "question", required=True)
        narrative = self._text(row, rid, data, "narrative", required=False)
        category = self._text(row, rid, data, "category", required=False)
        own_domain = self._text(row, rid, data, "domain", required=False)
        profile = self._profile(row, rid, data)
        rubric = self._rubric(row, rid, data)
        if rubric is not None and not rubric:
            self.problem(
                row, rid, "rubric_aspects",
                "building a pair needs at least one rubric aspect (the chosen answer covers them, "
                "the rejected one avoids them)",
                "no-rubric",
            )
        previous: dict[str, Any] = {}
        for key, new_key in PREVIOUS.items():
            if data.get(key) not in (None, ""):
                if not isinstance(data[key], str):
                    self.problem(row, rid, key, "expected a string or nothing", "wrong-type")
                previous[new_key] = data[key]
        for reserved in RESERVED:
            if reserved in data:
                self.problem(
                    row, rid, reserved,
                    "is a reserved field: prbench build writes it (rename it in the input)",
                    "reserved-field",
                )
        if len(self.issues) > n_before or rid is None:
            return None
        assert question is not None and profile is not None and rubric is not None
        extra = {k: v for k, v in data.items() if k not in KNOWN_FIELDS}
        extra.update(previous)
        return Record(
            id=rid,
            question=question,
            profile=profile,
            chosen="",
            rejected="",
            category=category or "",
            domain=own_domain or domain,
            narrative=narrative or "",
            rubric_aspects=rubric,
            extra=extra,
            source=f"{row.file}:{row.line}",
        )


def validate_sources(source: str | os.PathLike[str]) -> LoadReport:
    """Read and check source rows from a file or a directory of files (never raises on rows).

    Raises:
        prbench.records.DataSourceError: the path does not exist or holds no data files.
    """
    checker = _SourceChecker()
    records: list[Record] = []
    rows = 0
    files: list[str] = []
    for path in resolve_files(source):
        files.append(str(path))
        for item in read_rows(path):
            if isinstance(item, Issue):
                checker.issues.append(item)
                if item.line is not None and item.code != "bom":
                    rows += 1
                continue
            rows += 1
            record = checker.source_record(item, domain_from_path(path))
            if record is not None:
                records.append(record)
    return LoadReport(
        records=records, issues=checker.issues, rows=rows, files=files, warnings=checker.warnings
    )


def load_sources(source: str | os.PathLike[str]) -> list[Record]:
    """Load source records; any problem stops the load.

    Raises:
        RecordValidationError: every problem, with file, line, record id and field.
        prbench.records.DataSourceError: the path does not exist or holds no data files.
    """
    report = validate_sources(source)
    if report.issues:
        raise RecordValidationError(report.issues)
    if not report.records:
        raise RecordValidationError(
            [Issue(", ".join(report.files), None, None, None, "no records", "empty-file")]
        )
    return report.records


def output_row(record: Record, chosen: str, rejected: str, meta: dict[str, Any]) -> dict[str, Any]:
    """The full benchmark row for a built pair (extra fields kept, ``pair_meta`` added)."""
    row = record.to_dict()
    row["chosen"] = chosen
    row["rejected"] = rejected
    if record.domain:
        row["domain"] = record.domain
    row["pair_meta"] = meta
    return row
