"""What makes a resumed scoring run store exactly the scores of an uninterrupted one.

A run killed with ``kill -9`` keeps every chunk it committed to the score cache; the rerun computes
the rest. Scorers whose last bits depend on more than one request (a padded batch, a prompt shared
by several answers, a check made on the first group seen) would store different bits for the rest
unless two things hold, both kept here:

- **chunks never change**: :func:`plan_chunks` cuts requests greedily, a (question, profile)
  group kept whole unless it alone exceeds a chunk, so that the chunks planned over the requests
  still missing are exactly the remaining chunks of the uninterrupted plan; a scorer composes
  its batches inside one chunk only (it never sees two at once);
- **decisions are made once per fingerprint**: a scorer reports run-time choices that change its
  scores (``decisions()``, e.g. whether prefix sharing passed its check) and takes earlier ones
  (``adopt_decisions(mapping)``); :class:`DecisionKeeper` stores them with the score cache before
  the first scores that depend on them and hands them to every later run, so a resumed process
  does not decide again on whatever group it happens to see first.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

logger = logging.getLogger(__name__)


def group_key(request: Any) -> tuple[str, str]:
    """The (question, profile text) of a request: the requests a scorer may share a prompt for."""
    return (str(request.question), str(getattr(request.profile, "text", "")))


def plan_chunks(
    order: Sequence[int], groups: Sequence[tuple[str, str]], size: int
) -> list[list[int]]:
    """Cut ``order`` into chunks of at most ``size``, keeping equal groups together.

    Requests of one group are made contiguous, in order, and a group is split only when it alone
    is larger than ``size``. Groups come in the order of their **last** request: a run resumed
    after the first chunks were stored plans exactly the remaining chunks of this plan. (In
    order of first appearance it would not: once the first part of a split group is stored, the
    group's first missing request may come after another group's, and the two swap places.)
    """
    by_group: dict[tuple[str, str], list[int]] = {}
    last: dict[tuple[str, str], int] = {}
    for pos, i in enumerate(order):
        by_group.setdefault(groups[pos], []).append(i)
        last[groups[pos]] = pos
    chunks: list[list[int]] = []
    current: list[int] = []
    for key in sorted(by_group, key=last.__getitem__):
        members = by_group[key]
        if current and len(current) + len(members) > size:
            chunks.append(current)
            current = []
        while len(members) > size:
            chunks.append(members[:size])
            members = members[size:]
        current.extend(members)
        if len(current) >= size:
            chunks.append(current)
            current = []
    if current:
        chunks.append(current)
    return chunks


def _json(value: Any) -> dict[str, Any]:
    return json.loads(json.dumps(dict(value or {}), default=str))


class DecisionKeeper:
    """Keeps a scorer's run-time decisions in its score cache (see the module docstring).

    Args:
        scorer: the scorer; decisions are tracked only if it has ``decisions()`` and
            ``adopt_decisions()``.
        cache: its :class:`prbench.scoring.cache.ScoreCache`, or ``None`` (nothing is kept).
        name: the scorer's name, for messages.
    """

    def __init__(self, scorer: Any, cache: Any, name: str) -> None:
        self.scorer = scorer
        self.cache = cache
        self.name = name
        self.active = (
            cache is not None
            and callable(getattr(scorer, "decisions", None))
            and callable(getattr(scorer, "adopt_decisions", None))
        )
        self.stored: dict[str, Any] | None = None  # None: not read yet

    def adopt_stored(self) -> None:
        """Hand the scorer the decisions stored under its fingerprint (read once)."""
        if not self.active or self.stored is not None:
            return
        self.stored = self.cache.decisions()
        if self.stored:
            self.scorer.adopt_decisions(dict(self.stored))

    def store_new(self) -> bool:
        """Store the scorer's new decisions; call it before storing the scores that follow them.

        Returns:
            ``False`` when another process stored a different decision first: the scorer has
            then adopted that one, and what it just computed must be computed again.

        Raises:
            RuntimeError: the scorer does not take the stored decision.
        """
        if not self.active:
            return True
        made = _json(self.scorer.decisions())
        stored = self.stored or {}
        new = {k: v for k, v in made.items() if k not in stored}
        if not new:
            return True
        self.stored = self.cache.decide(new)
        clash = {k: self.stored[k] for k, v in new.items() if self.stored.get(k, v) != v}
        if not clash:
            return True
        self.scorer.adopt_decisions(dict(self.stored))
        now = _json(self.scorer.decisions())
        if any(now.get(k) != v for k, v in clash.items()):
            raise RuntimeError(
                f"scorer {self.name!r} did not adopt the decisions stored with its score cache "
                f"({clash}); its scores would mix two ways of computing them"
            )
        logger.info("scorer %r: adopted decisions stored by another run: %s", self.name, clash)
        return False


__all__ = ["DecisionKeeper", "group_key", "plan_chunks"]
