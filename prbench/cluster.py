"""Handing work to a Ray cluster: connecting, the nodes, shared storage, task resources.

``prbench sweep --executor ray`` and ``prbench rank --executor ray`` run their cells and shards
as Ray tasks; this module is what both need from Ray. Ray is an optional extra
(``pip install "prbench[cluster]"``), imported only here and only when ``--executor ray`` is
given: without it the command ends in one ``error:`` line saying how to install it.

- :func:`connect` joins the cluster at ``--ray_address`` (else ``RAY_ADDRESS`` where the user set
  it, else a new cluster of the command's own: never the one Ray's ``ray_current_cluster`` file
  names, on a shared machine maybe another user's) and says which (address, nodes).
  :func:`check_address` first asks the address, in a bounded wait, what answers there: nothing, a
  web server, a service that is not Ray's GCS, or a GCS that refuses this command's token are each
  one error, not Ray's minute of warnings.
- :func:`check_ray_flags` refuses a Ray-only flag given without ``--executor ray``.
- :func:`one_line_raylet_deaths` turns the ~20-line report of a raylet that died into one line
  naming the node.
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
from collections.abc import Callable, Iterable, Iterator, Mapping
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
    "auth_refusal",
    "check_address",
    "check_ray_flags",
    "check_shared_folder",
    "connect",
    "driver_priority",
    "executor_info",
    "import_ray",
    "local_env",
    "niceness",
    "niceness_warning",
    "node_label",
    "one_line_raylet_deaths",
    "passed_env",
    "raylet_death_line",
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


def check_ray_flags(executor: str, given: Mapping[str, object], what: str) -> None:
    """Refuse a flag only ``--executor ray`` reads, given without it.

    Args:
        executor: the ``--executor`` value.
        given: each Ray-only flag and its value (``None``: not given).
        what: what the Ray tasks are, for the message (``"the shards"``).

    Raises:
        ClusterError: such a flag was given with ``--executor local``.
    """
    if executor == "ray":
        return
    named = [flag for flag, value in given.items() if value is not None]
    if named:
        flags = " and ".join(named)
        raise ClusterError(
            f"{flags} {'is' if len(named) == 1 else 'are'} read only with --executor ray "
            f"({what} as Ray tasks), and this run is local: add --executor ray, or drop {flags}"
        )


def _target(address: str | None) -> tuple[str, str]:
    """The address ``ray.init`` gets, and where it came from (for messages).

    ``--ray_address`` first; else ``RAY_ADDRESS`` as the user set it (``auto`` there means the
    cluster ``ray start`` made on this machine, as in Ray); else ``local``: a cluster of this
    command's own, never one found in Ray's ``ray_current_cluster`` file (on a shared machine,
    possibly another user's).
    """
    if address:
        return address, "--ray_address"
    env = os.environ.get("RAY_ADDRESS", "").strip()
    if env and env != "local":
        return env, "RAY_ADDRESS"
    return "local", ""


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


#: what a gRPC client (Ray's GCS client) sends first: the HTTP/2 preface and an empty SETTINGS
#: frame; a gRPC server (Ray's GCS) answers with a SETTINGS frame of its own
_HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_SETTINGS = 0x04


def _first_bytes(data: bytes) -> str:
    """The start of a reply as printable text, for a message."""
    text = data[:40].decode("latin-1")
    return "".join(c if c.isprintable() else "." for c in text)


def _not_gcs(address: str, timeout: float) -> str | None:
    """What answers at ``HOST:PORT`` when it is not a gRPC server such as Ray's GCS (None: it is).

    Sends the greeting every gRPC client sends (the HTTP/2 preface and a SETTINGS frame) and
    reads the first reply bytes: Ray's GCS answers with a SETTINGS frame; a web server answers
    ``HTTP/1.1 400``; other services answer their own banner, close, or say nothing.
    """
    host, _, port = address.rpartition(":")
    data = b""
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(_HTTP2_HELLO)
            while len(data) < 9:
                chunk = sock.recv(9 - len(data))
                if not chunk:
                    break
                data += chunk
            if len(data) == 9 and data[3] != _SETTINGS:  # more of it, for the message
                sock.settimeout(min(timeout, 0.5))
                with contextlib.suppress(OSError):
                    data += sock.recv(31)
    except TimeoutError:
        if not data:
            return (f"a service that accepts connections but gave no gRPC reply within "
                    f"{timeout:g} s")
    except OSError as exc:
        if not data:
            return f"a service that dropped the gRPC greeting ({exc.strerror or exc})"
    if len(data) == 9 and data[3] == _SETTINGS:
        return None
    if data.startswith(b"HTTP/") or data.lstrip().lower().startswith((b"<!doctype", b"<html")):
        return (f"a web server (it answered {_first_bytes(data)!r}...), not Ray's GCS "
                "(gRPC)")
    if not data:
        return "a service that closed the connection at the gRPC greeting"
    return f"a service that answered {_first_bytes(data)!r}..., not Ray's GCS (gRPC)"


def _local_ip_towards(address: str) -> str | None:
    """This machine's address on the route to ``HOST:PORT`` (what the cluster should see)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host.strip("[]"), int(port)))  # UDP: picks the route, sends nothing
            return str(s.getsockname()[0])
    except (OSError, ValueError):
        return None


def check_address(target: str, where: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Check that Ray's GCS answers at ``HOST:PORT`` before ``ray.init`` waits on it.

    Ray's own wait for a service that is not its GCS (a web server on a mistyped port) runs past
    a minute and a half, printing its warnings; this one is bounded by ``timeout``.

    Args:
        target: ``HOST:PORT``.
        where: where the address came from (``--ray_address``, ``RAY_ADDRESS``).
        timeout: seconds for each of the two checks (TCP connect, the gRPC greeting).

    Raises:
        ClusterError: nothing answers there, or something that is not a gRPC server.
    """
    problem = _reachable(target, timeout)
    if problem:
        raise ClusterError(
            f"no Ray cluster answers at {where} {target} within {timeout:g} s ({problem}): "
            "start one (`ray start --head` on the first node, docs/scale.md \"On a "
            "cluster\") or fix the address"
        )
    found = _not_gcs(target, timeout) or _gcs_handshake(target, where, timeout)
    if found:
        raise ClusterError(
            f"no Ray cluster at {where} {target}: found {found}; give the port `ray start "
            "--head` printed (its GCS, 6379 by default), not the dashboard's or another "
            "service's"
        )


#: run in a child process: Ray's own GCS client asks the GCS for its cluster id (what
#: ``ray.init`` does first); its warnings (one a second while it retries) stay in the child
_HANDSHAKE = """
import sys
from ray._raylet import GcsClient
print("cluster-id", GcsClient(address=sys.argv[1]).cluster_id.hex(), flush=True)
"""


def _gcs_handshake(target: str, where: str, timeout: float) -> str | None:
    """Ask the GCS at ``target`` for its cluster id, as ``ray.init`` does, in a bounded child.

    Ray's client retries a refused or silent GCS for 20 s, printing a warning a second, and then
    says only "Failed to connect"; the child keeps those lines and this reads them.

    Returns:
        What answers there when it is not Ray's GCS (None: the GCS answered).

    Raises:
        ClusterError: the GCS refused this command's token (Ray's ``InvalidAuthToken``).
    """
    import subprocess
    import sys

    seconds = max(int(timeout), 1)
    env = {**os.environ, "RAY_gcs_rpc_server_connect_timeout_s": str(seconds)}
    try:
        proc = subprocess.run([sys.executable, "-c", _HANDSHAKE, target], env=env,
                              capture_output=True, text=True, timeout=seconds + 60,
                              check=False)
    except subprocess.TimeoutExpired:
        return f"a service that gave no GCS reply within {seconds + 60} s"
    if "cluster-id" in proc.stdout:
        return None
    said = proc.stderr + proc.stdout
    if "InvalidAuthToken" in said or "Unauthenticated" in said or "authentication token" in said:
        raise ClusterError(auth_refusal(where, target, said=said))
    if "ModuleNotFoundError" in said or "ImportError" in said:
        return None  # another Ray than the pinned one: Ray's own wait decides
    return (f"a service that does not answer as Ray's GCS within {seconds} s (Ray's client: "
            f"{_last_ray_line(said)})")


def _last_ray_line(text: str) -> str:
    """The last informative line of a Ray client's output, without its log prefix."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "no output"
    last = lines[-1]
    return last.rsplit("] ", 1)[-1][:160]


def auth_refusal(where: str, target: str, *, said: str = "") -> str:
    """The one line for a cluster that refused this command's token (Ray's ``InvalidAuthToken``).

    Args:
        where: where the address came from.
        target: the address.
        said: what Ray's client said (tells a missing token from a wrong one).
    """
    if os.environ.get("RAY_AUTH_MODE", "").strip().lower() != "token":
        why = "this command sent none (RAY_AUTH_MODE is not token here)"
    elif "find an authentication token" in said or "no authentication token" in said.lower():
        why = "RAY_AUTH_MODE=token here but no token was found"
    else:
        why = "the token this command sent is not the cluster's"
    return (f"the Ray cluster at {where} {target} refused this command (InvalidAuthToken): it "
            f"uses token authentication and {why}; run with RAY_AUTH_MODE=token and the head's "
            "token (RAY_AUTH_TOKEN, a RAY_AUTH_TOKEN_PATH file, or ~/.ray/auth_token; `ray "
            "get-auth-token` on the head prints it), docs/scale.md \"On a cluster\"")


def connect(address: str | None, *, timeout: float = CONNECT_TIMEOUT_S,
            say: Callable[[str], None] | None = None) -> ModuleType:
    """Join the Ray cluster at ``address`` and return the ``ray`` module (connected).

    Says which cluster it uses (address, nodes) once, when it connects.

    Args:
        address: ``HOST:PORT`` of the head's GCS (what ``ray start --head`` prints); ``None``:
            ``RAY_ADDRESS`` where the user set it, else a new cluster of this command's own on
            this machine (never the one Ray's ``ray_current_cluster`` file names).
        timeout: seconds to wait for the address to answer.
        say: where the line naming the cluster goes (standard error when ``None``).

    Raises:
        ClusterError: Ray missing, no cluster at the address within ``timeout``, or the cluster
            refused this command (its token).
    """
    ray = import_ray()
    if ray.is_initialized():
        return ray
    target, where = _target(address)
    remote = target not in ("auto", "local") and not target.startswith("ray://")
    if remote:
        check_address(target, where, timeout)
    os.environ.setdefault("RAY_gcs_rpc_server_connect_timeout_s", str(int(max(timeout, 1))))
    extra: dict[str, Any] = {}
    if remote:
        ip = _local_ip_towards(target)
        if ip:
            extra["_node_ip_address"] = ip  # the address the head is reached from, not a guess
    try:  # an explicit "local" is never replaced by RAY_ADDRESS or ray_current_cluster
        ray.init(address=target, log_to_driver=False, logging_level="ERROR",
                 configure_logging=False, **extra)
    except (ConnectionError, TimeoutError, RuntimeError, ValueError,
            ray.exceptions.RayError) as exc:
        raise ClusterError(_join_error(exc, target, where)) from None
    tell = say or _to_stderr
    _announce(ray, target, where, tell)
    ray_worker = getattr(getattr(ray, "_private", None), "worker", None)
    if ray_worker is not None and hasattr(ray_worker, "print_to_stdstream"):
        one_line_raylet_deaths(ray, ray_worker, tell)
    return ray


def _to_stderr(line: str) -> None:
    import sys

    print(line, file=sys.stderr, flush=True)


#: how long to wait for the cluster to mark a node dead once its raylet's death is reported
NODE_DEATH_WAIT_S = 60.0


def raylet_death_line(node: dict[str, Any] | None) -> str:
    """The one line for a node whose raylet died (``None``: not yet known which)."""
    which = (f"node {node_label(node['NodeID'], node.get('NodeManagerAddress'))}" if node
             else "a node")
    return (f"ray: {which} died (its raylet ended unexpectedly: killed, e.g. by the OOM "
            "killer, or crashed); its tasks run again on the other nodes (--max_retries); its "
            "last log lines are in logs/raylet.out of the Ray session folder on that node")


def one_line_raylet_deaths(ray: ModuleType, ray_worker: Any,
                           say: Callable[[str], None], *,
                           wait_s: float = NODE_DEATH_WAIT_S) -> None:
    """Print a dying raylet's report as one line naming the node, not Ray's ~20-line dump.

    Ray hands every connected driver the report of a raylet that died (the last 20 lines of its
    log, a state dump) through ``ray._private.worker.print_to_stdstream``; this wraps that
    function. The report names no node, so the line is said once the cluster marks a node dead
    (within ``wait_s``; a background thread waits), naming it.

    Args:
        ray: the connected ``ray`` module.
        ray_worker: ``ray._private.worker`` (the module whose function is wrapped).
        say: where the line goes.
        wait_s: the longest wait for the cluster to mark the node dead.
    """
    import threading
    import time

    original = ray_worker.print_to_stdstream
    if getattr(original, "prbench_wrapped", False):
        return
    told: set[str] = {n["NodeID"] for n in ray.nodes() if not n.get("Alive")}
    lock = threading.Lock()

    def name_the_dead() -> None:
        deadline = time.monotonic() + wait_s
        while True:
            dead: list[dict[str, Any]] = []
            with contextlib.suppress(Exception), lock:  # the cluster may be going away too
                dead = [n for n in ray.nodes() if not n.get("Alive") and n["NodeID"] not in told]
                told.update(n["NodeID"] for n in dead)
            if dead:
                for node in dead:
                    say(raylet_death_line(node))
                return
            if time.monotonic() > deadline:
                say(raylet_death_line(None))
                return
            time.sleep(0.5)

    def print_to_stdstream(data: dict[str, Any], ignore_prefix: bool) -> None:
        lines = data.get("lines") or []
        if data.get("pid") == "raylet" and lines and \
                str(lines[0]).startswith("Raylet is terminated"):
            threading.Thread(target=name_the_dead, name="prbench-raylet-death",
                             daemon=True).start()
            return
        original(data, ignore_prefix)

    print_to_stdstream.prbench_wrapped = True  # type: ignore[attr-defined]
    ray_worker.print_to_stdstream = print_to_stdstream


def _join_error(exc: BaseException, target: str, where: str) -> str:
    """The one line for a failed ``ray.init``."""
    text = str(exc).strip()
    if "InvalidAuthToken" in text or type(exc).__name__ == "AuthenticationError":
        return auth_refusal(where, target, said=text)
    if target == "auto":
        return ("RAY_ADDRESS=auto found no Ray cluster on this machine: start one (`ray start "
                "--head`, docs/scale.md \"On a cluster\") or pass --ray_address HOST:PORT")
    first = (text.splitlines() or [type(exc).__name__])[0]
    if target == "local":
        return f"--executor ray could not start a Ray cluster on this machine: {first}"
    return f"cannot join the Ray cluster at {where} {target}: {first}"


def _announce(ray: ModuleType, target: str, where: str, say: Callable[[str], None]) -> None:
    """One line naming the cluster this command uses: its address and nodes."""
    try:
        gcs = ray.get_runtime_context().gcs_address
    except Exception:
        gcs = target
    nodes = alive_nodes(ray)
    cpus = sum((n.get("Resources") or {}).get("CPU", 0.0) for n in nodes)
    gpus = sum((n.get("Resources") or {}).get("GPU", 0.0) for n in nodes)
    size = f"{len(nodes)} node(s), {cpus:g} CPU(s), {gpus:g} GPU(s)"
    if target == "local":
        line = (f"ray: started a Ray cluster of this command's own at {gcs} ({size}; it stops "
                "with the command); for a cluster `ray start` made, pass --ray_address "
                "HOST:PORT")
    else:
        line = f"ray: using the Ray cluster at {gcs} ({where} {target}; {size})"
    say(line)


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
