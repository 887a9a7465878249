"""Handing work to a Ray cluster: connecting, the nodes, shared storage, task resources.

``prbench sweep --executor ray`` and ``prbench rank --executor ray`` run their cells and shards
as Ray tasks; this module is what both need from Ray. Ray is an optional extra
(``pip install "prbench[cluster]"``), imported only here and only when ``--executor ray`` is
given: without it the command ends in one ``error:`` line saying how to install it.

- :func:`connect` joins the cluster at ``--ray_address`` (else ``RAY_ADDRESS``, else the one
  ``ray start`` made on this machine) within a bounded wait: an address nothing answers at is one
  error, not a hang.
- :func:`check_shared_folder` makes every alive node write a probe file into the output folder
  and read back the driver's: a node that cannot see the folder is one error naming the node and
  the path.
- :func:`task_options` turns a ``resources:`` mapping (``gpus``, ``cpus``, ``memory`` in GiB)
  into Ray task options, refusing a request no node of the cluster can meet (Ray would wait for
  it forever).
- :class:`MachineFailure` is what a task raises when the machine, not the input, ended it (a
  process killed by a signal: the kernel's OOM killer, a node going away); only it is retried.
- :func:`task_niceness` and :func:`driver_priority`: Ray starts its workers at niceness 15
  (``RAY_worker_niceness``), so on a node shared with other work a cell or shard would get a
  sliver of the CPU that the same command gets locally; the work runs at the driver's niceness
  where the node lets the worker lower its own, and :func:`niceness_warning` says so where not.

Ground floor but one: imports nothing from prbench but the error base class.
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from prbench.errors import PrbenchUserError

#: the Ray the ``cluster`` extra pins (pyproject.toml); every node must run the same
RAY_VERSION = "2.60.0"
INSTALL_HINT = 'pip install "prbench[cluster]"'
#: seconds to wait for the cluster's address to answer before giving up
CONNECT_TIMEOUT_S = 15.0
#: seconds each node has to write and read the shared-storage probe
PROBE_TIMEOUT_S = 120.0
#: environment passed from the driver to the commands tasks run (caches, offline switches,
#: plugin selection): names starting with one of these
PASSED_ENV_PREFIXES = ("PRBENCH_", "HF_", "TRANSFORMERS_", "TOKENIZERS_")
#: thread limits Ray sets in a task (from its CPUs); a command runs without them, as locally
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: set in a task's command: the executor and the node it ran on (recorded in the manifest)
EXECUTOR_ENV = "PRBENCH_EXECUTOR"
NODE_ENV = "PRBENCH_RAY_NODE"

__all__ = [
    "CONNECT_TIMEOUT_S",
    "EXECUTOR_ENV",
    "INSTALL_HINT",
    "NODE_ENV",
    "RAY_VERSION",
    "ClusterError",
    "MachineFailure",
    "RayTasks",
    "alive_nodes",
    "check_shared_folder",
    "connect",
    "driver_priority",
    "executor_info",
    "import_ray",
    "local_env",
    "niceness",
    "niceness_warning",
    "node_label",
    "passed_env",
    "task_niceness",
    "task_options",
    "this_node",
    "use_local_threads",
]


class ClusterError(PrbenchUserError, RuntimeError):
    """Ray missing, no cluster at the address, a node that cannot see the folder, a bad request."""


class MachineFailure(RuntimeError):
    """A task's process was killed by the machine (a signal: OOM killer, node shut down).

    Raised inside a task so that Ray retries it (``retry_exceptions=[MachineFailure]``); a task
    that ends because of its input returns normally and is never retried.
    """


def import_ray() -> ModuleType:
    """Import Ray, or one error saying how to install it.

    Raises:
        ClusterError: Ray is not installed.
    """
    try:
        import ray
    except ImportError:
        raise ClusterError(
            f"--executor ray needs Ray, which is not installed here: {INSTALL_HINT} "
            f"(Ray {RAY_VERSION}, on every node), or run with --executor local"
        ) from None
    return ray


def _address(address: str | None) -> str:
    if address:
        return address
    return os.environ.get("RAY_ADDRESS") or "auto"


def _reachable(address: str, timeout: float) -> str | None:
    """Why ``HOST:PORT`` does not answer a TCP connection within ``timeout`` (None: it does)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return f"{address!r} is not HOST:PORT"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return None
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__


