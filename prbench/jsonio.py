"""Reading record files row by row while keeping track of where each row came from.

The readers never drop anything silently: every line that does not become a row (a blank line, a
byte sequence that is not UTF-8, a JSON syntax error, a truncated last line) becomes an
:class:`Issue` naming the file and line.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BOM = b"\xef\xbb\xbf"
SUFFIXES = (".jsonl", ".json", ".parquet")


@dataclasses.dataclass(frozen=True)
class Issue:
    """One problem found in the input.

    Attributes:
        file: the file it was found in.
        line: 1-based line (jsonl) or row (json array, parquet) number; ``None`` for the file.
        record_id: the record's id when known.
        field: the field concerned (dotted, e.g. ``profile[3].text``) when known.
        message: what is wrong.
        code: a short stable kind (``invalid-json``, ``duplicate-id``, ...) for tests and tools.
        unit: ``"line"`` or ``"row"``.
    """

    file: str
    line: int | None
    record_id: str | None
    field: str | None
    message: str
    code: str
    unit: str = "line"

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        if self.unit == "row" and self.line is not None:
            where = f"{self.file}: row {self.line}"
        parts = [where]
        if self.record_id is not None:
            parts.append(f"record {self.record_id!r}")
        if self.field:
            parts.append(f"field {self.field!r}")
        return ": ".join(parts) + f": {self.message} [{self.code}]"


@dataclasses.dataclass(frozen=True)
class Row:
    """One decoded object with its position."""

    file: str
    line: int
    data: Any
    unit: str = "line"

    def issue(self, record_id: str | None, field: str | None, message: str, code: str) -> Issue:
        """An :class:`Issue` at this row."""
        return Issue(self.file, self.line, record_id, field, message, code, self.unit)


def read_rows(path: Path) -> Iterator[Row | Issue]:
    """Yield the rows of one jsonl/json/parquet file, and an :class:`Issue` for each bad line.

    Raises:
        ValueError: the suffix is not one of ``.jsonl``, ``.json``, ``.parquet``.
    """
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        yield from _read_jsonl(path)
    elif suffix == ".json":
        yield from _read_json(path)
    elif suffix == ".parquet":
        yield from _read_parquet(path)
    else:
        raise ValueError(f"{path}: unsupported file type {suffix!r}; use one of {SUFFIXES}")


def _issue(path: Path, line: int | None, message: str, code: str, unit: str = "line") -> Issue:
    return Issue(str(path), line, None, None, message, code, unit)


def _read_jsonl(path: Path) -> Iterator[Row | Issue]:
    raw = path.read_bytes()
    if not raw.strip():
        yield _issue(path, None, "the file is empty", "empty-file")
        return
    if raw.startswith(BOM):
        yield _issue(
            path,
            1,
            "the file starts with a UTF-8 byte-order mark (BOM); save it without one",
            "bom",
        )
        raw = raw[len(BOM) :]
    lines = raw.split(b"\n")
    ends_with_newline = lines[-1] == b""
    if ends_with_newline:
        lines.pop()
    last = len(lines)
    for number, chunk in enumerate(lines, start=1):
        chunk = chunk.removesuffix(b"\r")
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield _issue(
                path,
                number,
                f"bytes that are not UTF-8 at column {exc.start + 1} "
                f"({chunk[exc.start : exc.end]!r}); re-encode the file as UTF-8",
                "not-utf8",
            )
            continue
        if not text.strip():
            yield _issue(path, number, "blank line (remove it)", "blank-line")
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            at_end = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
            if number == last and not ends_with_newline and at_end:
                yield _issue(
                    path,
                    number,
                    f"truncated JSON: the file ends in the middle of a record ({exc.msg})",
                    "truncated-json",
                )
            else:
                yield _issue(
                    path, number, f"invalid JSON: {exc.msg} at column {exc.colno}", "invalid-json"
                )
            continue
        yield Row(str(path), number, data)


def _read_json(path: Path) -> Iterator[Row | Issue]:
    raw = path.read_bytes()
    if raw.startswith(BOM):
        yield _issue(
            path,
            1,
            "the file starts with a UTF-8 byte-order mark (BOM); save it without one",
            "bom",
        )
        raw = raw[len(BOM) :]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        yield _issue(
            path, line, f"bytes that are not UTF-8 ({raw[exc.start : exc.end]!r})", "not-utf8"
        )
        return
    if not text.strip():
        yield _issue(path, None, "the file is empty", "empty-file")
        return
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        yield _issue(
            path,
            exc.lineno,
            (
                "truncated JSON: the file ends in the middle of a record"
                if truncated
                else "invalid JSON"
            )
            + f" ({exc.msg} at column {exc.colno})",
            "truncated-json" if truncated else "invalid-json",
        )
        return
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    if not isinstance(data, list):
        yield _issue(
            path,
            None,
            'a .json file must hold a list of records (or {"data": [...]})',
            "not-a-list",
        )
        return
    for index, item in enumerate(data, start=1):
        yield Row(str(path), index, item, unit="row")


def _read_parquet(path: Path) -> Iterator[Row | Issue]:
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow ships with datasets
        yield _issue(
            path, None, "reading parquet needs pyarrow (pip install pyarrow)", "no-pyarrow"
        )
        return
    try:
        table = pq.read_table(path)
    except Exception as exc:
        yield _issue(path, None, f"unreadable parquet file: {exc}", "bad-parquet")
        return
    for index, item in enumerate(table.to_pylist(), start=1):
        yield Row(str(path), index, item, unit="row")
