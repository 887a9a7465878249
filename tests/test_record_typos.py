"""Unknown top-level keys: a warning with suggestions, an error when they look like a typo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prbench.cli import main
from prbench.records import RecordValidationError, load_records, validate
from tests._records_fixtures import record, write_jsonl


def test_misspelt_required_field_names_the_key_and_the_field(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [{**record(chosen=None), "choosen": "x"}])
    issues = validate(path).issues
    assert [(i.field, i.code) for i in issues] == [
        ("choosen", "misspelt-field"),
        ("chosen", "missing-field"),
    ]
    assert str(issues[0]).startswith(f"{path}:1: record 'u1': field 'choosen': unknown field; ")
    assert "did you mean 'chosen'?" in issues[0].message


def test_misspelt_optional_field_no_longer_passes_with_zero_aspects(tmp_path: Path) -> None:
    row = {**record(rubric_aspects=None), "rubric_aspect": [{"aspect": "small fridge"}]}
    path = write_jsonl(tmp_path / "d.jsonl", [row])
    with pytest.raises(RecordValidationError, match=r"'rubric_aspect'.*'rubric_aspects'"):
        load_records(path)


def test_a_new_field_is_kept_with_a_warning_and_suggestion(tmp_path: Path) -> None:
    rows = [record(id="a", source_url="x", rubric="r"), record(id="b", source_url="y")]
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    report = validate(path)
    assert report.ok and [r.extra for r in report.records] == [
        {"source_url": "x", "rubric": "r"},
        {"source_url": "y"},
    ]
    got = [(w.record_id, w.field, w.code) for w in report.warnings]
    assert got == [
        ("a", "source_url", "unknown-field"),
        ("a", "rubric", "unknown-field"),
        ("b", "source_url", "unknown-field"),
    ]
    assert "did you mean 'rubric_aspects'?" in report.warnings[1].message
    assert "did you mean" not in report.warnings[0].message


def test_a_near_miss_beside_the_real_field_is_only_a_warning(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [record(questions=["another"])])
    report = validate(path)
    assert report.ok and [w.field for w in report.warnings] == ["questions"]


def test_validate_counts_warnings_in_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [record(id="a", votes=1), record(id="b", votes=2)]
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    assert main(["validate", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "2 warning(s) (1 kind(s)), 0 path(s) skipped" in out
    assert (
        f"warning: field 'votes': unknown field, kept as an extra field [unknown-field] "
        f"(2 records, first at {path}:1)"
    ) in err
    assert main(["validate", str(path), "--format", "markdown"]) == 0
    assert "2 warning(s) (1 kind(s))" in capsys.readouterr().out
    assert main(["validate", str(path), "--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert [(w["record_id"], w["field"], w["code"]) for w in payload["warnings"]] == [
        ("a", "votes", "unknown-field"),
        ("b", "votes", "unknown-field"),
    ]


def test_typo_errors_are_counted_with_the_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [{**record(narrative=None), "narative": "n"}])
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert (
        f"{path}:1: record 'u1': field 'narative': unknown field; did you mean 'narrative'?" in err
    )
    assert "1 problem(s)" in err and "Traceback" not in err


def test_json_format_lists_the_problems_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [{**record(chosen=None), "choosen": "x", "votes": 1}])
    assert main(["validate", str(path), "--format", "json"]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert payload["ok"] is False and payload["rows"] == 1 and payload["valid"] == 0
    assert [(p["line"], p["field"], p["code"]) for p in payload["problems"]] == [
        (1, "choosen", "misspelt-field"),
        (1, "chosen", "missing-field"),
    ]
    assert [w["field"] for w in payload["warnings"]] == ["votes"]


def test_load_records_logs_warnings_once_per_kind(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [record(id="a", votes=1), record(id="b", votes=2)])
    with caplog.at_level("WARNING", logger="prbench.records"):
        assert [r.extra for r in load_records(path)] == [{"votes": 1}, {"votes": 2}]
    lines = [r.getMessage() for r in caplog.records if "votes" in r.getMessage()]
    assert lines == [
        "prbench data: field 'votes': unknown field, kept as an extra field [unknown-field] "
        f"(2 records, first at {path}:1)"
    ]
