"""Every touch of lm-eval 0.4.13 beyond its public API, in one module.

``prbench eval`` runs on lm-eval's public Python API alone (``simple_evaluate`` with a
``TaskManager`` and an ``EvaluationTracker`` subclass) and changes nothing of lm-eval. Plain
``lm_eval --model prbench`` has no such seam: lm-eval 0.4.13 discovers no plugins, so the
interpreter start-up hook (:mod:`prbench.harness._startup`) calls :func:`on_lm_eval_import` as
lm-eval's modules load, and what it needs is here, each piece pinned by
``tests/test_lm_eval_compat.py`` and listed in docs/plugin-api.md ("lm-eval internals prbench
touches"):

- the ``prbench`` model registered with lm-eval's public registry, after its built-ins
  (:func:`register_model`);
- four attributes replaced, under plain ``lm_eval`` only (:data:`REPLACED`): ``TaskManager``'s
  ``__init__`` (prbench's and the plugins' task folders indexed), ``lm_eval.loggers``'
  ``EvaluationTracker`` (the run's files as ``prbench eval`` writes them, and the manifest),
  ``lm_eval.utils.make_table`` (the table through prbench's view) and
  ``lm_eval.evaluator.print_writeout`` (``--write_out`` shows what the scorer gets);
- two private names read (:data:`PRIVATE_NAMES`): lm-eval's task index and its YAML loader,
  for the task names of prbench's folders and the task files its index would skip silently;
- the checks of a plain ``lm_eval`` command line prbench can make before lm-eval indexes its
  ~14.7k tasks (:func:`check_plain_argv`), read from ``sys.argv`` by prbench's own parser, and
  one ``error:`` line instead of a traceback for prbench's errors (:func:`clean_errors_hook`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from prbench.harness.eval_options import (
    argv_given,
    argv_values,
    json_flag_argv,
    running_lm_eval_cli,
)

log = logging.getLogger(__name__)

MODEL_NAME = "prbench"
MODEL_TARGET = "prbench.harness.lm:PRBenchLM"
MODELS_GROUP = "lm_eval.models"
TASKS_GROUP = "lm_eval.tasks"

#: the attributes plain ``lm_eval`` gets replaced: (module, attribute, why)
REPLACED = (
    ("lm_eval.tasks.manager", "TaskManager.__init__", "index prbench's task folders"),
    ("lm_eval.loggers", "EvaluationTracker", "the run's files and manifest as prbench eval's"),
    ("lm_eval.utils", "make_table", "the results table through prbench's view"),
    ("lm_eval.evaluator", "print_writeout", "--write_out shows what the scorer gets"),
)
#: the private names prbench reads: (module, attribute)
PRIVATE_NAMES = (
    ("lm_eval.tasks._index", "TaskIndex"),
    ("lm_eval.tasks._yaml_loader", "load_yaml"),
)
_MARK = "_prbench_compat"


class LmEvalMovedError(RuntimeError):
    """An lm-eval internal prbench relies on is gone (a newer lm-eval): names it and the fix."""


def private(module: str, name: str) -> Any:
    """One of :data:`PRIVATE_NAMES`, or :class:`LmEvalMovedError` naming it."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise LmEvalMovedError(
            f"lm-eval moved {module}.{name}, which prbench reads (docs/plugin-api.md, 'lm-eval "
            f"internals prbench touches'); install the lm-eval version prbench pins: {exc}"
        ) from None


# -- task folders ----------------------------------------------------------------------------------


def task_index(dirs: Sequence[str]) -> dict[str, Any]:
    """lm-eval's index of the tasks, groups and tags defined in ``dirs`` (name -> entry)."""
    index = private("lm_eval.tasks._index", "TaskIndex")
    return dict(index.build([Path(d) for d in dirs]))


def task_index_names(dirs: Sequence[str]) -> set[str]:
    """Every task, group and tag name defined in ``dirs``."""
    return set(task_index(dirs))


