"""The index of runs, the status files behind it, and the run panel.

A folder holds four real ``prbench eval`` runs on the bundled sample: one finished, one ``--limit``
run, one whose scorer raises (exit 1) and one stopped by a real SIGINT while its scorer runs
(exit 130; both in a process of their own, the faulty scorer of tests/_faults_fixtures.py).
``prbench report`` on the folder writes one index page listing the four with the right status;
headless Chromium sorts it by a column and filters it by a word (skipped without Chromium). The
run panel is checked on the same runs, and on a results file without a manifest ("not
recorded").
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._browser import Browser, browser_or_skip
from tests._faults_fixtures import FAULTY, one_error_line
from tests._harness_fixtures import PYTHON, subprocess_env

GROUP = "personalized_rewardbench_sample_noprofile"


def _status_files(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text(encoding="utf-8"))
            for p in sorted(folder.rglob("prbench_status_*.json"))]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The four runs under ``root/runs`` and ``prbench report`` on them (``root/report``)."""
    from prbench.cli import main
    from prbench.testing import reset_task_state

    root = tmp_path_factory.mktemp("index")
    (root / "faulty.py").write_text(FAULTY, encoding="utf-8")
    codes: dict[str, int] = {}
    errors: dict[str, str] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PRBENCH_CACHE_DIR", str(root / "cache"))
        mp.setenv("PRBENCH_LOAD_PLUGINS", "")
        mp.chdir(root)
        for name, limit in (("finished", []), ("partial", ["--limit", "2"])):
            reset_task_state()
            codes[name] = main(["eval", "--tasks", GROUP, "--model_args", "scorer=length",
                                "--log_samples", "--output_path", f"runs/{name}", *limit])
        for name, mode in (("failed", "raise"), ("interrupted", "sigint")):
            proc = subprocess.run(
                [PYTHON, "-m", "prbench.cli", "--plugin", "faulty.py", "eval", "--tasks", GROUP,
                 "--model_args", f"scorer=faulty,mode={mode},fail_after=0",
                 "--output_path", f"runs/{name}"],
                env=subprocess_env(PRBENCH_CACHE_DIR=str(root / "cache"),
                                   PRBENCH_LOAD_PLUGINS=""),
                cwd=root, capture_output=True, text=True, timeout=300, check=False)
            codes[name], errors[name] = proc.returncode, proc.stderr
        reset_task_state()
        report = main(["report", "runs", "-o", "report", "--resamples", "200"])
    yield {"root": root, "codes": codes, "errors": errors, "report": report}


