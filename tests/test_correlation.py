"""Rank correlation: RBO against hand-computed values, the statistics, bootstrap, the command."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from prbench.analysis.correlation import Side, correlate, ndcg, ranking, rbo_ext, statistics


def test_rbo_hand_computed() -> None:
    assert rbo_ext(["a", "b", "c"], ["a", "b", "c"]) == pytest.approx(1.0)
    # X = (0, 2, 3): 0.1/0.9 * (0*0.9 + 1*0.81 + 1*0.729) + 1*0.729 = 0.9
    assert rbo_ext(["a", "b", "c"], ["b", "a", "c"]) == pytest.approx(0.9)
    # reversed: A = (0, 1/2, 1): 0.1/0.9 * (0.405 + 0.729) + 0.729 = 0.855
    assert rbo_ext(["a", "b", "c"], ["c", "b", "a"]) == pytest.approx(0.855)
    # p = 0.5, swapped top two of two: A = (0, 1): 1 * (0 + 0.25) + 0.25 = 0.5
    assert rbo_ext(["a", "b"], ["b", "a"], p=0.5) == pytest.approx(0.5)


def test_rbo_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="same distinct items"):
        rbo_ext(["a", "b"], ["a", "c"])
    with pytest.raises(ValueError, match="p must be"):
        rbo_ext(["a"], ["a"], p=1.0)


@pytest.mark.parametrize(("relevance", "scores"), [
    ([0.8, 0.6, 0.4, 0.1], [0.9, 0.7, 0.5, 0.3]),  # same order: 1
    ([0.1, 0.4, 0.6, 0.8], [0.9, 0.7, 0.5, 0.3]),  # reversed
    ([3, 2, 3, 0, 1, 2], [0.5, 0.5, 0.2, 0.9, 0.5, 0.1]),  # tied scores: average gain
    ([1, 0, 0, 2], [0.3, 0.3, 0.3, 0.3]),  # every score tied
    ([0, 0, 5], [0.2, 0.1, 0.0]),  # the one relevant item last
    ([0.25, 0.75], [1.0, 2.0]),
])
def test_ndcg_equals_scikit_learns(relevance: list[float], scores: list[float]) -> None:
    from sklearn.metrics import ndcg_score

    assert ndcg(relevance, scores) == ndcg_score([relevance], [scores])  # to the last bit


def test_ndcg_by_hand_and_without_gain() -> None:
    # order c, a, b with gains 1, 2, 0: (1 + 2/log2(3)) / (2 + 1/log2(3))
    expected = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    assert ndcg([2, 0, 1], [0.5, 0.1, 0.9]) == pytest.approx(expected)
    assert math.isnan(ndcg([0, 0], [0.1, 0.2]))


def test_ranking_breaks_ties_by_label() -> None:
    assert ranking({"b": 0.5, "a": 0.5, "c": 0.9}) == ["c", "a", "b"]


def test_statistics_agree_and_disagree() -> None:
    bench = {"a": 0.9, "b": 0.7, "c": 0.5, "d": 0.3}
    same = statistics(bench, {"a": 0.8, "b": 0.6, "c": 0.4, "d": 0.1})
    for name in ("spearman", "kendall", "weighted_kendall", "ndcg", "rbo"):
        assert same[name] == pytest.approx(1.0), name
    rev = statistics(bench, {"a": 0.1, "b": 0.4, "c": 0.6, "d": 0.8})
    assert rev["spearman"] == pytest.approx(-1.0) and rev["kendall"] == pytest.approx(-1.0)
    assert rev["weighted_kendall"] == pytest.approx(-1.0)
    assert 0 < rev["ndcg"] < 1 and 0 < rev["rbo"] < 1
    flat = statistics(bench, {"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.5})
    assert math.isnan(flat["spearman"]) and math.isnan(flat["kendall"])
    with pytest.raises(ValueError, match="at least two"):
        statistics({"a": 1.0}, {"a": 1.0})


def _side(values: dict[str, list[float]], what: str) -> Side:
    return Side({k: {f"r{i}": v for i, v in enumerate(vs)} for k, vs in values.items()}, what)


def test_correlate_bootstrap_is_seeded_and_bounded() -> None:
    bench = _side({"a": [1, 1, 1, 0, 1], "b": [1, 0, 1, 0, 0], "c": [0, 0, 1, 0, 0]}, "acc")
    down = _side({"a": [0.9, 0.8, 0.7, 0.9, 1.0], "b": [0.5, 0.6, 0.4, 0.5, 0.6],
                  "c": [0.1, 0.3, 0.2, 0.1, 0.2]}, "bon")
    out = correlate(bench, down, resamples=300, seed=1)
    assert out == correlate(bench, down, resamples=300, seed=1)
    assert out["ranking"] == {"benchmark": ["a", "b", "c"], "downstream": ["a", "b", "c"]}
    assert out["benchmark"]["paired_resample"] and out["downstream"]["paired_resample"]
    for name, s in out["statistics"].items():
        assert s["value"] == pytest.approx(1.0), name
        if math.isfinite(s["low"]):
            assert -1.0 <= s["low"] <= s["high"] <= 1.0
    # resampling pairs can tie the benchmark accuracies: those replicates are counted
    assert out["statistics"]["spearman"]["undefined_resamples"] >= 0
    assert out["statistics"]["spearman"]["low"] < 1.0


def test_unpaired_items_are_resampled_per_scorer() -> None:
    bench = Side({"a": {"x": 1.0, "y": 1.0}, "b": {"z": 0.0, "w": 1.0}}, "acc")
    down = _side({"a": [0.9, 0.8], "b": [0.2, 0.1]}, "bon")
    out = correlate(bench, down, resamples=50)
    assert not out["benchmark"]["paired_resample"] and out["downstream"]["paired_resample"]


def _bon_file(tmp_path: Path) -> Path:
    from prbench.plugins import get_registry

    evaluator = get_registry().build(
        "downstream-evaluator", "best-of-n",
        {"profile": "none", "resamples": 100, "progress": False},
    )
    result = evaluator.run(["length", "oracle-rubric", "constant"])
    path = tmp_path / "bon_results.json"
    path.write_text(json.dumps(result), encoding="utf-8")
    return path


def test_correlate_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.cli import main

    monkeypatch.setenv("PRBENCH_CACHE_DIR", str(tmp_path / "cache"))
    bon = _bon_file(tmp_path)
    out = tmp_path / "corr"
    # the DIAGNOSTIC oracle is left out by default, and the table says so
    assert main(["correlate", str(bon), "--resamples", "20", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "DIAGNOSTIC scorers left out (read the hidden rubric; --include_diagnostic ranks " \
           "them too): oracle-rubric" in printed
    result = json.loads((out / "correlation.json").read_text(encoding="utf-8"))
    assert result["scorers"] == ["constant", "length"]
    assert result["excluded_diagnostic"] == ["oracle-rubric"] and result["diagnostic"] == []
    assert "left out" in (out / "correlation.md").read_text(encoding="utf-8")
    assert main(["correlate", str(bon), "--include_diagnostic", "--resamples", "100",
                 "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "spearman" in printed and "DIAGNOSTIC scorers included" in printed
    assert "SAMPLE" in printed
    result = json.loads((out / "correlation.json").read_text(encoding="utf-8"))
    assert result["scorers"] == ["constant", "length", "oracle-rubric"]
    assert result["benchmark"]["values"]["constant"] == 0.0  # all ties: wrong
    assert result["ranking"]["downstream"][0] == "oracle-rubric"
    assert (out / "correlation.png").stat().st_size > 1000
    # the plot's points with their intervals are kept, so `prbench report` draws the same figure
    assert [p["label"] for p in result["points"]] == result["scorers"]
    assert all(p["x_low"] <= p["x"] <= p["x_high"] and p["y_low"] <= p["y"] <= p["y_high"]
               for p in result["points"])
    assert main(["correlate", str(bon), "--exclude-diagnostic", "--resamples", "20",
                 "-o", str(out)]) == 0  # the default, still accepted
    assert "oracle-rubric" not in json.loads((out / "correlation.json").read_text())["scorers"]
    assert main(["correlate", str(bon), "--exclude_diagnostic", "--include_diagnostic",
                 "-o", str(out)]) == 1
    assert "contradict each other" in capsys.readouterr().err
    assert main(["correlate", str(bon), "--k", "3", "-o", str(out)]) == 1
    assert "ks: [1, 2, 4, 6]" in capsys.readouterr().err
