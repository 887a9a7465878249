"""SynthesizeMe chat helpers, on the stand-ins :mod:`prbench.testing` ships for plugin tests."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from pathlib import Path

from prbench.testing import LoopbackOpenAI, Script
from prbench.testing import ScriptedBackend as _Scripted
from prbench.testing import build_tiny_causal_lm as _build

_A = re.compile(r"<answer_a>\n(.*?)\n</answer_a>", re.S)
_B = re.compile(r"<answer_b>\n(.*?)\n</answer_b>", re.S)


def kind(chat: Sequence[dict[str, str]]) -> str:
    """Which SynthesizeMe prompt a chat is: persona, bootstrap, judge or rating."""
    user = chat[-1]["content"]
    if "Write a persona" in user:
        return "persona"
    if "The person preferred one of these answers" in user:
        return "bootstrap"
    if "<answer_a>" in user:
        return "judge"
    return "rating"


def answers(chat: Sequence[dict[str, str]]) -> tuple[str, str]:
    """The texts shown as answer A and answer B."""
    user = chat[-1]["content"]
    return _A.search(user).group(1), _B.search(user).group(1)


class ScriptedBackend(_Scripted):
    """The scripted backend, counting the chats of each SynthesizeMe prompt kind."""

    def __init__(self, script: Script) -> None:
        super().__init__(script, fingerprint="scripted-synthesizeme")

    def count(self, what: str) -> int:
        """How many chats of kind ``what`` (see :func:`kind`) were sent."""
        return sum(kind(c) == what for c in self.chats)


#: a tiny random Llama causal LM with a chat template
build_tiny_causal_lm: functools.partial[Path] = functools.partial(_build, arch="llama")

__all__ = ["LoopbackOpenAI", "ScriptedBackend", "answers", "build_tiny_causal_lm", "kind"]
