"""``--executor ray``: sweeps and rankings on a REAL two-node Ray cluster, against local runs.

The cluster is started and stopped by this module, in a network namespace of its own
(``unshare -n``, only loopback up), so Ray binds and advertises 127.0.0.1 alone and never meets
another Ray on this machine (nothing here runs ``ray stop``). One namespace child process
(tests/_ray_cluster.py) starts the head and a second node once and runs every cluster scenario on
them, reporting JSON back; the local runs they are compared with run here. Without root (no
``unshare -n``) or without Ray, the cluster tests skip with one line saying why.

Scenarios: the sample sweep (``sweeps/sample.yaml``, one pair per task) cell by cell equal to a
local run and spread over both nodes; a small sweep whose second node is killed while one of its
cells runs there (its command dies with the node, the cell reruns on the head; a cell with bad
input fails once, unretried); Ctrl-C to a sweep (exit 130, the running cell's command ends, a
local re-run finishes the rest); ``rank --shards 2`` stopped by Ctrl-C after its first shard and
run again (only the other shard is embedded; the rank file equals a local rank byte for byte);
a sweep without ``--ray_address`` while Ray's ``ray_current_cluster`` file names the test's
cluster (it starts a cluster of its own). The killed node's raylet is one line naming it.
The unreachable address and the missing Ray need no cluster.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests._harness_fixtures import PYTHON, REPO, run_eval, subprocess_env

#: whole commands end to end (lm-eval runs, a Ray cluster): `make test-fast` leaves them out
pytestmark = pytest.mark.slow

NONE = "personalized_rewardbench_sample_noprofile"

#: a --plugin file: ``blocking`` scores like ``length`` but first waits while the file
#: $PRBENCH_TEST_BLOCK exists (saying on which node it waits); ``refuses`` counts its builds in
#: $PRBENCH_TEST_BUILDS and refuses its input (a bad-input failure, never retried)
PLUGIN = '''
import dataclasses
import os
import time
from pathlib import Path

from prbench import hookimpl
from prbench.errors import PrbenchUserError


@dataclasses.dataclass(frozen=True)
class Options:
    label: str = ""


class Blocking:
    def __init__(self, options):
        self.options = options

    def score(self, requests):
        marker = Path(os.environ.get("PRBENCH_TEST_BLOCK", "/nonexistent"))
        if marker.exists():
            node = os.environ.get("PRBENCH_RAY_NODE", "local").split("@")[0]
            Path(f"{marker}.{self.options.label}-{node}.started").write_text(str(os.getpid()))
            while marker.exists():
                time.sleep(0.2)
        return [float(len(r.response.split())) for r in requests]


class DiesOnce:
    """Killed by SIGKILL (as by the OOM killer) the first time; scores like length after."""

    def __init__(self, options):
        self.options = options

    def score(self, requests):
        flag = Path(os.environ["PRBENCH_TEST_DIED"])
        if not flag.exists():
            flag.write_text(os.environ.get("PRBENCH_RAY_NODE", "local"))
            os.kill(os.getpid(), 9)
        return [float(len(r.response.split())) for r in requests]


class Refuses:
    def __init__(self, options):
        with open(os.environ["PRBENCH_TEST_BUILDS"], "a") as fh:
            fh.write("built\\n")
        raise PrbenchUserError("refuses: this scorer's input is bad on purpose (test)")

    def score(self, requests):
        return [0.0 for _ in requests]


@hookimpl
def register_scorers(register):
    register("blocking", Blocking, options=Options, reads_profile=False,
             description="length, after waiting for a marker file to go")
    register("dies-once", DiesOnce, options=Options, reads_profile=False,
             description="killed by a signal on its first run, as by the OOM killer")
    register("refuses", Refuses, options=Options, reads_profile=False,
             description="fails on its input, counting its builds")
'''


def _why_no_cluster() -> str | None:
    """Why a namespaced Ray cluster cannot run here (None: it can)."""
    if importlib.util.find_spec("ray") is None:
        return 'Ray is not installed (pip install "prbench[cluster]")'
    if os.geteuid() != 0:
        return "not root: no `unshare -n` for a network namespace of the test's own"
    for tool in ("unshare", "ip"):
        if shutil.which(tool) is None:
            return f"no `{tool}` command (util-linux / iproute2)"
    probe = subprocess.run(["unshare", "-n", "ip", "link", "set", "lo", "up"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"`unshare -n` failed: {(probe.stderr or probe.stdout).strip()[:200]}"
    return None


def _sweep_file(path: Path, scorers: list[dict], conditions: list[dict], **extra: Any) -> Path:
    import yaml

    path.write_text(yaml.safe_dump({"scorers": scorers, "conditions": conditions, **extra}),
                    encoding="utf-8")
    return path


def _cli(argv: list[str], env: dict[str, str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "prbench.cli", *argv], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, check=False)


def _records(out: Path) -> dict[str, dict[str, Any]]:
    return {f"{p.parent.name}/{p.stem}": json.loads(p.read_text(encoding="utf-8"))
            for p in sorted((out / "cells").glob("*/*.json"))}


def _table(out: Path) -> list[dict[str, str]]:
    with (out / "sweep_table.csv").open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every cluster scenario (one namespace child, one cluster) and the local runs beside."""
    why = _why_no_cluster()
    if why:
        pytest.skip(f"no Ray cluster test: {why}")
    tmp = tmp_path_factory.mktemp("ray")
    plugin = tmp / "plugin.py"
    plugin.write_text(PLUGIN, encoding="utf-8")
    small = _sweep_file(
        tmp / "small.yaml",
        [{"name": "block-a", "model_args": {"scorer": "blocking", "label": "a"}},
         {"name": "block-b", "model_args": {"scorer": "blocking", "label": "b"}},
         {"name": "bad", "model_args": {"scorer": "refuses"}},
         {"name": "oom", "model_args": {"scorer": "dies-once"}},
         {"name": "length", "model_args": {"scorer": "length"}}],
        [{"name": "none", "tasks": NONE}], limit=1)
    (tmp / "died-local").write_text("x")  # the local run is not killed
    pair = _sweep_file(
        tmp / "pair.yaml",
        [{"name": "block-a", "model_args": {"scorer": "blocking", "label": "a"}},
         {"name": "length", "model_args": {"scorer": "length"}}],
        [{"name": "none", "tasks": NONE}], limit=1)
    one = _sweep_file(tmp / "one.yaml", [{"name": "length", "model_args": {"scorer": "length"}}],
                      [{"name": "none", "tasks": NONE}], limit=1)
    sample = ["sweep", str(REPO / "sweeps" / "sample.yaml"), "--limit", "1", "--no_report"]
    # byte-equal files need one thread count on both sides (embed_threads=auto follows the
    # run queue, and fp32 sums in another order differ in the last bits: docs/scale.md)
    rank = ["rank", "sample", "--profile_args",
            "builder=dense,model=minilm,embed_dtype=float32,embed_threads=1",
            "--device", "cpu", "--step_posts", "100", "--no-progress"]
    ray_env = {"PRBENCH_CACHE_DIR": str(tmp / "cache-ray"), "PRBENCH_TEST_BLOCK":
               str(tmp / "block"), "PRBENCH_TEST_BUILDS": str(tmp / "builds-ray.txt"),
               "PRBENCH_TEST_DIED": str(tmp / "died-ray")}
    spec = {
        "result": str(tmp / "result.json"),
        "env": subprocess_env(**ray_env),
        "scenarios": [
            {"name": "sample", "kind": "sweep", "cwd": str(REPO),
             "argv": [*sample, "-o", str(tmp / "sample-ray")]},
            {"name": "kill", "kind": "kill_worker", "cwd": str(REPO), "marker": str(tmp / "block"),
             "argv": ["--plugin", str(plugin), "sweep", str(small), "-o", str(tmp / "small-ray"),
                      "--no_report"]},
            {"name": "interrupt", "kind": "interrupt", "cwd": str(REPO),
             "marker": str(tmp / "block"),
             "argv": ["--plugin", str(plugin), "sweep", str(pair), "-o",
                      str(tmp / "pair-ray"), "--no_report"]},
            {"name": "rank", "kind": "rank", "cwd": str(REPO),
             "argv": [*rank, "-o", str(tmp / "rank-ray.jsonl"), "--shards", "2"]},
            {"name": "own", "kind": "own_cluster", "cwd": str(REPO),
             "argv": ["sweep", str(one), "-o", str(tmp / "own-ray"), "--no_report"]},
        ],
    }
    (tmp / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    child = subprocess.Popen(
        ["unshare", "-n", PYTHON, "-m", "tests._ray_cluster", str(tmp / "spec.json")],
        env=subprocess_env(**ray_env), cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        # the same runs, locally, while the cluster works (outside its namespace: no Ray here)
        local_env = subprocess_env(PRBENCH_CACHE_DIR=str(tmp / "cache-local"),
                                   PRBENCH_TEST_BUILDS=str(tmp / "builds-local.txt"),
                                   PRBENCH_TEST_DIED=str(tmp / "died-local"))
        local = {
            "sample": _cli([*sample, "-o", str(tmp / "sample-local")], local_env),
            "small": _cli(["--plugin", str(plugin), "sweep", str(small), "-o",
                           str(tmp / "small-local"), "--no_report"], local_env),
            "rank": _cli([*rank, "-o", str(tmp / "rank-local.jsonl")], local_env),
        }
        output, _ = child.communicate(timeout=1500)
    finally:
        if child.poll() is None:
            child.terminate()  # the child stops its cluster on SIGTERM
            child.wait(timeout=120)
    assert child.returncode == 0 and (tmp / "result.json").is_file(), \
        f"the cluster child failed ({child.returncode}):\n{output[-4000:]}"
    result = json.loads((tmp / "result.json").read_text(encoding="utf-8"))
    return {"tmp": tmp, "ray": result, "local": local, "plugin": plugin, "pair": pair}


def _ok(scenario: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in scenario, scenario.get("error")
    return scenario


def test_sample_sweep_on_ray_equals_local_on_both_nodes(runs: dict[str, Any]) -> None:
    tmp, nodes = runs["tmp"], runs["ray"]["nodes"]
    ray_run = _ok(runs["ray"]["sample"])
    assert ray_run["rc"] == 0, ray_run["stdout"][-3000:] + ray_run["stderr"][-3000:]
    assert runs["local"]["sample"].returncode == 0, runs["local"]["sample"].stderr[-3000:]
    assert "cells: 12 run, 0 already finished, 0 failed" in ray_run["stdout"]
    # the cluster it joined, named with its address and nodes
    assert (f"ray: using the Ray cluster at {runs['ray']['nodes']['address']} (--ray_address "
            f"{runs['ray']['nodes']['address']}; 2 node(s), 2 CPU(s), 0 GPU(s))") \
        in ray_run["stdout"]
    assert "each sees" in ray_run["stdout"]  # the shared-storage probe passed on both nodes
    on_ray, local = _records(tmp / "sample-ray"), _records(tmp / "sample-local")
    assert set(on_ray) == set(local) and len(on_ray) == 12
    used = {r["ray_node_id"] for r in on_ray.values()}
    assert used == {nodes["head"], nodes["worker"]}  # cells ran on both nodes
    for key, rec in on_ray.items():
        assert rec["status"] == local[key]["status"] == "done"
        assert rec["executor"] == "ray" and local[key]["executor"] == "local"
        assert f"on node 127.0.0.1 ({rec['ray_node_id'][:8]})" in ray_run["stdout"]
        manifest = _manifest(rec["results"])
        assert manifest["executor"] == {"name": "ray", "ray_node_id": rec["ray_node_id"],
                                        "ray_node_ip": "127.0.0.1"}
    # Ray's workers run at niceness 15: the cells ran at the driver's, where the node allows it
    # (CAP_SYS_NICE, as root in CI), else at the worker's with one warning line
    from prbench.cluster import _lowest_nice_allowed, niceness

    driver = niceness()
    nices = {rec["nice"] for rec in on_ray.values()}
    if _lowest_nice_allowed() <= driver:
        assert nices == {driver} and "ran at niceness" not in ray_run["stdout"]
    else:
        assert min(nices) > driver
        assert ray_run["stdout"].count("warning: cells ran at niceness") == 1
    # every score, accuracy and interval of the table
    assert _table(tmp / "sample-ray") == _table(tmp / "sample-local")
    # a local re-run into the Ray run's folder finds every cell finished
    again = _cli([*("sweep", str(REPO / "sweeps" / "sample.yaml"), "--limit", "1",
                    "--no_report"), "-o", str(tmp / "sample-ray")],
                 subprocess_env(PRBENCH_CACHE_DIR=str(tmp / "cache-local")))
    assert again.returncode == 0 and "cells: 0 run, 12 already finished" in again.stdout


def _manifest(results: str) -> dict[str, Any]:
    from prbench.analysis.runs import manifest_path

    return json.loads(manifest_path(Path(results)).read_text(encoding="utf-8"))


def test_killed_node_cells_rerun_on_the_other_node(runs: dict[str, Any]) -> None:
    tmp, nodes = runs["tmp"], runs["ray"]["nodes"]
    kill = _ok(runs["ray"]["kill"])
    assert kill["rc"] == 1, kill["stdout"][-3000:]  # the bad cell fails; the rest are done
    on_ray, local = _records(tmp / "small-ray"), _records(tmp / "small-local")
    lost = kill["killed_cell"].split(".")[-2].split("-")[0]  # the label of the cell it ran
    assert on_ray[f"block-{lost}/none"]["status"] == "done"
    assert on_ray[f"block-{lost}/none"]["ray_node_id"] == nodes["head"]  # rerun on the head
    for key in ("block-a/none", "block-b/none", "oom/none", "length/none"):
        assert on_ray[key]["status"] == local[key]["status"] == "done"
    assert _table(tmp / "small-ray") == _table(tmp / "small-local")
    # the dead node's raylet: one line naming it, not the last 20 lines of its log
    assert "Raylet is terminated" not in kill["stdout"] and "[state-dump]" not in kill["stdout"]
    assert kill["stdout"].count(f"ray: node 127.0.0.1 ({nodes['worker'][:8]}) died (its raylet "
                                "ended unexpectedly") == 1, kill["stdout"][-3000:]


def test_without_an_address_a_sweep_starts_a_cluster_of_its_own(runs: dict[str, Any]) -> None:
    """Ray's ``ray_current_cluster`` file names the test's cluster (as another user's would be
    named on a shared machine): without --ray_address the command must not join it."""
    own, nodes = _ok(runs["ray"]["own"]), runs["ray"]["nodes"]
    assert own["rc"] == 0, own["stdout"][-3000:] + own["stderr"][-3000:]
    assert "ray: started a Ray cluster of this command's own at 127.0.0.1:" in own["stdout"]
    assert nodes["address"] not in own["stdout"] + own["stderr"]
    record = _records(runs["tmp"] / "own-ray")["length/none"]
    assert record["status"] == "done"
    assert record["ray_node_id"] not in (nodes["head"], nodes["worker"])


def test_a_cell_killed_by_a_signal_is_retried(runs: dict[str, Any]) -> None:
    """A cell command SIGKILLed (as by the OOM killer) is the machine's failure: retried."""
    tmp = runs["tmp"]
    _ok(runs["ray"]["kill"])
    assert (tmp / "died-ray").read_text().startswith(tuple(runs["ray"]["nodes"].values()))
    assert _records(tmp / "small-ray")["oom/none"]["status"] == "done"


def test_bad_input_cell_fails_once_without_retry(runs: dict[str, Any]) -> None:
    tmp = runs["tmp"]
    kill = _ok(runs["ray"]["kill"])
    bad = _records(tmp / "small-ray")["bad/none"]
    assert bad["status"] == "failed" and bad["exit_code"] == 1
    # the record keeps the cause; the sweep's one line adds "error: cell ... failed:" (issue 38)
    assert bad["error"].startswith("refuses:") and "bad on purpose" in bad["error"]
    assert bad["error"] == _records(tmp / "small-local")["bad/none"]["error"]
    builds = (tmp / "builds-ray.txt").read_text(encoding="utf-8").splitlines()
    assert builds == ["built"]  # one attempt: bad input is never retried
    assert "error: cell bad/none failed: refuses:" in kill["stdout"]
    assert "failed: error:" not in kill["stdout"]  # printed once, not "error:" twice
    assert "| bad | failed |" in (tmp / "small-ray" / "sweep_table.md").read_text()


def test_rank_shards_on_ray_equal_local_and_resume(runs: dict[str, Any]) -> None:
    tmp = runs["tmp"]
    rank = _ok(runs["ray"]["rank"])
    first, second = rank["first"], rank["second"]
    assert first["rc"] == 130, first["stderr"][-3000:]  # Ctrl-C after the first shard
    assert "2 shard(s), 0 finished before, 2 to embed" in first["stderr"]
    assert "finished shards kept" in first["stderr"]
    assert second["rc"] == 0, second["stderr"][-3000:]
    from prbench.cluster import _lowest_nice_allowed, niceness

    # the shard ran at the driver's niceness where the node allows it, else it says so
    warned = "warning: shards ran at niceness" in second["stderr"]
    assert warned == (_lowest_nice_allowed() > niceness())
    assert "2 shard(s), 1 finished before, 1 to embed" in second["stderr"]
    assert "shards: 1 finished before, 1 embedded now" in second["stderr"]
    assert runs["local"]["rank"].returncode == 0, runs["local"]["rank"].stderr[-3000:]
    assert (tmp / "rank-ray.jsonl").read_bytes() == (tmp / "rank-local.jsonl").read_bytes()
    assert not Path(f"{tmp / 'rank-ray.jsonl'}.shards").exists()


def test_ctrl_c_cancels_tasks_keeps_finished_cells_exit_130(runs: dict[str, Any]) -> None:
    tmp = runs["tmp"]
    stop = _ok(runs["ray"]["interrupt"])
    assert stop["rc"] == 130, stop["stdout"][-3000:]
    assert "Ray task(s) cancelled, finished cells kept" in stop["stdout"]
    records = _records(tmp / "pair-ray")
    assert records["block-a/none"]["status"] == "running"  # cancelled: not finished
    # (the scenario waited for the cancelled cell's command to end)
    # a local re-run into the same folder runs what was left, skips what was finished
    done_before = [k for k, r in records.items() if r["status"] == "done"]
    again = _cli(["--plugin", str(runs["plugin"]), "sweep", str(runs["pair"]), "-o",
                  str(tmp / "pair-ray"), "--no_report"],
                 subprocess_env(PRBENCH_CACHE_DIR=str(tmp / "cache-local")))
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"cells: {2 - len(done_before)} run, {len(done_before)} already finished" \
        in again.stdout
    assert {r["status"] for r in _records(tmp / "pair-ray").values()} == {"done"}


def test_no_cluster_at_the_address_is_one_error_line(tmp_path: Path) -> None:
    """Nothing listens at the address: one error line, in a bounded wait (no Ray started)."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip('no Ray cluster test: Ray is not installed (pip install "prbench[cluster]")')
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once closed: nothing answers there
    sweep = _sweep_file(tmp_path / "s.yaml", [{"model_args": {"scorer": "length"}}],
                        [{"name": "none", "tasks": NONE}], limit=1)
    proc = _cli(["sweep", str(sweep), "-o", str(tmp_path / "out"), "--executor", "ray",
                 "--ray_address", f"127.0.0.1:{port}"], subprocess_env(), timeout=120)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no Ray cluster answers at "
                                                   f"--ray_address 127.0.0.1:{port}"), lines
    assert not (tmp_path / "out" / "cells").exists()  # nothing ran


def test_without_ray_one_error_line_says_how_to_install(tmp_path: Path, capsys, monkeypatch
                                                        ) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails, as when not installed
    sweep = _sweep_file(tmp_path / "s.yaml", [{"model_args": {"scorer": "length"}}],
                        [{"name": "none", "tasks": NONE}], limit=1)
    code, _, err = run_eval(["sweep", str(sweep), "-o", str(tmp_path / "out"), "--executor",
                             "ray"], capsys)
    assert code == 1
    assert err.strip().splitlines() == [
        'error: --executor ray needs Ray, which is not installed here: pip install '
        '"prbench[cluster]" (Ray 2.60.0, on every node), or run with --executor local']
    code, _, err = run_eval(["rank", "sample", "-o", str(tmp_path / "r.jsonl"), "--executor",
                             "ray", "--profile_args", "builder=dense,model=minilm"], capsys)
    assert code == 1 and "pip install \"prbench[cluster]\"" in err
