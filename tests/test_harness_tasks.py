from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prbench.harness import profile_rows, task_options, task_rows, tasks
from prbench.harness.record_store import record_json
from prbench.options import OptionsError
from prbench.records import DOMAINS, RecordValidationError
from tests._records_fixtures import record, write_jsonl

SAMPLE_GROUPS = ("personalized_rewardbench_sample", "personalized_rewardbench_sample_noprofile")


@pytest.fixture(autouse=True)
def _fresh_task_state() -> None:
    tasks.reset()
    yield
    tasks.reset()


def _kwargs(domain: str = "Art_and_Entertainment", condition: str = "noprofile", **more):
    base = {
        "prbench_domain": domain,
        "prbench_condition": condition,
        "prbench_default_data": "sample",
        # what lm-eval merges in from --model_args and the YAML metadata: ignored here
        "scorer": "length",
        "version": 1.0,
        "config_source": "x.yaml",
    }
    base.update(more)
    return base


def test_builtin_task_dir_is_the_checkout_folder_and_a_registered_plugin_dir() -> None:
    root = tasks.builtin_task_dir()
    assert root == Path(__file__).resolve().parent.parent / "tasks"
    assert str(root) in tasks.task_dirs()
    from prbench.plugins import get_registry

    entries = [d for d in get_registry().task_dirs if d[0] == str(root)]
    assert entries and entries[0][2] == "prbench.tasks"


def test_plugin_task_dirs_are_listed(tmp_path: Path) -> None:
    extra = tmp_path / "my_tasks"
    extra.mkdir()
    plugin = tmp_path / "taskplugin.py"
    plugin.write_text(
        "from prbench import hookimpl\n"
        "@hookimpl\n"
        "def register_task_dirs(register):\n"
        f"    register({str(extra)!r}, description='mine')\n",
        encoding="utf-8",
    )
    from prbench.plugins import get_registry

    get_registry([plugin])
    dirs = tasks.task_dirs()
    assert dirs[0] == str(tasks.builtin_task_dir())
    assert str(extra.resolve()) in dirs


def test_task_index_has_every_domain_condition_and_group() -> None:
    names = tasks.task_names()
    for family in ("personalized_rewardbench", "personalized_rewardbench_sample"):
        for suffix in ("", "_noprofile"):
            assert family + suffix in names
            for domain in DOMAINS:
                assert f"{family}_{domain.lower()}{suffix}" in names
    assert {"personalized_rewardbench_custom", "personalized_rewardbench_custom_noprofile"} <= names


def test_group_configs_aggregate_micro_and_macro() -> None:
    from lm_eval.tasks._index import TaskIndex
    from lm_eval.tasks._yaml_loader import load_yaml

    index = TaskIndex.build([tasks.builtin_task_dir()])
    for group in SAMPLE_GROUPS:
        cfg = load_yaml(index[group].yaml_path, resolve_func=False)
        weights = {a["metric"]: a["weight_by_size"] for a in cfg["aggregate_metric_list"]}
        assert weights["acc"] is True and weights["acc_macro"] is False
        assert len(cfg["task"]) == 3
    task_cfg = load_yaml(
        index["personalized_rewardbench_art_and_entertainment"].yaml_path, resolve_func=False
    )
    assert task_cfg["dataset_kwargs"]["prbench_default_data"] == "QiyaoMa/Personalized-RewardBench"
    assert task_cfg["output_type"] == "multiple_choice"
    assert task_cfg["target_delimiter"] == ""
    assert task_cfg["dataset_kwargs"]["prbench_default_profile_options"] == {"model": "contriever"}
    assert task_cfg["dataset_kwargs"]["prbench_default_profile_k"] == 10


