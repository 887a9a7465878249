"""Record loading and validation (the corpus of malformed inputs is in test_malformed_corpus)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prbench.cli import main
from prbench.records import (
    DataSourceError,
    RecordValidationError,
    is_hub_id,
    load_records,
    validate,
)
from tests._records_fixtures import record, write_jsonl


def test_valid_file_loads_and_keeps_extra_fields(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "Society_and_Culture.jsonl", [record(source_url="x", votes=3)])
    (rec,) = load_records(path)
    assert rec.id == "u1"
    assert rec.domain == "Society_and_Culture"
    assert rec.extra == {"source_url": "x", "votes": 3}
    assert rec.profile[1].category == "Travel"
    assert rec.rubric_aspects[0].evidence == "my fridge is tiny"
    assert rec.to_dict()["votes"] == 3
    assert rec.source.endswith("Society_and_Culture.jsonl:1")


def test_directory_json_and_parquet_sources(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    write_jsonl(tmp_path / "A.jsonl", [record(id="a1")])
    (tmp_path / "B.json").write_text(json.dumps([record(id="b1"), record(id="b2")]))
    pq.write_table(pa.Table.from_pylist([record(id="c1")]), tmp_path / "C.parquet")
    recs = load_records(tmp_path)
    assert [(r.domain, r.id) for r in recs] == [("A", "a1"), ("B", "b1"), ("B", "b2"), ("C", "c1")]
    assert [r.id for r in load_records(tmp_path, domains=["B"])] == ["b1", "b2"]


def test_record_domain_field_wins_over_file_name(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "all.jsonl", [record(domain="Art_and_Entertainment")])
    assert load_records(path)[0].domain == "Art_and_Entertainment"


def test_int_ids_are_accepted_as_strings(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [record(id=17)])
    assert load_records(path)[0].id == "17"


def test_hub_id_offline_says_how_to_use_local_files(monkeypatch: pytest.MonkeyPatch) -> None:
    assert is_hub_id("QiyaoMa/Personalized-RewardBench")
    with pytest.raises(DataSourceError) as err:
        validate("QiyaoMa/Personalized-RewardBench")
    text = str(err.value)
    assert "offline" in text and "prbench_data" in text and "--revision" in text


def test_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DataSourceError, match="no such file"):
        validate(tmp_path / "nope.jsonl")


def test_every_bad_record_is_counted_and_good_ones_survive(tmp_path: Path) -> None:
    rows = [record(id="a"), "{broken", record(id="b", chosen=""), "", record(id="c")]
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    report = validate(path)
    assert [r.id for r in report.records] == ["a", "c"]
    assert report.rows == 5
    assert sorted(i.code for i in report.issues) == ["blank-line", "empty-answer", "invalid-json"]


def test_all_issues_of_a_record_are_reported_not_only_the_first(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [record(question="", chosen=5, profile=3)])
    fields = {i.field for i in validate(path).issues}
    assert fields == {"question", "chosen", "profile"}


def test_cr_only_line_endings_are_lines(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes("\r".join(json.dumps(record(id=f"u{i}")) for i in range(3)).encode() + b"\r")
    report = validate(path)
    assert report.ok and report.rows == 3
    assert [r.source.rsplit(":", 1)[1] for r in report.records] == ["1", "2", "3"]


def test_a_folder_reads_ndjson_and_lists_every_skipped_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_jsonl(tmp_path / "Art_and_Entertainment.jsonl", [record(id="a1")])
    write_jsonl(tmp_path / "Society_and_Culture.ndjson", [record(id="s1")])
    write_jsonl(tmp_path / "Art_and_Entertainment.jsonl.bak", [record(id="old")])
    (tmp_path / "nested").mkdir()
    write_jsonl(tmp_path / "nested" / "Lifestyle.jsonl", [record(id="n1")])
    (tmp_path / "README.txt").write_text("notes")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / ".hidden.jsonl").write_text("{")
    report = validate(tmp_path)
    assert report.ok
    assert [(r.domain, r.id) for r in report.records] == [
        ("Art_and_Entertainment", "a1"),
        ("Society_and_Culture", "s1"),
    ]
    skipped = {Path(i.file).name: i.code for i in report.skipped}
    assert skipped == {
        ".hidden.jsonl": "skipped-hidden",
        "Art_and_Entertainment.jsonl.bak": "skipped-backup",
        "README.txt": "skipped-file-type",
        "dangling": "skipped-file-type",
        "nested": "skipped-folder",
    }
    dangling = next(i for i in report.skipped if i.file.endswith("dangling"))
    assert "broken symbolic link" in dangling.message

    assert main(["validate", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "OK: 2 records in 2 file(s); 0 warning(s), 5 path(s) skipped." in out
    assert f"{tmp_path / 'nested'}: skipped: a sub-folder" in err
    assert main(["validate", str(tmp_path), "--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert {Path(s["path"]).name for s in payload["skipped"]} == set(skipped)


def test_null_optional_fields_are_errors_like_any_wrong_type(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "d.jsonl",
        [{**record(id="a"), "rubric_aspects": None}, {**record(id="b"), "narrative": None}],
    )
    got = [(i.record_id, i.field, i.code) for i in validate(path).issues]
    assert got == [("a", "rubric_aspects", "wrong-type"), ("b", "narrative", "wrong-type")]


def test_eval_data_path_rejects_a_lone_surrogate_before_datasets(tmp_path: Path) -> None:
    from prbench.harness import tasks

    path = write_jsonl(tmp_path / "d.jsonl", [record(rejected="Keep it cold \udbff.")])
    kwargs = {
        "prbench_domain": tasks.ALL_DOMAINS,
        "prbench_condition": "noprofile",
        "prbench_default_data": "sample",
        "prbench_data": str(path),
    }
    tasks.reset()
    try:
        with pytest.raises(RecordValidationError) as err:
            tasks.load_docs(**kwargs)
    finally:
        tasks.reset()
    assert f"{path}:1: record 'u1': field 'rejected'" in str(err.value)
    assert "[lone-surrogate]" in str(err.value)


def test_custom_task_rows_keep_each_records_domain(tmp_path: Path) -> None:
    from prbench.harness import tasks

    write_jsonl(tmp_path / "Art_and_Entertainment.jsonl", [record(id="a1")])
    write_jsonl(tmp_path / "mixed.jsonl", [record(id="m1", domain="Society_and_Culture")])
    tasks.reset()
    try:
        docs = tasks.load_docs(
            prbench_domain=tasks.ALL_DOMAINS,
            prbench_condition="noprofile",
            prbench_default_data="sample",
            prbench_data=str(tmp_path),
        )["test"]
    finally:
        tasks.reset()
    assert [(d["id"], d["domain"], d["category"]) for d in docs] == [
        ("a1", "Art_and_Entertainment", "cooking"),
        ("m1", "Society_and_Culture", "cooking"),
    ]
