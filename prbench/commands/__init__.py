"""Subcommands of the ``prbench`` CLI: one module each, ``eval`` and ``build`` included.

See :mod:`prbench.cli` for the common command-line style every subcommand gets.

Shared by the subcommands (and by :mod:`prbench.cli`, which imports them from here, so that no
subcommand imports the CLI): the argparse types below, the one way to give a scorer
(:func:`add_scorer_argument`, :func:`scorer_specs`, :func:`check_scorer`) or another component
(:data:`ROLES`, :func:`add_component_argument`, :func:`component_args`) and the flag spellings.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
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


#: flags of earlier, unreleased drafts of the command line: they do not parse; the error for
#: one names the form to write instead (see :func:`prbench.cli.CommandParser.error`)
REMOVED_FLAGS: dict[str, str] = {
    "--output": "-o/--output_path", "--output_dir": "-o/--output_path",
    "--scorer": "--model_args scorer=ID,K=V", "--judge": "--judge_args judge=ID,K=V",
    "--profile": "--profile_args builder=ID,K=V", "--profile_k": "--profile_args builder=ID,k=N",
    "--profile_options": "--profile_args builder=ID,K=V", "--builder": "--profile_args builder=ID",
    "--builder_args": "--profile_args builder=ID,K=V", "--policy": "--policy_args model=PATH",
    "--gguf_file": "--policy_args model=PATH,gguf_file=F", "--generator":
    "--generator_args generator=ID,K=V", "-O": "--generator_args generator=ID,K=V",
    "--option": "--generator_args generator=ID,K=V",
}


def spellings(flag: str) -> tuple[str, str]:
    """A long flag's underscore spelling (shown) and dash spelling (also accepted)."""
    body = flag[2:]
    return "--" + body.replace("-", "_"), "--" + body.replace("_", "-")


def unknown_flags_hint(words: Sequence[str], known: Sequence[str]) -> str:
    """``" (did you mean --limit?)"`` for the flags among ``words`` that ``known`` lacks.

    A flag of an earlier, unreleased draft names its replacement
    (:data:`prbench.commands.REMOVED_FLAGS`); any other gets its close matches among ``known``
    (either spelling). ``""`` when there is nothing to suggest.
    """
    from prbench.options import suggest

    hints = []
    flags = [w.partition("=")[0] for w in words if w.startswith("-") and w not in known]
    for flag in flags:
        under = spellings(flag)[0] if flag.startswith("--") else flag
        if under in REMOVED_FLAGS:
            hints.append(f"{flag} is now {REMOVED_FLAGS[under]}")
            continue
        match = suggest(under, known).strip().strip("()")
        if match:
            hints.append(match if len(flags) == 1 else f"{flag}: {match}")
    return f" ({'; '.join(hints)})" if hints else ""


def add_scorer_argument(parser: argparse.ArgumentParser, *, repeatable: bool = False,
                        required: bool = True) -> None:
    """``--model_args scorer=ID,K=V``, the one way to give a scorer.

    Args:
        parser: the subcommand's parser.
        repeatable: one ``--model_args`` per scorer (``prbench bon``).
        required: a scorer must be given (checked by :func:`scorer_specs`).
    """
    what = "a scorer and its options" + ("; repeatable, one scorer each" if repeatable else "")
    parser.add_argument(
        "--model_args", action="append" if repeatable else "store", default=[] if repeatable
        else "", metavar="scorer=ID,K=V,...",
        help=f"{what}, e.g. scorer=hf-classifier,pretrained=PATH (`prbench scorers --options` "
        "lists them; runtime options cache=, cache_path=, chunk_size=, call_timeout= work too)"
        + ("" if required else "; none: no scorer"),
    )
    parser.set_defaults(prbench_scorer_required=required)


