r"""Reading record files row by row while keeping track of where each row came from.

The readers never drop anything silently and never raise on bad input: a path that is not a
readable regular file (a FIFO, a device, a directory, a broken or looping symbolic link), a file
type prbench does not read, and every line that does not become a row (a blank line, a byte
sequence that is not UTF-8, a JSON syntax error, a truncated last line, JSON nested too deeply, an
integer too long to convert, an object with the same key twice) becomes an :class:`Issue` naming
the file and line. Lines end at ``\n``, ``\r\n`` or a lone ``\r``. A file in UTF-16/UTF-32 or a
compressed file under a plain name is one file-level issue saying so; ``NAME.jsonl.gz`` (also
``.bz2``, ``.xz``, and ``.json``/``.ndjson`` inside) is read transparently. JSON Lines and parquet
files are read in blocks, so memory does not grow with the file. :func:`scan_folder` lists what a
folder holds: the files to read, and every other path with the reason it is skipped.
:func:`shown` renders ids, keys and paths inside messages (escaped, long ones cut).
"""

from __future__ import annotations

import bz2
import dataclasses
import functools
import gzip
import itertools
import json
import lzma
import re
import sys
import zlib
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import IO, Any

from prbench.issues import (
    PATH_LIMIT,
    Issue,
    Row,
    issue_at,
    os_issue,
    path_kind,
    short,
    shown,
    shown_path,
    summarize,
    unreadable,
)

__all__ = [
    "BOM",
    "COMPRESSED",
    "SUFFIXES",
    "Issue",
    "Row",
    "data_suffix",
    "path_kind",
    "read_rows",
    "scan_folder",
    "shown",
    "shown_path",
    "summarize",
    "unreadable",
]

BOM = b"\xef\xbb\xbf"
#: the file types prbench reads; ``.ndjson`` is read as JSON Lines
SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet")
#: compressions read transparently after a JSON/JSON Lines suffix (``d.jsonl.gz``)
COMPRESSED = (".gz", ".bz2", ".xz")
_LINE_END = re.compile(rb"\r\n|\r|\n")
#: the first line of a JSON array of objects: ``[`` alone (indented JSON) or ``[{...`` (one line)
_ARRAY_START = re.compile(rb"\s*\[\s*(\{|$)")
#: suffixes of backup copies, skipped in a folder even when named after a domain
BACKUP_SUFFIXES = (".bak", ".orig", ".old", ".tmp", ".swp", "~")
#: bytes read at a time from a JSON Lines file
CHUNK_BYTES = 1 << 20
#: (magic bytes, name, the suffix prbench reads it under or None, how to undo it)
_MAGIC = (
    (b"\x1f\x8b", "gzip", ".gz", "gunzip"),
    (b"BZh", "bzip2", ".bz2", "bunzip2"),
    (b"\xfd7zXZ\x00", "xz", ".xz", "unxz"),
    (b"\x28\xb5\x2f\xfd", "zstd", None, "zstd -d"),
    (b"PK\x03\x04", "zip", None, "unzip"),
)
_OPENERS: dict[str, Callable[[IO[bytes]], IO[bytes]]] = {
    ".gz": lambda raw: gzip.GzipFile(fileobj=raw),
    ".bz2": bz2.BZ2File,
    ".xz": lzma.LZMAFile,
}
_WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32LE"),
    (b"\x00\x00\xfe\xff", "UTF-32BE"),
    (b"\xff\xfe", "UTF-16LE"),
    (b"\xfe\xff", "UTF-16BE"),
)
#: which of the first four bytes are NUL, for JSON (ASCII first) in a wide encoding without BOM
_WIDE_NULS = {
    (True, True, True, False): "UTF-32BE",
    (False, True, True, True): "UTF-32LE",
    (True, False, True, False): "UTF-16BE",
    (False, True, False, True): "UTF-16LE",
}


