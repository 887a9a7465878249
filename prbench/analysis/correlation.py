"""Rank correlation between benchmark accuracy and downstream quality across scorers.

The question the benchmark answers is whether ranking reward models by its accuracy ranks them as
their downstream use (Best-of-N, RL) does. Over the scorers, five statistics compare the two:
Spearman's rho, Kendall's tau, weighted Kendall's tau (``scipy.stats``; top ranks weigh more),
NDCG of the benchmark's ordering against the downstream qualities as relevance (:func:`ndcg`) and
rank-biased overlap (RBO, :func:`rbo_ext`).

NDCG is computed here, not by ``sklearn.metrics.ndcg_score``: it is a dozen lines of numpy, the
bootstrap calls it thousands of times (scikit-learn validates its input on every call), and
scikit-learn would be a dependency for this one function. It follows scikit-learn's definition
exactly -- linear gains, ``1 / log2(rank + 1)`` discounts, tied scores sharing the average gain of
their group (McSherry and Najork, 2008) -- and ``tests/test_correlation.py`` checks it equals
``ndcg_score`` on tied and untied cases.

Intervals come from a seeded bootstrap over *items*: each replicate resamples the benchmark's pairs
and the downstream records (with one shared draw across scorers when they were evaluated on the
same items, so the comparison stays paired), recomputes every scorer's two numbers and then the
statistics. A replicate where a statistic is undefined (e.g. all scorers tie) is counted, not used.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from prbench.metrics import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED
from prbench.progress import progress_bar

DEFAULT_RBO_P = 0.9
#: one bootstrap default in every command (:data:`prbench.metrics.DEFAULT_RESAMPLES`)
DEFAULT_CORR_RESAMPLES = DEFAULT_RESAMPLES
STATISTICS = ("spearman", "kendall", "weighted_kendall", "ndcg", "rbo")
RESULT_KIND = "prbench-correlation"


def ranking(values: Mapping[str, float]) -> list[str]:
    """Labels from the highest value to the lowest; equal values keep label order."""
    return sorted(values, key=lambda label: (-values[label], label))


def rbo_ext(first: Sequence[str], second: Sequence[str], p: float = DEFAULT_RBO_P) -> float:
    """Extrapolated rank-biased overlap of two complete rankings of the same items.

    With ``A_d`` the overlap of the two top-``d`` prefixes divided by ``d`` and k the length,
    ``RBO_ext = A_k * p**k + (1 - p) / p * sum_{d=1..k} A_d * p**d`` (Webber, Moffat and Zobel,
    2010, for lists of equal length). Identical rankings give 1; ``p`` sets how top-heavy it is.

    Raises:
        ValueError: the rankings hold different items, repeat one, or ``p`` is not in (0, 1).
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"RBO persistence p must be in (0, 1), got {p}")
    if sorted(first) != sorted(second) or len(set(first)) != len(first):
        raise ValueError(f"RBO needs two rankings of the same distinct items: {first} vs {second}")
    k = len(first)
    if k == 0:
        raise ValueError("RBO of empty rankings")
    seen_a: set[str] = set()
    seen_b: set[str] = set()
    overlap = 0
    total = 0.0
    agreement = 0.0
    for d in range(1, k + 1):
        a, b = first[d - 1], second[d - 1]
        if a == b:
            overlap += 1
        else:
            overlap += (a in seen_b) + (b in seen_a)
        seen_a.add(a)
        seen_b.add(b)
        agreement = overlap / d
        total += agreement * p**d
    return agreement * p**k + (1 - p) / p * total


def ndcg(relevance: Sequence[float], scores: Sequence[float]) -> float:
    """NDCG of the order ``scores`` give, with ``relevance`` as each item's gain (all items).

    Items are ranked by ``scores``, highest first; tied items share their group's average gain
    (so no tie-break favours one of them). The discount of rank ``r`` (from 1) is
    ``1 / log2(r + 1)``; the ideal order sorts by ``relevance``. ``nan`` when every gain is 0.
    Equal to ``sklearn.metrics.ndcg_score([relevance], [scores])`` (ties not ignored).
    """
    import numpy as np

    gain = np.asarray(relevance, dtype=float)
    score = np.asarray(scores, dtype=float)
    # the same float operations as scikit-learn's, so the values agree to the last bit
    discount = 1 / (np.log(np.arange(len(gain)) + 2) / np.log(2))
    ideal = float(discount.dot(np.sort(gain)[::-1]))
    if ideal == 0:
        return math.nan
    _, group, counts = np.unique(-score, return_inverse=True, return_counts=True)
    mean_gain = np.bincount(group, weights=gain, minlength=len(counts)) / counts
    ends = np.cumsum(counts)
    group_discount = np.diff(np.concatenate([[0.0], np.cumsum(discount)[ends - 1]]))
    return float((mean_gain * group_discount).sum()) / ideal


