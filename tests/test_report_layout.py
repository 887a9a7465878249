"""The report and the pair explorer as a reader sees them (issue 38 item 5).

A report of three scorers (one a DIAGNOSTIC oracle) over the benchmark's three domains with long
names, three profile conditions and a dense profile builder with options: the leaderboard fits a
1,280-pixel window (no horizontal overflow of the page or of the table, its last column on
screen), DIAGNOSTIC rows sit in a table of their own, labels are short with the full text on
hover, one inline stylesheet, nothing fetched. The explorer's search filters rows, a permalink
opens its pair, and the filters survive a reload (kept in the URL). Files are written with the
umask's permissions. Figures keep every label inside the image.

The browser tests drive headless Chromium (tests/_browser.py) and skip without it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._browser import Browser, browser_or_skip

DATE = "2026-01-01T00-00-00.000000"
DOMAINS = ("Art_and_Entertainment", "Lifestyle_and_Personal_Development", "Society_and_Culture")
DENSE = {"id": "dense", "requested_options": {"k": 10, "model": "facebook/contriever-msmarco",
                                              "max_tokens": 2048}}
CONDITIONS = {"": ("profile", None), "_noprofile": ("noprofile", None),
              "_swapped": ("profile", "swapped")}
WIDTH = 1280


def write_run(folder: Path, scorer: str, per_pair: list[int], *, diagnostic: bool = False) -> Path:
    """A results file of ``prbench eval`` over 3 domains x 3 conditions, with samples files."""
    folder.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "results": {}, "configs": {}, "n-samples": {}, "group_subtasks": {},
        "config": {"prbench": {"scorer": {"id": scorer, "options": {}, "diagnostic": diagnostic},
                               "data": []}},
    }
    for suffix, (condition, source) in CONDITIONS.items():
        group = f"personalized_rewardbench{suffix}"
        results["group_subtasks"][group] = []
        for d, domain in enumerate(DOMAINS):
            task = f"personalized_rewardbench_{domain.lower()}{suffix}"
            results["group_subtasks"][group].append(task)
            outcomes = [(v + d) % 2 if condition == "noprofile" else v for v in per_pair]
            kwargs = {"prbench_domain": domain, "prbench_condition": condition,
                      "prbench_default_data": "benchmark"}
            if source:
                kwargs["prbench_default_profile_source"] = source
            results["results"][task] = {"acc,none": sum(outcomes) / len(outcomes),
                                        "tie,none": 0.0, "invalid,none": 0.0}
            results["configs"][task] = {"dataset_kwargs": kwargs, "metadata": {}}
            results["n-samples"][task] = {"original": len(outcomes), "effective": len(outcomes)}
            results["config"]["prbench"]["data"].append(
                {"data": "benchmark", "domain": domain, "condition": condition,
                 "profile_source": source or ("none" if condition == "noprofile" else "own"),
                 "profile_builder": DENSE if condition == "profile" else {"id": "none"}})
            lines = []
            for i, ok in enumerate(outcomes):
                pid = f"{domain[:3].lower()}-{i:02d}"
                c, r = (0.75, 0.25) if ok else (0.25, 0.75)
                doc = {"id": pid, "domain": domain,
                       "question": f"How do I look after a {'sourdough' if i == 3 else 'fern'}?",
                       "chosen": "water it weekly and keep it out of sun",
                       "rejected": "water it", "profile_text": "Post 1: I keep ferns.",
                       "profile_source": source or "own",
                       "record_json": json.dumps({"id": pid, "rubric_aspects": []})}
                lines.append(json.dumps({"doc": doc, "acc": float(ok), "tie": 0.0,
                                         "invalid": 0.0, "margin": c - r,
                                         "filtered_resps": [[str(c), "False"],
                                                            [str(r), "False"]]}))
            (folder / f"samples_{task}_{DATE}.jsonl").write_text("\n".join(lines) + "\n",
                                                                  encoding="utf-8")
    path = folder / f"results_{DATE}.json"
    path.write_text(json.dumps(results), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``prbench report`` of the three runs, under a umask of 022."""
    from prbench.cli import main
    from prbench.testing import reset_registry

    root = tmp_path_factory.mktemp("layout")
    write_run(root / "runs" / "e", "embedding-similarity", [1, 1, 0, 1, 0, 1])
    write_run(root / "runs" / "s", "skywork-reward-v2-qwen3-8b", [1, 0, 0, 1, 1, 1])
    write_run(root / "runs" / "o", "oracle-rubric", [1, 1, 1, 1, 1, 1], diagnostic=True)
    old = os.umask(0o022)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("PRBENCH_CACHE_DIR", str(root / "cache"))
            mp.setenv("PRBENCH_LOAD_PLUGINS", "")
            reset_registry()
            assert main(["report", str(root / "runs"), "-o", str(root / "out"),
                         "--resamples", "50"]) == 0
    finally:
        os.umask(old)
        reset_registry()
    return root / "out"


