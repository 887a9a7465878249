"""Where prbench's lm-eval task folders are: its own and the ones plugins register.

:func:`task_dirs` is the ``lm_eval.tasks`` entry point (through :mod:`prbench.harness.tasks`).
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)


def builtin_task_dir() -> Path:
    """The folder of prbench's own tasks: ``prbench/_tasks`` (wheel) or ``<repo>/tasks`` (checkout).

    Raises:
        FileNotFoundError: neither exists (a broken install).
    """
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "_tasks", package.parent / "tasks"):
        if (candidate / "personalized_rewardbench").is_dir():
            return candidate
    raise FileNotFoundError(
        f"prbench's task folder is missing: looked for {package / '_tasks'} (installed wheel) and "
        f"{package.parent / 'tasks'} (source checkout); reinstall prbench"
    )


def task_dirs() -> list[str]:
    """The task folders to index, prbench's own and the plugins' (``lm_eval.tasks`` entry point).

    The folders come from the ``register_task_dirs`` hook of every loaded plugin, prbench's own
    through its built-in ``prbench.tasks`` plugin. If the plugin registry cannot load, only
    prbench's own folder is returned.
    """
    try:
        from prbench.plugins import get_registry

        dirs = [path for path, _desc, _plugin in get_registry().task_dirs]
    except Exception as exc:  # a broken plugin set must not hide the benchmark
        log.warning("prbench: plugin task folders unavailable (%s); using prbench's own", exc)
        dirs = [str(builtin_task_dir())]
    seen: set[str] = set()
    out = []
    for d in dirs:
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


__all__ = ["builtin_task_dir", "task_dirs"]
