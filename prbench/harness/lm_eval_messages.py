"""What a user of plain ``lm_eval`` is told about prbench: short, and never a traceback.

- a plugin that failed or dropped registrations: one warning line naming it
  (:func:`warn_troubled_plugins`); a task file lm-eval would skip without a word: one line each
  (:func:`warn_unreadable_task_files`);
- prbench's own errors (an unknown scorer, bad options, invalid data) end the run with one
  ``error:`` line instead of a traceback (:func:`clean_errors_hook`), and a few of lm-eval's own
  errors get the fix next to them (:func:`lm_eval_error_fix`, :func:`missing_model_hint`);
- a mistake in ``--model_args`` (an unknown scorer or option, a bad value) or a ``--device`` the
  machine lacks ends the run as lm-eval reads its flags, before it indexes its tasks
  (:func:`stop_on_bad_model_args`);
- lm-eval's ``--metadata`` hint, logged for every task with a ``custom_dataset``, is shown once,
  or not at all when ``--metadata`` was given (:func:`quiet_metadata_hint`);
- a plain ``lm_eval --model prbench`` run shows what ``prbench eval`` shows: lm-eval's all-caps
  ``--limit`` warning reworded, its unlabelled bars off, and without a terminal only prbench's
  heartbeat lines (:func:`quiet_plain_run`).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from prbench.harness.lm_eval_args import MODEL_NAME, running_lm_eval_cli

#: the start of lm-eval's hint logged for every task that has a ``custom_dataset``
METADATA_HINT = "Custom kwargs can be passed to `--metadata`"
_state: dict[str, Any] = {"warned": None}


def unreadable_task_files(dirs: Sequence[str]) -> list[tuple[Path, str]]:
    """The task YAMLs under ``dirs`` that lm-eval's index would skip, each with the reason.

    lm-eval 0.4.13 indexes a folder by loading every ``*.yaml`` in it with its own (safe) loader
    and drops a file that fails without a word (it is logged at debug level only), so asking for
    its task later says "Tasks not found". This loads each file the same way (``!function``
    references are not imported) and returns the failures.
    """
    from lm_eval.tasks._index import TaskIndex
    from lm_eval.tasks._yaml_loader import load_yaml

    out: list[tuple[Path, str]] = []
    for root in dirs:
        for path in TaskIndex._iter_yaml_files(Path(root)):
            try:
                cfg = load_yaml(path, resolve_func=False, recursive=True)
                TaskIndex.process_cfg(cfg, path, {})
            except Exception as exc:  # what lm-eval's index catches, reported instead
                reason = " ".join(str(exc).split()) or type(exc).__name__
                out.append((path, f"{type(exc).__name__}: {reason}"))
    return out


_warned_files: set[tuple[str, str]] = set()


def warn_unreadable_task_files(dirs: Sequence[str], stream: Any = None) -> list[str]:
    """One warning line per unreadable task YAML of prbench's or a plugin's folders (once each).

    Returns:
        The lines written now.
    """
    lines = []
    for path, reason in unreadable_task_files(dirs):
        key = (str(path), reason)
        if key in _warned_files:
            continue
        _warned_files.add(key)
        lines.append(
            f"prbench: warning: task file {path} is skipped by lm-eval's task index, its tasks "
            f"are unavailable: {reason}"
        )
    out = sys.stderr if stream is None else stream
    for line in lines:
        out.write(line + "\n")
    return lines


def warn_troubled_plugins(stream: Any = None) -> list[str]:
    """Write one warning line per failed or partial plugin (once per loaded registry).

    Returns:
        The lines written (empty after the first call).
    """
    from prbench.plugins import get_registry

    registry = get_registry()
    if _state["warned"] is registry:  # a new registry (after reset_registry) warns again
        return []
    _state["warned"] = registry
    lines = [f"prbench: warning: {registry.describe_trouble(p)}" for p in registry.troubled()]
    out = sys.stderr if stream is None else stream
    for line in lines:
        out.write(line + "\n")
    return lines


class MetadataHintFilter(logging.Filter):
    """Drops lm-eval's per-task ``--metadata`` hint: all of them, or all but the first."""

    def __init__(self, *, metadata_given: bool) -> None:
        super().__init__("prbench-metadata-hint")
        self.metadata_given = metadata_given
        self.seen = False

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a hint already shown, or for every hint when metadata was given."""
        try:
            message = record.getMessage()
        except Exception:  # a record that cannot format is not ours to judge
            return True
        if METADATA_HINT not in message:
            return True
        if self.metadata_given or self.seen:
            return False
        self.seen = True
        return True


def quiet_metadata_hint(*, metadata_given: bool) -> MetadataHintFilter:
    """Install (or update) the hint filter on lm-eval's task logger.

    Args:
        metadata_given: ``--metadata`` was passed: the hint is then never shown.
    """
    logger = logging.getLogger("lm_eval.api.task")
    for existing in logger.filters:
        if isinstance(existing, MetadataHintFilter):
            existing.metadata_given = metadata_given
            existing.seen = False
            return existing
    hint_filter = MetadataHintFilter(metadata_given=metadata_given)
    logger.addFilter(hint_filter)
    return hint_filter


#: the start of lm-eval 0.4.13's all-caps warning when ``--limit`` is given
LIMIT_WARNING = "--limit SHOULD ONLY BE USED FOR TESTING"


class LimitWarningFilter(logging.Filter):
    """Rewords lm-eval's all-caps ``--limit`` warning as prbench's one-line warning.

    The warning is not dropped: the record's text becomes ``limit_note`` (what prbench's summary
    also says under the table), so a run on part of each task still says so when it starts.
    """

    def __init__(self, limit_note: str) -> None:
        super().__init__("prbench-limit-warning")
        self.limit_note = limit_note

    def filter(self, record: logging.LogRecord) -> bool:
        """True always; lm-eval's ``--limit`` warning is reworded first."""
        if isinstance(record.msg, str) and record.msg.startswith(LIMIT_WARNING):
            record.msg, record.args = self.limit_note, ()
        return True


