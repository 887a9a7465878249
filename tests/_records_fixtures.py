"""Small valid records for tests (the bundled sample is tested on its own)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

BASE: dict[str, Any] = {
    "id": "u1",
    "question": "How do I keep my sourdough starter alive while travelling for two weeks?",
    "profile": [
        {
            "id": "u1-p1",
            "category": "Cooking",
            "text": "Rye starter smells like acetone? I feed it daily.",
        },
        {
            "id": "u1-p2",
            "category": "Travel",
            "text": "Cheap long-stay rentals in Lisbon with a kitchen?",
        },
    ],
    "narrative": "I bake every weekend and travel for work; my fridge is tiny.",
    "rubric_aspects": [
        {"aspect": "small fridge", "evidence": "my fridge is tiny", "reason": "space is limited"},
    ],
    "category": "cooking",
    "chosen": "Dry a thin layer of starter on parchment; it takes no fridge space at all.",
    "rejected": "Feed it a stiff 1:5:5 ratio and keep it in the fridge until you are back home.",
}


def record(**changes: Any) -> dict[str, Any]:
    """A valid record with some fields replaced (``None`` deletes a field)."""
    out = copy.deepcopy(BASE)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    """Write rows (dicts, or raw strings written verbatim) as jsonl."""
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
