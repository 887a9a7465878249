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

``prbench eval`` also keeps a status file in the run's folder from the moment the run starts
(:func:`recorded_status`): ``prbench_status_<start>.json``, rewritten atomically as ``running``,
then ``finished`` (naming the results file), ``failed`` (with the error's one line) or
``interrupted`` (Ctrl-C). lm-eval writes nothing before the end of a run, so for a run that
failed or was stopped this file is all there is on disk; a process that was killed leaves it at
``running``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
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


#: the version of the status file's layout
STATUS_VERSION = 1


def run_folder(output_path: str | None, model_args: Any) -> Path | None:
    """The folder a ``prbench`` run writes its files in (``None`` without ``--output_path``).

    ``<output_path>/prbench-<scorer>/`` (as :func:`tracker_class`'s config tracker names it), or
    the folder of ``output_path`` when that names the results file (``.json``).
    """
    if not output_path:
        return None
    path = Path(output_path)
    if path.suffix == ".json":
        return path.parent
    from lm_eval.utils import sanitize_model_name

    return path / sanitize_model_name(folder_name(model_args)).replace("..", "__")


def _now() -> datetime:
    return datetime.now(UTC)


def _error_line(exc: BaseException) -> str:
    """The exception as one line: a user error's message, else its class and message."""
    from prbench.errors import PrbenchUserError, one_line

    text = " ".join(one_line(exc).split())
    if isinstance(exc, PrbenchUserError) or text == type(exc).__name__:
        return text
    return f"{type(exc).__name__}: {text}"


@dataclasses.dataclass
class RunStatus:
    """The status file of one ``prbench eval`` run (see the module docstring).

    Attributes:
        path: the file.
        doc: what it holds (``status``, ``started``, ``ended``, ``duration_s``, ``error``,
            ``results_file``, ``command``, ``scorer``, ``model_args``, ``tasks``, ``limit``,
            ``pid``).
    """

    path: Path
    doc: dict[str, Any]

    def write(self) -> None:
        """Write the file atomically (secrets masked, as every file prbench writes)."""
        from prbench.redaction import redact
        from prbench.strict_json import write_json

        write_json(self.path, redact(self.doc))

    def end(self, status: str, *, error: str | None = None,
            results_file: Path | None = None) -> None:
        """Record how the run ended: ``finished``, ``failed`` or ``interrupted``."""
        ended = _now()
        started = datetime.fromisoformat(self.doc["started"])
        self.doc.update(status=status, ended=ended.isoformat(), error=error,
                        duration_s=round((ended - started).total_seconds(), 3),
                        results_file=results_file.name if results_file else None)
        self.write()


@contextlib.contextmanager
def recorded_status(
    output_path: str | None,
    model_args: dict[str, Any],
    *,
    tasks: Sequence[str],
    limit: float | None,
    command: Sequence[str] = (),
    scorer: dict[str, Any] | None = None,
) -> Iterator[RunStatus | None]:
    """Keep the run's status file while the block runs (``None``: no file is kept).

    The file is written as ``running`` on entry; the block calls :meth:`RunStatus.end` with
    ``finished`` once the results are saved (a block that returns without doing so is recorded
    as ``finished`` with no results file); an exception is recorded as ``interrupted``
    (``KeyboardInterrupt``) or ``failed`` (its one line) and raised on. No file is kept without
    an output folder, and on a data-parallel process other than rank 0 (it writes no files).
    A failure to write the ending is a warning: the run's own error is the one the user sees.
    """
    from prbench.analysis.runs import STATUS_PREFIX
    from prbench.outputs import OutputWriteError

    folder = run_folder(output_path, model_args)
    if folder is None or os.environ.get("RANK", "0") not in ("", "0"):
        yield None
        return
    started = _now()
    stamp = started.astimezone().replace(tzinfo=None).isoformat().replace(":", "-")
    status = RunStatus(folder / f"{STATUS_PREFIX}{stamp}.json", {
        "status_version": STATUS_VERSION, "status": "running", "started": started.isoformat(),
        "ended": None, "duration_s": None, "error": None, "results_file": None,
        "command": list(command), "scorer": scorer, "model_args": dict(model_args),
        "tasks": list(tasks), "limit": limit, "pid": os.getpid(),
    })
    status.write()

    def end(how: str, error: str | None = None) -> None:
        try:
            status.end(how, error=error)
        except OutputWriteError as exc:
            log.warning("prbench: could not record the run's end in %s: %s", status.path, exc)

    try:
        yield status
    except KeyboardInterrupt:
        end("interrupted", "interrupted (Ctrl-C)")
        raise
    except BaseException as exc:
        end("failed", _error_line(exc))
        raise
    if status.doc["status"] == "running":
        end("finished")


__all__ = [
    "STATUS_VERSION",
    "RunStatus",
    "folder_name",
    "recorded_status",
    "run_folder",
    "tracker_class",
]
