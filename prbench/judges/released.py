"""The released pairwise protocol of Personalized RewardBench (``llm-judge`` ``protocol=released``).

The authors' evaluation script (``evaluation/pairwise.py`` in the Personalized-RewardBench GitHub
repository) judges each pair once: a seeded coin (seed 42) puts the chosen answer in position A or
B, the judge gets the repository's ``prompts/pairwise_system.txt`` as the system message and
``prompts/pairwise_user.txt`` (question and the two responses filled in) as the user message,
decodes greedily with at most 512 new tokens, and reads the verdict from the reply: the text
before the last ``</think>`` is dropped, ``"`` and ``*`` are removed, and the first letter after
the first ``result:`` (any case) is the verdict. A reply without that marker, or whose first
letter after it is neither ``a`` nor ``b``, counts as "A".

prbench ships none of the authors' prompt text: the user points at the two files
(``system_prompt_file=``, ``user_prompt_file=``), which :func:`load_prompts` reads -- regular
files of at most :data:`MAX_PROMPT_BYTES`, UTF-8, each recorded with its sha256 -- and checks
for the placeholders the script fills (:data:`USER_PLACEHOLDERS`; ``{profile}`` is optional and
filled with the task's profile view, so a judge sees a profile only when both the task gives one
and the file asks for it).

What differs, on purpose, and is said where results are shown:

- the fallback "A" never becomes a verdict of prbench's metrics: :func:`parse_released` returns a
  :class:`~prbench.judges.parsing.ParseFailure`, the order is unreadable (``n_unreadable``), and
  only the released script's own outputs (``released_*`` metrics,
  :mod:`prbench.judges.order_metrics`) count it as "A";
- by default (``coin=pair``) the coin is seeded per pair (seed 42, the pair's id and answers), so
  a pair gets the same order whatever else the data holds, in whichever order; it is a different
  draw from the script's, so which pairs have the chosen answer in A differs pair by pair (the
  share is the same in expectation). ``coin=script`` draws as the script does
  (:func:`script_coin`): the script reseeds ``random`` with 42 for each subset (domain) and draws
  one ``random.random()`` per pair in the data's order, the chosen answer going to A when the draw
  is below 0.5; the pair's place in its domain (``PairRequest.domain_position``, set by the tasks)
  picks its draw, so every pair gets the script's order, line by line.

The placeholders are filled as the script fills them, one after another with ``str.replace``
(:meth:`ReleasedPrompts.chat`), so a question that contains ``{Response_A}`` is filled again, as
there; the judge warns once per record and field where that happens. Under the default
protocol prompts are filled with ``str.format``, which never fills the record's own text. The
script's empty position (no pair with the chosen answer in A, or in B) prints 0.0; the
``released_*`` metrics do the same (:func:`prbench.judges.order_metrics.metrics_from_counts`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from typing import Any

from prbench.backends.base import Chat, GenerationFailure, Reply
from prbench.judges.parsing import ParseFailure, generation_failed
from prbench.options import OptionsError, read_option_file

#: The seed of the released script's coin.
SEED = 42
#: The released script's token budget (greedy decoding).
MAX_NEW_TOKENS = 512
#: The verdict the released script gives an unreadable reply.
FALLBACK = "A"
#: The largest prompt file read (a prompt is a few hundred bytes; anything bigger is a mistake).
MAX_PROMPT_BYTES = 64 * 1024
#: The placeholders the user prompt file must hold (filled as the released script fills them).
USER_PLACEHOLDERS = ("{question}", "{Response_A}", "{Response_B}")
#: The placeholder the user prompt file may hold: the task's profile view.
PROFILE_PLACEHOLDER = "{profile}"

#: The share of the script's ``random.random()`` draws that put the chosen answer in A.
CHOSEN_IN_A_BELOW = 0.5

_DRAWS: dict[int, tuple[random.Random, list[float]]] = {}


class PromptFileError(OptionsError):
    """A prompt file that cannot be used (missing, not a regular file, too big, a placeholder
    missing); the message names the option, the file and what is wrong.
    """  # noqa: D205


@dataclasses.dataclass(frozen=True)
class PromptFile:
    """One prompt file as read.

    Attributes:
        option: the option that named it (``system_prompt_file`` / ``user_prompt_file``).
        path: the path as given.
        text: the text, stripped of surrounding whitespace (as the released script reads it).
        sha256: the hex digest of the file's bytes (less a UTF-8 byte-order mark, which
            :func:`prbench.options.read_option_file` drops with a warning).
        size: the file's size in bytes (less a byte-order mark).
    """

    option: str
    path: str
    text: str
    sha256: str
    size: int

    def describe(self) -> dict[str, Any]:
        """JSON-ready provenance (results manifest): path, sha256, size."""
        return {"path": self.path, "sha256": self.sha256, "bytes": self.size}


def read_prompt_file(path: str, option: str, placeholders: tuple[str, ...] = ()) -> PromptFile:
    """Read one prompt file and check it.

    Args:
        path: the file.
        option: the option that named it (for the error message).
        placeholders: placeholders the text must hold.

    Raises:
        PromptFileError: no path, not a regular file, over :data:`MAX_PROMPT_BYTES`, not UTF-8,
            empty, or a placeholder missing (one problem, naming the file).
    """
    if not path:
        raise PromptFileError(
            f"llm-judge: protocol=released needs {option}= (the released prompts/"
            f"{'pairwise_system.txt' if option.startswith('system') else 'pairwise_user.txt'} "
            "of the Personalized-RewardBench repository, or your own file)"
        )
    where = f"llm-judge: {option}={path}"
    try:  # the one reader of option files: regular, outside /proc, /sys, /dev, its stated size
        text = read_option_file(path, f"llm-judge: {option}", limit=MAX_PROMPT_BYTES)
    except OptionsError as exc:
        raise PromptFileError(str(exc)) from None
    data = text.encode("utf-8")  # the file's bytes, less a byte-order mark (never sent on)
    if not text.strip():
        raise PromptFileError(f"{where}: the file is empty")
    for placeholder in placeholders:
        if placeholder not in text:
            raise PromptFileError(f"{where}: the placeholder {placeholder} is missing")
    return PromptFile(
        option=option, path=path, text=text.strip(),
        sha256=hashlib.sha256(data).hexdigest(), size=len(data),
    )


@dataclasses.dataclass(frozen=True)
class ReleasedPrompts:
    """The two prompt files of the released protocol."""

    system: PromptFile
    user: PromptFile

    @property
    def reads_profile(self) -> bool:
        """Whether the user prompt shows the task's profile view (``{profile}``)."""
        return PROFILE_PLACEHOLDER in self.user.text

    def chat(self, question: str, profile_text: str, response_a: str, response_b: str) -> Chat:
        """The judge's chat for one order: the system file, then the filled user file.

        The placeholders are replaced one after another, everywhere, with ``str.replace``, as
        the script replaces them: ``{question}``, then ``{Response_A}``, then ``{Response_B}``.
        A question holding ``{Response_A}`` therefore gets answer A there too, and answer A
        holding ``{Response_B}`` gets answer B, as in the script (:meth:`filled_in_record`
        names such text, for the judge's warning). ``{profile}`` (prbench's addition, only
        when the file has it) is put in last, between the filled parts of the file, so the
        profile's text is never filled and a file without it gives the script's text exactly.
        """
        parts = []
        for part in self.user.text.split(PROFILE_PLACEHOLDER):
            for placeholder, value in zip(
                USER_PLACEHOLDERS, (question, response_a, response_b), strict=True
            ):
                part = part.replace(placeholder, value)
            parts.append(part)
        user = profile_text.join(parts)
        return [{"role": "system", "content": self.system.text},
                {"role": "user", "content": user}]

    @staticmethod
    def filled_in_record(question: str, response_a: str,
                         response_b: str) -> list[tuple[str, str]]:
        """The record text that :meth:`chat` fills as the script does: ``(field, placeholder)``.

        ``field`` is ``question``, ``response_a`` or ``response_b``: a placeholder inside it
        that is replaced after the field is put in (``{Response_A}`` or ``{Response_B}`` in the
        question, ``{Response_B}`` in answer A). Answer B, put in last, is never changed.
        """
        found = []
        for field, text, later in (("question", question, USER_PLACEHOLDERS[1:]),
                                   ("response_a", response_a, USER_PLACEHOLDERS[2:])):
            found += [(field, placeholder) for placeholder in later if placeholder in text]
        return found

    def describe(self) -> dict[str, Any]:
        """Both files' path, sha256 and size (results manifest)."""
        return {"system_prompt_file": self.system.describe(),
                "user_prompt_file": self.user.describe()}

    def version(self) -> str:
        """A short prompt version for ``stats()``: ``released:<sha256 of both files>``."""
        both = hashlib.sha256(f"{self.system.sha256}:{self.user.sha256}".encode()).hexdigest()
        return f"released:{both[:16]}"


