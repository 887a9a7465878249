"""Record loading and validation (the corpus of malformed inputs is in test_malformed_corpus)."""

from __future__ import annotations

import gc
import json
import os
import weakref
from pathlib import Path
from typing import Any

import pytest

from prbench.cli import main
from prbench.records import (
    DataSourceError,
    Record,
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
    from prbench.harness import task_options, task_rows, tasks

    path = write_jsonl(tmp_path / "d.jsonl", [record(rejected="Keep it cold \udbff.")])
    kwargs = {
        "prbench_domain": task_options.ALL_DOMAINS,
        "prbench_condition": "noprofile",
        "prbench_default_data": "sample",
        "prbench_data": str(path),
    }
    tasks.reset()
    try:
        with pytest.raises(RecordValidationError) as err:
            task_rows.load_docs(**kwargs)
    finally:
        tasks.reset()
    assert f"{path}:1: record 'u1': field 'rejected'" in str(err.value)
    assert "[lone-surrogate]" in str(err.value)


def test_custom_task_rows_keep_each_records_domain(tmp_path: Path) -> None:
    from prbench.harness import task_options, task_rows, tasks

    write_jsonl(tmp_path / "Art_and_Entertainment.jsonl", [record(id="a1")])
    write_jsonl(tmp_path / "mixed.jsonl", [record(id="m1", domain="Society_and_Culture")])
    tasks.reset()
    try:
        docs = task_rows.load_docs(
            prbench_domain=task_options.ALL_DOMAINS,
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


class _CountingReader:
    """A binary file handle that adds the size of every read to ``counts``."""

    def __init__(self, handle: Any, counts: list[int]) -> None:
        self._handle, self._counts = handle, counts

    def read(self, size: int = -1) -> bytes:
        data = self._handle.read(size)
        self._counts.append(len(data))
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)

    def __enter__(self) -> _CountingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.close()


def test_validate_streams_records_one_at_a_time_without_keeping_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prbench import jsonio

    monkeypatch.setattr(jsonio, "CHUNK_BYTES", 4096)
    path = write_jsonl(tmp_path / "d.jsonl", [record(id=f"u{i}") for i in range(200)])
    counts: list[int] = []
    real_open = Path.open

    def open_(self: Path, *args: Any, **kwargs: Any) -> Any:
        handle = real_open(self, *args, **kwargs)
        return _CountingReader(handle, counts) if self == path else handle

    monkeypatch.setattr(Path, "open", open_)
    alive: list[weakref.ref[Record]] = []
    read_before_first: list[int] = []

    def take(rec: Record) -> None:
        if not read_before_first:
            read_before_first.append(sum(counts))
        alive.append(weakref.ref(rec))

    report = validate(path, keep_records=False, on_record=take)
    gc.collect()
    assert report.ok and report.valid == 200 and report.records == []
    assert len(alive) == 200 and all(ref() is None for ref in alive)  # none kept anywhere
    # the first record arrives after a block or two, not after the whole file was read
    assert read_before_first[0] <= 2 * 4096 < path.stat().st_size
    assert max(counts) <= 4096


def test_block_boundaries_do_not_change_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prbench import jsonio

    rows = [json.dumps(record(id=f"u{i}")) for i in range(4)]
    data = (rows[0] + "\r\n" + rows[1] + "\r" + "\n" + rows[2] + "\r\r\n" + "{bad}\n" + rows[3])
    path = tmp_path / "d.jsonl"
    path.write_bytes(data.encode()[:-5])  # the last line is cut short

    def outcome() -> tuple[list[tuple[str, int | None]], list[str]]:
        report = validate(path)
        return [(i.code, i.line) for i in report.issues], [r.source for r in report.records]

    expected = outcome()
    assert expected[0] == [("blank-line", 4), ("invalid-json", 5), ("truncated-json", 6)]
    assert [s.rsplit(":", 1)[1] for s in expected[1]] == ["1", "2", "3"]
    for size in (1, 2, 3, 7, 64, 1000):
        monkeypatch.setattr(jsonio, "CHUNK_BYTES", size)
        assert outcome() == expected, size


def test_duplicate_ids_are_found_while_streaming(tmp_path: Path) -> None:
    long_id = "y" * 5000
    ids = ["a", "b", long_id, "c", "a", long_id, "b"]
    path = write_jsonl(tmp_path / "d.jsonl", [record(id=i) for i in ids])
    report = validate(path, keep_records=False)
    assert report.valid == 4 and report.records == []
    found = [(i.line, i.code) for i in report.issues]
    assert found == [(5, "duplicate-id"), (6, "duplicate-id"), (7, "duplicate-id")]
    assert f"first seen at {path}:3" in report.issues[1].message


def test_prbench_validate_does_not_keep_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import statistics

    import prbench.commands.validate as command

    rows = [record(id="a", chosen="one two three"), record(id="b"), record(id="c", profile=[])]
    path = write_jsonl(tmp_path / "Art_and_Entertainment.jsonl", rows)
    seen: list[tuple[dict[str, Any], Any]] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        report = validate(*args, **kwargs)
        seen.append((kwargs, report))
        return report

    monkeypatch.setattr(command, "validate", spy)
    assert main(["validate", str(path), "--format", "json"]) == 0
    ((kwargs, report),) = seen
    assert kwargs["keep_records"] is False and report.records == [] and report.valid == 3
    payload = json.loads(capsys.readouterr().out)
    (row,) = payload["domains"]
    recs = load_records(path)
    assert row["records"] == 3 and row["profile_min"] == 0 and row["profile_max"] == 2
    assert row["chosen_words"] == statistics.fmean(len(r.chosen.split()) for r in recs)
    assert row["chosen_longer"] == statistics.fmean(
        float(len(r.chosen.split()) > len(r.rejected.split())) for r in recs
    )


def test_compressed_files_in_a_folder_keep_their_domain(tmp_path: Path) -> None:
    import gzip
    import lzma

    body = (json.dumps(record(id="a1")) + "\n").encode()
    (tmp_path / "Art_and_Entertainment.jsonl.gz").write_bytes(gzip.compress(body))
    (tmp_path / "Society_and_Culture.json.xz").write_bytes(
        lzma.compress(json.dumps([record(id="s1")]).encode())
    )
    recs = load_records(tmp_path)
    assert [(r.domain, r.id) for r in recs] == [
        ("Art_and_Entertainment", "a1"),
        ("Society_and_Culture", "s1"),
    ]
    assert not is_hub_id("owner/d.jsonl.gz")


def test_statistics_of_no_records_print_a_bare_table() -> None:
    from prbench.analysis.dataset_stats import domain_stats, format_table

    assert domain_stats([]) == []
    assert format_table([]).splitlines()[0].startswith("domain")


def test_shown_escapes_and_cuts() -> None:
    from prbench.jsonio import shown, shown_path

    assert shown("a\nb") == "'a\\nb'"
    assert shown("x" * 61) == "'" + "x" * 60 + "'…(61 chars)"
    assert shown_path("d\u202eb.jsonl") == "d\\u202eb.jsonl"
    assert shown_path(Path("plain/d.jsonl")) == "plain/d.jsonl"


def test_normalised_comparison_never_changes_the_stored_text(tmp_path: Path) -> None:
    chosen = "Keep\u00a0it cold,\u200b then feed it."
    path = write_jsonl(tmp_path / "d.jsonl", [record(chosen=chosen)])
    assert load_records(path)[0].chosen == chosen


def test_a_line_with_several_duplicate_keys_counts_as_one_row(tmp_path: Path) -> None:
    row = record()
    text = json.dumps(row)[:-1] + ', "id": "u2", "chosen": "z"}'
    path = tmp_path / "d.jsonl"
    path.write_text(text + "\n" + json.dumps(record(id="u3")) + "\n")
    report = validate(path)
    assert [(i.line, i.field, i.code) for i in report.issues] == [
        (1, "id", "duplicate-key"),
        (1, "chosen", "duplicate-key"),
    ]
    assert report.rows == 2 and [r.id for r in report.records] == ["u3"]


def test_a_folder_path_that_does_not_exist_is_no_hub_id(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    """``no_such_dir/`` is a missing local folder, not a hub id with an empty name."""
    monkeypatch.chdir(tmp_path)
    assert not is_hub_id("no_such_dir/") and not is_hub_id("/name") and not is_hub_id("a/b/")
    assert is_hub_id("owner/name") and is_hub_id("Qiyao.Ma/Personalized-RewardBench_2")
    with pytest.raises(DataSourceError) as err:
        validate("no_such_dir/")
    assert str(err.value) == "no_such_dir/: no such folder"


def test_a_missing_hub_looking_path_says_no_local_folder_first(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataSourceError) as err:
        validate("data/mine")  # offline in the tests
    assert str(err.value).startswith("data/mine: no such local file or folder, and as a hub "
                                     "dataset id it cannot be loaded")


def test_a_misspelt_bundled_source_is_suggested(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "samples"]) == 1
    err = capsys.readouterr().err
    assert err == "error: samples: no such file or folder (did you mean 'sample', the bundled " \
                  "one?)\n"


def test_validate_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """``prbench validate ... --format json | head``: no BrokenPipeError traceback."""
    import subprocess
    import sys

    from tests._harness_fixtures import subprocess_env

    read, write = os.pipe()
    os.close(read)  # the reader has gone before the first line is written
    try:
        proc = subprocess.run([sys.executable, "-m", "prbench.cli", "validate", "sample",
                               "--format", "json"], stdout=write, stderr=subprocess.PIPE,
                              env=subprocess_env(), cwd=tmp_path, timeout=300, check=False)
    finally:
        os.close(write)
    err = proc.stderr.decode()
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert err == "" and proc.returncode == 1
