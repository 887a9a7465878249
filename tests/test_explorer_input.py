"""The explorer's input view, tokens and time columns, range filter, sort, keys, raw view, phone.

Samples lines carry ``scored_input`` as the samples contract has it (the input each answer was
scored with, where a truncation cut it, where the profile sits; a judge's messages per order and
its reply); lines without it say the input was not recorded. The page is driven in headless
Chromium (tests/_browser.py), skipped without it: the cut is marked at its character, a range
narrows the rows, a header click sorts, j / k / "/" move and search, a permalink's pair sits below
the sticky filter bar, the raw view is the samples line, and at 390 x 844 neither the explorer nor
the report scrolls sideways (the report's figures open full size).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pytest

from prbench.analysis.explorer import explorer_html
from prbench.analysis.explorer_data import NO_INPUT, explorer_pairs, run_data
from tests._browser import Browser, browser_or_skip
from tests.test_explorer import HOSTILE, write_run

PROFILE = "Post 1: I knit every weekend."
LONG_ID = "sha-" + "0123456789abcdef" * 5  # one unbroken word, wider than a phone


def _text(answer: str) -> str:
    return (f"<|system|>\nYou rate answers for this user.\nUser profile:\n{PROFILE}\n"
            f"<|user|>\nq?\n<|assistant|>\n{answer}")


def _answer(text: str, tokens: int | None, *, cut: dict[str, Any] | None = None,
            time_s: float | None = None, cached: bool = False,
            keep: int | None = None) -> dict[str, Any]:
    """One answer's input by the samples contract (``keep``: the characters kept, clipped)."""
    start = text.index(PROFILE)
    return {"text": text[:keep] if keep else text, "chars": len(text),
            "sha256": hashlib.sha256(text.encode()).hexdigest(), "clipped": keep is not None,
            "tokens": tokens, "tokens_full": tokens + cut["tokens_dropped"] if cut and tokens
            else tokens, "cut": cut, "profile": [start, start + len(PROFILE)],
            "time_s": time_s, "cached": cached}


#: c1's chosen answer is cut on the left inside the profile: 5 of its characters dropped
CUT_AT = _text("one two three").index(PROFILE) + 5


def _pointwise(chosen: tuple[int, float | None], rejected: tuple[int | None, float | None],
               **cut: Any) -> dict[str, Any]:
    return {"text": "text", "answers": {
        "chosen": _answer(_text("one two three"), chosen[0], time_s=chosen[1], **cut),
        "rejected": _answer(_text("one"), rejected[0], time_s=rejected[1],
                            cached=rejected[1] is None)}}


def _chat(given: dict[str, Any]) -> dict[str, Any]:
    """c3's chosen answer as a served chat reward model gets it: messages too."""
    given["answers"]["chosen"]["messages"] = [{"role": "user", "content": "q? " + HOSTILE},
                                              {"role": "assistant", "content": "one two"}]
    return given


PAIRS = [
    {"id": "c1", "scores": (2.0, 1.0), "extra": {"scored_input": {"kind": "text", **_pointwise(
        (100, 0.25), (80, None),
        cut={"side": "left", "char": CUT_AT, "tokens_dropped": 12})}}},
    {"id": "c2", "scores": (1.0, 3.0)},  # no scored_input: a run made without it
    {"id": "c3", "scores": (1.0, 0.5), "extra": {"scored_input": {"kind": "messages", **_chat(
        _pointwise((50, 0.1), (None, 0.2)))}}},  # the rejected answer: no tokenizer
    {"id": LONG_ID, "scores": (0.5, 1.5), "q": HOSTILE + " https://example.invalid/" + "x" * 90,
     "extra": {"scored_input": {"kind": "text", "answers": {
         "chosen": _answer(_text("one two three " + HOSTILE), 300, time_s=0.5, keep=60),
         "rejected": _answer(_text("one"), 10, time_s=0.5)}}}},
    *({"id": f"f{i:02d}", "scores": (1.0 + i, 0.5)} for i in range(30)),  # a page to scroll
]


