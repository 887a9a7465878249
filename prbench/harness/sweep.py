"""Sweeps: a grid of scorers x conditions, each cell one ``prbench eval`` run, resumable.

A sweep file (YAML) lists the scorers (rows of the final table) and the conditions (columns);
every scorer is evaluated under every condition. A scorer entry is what ``prbench eval`` takes as
``--model_args`` (plus a row name and, for ``--dry_run``, size hints); a condition entry is what
it takes as ``--tasks`` and ``--metadata``::

    output_path: results/sweep        # default of -o/--output_path
    limit: 10                         # optional, for every cell (overridden by --limit)
    eval_args: ["--batch_size", "8"]  # optional, more `prbench eval` flags for every cell
    metadata: {}                      # optional, merged under every condition's metadata
    scorers:
      - name: length                  # row label (default: the scorer id)
        model_args: {scorer: length}  # or the string "scorer=length,unit=words"
        estimate: {params_b: 8.0, tokens_per_s: 20000, generated_tokens: 0}   # --dry_run only
        stand_in: "what stands in for what"   # optional: labels the row STAND-IN in every table
    conditions:
      - name: own
        tasks: personalized_rewardbench_sample          # a name or a list of names
        metadata: {prbench_profile_k: 5}                # optional
        stand_in: "..."                                 # optional, as for a scorer

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
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prbench.analysis.sweep_table import SWEEP_FILE, leaf_tasks
from prbench.records import DataSourceError

SWEEP_KEYS = ("output_path", "limit", "eval_args", "metadata", "scorers", "conditions",
              "description")
SCORER_KEYS = ("name", "model_args", "estimate", "stand_in")
CONDITION_KEYS = ("name", "tasks", "metadata", "description", "stand_in")
ESTIMATE_KEYS = ("params_b", "tokens_per_s", "generated_tokens")
#: the grid, as resolved, is written here at the start of every sweep (``prbench report`` reads it)
#: flags the sweep sets itself; given in ``eval_args`` they are an error
OWN_FLAGS = ("--tasks", "--model", "--model_args", "--output_path", "--metadata", "--limit",
             "--log_samples")


class SweepFileError(DataSourceError):
    """A sweep file that cannot be read or is not a valid sweep (the message names the field)."""


@dataclasses.dataclass(frozen=True)
class Scorer:
    """One row of the grid: a scorer with its options."""

    name: str
    model_args: str
    estimate: dict[str, float]
    stand_in: str = ""  # what stands in for what the paper used ("": nothing)


@dataclasses.dataclass(frozen=True)
class Condition:
    """One column group of the grid: tasks plus metadata."""

    name: str
    tasks: tuple[str, ...]
    metadata: dict[str, Any]
    stand_in: str = ""  # what stands in for what the paper used ("": nothing)


@dataclasses.dataclass(frozen=True)
class Cell:
    """One (scorer, condition) evaluation."""

    scorer: Scorer
    condition: Condition
    limit: float | None
    eval_args: tuple[str, ...]

    @property
    def key(self) -> str:
        """``<scorer>/<condition>``."""
        return f"{self.scorer.name}/{self.condition.name}"

    def definition(self) -> dict[str, Any]:
        """What makes the cell (a finished cell made from another definition runs again)."""
        return {
            "model_args": self.scorer.model_args, "tasks": list(self.condition.tasks),
            "metadata": self.condition.metadata, "limit": self.limit,
            "eval_args": list(self.eval_args),
        }

    def fingerprint(self) -> str:
        """A hash of :meth:`definition`."""
        text = json.dumps(self.definition(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A parsed sweep file."""

    path: Path
    output_path: str | None
    scorers: tuple[Scorer, ...]
    conditions: tuple[Condition, ...]
    limit: float | None
    eval_args: tuple[str, ...]

    def cells(self, limit: float | None = None) -> list[Cell]:
        """Every cell, scorer by scorer (``limit`` overrides the file's)."""
        use = self.limit if limit is None else limit
        return [Cell(s, c, use, self.eval_args) for s in self.scorers for c in self.conditions]

    def stand_ins(self) -> dict[str, str]:
        """Row or column name -> what stands in there for what the paper used."""
        return {x.name: x.stand_in for x in (*self.scorers, *self.conditions) if x.stand_in}


def _stand_in(entry: dict[str, Any], path: Path, where: str) -> str:
    value = entry.get("stand_in") or ""
    if not isinstance(value, str):
        raise SweepFileError(_where(path, f"{where}.stand_in must be text"))
    return value.strip()


def slug(name: str) -> str:
    """A file-name-safe form of a row or column name."""
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", name).strip("_") or "_"


