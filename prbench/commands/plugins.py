"""List the loaded plugins, their versions and the components they registered; ``prbench
plugins new NAME`` writes a new plugin package from the template plugin.
"""  # noqa: D205

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from prbench.plugins import get_registry


def _shown_path(path: Path) -> str:
    """``path`` relative to the working folder when it is under it, else absolute."""
    here, there = Path.cwd().resolve(), path.resolve()
    return os.path.relpath(there, here) if there.is_relative_to(here) else str(there)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``prbench plugins``."""
    parser.add_argument(
        "--all",
        action="store_true",
        help="also list plugins skipped by PRBENCH_LOAD_PLUGINS / PRBENCH_DISABLE_PLUGINS, "
        "and the hooks each plugin implements",
    )
    parser.add_argument(
        "--requirements",
        action="store_true",
        help="print pip requirement lines (name==version) of the installed plugin distributions",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    sub = parser.add_subparsers(dest="plugins_command", metavar="ACTION")
    new = sub.add_parser(
        "new", help="write a new plugin package (prbench-plugin-NAME) from the template plugin",
        description="Write a ready plugin package from prbench's template plugin, renamed after "
        "NAME: the distribution prbench-plugin-NAME, the module prbench_plugin_NAME (hyphens as "
        "underscores), the entry point NAME in group `prbench`, the scorer NAME, the profile "
        "builder NAME-last-posts, the task NAME_sample_last_posts and a test file.",
    )
    new.add_argument("name", metavar="NAME",
                     help="the plugin's name in kebab-case (e.g. my-rm); it is also the scorer id")
    new.add_argument("-o", "--output_path", default=None,
                     help="the folder to create (default: prbench-plugin-NAME here); it must not "
                     "exist")


def run(args: argparse.Namespace) -> int:
    """Print the plugin table; exit 1 when a plugin failed to load or dropped registrations."""
    if getattr(args, "plugins_command", None) == "new":
        return new_plugin(args)
    registry = get_registry(args.plugin)
    plugins = list(registry.plugins.values())
    if not args.all:
        plugins = [p for p in plugins if not p.disabled]
    if args.requirements:
        seen = set()
        for p in plugins:
            if p.origin == "entry-point" and p.dist and p.dist not in seen and not p.disabled:
                seen.add(p.dist)
                print(f"{p.dist}=={p.version}")
        return 0
    if args.json:
        print(json.dumps([p.as_dict() for p in plugins], indent=2))
        return 1 if registry.troubled() else 0
    for p in plugins:
        version = f" {p.version}" if p.version else ""
        dist = f"{p.dist}{version}" if p.dist else p.source
        print(f"{p.name}  [{p.status}]  {p.origin}: {dist}")
        if args.all and p.hooks:
            print(f"    hooks: {', '.join(p.hooks)}")
        for comp in p.components:
            kind, _, name = comp.partition(":")
            component = registry.components[kind].get(name)
            flag = "  (DIAGNOSTIC)" if component is not None and component.diagnostic else ""
            print(f"    {kind}: {name}{flag}")
        for d in p.task_dirs:
            print(f"    task dir: {d}")
        if p.error:
            print(f"    error: {p.error}")
        for problem in p.problems:
            print(f"    problem: {problem}")
        if p.disabled:
            print(f"    disabled: {p.disabled}")
    for warning in registry.warnings:
        print(f"warning: {warning}")
    failed = registry.failed()
    partial = [p for p in registry.troubled() if p.status == "partial"]
    if failed:
        print(f"\n{len(failed)} plugin(s) failed to load; their components are unavailable.")
    if partial:
        print(
            f"\n{len(partial)} plugin(s) loaded in part: the registrations listed under "
            "'problem' were dropped or need a qualified id; everything else works."
        )
    return 1 if failed or partial else 0


def new_plugin(args: argparse.Namespace) -> int:
    """``prbench plugins new NAME``: write the package, then say how to install and run it.

    Raises:
        ScaffoldError: a bad name, a name a loaded plugin or component already uses, or an
            existing destination.
    """
    from prbench.plugin_scaffold import (
        ScaffoldError,
        check_name,
        constraints_file,
        write_plugin,
    )

    names = check_name(args.name)
    registry = get_registry(args.plugin)
    taken: list[str] = [
        f"the plugin {names.name!r}" if names.name in registry.plugins else "",
        f"the scorer {names.scorer!r}" if names.scorer in registry.components["scorer"] else "",
        f"the profile builder {names.builder!r}"
        if names.builder in registry.components["profile-builder"] else "",
    ]
    taken = [t for t in taken if t]  # e.g. the built-in scorer `length`
    if taken:
        raise ScaffoldError(
            f"plugin name {names.name!r} is taken: {' and '.join(taken)} (see `prbench "
            "plugins`); choose another name (two plugins registering one id make it ambiguous)"
        )
    folder, files = write_plugin(names.name, args.output_path)
    print(f"wrote {folder}/ ({len(files)} files): distribution {names.distribution}, module "
          f"{names.module}, scorer {names.scorer}, profile builder {names.builder}, task "
          f"{names.snake}_sample_last_posts")
    for rel in files:
        print(f"  {rel.as_posix()}")
    constraints = constraints_file()
    pinned = _shown_path(constraints) if constraints else "<prbench's constraints-cpu.txt>"
    print("next, in the environment prbench is installed in (the constraints file keeps torch at "
          "prbench's version):")
    print(f"  pip install -c {pinned} -e {folder}")
    print(f"  prbench eval --tasks {names.snake}_sample_last_posts --model_args "
          f"scorer={names.scorer} --limit 5")
    print(f"  python -m pytest {folder / 'tests'}")
    print(f"then rewrite {names.camel}Scorer ({names.module}/scorer.py) and {names.camel}Options "
          f"({names.module}/plugin.py) as your reward model (CONTRIBUTING.md, \"A new scorer "
          "plugin\")")
    return 0
