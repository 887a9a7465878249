"""Pairwise accuracy, ties, margins and bootstrap confidence intervals.

A pair counts as correct only when the reward model scores the chosen answer *strictly* above the
rejected one: a tie is wrong (as in the released evaluation script) and is counted separately, and
a pair with a non-finite score (a judge that could not give a verdict) is wrong and counted as
``invalid``. Every accuracy comes with a seeded percentile-bootstrap confidence interval; over
several domains, ``micro`` pools all pairs and ``macro`` is the unweighted mean of the domains, both
with a bootstrap that resamples pairs within each domain (the domain sizes stay fixed).
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

DEFAULT_RESAMPLES = 10_000
DEFAULT_CONFIDENCE = 0.95
DEFAULT_SEED = 0


@dataclasses.dataclass(frozen=True)
class PairOutcome:
    """What one chosen/rejected pair contributes.

    Attributes:
        correct: 1.0 when score(chosen) > score(rejected) strictly, else 0.0.
        tie: 1.0 when both scores are equal (and finite).
        margin: score(chosen) - score(rejected); ``nan`` when a score is not finite.
        invalid: 1.0 when a score is ``nan`` or infinite (no verdict).
    """

    correct: float
    tie: float
    margin: float
    invalid: float


def pair_outcome(chosen: float, rejected: float) -> PairOutcome:
    """Score one pair strictly: a tie or a missing verdict is not correct."""
    c, r = float(chosen), float(rejected)
    if not (math.isfinite(c) and math.isfinite(r)):
        return PairOutcome(correct=0.0, tie=0.0, margin=math.nan, invalid=1.0)
    return PairOutcome(
        correct=1.0 if c > r else 0.0, tie=1.0 if c == r else 0.0, margin=c - r, invalid=0.0
    )


def accuracy(chosen: Sequence[float], rejected: Sequence[float]) -> float:
    """Strict pairwise accuracy (ties and non-finite scores count as wrong).

    Raises:
        ValueError: the two sequences differ in length or are empty.
    """
    _check_pairs(chosen, rejected)
    return sum(pair_outcome(c, r).correct for c, r in zip(chosen, rejected, strict=True)) / len(
        chosen
    )


def tie_rate(chosen: Sequence[float], rejected: Sequence[float]) -> float:
    """Share of pairs whose two scores are equal."""
    _check_pairs(chosen, rejected)
    return sum(pair_outcome(c, r).tie for c, r in zip(chosen, rejected, strict=True)) / len(chosen)


def finite_mean(values: Sequence[float]) -> float:
    """Mean of the finite values (``nan`` when there is none)."""
    kept = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return sum(kept) / len(kept) if kept else math.nan


def _check_pairs(chosen: Sequence[float], rejected: Sequence[float]) -> None:
    if len(chosen) != len(rejected):
        raise ValueError(f"{len(chosen)} chosen scores but {len(rejected)} rejected scores")
    if not chosen:
        raise ValueError("no pairs")


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A point estimate with its bootstrap confidence interval.

    Attributes:
        value: the estimate on the data as observed.
        low: lower end of the interval.
        high: upper end of the interval.
        n: number of items (pairs) behind the estimate.
        confidence: the interval's nominal coverage, e.g. 0.95.
        resamples: bootstrap resamples drawn.
        seed: the bootstrap seed.
    """

    value: float
    low: float
    high: float
    n: int
    confidence: float = DEFAULT_CONFIDENCE
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED

    def as_dict(self) -> dict[str, float | int]:
        """JSON-ready form."""
        return dataclasses.asdict(self)


