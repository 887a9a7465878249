"""PNG figures for reports: Best-of-N curves, benchmark-vs-downstream scatter, accuracy bars.

matplotlib (the ``plots`` extra) is imported inside each function, so importing this module costs
nothing. Figures are built as :class:`matplotlib.figure.Figure` objects and written with the Agg
renderer that ``savefig`` picks for the file type: pyplot is never used, so no display is needed,
no figure is left open in pyplot's registry, and a notebook user's matplotlib backend is never
switched.

Every figure carries the flags of the tables it sits beside: the bundled SAMPLE in the title,
DIAGNOSTIC scorers (that read the hidden rubric) tagged in their labels and drawn apart, and the
interval level on an axis. :func:`figure_texts` lists a figure's words (for tests).
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: the line added to a title when the data is the bundled sample
SAMPLE_NOTE = "bundled SAMPLE data, not the benchmark"
#: appended to the label of a scorer that reads the hidden rubric
DIAGNOSTIC_TAG = " (DIAGNOSTIC)"
#: legend entry of the 0.5 line of the pairwise plots
CHANCE_LABEL = "chance (0.5: a coin flip per pair)"
#: the legend entry of a judge's single-order accuracy on the leaderboard plot
SINGLE_ORDER_LABEL = "single-order accuracy (pairwise judge; unreadable = 0)"
#: legend names of the Best-of-N baselines (told apart from scorers of the same name)
BASELINE_NAMES = {
    "random": "random pick (baseline)",
    "length": "longest answer (baseline)",
    "gold-best": "gold best (ceiling)",
}
#: the label of a scorer whose curve is that baseline's (drawn once)
SAME_AS_BASELINE = "{label} (scorer = the {baseline} baseline)"
#: small multiples: panels per row (more rows rather than panels too small to read)
PANELS_PER_ROW = 2


def _figure(**kwargs: Any) -> Any:
    """A new :class:`~matplotlib.figure.Figure` (``figsize``, ``layout``, ...), outside pyplot.

    Raises:
        RuntimeError: matplotlib is not installed (the ``plots`` extra).
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - the extra is part of the default set-up
        raise RuntimeError(
            "plots need matplotlib: pip install -c constraints-cpu.txt -e '.[plots]'"
        ) from exc
    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)  # the figure's own canvas: drawn and measured without pyplot
    return fig


def _save(fig: Any, path: str | os.PathLike[str]) -> Path:
    """Write the PNG atomically; nothing clipped (a figure without a layout engine is tightened).

    Raises:
        OutputWriteError: the file could not be written (it is then not left half-written).
    """
    from prbench.outputs import open_atomic

    target = Path(path)
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    with open_atomic(target, "wb") as handle:
        fig.savefig(handle, dpi=110, bbox_inches="tight",
                    format=target.suffix.lstrip(".") or "png")
    return target


def figure_texts(fig: Any) -> list[str]:
    """Every text of a figure: titles, axis labels, tick labels, annotations, legend entries."""
    out: list[str] = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        out += [ax.get_title(loc) for loc in ("left", "center", "right")]
        out += [ax.get_xlabel(), ax.get_ylabel()]
        out += [t.get_text() for t in (*ax.get_xticklabels(), *ax.get_yticklabels())]
        out += [t.get_text() for t in ax.texts]
        legend = ax.get_legend()
        if legend is not None:
            out += [t.get_text() for t in legend.get_texts()]
    for legend in fig.legends:  # a legend of the whole figure (small multiples)
        out += [t.get_text() for t in legend.get_texts()]
    suptitle = getattr(fig, "_suptitle", None)
    if suptitle is not None and suptitle.get_text() not in out:
        out.append(suptitle.get_text())
    return [t for t in out if t]


def _title(ax: Any, title: str, sample: bool) -> None:
    ax.set_title(f"{title}\n{SAMPLE_NOTE}" if sample else title, fontsize=10)


def _tag(label: str, diagnostic: Sequence[str] | set[str]) -> str:
    return f"{label}{DIAGNOSTIC_TAG}" if label in diagnostic else label


