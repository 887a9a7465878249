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
    spelling of one of ``lm_eval run``'s flags is rewritten.
    """
    from prbench.commands import spellings

    known = set(lm_eval_run_parser()._option_string_actions)
    out: list[str] = []
    for arg in extra:
        flag, eq, value = arg.partition("=")
        if flag.startswith("--") and flag not in known and spellings(flag)[0] in known:
            flag = spellings(flag)[0]
        out.append(flag + eq + value)
    return out


def lm_eval_run_parser() -> argparse.ArgumentParser:
    """``lm_eval run``'s own argument parser."""
    from lm_eval._cli.harness import HarnessCLI

    return HarnessCLI()._parser._subparsers._group_actions[0].choices["run"]


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


def unknown_flag_problem(extra: Sequence[str], own_flags: Sequence[str]) -> str | None:
    """The error for flags neither ``prbench eval`` nor ``lm_eval run`` knows, with the fix.

    Checked before lm-eval parses (it would print its usage and ``unrecognized arguments`` with
    no suggestion). A prefix of one of lm-eval's flags is left to lm-eval, which accepts it.
    """
    from prbench.commands import unknown_flags_hint

    known = [o for o in lm_eval_run_parser()._option_string_actions if o.startswith("--")]
    bad = []
    for arg in extra:
        flag = arg.partition("=")[0]
        if flag.startswith("--") and len(flag) > 2 and not any(k.startswith(flag) for k in known):
            bad.append(flag)
    if not bad:
        return None
    hint = unknown_flags_hint(bad, sorted({*known, *own_flags}))
    return (f"prbench eval: unrecognized arguments: {' '.join(bad)}{hint} (see 'prbench eval "
            "--help' and 'prbench eval --lm_eval_help')")


#: ``lm_eval run`` flags that change nothing for the ``prbench`` model, and why (the scorer gets
#: the task's structured row; --apply_chat_template has its own note, from the model)
IGNORED_LM_EVAL_FLAGS: dict[str, str] = {
    "num_fewshot": "the pairs are scored zero-shot",
    "fewshot_as_multiturn": "the pairs are scored zero-shot",
    "system_instruction": "a scorer builds its own input",
    "gen_kwargs": "nothing is generated",
}


def ignored_flags_warning(ns: argparse.Namespace) -> str | None:
    """One warning naming the lm-eval flags given that the ``prbench`` model ignores, else None."""
    if getattr(ns, "model", None) != "prbench":
        return None
    given = []
    for dest, why in IGNORED_LM_EVAL_FLAGS.items():
        value = getattr(ns, dest, None)
        if value not in (None, False, 0, "", {}):
            shown = "" if value is True else f" {value if isinstance(value, str | int) else '...'}"
            given.append(f"--{dest}{shown} ({why})")
    if not given:
        return None
    return ("warning: the prbench model ignores " + ", ".join(given) + "; a scorer reads each "
            "pair from the task's rows, and its own options go in --model_args")


def other_model_problem(ns: argparse.Namespace) -> str | None:
    """An lm-eval model (``--model hf``, ...) whose ``pretrained=`` cannot load offline, else None.

    Checked before lm-eval starts: transformers would otherwise raise a 60-line ``OSError`` after
    the tasks are built.
    """
    model = getattr(ns, "model", None)
    if model in (None, "prbench"):
        return None
    args = getattr(ns, "model_args", None)
    if isinstance(args, str):
        from prbench.options import OptionsError, parse_kv_string

        try:
            args = parse_kv_string(args)
        except OptionsError:
            return None  # lm-eval says what is wrong with it
    pretrained = str((args or {}).get("pretrained", "") or "") if isinstance(args, dict) else ""
    from prbench.profiles.model_ref import hub_offline

    if not pretrained or Path(pretrained).expanduser().exists() or not hub_offline():
        return None
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(pretrained, "config.json")
    except Exception:  # not a valid hub id: lm-eval's model says so itself
        return None
    if isinstance(cached, str):
        return None
    return (
        f"--model {model} --model_args pretrained={pretrained}: not a local folder and not in "
        "the Hugging Face cache, and the hub is offline (HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE is "
        f"set): give a local model folder (pretrained=PATH) or fetch it first (`hf download "
        f"{pretrained}`); a reward model is --model prbench --model_args scorer=ID (the default)"
    )


def device_problem(ns: argparse.Namespace, extra: Sequence[str]) -> str | None:
    """``--device cuda`` (given, not lm-eval's default) on a machine without it, else None.

    Checked before anything loads, whatever the scorer: one without a ``device`` option would
    otherwise run on the CPU and exit 0 (docs/reliability.md: a device asked for is an error).
    """
    from prbench.devices import DeviceError, device_flag_given, resolve_device

    device = getattr(ns, "device", None)
    if not device or not device_flag_given(extra):
        return None
    try:
        resolve_device(str(device), option="--device")
    except DeviceError as exc:
        return str(exc)
    except ValueError as exc:
        return f"--device: {exc}"
    return None


def profile_metadata(profile_args: str | None, metadata: Any) -> dict[str, Any] | None:
    """``--profile_args builder=ID,k=N,K=V`` as the task's ``prbench_profile*`` metadata keys.

    Returns:
        The metadata to pass (the given ``--metadata`` object with the profile keys added), or
        ``None`` when ``--profile_args`` is not given.

    Raises:
        OptionsError: a list without ``builder=``, a bad option, or a profile key also set in
            ``--metadata``.
        UnknownComponentError: no such builder.
    """
    if profile_args is None:
        return None
    from prbench.commands import component_args
    from prbench.options import OptionsError

    builder, options = component_args(
        argparse.Namespace(profile_args=profile_args, prbench_default_profile=""), "profile")
    if not builder:
        raise OptionsError(f"--profile_args {profile_args!r} names no builder: write "
                           f"--profile_args builder=ID,{profile_args}")
    if isinstance(metadata, str):  # lm-eval's text form; its JSON was checked before
        metadata = json.loads(metadata) if metadata.strip() else {}
    meta = dict(metadata or {})
    # checked and typed by the builder now, before lm-eval starts (k=2 is recorded as 2)
    from prbench.options import options_to_dict
    from prbench.plugins import get_registry

    parsed = get_registry().get("profile-builder", builder).parse_options(options)
    typed = {k: v for k, v in options_to_dict(parsed).items() if k in options}
    keys: dict[str, Any] = {"prbench_profile": builder}
    if "k" in typed:
        keys["prbench_profile_k"] = typed.pop("k")
    if typed:
        keys["prbench_profile_options"] = typed
    clash = sorted(k for k in ("prbench_profile", "prbench_profile_k", "prbench_profile_options")
                   if k in meta)
    if clash:
        raise OptionsError(f"--profile_args and --metadata both set the profile ({', '.join(clash)}"
                           "): give it once, with --profile_args builder=ID,K=V")
    return {**meta, **keys}
