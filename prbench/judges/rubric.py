"""``rubric-judge``: downstream answer quality, scored per gold rubric aspect.

Each of the user's rubric aspects is scored 0 (not addressed), 1 (partly) or 2 (well covered); an
answer's quality is the mean over its aspects (0-2), and that mean divided by 2 (0-1, the scale
LaMP-QA reports). This is how Best-of-N and RL outputs are judged.

Two modes: ``list`` asks for all of a question's aspects in one reply (``Scores: [2, 0, 1]``, the
list must have exactly one value per aspect); ``per-aspect`` asks once per aspect (``Score: N``),
as LaMP-QA's evaluator does (slower, easier for small judges). An item with any unreadable score,
or any reply the backend could not produce, has no quality (``nan``) and is counted and listed
with its reason; it is never averaged over the aspects that did parse.

It reads the hidden rubric, so as a scorer it is registered as a diagnostic: use it to measure
downstream quality or as an upper bound, never as a reward model under test.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from prbench.judges import prompts
from prbench.judges.common import BackendOptions, LLMJudgeBase
from prbench.judges.parsing import ParseFailure, parse_aspect_scores, parse_rating
from prbench.judges.rating import JudgeParseError
from prbench.records import RubricAspect
from prbench.scoring.base import ScoreRequest


@dataclasses.dataclass(frozen=True)
class RubricJudgeOptions(BackendOptions):
    """Options of ``rubric-judge`` (backend and decoding options, see :class:`BackendOptions`)."""

    mode: Literal["list", "per-aspect"] = dataclasses.field(
        default="list", metadata={"help": "'list': all aspects in one reply; 'per-aspect': each"}
    )
    include_reason: bool = dataclasses.field(
        default=True, metadata={"help": "show each aspect's 'reason' to the judge"}
    )
    include_narrative: bool = dataclasses.field(
        default=False, metadata={"help": "show the user's narrative to the judge"}
    )
    scale: Literal["unit", "raw"] = dataclasses.field(
        default="unit", metadata={"help": "as a scorer: 'unit' = mean/2 in 0..1, 'raw' = 0..2"}
    )
    on_failure: Literal["nan", "raise"] = dataclasses.field(
        default="nan", metadata={"help": "an unreadable item scores nan (counted), or raises"}
    )


@dataclasses.dataclass(frozen=True)
class RubricItem:
    """One answer to judge against one question's gold rubric.

    Attributes:
        question: the user's question.
        aspects: the gold rubric aspects (at least one).
        answer: the answer to judge.
        narrative: the user's narrative (shown only with ``include_narrative``).
        key: an id for reports (record id, candidate id, ...).
    """

    question: str
    aspects: tuple[RubricAspect, ...]
    answer: str
    narrative: str = ""
    key: str = ""


@dataclasses.dataclass(frozen=True)
class RubricResult:
    """The judge's scores for one :class:`RubricItem`.

    Attributes:
        aspect_scores: one score per aspect (0/1/2), ``None`` where unreadable.
        mean: the mean over aspects (0-2); ``nan`` when any aspect is unreadable.
        failure: why the item (or its first unreadable aspect) failed, else ``None``.
    """

    aspect_scores: tuple[int | None, ...]
    mean: float
    failure: ParseFailure | None = None

    @property
    def unit(self) -> float:
        """The mean on a 0-1 scale (``mean / 2``)."""
        return self.mean / 2

    @property
    def ok(self) -> bool:
        """True when every aspect was scored."""
        return self.failure is None


def aspects_from_hidden(hidden: Mapping[str, Any] | None, where: str) -> tuple[RubricAspect, ...]:
    """Rubric aspects from a request's ``hidden`` mapping.

    Raises:
        ValueError: ``hidden`` is missing or holds no aspects.
    """
    if hidden is None:
        raise ValueError(
            f"{where}: rubric-judge needs the hidden rubric; the harness passes it only to "
            "components registered with diagnostic=True"
        )
    out = []
    for a in hidden.get("rubric_aspects") or []:
        if isinstance(a, RubricAspect):
            out.append(a)
        else:
            out.append(
                RubricAspect(
                    aspect=str(a["aspect"]),
                    evidence=str(a.get("evidence", "")),
                    reason=str(a.get("reason", "")),
                )
            )
    if not out:
        raise ValueError(f"{where}: the record has no rubric aspects to judge against")
    return tuple(out)


class RubricJudge(LLMJudgeBase):
    """Scores answers per gold rubric aspect; a diagnostic :class:`Scorer` too.

    Args:
        options: the judge's options.
        backend: a ready backend (tests, sharing one model); built from ``options`` otherwise.
    """

    name = "rubric-judge"
    options: RubricJudgeOptions

    def reset_stats(self) -> None:
        """Forget the counts gathered so far."""
        super().reset_stats()
        self._items = 0
        self._failed_items = 0

    def _pairs(self, item: RubricItem) -> list[tuple[str, str]]:
        return [
            (a.aspect, a.reason if self.options.include_reason else "") for a in item.aspects
        ]

    def judge(self, items: Sequence[RubricItem]) -> list[RubricResult]:
        """Score every item's answer on every one of its aspects.

        Raises:
            ValueError: an item has no aspects.
            JudgeParseError: with ``on_failure="raise"``, after the batch, if any item failed.
        """
        o = self.options
        for i, item in enumerate(items):
            if not item.aspects:
                raise ValueError(f"rubric-judge: item {item.key or i!r} has no rubric aspects")
        narrative = (lambda it: it.narrative) if o.include_narrative else (lambda it: "")
        chats = []
        owners: list[tuple[int, int]] = []  # (item index, aspect index or -1 for the whole list)
        for i, item in enumerate(items):
            pairs = self._pairs(item)
            if o.mode == "list":
                chats.append(
                    prompts.rubric_list_chat(item.question, pairs, item.answer, narrative(item))
                )
                owners.append((i, -1))
            else:
                for k, pair in enumerate(pairs):
                    chats.append(
                        prompts.rubric_one_chat(item.question, pair, item.answer, narrative(item))
                    )
                    owners.append((i, k))
        replies = self._generate(chats, unit="reply")
        scores: list[list[int | None]] = [[None] * len(item.aspects) for item in items]
        failures: list[ParseFailure | None] = [None] * len(items)

        def read_list(n: int) -> Any:
            return lambda text: parse_aspect_scores(text, n)

        def read_one(text: str) -> float | ParseFailure:
            return parse_rating(text, low=0, high=2, integer=True, markers=("score",))

        for (i, k), reply in zip(owners, replies, strict=True):
            key = items[i].key or str(i)
            if k < 0:
                parsed = self._read(reply, read_list(len(items[i].aspects)), key)
                if isinstance(parsed, ParseFailure):
                    failures[i] = parsed
                else:
                    scores[i] = list(parsed)
            else:
                value = self._read(reply, read_one, key, aspect=k)
                if isinstance(value, ParseFailure):
                    failures[i] = failures[i] or value
                else:
                    scores[i][k] = int(value)
        results = []
        for aspect_scores, failure in zip(scores, failures, strict=True):
            self._items += 1
            if failure is None:
                mean = sum(s for s in aspect_scores if s is not None) / len(aspect_scores)
            else:
                mean = math.nan
                self._failed_items += 1
            results.append(RubricResult(tuple(aspect_scores), mean, failure))
        if o.on_failure == "raise":
            bad = [
                (item.key or str(i), r.failure)
                for i, (item, r) in enumerate(zip(items, results, strict=True))
                if r.failure is not None
            ]
            if bad:
                raise JudgeParseError(self.name, bad)
        return results

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """As a diagnostic scorer: rubric quality of each response (0-1, or 0-2 with scale=raw)."""
        items = [
            RubricItem(
                question=r.question,
                aspects=aspects_from_hidden(r.hidden, f"record {r.record_id!r}"),
                answer=r.response,
                narrative=str((r.hidden or {}).get("narrative", "")),
                key=r.record_id,
            )
            for r in requests
        ]
        results = self.judge(items)
        if self.options.scale == "unit":
            return [r.unit for r in results]
        return [r.mean for r in results]

    def stats(self) -> dict[str, Any]:
        """Counts since the last :meth:`reset_stats`, JSON-ready (for results files)."""
        return {
            **self._stats_head(),
            "mode": self.options.mode,
            "n_items": self._items,
            "n_items_failed": self._failed_items,
            **self._stats_tail(),
        }
