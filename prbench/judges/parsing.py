"""Strict parsers for judge and planner replies.

Every parser returns either the value it read or a :class:`ParseFailure` with a stable ``reason``
code. A reply that names no verdict, names both answers, gives conflicting final lines, or is cut
off inside a reasoning block is a failure; it is never mapped to a default verdict (the released
evaluation code maps an unreadable verdict to "A", which biases results towards the first answer).

What counts as an answer:

- Reasoning inside ``<think>...</think>`` is dropped; text before a lone closing ``</think>`` is
  dropped too (some chat templates open the block in the prompt). An opening ``<think>`` that
  is never closed is a failure (``unterminated-reasoning``): the model ran out of tokens thinking.
- Markdown emphasis (``**``, ``__``, backticks, headings, quote marks) is ignored.
- Pairwise: the answer follows a marker line (``Verdict:``, ``Final verdict:``, ``Result:``,
  ``Winner:``, ``Decision:``, ``Choice:``, ``Final answer:``; ``is`` also works, "The verdict is
  B"). Only the marker's own sentence is read. Every marker sentence that names exactly one answer
  is a vote; different votes are a failure (``conflicting``). A marker sentence naming both answers
  is a failure (``both``) unless another marker names one; a marker naming neither is ``none`` (or
  ``tie`` for "tie", "neither", "equal"). Without a marker, ``[[A]]`` / ``<answer>B</answer>``
  forms are read (one distinct label only), and a reply that is nothing but a label ("B",
  "**Answer A**") is accepted. Upper-case ``A``/``B`` count as labels when they stand alone; lower
  case only after a word such as "answer"/"response"/"option", or when the sentence is nothing but
  the letter (so the article "a" is never read as a verdict). "N/A" and the article in "A tie" /
  "A draw" / "A close call" are not labels; a sentence whose only label is negated ("Not A") is a
  failure (``ambiguous``).
- Ratings: ``Rating:`` / ``Score:`` (optionally ``Final``) followed by one number, optionally
  ``/10`` or ``out of 10`` (the denominator must be the scale's top); a range or two numbers is a
  failure (``ambiguous``); a value off the scale is ``out-of-range``; decimals are refused when
  whole numbers are required (``not-integer``); score lines that disagree are ``conflicting``.
- Aspect-score lists: ``Scores: [2, 0, 1]`` (several such lines must agree), or numbered lines
  ``Aspect 1: 2`` / ``1. 2`` naming every aspect once. The list must have exactly the expected
  length, and every value must be 0, 1 or 2.
- Planner lists: lines starting with ``- ``, ``* ``, ``• `` or ``1.`` / ``1)``.

A :class:`~prbench.backends.base.GenerationFailure` in place of a reply (the backend could not get
one) is read as the failure ``generation-failed`` by every parser, never as a verdict.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TypeVar

from prbench.backends.base import TRUNCATED, GenerationFailure, Reply

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class ParseFailure:
    """A reply the parser could not read as an answer.

    Attributes:
        reason: a stable code: ``generation-failed`` (no reply: the backend failed for this
            item; ``detail`` holds the backend's reason), ``empty``, ``unterminated-reasoning``,
            ``no-verdict``, ``both``,
            ``tie``, ``conflicting``, ``ambiguous``, ``out-of-range``, ``not-integer``,
            ``wrong-length``, ``no-list``.
        detail: a human-readable explanation.
        excerpt: the end of the reply (for reports), at most 200 characters.
    """

    reason: str
    detail: str
    excerpt: str = ""

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}"


def _fail(reason: str, detail: str, text: str) -> ParseFailure:
    tail = text.strip()[-200:]
    return ParseFailure(reason=reason, detail=detail, excerpt=tail)


_THINK_OPEN = re.compile(r"<\s*(think|thinking|reasoning)\s*>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"<\s*/\s*(think|thinking|reasoning)\s*>", re.IGNORECASE)


def strip_reasoning(text: str) -> str | ParseFailure:
    """Drop reasoning blocks; keep only the text after the last closing tag.

    Returns:
        The remaining text, or a failure when a block is opened and never closed.
    """
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        return text[closes[-1].end() :]
    if _THINK_OPEN.search(text):
        return _fail(
            "unterminated-reasoning",
            "the reply opens a reasoning block and never closes it (out of tokens?)",
            text,
        )
    return text


def generation_failed(failure: GenerationFailure) -> ParseFailure:
    """The parse failure standing for a reply the backend could not produce.

    A reply cut at ``max_new_tokens`` keeps its own reason, ``truncated``; any other backend
    failure is ``generation-failed`` (its reason is in the detail).
    """
    reason = TRUNCATED if failure.reason == TRUNCATED else "generation-failed"
    return ParseFailure(reason=reason, detail=str(failure))


def _reply_body(text: Reply) -> str | ParseFailure:
    """A judge's reply without its reasoning blocks; a failure if empty or a block never ends."""
    if isinstance(text, GenerationFailure):
        return generation_failed(text)
    if not text or not text.strip():
        return _fail("empty", "the reply is empty", text or "")
    return strip_reasoning(text)


_MARKDOWN = re.compile(r"\*\*|__|`+|^#+\s*|^>\s*|[*\"“”]", re.MULTILINE)


def _plain(text: str) -> str:
    """Remove markdown emphasis, headings, block quotes and quote marks."""
    return _MARKDOWN.sub("", text)


# -- pairwise verdicts ---------------------------------------------------------------------------

_VERDICT_MARKER = re.compile(
    r"(?<![A-Za-z])(?:"
    r"(?:final\s+)?(?:verdict|result|winner|decision|choice|final\s+answer)\s*(?:[:=]|[-–—](?=\s))"
    r"|(?:final\s+)?(?:verdict|winner)\s+is\b)",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s|\n")
_PREFIXED_LABEL = re.compile(
    r"(?<![A-Za-z0-9])(?:response|answer|option|assistant|candidate|output)\s*[(\[]?\s*([AaBb])"
    r"(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_BARE_UPPER_LABEL = re.compile(r"(?<![A-Za-z0-9'’])([AB])(?![A-Za-z0-9'’])")
_TIE_WORDS = re.compile(
    r"\b(tie|tied|draw|toss-?up|stalemate|neither|equal(?:ly)?|same|both)\b", re.IGNORECASE
)
# Letters that are not verdicts: "N/A", and the article in "A tie", "A draw", "A close call".
_NOT_A_LABEL = re.compile(
    r"(?<![A-Za-z0-9])N\s*/\s*A(?![A-Za-z0-9])"
    r"|(?<![A-Za-z0-9'’])A(?=\s+(?:tie|draw|toss-?up|stalemate|dead\s+heat|wash"
    r"|(?:very\s+)?(?:close|hard|tough|difficult)\s+(?:call|choice|one)|coin\s+flip)\b)",
    re.IGNORECASE,
)
# A label under negation ("Not A", "not answer B"): never read as a vote for that label.
_NEGATED_LABEL = re.compile(
    r"(?<![A-Za-z])not\s+(?:(?:response|answer|option|assistant|candidate|output)\s*)?"
    r"[(\[]?\s*([AB])(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_BRACKET_LABEL = re.compile(r"\[\[\s*([AB])\s*\]\]|<answer>\s*\[*\s*([AB])\s*\]*\s*</answer>",
                            re.IGNORECASE)
_ONLY_LABEL = re.compile(
    r"^\s*(?:(?:the\s+)?(?:better\s+)?(?:response|answer|option|candidate)\s*)?[(\[]*\s*([AB])"
    r"\s*[)\]]*\s*[.!]?\s*$",
    re.IGNORECASE,
)


def _labels_in(segment: str) -> set[str]:
    """The answer labels a verdict sentence names (see the module notes on case)."""
    segment = _NOT_A_LABEL.sub(" ", segment)
    found = {m.group(1).upper() for m in _PREFIXED_LABEL.finditer(segment)}
    masked = _PREFIXED_LABEL.sub(" ", segment)
    found |= {m.group(1) for m in _BARE_UPPER_LABEL.finditer(masked)}
    bare = re.sub(r"[\s\[\]().:!]+", "", segment)
    if bare in ("a", "b"):
        found.add(bare.upper())
    return found


def parse_pairwise(text: Reply) -> str | ParseFailure:
    """Read a pairwise verdict: ``"A"``, ``"B"`` or a :class:`ParseFailure`."""
    body = _reply_body(text)
    if isinstance(body, ParseFailure):
        return body
    raw_body = body
    body = _plain(body)
    votes: list[str] = []
    saw_both = saw_tie = saw_negated = False
    markers = list(_VERDICT_MARKER.finditer(body))
    for m in markers:
        rest = body[m.end() :].lstrip(" \t:=-–—")
        segment = _SENTENCE_END.split(rest, maxsplit=1)[0]
        labels = _labels_in(segment)
        negated = {x.upper() for x in _NEGATED_LABEL.findall(segment)}
        if len(labels) == 1 and labels <= negated:
            saw_negated = True
        elif len(labels) == 1:
            votes.append(next(iter(labels)))
        elif len(labels) > 1:
            saw_both = True
        elif _TIE_WORDS.search(segment):
            saw_tie = True
    if markers:
        distinct = set(votes)
        if len(distinct) == 1:
            return votes[0]
        if len(distinct) > 1:
            return _fail(
                "conflicting", f"the reply gives different verdicts ({', '.join(votes)})", text
            )
        if saw_both:
            return _fail("both", "the verdict line names both answers", text)
        if saw_tie:
            return _fail("tie", "the verdict line declares a tie or neither answer", text)
        if saw_negated:
            return _fail("ambiguous", "the verdict line only says which answer did not win", text)
        return _fail("no-verdict", "the verdict line names neither answer", text)
    bracketed = {(a or b).upper() for a, b in _BRACKET_LABEL.findall(raw_body)}
    if len(bracketed) == 1:
        return next(iter(bracketed))
    if len(bracketed) > 1:
        return _fail("both", "the reply marks both answers as the verdict", text)
    only = _ONLY_LABEL.match(body)
    if only:
        return only.group(1).upper()
    return _fail("no-verdict", "no 'Verdict: A' or 'Verdict: B' line found", text)


# -- numeric scores ------------------------------------------------------------------------------

_NUMBER = r"[-+]?\d+(?:\.\d+)?"
_SCORE_WITH_SCALE = re.compile(
    rf"(?<![\w.])({_NUMBER})(?:\s*(?:/|out\s+of)\s*({_NUMBER}))?(?![\w])", re.IGNORECASE
)


def _rating_markers(words: Sequence[str]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(w) for w in words)
    return re.compile(
        rf"(?<![A-Za-z])(?:final\s+)?(?:{alternatives})\s*(?:[:=]|\bis\b)", re.IGNORECASE
    )


def _read_number(
    segment: str, low: float, high: float, integer: bool, text: str
) -> float | ParseFailure:
    numbers = _SCORE_WITH_SCALE.findall(segment)
    if not numbers:
        return _fail("no-verdict", "the score line holds no number", text)
    values = {float(v) for v, _ in numbers}
    if len(values) > 1:
        return _fail(
            "ambiguous", f"the score line holds several numbers ({segment.strip()!r})", text
        )
    value_text, denominator = numbers[0]
    value = float(value_text)
    if denominator and float(denominator) != float(high):
        return _fail(
            "out-of-range", f"the score is given out of {denominator}, not out of {high:g}", text
        )
    if integer and not value.is_integer():
        return _fail("not-integer", f"{value_text} is not a whole number", text)
    if not low <= value <= high:
        return _fail("out-of-range", f"{value_text} is outside {low:g}..{high:g}", text)
    return value


def parse_rating(
    text: Reply,
    *,
    low: float = 0,
    high: float = 10,
    integer: bool = True,
    markers: Sequence[str] = ("rating", "score", "grade"),
) -> float | ParseFailure:
    """Read a single score on the scale ``low..high`` from a ``Rating: N`` line.

    Args:
        text: the reply.
        low: the lowest allowed value.
        high: the highest allowed value (also the only accepted denominator, ``7/10``).
        integer: refuse decimals.
        markers: the words that introduce the score line.
    """
    body = _reply_body(text)
    if isinstance(body, ParseFailure):
        return body
    body = _plain(body)
    found = list(_rating_markers(markers).finditer(body))
    if not found:
        only = re.fullmatch(rf"\s*({_NUMBER})(?:\s*(?:/|out\s+of)\s*{_NUMBER})?\s*[.!]?\s*", body)
        if only:
            return _read_number(body, low, high, integer, text)
        return _fail("no-verdict", f"no '{markers[0].capitalize()}: N' line found", text)
    values: list[float] = []
    first_failure: ParseFailure | None = None
    for m in found:
        segment = _SENTENCE_END.split(body[m.end() :].lstrip(" \t:="), maxsplit=1)[0]
        if not re.search(r"\d", segment):
            continue  # e.g. "the score: see below" -- not a score line
        read = _read_number(segment, low, high, integer, text)
        if isinstance(read, ParseFailure):
            first_failure = first_failure or read
        else:
            values.append(read)
    if first_failure is not None:
        return first_failure
    if not values:
        return _fail("no-verdict", "the score line holds no number", text)
    if len(set(values)) > 1:
        return _fail(
            "conflicting", f"the reply gives different scores ({', '.join(map(str, values))})", text
        )
    return values[0]


# -- aspect-score lists --------------------------------------------------------------------------

_SCORES_LIST = re.compile(r"(?<![A-Za-z])scores?\s*[:=]\s*\[([^\]\n]*)\]", re.IGNORECASE)
_ASPECT_LINE = re.compile(
    r"^\s*(?:[-•]\s*)?(?:aspect|point|item)?\s*#?(\d+)\s*(?:[.):=\-–]|\s)\s*"
    r"(?:[^\n]{0,120}?[:=\-–]\s*)?(-?\d+(?:\.\d+)?)\s*(?:/\s*2)?\s*\.?\s*$",
    re.IGNORECASE | re.MULTILINE,
)


def _check_scores(values: Sequence[str], n: int, text: str) -> tuple[int, ...] | ParseFailure:
    if len(values) != n:
        return _fail("wrong-length", f"got {len(values)} scores for {n} aspects", text)
    out: list[int] = []
    for i, v in enumerate(values, start=1):
        v = v.strip()
        if not re.fullmatch(r"-?\d+(?:\.\d+)?", v):
            return _fail("not-integer", f"score {i} ({v!r}) is not a number", text)
        number = float(v)
        if not number.is_integer():
            return _fail("not-integer", f"score {i} ({v}) is not a whole number", text)
        if number not in (0, 1, 2):
            return _fail("out-of-range", f"score {i} ({v}) is not 0, 1 or 2", text)
        out.append(int(number))
    return tuple(out)


def parse_aspect_scores(text: Reply, n: int) -> tuple[int, ...] | ParseFailure:
    """Read one 0/1/2 score per rubric aspect (exactly ``n`` of them, in order)."""
    if n < 1:
        raise ValueError("parse_aspect_scores needs n >= 1")
    body = _reply_body(text)
    if isinstance(body, ParseFailure):
        return body
    body = _plain(body)
    lists = _SCORES_LIST.findall(body)
    if lists:
        parsed = [_check_scores([v for v in item.split(",") if v.strip()], n, text)
                  for item in lists]
        good = {p for p in parsed if not isinstance(p, ParseFailure)}
        if len(good) > 1:
            return _fail("conflicting", "the reply gives different score lists", text)
        if good:
            return next(iter(good))
        return parsed[-1]
    lines = _ASPECT_LINE.findall(body)
    if lines:
        by_index: dict[int, str] = {}
        for index, value in lines:
            k = int(index)
            if k in by_index and by_index[k] != value:
                return _fail("conflicting", f"aspect {k} is scored twice differently", text)
            by_index[k] = value
        if sorted(by_index) != list(range(1, len(by_index) + 1)) or len(by_index) != n:
            return _fail(
                "wrong-length",
                f"scored aspects {sorted(by_index)} but expected 1..{n}",
                text,
            )
        return _check_scores([by_index[k] for k in range(1, n + 1)], n, text)
    return _fail("no-list", "no 'Scores: [...]' line found", text)


# -- planner lists -------------------------------------------------------------------------------

_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+(.+?)\s*$", re.MULTILINE)


def parse_plan(text: Reply, max_items: int) -> list[str] | ParseFailure:
    """Read the planner's bulleted or numbered list (at most ``max_items`` distinct items)."""
    body = _reply_body(text)
    if isinstance(body, ParseFailure):
        return body
    items: list[str] = []
    seen: set[str] = set()
    for raw in _LIST_ITEM.findall(body):
        item = _plain(raw).strip().rstrip(".;").strip()
        key = item.lower()
        if len(item) < 3 or key in seen:
            continue
        seen.add(key)
        items.append(item)
    if not items:
        return _fail("no-list", "the reply holds no '- ' or numbered list items", text)
    return items[:max_items]


# -- generated answers ---------------------------------------------------------------------------

_ANSWER_LABEL = re.compile(
    r"^\s*(?:#+\s*)?(?:\*\*)?(?:answer|response)\s*(?::\s*\*\*|\*\*\s*:|:)\s*", re.IGNORECASE
)


def clean_answer(text: Reply) -> str | ParseFailure:
    """Tidy a generated answer: drop reasoning, an ``Answer:`` label and wrapping quotes.

    Returns:
        The answer text, or a failure when nothing is left, the reasoning never ended or the
        backend produced no reply.
    """
    if isinstance(text, GenerationFailure):
        return generation_failed(text)
    body = strip_reasoning(text or "")
    if isinstance(body, ParseFailure):
        return body
    body = _ANSWER_LABEL.sub("", body.strip(), count=1).strip()
    if len(body) >= 2 and body[0] == body[-1] and body[0] in "\"'":
        body = body[1:-1].strip()
    if not body:
        return _fail("empty", "the generated answer is empty", text or "")
    return body