def statistics(
    benchmark: Mapping[str, float], downstream: Mapping[str, float], *, p: float = DEFAULT_RBO_P
) -> dict[str, float]:
    """The five statistics over the scorers both mappings name (``nan`` where undefined).

    Raises:
        ValueError: fewer than two scorers in common, or a negative downstream value (NDCG needs
            non-negative relevance).
    """
    import warnings

    import numpy as np
    from scipy import stats

    labels = sorted(set(benchmark) & set(downstream))
    if len(labels) < 2:
        raise ValueError(f"rank correlation needs at least two scorers, got {labels}")
    x = np.array([benchmark[lab] for lab in labels], dtype=float)
    y = np.array([downstream[lab] for lab in labels], dtype=float)
    if (y < 0).any():
        raise ValueError("NDCG needs non-negative downstream values")
    out: dict[str, float] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input: scipy warns and returns nan
        constant = bool(np.ptp(x) == 0 or np.ptp(y) == 0)
        out["spearman"] = math.nan if constant else float(stats.spearmanr(x, y).statistic)
        out["kendall"] = math.nan if constant else float(stats.kendalltau(x, y).statistic)
        out["weighted_kendall"] = (
            math.nan if constant else float(stats.weightedtau(x, y).statistic)
        )
    out["ndcg"] = ndcg(y, x) if y.sum() > 0 else math.nan
    out["rbo"] = rbo_ext(
        ranking(dict(zip(labels, x, strict=True))), ranking(dict(zip(labels, y, strict=True))), p
    )
    return out


@dataclasses.dataclass
class Side:
    """Per-scorer item values of one side (benchmark or downstream).

    Attributes:
        items: scorer label -> item id -> value (a pair's 0/1 outcome, a record's quality).
        what: a short description (``"pair accuracy"``, ``"best-of-16 quality"``).
    """

    items: dict[str, dict[str, float]]
    what: str

    def means(self, labels: Sequence[str]) -> dict[str, float]:
        """The mean value of each scorer."""
        return {lab: sum(self.items[lab].values()) / len(self.items[lab]) for lab in labels}

    def shared_ids(self, labels: Sequence[str]) -> list[str] | None:
        """The item ids when every scorer has the same ones (a paired resample), else ``None``."""
        sets = [set(self.items[lab]) for lab in labels]
        return sorted(sets[0]) if all(s == sets[0] for s in sets) else None


def _aligned(side: Side, labels: Sequence[str]) -> tuple[bool, dict[str, Any]]:
    """Each scorer's values as an array, once per bootstrap (not once per resample).

    Returns:
        ``(paired, arrays)``: with one set of item ids for every scorer (``paired``) the arrays
        follow the sorted shared ids, so one index draw picks the same items for all of them.
    """
    import numpy as np

    shared = side.shared_ids(labels)
    if shared is not None:
        return True, {lab: np.array([side.items[lab][i] for i in shared], dtype=float)
                      for lab in labels}
    return False, {lab: np.fromiter(side.items[lab].values(), dtype=float) for lab in labels}


def _resampled_means(aligned: tuple[bool, dict[str, Any]], labels: Sequence[str],
                     rng: Any) -> dict[str, float]:
    paired, arrays = aligned
    out = {}
    if paired:
        size = len(arrays[labels[0]])
        idx = rng.integers(0, size, size=size)
        for lab in labels:
            out[lab] = float(arrays[lab][idx].mean())
        return out
    for lab in labels:
        values = arrays[lab]
        out[lab] = float(values[rng.integers(0, values.size, size=values.size)].mean())
    return out


