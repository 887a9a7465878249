"""A real two-node Ray cluster in a network namespace of the test's own, and scenarios on it.

``python -m tests._ray_cluster SPEC.json`` is started by tests/test_ray_executor.py under
``unshare -n`` (a new network namespace: only loopback, brought up here), so Ray can bind and
advertise nothing but 127.0.0.1. It starts a head and a second node with
``ray.cluster_utils.Cluster`` (1 CPU each), runs the scenarios SPEC names one after the other on
that one cluster (a Ray start costs seconds of CPU), stops the cluster (its own processes only),
and writes what each scenario saw as JSON to SPEC's ``result`` path.

Each scenario runs the ``prbench`` command as users do, in a subprocess with ``--ray_address``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

#: the longest any one wait of a scenario may take (a failing test ends, it does not hang)
WAIT_S = 300


def _prbench(argv: list[str], env: dict[str, str], cwd: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "prbench.cli", *argv], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=WAIT_S * 2, check=False)
    return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


def _wait_for(check: Any, what: str, proc: subprocess.Popen[str] | None = None) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:
        got = check()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the sweep ended before {what}: {proc.stdout.read()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {WAIT_S} s for {what}")
        time.sleep(0.2)


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (gone, or a zombie waiting to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] == "Z"
    except OSError:
        return True


def _fresh_marker(marker: Path) -> None:
    """Create the blocking scorers' marker; remove what an earlier scenario's cells left."""
    for old in marker.parent.glob(marker.name + ".*.started"):
        old.unlink()
    marker.write_text("x", encoding="utf-8")


def _start_sweep(spec: dict[str, Any], cluster: Any, env: dict[str, str]) -> subprocess.Popen:
    """The sweep with ``--executor ray`` on ``cluster``, started (output on one pipe)."""
    return subprocess.Popen(
        [sys.executable, "-m", "prbench.cli", *spec["argv"], "--executor", "ray",
         "--ray_address", cluster.address], env=env, cwd=spec["cwd"], text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _finish(proc: subprocess.Popen) -> str:
    """The started sweep's output once it ends (killed after :data:`WAIT_S`)."""
    try:
        output, _ = proc.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
    return output


def sweep(spec: dict[str, Any], cluster: Any, worker: Any, env: dict[str, str]) -> dict[str, Any]:
    """A sweep with ``--executor ray``; its exit, output and the records it wrote."""
    out = _prbench([*spec["argv"], "--executor", "ray", "--ray_address", cluster.address],
                   env, spec["cwd"])
    return out


def kill_worker(spec: dict[str, Any], cluster: Any, worker: Any, env: dict[str, str]
                ) -> dict[str, Any]:
    """Kill the second node while a blocking cell runs on it; then let the sweep finish."""
    marker = Path(spec["marker"])
    _fresh_marker(marker)
    proc = _start_sweep(spec, cluster, env)
    worker_id = worker.node_id

    def on_worker() -> list[Path]:
        return [p for p in marker.parent.glob(marker.name + ".*.started")
                if worker_id in p.name]

    started = _wait_for(on_worker, "a blocking cell on the second node", proc)
    pid = int(started[0].read_text(encoding="utf-8"))
    cluster.remove_node(worker, allow_graceful=False)  # the node dies, as a crashed machine
    _wait_for(lambda: _gone(pid), f"the lost cell's command (pid {pid}) to die with its node")
    marker.unlink()  # the blocking cells go on; the lost one reruns on the head
    output = _finish(proc)
    return {"rc": proc.returncode, "stdout": output, "stderr": "",
            "killed_cell": started[0].name, "worker": worker_id}


