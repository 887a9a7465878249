"""Reading an RM-R1 verdict: two rules, ``parse=strict`` (the default) and ``parse=original``.

``strict`` (:func:`parse_answer`) reads the verdict only from ``<answer>[[A]]</answer>`` /
``[[B]]``:

- Reasoning before a closing ``</think>`` is dropped; a ``<think>`` never closed is a failure
  (``unterminated-reasoning``: the model ran out of tokens while thinking).
- The reply must contain at least one complete ``<answer>...</answer>`` tag (``no-answer-tag``;
  an opened, never closed tag is ``unterminated-answer``).
- Inside a tag exactly one of ``[[A]]`` / ``[[B]]`` must appear: both is ``both``, neither (a
  bare ``A``, prose) is ``no-marker``.
- Several answer tags must agree (``conflicting`` otherwise).

``original`` (:func:`parse_original`) is the rule of the authors' evaluation at its current HEAD
(``process_judgement`` in their ``rewardbench/generative.py``): it reads the whole reply,
reasoning included, and takes the verdict when exactly one of the two exact markers ``[[A]]`` /
``[[B]]`` appears anywhere (any number of times); both markers is an error there (their guard
against a reply naming both; earlier commits checked ``[[A]]`` first and so counted such a reply
as A), here ``both``; neither is ``no-marker``. The authors score an error 0, as prbench scores an
unreadable order. The whole reply includes the reasoning a server's reasoning parser moved out of
``content`` (``reasoning_content``): the authors generate with vLLM offline and read the raw
text, ``<think>`` block included. A reply cut at ``max_new_tokens`` is read like any other, as the
authors read it (the judge counts how many cut replies it read).

Under ``strict`` a reply cut at ``max_new_tokens`` is ``truncated`` (it normally arrives as a
:class:`~prbench.backends.base.GenerationFailure` from the judge's generation), and a failure is
never turned into a verdict; the judge scores such an order ``nan`` and counts it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from prbench.api import (
    GenerationFailure,
    ParseFailure,
    Reply,
    generation_failed,
    is_truncated,
    strip_reasoning,
    truncation_failure,
)

_TAG = re.compile(r"<\s*answer\s*>(.*?)<\s*/\s*answer\s*>", re.IGNORECASE | re.DOTALL)
_OPEN = re.compile(r"<\s*answer\s*>", re.IGNORECASE)
_MARKER = re.compile(r"\[\[\s*([AB])\s*\]\]")


def _fail(reason: str, detail: str, text: str) -> ParseFailure:
    return ParseFailure(reason=reason, detail=detail, excerpt=text.strip()[-200:])


def _unusable(reply: Reply, *, read_cut: bool = False) -> ParseFailure | None:
    """The failure of a reply the rule cannot read (no reply, an empty one, and a cut one unless
    ``read_cut``), else ``None``.
    """  # noqa: D205
    if isinstance(reply, GenerationFailure):
        return generation_failed(reply)
    if is_truncated(reply) and not read_cut:
        return generation_failed(truncation_failure(reply))
    if not reply or not reply.strip():
        return _fail("empty", "the reply is empty", reply or "")
    return None


def full_text(reply: str) -> str:
    """The reply with the reasoning a server moved out of it put back in front, as
    ``<think>reasoning</think>`` (the text the model wrote, as vLLM offline returns it).
    """  # noqa: D205
    reasoning = getattr(reply, "reasoning", "")
    return f"<think>{reasoning}</think>{reply}" if reasoning else str(reply)


def parse_original(reply: Reply) -> str | ParseFailure:
    """``"A"`` or ``"B"`` by the authors' rule: exactly one of ``[[A]]`` / ``[[B]]`` anywhere
    in the whole reply (reasoning included); a reply cut at the budget is read too.
    """  # noqa: D205
    if isinstance(reply, str):
        reply_text: Reply = full_text(reply) if getattr(reply, "reasoning", "") else reply
    else:
        reply_text = reply
    early = _unusable(reply_text, read_cut=True)
    if early is not None:
        return early
    text = str(reply_text)
    has_a, has_b = "[[A]]" in text, "[[B]]" in text
    if has_a and has_b:
        return _fail("both", "the reply names both [[A]] and [[B]]", text)
    if not has_a and not has_b:
        return _fail("no-marker", "the reply names neither [[A]] nor [[B]]", text)
    return "A" if has_a else "B"


def parse_answer(reply: Reply) -> str | ParseFailure:
    """``"A"`` or ``"B"`` from an RM-R1 reply by the strict rule, or why it cannot be read."""
    early = _unusable(reply)
    if early is not None:
        return early
    body = strip_reasoning(reply)  # type: ignore[arg-type]
    if isinstance(body, ParseFailure):
        return body
    tags = _TAG.findall(body)
    if not tags:
        if _OPEN.search(body):
            return _fail("unterminated-answer", "an <answer> tag is never closed", reply)
        return _fail("no-answer-tag", "no <answer>...</answer> tag in the reply", reply)
    votes = []
    for content in tags:
        labels = set(_MARKER.findall(content))
        if len(labels) == 2:
            return _fail("both", "an answer tag names both [[A]] and [[B]]", reply)
        if not labels:
            return _fail("no-marker", "an answer tag holds neither [[A]] nor [[B]]", reply)
        votes.append(labels.pop())
    if len(set(votes)) > 1:
        return _fail("conflicting", "answer tags name different replies", reply)
    return votes[0]


def parser(rule: str) -> Callable[[Reply], str | ParseFailure]:
    """The reply parser of a ``parse`` option value (``strict`` or ``original``).

    Raises:
        ValueError: an unknown rule.
    """
    rules: dict[str, Callable[[Reply], str | ParseFailure]] = {
        "strict": parse_answer, "original": parse_original,
    }
    if rule not in rules:
        raise ValueError(f"unknown parse rule {rule!r}; use 'strict' or 'original'")
    return rules[rule]
