"""The on-disk embedding cache: one SQLite file per (model, encoder, truncation) key.

Each row maps the sha256 of a text to its float32 vector. The file is a
:class:`prbench.store.SQLiteStore` (namespace ``embeddings``): WAL mode with a busy timeout makes it
safe to share between processes (lm-eval workers, parallel runs), and ``INSERT OR REPLACE`` makes
racing writes of the same text harmless (they computed the same vector). The model description is
stored in the ``meta`` table, so ``sqlite3 <file> 'select * from meta'`` says what produced the
vectors. A damaged file raises :class:`prbench.store.StoreError` naming it and the ways out; a
stored vector that cannot be read (wrong size, not a blob) counts as a miss and is recomputed.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prbench.store import SQLiteStore, StoreError

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

#: Table layout version of the ``embeddings`` namespace.
SCHEMA_VERSION = 1

_TABLES = (
    "CREATE TABLE IF NOT EXISTS vectors (hash TEXT PRIMARY KEY, dim INTEGER NOT NULL, "
    "data BLOB NOT NULL)",
)

#: How to turn the embedding cache off (named in the corrupt-file message).
OFF_HINT = "the encoder option embed_cache=false"


class EmbeddingCacheError(StoreError):
    """The cache file is unusable (corrupt, or vectors of a different size)."""


class EmbeddingCache:
    """Vectors keyed by text hash in one SQLite file.

    Args:
        path: the ``.sqlite`` file (created with its folder if missing).
        meta: a JSON-ready description of the model, stored once in the file.

    Raises:
        prbench.store.StoreError: the file is damaged, not a database, or of another schema.
    """

    def __init__(self, path: str | os.PathLike[str], meta: Mapping[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.store = SQLiteStore(
            self.path, namespace="embeddings", schema_version=SCHEMA_VERSION, tables=_TABLES,
            label="embedding cache", off_hint=OFF_HINT,
        )
        if meta:
            self.store.set_meta("model", json.dumps(dict(meta), sort_keys=True, default=str))

    def get(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors among ``hashes`` (missing or unreadable ones are absent)."""
        import numpy as np

        rows = self.store.query_in(
            "SELECT hash, dim, data FROM vectors WHERE hash IN ({marks})", hashes
        )
        out: dict[str, np.ndarray] = {}
        for h, dim, data in rows:
            if not isinstance(data, bytes) or not isinstance(dim, int) or len(data) != 4 * dim:
                logger.warning("embedding cache %s: unreadable vector for text hash %s; "
                               "recomputing it", self.path, h)
                continue
            out[h] = np.frombuffer(data, dtype="<f4").astype(np.float32)
        return out

    def put(self, vectors: Mapping[str, np.ndarray]) -> None:
        """Store vectors (a text stored again gets the new vector).

        Raises:
            EmbeddingCacheError: vectors of different sizes under one model key.
        """
        import numpy as np

        if not vectors:
            return
        rows = []
        dims = set()
        for h, vec in vectors.items():
            arr = np.ascontiguousarray(np.asarray(vec, dtype="<f4").reshape(-1))
            dims.add(arr.shape[0])
            rows.append((h, int(arr.shape[0]), arr.tobytes()))
        stored = self.store.query("SELECT dim FROM vectors LIMIT 1")
        if stored and isinstance(stored[0][0], int):
            dims.add(int(stored[0][0]))
        if len(dims) != 1:
            raise EmbeddingCacheError(
                f"embedding cache {self.path}: vectors of sizes {sorted(dims)} under one model key"
            )
        self.store.write("INSERT OR REPLACE INTO vectors (hash, dim, data) VALUES (?, ?, ?)", rows)

    def __len__(self) -> int:
        return int(self.store.query("SELECT COUNT(*) FROM vectors")[0][0])

    def close(self) -> None:
        """Close this process's connection (reopened on the next use)."""
        self.store.close()