def read_rows(path: Path) -> Iterator[Row | Issue]:
    """Yield the rows of one data file, and an :class:`Issue` for each bad line.

    A path that cannot be read, whose type is not one of :data:`SUFFIXES` (optionally followed by
    one of :data:`COMPRESSED`), whose bytes are compressed under a plain name or are not in the
    compression its name says, or whose text is UTF-16/UTF-32, gives one file-level
    :class:`Issue` (``line`` is ``None``) and no row.
    """
    problem = unreadable(path)
    if problem is not None:
        yield problem
        return
    kind, packed = data_suffix(path)
    if kind is None:
        suffix = "".join(path.suffixes[-2:]) if packed else path.suffix
        yield issue_at(
            path,
            None,
            f"unsupported file type {suffix.lower() or '(no suffix)'!r}; prbench reads "
            f"{', '.join(SUFFIXES)} files (JSON and JSON Lines also as "
            f"{', '.join(COMPRESSED)})",
            "unsupported-file-type",
        )
    elif kind == ".parquet":
        yield from _read_parquet(path)
    else:
        yield from _read_text_file(path, kind, packed)


def data_suffix(path: Path) -> tuple[str | None, str | None]:
    """``(type, compression)`` from a file name: ``(".jsonl", ".gz")`` for ``d.jsonl.gz``.

    ``type`` is one of :data:`SUFFIXES` or ``None`` (not a data file); ``compression`` one of
    :data:`COMPRESSED` or ``None``. Parquet is never read compressed (it compresses inside).
    """
    last = path.suffix.lower()
    if last in COMPRESSED:
        inner = Path(path.stem).suffix.lower()
        return (inner if inner in SUFFIXES and inner != ".parquet" else None), last
    return (last if last in SUFFIXES else None), None


def _compression(head: bytes) -> tuple[str, str | None, str] | None:
    """``(name, suffix, tool)`` of the compression whose magic bytes start ``head``."""
    for magic, name, suffix, tool in _MAGIC:
        if head.startswith(magic):
            return name, suffix, tool
    return None


def _compression_problem(path: Path, packed: str | None, head: bytes) -> Issue | None:
    """An issue when the bytes are compressed under a plain name, or not as the name says.

    A compressed payload under a plain name is an error rather than read with a warning: the
    name is wrong, and other tools will misread the file too.
    """
    found = _compression(head)
    if packed is None and found is not None:
        name, suffix, tool = found
        fix = (
            f"rename it to {shown(path.name + suffix, limit=PATH_LIMIT)} (prbench reads "
            f"{suffix} files as they are) or decompress it (`{tool}`)"
            if suffix
            else f"decompress it first (`{tool}`)"
        )
        return issue_at(
            path, None, f"holds {name}-compressed data, not text, under a plain name; {fix}",
            "compressed-file",
        )
    if packed is not None and (found is None or found[1] != packed):
        expected = next(name for _, name, suffix, _ in _MAGIC if suffix == packed)
        what = f"{found[0]}-compressed data" if found else "not compressed"
        return issue_at(
            path, None, f"is named {packed} but is not {expected} data ({what}); rename it",
            "wrong-compression",
        )
    return None


def _wide_encoding(head: bytes) -> str | None:
    """The UTF-16/UTF-32 encoding of text starting with ``head`` (``"UTF-16LE"``), or ``None``.

    By byte-order mark, else by where the NUL bytes of the first four bytes are (JSON starts with
    an ASCII character, which takes one code unit).
    """
    for bom, name in _WIDE_BOMS:
        if head.startswith(bom):
            return f"{name} (with a byte-order mark)"
    if len(head) >= 4:
        name = _WIDE_NULS.get(tuple(b == 0 for b in head[:4]))  # type: ignore[arg-type]
        if name is not None:
            return f"{name} (without a byte-order mark)"
    return None