def _where(path: Path, field: str) -> str:
    return f"{path}: {field}"


def _names(items: Sequence[Any], path: Path, what: str) -> None:
    seen: set[str] = set()
    for item in items:
        if slug(item.name) in seen:
            raise SweepFileError(_where(path, f"two {what} named {item.name!r} (names must be "
                                              "unique, also as file names)"))
        seen.add(slug(item.name))


def _check_keys(entry: Any, allowed: Sequence[str], path: Path, where: str) -> dict[str, Any]:
    from prbench.options import suggest

    if not isinstance(entry, dict):
        raise SweepFileError(_where(path, f"{where} must be a mapping, got {type(entry).__name__}"))
    for key in entry:
        if key not in allowed:
            raise SweepFileError(_where(
                path, f"{where}: unknown key {key!r}{suggest(str(key), allowed)}; allowed: "
                + ", ".join(allowed)))
    return entry


def model_args_text(value: Any, path: Path, where: str) -> str:
    """``--model_args`` text from a mapping or a string; a value with a comma is refused."""
    if isinstance(value, str) and value.strip():
        return value.strip()
    if not isinstance(value, dict) or not value:
        raise SweepFileError(_where(path, f"{where}.model_args must be a non-empty mapping or "
                                          "string (e.g. {scorer: length})"))
    parts = []
    for key, val in value.items():
        text = json.dumps(val) if isinstance(val, dict | list) else str(val).lower() \
            if isinstance(val, bool) else str(val)
        if "," in text:
            raise SweepFileError(_where(path, f"{where}.model_args.{key}: a value with a comma "
                                              "cannot pass through --model_args"))
        parts.append(f"{key}={text}")
    return ",".join(parts)


def _limit(value: Any, path: Path) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise SweepFileError(_where(path, f"limit must be a positive number, got {value!r}"))
    return float(value)


def load_sweep(path: str | os.PathLike[str]) -> Sweep:
    """Read and check a sweep file.

    Raises:
        SweepFileError: unreadable, not YAML, or a missing, unknown or malformed field.
    """
    import yaml

    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SweepFileError(f"{file}: cannot read the sweep file ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise SweepFileError(f"{file}:{line} not valid YAML ({getattr(exc, 'problem', exc)})") \
            from exc
    data = _check_keys(data, SWEEP_KEYS, file, "the file")
    shared_meta = data.get("metadata") or {}
    if not isinstance(shared_meta, dict):
        raise SweepFileError(_where(file, "metadata must be a mapping"))
    eval_args = data.get("eval_args") or []
    if not isinstance(eval_args, list) or not all(isinstance(a, str) for a in eval_args):
        raise SweepFileError(_where(file, "eval_args must be a list of strings"))
    for arg in eval_args:
        if arg.split("=", 1)[0] in OWN_FLAGS:
            raise SweepFileError(_where(file, f"eval_args: {arg.split('=', 1)[0]} is set by the "
                                              "sweep itself (use scorers/conditions/limit)"))
    scorers = []
    raw_scorers = data.get("scorers")
    if not isinstance(raw_scorers, list) or not raw_scorers:
        raise SweepFileError(_where(file, "scorers must be a non-empty list"))
    for i, entry in enumerate(raw_scorers):
        where = f"scorers[{i}]"
        entry = _check_keys(entry, SCORER_KEYS, file, where)
        args = model_args_text(entry.get("model_args"), file, where)
        scorer_id = dict(p.split("=", 1) for p in args.split(",") if "=" in p).get("scorer")
        name = str(entry.get("name") or scorer_id or "")
        if not name:
            raise SweepFileError(_where(file, f"{where}: give a name or model_args.scorer"))
        estimate = _check_keys(entry.get("estimate") or {}, ESTIMATE_KEYS, file,
                               f"{where}.estimate")
        for key, val in estimate.items():
            if isinstance(val, bool) or not isinstance(val, int | float) or val < 0:
                raise SweepFileError(_where(file, f"{where}.estimate.{key} must be a number"))
        scorers.append(Scorer(name, args, {k: float(v) for k, v in estimate.items()},
                              _stand_in(entry, file, where)))
    conditions = []
    raw_conditions = data.get("conditions")
    if not isinstance(raw_conditions, list) or not raw_conditions:
        raise SweepFileError(_where(file, "conditions must be a non-empty list"))
    for i, entry in enumerate(raw_conditions):
        where = f"conditions[{i}]"
        entry = _check_keys(entry, CONDITION_KEYS, file, where)
        tasks = entry.get("tasks")
        tasks = [tasks] if isinstance(tasks, str) else tasks
        if not isinstance(tasks, list) or not tasks or not all(isinstance(t, str) for t in tasks):
            raise SweepFileError(_where(file, f"{where}.tasks must be a task name or a list"))
        meta = entry.get("metadata") or {}
        if not isinstance(meta, dict):
            raise SweepFileError(_where(file, f"{where}.metadata must be a mapping"))
        name = str(entry.get("name") or "+".join(tasks))
        conditions.append(Condition(name, tuple(tasks), {**shared_meta, **meta},
                                    _stand_in(entry, file, where)))
    _names(scorers, file, "scorers")
    _names(conditions, file, "conditions")
    out = data.get("output_path")
    return Sweep(file, None if out is None else str(out), tuple(scorers), tuple(conditions),
                 _limit(data.get("limit"), file), tuple(eval_args))


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
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)  # a kill never leaves half a record




