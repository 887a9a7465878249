"""Where prbench writes: output locations checked before any work, every file written atomically.

A command checks each place it will write (:func:`check_output_dir`, :func:`check_output_file`)
before it scores anything: a path that is a file where a folder is needed (or the reverse), a
folder that cannot be created, or one that is read-only is one :class:`OutputPathError` naming the
flag and the path, instead of a traceback after the run.

Every file is written to a hidden temporary name in its own folder and renamed over the target
(:func:`write_text`, :func:`open_atomic`), with any secret prbench holds masked
(:mod:`prbench.redaction`; text files): a reader never sees half a file, and a failed write (a
full disk, a file-size limit, a permission) leaves no file behind and is one
:class:`OutputWriteError` naming the file. The file gets the permissions an ordinary ``open``
would give it (``0666`` less the umask, so ``0644`` typically, readable by teammates on a shared
machine; a file being replaced keeps its mode), not the ``0600`` of the temporary file. Python
ignores ``SIGXFSZ``, so a write beyond ``ulimit -f`` raises ``OSError(EFBIG)`` and is caught like
any other failed write. A whole JSON Lines file goes through :func:`write_jsonl` (the ``jsonlines``
package's writer on the atomic file); appending to a file that is being resumed stays
:func:`append_line`, which syncs each line and names the file when a write fails, something
``jsonlines`` does not do. Files written by another library (lm-eval's results and samples files)
are read back with :func:`check_json_file` / :func:`check_jsonl_file`.

Ground floor: imports nothing from prbench but :mod:`prbench.errors` and
:mod:`prbench.redaction`.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from prbench.errors import PrbenchUserError

__all__ = [
    "OutputPathError",
    "OutputWriteError",
    "append_failure",
    "append_line",
    "check_json_file",
    "check_jsonl_file",
    "check_output_dir",
    "check_output_file",
    "open_atomic",
    "write_failure",
    "write_jsonl",
    "write_text",
]

_HINTS = {
    errno.ENOSPC: "the disk is full",
    errno.EFBIG: "the file size limit (`ulimit -f`) was reached",
    errno.EDQUOT: "the disk quota is used up",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "the file system is read-only",
}


class OutputPathError(PrbenchUserError, OSError):
    """An output location that cannot be used (a file, read-only, not creatable)."""


class OutputWriteError(PrbenchUserError, OSError):
    """A file that could not be written in full; it was not left behind half-written."""


def _reason(exc: OSError) -> str:
    hint = _HINTS.get(exc.errno or 0)
    text = exc.strerror or str(exc) or type(exc).__name__
    return f"{text} ({hint})" if hint and hint.lower() != text.lower() else text


def write_failure(path: str | Path, exc: OSError) -> OutputWriteError:
    """The error for a failed write of ``path``: names the file and why, says nothing was kept."""
    return OutputWriteError(f"could not write {path}: {_reason(exc)}; the file was not written")


def append_failure(path: str | Path, exc: OSError) -> OutputWriteError:
    """The error for a failed append to a resumable file (``prbench rank``, ``prbench build``)."""
    return OutputWriteError(
        f"could not append to {path}: {_reason(exc)}; the lines written before it are kept, "
        "and the same command continues from them once there is room"
    )


def append_line(handle: IO[bytes], text: str, path: str | Path) -> None:
    """Append ``text`` to an unbuffered binary ``handle`` (``open(path, "ab", buffering=0)``).

    Nothing is held in a buffer, so a failed write raises here (and not again when the file is
    closed), and the lines before it are on disk.

    Raises:
        OutputWriteError: the write failed (:func:`append_failure`).
    """
    from prbench.redaction import redact_text, warn_masked

    masked = redact_text(text)  # no secret reaches the disk
    warn_masked(str(path), text, masked)
    data = memoryview(masked.encode("utf-8"))
    try:
        while data:
            written = handle.write(data)
            if not written:
                raise OSError(errno.EIO, "nothing written")
            data = data[written:]
    except OSError as exc:
        raise append_failure(path, exc) from None


def _nearest_existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (``.`` for a relative path with none)."""
    current = path
    while not current.exists() and not current.is_symlink():
        parent = current.parent
        if parent == current:
            break
        current = parent
    return current


def _probe(folder: Path, flag: str, target: Path) -> None:
    """Create and remove a file in ``folder``: the only check that root, ACLs and mounts obey."""
    try:
        fd, name = tempfile.mkstemp(prefix=".prbench-probe-", dir=folder)
    except OSError as exc:
        raise OutputPathError(
            f"{flag} {target}: cannot write in {folder}: {_reason(exc)}; choose a writable "
            "folder"
        ) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(name)


def check_output_dir(path: str | Path, *, flag: str = "-o/--output_path") -> Path:
    """Check that ``path`` is, or can become, a writable folder; create nothing.

    Args:
        path: the output folder.
        flag: the option that named it, shown in the error.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OutputPathError: ``path`` (or a folder above it) is a file, or the nearest existing
            folder is not writable.
    """
    target = Path(path)
    if str(path) == "":
        raise OutputPathError(f"{flag} is empty: name an output folder")
    existing = _nearest_existing(target)
    if existing.exists() and not existing.is_dir():
        what = "is a file" if existing == target else f"is under {existing}, which is a file"
        raise OutputPathError(
            f"{flag} {target} {what}, not a folder; choose a folder (it is created if missing)"
        )
    if not existing.exists():  # a broken symbolic link on the way
        raise OutputPathError(f"{flag} {target}: {existing} is a broken symbolic link")
    _probe(existing, flag, target)
    return target


