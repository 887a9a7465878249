"""The files a ``prbench`` run leaves, under ``prbench eval`` and plain ``lm_eval`` alike.

lm-eval hands saving to an ``EvaluationTracker``, and its ``run`` command looks the class up in
``lm_eval.loggers`` when it runs. prbench subclasses it (:func:`tracker_class`) rather than
patching lm-eval's methods, and names its subclass there for lm-eval's command
(:func:`use_tracker`: for one ``prbench eval`` run, or for the whole process under plain
``lm_eval``); a program calling ``simple_evaluate`` itself passes
``evaluation_tracker=tracker_class()(output_path=...)``. The subclass

- writes results and samples files as strict JSON, each sample's record put back as
  ``record_json``, and reads them back (:mod:`prbench.harness.manifest`); under plain ``lm_eval``
  it writes prbench's manifest beside the results, under ``prbench eval`` it hands the results
  back to the command, which writes it;
- names the run's folder under ``--output_path`` ``prbench-<scorer>`` (its
  ``GeneralConfigTracker``, a subclass too);
- leaves every other model's run as lm-eval saves it (only putting back the records of prbench's
  tasks in the samples).

lm-eval's printed table is prbench's view of it (:func:`patch_table`): lm-eval has no extension
point for the table, so ``lm_eval.utils.make_table`` is wrapped (docs/plugin-api.md, "lm-eval
internals prbench touches").
"""

from __future__ import annotations

import functools
import logging
import sys
from typing import Any

from prbench.harness.lm_eval_args import MODEL_NAME

log = logging.getLogger(__name__)


def folder_name(model_args: Any) -> str:
    """``prbench-<scorer>``: the results folder of a ``prbench`` run with these ``model_args``.

    lm-eval names the folder under ``--output_path`` after ``pretrained=``/``model=``/... in
    ``--model_args`` (``pretrained=/tmp/rmA`` gives ``__tmp__rmA``; ``pretrained=..`` gives
    ``..``, one folder *above* ``--output_path``) and otherwise after a random id. Every
    ``prbench`` run gets ``<output_path>/prbench-<scorer>/`` instead; the checkpoint is recorded
    in the manifest.
    """
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

        def log_experiment_args(self, model_source: str, model_args: Any, *args: Any,
                                **kwargs: Any) -> None:
            super().log_experiment_args(model_source, model_args, *args, **kwargs)
            if model_source == MODEL_NAME:
                self.model_name = folder_name(model_args)
                # a scorer id is a registered name, but never let it leave the folder: no ".."
                self.model_name_sanitized = sanitize_model_name(self.model_name).replace(
                    "..", "__")

    class PrbenchEvaluationTracker(EvaluationTracker):
        """lm-eval's tracker, saving a ``prbench`` run's files strictly (module docstring).

        Attributes:
            captured: under ``prbench eval``, where the saved results, the output path, the run's
                date id and folder are handed back (``None`` under plain ``lm_eval``).
        """

        captured: dict[str, Any] | None = None

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.general_config_tracker = PrbenchConfigTracker()
            self.prbench_run = False  # plain lm_eval: saw the results of a prbench run

        def save_results_aggregated(self, results: dict, samples: dict | None = None) -> None:
            save = EvaluationTracker.save_results_aggregated
            if self.captured is not None:
                save_results_strictly(save, self, results, samples)  # strict JSON: no bare NaN
                self.captured.update(
                    results=results, output_path=self.output_path,
                    date_id=getattr(self, "date_id", None),
                    model_dir=self.general_config_tracker.model_name_sanitized)
                return
            if not (results.get("config") or {}).get("prbench"):
                save(self, results=results, samples=samples)
                return  # not a prbench run: lm-eval's file as lm-eval writes it
            self.prbench_run = True
            save_results_strictly(save, self, results, samples)
            _write_manifest(self, results)

        def save_results_samples(self, task_name: str, samples: Any) -> None:
            save = EvaluationTracker.save_results_samples
            if self.captured is None and not self.prbench_run:
                from prbench.harness.record_store import restore

                # another model on prbench's tasks: the records put back too
                save(self, task_name=task_name, samples=[restore(s) for s in samples])
                return
            save_samples_strictly(save, self, task_name, samples)

    return PrbenchEvaluationTracker


def use_tracker(captured: dict[str, Any] | None = None) -> tuple[Any, type]:
    """Make lm-eval's ``run`` command build prbench's tracker (it reads ``lm_eval.loggers``).

    Args:
        captured: ``prbench eval``: a dict that receives the saved results (see
            :func:`tracker_class`); ``None`` under plain ``lm_eval``.

    Returns:
        ``(lm_eval.loggers, the class named there before)``, for putting it back.
    """
    import lm_eval.loggers

    before = lm_eval.loggers.EvaluationTracker
    cls = tracker_class()
    if captured is not None:
        cls = type("PrbenchCapturingTracker", (cls,), {"captured": captured})
    lm_eval.loggers.EvaluationTracker = cls
    return lm_eval.loggers, before


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
    "folder_name",
    "patch_table",
    "tracker_class",
    "use_tracker",
]
