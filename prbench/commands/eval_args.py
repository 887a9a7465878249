"""The lm-eval arguments of ``prbench eval``: handed on in lm-eval's spelling, checked first.

``prbench eval`` passes every flag it does not know to ``lm_eval run``. Here: the argv it hands
on (:func:`lm_eval_argv`, :func:`lm_eval_spellings`), lm-eval's own parse of it
(:func:`lm_eval_namespace`), and the checks that turn what lm-eval would reject with a traceback,
or silently get wrong, into one line with the fix (:func:`argument_problem`,
:func:`misspelt_task`, :func:`reserved_metadata_keys`); also which requested tasks are prbench's
own (:func:`only_prbench_tasks`: then lm-eval's built-in index is skipped).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def lm_eval_argv(args: argparse.Namespace) -> list[str]:
    """The ``lm_eval run`` arguments of a parsed ``prbench eval`` command line.

    ``--tasks`` and ``--model_args`` (declared by prbench for ``--help``) come first, then every
    flag prbench does not know, in lm-eval's spelling (:func:`lm_eval_spellings`).
    """
    given = [
        item for flag in ("tasks", "model_args") if getattr(args, flag, None) is not None
        for item in (f"--{flag}", getattr(args, flag))
    ]
    return lm_eval_spellings([*given, *(getattr(args, "extra_args", None) or [])])


def requested_tasks(tasks: Sequence[str] | None) -> list[str]:
    """lm-eval's ``--tasks`` value split into names (it accepts spaces and commas)."""
    return [t.strip() for item in tasks or [] for t in str(item).split(",") if t.strip()]


def only_prbench_tasks(requested: Sequence[str], names: set[str]) -> bool:
    """True when every requested name or pattern matches a name in ``names``.

    ``names`` holds the tasks of prbench's folders (and of ``--include_path``). A YAML path or a
    name that matches none of them needs lm-eval's own index.
    """
    if not requested:
        return False
    for item in requested:
        if item.endswith(".yaml") or Path(item).exists():
            return False
        if not fnmatch.filter(sorted(names), item):
            return False
    return True


def reserved_metadata_keys(metadata: Any) -> list[str]:
    """Task-fixed ``prbench_`` keys given in ``--metadata`` (lm-eval would crash on them)."""
    from prbench.harness.task_options import TASK_DEFAULT_KEYS, TASK_KEYS

    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except json.JSONDecodeError:
            return []  # lm-eval reports malformed JSON itself
    if not isinstance(metadata, dict):
        return []
    return [k for k in (*TASK_KEYS, *TASK_DEFAULT_KEYS) if k in metadata]


def misspelt_task(requested: Sequence[str], names: set[str]) -> str | None:
    """An error message for a requested name that looks like a misspelt prbench task, else None.

    A name close to a prbench task (or starting with ``personalized_rewardbench``) that matches
    none is almost surely a typo; anything else is left to lm-eval's own index.
    """
    from prbench.options import suggest
    from prbench.records import DOMAINS

    for item in requested:
        if item.endswith(".yaml") or Path(item).exists() or fnmatch.filter(sorted(names), item):
            continue
        hint = suggest(item, names)
        if hint or item.startswith("personalized_rewardbench"):
            slugs = [d.lower() for d in DOMAINS]
            groups = sorted(
                n for n in names
                if n.startswith("personalized_rewardbench") and not any(d in n for d in slugs)
            )
            return f"unknown task {item!r}{hint}; prbench's groups: {', '.join(groups)}"
    return None


def lm_eval_spellings(extra: Sequence[str]) -> list[str]:
    """lm-eval's flags in the spelling lm-eval parses: ``--output-path`` -> ``--output_path``.

    prbench accepts both spellings of every flag; lm-eval only its own (underscores). A dash
    spelling of one of ``lm_eval run``'s flags is rewritten, and the old output flags
    (``--output``, ``--output_dir``) become ``--output_path`` with a deprecation note.
    """
    from lm_eval._cli.harness import HarnessCLI

    from prbench.commands import OLD_OUTPUT_FLAGS, spellings

    run_parser = HarnessCLI()._parser._subparsers._group_actions[0].choices["run"]
    known = set(run_parser._option_string_actions)
    out: list[str] = []
    for arg in extra:
        flag, eq, value = arg.partition("=")
        if flag.startswith("--") and flag not in known:
            if flag in OLD_OUTPUT_FLAGS:
                print(f"prbench: note: {flag} is deprecated; use -o/--output_path",
                      file=sys.stderr)
                flag = "--output_path"
            elif spellings(flag)[0] in known:
                flag = spellings(flag)[0]
        out.append(flag + eq + value)
    return out


def verbosity_shown(extra: Sequence[str]) -> str | None:
    """lm-eval's ``--verbosity``/``-v`` level when it is INFO or DEBUG (lm-eval's logs shown)."""
    for i, arg in enumerate(extra):
        flag, eq, value = arg.partition("=")
        if flag in ("--verbosity", "-v"):
            level = (value if eq else (extra[i + 1] if i + 1 < len(extra) else "")).upper()
            if level in ("INFO", "DEBUG"):
                return level
    return None


def lm_eval_namespace(extra: Sequence[str], *, show_help: bool) -> argparse.Namespace:
    """``extra`` parsed by ``lm_eval run``'s own parser (``--help`` instead with ``show_help``).

    Raises:
        SystemExit: ``--help``, or an argparse error lm-eval already printed.
    """
    from lm_eval._cli.harness import HarnessCLI

    from prbench.harness.lm_eval_args import allow_braces_in_values, run_argv

    allow_braces_in_values()  # user_format={question} is key=value text
    return HarnessCLI()._parser.parse_args(run_argv(["--help"] if show_help else extra))


def groups_hint() -> str:
    """Prbench's task groups, comma-separated (suggested when ``--tasks`` is missing)."""
    from prbench.harness import tasks
    from prbench.records import DOMAINS

    slugs = [d.lower() for d in DOMAINS]
    groups = sorted(
        n for n in tasks.task_names()
        if n.startswith("personalized_rewardbench") and not any(d in n for d in slugs)
    )
    return ", ".join(groups)


def argument_problem(ns: argparse.Namespace, *, tasks_hint: Any = None) -> str | None:
    """A one-line error with the fix for lm-eval arguments it would reject with a traceback.

    Args:
        ns: the parsed ``lm_eval run`` arguments.
        tasks_hint: a callable returning the task groups to suggest when ``--tasks`` is missing.
    """
    if getattr(ns, "config", None):
        return None  # a --config YAML may set these; lm-eval checks the merged result
    if not requested_tasks(getattr(ns, "tasks", None)):
        groups = tasks_hint() if tasks_hint is not None else ""
        example = "personalized_rewardbench_sample"
        listing = f" (prbench's groups: {groups})" if groups else ""
        return f"no --tasks given: name the tasks to run, e.g. --tasks {example}{listing}"
    wants_samples = getattr(ns, "log_samples", False) or getattr(ns, "predict_only", False)
    limit = getattr(ns, "limit", None)
    if limit is not None and not limit > 0:
        return (
            f"--limit {limit:g} leaves no pair to evaluate: give a number of pairs per task "
            "(e.g. --limit 10) or a fraction of them (e.g. --limit 0.5), or leave it out"
        )
    if wants_samples and not getattr(ns, "output_path", None):
        flag = "--predict_only" if getattr(ns, "predict_only", False) else "--log_samples"
        return (
            f"{flag} writes per-pair samples files and needs a folder for them: add "
            "--output_path DIR (e.g. --output_path results)"
        )
    return None