def results_problem(results_file: Path, tasks: Sequence[str]) -> str | None:
    """Why ``results_file`` does not hold a finished evaluation of ``tasks`` (None: it does).

    Finished: the results file reads, every task (groups expanded) has an accuracy, its samples
    file and prbench's manifest of the same run are beside it.
    """
    from prbench.analysis.runs import RunFileError, read_json
    from prbench.harness.summary import task_rows

    try:
        results = read_json(results_file)
    except RunFileError as exc:
        return str(exc)
    date = results_file.stem[len("results_"):]
    if not results_file.with_name(f"prbench_manifest_{date}.json").is_file():
        return "no prbench manifest beside the results (the run did not end)"
    rows = task_rows(results, length_baseline=False)
    for task in leaf_tasks(results, tasks):
        if task not in rows:
            return f"task {task} has no accuracy in {results_file.name}"
        if not results_file.with_name(f"samples_{task}_{date}.jsonl").is_file():
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
    if errors:
        return errors[-1]
    return f"exit code {rc}: {lines[-1] if lines else 'no output'}"


def _run_subprocess(argv: list[str], log: Path) -> tuple[int, str]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as fh:
        rc = subprocess.run([sys.executable, "-m", "prbench.cli", *argv], stdout=fh,
                            stderr=subprocess.STDOUT, check=False).returncode
    return rc, log.read_text(encoding="utf-8", errors="replace")


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
    log.write_text(text, encoding="utf-8")
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


@dataclasses.dataclass
class SweepOutcome:
    """What a sweep did: cells skipped (finished before), run now, failed now."""

    skipped: list[str] = dataclasses.field(default_factory=list)
    done: list[str] = dataclasses.field(default_factory=list)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)


def run_sweep(
    sweep: Sweep,
    out: Path,
    *,
    limit: float | None = None,
    reuse_model: bool = False,
    plugins: Sequence[str] = (),
    say: Callable[[str], None] = print,
) -> SweepOutcome:
    """Run every unfinished cell; record each cell's outcome as soon as it is known.

    ``reuse_model`` runs the pending conditions of a scorer that share their metadata in one
    ``prbench eval`` call inside this process (the model is loaded once); otherwise every cell is
    its own ``prbench eval`` process.
    """
    cells = sweep.cells(limit)
    out.mkdir(parents=True, exist_ok=True)
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
    for group in batches(pending, reuse_model):
        folder = run_dir(out, group)
        if folder.exists():  # an earlier attempt's files: the new run replaces them
            import shutil

            shutil.rmtree(folder)
        argv = eval_argv(group, folder, plugins)
        names = ", ".join(c.key for c in group)
        say(f"sweep: run {names}")
        for cell in group:
            _write_json(record_path(out, cell), {
                "scorer": cell.scorer.name, "condition": cell.condition.name,
                "status": "running", "fingerprint": cell.fingerprint(),
                "definition": cell.definition(), "argv": ["prbench", *argv],
            })
        start = time.monotonic()
        runner = _run_in_process if reuse_model else _run_subprocess
        rc, text = runner(argv, log_path(out, group))
        seconds = round(time.monotonic() - start, 2)
        results = _newest_results(folder) if folder.exists() else None
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
            })
            say(f"sweep: {status} {cell.key} ({seconds:g} s)" + (f": {error}" if error else ""))
    return outcome


__all__ = [
    "Cell",
    "Condition",
    "Scorer",
    "Sweep",
    "SweepFileError",
    "SweepOutcome",
    "batches",
    "eval_argv",
    "finished",
    "load_sweep",
    "read_record",
    "record_path",
    "results_problem",
    "run_sweep",
    "slug",
]