def _leaderboard_md(md: str) -> str:
    return md.split("## Leaderboard", 1)[1].split("\n## ", 1)[0]


def test_diagnostic_rows_are_a_table_apart(report: Path) -> None:
    part = _leaderboard_md((report / "report.md").read_text(encoding="utf-8"))
    first, rest = part.split("### DIAGNOSTIC scorers", 1)
    assert "oracle-rubric" not in first
    assert "embedding-similarity" in first and "skywork-reward-v2-qwen3-8b" in first
    rows = [line for line in rest.splitlines() if line.startswith("| oracle-rubric")]
    assert len(rows) == 3 and all("(DIAGNOSTIC)" in r for r in rows)


def test_report_files_are_written_with_the_umask(report: Path) -> None:
    files = [report / "report.md", report / "report.html", report / "leaderboard.png",
             *sorted((report / "explorer").glob("*.html"))]
    assert len(files) > 4
    for file in files:
        assert file.stat().st_mode & 0o777 == 0o644, file  # 0666 less 022, not the temp's 0600


def test_the_page_is_one_offline_file_with_short_labels(report: Path) -> None:
    page = (report / "report.html").read_text(encoding="utf-8")
    assert page.count("<style>") == 1 and "<link" not in page
    text = re.sub(r"src='data:image/png;base64,[^']*'", "", page)  # the embedded figures
    assert not re.search(r"(?:https?:)?//[a-z]", text)
    assert "@import" not in text and "url(" not in text  # no web font, no remote image
    # short labels, the full text on hover
    assert "title='Art_and_Entertainment'>Art</span>" in page
    assert ">dense</span>" in page and "title='dense(k=10,max_tokens=2048," in page
    assert ">dense (swapped)</span>" in page
    assert "<span class='ci'>[" in page  # an interval under its value


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    yield from browser_or_skip(WIDTH)


def _fits(browser: Browser) -> None:
    """No horizontal overflow of the page at the window's width."""
    assert browser.evaluate("window.innerWidth") == WIDTH
    width = browser.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTH, f"the page is {width} px wide in a {WIDTH} px window"


def test_the_report_and_its_leaderboard_fit_1280_pixels(report: Path, browser: Browser,
                                                        tmp_path: Path) -> None:
    browser.errors.clear()
    browser.open((report / "report.html").as_uri())
    _fits(browser)
    for table in ("table.leaderboard", "table.leaderboard.diagnostic"):
        # the table does not scroll inside its box, and its last column (length) is on screen
        box = browser.evaluate(
            f"(() => {{ const t = document.querySelector({json.dumps(table)}); "
            "const w = t.parentElement; const th = t.querySelector('thead th:last-child'); "
            "const r = th.getBoundingClientRect(); "
            "return {scroll: w.scrollWidth, client: w.clientWidth, right: r.right, "
            "text: th.textContent, rows: t.querySelectorAll('tbody tr').length}; })()")
        assert box["scroll"] <= box["client"], (table, box)
        assert box["text"] == "length" and box["right"] <= WIDTH, (table, box)
    # no cell taller than three lines: labels are short (the profile's options are on hover)
    tallest = browser.evaluate(
        "Math.max(...[...document.querySelectorAll('table.leaderboard td')].map(td => "
        "td.getBoundingClientRect().height / parseFloat(getComputedStyle(td).lineHeight)))")
    assert tallest <= 3.5, tallest
    hover = browser.evaluate(
        "[...document.querySelectorAll('table.leaderboard td .short')].map(s => s.title)")
    assert any(t.startswith("dense(k=10,") for t in hover)
    shot = browser.screenshot(tmp_path / "report.png")
    assert shot.read_bytes()[:4] == b"\x89PNG"
    assert browser.errors == []


