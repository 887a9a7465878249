"""Data parallel runs (accelerate, 2 CPU processes on gloo) write the files of one process.

The unit tests split lists the way lm-eval 0.4.13 splits documents over ranks (document ``i`` to
rank ``i mod N``) and check that :mod:`prbench.harness.data_parallel` puts them back; the slow
tests launch real 2-process runs and compare their samples files byte for byte with a
one-process run.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from prbench.harness import data_parallel as dp
from tests._harness_fixtures import (
    PYTHON,
    results_and_manifest,
    run,
    run_eval,
    subprocess_env,
)


def _split(items: list[Any], n: int) -> list[list[Any]]:
    """lm-eval's split: item ``i`` goes to rank ``i mod n``."""
    return [items[r::n] for r in range(n)]


def _chain(parts: list[Any], task: str, key: Any = None) -> list[Any]:
    """What lm-eval does with the gathered parts: concatenate them rank by rank."""
    if key is None:
        return list(itertools.chain.from_iterable(p[task] for p in parts))
    return list(itertools.chain.from_iterable(p[task][key] for p in parts))


# -- order, padding and counts (fast) ---------------------------------------------------------


@pytest.mark.parametrize("n_items", [0, 1, 5, 6, 7])
@pytest.mark.parametrize("world", [2, 3])
def test_round_robin_undoes_the_split(n_items: int, world: int) -> None:
    items = list(range(n_items))
    assert dp.round_robin(_split(items, world)) == items


def test_round_robin_refuses_lengths_no_split_gives() -> None:
    assert dp.round_robin([[0], [1, 3]]) is None  # rank 1 cannot hold more than rank 0
    assert dp.round_robin([[0, 2, 4], [1]]) is None  # nor two fewer


def test_gathered_samples_and_metrics_come_back_in_document_order() -> None:
    n, world = 7, 2
    samples = {
        "t1": [{"doc_id": i, "filter": "none", "resps": [[i]]} for i in range(n)],
        "t2": [{"doc_id": i, "filter": "none"} for i in range(3)],
    }
    metrics = {
        "t1": {("acc", "none"): [i % 2 for i in range(n)], ("margin", "none"): [i * 0.1 for i in
                                                                              range(n)]},
        "t2": {("acc", "none"): [1, 0, 1]},
    }
    shard_samples = [
        {t: _split(v, world)[r] for t, v in samples.items()} for r in range(world)
    ]
    shard_metrics = [
        {t: {k: _split(v, world)[r] for k, v in m.items()} for t, m in metrics.items()}
        for r in range(world)
    ]
    # without the merge, lm-eval's concatenation is rank by rank
    assert [s["doc_id"] for s in _chain(shard_samples, "t1")] == [0, 2, 4, 6, 1, 3, 5]

    merged = dp.merge_gathered(shard_samples)
    assert len(merged) == world
    for task, expected in samples.items():
        assert _chain(merged, task) == expected
    merged_metrics = dp.merge_gathered(shard_metrics)
    for task, values in metrics.items():
        for key, expected in values.items():
            assert _chain(merged_metrics, task, key) == expected


def test_metric_only_some_documents_report_keeps_every_value() -> None:
    # "flips" is reported by documents 1 and 2 only: its order cannot be recovered, but no value
    # is lost and a rank without it does not break lm-eval's per-rank look-up
    shards = [
        {"t": {("acc", "none"): [1, 1, 0], ("flips", "none"): [5]}},
        {"t": {("acc", "none"): [0, 0]}},
    ]
    merged = dp.merge_gathered(shards)
    assert _chain(merged, "t", ("acc", "none")) == [1, 0, 1, 0, 0]
    assert _chain(merged, "t", ("flips", "none")) == [5]


def test_other_gathered_objects_pass_through() -> None:
    assert dp.merge_gathered([1, 2]) == [1, 2]
    assert dp.merge_gathered([{"x": 1}]) == [{"x": 1}]


def test_padding_copies_found_and_their_responses_dropped() -> None:
    a = SimpleNamespace(repeats=1, resps=[])
    b = SimpleNamespace(repeats=1, resps=[])
    twice = SimpleNamespace(repeats=2, resps=[])
    cloned = [a, twice, twice, b, b, b]  # lm-eval padded b twice
    assert dp.padding(cloned) == [b]
    assert dp.padding([a, twice, twice, b]) == []
    for inst, score in zip(cloned, range(len(cloned)), strict=True):
        inst.resps.append(score)  # what lm-eval does with the responses
    dp.trim_padding(dp.padding(cloned))
    assert (a.resps, twice.resps, b.resps) == ([0], [1, 2], [3])


