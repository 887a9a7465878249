"""Test helpers for judges, the planner and pair building.

``ScriptedBackend`` is a test double of :class:`prbench.backends.base.GenerationBackend`: it answers
each chat with a Python function of that chat (so a test states exactly what the "model" says) and
records every call. It exercises the parsing, ordering, aggregation, caching and writing logic
around a model; the real backends are tested in test_backend_hf.py / test_backend_http.py and used
end to end in the slow test of test_build_pairs.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prbench.backends.base import Chat, GenerationConfig


class ScriptedBackend:
    """Answers every chat with ``respond(chat)``; records chats and decoding configs."""

    def __init__(self, respond: Callable[[Chat], str], fingerprint: str = "scripted-v1") -> None:
        self.respond = respond
        self.fingerprint = fingerprint
        self.calls: list[tuple[list[Chat], GenerationConfig]] = []

    @property
    def chats(self) -> list[Chat]:
        """Every chat received, in order."""
        return [chat for batch, _ in self.calls for chat in batch]

    def generate(self, chats: Sequence[Chat], config: GenerationConfig) -> list[str]:
        batch = [list(c) for c in chats]
        self.calls.append((batch, config))
        return [self.respond(c) for c in batch]

    def logprobs(self, chats: Sequence[Chat], continuations: Sequence[str]) -> list[float]:
        raise NotImplementedError("the scripted backend only generates")


def user_text(chat: Chat) -> str:
    """The user message of a chat."""
    return next(m["content"] for m in chat if m["role"] == "user")


def tagged(chat: Chat, tag: str) -> str:
    """The text between ``<tag>`` and ``</tag>`` in the user message."""
    match = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", user_text(chat), re.DOTALL)
    assert match, f"no <{tag}> block in the prompt"
    return match.group(1)


def source_row(rid: str, **over: Any) -> dict[str, Any]:
    """A valid source row (no answers) with three rubric aspects."""
    row: dict[str, Any] = {
        "id": rid,
        "question": f"How should I plan a week of meals on a tight budget? ({rid})",
        "narrative": "I cook for two kids, I have forty dollars a week and no oven, only a stove.",
        "category": "cooking",
        "profile": [
            {"id": f"{rid}-p1", "category": "Cooking", "text": "Is a stovetop enough for bread?"},
            {"id": f"{rid}-p2", "category": "Parenting", "text": "My kids refuse vegetables."},
            {"id": f"{rid}-p3", "category": "Personal Finance", "text": "Groceries eat my pay."},
        ],
        "rubric_aspects": [
            {"aspect": "stovetop-only recipes", "evidence": "no oven", "reason": "no oven"},
            {"aspect": "child-friendly vegetables", "evidence": "two kids", "reason": "kids"},
            {"aspect": "forty dollar weekly budget", "evidence": "$40", "reason": "money"},
        ],
    }
    row.update(over)
    return row


def write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    """Write rows as JSON lines."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


GENERIC = (
    "Plan the week around a few staples you can buy in bulk, such as rice, lentils, oats and "
    "eggs. Cook two big batches on Sunday and vary them with spices and sauces during the week. "
    "Keep a short list, shop once, and write down what you spend so the next week is easier."
)
COVERING = (
    "Pick stovetop-only recipes like lentil stew, fried rice and pasta so you never need an oven. "
    "Hide child-friendly vegetables such as peas, carrots and corn in sauces the kids already "
    "like. Keep to the forty dollar weekly budget by buying rice, oats and eggs in bulk first."
)


def tiny_chat_lm_long_context(folder: Path, context: int = 4096) -> Path:
    """The tiny random Llama chat model of ``_backend_fixtures`` with a longer context.

    Judge and planner prompts are long in its small BPE vocabulary; Llama's rotary positions have
    no learned table, so raising ``max_position_embeddings`` in the config is all it takes.
    """
    from _backend_fixtures import build_tiny_chat_lm

    build_tiny_chat_lm(folder)
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text("utf-8"))
    config["max_position_embeddings"] = context
    config_path.write_text(json.dumps(config), "utf-8")
    return folder
