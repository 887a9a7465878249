"""The HTTP response cache: one SQLite file, one row per request, keyed by a hash of the request.

The key is the SHA-256 of the canonical JSON (sorted keys, no whitespace) of everything that
determines a response: the endpoint URL and the full request body (model, messages, decoding
settings, seed, stop strings). Credentials are never part of the key or of a stored entry. The
request is stored next to its response, so an entry can be inspected and checked against hash
collisions.

The file (``<root>/responses.sqlite``) is a :class:`prbench.store.SQLiteStore` (namespace
``responses``): safe to share between processes, each write one transaction (a crash never leaves a
half-written entry). A damaged file raises :class:`prbench.store.StoreError` naming it and the ways
out (``cache_dir=""``, or move the file aside); an entry that cannot be read, or that was written
for a different request, counts as a miss (warned about) and is overwritten by the fresh reply.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from prbench.hashing import json_sha256
from prbench.store import SQLiteStore

logger = logging.getLogger(__name__)

#: Table layout version of the ``responses`` namespace.
SCHEMA_VERSION = 1

#: The database file inside the cache folder.
FILE_NAME = "responses.sqlite"

_TABLES = (
    "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, request TEXT NOT NULL, "
    "response TEXT NOT NULL, created REAL NOT NULL)",
)


def request_key(request: dict[str, Any]) -> str:
    """Return the cache key (hex SHA-256) of a JSON-serialisable request description."""
    return json_sha256(request, compact=True, strict=True)


class ResponseCache:
    """Responses of a generation endpoint in ``root/responses.sqlite`` (see the module docstring).

    Args:
        root: the cache folder (created if missing).

    Attributes:
        hits: look-ups answered from the cache.
        misses: look-ups that found nothing usable.

    Raises:
        prbench.store.StoreError: the file is damaged, not a database, or of another schema.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.path = self.root / FILE_NAME
        self.store = SQLiteStore(
            self.path, namespace="responses", schema_version=SCHEMA_VERSION, tables=_TABLES,
            label="response cache", off_hint='the backend option cache_dir=""',
        )
        self.hits = 0
        self.misses = 0

    def get(self, request: dict[str, Any]) -> Any | None:
        """Return the stored response for ``request``, or None when there is none usable."""
        key = request_key(request)
        rows = self.store.query("SELECT request, response FROM responses WHERE key = ?", (key,))
        if not rows:
            self.misses += 1
            return None
        try:
            stored_request, response = json.loads(rows[0][0]), json.loads(rows[0][1])
        except (TypeError, ValueError) as exc:
            logger.warning("response cache %s: entry %s is unreadable (%s); asking again",
                           self.path, key, exc)
            self.misses += 1
            return None
        if stored_request != json.loads(json.dumps(request)):
            logger.warning("response cache %s: entry %s was written for a different request "
                           "(hash collision or edited row); asking again", self.path, key)
            self.misses += 1
            return None
        self.hits += 1
        return response

    def put(self, request: dict[str, Any], response: Any, *, redact: str = "") -> Path:
        """Store ``response`` for ``request`` (one transaction) and return the cache file.

        Args:
            request: the request description the key is computed from (no credentials).
            response: the JSON-serialisable response to store.
            redact: a secret that must not reach the disk; every occurrence in the serialised
                entry is replaced by ``***`` (a guard against servers that echo credentials).
        """
        key = request_key(request)
        texts = [json.dumps(request, ensure_ascii=False, sort_keys=True),
                 json.dumps(response, ensure_ascii=False, sort_keys=True)]
        if redact:
            from prbench.redaction import MASK, remember

            remember(redact)
            texts = [t.replace(redact, MASK) for t in texts]  # the store masks every other one
        self.store.write(
            "INSERT OR REPLACE INTO responses (key, request, response, created) "
            "VALUES (?, ?, ?, ?)",
            [(key, texts[0], texts[1], time.time())],
        )
        logger.debug("cached response %s in %s", key, self.path)
        return self.path

    def __len__(self) -> int:
        return int(self.store.query("SELECT COUNT(*) FROM responses")[0][0])

    def close(self) -> None:
        """Close this process's connection (reopened on the next use)."""
        self.store.close()


def resolve_cache_dir(setting: str, area: str = "responses") -> str:
    """Map a ``cache_dir`` setting to a folder (``"auto"`` -> the prbench cache) or ``""`` (off)."""
    if setting == "":
        return ""
    if setting == "auto":
        from prbench.paths import cache_dir

        return str(cache_dir(area))
    return os.path.expanduser(setting)
