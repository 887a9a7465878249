r"""Reading record files row by row while keeping track of where each row came from.

The readers never drop anything silently and never raise on bad input: a path that is not a
readable regular file (a FIFO, a device, a directory, a broken or looping symbolic link), a file
type prbench does not read, and every line that does not become a row (a blank line, a byte
sequence that is not UTF-8, a JSON syntax error, a truncated last line, JSON nested too deeply, an
integer too long to convert) becomes an :class:`Issue` naming the file and line. Lines end at
``\n``, ``\r\n`` or a lone ``\r``. :func:`scan_folder` lists what a folder holds: the files to
read, and every other path with the reason it is skipped.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re
import stat
import sys
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

BOM = b"\xef\xbb\xbf"
#: the file types prbench reads; ``.ndjson`` is read as JSON Lines
SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet")
_JSONL_SUFFIXES = (".jsonl", ".ndjson")
_LINE_END = re.compile(rb"\r\n|\r|\n")
_SURROGATE = re.compile("[\ud800-\udfff]")
#: suffixes of backup copies, skipped in a folder even when named after a domain
BACKUP_SUFFIXES = (".bak", ".orig", ".old", ".tmp", ".swp", "~")


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
    """Yield the rows of one data file, and an :class:`Issue` for each bad line.

    A path that cannot be read, or whose type is not one of :data:`SUFFIXES`, gives one file-level
    :class:`Issue` (``line`` is ``None``) and no row.
    """
    problem = unreadable(path)
    if problem is not None:
        yield problem
        return
    suffix = path.suffix.lower()
    if suffix in _JSONL_SUFFIXES:
        yield from _read_jsonl(path)
    elif suffix == ".json":
        yield from _read_json(path)
    elif suffix == ".parquet":
        yield from _read_parquet(path)
    else:
        yield _issue(
            path,
            None,
            f"unsupported file type {suffix or '(no suffix)'!r}; prbench reads "
            f"{', '.join(SUFFIXES)} files",
            "unsupported-file-type",
        )


def _issue(path: Path, line: int | None, message: str, code: str, unit: str = "line") -> Issue:
    return Issue(str(path), line, None, None, message, code, unit)


def scan_folder(folder: Path, named: Collection[str] = ()) -> tuple[list[Path], list[Issue]]:
    """The files of a folder to read, and an :class:`Issue` for every entry that is skipped.

    A file with a data suffix (:data:`SUFFIXES`) is read even when it is a broken link, a loop or
    a directory, so that reading reports why it cannot be read; so is a file whose name before
    the first dot is in ``named`` (a domain: ``Society_and_Culture.csv``) unless it is a backup
    copy. Everything else (sub-folders, other file types, backups, hidden files) is skipped; the
    issue's code starts with ``skipped-``.

    Raises:
        OSError: the folder cannot be listed.
    """
    files: list[Path] = []
    skipped: list[Issue] = []
    for entry in sorted(folder.iterdir()):
        reason = _skip_reason(entry, named)
        if reason is None:
            files.append(entry)
        else:
            skipped.append(_issue(entry, None, f"skipped: {reason[0]}", reason[1]))
    return files, skipped


def _skip_reason(entry: Path, named: Collection[str]) -> tuple[str, str] | None:
    """Why a folder entry is not read, as ``(reason, code)``; ``None`` to read it."""
    name = entry.name
    suffix = entry.suffix.lower()
    if name.startswith("."):
        return "a hidden file", "skipped-hidden"
    if suffix in SUFFIXES:
        return None
    if entry.is_dir():
        return (
            "a sub-folder (only the files directly in the folder are read; pass the sub-folder "
            "itself to read it)",
            "skipped-folder",
        )
    if name.lower().endswith(BACKUP_SUFFIXES):
        return "a backup copy", "skipped-backup"
    if name.split(".", 1)[0] in named:
        return None  # named after a domain: reading it reports why it cannot be read
    problem = unreadable(entry)
    what = "" if problem is None else f", and it {problem.message}"
    return (
        f"not a data file (type {suffix or '(no suffix)'!r}{what}; prbench reads "
        f"{', '.join(SUFFIXES)})",
        "skipped-file-type",
    )


def text_problems(data: Any, max_depth: int) -> Iterator[tuple[str | None, str, str]]:
    r"""``(field, message, code)`` for each text of decoded JSON that later steps cannot take.

    ``json`` decodes an escape such as ``\ud800`` without its pair into a string that cannot be
    encoded as UTF-8 (code ``lone-surrogate``, for a value or a key); nesting deeper than
    ``max_depth`` lists/objects (code ``too-deeply-nested``, reported once, at the top-level
    field) breaks recursive JSON and Arrow code. Walks ``data`` without recursion.
    """
    stack: list[tuple[str | None, Any, int]] = [(None, data, 0)]
    while stack:
        field, value, depth = stack.pop()
        if depth > max_depth:
            top = re.split(r"[.\[]", field or "")[0] or None
            yield top, f"is nested more than {max_depth} lists/objects deep", "too-deeply-nested"
            return
        found = _SURROGATE.search(value) if isinstance(value, str) else None
        if found is not None:
            yield (
                field,
                f"contains a lone UTF-16 surrogate U+{ord(found.group()):04X} at character "
                f"{found.start() + 1} (an escape like \\ud83d without its pair), which is not "
                "valid Unicode text; fix or remove the escape",
                "lone-surrogate",
            )
        children: list[tuple[str | None, Any, int]] = []
        if isinstance(value, dict):
            for key, item in value.items():
                path = str(key) if field is None else f"{field}.{key}"
                children += [(path, key, depth + 1), (path, item, depth + 1)]
        elif isinstance(value, list):
            children = [(f"{field or ''}[{i}]", item, depth + 1) for i, item in enumerate(value)]
        stack.extend(reversed(children))


def summarize(issues: Sequence[Issue]) -> list[str]:
    """One line per kind of issue (code, field, message) with its count and first place.

    For warnings, which may repeat on every record (an extra field of a whole file).
    """
    groups: dict[tuple[str, str | None, str], list[Issue]] = {}
    for issue in issues:
        groups.setdefault((issue.code, issue.field, issue.message), []).append(issue)
    lines = []
    for (code, field, message), members in groups.items():
        first = members[0]
        where = first.file if first.line is None else f"{first.file}:{first.line}"
        count = f"{len(members)} records, first at {where}" if len(members) > 1 else where
        what = f"field {field!r}: " if field else ""
        lines.append(f"{what}{message} [{code}] ({count})")
    return lines


def path_kind(mode: int) -> str:
    """What a ``st_mode`` describes, in words (``"named pipe (FIFO)"``, ``"directory"``, ...)."""
    kinds = (
        (stat.S_ISDIR, "directory"),
        (stat.S_ISFIFO, "named pipe (FIFO)"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
    )
    for test, name in kinds:
        if test(mode):
            return name
    return "special file"


def unreadable(path: Path) -> Issue | None:
    """A file-level :class:`Issue` when ``path`` is not a regular file that can be opened.

    Tells a symbolic link loop, a broken link, a missing file, a permission problem and a
    non-regular file (directory, FIFO, device, socket) apart; ``None`` when the path is fine.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return _os_issue(path, exc)
    if not stat.S_ISREG(mode):
        return _issue(
            path, None, f"is a {path_kind(mode)}, not a regular file of records", "not-a-file"
        )
    return None