def _judge_line() -> dict[str, Any]:
    def order(first: str, reply: str | None) -> dict[str, Any]:
        messages = [{"role": "system", "content": "You compare two answers."},
                    {"role": "user", "content": f"{PROFILE}\n<answer_a>{first}</answer_a>"}]
        blob = json.dumps(messages, sort_keys=True, separators=(",", ":"))
        return {"shown_first": first, "messages": messages, "chars": len(blob),
                "sha256": hashlib.sha256(blob.encode()).hexdigest(), "clipped": False,
                "tokens": 40, "reply": reply, "time_s": 0.5, "cached": False}

    return {"id": "j1", "scores": (1.0, 0.0), "extra": {"scored_input": {
        "kind": "messages", "orders": [order("chosen", "Verdict: A " + HOSTILE),
                                       order("rejected", None)]}}}


def _page(tmp_path: Path, pairs: list[dict[str, Any]], scorer: str = "alpha") -> Path:
    from prbench.analysis.runs import load_run

    run = load_run(write_run(tmp_path / scorer, scorer, pairs), resamples=20)
    page = tmp_path / f"{scorer}.html"
    page.write_text(explorer_html([run_data(run)], f"Pairs of {scorer}"), encoding="utf-8")
    return page


def test_scored_input_is_read_and_summed(tmp_path: Path) -> None:
    from prbench.analysis.runs import load_run

    run = load_run(write_run(tmp_path / "r", "alpha", [*PAIRS[:4], _judge_line()]),
                   resamples=20)
    pairs = {p["id"]: p for p in explorer_pairs(run)}
    c1 = pairs["c1"]["input"]["answers"]["chosen"]
    assert c1["cut"] == {"side": "left", "char": CUT_AT, "tokens_dropped": 12, "end_char": None,
                         "text_sent": None}
    assert (c1["tokens"], c1["tokens_full"], c1["text"]) == (100, 112, _text("one two three"))
    assert {k: (pairs[k]["tokens"], pairs[k]["time_s"]) for k in ("c1", "c2", "j1")} == {
        "c1": (180, 0.25), "c2": (None, None), "j1": (80, 1.0)}  # the cached score: no time
    assert pairs["c2"]["input"] is None
    assert [o["shown_first"] for o in pairs["j1"]["input"]["orders"]] == ["chosen", "rejected"]
    # the line as read, for the raw view
    assert pairs["c3"]["raw"]["scored_input"]["answers"]["chosen"]["tokens"] == 50


def test_a_malformed_scored_input_is_one_error_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.cli import main

    bad = {"id": "b1", "scores": (1.0, 0.0), "extra": {"scored_input": {
        "answers": {"chosen": {"text": "x", "cut": {"side": "middle", "char": 1}}}}}}
    path = write_run(tmp_path / "r", "alpha", [PAIRS[1], bad])
    samples = next(path.parent.glob("samples_*.jsonl"))
    assert main(["report", str(path), "-o", str(tmp_path / "out"), "--resamples", "20"]) == 1
    err = capsys.readouterr().err
    assert f"{samples}:2: scored_input: answers.chosen.cut is not" in err
    assert "Traceback" not in err


@pytest.fixture(scope="module")
def browser() -> Any:
    yield from browser_or_skip(1280)


def _ids(browser: Browser) -> list[str]:
    return browser.evaluate("[...document.querySelectorAll('details.pair')]"
                            ".map(d => d.dataset.id)")


def _open_input(browser: Browser, pid: str) -> None:
    browser.evaluate(f"(() => {{ const d = [...document.querySelectorAll('details.pair')]"
                     f".find(x => x.dataset.id === {json.dumps(pid)}); d.open = true; "
                     "d.querySelectorAll('details.input, details.raw')"
                     ".forEach(x => x.open = true); })()")
    browser.settle()  # the views are drawn when opened; then the messages inside them
    browser.evaluate("document.querySelectorAll('details.sent').forEach(x => x.open = true)")


def _in(pid: str, selector: str) -> str:
    """A JS expression: the elements matching ``selector`` inside pair ``pid``."""
    return (f"[...[...document.querySelectorAll('details.pair')].find(x => x.dataset.id === "
            f"{json.dumps(pid)}).querySelectorAll({json.dumps(selector)})]")


