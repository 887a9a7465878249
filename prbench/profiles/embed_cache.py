"""The on-disk embedding cache: one SQLite file per (model, encoder, truncation) key.

Each row maps the sha256 of a text to its float32 vector. SQLite in WAL mode with a busy timeout
makes the cache safe to share between processes (lm-eval workers, parallel runs): readers never
block, concurrent writers wait for each other, and ``INSERT OR IGNORE`` makes racing writes of the
same text harmless (they computed the same vector). The model description is stored next to the
vectors, so ``sqlite3 <file> 'select * from meta'`` says what produced them.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS vectors (hash TEXT PRIMARY KEY, dim INTEGER NOT NULL, "
    "data BLOB NOT NULL)",
)
_CHUNK = 500  # keeps each IN (...) under SQLite's variable limit


class EmbeddingCacheError(RuntimeError):
    """The cache file is unusable (corrupt, or vectors of a different size)."""


class EmbeddingCache:
    """Vectors keyed by text hash in one SQLite file.

    Args:
        path: the ``.sqlite`` file (created with its folder if missing).
        meta: a JSON-ready description of the model, stored once in the file.
    """

    def __init__(self, path: str | os.PathLike[str], meta: Mapping[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._meta = dict(meta or {})
        self._local = threading.local()  # one connection per thread (and per process)

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and getattr(self._local, "pid", None) == os.getpid():
            return conn
        try:
            conn = sqlite3.connect(self.path, timeout=120.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            for stmt in _SCHEMA:
                conn.execute(stmt)
            if self._meta:
                conn.execute(
                    "INSERT OR IGNORE INTO meta (name, value) VALUES ('model', ?)",
                    (json.dumps(self._meta, sort_keys=True, default=str),),
                )
            conn.commit()
        except sqlite3.DatabaseError as exc:
            raise EmbeddingCacheError(
                f"embedding cache {self.path} is unusable ({exc}); delete the file to rebuild it"
            ) from exc
        self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def get(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors among ``hashes`` (missing ones are absent from the result)."""
        import numpy as np

        conn = self._connect()
        out: dict[str, np.ndarray] = {}
        wanted = list(dict.fromkeys(hashes))
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(
                f"SELECT hash, dim, data FROM vectors WHERE hash IN ({marks})", chunk
            ).fetchall()
            for h, dim, data in rows:
                vec = np.frombuffer(data, dtype="<f4")
                if vec.shape[0] != dim:
                    raise EmbeddingCacheError(
                        f"embedding cache {self.path}: the vector of text hash {h} has "
                        f"{vec.shape[0]} values, expected {dim}; delete the file to rebuild it"
                    )
                out[h] = vec.astype(np.float32)
        return out

    def put(self, vectors: Mapping[str, np.ndarray]) -> None:
        """Store vectors (a text already stored keeps its first vector)."""
        import numpy as np

        if not vectors:
            return
        rows = []
        dims = set()
        for h, vec in vectors.items():
            arr = np.ascontiguousarray(np.asarray(vec, dtype="<f4").reshape(-1))
            dims.add(arr.shape[0])
            rows.append((h, int(arr.shape[0]), arr.tobytes()))
        conn = self._connect()
        stored = conn.execute("SELECT dim FROM vectors LIMIT 1").fetchone()
        if stored is not None:
            dims.add(int(stored[0]))
        if len(dims) != 1:
            raise EmbeddingCacheError(
                f"embedding cache {self.path}: vectors of sizes {sorted(dims)} under one model key"
            )
        with conn:
            conn.executemany(
                "INSERT OR IGNORE INTO vectors (hash, dim, data) VALUES (?, ?, ?)", rows
            )

    def __len__(self) -> int:
        return int(self._connect().execute("SELECT COUNT(*) FROM vectors").fetchone()[0])

    def close(self) -> None:
        """Close this thread's connection (reopened on the next use)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and getattr(self._local, "pid", None) == os.getpid():
            conn.close()
        self._local.conn = None