def _percentiles(samples: object, confidence: float) -> tuple[float, float]:
    import numpy as np

    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(samples, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _check_args(resamples: int, confidence: float) -> None:
    if resamples < 1:
        raise ValueError(f"resamples must be positive, got {resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")


def _resample(data: Any, rng: Any, resamples: int, stat: Literal["mean", "sum"]) -> Any:
    """The ``stat`` of each of ``resamples`` bootstrap resamples of the 1-d array ``data``.

    Draws in chunks so that large samples do not need a resamples x n matrix at once.
    """
    import numpy as np

    out = np.empty(resamples)
    chunk = max(1, min(resamples, 2_000_000 // data.size))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, data.size, size=(stop - start, data.size))
        out[start:stop] = getattr(data[idx], stat)(axis=1)
    return out


def bootstrap_ci(
    values: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> Estimate:
    """Percentile-bootstrap interval of the mean of ``values`` (e.g. per-pair 0/1 outcomes).

    Raises:
        ValueError: ``values`` is empty, or the arguments are out of range.
    """
    import numpy as np

    _check_args(resamples, confidence)
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("cannot bootstrap an empty sample")
    means = _resample(data, np.random.default_rng(seed), resamples, "mean")
    low, high = _percentiles(means, confidence)
    return Estimate(
        value=float(data.mean()), low=low, high=high, n=int(data.size), confidence=confidence,
        resamples=resamples, seed=seed,
    )


def outcomes_from_counts(correct: int, n: int) -> list[float]:
    """The 0/1 outcome vector with ``correct`` ones out of ``n`` (order does not matter).

    Raises:
        ValueError: the counts are inconsistent.
    """
    if n < 0 or not 0 <= correct <= n:
        raise ValueError(f"inconsistent counts: {correct} correct out of {n}")
    return [1.0] * correct + [0.0] * (n - correct)


@dataclasses.dataclass(frozen=True)
class DomainSummary:
    """Accuracy over several domains.

    Attributes:
        domains: domain name -> its accuracy with interval.
        micro: all pairs pooled (weighted by domain size).
        macro: unweighted mean over domains.
    """

    domains: dict[str, Estimate]
    micro: Estimate
    macro: Estimate

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "domains": {k: v.as_dict() for k, v in self.domains.items()},
            "micro": self.micro.as_dict(),
            "macro": self.macro.as_dict(),
        }


def domain_summary(
    outcomes: Mapping[str, Sequence[float]],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> DomainSummary:
    """Per-domain, micro and macro accuracy with stratified bootstrap intervals.

    Args:
        outcomes: domain -> per-pair outcomes (1.0 correct, 0.0 not).
        resamples: bootstrap resamples.
        confidence: interval coverage.
        seed: bootstrap seed; each domain gets its own stream derived from it and the domain's
            name, so a domain's interval does not depend on which other domains are summarised
            with it, nor on their order.

    Raises:
        ValueError: no domain, or a domain without pairs.
    """
    import numpy as np

    _check_args(resamples, confidence)
    if not outcomes:
        raise ValueError("no domains to summarise")
    per_domain: dict[str, Estimate] = {}
    draws: dict[str, object] = {}
    for name, values in outcomes.items():
        data = np.asarray(values, dtype=float)
        if data.size == 0:
            raise ValueError(f"domain {name!r} has no pairs")
        stream = np.random.default_rng([seed, zlib.crc32(str(name).encode("utf-8"))])
        sums = _resample(data, stream, resamples, "sum")
        draws[name] = (sums, data.size)
        low, high = _percentiles(sums / data.size, confidence)
        per_domain[name] = Estimate(
            value=float(data.mean()), low=low, high=high, n=int(data.size),
            confidence=confidence, resamples=resamples, seed=seed,
        )
    total_n = sum(size for _, size in draws.values())  # type: ignore[misc]
    pooled = sum(sums for sums, _ in draws.values()) / total_n  # type: ignore[misc]
    macro_draws = sum(sums / size for sums, size in draws.values()) / len(draws)  # type: ignore[misc]
    micro_value = sum(e.value * e.n for e in per_domain.values()) / total_n
    macro_value = sum(e.value for e in per_domain.values()) / len(per_domain)
    lo, hi = _percentiles(pooled, confidence)
    micro = Estimate(micro_value, lo, hi, total_n, confidence, resamples, seed)
    lo, hi = _percentiles(macro_draws, confidence)
    macro = Estimate(macro_value, lo, hi, total_n, confidence, resamples, seed)
    return DomainSummary(domains=per_domain, micro=micro, macro=macro)


__all__ = [
    "DEFAULT_CONFIDENCE",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "DomainSummary",
    "Estimate",
    "PairOutcome",
    "accuracy",
    "bootstrap_ci",
    "domain_summary",
    "finite_mean",
    "outcomes_from_counts",
    "pair_outcome",
    "tie_rate",
]