def scorer_specs(args: argparse.Namespace) -> list[str]:
    """The scorers of ``--model_args scorer=ID,K=V`` as specs.

    A spec is ``ID`` or ``ID:K=V,...`` (what :mod:`prbench.downstream.evaluator` reads).

    Raises:
        OptionsError: no scorer, ``--model_args`` without ``scorer=``, or a malformed list.
    """
    from prbench.options import OptionsError, parse_kv_string

    given = args.model_args if isinstance(args.model_args, list) else (
        [args.model_args] if args.model_args else [])
    specs: list[str] = []
    from prbench.scoring.spec import check_key_case

    for text in given:
        options = parse_kv_string(text)
        check_key_case(options, {"scorer"}, flag="--model_args")  # Scorer=ID names scorer=
        scorer = options.pop("scorer", "")
        if not scorer:
            raise OptionsError(
                f"--model_args {text!r} names no scorer: write --model_args scorer=ID,{text} "
                "(`prbench scorers` lists the ids)"
            )
        rest = ",".join(f"{k}={v}" for k, v in options.items())
        specs.append(f"{scorer}:{rest}" if rest else scorer)
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
    from prbench.scoring.runtime_options import split_options

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


#: ``--<role>_args``: each component role and the key naming its component (``None``: the role
#: has options only). The one form of every component option, as lm-eval's ``--model_args``.
ROLES: dict[str, str | None] = {
    "model": "scorer",
    "judge": "judge",
    "profile": "builder",
    "generator": "generator",
    "policy": None,
}

def add_component_argument(parser: argparse.ArgumentParser, role: str, *, default: str,
                           help: str, required: bool = False) -> None:
    """``--<role>_args KEY=ID,K=V,...``, the one way to give a component and its options.

    Args:
        parser: the subcommand's parser.
        role: a key of :data:`ROLES` (``judge``, ``profile``, ``generator``, ``policy``).
        default: the component id used when the flag is not given (``""``: none).
        help: what the component does in this command (the form and default are added).
        required: the component must be given (``prbench rl``'s policy); help says so instead
            of showing a default, and the command checks it (its error names the form).
    """
    key = ROLES[role]
    form = f"{key}=ID,K=V,..." if key else "K=V,..."
    shown = f"{key}={default}" if key and default else "none"
    parser.add_argument(f"--{role}_args", default=None, metavar=form,
                        help=f"{help} ({'required' if required else f'default: {shown}'})")
    parser.set_defaults(**{f"prbench_default_{role}": default})


def kv_text(options: dict[str, Any], **first: str) -> str:
    """Options as a ``K=V,...`` list (JSON for a value that is not a string), ``first`` first.

    The inverse of :func:`prbench.options.parse_kv_string`: ``kv_text({"k": "5"},
    builder="dense")`` is ``"builder=dense,k=5"``.
    """
    import json

    items = {**{k: v for k, v in first.items() if v}, **options}
    return ",".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in items.items())


def component_args(args: argparse.Namespace, role: str) -> tuple[str, dict[str, Any]]:
    """The component and options of ``--<role>_args``.

    Returns:
        (component id, raw options); the id is the command's default when the list names none,
        and ``""`` for a role without ids (``policy``) or a command whose default is none.

    Raises:
        OptionsError: a malformed list, or options without the component's key.
    """
    from prbench.options import OptionsError, parse_kv_string

    key = ROLES[role]
    flag = f"--{role}_args"
    text: str | None = getattr(args, f"{role}_args", None)
    if key is None and text and "=" not in text:  # --policy_args PATH
        raise OptionsError(f"{flag} {text!r} is not a K=V list: write {flag} model={text}")
    options: dict[str, Any] = parse_kv_string(text) if text is not None else {}
    ident = str(options.pop(key, "")) if key else ""
    if key and not ident:
        if text is not None and text.strip():
            raise OptionsError(f"{flag} {text!r} names no {key}: write {flag} {key}=ID,{text}")
        ident = str(getattr(args, f"prbench_default_{role}", "") or "")
    return ident, options
