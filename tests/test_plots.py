"""Figures carry the tables' flags: SAMPLE, DIAGNOSTIC, the interval level, no doubled series.

``figures`` (tests/conftest.py) keeps the figures the plot functions save.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prbench.analysis import plots


def _legend(fig: Any) -> list[str]:
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)
    return [t.get_text() for legend in legends for t in legend.get_texts()]


def _curve(values: list[float]) -> dict[str, Any]:
    return {"curve": {"points": [{"value": v, "low": v - 0.05, "high": v + 0.05} for v in values]}}


def test_bars_flags_and_a_visible_zero(tmp_path: Path, figures: list[Any]) -> None:
    rows = [
        {"label": "length", "value": 0.5, "low": 0.3, "high": 0.7},
        {"label": "constant", "value": 0.0, "low": 0.0, "high": 0.0},
        {"label": "oracle-rubric", "value": 0.9, "low": 0.8, "high": 1.0, "diagnostic": True},
    ]
    assert plots.accuracy_bars(rows, tmp_path / "b.png", title="t", level=90, sample=True).exists()
    fig = figures[0]
    texts = plots.figure_texts(fig)
    assert any(plots.SAMPLE_NOTE in t for t in texts)
    assert "oracle-rubric (DIAGNOSTIC)" in texts and "length (DIAGNOSTIC)" not in texts
    assert any("90% bootstrap CI" in t for t in texts)
    assert [t for t in texts if t == "0.00"]  # the zero run's value is written
    ax = fig.axes[0]
    zero_marks = [ln for ln in ax.get_lines() if list(ln.get_xdata()) == [0] and
                  list(ln.get_ydata()) == [1]]
    assert zero_marks and zero_marks[0].get_marker() == "|"  # drawn at the axis, row 1
    assert ax.get_xlim()[0] < 0  # the mark is not clipped at the frame
    legend = _legend(fig)
    assert len(legend) == len(set(legend)) and plots.CHANCE_LABEL in legend


def test_bon_curves_one_length_and_two_named_randoms(tmp_path: Path, figures: list[Any]) -> None:
    result = {
        "ks": [1, 2, 4], "sample": True, "bootstrap": {"confidence": 0.95},
        "quality": {"source": "gold labels"},
        "scorers": {"length": _curve([0.4, 0.3, 0.1]), "random": _curve([0.4, 0.45, 0.5]),
                    "oracle-rubric": {**_curve([0.4, 0.6, 0.8]), "diagnostic": True}},
        "baselines": {"random": _curve([0.4, 0.4, 0.4]), "length": _curve([0.4, 0.3, 0.1]),
                      "gold-best": _curve([0.4, 0.7, 1.0])},
    }
    plots.bon_curves(result, tmp_path / "bon.png")
    fig = figures[0]
    legend = _legend(fig)
    assert len(legend) == 5 and len(set(legend)) == 5  # the length baseline is drawn once
    assert sum("length" in t or "longest" in t for t in legend) == 1
    assert "length (scorer = the longest answer baseline)" in legend
    assert "random (scorer)" in legend and "random pick (baseline)" in legend
    assert "oracle-rubric (DIAGNOSTIC)" in legend
    texts = plots.figure_texts(fig)
    assert any(plots.SAMPLE_NOTE in t for t in texts)
    assert any("95% bootstrap CI" in t for t in texts)
    assert len(fig.axes[0].get_lines()) == 5


def test_bon_curves_keep_a_length_baseline_that_differs(tmp_path: Path,
                                                        figures: list[Any]) -> None:
    result = {"ks": [1, 2], "scorers": {"length": _curve([0.4, 0.5])},
              "baselines": {"length": _curve([0.4, 0.3])}}
    plots.bon_curves(result, tmp_path / "bon.png")
    legend = _legend(figures[0])
    assert legend == ["length (scorer)", "longest answer (baseline)"]
    assert not any(plots.SAMPLE_NOTE in t for t in plots.figure_texts(figures[0]))


def _correlation(points: bool) -> dict[str, Any]:
    labels = ["embedding-similarity", "random", "length", "oracle-rubric"]
    xy = [(0.55, 0.46), (0.49, 0.49), (0.53, 0.08), (0.98, 0.83)]
    result: dict[str, Any] = {
        "scorers": labels, "sample": True, "diagnostic": ["oracle-rubric"],
        "bootstrap": {"resamples": 100, "confidence": 0.95, "seed": 0},
        "benchmark": {"what": "pair accuracy",
                      "values": {lab: x for lab, (x, _) in zip(labels, xy, strict=True)}},
        "downstream": {"what": "best-of-6 quality",
                       "values": {lab: y for lab, (_, y) in zip(labels, xy, strict=True)}},
        "statistics": {"spearman": {"value": 0.4, "low": 0.2, "high": 1.0},
                       "ndcg": {"value": 0.98, "low": 0.93, "high": 1.0},
                       "rbo": {"value": 0.93, "low": 0.9, "high": 0.95}},
    }
    if points:
        result["points"] = [{"label": lab, "x": x, "x_low": x - 0.15, "x_high": min(1, x + 0.15),
                             "y": y, "y_low": y - 0.1, "y_high": y + 0.1}
                            for lab, (x, y) in zip(labels, xy, strict=True)]
    return result


def test_correlation_figure_names_rho_with_its_ci_and_clears_the_points(
        tmp_path: Path, figures: list[Any]) -> None:
    plots.correlation_figure(_correlation(points=True), tmp_path / "c.png")
    fig = figures[0]
    texts = plots.figure_texts(fig)
    title = fig.axes[0].get_title()
    assert "Spearman ρ = 0.40 [0.20, 1.00] (95% CI)" in title
    assert plots.SAMPLE_NOTE in title
    assert "oracle-rubric (DIAGNOSTIC)" in texts and "random" in texts
    assert "pair accuracy (95% bootstrap CI)" in texts
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # the saved figure is closed: draw it again
    canvas.draw()
    renderer = canvas.get_renderer()
    ax = fig.axes[0]
    boxes = [a.get_window_extent(renderer) for a in ax.texts]
    assert len(boxes) == 4
    for x, y in ax.transData.transform([(0.55, 0.46), (0.49, 0.49), (0.53, 0.08), (0.98, 0.83)]):
        assert not any(b.x0 - 3 < x < b.x1 + 3 and b.y0 - 3 < y < b.y1 + 3 for b in boxes)
    for i, a in enumerate(boxes):
        assert not any(a.overlaps(b) for b in boxes[i + 1:])


def test_correlation_figure_of_an_older_file_without_points(tmp_path: Path,
                                                             figures: list[Any]) -> None:
    plots.correlation_figure(_correlation(points=False), tmp_path / "c.png")
    texts = plots.figure_texts(figures[0])
    assert "pair accuracy" in texts  # no bars, so no interval level on the axis
    assert "Spearman ρ" in figures[0].axes[0].get_title()


def test_binned_panels_and_condition_lines_carry_the_flags(tmp_path: Path,
                                                           figures: list[Any]) -> None:
    pt = {"value": 0.5, "low": 0.4, "high": 0.6, "n": 7}
    plots.binned_panels(["3", "4"], [{"title": "own profile", "series": [
        {"label": "a", "points": [pt, None]}, {"label": "o", "points": [pt, pt]}]}],
        tmp_path / "b.png", xlabel="aspects", title="by aspects", level=90, sample=True,
        diagnostic=["o"])
    plots.condition_lines([{"label": "o", "points": [{"x": "own", **pt}]}], tmp_path / "c.png",
                          level=95, sample=True, diagnostic=["o"])
    for fig, level, diag in ((figures[0], 90, "o (DIAGNOSTIC)"),
                             (figures[1], 95, "o (DIAGNOSTIC)")):
        texts = plots.figure_texts(fig)
        assert any(plots.SAMPLE_NOTE in t for t in texts)
        assert any(f"{level}% bootstrap CI" in t for t in texts)
        assert diag in _legend(fig) and plots.CHANCE_LABEL in _legend(fig)


def test_binned_panels_show_n_and_do_not_join_categories(tmp_path: Path,
                                                         figures: list[Any]) -> None:
    def pt(n: int) -> dict[str, Any]:
        return {"value": 0.5, "low": 0.4, "high": 0.6, "n": n}

    # panel 1: both series have the same n per bin (under the tick); panel 2: they differ
    same = [{"label": "a", "points": [pt(3), pt(5)]}, {"label": "b", "points": [pt(3), pt(5)]}]
    differ = [{"label": "a", "points": [pt(3), pt(5)]}, {"label": "b", "points": [pt(2), None]}]
    many = [{"label": f"s{i}", "points": [pt(1), pt(1)]} for i in range(plots.MAX_SERIES + 2)]
    plots.binned_panels(["x", "y"], [{"title": "own profile", "series": same},
                                     {"title": "no profile", "series": differ},
                                     {"title": "swapped", "series": many}],
                        tmp_path / "p.png", xlabel="bins", title="Accuracy by bins")
    fig = figures[0]
    axes = [ax for ax in fig.axes if ax.get_visible()]
    # the third panel's 8 series are split in two panels of at most MAX_SERIES
    assert [ax.get_title() for ax in axes] == ["own profile", "no profile", "swapped (1/2)",
                                               "swapped (2/2)"]
    assert [t.get_text() for t in axes[0].get_xticklabels()] == ["x\nn=3", "y\nn=5"]
    assert sorted(t.get_text() for t in axes[1].texts) == ["n=2", "n=3", "n=5"]
    for ax in axes:  # markers only: categorical bins are not joined by lines
        assert all(line.get_linestyle() == "None" for line in ax.lines
                   if len(line.get_xdata()) > 1 and line.get_marker() not in ("None", ""))
    # a series keeps its colour from panel to panel
    colour = {ax.get_title(): [c.get_color() for c in ax.lines if c.get_marker() == "o"]
              for ax in axes[:2]}
    assert colour["own profile"][0] == colour["no profile"][0]


def test_plots_leave_the_users_matplotlib_backend_and_pyplot_alone(tmp_path: Path) -> None:
    """A notebook user's backend is not switched and no figure stays open in pyplot."""
    import subprocess
    import sys

    code = (
        "import matplotlib\n"
        "matplotlib.use('svg')\n"
        "import matplotlib.pyplot as plt\n"
        "from prbench.analysis import plots\n"
        "import tests.test_plots as t\n"
        f"plots.correlation_figure(t._correlation(points=True), {str(tmp_path / 'c.png')!r})\n"
        "print(matplotlib.get_backend(), len(plt.get_fignums()))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=Path(__file__).resolve().parent.parent)
    assert done.stdout.split() == ["svg", "0"]
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
