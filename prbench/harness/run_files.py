"""The files a ``prbench`` run leaves, under ``prbench eval`` and plain ``lm_eval`` alike.

lm-eval hands saving to an ``EvaluationTracker``. prbench subclasses it (:func:`tracker_class`):
``prbench eval`` passes it to ``simple_evaluate`` (:mod:`prbench.harness.evaluate`), and so can any
program calling ``simple_evaluate`` itself; under plain ``lm_eval``, whose ``run`` command looks
the class up in ``lm_eval.loggers``, the start-up hook names it there
(:func:`prbench.harness.lm_eval_compat.use_tracker`). The subclass

- writes results and samples files as strict JSON, each sample's record put back as
  ``record_json``, and reads them back (:mod:`prbench.harness.manifest`); under plain ``lm_eval``
  it writes prbench's manifest beside the results, under ``prbench eval`` it hands the results
  back to the command, which writes it;
- names the run's folder under ``--output_path`` ``prbench-<scorer>`` (its
  ``GeneralConfigTracker``, a subclass too);
- leaves every other model's run as lm-eval saves it (only putting back the records of prbench's
  tasks in the samples).
"""

from __future__ import annotations

import functools
import logging
import sys
from typing import Any

MODEL_NAME = "prbench"

log = logging.getLogger(__name__)


def folder_name(model_args: Any) -> str:
    """``prbench-<scorer>``: the results folder of a ``prbench`` run with these ``model_args``.

    lm-eval names the folder under ``--output_path`` after ``pretrained=``/``model=``/... in
    ``--model_args`` (``pretrained=/tmp/rmA`` gives ``__tmp__rmA``; ``pretrained=..`` gives
    ``..``, one folder *above* ``--output_path``) and otherwise after a random id. Every
    ``prbench`` run gets ``<output_path>/prbench-<scorer>/`` instead; the checkpoint is recorded
    in the manifest.
    """
    from prbench.scoring.spec import DEFAULT_SCORER

    scorer = None
    if isinstance(model_args, dict):
        scorer = model_args.get("scorer")
    elif isinstance(model_args, str):
        from prbench.options import OptionsError, parse_kv_string

        try:
            scorer = parse_kv_string(model_args).get("scorer")
        except OptionsError:
            scorer = None
    return f"prbench-{scorer or DEFAULT_SCORER}"


def _write_manifest(tracker: Any, results: dict[str, Any]) -> None:
    """Plain ``lm_eval``: prbench's manifest beside the results (a failure is a warning)."""
    try:
        from prbench.harness import manifest, profile_rows, summary
        from prbench.plugins import get_registry

        saved = {
            "output_path": tracker.output_path, "date_id": getattr(tracker, "date_id", None),
            "model_dir": tracker.general_config_tracker.model_name_sanitized,
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


@functools.cache
def tracker_class() -> type:
    """The tracker class of prbench runs, built on first use (lm-eval is imported then)."""
    from lm_eval.loggers.evaluation_tracker import EvaluationTracker, GeneralConfigTracker
    from lm_eval.utils import sanitize_model_name

    from prbench.harness.manifest import save_results_strictly, save_samples_strictly

    class PrbenchConfigTracker(GeneralConfigTracker):
        """lm-eval's run settings; a ``prbench`` run's folder is ``prbench-<scorer>``."""

        #: ``prbench eval``: the run's ``--model_args`` (it passes the model as an object)
        run_model_args: dict[str, Any] | None = None

        def log_experiment_args(self, model_source: str, model_args: Any, *args: Any,
                                **kwargs: Any) -> None:
            if self.run_model_args is not None:  # prbench eval: lm-eval's CLI would say these
                model_source, model_args = MODEL_NAME, self.run_model_args
            super().log_experiment_args(model_source, model_args, *args, **kwargs)
            if model_source == MODEL_NAME:
                self.model_name = folder_name(model_args)
                # a scorer id is a registered name, but never let it leave the folder: no ".."
                self.model_name_sanitized = sanitize_model_name(self.model_name).replace(
                    "..", "__")

    class PrbenchEvaluationTracker(EvaluationTracker):
        """lm-eval's tracker, saving a ``prbench`` run's files strictly (module docstring).

        Attributes:
            run_model_args: set by ``prbench eval`` (which writes the manifest itself); ``None``
                under plain ``lm_eval``, where the tracker writes it.
        """

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.general_config_tracker = PrbenchConfigTracker()
            self.prbench_run = False  # saw the results of a prbench run

        @property
        def run_model_args(self) -> dict[str, Any] | None:
            return self.general_config_tracker.run_model_args

        @run_model_args.setter
        def run_model_args(self, value: dict[str, Any] | None) -> None:
            self.general_config_tracker.run_model_args = value

        def save_results_aggregated(self, results: dict, samples: dict | None = None) -> None:
            save = EvaluationTracker.save_results_aggregated
            if not (results.get("config") or {}).get("prbench"):
                save(self, results=results, samples=samples)
                return  # not a prbench run: lm-eval's file as lm-eval writes it
            self.prbench_run = True
            save_results_strictly(save, self, results, samples)  # strict JSON: no bare NaN
            if self.run_model_args is None:
                _write_manifest(self, results)

        def save_results_samples(self, task_name: str, samples: Any) -> None:
            save = EvaluationTracker.save_results_samples
            if not self.prbench_run:
                from prbench.harness.record_store import restore

                # another model on prbench's tasks: the records put back too
                save(self, task_name=task_name, samples=[restore(s) for s in samples])
                return
            save_samples_strictly(save, self, task_name, samples)

    return PrbenchEvaluationTracker


__all__ = [
    "folder_name",
    "tracker_class",
]