def unreadable_task_files(dirs: Sequence[str]) -> list[tuple[Path, str]]:
    """The task YAMLs under ``dirs`` that lm-eval's index would skip, each with the reason.

    lm-eval 0.4.13 drops a YAML that fails to load with a debug log line only, so asking for its
    task later says "Tasks not found". Each file is loaded the way its index loads it
    (``!function`` references not imported).
    """
    index = private("lm_eval.tasks._index", "TaskIndex")
    load_yaml = private("lm_eval.tasks._yaml_loader", "load_yaml")
    out: list[tuple[Path, str]] = []
    for root in dirs:
        for path in index._iter_yaml_files(Path(root)):
            try:
                index.process_cfg(load_yaml(path, resolve_func=False, recursive=True), path, {})
            except Exception as exc:  # what lm-eval's index catches, reported instead
                reason = " ".join(str(exc).split()) or type(exc).__name__
                out.append((path, f"{type(exc).__name__}: {reason}"))
    return out


_warned_files: set[tuple[str, str]] = set()


def warn_unreadable_task_files(dirs: Sequence[str], stream: Any = None) -> list[str]:
    """One warning line per unreadable task YAML of prbench's or a plugin's folders (once each)."""
    lines = []
    for path, reason in unreadable_task_files(dirs):
        if (str(path), reason) in _warned_files:
            continue
        _warned_files.add((str(path), reason))
        lines.append(f"prbench: warning: task file {path} is skipped by lm-eval's task index, its "
                     f"tasks are unavailable: {reason}")
    for line in lines:
        (sys.stderr if stream is None else stream).write(line + "\n")
    return lines


def _merge_paths(ours: Sequence[str], theirs: Any) -> list[str]:
    given = [] if theirs is None else list(theirs) if isinstance(theirs, list | tuple) else [theirs]
    seen: set[str] = set()
    out: list[str] = []
    for p in [*ours, *given]:
        key = str(Path(p).expanduser().resolve())
        if key not in seen:
            seen.add(key)
            out.append(str(p))
    return out


# -- the model ---------------------------------------------------------------------------------


def _module_source(name: str) -> str:
    path = getattr(sys.modules.get(name), "__file__", None)
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace") if path else ""
    except OSError:
        return ""


def lm_eval_discovers(group: str) -> bool:
    """True when the loaded lm-eval reads the entry-point ``group`` itself (a newer lm-eval)."""
    registry = sys.modules.get("lm_eval.api.registry")
    if group == MODELS_GROUP and registry is not None and hasattr(registry, "load_plugins"):
        return True
    candidates = ["lm_eval.api.registry", "lm_eval.models", "lm_eval.tasks.manager",
                  "lm_eval.tasks._index", "lm_eval.tasks"]
    return any(q in _module_source(name) for name in candidates for q in (f'"{group}"',
                                                                         f"'{group}'"))


def register_model() -> str:
    """Register the ``prbench`` model with lm-eval's public registry, after its built-ins.

    lm-eval 0.4.13's ``get_model`` imports ``lm_eval.models`` (the built-ins) only while the
    registry is empty, so the built-ins are imported first; the model is a lazy
    ``"module:Class"`` target.

    Returns:
        ``"registered"``, ``"present"`` (already there) or ``"lm-eval"`` (lm-eval discovers the
        group itself).
    """
    import lm_eval.models  # noqa: F401 - the built-ins first
    from lm_eval.api.registry import model_registry

    if MODEL_NAME in model_registry:
        return "present"
    if lm_eval_discovers(MODELS_GROUP):
        return "lm-eval"
    model_registry.register(MODEL_NAME, target=MODEL_TARGET)
    return "registered"


# -- plain lm_eval: the replaced attributes ------------------------------------------------------


def _replace(module: Any, name: str, make: Callable[[Any], Any]) -> bool:
    """Replace ``module.name`` by ``make(original)`` once; False when done before."""
    original = getattr(module, name)
    if getattr(original, _MARK, False):
        return False
    new = make(original)
    setattr(new, _MARK, True)
    setattr(module, name, new)
    return True


