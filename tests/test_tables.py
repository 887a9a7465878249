"""The one table writer: Markdown and aligned text from the same head and rows."""

from __future__ import annotations

import pytest

from prbench.tables import markdown_table, text_table

HEAD = ["k", "scorer a", "b"]
ROWS = [["1", "0.500", "x"], ["16", "0.25", "longer cell"]]


def test_markdown_table() -> None:
    assert markdown_table(HEAD, ROWS) == (
        "| k | scorer a | b |\n|---|---|---|\n| 1 | 0.500 | x |\n| 16 | 0.25 | longer cell |")
    assert markdown_table(["a"], []) == "| a |\n|---|"


def test_text_table_aligns_columns_two_spaces_apart() -> None:
    assert text_table(HEAD, ROWS).splitlines() == [
        "k   scorer a  b          ",
        "1   0.500     x          ",
        "16  0.25      longer cell",
    ]
    assert text_table(HEAD, ROWS, rule=True, strip=True).splitlines() == [
        "k   scorer a  b",
        "--  --------  -----------",
        "1   0.500     x",
        "16  0.25      longer cell",
    ]


def test_a_row_of_another_width_is_refused() -> None:
    with pytest.raises(ValueError, match="row 1 has 2 cells for 3 columns"):
        markdown_table(HEAD, [ROWS[0], ["1", "2"]])
    with pytest.raises(ValueError, match="row 0 has 4 cells"):
        text_table(HEAD, [[*ROWS[0], "extra"]])


def test_the_report_renders_best_of_n_and_correlation_tables_from_data() -> None:
    from pathlib import Path

    from prbench.analysis import report

    point = {"value": 0.5, "low": 0.4, "high": 0.6}
    bon = {"ks": [1], "n_pools": 3, "quality": {"source": "gold"}, "sample": True,
           "scorers": {"a|b": {"curve": {"points": [{"k": 1, **point}]}}}}
    corr = {"bootstrap": {"confidence": 0.95, "resamples": 10, "seed": 1}, "rbo_p": 0.9,
            "statistics": {s: point for s in ("spearman", "kendall", "weighted_kendall", "ndcg",
                                              "rbo")},
            "benchmark": {"what": "acc", "values": {"a": 0.7}},
            "downstream": {"what": "bon", "values": {"a": 0.5}}, "scorers": ["a"]}
    blocks = report.best_of_n([(Path("b.json"), bon)]) + report.correlations(
        [(Path("c.json"), corr)])
    tables = [b for b in blocks if b[0] == "table"]
    assert [b[1] for b in tables] == [["k", "a|b"], ["statistic", "value", "95% CI"],
                                      ["scorer", "acc", "bon"]]
    page = report.to_html([b for b in blocks if b[0] in ("table", "p")], "t")
    # a "|" in a label stays in its cell: the table is never written as Markdown and parsed back
    assert "<th class='num'>a|b</th>" in page
    assert "<td class='num'>0.500<span class='ci'>[0.400, 0.600]</span></td>" in page
    assert "<p class='sample'>Data: the bundled SAMPLE, not the benchmark.</p>" in page
