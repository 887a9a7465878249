"""Reading finished runs back: lm-eval results (+ logged samples) and prbench result files.

``prbench eval --output_path OUT [--log_samples]`` leaves ``results_<date>.json`` (lm-eval's file,
with prbench's provenance under ``config.prbench``) and, with ``--log_samples``, one
``samples_<task>_<date>.jsonl`` per task beside it. :func:`load_run` reads both: the summary
sections come from :func:`prbench.analysis.summary.summarize` (accuracy per domain with intervals,
ties, invalid, the length baseline), and the per-pair outcomes from the samples files, which the
paired comparisons need. ``prbench bon`` and ``prbench correlate`` write JSON files with a
``kind`` field; :func:`load_any` tells the three apart.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from prbench.metrics import DEFAULT_RESAMPLES
from prbench.records import DataSourceError


class RunFileError(DataSourceError):
    """A results file that cannot be read or is not a prbench/lm-eval results file."""


@dataclasses.dataclass
class Run:
    """One lm-eval run of one scorer.

    Attributes:
        path: the results file.
        label: how the run is named in tables (scorer id, or its label / a distinguishing suffix).
        scorer: prbench's scorer provenance (``config.prbench.scorer``; ``{}`` if absent).
        results: the results dict.
        sections: prbench's summary sections (one per benchmark group).
        outcomes: cell -> pair id (record id) -> 1.0 correct / 0.0 not, from samples files. The
            cell is the condition, with the profile source where it is not the user's own
            (``profile``, ``noprofile``, ``profile:swapped``, ``profile:shuffled``; see
            :attr:`prbench.analysis.summary.TaskRow.cell`).
        ties: cell -> pair id -> 1.0 tie.
        length: cell -> pair id -> outcome of the length baseline (longer answer wins).
        samples_found: tasks whose samples file was read.
        domains: pair id -> its domain (from the samples files).
    """

    path: Path
    label: str
    scorer: dict[str, Any]
    results: dict[str, Any]
    sections: list[Any]
    outcomes: dict[str, dict[str, float]]
    ties: dict[str, dict[str, float]]
    length: dict[str, dict[str, float]]
    samples_found: list[str]
    domains: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def diagnostic(self) -> bool:
        """Whether the scorer reads hidden fields."""
        return bool(self.scorer.get("diagnostic"))


def read_json(path: str | os.PathLike[str], *, what: str = "results file") -> dict[str, Any]:
    """A JSON object from a file, non-finite numbers restored (see :mod:`.strict_json`).

    Args:
        path: the file.
        what: what the file is, in the error (``results file``, ``prbench manifest``).

    Raises:
        RunFileError: unreadable, not JSON or not an object (naming the file).
    """
    from prbench.strict_json import restore

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RunFileError(f"{path}: cannot read a JSON {what} ({exc})") from exc
    if not isinstance(data, dict):
        raise RunFileError(f"{path}: expected a JSON object (a {what}), got "
                           f"{type(data).__name__}")
    return restore(data)


#: what a prbench manifest's file name starts with
MANIFEST_PREFIX = "prbench_manifest_"
#: what the status file of a ``prbench eval`` run starts with (``prbench_status_<start>.json``:
#: running, finished, failed or interrupted; see :mod:`prbench.harness.run_files`)
STATUS_PREFIX = "prbench_status_"


def manifest_path(results_path: Path) -> Path:
    """The prbench manifest of a results file, in the same folder.

    ``results_<date>.json`` -> ``prbench_manifest_<date>.json``; another name (lm-eval's
    ``NAME_<date>.json`` of ``--output_path NAME.json``) -> ``prbench_manifest_NAME_<date>.json``.
    """
    stem = results_path.stem
    suffix = stem[len("results_"):] if stem.startswith("results_") else stem
    return results_path.with_name(f"{MANIFEST_PREFIX}{suffix}.json")


def results_of_manifest(manifest: Path) -> Path | None:
    """The results file a prbench manifest belongs to (the inverse of :func:`manifest_path`).

    Returns:
        The existing file, or ``None`` when neither name is on disk.
    """
    suffix = manifest.stem[len(MANIFEST_PREFIX):]
    for candidate in (manifest.with_name(f"results_{suffix}.json"),
                      manifest.with_name(f"{suffix}.json")):
        if candidate.is_file():
            return candidate
    return None


def expand(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files as given; folders replaced by the results files in them.

    A folder's results files are lm-eval's ``results_*.json`` and ``*_results.json``, and the
    file each ``prbench_manifest_<S>.json`` belongs to: ``results_<S>.json`` or, for a run given
    ``--output_path NAME.json`` (lm-eval then writes ``NAME_<date>.json``), ``<S>.json``.

    Raises:
        RunFileError: a path that does not exist or a folder without results files.
    """
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = {*path.rglob("results_*.json"), *path.rglob("*_results.json")}
            for manifest in path.rglob(f"{MANIFEST_PREFIX}*.json"):
                read_json(manifest, what="prbench manifest")  # damaged: as a damaged results file
                results = results_of_manifest(manifest)
                if results is not None:
                    found.add(results)
            if not found:
                raise RunFileError(f"{path}: no results_*.json or *_results.json file in it, "
                                   "and no prbench_manifest_*.json naming one")
            out.extend(sorted(found))
        elif path.is_file():
            out.append(path)
        else:
            raise RunFileError(f"{path}: no such file or folder")
    return out


