"""Make lm-eval 0.4.13 see the ``prbench`` model and prbench's task folders.

Used by the start-up hook (:mod:`prbench.harness._startup`, for plain ``lm_eval``) and by
``prbench eval``. Two facts of lm-eval 0.4.13 shape it:

- ``get_model`` imports ``lm_eval.models`` (which registers the built-in models) only while the
  model registry is empty, so registering ``prbench`` before that import would hide every built-in
  model. :func:`register_model` therefore imports ``lm_eval.models`` first and registers a lazy
  ``"module:Class"`` string, not an ``EntryPoint`` object.
- Tasks come only from lm-eval's own folder and ``include_path``. :func:`patch_task_manager` wraps
  ``TaskManager.__init__`` so that prbench's folders (its own and those plugins register) are
  indexed after lm-eval's built-ins and before a user's ``--include_path`` (which still wins), and
  so that ``prbench eval`` can skip indexing the ~14.7k built-in tasks.

Under plain ``lm_eval`` the bridge also keeps the output honest and short: a plugin that failed
or dropped registrations gets one warning line naming it, prbench's own errors (an unknown scorer,
bad options, invalid data) end the run with one ``error:`` line instead of a traceback, and
lm-eval's ``--metadata`` hint (repeated for every task with a ``custom_dataset``) is shown once, or
not at all when ``--metadata`` was given.

Upstream lm-eval is adding entry-point discovery for the groups ``lm_eval.models`` and
``lm_eval.tasks`` (prbench declares both). Where the installed lm-eval reads a group itself, the
bridge stands aside for that group.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from prbench.harness.lm_eval_args import running_lm_eval_cli

log = logging.getLogger(__name__)

MODEL_NAME = "prbench"
MODEL_TARGET = "prbench.harness.lm:PRBenchLM"
MODELS_GROUP = "lm_eval.models"
TASKS_GROUP = "lm_eval.tasks"

#: set by ``prbench eval`` when every requested task is a prbench task
_settings: dict[str, Any] = {"include_defaults": None, "extra_dirs": ()}
#: the start of lm-eval's hint logged for every task that has a ``custom_dataset``
METADATA_HINT = "Custom kwargs can be passed to `--metadata`"
_state: dict[str, Any] = {"warned": None}


@functools.lru_cache(maxsize=32)
def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _module_source(name: str) -> str:
    path = getattr(sys.modules.get(name), "__file__", None)
    return _read(path) if path else ""


def lm_eval_discovers(group: str) -> bool:
    """True when the loaded lm-eval reads the entry-point ``group`` itself.

    lm-eval 0.4.13 reads no entry points. Upstream added ``lm_eval.api.registry.load_plugins``
    (models, filters, metrics); task discovery is proposed. The check looks at the loaded lm-eval
    modules for that function or for the group name as a string literal, so it needs no version
    table and keeps working when the feature lands under a different function name.
    """
    registry = sys.modules.get("lm_eval.api.registry")
    if group == MODELS_GROUP and registry is not None and hasattr(registry, "load_plugins"):
        return True
    candidates = ["lm_eval.api.registry", "lm_eval.models", "lm_eval.tasks.manager",
                  "lm_eval.tasks._index", "lm_eval.tasks"]
    quoted = (f'"{group}"', f"'{group}'")
    return any(q in _module_source(name) for name in candidates for q in quoted)


def register_model() -> str:
    """Register the ``prbench`` model with lm-eval's registry, after the built-ins.

    Returns:
        ``"registered"``, ``"present"`` (already there, e.g. registered by lm-eval's own
        entry-point discovery) or ``"lm-eval"`` (lm-eval discovers the group itself).
    """
    import lm_eval.models  # noqa: F401 - registers the built-ins first (see the module doc)
    from lm_eval.api.registry import model_registry

    if MODEL_NAME in model_registry:
        return "present"
    if lm_eval_discovers(MODELS_GROUP):
        return "lm-eval"
    model_registry.register(MODEL_NAME, target=MODEL_TARGET)
    return "registered"


def configure(*, include_defaults: bool | None = None, extra_dirs: tuple[str, ...] = ()) -> None:
    """Settings for the patched ``TaskManager`` (used by ``prbench eval``).

    Args:
        include_defaults: ``False`` skips indexing lm-eval's built-in tasks; ``None`` keeps what
            the caller asked for.
        extra_dirs: further task folders to index (always, even where lm-eval discovers the
            ``lm_eval.tasks`` group itself).
    """
    _settings["include_defaults"] = include_defaults
    _settings["extra_dirs"] = tuple(extra_dirs)


def _merge_paths(ours: list[str], theirs: Any) -> list[str]:
    given: list[Any]
    if theirs is None:
        given = []
    elif isinstance(theirs, list | tuple):
        given = list(theirs)
    else:
        given = [theirs]
    seen: set[str] = set()
    out: list[str] = []
    for p in [*ours, *given]:
        key = str(Path(p).expanduser().resolve())
        if key not in seen:
            seen.add(key)
            out.append(str(p))
    return out


def _prbench_dirs() -> list[str]:
    from prbench.harness.tasks import task_dirs

    dirs = [] if lm_eval_discovers(TASKS_GROUP) else task_dirs()
    warn_troubled_plugins()
    merged = _merge_paths(dirs, list(_settings["extra_dirs"]))
    warn_unreadable_task_files(merged)
    return merged


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


def _argv_has_metadata(argv: list[str]) -> bool:
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


def _install_clean_errors() -> None:
    if running_lm_eval_cli() and not getattr(sys.excepthook, "_prbench_clean_errors", False):
        sys.excepthook = clean_errors_hook(sys.excepthook)


def patch_task_manager(manager_cls: type | None = None) -> bool:
    """Wrap ``TaskManager.__init__`` to add prbench's task folders (once).

    Returns:
        True when the wrapper is (now) in place.
    """
    if manager_cls is None:
        from lm_eval.tasks.manager import TaskManager as manager_cls
    original: Callable[..., None] = manager_cls.__init__
    if getattr(original, "_prbench_patched", False):
        return True
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        try:
            ours = _prbench_dirs()
        except Exception as exc:  # never stop lm-eval over prbench's folders
            log.warning("prbench: task folders not added: %s", exc)
            ours = []
        if "include_path" in bound.arguments:
            bound.arguments["include_path"] = _merge_paths(ours, bound.arguments["include_path"])
        skip = _settings["include_defaults"]
        if skip is not None and "include_defaults" in bound.arguments:
            bound.arguments["include_defaults"] = skip
        original(*bound.args, **bound.kwargs)

    __init__._prbench_patched = True  # type: ignore[attr-defined]
    manager_cls.__init__ = __init__
    return True


def on_lm_eval_import(name: str, module: ModuleType) -> None:
    """Called by the start-up hook right after ``name`` has been imported."""
    _install_clean_errors()
    if name == "lm_eval._cli.utils":
        return  # only the clean-errors hook: lm-eval is still parsing its command line
    if name == "lm_eval.config.evaluate_config" and running_lm_eval_cli():
        stop_without_model(sys.argv[1:])
    if running_lm_eval_cli():
        patch_table()  # before lm-eval's run command binds make_table (after evaluate_config)
    if _argv_has_metadata(sys.argv):
        quiet_metadata_hint(metadata_given=True)
    elif not any(isinstance(f, MetadataHintFilter)
                 for f in logging.getLogger("lm_eval.api.task").filters):
        quiet_metadata_hint(metadata_given=False)
    if name == "lm_eval.models":
        register_model()
        if running_lm_eval_cli():
            patch_results_saving()
            patch_model_name()
    elif name == "lm_eval.tasks.manager":
        manager = getattr(module, "TaskManager", None)
        if manager is not None:
            patch_task_manager(manager)


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
            from prbench.harness import manifest, summary, tasks
            from prbench.plugins import get_registry

            saved = {
                "output_path": self.output_path, "date_id": getattr(self, "date_id", None),
                "model_dir": self.general_config_tracker.model_name_sanitized,
            }
            written = manifest.write_run_manifest(
                results, saved, argv=["lm_eval", *sys.argv[1:]],
                sections=summary.summarize(results), plugins=get_registry().provenance(),
                data=list(tasks.PROVENANCE),
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


def install() -> None:
    """Do both now (``prbench eval`` and tests): register the model, patch ``TaskManager``."""
    register_model()
    patch_task_manager()


__all__ = [
    "MODEL_NAME",
    "clean_errors_hook",
    "configure",
    "install",
    "lm_eval_discovers",
    "lm_eval_error_fix",
    "missing_model_hint",
    "on_lm_eval_import",
    "patch_model_name",
    "patch_results_saving",
    "patch_table",
    "patch_task_manager",
    "quiet_metadata_hint",
    "register_model",
    "stop_without_model",
    "unreadable_task_files",
    "warn_troubled_plugins",
    "warn_unreadable_task_files",
]
