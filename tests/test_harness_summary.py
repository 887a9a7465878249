"""prbench's summary of an lm-eval results dict (no lm-eval run needed)."""

from __future__ import annotations

from typing import Any

from prbench.harness.summary import format_sections, summarize


def _task(domain: str, condition: str, acc: float, n: int) -> tuple[dict, dict, dict]:
    values = {"acc,none": acc, "tie,none": 0.0, "invalid,none": 0.0}
    config = {
        "dataset_kwargs": {
            "prbench_domain": domain, "prbench_condition": condition,
            "prbench_default_data": "sample",
        },
        "metadata": {"prbench_profile": "dense", "prbench_profile_k": 5},
    }
    return values, config, {"original": n, "effective": n}


def _results(tasks: dict[str, tuple[str, str, float, int]], groups: dict | None = None) -> dict:
    out: dict[str, Any] = {"results": {}, "configs": {}, "n-samples": {}}
    for name, spec in tasks.items():
        values, config, n = _task(*spec)
        out["results"][name] = values
        out["configs"][name] = config
        out["n-samples"][name] = n
    out["group_subtasks"] = groups or {name: [] for name in tasks}
    return out


def test_ungrouped_tasks_of_one_domain_are_not_merged() -> None:
    # one domain under both profile conditions, outside a group: two lines, 30 pairs in all
    results = _results({
        "prb_art": ("Art_and_Entertainment", "profile", 0.6, 15),
        "prb_art_noprofile": ("Art_and_Entertainment", "noprofile", 0.2, 15),
    })
    (section,) = summarize(results, resamples=200, length_baseline=False)
    assert set(section.summary.domains) == {"prb_art", "prb_art_noprofile"}
    assert section.summary.micro.n == 30
    assert section.summary.micro.value == 12 / 30
    assert section.summary.domains["prb_art_noprofile"].value == 3 / 15
    text = format_sections([section])
    assert "prb_art_noprofile" in text and "prb_art " in text


def test_group_rows_are_labelled_by_domain() -> None:
    results = _results(
        {
            "g_art": ("Art_and_Entertainment", "noprofile", 0.6, 15),
            "g_soc": ("Society_and_Culture", "noprofile", 0.4, 5),
        },
        groups={"g": ["g_art", "g_soc"]},
    )
    (section,) = summarize(results, resamples=200, length_baseline=False)
    assert list(section.summary.domains) == ["Art_and_Entertainment", "Society_and_Culture"]
    assert section.summary.micro.value == 11 / 20
    assert section.summary.macro.value == 0.5


def test_limit_zero_width_and_stratified_bootstrap_are_stated() -> None:
    results = _results(
        {
            "g_art": ("Art_and_Entertainment", "noprofile", 1.0, 4),  # all right: zero width
            "g_soc": ("Society_and_Culture", "noprofile", 0.5, 6),
        },
        groups={"g": ["g_art", "g_soc"]},
    )
    (section,) = summarize(results, resamples=200, length_baseline=False)
    text = format_sections([section], limit=4.0)
    lines = text.splitlines()
    assert "  --limit 4: only part of each task was evaluated; these are not benchmark results" in (
        lines
    )
    art = next(line for line in lines if line.lstrip().startswith("Art_and_Entertainment"))
    soc = next(line for line in lines if line.lstrip().startswith("Society_and_Culture"))
    assert "[1.000, 1.000]*" in art and "*" not in soc
    assert "percentile bootstrap stratified by domain" in text
    assert lines[-1].startswith("* zero-width interval: every pair behind it had the same outcome")
    # a fractional --limit is a share of each task; no zero-width note when there is none
    other = _results({"t": ("Art_and_Entertainment", "noprofile", 0.5, 4)})
    text = format_sections(summarize(other, resamples=200, length_baseline=False), limit=0.25)
    assert "--limit 25% of the pairs" in text and "zero-width" not in text


def test_scorer_diagnostics_lines_are_printed_under_the_header() -> None:
    sections = summarize(_results({"t": ("Art_and_Entertainment", "noprofile", 0.5, 4)}),
                         resamples=50, length_baseline=False)
    scorer = {"id": "x", "options": {}, "stats": {"diagnostics": ["x: check one", "x: two"]}}
    lines = format_sections(sections, scorer=scorer).splitlines()
    assert lines[:3] == ["prbench summary: scorer x", "  x: check one", "  x: two"]
    # no stats, a failed stats() ({"error": ...}) or no diagnostics: nothing extra
    for stats in (None, {"error": "boom"}, {"diagnostics": []}):
        text = format_sections(sections, scorer={"id": "x", "options": {}, "stats": stats})
        assert text.splitlines()[1] == ""


def test_analysis_layer_does_not_import_the_harness() -> None:
    # the statistics layer reads results files; the lm-eval bridge calls it, never the reverse
    import ast
    from pathlib import Path

    import prbench.analysis

    offenders = []
    for path in sorted(Path(prbench.analysis.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            offenders += [f"{path.name}:{node.lineno} {n}" for n in names
                          if n == "prbench.harness" or n.startswith("prbench.harness.")]
    assert offenders == []


def test_analysis_summary_labels_the_recorded_profile() -> None:
    # without the harness, a section's profile is what the run recorded in config.prbench.data
    from prbench.analysis.summary import summarize as analysis_summarize

    results = _results({"prb_art": ("Art_and_Entertainment", "profile", 0.6, 15)})
    results["config"] = {"prbench": {"data": [{
        "data": "sample", "domain": "Art_and_Entertainment", "condition": "profile",
        "profile_builder": {"id": "bm25", "options": {"k": 3}},
    }]}}
    (section,) = analysis_summarize(results, resamples=50)
    assert section.profile == "bm25(k=3)"
    # the options the task asked for, not every option the builder resolved
    results["config"]["prbench"]["data"][0]["profile_builder"].update(
        options={"k": 3, "k1": 1.5}, requested_options={"k": 3})
    (section,) = analysis_summarize(results, resamples=50)
    assert section.profile == "bm25(k=3)"
    assert section.rows[0].length_acc is None
    del results["config"]
    (section,) = analysis_summarize(results, resamples=50)
    assert section.profile == "?"


def test_summary_shows_accuracy_per_profile_source() -> None:
    results = _results({
        "prb_art": ("Art_and_Entertainment", "profile", 0.6, 10),
        "prb_art_swapped": ("Art_and_Entertainment", "profile", 0.4, 10),
        "prb_art_noprofile": ("Art_and_Entertainment", "noprofile", 0.3, 10),
    })
    swapped = results["configs"]["prb_art_swapped"]["dataset_kwargs"]
    swapped["prbench_default_profile_source"] = "swapped"
    sections = summarize(results, resamples=50, length_baseline=False)
    rows = {r.task: r for sec in sections for r in sec.rows}
    assert (rows["prb_art"].source, rows["prb_art_swapped"].source,
            rows["prb_art_noprofile"].source) == ("own", "swapped", "none")
    assert rows["prb_art_swapped"].cell == "profile:swapped"
    assert sections[0].as_dict()["tasks"][1]["source"] == "swapped"
    text = format_sections(sections)
    assert "[swapped profile: another user's posts, same domain]" in text
    line = next(x for x in text.splitlines() if x.strip().startswith("Art_and_Entertainment")
                and "+" in x)
    assert line.split()[1:] == ["0.600", "0.400", "0.300", "+0.200", "+0.300"]
    # one source only: no sensitivity block
    del results["results"]["prb_art_swapped"], results["results"]["prb_art_noprofile"]
    assert "personalization sensitivity" not in format_sections(
        summarize(results, resamples=50, length_baseline=False))
