"""Sweeps: a grid of scorers x conditions, each cell one ``prbench eval`` run, resumable.

The sweep file (scorers x conditions; its format is in :mod:`prbench.harness.sweep_file`) is read
there. This module runs its cells.

Layout under the output folder: ``cells/<scorer>/<condition>.json`` (one record per cell: status,
the eval command, the results file, the error), ``runs/<scorer>/<condition>/`` (what
``prbench eval --output_path ... --log_samples`` wrote) and ``logs/`` (each eval's output).
A cell is *finished* when its record says so, was made from the same cell definition, and its
results file, manifest and every samples file are on disk; finished cells are skipped on a
re-run, anything else (never run, failed, killed half-way, changed) runs again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prbench.analysis.sweep_table import SWEEP_FILE, leaf_tasks
from prbench.harness.sweep_file import Cell, Sweep, SweepFileError, slug, where_in

# ---------------------------------------------------------------- where a cell's files live


def record_path(out: Path, cell: Cell) -> Path:
    """The cell's record (status, command, results file, error)."""
    return out / "cells" / slug(cell.scorer.name) / f"{slug(cell.condition.name)}.json"


def run_dir(out: Path, cells: Sequence[Cell]) -> Path:
    """Where the eval of ``cells`` (one scorer; one or several conditions) writes."""
    names = "+".join(slug(c.condition.name) for c in cells)
    return out / "runs" / slug(cells[0].scorer.name) / names


def log_path(out: Path, cells: Sequence[Cell]) -> Path:
    """The eval's output (standard output and error)."""
    names = "+".join(slug(c.condition.name) for c in cells)
    return out / "logs" / slug(cells[0].scorer.name) / f"{names}.log"


