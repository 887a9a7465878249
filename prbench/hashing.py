"""Stable hashes: of JSON-able values (cache keys, fingerprints, seeded choices) and of model files.

Unlike :func:`hash`, these do not depend on the process (no hash randomisation), the batch or the
order of the calls. Every canonical-JSON SHA-256 in prbench goes through :func:`json_sha256`, and
every hash of a model folder's files through :func:`folder_files` and :func:`update_file_digest`.

The flavours of :func:`json_sha256` (``compact``, ``ascii``, ``strict``) exist because keys and
fingerprints already stored on users' disks were made with them: the score cache's fingerprint
(:func:`prbench.scoring.cache.fingerprint_of`) is compact ASCII JSON, a score request's key compact
UTF-8, an HTTP reply's key compact UTF-8 that refuses a value JSON cannot hold, a sweep cell's and
a ranking shard's fingerprint spaced ASCII, :func:`stable_hash` spaced UTF-8. Changing a flavour at
one of them would throw away those caches, so each keeps its own, named at the call.

Likewise the two model-folder identities keep their own rule for a large file: the score cache
(:func:`prbench.scoring.cache.model_identity`) hashes its first and last 64 KiB with its
modification time, the embedding cache (:mod:`prbench.model_ref`) only its size and
modification time; files up to :data:`SMALL_FILE` are hashed whole by both.

Ground floor: imports nothing from prbench.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal, Protocol

__all__ = [
    "SMALL_FILE",
    "canonical_json",
    "folder_files",
    "json_sha256",
    "seeded_unit",
    "stable_hash",
    "update_file_digest",
]

#: files up to this size (1 MiB) are hashed whole; larger ones (weights) by a cheaper rule
SMALL_FILE = 1 << 20
#: how much of each end of a large file the ``"ends"`` rule reads
_END_BYTES = 1 << 16


def canonical_json(value: Any, *, compact: bool = False, ascii: bool = False,
                   strict: bool = False) -> str:
    r"""The JSON text of ``value`` with sorted keys: the same text for equal values.

    Args:
        value: a JSON-able value (tuples become lists).
        compact: no spaces after ``,`` and ``:``.
        ascii: escape every non-ASCII character (``\u00e9``) instead of writing it as is.
        strict: refuse (``TypeError``) a value JSON cannot hold; otherwise it is written as its
            ``str``.
    """
    return json.dumps(value, sort_keys=True, ensure_ascii=ascii,
                      separators=(",", ":") if compact else None,
                      default=None if strict else str)


def json_sha256(value: Any, *, compact: bool = False, ascii: bool = False,
                strict: bool = False) -> str:
    r"""SHA-256 hex of :func:`canonical_json` of ``value`` (same arguments), UTF-8 encoded.

    A lone surrogate in a string (which ``json`` can decode from ``\ud800``) is encoded as is
    (``surrogatepass``) rather than refused.
    """
    text = canonical_json(value, compact=compact, ascii=ascii, strict=strict)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def stable_hash(*parts: object) -> str:
    """SHA-256 hex of the JSON form of ``parts`` (for cache keys and seeded choices)."""
    return json_sha256(parts)


def seeded_unit(*parts: object) -> float:
    """A number in [0, 1) that depends only on ``parts`` (batch- and order-independent)."""
    return int(stable_hash(*parts)[:16], 16) / 16**16


class _Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...


def folder_files(folder: Path, *, hidden: Literal["name", "any-part"]) -> list[Path]:
    """The files under a model folder, sorted by path, hidden ones left out.

    Args:
        folder: the model folder.
        hidden: ``"name"`` leaves out files whose own name starts with ``.``; ``"any-part"`` also
            every file inside a folder whose name does (``.git/``, ``.cache/``).
    """
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    if hidden == "name":
        return [p for p in files if not p.name.startswith(".")]
    return [p for p in files
            if not any(part.startswith(".") for part in p.relative_to(folder).parts)]


def update_file_digest(digest: _Digest, path: Path, *, large: Literal["ends", "stat"]) -> None:
    """Feed one model file to ``digest``: whole up to :data:`SMALL_FILE`, else by ``large``.

    Args:
        digest: a ``hashlib`` object.
        path: the file.
        large: for a larger file, ``"ends"`` feeds its first and last 64 KiB and then its
            modification time (ns, as text); ``"stat"`` feeds ``"<size>:<mtime ns>"``. Hashing
            gigabytes of weights on every start would be too slow.
    """
    stat = path.stat()
    if stat.st_size <= SMALL_FILE:
        digest.update(path.read_bytes())
    elif large == "stat":
        digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
    else:
        with path.open("rb") as handle:
            digest.update(handle.read(_END_BYTES))
            handle.seek(stat.st_size - _END_BYTES)
            digest.update(handle.read(_END_BYTES))
        digest.update(str(stat.st_mtime_ns).encode())
