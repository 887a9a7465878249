"""The offline downstream chain on the bundled sample: eval -> bon -> correlate -> report.

The same commands as ``make downstream-demo`` (one benchmark run instead of three, fewer
bootstrap resamples), checked for consistency rather than for particular values.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._harness_fixtures import run_eval


@pytest.mark.slow
def test_sample_chain_runs_and_is_consistent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from prbench.cli import main

    monkeypatch.setenv("PRBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    code, _, err = run_eval(
        ["eval", "--log_samples", "--tasks",
         "personalized_rewardbench_sample,personalized_rewardbench_sample_noprofile",
         "--model_args", "scorer=length", "--output_path", "results"], capsys,
    )
    assert code == 0, err
    scorers = ["length", "embedding-similarity", "oracle-rubric", "random"]
    argv = ["bon", *(x for s in scorers for x in ("--model_args", f"scorer={s}")), "-o", "bon",
            "--resamples", "300"]
    assert main(argv) == 0
    table = capsys.readouterr().out
    bon = json.loads(Path("bon/bon_results.json").read_text(encoding="utf-8"))
    assert bon["ks"] == [1, 2, 4, 6] and bon["n_pools"] == 45
    assert bon["profile"] == {"id": "dense", "options": {"k": 5}}

    def curve(group: str, label: str) -> list[float]:
        return [p["value"] for p in bon[group][label]["curve"]["points"]]

    random_pick = curve("baselines", "random")
    oracle = curve("scorers", "oracle-rubric")
    gold = curve("baselines", "gold-best")
    for label in scorers:
        values = curve("scorers", label)
        assert values[0] == pytest.approx(random_pick[0])  # best-of-1 = a random pick
        assert all(0.0 <= v <= 1.0 for v in values)
        assert all(v <= g + 1e-12 for v, g in zip(values, gold, strict=True))
    assert all(o >= r for o, r in zip(oracle, random_pick, strict=True))
    assert all(o >= s for o, s in zip(oracle, curve("scorers", "random"), strict=True))
    # the length scorer picks what the length baseline picks
    assert curve("scorers", "length") == pytest.approx(curve("baselines", "length"))
    assert "| 6 |" in table and "oracle-rubric (DIAGNOSTIC)" in table

    # the benchmark run's accuracy is the pair accuracy Best-of-N measured on the same records
    assert main(["correlate", "bon/bon_results.json", "--resamples", "200",
                 "-o", "correlation"]) == 0
    corr = json.loads(Path("correlation/correlation.json").read_text(encoding="utf-8"))
    for s in corr["statistics"].values():
        for key in ("value", "low", "high"):
            assert -1.0 <= s[key] <= 1.0
    assert main(["correlate", "bon/bon_results.json", "--benchmark", "results",
                 "--resamples", "50", "-o", "correlation_eval"]) == 1  # one scorer only
    capsys.readouterr()
    from prbench.analysis.runs import expand, load_run

    (results_file,) = expand(["results"])
    run = load_run(results_file, resamples=50)
    length_acc = sum(run.outcomes["profile"].values()) / len(run.outcomes["profile"])
    assert length_acc == pytest.approx(corr["benchmark"]["values"]["length"])

    assert main(["report", "results", "bon/bon_results.json", "correlation/correlation.json",
                 "-o", "report", "--resamples", "200"]) == 0
    md = Path("report/report.md").read_text(encoding="utf-8")
    assert "## Best-of-N" in md and "## Benchmark vs downstream rank correlation" in md
    assert "## Personalization gap" in md
    pngs = ("leaderboard.png", "best_of_n_0.png", "correlation_0.png", "sensitivity.png",
            "accuracy_by_rubric_aspects.png", "accuracy_by_profile_posts.png",
            "accuracy_by_length_diff.png")
    for png in pngs:
        assert Path("report", png).stat().st_size > 1000
    assert Path("report/report.html").read_text(encoding="utf-8").count("base64,") == len(pngs)
