"""The input as scored: what a scorer sent for each request, bounded, for the samples file.

A scorer may define ``request_inputs(requests, *, sent)``; the runtime calls it (when the
runtime option ``record_input`` is on, the default) and gets one raw record (or ``None``) per
request:

- ``sent=True``: right after a ``score``/``compare`` call, on the same requests: what that call
  sent (the scorer keeps it while it scores, so nothing is rendered or tokenised twice);
- ``sent=False``: for requests whose score came from the score cache: the input rebuilt as it
  would be sent (rendering is deterministic), nothing run through a model or a server.

A pointwise scorer's raw record is ``{"text": str}`` plus, where it knows them, ``"messages"``
(chat messages as sent; then the record's text is the messages' JSON, see
:func:`messages_text`), ``"tokens"`` (ids sent, after truncation), ``"tokens_full"`` (before),
``"cut"`` (``{"side": "left"|"right"|"middle", "char": int, ...}``), ``"profile"`` (the
``[start, end]`` characters of the profile in the text) and, for a pointwise judge, ``"reply"``.
A pairwise judge's is ``{"orders": [{"shown_first": "first"|"second", "messages": [...],
"tokens": int|None, "reply": str|None}, ...]}``, one entry per order asked, in the order asked.

:class:`InputRecorder` turns them into the samples-file form (:func:`answer_record`,
:func:`order_record`: at most ``limit`` characters of each text, its length and sha256 over the
whole text) and shares each call's wall time among its requests (:func:`share_time`): by tokens
when every request of the call reports them, else equally. It keeps the records of the
runtime's latest call in memory only (they are never written to the score cache).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

logger = logging.getLogger(__name__)

#: Characters of one text (one message's content for chat inputs) kept by default.
DEFAULT_INPUT_CHARS = 32000


def messages_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """Chat messages as one text: their JSON list (sorted keys, compact, Unicode kept).

    This is the text whose length and sha256 a record of chat messages reports.
    """
    rows = [{"role": str(m.get("role", "")), "content": str(m.get("content", ""))}
            for m in messages]
    return json.dumps(rows, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_text(text: str) -> str:
    """The hex sha256 of ``text``'s UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def clip(text: str, limit: int) -> tuple[str, bool]:
    """The first ``limit`` characters of ``text``, and whether that cut anything."""
    return (text[:limit], True) if len(text) > limit else (text, False)


def _clipped_messages(messages: Sequence[Mapping[str, Any]], limit: int
                      ) -> tuple[list[dict[str, str]], bool]:
    out, any_cut = [], False
    for m in messages:
        content, cut = clip(str(m.get("content", "")), limit)
        any_cut = any_cut or cut
        out.append({"role": str(m.get("role", "")), "content": content})
    return out, any_cut


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def answer_record(raw: Mapping[str, Any], limit: int, *, cached: bool) -> dict[str, Any]:
    """A pointwise scorer's raw record in the samples-file form (``time_s`` left ``None``).

    Raises:
        TypeError: the raw record has no text and no messages.
    """
    messages = raw.get("messages")
    if isinstance(messages, list):
        full = messages_text(messages)
        shown_messages, _ = _clipped_messages(messages, limit)
    elif isinstance(raw.get("text"), str):
        full, shown_messages = raw["text"], None
    else:
        raise TypeError("an input record needs a 'text' string or a 'messages' list")
    text, clipped = clip(full, limit)
    out: dict[str, Any] = {"text": text}
    if shown_messages is not None:
        out["messages"] = shown_messages
    cut = raw.get("cut")
    if isinstance(cut, Mapping) and isinstance(cut.get("text_sent"), str):
        cut = {**cut, "text_sent": clip(cut["text_sent"], limit)[0]}
    profile = raw.get("profile")
    out.update({
        "chars": len(full),
        "sha256": sha256_text(full),
        "clipped": clipped,
        "tokens": _int_or_none(raw.get("tokens")),
        "tokens_full": _int_or_none(raw.get("tokens_full")),
        "cut": dict(cut) if isinstance(cut, Mapping) else None,
        "profile": [int(profile[0]), int(profile[1])] if isinstance(profile, list | tuple)
        and len(profile) == 2 else None,
        "time_s": None,
        "cached": cached,
    })
    if "reply" in raw:  # a pointwise judge: its reply to the messages
        reply = raw["reply"]
        out["reply"] = clip(reply, limit)[0] if isinstance(reply, str) else None
    return out


