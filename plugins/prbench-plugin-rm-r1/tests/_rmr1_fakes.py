"""Scripted RM-R1 replies, on the stand-ins :mod:`prbench.testing` ships for plugin tests."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from prbench.testing import LoopbackOpenAI, build_tiny_causal_lm
from prbench.testing import ScriptedBackend as _Scripted

_A = re.compile(r"\[The Start of Chatbot A's Response\]\n(.*?)\n\[The End of Chatbot A", re.S)
_B = re.compile(r"\[The Start of Chatbot B's Response\]\n(.*?)\n\[The End of Chatbot B", re.S)


def answers(chat: Sequence[dict[str, str]]) -> tuple[str, str]:
    """The texts shown as Chatbot A and Chatbot B in a judge chat."""
    user = chat[-1]["content"]
    return _A.search(user).group(1), _B.search(user).group(1)


def verdict(label: str) -> str:
    """A well-formed RM-R1 reply choosing ``label``."""
    return (
        "<type>Chat</type>\n<rubric>1. Fits the client (weight 1).</rubric>\n"
        "<justify>The client asked for it.</justify>\n<eval><summary_A>...</summary_A>"
        f"<summary_B>...</summary_B></eval>\n<answer>[[{label}]]</answer>"
    )


#: an in-process backend answering ``script(chat)`` (records every chat in ``.chats``)
ScriptedBackend = functools.partial(_Scripted, fingerprint="scripted-rm-r1")

__all__ = ["LoopbackOpenAI", "ScriptedBackend", "answers", "build_tiny_causal_lm", "verdict"]