def _local_ip_towards(address: str) -> str | None:
    """This machine's address on the route to ``HOST:PORT`` (what the cluster should see)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host.strip("[]"), int(port)))  # UDP: picks the route, sends nothing
            return str(s.getsockname()[0])
    except (OSError, ValueError):
        return None


def connect(address: str | None, *, timeout: float = CONNECT_TIMEOUT_S) -> ModuleType:
    """Join the Ray cluster at ``address`` and return the ``ray`` module (connected).

    Args:
        address: ``HOST:PORT`` of the head's GCS (what ``ray start --head`` prints); ``None``:
            ``RAY_ADDRESS``, else the cluster ``ray start`` made on this machine.
        timeout: seconds to wait for the address to answer.

    Raises:
        ClusterError: Ray missing, or no cluster at the address within ``timeout``.
    """
    ray = import_ray()
    if ray.is_initialized():
        return ray
    target = _address(address)
    where = "--ray_address" if address else ("RAY_ADDRESS" if target != "auto" else "")
    if target != "auto" and not target.startswith("ray://"):
        problem = _reachable(target, timeout)
        if problem:
            raise ClusterError(
                f"no Ray cluster answers at {where} {target} within {timeout:g} s ({problem}): "
                "start one (`ray start --head` on the first node, docs/scale.md \"On a "
                "cluster\") or fix the address"
            )
    os.environ.setdefault("RAY_gcs_rpc_server_connect_timeout_s", str(int(max(timeout, 1))))
    extra: dict[str, Any] = {}
    if target != "auto" and not target.startswith("ray://"):
        ip = _local_ip_towards(target)
        if ip:
            extra["_node_ip_address"] = ip  # the address the head is reached from, not a guess
    try:
        ray.init(address=target, log_to_driver=False, logging_level="ERROR",
                 configure_logging=False, **extra)
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
        if target == "auto":
            raise ClusterError(
                "--executor ray found no Ray cluster on this machine: start one (`ray start "
                "--head`, docs/scale.md \"On a cluster\") or pass --ray_address HOST:PORT"
            ) from None
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ClusterError(f"cannot join the Ray cluster at {where} {target}: {first}") \
            from None
    return ray


def alive_nodes(ray: ModuleType) -> list[dict[str, Any]]:
    """The cluster's alive nodes (Ray's ``ray.nodes()`` entries)."""
    return [n for n in ray.nodes() if n.get("Alive")]


class RayTasks:
    """Submitted Ray tasks, handed back one at a time as each finishes; the rest can be cancelled.

    A sweep's cells and a rank's shards both wait this way. ``pending`` is updated before a
    finished task is handed back, so a Ctrl-C that lands while the caller handles it cancels
    exactly the tasks not finished.
    """

    def __init__(self, ray: ModuleType, refs: Iterable[Any]) -> None:
        self.ray = ray
        self.pending = list(refs)

    def finished(self) -> Iterator[Any]:
        """Each task's ref as it finishes (waits in 1 s slices so Ctrl-C is seen)."""
        while self.pending:
            ready, self.pending = self.ray.wait(self.pending, num_returns=1, timeout=1.0)
            yield from ready

    def cancel_rest(self) -> int:
        """Cancel (force) every task not finished; returns how many there were."""
        for ref in self.pending:
            with contextlib.suppress(Exception):  # a task that ended meanwhile
                self.ray.cancel(ref, force=True)
        return len(self.pending)


def node_label(node_id: str, ip: str | None = None) -> str:
    """How a node is named in messages: its address and the start of its id."""
    return f"{ip} ({node_id[:8]})" if ip else node_id[:8]


def this_node() -> dict[str, str]:
    """Inside a task: the node it runs on (``id``, ``ip``)."""
    import ray

    ctx = ray.get_runtime_context()
    return {"id": ctx.get_node_id(), "ip": ray.util.get_node_ip_address()}


def executor_info() -> dict[str, Any]:
    """What ran a command: ``{"name": "local"}``, or Ray with the node (from the task's env)."""
    name = os.environ.get(EXECUTOR_ENV) or "local"
    out: dict[str, Any] = {"name": name}
    node = os.environ.get(NODE_ENV)
    if name == "ray" and node:
        node_id, _, ip = node.partition("@")
        out.update({"ray_node_id": node_id, "ray_node_ip": ip or None})
    return out


def passed_env() -> dict[str, str]:
    """The driver's environment a task's command gets (see ``PASSED_ENV_PREFIXES``)."""
    out = {k: v for k, v in os.environ.items() if k.startswith(PASSED_ENV_PREFIXES)}
    for name in THREAD_ENV:
        if name in os.environ:
            out[name] = os.environ[name]
    return out


