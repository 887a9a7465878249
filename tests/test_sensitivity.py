"""Personalization sensitivity in `prbench report`: own vs swapped / shuffled / no profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prbench.analysis.runs import load_run
from prbench.analysis.sensitivity import ALL, gather, sensitivity_rows

DATE = "2026-01-01T00-00-00.000000"
SUFFIX = {"own": "", "swapped": "_swapped", "shuffled": "_shuffled", "none": "_noprofile"}


def write_condition(folder: Path, scorer: str, source: str,
                    outcomes: dict[str, list[int]], *, samples: bool = True) -> Path:
    """A results file of one scorer under one profile source; ``outcomes`` per domain."""
    folder.mkdir(parents=True, exist_ok=True)
    results: dict = {"results": {}, "configs": {}, "n-samples": {}, "group_subtasks": {},
                     "config": {"prbench": {"scorer": {"id": scorer, "options": {"k": 1}}}}}
    group = f"prb{SUFFIX[source]}"
    results["group_subtasks"][group] = []
    for domain, part in outcomes.items():
        task = f"prb_{domain}{SUFFIX[source]}"
        results["group_subtasks"][group].append(task)
        results["results"][task] = {"acc,none": sum(part) / len(part), "tie,none": 0.0,
                                    "invalid,none": 0.0}
        kwargs = {"prbench_domain": domain, "prbench_default_data": "sample",
                  "prbench_condition": "noprofile" if source == "none" else "profile"}
        if source in ("swapped", "shuffled"):
            kwargs["prbench_default_profile_source"] = source
        results["configs"][task] = {"dataset_kwargs": kwargs, "metadata": {}}
        results["n-samples"][task] = {"original": len(part), "effective": len(part)}
        if samples:
            lines = [
                json.dumps({"doc": {"id": f"{domain}-{i}", "domain": domain, "chosen": "a b",
                                    "rejected": "a"}, "acc": float(ok), "tie": 0.0})
                for i, ok in enumerate(part)
            ]
            (folder / f"samples_{task}_{DATE}.jsonl").write_text("\n".join(lines) + "\n")
    path = folder / f"results_{DATE}.json"
    path.write_text(json.dumps(results), encoding="utf-8")
    return path


# alpha: domain A 8 pairs, domain B 4 pairs
OWN = {"A": [1, 1, 1, 1, 1, 1, 0, 0], "B": [1, 1, 0, 0]}
SWAPPED = {"A": [0, 0, 0, 0, 0, 1, 0, 1], "B": [1, 1, 0, 0]}
NONE = {"A": [0, 0, 0, 1, 1, 1, 0, 0], "B": [0, 1, 0, 0]}


def _runs(root: Path, *, samples: bool = True) -> list:
    paths = [
        write_condition(root / "own", "alpha", "own", OWN, samples=samples),
        write_condition(root / "swapped", "alpha", "swapped", SWAPPED, samples=samples),
        write_condition(root / "none", "alpha", "none", NONE, samples=samples),
    ]
    return [load_run(p) for p in paths]


def test_sensitivity_numbers_by_hand(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    assert runs[1].outcomes.keys() == {"profile:swapped"}
    scorers, notes = gather(runs)
    assert notes == [] and [s.name for s in scorers] == ["alpha"]
    rows = {r.domain: r for r in sensitivity_rows(scorers, resamples=500)}
    assert list(rows) == ["A", "B", ALL]
    a = rows["A"]
    assert a.n == 8
    assert (a.acc["own"].value, a.acc["swapped"].value, a.acc["none"].value) == (
        6 / 8, 2 / 8, 3 / 8)
    swap = a.diffs["swapped"]
    # own right and swapped wrong on pairs 0-4; swapped right alone on pair 7
    assert (swap.only_a, swap.only_b) == (5, 1)
    # exact two-sided binomial on 6 discordant pairs, 5 vs 1: 2 * (1 + 6) / 64
    assert swap.p_mcnemar == pytest.approx(14 / 64)
    assert swap.diff.value == pytest.approx(0.5)
    assert swap.diff.low <= 0.5 <= swap.diff.high
    none = a.diffs["none"]
    assert (none.only_a, none.only_b, none.diff.value) == (3, 0, pytest.approx(3 / 8))
    assert none.p_mcnemar == pytest.approx(0.25)
    b = rows["B"]
    assert b.diffs["swapped"].diff.value == 0 and b.diffs["swapped"].p_mcnemar == 1.0
    assert (b.diffs["none"].only_a, b.diffs["none"].only_b) == (1, 0)
    total = rows[ALL]
    assert total.n == 12 and total.acc["own"].value == pytest.approx(8 / 12)
    assert total.diffs["swapped"].diff.value == pytest.approx(4 / 12)
    assert (total.diffs["swapped"].only_a, total.diffs["swapped"].only_b) == (5, 1)


def test_only_pairs_every_source_has_are_compared(tmp_path: Path) -> None:
    runs = [
        load_run(write_condition(tmp_path / "own", "alpha", "own", {"A": [1, 1, 1, 0]})),
        load_run(write_condition(tmp_path / "sw", "alpha", "swapped", {"A": [0, 1]})),
    ]
    scorers, _ = gather(runs)
    (row,) = sensitivity_rows(scorers, resamples=200)
    assert row.n == 2 and row.acc["own"].value == 1.0 and row.acc["swapped"].value == 0.5


def test_two_scorers_are_not_pooled(tmp_path: Path) -> None:
    beta = load_run(write_condition(tmp_path / "b", "beta", "own", {"A": [1, 0]}))
    runs = [*_runs(tmp_path / "a"), beta]
    scorers, _ = gather(runs)
    assert [s.name for s in scorers] == ["alpha"]  # beta has one source only


def test_without_samples_the_report_says_to_log_them(tmp_path: Path) -> None:
    from prbench.analysis.sensitivity import blocks

    section, text = blocks(_runs(tmp_path, samples=False), resamples=100, seed=0)
    notes = " ".join(b[1] for b in section if b[0] == "p")
    assert "--log_samples" in notes and "alpha" in notes and text == ""


def test_report_prints_the_table_and_draws_the_plot(tmp_path: Path) -> None:
    from prbench.analysis.report import build_report

    _runs(tmp_path / "runs")
    printed: list[str] = []
    md, _ = build_report([tmp_path / "runs"], tmp_path / "report", resamples=200,
                         on_text=printed.append)
    (text,) = printed
    assert "acc(own)" in text and "own-swapped [CI]" in text and "own-none [CI]" in text
    line = next(x for x in text.splitlines() if x.startswith("alpha") and " A " in x)
    assert "0.750" in line and "0.250" in line and "5/1" in line and "0.219" in line
    assert "bundled SAMPLE" in text.splitlines()[0]
    png = tmp_path / "report" / "sensitivity.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "sensitivity.png" in md.read_text()
    assert "## Personalization gap and sensitivity: own profile vs " in md.read_text()


@pytest.mark.slow
def test_oracle_and_length_ignore_the_swap_and_embedding_similarity_drops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the bundled sample, own vs swapped through `prbench eval` and the report."""
    from prbench.analysis.report import build_report
    from prbench.harness import tasks
    from tests._harness_fixtures import run_eval

    for scorer in ("oracle-rubric", "length", "embedding-similarity"):
        tasks.reset()
        code, _, err = run_eval(
            ["eval", "--tasks",
             "personalized_rewardbench_sample,personalized_rewardbench_sample_swapped",
             "--model_args", f"scorer={scorer}", "--log_samples",
             "--output_path", str(tmp_path / "runs" / scorer)],
            capsys,
        )
        assert code == 0, err
    runs = [load_run(p) for p in sorted((tmp_path / "runs").rglob("results_*.json"))]
    scorers, notes = gather(runs)
    assert notes == []
    rows = {(r.scorer, r.domain): r for r in sensitivity_rows(scorers, resamples=500)}
    for name in ("oracle-rubric", "length"):
        row = rows[(name, ALL)]
        assert row.n == 45
        assert row.acc["own"].value == row.acc["swapped"].value
        assert row.diffs["swapped"].only_a == row.diffs["swapped"].only_b == 0
    emb = rows[("embedding-similarity", ALL)]
    assert emb.acc["own"].value - emb.acc["swapped"].value >= 0.1
    assert emb.diffs["swapped"].only_a > emb.diffs["swapped"].only_b
    tasks.reset()
    build_report([tmp_path / "runs"], tmp_path / "report", resamples=200)
    assert (tmp_path / "report" / "sensitivity.png").is_file()