def test_the_input_as_scored_with_its_cut_marked(tmp_path: Path, browser: Browser) -> None:
    page = _page(tmp_path, PAIRS)
    browser.errors.clear()
    browser.open(page.as_uri() + "#sort=id")
    _open_input(browser, "c1")
    chosen = _in("c1", ".answer-input[data-answer=chosen]") + "[0]"
    text = _text("one two three")
    marker = browser.evaluate(f"{chosen}.querySelector('.cut-marker').textContent")
    assert marker == "\u2702 12 tokens dropped (left)"
    # the dropped part and the kept part split at the cut's character; the marker between
    parts = browser.evaluate(
        f"(() => {{ const pre = {chosen}.querySelector('pre.scored'); const t = (s) => "
        "[...pre.querySelectorAll(s)].map(x => x.textContent).join(''); return {dropped: "
        "t('.dropped'), kept: t('.kept'), profile: t('mark.profile'), all: pre.textContent, "
        "marker_after: pre.querySelector('.cut-marker').previousSibling.textContent}; })()")
    assert parts["dropped"] == text[:CUT_AT] and parts["kept"] == text[CUT_AT:]
    assert parts["profile"] == PROFILE  # highlighted, on both sides of the cut
    assert parts["marker_after"] == PROFILE[:5]
    assert parts["all"] == text[:CUT_AT] + marker + text[CUT_AT:]
    facts = browser.evaluate(f"{chosen}.innerText")
    sha = hashlib.sha256(text.encode()).hexdigest()
    assert "tokens sent 100 / before truncation 112" in facts
    assert f"{len(text)} characters" in facts and f"sha256 {sha[:12]}" in facts
    assert "time 0.250 s" in facts
    rejected = browser.evaluate(_in("c1", ".answer-input[data-answer=rejected]")
                                + "[0].innerText")
    assert "cached: the score came from prbench's score cache" in rejected
    assert "\u2702" not in rejected  # not cut
    # a clipped input says so; a hostile text stays text
    _open_input(browser, LONG_ID)
    clipped = browser.evaluate(_in(LONG_ID, ".answer-input[data-answer=chosen]")
                               + "[0].innerText")
    assert "clipped: the samples file keeps the first 60 of its" in clipped
    # a chat reward model's messages as sent; an input no tokenizer counted
    _open_input(browser, "c3")
    sent = browser.evaluate(_in("c3", "details.sent") + "[0].innerText")
    assert "message 1: user\nq? " + HOSTILE in sent and "message 2: assistant\none two" in sent
    assert "tokens: not counted (the scorer has no tokenizer)" in browser.evaluate(
        _in("c3", ".answer-input[data-answer=rejected]") + "[0].innerText")
    # a line without the input says so
    _open_input(browser, "c2")
    assert NO_INPUT in browser.evaluate(_in("c2", "details.input") + "[0].innerText")
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.errors == []


def test_a_judges_messages_and_replies_per_order(tmp_path: Path, browser: Browser) -> None:
    page = _page(tmp_path, [_judge_line()], "judge")
    browser.errors.clear()
    browser.open(page.as_uri())
    _open_input(browser, "j1")
    orders = browser.evaluate(_in("j1", ".order-input") + ".map(x => x.innerText)")
    assert len(orders) == 2
    assert orders[0].startswith("order 1: the chosen answer shown first")
    assert "message 1: system\nYou compare two answers." in orders[0]
    assert "message 2: user\n" + PROFILE in orders[0]
    assert "Verdict: A " + HOSTILE in orders[0] and "no reply recorded" in orders[1]
    assert browser.evaluate("document.querySelectorAll('#pairs img').length") == 0
    assert browser.errors == []


def _click_head(browser: Browser, key: str) -> None:
    browser.evaluate(f"document.querySelector('#pair-head button[data-sort={key}]').click()")