def _start(path: Path, head: bytes) -> tuple[bytes, list[Issue]]:
    """``head`` without a UTF-8 BOM, and the issues of its start (BOM, wide encoding)."""
    wide = _wide_encoding(head)
    if wide is not None:
        name = wide.split(" ", 1)[0]
        return b"", [
            issue_at(
                path,
                None,
                f"the file is encoded as {wide}, not UTF-8; re-save it as UTF-8 (e.g. "
                f"`iconv -f {name} -t UTF-8`)",
                "wrong-encoding",
            )
        ]
    if head.startswith(BOM):
        bom = issue_at(
            path,
            1,
            "the file starts with a UTF-8 byte-order mark (BOM); save it without one",
            "bom",
        )
        return head[len(BOM) :], [bom]
    return head, []


def _read_text_file(path: Path, kind: str, packed: str | None) -> Iterator[Row | Issue]:
    """Rows of a (possibly compressed) JSON or JSON Lines file."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        yield os_issue(path, exc)
        return
    with handle:
        try:
            problem = _compression_problem(path, packed, handle.read(8))
            handle.seek(0)
        except OSError as exc:
            yield os_issue(path, exc)
            return
        if problem is not None:
            yield problem
            return
        stream: IO[bytes] = handle if packed is None else _OPENERS[packed](handle)
        try:
            if kind == ".json":
                yield from _read_json(path, stream)
            else:
                yield from _read_jsonl(path, stream)
        except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
            if packed is None and isinstance(exc, OSError):
                yield os_issue(path, exc)
            else:
                yield issue_at(
                    path,
                    None,
                    f"the {packed} data is corrupt or cut short ({exc}); re-create the file "
                    "(rows before the damage, if any, were read)",
                    "bad-compression",
                )


def scan_folder(folder: Path, named: Collection[str] = ()) -> tuple[list[Path], list[Issue]]:
    """The files of a folder to read, and an :class:`Issue` for every entry that is skipped.

    A file with a data suffix (:data:`SUFFIXES`; JSON also compressed, ``d.jsonl.gz``) is read
    even when it is a broken link, a loop or a directory, so that reading reports why it cannot
    be read; so is a file whose name before the first dot is in ``named`` (a domain:
    ``Society_and_Culture.csv``) unless it is a backup copy. Everything else (sub-folders, other
    file types, backups, hidden files) is skipped; the
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
            skipped.append(issue_at(entry, None, f"skipped: {reason[0]}", reason[1]))
    return files, skipped


def _skip_reason(entry: Path, named: Collection[str]) -> tuple[str, str] | None:
    """Why a folder entry is not read, as ``(reason, code)``; ``None`` to read it."""
    name = entry.name
    suffix = entry.suffix.lower()
    if name.startswith("."):
        return "a hidden file", "skipped-hidden"
    if data_suffix(entry)[0] is not None:
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
        f"{', '.join(SUFFIXES)}, JSON also as {', '.join(COMPRESSED)})",
        "skipped-file-type",
    )


class _KeyCounter:
    """An ``object_pairs_hook`` that builds dicts and remembers every key given twice."""

    def __init__(self) -> None:
        self.found: list[tuple[dict[str, Any], str, list[Any]]] = []

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(pairs)
        if len(out) != len(pairs):
            values: dict[str, list[Any]] = {}
            for key, value in pairs:
                values.setdefault(key, []).append(value)
            self.found += [(out, k, v) for k, v in values.items() if len(v) > 1]
        return out


def _decode_json(text: str) -> tuple[Any, str | None, str | None, _KeyCounter]:
    """Decode JSON text: ``(data, None, None, keys)``, or ``(None, message, code, keys)``.

    The second form is for input ``json`` rejects beyond syntax (nesting, long integers);
    ``keys.found`` lists the keys given twice in an object.

    Raises:
        json.JSONDecodeError: a syntax error.
    """
    keys = _KeyCounter()
    try:
        return json.loads(text, object_pairs_hook=keys), None, None, keys
    except json.JSONDecodeError:
        raise
    except RecursionError:
        return (
            None,
            "JSON nested too deeply to read (arrays/objects inside each other beyond Python's "
            "recursion limit)",
            "too-deeply-nested",
            keys,
        )
    except ValueError as exc:  # an integer longer than Python's int-string limit
        if "integer string conversion" not in str(exc):
            return None, f"a value that cannot be read: {exc}", "unreadable-value", keys
        return (
            None,
            f"an integer with more than {sys.get_int_max_str_digits()} digits (too long to "
            "read); write long ids as strings",
            "number-too-long",
            keys,
        )


