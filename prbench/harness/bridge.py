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
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

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
    return _merge_paths(dirs, list(_settings["extra_dirs"]))


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
        from prbench.cli import one_line, user_errors

        if isinstance(exc, user_errors()):
            sys.stderr.write(f"error: {one_line(exc)}\n")
            return
        fixed = lm_eval_error_fix(exc)
        if fixed:
            sys.stderr.write(f"error: {fixed}\n")
            return
        previous(exc_type, exc, tb)

    hook._prbench_clean_errors = True  # type: ignore[attr-defined]
    return hook


#: lm-eval flags whose value may be a JSON object (lm-eval raises a bare ValueError on bad JSON)
JSON_FLAGS = ("--model_args", "-a", "--metadata", "--gen_kwargs")


def json_flag_problem(argv: Sequence[str]) -> str | None:
    """A one-line error for a JSON-object flag value that is not valid JSON, else ``None``.

    lm-eval reads ``--model_args``, ``--metadata`` and ``--gen_kwargs`` as a JSON object when the
    value starts with ``{`` and otherwise raises ``ValueError: Invalid JSON: ...`` without naming
    the flag or the position. The message here names both.
    """
    args = list(argv)
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag not in JSON_FLAGS:
            continue
        if not eq:
            value = args[i + 1] if i + 1 < len(args) else ""
        if not value.lstrip().startswith("{"):
            continue
        try:
            json.loads(value)
        except json.JSONDecodeError as exc:
            shown = value if len(value) <= 80 else value[:79] + "…"
            return (
                f"{flag}: invalid JSON at line {exc.lineno} column {exc.colno} (character "
                f"{exc.pos}): {exc.msg}, in {shown!r}; JSON needs double quotes around keys and "
                "strings"
            )
    return None


def option_text(text: str) -> str:
    """A ``key=value`` value as text: stripped, one pair of surrounding quotes removed."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def model_args_text(argv: Sequence[str]) -> dict[str, str]:
    """The ``--model_args`` values of an lm-eval command line as the user typed them.

    lm-eval's parser turns ``revision=00123456`` into the int 123456 and ``kind=1e3`` into the
    float 1000.0 before any model sees them. This parses ``argv`` with lm-eval's own parser but
    keeps each ``key=value`` value as text (surrounding quotes removed); values given as a JSON
    object are not included (JSON has its own types). Empty when ``argv`` does not parse.
    """
    import contextlib
    import io

    import lm_eval._cli.utils as cli_utils
    from lm_eval._cli.harness import HarnessCLI

    args = list(argv)
    if args and args[0] == "run":
        args = args[1:]
    typed = cli_utils.handle_cli_value_string
    cli_utils.handle_cli_value_string = option_text
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            ns = HarnessCLI()._parser.parse_args(["run", *args])
    except SystemExit:
        return {}
    finally:
        cli_utils.handle_cli_value_string = typed
    given = getattr(ns, "model_args", None)
    if not isinstance(given, dict):
        return {}
    return {str(k): v for k, v in given.items() if isinstance(v, str)}


def restore_option_text(
    model_args: dict[str, Any], argv: Sequence[str] | None = None
) -> dict[str, Any]:
    """``model_args`` with every value lm-eval typed from text put back as the user's text.

    A value is restored only where lm-eval's own typing of the typed text gives exactly the value
    received, so JSON values and values set in code are left alone. The scorer's options then
    coerce the text to each option's declared type: a ``str`` option keeps ``00123456`` and
    ``1e3`` exactly, an ``int`` option still reads ``8`` as 8.

    Args:
        model_args: the model arguments lm-eval passes to the model.
        argv: the lm-eval command line (default: this process's, under the ``lm_eval`` command;
            nothing is restored otherwise).
    """
    from lm_eval._cli.utils import handle_cli_value_string

    if argv is None:
        if not _running_lm_eval_cli():
            return dict(model_args)
        argv = sys.argv[1:]
    text = model_args_text(argv)
    out = dict(model_args)
    for key, value in model_args.items():
        raw = text.get(key)
        if raw is None or isinstance(value, str):
            continue
        typed = handle_cli_value_string(raw)
        if type(typed) is type(value) and typed == value:
            out[key] = raw
    return out


def lm_eval_error_fix(exc: BaseException, argv: Sequence[str] | None = None) -> str | None:
    """lm-eval's own argument errors (raised as ``ValueError``) with the fix added, else None.

    Args:
        exc: the exception lm-eval raised.
        argv: the lm-eval arguments (default ``sys.argv[1:]``), to name a flag with bad JSON.
    """
    message = str(exc)
    if not isinstance(exc, ValueError):
        return None
    if message.startswith("Invalid JSON"):
        return json_flag_problem(sys.argv[1:] if argv is None else argv) or message
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


def _running_lm_eval_cli() -> bool:
    """True in a process started as the ``lm_eval`` command (or ``python -m lm_eval``)."""
    first = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if first is None:
        return False
    return first.name in ("lm_eval", "lm-eval") or (
        first.name == "__main__.py" and first.parent.name == "lm_eval"
    )


def _install_clean_errors() -> None:
    if _running_lm_eval_cli() and not getattr(sys.excepthook, "_prbench_clean_errors", False):
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
    if _running_lm_eval_cli() and name != "lm_eval._cli.utils":
        patch_table()  # before lm-eval's run command binds make_table (after evaluate_config)
    if _argv_has_metadata(sys.argv):
        quiet_metadata_hint(metadata_given=True)
    elif not any(isinstance(f, MetadataHintFilter)
                 for f in logging.getLogger("lm_eval.api.task").filters):
        quiet_metadata_hint(metadata_given=False)
    if name == "lm_eval.models":
        register_model()
        if _running_lm_eval_cli():
            patch_results_saving()
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
        if not prbench_run["seen"]:
            save_samples(self, task_name=task_name, samples=samples)
            return
        from prbench.harness.manifest import save_samples_strictly

        save_samples_strictly(save_samples, self, task_name, samples)

    save_results_aggregated._prbench_manifest = True  # type: ignore[attr-defined]
    tracker_cls.save_results_aggregated = save_results_aggregated  # type: ignore[method-assign]
    tracker_cls.save_results_samples = save_results_samples  # type: ignore[method-assign]
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
    "json_flag_problem",
    "lm_eval_discovers",
    "lm_eval_error_fix",
    "model_args_text",
    "on_lm_eval_import",
    "option_text",
    "patch_results_saving",
    "patch_table",
    "patch_task_manager",
    "quiet_metadata_hint",
    "register_model",
    "restore_option_text",
    "warn_troubled_plugins",
]
