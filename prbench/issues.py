r"""Problems found in input, and how names appear in their messages.

:class:`Issue` is one problem at a file, line (or row), record and field, with a stable code;
:class:`Row` one decoded object with its position. :func:`shown` and :func:`shown_path` render
ids, keys, values and paths inside messages: escaped (a newline or a bidi control cannot break or
disguise the line) and cut when long. :func:`unreadable` tells why a path is not a regular file
that can be read.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: longest id, key or value (characters) and path shown whole in a message
ID_LIMIT = 60
PATH_LIMIT = 300


def shown(value: object, *, limit: int = ID_LIMIT, quote: bool = True) -> str:
    r"""``value`` as it should appear inside a one-line message.

    Characters that are not printable (a newline, a tab, NUL, zero-width and bidi controls, a
    lone surrogate) are escaped as in ``repr`` (``\n``, ``\u202e``), so a name cannot break the
    line or disguise itself; text longer than ``limit`` characters is cut to its first ``limit``
    followed by ``…(N chars)``. ``quote`` puts the (cut) text in quotes like ``repr``, for ids,
    keys and values; paths are shown without quotes.
    """
    text = str(value)
    cut = text[:limit]
    tail = f"…({len(text)} chars)" if len(text) > limit else ""
    if quote:
        return repr(cut) + tail
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in cut) + tail


def shown_path(path: object) -> str:
    """A file or folder path inside a message (see :func:`shown`)."""
    return shown(os.fspath(path) if isinstance(path, os.PathLike) else path, limit=PATH_LIMIT,
                 quote=False)


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
        parts = [self.where()]
        if self.record_id is not None:
            parts.append(f"record {shown(self.record_id)}")
        if self.field:
            parts.append(f"field {shown(self.field, limit=2 * ID_LIMIT)}")
        return ": ".join(parts) + f": {self.message} [{self.code}]"

    def where(self) -> str:
        """``file:line``, ``file: row N`` or ``file``, the file shown by :func:`shown_path`."""
        name = shown_path(self.file)
        if self.line is None:
            return name
        return f"{name}: row {self.line}" if self.unit == "row" else f"{name}:{self.line}"


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


def issue_at(path: Path, line: int | None, message: str, code: str, unit: str = "line") -> Issue:
    """An :class:`Issue` at a file (``line`` None) or line/row, with no record or field."""
    return Issue(str(path), line, None, None, message, code, unit)


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
        where = shown_path(first.file)
        where = where if first.line is None else f"{where}:{first.line}"
        count = f"{len(members)} records, first at {where}" if len(members) > 1 else where
        what = f"field {shown(field, limit=2 * ID_LIMIT)}: " if field else ""
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
        return os_issue(path, exc)
    if not stat.S_ISREG(mode):
        return issue_at(
            path, None, f"is a {path_kind(mode)}, not a regular file of records", "not-a-file"
        )
    return None


def os_issue(path: Path, exc: OSError) -> Issue:
    """The file-level :class:`Issue` of an ``OSError`` met opening or reading ``path``."""
    if exc.errno == errno.ELOOP:
        return issue_at(
            path,
            None,
            "is a symbolic link loop (following it leads back to itself)",
            "symlink-loop",
        )
    if isinstance(exc, FileNotFoundError) and os.path.islink(path):
        return issue_at(
            path,
            None,
            f"is a broken symbolic link (its target "
            f"{shown(os.readlink(path), limit=PATH_LIMIT)} does not exist)",
            "broken-symlink",
        )
    if isinstance(exc, FileNotFoundError):
        return issue_at(path, None, "does not exist", "missing-file")
    if isinstance(exc, PermissionError):
        return issue_at(path, None, "cannot be read: permission denied", "unreadable-file")
    return issue_at(path, None, f"cannot be read: {exc.strerror or exc}", "unreadable-file")


def short(value: Any, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters, for a value shown in a message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
