"""The downstream demo's benchmark runs and report, run twice into one folder (issue 28 item 4).

``make downstream-demo`` twice used to list every run twice. Here the same eval commands (cheap
scorers: length and the oracle) run once, are reported, run again into the same folder and are
reported again: the leaderboard rows are the same, and the report says which files the newer runs
replaced. The explorer pages of the report are then opened in headless Chromium and their counts
checked against the samples files (skipped without Chromium).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._browser import Browser, browser_or_skip

SCORERS = ("length", "oracle-rubric")
TASKS = ("personalized_rewardbench_sample,personalized_rewardbench_sample_noprofile,"
         "personalized_rewardbench_sample_swapped")


def _evals() -> None:
    from prbench.cli import main
    from prbench.testing import reset_task_state

    for scorer in SCORERS:
        reset_task_state()
        assert main(["eval", "--log_samples", "--tasks", TASKS, "--model_args",
                     f"scorer={scorer}", "--output_path", "results"]) == 0


def _report(out: str, *extra: str) -> str:
    from prbench.cli import main

    assert main(["report", "results", "-o", out, "--resamples", "100", *extra]) == 0
    return (Path(out) / "report.md").read_text(encoding="utf-8")


def _leaderboard(md: str) -> list[str]:
    """The leaderboard's rows: the reward models' table and the DIAGNOSTIC scorers' below it."""
    part = md.split("## Leaderboard", 1)[1].split("\n## ", 1)[0]
    return [line for line in part.splitlines()
            if line.startswith("| ") and not line.startswith("| scorer |")]


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("rerun")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PRBENCH_CACHE_DIR", str(root / "cache"))
        mp.chdir(root)
        _evals()
        once = _report("report_once")
        _evals()
        twice = _report("report_twice")
        both = _report("report_both", "--keep_reruns")
        yield {"root": root, "once": once, "twice": twice, "both": both}


@pytest.mark.slow
def test_a_rerun_gives_the_same_leaderboard_rows(chain: dict[str, Any]) -> None:
    once, twice = _leaderboard(chain["once"]), _leaderboard(chain["twice"])
    assert len(once) == len(SCORERS) * 3  # three conditions per scorer
    assert twice == once
    assert len(list((chain["root"] / "results").rglob("results_*.json"))) == 2 * len(SCORERS)
    replaced = [line for line in chain["twice"].splitlines() if line.startswith("Rerun: ")]
    assert len(replaced) == len(SCORERS) and all("replaced by the newer run" in line
                                                 for line in replaced)
    assert "Rerun: " not in chain["once"]
    # asked to keep both, both are listed (told apart by their file names)
    assert len(_leaderboard(chain["both"])) == 2 * len(once)
    # the demo's swapped control is what the sensitivity section's heading names, nothing else
    heading = next(line for line in chain["twice"].splitlines()
                   if line.startswith("## Personalization gap"))
    assert "swapped" in heading and "no profile" in heading and "shuffled" not in heading


@pytest.mark.slow
def test_diagnostic_comparisons_are_apart_from_the_holm_family(chain: dict[str, Any]) -> None:
    md = chain["twice"]
    part = md.split("## Paired tests between scorers", 1)[1].split("\n## ", 1)[0]
    assert "### Against the DIAGNOSTIC oracle" in part and "Holm p" not in part
    assert "No two non-diagnostic scorers" in part  # length vs the oracle only


def _samples_rows(results: Path, label: str, suffix: str) -> list[dict[str, Any]]:
    """The sample rows of the newest run of a scorer, of the tasks ending in ``suffix``."""
    folder = results / f"prbench-{label}"
    date = sorted(folder.glob("results_*.json"))[-1].stem[len("results_"):]
    rows = []
    for file in folder.glob(f"samples_*_{date}.jsonl"):
        task = file.name[len("samples_"):-len(f"_{date}.jsonl")]
        kind = next((k for k in ("_noprofile", "_swapped") if task.endswith(k)), "")
        if kind == suffix:
            rows += [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines()]
    return rows


def _outcome(row: dict[str, Any]) -> str:
    return ("invalid" if row["invalid"] else "tie" if row["tie"]
            else "right" if row["acc"] else "wrong")


def _samples_counts(results: Path, label: str, suffix: str) -> Counter[tuple[str, str]]:
    """(domain, outcome) counts of the newest run of a scorer, read from its samples files."""
    return Counter((row["doc"]["domain"], _outcome(row))
                   for row in _samples_rows(results, label, suffix))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    yield from browser_or_skip()


def _select(browser: Browser, select: str, value: str) -> None:
    got = browser.evaluate(
        f"(() => {{ const s = document.getElementById({json.dumps(select)}); "
        f"s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change')); "
        "return s.value; })()")
    assert got == value


def _shown(browser: Browser) -> dict[str, int]:
    return {k: int(browser.evaluate(f"document.getElementById('n-{k}').textContent"))
            for k in ("shown", "right", "wrong", "tie", "invalid")}


@pytest.mark.slow
def test_explorer_counts_match_the_samples_files(chain: dict[str, Any],
                                                 browser: Browser, tmp_path: Path) -> None:
    root = chain["root"]
    explorer = root / "report_twice" / "explorer"
    assert "explorer/length.html" in chain["twice"]
    domain = "Society_and_Culture"
    for label in SCORERS:
        browser.errors.clear()
        browser.open((explorer / f"{label}.html").as_uri())
        for cell, suffix in (("profile", ""), ("noprofile", "_noprofile"),
                             ("profile:swapped", "_swapped")):
            want = _samples_counts(root / "results", label, suffix)
            _select(browser, "cell", cell)
            _select(browser, "domain", "")
            _select(browser, "outcome", "")
            assert _shown(browser)["shown"] == sum(want.values())
            _select(browser, "domain", domain)
            got = _shown(browser)
            assert got["shown"] == sum(v for (d, _), v in want.items() if d == domain)
            for outcome in ("right", "wrong", "tie", "invalid"):
                assert got[outcome] == want[(domain, outcome)]
            _select(browser, "outcome", "wrong")
            assert _shown(browser)["shown"] == want[(domain, "wrong")]
        browser.screenshot(tmp_path / f"{label}.png")
        assert browser.errors == [], browser.errors

    # side by side: the pairs length gets wrong and the oracle right (or the reverse)
    browser.open((explorer / "compare.html").as_uri())
    _select(browser, "run-a", "0")
    _select(browser, "run-b", "1")
    browser.evaluate("document.getElementById('disagree').click()")
    a = {r["doc"]["id"]: _outcome(r) == "right" for r in _samples_rows(root / "results",
                                                                         "length", "")}
    b = {r["doc"]["id"]: _outcome(r) == "right" for r in _samples_rows(root / "results",
                                                                         "oracle-rubric", "")}
    assert set(a) == set(b)
    disagree = sum(a[i] != b[i] for i in a)
    assert disagree > 0
    assert _shown(browser)["shown"] == disagree
    assert int(browser.evaluate("document.getElementById('n-disagree').textContent")) == disagree
    shot = browser.screenshot(tmp_path / "compare.png")
    assert shot.stat().st_size > 0
    assert browser.errors == [], browser.errors
