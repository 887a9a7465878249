"""One evaluation through lm-eval's public Python API: what ``prbench eval`` runs.

:func:`evaluate` takes an :class:`Evaluation` whose every option is already read and checked
(:mod:`prbench.harness.eval_options`, :mod:`prbench.scoring.spec`), builds the ``prbench`` model
from the resolved scorer, a ``TaskManager`` over prbench's task folders (lm-eval's ~14.7k
built-in tasks are not indexed) and prbench's ``EvaluationTracker`` subclass, and calls
``lm_eval.simple_evaluate``; then it saves the results and samples files as lm-eval's own
``run`` command does (same folders, names and keys). Nothing of lm-eval is replaced: every
per-pair extra travels with the pair's results (:mod:`prbench.harness.scored`), and everything
shown is printed by prbench. Two evaluations in one process share nothing but caches keyed by
content: each has a profile store of its own (:func:`prbench.profiles.lazy.run_store`). A
``prbench`` run with an output folder keeps its status file there from start to end, so a run
that failed or was interrupted is on disk too (:func:`prbench.harness.run_files.recorded_status`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from typing import Any

#: the model name recorded in the results (``results["config"]["model"]``), as ``lm_eval --model``
MODEL_NAME = "prbench"


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """One run's settings, read and checked.

    Attributes:
        spec: the scorer (:class:`prbench.scoring.spec.ScorerSpec`); ``None`` for another
            lm-eval model (``model``).
        model_args: ``--model_args`` as given (recorded in the results; handed to the tasks).
        tasks: the task and group names.
        task_dirs: the task folders to index (prbench's, the plugins', ``--include_path``).
        metadata: ``--metadata`` (with ``--profile_args``'s keys).
        limit: ``--limit``, or ``None``.
        output_path: ``--output_path``, or ``None``.
        log_samples: write the samples files.
        write_out: print each task's first document as the scorer gets it.
        seeds: Python's, numpy's, torch's and the few-shot sampler's seed.
        batch_size: ``--batch_size`` as given (recorded); by default ``"auto"`` (the scorer's
            own) for ``prbench``, ``"1"`` (lm-eval's) for another model.
        device: ``--device`` as given (recorded), else ``None``.
        tracker_args: lm-eval's ``EvaluationTracker`` arguments (``--hf_hub_log_args``).
        wandb_args: ``wandb.init`` arguments, or ``None``.
        show_config: print the whole results dict.
        model: the lm-eval model: ``prbench`` (the scorer), or another of lm-eval's models
            (``hf``: a likelihood baseline), built by lm-eval from ``model_args``.
        command: the command line, for the run's status file.
    """

    spec: Any
    model_args: dict[str, Any]
    tasks: tuple[str, ...]
    task_dirs: tuple[str, ...]
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    limit: float | None = None
    output_path: str | None = None
    log_samples: bool = False
    write_out: bool = False
    seeds: tuple[int | None, int | None, int | None, int | None] = (0, 1234, 1234, 1234)
    batch_size: str = "auto"
    device: str | None = None
    tracker_args: dict[str, Any] = dataclasses.field(default_factory=dict)
    wandb_args: dict[str, Any] | None = None
    show_config: bool = False
    model: str = MODEL_NAME
    command: tuple[str, ...] = ()


@dataclasses.dataclass
class Outcome:
    """What a run gave: the results, and where they were saved.

    Attributes:
        results: lm-eval's results dict (``None`` on a data-parallel process other than rank 0).
        saved: ``output_path``, ``date_id`` and ``model_dir`` of the files written.
        lm: the ``prbench`` model (open: the caller closes it); ``None`` for another model.
    """

    results: dict[str, Any] | None
    saved: dict[str, Any]
    lm: Any


def task_manager(dirs: Sequence[str], metadata: dict[str, Any]) -> Any:
    """lm-eval's ``TaskManager`` over ``dirs`` only (its own tasks are not indexed)."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=list(dirs), include_defaults=False, metadata=metadata)


def task_names(manager: Any) -> set[str]:
    """Every task, group and tag name a ``TaskManager`` knows."""
    return set(manager.all_tasks)


def evaluate(run: Evaluation, manager: Any = None) -> Outcome:
    """Run ``run`` through ``lm_eval.simple_evaluate`` and save its files as lm-eval's CLI does.

    Args:
        run: the settings.
        manager: the ``TaskManager`` to use (default: :func:`task_manager` over the folders).
    """
    from prbench.harness import tasks

    # a new run in this process (a sweep's --reuse_model, tests, notebooks): nothing of an
    # earlier run carries over (the records behind the rows and the data provenance are reset;
    # the profiles live in the run's own store)
    from prbench.harness.lm import PRBenchLM
    from prbench.profiles import lazy

    tasks.reset()
    with lazy.run_store():  # the run's own profiles (profiles.lazy)
        lm = None
        if run.model == MODEL_NAME:
            # the scorer is built first: what it checks as it is made (a judge's prompt files,
            # a model folder's files) fails the run before its status file or folder exists;
            # weights load at the first score, under the status
            lm = PRBenchLM.from_spec(run.spec, write_out=run.write_out)
            try:
                lm.runtime  # noqa: B018 (builds the scorer)
            except BaseException:
                lm.close()
                raise
        with _status(run) as status:
            outcome = _evaluate(run, manager, lm)
            if status is not None:
                status.end("finished", results_file=_results_path(outcome.saved))
            return outcome


def _status(run: Evaluation) -> Any:
    """The run's status file (:func:`prbench.harness.run_files.recorded_status`).

    ``prbench`` runs only: another model's folder is named by lm-eval.
    """
    import contextlib

    from prbench.harness.run_files import recorded_status

    if run.model != MODEL_NAME:
        return contextlib.nullcontext()
    scorer = {"id": run.spec.component.name, "qualified_id": run.spec.component.qualified_id,
              "plugin": run.spec.component.plugin, "options": run.spec.describe_options(),
              "diagnostic": run.spec.component.diagnostic, "label": run.spec.label}
    return recorded_status(run.output_path, run.model_args, tasks=run.tasks, limit=run.limit,
                           command=run.command, scorer=scorer)


def _results_path(saved: dict[str, Any]) -> Any:
    from prbench.harness.manifest import results_file

    if not saved:
        return None
    return results_file(saved.get("output_path"), saved.get("model_dir"),
                        str(saved.get("date_id")))


def _evaluate(run: Evaluation, manager: Any, lm: Any) -> Outcome:
    """:func:`evaluate` inside its run's profile store, with the ``prbench`` model built."""
    import lm_eval
    from lm_eval.utils import handle_non_serializable

    from prbench.harness.run_files import tracker_class

    metadata = {**run.model_args, **run.metadata}
    if manager is None:
        manager = task_manager(run.task_dirs, metadata)
    tracker = tracker_class()(**{**run.tracker_args, "output_path": run.output_path})
    ours = run.model == MODEL_NAME
    if ours:
        tracker.run_model_args = dict(run.model_args)
    wandb = _wandb_logger(run.wandb_args) if run.wandb_args else None
    python_seed, numpy_seed, torch_seed, fewshot_seed = run.seeds
    results = lm_eval.simple_evaluate(
        model=lm if ours else run.model, model_args=dict(run.model_args),
        tasks=list(run.tasks), batch_size=run.batch_size,
        max_batch_size=run.spec.max_batch_size if ours else None, device=run.device,
        limit=run.limit, log_samples=run.log_samples, evaluation_tracker=tracker,
        task_manager=manager, random_seed=python_seed, numpy_random_seed=numpy_seed,
        torch_random_seed=torch_seed, fewshot_random_seed=fewshot_seed,
        gen_kwargs={}, write_out=run.write_out and not ours,
    )
    saved: dict[str, Any] = {}
    if results is None:  # not rank 0 of a data-parallel run
        return Outcome(None, saved, lm)
    if ours:
        results["config"]["model"] = MODEL_NAME  # lm-eval names a model object by its class
    samples = results.pop("samples", None) if run.log_samples else None
    if run.show_config:
        print(json.dumps(results, indent=2, default=handle_non_serializable, ensure_ascii=False))
    if wandb is not None:
        try:
            wandb.post_init(results)
            wandb.log_eval_result()
            if samples is not None:
                wandb.log_eval_samples(samples)
        except Exception as exc:
            logging.getLogger(__name__).warning("prbench: logging to W&B failed: %s", exc)
    tracker.save_results_aggregated(results=results, samples=samples)
    if samples is not None:
        for name in results["configs"]:
            tracker.save_results_samples(task_name=name, samples=samples[name])
    if tracker.push_results_to_hub or tracker.push_samples_to_hub:
        tracker.recreate_metadata_card()
    if wandb is not None:
        wandb.run.finish()
    saved = {"output_path": tracker.output_path, "date_id": getattr(tracker, "date_id", None),
             "model_dir": tracker.general_config_tracker.model_name_sanitized}
    return Outcome(results, saved, lm)


def _wandb_logger(args: dict[str, Any]) -> Any:
    """lm-eval's W&B logger (needs the ``wandb`` package; checked by the command first)."""
    from lm_eval.loggers import WandbLogger

    return WandbLogger(args, {})


__all__ = ["MODEL_NAME", "Evaluation", "Outcome", "evaluate", "task_manager", "task_names"]
