"""Best-of-N selection driven by any scorer, with exact tie credit and bootstrap intervals.

For every record, a pool of candidate answers is scored once per scorer through the shared scorer
runtime (:mod:`prbench.scoring.runtime`: dedup, persistent cache, resumable). Best-of-k keeps the
candidate the scorer rates highest among k of them; its quality comes from the gold coverage labels
of the pool (mean label / 2) or from the ``rubric-judge`` (0/1/2 per rubric aspect, / 2).

Two choices make the numbers exact rather than sampled:

- **tie credit**: when several candidates share the top score, the pick is uniform among them,
  so best-of-k earns the mean quality of the tied maxima;
- **subsets**: for k < N the k candidates are a uniformly random k-subset drawn without
  replacement; the expectation over all C(N, k) subsets is computed in closed form. For a
  candidate score level v with ``a`` candidates scored above it and ``t`` at it, the maximum of a
  random k-subset sits at level v with probability ``(C(N-a, k) - C(N-a-t, k)) / C(N, k)``, and
  then the pick's expected quality is the mean quality of the level (every member of the level is
  equally likely to be drawn). A pool with fewer than k candidates uses all of them.

So best-of-1 is always the random-selection baseline (the pool's mean quality), and the best
possible selector (``gold-best``, scores = gold quality) is the upper bound at every k. A
non-finite score (a judge without a verdict) ranks below every finite one and is counted.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from prbench.metrics import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Estimate,
    bootstrap_ci,
    pair_outcome,
)

#: bootstrap resamples of the Best-of-N curves (per k and scorer)
DEFAULT_BON_RESAMPLES = DEFAULT_RESAMPLES  # one default in every command
#: result file kind, read back by ``prbench correlate`` and ``prbench report``
RESULT_KIND = "prbench-best-of-n"
#: baselines reported beside the scorers
BASELINES = ("random", "length", "gold-best")


def k_values(n: int) -> list[int]:
    """``1, 2, 4, ...`` below ``n``, then ``n`` itself.

    Raises:
        ValueError: ``n`` is not positive.
    """
    if n < 1:
        raise ValueError(f"N must be at least 1, got {n}")
    ks, k = [], 1
    while k < n:
        ks.append(k)
        k *= 2
    ks.append(n)
    return ks


def _rank_value(score: float) -> float:
    value = float(score)
    return value if math.isfinite(value) else -math.inf


def expected_best_quality(scores: Sequence[float], qualities: Sequence[float], k: int) -> float:
    """Expected quality of best-of-k from one pool, exactly (tie credit, random k-subsets).

    Args:
        scores: one score per candidate (non-finite ranks lowest).
        qualities: one quality per candidate.
        k: subset size; more than the pool means the whole pool.

    Raises:
        ValueError: lengths differ, the pool is empty or ``k`` < 1.
    """
    n = len(scores)
    if n != len(qualities):
        raise ValueError(f"{n} scores but {len(qualities)} qualities")
    if n == 0:
        raise ValueError("an empty pool")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    k = min(k, n)
    levels: dict[float, list[float]] = {}
    for s, q in zip(scores, qualities, strict=True):
        levels.setdefault(_rank_value(s), []).append(float(q))
    total = math.comb(n, k)
    above = 0
    expected = 0.0
    for value in sorted(levels, reverse=True):
        members = levels[value]
        t = len(members)
        ways = math.comb(n - above, k) - math.comb(n - above - t, k)
        if ways:
            expected += (sum(members) / t) * ways / total
        above += t
    return expected


@dataclasses.dataclass(frozen=True)
class PoolItem:
    """One record's pool, ready for scoring.

    Attributes:
        record_id: the record.
        domain: its domain.
        texts: the candidate answers.
        candidate_ids: their ids.
        qualities: one quality (0-1) per candidate; ``nan`` where unknown (judge failure).
    """

    record_id: str
    domain: str
    texts: tuple[str, ...]
    candidate_ids: tuple[str, ...]
    qualities: tuple[float, ...]


@dataclasses.dataclass
class Curve:
    """Mean best-of-k quality per k with bootstrap intervals, and the per-record values."""

    ks: list[int]
    estimates: list[Estimate]
    per_record: dict[str, list[float]]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "points": [
                {"k": k, **e.as_dict()} for k, e in zip(self.ks, self.estimates, strict=True)
            ],
            "per_record": self.per_record,
        }


def best_of_n_curve(
    items: Sequence[PoolItem],
    scores: Mapping[str, Sequence[float]],
    ks: Sequence[int],
    *,
    resamples: int = DEFAULT_BON_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> Curve:
    """The Best-of-N curve of one selector over the pools.

    Args:
        items: the pools (every quality finite).
        scores: record id -> one score per candidate of its pool.
        ks: the k values.
        resamples: bootstrap resamples (over records).
        confidence: interval coverage.
        seed: bootstrap seed (the same for every k and selector, so intervals are comparable).

    Raises:
        ValueError: no pools, or a pool whose score count does not match.
    """
    if not items:
        raise ValueError("no pools to evaluate")
    per_record: dict[str, list[float]] = {}
    for item in items:
        pool_scores = scores[item.record_id]
        if len(pool_scores) != len(item.texts):
            raise ValueError(
                f"record {item.record_id!r}: {len(pool_scores)} scores for "
                f"{len(item.texts)} candidates"
            )
        per_record[item.record_id] = [
            expected_best_quality(pool_scores, item.qualities, k) for k in ks
        ]
    estimates = []
    for j in range(len(ks)):
        values = [v[j] for v in per_record.values()]
        estimates.append(
            bootstrap_ci(values, resamples=resamples, confidence=confidence, seed=seed)
        )
    return Curve(ks=list(ks), estimates=estimates, per_record=per_record)


def pair_outcomes(
    record_ids: Sequence[str], chosen: Sequence[float], rejected: Sequence[float]
) -> dict[str, dict[str, float]]:
    """Strict pair outcome per record (``correct``, ``tie``, ``invalid``): the benchmark side."""
    out = {}
    for rid, c, r in zip(record_ids, chosen, rejected, strict=True):
        o = pair_outcome(c, r)
        out[rid] = {"correct": o.correct, "tie": o.tie, "invalid": o.invalid}
    return out


def curve_point(result: Mapping[str, Any], label: str, k: int | None = None) -> dict[str, Any]:
    """The point at ``k`` (default: the largest) of a scorer's or baseline's Best-of-N curve.

    Raises:
        KeyError: no such scorer/baseline or k.
    """
    block = (result.get("scorers") or {}).get(label) or (result.get("baselines") or {}).get(label)
    if block is None:
        known = sorted([*(result.get("scorers") or {}), *(result.get("baselines") or {})])
        raise KeyError(f"no scorer or baseline {label!r} in the Best-of-N results (has: {known})")
    points = block["curve"]["points"]
    if k is None:
        return points[-1]
    for p in points:
        if p["k"] == k:
            return p
    raise KeyError(f"k={k} is not in the Best-of-N results (ks: {[p['k'] for p in points]})")


def table(result: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The Best-of-N table as data: one row per k, one column per scorer and baseline (mean [CI]).

    A last ``pair acc`` row gives each scorer's strict accuracy on the records' own pairs.
    """
    columns: list[tuple[str, Mapping[str, Any]]] = []
    for label, block in (result.get("scorers") or {}).items():
        name = f"{label} (DIAGNOSTIC)" if block.get("diagnostic") else label
        columns.append((name, block))
    for label, block in (result.get("baselines") or {}).items():
        columns.append((f"{label} (baseline)", block))
    ks = list(result.get("ks") or [])
    head = ["k", *(name for name, _ in columns)]
    rows = []
    for j, k in enumerate(ks):
        cells = [str(k)]
        for _, block in columns:
            p = block["curve"]["points"][j]
            cells.append(f"{p['value']:.3f} [{p['low']:.3f}, {p['high']:.3f}]")
        rows.append(cells)
    acc_cells = ["pair acc"]
    for _, block in columns:
        acc = block.get("pair_accuracy")
        acc_cells.append(
            f"{acc['value']:.3f} [{acc['low']:.3f}, {acc['high']:.3f}]" if acc else "-"
        )
    if any(c != "-" for c in acc_cells[1:]):
        rows.append(acc_cells)
    return head, rows