def _syntax(exc: json.JSONDecodeError) -> str:
    """``json``'s message with its column (its messages may end in "at": no "at at column")."""
    return f"{exc.msg.removesuffix(' at')} at column {exc.colno}"


def _duplicate_issues(
    path: Path, line: int, item: Any, keys: _KeyCounter, unit: str = "line"
) -> list[Issue]:
    """One ``duplicate-key`` issue per key given twice inside ``item`` (a row), or none."""
    if not keys.found:
        return []
    paths = _object_paths(item, {id(obj) for obj, _, _ in keys.found})
    rid = item.get("id") if isinstance(item, dict) else None
    rid = str(rid) if isinstance(rid, str | int) and not isinstance(rid, bool) else None
    issues = []
    for obj, key, values in keys.found:
        if id(obj) not in paths:
            continue
        where = paths[id(obj)]
        listed = ", ".join(short(v) for v in values)
        issues.append(
            Issue(
                str(path),
                line,
                rid,
                key if where is None else f"{where}.{key}",
                f"the key {shown(key)} appears {len(values)} times in one object (values "
                f"{listed}); JSON keeps only the last, so the others would be lost: keep one",
                "duplicate-key",
                unit,
            )
        )
    return issues


def _object_paths(data: Any, targets: set[int]) -> dict[int, str | None]:
    """The dotted field path of each object in ``data`` whose ``id()`` is in ``targets``."""
    out: dict[int, str | None] = {}
    stack: list[tuple[str | None, Any]] = [(None, data)]
    while stack:
        field, value = stack.pop()
        if isinstance(value, dict):
            if id(value) in targets:
                out[id(value)] = field
            stack += [(str(k) if field is None else f"{field}.{k}", v) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(f"{field or ''}[{i}]", v) for i, v in enumerate(value)]
    return out


def _lines(head: bytes, stream: IO[bytes]) -> Iterator[tuple[bytes, bool]]:
    r"""The lines of ``head`` followed by the rest of ``stream``, read in :data:`CHUNK_BYTES`.

    Each line comes without its end, with a flag that is True only for a last line that has no
    line end (the data stops inside it). A ``\r`` at the end of a block is held back until the
    next block shows whether a ``\n`` follows.
    """
    carry: list[bytes] = []
    blocks = itertools.chain([head], iter(functools.partial(stream.read, CHUNK_BYTES), b""))
    for block in blocks:
        if b"\n" not in block and b"\r" not in block:
            carry.append(block)
            continue
        data = b"".join(carry) + block
        held = b"\r" if data.endswith(b"\r") else b""
        parts = _LINE_END.split(data[: len(data) - len(held)])
        carry = [parts.pop() + held]
        for part in parts:
            yield part, False
    parts = _LINE_END.split(b"".join(carry))
    last = parts.pop()
    for part in parts:
        yield part, False
    if last:
        yield last, True


def _read_jsonl(path: Path, stream: IO[bytes]) -> Iterator[Row | Issue]:
    head, issues = _start(path, stream.read(CHUNK_BYTES))
    yield from issues
    if issues and issues[0].code == "wrong-encoding":
        return
    name = str(path)  # one string shared by every row of the file
    blanks: list[int] = []  # blank lines not reported yet: an all-blank file is "empty-file"
    content = False
    for number, (chunk, unterminated) in enumerate(_lines(head, stream), start=1):
        if not chunk.strip():
            blanks.append(number)
            continue
        if not content and _ARRAY_START.match(chunk):  # one issue, not one per line
            yield issue_at(
                path,
                None,
                "this is a JSON array, not JSON Lines; save it as .json or one object per line",
                "json-array-in-jsonl",
            )
            return
        content = True
        for blank in blanks:
            yield issue_at(path, blank, "blank line (remove it)", "blank-line")
        blanks.clear()
        yield from _jsonl_line(path, name, number, chunk, unterminated)
    if not content:
        yield issue_at(path, None, "the file is empty", "empty-file")
        return
    for blank in blanks:
        yield issue_at(path, blank, "blank line (remove it)", "blank-line")


