"""The parts of ``--executor ray`` that need no cluster: resources, defaults, shards, records.

The real two-node cluster runs in tests/test_ray_executor.py.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
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


# -- joining a cluster: what answers at the address, which cluster, a refused token ------------

@contextlib.contextmanager
def _web_server() -> Iterator[int]:
    """A loopback web server (a mistyped port of the dashboard, say); yields its port."""
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def _silent_http2_server() -> Iterator[int]:
    """A loopback service that answers the HTTP/2 greeting, then nothing (not Ray's GCS)."""
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conn.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")  # an empty SETTINGS frame
            held.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def test_a_web_server_at_the_address_is_one_error_naming_it() -> None:
    """A web server on a mistyped port: Ray's own wait ran past 90 s printing warnings."""
    from prbench.cluster import check_address

    with _web_server() as port, pytest.raises(ClusterError) as caught:
        check_address(f"127.0.0.1:{port}", "--ray_address")
    message = str(caught.value)
    assert message.startswith(f"no Ray cluster at --ray_address 127.0.0.1:{port}: found a web "
                              "server (it answered '"), message
    assert "not Ray's GCS" in message and "give the port `ray start --head` printed" in message


def test_a_web_server_given_to_the_command_is_one_error_line(tmp_path: Path, capsys) -> None:
    pytest.importorskip("ray", reason='Ray is not installed (pip install "prbench[cluster]")')
    from tests._harness_fixtures import run_eval

    path = tmp_path / "grid.yaml"
    path.write_text(GRID, encoding="utf-8")
    with _web_server() as port:
        code, _, err = run_eval(["sweep", str(path), "-o", str(tmp_path / "out"), "--executor",
                                 "ray", "--ray_address", f"127.0.0.1:{port}"], capsys)
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1, lines
    assert lines[0].startswith(f"error: no Ray cluster at --ray_address 127.0.0.1:{port}: "
                               "found a web server")
    assert not (tmp_path / "out" / "cells").exists()


def test_a_service_that_is_not_ray_s_gcs_is_one_error_in_a_bounded_wait() -> None:
    """It answers the gRPC greeting, not the GCS's question: Ray's client gives up in the child."""
    pytest.importorskip("ray", reason='Ray is not installed (pip install "prbench[cluster]")')
    from prbench.cluster import check_address

    with _silent_http2_server() as port, pytest.raises(ClusterError) as caught:
        check_address(f"127.0.0.1:{port}", "RAY_ADDRESS", timeout=2)
    assert str(caught.value).startswith(
        f"no Ray cluster at RAY_ADDRESS 127.0.0.1:{port}: found a service that does not answer "
        "as Ray's GCS within 2 s"), str(caught.value)


#: what Ray's GCS client printed, retrying a cluster that refused its token (Ray 2.60, measured)
REFUSED = ("[2026-12-02 00:24:18,873 W 13120 13120] gcs_client.cc:210: Failed to get cluster ID "
           "from GCS server: Unauthenticated: RPC error: InvalidAuthToken: Authentication token "
           "is missing or incorrect\n")


def test_a_refused_token_is_one_line_saying_what_the_driver_needs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from prbench import cluster

    def refused(*args: object, **kwargs: object) -> subprocess.CompletedProcess:
        return subprocess.CompletedProcess([], 1, stdout="", stderr=REFUSED * 20)

    monkeypatch.setattr(subprocess, "run", refused)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    with pytest.raises(ClusterError) as caught:
        cluster._gcs_handshake("127.0.0.1:6379", "--ray_address", 15)
    assert str(caught.value).splitlines() == [str(caught.value)]
    assert str(caught.value).startswith(
        "the Ray cluster at --ray_address 127.0.0.1:6379 refused this command (InvalidAuthToken)"
        ": it uses token authentication and this command sent none (RAY_AUTH_MODE is not token "
        "here); run with RAY_AUTH_MODE=token and the head's token")
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    with pytest.raises(ClusterError, match="the token this command sent is not the cluster's"):
        cluster._gcs_handshake("127.0.0.1:6379", "--ray_address", 15)
    assert "RAY_AUTH_MODE=token here but no token was found" in cluster.auth_refusal(
        "RAY_ADDRESS", "h:1", said="Token authentication is enabled but Ray couldn't find an "
        "authentication token.")


class _Context:
    gcs_address = "127.0.0.1:6379"


class _JoinRay:
    """Stands in for ``ray`` in ``connect`` (records what ``ray.init`` was asked)."""

    class exceptions:  # the attribute path of ray.exceptions.RayError
        class RayError(Exception):
            pass

    def __init__(self) -> None:
        self.addresses: list[str] = []

    def is_initialized(self) -> bool:
        return bool(self.addresses)

    def init(self, address: str, **kwargs: object) -> None:
        self.addresses.append(address)

    def nodes(self) -> list[dict]:
        return [_node("a" * 56, 0, 2, 4)]

    def get_runtime_context(self) -> _Context:
        return _Context()


@pytest.mark.parametrize(("env", "address", "line"), [
    (None, "local", "ray: started a Ray cluster of this command's own at 127.0.0.1:6379 (1 "
                    "node(s), 2 CPU(s), 0 GPU(s); it stops with the command)"),
    ("local", "local", "ray: started a Ray cluster of this command's own"),
    ("auto", "auto", "ray: using the Ray cluster at 127.0.0.1:6379 (RAY_ADDRESS auto; 1 "
                     "node(s), 2 CPU(s), 0 GPU(s))"),
])
def test_without_an_address_the_command_starts_its_own_cluster(
        monkeypatch: pytest.MonkeyPatch, env: str | None, address: str, line: str) -> None:
    """Never the cluster Ray's ``ray_current_cluster`` file names (maybe another user's)."""
    from prbench import cluster

    fake = _JoinRay()
    monkeypatch.setattr(cluster, "import_ray", lambda: fake)
    if env is None:
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
    else:
        monkeypatch.setenv("RAY_ADDRESS", env)
    said: list[str] = []
    assert cluster.connect(None, say=said.append) is fake
    assert fake.addresses == [address]  # ray.init(address=None) would read the file
    assert len(said) == 1 and said[0].startswith(line), said


def test_the_cluster_in_use_is_named_with_its_address_and_nodes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from prbench import cluster

    fake = _JoinRay()
    monkeypatch.setattr(cluster, "import_ray", lambda: fake)
    monkeypatch.setattr(cluster, "check_address", lambda *a, **k: None)
    said: list[str] = []
    cluster.connect("127.0.0.1:6379", say=said.append)
    assert said == ["ray: using the Ray cluster at 127.0.0.1:6379 (--ray_address 127.0.0.1:6379; "
                    "1 node(s), 2 CPU(s), 0 GPU(s))"]


class _DyingRay(_JoinRay):
    def __init__(self) -> None:
        super().__init__()
        self.alive = {"a" * 56: True, "b" * 56: True}

    def nodes(self) -> list[dict]:
        return [{**_node(i, 0, 1, 1), "Alive": alive} for i, alive in self.alive.items()]


def test_a_dying_raylet_is_one_line_naming_the_node() -> None:
    """Ray hands the driver the dead raylet's last 20 log lines (a state dump) naming no node."""
    import threading
    import time

    from prbench.cluster import one_line_raylet_deaths

    fake = _DyingRay()
    passed: list[dict] = []
    worker = type("Worker", (), {})()
    worker.print_to_stdstream = lambda data, ignore_prefix: passed.append(data)
    said: list[str] = []
    told = threading.Event()

    def say(line: str) -> None:
        said.append(line)
        told.set()

    one_line_raylet_deaths(fake, worker, say, wait_s=60)
    one_line_raylet_deaths(fake, worker, say, wait_s=60)  # wrapped once only
    dump = ("Raylet is terminated. Termination is unexpected. Possible reasons include: (1) "
            "SIGKILL by the user or system OOM killer, ... Last 20 lines of the Raylet logs:\n"
            + "    [state-dump] \tNodeManager.ScheduleAndGrantLeases - 1 total\n" * 20)
    worker.print_to_stdstream({"lines": [dump], "pid": "raylet", "is_err": False}, False)
    worker.print_to_stdstream({"lines": ["other news"], "pid": "raylet", "is_err": False}, False)
    assert [d["lines"] for d in passed] == [["other news"]]  # the rest goes through as before
    time.sleep(0.2)
    fake.alive["b" * 56] = False  # the cluster marks the node dead a moment later
    assert told.wait(30), "no line about the dead node"
    assert said == [
        "ray: node 10.0.0.9 (bbbbbbbb) died (its raylet ended unexpectedly: killed, e.g. by the "
        "OOM killer, or crashed); its tasks run again on the other nodes (--max_retries); its "
        "last log lines are in logs/raylet.out of the Ray session folder on that node"]