#: lm-eval's run id at the end of a file name: the ISO time with ``-`` for ``:``
_DATE_ID = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?$")


def _date_id(path: Path) -> str:
    if path.stem.startswith("results_"):
        return path.stem[len("results_"):]
    found = _DATE_ID.search(path.stem)  # NAME_<date>.json, from --output_path NAME.json
    return found.group(0) if found else ""


def _samples(path: Path, task: str) -> Path | None:
    date = _date_id(path)
    candidate = path.with_name(f"samples_{task}_{date}.jsonl")
    return candidate if date and candidate.is_file() else None


def samples_file(path: str | os.PathLike[str], task: str) -> Path | None:
    """The samples file of ``task`` written in the same run as the results file ``path``."""
    return _samples(Path(path), task)


def read_sample_lines(file: Path) -> list[dict[str, Any]]:
    """The rows of a samples file (each with its ``doc``: the task row, ``record_json`` too).

    Raises:
        RunFileError: a line that is not JSON or has no ``doc`` (naming the file and line).
    """
    rows = []
    with file.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RunFileError(f"{file}:{n}: not a JSON line ({exc.msg})") from exc
            if not isinstance(row, dict) or not isinstance(row.get("doc"), dict):
                raise RunFileError(f"{file}:{n}: not a prbench sample line (no 'doc')")
            rows.append(row)
    return rows


def _read_samples(
    file: Path, domains: dict[str, str] | None = None, domain: str = ""
) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    from prbench.metrics import pair_outcome

    correct: dict[str, float] = {}
    ties: dict[str, float] = {}
    length: dict[str, float] = {}
    with file.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                rid = str(row["doc"]["id"])
                correct[rid] = float(row["acc"])
                ties[rid] = float(row.get("tie", 0.0))
                doc = row["doc"]
                if domains is not None:
                    domains[rid] = str(doc.get("domain") or domain)
                length[rid] = pair_outcome(
                    len(str(doc["chosen"]).split()), len(str(doc["rejected"]).split())
                ).correct
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise RunFileError(f"{file}:{n}: not a prbench sample line ({exc!r})") from exc
    return correct, ties, length


