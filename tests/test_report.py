"""Paired tests and the one-page report built from lm-eval results files and samples."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from prbench.analysis.paired import compare, holm, mcnemar_exact

DATE = "2026-01-01T00-00-00.000000"
DOMAINS = ("Art_and_Entertainment", "Society_and_Culture")


def test_mcnemar_exact_hand_values() -> None:
    # 5 discordant pairs, all won by B: p = 2 * 0.5**5
    assert mcnemar_exact([0, 0, 0, 0, 0, 1], [1, 1, 1, 1, 1, 1]) == (0, 5, pytest.approx(0.0625))
    assert mcnemar_exact([1, 0], [1, 0]) == (0, 0, 1.0)
    # 3 vs 1 discordant: two-sided binomial p = 2 * P(X <= 1 | 4, 0.5) = 0.625
    assert mcnemar_exact([1, 1, 1, 0], [0, 0, 0, 1])[2] == pytest.approx(0.625)


def test_holm() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_compare_uses_only_common_pairs() -> None:
    c = compare({"x": 1, "y": 1, "z": 0}, {"y": 0, "z": 0, "w": 1}, resamples=200)
    assert c.n == 2 and c.a == 0.5 and c.b == 0.0 and c.diff.value == 0.5
    assert (c.only_a, c.only_b) == (1, 0)
    with pytest.raises(ValueError, match="no pair"):
        compare({"x": 1}, {"y": 1})


def write_run(folder: Path, scorer: str, correct: dict[str, list[int]], *,
              diagnostic: bool = False) -> Path:
    """An lm-eval results file of `prbench eval` and its samples, per condition and domain."""
    folder.mkdir(parents=True, exist_ok=True)
    results: dict = {"results": {}, "configs": {}, "n-samples": {}, "group_subtasks": {},
                     "config": {"prbench": {"scorer": {"id": scorer, "options": {},
                                                       "diagnostic": diagnostic}}}}
    for condition, outcomes in correct.items():
        suffix = "" if condition == "profile" else "_noprofile"
        group = f"prb_sample{suffix}"
        results["group_subtasks"][group] = []
        half = len(outcomes) // len(DOMAINS)
        for d, domain in enumerate(DOMAINS):
            task = f"prb_{domain.lower()}{suffix}"
            results["group_subtasks"][group].append(task)
            part = outcomes[d * half:(d + 1) * half]
            results["results"][task] = {"acc,none": sum(part) / len(part), "tie,none": 0.0,
                                        "invalid,none": 0.0}
            results["configs"][task] = {
                "dataset_kwargs": {"prbench_domain": domain, "prbench_condition": condition,
                                   "prbench_default_data": "sample"},
                "metadata": {},
            }
            results["n-samples"][task] = {"original": len(part), "effective": len(part)}
            lines = []
            for i, ok in enumerate(part):
                rid = f"{domain[:2]}-{i}"
                doc = {"id": rid, "chosen": "a b c" if i % 2 else "a", "rejected": "a b"}
                lines.append(json.dumps({"doc": doc, "acc": float(ok), "tie": 0.0}))
            (folder / f"samples_{task}_{DATE}.jsonl").write_text("\n".join(lines) + "\n")
    path = folder / f"results_{DATE}.json"
    path.write_text(json.dumps(results), encoding="utf-8")
    return path


def test_load_run_reads_samples(tmp_path: Path) -> None:
    from prbench.analysis.runs import load_run

    path = write_run(tmp_path / "a", "alpha", {"profile": [1, 1, 0, 1], "noprofile": [0, 1, 0, 0]})
    run = load_run(path, resamples=100)
    assert run.label == "alpha" and len(run.samples_found) == 4
    assert run.outcomes["profile"] == {"Ar-0": 1.0, "Ar-1": 1.0, "So-0": 0.0, "So-1": 1.0}
    assert run.length["profile"]["Ar-1"] == 1.0 and run.length["profile"]["Ar-0"] == 0.0
    assert [s.summary.micro.value for s in run.sections] == [0.75, 0.25]


def test_report_from_runs_and_bon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.cli import main

    monkeypatch.setenv("PRBENCH_CACHE_DIR", str(tmp_path / "cache"))
    n = 20
    write_run(tmp_path / "runs" / "a", "alpha",
              {"profile": [1] * 18 + [0] * 2, "noprofile": [1] * 10 + [0] * 10})
    write_run(tmp_path / "runs" / "b", "oracle", {"profile": [1] * n, "noprofile": [1] * n},
              diagnostic=True)
    from prbench.plugins import get_registry

    bon = get_registry().build("downstream-evaluator", "best-of-n",
                               {"profile": "none", "resamples": 50, "progress": False})
    (tmp_path / "bon.json").write_text(json.dumps(bon.run(["length", "constant"])))
    out = tmp_path / "report"
    code = main(["report", str(tmp_path / "runs"), str(tmp_path / "bon.json"), "-o", str(out),
                 "--resamples", "200"])
    assert code == 0, capsys.readouterr().err
    md = (out / "report.md").read_text(encoding="utf-8")
    for heading in ("## Leaderboard", "## Personalization gap", "## Paired tests between scorers",
                    "## Best-of-N"):
        assert heading in md
    assert "oracle (DIAGNOSTIC)" in md and "bundled SAMPLE" in md
    # the gap of alpha: 18/20 with the profile, 10/20 without, 8 pairs only right with it,
    # once, in the one personalization section
    assert md.count("## Personalization") == 1
    gap_line = next(line for line in md.splitlines()
                    if line.startswith("| alpha | all domains | 20 |"))
    assert "| 0.900 | 0.500 | +0.400 [" in gap_line and "| 8/0 |" in gap_line
    # alpha vs the diagnostic oracle: in a table apart, outside the Holm family
    paired = md.split("## Paired tests between scorers", 1)[1].split("\n## ", 1)[0]
    assert "### Against the DIAGNOSTIC oracle" in paired and "Holm p" not in paired
    # a pair explorer page per run, and one side by side
    assert "(explorer/compare.html)" in md and (out / "explorer" / "alpha.html").exists()
    assert "![leaderboard](leaderboard.png)" in md and (out / "leaderboard.png").exists()
    assert (out / "best_of_n_0.png").stat().st_size > 1000
    page = (out / "report.html").read_text(encoding="utf-8")
    # leaderboard, personalization sensitivity (own vs none of alpha and oracle), Best-of-N, and
    # accuracy by answer-length difference (these samples carry no record, so neither the
    # rubric-aspect nor the profile-size plot)
    assert (out / "sensitivity.png").exists()
    assert page.count("data:image/png;base64,") == 4 and "<table>" in page
    assert (out / "accuracy_by_length_diff.png").exists()
    assert not (out / "accuracy_by_rubric_aspects.png").exists()
    printed = capsys.readouterr().out
    assert "personalization sensitivity" in printed
    total = next(line for line in printed.splitlines() if line.startswith("alpha   all domains"))
    assert total.split()[3:6] == ["20", "0.900", "0.500"]
    assert "oracle (DIAGNOSTIC)" in page


def test_report_refuses_a_file_that_is_not_results(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.cli import main

    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"hello": 1}))
    assert main(["report", str(bad), "-o", str(tmp_path / "r")]) == 1
    assert "not an lm-eval results file" in capsys.readouterr().err


def _dated(folder: Path, scorer: str, conditions: tuple[str, ...], date: str,
           options: dict | None = None) -> Path:
    """A results file of ``scorer`` on ``conditions``, dated ``date`` (no samples)."""
    path = write_run(folder, scorer, {c: [1, 0] for c in conditions})
    data = json.loads(path.read_text(encoding="utf-8"))
    data["config"]["prbench"]["scorer"]["options"] = options or {}
    target = path.with_name(f"results_{date}.json")
    target.write_text(json.dumps(data), encoding="utf-8")
    path.unlink()
    return target


def test_a_newer_run_of_the_same_scorer_and_tasks_replaces_the_older(tmp_path: Path) -> None:
    from prbench.analysis.runs import latest_runs, load_run

    both = ("profile", "noprofile")
    d1, d2, d3 = (f"2026-02-0{i}T00-00-00.000000" for i in (1, 2, 3))
    files = {
        "old": _dated(tmp_path / "a", "alpha", both, d1),
        "new": _dated(tmp_path / "a", "alpha", both, d2),
        "part": _dated(tmp_path / "b", "alpha", ("profile",), d1),  # a subset, older: replaced
        "later_part": _dated(tmp_path / "c", "alpha", ("noprofile",), d3),  # newer subset: kept
        "other_opts": _dated(tmp_path / "d", "alpha", both, d1, {"k": 2}),  # another scorer
        "beta": _dated(tmp_path / "e", "beta", both, d1),
    }
    runs = [load_run(f, resamples=20) for f in files.values()]
    kept, notes = latest_runs(runs)
    assert [r.path for r in kept] == [files[k] for k in ("new", "later_part", "other_opts",
                                                         "beta")]
    assert len(notes) == 2
    assert all("replaced by the newer run" in n and str(files["new"]) in n for n in notes)
    assert str(files["old"]) in notes[0] and str(files["part"]) in notes[1]


def test_a_run_saved_under_a_json_output_path_is_found_with_its_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-o out/run.json`` makes lm-eval write ``run_<date>.json``: its manifest leads to it."""
    from prbench.analysis.runs import expand, samples_file
    from prbench.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["eval", "--tasks", "personalized_rewardbench_sample_art_and_entertainment",
                 "--model_args", "scorer=length", "-o", "out/run.json", "--log_samples"]) == 0
    capsys.readouterr()
    (results,) = expand(["out"])
    assert results.name.startswith("run_") and results.suffix == ".json"
    samples = samples_file(results, "personalized_rewardbench_sample_art_and_entertainment")
    assert samples is not None and samples.is_file()
    assert main(["report", "out", "-o", "rep"]) == 0
    assert (tmp_path / "rep" / "report.md").is_file()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no prbench_manifest"):
        expand(["empty"])


def test_the_terminal_says_why_figures_and_explorers_are_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without matplotlib, or without --log_samples samples, the terminal says what is left out.

    The page said it before; a user who reads only the terminal saw no figure and no explorer
    and no word why.
    """
    from prbench.cli import main

    folder = tmp_path / "runs" / "a"
    write_run(folder, "alpha", {"profile": [1, 1, 0, 1], "noprofile": [0, 1, 0, 0]})
    for samples in folder.glob("samples_*.jsonl"):
        samples.unlink()
    for module in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, module, None)  # an import of it fails: not installed
    out = tmp_path / "report"
    code = main(["report", str(tmp_path / "runs"), "-o", str(out), "--resamples", "20"])
    printed = capsys.readouterr().out
    assert code == 0
    assert "note: no per-pair samples for alpha: no pair explorer" in printed
    assert "--log_samples" in printed
    assert re.search(r"note: \d+ figure\(s\) left out of the report: plots need matplotlib",
                     printed), printed
    assert not (out / "leaderboard.png").exists()
