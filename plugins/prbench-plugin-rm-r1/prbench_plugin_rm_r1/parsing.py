"""Strict reading of an RM-R1 verdict: only from ``<answer>[[A]]</answer>`` / ``[[B]]``.

- Reasoning before a closing ``</think>`` is dropped; a ``<think>`` never closed is a failure
  (``unterminated-reasoning``: the model ran out of tokens while thinking).
- The reply must contain at least one complete ``<answer>...</answer>`` tag (``no-answer-tag``;
  an opened, never closed tag is ``unterminated-answer``).
- Inside a tag exactly one of ``[[A]]`` / ``[[B]]`` must appear: both is ``both``, neither (a
  bare ``A``, prose) is ``no-marker``.
- Several answer tags must agree (``conflicting`` otherwise).

A failure is never turned into a verdict; the judge scores such an order ``nan`` and counts it.
"""

from __future__ import annotations

import re

from prbench.backends.base import GenerationFailure, Reply
from prbench.judges.parsing import ParseFailure, generation_failed, strip_reasoning

_TAG = re.compile(r"<\s*answer\s*>(.*?)<\s*/\s*answer\s*>", re.IGNORECASE | re.DOTALL)
_OPEN = re.compile(r"<\s*answer\s*>", re.IGNORECASE)
_MARKER = re.compile(r"\[\[\s*([AB])\s*\]\]")


def _fail(reason: str, detail: str, text: str) -> ParseFailure:
    return ParseFailure(reason=reason, detail=detail, excerpt=text.strip()[-200:])


def parse_answer(reply: Reply) -> str | ParseFailure:
    """``"A"`` or ``"B"`` from an RM-R1 reply, or why it cannot be read."""
    if isinstance(reply, GenerationFailure):
        return generation_failed(reply)
    if not reply or not reply.strip():
        return _fail("empty", "the reply is empty", reply or "")
    body = strip_reasoning(reply)
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