def load_run(
    path: str | os.PathLike[str], *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> Run:
    """Read an lm-eval results file written by ``prbench eval`` and its samples files.

    Raises:
        RunFileError: not an lm-eval results file, or no prbench task in it.
    """
    from prbench.analysis.summary import summarize, task_rows

    file = Path(path)
    results = read_json(file)
    manifest = manifest_path(file)
    if manifest.is_file():  # the run's own manifest: damaged is an error, never skipped
        read_json(manifest, what="prbench manifest")
    if "results" not in results or "configs" not in results:
        raise RunFileError(f"{file}: not an lm-eval results file (no 'results'/'configs')")
    rows = task_rows(results)
    if not rows:
        raise RunFileError(f"{file}: no personalized_rewardbench task with an accuracy in it")
    scorer = dict(((results.get("config") or {}).get("prbench") or {}).get("scorer") or {})
    sections = summarize(results, resamples=resamples, seed=seed)
    outcomes: dict[str, dict[str, float]] = {}
    ties: dict[str, dict[str, float]] = {}
    length: dict[str, dict[str, float]] = {}
    found = []
    domains: dict[str, str] = {}
    for task, row in rows.items():
        samples = _samples(file, task)
        if samples is None:
            continue
        correct, tie, longer = _read_samples(
            samples, domains, "" if row.domain == "*" else row.domain
        )
        outcomes.setdefault(row.cell, {}).update(correct)
        ties.setdefault(row.cell, {}).update(tie)
        length.setdefault(row.cell, {}).update(longer)
        found.append(task)
    label = str(scorer.get("label") or scorer.get("id") or file.parent.name)
    return Run(file, label, scorer, results, sections, outcomes, ties, length, found, domains)


def unique_labels(runs: list[Run]) -> None:
    """Make run labels unique by appending the results folder's name where two collide."""
    for run in runs:
        same = [r for r in runs if r.label == run.label]
        if len(same) > 1:
            for r in same:
                r.label = f"{r.label} ({r.path.parent.name}/{_date_id(r.path) or r.path.stem})"


def run_identity(run: Run) -> tuple[str, frozenset[str], frozenset[str]]:
    """What a run measured: its scorer (id/label and options, ``--limit``), tasks and profiles.

    The tasks name the data, domain, condition and profile source; the profile settings are the
    builder and its options per domain and condition, as recorded under ``config.prbench.data``.
    """
    config = (run.results.get("config") or {}).get("prbench") or {}
    profiles = frozenset(
        json.dumps([d.get("domain"), d.get("condition"), d.get("profile_source"),
                    d.get("profile_swap_seed"), (d.get("profile_builder") or {}).get("id"),
                    (d.get("profile_builder") or {}).get("options")], sort_keys=True,
                   default=str)
        for d in config.get("data") or [] if isinstance(d, dict)
    )
    scorer = run.scorer or {}
    limit = (run.results.get("config") or {}).get("limit")  # a --limit run measured fewer pairs
    key = json.dumps([scorer.get("label") or scorer.get("id") or run.path.parent.name,
                      scorer.get("options") or {}, limit], sort_keys=True, default=str)
    return key, frozenset(run.results.get("results") or {}), profiles


def _when(run: Run) -> tuple[float, str, str]:
    date = run.results.get("date")
    try:
        stamp = float(date)
    except (TypeError, ValueError):
        stamp = 0.0
    return stamp, _date_id(run.path), str(run.path)


def latest_runs(runs: list[Run]) -> tuple[list[Run], list[str]]:
    """Drop each run that a newer run of the same scorer measured again.

    A run is replaced by a newer one (by the results file's date) of the same scorer with the
    same options and ``--limit`` that ran all its tasks with the same profile settings
    (:func:`run_identity`), e.g. the same ``prbench eval`` run twice into one output folder.
    Order of the kept runs: as given.

    Returns:
        The kept runs and one note per replaced run, naming the newer file.
    """
    ids = {id(r): run_identity(r) for r in runs}
    kept, notes = [], []
    for run in runs:
        key, tasks, profiles = ids[id(run)]
        newer = [n for n in runs if n is not run and _when(n) > _when(run)
                 and ids[id(n)][0] == key and tasks <= ids[id(n)][1]
                 and profiles <= ids[id(n)][2]]
        if not newer:
            kept.append(run)
            continue
        latest = max(newer, key=_when)
        notes.append(f"{run.label}: {run.path} replaced by the newer run of the same scorer, "
                     f"tasks and profiles, {latest.path} (--keep_reruns keeps both)")
    return kept, notes


def load_any(path: Path) -> tuple[str, Any]:
    """``("lm-eval", Run)``, ``("prbench-best-of-n", dict)`` or ``("prbench-correlation", dict)``.

    Raises:
        RunFileError: none of these.
    """
    data = read_json(path)
    kind = data.get("kind")
    if kind in ("prbench-best-of-n", "prbench-correlation"):
        return str(kind), data
    return "lm-eval", load_run(path)


def counts_outcomes(run: Run, condition: str) -> dict[str, float]:
    """Per-pair outcomes of a cell: from samples, else rebuilt from counts (unpaired ids).

    ``condition`` is a cell (:attr:`prbench.analysis.summary.TaskRow.cell`).
    """
    if condition in run.outcomes:
        return dict(run.outcomes[condition])
    from prbench.analysis.summary import task_rows

    out: dict[str, float] = {}
    for task, row in task_rows(run.results).items():
        if row.cell != condition:
            continue
        for i in range(row.n):
            out[f"{task}#{i}"] = 1.0 if i < row.correct else 0.0
    return out


def conditions(run: Run) -> list[str]:
    """The cells a run evaluated (``profile``, ``noprofile``, ``profile:swapped``, ...)."""
    from prbench.analysis.summary import task_rows

    return sorted({r.cell for r in task_rows(run.results).values()})


def scorer_options(run: Run) -> Mapping[str, Any]:
    """The scorer's options as recorded (``{}`` when the file has no prbench provenance)."""
    return dict(run.scorer.get("options") or {})


__all__ = [
    "MANIFEST_PREFIX",
    "STATUS_PREFIX",
    "Run",
    "RunFileError",
    "conditions",
    "counts_outcomes",
    "expand",
    "latest_runs",
    "load_any",
    "load_run",
    "manifest_path",
    "read_json",
    "read_sample_lines",
    "results_of_manifest",
    "run_identity",
    "samples_file",
    "scorer_options",
    "unique_labels",
]
