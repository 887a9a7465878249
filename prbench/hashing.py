"""Stable hashes of JSON-able values: cache keys and seeded choices that never change between runs.

Unlike :func:`hash`, these do not depend on the process (no hash randomisation), the batch or the
order of the calls. Ground floor: imports nothing from prbench.
"""

from __future__ import annotations

import hashlib
import json

__all__ = ["seeded_unit", "stable_hash"]


def stable_hash(*parts: object) -> str:
    """SHA-256 hex of the JSON form of ``parts`` (for cache keys and seeded choices)."""
    data = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def seeded_unit(*parts: object) -> float:
    """A number in [0, 1) that depends only on ``parts`` (batch- and order-independent)."""
    return int(stable_hash(*parts)[:16], 16) / 16**16