def test_runtime_stats_of_the_processes_add_up() -> None:
    merged = dp.merge_stats([
        {"requests": 18, "unique": 18, "cache_hits": 6, "chunk_size": 16,
         "cache_hit_rate": 1 / 3, "note": "rank0"},
        None,  # a process that scored nothing
        {"requests": 12, "unique": 12, "cache_hits": 0, "chunk_size": 8, "cache_hit_rate": 0.0,
         "note": "rank2"},
    ])
    assert merged == {"requests": 30, "unique": 30, "cache_hits": 6, "chunk_size": 8,
                      "cache_hit_rate": 0.2, "note": "rank0"}
    assert dp.merge_stats([None, None]) is None


def test_profiles_built_by_other_processes_count_in_the_provenance() -> None:
    from prbench.harness import profile_rows, tasks
    from prbench.profiles import lazy

    tasks.reset()
    entry: dict[str, Any] = {"profile_builder": {}}
    profile_rows.PROVENANCE.append(entry)
    try:
        profile_rows.track(entry, ["k1", "k2", "k3"])
        assert entry["profile_builder"]["status"] == lazy.STATUS_PENDING
        profile_rows.note_peer_profiles({"k2": lazy.STATUS_BUILT, "k3": lazy.STATUS_BUILT})
        assert entry["profile_builder"]["n_built"] == 2
        assert entry["profile_builder"]["status"] == lazy.STATUS_BUILT
    finally:
        tasks.reset()


def test_world_size_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert dp.world_size_from_env() == 1
    assert dp.start(None) is None  # not launched: no accelerator, no process group
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert dp.world_size_from_env() == 4
    monkeypatch.setenv("WORLD_SIZE", "many")
    assert dp.world_size_from_env() == 1


_EXIT_PROBE = """
import atexit
import torch.distributed as dist
# registered first, so it runs after every handler prbench registers (atexit runs them in reverse)
atexit.register(lambda: print("group alive at exit:", dist.is_initialized(), flush=True))
from prbench.harness import data_parallel
data_parallel.world_size_from_env = lambda: 2  # as under a launcher; the group itself has one rank
accelerator = data_parallel.start("cpu")
print("group up:", dist.is_initialized(), flush=True)
"""


def test_the_process_group_is_destroyed_before_the_interpreter_exits(tmp_path: Path) -> None:
    # A process group left alive is torn down during interpreter finalization, where a gloo
    # worker thread that still holds the last collective's work aborts the process ("terminate
    # called without an active exception", rank 1 under load). start() has it destroyed at exit.
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = subprocess_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", LOCAL_RANK="0",
                         WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", OMP_NUM_THREADS="1",
                         CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-c", _EXIT_PROBE], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["group up: True", "group alive at exit: False"], (
        done.stdout + done.stderr[-3000:])


# -- real 2-process runs (slow) ---------------------------------------------------------------

#: the bound on one run, one process or two: a guard against a hung run, not a speed check. Plain
#: `lm_eval` indexes lm-eval's ~14.7k tasks before it starts (measured up to ~5 min at load 12-18
#: on 2 cores), so 300 s cut a healthy one-process reference run short at load ~17
RUN_TIMEOUT = 900


def _launch_two(args: list[str], *, cwd: Path, cache: Path) -> str:
    """``accelerate launch`` 2 CPU processes (gloo) running ``args`` (after ``-m``).

    accelerate 1.x starts CPU worker processes through its torchrun path (``--multi_gpu``) on a
    machine without GPUs; ``--cpu --num_processes N`` alone starts one process unless under MPI.
    """
    accelerate = Path(PYTHON).parent / "accelerate"
    cmd = [
        str(accelerate), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
        "-m", *args,
    ]
    env = subprocess_env(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1",
                         PRBENCH_CACHE_DIR=str(cache))
    return run(cmd, env=env, cwd=cwd, timeout=RUN_TIMEOUT)