def patch_task_manager(manager_cls: Any = None) -> bool:
    """``TaskManager``: prbench's and the plugins' task folders, before ``--include_path``."""
    if manager_cls is None:
        from lm_eval.tasks.manager import TaskManager as manager_cls

    def make(original: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(original)

        @functools.wraps(original)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            try:
                from prbench.harness.task_dirs import task_dirs

                ours = [] if lm_eval_discovers(TASKS_GROUP) else task_dirs()
                warn_troubled_plugins()
                warn_unreadable_task_files(ours)
            except Exception as exc:  # never stop lm-eval over prbench's folders
                log.warning("prbench: task folders not added: %s", exc)
                ours = []
            if "include_path" in bound.arguments:
                bound.arguments["include_path"] = _merge_paths(
                    ours, bound.arguments["include_path"])
            original(*bound.args, **bound.kwargs)

        return __init__

    return _replace(manager_cls, "__init__", make)


def use_tracker() -> bool:
    """``EvaluationTracker``: prbench's (:func:`prbench.harness.run_files.tracker_class`)."""
    import lm_eval.loggers

    from prbench.harness.run_files import tracker_class

    cls = tracker_class()
    if lm_eval.loggers.EvaluationTracker is cls:
        return False
    lm_eval.loggers.EvaluationTracker = cls
    return True


def patch_table() -> bool:
    """``make_table``: lm-eval's table of :func:`prbench.harness.summary.table_view`."""
    import lm_eval.utils

    def make(original: Callable[..., str]) -> Callable[..., str]:
        @functools.wraps(original)
        def make_table(result_dict: dict, column: str = "results",
                       sort_results: bool = False) -> str:
            from prbench.harness.summary import table_view

            return original(table_view(result_dict), column, sort_results)

        return make_table

    return _replace(lm_eval.utils, "make_table", make)


_WRITEOUT: dict[str, Any] = {"lm": None}


def patch_writeout(lm: Any) -> bool:
    """``print_writeout``: a prbench task's first document as ``lm``'s scorer gets it."""
    import weakref

    import lm_eval.evaluator as evaluator

    _WRITEOUT["lm"] = weakref.ref(lm)

    def make(original: Callable[[Any], None]) -> Callable[[Any], None]:
        def print_writeout(task: Any) -> None:
            from prbench.harness.writeout import is_prbench_doc, render

            ref = _WRITEOUT["lm"]
            current = ref() if ref is not None else None
            first = next((i for i in task.instances if i.doc_id == 0), None)
            if current is None or first is None or not is_prbench_doc(first.doc):
                original(task)
                return
            sys.stderr.write(render(getattr(task, "task_name", str(task)), first.doc, current)
                             + "\n")

        return print_writeout

    return _replace(evaluator, "print_writeout", make)


# -- plain lm_eval: its command line, read by prbench ---------------------------------------------



def plain_run_started(lm: Any) -> None:
    """Plain ``lm_eval``: ``--write_out`` rendered for ``lm`` (nothing elsewhere)."""
    if running_lm_eval_cli():
        patch_writeout(lm)


def json_model_args_in_argv() -> None:
    """Plain ``lm_eval --model prbench``: ``--model_args``/``--metadata`` handed over as JSON.

    Runs as lm-eval's command-line module loads, before it parses: ``sys.argv`` gets the flags'
    values as prbench reads them (:func:`prbench.harness.eval_options.json_flag_argv`). A
    mistake in them ends the run with one ``error:`` line.

    Raises:
        SystemExit: code 1, after one ``error:`` line.
    """
    from prbench.errors import PrbenchUserError, one_line

    argv = sys.argv[1:]
    models = argv_values(argv, "--model", "-M")
    if not models or models[-1] != MODEL_NAME:
        return
    try:
        sys.argv[1:] = json_flag_argv(argv)
    except PrbenchUserError as exc:
        sys.stderr.write(f"error: {one_line(exc)}\n")
        raise SystemExit(1) from None


def check_plain_argv(argv: Sequence[str]) -> str | None:
    """The error in a plain ``lm_eval`` command line found before lm-eval indexes its tasks.

    A run of prbench's tasks without ``--model prbench``; for ``--model prbench``: a JSON flag
    value that is not a JSON object, ``--use_cache``, the ``--model_args`` (scorer, options,
    keys twice, case), an explicit ``--device`` the machine lacks, an ``--output_path`` that
    cannot be written, and a task name that looks like a misspelt prbench task.
    """
    from prbench.errors import PrbenchUserError, one_line
    from prbench.harness.eval_options import (
        USE_CACHE_REFUSED,
        json_flag_problem,
        misspelt_task,
        read_model_args,
        requested_tasks,
    )

    if argv_given(argv, "--config", "-C"):
        return None
    models = argv_values(argv, "--model", "-M")
    tasks = requested_tasks(argv_values(argv, "--tasks", "-t"))
    if (models[-1] if models else None) != MODEL_NAME:
        return missing_model_hint(models[-1] if models else None, tasks)
    problem = json_flag_problem(argv, ("--model_args", "-a", "--metadata"))
    if problem:
        return problem
    if argv_given(argv, "--use_cache", "-c"):
        return USE_CACHE_REFUSED
    try:
        from prbench.outputs import check_output_dir
        from prbench.scoring.spec import resolve_scorer

        given = read_model_args(argv_values(argv, "--model_args", "-a"))
        devices = argv_values(argv, "--device")
        resolve_scorer(given, device=devices[-1] if devices else None)
        for value in argv_values(argv, "--output_path", "-o"):
            target = Path(value)
            check_output_dir(target.parent if target.suffix == ".json" else target,
                             flag="--output_path")
    except PrbenchUserError as exc:
        return one_line(exc)
    from prbench.harness.task_dirs import task_dirs

    names = task_index_names([*task_dirs(), *argv_values(argv, "--include_path")])
    return misspelt_task(tasks, names)


def missing_model_hint(model: str | None, tasks: Sequence[str]) -> str | None:
    """The fix for prbench's tasks run under plain ``lm_eval`` without ``--model prbench``."""
    if model == MODEL_NAME or not any(t.startswith("personalized_rewardbench") for t in tasks):
        return None
    given = model or "hf (lm-eval's default)"
    return (f"the personalized_rewardbench tasks are scored by prbench's reward models, not by "
            f"--model {given}: add --model prbench (e.g. lm_eval --model prbench --model_args "
            "scorer=embedding-similarity --tasks personalized_rewardbench_sample), or run "
            "`prbench eval`, where it is the default")


# -- plain lm_eval: what it prints ----------------------------------------------------------------

_state: dict[str, Any] = {"warned": None, "plain": False}


def warn_troubled_plugins(stream: Any = None) -> list[str]:
    """One warning line per failed or partial plugin (once per loaded registry)."""
    from prbench.plugins import get_registry

    registry = get_registry()
    if _state["warned"] is registry:
        return []
    _state["warned"] = registry
    lines = [f"prbench: warning: {registry.describe_trouble(p)}" for p in registry.troubled()]
    for line in lines:
        (sys.stderr if stream is None else stream).write(line + "\n")
    return lines


#: the start of lm-eval's hint logged for every task that has a ``custom_dataset``
METADATA_HINT = "Custom kwargs can be passed to `--metadata`"
#: the start of lm-eval 0.4.13's all-caps warning when ``--limit`` is given
LIMIT_WARNING = "--limit SHOULD ONLY BE USED FOR TESTING"


class PlainRunFilter(logging.Filter):
    """lm-eval's log lines under plain ``lm_eval --model prbench``: its ``--metadata`` hint
    once at most (never when ``--metadata`` was given), its ``--limit`` warning as prbench's."""  # noqa: D205, D209

    def __init__(self, *, metadata_given: bool, limit_note: str | None) -> None:
        super().__init__("prbench-plain-run")
        self.metadata_given = metadata_given
        self.limit_note = limit_note
        self.seen = False

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a hint already shown; the ``--limit`` warning reworded."""
        if self.limit_note and isinstance(record.msg, str) and record.msg.startswith(
                LIMIT_WARNING):
            record.msg, record.args = self.limit_note, ()
            return True
        try:
            message = record.getMessage()
        except Exception:
            return True
        if METADATA_HINT not in message:
            return True
        if self.metadata_given or self.seen:
            return False
        self.seen = True
        return True


@contextlib.contextmanager
def metadata_hint_once(*, show_first: bool = False) -> Iterator[None]:
    """``prbench eval``: lm-eval's per-task ``--metadata`` hint (a WARNING for every task with a
    ``custom_dataset``, which every prbench task has) left out of its log for one run, or shown
    once (``show_first``: ``--verbosity INFO`` without ``--metadata``).

    A :class:`logging.Filter` on lm-eval's task logger, removed when the block ends; nothing of
    lm-eval is replaced and every other log line passes.
    """  # noqa: D205
    hint = PlainRunFilter(metadata_given=not show_first, limit_note=None)
    logger = logging.getLogger("lm_eval.api.task")
    logger.addFilter(hint)
    try:
        yield
    finally:
        logger.removeFilter(hint)


def quiet_plain_run(argv: Sequence[str]) -> None:
    """Install :class:`PlainRunFilter` on lm-eval's loggers (once per process)."""
    if _state["plain"]:
        return
    _state["plain"] = True
    from prbench.harness.eval_options import limit_note

    limits = argv_values(argv, "--limit", "-L")
    try:
        note = limit_note(float(limits[-1])) if limits else None
    except ValueError:
        note = None
    hint = PlainRunFilter(metadata_given=argv_given(argv, "--metadata"), limit_note=note)
    for name in ("lm_eval.api.task", "lm_eval.config.evaluate_config"):
        logging.getLogger(name).addFilter(hint)


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