def test_sort_by_tokens_and_a_range_filter(tmp_path: Path, browser: Browser) -> None:
    page = _page(tmp_path, PAIRS)
    browser.errors.clear()
    browser.open(page.as_uri())
    head = browser.evaluate("document.getElementById('pair-head').innerText")
    assert "tokens" in head and "time s" in head
    _click_head(browser, "tokens")
    ids = _ids(browser)
    assert ids[:4] == ["c3", "c1", LONG_ID, "c2"]  # ascending; no tokens last, by id
    assert "sort=tokens-asc" in browser.evaluate("location.hash")
    _click_head(browser, "tokens")  # again: the other way, no tokens still last
    assert _ids(browser)[:4] == [LONG_ID, "c1", "c3", "c2"]
    assert browser.evaluate("document.querySelector('#pair-head [aria-sort]').dataset.sort"
                            ) == "tokens"
    summary = browser.evaluate("document.querySelector('details.pair > summary').innerText")
    assert "310" in summary and "1.000" in summary  # tokens and time (0.5 + 0.5 s)
    # a range on tokens: pairs without tokens are out once a bound is set
    browser.evaluate("(() => { const s = document.getElementById('range-col'); "
                     "s.value = 'tokens'; s.dispatchEvent(new Event('change')); "
                     "const lo = document.getElementById('range-min'); lo.value = '150'; "
                     "lo.dispatchEvent(new Event('input')); })()")
    assert sorted(_ids(browser)) == sorted(["c1", LONG_ID])
    assert browser.evaluate("document.getElementById('n-shown').textContent") == "2"
    browser.evaluate("(() => { const hi = document.getElementById('range-max'); "
                     "hi.value = '200'; hi.dispatchEvent(new Event('input')); })()")
    assert _ids(browser) == ["c1"]
    hash_ = browser.evaluate("location.hash")
    assert "range=tokens" in hash_ and "min=150" in hash_ and "max=200" in hash_
    # kept over a reload; a range on the margin
    browser.call("Page.reload", session=True)
    browser.wait_for("Page.loadEventFired")
    assert _ids(browser) == ["c1"]
    browser.evaluate("(() => { const s = document.getElementById('range-col'); "
                     "s.value = 'margin'; s.dispatchEvent(new Event('change')); })()")
    want = sorted(p["id"] for p in PAIRS if 150 <= p["scores"][0] - p["scores"][1] <= 200)
    assert sorted(_ids(browser)) == want == []
    browser.evaluate("(() => { for (const [id, v] of [['range-min', '-1.5'], ['range-max', "
                     "'0.5']]) { const x = document.getElementById(id); x.value = v; "
                     "x.dispatchEvent(new Event('input')); } })()")
    want = sorted(p["id"] for p in PAIRS if -1.5 <= p["scores"][0] - p["scores"][1] <= 0.5)
    assert sorted(_ids(browser)) == want and len(want) == 3
    assert browser.errors == []


def _current(browser: Browser) -> list[str]:
    return browser.evaluate("[...document.querySelectorAll('details.pair')]"
                            ".filter(d => d.open).map(d => d.dataset.id)")


def test_keys_move_between_pairs_and_go_to_the_search(tmp_path: Path,
                                                      browser: Browser) -> None:
    page = _page(tmp_path, PAIRS)
    browser.errors.clear()
    browser.open(page.as_uri() + "#sort=id")
    ids = _ids(browser)
    browser.evaluate("document.querySelector('#pair-head button').focus()")  # a header clicked
    browser.press("j")
    assert _current(browser) == [ids[0]]
    browser.press("j")
    browser.press("j")
    assert _current(browser) == [ids[2]]  # the pairs j opened close as it moves on
    browser.press("k")
    assert _current(browser) == [ids[1]]
    assert f"pair={ids[1]}" in browser.evaluate("location.hash")
    top = browser.evaluate("document.querySelector('details.pair[open]')"
                           ".getBoundingClientRect().top")
    bar = browser.evaluate("document.getElementById('controls').getBoundingClientRect().bottom")
    assert bar <= top < 900
    browser.press("/")
    assert browser.evaluate("document.activeElement.id") == "search"
    browser.press("j")  # typed into the search (which redraws the rows), not a move
    assert browser.evaluate("document.getElementById('search').value") == "j"
    assert _current(browser) == [] and "q=j" in browser.evaluate("location.hash")
    assert browser.errors == []


