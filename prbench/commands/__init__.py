"""Subcommands of the ``prbench`` CLI: one module each, ``eval`` and ``build`` included.

See :mod:`prbench.cli` for the common command-line style every subcommand gets.

Shared by the subcommands (and by :mod:`prbench.cli`, which imports them from here, so that no
subcommand imports the CLI): the argparse types below, the one way to give a scorer
(:func:`add_scorer_argument`, :func:`scorer_specs`, :func:`check_scorer`) or another component
(:data:`ROLES`, :func:`add_component_argument`, :func:`component_args`) and the flag spellings.
"""

from __future__ import annotations

import argparse
import sys
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
        "lists them; runtime options cache=, cache_path=, chunk_size=, call_timeout= work too)"
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


def _old_form_note(old: str, new: str) -> None:
    print(f"prbench: note: {old!r} is the old form; write {new!r}", file=sys.stderr)


#: ``--<role>_args``: each component role and the key naming its component (``None``: the role
#: has options only). The one form of every component option, as lm-eval's ``--model_args``.
ROLES: dict[str, str | None] = {
    "model": "scorer",
    "judge": "judge",
    "profile": "builder",
    "generator": "generator",
    "policy": None,
}

#: how an old component flag's value reads (see :func:`add_component_argument`)
OldKind = str  # "id" | "options" | "item" | "json" | "option:NAME"


class _OldComponentFlag(argparse.Action):
    """An old component flag (hidden): its value is kept, as given, for :func:`component_args`."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, kind: OldKind = "id",
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.kind = kind

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        given = list(getattr(namespace, self.dest, None) or [])
        given.append((option_string or self.option_strings[0], self.kind, str(values)))
        setattr(namespace, self.dest, given)


def add_component_argument(parser: argparse.ArgumentParser, role: str, *, default: str,
                           help: str, old: dict[str, OldKind] | None = None,
                           required: bool = False) -> None:
    """``--<role>_args KEY=ID,K=V,...``, the one way to give a component and its options.

    Args:
        parser: the subcommand's parser.
        role: a key of :data:`ROLES` (``judge``, ``profile``, ``generator``, ``policy``).
        default: the component id used when the flag is not given (``""``: none).
        help: what the component does in this command (the form and default are added).
        required: the component must be given (``prbench rl``'s policy); help says so instead
            of showing a default. With ``old`` flags the command checks it (either form names
            it), else argparse does.
        old: the command's older flags for the same thing, still accepted with a note, by how
            their value reads: ``id`` (``ID`` or ``ID:K=V,...``; a value that is itself a
            ``K=V,...`` list gives options only), ``options`` (``K=V,...``), ``item`` (one
            ``KEY=VALUE``, repeatable), ``json`` (a JSON object), ``option:NAME`` (the value of
            option NAME). Flags are given as ``"-O/--option"`` for several spellings.
    """
    key = ROLES[role]
    form = f"{key}=ID,K=V,..." if key else "K=V,..."
    shown = f"{key}={default}" if key and default else "none"
    parser.add_argument(f"--{role}_args", default=None, metavar=form,
                        required=required and not old,
                        help=f"{help} ({'required' if required else f'default: {shown}'})")
    for flags, kind in (old or {}).items():
        parser.add_argument(*flags.split("/"), action=_OldComponentFlag, kind=kind,
                            dest=f"prbench_old_{role}", default=None, help=argparse.SUPPRESS)
    parser.set_defaults(**{f"prbench_default_{role}": default})


def kv_text(options: dict[str, Any], **first: str) -> str:
    """Options as a ``K=V,...`` list (JSON for a value that is not a string), ``first`` first.

    The inverse of :func:`prbench.options.parse_kv_string`: ``kv_text({"k": "5"},
    builder="dense")`` is ``"builder=dense,k=5"``.
    """
    import json

    items = {**{k: v for k, v in first.items() if v}, **options}
    return ",".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in items.items())


def _old_value(flag: str, kind: OldKind, value: str) -> tuple[str, dict[str, Any]]:
    """An old flag's (component id or ``""``, options)."""
    import json

    from prbench.options import OptionsError, as_mapping, parse_kv_string

    if kind == "id":
        head, _, rest = value.partition(":")
        if "=" in head:  # a K=V list (bon's old --judge K=V,...), whose values may hold ':'
            return "", parse_kv_string(value)
        return head.strip(), parse_kv_string(rest)
    if kind == "options":
        return "", parse_kv_string(value)
    if kind == "item":
        if "=" not in value:
            raise OptionsError(f"{flag} expects KEY=VALUE, got {value!r}")
        name, _, text = value.partition("=")
        return "", {name.strip(): text.strip()}
    if kind == "json":
        if not value.strip():
            return "", {}
        try:
            return "", as_mapping(json.loads(value), flag)
        except json.JSONDecodeError as exc:
            raise OptionsError(f"{flag}: invalid JSON object {value!r}: {exc}") from None
    return "", {kind.removeprefix("option:"): value}


def component_args(args: argparse.Namespace, role: str) -> tuple[str, dict[str, Any]]:
    """The component and options of ``--<role>_args`` (and of the role's old flags).

    The old flags still work and print one note naming the new form; given together with
    ``--<role>_args`` they add to it (``--profile dense --profile_args k=2`` is
    ``--profile_args builder=dense,k=2``).

    Returns:
        (component id, raw options); the id is the command's default when neither form names
        one, and ``""`` for a role without ids (``policy``) or a command whose default is none.

    Raises:
        OptionsError: a malformed list, a list that names no component, or the same thing given
            two ways with different values.
    """
    from prbench.options import OptionsError, parse_kv_string

    key = ROLES[role]
    flag = f"--{role}_args"
    text: str | None = getattr(args, f"{role}_args", None)
    options: dict[str, Any] = parse_kv_string(text) if text is not None else {}
    ident = str(options.pop(key, "")) if key else ""
    new_ident, new_options = ident, dict(options)
    words = []
    for old_flag, kind, value in getattr(args, f"prbench_old_{role}", None) or []:
        old_id, old_options = _old_value(old_flag, kind, value)
        if old_id and new_ident and old_id != new_ident:
            raise OptionsError(f"{old_flag} {old_id!r} and {flag} {key}={new_ident} name two "
                               f"components; write only {flag} {key}=ID,K=V,...")
        ident = old_id or ident  # among old flags, the last one wins (as argparse's)
        for name, v in old_options.items():
            if name in new_options and str(new_options[name]) != str(v):
                raise OptionsError(f"option {name!r} is given both in {flag} and as {old_flag}")
            options[name] = new_options.get(name, v)
        words.append(f"{old_flag} {value}")
    default = str(getattr(args, f"prbench_default_{role}", "") or "")
    if key and not ident:
        if text is not None and text.strip():
            raise OptionsError(f"{flag} {text!r} names no {key}: write {flag} {key}=ID,{text}")
        ident = default
    if words:
        given = " ".join([*words, *([f"{flag} {text}"] if text is not None else [])])
        _old_form_note(given, f"{flag} {kv_text(options, **({key: ident} if key else {}))}")
    return ident, options