def lm_eval_error_fix(exc: BaseException, argv: Sequence[str]) -> str | None:
    """lm-eval's own argument errors under plain ``lm_eval``, with the fix added, else None."""
    from prbench.harness.eval_options import json_flag_problem

    message = str(exc)
    if not isinstance(exc, ValueError):
        return None
    if "did not find any docs" in message:
        return ("no pair to evaluate (lm-eval: task.build_requests() did not find any docs): "
                "--limit must be above 0 (a number of pairs per task, or a fraction), and the "
                "data must hold records")
    if message.startswith("Invalid JSON"):
        return (json_flag_problem(argv, ("--model_args", "-a", "--metadata", "--gen_kwargs"))
                or f"{message}; lm-eval reads a value holding {{ as JSON: give --model_args as a "
                "JSON object, or run `prbench eval`, which reads key=value text as written")
    if message.startswith("Tasks not found"):
        return (f"{message}; list the known tasks with `lm_eval ls tasks` (prbench's start with "
                "personalized_rewardbench, e.g. personalized_rewardbench_sample)")
    if message.startswith("Specify --output_path"):
        return f"{message}: add --output_path DIR (e.g. --output_path results)"
    if message.startswith("Need to specify task"):
        return f"{message}: add --tasks, e.g. --tasks personalized_rewardbench_sample"
    return None


