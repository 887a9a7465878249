from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest

from prbench.harness import profile_rows, tasks
from prbench.harness.lm import PRBenchLM, parse_batch_size
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


def test_model_args_win_over_lm_eval_defaults(plugin: Path) -> None:
    # lm-eval passes its --device default (cuda:0) and --batch_size beside --model_args
    lm = PRBenchLM.create_from_arg_string(
        "scorer=counting,device=cpu,batch_size=3", {"device": "cuda:0", "batch_size": 8}
    )
    assert lm.options.device == "cpu" and lm.options.batch_size == 3
    lm = PRBenchLM.create_from_arg_obj({"scorer": "counting"}, {"batch_size": 5, "device": None})
    assert lm.options.batch_size == 5


def test_pretrained_reaches_a_scorer_that_has_it() -> None:
    lm = PRBenchLM(scorer="embedding-similarity", pretrained="/models/mine", device="cpu")
    assert lm.options.pretrained == "/models/mine"
    assert lm._runtime is None  # nothing is loaded until something is scored


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
    # the rows' profiles were pending; the adapter built exactly the two requested
    assert requests[0].doc["profile_status"] == "pending"
    view = profile_rows.row_view(requests[0].doc)
    assert profiles[0] == view.text and len(view.items) == 2
    assert profile_rows.PROVENANCE[-1]["profile_builder"]["n_built"] == 2


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


# -- the runtime behind the adapter ---------------------------------------------------------------

RUNTIME_PLUGIN = '''
import dataclasses
import json
from prbench import hookimpl


@dataclasses.dataclass(frozen=True)
class Options:
    log: str = ""
    progress: bool = True


class Remembering:
    def __init__(self, options):
        self.options = options

    def _log(self, **event):
        with open(self.options.log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(event) + "\\n")

    def score(self, requests):
        self._log(kind="score", n=len(requests))
        return [float(len(r.response)) for r in requests]

    def fingerprint(self):
        return "remembering-v1"

    def describe(self):
        return {"model": "remembering", "progress": self.options.progress}

    def close(self):
        self._log(kind="close")


@hookimpl
def register_scorers(register):
    register("remembering", Remembering, options=Options, description="test: cached, closable")
'''


@pytest.fixture
def runtime_plugin(tmp_path: Path) -> Path:
    path = tmp_path / "runtime_test_plugin.py"
    path.write_text(RUNTIME_PLUGIN, encoding="utf-8")
    get_registry([path])
    return path


def test_runtime_options_cache_and_describe(runtime_plugin: Path, tmp_path: Path) -> None:
    log, db = tmp_path / "calls.jsonl", tmp_path / "scores.sqlite"
    requests = _instances(TASK, limit=4)
    lm = PRBenchLM(scorer="remembering", log=str(log), cache_path=str(db), chunk_size="5",
                   progress="false")
    assert lm.runtime_options.chunk_size == 5 and lm.options.progress is False
    first = lm.loglikelihood(requests)
    # 8 answers, two per (question, profile): chunks of at most 5 never split a pair
    assert [e["n"] for e in read_log(log)] == [4, 4]
    info = lm.describe()["scorer"]["runtime"]
    assert info["fingerprint"] == "remembering-v1" and info["runtime"]["chunk_size"] == 5
    assert info["runtime"]["cache_path"] == str(db) and info["stats"]["computed"] == 8
    assert info["scorer"] == {"model": "remembering", "progress": False}
    lm.close()
    assert read_log(log)[-1] == {"kind": "close"}
    lm.close()
    assert [e["kind"] for e in read_log(log)].count("close") == 1
    again = PRBenchLM(scorer="remembering", log=str(log), cache_path=str(db), progress="false")
    assert again.loglikelihood(requests) == first
    assert again.describe()["scorer"]["runtime"]["stats"]["cache_hits"] == 8
    assert [e["kind"] for e in read_log(log)].count("score") == 2, "nothing recomputed"
    off = PRBenchLM(scorer="remembering", log=str(log), cache="false", progress="false")
    off.loglikelihood(requests)
    assert off.describe()["scorer"]["runtime"]["runtime"]["cache"] is False
    with pytest.raises(OptionsError, match=r"unknown option 'chunksize'.*'chunk_size'"):
        PRBenchLM(scorer="remembering", chunksize=3)


def test_scorer_closed_at_exit_of_plain_lm_eval_use(runtime_plugin: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests._harness_fixtures import subprocess_env

    log = tmp_path / "calls.jsonl"
    script = (
        "from prbench.plugins import get_registry\n"
        f"get_registry([{str(runtime_plugin)!r}])\n"
        "from prbench.harness.lm import PRBenchLM\n"
        f"lm = PRBenchLM(scorer='remembering', log={str(log)!r}, cache='false', progress='0')\n"
        "lm.runtime\n"
        "print('done')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], env=subprocess_env(),
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_log(log) == [{"kind": "close"}]


def test_lm_eval_default_device_is_silent(caplog: pytest.LogCaptureFixture,
                                          monkeypatch: pytest.MonkeyPatch, plugin: Path) -> None:
    import torch

    from prbench.devices import DeviceError

    get_registry([str(plugin)])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr("sys.argv", ["lm_eval", "run", "--model", "prbench"])
    with caplog.at_level("DEBUG"):  # lm-eval's default: nobody asked for CUDA
        assert PRBenchLM(scorer="counting", device="cuda:0").device == "cpu"
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    assert PRBenchLM(scorer="counting").device == "cpu"  # none given
    monkeypatch.setattr("sys.argv", ["lm_eval", "run", "--device", "cuda:0"])
    with pytest.raises(DeviceError, match=r"--device='cuda:0' asks for CUDA"):
        PRBenchLM(scorer="counting", device="cuda:0")  # asked for: never a silent CPU run


def test_runtime_describe_lands_in_the_manifest(runtime_plugin: Path, tmp_path: Path) -> None:
    from prbench.harness.manifest import build_manifest

    lm = PRBenchLM(scorer="remembering", log=str(tmp_path / "calls.jsonl"),
                   cache_path=str(tmp_path / "s.sqlite"), progress="false")
    lm.loglikelihood(_instances(TASK, limit=2))
    results = {"config": {"model": "prbench", **lm.get_model_info()}}
    doc = build_manifest(results, argv=["prbench", "eval"], results_path=None, summary=None)
    runtime = doc["scorer"]["runtime"]
    assert runtime["fingerprint"] == "remembering-v1"
    assert runtime["scorer"]["model"] == "remembering" and runtime["stats"]["computed"] == 4
    assert runtime["runtime"]["cache_path"] == str(tmp_path / "s.sqlite")
