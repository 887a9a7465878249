"""The parts of ``--executor ray`` that need no cluster: resources, defaults, shards, records.

The real two-node cluster runs in tests/test_ray_executor.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from prbench.cluster import ClusterError, executor_info, task_options
from prbench.harness.sweep_file import SweepFileError, load_sweep
from prbench.harness.sweep_ray import default_resources, uses_device
from prbench.profiles.rank_shards import split_shards
from prbench.records import load_records

GRID = """
resources: {cpus: 2, memory: 8}
scorers:
  - {name: big, model_args: {scorer: embedding-similarity}, resources: {gpus: 1, memory: 16}}
  - {name: length, model_args: {scorer: length}}
conditions: [{name: none, tasks: personalized_rewardbench_sample_noprofile}]
"""


def _node(node_id: str, gpus: float, cpus: float, gib: float) -> dict:
    return {"NodeID": node_id, "NodeManagerAddress": "10.0.0.9", "Alive": True,
            "Resources": {"GPU": gpus, "CPU": cpus, "memory": gib * 2**30}}


def test_resources_per_file_and_per_scorer(tmp_path: Path) -> None:
    path = tmp_path / "grid.yaml"
    path.write_text(GRID, encoding="utf-8")
    sweep = load_sweep(path)
    assert sweep.scorers[0].resources == {"cpus": 2.0, "memory": 16.0, "gpus": 1.0}
    assert sweep.scorers[1].resources == {"cpus": 2.0, "memory": 8.0}
    # where a cell runs is not part of its definition: a finished cell stays finished
    plain = tmp_path / "plain.yaml"
    plain.write_text(GRID.replace("resources: {cpus: 2, memory: 8}\n", ""), encoding="utf-8")
    assert [c.fingerprint() for c in load_sweep(plain).cells()] == \
        [c.fingerprint() for c in sweep.cells()]


@pytest.mark.parametrize(("text", "message"), [
    ("resources: {gpu: 1}\n", r"resources: unknown key 'gpu' \(did you mean 'gpus'\?\); allowed: "
                              r"gpus, cpus, memory"),
    ("resources: {memory: 16GB}\n", r"resources.memory must be a number >= 0 \(GiB\), got '16GB'"),
    ("resources: 4\n", r"resources must be a mapping, got int"),
])
def test_bad_resources_are_one_error_naming_the_field(tmp_path: Path, text: str,
                                                      message: str) -> None:
    path = tmp_path / "grid.yaml"
    path.write_text(text + GRID.split("\n", 2)[2], encoding="utf-8")
    with pytest.raises(SweepFileError, match=message):
        load_sweep(path)


def test_default_resources_one_gpu_for_a_model_scorer_when_the_cluster_has_one() -> None:
    assert uses_device("scorer=embedding-similarity")
    assert not uses_device("scorer=embedding-similarity,device=cpu")
    assert not uses_device("scorer=length")
    assert default_resources({}, "scorer=embedding-similarity", 4) == {"cpus": 1.0, "gpus": 1.0}
    assert default_resources({}, "scorer=embedding-similarity", 0) == {"cpus": 1.0, "gpus": 0.0}
    assert default_resources({}, "scorer=length", 4) == {"cpus": 1.0, "gpus": 0.0}
    assert default_resources({"gpus": 2, "cpus": 8}, "scorer=length", 4) == \
        {"cpus": 8.0, "gpus": 2.0}


def test_a_request_no_node_meets_is_one_error_before_anything_runs() -> None:
    nodes = [_node("a" * 56, 0, 8, 30), _node("b" * 56, 1, 4, 60)]
    assert task_options({"gpus": 1, "cpus": 2, "memory": 40}, nodes, "cell x/y") == {
        "num_cpus": 2, "num_gpus": 1, "memory": 40 * 2**30}
    with pytest.raises(ClusterError, match=r"cell x/y asks for 2 GPU, 1 CPU, 0 GiB, which no node "
                                           r"of the cluster has \(10.0.0.9 \(aaaaaaaa\): 0 GPU"):
        task_options({"gpus": 2}, nodes, "cell x/y")


def test_executor_info_from_the_task_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRBENCH_EXECUTOR", raising=False)
    assert executor_info() == {"name": "local"}
    monkeypatch.setenv("PRBENCH_EXECUTOR", "ray")
    monkeypatch.setenv("PRBENCH_RAY_NODE", "abc123@127.0.0.1")
    assert executor_info() == {"name": "ray", "ray_node_id": "abc123",
                               "ray_node_ip": "127.0.0.1"}


def test_shards_are_whole_steps_in_order_with_stable_digests() -> None:
    records = load_records("sample")
    steps = [records[i:i + 5] for i in range(0, len(records), 5)]  # 9 steps
    shards = split_shards(steps, 2, {"model": "m"})
    assert [len(s.steps) for s in shards] == [4, 5] or [len(s.steps) for s in shards] == [5, 4]
    assert [r for s in shards for step in s.steps for r in step] == records
    assert [s.digest for s in split_shards(steps, 2, {"model": "m"})] == \
        [s.digest for s in shards]
    assert split_shards(steps, 2, {"model": "other"})[0].digest != shards[0].digest
    assert len(split_shards(steps[:1], 4, {"model": "m"})) == 1  # never a split step


def test_dry_run_names_what_each_cell_asks_of_a_node(tmp_path: Path, capsys) -> None:
    from tests._harness_fixtures import run_eval

    path = tmp_path / "grid.yaml"
    path.write_text(GRID, encoding="utf-8")
    code, stdout, err = run_eval(["sweep", str(path), "--dry_run"], capsys)
    assert code == 0, err
    assert "note: --executor ray: each cell of big asks for cpus=2, memory=16 GiB, gpus=1" \
        in stdout
    assert "note: --executor ray: each cell of length asks for cpus=2, memory=8 GiB" in stdout


class _Ref:
    def __init__(self, value: dict) -> None:
        self.value = value


class _FakeRay:
    """Stands in for a connected ``ray`` in the probe (fault injection only; the real cluster
    runs in tests/test_ray_executor.py): each "node" runs the probe task here, and the node named
    ``blind`` sees another folder at the same path, as a node without the shared mount would."""

    def __init__(self, nodes: list[dict], blind: str, elsewhere: Path,
                 monkeypatch: pytest.MonkeyPatch) -> None:
        self._nodes, self.blind, self.elsewhere, self.mp = nodes, blind, elsewhere, monkeypatch

    def nodes(self) -> list[dict]:
        return self._nodes

    def remote(self, fn):
        fake = self

        class Remote:
            def options(self, **kw):
                self.node = kw["scheduling_strategy"].node_id
                return self

            def remote(self, folder: str, token: str, driver_file: str) -> _Ref:
                import prbench.cluster as cluster

                fake.mp.setattr(cluster, "this_node", lambda: {"id": self.node, "ip": "10.0.0.9"})
                if self.node == fake.blind:
                    seen = fake.elsewhere / Path(folder).name
                    seen.mkdir(parents=True, exist_ok=True)
                    folder, driver_file = str(seen), str(seen / "driver.txt")
                return _Ref(fn(folder, token, driver_file))

        return Remote()

    def wait(self, refs: list, num_returns: int, timeout: float) -> tuple[list, list]:
        return refs, []

    def get(self, ref: _Ref) -> dict:
        return ref.value


def test_a_node_that_cannot_see_the_output_folder_is_one_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray", reason='Ray is not installed (pip install "prbench[cluster]")')
    from prbench.cluster import check_shared_folder

    nodes = [_node("a" * 56, 0, 1, 1), _node("b" * 56, 0, 1, 1)]
    out = tmp_path / "out"
    seen = check_shared_folder(_FakeRay(nodes, "none", tmp_path / "x", monkeypatch), out)
    assert seen == nodes and list(out.iterdir()) == []  # the probe files are gone
    fake = _FakeRay(nodes, "b" * 56, tmp_path / "elsewhere", monkeypatch)
    with pytest.raises(ClusterError, match=(
            rf"node 10.0.0.9 \(bbbbbbbb\) cannot share the output folder {out}: .*driver.txt.*; "
            r"put -o/--output_path on storage every node mounts at the same path")):
        check_shared_folder(fake, out)


def test_reuse_model_and_ray_together_are_one_error(tmp_path: Path, capsys) -> None:
    from tests._harness_fixtures import run_eval

    path = tmp_path / "grid.yaml"
    path.write_text(GRID, encoding="utf-8")
    code, _, err = run_eval(["sweep", str(path), "-o", str(tmp_path / "out"), "--executor", "ray",
                             "--reuse_model"], capsys)
    assert code == 1
    assert err.strip().splitlines() == [
        "error: --reuse_model runs cells inside this process; with --executor ray each cell is a "
        "task on a node: drop one of the two"]
    assert not (tmp_path / "out").exists()


def test_setup_installs_the_pinned_cluster_extra(tmp_path: Path) -> None:
    import tomllib

    from tests.test_setup_targets import REPO, _dry_run

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert extras["cluster"] == ["ray==2.60.0"]
    installs = [line for line in _dry_run("setup", tmp_path).splitlines() if "pip install" in line]
    assert any(",cluster," in line and "-c constraints-cpu.txt" in line for line in installs)


def test_a_task_runs_at_the_drivers_niceness_only_as_far_as_allowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ray's workers run at 15; a task lowers to the driver's where CAP_SYS_NICE/RLIMIT allow."""
    from prbench import cluster

    monkeypatch.setattr(cluster, "niceness", lambda: 15)
    monkeypatch.setattr(cluster, "_lowest_nice_allowed", lambda: -20)  # privileged
    assert cluster.task_niceness(0) == 0
    monkeypatch.setattr(cluster, "_lowest_nice_allowed", lambda: 20)  # RLIMIT_NICE 0: never
    assert cluster.task_niceness(0) == 15
    monkeypatch.setattr(cluster, "_lowest_nice_allowed", lambda: 10)  # RLIMIT_NICE 10
    assert cluster.task_niceness(0) == 10
    monkeypatch.setattr(cluster, "niceness", lambda: 5)  # a worker at or below the driver's
    assert cluster.task_niceness(5) == 5 and cluster.task_niceness(10) == 5  # never raised
    line = cluster.niceness_warning("cells", 15, 0, "node(s) 10.0.0.2 (1a2b3c4d)")
    assert line.startswith("warning: cells ran at niceness 15 on node(s) 10.0.0.2 (1a2b3c4d)")
    assert "RAY_worker_niceness=0 ray start" in line


DRIVER_PRIORITY = """
import json, os, threading
from prbench import cluster
os.nice(5)
stop = threading.Event()
t = threading.Thread(target=stop.wait); t.start()  # a thread of the worker started before
def nices():
    return sorted({os.getpriority(os.PRIO_PROCESS, int(tid))
                   for tid in os.listdir("/proc/self/task")})
with cluster.driver_priority(0) as got:
    inside = nices()
after = nices()
stop.set(); t.join()
print(json.dumps({"got": got, "inside": inside, "after": after,
                  "lowest": cluster._lowest_nice_allowed()}))
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
def test_driver_priority_sets_every_thread_for_the_block_and_puts_them_back() -> None:
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", DRIVER_PRIORITY], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    expected = max(0, got["lowest"]) if got["lowest"] <= 5 else 5
    assert got["got"] == expected and got["inside"] == [expected]
    assert got["after"] == [5]