def _os_issue(path: Path, exc: OSError) -> Issue:
    if exc.errno == errno.ELOOP:
        return _issue(
            path,
            None,
            "is a symbolic link loop (following it leads back to itself)",
            "symlink-loop",
        )
    if isinstance(exc, FileNotFoundError) and os.path.islink(path):
        return _issue(
            path,
            None,
            f"is a broken symbolic link (its target {os.readlink(path)!r} does not exist)",
            "broken-symlink",
        )
    if isinstance(exc, FileNotFoundError):
        return _issue(path, None, "does not exist", "missing-file")
    if isinstance(exc, PermissionError):
        return _issue(path, None, "cannot be read: permission denied", "unreadable-file")
    return _issue(path, None, f"cannot be read: {exc.strerror or exc}", "unreadable-file")


def _read_bytes(path: Path) -> bytes | Issue:
    try:
        return path.read_bytes()
    except OSError as exc:
        return _os_issue(path, exc)


def _decode_json(text: str) -> tuple[Any, str | None, str | None]:
    """``(data, None, None)``, or ``(None, message, code)`` for input that ``json`` rejects."""
    try:
        return json.loads(text), None, None
    except json.JSONDecodeError:
        raise
    except RecursionError:
        return (
            None,
            "JSON nested too deeply to read (arrays/objects inside each other beyond Python's "
            "recursion limit)",
            "too-deeply-nested",
        )
    except ValueError as exc:  # an integer longer than Python's int-string limit
        if "integer string conversion" not in str(exc):
            return None, f"a value that cannot be read: {exc}", "unreadable-value"
        return (
            None,
            f"an integer with more than {sys.get_int_max_str_digits()} digits (too long to "
            "read); write long ids as strings",
            "number-too-long",
        )


def _read_jsonl(path: Path) -> Iterator[Row | Issue]:
    raw = _read_bytes(path)
    if isinstance(raw, Issue):
        yield raw
        return
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
    lines = _LINE_END.split(raw)
    ends_with_newline = lines[-1] == b""
    if ends_with_newline:
        lines.pop()
    last = len(lines)
    for number, chunk in enumerate(lines, start=1):
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
            data, message, code = _decode_json(text)
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
        if message is not None and code is not None:
            yield _issue(path, number, message, code)
            continue
        yield Row(str(path), number, data)


def _read_json(path: Path) -> Iterator[Row | Issue]:
    raw = _read_bytes(path)
    if isinstance(raw, Issue):
        yield raw
        return
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
        data, message, code = _decode_json(text)
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
    if message is not None and code is not None:
        yield _issue(path, None, message, code)
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
