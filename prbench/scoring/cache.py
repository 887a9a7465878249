"""A persistent score cache shared by every scorer.

Scores live in one SQLite database (default ``<prbench cache>/scores/scores.sqlite``), keyed by

- the scorer's **fingerprint** — a hash of everything that changes its function: model and
  revision, dtype, scoring options, chat template (see :func:`fingerprint_of`), and
- a **key** — a hash of the exact model input (the token ids after templating and truncation, or
  the exact request text for scorers without a tokenizer; see :meth:`ScoreCache.make_key`).

The database runs in WAL mode, so any number of processes may read and write it at once (writers
queue on a lock with a timeout; readers never block). Scorers commit once per batch: a run killed
with ``kill -9`` keeps every batch it finished, and the rerun computes only what is missing.

Non-finite scores (NaN, inf) are returned to the caller but never cached, so a transient numeric
failure is retried on the next run rather than remembered. WAL needs a local file system (not
NFS); point ``path`` at local disk on clusters.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import struct
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from prbench.paths import cache_dir

#: Database schema version; a database with another version is refused rather than misread.
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS scorers (
    fingerprint TEXT PRIMARY KEY,
    description TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS scores (
    fingerprint TEXT NOT NULL,
    key TEXT NOT NULL,
    score REAL NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (fingerprint, key)
) WITHOUT ROWID;
"""

# SQLite limits the number of bound variables per statement (999 in old builds).
_CHUNK = 500


def default_cache_path() -> Path:
    """``<prbench cache dir>/scores/scores.sqlite``."""
    return cache_dir("scores") / "scores.sqlite"


def fingerprint_of(description: Mapping[str, Any]) -> str:
    """A stable hex fingerprint of a JSON-ready description (key order does not matter)."""
    text = json.dumps(description, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ScoreCache:
    """Scores of one scorer (one fingerprint) in a shared SQLite file.

    Example::

        cache = ScoreCache(scorer.fingerprint, description={"model": "..."})
        key = ScoreCache.make_key(token_ids)
        hits = cache.get_many([key])
        cache.put_many([(key, 1.25)])

    The object may be used from several threads (a lock serialises its connection) and survives
    ``fork`` (the child opens its own connection).

    Args:
        fingerprint: the scorer's fingerprint (:func:`fingerprint_of` of its description).
        path: the SQLite file (default :func:`default_cache_path`); its folder is created.
        description: what the fingerprint stands for, stored once for inspection.
        timeout: seconds to wait for another process's write lock before failing.
    """

    def __init__(
        self,
        fingerprint: str,
        path: str | os.PathLike[str] | None = None,
        *,
        description: Mapping[str, Any] | None = None,
        timeout: float = 120.0,
    ) -> None:
        if not fingerprint:
            raise ValueError("a score cache needs a non-empty scorer fingerprint")
        self.fingerprint = fingerprint
        self.path = Path(path) if path else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._init_db()
        if description is not None:
            self._write(
                "INSERT OR IGNORE INTO scorers (fingerprint, description, created) "
                "VALUES (?, ?, ?)",
                [(fingerprint, json.dumps(description, sort_keys=True, default=str), time.time())],
            )

    # -- keys ------------------------------------------------------------------------------------

    @staticmethod
    def make_key(model_input: str | bytes | Sequence[int]) -> str:
        """Hash an exact model input: token ids (as 64-bit ints), bytes, or a string (UTF-8).

        The three kinds never collide (each is tagged before hashing).
        """
        h = hashlib.sha256()
        if isinstance(model_input, str):
            h.update(b"s")
            h.update(model_input.encode("utf-8"))
        elif isinstance(model_input, bytes | bytearray | memoryview):
            h.update(b"b")
            h.update(bytes(model_input))
        else:
            ids = list(model_input)
            h.update(b"t")
            h.update(struct.pack(f"<{len(ids)}q", *ids))
        return h.hexdigest()

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
                with self._lock:
                    conn = self._connect()
                    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                    if str(mode).lower() != "wal":
                        raise sqlite3.OperationalError(
                            f"cannot enable WAL mode on {self.path} (got {mode!r}); "
                            "put the score cache on a local file system"
                        )
                    conn.execute("PRAGMA synchronous = NORMAL")
                    conn.execute("BEGIN IMMEDIATE")
                    for statement in _SCHEMA.strip().split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    row = conn.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
                    if row is None:
                        conn.execute(
                            "INSERT INTO meta (name, value) VALUES ('schema', ?)",
                            (str(SCHEMA_VERSION),),
                        )
                    elif int(row[0]) != SCHEMA_VERSION:
                        conn.execute("ROLLBACK")
                        raise RuntimeError(
                            f"score cache {self.path} has schema {row[0]}, this prbench expects "
                            f"{SCHEMA_VERSION}; use another cache path or delete the file"
                        )
                    conn.execute("COMMIT")
                return
            except sqlite3.OperationalError as exc:
                conn = self._conn
                if conn is not None and conn.in_transaction:
                    conn.execute("ROLLBACK")
                if "locked" not in str(exc).lower() or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _write(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        if not rows:
            return
        with self._lock:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(sql, rows)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # -- reading and writing ---------------------------------------------------------------------

    def get_many(self, keys: Iterable[str]) -> dict[str, float]:
        """The cached scores among ``keys`` (missing keys are absent from the result)."""
        unique = list(dict.fromkeys(keys))
        found: dict[str, float] = {}
        with self._lock:
            conn = self._connect()
            for start in range(0, len(unique), _CHUNK):
                chunk = unique[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT key, score FROM scores WHERE fingerprint = ? AND key IN ({marks})",
                    (self.fingerprint, *chunk),
                ).fetchall()
                found.update((k, float(v)) for k, v in rows)
        return found

    def get(self, key: str) -> float | None:
        """One cached score, or ``None``."""
        return self.get_many([key]).get(key)

    def put_many(self, items: Iterable[tuple[str, float]] | Mapping[str, float]) -> int:
        """Store scores in one transaction (a crash keeps all of them or none).

        Returns:
            How many were stored (non-finite scores are skipped).
        """
        pairs = items.items() if isinstance(items, Mapping) else items
        now = time.time()
        rows = [
            (self.fingerprint, key, float(score), now)
            for key, score in pairs
            if math.isfinite(float(score))
        ]
        self._write(
            "INSERT OR REPLACE INTO scores (fingerprint, key, score, created) VALUES (?, ?, ?, ?)",
            rows,
        )
        return len(rows)

    def put(self, key: str, score: float) -> None:
        """Store one score."""
        self.put_many([(key, score)])

    def count(self) -> int:
        """Scores stored under this fingerprint."""
        with self._lock:
            row = self._connect().execute(
                "SELECT COUNT(*) FROM scores WHERE fingerprint = ?", (self.fingerprint,)
            ).fetchone()
        return int(row[0])

    def __len__(self) -> int:
        return self.count()

    def clear(self) -> int:
        """Delete this fingerprint's scores; returns how many were deleted."""
        n = self.count()
        self._write("DELETE FROM scores WHERE fingerprint = ?", [(self.fingerprint,)])
        return n

    def description(self) -> dict[str, Any] | None:
        """The stored description of this fingerprint, if any."""
        with self._lock:
            row = self._connect().execute(
                "SELECT description FROM scorers WHERE fingerprint = ?", (self.fingerprint,)
            ).fetchone()
        return json.loads(row[0]) if row else None

    def close(self) -> None:
        """Close this process's connection (a later call reopens it)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self) -> ScoreCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ScoreCache({self.fingerprint[:12]}…, {str(self.path)!r})"

