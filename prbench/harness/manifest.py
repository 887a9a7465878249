"""The provenance manifest written next to lm-eval's results file.

It answers "what exactly produced these numbers": the versions of prbench, its plugins, lm-eval,
torch and transformers; the scorer with its validated options (and whether it is a diagnostic that
read hidden fields); the profile condition of every task (builder, options, k, and the profile
source: own, swapped, shuffled or none, with the swap seed); the data source
with its revision or the SHA-256 of every file read; the seeds; the command line; and prbench's
summary (per-domain accuracy with bootstrap intervals). The manifest, and lm-eval's results and
samples files of a prbench run, are strict JSON: a NaN or infinity is written as ``null`` with a
``<key>_nonfinite`` note next to it (:mod:`prbench.strict_json`).
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from prbench.cluster import executor_info
from prbench.harness.task_options import task_profile, task_profile_source

MANIFEST_VERSION = 1
_PACKAGES = ("prbench", "lm_eval", "torch", "transformers", "datasets", "accelerate", "numpy")


def versions(packages: Sequence[str] = _PACKAGES) -> dict[str, str | None]:
    """Installed versions (``None`` when a package is missing), plus Python's."""
    out: dict[str, str | None] = {}
    for name in packages:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    out["python"] = platform.python_version()
    return out


def results_file(output_path: str | None, model_dir: str | None, date_id: str) -> Path | None:
    """Where lm-eval 0.4.13 wrote its aggregated results (``None`` without an output path).

    lm-eval writes ``<output_path>/<sanitized model name>/results_<date>.json``, or
    ``<stem>_<date>.json`` next to ``output_path`` when that ends in ``.json``.
    """
    if not output_path:
        return None
    path = Path(output_path)
    if path.suffix == ".json":
        return path.with_name(f"{path.stem}_{date_id}.json")
    return path / str(model_dir or "") / f"results_{date_id}.json"