def install_clean_errors() -> None:
    """Under plain ``lm_eval``: end a run on a prbench error with one ``error:`` line."""
    if running_lm_eval_cli() and not getattr(sys.excepthook, "_prbench_clean_errors", False):
        sys.excepthook = clean_errors_hook(sys.excepthook)


# -- the start-up hook's entry ---------------------------------------------------------------------


def running_prbench_cli() -> bool:
    """True in a process started as the ``prbench`` command (or ``python -m prbench.cli``)."""
    first = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if first is None:
        return False
    return first.name == "prbench" or (first.name == "cli.py" and first.parent.name == "prbench")


def on_lm_eval_import(name: str, module: ModuleType) -> None:
    """Called by the start-up hook right after lm-eval's module ``name`` has been imported."""
    if name == "lm_eval.models":
        register_model()
    if not running_lm_eval_cli():
        if name == "lm_eval.tasks.manager" and not running_prbench_cli():
            # a program using lm-eval's Python API with the hook installed: prbench's folders
            # (prbench's own commands name their folders to lm-eval's public API themselves)
            patch_task_manager(getattr(module, "TaskManager", None))
        return
    install_clean_errors()
    if name == "lm_eval._cli.utils":
        json_model_args_in_argv()  # lm-eval is about to parse its command line
    elif name == "lm_eval.config.evaluate_config":  # lm-eval's run starts; nothing indexed yet
        argv = sys.argv[1:]
        problem = check_plain_argv(argv)
        if problem:
            sys.stderr.write(f"error: {problem}\n")
            raise SystemExit(1)
        quiet_plain_run(argv)
        use_tracker()  # `lm_eval run` looks up lm_eval.loggers.EvaluationTracker next
        patch_table()
    elif name == "lm_eval.tasks.manager":
        patch_task_manager(getattr(module, "TaskManager", None))


__all__ = [
    "LIMIT_WARNING",
    "METADATA_HINT",
    "MODEL_NAME",
    "PRIVATE_NAMES",
    "REPLACED",
    "LmEvalMovedError",
    "argv_values",
    "check_plain_argv",
    "clean_errors_hook",
    "json_model_args_in_argv",
    "lm_eval_discovers",
    "lm_eval_error_fix",
    "metadata_hint_once",
    "missing_model_hint",
    "on_lm_eval_import",
    "patch_table",
    "patch_task_manager",
    "patch_writeout",
    "plain_run_started",
    "private",
    "register_model",
    "running_lm_eval_cli",
    "running_prbench_cli",
    "task_index",
    "task_index_names",
    "unreadable_task_files",
    "use_tracker",
    "warn_troubled_plugins",
    "warn_unreadable_task_files",
]