def read_record(out: Path, cell: Cell) -> dict[str, Any] | None:
    """The cell's record, or None when absent or unreadable (then the cell runs again)."""
    try:
        data = json.loads(record_path(out, cell).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _write_json(path: Path, data: Any) -> None:
    from prbench.outputs import write_text

    write_text(path, json.dumps(data, indent=2, default=str) + "\n")  # a kill: no half record




def results_problem(results_file: Path, tasks: Sequence[str]) -> str | None:
    """Why ``results_file`` does not hold a finished evaluation of ``tasks`` (None: it does).

    Finished: the results file reads, every task (groups expanded) has an accuracy, its samples
    file and prbench's manifest of the same run are beside it.
    """
    from prbench.analysis.runs import RunFileError, manifest_path, read_json, samples_file
    from prbench.harness.summary import task_rows

    try:
        results = read_json(results_file)
    except RunFileError as exc:
        return str(exc)
    if not manifest_path(results_file).is_file():
        return "no prbench manifest beside the results (the run did not end)"
    rows = task_rows(results, length_baseline=False)
    for task in leaf_tasks(results, tasks):
        if task not in rows:
            return f"task {task} has no accuracy in {results_file.name}"
        if samples_file(results_file, task) is None:
            return f"no samples file of {task}"
    return None


def finished(out: Path, cell: Cell) -> bool:
    """Whether the cell is finished (see the module docstring)."""
    record = read_record(out, cell)
    if not record or record.get("status") != "done":
        return False
    if record.get("fingerprint") != cell.fingerprint() or not record.get("results"):
        return False
    file = Path(record["results"])
    return file.is_file() and results_problem(file, cell.condition.tasks) is None


# ------------------------------------------------------------------------------ running


def eval_argv(cells: Sequence[Cell], output: Path, plugins: Sequence[str]) -> list[str]:
    """The ``prbench eval`` arguments that evaluate ``cells`` (one scorer, same metadata)."""
    first = cells[0]
    tasks = [t for c in cells for t in c.condition.tasks]
    argv = [*(f"--plugin={p}" for p in plugins), "eval", "--model", "prbench",
            "--model_args", first.scorer.model_args, "--tasks", ",".join(dict.fromkeys(tasks)),
            "--output_path", str(output), "--log_samples", "--no-progress"]
    if first.condition.metadata:
        argv += ["--metadata", json.dumps(first.condition.metadata, sort_keys=True)]
    if first.limit is not None:
        argv += ["--limit", f"{first.limit:g}"]
    return [*argv, *first.eval_args]


def _newest_results(folder: Path) -> Path | None:
    found = sorted(folder.rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def _error_line(text: str, rc: int) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    if errors:  # without its "error:", so that the sweep prints one error line per failed cell
        return errors[-1].removeprefix("error:").strip()
    return f"exit code {rc}: {lines[-1] if lines else 'no output'}"


def _run_subprocess(argv: list[str], log: Path, *, cwd: str | None = None,
                    env: dict[str, str] | None = None,
                    preexec: Callable[[], None] | None = None) -> tuple[int, str]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as fh:
        rc = subprocess.run([sys.executable, "-m", "prbench.cli", *argv], stdout=fh,
                            stderr=subprocess.STDOUT, check=False, cwd=cwd, env=env,
                            preexec_fn=preexec).returncode
    return rc, log.read_text(encoding="utf-8", errors="replace")


def run_cell_command(argv: list[str], folder: Path, log: Path, *, cwd: str | None = None,
                     env: dict[str, str] | None = None,
                     preexec: Callable[[], None] | None = None) -> tuple[int, str]:
    """The cell command: ``prbench eval ARGV`` in a subprocess, into a fresh ``folder``.

    What an earlier attempt left in ``folder`` is removed first. The same command runs locally
    and as a Ray task (:mod:`prbench.harness.sweep_ray`, with the driver's ``cwd`` and the
    whole environment ``env``; ``None``: this process's).

    Returns:
        The exit code (negative: killed by that signal) and the command's output.
    """
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    return _run_subprocess(argv, log, cwd=cwd, env=env, preexec=preexec)


def _run_in_process(argv: list[str], log: Path) -> tuple[int, str]:
    import io

    from prbench.cli import main

    log.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            rc = main(argv)
    except SystemExit as exc:  # argparse
        rc = exc.code if isinstance(exc.code, int) else 1
    except Exception as exc:  # a failed cell is recorded; the sweep goes on
        buffer.write(f"\nerror: {type(exc).__name__}: {exc}\n")
        rc = 1
    text = buffer.getvalue()
    from prbench.outputs import write_text

    write_text(log, text)
    return rc, text


def batches(cells: Sequence[Cell], reuse_model: bool) -> list[list[Cell]]:
    """The eval calls: one per cell, or (``reuse_model``) one per scorer and metadata.

    lm-eval evaluates several tasks in one call with one loaded model; conditions whose metadata
    differ (another profile builder) cannot share a call, since lm-eval's ``--metadata`` applies
    to every task of the call.
    """
    if not reuse_model:
        return [[c] for c in cells]
    out: dict[tuple[str, str], list[Cell]] = {}
    for cell in cells:
        key = (cell.scorer.name, json.dumps(cell.condition.metadata, sort_keys=True))
        out.setdefault(key, []).append(cell)
    return list(out.values())


def _joins(target: str, parts: Sequence[str]) -> bool:
    """Whether ``target`` is ``"+".join`` of two or more of ``parts``, kept in their order."""

    def rest(text: str, start: int, count: int) -> bool:
        if not text:
            return count >= 2
        return any(text.startswith(parts[i])
                   and (len(text) == len(parts[i]) or text[len(parts[i])] == "+")
                   and rest(text[len(parts[i]) + 1:], i + 1, count + 1)
                   for i in range(start, len(parts)))

    return rest(target, 0, 0)


def folder_clashes(cells: Sequence[Cell], reuse_model: bool) -> list[str]:
    """Cells whose eval folders can be the same, each as one line (empty: none).

    A run writes ``runs/<scorer>/<conditions joined by +>/`` and first deletes what an earlier
    attempt left there. Under ``reuse_model`` the conditions of a scorer that run in one call
    (all of a metadata group, or on a re-run any unfinished subset of it) are joined (``a+b``),
    so a condition named ``a+b`` would share, and delete, the folder holding another cell's
    results.
    """
    if not reuse_model:
        return []
    out: list[str] = []
    for group in batches(cells, True):
        for cell in cells:
            if cell.scorer.name != group[0].scorer.name:
                continue
            others = [c for c in group if c != cell]  # a re-run may run any subset together
            if len(others) >= 2 and _joins(slug(cell.condition.name),
                                           [slug(c.condition.name) for c in others]):
                out.append(
                    f"under --reuse_model, condition {cell.condition.name!r} of scorer "
                    f"{cell.scorer.name!r} would share its folder "
                    f"({run_dir(Path('.'), [cell]).as_posix()}) with conditions among "
                    f"{', '.join(repr(c.condition.name) for c in others)} run together: "
                    "rename it, or run without --reuse_model")
    return out


def _deletes_others(out: Path, folder: Path, group: Sequence[Cell], kept: Sequence[Cell]
                    ) -> str | None:
    """Why ``folder`` must not be deleted: it holds the results a finished cell's record names."""
    for cell in kept:
        record = read_record(out, cell)
        results = (record or {}).get("results")
        if results and Path(results).resolve().is_relative_to(folder.resolve()):
            return (f"the run of {', '.join(c.key for c in group)} would replace {folder}, "
                    f"which holds the results of cell {cell.key}; rename a condition so their "
                    "folders differ")
    return None


@dataclasses.dataclass
class SweepOutcome:
    """What a sweep did: cells skipped (finished before), run now, failed now."""

    skipped: list[str] = dataclasses.field(default_factory=list)
    done: list[str] = dataclasses.field(default_factory=list)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)


def _start_records(out: Path, group: Sequence[Cell], argv: list[str]) -> None:
    for cell in group:
        _write_json(record_path(out, cell), {
            "scorer": cell.scorer.name, "condition": cell.condition.name,
            "status": "running", "fingerprint": cell.fingerprint(),
            "definition": cell.definition(), "argv": ["prbench", *argv],
        })


def _finish_records(out: Path, group: Sequence[Cell], argv: list[str], rc: int, text: str,
                    info: dict[str, Any], outcome: SweepOutcome,
                    say: Callable[[str], None]) -> None:
    """Record each cell of a finished eval call: done, or failed with its one error line."""
    folder = run_dir(out, group)
    results = _newest_results(folder) if folder.exists() else None
    seconds = info.get("seconds")
    where = ""
    if info.get("ray_node_id"):
        where = f" on node {info.get('ray_node_ip')} ({str(info['ray_node_id'])[:8]})"
    for cell in group:
        problem = None if results is None else results_problem(results, cell.condition.tasks)
        if rc == 0 and results is not None and problem is None:
            status, error = "done", None
            outcome.done.append(cell.key)
        else:
            status = "failed"
            error = _error_line(text, rc) if rc != 0 else (problem or "no results file")
            outcome.failed[cell.key] = error
        _write_json(record_path(out, cell), {
            "scorer": cell.scorer.name, "condition": cell.condition.name,
            "status": status, "fingerprint": cell.fingerprint(),
            "definition": cell.definition(), "argv": ["prbench", *argv],
            "results": None if results is None else str(results), "error": error,
            "exit_code": rc, "seconds": seconds,
            "log": str(log_path(out, group)),
            **{k: v for k, v in info.items() if k != "seconds"},
        })
        took = "" if seconds is None else f" ({seconds:g} s)"
        say(f"sweep: {status} {cell.key}{where}{took}" + (f": {error}" if error else ""))


def run_sweep(
    sweep: Sweep,
    out: Path,
    *,
    limit: float | None = None,
    reuse_model: bool = False,
    plugins: Sequence[str] = (),
    say: Callable[[str], None] = print,
    executor: str = "local",
    ray_address: str | None = None,
    max_retries: int = 1,
) -> SweepOutcome:
    """Run every unfinished cell; record each cell's outcome as soon as it is known.

    ``reuse_model`` runs the pending conditions of a scorer that share their metadata in one
    ``prbench eval`` call inside this process (the model is loaded once); otherwise every cell is
    its own ``prbench eval`` process. ``executor="ray"`` runs those processes as Ray tasks on
    the cluster at ``ray_address`` (:mod:`prbench.harness.sweep_ray`), retrying a task the
    machine ended up to ``max_retries`` times.
    """
    cells = sweep.cells(limit)
    clashes = folder_clashes(cells, reuse_model)
    if clashes:
        raise SweepFileError(where_in(sweep.path, clashes[0]))
    if executor == "ray" and reuse_model:
        from prbench.options import OptionsError

        raise OptionsError("--reuse_model runs cells inside this process; with --executor ray "
                           "each cell is a task on a node: drop one of the two")
    ray = None
    if executor == "ray":  # before anything is written: the cluster and its view of the folder
        from prbench.cluster import check_shared_folder, connect

        ray = connect(ray_address, say=say)
        out.mkdir(parents=True, exist_ok=True)
        nodes = check_shared_folder(ray, out)
        say(f"sweep: Ray cluster of {len(nodes)} node(s), each sees {out.resolve()}")
    _write_json(out / SWEEP_FILE, {
        "kind": "prbench-sweep", "sweep_file": str(sweep.path),
        "scorers": [s.name for s in sweep.scorers],
        "conditions": [{"name": c.name, "tasks": list(c.tasks)} for c in sweep.conditions],
        "cells": [{"scorer": c.scorer.name, "condition": c.condition.name,
                   "record": str(record_path(out, c).relative_to(out))} for c in cells],
        "stand_ins": sweep.stand_ins(),
    })
    outcome = SweepOutcome()
    pending = []
    for cell in cells:
        if finished(out, cell):
            say(f"sweep: skip {cell.key} (finished: {read_record(out, cell)['results']})")  # type: ignore[index]
            outcome.skipped.append(cell.key)
        else:
            pending.append(cell)
    groups = batches(pending, reuse_model)
    for group in groups:  # before anything runs: no run may delete another cell's results
        problem = _deletes_others(out, run_dir(out, group), group,
                                  [c for c in cells if c not in pending])
        if problem:
            raise SweepFileError(problem)
    if ray is not None:
        _run_on_ray(ray, groups, out, plugins, outcome, say, max_retries)
        return outcome
    for group in groups:
        folder = run_dir(out, group)
        if folder.exists():  # an earlier attempt's files: the new run replaces them
            import shutil

            shutil.rmtree(folder)
        argv = eval_argv(group, folder, plugins)
        names = ", ".join(c.key for c in group)
        say(f"sweep: run {names}")
        _start_records(out, group, argv)
        start = time.monotonic()
        if reuse_model:
            rc, text = _run_in_process(argv, log_path(out, group))
        else:
            rc, text = run_cell_command(argv, folder, log_path(out, group))
        seconds = round(time.monotonic() - start, 2)
        _finish_records(out, group, argv, rc, text, {"seconds": seconds, "executor": "local"},
                        outcome, say)
    return outcome


def _run_on_ray(ray: Any, groups: Sequence[list[Cell]], out: Path, plugins: Sequence[str],
                outcome: SweepOutcome, say: Callable[[str], None], max_retries: int) -> None:
    """Every pending eval call as a Ray task; each cell recorded as its task ends."""
    from prbench.cluster import alive_nodes
    from prbench.harness.sweep_ray import Job, default_resources, run_jobs

    gpus = sum((n.get("Resources") or {}).get("GPU", 0.0) for n in alive_nodes(ray))
    jobs, by_job = [], {}
    for group in groups:
        folder = run_dir(out, group)
        argv = eval_argv(group, folder, plugins)
        job = Job(", ".join(c.key for c in group), argv, folder, log_path(out, group),
                  default_resources(group[0].scorer.resources, group[0].scorer.model_args, gpus),
                  len(group))
        jobs.append(job)
        by_job[id(job)] = (group, argv)
    for job in jobs:
        group, argv = by_job[id(job)]
        _start_records(out, group, argv)
    say(f"sweep: {len(jobs)} cell(s) handed to Ray")

    def done(job: Job, rc: int, text: str, info: dict[str, Any]) -> None:
        group, argv = by_job[id(job)]
        _finish_records(out, group, argv, rc, text, info, outcome, say)

    run_jobs(jobs, run=run_cell_command, ray=ray, max_retries=max_retries, on_done=done,
             say=say)


__all__ = [
    "SweepOutcome",
    "batches",
    "eval_argv",
    "finished",
    "read_record",
    "record_path",
    "results_problem",
    "run_cell_command",
    "run_sweep",
]
