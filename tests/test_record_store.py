"""The record store behind the task rows: one compact copy of the data, records back in samples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prbench.harness import record_store, task_options, task_rows, tasks
from prbench.records import Record, load_records
from tests._harness_fixtures import run_eval

NOPROFILE = "personalized_rewardbench_sample_art_and_entertainment_noprofile"
SWAPPED = "personalized_rewardbench_sample_art_and_entertainment_swapped"


@pytest.fixture(autouse=True)
def _fresh_task_state() -> None:
    tasks.reset()
    yield
    tasks.reset()


def _kwargs(domain: str = "Art_and_Entertainment", **more: Any) -> dict[str, Any]:
    return {"prbench_domain": domain, "prbench_condition": "noprofile",
            "prbench_default_data": "sample", **more}


def test_from_dict_reads_back_what_to_dict_wrote() -> None:
    records = load_records("sample")
    first = records[0]
    extra = Record(id="x", question="q?", profile=first.profile, chosen="a", rejected="b",
                   category="c", domain="d", narrative="n", rubric_aspects=first.rubric_aspects,
                   extra={"user_id": "u1", "note": [1, 2]}, source="f.jsonl:3")
    for record in [*records, extra]:
        text = json.dumps(record.to_dict(), ensure_ascii=False)
        assert Record.from_dict(json.loads(text), source=record.source) == record


def test_rows_carry_a_reference_and_the_store_gives_the_record() -> None:
    rows = task_rows.load_docs(**_kwargs())["test"]
    assert "record_ref" in rows.column_names and "record_json" not in rows.column_names
    by_id = {r.id: r for r in load_records("sample")}
    for row in rows:
        expected = json.dumps(by_id[row["id"]].to_dict(), ensure_ascii=False)
        assert record_store.record_json(row["record_ref"]) == expected
        assert record_store.record(row["record_ref"], row["source"]) == by_id[row["id"]]
    with pytest.raises(record_store.UnknownRecordError, match="not in the data"):
        record_store.record_json("0123456789abcdef:0")


def test_one_load_per_source_and_row_columns_share_its_buffers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import prbench.records as records

    calls: list[str] = []
    real = records.stream_records

    def counting(source: Any, *args: Any, **kwargs: Any) -> int:
        calls.append(str(source))
        return real(source, *args, **kwargs)

    monkeypatch.setattr(records, "stream_records", counting)
    every_domain = task_options.ALL_DOMAINS

    def rows(**kwargs: Any) -> Any:
        return task_rows.build_rows(task_options.parse_request(_kwargs(**kwargs)))

    every = rows(domain=every_domain)
    profile = rows(domain=every_domain, prbench_condition="profile", prbench_profile="bm25")
    one = rows(domain="Society_and_Culture")
    assert calls == ["sample"]  # three tasks, one read of the data

    def address(table: Any, name: str) -> int:
        return table.column(name).chunks[0].buffers()[2].address

    # the answers are the store's own bytes in every task: no per-task copy of the text
    for name in ("question", "chosen", "rejected"):
        assert address(every, name) == address(profile, name) == address(one, name)
    assert one.num_rows == 15 and set(one.column("domain").to_pylist()) == {"Society_and_Culture"}


def test_lm_eval_keeps_no_copy_of_the_rows_and_requests_hold_no_record() -> None:
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_defaults=False, include_path=tasks.task_dirs())
    task = manager.load([NOPROFILE])["tasks"][NOPROFILE]
    assert list(task.sampler.df) == []  # no few-shot pool: lm-eval's default copies every row
    task.build_all_requests()
    docs = {id(inst.doc): inst.doc for inst in task.instances}
    assert len(docs) == 15
    assert all("record_json" not in d and str(d["record_ref"]).count(":") == 1
               for d in docs.values())


def test_samples_files_carry_the_record_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_eval(
        ["eval", "--tasks", f"{NOPROFILE},{SWAPPED}", "--model_args", "scorer=length",
         "--metadata", json.dumps({"prbench_profile": "bm25"}),
         "--output_path", str(tmp_path / "out"), "--log_samples"],
        capsys,
    )
    assert code == 0, err
    by_id = {r.id: r for r in load_records("sample")}
    for task in (NOPROFILE, SWAPPED):
        (path,) = (tmp_path / "out").rglob(f"samples_{task}_*.jsonl")
        samples = [json.loads(line) for line in path.read_text().splitlines()]
        assert len(samples) == 15
        for sample in samples:
            doc = sample["doc"]
            assert "record_ref" not in doc and "record_json" in doc
            if task == NOPROFILE:  # in the reference's place: the rows' last column
                assert list(doc)[-1] == "record_json"
            record = by_id[doc["id"]]
            if task == SWAPPED:  # the record as the builder read it: the donor's posts
                donor = by_id[doc["profile_donor"]]
                assert doc["profile_donor"] != doc["id"]
                record = Record(**{**record.__dict__, "profile": donor.profile})
            assert doc["record_json"] == json.dumps(record.to_dict(), ensure_ascii=False)
