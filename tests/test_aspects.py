"""Accuracy by record property (:mod:`prbench.analysis.aspects`): bins and counts by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prbench.analysis.aspects import (
    PairPoint,
    bin_edges,
    binned_accuracy,
    factors_of,
    report_blocks,
)
from prbench.metrics import bootstrap_ci


def _labels(values: list[float], max_bins: int = 4) -> list[str]:
    return [b.label for b in bin_edges(values, max_bins)]


def test_few_distinct_values_get_a_bin_each() -> None:
    assert _labels([5, 3, 4, 4]) == ["3", "4", "5"]
    bins = bin_edges([5, 3, 4, 4])
    assert [b.holds(5) for b in bins] == [False, False, True]  # the last bin keeps its top


def test_quartile_cuts() -> None:
    # 8 values, 4 bins: cuts at sorted positions 0, 2, 4, 6 -> two values per bin
    assert _labels([8, 7, 6, 5, 4, 3, 2, 1]) == ["1 to 2", "3 to 4", "5 to 6", "7 to 8"]
    # negative answer-length differences bin the same way
    assert _labels([-9, -3, 0, 2, 4, 11, 15, 20]) == ["-9 to -3", "0 to 2", "4 to 11", "15 to 20"]


def test_ties_stay_in_one_bin() -> None:
    # positions 0, 2, 4 all hold 1 and position 6 holds 3: the cuts are {1, 3}
    assert _labels([1, 1, 1, 1, 1, 2, 3, 4, 5]) == ["1 to 2", "3 to 5"]
    assert bin_edges([]) == []
    assert _labels([float("nan"), 2.0]) == ["2"]


def test_binned_accuracy_counts_by_hand() -> None:
    def point(run: str, aspects: int, correct: float) -> PairPoint:
        return PairPoint(run, "own", f"{run}-{aspects}-{correct}", correct,
                         {"rubric_aspects": float(aspects), "profile_posts": 1.0,
                          "length_diff": 0.0})

    points = [point("A", 3, 1.0), point("A", 3, 0.0), point("A", 5, 1.0), point("A", 5, 1.0),
              point("A", 5, 1.0), point("B", 3, 0.0), point("B", 7, 1.0)]
    table = binned_accuracy(points, "rubric_aspects", resamples=500, seed=3)
    assert [b.label for b in table.bins] == ["3", "5", "7"]
    a = table.cells[("A", "own")]
    assert (a["3"].value, a["3"].n) == (0.5, 2)
    assert (a["5"].value, a["5"].n) == (1.0, 3)
    assert "7" not in a  # A has no pair with 7 aspects: a gap, not a zero
    b = table.cells[("B", "own")]
    assert (b["3"].value, b["7"].value) == (0.0, 1.0)
    # the interval is the shared bootstrap of the bin's outcomes
    expected = bootstrap_ci([1.0, 0.0], resamples=500, seed=3)
    assert (a["3"].low, a["3"].high) == (expected.low, expected.high)


def test_factors_of_a_logged_row() -> None:
    record = {"rubric_aspects": [{"aspect": "a"}, {"aspect": "b"}, {"aspect": "c"}],
              "profile": [{"id": "1", "text": "x"}, {"id": "2", "text": "y"}]}
    doc = {"record_json": json.dumps(record), "chosen": "one two three four",
           "rejected": "one two", "n_posts": 2}
    assert factors_of(doc) == {"rubric_aspects": 3.0, "profile_posts": 2.0, "length_diff": 2.0}


def test_report_without_samples_says_so() -> None:
    blocks = report_blocks([], resamples=10, seed=0)
    assert blocks[-1][0] == "p" and "--log_samples" in blocks[-1][1]


@pytest.mark.parametrize("max_bins", [2, 3, 4, 6])
def test_every_value_falls_in_exactly_one_bin(max_bins: int) -> None:
    values = [float(v) for v in (0, 0, 1, 2, 2, 2, 3, 7, 8, 8, 9, 15, -4)]
    bins = bin_edges(values, max_bins)
    assert len(bins) <= max_bins
    for v in values:
        assert sum(b.holds(v) for b in bins) == 1


def test_the_figure_has_a_readable_title_and_one_panel_per_condition(
        tmp_path: Path, figures: list[Any]) -> None:
    from prbench.analysis import plots
    from tests.test_sensitivity import _runs

    blocks = report_blocks(_runs(tmp_path), resamples=50, seed=0)
    (draw,) = [b[1] for b in blocks if b[0] == "figure"]  # only length_diff: no records
    draw(tmp_path / "by_length.png")
    texts = plots.figure_texts(figures[0])
    assert any(t.startswith("Accuracy by answer-length difference") for t in texts)
    panels = [ax.get_title() for ax in figures[0].axes if ax.get_visible()]
    assert panels == ["own profile", "another user's profile (swapped)", "no profile"]
    tables = [b for b in blocks if b[0] == "table"]
    assert [r[0] for r in tables[0][2]] == ["alpha / own profile",
                                            "alpha / another user's profile (swapped)",
                                            "alpha / no profile"]
