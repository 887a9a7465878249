"""A persistent score cache shared by every scorer.

Scores live in one SQLite database (default ``<prbench cache>/scores/scores.sqlite``), keyed by

- the scorer's **fingerprint** — a hash of everything that changes its function: model and
  revision, dtype, scoring options, chat template (see :func:`fingerprint_of`), and
- a **key** — a hash of the exact model input (the token ids after templating and truncation, or
  the exact request text for scorers without a tokenizer; see :meth:`ScoreCache.make_key`).

The database runs in WAL mode, so any number of processes may read and write it at once (writers
queue on a lock with a timeout; readers never block). Scorers commit once per batch: a run killed
with ``kill -9`` keeps every batch it finished, and the rerun computes only what is missing.

Next to the scores, the file keeps a scorer's **decisions** per fingerprint (see
:meth:`ScoreCache.decide`): choices made at run time that change the last bits of its scores, such
as whether prefix sharing passed its check. The first run under a fingerprint makes them; every
later run, a resumed one included, reuses them, so all scores under one fingerprint are computed
the same way.

Non-finite scores (NaN, inf) are returned to the caller but never cached, so a transient numeric
failure is retried on the next run rather than remembered. WAL needs a local file system (not
NFS); point ``path`` at local disk on clusters.

The file is a :class:`prbench.store.SQLiteStore` (namespace ``scores``): a damaged file raises
:class:`prbench.store.StoreError` naming it and the ways out (``cache=false``, or move it
aside), and a stored value that is not a finite number counts as a miss (recomputed and
overwritten).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import struct
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from prbench.hashing import folder_files, json_sha256, update_file_digest
from prbench.paths import cache_dir
from prbench.store import SQLiteStore, StoreError

logger = logging.getLogger(__name__)

#: Table layout version of the ``scores`` namespace; another version is refused, not misread.
SCHEMA_VERSION = 1

_TABLES = (
    "CREATE TABLE IF NOT EXISTS scorers (fingerprint TEXT PRIMARY KEY, "
    "description TEXT NOT NULL, created REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS scores (fingerprint TEXT NOT NULL, key TEXT NOT NULL, "
    "score REAL NOT NULL, created REAL NOT NULL, PRIMARY KEY (fingerprint, key)) WITHOUT ROWID",
    # per-request extras a scorer reports beside its score (a judge's per-order verdicts)
    "CREATE TABLE IF NOT EXISTS extras (fingerprint TEXT NOT NULL, key TEXT NOT NULL, "
    "extras TEXT NOT NULL, PRIMARY KEY (fingerprint, key)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS decisions (fingerprint TEXT NOT NULL, name TEXT NOT NULL, "
    "value TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (fingerprint, name)) WITHOUT ROWID",
)

#: How to turn the score cache off (named in the corrupt-file message).
OFF_HINT = "scorer option cache=false"


def default_cache_path() -> Path:
    """``<prbench cache dir>/scores/scores.sqlite``."""
    return cache_dir("scores") / "scores.sqlite"


def fingerprint_of(description: Mapping[str, Any]) -> str:
    """A stable hex fingerprint of a JSON-ready description (key order does not matter).

    The SHA-256 of its compact, ASCII-escaped canonical JSON (:func:`prbench.hashing.json_sha256`).
    """
    return json_sha256(description, compact=True, ascii=True)


def _file_digest(path: Path) -> str:
    """A file's short identity: its content (first and last 64 KiB plus mtime when large), size."""
    h = hashlib.sha256()
    update_file_digest(h, path, large="ends")
    h.update(str(path.stat().st_size).encode())
    return h.hexdigest()[:16]


def model_identity(pretrained: str, revision: str) -> dict[str, Any]:
    """What identifies the weights: a local folder's files, or a hub id with its commit.

    A folder is described by each file's size and a hash (full for files up to 1 MiB; the first
    and last 64 KiB plus the modification time for larger ones). A hub id is resolved in the
    local hub cache to the commit its revision points at.
    """
    path = Path(pretrained).expanduser()
    if path.is_dir():
        files = {str(p.relative_to(path)): _file_digest(p)
                 for p in folder_files(path, hidden="name")}
        return {"path": str(path.resolve()), "files": files}
    commit = None
    try:
        from transformers.utils import cached_file

        config_path = cached_file(pretrained, "config.json", revision=revision)
        if config_path:
            parent = Path(config_path).parent
            commit = parent.name if parent.parent.name == "snapshots" else None
    except Exception as exc:  # not downloaded yet / offline: the revision string stands in
        logger.debug("could not resolve %s@%s in the hub cache: %s", pretrained, revision, exc)
    return {"hub_id": pretrained, "revision": revision, "commit": commit}


