"""The one on-disk store behind every prbench cache (scores, embeddings, HTTP replies, plans).

A :class:`SQLiteStore` is one SQLite file in WAL mode: any number of processes may read and write
it at once (writers queue on SQLite's lock with a busy timeout, readers never block), every write
is one transaction (a crash keeps all of it or none), ``IN (...)`` look-ups are chunked under
SQLite's variable limit, and the file carries a schema version per *namespace* (one per cache kind)
so a file written by an incompatible prbench is refused rather than misread.

Each cache is a thin typed view over a store: it declares its namespace, its schema version and
its tables, and keeps its own API (:class:`prbench.scoring.cache.ScoreCache`,
:class:`prbench.profiles.embed_cache.EmbeddingCache`, :class:`prbench.backends.cache.ResponseCache`,
:class:`prbench.judges.planner.PlanCache`).

A file that is not a database, or a damaged one, raises :class:`StoreError` naming the file and the
two ways out: turn that cache off (the view says how) or move the file aside. WAL needs a local
file system (not NFS).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from prbench.errors import PrbenchUserError

T = TypeVar("T")

#: Version of the store's own layout (the ``meta`` table); bumped only if that changes.
STORE_SCHEMA = 1

#: Most bound variables per ``IN (...)`` query (old SQLite builds allow 999 in all).
IN_CHUNK = 500

_META = "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)"


class StoreError(PrbenchUserError, RuntimeError):
    """A cache file that cannot be used (damaged, not a database, or another schema)."""


def _is_busy(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _is_write_failure(exc: BaseException) -> bool:
    """A write the operating system refused (full disk, ``ulimit -f``, an I/O error), not damage."""
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    if name == "SQLITE_FULL" or name.startswith("SQLITE_IOERR"):
        return True
    text = str(exc).lower()
    return "disk i/o error" in text or "database or disk is full" in text


class SQLiteStore:
    """One SQLite file holding one or more namespaced tables (see the module docstring).

    The object may be used from several threads (a lock serialises its connection) and survives
    ``fork`` (the child opens its own connection).

    Args:
        path: the SQLite file; its folder is created.
        namespace: the cache kind using it (``scores``, ``embeddings``, ...), for the schema check.
        schema_version: that namespace's table layout version.
        tables: ``CREATE TABLE IF NOT EXISTS ...`` statements of the namespace's tables.
        label: what the file is, for messages (``"score cache"``).
        off_hint: how to turn this cache off (``"cache=false"``), for the corrupt-file message.
        timeout: seconds to wait for another process's write lock.

    Raises:
        StoreError: the file is damaged, not a database, or of another schema version.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        namespace: str,
        schema_version: int,
        tables: Sequence[str],
        label: str,
        off_hint: str,
        timeout: float = 120.0,
    ) -> None:
        self.path = Path(path)
        self.namespace = namespace
        self.schema_version = int(schema_version)
        self.label = label
        self.off_hint = off_hint
        self.timeout = timeout
        self._tables = tuple(tables)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._make_folder()
        self._init_db()

    def _make_folder(self) -> None:
        """Create the file's folder; a path that cannot hold the file is one :class:`StoreError`."""
        if self.path.is_dir():
            raise StoreError(
                f"{self.label} {self.path} is a folder; name a file (e.g. "
                f"{self.path / 'cache.sqlite'}) or run without it ({self.off_hint})"
            )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a file where a folder must be, no permission, ...
            blocker = next((p for p in self.path.parents if p.exists()), None)
            why = (f"{blocker} is a file" if blocker is not None and not blocker.is_dir()
                   else exc.strerror or str(exc))
            raise StoreError(
                f"{self.label} {self.path}: cannot create its folder {self.path.parent} ({why}); "
                f"name another file or run without it ({self.off_hint})"
            ) from exc

    # -- errors ----------------------------------------------------------------------------------

    def corrupt(self, exc: BaseException) -> StoreError:
        """The error for an unusable file: names it and the two ways out."""
        return StoreError(
            f"{self.label} {self.path} is unusable ({type(exc).__name__}: {exc}). Either run "
            f"without it ({self.off_hint}) or move the file aside (e.g. `mv {self.path} "
            f"{self.path}.broken`) so prbench starts a new one"
        )

    def write_failed(self, exc: BaseException) -> StoreError:
        """The error for a write the disk refused: the file is fine, nothing to move aside."""
        return StoreError(
            f"cannot write {self.label} {self.path} ({exc}): the disk is full, a file size "
            "limit (ulimit -f) was reached or the file system failed; what was written before "
            "is kept, so make room (or raise the limit) and run again to go on from there, or "
            f"run without it ({self.off_hint})"
        )

    def guard(self, fn: Callable[[], T]) -> T:
        """Run ``fn``; a damaged database or a refused write becomes a :class:`StoreError`.

        A write lock held too long by another process stays a ``sqlite3.OperationalError``.
        """
        try:
            return fn()
        except StoreError:
            raise
        except sqlite3.DatabaseError as exc:
            if _is_busy(exc):
                raise
            if _is_write_failure(exc):
                raise self.write_failed(exc) from exc
            raise self.corrupt(exc) from exc

    # -- connection ------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            conn = sqlite3.connect(
                self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def _init_db(self) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                self.guard(self._create)
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _create(self) -> None:
        with self._lock:
            conn = self._connect()
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(
                        f"cannot enable WAL mode on {self.label} {self.path} (got {mode!r}); "
                        "put it on a local file system"
                    )
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(_META)
                self._check_version(conn, "schema", STORE_SCHEMA)
                self._check_version(conn, f"schema:{self.namespace}", self.schema_version)
                for statement in self._tables:
                    conn.execute(statement)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _check_version(self, conn: sqlite3.Connection, name: str, expected: int) -> None:
        row = conn.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        if row is None:
            conn.execute("INSERT INTO meta (name, value) VALUES (?, ?)", (name, str(expected)))
            return
        if str(row[0]) != str(expected):
            raise StoreError(
                f"{self.label} {self.path} has schema {row[0]} ({name}), this prbench expects "
                f"{expected}; use another file ({self.off_hint} turns the cache off) or move "
                "this one aside"
            )

    # -- reading and writing ---------------------------------------------------------------------

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of one ``SELECT``."""

        def run() -> list[tuple[Any, ...]]:
            with self._lock:
                return self._connect().execute(sql, tuple(params)).fetchall()

        return self.guard(run)

    def query_in(
        self, sql: str, keys: Iterable[Any], params: Sequence[Any] = ()
    ) -> list[tuple[Any, ...]]:
        """Rows of a ``SELECT`` whose ``{marks}`` placeholder is an ``IN`` list of ``keys``.

        ``params`` are bound before the keys; the keys go in chunks of :data:`IN_CHUNK`.
        """
        unique = list(dict.fromkeys(keys))

        def run() -> list[tuple[Any, ...]]:
            rows: list[tuple[Any, ...]] = []
            with self._lock:
                conn = self._connect()
                for start in range(0, len(unique), IN_CHUNK):
                    chunk = unique[start : start + IN_CHUNK]
                    text = sql.format(marks=",".join("?" * len(chunk)))
                    rows.extend(conn.execute(text, (*params, *chunk)).fetchall())
            return rows

        return self.guard(run)

    def write(self, sql: str, rows: Iterable[Sequence[Any]]) -> int:
        """Run ``executemany`` in one transaction; returns the number of rows given.

        Text values have the secrets prbench holds masked (:mod:`prbench.redaction`): no cache
        keeps a key a server echoed.
        """
        from prbench.redaction import known_secrets, redact

        secrets = known_secrets()
        rows = [tuple(redact(list(r), secrets)) if secrets else tuple(r) for r in rows]
        if not rows:
            return 0

        def run() -> int:
            with self._lock:
                conn = self._connect()
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany(sql, rows)
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            return len(rows)

        return self.guard(run)

    def get_meta(self, name: str) -> str | None:
        """A value of the ``meta`` table (``None`` when absent)."""
        rows = self.query("SELECT value FROM meta WHERE name = ?", (name,))
        return str(rows[0][0]) if rows else None

    def set_meta(self, name: str, value: str, *, replace: bool = False) -> None:
        """Store a ``meta`` value (kept if already there unless ``replace``)."""
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        self.write(f"{verb} INTO meta (name, value) VALUES (?, ?)", [(name, value)])

    def close(self) -> None:
        """Close this process's connection (a later call reopens it)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.namespace!r}, {str(self.path)!r})"


__all__ = ["IN_CHUNK", "STORE_SCHEMA", "SQLiteStore", "StoreError"]