def _explorer(report: Path, name: str) -> str:
    return (report / "explorer" / name).as_uri()


def _shown(browser: Browser) -> int:
    return int(browser.evaluate("document.getElementById('n-shown').textContent"))


def _ids(browser: Browser) -> list[str]:
    return browser.evaluate("[...document.querySelectorAll('details.pair')].map(d => d.dataset.id)")


def _type(browser: Browser, text: str) -> None:
    browser.evaluate(f"(() => {{ const s = document.getElementById('search'); "
                     f"s.value = {json.dumps(text)}; s.dispatchEvent(new Event('input')); }})()")


def _reload(browser: Browser) -> None:
    browser.call("Page.reload", session=True)
    browser.wait_for("Page.loadEventFired")


def test_explorer_fits_and_its_search_filters_rows(report: Path, browser: Browser) -> None:
    for page in ("embedding-similarity.html", "compare.html"):
        browser.errors.clear()
        browser.open(_explorer(report, page))
        _fits(browser)
        assert browser.errors == []
    browser.open(_explorer(report, "embedding-similarity.html"))
    assert _shown(browser) == 18  # 3 domains x 6 pairs of the profile condition
    _type(browser, "SOURDOUGH")  # any case; pair 03 of each domain asks about sourdough
    assert sorted(_ids(browser)) == ["art-03", "lif-03", "soc-03"]
    _type(browser, "sourdough lif")  # every word must be in the pair's texts
    assert _ids(browser) == ["lif-03"]
    _type(browser, "no such words")
    assert _shown(browser) == 0
    # score columns: the scores of both answers, as the samples file has them
    _type(browser, "")
    head = browser.evaluate("document.getElementById('pair-head').innerText")
    assert "s(chosen)" in head and "s(rejected)" in head and "margin" in head
    summary = browser.evaluate("document.querySelector('details.pair > summary').innerText")
    assert "0.2500" in summary and "0.7500" in summary
    assert browser.errors == []


def test_the_filters_are_in_the_url_and_survive_a_reload(report: Path, browser: Browser) -> None:
    browser.open(_explorer(report, "embedding-similarity.html"))
    browser.evaluate("(() => { const s = document.getElementById('outcome'); s.value = 'wrong'; "
                     "s.dispatchEvent(new Event('change')); })()")
    browser.evaluate("(() => { const s = document.getElementById('domain'); "
                     "s.value = 'Society_and_Culture'; s.dispatchEvent(new Event('change')); })()")
    _type(browser, "fern")  # in every profile
    want = _ids(browser)
    assert sorted(want) == ["soc-02", "soc-04"]  # Society's wrong pairs
    hash_ = browser.evaluate("location.hash")
    assert "outcome=wrong" in hash_ and "domain=Society_and_Culture" in hash_ and "q=fern" in hash_
    _reload(browser)
    assert browser.evaluate("document.getElementById('outcome').value") == "wrong"
    assert browser.evaluate("document.getElementById('domain').value") == "Society_and_Culture"
    assert browser.evaluate("document.getElementById('search').value") == "fern"
    assert _ids(browser) == want
    # the condition too (a select filled from the data when the page renders)
    browser.open("about:blank")
    browser.open(_explorer(report, "embedding-similarity.html") + "#cell=noprofile&q=sourdough")
    assert browser.evaluate("document.getElementById('cell').value") == "noprofile"
    assert _shown(browser) == 3
    assert browser.errors == []


def test_a_permalink_opens_its_pair(report: Path, browser: Browser) -> None:
    browser.open(_explorer(report, "compare.html"))
    browser.evaluate("(() => { const s = document.getElementById('cell'); "
                     "s.value = 'profile:swapped'; s.dispatchEvent(new Event('change')); })()")
    link = browser.evaluate(
        "(() => { const d = [...document.querySelectorAll('details.pair')]"
        ".find(x => x.dataset.id === 'lif-04'); return d.querySelector('a.permalink').href; })()")
    assert "pair=lif-04" in link and "cell=profile%3Aswapped" in link
    browser.open("about:blank")
    browser.open(link)  # a fresh page: only the link's state
    opened = browser.evaluate("[...document.querySelectorAll('details.pair')]"
                              ".filter(d => d.open).map(d => d.dataset.id)")
    assert opened == ["lif-04"]
    assert browser.evaluate("document.getElementById('cell').value") == "profile:swapped"
    assert browser.evaluate("document.querySelector('details.pair[open]').classList"
                            ".contains('linked')")
    # in view: the browser scrolled to it
    top = browser.evaluate("document.querySelector('details.pair[open]')"
                           ".getBoundingClientRect().top")
    assert 0 <= top < 900
    assert browser.errors == []


