"""Two processes (accelerate, lm-eval's data-parallel path) give the one-process accuracy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prbench.harness import tasks
from tests._harness_fixtures import PYTHON, results_and_manifest, run, run_eval, subprocess_env

GROUP = "personalized_rewardbench_sample_noprofile"


@pytest.mark.slow
def test_two_cpu_processes_match_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks.reset()
    eval_args = ["eval", "--tasks", GROUP, "--model_args", "scorer=random,seed=3"]
    code, _, _ = run_eval([*eval_args, "--output_path", str(tmp_path / "one")], capsys)
    assert code == 0
    one, _, _ = results_and_manifest(tmp_path / "one")

    # accelerate 1.x starts CPU worker processes through its torchrun path (`--multi_gpu`) on a
    # machine without GPUs; `--cpu --num_processes N` alone starts N processes only under MPI.
    accelerate = Path(PYTHON).parent / "accelerate"
    cmd = [
        str(accelerate), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
        "-m", "prbench.cli", *eval_args, "--output_path", str(tmp_path / "two"),
    ]
    env = subprocess_env(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    out = run(cmd, env=env, cwd=tmp_path, timeout=400)
    two, manifest, path = results_and_manifest(tmp_path / "two")
    assert manifest["scorer"] is not None
    info = json.loads(path.read_text())["config"]["prbench"]
    assert info["world_size"] == 2, out[-2000:]
    assert info["scorer"]["scored"] < 90  # rank 0 scored only its shard
    for task, values in one["results"].items():
        assert two["results"][task]["acc,none"] == pytest.approx(values["acc,none"]), task
        assert two["results"][task]["tie,none"] == pytest.approx(values["tie,none"])
    for task, counts in one["n-samples"].items():
        assert two["n-samples"][task] == counts
    assert "micro (pairs)" in out
