"""PNG figures for reports: Best-of-N curves, benchmark-vs-downstream scatter, accuracy bars.

matplotlib (the ``plots`` extra) is imported inside each function with the non-interactive Agg
backend, so importing this module costs nothing and no display is needed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - the extra is part of the default set-up
        raise RuntimeError(
            "plots need matplotlib: pip install -c constraints-cpu.txt -e '.[plots]'"
        ) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | os.PathLike[str]) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(target, dpi=110)
    _pyplot().close(fig)
    return target


def bon_curves(result: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Best-of-k mean quality against k (log2 axis) per scorer, baselines dashed, CI bands."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ks = list(result["ks"])
    groups = [(label, block, "-") for label, block in (result.get("scorers") or {}).items()]
    groups += [(f"{label} (baseline)", block, "--")
               for label, block in (result.get("baselines") or {}).items()]
    for label, block, style in groups:
        pts = block["curve"]["points"]
        values = [p["value"] for p in pts]
        line = ax.plot(ks, values, style, marker="o", ms=3, label=label)[0]
        ax.fill_between(ks, [p["low"] for p in pts], [p["high"] for p in pts],
                        color=line.get_color(), alpha=0.12)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("k (candidates)")
    ax.set_ylabel(f"mean quality (0-1, {(result.get('quality') or {}).get('source', '')})")
    title = "Best-of-N"
    if result.get("sample"):
        title += " (bundled SAMPLE)"
    ax.set_title(title)
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def scatter_with_ci(
    points: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
) -> Path:
    """One labelled point per scorer with x and y error bars.

    Args:
        points: ``{"label", "x", "x_low", "x_high", "y", "y_low", "y_high"}`` per scorer (the
            interval keys are optional).
        path: the PNG to write.
        xlabel: x-axis label.
        ylabel: y-axis label.
        title: figure title.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.6, 4.4))
    for p in points:
        xerr = [[p["x"] - p.get("x_low", p["x"])], [p.get("x_high", p["x"]) - p["x"]]]
        yerr = [[p["y"] - p.get("y_low", p["y"])], [p.get("y_high", p["y"]) - p["y"]]]
        ax.errorbar([p["x"]], [p["y"]], xerr=xerr, yerr=yerr, fmt="o", capsize=3)
        ax.annotate(str(p["label"]), (p["x"], p["y"]), textcoords="offset points",
                    xytext=(5, 5), fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def binned_lines(
    bins: Sequence[str],
    series: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    xlabel: str,
    title: str,
) -> Path:
    """Accuracy per bin, one line per series with interval bars.

    Args:
        bins: the bin labels (x axis, in order).
        series: ``{"label", "points"}``; ``points`` holds per bin ``{"value", "low", "high"}``
            or ``None`` (no pair in that bin: a gap).
        path: the PNG to write.
        xlabel: x-axis label.
        title: figure title.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9.6, 4.2))
    for i, s in enumerate(series):
        shift = (i - (len(series) - 1) / 2) * 0.04  # keep overlapping bars apart
        xs = [j + shift for j, p in enumerate(s["points"]) if p is not None]
        pts = [p for p in s["points"] if p is not None]
        err = [[p["value"] - p["low"] for p in pts], [p["high"] - p["value"] for p in pts]]
        ax.errorbar(xs, [p["value"] for p in pts], yerr=err, marker="o", ms=3, capsize=3,
                    label=str(s["label"]))
    ax.set_xticks(range(len(bins)), [str(b) for b in bins])
    ax.set_ylim(-0.02, 1.02)
    ax.axhline(0.5, color="grey", ls=":", lw=1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("strict pairwise accuracy")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes
    ax.grid(alpha=0.3)
    return _save(fig, path)


def accuracy_bars(
    rows: Sequence[Mapping[str, Any]], path: str | os.PathLike[str], *, title: str
) -> Path:
    """Horizontal bars of accuracy with CI whiskers: ``{"label", "value", "low", "high"}``."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(rows) + 1.4))
    labels = [str(r["label"]) for r in rows]
    values = [r["value"] for r in rows]
    err = [[r["value"] - r["low"] for r in rows], [r["high"] - r["value"] for r in rows]]
    ax.barh(range(len(rows)), values, xerr=err, capsize=3, color="#4c78a8")
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0.5, color="grey", ls=":", lw=1)
    ax.set_xlim(0, 1)
    ax.set_xlabel("strict pairwise accuracy")
    ax.set_title(title)
    return _save(fig, path)


def condition_lines(
    series: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    level: int,
    sample: bool = False,
    diagnostic: Sequence[str] = (),
) -> Path:
    """Accuracy of each scorer across profile sources: one line per scorer, CI bars.

    Args:
        series: ``{"label", "points": [{"x", "value", "low", "high"}, ...]}`` per scorer, the
            points in the order of the x axis (own, shuffled, swapped, none).
        path: the PNG to write.
        level: the interval level in percent (stated on the axis).
        sample: the data is the bundled sample (said in the title).
        diagnostic: labels of diagnostic scorers (marked in the legend, drawn dashed).
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.6, 4.4))
    xs = list(dict.fromkeys(p["x"] for s in series for p in s["points"]))
    offsets = [0.06 * (i - (len(series) - 1) / 2) for i in range(len(series))]
    for s, dx in zip(series, offsets, strict=True):
        pts = s["points"]
        x = [xs.index(p["x"]) + dx for p in pts]
        y = [p["value"] for p in pts]
        err = [[p["value"] - p["low"] for p in pts], [p["high"] - p["value"] for p in pts]]
        diag = s["label"] in diagnostic
        label = f"{s['label']} (DIAGNOSTIC)" if diag else str(s["label"])
        ax.errorbar(x, y, yerr=err, fmt="--o" if diag else "-o", ms=4, capsize=3, label=label)
    ax.set_xticks(range(len(xs)), [f"{x} profile" if x != "none" else "no profile" for x in xs])
    ax.set_xlim(-0.4, len(xs) - 0.6)
    ax.set_ylim(-0.02, 1.02)
    ax.axhline(0.5, color="grey", ls=":", lw=1)
    ax.set_ylabel(f"strict pairwise accuracy ({level}% bootstrap CI)")
    title = "Personalization sensitivity: same pairs (all domains), profile source varied"
    if sample:
        title += "\nbundled SAMPLE data, not the benchmark"
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    return _save(fig, path)


__all__ = [
    "accuracy_bars", "binned_lines", "bon_curves", "condition_lines", "scatter_with_ci",
]