def correlate(
    benchmark: Side,
    downstream: Side,
    *,
    p: float = DEFAULT_RBO_P,
    resamples: int = DEFAULT_CORR_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
    progress: bool = True,
) -> dict[str, Any]:
    """The statistics with bootstrap intervals (items resampled on both sides), JSON-ready.

    ``progress``: the bootstrap's progress (:func:`prbench.progress.progress_bar`: a bar on a
    terminal, a line every 30 s in a log).

    Raises:
        ValueError: fewer than two scorers in common, or a scorer without items.
    """
    import numpy as np

    labels = sorted(set(benchmark.items) & set(downstream.items))
    if len(labels) < 2:
        raise ValueError(
            f"rank correlation needs at least two scorers present on both sides; benchmark has "
            f"{sorted(benchmark.items)}, downstream has {sorted(downstream.items)}"
        )
    for side in (benchmark, downstream):
        for lab in labels:
            if not side.items[lab]:
                raise ValueError(f"scorer {lab!r} has no items for the {side.what}")
    bench = benchmark.means(labels)
    down = downstream.means(labels)
    point = statistics(bench, down, p=p)
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {name: [] for name in STATISTICS}
    bench_arrays, down_arrays = _aligned(benchmark, labels), _aligned(downstream, labels)
    with progress_bar(resamples, desc="correlate: bootstrap", unit="resample",
                      enabled=progress) as bar:
        for _ in range(resamples):
            stats_b = statistics(
                _resampled_means(bench_arrays, labels, rng),
                _resampled_means(down_arrays, labels, rng), p=p,
            )
            for name, value in stats_b.items():
                draws[name].append(value)
            bar.update()
    alpha = (1 - confidence) / 2
    table = {}
    for name in STATISTICS:
        finite = np.array([v for v in draws[name] if math.isfinite(v)])
        low, high = (
            (float(np.quantile(finite, alpha)), float(np.quantile(finite, 1 - alpha)))
            if finite.size else (math.nan, math.nan)
        )
        table[name] = {
            "value": point[name], "low": low, "high": high,
            "undefined_resamples": int(resamples - finite.size),
        }
    return {
        "kind": RESULT_KIND,
        "version": 1,
        "scorers": labels,
        "benchmark": {"what": benchmark.what, "values": bench,
                      "paired_resample": benchmark.shared_ids(labels) is not None},
        "downstream": {"what": downstream.what, "values": down,
                       "paired_resample": downstream.shared_ids(labels) is not None},
        "ranking": {"benchmark": ranking(bench), "downstream": ranking(down)},
        "statistics": table,
        "rbo_p": p,
        "bootstrap": {"resamples": resamples, "confidence": confidence, "seed": seed},
    }


def tables(result: Mapping[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """The correlation result as two tables: the statistics with their CIs, the scorers' values."""
    conf = round(100 * float(result["bootstrap"]["confidence"]))
    stats = []
    for name in STATISTICS:
        s = result["statistics"][name]
        value = "undefined" if not math.isfinite(s["value"]) else f"{s['value']:.3f}"
        ci = "-" if not math.isfinite(s["low"]) else f"[{s['low']:.3f}, {s['high']:.3f}]"
        stats.append([f"rbo (p={result['rbo_p']})" if name == "rbo" else name, value, ci])
    b, d = result["benchmark"], result["downstream"]
    values = [[lab, f"{b['values'][lab]:.3f}", f"{d['values'][lab]:.3f}"]
              for lab in result["scorers"]]
    return [(["statistic", "value", f"{conf}% CI"], stats),
            (["scorer", b["what"], d["what"]], values)]


def note(result: Mapping[str, Any]) -> str:
    """The line under the tables: how many scorers, how the CIs were drawn."""
    return (
        f"{len(result['scorers'])} scorers; CI: bootstrap over items "
        f"({result['bootstrap']['resamples']} resamples, seed {result['bootstrap']['seed']}), "
        "pairs for the benchmark and records "
        "downstream; with few scorers every statistic is coarse."
    )


def format_table(result: Mapping[str, Any], *, markdown: bool = True) -> str:
    """The correlation statistics and the per-scorer values (:func:`tables`), as markdown or text.

    Plain text aligns each table's columns under its head (:func:`prbench.tables.text_table`).
    """
    from prbench.tables import markdown_table, text_table

    def write(head: list[str], rows: list[list[str]]) -> str:
        return markdown_table(head, rows) if markdown else text_table(head, rows, strip=True)

    lines = []
    for head, rows in tables(result):
        lines += [write(head, rows), ""]
    return "\n".join([*lines, note(result)])


def diagnostic_note(result: Mapping[str, Any]) -> str:
    """The line under the table naming the DIAGNOSTIC scorers it ranks or leaves out."""
    note = ""
    if result.get("diagnostic"):
        note += (f"\nDIAGNOSTIC scorers included (read the hidden rubric; "
                 f"--include_diagnostic): {', '.join(result['diagnostic'])}")
    if result.get("excluded_diagnostic"):
        left = ", ".join(result["excluded_diagnostic"])
        note += (f"\nDIAGNOSTIC scorers left out (read the hidden rubric; "
                 f"--include_diagnostic ranks them too): {left}")
    return note


__all__ = [
    "DEFAULT_CORR_RESAMPLES",
    "DEFAULT_RBO_P",
    "RESULT_KIND",
    "STATISTICS",
    "Side",
    "correlate",
    "diagnostic_note",
    "format_table",
    "ndcg",
    "note",
    "ranking",
    "rbo_ext",
    "statistics",
    "tables",
]
