"""The ``prbench`` command.

Subcommands live in their own modules, listed in :data:`COMMANDS`; each exposes
``add_arguments(parser)`` and ``run(args) -> int`` and is cheap to import (no torch). A module
that sets ``ACCEPTS_EXTRA_ARGS = True`` receives unparsed arguments in ``args.extra_args`` (used by
``prbench eval`` to pass lm-eval's own flags through).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from prbench import __version__

#: subcommand -> module with ``add_arguments(parser)`` and ``run(args) -> int``
COMMANDS: dict[str, str] = {
    "build": "prbench.pairs.cli",
    "eval": "prbench.harness.cli",
    "plugins": "prbench.commands.plugins",
    "scorers": "prbench.commands.scorers",
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
    try:
        return int(args._module.run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