def local_env(passed: Mapping[str, str]) -> dict[str, str]:
    """Inside a task: the environment of a command run as it would run locally on this node.

    The node's own environment with the driver's ``passed`` over it, less the thread limits Ray
    sets for a task (``OMP_NUM_THREADS=<its CPUs>``) unless the driver set them too: thread
    counts change the order of a matmul's sums, and so the last bits of a score.
    """
    env = {**os.environ, **passed}
    for name in THREAD_ENV:
        if name not in passed:
            env.pop(name, None)
    return env


def use_local_threads() -> int:
    """Inside a task: torch's thread count set to what a local process on this node would use.

    That count is read from a fresh interpreter without Ray's thread limits (torch's default
    depends on the build and the machine), once per worker process.
    """
    import subprocess
    import sys

    import torch

    if "threads" not in _LOCAL_THREADS:
        env = {k: v for k, v in os.environ.items() if k not in THREAD_ENV}
        code = "import torch; print(torch.get_num_threads())"
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=300, check=False)
        text = proc.stdout.strip()
        _LOCAL_THREADS["threads"] = int(text) if text.isdigit() else torch.get_num_threads()
    torch.set_num_threads(_LOCAL_THREADS["threads"])
    return _LOCAL_THREADS["threads"]


_LOCAL_THREADS: dict[str, int] = {}


def niceness() -> int:
    """This thread's niceness (on Linux each thread has its own; a new one inherits it)."""
    return os.getpriority(os.PRIO_PROCESS, 0)


def _lowest_nice_allowed() -> int:
    """The lowest niceness this process may set.

    -20 with ``CAP_SYS_NICE``, else from ``RLIMIT_NICE``: a soft limit ``r`` allows ``20 - r``
    (the usual 0 allows no lowering at all).
    """
    import resource

    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("CapEff:") and (int(line.split()[1], 16) >> 23) & 1:
                return -20  # CAP_SYS_NICE
    soft = resource.getrlimit(resource.RLIMIT_NICE)[0]
    if soft == resource.RLIM_INFINITY:
        return -20
    return 20 - int(soft)


def task_niceness(driver: int) -> int:
    """Inside a task: the niceness its work can run at, the driver's where this worker may.

    Ray starts workers at ``RAY_worker_niceness`` (15 by default); lowering it needs
    ``CAP_SYS_NICE`` or an ``RLIMIT_NICE`` that allows it. Never above the worker's own.

    Args:
        driver: the niceness of the command that submitted the task.
    """
    current = niceness()
    if current <= driver:
        return current
    return min(current, max(driver, _lowest_nice_allowed()))


@contextlib.contextmanager
def driver_priority(driver: int) -> Iterator[int]:
    """Inside a task: this worker's threads at :func:`task_niceness` for the block, then back.

    Yields:
        The niceness the block's work runs at (threads it starts inherit it).
    """
    target, current = task_niceness(driver), niceness()
    if target == current:
        yield current
        return
    changed: list[tuple[int, int]] = []
    for name in os.listdir("/proc/self/task"):
        tid = int(name)
        try:
            before = os.getpriority(os.PRIO_PROCESS, tid)
            os.setpriority(os.PRIO_PROCESS, tid, target)
        except OSError:  # the thread ended meanwhile
            continue
        changed.append((tid, before))
    try:
        yield target
    finally:
        for tid, before in changed:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, tid, before)


def niceness_warning(what: str, ran: int, driver: int, where: str) -> str:
    """The one warning line for work a node ran at a lower priority than its driver.

    Args:
        what: what ran, e.g. ``"2 cell(s)"``.
        ran: the niceness it ran at.
        driver: the driver's niceness.
        where: the node(s), e.g. ``"node 10.0.0.2 (1a2b3c4d)"``.
    """
    return (f"warning: {what} ran at niceness {ran} on {where}, below this command's {driver}: "
            "Ray starts its workers at RAY_worker_niceness (15 unless set) and this worker may "
            "not lower it, so on a node busy with other work they get little CPU; start the "
            "nodes with `RAY_worker_niceness=0 ray start ...` (docs/scale.md \"On a cluster\")")