def order_record(raw: Mapping[str, Any], limit: int, *, cached: bool) -> dict[str, Any]:
    """One order of a pairwise judge in the samples-file form (``time_s`` left ``None``)."""
    messages = raw.get("messages") if isinstance(raw.get("messages"), list) else []
    full = messages_text(messages)
    shown, clipped = _clipped_messages(messages, limit)
    reply = raw.get("reply")
    return {
        "shown_first": str(raw.get("shown_first", "")),
        "messages": shown,
        "chars": len(full),
        "sha256": sha256_text(full),
        "clipped": clipped,
        "tokens": _int_or_none(raw.get("tokens")),
        "reply": clip(reply, limit)[0] if isinstance(reply, str) else None,
        "time_s": None,
        "cached": cached,
    }


def record_of(raw: Any, limit: int, *, cached: bool) -> dict[str, Any] | None:
    """A raw record in the samples-file form: ``{"orders": [...]}`` for a judge, else an answer.

    ``None`` for anything that is not a raw record.
    """
    if not isinstance(raw, Mapping):
        return None
    if isinstance(raw.get("orders"), list):
        return {"orders": [order_record(o, limit, cached=cached) for o in raw["orders"]
                           if isinstance(o, Mapping)]}
    return answer_record(raw, limit, cached=cached)


def _tokens_of(record: Mapping[str, Any]) -> int | None:
    if "orders" in record:
        counts = [o.get("tokens") for o in record["orders"]]
        if not counts or any(not isinstance(c, int) for c in counts):
            return None
        return sum(counts)
    tokens = record.get("tokens")
    return tokens if isinstance(tokens, int) else None


def _weights(counts: Sequence[int | None]) -> list[float]:
    """Shares by token count when every count is known and their sum positive, else equal."""
    known = [c for c in counts if c is not None]
    if counts and len(known) == len(counts) and sum(known) > 0:
        total = float(sum(known))
        return [c / total for c in known]
    return [1.0 / len(counts)] * len(counts) if counts else []


def share_time(records: Sequence[dict[str, Any] | None], wall_s: float) -> None:
    """Set each record's ``time_s`` to its share of one call's wall time (in place).

    The call's time is divided among its requests by tokens sent when every request reports
    them, else equally; a judge's share of a pair is divided among its orders the same way.
    Requests without a record take their share with them (it is not given to the others).
    """
    counts = [_tokens_of(r) if r is not None else None for r in records]
    for record, weight in zip(records, _weights(counts), strict=True):
        if record is None:
            continue
        share = wall_s * weight
        if "orders" in record:
            orders = record["orders"]
            order_counts = [_int_or_none(o.get("tokens")) for o in orders]
            for order, w in zip(orders, _weights(order_counts), strict=True):
                order["time_s"] = share * w
        else:
            record["time_s"] = share


def response_inputs(requests: Sequence[Any]) -> list[dict[str, Any]]:
    """The raw record of scorers that read the answer alone: its text, no tokens."""
    return [{"text": str(r.response)} for r in requests]