def load_prompts(system_prompt_file: str, user_prompt_file: str) -> ReleasedPrompts:
    """Read and check both prompt files (see :func:`read_prompt_file`).

    Raises:
        PromptFileError: either file is unusable.
    """
    return ReleasedPrompts(
        system=read_prompt_file(system_prompt_file, "system_prompt_file"),
        user=read_prompt_file(user_prompt_file, "user_prompt_file", USER_PLACEHOLDERS),
    )


def script_coin(seed: int, position: int) -> bool:
    """Whether the script puts the chosen answer in A for the pair at ``position`` of its domain.

    The script seeds ``random`` with ``seed`` for each domain and draws ``random.random()`` once
    per pair in the data's order; the chosen answer is A when the draw is below 0.5. The draws of
    a seed are kept, so asking for any position costs one draw per new position.

    Raises:
        ValueError: a negative position.
    """
    if position < 0:
        raise ValueError(f"a pair's place in its domain is >= 0, got {position}")
    stream, draws = _DRAWS.setdefault(seed, (random.Random(seed), []))
    while len(draws) <= position:
        draws.append(stream.random())
    return draws[position] < CHOSEN_IN_A_BELOW


def parse_released(text: Reply) -> str | ParseFailure:
    """The released script's reading of a reply: ``"A"``, ``"B"`` or a failure (no fallback).

    The text before the last ``</think>`` is dropped, ``"`` and ``*`` are removed, and the first
    letter after the first ``result:`` (any case) decides. The caller applies the fallback "A"
    where the protocol asks for it; here a reply that gives none is a failure:
    ``no-result-marker`` (no ``result:``), ``not-a-or-b`` (another first letter), or the
    backend's own failure.
    """
    if isinstance(text, GenerationFailure):
        return generation_failed(text)
    body = str(text).strip().split("</think>")[-1].strip()
    body = body.replace('"', "").replace("*", "").strip()
    lowered = body.lower()
    excerpt = body[-200:]
    if "result:" not in lowered:
        return ParseFailure("no-result-marker", "the reply has no 'Result:'", excerpt)
    after = lowered.split("result:")[1].strip()
    if after.startswith("a"):
        return "A"
    if after.startswith("b"):
        return "B"
    return ParseFailure(
        "not-a-or-b", f"the first letter after 'Result:' is {after[:1]!r}, not A or B", excerpt
    )


__all__ = [
    "FALLBACK",
    "MAX_NEW_TOKENS",
    "MAX_PROMPT_BYTES",
    "PROFILE_PLACEHOLDER",
    "SEED",
    "USER_PLACEHOLDERS",
    "PromptFile",
    "PromptFileError",
    "ReleasedPrompts",
    "load_prompts",
    "parse_released",
    "read_prompt_file",
    "script_coin",
]