@contextlib.contextmanager
def reworded_limit_warning(limit: float | None) -> Iterator[None]:
    """Reword lm-eval's ``--limit`` warning (on ``lm_eval.config.evaluate_config``) for a block.

    Args:
        limit: ``--limit`` as given (pairs per task, or a fraction below 1), or None.
    """
    if not limit:
        yield
        return
    if limit >= 1:
        shown = f"{limit:g} pair{'' if limit == 1 else 's'} per task"
    else:
        shown = f"{limit:.0%} of each task's pairs"
    verb = "is" if limit == 1 else "are"
    note = (f"--limit {limit:g}: only {shown} {verb} evaluated; the numbers are not benchmark "
            "results (for a quick check, not for a table)")
    logger = logging.getLogger("lm_eval.config.evaluate_config")
    limit_filter = LimitWarningFilter(note)
    logger.addFilter(limit_filter)
    try:
        yield
    finally:
        logger.removeFilter(limit_filter)


def quiet_plain_run(argv: Sequence[str]) -> bool:
    """Under plain ``lm_eval --model prbench``: its output as ``prbench eval`` shows it.

    For the rest of the process: lm-eval's ``--limit`` warning reworded
    (:func:`reworded_limit_warning`) and the libraries' bars as prbench shows them
    (:func:`prbench.progress.library_bars_quiet`: unlabelled bars off on a terminal, all of them
    off without one, where prbench's heartbeat lines report the scoring). Both are undone at
    exit. A run of another model is left as lm-eval shows it; installed once per process.

    Args:
        argv: the ``lm_eval`` command line (without the program name).

    Returns:
        Whether the run is one of ``--model prbench`` (and is now quieted).
    """
    from prbench.harness.lm_eval_args import parse_text
    from prbench.progress import library_bars_quiet

    if _state.get("plain_run") is not None:
        return True
    ns = parse_text(list(argv))
    if ns is None or getattr(ns, "model", None) != MODEL_NAME:
        return False
    limit = getattr(ns, "limit", None)
    stack = contextlib.ExitStack()
    stack.enter_context(reworded_limit_warning(float(limit) if limit else None))
    stack.enter_context(library_bars_quiet())
    _state["plain_run"] = stack
    atexit.register(stack.close)
    return True


