"""Paired comparisons of two sets of 0/1 pair outcomes on the same pairs.

Two reward models (or one under two profile conditions) judged on the *same* pairs are compared
pair by pair: the exact McNemar test counts the pairs only one of them gets right (a two-sided
binomial test on the discordant pairs), and a paired bootstrap resamples pairs once for both, so
the interval of the difference keeps the pairing. Several comparisons at once get Holm-adjusted
p-values (:func:`holm`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from prbench.metrics import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Estimate,
    bootstrap_ci,
)


@dataclasses.dataclass(frozen=True)
class PairedComparison:
    """A vs B on the same pairs.

    Attributes:
        n: pairs in common.
        a: accuracy of A on them.
        b: accuracy of B on them.
        diff: A - B with its paired bootstrap interval.
        only_a: pairs A gets right and B does not.
        only_b: pairs B gets right and A does not.
        p_mcnemar: exact two-sided McNemar p-value.
    """

    n: int
    a: float
    b: float
    diff: Estimate
    only_a: int
    only_b: int
    p_mcnemar: float

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        out = dataclasses.asdict(self)
        out["diff"] = self.diff.as_dict()
        return out


def align(
    a: Mapping[str, float], b: Mapping[str, float]
) -> tuple[list[str], list[float], list[float]]:
    """The pair ids both have (sorted) and the two outcome lists on them.

    Raises:
        ValueError: no pair in common.
    """
    ids = sorted(set(a) & set(b))
    if not ids:
        raise ValueError("the two results share no pair: a paired comparison needs the same pairs")
    return ids, [float(a[i]) for i in ids], [float(b[i]) for i in ids]


def mcnemar_exact(a: Sequence[float], b: Sequence[float]) -> tuple[int, int, float]:
    """(only A right, only B right, exact two-sided p) for 0/1 outcomes on the same pairs.

    Raises:
        ValueError: the lists differ in length.
    """
    from scipy.stats import binomtest

    if len(a) != len(b):
        raise ValueError(f"{len(a)} outcomes against {len(b)}")
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x >= 0.5 > y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y >= 0.5 > x)
    discordant = only_a + only_b
    p = 1.0 if discordant == 0 else float(binomtest(only_a, discordant, 0.5).pvalue)
    return only_a, only_b, p


def compare(
    a: Mapping[str, float],
    b: Mapping[str, float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> PairedComparison:
    """Compare two outcome maps (pair id -> 0/1) on their common pairs."""
    ids, xa, xb = align(a, b)
    diff = bootstrap_ci(
        [x - y for x, y in zip(xa, xb, strict=True)], resamples=resamples,
        confidence=confidence, seed=seed,
    )
    only_a, only_b, p = mcnemar_exact(xa, xb)
    return PairedComparison(
        n=len(ids), a=sum(xa) / len(ids), b=sum(xb) / len(ids), diff=diff, only_a=only_a,
        only_b=only_b, p_mcnemar=p,
    )


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


__all__ = ["PairedComparison", "align", "compare", "holm", "mcnemar_exact"]
