"""List the registered scorers (reward models, judges, baselines) and their options."""

from __future__ import annotations

import argparse
import sys

from prbench.plugins import KINDS, UnknownComponentError, get_registry


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``prbench scorers``."""
    parser.add_argument("--options", action="store_true", help="also list each scorer's options")
    parser.add_argument(
        "--kind",
        choices=KINDS,
        default="scorer",
        help="list another kind of component instead (profile builders, pair generators, ...)",
    )
    parser.add_argument("ids", nargs="*", help="only these component ids")


def runtime_option_rows() -> list[dict[str, str]]:
    """Option rows of the scorer runtime (cache, chunking, progress), shared by every scorer."""
    from prbench.options import describe_options
    from prbench.scoring.runtime_options import RuntimeOptions

    return describe_options(RuntimeOptions)


def run(args: argparse.Namespace) -> int:
    """Print the components of one kind; exit 1 (one line) for an unknown or ambiguous id."""
    registry = get_registry(args.plugin)
    try:
        components = (
            [registry.get(args.kind, i) for i in args.ids] if args.ids else registry.list(args.kind)
        )
    except UnknownComponentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    width = max((len(c.qualified_id) for c in components), default=10)
    for c in components:
        flags = []
        if c.diagnostic:
            flags.append("DIAGNOSTIC")
        flags.extend(c.tags)
        flag_text = f" [{', '.join(flags)}]" if flags else ""
        print(f"{c.qualified_id.ljust(width)}  {c.description}{flag_text}")
        if args.options:
            rows = c.describe_options()
            if not rows:
                print("    (no options)")
            for row in rows:
                print(_option_line(row))
    if args.options and args.kind == "scorer" and components:
        print("\nevery scorer also takes the scorer runtime's options:")
        for row in runtime_option_rows():
            print(_option_line(row))
    for info in registry.troubled():
        print(f"warning: {registry.describe_trouble(info)}", file=sys.stderr)
    return 0


def _option_line(row: dict[str, str]) -> str:
    """``    name: type = default (range)  help`` for ``--options``."""
    bounds = f" ({row['range']})" if row.get("range") else ""
    help_text = f"  {row['help']}" if row["help"] else ""
    return f"    {row['name']}: {row['type']} = {row['default']}{bounds}{help_text}"
