"""Record loading and validation, including a corpus of malformed inputs."""

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


# Each case: file name, raw bytes, expected (code, line, record id, field) of the first issue.
GOOD = json.dumps(record())
CASES: dict[str, tuple[str, bytes, tuple[str, int | None, str | None, str | None]]] = {
    "invalid-json": ("d.jsonl", b'{"id": "u1", "question": }\n', ("invalid-json", 1, None, None)),
    "truncated-json": (
        "d.jsonl",
        (GOOD + "\n" + GOOD.replace('"u1"', '"u2"')[:60]).encode(),
        ("truncated-json", 2, None, None),
    ),
    "bom": ("d.jsonl", b"\xef\xbb\xbf" + GOOD.encode() + b"\n", ("bom", 1, None, None)),
    "not-utf8": (
        "d.jsonl",
        GOOD.encode()
        + b"\n"
        + json.dumps(record(id="u2")).encode().replace(b"sourdough", b"sourd\xf6ugh")
        + b"\n",
        ("not-utf8", 2, None, None),
    ),
    "blank-line": (
        "d.jsonl",
        (GOOD + "\n\n" + json.dumps(record(id="u2")) + "\n").encode(),
        ("blank-line", 2, None, None),
    ),
    "not-object": ("d.jsonl", b'["u1", "a question"]\n', ("not-object", 1, None, None)),
    "missing-id": (
        "d.jsonl",
        json.dumps(record(id=None)).encode(),
        ("missing-field", 1, None, "id"),
    ),
    "missing-question": (
        "d.jsonl",
        json.dumps(record(question=None)).encode(),
        ("missing-field", 1, "u1", "question"),
    ),
    "empty-answer": (
        "d.jsonl",
        json.dumps(record(chosen="   ")).encode(),
        ("empty-answer", 1, "u1", "chosen"),
    ),
    "non-string-answer": (
        "d.jsonl",
        json.dumps(record(rejected=["a", "b"])).encode(),
        ("non-string-answer", 1, "u1", "rejected"),
    ),
    "null-answer": (
        "d.jsonl",
        json.dumps({**record(), "chosen": None}).encode(),
        ("non-string-answer", 1, "u1", "chosen"),
    ),
    "duplicate-id": (
        "d.jsonl",
        (GOOD + "\n" + GOOD + "\n").encode(),
        ("duplicate-id", 2, "u1", "id"),
    ),
    "identical-answers": (
        "d.jsonl",
        json.dumps(record(rejected=record()["chosen"])).encode(),
        ("identical-answers", 1, "u1", "rejected"),
    ),
    "profile-not-list": (
        "d.jsonl",
        json.dumps(record(profile="I like bread")).encode(),
        ("wrong-type", 1, "u1", "profile"),
    ),
    "profile-item-not-object": (
        "d.jsonl",
        json.dumps(record(profile=["just text"])).encode(),
        ("bad-profile-item", 1, "u1", "profile[0]"),
    ),
    "profile-item-without-text": (
        "d.jsonl",
        json.dumps(record(profile=[{"id": "p", "category": "Cooking"}])).encode(),
        ("bad-profile-item", 1, "u1", "profile[0].text"),
    ),
    "profile-duplicate-post-id": (
        "d.jsonl",
        json.dumps(record(profile=[{"id": "p", "text": "a"}, {"id": "p", "text": "b"}])).encode(),
        ("duplicate-post-id", 1, "u1", "profile[1].id"),
    ),
    "rubric-not-list": (
        "d.jsonl",
        json.dumps(record(rubric_aspects={"aspect": "x"})).encode(),
        ("wrong-type", 1, "u1", "rubric_aspects"),
    ),
    "rubric-item-without-aspect": (
        "d.jsonl",
        json.dumps(record(rubric_aspects=[{"evidence": "e"}])).encode(),
        ("bad-rubric-aspect", 1, "u1", "rubric_aspects[0].aspect"),
    ),
    "question-wrong-type": (
        "d.jsonl",
        json.dumps(record(question=42)).encode(),
        ("wrong-type", 1, "u1", "question"),
    ),
    "empty-file": ("d.jsonl", b"\n\n", ("empty-file", None, None, None)),
    "json-not-a-list": ("d.json", b'{"id": "u1"}', ("not-a-list", None, None, None)),
    "json-row-error": (
        "d.json",
        json.dumps([record(), record(id="u2", chosen=3)]).encode(),
        ("non-string-answer", 2, "u2", "chosen"),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_input_is_reported_precisely(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, raw, (code, line, rid, field) = CASES[case]
    path = tmp_path / name
    path.write_bytes(raw)
    report = validate(path)
    first = report.issues[0]
    assert (first.code, first.line, first.record_id, first.field) == (code, line, rid, field)
    assert first.file == str(path)
    with pytest.raises(RecordValidationError) as err:
        load_records(path)
    assert str(first) in str(err.value)

    assert main(["validate", str(path)]) == 1
    err_text = capsys.readouterr().err
    where = f"{path}:{line}" if line is not None and name.endswith(".jsonl") else str(path)
    assert where in err_text
    if line is not None and name.endswith(".json"):
        assert f"row {line}" in err_text
    if rid is not None:
        assert f"record {rid!r}" in err_text
    if field is not None:
        assert f"field {field!r}" in err_text
    assert f"[{code}]" in err_text


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
