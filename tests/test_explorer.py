"""The pair explorer: pairs read from samples files, judge verdicts rebuilt, escaping, a browser.

The browser tests drive Debian's headless Chromium over the DevTools pipe (tests/_browser.py)
and skip when it is not installed; CI installs it (.ci/run).
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from prbench.analysis.explorer import explorer_html
from prbench.analysis.explorer_data import explorer_pairs, judge_orders, run_data
from tests._browser import Browser, chromium_path

DATE = "2026-01-01T00-00-00.000000"
HOSTILE = "</script><img src=x onerror=\"window.__pwned=1\"><b>bold</b> & \u2028"


def write_run(folder: Path, scorer: str, pairs: list[dict[str, Any]], *,
              diagnostic: bool = False) -> Path:
    """A one-task results file with its samples: ``pairs`` give id, scores and texts."""
    folder.mkdir(parents=True, exist_ok=True)
    task = "prb_art"
    results = {
        "results": {task: {"acc,none": 0.5, "tie,none": 0.0, "invalid,none": 0.0}},
        "configs": {task: {"dataset_kwargs": {"prbench_domain": "Art",
                                              "prbench_condition": "profile",
                                              "prbench_default_data": "sample"},
                           "metadata": {}}},
        "n-samples": {task: {"original": len(pairs), "effective": len(pairs)}},
        "group_subtasks": {},
        "config": {"prbench": {"scorer": {"id": scorer, "options": {},
                                          "diagnostic": diagnostic}}},
    }
    lines = []
    for p in pairs:
        c, r = p["scores"]
        finite = c == c and r == r
        doc = {"id": p["id"], "domain": p.get("domain", "Art"), "question": p.get("q", "q?"),
               "chosen": p.get("chosen", "one two three"), "rejected": p.get("rejected", "one"),
               "profile_text": p.get("profile", "Post 1: I knit."), "profile_source": "own",
               "record_json": json.dumps({"id": p["id"], "rubric_aspects": p.get("aspects", [
                   {"aspect": "knits", "evidence": "post 1", "reason": "hobby"}])})}
        line = {"doc": doc, "filtered_resps": [[str(c), "False"], [str(r), "False"]],
                "acc": float(finite and c > r), "tie": float(finite and c == r),
                "invalid": float(not finite), "margin": c - r if finite else float("nan")}
        line.update(p.get("extra", {}))
        lines.append(json.dumps(line))
    (folder / f"samples_{task}_{DATE}.jsonl").write_text("\n".join(lines) + "\n",
                                                         encoding="utf-8")
    path = folder / f"results_{DATE}.json"
    path.write_text(json.dumps(results), encoding="utf-8")
    return path


PAIRS = [
    {"id": "p1", "scores": (2.0, 1.0)},                                   # right
    {"id": "p2", "scores": (1.0, 3.0), "chosen": "a", "rejected": "a b c"},  # wrong
    {"id": "p3", "scores": (1.0, 1.0)},                                   # tie
    {"id": "p4", "scores": (float("nan"), 1.0)},                          # invalid
    {"id": "p5", "scores": (0.5, 0.0), "domain": "Sci", "q": HOSTILE, "chosen": HOSTILE,
     "profile": HOSTILE, "aspects": [{"aspect": HOSTILE, "evidence": "", "reason": ""}]},
]


def test_pairs_of_a_run(tmp_path: Path) -> None:
    from prbench.analysis.runs import load_run

    run = load_run(write_run(tmp_path / "r", "alpha", PAIRS), resamples=50)
    pairs = {p["id"]: p for p in explorer_pairs(run)}
    assert [pairs[i]["outcome"] for i in ("p1", "p2", "p3", "p4", "p5")] == [
        "right", "wrong", "tie", "invalid", "right"]
    assert pairs["p1"]["scores"] == [2.0, 1.0] and pairs["p1"]["margin"] == 1.0
    assert pairs["p4"]["scores"] == [None, 1.0] and pairs["p4"]["margin"] is None
    # the longer answer is chosen in p1 (length right, run right) and rejected in p2 (both wrong)
    assert pairs["p1"]["length_agrees"] and pairs["p2"]["length_agrees"]
    assert not pairs["p3"]["length_agrees"]  # length right, the run's tie is not
    assert pairs["p1"]["aspects"] == [{"aspect": "knits", "evidence": "post 1",
                                       "reason": "hobby"}]
    assert pairs["p5"]["domain"] == "Sci" and pairs["p1"]["profile"] == "Post 1: I knit."
    assert all(p["orders"] is None for p in pairs.values())  # a pointwise scorer


@pytest.mark.parametrize(
    "winners", list(itertools.product(["first", "second", None, "absent"], repeat=2)))
def test_judge_verdicts_are_rebuilt_from_the_order_metrics(winners: tuple[Any, Any]) -> None:
    from prbench.judges.order_metrics import order_outcome, pair_metrics

    asked = [(shown, w) for shown, w in zip(("first", "second"), winners, strict=True)
             if w != "absent"]
    metrics = pair_metrics(order_outcome({"shown_first": s, "winner": w} for s, w in asked))
    metrics = json.loads(json.dumps(metrics))  # as a samples line holds them (nan included)
    got = judge_orders(metrics)
    names = {"first": "chosen", "second": "rejected", None: "unreadable"}
    want = [{"order": "chosen first" if shown == "first" else "chosen second",
             "verdict": names[w]} for shown, w in asked]
    assert got == want


def test_no_orders_for_a_pointwise_scorer() -> None:
    assert judge_orders({"acc": 1.0}) is None


def test_page_keeps_data_as_text(tmp_path: Path) -> None:
    from prbench.analysis.runs import load_run

    run = load_run(write_run(tmp_path / "r", "alpha", PAIRS), resamples=50)
    page = explorer_html([run_data(run)], f"Pairs of {HOSTILE}")
    assert "<img" not in page and "</script><" not in page.replace("</script><script>", "")
    block = re.search(r"<script type='application/json' id='explorer-data'>(.*?)</script>",
                      page, re.S)
    assert block is not None
    assert not set("<>&\u2028") & set(block.group(1))  # JSON escapes, safe in a script
    data = json.loads(block.group(1))
    # unchanged once parsed; the long texts stored once (p5's question, answer and profile)
    assert data["strings"][data["runs"][0]["pairs"][4]["question"]] == HOSTILE
    assert data["strings"].count(HOSTILE) == 1
    assert "http://" not in page and "https://" not in page  # nothing fetched from anywhere


def _set(select: str, value: str) -> str:
    return (f"(() => {{ const s = document.getElementById({json.dumps(select)}); "
            f"s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change')); "
            "return s.value; })()")


def _counts(browser: Browser) -> dict[str, int]:
    return {k: int(browser.evaluate(f"document.getElementById('n-{k}').textContent"))
            for k in ("shown", "total", "right", "wrong", "tie", "invalid")}


@pytest.fixture(scope="module")
def browser() -> Any:
    path = chromium_path()
    if path is None:
        pytest.skip("no Chromium (apt-get install chromium; .ci/run installs it)")
    with Browser(path) as b:
        yield b


def test_page_in_chromium_escapes_and_filters(tmp_path: Path, browser: Browser) -> None:
    from prbench.analysis.runs import load_run

    run = load_run(write_run(tmp_path / "r", "alpha", PAIRS), resamples=50)
    page = tmp_path / "page.html"
    page.write_text(explorer_html([run_data(run)], "Pairs of alpha"), encoding="utf-8")
    browser.errors.clear()
    browser.open(page.as_uri())
    assert _counts(browser) == {"shown": 5, "total": 5, "right": 2, "wrong": 1, "tie": 1,
                                "invalid": 1}
    assert browser.evaluate(_set("domain", "Sci")) == "Sci"
    assert _counts(browser)["shown"] == 1
    browser.evaluate("document.querySelector('details.pair').open = true")
    text = browser.evaluate("document.getElementById('pairs').innerText")
    assert "<img src=x" in text and "<b>bold</b>" in text  # shown as text, not parsed
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate("document.querySelectorAll('#pairs img, #pairs b.x').length") == 0
    assert "DIAGNOSTIC" in text  # the rubric aspects are marked
    browser.evaluate(_set("domain", ""))
    browser.evaluate(_set("sort", "margin-asc"))
    ids = browser.evaluate("[...document.querySelectorAll('details.pair')]"
                           ".map(d => d.dataset.id)")
    assert ids == ["p2", "p3", "p5", "p1", "p4"]  # margins -2, 0, 0.5, 1; none last
    shot = browser.screenshot(tmp_path / "page.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert browser.errors == []


def _judge_pairs() -> list[dict[str, Any]]:
    from prbench.judges.order_metrics import order_outcome, pair_metrics

    def judged(pid: str, w1: str | None, w2: str | None, p: float) -> dict[str, Any]:
        metrics = pair_metrics(order_outcome([{"shown_first": "first", "winner": w1},
                                              {"shown_first": "second", "winner": w2}]))
        return {"id": pid, "scores": (p, 1.0 - p), "extra": json.loads(json.dumps(metrics))}

    # j1: both orders for the chosen answer; j2: the second order's reply was unreadable
    return [judged("j1", "first", "first", 1.0), judged("j2", "second", None, 0.0)]


def test_a_judges_verdicts_and_unreadable_replies_are_shown(tmp_path: Path,
                                                            browser: Browser) -> None:
    from prbench.analysis.runs import load_run

    run = load_run(write_run(tmp_path / "j", "judge", _judge_pairs()), resamples=50)
    pairs = {p["id"]: p for p in explorer_pairs(run)}
    assert pairs["j2"]["orders"] == [{"order": "chosen first", "verdict": "rejected"},
                                     {"order": "chosen second", "verdict": "unreadable"}]
    page = tmp_path / "judge.html"
    page.write_text(explorer_html([run_data(run)], "Pairs of judge"), encoding="utf-8")
    browser.errors.clear()
    browser.open(page.as_uri())
    browser.evaluate(_set("sort", "id"))
    text = browser.evaluate("(() => { document.querySelectorAll('details.pair')"
                            ".forEach(d => d.open = true); "
                            "return document.getElementById('pairs').innerText; })()")
    assert "chosen second: no verdict (unreadable reply)" in text
    assert "chosen first: rejected preferred" in text and "judge verdicts" in text
    assert browser.errors == []


def test_a_broken_record_in_a_samples_file_is_one_error_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.cli import main

    path = write_run(tmp_path / "r", "alpha", PAIRS[:2])
    samples = next(path.parent.glob("samples_*.jsonl"))
    lines = samples.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[1])
    row["doc"]["record_json"] = "{not json"
    lines[1] = json.dumps(row)
    samples.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["report", str(path), "-o", str(tmp_path / "out"), "--resamples", "20"]) == 1
    err = capsys.readouterr().err
    assert f"{samples}:2: record_json is not JSON" in err and "Traceback" not in err