def notes(result: Mapping[str, Any]) -> list[str]:
    """The lines under the Best-of-N table: what its numbers are, and the sample flag."""
    q = result.get("quality") or {}
    n = result.get("n_pools", 0)
    conf = round(100 * float((result.get("bootstrap") or {}).get("confidence", 0.95)))
    out = [
        f"Best-of-k mean quality (0-1, from {q.get('source', '?')}) over {n} pools, {conf}% "
        "bootstrap CI over records; exact expectation over random k-subsets with tie credit. "
        "random = expected quality of a uniform pick; length = the longest candidate wins; "
        "gold-best = the best candidate by quality (upper bound); pair acc = strict accuracy on "
        "the records' own chosen/rejected pairs."
    ]
    if result.get("sample"):
        out.append("Data: the bundled SAMPLE, not the benchmark.")
    return out


def format_table(result: Mapping[str, Any], *, markdown: bool = True) -> str:
    """The Best-of-N table (:func:`table`) as Markdown or aligned text, :func:`notes` below."""
    from prbench.tables import markdown_table, text_table

    head, rows = table(result)
    written = markdown_table(head, rows) if markdown else text_table(head, rows)
    return "\n".join([written, "", *notes(result)])


__all__ = [
    "BASELINES",
    "DEFAULT_BON_RESAMPLES",
    "RESULT_KIND",
    "Curve",
    "PoolItem",
    "best_of_n_curve",
    "curve_point",
    "expected_best_quality",
    "format_table",
    "k_values",
    "notes",
    "pair_outcomes",
    "table",
]