def _jsonl_line(
    path: Path, name: str, number: int, chunk: bytes, unterminated: bool
) -> Iterator[Row | Issue]:
    """The row, or the issues, of one non-blank line."""
    try:
        text = chunk.decode("utf-8")
    except UnicodeDecodeError as exc:
        yield issue_at(
            path,
            number,
            f"bytes that are not UTF-8 at column {exc.start + 1} "
            f"({chunk[exc.start : exc.end]!r}); re-encode the file as UTF-8",
            "not-utf8",
        )
        return
    if not text.strip():
        yield issue_at(path, number, "blank line (remove it)", "blank-line")
        return
    try:
        data, message, code, keys = _decode_json(text)
    except json.JSONDecodeError as exc:
        at_end = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        if unterminated and at_end:
            yield issue_at(
                path,
                number,
                f"truncated JSON: the file ends in the middle of a record ({_syntax(exc)})",
                "truncated-json",
            )
        else:
            yield issue_at(path, number, f"invalid JSON: {_syntax(exc)}", "invalid-json")
        return
    if message is not None and code is not None:
        yield issue_at(path, number, message, code)
        return
    duplicates = _duplicate_issues(path, number, data, keys)
    if duplicates:
        yield from duplicates
        return
    yield Row(name, number, data)


def _read_json(path: Path, stream: IO[bytes]) -> Iterator[Row | Issue]:
    raw, issues = _start(path, stream.read())
    yield from issues
    if issues and issues[0].code == "wrong-encoding":
        return
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        yield issue_at(
            path, line, f"bytes that are not UTF-8 ({raw[exc.start : exc.end]!r})", "not-utf8"
        )
        return
    del raw
    if not text.strip():
        yield issue_at(path, None, "the file is empty", "empty-file")
        return
    try:
        data, message, code, keys = _decode_json(text)
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        yield issue_at(
            path,
            exc.lineno,
            (
                "truncated JSON: the file ends in the middle of a record"
                if truncated
                else "invalid JSON"
            )
            + f" ({_syntax(exc)})",
            "truncated-json" if truncated else "invalid-json",
        )
        return
    if message is not None and code is not None:
        yield issue_at(path, None, message, code)
        return
    rows = data["data"] if isinstance(data, dict) and isinstance(data.get("data"), list) else data
    if not isinstance(rows, list):
        yield issue_at(
            path,
            None,
            'a .json file must hold a list of records (or {"data": [...]})',
            "not-a-list",
        )
        return
    if rows is not data:  # keys given twice in the {"data": ...} wrapper itself
        outer = _KeyCounter()
        outer.found = [f for f in keys.found if f[0] is data]
        for issue in _duplicate_issues(path, 0, data, outer):
            yield dataclasses.replace(issue, line=None, record_id=None)
    if not rows:
        yield issue_at(path, None, "holds no records (an empty list)", "no-records")
        return
    name = str(path)
    for index, item in enumerate(rows, start=1):
        duplicates = _duplicate_issues(path, index, item, keys, unit="row") if keys.found else []
        if duplicates:
            yield from duplicates
        else:
            yield Row(name, index, item, unit="row")


def _read_parquet(path: Path) -> Iterator[Row | Issue]:
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow ships with datasets
        yield issue_at(
            path, None, "reading parquet needs pyarrow (pip install pyarrow)", "no-pyarrow"
        )
        return
    name, index = str(path), 0
    try:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=256):  # a batch at a time
            for item in batch.to_pylist():
                index += 1
                yield Row(name, index, item, unit="row")
    except Exception as exc:
        yield issue_at(path, None, f"unreadable parquet file: {exc}", "bad-parquet")
        return
    if index == 0:
        yield issue_at(path, None, "holds no records (0 rows)", "no-records")
