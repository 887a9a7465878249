"""The input as scored of a chat-template scorer: text, tokens, the cut and where the profile is.

``hf-classifier`` (and its plugins) and ``served-rm`` render each request with a
:class:`~prbench.backends.chat_inputs.ChatEncoder`; :func:`encoded_records` turns what the
encoder built (:class:`~prbench.backends.chat_inputs.EncodedInput`) into the raw records of
:mod:`prbench.scoring.inputs`:

- ``text``: the chat after the template, before any cut -- the string given to the tokenizer;
- ``tokens``: the ids sent (after the cut; 0 for an input too long to score, which is not sent);
  ``tokens_full``: the ids of ``text`` before the cut;
- ``cut`` (``None`` when nothing was cut): ``{"side", "char", "tokens_dropped"}``. ``left``
  (``truncation=left``): the input keeps ``text[char:]`` (after the BOS, which is kept);
  ``right`` (the released formats): it keeps ``text[:char]``; ``middle`` (``truncation=
  profile_first``: the end of the profile, or of the question, was cut at a word): it keeps
  ``text[:char] + text[end_char:]``. ``char`` comes from the tokenizer's offset mapping (only the
  cut inputs are tokenised again for it; ``None`` with a tokenizer that has no offsets). A
  ``middle`` cut that is not one span (the whole profile and the end of the question) also
  carries ``text_sent``, the text actually tokenised;
- ``profile``: ``[start, end]``, the characters of the profile text shown in ``text`` (``None``
  when no profile is shown or its text is not found verbatim, e.g. a template that rewrites it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from prbench.backends.chat_inputs import ChatEncoder, EncodedInput, released_profile_text

T = TypeVar("T")


def shown_profiles(encoder: ChatEncoder, requests: Sequence[Any], *, shows: bool = True
                   ) -> list[str]:
    """The profile text each request shows (``""`` where none is shown).

    Args:
        encoder: the scorer's encoder (its position and ``released_profile``).
        requests: the score requests.
        shows: ``False`` for an input format that shows no profile at all.
    """
    if not shows or encoder.position == "none":
        return [""] * len(requests)
    if encoder.released_profile:
        return [released_profile_text(r.profile)[0] for r in requests]
    return [r.profile.text for r in requests]


def kept_inputs(kept: Mapping[int, T], requests: Sequence[Any]) -> list[T] | None:
    """What a scorer kept of its last call for each of ``requests`` (by ``id``).

    Returns:
        One entry per request, or ``None`` when any request is not of that call (then nothing
        is recorded for any of them).
    """
    found = [kept.get(id(r)) for r in requests]
    if any(e is None for e in found):
        return None
    return [e for e in found if e is not None]


def _offsets(tokenizer: Any, texts: list[str], **kwargs: Any) -> list[list[tuple[int, int]]] | None:
    """The offset mapping of each text, or ``None`` when the tokenizer cannot give one."""
    if not texts:
        return []
    try:
        got = tokenizer(texts, return_offsets_mapping=True, **kwargs)["offset_mapping"]
    except (NotImplementedError, KeyError, TypeError, ValueError):
        return None
    return [[(int(a), int(b)) for a, b in row] for row in got]


def _left_char(encoder: ChatEncoder, enc: EncodedInput, offsets: list[tuple[int, int]],
               ids: list[int]) -> int | None:
    """The first character kept by a ``left`` cut: the offset of the first body token kept."""
    bos = encoder.bos
    stripped = 0
    while bos.bos_id is not None and stripped < len(ids) and ids[stripped] == bos.bos_id:
        stripped += 1
    head = 1 if bos.add else 0
    if len(ids) - stripped + head != enc.full_tokens:
        return None
    first_kept = enc.full_tokens - (encoder.max_length - head)  # in the ids after the BOS rule
    raw = first_kept - head + stripped
    return offsets[raw][0] if 0 <= raw < len(offsets) else None


def _middle_cut(text: str, sent: str, dropped: int) -> dict[str, Any]:
    """The span ``text`` lost to become ``sent`` (a profile or question cut at a word)."""
    limit = min(len(text), len(sent))
    start = 0
    while start < limit and text[start] == sent[start]:
        start += 1
    tail = 0
    while tail < limit - start and text[len(text) - 1 - tail] == sent[len(sent) - 1 - tail]:
        tail += 1
    cut: dict[str, Any] = {"side": "middle", "char": start, "end_char": len(text) - tail,
                           "tokens_dropped": dropped}
    if start + tail != len(sent):  # not one span: say what was sent
        cut["text_sent"] = sent
    return cut


def encoded_records(encoder: ChatEncoder, encoded: Sequence[EncodedInput],
                    profiles: Sequence[str]) -> list[dict[str, Any]]:
    """The raw input records (:mod:`prbench.scoring.inputs`) of encoded requests.

    Args:
        encoder: the encoder that built them (its tokenizer gives the offsets of cut inputs).
        encoded: the encoder's inputs, one per request.
        profiles: the profile text each request shows (:func:`shown_profiles`).
    """
    tokenizer = encoder.tokenizer
    left = [i for i, e in enumerate(encoded) if e.truncated == "left"]
    end = [i for i, e in enumerate(encoded) if e.truncated == "end"]
    left_offsets, left_ids = None, []
    if left:
        got = _offsets(tokenizer, [encoded[i].text for i in left], add_special_tokens=False)
        left_offsets = got
        if got is not None:
            left_ids = tokenizer([encoded[i].text for i in left],
                                 add_special_tokens=False)["input_ids"]
    end_offsets = _offsets(tokenizer, [encoded[i].text for i in end], truncation=True,
                           max_length=encoder.max_length)
    chars: dict[int, int | None] = {}
    for k, i in enumerate(left):
        chars[i] = (None if left_offsets is None else
                    _left_char(encoder, encoded[i], left_offsets[k], list(left_ids[k])))
    for k, i in enumerate(end):
        chars[i] = None if end_offsets is None else max((b for _, b in end_offsets[k]), default=0)
    out = []
    for i, (enc, profile) in enumerate(zip(encoded, profiles, strict=True)):
        text = enc.text
        sent = len(enc.ids)
        cut: dict[str, Any] | None = None
        if enc.truncated in ("left", "end"):
            cut = {"side": "left" if enc.truncated == "left" else "right", "char": chars[i],
                   "tokens_dropped": enc.full_tokens - sent}
        elif enc.truncated in ("profile", "question") and enc.sent_text:
            cut = _middle_cut(text, enc.sent_text, enc.full_tokens - sent)
        start = text.find(profile) if profile else -1
        out.append({
            "text": text,
            "tokens": sent,
            "tokens_full": enc.full_tokens,
            "cut": cut,
            "profile": [start, start + len(profile)] if start >= 0 else None,
        })
    return out


__all__ = ["encoded_records", "kept_inputs", "shown_profiles"]
