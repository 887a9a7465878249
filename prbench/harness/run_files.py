"""The files a ``prbench`` run leaves under plain ``lm_eval``, as ``prbench eval`` leaves them.

- results and samples files are written as strict JSON, each sample's record put back as
  ``record_json``, and read back (:func:`patch_results_saving`); prbench's manifest is written
  beside the results;
- the run's folder under ``--output_path`` is ``prbench-<scorer>`` (:func:`patch_model_name`);
- lm-eval's printed table is prbench's view of it (:func:`patch_table`).
"""

from __future__ import annotations

import functools
import logging
import sys
from typing import Any

from prbench.harness.lm_eval_args import MODEL_NAME

log = logging.getLogger(__name__)


def patch_results_saving(tracker_cls: type | None = None) -> bool:
    """Under plain ``lm_eval``: write prbench's manifest next to a ``prbench`` run's results.

    A ``prbench`` run's results and samples files are written as strict JSON too (see
    :func:`prbench.harness.manifest.save_results_strictly`).

    ``prbench eval`` writes the manifest itself; plain ``lm_eval`` gets the same file (versions,
    plugins, scorer and runtime, data, summary with bootstrap intervals) from this wrap of
    ``EvaluationTracker.save_results_aggregated``. A failure to write it is a warning, never a
    lost results file.

    Returns:
        ``True`` if the method was wrapped now (``False``: wrapped before).
    """
    if tracker_cls is None:
        from lm_eval.loggers.evaluation_tracker import EvaluationTracker as tracker_cls
    save = tracker_cls.save_results_aggregated
    if getattr(save, "_prbench_manifest", False):
        return False
    save_samples = tracker_cls.save_results_samples
    prbench_run = {"seen": False}

    @functools.wraps(save)
    def save_results_aggregated(self: Any, results: dict, samples: dict | None = None) -> None:
        if not (results.get("config") or {}).get("prbench"):
            save(self, results=results, samples=samples)
            return  # not a prbench run: lm-eval's file as lm-eval writes it
        from prbench.harness.manifest import save_results_strictly

        prbench_run["seen"] = True
        save_results_strictly(save, self, results, samples)
        try:
            from prbench.harness import manifest, profile_rows, summary
            from prbench.plugins import get_registry

            saved = {
                "output_path": self.output_path, "date_id": getattr(self, "date_id", None),
                "model_dir": self.general_config_tracker.model_name_sanitized,
            }
            written = manifest.write_run_manifest(
                results, saved, argv=["lm_eval", *sys.argv[1:]],
                sections=summary.summarize(results), plugins=get_registry().provenance(),
                data=list(profile_rows.PROVENANCE),
            )
            if written is not None:
                print(f"prbench manifest: {written[1]}", file=sys.stderr)
        except Exception as exc:  # the results are saved; the manifest is extra
            log.warning("prbench: could not write the manifest: %s", exc)

    @functools.wraps(save_samples)
    def save_results_samples(self: Any, task_name: str, samples: Any) -> None:
        if not prbench_run["seen"]:  # another model on prbench tasks: records put back too
            from prbench.harness.record_store import restore

            save_samples(self, task_name=task_name, samples=[restore(s) for s in samples])
            return
        from prbench.harness.manifest import save_samples_strictly

        save_samples_strictly(save_samples, self, task_name, samples)

    save_results_aggregated._prbench_manifest = True  # type: ignore[attr-defined]
    tracker_cls.save_results_aggregated = save_results_aggregated  # type: ignore[method-assign]
    tracker_cls.save_results_samples = save_results_samples  # type: ignore[method-assign]
    return True


def patch_model_name(tracker_cls: type | None = None) -> bool:
    """Name every ``prbench`` run's results folder ``prbench-<scorer>``: one folder rule.

    lm-eval names the folder under ``--output_path`` after ``pretrained=``/``model=``/... in
    ``--model_args`` (``pretrained=/tmp/rmA`` gives ``__tmp__rmA``; ``pretrained=..`` gives
    ``..``, one folder *above* ``--output_path``) and otherwise after a random id. Every
    ``prbench`` run gets ``<output_path>/prbench-<scorer>/`` instead, under ``prbench eval`` and
    plain ``lm_eval`` alike; the checkpoint is recorded in the manifest. Other models keep
    lm-eval's rule.

    Returns:
        ``True`` if ``GeneralConfigTracker.log_experiment_args`` was wrapped now.
    """
    if tracker_cls is None:
        from lm_eval.loggers.evaluation_tracker import GeneralConfigTracker as tracker_cls
    original = tracker_cls.log_experiment_args
    if getattr(original, "_prbench_name", False):
        return False

    @functools.wraps(original)
    def log_experiment_args(self: Any, model_source: str, model_args: Any, *args: Any,
                            **kwargs: Any) -> None:
        original(self, model_source, model_args, *args, **kwargs)
        if model_source != MODEL_NAME:
            return
        from lm_eval.utils import sanitize_model_name

        from prbench.harness.lm import DEFAULT_SCORER

        scorer = None
        if isinstance(model_args, dict):
            scorer = model_args.get("scorer")
        elif isinstance(model_args, str):
            from prbench.options import OptionsError, parse_kv_string

            try:
                scorer = parse_kv_string(model_args).get("scorer")
            except OptionsError:
                scorer = None
        self.model_name = f"prbench-{scorer or DEFAULT_SCORER}"
        # a scorer id is a registered name, but never let it leave the folder: no ".." part
        self.model_name_sanitized = sanitize_model_name(self.model_name).replace("..", "__")

    log_experiment_args._prbench_name = True  # type: ignore[attr-defined]
    tracker_cls.log_experiment_args = log_experiment_args  # type: ignore[method-assign]
    return True


def patch_table() -> bool:
    """Under plain ``lm_eval``: print its table through :func:`prbench.harness.summary.table_view`.

    The table then shows ``acc_macro`` on group rows only and leaves the ``domains`` counts of a
    task over every domain to prbench's summary, as ``prbench eval`` does; results files keep
    every value.

    Returns:
        ``True`` if ``lm_eval.utils.make_table`` was wrapped now (``False``: wrapped before).
    """
    import lm_eval.utils

    original = lm_eval.utils.make_table
    if getattr(original, "_prbench_table", False):
        return False

    @functools.wraps(original)
    def make_table(result_dict: dict, column: str = "results", sort_results: bool = False) -> str:
        from prbench.harness.summary import table_view

        return original(table_view(result_dict), column, sort_results)

    make_table._prbench_table = True  # type: ignore[attr-defined]
    lm_eval.utils.make_table = make_table
    return True


__all__ = [
    "patch_model_name",
    "patch_results_saving",
    "patch_table",
]