def test_a_permalinked_pair_sits_below_the_sticky_bar(tmp_path: Path, browser: Browser) -> None:
    page = _page(tmp_path, PAIRS)
    browser.errors.clear()
    browser.open("about:blank")
    browser.open(page.as_uri() + "#sort=id&pair=f20")
    box = browser.evaluate(
        "(() => { const d = document.querySelector('details.pair[open]'); "
        "const s = d.querySelector('summary').getBoundingClientRect(); "
        "const bar = document.getElementById('controls').getBoundingClientRect(); "
        "return {id: d.dataset.id, top: s.top, bottom: s.bottom, bar: bar.bottom, "
        "scrolled: window.scrollY, sticky: getComputedStyle(document.getElementById("
        "'controls')).position}; })()")
    assert box["id"] == "f20" and box["sticky"] == "sticky" and box["scrolled"] > 0
    assert box["top"] >= box["bar"] and box["bottom"] <= 900, box
    assert browser.errors == []


def test_the_raw_view_is_the_samples_line(tmp_path: Path, browser: Browser) -> None:
    page = _page(tmp_path, PAIRS)
    samples = next((tmp_path / "alpha").glob("samples_*.jsonl"))
    lines = {json.loads(x)["doc"]["id"]: json.loads(x)
             for x in samples.read_text(encoding="utf-8").splitlines()}
    browser.errors.clear()
    browser.open(page.as_uri())
    for pid in ("c1", "c2", LONG_ID):
        _open_input(browser, pid)
        shown = browser.evaluate(_in(pid, "pre.raw-json") + "[0].textContent")
        assert "\n  " in shown  # pretty
        got = json.loads(shown)
        # the samples line, less the dataset record (a note of its length instead)
        record = lines[pid]["doc"].pop("record_json")
        assert got["doc"].pop("record_json") == (
            f"[left out of the page: the dataset record, {len(record):,} characters of JSON; "
            "it is in the samples file]")
        assert got == lines[pid]
    nan = {"id": "n1", "scores": (float("nan"), 1.0)}
    page = _page(tmp_path, [nan], "nan")
    browser.open(page.as_uri())
    _open_input(browser, "n1")
    got = json.loads(browser.evaluate(_in("n1", "pre.raw-json") + "[0].textContent"))
    assert math.isnan(got["margin"]) and got["invalid"] == 1.0
    assert browser.errors == []


def _no_sideways_scroll(browser: Browser) -> None:
    assert browser.evaluate("window.innerWidth") == 390
    wide = browser.evaluate(
        "[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right "
        "> window.innerWidth + 1 && !e.closest('.table-wrap, pre')).slice(0, 5)"
        ".map(e => e.tagName + '.' + e.className + ': ' + e.textContent.slice(0, 40))")
    width = browser.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, (width, wide)


def test_a_phone_scrolls_neither_the_explorer_nor_the_report_sideways(
        tmp_path: Path, browser: Browser) -> None:
    from prbench.cli import main

    write_run(tmp_path / "runs" / "alpha", "alpha", PAIRS)
    write_run(tmp_path / "runs" / "beta", "beta", [_judge_line(), *PAIRS[1:]])
    assert main(["report", str(tmp_path / "runs"), "-o", str(tmp_path / "out"),
                 "--resamples", "20"]) == 0
    browser.viewport(390, 844)
    try:
        browser.errors.clear()
        for name in ("alpha", "compare"):  # one run; two side by side
            browser.open((tmp_path / "out" / "explorer" / f"{name}.html").as_uri()
                         + "#sort=id")
            _no_sideways_scroll(browser)
            for pid in ("c3", LONG_ID, "c2"):  # pairs both runs scored
                _open_input(browser, pid)
            _no_sideways_scroll(browser)
        browser.open((tmp_path / "out" / "report.html").as_uri())
        _no_sideways_scroll(browser)
        figures = browser.evaluate(
            "[...document.querySelectorAll('figure')].map(f => { const a = f.querySelector("
            "'a.zoom'); const i = f.querySelector('img'); return {href: a && "
            "a.getAttribute('href'), img: !!(a && a.contains(i)), "
            "right: i.getBoundingClientRect().right}; })")
        pytest.importorskip("matplotlib")
        assert figures, "the report has no figure"
        for fig in figures:  # each fits, and its link opens the PNG itself, full size
            assert fig["img"] and fig["right"] <= 390, fig
            assert (tmp_path / "out" / fig["href"]).is_file(), fig
        assert browser.errors == []
    finally:
        browser.viewport(1280)