class InputRecorder:
    """The input each request of the runtime's latest call was scored from, by request key.

    Args:
        scorer: the scorer (its ``request_inputs`` is used when it has one).
        name: the scorer's name, for warnings.
        enabled: record inputs at all (the runtime option ``record_input``).
        limit: characters kept per text (the runtime option ``record_input_chars``).
    """

    def __init__(self, scorer: Any, name: str, *, enabled: bool, limit: int) -> None:
        collect = getattr(scorer, "request_inputs", None)
        self.collect_fn = collect if enabled and callable(collect) else None
        self.name = name
        self.limit = int(limit)
        self.values: dict[str, dict[str, Any]] = {}
        self._warned = False

    @property
    def active(self) -> bool:
        """Whether inputs are recorded (the option is on and the scorer reports them)."""
        return self.collect_fn is not None

    def new_call(self) -> None:
        """Forget the previous call's inputs."""
        self.values.clear()

    def _ask(self, batch: Sequence[Any], *, sent: bool) -> list[Any]:
        """The scorer's raw records, or ``None`` each when it fails (said once, never fatal)."""
        assert self.collect_fn is not None
        try:
            values = self.collect_fn(list(batch), sent=sent)
        except Exception as exc:  # informative only: never lose scores over it
            values, problem = None, f"raised {type(exc).__name__}: {exc}"
        else:
            problem = "" if isinstance(values, list | tuple) and len(values) == len(batch) else (
                f"returned {type(values).__name__} instead of one record per request")
        if problem:
            if not self._warned:
                self._warned = True
                logger.warning("scorer %r: request_inputs() %s; the input as scored is not "
                               "recorded for those requests", self.name, problem)
            return [None] * len(batch)
        return list(values)  # type: ignore[arg-type]

    def _keep(self, keys: Sequence[str], raws: Sequence[Any], *, cached: bool
              ) -> list[dict[str, Any] | None]:
        records = []
        for key, raw in zip(keys, raws, strict=True):
            try:
                record = record_of(raw, self.limit, cached=cached)
            except (TypeError, ValueError, IndexError) as exc:
                if not self._warned:
                    self._warned = True
                    logger.warning("scorer %r: a request_inputs() record is unusable (%s)",
                                   self.name, exc)
                record = None
            if record is not None:
                self.values[key] = record
            records.append(record)
        return records

    def sent(self, batch: Sequence[Any], keys: Sequence[str], wall_s: float) -> None:
        """Keep what the scorer's call on ``batch`` sent, sharing its wall time ``wall_s``."""
        if self.collect_fn is None:
            return
        records = self._keep(keys, self._ask(batch, sent=True), cached=False)
        share_time(records, wall_s)

    def rebuilt(self, batch: Sequence[Any], keys: Sequence[str],
                extras: Sequence[Any] | None = None) -> None:
        """Keep the inputs of score-cache hits, rebuilt (``cached: true``, ``time_s: null``).

        Args:
            batch: the requests whose scores came from the cache.
            keys: their request keys.
            extras: their cached extras; a judge's replies are read back from them.
        """
        if self.collect_fn is None or not batch:
            return
        records = self._keep(keys, self._ask(batch, sent=False), cached=True)
        for record, extra in zip(records, extras or [None] * len(records), strict=True):
            if record is not None and "orders" in record and isinstance(extra, Mapping):
                fill_replies(record["orders"], extra, self.limit)

    def get(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        """The records of ``keys`` (``None`` where none was recorded)."""
        return [self.values.get(k) for k in keys]


def fill_replies(orders: list[dict[str, Any]], outcome: Mapping[str, Any], limit: int) -> None:
    """Give rebuilt orders the replies a cached judge outcome kept (same orders, same order)."""
    asked = outcome.get("orders")
    replies = outcome.get("replies")
    if not isinstance(asked, list) or not isinstance(replies, list):
        return
    if len(asked) != len(orders) or len(replies) != len(orders):
        return
    for order, row, reply in zip(orders, asked, replies, strict=True):
        same = isinstance(row, list | tuple) and row and row[0] == order["shown_first"]
        if same and order["reply"] is None and isinstance(reply, Mapping):
            text = reply.get("reply")
            order["reply"] = clip(text, limit)[0] if isinstance(text, str) else None


__all__ = [
    "DEFAULT_INPUT_CHARS",
    "InputRecorder",
    "answer_record",
    "clip",
    "messages_text",
    "order_record",
    "record_of",
    "response_inputs",
    "sha256_text",
    "share_time",
]