def _probe(folder: str, token: str, driver_file: str) -> dict[str, str]:
    """Task: write this node's probe file into ``folder``, read it back and the driver's."""
    node = this_node()
    path = Path(folder) / f"node-{node['id']}.txt"
    text = f"{token} {node['id']}\n"
    problem = ""
    try:
        path.write_text(text, encoding="utf-8")
        if path.read_text(encoding="utf-8") != text:
            problem = "the probe file read back differs from what was written"
        elif Path(driver_file).read_text(encoding="utf-8").strip() != token:
            problem = "the driver's probe file holds something else there"
    except OSError as exc:
        problem = f"{exc.strerror or exc} ({exc.filename or path})"
    return {**node, "problem": problem}


def check_shared_folder(ray: ModuleType, folder: Path, *,
                        timeout: float = PROBE_TIMEOUT_S) -> list[dict[str, Any]]:
    """Check that every alive node sees ``folder`` as this machine does; return the nodes.

    Each node writes a probe file there and reads back the one this machine wrote; this machine
    then reads each node's. The probe folder is removed afterwards.

    Raises:
        ClusterError: a node cannot see the folder (named with the path), or did not answer.
    """
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    folder = folder.resolve()
    token = uuid.uuid4().hex
    probes = folder / f".prbench-probe-{token[:12]}"
    probes.mkdir(parents=True, exist_ok=True)
    driver_file = probes / "driver.txt"
    driver_file.write_text(token + "\n", encoding="utf-8")
    nodes = alive_nodes(ray)
    try:
        remote = ray.remote(_probe)
        refs = {
            remote.options(num_cpus=0, max_retries=0, scheduling_strategy=(
                NodeAffinitySchedulingStrategy(node["NodeID"], soft=False))
            ).remote(str(probes), token, str(driver_file)): node
            for node in nodes
        }
        ready, waiting = ray.wait(list(refs), num_returns=len(refs), timeout=timeout)
        if waiting:
            node = refs[waiting[0]]
            raise ClusterError(
                f"node {node_label(node['NodeID'], node.get('NodeManagerAddress'))} did not "
                f"answer the shared-storage probe of {folder} within {timeout:g} s"
            )
        for ref in ready:
            node = refs[ref]
            label = node_label(node["NodeID"], node.get("NodeManagerAddress"))
            got = ray.get(ref)
            problem = got["problem"]
            if not problem:
                mine = probes / f"node-{node['NodeID']}.txt"
                try:
                    if mine.read_text(encoding="utf-8") != f"{token} {node['NodeID']}\n":
                        problem = "its probe file reads differently here"
                except OSError:
                    problem = "the probe file it wrote is not here"
            if problem:
                raise ClusterError(
                    f"node {label} cannot share the output folder {folder}: {problem}; put "
                    "-o/--output_path on storage every node mounts at the same path "
                    "(docs/scale.md \"On a cluster\")"
                )
    finally:
        import shutil

        with contextlib.suppress(OSError):
            shutil.rmtree(probes)
    return nodes


def task_options(resources: Mapping[str, float], nodes: list[dict[str, Any]],
                 what: str) -> dict[str, Any]:
    """Ray task options for ``resources`` (``gpus``, ``cpus``, ``memory`` in GiB).

    Raises:
        ClusterError: no alive node has that much of a resource (Ray would wait forever).
    """
    want = {"GPU": resources.get("gpus", 0.0), "CPU": resources.get("cpus", 1.0),
            "memory": resources.get("memory", 0.0) * 2**30}
    fits = [n for n in nodes
            if all((n.get("Resources") or {}).get(k, 0.0) >= v for k, v in want.items() if v)]
    if not fits:
        have = ", ".join(
            f"{node_label(n['NodeID'], n.get('NodeManagerAddress'))}: "
            f"{(n.get('Resources') or {}).get('GPU', 0):g} GPU, "
            f"{(n.get('Resources') or {}).get('CPU', 0):g} CPU, "
            f"{(n.get('Resources') or {}).get('memory', 0) / 2**30:.1f} GiB"
            for n in nodes)
        raise ClusterError(
            f"{what} asks for {want['GPU']:g} GPU, {want['CPU']:g} CPU, "
            f"{want['memory'] / 2**30:g} GiB, which no node of the cluster has ({have}): ask for "
            "less (the sweep file's resources:, rank's --shard_resources) or add such a node"
        )
    options: dict[str, Any] = {"num_cpus": want["CPU"], "num_gpus": want["GPU"]}
    if want["memory"]:
        options["memory"] = int(want["memory"])
    return options