def _samples(output: Path) -> dict[str, str]:
    """The samples files under ``output``: task name to file text.

    Each answer's share of its scorer call's wall time (``scored_input``'s ``time_s``) is the
    one thing a second run cannot repeat; it is blanked, every other byte is compared.
    """
    found = {p.name.rsplit("_", 1)[0]: re.sub(r'"time_s": [0-9.e+-]+', '"time_s": T',
                                              p.read_text(encoding="utf-8"))
             for p in output.rglob("samples_*.jsonl")}
    assert found, f"no samples files under {output}"
    return found


def _same_run(one: Path, two: Path) -> dict[str, Any]:
    """Assert the 2-process output equals the 1-process one; the 2-process provenance."""
    assert _samples(two) == _samples(one)  # byte for byte: scores, order, logged profiles
    res_one, man_one, _ = results_and_manifest(one)
    res_two, man_two, _ = results_and_manifest(two)
    for key in ("results", "groups", "n-samples", "task_hashes"):
        assert res_two.get(key) == res_one.get(key), key
    assert man_two["summary"] == man_one["summary"]
    assert man_two["data"] == man_one["data"]  # profiles built: counted over both processes
    stats_one = man_one["scorer"]["runtime"]["stats"]
    stats_two = man_two["scorer"]["runtime"]["stats"]
    for key in ("requests", "unique", "computed", "cache_hits"):
        assert stats_two[key] == stats_one[key], key
    info = res_two["config"]["prbench"]
    assert info["world_size"] == 2
    ranks = info["scorer"]["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(0 < r["scored"] < info["scorer"]["scored"] for r in ranks)  # each its own shard
    return info


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests._hf_fixtures import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("rm") / "m", arch="llama")


@pytest.mark.slow
def test_lm_eval_two_processes_write_the_one_process_files(tmp_path: Path, tiny_rm: Path) -> None:
    # hf-classifier reads the profiles (bm25, built per shard); 5 pairs per task leave the ranks
    # uneven (3 and 2), so lm-eval pads rank 1; both ranks write one fresh score cache. Prefix
    # sharing is off: which requests share a prompt depends on the shard, and the shared and the
    # plain forward agree only to ~1e-6, not bit for bit (see docs/scale.md, "Several GPUs")
    args = [
        "lm_eval", "--model", "prbench", "--model_args",
        f"scorer=hf-classifier,pretrained={tiny_rm},batch_size=4,prefix_sharing=off",
        "--tasks", "personalized_rewardbench_sample", "--limit", "5",
        "--metadata", json.dumps({"prbench_profile": "bm25", "prbench_profile_k": 3}),
        "--log_samples",
    ]
    env = subprocess_env(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1",
                         PRBENCH_CACHE_DIR=str(tmp_path / "cache1"))
    run([PYTHON, "-m", *args, "--output_path", str(tmp_path / "one")], env=env, cwd=tmp_path,
        timeout=RUN_TIMEOUT)
    _launch_two([*args, "--output_path", str(tmp_path / "two")], cwd=tmp_path,
                cache=tmp_path / "cache2")
    info = _same_run(tmp_path / "one", tmp_path / "two")
    assert info["scorer"]["scored"] == 30  # 3 tasks x 5 pairs x 2 answers, each scored once
    (data,) = {json.dumps(d["profile_builder"], sort_keys=True) for d in info["data"]
               if d.get("condition") == "profile"}
    assert json.loads(data)["n_built"] == 5


@pytest.mark.slow
def test_prbench_eval_two_processes_write_the_one_process_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from prbench.harness import tasks

    tasks.reset()
    args = ["eval", "--tasks", "personalized_rewardbench_sample_noprofile",
            "--model_args", "scorer=length", "--log_samples"]
    monkeypatch.setenv("PRBENCH_CACHE_DIR", str(tmp_path / "cache1"))
    code, _, _ = run_eval([*args, "--output_path", str(tmp_path / "one")], capsys)
    assert code == 0
    out = _launch_two(["prbench.cli", *args, "--output_path", str(tmp_path / "two")],
                      cwd=tmp_path, cache=tmp_path / "cache2")
    info = _same_run(tmp_path / "one", tmp_path / "two")
    assert info["scorer"]["scored"] == 90
    assert out.count("prbench summary") == 1  # rank 0 reports, rank 1 stays quiet
    assert out.count("manifest: ") == 1
