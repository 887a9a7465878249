"""An on-disk response cache: one JSON file per request, keyed by a hash of the whole request.

The key is the SHA-256 of the canonical JSON (sorted keys, no whitespace) of everything that
determines a response: the endpoint URL and the full request body (model, messages, decoding
settings, seed, stop strings). Credentials are never part of the key or of a stored entry.
Writes go to a temporary file that is renamed into place, so concurrent writers and a crash
mid-write never leave a truncated entry; an entry that cannot be read is reported, never used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

CACHE_FORMAT = 1


def request_key(request: dict[str, Any]) -> str:
    """Return the cache key (hex SHA-256) of a JSON-serialisable request description."""
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class CacheError(RuntimeError):
    """A cache entry exists but cannot be read or does not match its request."""


class ResponseCache:
    """One JSON file per request under ``root/<key[:2]>/<key>.json``.

    Each file holds ``{"format", "key", "request", "response", "created"}``: the request is stored
    next to the response so an entry can be inspected (and checked against hash collisions).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.misses = 0

    def path_for(self, key: str) -> Path:
        """The file that holds (or would hold) the entry for ``key``."""
        return self.root / key[:2] / f"{key}.json"

    def get(self, request: dict[str, Any]) -> Any | None:
        """Return the stored response for ``request``, or None when there is none.

        Raises:
            CacheError: the entry exists but is corrupt or was written for a different request.
        """
        key = request_key(request)
        path = self.path_for(key)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            self.misses += 1
            return None
        try:
            entry = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CacheError(
                f"response cache entry {path} is not valid JSON ({exc}); delete it to refetch"
            ) from exc
        if not isinstance(entry, dict) or "response" not in entry:
            raise CacheError(f"response cache entry {path} has no 'response' field; delete it")
        if entry.get("request") != json.loads(json.dumps(request)):
            raise CacheError(
                f"response cache entry {path} was written for a different request "
                "(hash collision or edited file); delete it"
            )
        self.hits += 1
        return entry["response"]

    def put(self, request: dict[str, Any], response: Any, *, redact: str = "") -> Path:
        """Store ``response`` for ``request`` atomically and return the file written.

        Args:
            request: the request description the key is computed from (no credentials).
            response: the JSON-serialisable response to store.
            redact: a secret that must not reach the disk; every occurrence in the serialised
                entry is replaced by ``***`` (a guard against servers that echo credentials).
        """
        key = request_key(request)
        path = self.path_for(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {
            "format": CACHE_FORMAT,
            "key": key,
            "request": request,
            "response": response,
            "created": time.time(),
        }
        text = json.dumps(entry, ensure_ascii=False, sort_keys=True)
        if redact and redact in text:
            text = text.replace(redact, "***")
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:8]}-", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        logger.debug("cached response %s", path)
        return path
