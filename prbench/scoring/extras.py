"""Per-request extras: what a scorer reports beside each score, kept with it in the score cache.

A scorer may define ``request_extras(requests)``; the runtime calls it right after each
``score``/``compare`` call on the same requests and gets one JSON-ready value (or ``None``) per
request -- e.g. a pairwise judge's per-order verdicts, from which the tasks compute the
both-order metrics (:mod:`prbench.judges.order_metrics`). :class:`RequestExtras` keeps them by
request key in the score cache (table ``extras``, beside the scores) and, for the requests of
the runtime's latest call (scored or read from the cache), in memory: memory stays bounded in a
long-running reward server. A pairwise judge's cached
score without its extras (a cache written before they existed) counts as a miss: it is judged
again, so every pair it reports on has its orders.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class RequestExtras:
    """The extras of one scorer, by request key.

    Args:
        scorer: the scorer (its ``request_extras`` is used when it has one).
        name: the scorer's name, for error messages.
        required: a cached score without extras is a miss (pairwise judges).
    """

    def __init__(self, scorer: Any, name: str, *, required: bool) -> None:
        collect = getattr(scorer, "request_extras", None)
        self.collect_fn = collect if callable(collect) else None
        self.name = name
        self.required = required
        self.values: dict[str, Any] = {}

    def new_call(self) -> None:
        """Forget the previous call's extras (the runtime starts a ``score``/``compare`` call)."""
        self.values.clear()

    def from_cache(self, cache: Any, known: Mapping[str, float]) -> dict[str, float]:
        """Load the extras of the cached scores ``known``; return the hits that stay hits."""
        if self.collect_fn is None or not known:
            return dict(known)
        stored = cache.get_extras(list(known))
        self.values.update(stored)
        return {k: v for k, v in known.items() if k in stored or not self.required}

    def collect(self, batch: Sequence[Any], keys: Sequence[str]) -> dict[str, Any]:
        """Ask the scorer for the extras of the batch it just scored; keep and return them.

        Raises:
            TypeError: ``request_extras`` did not return one value per request.
        """
        if self.collect_fn is None:
            return {}
        values = self.collect_fn(list(batch))
        if not isinstance(values, list | tuple) or len(values) != len(batch):
            got = f"{len(values)} values" if isinstance(values, list | tuple) else repr(values)
            raise TypeError(
                f"scorer {self.name!r}: request_extras() must return one value per request "
                f"({len(batch)}), got {got}"
            )
        found = {k: v for k, v in zip(keys, values, strict=True) if v is not None}
        self.values.update(found)
        return found

    def get(self, keys: Sequence[str]) -> list[Any]:
        """The extras of ``keys``, ``None`` where there are none."""
        return [self.values.get(k) for k in keys]


__all__ = ["RequestExtras"]