def _rows(page: str) -> list[list[str]]:
    """The index table's rows, as the texts of their cells."""
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [[re.sub(r"<[^>]+>", " ", cell).strip()
             for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


@pytest.mark.slow
def test_each_run_records_how_it_ended(runs: dict[str, Any]) -> None:
    """Status files: finished (naming the results file), failed (its one line), interrupted."""
    root = runs["root"]
    assert runs["codes"] == {"finished": 0, "partial": 0, "failed": 1, "interrupted": 130}
    assert "model exploded" in one_error_line(runs["errors"]["failed"])
    assert "interrupted" in runs["errors"]["interrupted"]
    for name, status in (("finished", "finished"), ("partial", "finished"),
                         ("failed", "failed"), ("interrupted", "interrupted")):
        (doc,) = _status_files(root / "runs" / name)
        assert doc["status"] == status, doc
        assert doc["ended"] and doc["duration_s"] >= 0
        if status == "finished":
            assert (root / "runs" / name / "prbench-length" / doc["results_file"]).is_file()
        else:  # lm-eval wrote nothing: the status file is all there is
            assert doc["results_file"] is None
            assert not list((root / "runs" / name).rglob("results_*.json"))
    (failed,) = _status_files(root / "runs" / "failed")
    assert "ZeroDivisionError: model exploded on two lines" in failed["error"]
    assert "\n" not in failed["error"]
    assert failed["scorer"]["qualified_id"] == "faulty/faulty"
    assert failed["scorer"]["options"]["mode"] == "raise"


@pytest.mark.slow
def test_report_writes_one_index_of_the_four_runs(runs: dict[str, Any]) -> None:
    root = runs["root"]
    assert runs["report"] == 0
    page = (root / "report" / "index.html").read_text(encoding="utf-8")
    rows = _rows(page)
    assert len(rows) == 4, rows
    by_folder = {row[0].split("/")[2]: row for row in rows}  # ../runs/<name>/prbench-<scorer>
    assert {name: row[4].split()[0] for name, row in by_folder.items()} == {
        "finished": "finished", "partial": "partial", "failed": "failed",
        "interrupted": "interrupted"}
    assert "--limit 2" in by_folder["partial"][4]
    assert "model exploded on two lines" in by_folder["failed"][4]
    for name in ("finished", "partial"):
        row = by_folder[name]
        assert row[1] == GROUP and row[2] == "length" and row[3] == "none"
        assert re.match(r"^\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]$", " ".join(row[6].split()))
        link = re.search(r"href='([^']+)'", page.split(f"runs/{name}/", 1)[1]).group(1)
        explorer = (root / "report" / link).resolve()
        assert explorer.is_file() and explorer.parent.name == "explorer"
        assert not link.startswith(("/", "file:"))  # relative: the folder can move
    assert by_folder["failed"][6] == "-" and by_folder["failed"][7] == "-"
    assert "strict" in page and "percentile-bootstrap" in page  # the metric is named
    assert not re.search(r"(src|href)=['\"](https?:)?//", page)  # nothing from a network
    assert "<link" not in page


@pytest.mark.slow
def test_the_run_panel_is_on_the_explorer_page_and_in_the_report(runs: dict[str, Any]) -> None:
    root = runs["root"] / "report"
    pages = sorted((root / "explorer").glob("*.html"))
    page = next(p for p in pages if "compare" not in p.name).read_text(encoding="utf-8")
    panel = page.split("<section class='run-panel'>", 1)[1].split("</section>", 1)[0]
    assert page.index("run-panel") < page.index("<h1>")  # at the top
    for text in ("prbench/length", "prefer=longer, unit=words", "question only: no profile",
                 "sample: local files, SHA-256 of 3 recorded", "lm-eval 0.4.13",
                 "python 0, numpy 1234, torch 1234, few-shot 1234", "finished",
                 "prbench eval --tasks " + GROUP):
        assert text in panel, (text, panel)
    md = (root / "report.md").read_text(encoding="utf-8")
    runs_part = md.split("## Runs", 1)[1]
    assert "| --limit | 2: a partial run, not a benchmark result |" in runs_part
    assert "| --limit | none: every pair |" in runs_part


@pytest.fixture(scope="module")
def browser() -> Any:
    yield from browser_or_skip()


def _column(browser: Browser, n: int) -> list[str]:
    return browser.evaluate(
        f"[...document.querySelectorAll('#runs tbody tr')].filter((r) => !r.hidden)"
        f".map((r) => r.cells[{n}].firstChild.textContent.trim())")


@pytest.mark.slow
def test_index_sorts_and_searches_in_chromium(runs: dict[str, Any], browser: Browser) -> None:
    browser.errors.clear()
    browser.open((runs["root"] / "report" / "index.html").as_uri())
    click = "document.querySelectorAll('#runs thead button')[{}].click()"
    browser.evaluate(click.format(4))  # status, A to Z
    assert _column(browser, 4) == ["failed", "finished", "interrupted", "partial"]
    browser.evaluate(click.format(4))  # again: Z to A
    assert _column(browser, 4) == ["partial", "interrupted", "finished", "failed"]
    assert browser.evaluate(
        "document.querySelectorAll('#runs thead th')[4].getAttribute('aria-sort')") == \
        "descending"
    browser.evaluate(click.format(6))  # accuracy: numbers; the runs without one last
    accuracy = _column(browser, 6)
    assert accuracy[2:] == ["-", "-"] and float(accuracy[0]) <= float(accuracy[1])
    browser.evaluate("(() => { const s = document.getElementById('search'); "
                     "s.value = 'EXPLODED zerodivisionerror'; "
                     "s.dispatchEvent(new Event('input')); })()")
    assert _column(browser, 4) == ["failed"]
    assert browser.evaluate("document.getElementById('n-shown').textContent") == "1"
    browser.evaluate("(() => { const s = document.getElementById('search'); s.value = ''; "
                     "s.dispatchEvent(new Event('input')); })()")
    assert len(_column(browser, 4)) == 4
    assert browser.errors == []


def test_a_folder_with_no_run_is_one_error(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.cli import main

    (tmp_path / "empty" / "sub").mkdir(parents=True)
    code = main(["report", str(tmp_path / "empty"), "-o", str(tmp_path / "out")])
    line = one_error_line(capsys.readouterr().err)
    assert code == 1
    assert "empty: no prbench run in it" in line and "--output_path" in line
    assert not (tmp_path / "out").exists()


def test_a_run_killed_before_its_end_is_listed_unfinished(tmp_path: Path) -> None:
    """A status file left at ``running`` (the process killed) and nothing else: the index only."""
    from prbench.cli import main

    folder = tmp_path / "runs" / "prbench-length"
    folder.mkdir(parents=True)
    doc = {"status": "running", "started": "2026-01-02T03:04:05+00:00", "pid": 4242,
           "tasks": [GROUP], "scorer": {"id": "length", "label": "<b>rm</b>"},
           "results_file": None}
    (folder / "prbench_status_2026-01-02T03-04-05.json").write_text(json.dumps(doc))
    assert main(["report", str(tmp_path / "runs"), "-o", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    (row,) = _rows(page)
    assert row[4].startswith("unfinished") and "killed (pid 4242)" in row[4]
    assert row[5] == "2026-01-02 03:04:05 UTC"
    assert "<b>rm</b>" not in page and "&lt;b&gt;rm&lt;/b&gt;" in page
    assert not (tmp_path / "out" / "report.html").exists()  # no results: no report


def test_the_panel_says_not_recorded_and_escapes(tmp_path: Path) -> None:
    """A results file without manifest nor versions: "not recorded", never a guess."""
    from prbench.analysis.run_panel import NOT_RECORDED, panel_html, panel_rows
    from prbench.analysis.runs import load_run

    task = "prb_art"
    results = {
        "results": {task: {"acc,none": 1.0, "tie,none": 0.0, "invalid,none": 0.0}},
        "configs": {task: {"dataset_kwargs": {"prbench_domain": "Art",
                                              "prbench_condition": "profile",
                                              "prbench_default_data": "sample"},
                           "metadata": {}}},
        "n-samples": {task: {"original": 4, "effective": 4}},
        "config": {"prbench": {"scorer": {"id": "<img src=x onerror=alert(1)>",
                                          "options": {"k": "</td>"}}}},
    }
    path = tmp_path / "results_2026-01-01T00-00-00.json"
    path.write_text(json.dumps(results), encoding="utf-8")
    rows = dict(panel_rows(load_run(path, resamples=50)))
    for field in ("versions", "plugins", "seeds", "data", "profile builder", "started",
                  "duration", "command", "--limit"):
        assert rows[field] == NOT_RECORDED, (field, rows[field])
    assert rows["files"].endswith(f"manifest {NOT_RECORDED}")
    page = panel_html(load_run(path, resamples=50))
    assert "<img" not in page and "</td>\"" not in page and "k=&lt;/td&gt;" in page


def test_recorded_status_without_a_model(tmp_path: Path) -> None:
    """The status file's states, each written whole: running, failed, interrupted, finished."""
    from prbench.errors import PrbenchUserError
    from prbench.harness.run_files import recorded_status

    out = str(tmp_path / "r.json")  # a results-file path: the status file goes beside it

    def states() -> list[dict[str, Any]]:
        return [json.loads(p.read_text()) for p in sorted(tmp_path.glob("prbench_status_*"))]

    with pytest.raises(PrbenchUserError), recorded_status(out, {}, tasks=["t"], limit=None) as s:
        assert s is not None and states()[-1]["status"] == "running"
        raise PrbenchUserError("bad\n  input")
    assert states()[-1]["status"] == "failed" and states()[-1]["error"] == "bad input"
    for path in tmp_path.glob("prbench_status_*"):
        path.unlink()
    with pytest.raises(KeyboardInterrupt), recorded_status(out, {}, tasks=["t"], limit=2):
        raise KeyboardInterrupt
    assert states()[-1]["status"] == "interrupted" and states()[-1]["limit"] == 2
    for path in tmp_path.glob("prbench_status_*"):
        path.unlink()
    with recorded_status(out, {}, tasks=["t"], limit=None) as s:
        assert s is not None
        s.end("finished", results_file=tmp_path / "r_D.json")
    assert states()[-1]["results_file"] == "r_D.json"
    with recorded_status(None, {}, tasks=["t"], limit=None) as none:  # no output folder
        assert none is None
