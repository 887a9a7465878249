"""The pair explorer: pairs from samples files, judge replies and verdicts, escaping, a browser.

A judge's pairs are built with the judge's own bookkeeping (``OrderTally`` and
``order_metrics``), so the samples lines are those ``prbench eval --log_samples`` writes; one test
runs ``prbench eval`` against a scripted judge server and reads its samples file back.

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
from tests._browser import Browser, browser_or_skip

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
    {"id": "p4", "scores": (float("nan"), 1.0),                           # invalid
     "extra": {"invalid_reason": {"chosen": "the answer alone is longer than max_length"}}},
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
    assert all(p["orders"] is None and p["kind"] == "pointwise" for p in pairs.values())
    # why each pair counted as it did, from the strict pair outcome
    why = {i: {r["metric"]: (r["value"], r["why"]) for r in pairs[i]["reasons"]} for i in pairs}
    assert why["p1"]["acc"] == (1.0, "score(chosen) > score(rejected) (margin +1)")
    assert why["p2"]["acc"][0] == 0.0 and "score(chosen) < score(rejected)" in why["p2"]["acc"][1]
    assert why["p3"]["tie"][0] == 1.0 and "a tie is never a win" in why["p3"]["acc"][1]
    # the scorer's reason for the answer it left unscored is shown and flagged
    assert pairs["p4"]["unscored"] == {"chosen": "the answer alone is longer than max_length"}
    assert "chosen: the answer alone is longer than max_length" in why["p4"]["invalid"][1]
    assert [i for i in pairs if pairs[i]["flags"]] == ["p4"] and pairs["p4"]["flags"] == [
        "unscored"]
    assert all(not p["notes"] for p in pairs.values())


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
    yield from browser_or_skip()


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


def test_a_file_without_replies_rebuilds_verdicts_and_says_the_replies_are_missing(
        tmp_path: Path, browser: Browser) -> None:
    from prbench.analysis.explorer_data import NO_REPLY_LOGGED
    from prbench.analysis.runs import load_run

    run = load_run(write_run(tmp_path / "j", "judge", _judge_pairs()), resamples=50)
    pairs = {p["id"]: p for p in explorer_pairs(run)}
    assert [(o["order"], o["verdict"], o["logged"]) for o in pairs["j2"]["orders"]] == [
        ("chosen first", "rejected", False), ("chosen second", "unreadable", False)]
    assert pairs["j2"]["flags"] == ["unreadable"] and pairs["j1"]["flags"] == []
    page = tmp_path / "judge.html"
    page.write_text(explorer_html([run_data(run)], "Pairs of judge"), encoding="utf-8")
    browser.errors.clear()
    browser.open(page.as_uri())
    browser.evaluate(_set("sort", "id"))
    text = browser.evaluate("(() => { document.querySelectorAll('details.pair')"
                            ".forEach(d => d.open = true); "
                            "return document.getElementById('pairs').innerText; })()")
    assert "chosen answer shown second (as B)\nno verdict (unreadable reply)" in text
    assert "chosen answer shown first (as A)\nrejected answer preferred" in text
    assert NO_REPLY_LOGGED in text
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


# -- a judge's raw replies ------------------------------------------------------------------------

LONG = "Let me weigh both answers. " * 200 + "\nVerdict: A"  # > 4,000 characters


def _judged_line(pid: str, replies: list[tuple[str, Any]], *,
                 released: bool = False) -> dict[str, Any]:
    """A samples line of a judged pair, made by the judge's own bookkeeping.

    ``replies``: per order, which answer was shown first and the judge's reply (text or a
    ``GenerationFailure``), parsed by the judge's parser.
    """
    from prbench.judges.order_metrics import SAMPLE_KEY, pair_metrics, sample_orders
    from prbench.judges.order_tally import OrderTally
    from prbench.judges.parsing import generation_failed, parse_pairwise

    tally = OrderTally("A" if released else None)
    orders = []
    for shown_first, reply in replies:
        parsed = parse_pairwise(reply) if isinstance(reply, str) else generation_failed(reply)
        orders.append(tally.order(shown_first, parsed, reply))
    p = tally.pair(pid, orders)
    (outcome,) = tally.recent_outcomes(1)
    metrics = json.loads(json.dumps(pair_metrics(outcome)))  # as a samples line holds them
    return {"id": pid, "scores": (p, 1.0 - p),
            "extra": {**metrics, SAMPLE_KEY: sample_orders(outcome)}}


def _replied_pairs() -> list[dict[str, Any]]:
    from prbench.backends.base import truncation_failure

    return [
        _judged_line("r1", [("first", "Fits the user.\nVerdict: A"),
                            ("second", "Fits the user.\nVerdict: B")]),
        _judged_line("r2", [("first", LONG), ("second", "I cannot decide. " + HOSTILE)]),
        _judged_line("r3", [("first", "Verdict: A"), ("second", "Verdict: A")]),
        _judged_line("r4", [("first", truncation_failure("I keep thinking and", 8)),
                            ("second", "Verdict: tie")]),
    ]


def test_kept_reply_is_capped_head_and_tail_with_a_marker() -> None:
    from prbench.backends.base import GenerationFailure, truncation_failure
    from prbench.judges.order_tally import REPLY_KEEP_CHARS, kept_reply

    assert kept_reply("short") == "short" and kept_reply(None) is None
    kept = kept_reply(LONG)
    assert kept is not None and REPLY_KEEP_CHARS == 4000
    head, tail = kept.split(f"\n[cut: {len(LONG) - 4000} more characters]\n")
    assert LONG.startswith(head) and LONG.endswith(tail) and len(head) + len(tail) == 4000
    assert tail.endswith("Verdict: A")  # the end, where the verdict is, is kept
    # a reply cut at max_new_tokens keeps its text; a failed request has none
    assert kept_reply(truncation_failure("half a thought", 8)) == "half a thought"
    assert kept_reply(GenerationFailure("http-503", "busy")) is None


def test_a_judges_replies_parses_and_reasons_per_order(tmp_path: Path) -> None:
    from prbench.analysis.runs import load_run

    run = load_run(write_run(tmp_path / "j", "judge", _replied_pairs()), resamples=50)
    pairs = {p["id"]: p for p in explorer_pairs(run)}
    assert [pairs[i]["outcome"] for i in ("r1", "r2", "r3", "r4")] == [
        "right", "wrong", "tie", "invalid"]
    assert all(p["kind"] == "judge" for p in pairs.values())
    # r1: each order's raw reply and parsed verdict; both picked the chosen answer
    o1, o2 = pairs["r1"]["orders"]
    assert (o1["order"], o1["parsed"], o1["verdict"], o1["reply"]) == (
        "chosen first", "A", "chosen", "Fits the user.\nVerdict: A")
    assert (o2["order"], o2["parsed"], o2["verdict"]) == ("chosen second", "B", "chosen")
    why = {i: {r["metric"]: (r["value"], r["why"]) for r in pairs[i]["reasons"]} for i in pairs}
    assert why["r1"]["acc"] == (1.0, "every order judged (2) picked the chosen answer")
    assert why["r1"]["acc_single_order"][0] == 1.0
    # r2: the long reply is kept cut with its marker; the second order is unreadable, with why
    first, second = pairs["r2"]["orders"]
    assert "[cut: " in first["reply"] and first["reply"].endswith("Verdict: A")
    assert len(first["reply"]) < len(LONG)
    assert second["verdict"] == "unreadable" and second["parsed"] is None
    assert second["failure"] == "no-verdict" and second["detail"]
    assert second["reply"] == "I cannot decide. " + HOSTILE
    assert why["r2"]["acc"][0] == 0.0 and "1 order of 2 gave no verdict" in why["r2"]["acc"][1]
    assert why["r2"]["acc_single_order"] == (
        0.5, "1 of 2 orders picked the chosen answer (an unreadable order counts 0)")
    assert pairs["r2"]["flags"] == ["unreadable"]
    # r3: the answer shown first won both times: an order flip and a tie
    assert pairs["r3"]["flags"] == ["order-flip"]
    assert why["r3"]["n_order_flips"][1].endswith("the answer shown first won both times")
    assert why["r3"]["tie"][0] == 1.0 and why["r3"]["acc_single_order"][0] == 0.5
    # r4: a cut reply (its text kept, never read) and a tie reply: no verdict at all
    cut, tie = pairs["r4"]["orders"]
    assert cut["failure"] == "truncated" and cut["reply"] == "I keep thinking and"
    assert tie["failure"] == "tie" and tie["reply"] == "Verdict: tie"
    assert why["r4"]["invalid"][0] == 1.0 and "2 orders of 2 gave no verdict" in why["r4"]["acc"][1]
    assert all(not p["notes"] for p in pairs.values())


def test_released_protocol_says_how_the_fallback_counted(tmp_path: Path) -> None:
    from prbench.analysis.runs import load_run

    line = _judged_line("x1", [("second", "no idea")], released=True)
    run = load_run(write_run(tmp_path / "j", "judge", [line]), resamples=50)
    (pair,) = explorer_pairs(run)
    why = {r["metric"]: (r["value"], r["why"]) for r in pair["reasons"]}
    # the chosen answer was shown second: the fallback "A" picked the rejected one
    assert why["released_acc"][0] == [0.0, 1.0]
    assert "an unreadable order counts as the verdict 'A'" in why["released_acc"][1]
    assert why["acc"][0] == 0.0


def test_a_line_whose_acc_disagrees_with_its_orders_is_flagged(tmp_path: Path) -> None:
    from prbench.analysis.runs import load_run

    line = _replied_pairs()[1]  # r2: strict acc 0
    line["extra"]["acc"] = 1.0
    run = load_run(write_run(tmp_path / "j", "judge", [line]), resamples=50)
    (pair,) = explorer_pairs(run)
    assert pair["notes"] == ["the samples line says acc = 1.0, but its orders give 0; the page "
                             "shows the line's outcome"]


def test_malformed_judge_replies_are_one_error_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.cli import main

    line = _replied_pairs()[0]
    line["extra"]["judge_replies"] = [{"shown_first": "third", "winner": None}]
    path = write_run(tmp_path / "r", "judge", [line])
    samples = next(path.parent.glob("samples_*.jsonl"))
    assert main(["report", str(path), "-o", str(tmp_path / "out"), "--resamples", "20"]) == 1
    err = capsys.readouterr().err
    assert f"{samples}:1: an order row is [shown_first, winner]" in err
    assert "Traceback" not in err


def test_replies_are_text_in_the_page_and_in_chromium(tmp_path: Path, browser: Browser) -> None:
    from prbench.analysis.runs import load_run

    run = load_run(write_run(tmp_path / "j", "judge", _replied_pairs()), resamples=50)
    html_text = explorer_html([run_data(run)], "Pairs of judge")
    assert "<img" not in html_text  # the hostile reply is escaped in the JSON block
    page = tmp_path / "judge.html"
    page.write_text(html_text, encoding="utf-8")
    browser.errors.clear()
    browser.open(page.as_uri())
    assert browser.evaluate("document.getElementById('n-flag-unreadable').textContent") == "2"
    browser.evaluate(_set("flag", "unreadable"))
    assert _counts(browser)["shown"] == 2
    browser.evaluate(_set("flag", "order-flip"))
    assert _counts(browser)["shown"] == 1 and _counts(browser)["tie"] == 1
    browser.evaluate(_set("flag", ""))
    browser.evaluate(_set("outcome", "wrong"))  # r2: one order read, one unreadable
    assert _counts(browser)["shown"] == 1
    # the reply is collapsed until asked for: open the pair, then each raw reply
    closed = browser.evaluate("(() => { document.querySelector('details.pair').open = true; "
                              "return document.getElementById('pairs').innerText; })()")
    assert "I cannot decide." not in closed and "raw reply (" in closed
    text = browser.evaluate("(() => { document.querySelectorAll('details.reply')"
                            ".forEach(d => d.open = true); "
                            "return document.getElementById('pairs').innerText; })()")
    assert "chosen answer shown second (as B)\nno verdict (unreadable reply): no-verdict - " in text
    assert "I cannot decide. </script><img src=x" in text  # the raw reply, shown as text
    assert "more characters]" in text  # the long reply's cut marker
    assert "acc = 0: 1 order of 2 gave no verdict" in text
    assert "acc_single_order = 0.5000: 1 of 2 orders picked the chosen answer" in text
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate("document.querySelectorAll('#pairs img').length") == 0
    assert browser.errors == []


def test_prbench_eval_logs_each_replies_and_the_explorer_shows_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], browser: Browser) -> None:
    """A scripted judge server through ``prbench eval --log_samples``, then the explorer."""
    from prbench.analysis.runs import load_run
    from prbench.backends.base import Completion
    from prbench.harness import tasks
    from prbench.records import load_records
    from prbench.testing import LoopbackOpenAI
    from tests._harness_fixtures import results_and_manifest, run_eval

    sample = Path(__file__).resolve().parent.parent / "prbench" / "data" / "sample" / "pairs"
    chosen = {r.chosen.strip() for r in load_records(str(sample))}

    def script(messages: list[dict[str, str]]) -> Any:
        user = messages[-1]["content"]
        shown_a = re.search(r"<answer_a>\n(.*?)\n</answer_a>", user, re.DOTALL)
        assert shown_a is not None
        if shown_a.group(1).strip() in chosen:
            return "The first answer fits. " + HOSTILE + "\nVerdict: A"
        return Completion("Weighing the second answer against", "length")  # cut

    tasks.reset()
    try:
        with LoopbackOpenAI(script) as server:
            args = (f"scorer=llm-judge,backend=openai,model=judge,base_url={server.base_url},"
                    "cache_dir=")
            code, _, err = run_eval(
                ["eval", "--tasks", "personalized_rewardbench_sample_noprofile", "--limit", "2",
                 "--model_args", args, "--output_path", str(tmp_path / "out"),
                 "--log_samples", "--max_invalid", "1"], capsys)
    finally:
        tasks.reset()
    assert code == 0, err
    _, _, path = results_and_manifest(tmp_path / "out")
    lines = [json.loads(x) for f in sorted(path.parent.glob("samples_*.jsonl"))
             for x in f.read_text(encoding="utf-8").split("\n") if x]  # not at U+2028
    assert len(lines) == 6
    for line in lines:
        first, second = line["judge_replies"]
        assert first["reply"].endswith("Verdict: A") and first["verdict"] == "A"
        assert (second["reply"], second["failure"]) == (
            "Weighing the second answer against", "truncated")
    pairs = explorer_pairs(load_run(path, resamples=20))
    assert len(pairs) == 6 and all(p["flags"] == ["unreadable"] for p in pairs)
    # P(chosen) = 1 from the one readable order, but strict acc is 0: the cut order never wins
    assert all(p["scores"][0] == 1.0 and p["outcome"] == "wrong" for p in pairs)
    assert all([r["value"] for r in p["reasons"]] == [0.0, 0.5] for p in pairs)
    page = tmp_path / "eval.html"
    page.write_text(explorer_html([run_data(load_run(path, resamples=20))], "eval"),
                    encoding="utf-8")
    browser.errors.clear()
    browser.open(page.as_uri())
    text = browser.evaluate("(() => { document.querySelectorAll('details')"
                            ".forEach(d => d.open = true); "
                            "return document.getElementById('pairs').innerText; })()")
    assert "no verdict (unreadable reply): truncated - " in text
    assert "Weighing the second answer against" in text and "<img src=x" in text
    assert browser.errors == []


def test_samples_lines_get_the_replies_of_the_pairs_judged() -> None:
    from prbench.harness.scored import Scored, annotate_sample
    from prbench.judges.order_tally import OrderTally
    from prbench.judges.parsing import parse_pairwise

    docs = [{"id": i, "question": "q", "profile_text": "", "chosen": "c", "rejected": f"r{i}"}
            for i in ("d1", "d2")]
    tally = OrderTally()
    rows = [tally.order(s, parse_pairwise(r), r) for s, r in (("first", "Verdict: A"),
                                                               ("second", "hmm"))]
    tally.pair("d1", rows)
    outcome = tally.recent_outcomes(1)[0]
    samples = [{"doc_id": 0, "doc": docs[0], "acc": 1.0,
                "filtered_resps": [Scored(0.5, {"orders": outcome}), Scored(0.5)]},
               {"doc_id": 1, "doc": docs[1], "acc": 1.0,
                "filtered_resps": [(0.5, False), (0.5, False)]}]
    first, second = (annotate_sample(s) for s in samples)
    assert second is samples[1]  # nothing said of this pair: unchanged
    assert first == {**samples[0], "judge_replies": [
        {"shown_first": "first", "winner": "first", "verdict": "A", "reply": "Verdict: A",
         "failure": None, "detail": None},
        {"shown_first": "second", "winner": None, "verdict": None, "reply": "hmm",
         "failure": "no-verdict", "detail": first["judge_replies"][1]["detail"]}]}
