"""The Ray executor of a sweep: each eval call one Ray task, on whichever node Ray picks.

``prbench sweep FILE --executor ray`` hands the eval calls :func:`prbench.harness.sweep.run_sweep`
would run one after the other to a Ray cluster instead (:mod:`prbench.cluster` connects). A task
runs the same cell command as a local sweep (``python -m prbench.cli eval ...`` in a subprocess,
the driver's working folder and its ``PRBENCH_*``/``HF_*`` environment), so its files, records
and the table are the same; the sweep's finished-cell rule is unchanged, and a local and a Ray
run of one file into one folder are interchangeable.

- Before any cell runs, every node proves it sees the output folder (a probe file each way).
- Each task asks for its scorer's ``resources:`` (defaults: :func:`default_resources`).
- A task whose command was killed by a signal (the OOM killer, a node shutting down) raises
  :class:`prbench.cluster.MachineFailure`, and a task on a node that died is lost: Ray retries
  both, up to ``--max_retries`` times, on any node. A command that exits with an error (bad
  input) returns it: never retried.
- Ctrl-C cancels the tasks not finished (their commands are killed with them), keeps the
  finished cells, and ends the sweep with exit 130.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: default ``--max_retries``: retries of a task the machine ended (never one its input ended)
DEFAULT_MAX_RETRIES = 1


@dataclasses.dataclass(frozen=True)
class Job:
    """One eval call to run as a task."""

    key: str  # the cells it evaluates, for messages
    argv: list[str]  # ``prbench eval`` arguments (the local sweep's)
    folder: Path  # its run folder (removed first: an earlier attempt's files)
    log: Path  # its output
    resources: dict[str, float]  # what it asks of a node (after defaults)
    cells: int = 1


@dataclasses.dataclass(frozen=True)
class JobResult:
    """What a task returned: the command's exit code and output, where and how long it ran."""

    rc: int
    text: str
    node_id: str
    node_ip: str
    seconds: float
    attempt: int = 0
    #: the niceness the cell command ran at (the driver's where the worker may lower its own)
    nice: int = 0


def uses_device(model_args: str) -> bool:
    """Whether a scorer runs a model on this machine's device (its options have ``device``).

    ``device=cpu`` in ``model_args`` and scorers without a ``device`` option (baselines,
    HTTP-served judges) do not.
    """
    from prbench.options import OptionsError, parse_kv_string
    from prbench.plugins import get_registry

    try:
        args = parse_kv_string(model_args)
        component = get_registry().get("scorer", str(args.get("scorer") or ""))
    except (OptionsError, KeyError, LookupError, ValueError):
        return False  # the eval itself reports an unknown scorer, as a failed cell
    fields = {f.name for f in dataclasses.fields(component.options)} \
        if component.options is not None and dataclasses.is_dataclass(component.options) else set()
    if "device" not in fields:
        return False
    return str(args.get("device", "auto")).lower() not in ("cpu",)


def default_resources(given: dict[str, float], model_args: str, cluster_gpus: float
                      ) -> dict[str, float]:
    """``given`` with the defaults: 1 CPU; 1 GPU for a scorer on a device when the cluster has one.

    A scorer that runs a model asks for one GPU by default, unless the cluster has none (it then
    runs on a CPU, as it would locally); a baseline (``length``) asks for none.
    """
    out = {"cpus": 1.0, **given}
    if "gpus" not in out:
        out["gpus"] = 1.0 if cluster_gpus >= 1 and uses_device(model_args) else 0.0
    return out


