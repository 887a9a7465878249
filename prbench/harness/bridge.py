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

Under plain ``lm_eval`` the bridge also installs, as lm-eval's modules are imported
(:func:`on_lm_eval_import`), what keeps the output short (:mod:`prbench.harness.lm_eval_messages`)
and the run's files as ``prbench eval`` writes them (:mod:`prbench.harness.run_files`).

Upstream lm-eval is adding entry-point discovery for the groups ``lm_eval.models`` and
``lm_eval.tasks`` (prbench declares both). Where the installed lm-eval reads a group itself, the
bridge stands aside for that group.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from prbench.harness.lm_eval_args import MODEL_NAME, running_lm_eval_cli
from prbench.harness.lm_eval_messages import (
    MetadataHintFilter,
    argv_has_metadata,
    install_clean_errors,
    quiet_metadata_hint,
    quiet_plain_run,
    stop_on_bad_model_args,
    stop_without_model,
    warn_troubled_plugins,
    warn_unreadable_task_files,
)
from prbench.harness.run_files import patch_table, use_tracker

log = logging.getLogger(__name__)

MODEL_TARGET = "prbench.harness.lm:PRBenchLM"
MODELS_GROUP = "lm_eval.models"
TASKS_GROUP = "lm_eval.tasks"

#: set by ``prbench eval`` when every requested task is a prbench task
_settings: dict[str, Any] = {"include_defaults": None, "extra_dirs": ()}


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
    install_clean_errors()
    if name == "lm_eval._cli.utils":
        from prbench.harness.lm_eval_args import allow_braces_in_values

        allow_braces_in_values()  # user_format={question} is key=value text, not bad JSON
        return  # lm-eval is still parsing its command line
    if name == "lm_eval.config.evaluate_config" and running_lm_eval_cli():
        stop_without_model(sys.argv[1:])
        stop_on_bad_model_args(sys.argv[1:])  # before lm-eval indexes its tasks
        quiet_plain_run(sys.argv[1:])  # lm-eval logs its --limit warning from this module
        use_tracker()  # `lm_eval run` starts: it looks up lm_eval.loggers.EvaluationTracker next
    if running_lm_eval_cli():
        patch_table()  # before lm-eval's run command binds make_table (after evaluate_config)
    if argv_has_metadata(sys.argv):
        quiet_metadata_hint(metadata_given=True)
    elif not any(isinstance(f, MetadataHintFilter)
                 for f in logging.getLogger("lm_eval.api.task").filters):
        quiet_metadata_hint(metadata_given=False)
    if name == "lm_eval.models":
        register_model()
    elif name == "lm_eval.tasks.manager":
        manager = getattr(module, "TaskManager", None)
        if manager is not None:
            patch_task_manager(manager)


def install() -> None:
    """Do both now (``prbench eval`` and tests): register the model, patch ``TaskManager``."""
    register_model()
    patch_task_manager()


__all__ = [
    "MODEL_NAME",
    "configure",
    "install",
    "lm_eval_discovers",
    "on_lm_eval_import",
    "patch_task_manager",
    "register_model",
]
