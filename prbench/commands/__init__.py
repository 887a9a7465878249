"""Subcommands of the ``prbench`` CLI: one module each, ``eval`` and ``build`` included.

See :mod:`prbench.cli` for the common command-line style every subcommand gets.

Shared by the subcommands (and by :mod:`prbench.cli`, which imports them from here, so that no
subcommand imports the CLI): the argparse types below, the one way to give a scorer
(:func:`add_scorer_argument`, :func:`scorer_specs`, :func:`check_scorer`) and the flag spellings.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def positive_int(text: str) -> int:
    """The ``type=`` of an option that takes a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def positive_number(text: str) -> float:
    """The ``type=`` of an option that takes a number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


#: the old output flags, still accepted (with a note) where a command has ``--output_path``
OLD_OUTPUT_FLAGS = ("--output", "--output_dir", "--output-dir")


def spellings(flag: str) -> tuple[str, str]:
    """A long flag's underscore spelling (shown) and dash spelling (also accepted)."""
    body = flag[2:]
    return "--" + body.replace("-", "_"), "--" + body.replace("_", "-")


def add_scorer_argument(parser: argparse.ArgumentParser, *, repeatable: bool = False,
                        required: bool = True) -> None:
    """``--model_args scorer=ID,K=V`` (the one way to give a scorer), and the old ``--scorer``.

    Args:
        parser: the subcommand's parser.
        repeatable: one ``--model_args`` per scorer (``prbench bon``).
        required: a scorer must be given (checked by :func:`scorer_specs`, so the old form counts).
    """
    what = "a scorer and its options" + ("; repeatable, one scorer each" if repeatable else "")
    parser.add_argument(
        "--model_args", action="append" if repeatable else "store", default=[] if repeatable
        else "", metavar="scorer=ID,K=V,...",
        help=f"{what}, e.g. scorer=hf-classifier,pretrained=PATH (`prbench scorers --options` "
        "lists them; runtime options cache=, cache_path=, chunk_size= work too)"
        + ("" if required else "; none: no scorer"),
    )
    parser.add_argument("--scorer", action="append", default=[], help=argparse.SUPPRESS)
    parser.set_defaults(prbench_scorer_required=required)


def scorer_specs(args: argparse.Namespace) -> list[str]:
    """The scorers of ``--model_args scorer=ID,K=V`` (and of the old ``--scorer``) as specs.

    A spec is ``ID`` or ``ID:K=V,...`` (what :mod:`prbench.downstream.evaluator` reads). The old
    forms still work and print a note naming the new one: ``--scorer ID:K=V`` (``prbench bon``)
    and ``--scorer ID --model_args K=V`` (``prbench serve``/``rl``).

    Raises:
        OptionsError: no scorer, ``--model_args`` without ``scorer=``, or a malformed list.
    """
    from prbench.options import OptionsError, parse_kv_string

    given = args.model_args if isinstance(args.model_args, list) else (
        [args.model_args] if args.model_args else [])
    old = list(getattr(args, "scorer", None) or [])
    specs: list[str] = []
    for text in given:
        options = parse_kv_string(text)
        scorer = options.pop("scorer", "")
        if not scorer and len(old) == 1 and len(given) == 1:  # --scorer ID --model_args K=V
            scorer = old.pop().partition(":")[0]
            _old_form_note(f"--scorer {scorer} --model_args {text}",
                           f"--model_args scorer={scorer},{text}")
        if not scorer:
            raise OptionsError(
                f"--model_args {text!r} names no scorer: write --model_args scorer=ID,{text} "
                "(`prbench scorers` lists the ids)"
            )
        rest = ",".join(f"{k}={v}" for k, v in options.items())
        specs.append(f"{scorer}:{rest}" if rest else scorer)
    for spec in old:
        scorer_id, _, rest = spec.partition(":")
        new = f"--model_args scorer={scorer_id.strip()}" + (f",{rest}" if rest else "")
        _old_form_note(f"--scorer {spec}", new)
        specs.append(spec)
    if not specs and getattr(args, "prbench_scorer_required", True):
        raise OptionsError(
            "no scorer given: add --model_args scorer=ID[,K=V,...], e.g. --model_args "
            "scorer=length (`prbench scorers` lists the ids)"
        )
    return specs


def check_scorer(registry: Any, scorer: str, raw: dict[str, Any], *, what: str) -> None:
    """Check a pointwise scorer's id and options, and that it can be built, before any work.

    Args:
        registry: the plugin registry.
        scorer: the scorer id.
        raw: its options as given (runtime options included).
        what: how the command calls it (``reward``, ``judge``, ``served scorer``).

    Raises:
        OptionsError: a pairwise scorer, bad options, or options that cannot build it (e.g. a
            judge without a model).
        UnknownComponentError: an unknown id.
    """
    from prbench.options import OptionsError
    from prbench.scoring.runtime import split_options

    component = registry.get("scorer", scorer)
    _, scorer_raw = split_options(component, raw)
    parsed = component.parse_options(scorer_raw)
    if "pairwise" in component.tags:
        raise OptionsError(
            f"{what} {scorer!r} is pairwise (it compares two answers); this command needs a "
            "pointwise scorer, one score per answer (`prbench scorers` marks them)"
        )
    model = getattr(parsed, "model", None)
    backend = getattr(parsed, "backend", None)
    if model == "" and backend is not None:  # a judge that would fail once its model is needed
        raise OptionsError(
            f"{what} {scorer!r}: set the option `model` (a hub id, local folder or served model "
            "name), e.g. model=HuggingFaceTB/SmolLM2-135M-Instruct"
        )


def _old_form_note(old: str, new: str) -> None:
    print(f"prbench: note: {old!r} is the old form; write {new!r}", file=sys.stderr)
