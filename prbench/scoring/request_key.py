"""The key of a scoring request: the score cache's key and the runtime's dedup key.

:func:`request_key` hashes everything in a request (question, response or both answers, profile
text and items, category, domain, record id, hidden fields) and nothing else, so two requests
share a key exactly when any scorer must give them the same score.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from prbench.hashing import json_sha256
from prbench.scoring.base import PairRequest, ScoreRequest

#: Bump when :func:`request_key` changes what it hashes (old cache rows then simply miss).
KEY_VERSION = 1


def _canonical(value: Any) -> Any:
    """A JSON-ready form of a request field (mappings sorted, tuples as lists, dataclasses)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def _profile_part(profile: Any) -> dict[str, Any]:
    items = [
        {"id": str(it.id), "category": str(it.category), "text": str(it.text)}
        for it in getattr(profile, "items", ())
    ]
    return {"text": getattr(profile, "text", ""), "items": items}


def request_key(request: ScoreRequest | PairRequest) -> str:
    """A stable hex key of everything in a request (the score cache and dedup key).

    Pointwise and pairwise requests never share a key. The key depends on the record id, the
    question, the answer(s), the profile text and its items (id, category, text), the category,
    the domain and the hidden fields; not on the profile's provenance (builder, token count).

    Raises:
        TypeError: a request that is neither a :class:`ScoreRequest` nor a :class:`PairRequest`.
    """
    if isinstance(request, ScoreRequest):
        kind, answers = "score", [request.response]
    elif isinstance(request, PairRequest):
        kind, answers = "pair", [request.first, request.second]
    else:
        raise TypeError(
            f"expected a ScoreRequest or a PairRequest, got {type(request).__name__}"
        )
    body = {
        "v": KEY_VERSION,
        "kind": kind,
        "record_id": request.record_id,
        "question": request.question,
        "answers": answers,
        "profile": _profile_part(request.profile),
        "category": request.category,
        "domain": request.domain,
        "hidden": _canonical(request.hidden) if request.hidden is not None else None,
    }
    return json_sha256(body, compact=True)