def argv_has_metadata(argv: list[str]) -> bool:
    """Whether a command line gives ``--metadata``."""
    return any(a == "--metadata" or a.startswith("--metadata=") for a in argv)


def clean_errors_hook(previous: Callable[..., Any]) -> Callable[..., Any]:
    """A ``sys.excepthook`` that prints prbench's user errors as one line, others as before."""

    def hook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        from prbench.errors import PrbenchUserError, one_line

        if isinstance(exc, PrbenchUserError):
            sys.stderr.write(f"error: {one_line(exc)}\n")
            return
        fixed = lm_eval_error_fix(exc, sys.argv[1:])
        if fixed:
            sys.stderr.write(f"error: {fixed}\n")
            return
        previous(exc_type, exc, tb)

    hook._prbench_clean_errors = True  # type: ignore[attr-defined]
    return hook


def missing_model_hint(argv: Sequence[str]) -> str | None:
    """The fix for prbench's tasks run under plain ``lm_eval`` without ``--model prbench``.

    lm-eval's default model is ``hf``, which fails (``pretrained`` missing) on a task that only
    the ``prbench`` model can score.
    """
    from prbench.harness.lm_eval_args import parse_text

    ns = parse_text(argv)
    if ns is None or getattr(ns, "model", None) == MODEL_NAME:
        return None
    tasks = [t for item in getattr(ns, "tasks", None) or [] for t in str(item).split(",")]
    if not any(t.strip().startswith("personalized_rewardbench") for t in tasks):
        return None
    given = getattr(ns, "model", None) or "hf (lm-eval's default)"
    return (
        f"the personalized_rewardbench tasks are scored by prbench's reward models, not by "
        f"--model {given}: add --model prbench (e.g. lm_eval --model prbench --model_args "
        "scorer=embedding-similarity --tasks personalized_rewardbench_sample), or run "
        "`prbench eval`, where it is the default"
    )


def stop_without_model(argv: Sequence[str]) -> None:
    """End a plain ``lm_eval`` run of prbench's tasks that names no ``--model``, with the fix.

    lm-eval would index its ~14.7k tasks and then fail building its default model (``hf``
    without ``pretrained``); this says what to add before any of that. A run that names another
    model is left to run (and gets the same fix if it fails).

    Raises:
        SystemExit: code 1, after one ``error:`` line.
    """
    from prbench.harness.lm_eval_args import parse_text

    ns = parse_text(argv)
    if ns is None or getattr(ns, "model", None) is not None or getattr(ns, "config", None):
        return
    hint = missing_model_hint(argv)
    if hint:
        sys.stderr.write(f"error: {hint}\n")
        raise SystemExit(1)


#: ``PRBenchLM`` arguments that are lm-eval's (or a label) unless the scorer has that option
_LM_KEYS = ("pretrained", "batch_size", "max_batch_size", "device", "trust_remote_code")


