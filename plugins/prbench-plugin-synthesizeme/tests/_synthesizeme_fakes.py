"""SynthesizeMe chat helpers, on the stand-ins :mod:`prbench.testing` ships for plugin tests."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
    """The scripted backend, counting the chats of each SynthesizeMe prompt kind.

    ``temperatures`` holds the decoding temperature each chat was sent with, in order.
    """

    def __init__(self, script: Script) -> None:
        super().__init__(script, fingerprint="scripted-synthesizeme")
        self.temperatures: list[float] = []

    def generate(self, chats: Sequence[Any], config: Any) -> list[str]:
        """The scripted replies; records the temperature of each chat."""
        self.temperatures.extend([config.temperature] * len(chats))
        return super().generate(chats, config)

    def count(self, what: str) -> int:
        """How many chats of kind ``what`` (see :func:`kind`) were sent."""
        return sum(kind(c) == what for c in self.chats)


_PERSONA = re.compile(r"<persona>\n(.*?)\n</persona>", re.S)
_OBSERVATION = re.compile(r"^Observation \d+: (.*)$", re.M)
_MARKS = {
    "bullets": re.compile(r"^- ", re.M),
    "units": re.compile(r"\d ?(g|ml|°C|minutes?|litres?|mm|cm)\b"),
    "code": re.compile(r"```"),
    "citation": re.compile(r"\b(19|20)\d\d\b"),
    "caveats": re.compile(r"\b(doctor|physio|pharmacist|counsellor|gentle|kind|normal|common)\b",
                          re.I),
}


def marks(text: str, other: str) -> set[str]:
    """Surface marks ``text`` has and ``other`` lacks, plus ``longer``/``shorter``."""
    own = {m for m, rx in _MARKS.items() if rx.search(text) and not rx.search(other)}
    if len(text.split()) != len(other.split()):
        own.add("longer" if len(text.split()) > len(other.split()) else "shorter")
    return own


def taste_llm(chat: Sequence[dict[str, str]]) -> str:
    """A scripted LLM that can only learn a user's taste through SynthesizeMe's verification.

    Bootstrap: it guesses the preferred answer by a coin (a hash of the pair) and names the
    guessed answer's marks; only right guesses survive verification, so the persona built from
    the kept notes names the user's real marks. Judge: it picks the answer with more of the
    persona's marks and says ``[[A]]`` on a draw (split orders: a tie, counted wrong), so a persona
    with no marks (profile mode) never wins a pair.
    """
    what, user = kind(chat), chat[-1]["content"]
    if what == "bootstrap":
        a, b = answers(chat)
        guess = "A" if sum(map(ord, a + b)) % 2 else "B"
        shown, other = (a, b) if guess == "A" else (b, a)
        tags = " ".join(f"MARK:{m}" for m in sorted(marks(shown, other)))
        return f"The preferred answer shows {tags or 'nothing special'}.\nVerdict: [[{guess}]]"
    if what == "persona":
        notes = _OBSERVATION.findall(user)
        counts: dict[str, int] = {}
        for note in notes:
            for tag in set(re.findall(r"MARK:(\w+)", note)):
                counts[tag] = counts.get(tag, 0) + 1
        kept = sorted(t for t, n in counts.items() if 2 * n >= len(notes))
        return "This person rewards " + (" ".join(f"MARK:{t}" for t in kept) or "nothing known")
    if what == "judge":
        wanted = set(re.findall(r"MARK:(\w+)", _PERSONA.search(user).group(1)))
        a, b = answers(chat)
        score_a, score_b = len(marks(a, b) & wanted), len(marks(b, a) & wanted)
        return "Verdict: [[B]]" if score_b > score_a else "Verdict: [[A]]"
    return "Rating: 5"


#: a tiny random Llama causal LM with a chat template
build_tiny_causal_lm: functools.partial[Path] = functools.partial(_build, arch="llama")

__all__ = ["LoopbackOpenAI", "ScriptedBackend", "answers", "build_tiny_causal_lm", "kind", "marks",
           "taste_llm"]
