"""The ``prbench`` command.

Subcommands live in their own modules, listed in :data:`COMMANDS`; each exposes
``add_arguments(parser)`` and ``run(args) -> int`` and is cheap to import (no torch). A module
that sets ``ACCEPTS_EXTRA_ARGS = True`` receives unparsed arguments in ``args.extra_args`` (used by
``prbench eval`` to pass lm-eval's own flags through).

Every subcommand takes ``--plugin FILE`` and ``--no-progress`` (progress bars off; they are also
off when standard error is not a terminal, see :mod:`prbench.progress`). Bad input, bad options and
unknown or ambiguous component ids end the command with one ``error:`` line and exit 1, never a
traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from prbench import __version__

#: subcommand -> module with ``add_arguments(parser)`` and ``run(args) -> int``
COMMANDS: dict[str, str] = {
    "build": "prbench.pairs.cli",
    "bon": "prbench.commands.bon",
    "correlate": "prbench.commands.correlate",
    "eval": "prbench.harness.cli",
    "plugins": "prbench.commands.plugins",
    "prefs": "prbench.commands.prefs",
    "rank": "prbench.commands.rank",
    "report": "prbench.commands.report",
    "rl": "prbench.commands.rl",
    "scorers": "prbench.commands.scorers",
    "serve": "prbench.commands.serve",
    "sweep": "prbench.commands.sweep",
    "validate": "prbench.commands.validate",
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="prbench",
        description="Personalized RewardBench: does a reward model prefer, for one user, the "
        "answer that covers what this user asked for?",
    )
    parser.add_argument("--version", action="version", version=f"prbench {__version__}")
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="PATH",
        help="load a plugin from a Python file (after installed plugins); repeatable",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        doc = (module.__doc__ or "").strip().splitlines()
        summary = doc[0].rstrip(".") if doc else name
        p = sub.add_parser(name, help=summary, description=(module.__doc__ or "").strip())
        p.add_argument(
            "--plugin",
            action="append",
            default=[],
            dest="plugin_files",
            metavar="PATH",
            help="load a plugin from a Python file (after installed plugins); repeatable",
        )
        module.add_arguments(p)
        if "--no-progress" not in p._option_string_actions:  # one flag, whatever the command
            p.add_argument(
                "--no-progress",
                action="store_true",
                help="no progress bars (they are also off when stderr is not a terminal)",
            )
        p.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``prbench`` command; returns the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, extra = parser.parse_known_args(args_list)
    if args.command is None:
        parser.print_help()
        return 2
    if extra and not getattr(args._module, "ACCEPTS_EXTRA_ARGS", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra_args = extra
    args.plugin = [*args.plugin, *getattr(args, "plugin_files", [])]
    saved = {k: os.environ.get(k) for k in ("PRBENCH_PROGRESS", "TQDM_DISABLE")}
    quiet_progress(bool(getattr(args, "no_progress", False)))
    try:
        return int(args._module.run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except user_errors() as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 1
    finally:  # in-process callers (tests, notebooks) get their environment back
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def quiet_progress(no_progress: bool) -> None:
    """Apply ``--no-progress``: prbench's bars off, and the bars of the libraries it drives.

    prbench's own bars read ``PRBENCH_PROGRESS`` (see :mod:`prbench.progress`). lm-eval,
    datasets and transformers draw plain tqdm bars; ``TQDM_DISABLE=1`` turns those off too, both
    for ``--no-progress`` and when standard error is not a terminal (unless the user set
    ``TQDM_DISABLE`` or ``PRBENCH_PROGRESS=1`` themselves).
    """
    from prbench.progress import disable_progress, progress_enabled

    if no_progress:
        disable_progress()
    if not progress_enabled():
        os.environ.setdefault("TQDM_DISABLE", "1")


def user_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that mean bad input, options or ids: shown as one line, never a traceback.

    :class:`prbench.records.DataSourceError` and :class:`~prbench.records.RecordValidationError`
    (unreadable or invalid data), :class:`prbench.options.OptionsError`, and the plugin registry's
    :class:`~prbench.plugins.UnknownComponentError` (unknown or ambiguous ids) and
    :class:`~prbench.plugins.PluginError` (a factory that does not fit its registration, or a
    plugin's scorer or profile builder that raised or returned garbage: the message names the
    plugin and the component), :class:`prbench.backends.base.BackendFatalError` (a judge's server
    rejects the key, does not know the model, or cannot be reached), and
    :class:`prbench.store.StoreError` (a damaged score, embedding or response cache file; the
    message names it and the ways out), and
    :class:`prbench.scoring.runtime.ScorerOutOfMemoryError` (one request that does not fit in
    accelerator memory even alone; the message names its record and what to lower).
    """
    from prbench.backends.base import BackendFatalError
    from prbench.options import OptionsError
    from prbench.plugins import PluginError, UnknownComponentError
    from prbench.records import DataSourceError, RecordValidationError
    from prbench.scoring.runtime import ScorerOutOfMemoryError
    from prbench.store import StoreError

    return (DataSourceError, RecordValidationError, OptionsError, UnknownComponentError,
            PluginError, BackendFatalError, StoreError, ScorerOutOfMemoryError)


def one_line(exc: BaseException) -> str:
    """The exception's message (a multi-line message is kept: it lists one problem a line)."""
    return str(exc) or type(exc).__name__


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
