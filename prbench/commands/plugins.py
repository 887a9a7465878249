"""List the loaded plugins, their versions and the components they registered."""

from __future__ import annotations

import argparse
import json

from prbench.plugins import get_registry


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


def run(args: argparse.Namespace) -> int:
    """Print the plugin table; exit 1 when a plugin failed to load or dropped registrations."""
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