def _number(value: Any) -> float | None:
    """A stored score as a finite float, or ``None`` (text, NULL, blobs, NaN count as misses)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    out = float(value)
    return out if math.isfinite(out) else None


class ScoreCache:
    """Scores of one scorer (one fingerprint) in a shared SQLite file.

    Example::

        cache = ScoreCache(scorer.fingerprint(), description={"model": "..."})
        key = ScoreCache.make_key(token_ids)
        hits = cache.get_many([key])
        cache.put_many([(key, 1.25)])

    The object may be used from several threads and survives ``fork`` (see
    :class:`prbench.store.SQLiteStore`).

    Args:
        fingerprint: the scorer's fingerprint (:func:`fingerprint_of` of its description).
        path: the SQLite file (default :func:`default_cache_path`); its folder is created.
        description: what the fingerprint stands for, stored once for inspection.
        timeout: seconds to wait for another process's write lock before failing.

    Raises:
        prbench.store.StoreError: the file is damaged, not a database, or of another schema.
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
        self.timeout = timeout
        self.store = SQLiteStore(
            self.path, namespace="scores", schema_version=SCHEMA_VERSION, tables=_TABLES,
            label="score cache", off_hint=OFF_HINT, timeout=timeout,
        )
        if description is not None:
            self.store.write(
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

    # -- reading and writing ---------------------------------------------------------------------

    def get_many(self, keys: Iterable[str]) -> dict[str, float]:
        """The cached scores among ``keys`` (missing keys are absent from the result).

        A stored value that is not a finite number (text, NULL, ...) is left out: the caller
        recomputes it and :meth:`put_many` overwrites it.
        """
        rows = self.store.query_in(
            "SELECT key, score FROM scores WHERE fingerprint = ? AND key IN ({marks})",
            keys, (self.fingerprint,),
        )
        found: dict[str, float] = {}
        for key, value in rows:
            number = _number(value)
            if number is not None:
                found[key] = number
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
        return self.store.write(
            "INSERT OR REPLACE INTO scores (fingerprint, key, score, created) VALUES (?, ?, ?, ?)",
            rows,
        )

    def put(self, key: str, score: float) -> None:
        """Store one score."""
        self.put_many([(key, score)])

    def put_extras(self, items: Mapping[str, Any]) -> int:
        """Store JSON-ready per-request extras (kept beside the scores of the same keys).

        Returns:
            How many were stored.
        """
        rows = [
            (self.fingerprint, key, json.dumps(value, sort_keys=True, default=str))
            for key, value in items.items()
        ]
        return self.store.write(
            "INSERT OR REPLACE INTO extras (fingerprint, key, extras) VALUES (?, ?, ?)", rows
        )

    def get_extras(self, keys: Iterable[str]) -> dict[str, Any]:
        """The stored extras among ``keys`` (missing or unreadable ones are absent)."""
        rows = self.store.query_in(
            "SELECT key, extras FROM extras WHERE fingerprint = ? AND key IN ({marks})",
            keys, (self.fingerprint,),
        )
        found: dict[str, Any] = {}
        for key, text in rows:
            try:
                found[key] = json.loads(text)
            except (TypeError, ValueError):
                continue
        return found

    def count(self) -> int:
        """Scores stored under this fingerprint."""
        rows = self.store.query(
            "SELECT COUNT(*) FROM scores WHERE fingerprint = ?", (self.fingerprint,)
        )
        return int(rows[0][0])

    def __len__(self) -> int:
        return self.count()

    def clear(self) -> int:
        """Delete this fingerprint's scores, extras and decisions; returns how many scores went."""
        n = self.count()
        for table in ("scores", "extras", "decisions"):
            self.store.write(f"DELETE FROM {table} WHERE fingerprint = ?", [(self.fingerprint,)])
        return n

    # -- decisions -------------------------------------------------------------------------------

    def decisions(self) -> dict[str, Any]:
        """The decisions stored under this fingerprint (name to JSON value).

        A stored value that is not valid JSON is left out (the scorer then decides again and
        :meth:`decide` keeps the first value written, so such a row is never replaced: clear the
        fingerprint to start over).
        """
        rows = self.store.query(
            "SELECT name, value FROM decisions WHERE fingerprint = ?", (self.fingerprint,)
        )
        found: dict[str, Any] = {}
        for name, value in rows:
            try:
                found[str(name)] = json.loads(value)
            except (TypeError, ValueError):
                continue
        return found

    def decide(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Store decisions not stored yet (the first writer wins) and return all stored ones.

        Several processes may decide at once; each then adopts what the returned mapping holds.

        Args:
            values: decision names to JSON-ready values.

        Returns:
            Every decision stored under this fingerprint after the write.
        """
        now = time.time()
        self.store.write(
            "INSERT OR IGNORE INTO decisions (fingerprint, name, value, created) "
            "VALUES (?, ?, ?, ?)",
            [
                (self.fingerprint, str(name), json.dumps(value, sort_keys=True), now)
                for name, value in values.items()
            ],
        )
        return self.decisions()

    def description(self) -> dict[str, Any] | None:
        """The stored description of this fingerprint, if any."""
        rows = self.store.query(
            "SELECT description FROM scorers WHERE fingerprint = ?", (self.fingerprint,)
        )
        return json.loads(rows[0][0]) if rows else None

    def close(self) -> None:
        """Close this process's connection (a later call reopens it)."""
        self.store.close()

    def __enter__(self) -> ScoreCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ScoreCache({self.fingerprint[:12]}…, {str(self.path)!r})"


__all__ = [
    "SCHEMA_VERSION",
    "ScoreCache",
    "StoreError",
    "default_cache_path",
    "fingerprint_of",
    "model_identity",
]
