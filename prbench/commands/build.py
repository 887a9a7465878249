"""Build chosen/rejected pairs from question + profile + rubric records with a generator LLM.

Input rows have the benchmark schema without answers (id, question, profile, narrative,
rubric_aspects, category). Kept pairs go to OUTPUT as full benchmark records; dropped ones, the
settings and a report go to OUTPUT.build/. Run the same command again to resume after a crash.

Examples:
  prbench build lamp_qa.jsonl -o pairs.jsonl --model HuggingFaceTB/SmolLM2-135M-Instruct
  prbench build in.jsonl -o pairs.jsonl --backend openai --model MODEL --base_url URL/v1
  prbench build in.jsonl -o pairs.jsonl --model MODEL \
      --generator_args generator=rubric-contrast,leak_check=both,judge_check=true
"""

from __future__ import annotations

import argparse
import sys

#: Command-line shortcuts for common generator options (flag dest -> option name).
SHORTCUTS = {
    "backend": "backend",
    "model": "model",
    "gguf_file": "gguf_file",
    "base_url": "base_url",
    "device": "device",
    "seed": "seed",
}


#: where the command writes, checked before any work (:func:`prbench.cli.check_outputs`)
OUTPUTS = {"output_path": "file"}

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``prbench build``."""
    from prbench.commands import add_component_argument

    parser.add_argument("input", help="source records: a .jsonl/.json/.parquet file or a folder")
    parser.add_argument("-o", "--output_path", required=True,
                        help="output .jsonl file (appended to)")
    add_component_argument(
        parser, "generator", default="rubric-contrast",
        help="the pair generator and its options, e.g. generator=rubric-contrast,"
        "min_length_ratio=0.8,profile_builder_options={\"k\": 5} (`prbench build "
        "--list_options` lists them)",
    )
    # each shortcut sets the generator option of its name; left out, the option keeps the
    # generator's default (rubric-contrast's are named in the help; the test checks them)
    parser.add_argument("--backend", choices=("hf", "openai"),
                        help="generation backend (default: the generator's, hf)")
    parser.add_argument("--model", help="generator model: hub id, local folder or served name "
                        "(required, here or in --generator_args)")
    parser.add_argument("--gguf_file", help="GGUF file inside --model (hf) (default: none)")
    parser.add_argument("--base_url",
                        help="server URL (openai backend) (default: none, required for openai)")
    parser.add_argument("--device",
                        help="cpu, cuda, cuda:0, auto (hf) (default: the generator's, auto)")
    parser.add_argument("--seed", type=int, help="sampling seed (default: the generator's, 0)")
    parser.add_argument(
        "--batch_size", type=int, default=8,
        help="records per generation call and per write",
    )
    parser.add_argument("--limit", type=int,
                        help="only the first N source records (default: all of them)")
    parser.add_argument(
        "--overwrite", action="store_true",
        help="start again: delete OUTPUT and its side files instead of resuming",
    )
    parser.add_argument(
        "--list_options", action="store_true", help="list the generator's options and exit"
    )


def _options(args: argparse.Namespace) -> tuple[str, dict[str, str]]:
    """The generator's id and options: ``--generator_args`` with the shortcut flags."""
    from prbench.commands import component_args
    from prbench.options import OptionsError

    generator, given = component_args(args, "generator")
    out = {k: str(v) for k, v in given.items()}
    for dest, name in SHORTCUTS.items():
        value = getattr(args, dest, None)
        if value is not None:
            if name in out and out[name] != str(value):
                raise OptionsError(
                    f"option {name!r} is given both in --generator_args and as --{dest}")
            out[name] = str(value)
    return generator, out


def run(args: argparse.Namespace) -> int:
    """Run a build; exit 0 when every source record is accounted for, 1 on errors."""
    from prbench.options import OptionsError
    from prbench.plugins import UnknownComponentError, get_registry
    from prbench.records import DataSourceError, RecordValidationError

    registry = get_registry(getattr(args, "plugin", []) or [])
    try:
        generator_id, options = _options(args)
        component = registry.get("pair-generator", generator_id)
    except (OptionsError, UnknownComponentError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.list_options:
        for row in component.describe_options():
            print(f"{row['name']:<24} {row['type']:<22} default {row['default']:<18} {row['help']}")
        return 0
    from prbench.backends.base import BackendFatalError
    from prbench.pairs.build import BuildError, build_pairs
    from prbench.pairs.source import load_sources

    try:
        component.parse_options(options)
        records = load_sources(args.input)  # bad input fails before a model is loaded
    except (OptionsError, RecordValidationError, DataSourceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        generator = component.build(options)
    except (OptionsError, ValueError, OSError, ImportError, RuntimeError) as exc:
        print(f"error: cannot build the generator {generator_id!r}: {exc}", file=sys.stderr)
        return 1
    try:
        report = build_pairs(
            args.input,
            args.output_path,
            generator,
            batch_size=args.batch_size,
            limit=args.limit,
            overwrite=args.overwrite,
            progress=not getattr(args, "no_progress", False),
            records=records,
        )
    except (BuildError, BackendFatalError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(report.summary())
    print(f"pairs: {args.output_path}; report, settings and dropped pairs: "
          f"{side_dir_of(args.output_path)}")
    return 0 if report.complete else 1


def side_dir_of(output: str) -> str:
    """The side-file folder of an output path (for messages)."""
    from pathlib import Path

    from prbench.pairs.build import side_dir

    return str(side_dir(Path(output)))