def test_parse_request_validates_prbench_keys() -> None:
    req = task_options.parse_request(_kwargs(condition="profile", prbench_profile="bm25"))
    assert (req.builder, req.builder_options, req.source) == ("bm25", {"k": 5}, "sample")
    req = task_options.parse_request(
        _kwargs(
            condition="profile", prbench_profile_k=3,
            prbench_profile_options='{"k1": 1.2}', prbench_data="/data/x.jsonl",
        )
    )
    assert req.builder == "dense"
    assert req.builder_options == {"k1": 1.2, "k": 3}
    assert req.source == "/data/x.jsonl"
    # noprofile ignores the builder
    req = task_options.parse_request(_kwargs(prbench_profile="bm25"))
    assert (req.builder, req.builder_options) == ("none", {})
    with pytest.raises(OptionsError, match="did you mean 'prbench_data'"):
        task_options.parse_request(_kwargs(prbench_dta="x"))
    with pytest.raises(OptionsError, match="JSON object"):
        task_options.parse_request(_kwargs(condition="profile", prbench_profile_options="[1]"))
    with pytest.raises(OptionsError, match="prbench_condition"):
        task_options.parse_request(_kwargs(condition="sometimes"))


def test_load_docs_noprofile_rows() -> None:
    docs = task_rows.load_docs(**_kwargs())["test"]
    assert len(docs) == 15
    row = docs[0]
    assert row["domain"] == "Art_and_Entertainment"
    assert row["profile_text"] == "" and row["profile_builder"] == "none"
    assert row["profile_post_ids"] == []
    hidden = json.loads(record_json(row["record_ref"]))
    assert hidden["rubric_aspects"] and hidden["id"] == row["id"]
    assert tasks.doc_to_text(row) == f"Question: {row['question']}\nAnswer: "
    assert tasks.doc_to_choice(row) == [row["chosen"], row["rejected"]]
    entry = profile_rows.PROVENANCE[-1]
    assert entry["condition"] == "noprofile" and entry["n_records"] == 15
    hashes = entry["file_hashes"]
    assert len(hashes) == 3 and all(len(h) == 64 for h in hashes.values())


def test_load_docs_profile_condition_keeps_k_posts() -> None:
    pending = task_rows.load_docs(
        **_kwargs(condition="profile", prbench_profile="bm25", prbench_profile_k=2)
    )["test"]
    assert set(pending["profile_status"]) == {"pending"}
    assert profile_rows.PROVENANCE[-1]["profile_builder"]["n_built"] == 0
    # without a prbench model open, the prompt builds the row's profile (any lm-eval model)
    for row in pending:
        assert tasks.doc_to_text(row).startswith("Earlier posts by the user:\nPost 1")
    docs = profile_rows.process_docs(pending)
    assert set(docs["profile_status"]) == {"built"}
    for row in docs:
        assert 1 <= len(row["profile_post_ids"]) <= 2
        assert row["profile_builder"].startswith("bm25(")
        assert "k=2" in row["profile_builder"]
        assert row["profile_text"].startswith("Post 1 (Category: ")
        assert tasks.doc_to_text(row).startswith("Earlier posts by the user:\nPost 1")
    assert profile_rows.PROVENANCE[-1]["profile_builder"]["options"]["k"] == 2


def test_builder_without_k_ignores_it(caplog: pytest.LogCaptureFixture) -> None:
    docs = task_rows.load_docs(
        **_kwargs(condition="profile", prbench_profile="all",
                  prbench_profile_options={"max_tokens": 40})
    )["test"]
    profile_rows.prepare_profiles(list(docs), build=True)
    docs = profile_rows.process_docs(docs)
    assert set(docs["profile_status"]) == {"built"}
    assert all(row["profile_tokens"] <= 40 for row in docs)
    assert "has no option 'k'" in caplog.text


def test_custom_file_domains(tmp_path: Path) -> None:
    data = write_jsonl(
        tmp_path / "mine.jsonl",
        [record(id="a1", domain="Society_and_Culture"), record(id="a2")],
    )
    docs = task_rows.load_docs(**_kwargs(domain="Society_and_Culture", prbench_data=str(data)))
    assert [r["id"] for r in docs["test"]] == ["a1"]
    with pytest.raises(OptionsError, match=r"no record of domain 'Art_and_Entertainment'.*mine"):
        task_rows.load_docs(**_kwargs(prbench_data=str(data)))
    every = task_rows.load_docs(**_kwargs(domain=task_options.ALL_DOMAINS, prbench_data=str(data)))
    assert [r["id"] for r in every["test"]] == ["a1", "a2"]


