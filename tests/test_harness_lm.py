from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest

from prbench.harness import tasks
from prbench.harness.lm import PRBenchLM, parse_batch_size, resolve_device
from prbench.options import OptionsError
from prbench.plugins import UnknownComponentError, get_registry
from tests._harness_fixtures import read_log, write_plugin

TASK = "personalized_rewardbench_sample_art_and_entertainment_noprofile"
PROFILE_TASK = "personalized_rewardbench_sample_society_and_culture"


@pytest.fixture(autouse=True)
def _fresh_task_state() -> None:
    tasks.reset()
    yield
    tasks.reset()


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    path = write_plugin(tmp_path)
    get_registry([path])
    return path


def _instances(name: str, limit: int | None = None, **metadata: Any) -> list[Any]:
    from lm_eval.tasks import TaskManager

    manager = TaskManager(
        include_defaults=False, include_path=tasks.task_dirs(), metadata=dict(metadata)
    )
    task = manager.load([name])["tasks"][name]
    task.build_all_requests(limit=limit)
    return list(task.instances)


def test_batch_size_and_device_parsing() -> None:
    assert parse_batch_size("8") == 8
    assert parse_batch_size(4) == 4
    assert parse_batch_size("auto") is None and parse_batch_size("auto:4") is None
    assert parse_batch_size(None) is None
    with pytest.raises(OptionsError, match="batch_size"):
        parse_batch_size("lots")
    with pytest.raises(OptionsError, match="batch_size"):
        parse_batch_size("0")
    assert resolve_device("cpu") == "cpu"
    assert resolve_device(None) is None


def test_unknown_scorer_and_option_are_errors() -> None:
    with pytest.raises(UnknownComponentError, match="did you mean 'length'"):
        PRBenchLM(scorer="lenght")
    with pytest.raises(OptionsError, match="did you mean 'prefer'"):
        PRBenchLM(scorer="length", prefr="shorter")


def test_lm_eval_arguments_map_to_scorer_options(plugin: Path) -> None:
    import torch

    lm = PRBenchLM(scorer="counting", batch_size="8", device="cuda:0", pretrained="my-run")
    assert lm.options.batch_size == 8
    expected = "cuda:0" if torch.cuda.is_available() else "cpu"
    assert lm.options.device == expected and lm.device == expected
    assert lm.label == "my-run"  # counting has no pretrained option: a label only
    lm = PRBenchLM(scorer="counting", batch_size="auto")
    assert lm.options.batch_size == 16  # the scorer's own default
    # a scorer without device/batch options simply does not get them
    lm = PRBenchLM(scorer="length", batch_size="4", device="cuda:0")
    assert lm.options.prefer == "longer" and lm.device == "cpu"
    assert (lm.rank, lm.world_size) == (0, 1)
    # task options given in --model_args reach the tasks (lm-eval merges them), not the scorer
    lm = PRBenchLM(scorer="length", prbench_data="sample", prbench_profile_k=3)
    assert lm.options.unit == "words"


def test_pretrained_reaches_a_scorer_that_has_it() -> None:
    lm = PRBenchLM(scorer="embedding-similarity", pretrained="/models/mine", device="cpu")
    assert lm.options.pretrained == "/models/mine"
    assert lm._scorer is None  # nothing is loaded until something is scored


def test_one_batched_call_in_request_order(plugin: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    lm = PRBenchLM(scorer="counting", log=str(log))
    requests = _instances(TASK, limit=5)
    random.Random(0).shuffle(requests)
    results = lm.loglikelihood(requests)
    assert [r[1] for r in results] == [False] * len(requests)
    assert [r[0] for r in results] == [float(len(r.arguments[1])) for r in requests]
    events = read_log(log)
    assert len(events) == 1 and events[0]["n"] == 10
    assert events[0]["hidden"] == [False] * 10  # not a diagnostic: no hidden fields
    assert lm.calls == 1 and lm.scored == 10
    info = lm.get_model_info()["prbench"]
    assert info["scorer"]["id"] == "counting" and info["scorer"]["stats"] == {"counted": True}
    assert info["data"][0]["domain"] == "Art_and_Entertainment"


def test_duplicate_requests_are_scored_once(plugin: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    lm = PRBenchLM(scorer="counting", log=str(log))
    requests = _instances(TASK, limit=2)
    padded = requests + [requests[-1]] * 3  # lm-eval pads shards like this
    results = lm.loglikelihood(padded)
    assert len(results) == 7 and results[-1] == results[3]
    assert read_log(log)[0]["n"] == 4


def test_profile_view_reaches_the_scorer(plugin: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    lm = PRBenchLM(scorer="counting", log=str(log))
    requests = _instances(PROFILE_TASK, limit=2, prbench_profile="bm25", prbench_profile_k=2)
    lm.loglikelihood(requests)
    profiles = read_log(log)[0]["profiles"]
    assert all(p.startswith("Post 1 (Category: ") for p in profiles)
    assert profiles[0] == requests[0].doc["profile_text"]
    view = lm._view(requests[0].doc, __import__("json").loads(requests[0].doc["record_json"]))
    assert [i.id for i in view.items] == requests[0].doc["profile_post_ids"]


def test_only_diagnostics_see_hidden_fields(plugin: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    PRBenchLM(scorer="counting-oracle", log=str(log)).loglikelihood(_instances(TASK, limit=1))
    assert read_log(log)[0]["hidden"] == [True, True]
    oracle = PRBenchLM(scorer="oracle-rubric")
    scores = [s for s, _ in oracle.loglikelihood(_instances(TASK, limit=3))]
    assert scores[0] > scores[1]  # the chosen answer covers the hidden rubric


def test_pairwise_judge_gives_p_and_one_minus_p(plugin: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    requests = _instances(TASK, limit=3)
    failing = requests[4].doc["id"]  # two requests per pair: the third pair
    lm = PRBenchLM(scorer="fixed-judge", log=str(log), p=0.75, fail=failing)
    assert lm.pairwise
    results = [s for s, _ in lm.loglikelihood(requests)]
    assert results[:4] == [0.75, 0.25, 0.75, 0.25]
    assert math.isnan(results[4]) and math.isnan(results[5])
    events = read_log(log)
    assert len(events) == 1 and events[0]["n"] == 3
    assert events[0]["firsts"][0] == requests[0].doc["chosen"]
    assert lm.describe()["scorer"]["stats"] == {"failures": 1}
    out = tasks.process_results(requests[4].doc, [(results[4], False), (results[5], False)])
    assert out["invalid"] == 1.0 and out["acc"] == 0.0


def test_other_tasks_are_refused() -> None:
    from lm_eval.api.instance import Instance

    inst = Instance(
        request_type="loglikelihood", doc={"query": "q", "choices": ["a"]},
        arguments=("q", " a"), idx=0, metadata=("hellaswag", 0, 1),
    )
    lm = PRBenchLM(scorer="length")
    with pytest.raises(ValueError, match="lacks"):
        lm.loglikelihood([inst])
    with pytest.raises(NotImplementedError, match="cannot generate"):
        lm.generate_until([inst])
    with pytest.raises(NotImplementedError, match="perplexity"):
        lm.loglikelihood_rolling([inst])
    assert lm.loglikelihood([]) == []