def interrupt(spec: dict[str, Any], cluster: Any, worker: Any, env: dict[str, str]
              ) -> dict[str, Any]:
    """Ctrl-C (SIGINT) to the sweep while a blocking cell runs; its command must end too."""
    marker = Path(spec["marker"])
    _fresh_marker(marker)
    proc = _start_sweep(spec, cluster, env)
    started = _wait_for(lambda: list(marker.parent.glob(marker.name + ".*.started")),
                        "a blocking cell", proc)
    pid = int(started[0].read_text(encoding="utf-8"))
    proc.send_signal(signal.SIGINT)
    output = _finish(proc)

    _wait_for(lambda: _gone(pid), f"the cancelled cell's command (pid {pid}) to end")
    marker.unlink()
    return {"rc": proc.returncode, "stdout": output, "stderr": ""}


#: ``python -c STOP_AFTER_FIRST_SHARD rank ...``: the rank command, given a real Ctrl-C
#: (SIGINT to itself) right after it has kept its first finished shard
STOP_AFTER_FIRST_SHARD = """
import os, signal, sys
import prbench.outputs as outputs
real = outputs.write_text
def write_text(path, text, **kw):
    out = real(path, text, **kw)
    if ".shards" in str(path):
        os.kill(os.getpid(), signal.SIGINT)
    return out
outputs.write_text = write_text
from prbench.cli import main
sys.exit(main(sys.argv[1:]))
"""


def rank(spec: dict[str, Any], cluster: Any, worker: Any, env: dict[str, str]) -> dict[str, Any]:
    """``prbench rank --executor ray``: stopped by Ctrl-C after its first shard, run again."""
    argv = [*spec["argv"], "--executor", "ray", "--ray_address", cluster.address]
    proc = subprocess.run([sys.executable, "-c", STOP_AFTER_FIRST_SHARD, *argv], env=env,
                          cwd=spec["cwd"], capture_output=True, text=True, timeout=WAIT_S * 2,
                          check=False)
    first = {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}
    return {"first": first, "second": _prbench(argv, env, spec["cwd"])}


def own_cluster(spec: dict[str, Any], cluster: Any, worker: Any, env: dict[str, str]
                ) -> dict[str, Any]:
    """A sweep with ``--executor ray`` and no address, while Ray's ``ray_current_cluster`` file
    names this cluster (as ``ray start`` by another user would): it must start one of its own.

    The file is written in a Ray temporary folder of this scenario's own (``RAY_TMPDIR``, short:
    Ray's socket paths must fit), never in the machine's shared one; ``HOME`` is that folder too,
    so the token Ray 2.60 writes for a new local cluster (``~/.ray/auth_token``) goes with it.
    """
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp(prefix="rt-", dir="/tmp")
    try:
        (Path(tmp) / "ray").mkdir()
        (Path(tmp) / "ray" / "ray_current_cluster").write_text(cluster.address, encoding="utf-8")
        env = {**{k: v for k, v in env.items() if k != "RAY_ADDRESS"}, "RAY_TMPDIR": tmp,
               "HOME": tmp}
        return _prbench([*spec["argv"], "--executor", "ray"], env, spec["cwd"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


SCENARIOS = {"sweep": sweep, "kill_worker": kill_worker, "interrupt": interrupt, "rank": rank,
             "own_cluster": own_cluster}


def main() -> int:
    """Start the cluster, run the scenarios, stop it, write the results."""
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    os.environ.update(spec.get("env") or {})
    from ray.cluster_utils import Cluster

    results: dict[str, Any] = {}
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False,
        "_system_config": {"health_check_initial_delay_ms": 0, "health_check_period_ms": 500,
                           "health_check_failure_threshold": 4},
    })
    try:
        worker = cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
        cluster.wait_for_nodes()
        results["nodes"] = {"head": cluster.head_node.node_id, "worker": worker.node_id,
                            "address": cluster.address}
        env = dict(os.environ)
        for scenario in spec["scenarios"]:
            name = scenario["name"]
            try:
                results[name] = SCENARIOS[scenario["kind"]](scenario, cluster, worker, env)
            except Exception:  # reported to the test, which fails with it
                results[name] = {"error": traceback.format_exc()}
    finally:
        cluster.shutdown()
    Path(spec["result"]).write_text(json.dumps(results), encoding="utf-8")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # finally: stop the cluster
    sys.exit(main())