def check_output_file(path: str | Path, *, flag: str = "-o/--output_path") -> Path:
    """Check that ``path`` can be written as a file: not a folder, its folder writable.

    Args:
        path: the output file.
        flag: the option that named it, shown in the error.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OutputPathError: ``path`` is a folder (or ends in ``/``), or its folder cannot be used.
    """
    target = Path(path)
    if str(path).endswith(("/", os.sep)) or target.is_dir():
        raise OutputPathError(
            f"{flag} {path} is a folder; this option names a file (e.g. {target / 'out.jsonl'})"
        )
    check_output_dir(target.parent, flag=f"{flag} {target}: its folder")
    return target


def _umask() -> int:
    """The process's umask, read without changing it where Linux tells it (``/proc``)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)  # elsewhere: the only portable way is to set it and put it back
    os.umask(mask)
    return mask


def _final_mode(target: Path) -> int:
    """The mode ``target`` gets: its current mode when it exists, else ``0666`` less the umask."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


@contextlib.contextmanager
def open_atomic(
    path: str | Path, mode: str = "w", *, encoding: str | None = "utf-8"
) -> Iterator[IO]:
    """Open a temporary file next to ``path`` for writing; renamed over ``path`` on success.

    The folder is created if missing. On any exception the temporary file is removed and
    ``path`` is left as it was; an :class:`OSError` (full disk, size limit, permission) becomes
    one :class:`OutputWriteError` naming ``path``.

    Args:
        path: the file to write.
        mode: ``"w"`` (text) or ``"wb"``.
        encoding: the text encoding (ignored in binary mode).

    Yields:
        The open temporary file.
    """
    target = Path(path)
    tmp: Path | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{target.name[:100]}.", suffix=".tmp",
                                    dir=target.parent)
        tmp = Path(name)
        binary = "b" in mode
        with os.fdopen(fd, mode, encoding=None if binary else encoding) as handle:
            masking = None if binary else _Redacting(handle)
            yield handle if masking is None else masking
            handle.flush()
            os.fchmod(handle.fileno(), _final_mode(target))
        if masking is not None and masking.masked:
            from prbench.redaction import warn_masked

            warn_masked(str(target), True, False)
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        if isinstance(exc, PrbenchUserError):
            raise
        raise write_failure(target, exc) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink()


class _Redacting:
    """A text file whose writes have the secrets prbench holds masked (:mod:`prbench.redaction`).

    Everything else is the file's own.
    """

    def __init__(self, handle: IO[str]) -> None:
        self._handle = handle
        #: whether a secret was masked in what was written
        self.masked = False

    def write(self, text: str) -> int:
        from prbench.redaction import redact_text

        masked = redact_text(text)
        self.masked = self.masked or masked != text
        self._handle.write(masked)
        return len(text)

    def writelines(self, lines: Iterator[str] | list[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> object:
        return getattr(self._handle, name)


def write_text(path: str | Path, text: str, *, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`open_atomic`); returns the path."""
    with open_atomic(path, "w", encoding=encoding) as handle:
        handle.write(text)
    return Path(path)


def write_jsonl(path: str | Path, rows: Iterable[Any]) -> Path:
    """Write ``rows`` as JSON Lines to ``path`` atomically (see :func:`open_atomic`).

    One JSON value per line, non-ASCII characters kept as they are (``ensure_ascii=False``), each
    line ended by a newline; the ``jsonlines`` writer does the lines.

    Returns:
        The path.
    """
    import jsonlines

    dumps = functools.partial(json.dumps, ensure_ascii=False)
    with open_atomic(path, "w") as handle, jsonlines.Writer(handle, dumps=dumps) as writer:
        writer.write_all(rows)
    return Path(path)


def _damaged(path: Path, what: str, problem: str) -> OutputWriteError:
    with contextlib.suppress(OSError):
        path.unlink()  # a cut file must not pass for a result
    return OutputWriteError(
        f"{what} {path} was not written in full ({problem}); it was removed. Is the disk full "
        "or a file size limit (`ulimit -f`) set?"
    )


def check_json_file(path: str | Path, *, what: str = "the file") -> Path:
    """Check that another writer left ``path`` as one complete JSON document.

    Raises:
        OutputWriteError: missing, or not valid JSON (cut short); a damaged file is removed.
    """
    target = Path(path)
    try:
        with target.open("rb") as handle:
            json.load(handle)
    except FileNotFoundError:
        raise OutputWriteError(f"{what} {target} was not written") from None
    except OSError as exc:
        raise OutputWriteError(f"{what} {target} cannot be read back: {_reason(exc)}") from None
    except ValueError as exc:
        raise _damaged(target, what, f"invalid JSON: {exc}") from None
    return target


def check_jsonl_file(path: str | Path, lines: int | None = None, *, what: str = "the file") -> Path:
    """Check that another writer left ``path`` as complete JSON Lines (``lines`` of them).

    Raises:
        OutputWriteError: missing, a line that is not valid JSON or not ended by a newline, or
            another number of lines than ``lines``; a damaged file is removed.
    """
    target = Path(path)
    count = 0
    try:
        with target.open("rb") as handle:
            for count, line in enumerate(handle, 1):
                if not line.endswith(b"\n"):
                    raise _damaged(target, what, f"line {count} is cut short")
                try:
                    json.loads(line)
                except ValueError as exc:
                    raise _damaged(target, what, f"line {count} is not valid JSON: {exc}") from None
    except FileNotFoundError:
        raise OutputWriteError(f"{what} {target} was not written") from None
    except OutputWriteError:
        raise
    except OSError as exc:
        raise OutputWriteError(f"{what} {target} cannot be read back: {_reason(exc)}") from None
    if lines is not None and count != lines:
        raise _damaged(target, what, f"{count} lines, expected {lines}")
    return target