def test_invalid_data_stops_with_the_validation_message(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "Art_and_Entertainment.jsonl", [record(chosen=7)])
    with pytest.raises(RecordValidationError) as err:
        task_rows.load_docs(**_kwargs(prbench_data=str(tmp_path)))
    text = str(err.value)
    assert f"{data}:1" in text and "'chosen'" in text and "record 'u1'" in text


def test_process_results_strict() -> None:
    doc = {"id": "x"}
    assert tasks.process_results(doc, [(1.0, False), (1.0, False)]) == {
        "acc": 0.0, "acc_macro": 0.0, "tie": 1.0, "margin": 0.0, "invalid": 0.0,
    }
    out = tasks.process_results(doc, [(2.0, False), (0.5, False)])
    assert out["acc"] == 1.0 and out["margin"] == 1.5
    out = tasks.process_results(doc, [(float("nan"), False), (0.5, False)])
    assert out["acc"] == 0.0 and out["invalid"] == 1.0
    with pytest.raises(ValueError, match="expected 2 results"):
        tasks.process_results(doc, [(1.0, False)])


def test_hub_provenance_records_the_revision_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # without prbench_revision the pinned revision is read, and the manifest must say which
    import prbench.records as records

    sample = records.load_records("sample")
    asked: list[Any] = []

    def fake_hub(source: str, on_record: Any, **kwargs: Any) -> int:
        asked.append((source, kwargs))
        for item in sample:
            on_record(item)
        return len(sample)

    monkeypatch.setattr(records, "stream_records", fake_hub)
    hub = "QiyaoMa/Personalized-RewardBench"
    task_rows.build_rows(task_options.parse_request(_kwargs(prbench_default_data=hub)))
    assert asked[0][0] == hub
    entry = profile_rows.PROVENANCE[-1]
    assert entry["revision"] == records.HUB_REVISION and entry["split"] == "test"
    task_rows.build_rows(
        task_options.parse_request(_kwargs(prbench_default_data=hub, prbench_revision="abc")))
    assert profile_rows.PROVENANCE[-1]["revision"] == "abc"


def _published_kwargs(**more: Any) -> dict[str, Any]:
    from lm_eval.tasks._yaml_loader import load_yaml

    path = tasks.builtin_task_dir() / "personalized_rewardbench" / "published" / (
        "personalized_rewardbench_art_and_entertainment.yaml"
    )
    return {**load_yaml(path, resolve_func=False)["dataset_kwargs"], **more}


def test_published_tasks_retrieve_top10_with_contriever_by_default() -> None:
    req = task_options.parse_request(_published_kwargs())
    assert (req.builder, req.builder_options) == ("dense", {"model": "contriever", "k": 10})
    assert task_options.parse_request(_kwargs(condition="profile")).builder_options == {"k": 5}


def test_user_profile_keys_override_the_task_defaults() -> None:
    req = task_options.parse_request(_published_kwargs(prbench_profile_k=3))
    assert req.builder_options == {"model": "contriever", "k": 3}
    req = task_options.parse_request(
        _published_kwargs(prbench_profile_options='{"model": "minilm", "similarity": "cosine"}')
    )
    assert req.builder_options == {"model": "minilm", "similarity": "cosine", "k": 10}
    # another builder does not inherit options meant for the task's dense retriever
    req = task_options.parse_request(_published_kwargs(prbench_profile="bm25"))
    assert (req.builder, req.builder_options) == ("bm25", {"k": 5})


def test_task_profile_reads_a_results_config() -> None:
    config = {"dataset_kwargs": _published_kwargs(), "metadata": {"version": 1.0}}
    assert task_options.task_profile(config) == ("dense", {"model": "contriever", "k": 10})
    config["metadata"]["prbench_profile_k"] = 7
    assert task_options.task_profile(config)[1]["k"] == 7


@pytest.mark.parametrize(
    ("value", "message"),
    [("{not json", "prbench_profile_options: invalid JSON object"),
     ("[1, 2]", "prbench_profile_options: expected a JSON object")],
)
def test_profile_options_must_be_a_json_object(value: str, message: str) -> None:
    with pytest.raises(OptionsError, match=message):
        task_options.parse_request(_kwargs(condition="profile", prbench_profile_options=value))