def _task_conditions(results: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for task, cfg in (results.get("configs") or {}).items():
        kwargs = (cfg or {}).get("dataset_kwargs") or {}
        if "prbench_condition" not in kwargs:
            continue
        meta = (cfg or {}).get("metadata") or {}
        builder, builder_options = task_profile(cfg or {})
        source, seed = task_profile_source(cfg or {})
        out[task] = {
            "domain": kwargs.get("prbench_domain"),
            "condition": kwargs.get("prbench_condition"),
            "data": meta.get("prbench_data") or kwargs.get("prbench_default_data"),
            "profile_builder": builder,
            "profile_options": builder_options,
            "profile_source": source,
            "profile_swap_seed": seed if source in ("swapped", "shuffled") else None,
            "n": ((results.get("n-samples") or {}).get(task) or {}).get("effective"),
            "version": (results.get("versions") or {}).get(task),
        }
    return out


def build_manifest(
    results: Mapping[str, Any],
    *,
    argv: Sequence[str],
    results_path: Path | None,
    summary: Mapping[str, Any] | None,
    data: Sequence[Mapping[str, Any]] = (),
    plugins: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The manifest of one run.

    Args:
        results: lm-eval's results dict (as returned by ``simple_evaluate``).
        argv: the command line.
        results_path: the results file the manifest sits next to.
        summary: prbench's summary (``prbench.harness.summary.summarize(...).as_dict()``).
        data: the data provenance recorded while the tasks loaded (sources, hashes, builders).
        plugins: the loaded plugins (``PluginRegistry.provenance()``).
    """
    config = dict(results.get("config") or {})
    prbench_info = dict(config.pop("prbench", None) or {})
    seeds = {k: config.get(k) for k in ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed")}
    return {
        "manifest_version": MANIFEST_VERSION,
        "command": list(argv),
        "results_file": str(results_path) if results_path else None,
        "date": results.get("date"),
        "versions": versions(),
        "lm_eval_model": config.get("model"),
        "model_args": config.get("model_args"),
        "scorer": prbench_info.get("scorer"),
        "tasks": _task_conditions(results),
        "data": list(data) or prbench_info.get("data") or [],
        "plugins": list(plugins) or prbench_info.get("plugins") or [],
        "seeds": seeds,
        "limit": config.get("limit"),
        "executor": executor_info(),
        "summary": dict(summary) if summary else None,
    }


def write_manifest(path: Path, manifest: Mapping[str, Any]) -> Path:
    """Write the manifest as strict, indented JSON (:mod:`prbench.strict_json`)."""
    from prbench.strict_json import write_json

    return write_json(path, manifest)


def save_results_strictly(
    save: Callable[..., None], tracker: Any, results: dict[str, Any], samples: Any = None
) -> None:
    """Call lm-eval's ``save_results_aggregated`` so that the results file is strict JSON.

    lm-eval writes ``NaN`` for a metric without a value (e.g. the mean margin when no pair got a
    verdict). A pairwise judge's group rows first get every judge metric from their tasks'
    counts (:func:`prbench.judges.order_metrics.add_group_metrics`). It is given a copy with
    :func:`prbench.strict_json.strict` applied; the
    keys lm-eval adds while saving (task hashes, its config tracker) are copied back to
    ``results``, which keeps its own numbers for the summary. The file is then read back.

    Raises:
        OutputWriteError: lm-eval did not write its results file in full (it logs a failed write
            as a warning and goes on); a cut file is removed.
    """
    from prbench.judges.order_metrics import add_group_metrics
    from prbench.outputs import check_json_file
    from prbench.redaction import redact
    from prbench.strict_json import strict

    add_group_metrics(results)  # a judge's group rows: every judge metric, from counts
    copy = redact(strict(results))  # no secret a server echoed reaches the file
    save(tracker, results=copy, samples=samples)
    for key, value in copy.items():
        results.setdefault(key, value)
    path = results_file(tracker.output_path, tracker.general_config_tracker.model_name_sanitized,
                        str(getattr(tracker, "date_id", "")))
    if path is not None:
        check_json_file(path, what="lm-eval's results file")


def save_samples_strictly(
    save: Callable[..., None], tracker: Any, task_name: str, samples: Sequence[Any]
) -> None:
    """Call lm-eval's ``save_results_samples`` with strict copies of the samples (see above).

    A pair with an answer the scorer could not score gets its reason, and a pair a judge judged
    gets its orders with the judge's replies, both read off the pair's own results
    (:func:`prbench.harness.scored.annotate_sample`); each ``doc`` gets its record
    back as ``record_json`` in place of the row's ``record_ref``
    (:func:`prbench.harness.record_store.restore`). lm-eval names the file
    ``samples_<task>_<date>.jsonl``; a task name with a path separator (a plugin task
    ``../../x``) would put it in another folder (or nowhere), so such a name is
    written with each separator as ``_`` and a warning. The file is read back: every sample on
    one complete JSON line.

    Raises:
        OutputWriteError: lm-eval did not write the samples file in full; a cut file is removed.
    """
    from prbench.harness.record_store import restore
    from prbench.harness.scored import annotate_sample
    from prbench.outputs import check_jsonl_file
    from prbench.strict_json import strict

    safe = safe_task_file_name(task_name)
    if safe != task_name:  # a warning line like prbench's others, whatever the log level
        sys.stderr.write(
            f"prbench: warning: task {task_name!r} has a path separator in its name; its "
            f"samples file is named samples_{safe}_<date>.jsonl, inside the output folder\n")
    from prbench.redaction import known_secrets, redact, warn_masked

    secrets = known_secrets()  # a judge reply that echoes the API key is written masked
    whole = [strict(restore(annotate_sample(sample))) for sample in samples]
    rows = redact(whole, secrets)
    warn_masked(f"the samples file of {task_name}", whole, rows)
    save(tracker, task_name=safe, samples=rows)
    if not tracker.output_path:
        return
    folder = Path(tracker.output_path)
    folder = folder.parent if folder.suffix == ".json" else (
        folder / str(tracker.general_config_tracker.model_name_sanitized))
    check_jsonl_file(folder / f"samples_{safe}_{tracker.date_id}.jsonl", len(rows),
                     what="lm-eval's samples file")


def safe_task_file_name(task_name: str) -> str:
    """``task_name`` with every path separator (and NUL) as ``_``: one name inside one folder."""
    import os

    out = task_name
    for sep in {"/", "\\", os.sep, "\x00"}:
        out = out.replace(sep, "_")
    return out



def write_run_manifest(
    results: Mapping[str, Any],
    saved: Mapping[str, Any],
    *,
    argv: Sequence[str],
    sections: Sequence[Any],
    plugins: Sequence[Mapping[str, Any]],
    data: Sequence[Mapping[str, Any]],
) -> tuple[Path, Path] | None:
    """Write the manifest of a run whose results lm-eval saved; ``None`` without an output path.

    Args:
        results: lm-eval's results dict.
        saved: where lm-eval saved them: ``output_path``, ``model_dir`` and ``date_id`` (read off
            its ``EvaluationTracker``).
        argv: the command line.
        sections: prbench's summary sections (:func:`prbench.harness.summary.summarize`).
        plugins: the plugin registry's provenance.
        data: the data provenance of the tasks.

    Returns:
        The results file and the manifest written next to it.
    """
    from prbench.analysis.runs import manifest_path

    path = results_file(saved.get("output_path"), saved.get("model_dir"), str(saved.get("date_id")))
    if path is None:
        return None
    doc = build_manifest(
        results, argv=argv, results_path=path,
        summary={"sections": [s.as_dict() for s in sections]}, data=data, plugins=plugins,
    )
    return path, write_manifest(manifest_path(path), doc)


__all__ = [
    "build_manifest",
    "results_file",
    "safe_task_file_name",
    "save_results_strictly",
    "save_samples_strictly",
    "versions",
    "write_manifest",
    "write_run_manifest",
]