def _set_parent_death_signal() -> None:
    """In the child before exec: die with the task's worker (a lost node leaves no orphan)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def run_job(run: Callable[..., tuple[int, str]], argv: list[str], folder: str, log: str,
            cwd: str, env: dict[str, str], nice: int = 0) -> JobResult:
    """Task body: run the cell command on this node; a signal's kill is a machine failure.

    The command runs at the driver's niceness ``nice`` where this worker may lower its own
    (Ray's workers run at 15), as it would locally; :attr:`JobResult.nice` says what it got.
    """
    from prbench.cluster import (
        EXECUTOR_ENV,
        NODE_ENV,
        MachineFailure,
        local_env,
        niceness,
        task_niceness,
        this_node,
    )

    node = this_node()
    start = time.monotonic()
    env = {**local_env(env), EXECUTOR_ENV: "ray", NODE_ENV: f"{node['id']}@{node['ip']}"}
    target = task_niceness(nice)
    lower = target < niceness()

    def preexec() -> None:  # in the child before exec
        _set_parent_death_signal()
        if lower:
            os.setpriority(os.PRIO_PROCESS, 0, target)

    rc, text = run(argv, Path(folder), Path(log), cwd=cwd, env=env, preexec=preexec)
    if rc < 0:  # killed by a signal: the machine's doing (OOM killer, shutdown), not the input's
        raise MachineFailure(f"the cell command was killed by signal {-rc} on node "
                             f"{node['ip']} ({node['id'][:8]})")
    return JobResult(rc, text, node["id"], node["ip"], round(time.monotonic() - start, 2),
                     nice=target)


def _failure_line(exc: BaseException, retries: int) -> str:
    """The one error line of a task the machine ended (node died, OOM), after its retries."""
    cause = getattr(exc, "cause", None)
    lines = str(cause if cause is not None else exc).strip().splitlines()
    detail = next((ln.strip() for ln in lines if ln.strip()), type(exc).__name__)
    return (f"error: the machine ended the task ({type(exc).__name__}: {detail[:300]}), "
            f"{retries} retr{'y' if retries == 1 else 'ies'} spent: check the node (memory, "
            "GPU, logs) and run the sweep again, or raise --max_retries")


def run_jobs(
    jobs: Sequence[Job],
    *,
    run: Callable[..., tuple[int, str]],
    ray: Any,
    max_retries: int,
    on_done: Callable[[Job, int, str, dict[str, Any]], None],
    say: Callable[[str], None],
) -> None:
    """Run ``jobs`` as Ray tasks; ``on_done(job, rc, text, info)`` as each ends (any order).

    ``info`` has ``seconds``, ``executor``, ``ray_node_id``, ``ray_node_ip`` (a task the machine
    ended after its retries: ``rc`` 1 and its error line as the text).

    Raises:
        KeyboardInterrupt: after cancelling the tasks not finished (Ctrl-C).
    """
    from prbench.cluster import (
        MachineFailure,
        RayTasks,
        alive_nodes,
        niceness,
        niceness_warning,
        node_label,
        task_options,
    )
    from prbench.progress import progress_bar

    nodes = alive_nodes(ray)
    driver_nice = niceness()
    lowly: dict[str, int] = {}  # node -> the niceness cells ran at, where above the driver's
    remote = ray.remote(run_job)
    cwd, env = os.getcwd(), _env()
    refs: dict[Any, Job] = {}
    # every request checked before the first task is submitted: none runs if one cannot
    asks = [task_options(job.resources, nodes, f"cell {job.key}") for job in jobs]
    for job, options in zip(jobs, asks, strict=True):
        ref = remote.options(**options, max_retries=max_retries,
                             retry_exceptions=[MachineFailure]).remote(
            run, job.argv, str(job.folder.resolve()), str(job.log.resolve()), cwd, env,
            driver_nice)
        refs[ref] = job
    total = sum(j.cells for j in jobs)
    bar = progress_bar(total, desc="sweep (ray)", unit="cell")
    tasks = RayTasks(ray, refs)
    try:
        for ref in tasks.finished():
            job = refs[ref]
            try:
                result: JobResult = ray.get(ref)
                rc, text = result.rc, result.text
                info = {"seconds": result.seconds, "executor": "ray",
                        "ray_node_id": result.node_id, "ray_node_ip": result.node_ip,
                        "nice": result.nice}
                if result.nice > driver_nice:
                    lowly.setdefault(node_label(result.node_id, result.node_ip), result.nice)
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # the machine ended it (node died, OOM), retries spent
                rc, text = 1, _failure_line(exc, max_retries)
                info = {"seconds": None, "executor": "ray", "ray_node_id": None,
                        "ray_node_ip": None}
            on_done(job, rc, text, info)
            bar.update(job.cells)
        if lowly:
            say(niceness_warning("cells", max(lowly.values()), driver_nice,
                                 "node(s) " + ", ".join(sorted(lowly))))
    except KeyboardInterrupt:
        cancelled = tasks.cancel_rest()
        say(f"sweep: interrupted; {cancelled} Ray task(s) cancelled, finished cells kept "
            "(a re-run runs the rest)")
        raise
    finally:
        bar.close()


def _env() -> dict[str, str]:
    from prbench.cluster import passed_env

    return passed_env()


__all__ = [
    "DEFAULT_MAX_RETRIES",
    "Job",
    "JobResult",
    "default_resources",
    "run_job",
    "run_jobs",
    "uses_device",
]