def _level_of(confidence: float | None) -> int | None:
    return None if confidence is None else round(100 * float(confidence))


def _ci_text(level: int | None) -> str:
    return f" ({level}% bootstrap CI)" if level else ""


def bon_curves(result: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Best-of-k mean quality against k (log2 axis) per scorer, baselines dashed, CI bands.

    A baseline whose curve equals a scorer's of the same name (the ``length`` scorer is the
    longest-answer baseline) is drawn once, as the scorer, labelled so. Baselines are named
    apart from scorers (``random pick (baseline)`` beside the ``random`` scorer); DIAGNOSTIC
    scorers are tagged and drawn dash-dotted; the SAMPLE and the interval level are stated.
    """
    fig = _figure(figsize=(7.8, 4.4), layout="constrained")
    ax = fig.subplots()
    ks = list(result["ks"])
    scorers = dict(result.get("scorers") or {})
    baselines = dict(result.get("baselines") or {})

    def values(block: Mapping[str, Any]) -> list[float]:
        return [p["value"] for p in block["curve"]["points"]]

    groups = []
    for label, block in scorers.items():
        name, style = label, "-"
        same = baselines.get(label)
        if same is not None and values(same) == values(block):
            del baselines[label]
            base = BASELINE_NAMES.get(label, label).replace(" (baseline)", "")
            name = SAME_AS_BASELINE.format(label=label, baseline=base)
        elif label in BASELINE_NAMES and label in baselines:
            name = f"{label} (scorer)"
        if block.get("diagnostic"):
            name, style = f"{name}{DIAGNOSTIC_TAG}", "-."
        groups.append((name, block, style))
    groups += [(BASELINE_NAMES.get(label, f"{label} (baseline)"), block, "--")
               for label, block in baselines.items()]
    for label, block, style in groups:
        pts = block["curve"]["points"]
        line = ax.plot(ks, values(block), style, marker="o", ms=3, label=label)[0]
        ax.fill_between(ks, [p["low"] for p in pts], [p["high"] for p in pts],
                        color=line.get_color(), alpha=0.12)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("k (candidates)")
    level = _level_of((result.get("bootstrap") or {}).get("confidence"))
    source = (result.get("quality") or {}).get("source", "")
    # the quality's source can be long (a judge's name): wrapped, so the label is never taller
    # than the axes and cut at the figure's edge
    label = textwrap.fill(f"mean quality (0-1, {source})", width=38)
    ax.set_ylabel(f"{label}\nbands: {level or 95}% bootstrap CI" if level else label)
    _title(ax, "Best-of-N", bool(result.get("sample")))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes
    ax.grid(alpha=0.3)
    return _save(fig, path)


def _overlaps(a: Any, b: Any) -> bool:
    return bool(a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1)


#: label offsets tried in turn (points): right, up, left, down, diagonals, further out
_OFFSETS = [(8, 4), (8, -12), (-8, 4), (-8, -12), (0, 10), (0, -16), (12, 12), (-12, 12),
            (12, -20), (-12, -20), (18, 0), (-18, 0), (0, 22), (0, -28)]


def _place_labels(fig: Any, ax: Any, points: Sequence[Mapping[str, Any]],
                  labels: Sequence[str]) -> None:
    """Annotate each point with a label that overlaps no marker, error bar or other label.

    Greedy: each label takes the first offset in :data:`_OFFSETS` whose text box is clear and
    inside the axes, else the offset with the fewest overlaps.
    """
    from matplotlib.transforms import Bbox

    fig.tight_layout()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    to_px = ax.transData.transform
    taken = []
    for p in points:
        x, y = to_px((p["x"], p["y"]))
        taken.append(Bbox([[x - 8, y - 8], [x + 8, y + 8]]))
        (x0, y0), (x1, y1) = to_px((p.get("x_low", p["x"]), p["y"])), to_px(
            (p.get("x_high", p["x"]), p["y"]))
        taken.append(Bbox([[x0, y0 - 1.5], [x1, y1 + 1.5]]))
        (x0, y0), (x1, y1) = to_px((p["x"], p.get("y_low", p["y"]))), to_px(
            (p["x"], p.get("y_high", p["y"])))
        taken.append(Bbox([[x0 - 1.5, y0], [x1 + 1.5, y1]]))
    frame = ax.get_window_extent(renderer)
    for p, label in zip(points, labels, strict=True):
        best = None
        for dx, dy in _OFFSETS:
            ann = ax.annotate(label, (p["x"], p["y"]), textcoords="offset points",
                              xytext=(dx, dy), fontsize=8, ha="left" if dx >= 0 else "right")
            box = ann.get_window_extent(renderer)
            bad = sum(_overlaps(box, t) for t in taken) + (
                0 if frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0
                and box.y1 <= frame.y1 else 1)
            if best is None or bad < best[0]:
                if best is not None:
                    best[1].remove()
                best = (bad, ann, box)
            else:
                ann.remove()
            if bad == 0:
                break
        assert best is not None
        taken.append(best[2])


def scatter_with_ci(
    points: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    level: int | None = None,
    sample: bool = False,
    diagnostic: Sequence[str] = (),
) -> Path:
    """One labelled point per scorer with x and y error bars.

    Args:
        points: ``{"label", "x", "x_low", "x_high", "y", "y_low", "y_high"}`` per scorer (the
            interval keys are optional).
        path: the PNG to write.
        xlabel: x-axis label.
        ylabel: y-axis label.
        title: figure title.
        level: the interval level in percent (stated on the axes when the points have bars).
        sample: the data is the bundled sample (said in the title).
        diagnostic: labels of diagnostic scorers (tagged, drawn as hollow squares).
    """
    fig = _figure(figsize=(6.4, 4.8))
    ax = fig.subplots()
    for p in points:
        xerr = [[p["x"] - p.get("x_low", p["x"])], [p.get("x_high", p["x"]) - p["x"]]]
        yerr = [[p["y"] - p.get("y_low", p["y"])], [p.get("y_high", p["y"]) - p["y"]]]
        diag = p["label"] in diagnostic
        ax.errorbar([p["x"]], [p["y"]], xerr=xerr, yerr=yerr, fmt="s" if diag else "o",
                    mfc="white" if diag else None, capsize=3)
    bars = any("x_low" in p or "y_low" in p for p in points)
    ax.set_xlabel(xlabel + (_ci_text(level) if bars else ""))
    ax.set_ylabel(ylabel + (_ci_text(level) if bars else ""))
    _title(ax, title, sample)
    ax.grid(alpha=0.3)
    _place_labels(fig, ax, points, [_tag(str(p["label"]), diagnostic) for p in points])
    return _save(fig, path)


def _stat(stats: Mapping[str, Any], name: str, with_ci: bool) -> str:
    est = stats.get(name) or {}
    value = est.get("value")
    if value is None:
        return "undefined"
    if with_ci and est.get("low") is not None and est.get("high") is not None:
        return f"{value:.2f} [{est['low']:.2f}, {est['high']:.2f}]"
    return f"{value:.2f}"


def correlation_figure(result: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """The scatter of a ``prbench correlate`` result: one point per scorer, Spearman ρ and its CI.

    The points come from ``result["points"]`` (per-scorer intervals, written by
    ``prbench correlate``), else from the bare values (older files: no bars).
    """
    points = result.get("points") or [
        {"label": lab, "x": result["benchmark"]["values"][lab],
         "y": result["downstream"]["values"][lab]} for lab in result["scorers"]]
    boot = result.get("bootstrap") or {}
    level = _level_of(boot.get("confidence"))
    stats = result.get("statistics") or {}
    title = (f"Spearman ρ = {_stat(stats, 'spearman', True)} ({level or 95}% CI), "
             f"{len(points)} scorers\n"
             f"NDCG = {_stat(stats, 'ndcg', False)}, RBO = {_stat(stats, 'rbo', False)}")
    return scatter_with_ci(
        points, path, xlabel=result["benchmark"]["what"], ylabel=result["downstream"]["what"],
        title=title, level=level, sample=bool(result.get("sample")),
        diagnostic=list(result.get("diagnostic") or []),
    )


#: at most this many series share one panel of a small-multiples figure
MAX_SERIES = 6


def binned_panels(
    bins: Sequence[str],
    panels: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    xlabel: str,
    title: str,
    level: int = 95,
    sample: bool = False,
    diagnostic: Sequence[str] = (),
) -> Path:
    """Accuracy per bin as small multiples: one panel per condition, one marker set per series.

    The bins are categories, so points are not joined by lines. The number of pairs per bin is
    on the plot: under the bin's tick label when every series of the panel has the same count,
    else next to each point. A panel holds at most :data:`MAX_SERIES` series (more are split
    over further panels); a series keeps its colour in every panel.

    Args:
        bins: the bin labels (x axis, in order).
        panels: ``{"title", "series"}``; a series is ``{"label", "points"}`` with per bin
            ``{"value", "low", "high", "n"}`` or ``None`` (no pair in that bin: left empty).
        path: the PNG to write.
        xlabel: x-axis label.
        title: figure title.
        level: the interval level in percent (stated on the axis).
        sample: the data is the bundled sample (said in the title).
        diagnostic: series labels of diagnostic scorers (tagged, drawn as hollow squares).
    """
    split = []
    for panel in panels:
        series = list(panel["series"])
        chunks = [series[i:i + MAX_SERIES] for i in range(0, len(series), MAX_SERIES)] or [[]]
        for j, chunk in enumerate(chunks):
            name = str(panel["title"]) + (f" ({j + 1}/{len(chunks)})" if len(chunks) > 1 else "")
            split.append({"title": name, "series": chunk})
    labels = list(dict.fromkeys(str(s["label"]) for p in split for s in p["series"]))
    colours = {lab: f"C{i % 10}" for i, lab in enumerate(labels)}
    # two panels a row at most, fonts of 9-12 pt: shown at the report's width (~1,150 px) a
    # figure of W inches scales its text by 1,150 / (110 W); at W <= 13 that keeps 9 pt >= 11 px
    ncols = min(PANELS_PER_ROW, len(split))
    nrows = -(-len(split) // ncols)
    fig = _figure(figsize=(5.0 * ncols + 2.6, 3.9 * nrows + 1.0), layout="constrained")
    axes = fig.subplots(nrows, ncols, sharey=True, squeeze=False)
    handles: dict[str, Any] = {}
    for ax, panel in zip(axes.flat, split, strict=False):
        series = panel["series"]
        counts = [{(p or {}).get("n") for s in series for p in [s["points"][j]] if p}
                  for j in range(len(bins))]
        same_n = all(len(c) <= 1 for c in counts)
        for i, s in enumerate(series):
            shift = (i - (len(series) - 1) / 2) * 0.08  # keep overlapping bars apart
            xs = [j + shift for j, p in enumerate(s["points"]) if p is not None]
            pts = [p for p in s["points"] if p is not None]
            err = [[p["value"] - p["low"] for p in pts], [p["high"] - p["value"] for p in pts]]
            label = str(s["label"])
            diag = label in diagnostic
            handle = ax.errorbar(xs, [p["value"] for p in pts], yerr=err, fmt="s" if diag else "o",
                                 ms=4, capsize=3, color=colours[label], ls="none",
                                 mfc="white" if diag else colours[label])
            handles.setdefault(_tag(label, diagnostic), handle)
            if not same_n:
                for x, p in zip(xs, pts, strict=True):
                    ax.annotate(f"n={p.get('n', '?')}", (x, p["high"]), textcoords="offset points",
                                xytext=(0, 3), ha="center", fontsize=8)
        ticks = [str(b) if not (same_n and counts[j]) else f"{b}\nn={next(iter(counts[j]))}"
                 for j, b in enumerate(bins)]
        ax.set_xticks(range(len(bins)), ticks, fontsize=9)
        ax.tick_params(axis="y", labelsize=9)
        ax.set_xlim(-0.5, len(bins) - 0.5)
        ax.set_ylim(-0.02, 1.08)
        chance = ax.axhline(0.5, color="grey", ls=":", lw=1)
        handles.setdefault(CHANCE_LABEL, chance)
        ax.set_title(panel["title"], fontsize=10)
        ax.set_xlabel(xlabel, fontsize=10)
        ax.grid(alpha=0.3, axis="y")
    for ax in axes.flat[len(split):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel(f"strict pairwise accuracy{_ci_text(level)}", fontsize=10)
    fig.suptitle(f"{title}\n{SAMPLE_NOTE}" if sample else title, fontsize=12)
    fig.legend(list(handles.values()), list(handles), fontsize=9, loc="outside right upper")
    return _save(fig, path)


def accuracy_bars(
    rows: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    title: str,
    level: int = 95,
    sample: bool = False,
) -> Path:
    """Horizontal bars of accuracy with CI whiskers.

    Args:
        rows: ``{"label", "value", "low", "high"}`` and optionally ``"diagnostic": True``
            (tagged and hatched) and ``"single_order"``: a pairwise judge's single-order
            accuracy, drawn as a marker on the judge's bar beside its strict accuracy.
        path: the PNG to write.
        title: figure title.
        level: the interval level in percent (stated on the axis).
        sample: the data is the bundled sample (said in the title).

    Each bar's value is written at its end, so a 0.00 run shows as a marked 0, not a blank row.
    """
    fig = _figure(figsize=(9.6, 0.45 * len(rows) + 1.8), layout="constrained")
    ax = fig.subplots()
    labels = [f"{r['label']}{DIAGNOSTIC_TAG}" if r.get("diagnostic") else str(r["label"])
              for r in rows]
    values = [r["value"] for r in rows]
    err = [[r["value"] - r["low"] for r in rows], [r["high"] - r["value"] for r in rows]]
    bars = ax.barh(range(len(rows)), values, xerr=err, capsize=3, color="#4c78a8")
    for bar, r in zip(bars, rows, strict=True):
        if r.get("diagnostic"):
            bar.set_facecolor("#f2a541")
            bar.set_hatch("//")
    zero = [i for i, v in enumerate(values) if v == 0]
    if zero:  # a zero-width bar is invisible: mark it at the axis
        ax.plot([0] * len(zero), zero, "|", color="#c0392b", ms=14, mew=3,
                label="accuracy 0 (no pair right)")
    for i, r in enumerate(rows):
        ax.annotate(f"{r['value']:.2f}", (r["high"], i), textcoords="offset points",
                    xytext=(5, 0), va="center", fontsize=7,
                    color="#c0392b" if r["value"] == 0 else "black")
    single = [(i, float(r["single_order"])) for i, r in enumerate(rows)
              if r.get("single_order") is not None]
    if single:  # a judge: its single-order accuracy beside the strict bar
        ax.plot([v for _, v in single], [i for i, _ in single], "D", color="#e45756", ms=6,
                label=SINGLE_ORDER_LABEL)
        for i, v in single:
            ax.annotate(f"{v:.2f}", (v, i), textcoords="offset points", xytext=(0, -10),
                        ha="center", va="center", fontsize=6, color="#e45756")
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0.5, color="grey", ls=":", lw=1, label=CHANCE_LABEL)
    ax.set_xlim(-0.01, 1.12)  # room for the value written after a whisker at 1
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_xlabel(f"strict pairwise accuracy{_ci_text(level)}")
    _title(ax, title, sample)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes
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
    fig = _figure(figsize=(8.6, 4.4), layout="constrained")
    ax = fig.subplots()
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
    ax.axhline(0.5, color="grey", ls=":", lw=1, label=CHANCE_LABEL)
    ax.set_ylabel(f"strict pairwise accuracy ({level}% bootstrap CI)")
    title = "Personalization sensitivity: same pairs (all domains), profile source varied"
    _title(ax, title, sample)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes
    ax.grid(alpha=0.3)
    return _save(fig, path)


__all__ = [
    "BASELINE_NAMES", "CHANCE_LABEL", "DIAGNOSTIC_TAG", "MAX_SERIES", "PANELS_PER_ROW",
    "SAMPLE_NOTE", "SINGLE_ORDER_LABEL", "accuracy_bars", "binned_panels", "bon_curves",
    "condition_lines", "correlation_figure", "figure_texts", "scatter_with_ci",
]