def test_every_figure_keeps_its_labels_inside(tmp_path: Path, figures: list[Any]) -> None:
    """Best-of-N, bars, panels and lines: every text of the figure inside the drawn image."""
    from prbench.analysis import plots

    kept = figures
    curve = {"curve": {"points": [{"value": v, "low": v - 0.1, "high": v + 0.1}
                                  for v in (0.4, 0.5, 0.6)]}}
    plots.bon_curves({"ks": [1, 2, 4], "sample": True, "bootstrap": {"confidence": 0.95},
                      "quality": {"source": "an LLM judge over every gold rubric aspect"},
                      "scorers": {"embedding-similarity": curve, "oracle-rubric":
                                  {**curve, "diagnostic": True}},
                      "baselines": {"random": curve}}, tmp_path / "bon.png")
    plots.accuracy_bars([{"label": "a-rather-long-scorer-name / personalized_rewardbench_swapped",
                          "value": 0.6, "low": 0.5, "high": 0.7}], tmp_path / "b.png",
                        title="accuracy (micro) per run", sample=True)
    point = {"value": 0.5, "low": 0.4, "high": 0.6, "n": 10}
    plots.binned_panels(["1-3", "4-5", "6+"],
                        [{"title": t, "series": [{"label": s, "points": [point] * 3}
                                                 for s in ("length", "oracle-rubric")]}
                         for t in ("profile", "noprofile", "profile:swapped")],
                        tmp_path / "p.png", xlabel="rubric aspects", title="Accuracy by aspects",
                        diagnostic=["oracle-rubric"])
    assert len(kept) == 3
    for fig in kept:
        fig.canvas.draw()  # lays the figure out as savefig does
        drawn = fig.get_tightbbox(fig.canvas.get_renderer())  # every drawn artist, in inches
        width, height = fig.get_size_inches()
        assert drawn.x0 >= -0.02 and drawn.y0 >= -0.02, (drawn, plots.figure_texts(fig))
        assert drawn.x1 <= width + 0.02 and drawn.y1 <= height + 0.02, (
            drawn, width, height, plots.figure_texts(fig))
    # panels two to a row: each is big enough to read in the report (not three squeezed in)
    panels = kept[2]
    width_in = panels.get_size_inches()[0]
    assert width_in <= 13.0 and len([a for a in panels.axes if a.get_visible()]) == 3


def test_a_long_run_is_drawn_a_page_at_a_time(tmp_path: Path, browser: Browser) -> None:
    from prbench.analysis.explorer import explorer_html
    from prbench.analysis.explorer_data import run_data
    from prbench.analysis.runs import load_run

    run = load_run(write_run(tmp_path / "r", "length", [1, 0, 1, 1, 0, 1]), resamples=20)
    page = tmp_path / "page.html"
    page.write_text(explorer_html([run_data(run)], "Pairs of length", page_size=4),
                    encoding="utf-8")
    browser.errors.clear()
    browser.open(page.as_uri())
    assert _shown(browser) == 18 and len(_ids(browser)) == 4  # counted all, drew a page
    assert browser.evaluate("document.getElementById('more').textContent") == (
        "show 4 more of the 14 pairs not drawn")
    browser.evaluate("document.getElementById('more').click()")
    assert len(_ids(browser)) == 8
    _type(browser, "sourdough")  # a new filter starts at the first page again
    assert len(_ids(browser)) == 3 and browser.evaluate("document.getElementById('more').hidden")
    # a permalink to a pair beyond the first page still opens it
    browser.open("about:blank")
    browser.open(page.as_uri() + "#cell=profile&sort=id&pair=soc-05")
    assert _ids(browser)[-1] == "soc-05" and len(_ids(browser)) == 18
    assert browser.evaluate("[...document.querySelectorAll('details.pair')]"
                            ".filter(d => d.open).map(d => d.dataset.id)") == ["soc-05"]
    assert browser.errors == []
