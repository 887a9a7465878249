"""Input checks shared by the generation backends: chats and decoding settings.

Every error names the chat (its position in the batch), the message and the field at fault.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from prbench.backends.base import GenerationConfig


def check_chats(chats: Sequence[Any]) -> None:
    """Check that ``chats`` is a sequence of non-empty lists of ``{role, content}`` messages.

    Raises:
        TypeError: a chat, message or field has the wrong type.
        ValueError: a chat is empty or a role is empty.
    """
    if isinstance(chats, (str, bytes, dict)):
        raise TypeError(f"chats must be a list of chats, got {type(chats).__name__}")
    for c, chat in enumerate(chats):
        if not isinstance(chat, (list, tuple)):
            raise TypeError(
                f"chat {c}: expected a list of {{role, content}} messages, "
                f"got {type(chat).__name__}"
            )
        if not chat:
            raise ValueError(f"chat {c}: has no messages")
        for m, message in enumerate(chat):
            if not isinstance(message, dict):
                raise TypeError(
                    f"chat {c}, message {m}: expected a dict with 'role' and 'content', "
                    f"got {type(message).__name__}"
                )
            for field in ("role", "content"):
                if field not in message:
                    raise ValueError(f"chat {c}, message {m}: missing field {field!r}")
                if not isinstance(message[field], str):
                    raise TypeError(
                        f"chat {c}, message {m}: field {field!r} must be a string, "
                        f"got {type(message[field]).__name__}"
                    )
            if not message["role"]:
                raise ValueError(f"chat {c}, message {m}: field 'role' is empty")


def check_config(config: GenerationConfig) -> None:
    """Check the decoding settings.

    Raises:
        TypeError: ``config`` is not a :class:`GenerationConfig` or ``stop`` is not strings.
        ValueError: a value out of range.
    """
    if not isinstance(config, GenerationConfig):
        raise TypeError(f"expected a GenerationConfig, got {type(config).__name__}")
    if isinstance(config.max_new_tokens, bool) or not isinstance(config.max_new_tokens, int):
        raise TypeError(f"max_new_tokens must be an int, got {config.max_new_tokens!r}")
    if config.max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {config.max_new_tokens}")
    if not math.isfinite(config.temperature) or config.temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0, got {config.temperature}")
    if not (0 < config.top_p <= 1):
        raise ValueError(f"top_p must be in (0, 1], got {config.top_p}")
    if isinstance(config.seed, bool) or not isinstance(config.seed, int):
        raise TypeError(f"seed must be an int, got {config.seed!r}")
    if isinstance(config.stop, str):
        raise TypeError("stop must be a tuple of strings, not one string")
    for s in config.stop:
        if not isinstance(s, str) or not s:
            raise ValueError(f"stop strings must be non-empty strings, got {s!r}")


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """Return ``text`` up to (not including) the earliest occurrence of any stop string."""
    cut = len(text)
    for s in stop:
        at = text.find(s)
        if at != -1:
            cut = min(cut, at)
    return text[:cut]