def model_args_problem_early(argv: Sequence[str], *, model: str | None = None) -> str | None:
    """The error in a plain ``lm_eval --model prbench`` command line that can be found at once.

    The scorer id, its option names and values, and an explicit ``--device`` this machine lacks:
    checked as lm-eval reads its flags, before it indexes its ~14.7k tasks (minutes on a busy
    machine), where the ``prbench`` model would find the same mistake only once it is built.
    A command line without ``scorer=`` (the default scorer) or with ``--config`` is left to the
    model. ``model`` stands for ``--model`` where the caller fills it in (``prbench eval``).
    """
    import dataclasses

    from prbench.errors import PrbenchUserError, one_line
    from prbench.harness.lm_eval_args import parse_text

    ns = parse_text(argv)
    if ns is None or (model or getattr(ns, "model", None)) != MODEL_NAME or getattr(
            ns, "config", None):
        return None
    given = getattr(ns, "model_args", None)
    if not isinstance(given, dict) or not given.get("scorer"):
        return None
    from prbench.devices import device_flag_given, resolve_device
    from prbench.plugins import get_registry
    from prbench.scoring.runtime_options import split_options

    try:
        component = get_registry().get("scorer", str(given["scorer"]))
        fields = {f.name for f in dataclasses.fields(component.options)} if (
            component.options is not None) else set()
        raw = {k: v for k, v in given.items() if k != "scorer" and not k.startswith("prbench_")
               and (k not in _LM_KEYS or k in fields)}
        component.parse_options(split_options(component, raw)[1])
        if getattr(ns, "device", None) and device_flag_given(argv):
            resolve_device(str(ns.device), option="--device")
    except PrbenchUserError as exc:
        return one_line(exc)
    return None


def stop_on_bad_model_args(argv: Sequence[str]) -> None:
    """End a plain ``lm_eval`` run at once on :func:`model_args_problem_early`'s error.

    Raises:
        SystemExit: code 1, after one ``error:`` line.
    """
    problem = model_args_problem_early(argv)
    if problem:
        sys.stderr.write(f"error: {problem}\n")
        raise SystemExit(1)


def lm_eval_error_fix(exc: BaseException, argv: Sequence[str] | None = None) -> str | None:
    """lm-eval's own argument errors with the fix added, else None.

    Args:
        exc: what lm-eval raised.
        argv: the ``lm_eval`` command line, when the error ends a plain ``lm_eval`` run: a JSON
            flag value that is not JSON is then named, and prbench's tasks without
            ``--model prbench`` get that fix.
    """
    message = str(exc)
    if argv is not None:
        from prbench.harness.lm_eval_args import json_flag_problem

        if isinstance(exc, ValueError) and message.startswith("Invalid JSON"):
            return json_flag_problem(argv) or message
        hint = missing_model_hint(argv)
        if hint:
            return hint
    if not isinstance(exc, ValueError):
        return None
    if "did not find any docs" in message:
        return (
            "no pair to evaluate (lm-eval: task.build_requests() did not find any docs): "
            "--limit must be above 0 (a number of pairs per task, or a fraction), and the data "
            "must hold records"
        )
    if not message.startswith(
        ("Tasks not found", "Specify --output_path", "Need to specify task")
    ):
        return None
    if message.startswith("Tasks not found"):
        return (
            f"{message}; list the known tasks with `lm_eval ls tasks` (prbench's start with "
            "personalized_rewardbench, e.g. personalized_rewardbench_sample)"
        )
    if message.startswith("Specify --output_path"):
        return f"{message}: add --output_path DIR (e.g. --output_path results)"
    return f"{message}: add --tasks, e.g. --tasks personalized_rewardbench_sample"


def install_clean_errors() -> None:
    """Under plain ``lm_eval``: end a run on a prbench error with one ``error:`` line."""
    if running_lm_eval_cli() and not getattr(sys.excepthook, "_prbench_clean_errors", False):
        sys.excepthook = clean_errors_hook(sys.excepthook)


__all__ = [
    "METADATA_HINT",
    "MetadataHintFilter",
    "argv_has_metadata",
    "clean_errors_hook",
    "install_clean_errors",
    "lm_eval_error_fix",
    "missing_model_hint",
    "model_args_problem_early",
    "quiet_metadata_hint",
    "quiet_plain_run",
    "stop_on_bad_model_args",
    "stop_without_model",
    "unreadable_task_files",
    "warn_troubled_plugins",
    "warn_unreadable_task_files",
]
