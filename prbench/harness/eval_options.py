"""The options of an evaluation run, each read once into its typed value and checked early.

``prbench eval`` declares the lm-eval flags it takes (:mod:`prbench.commands.eval`); this module
owns how their values are read: ``--model_args`` (one or more, ``key=value`` text or a JSON
object) into one mapping with every key once (:func:`read_model_args`), ``--seed``
(:func:`parse_seed`), ``--limit`` (:func:`parse_limit`, :func:`limit_note`), ``--metadata``
(:func:`read_metadata`), ``--profile_args`` (:func:`profile_metadata`), the requested tasks
(:func:`requested_tasks`, :func:`misspelt_task`). The same readers check a plain ``lm_eval``
command line (:mod:`prbench.harness.lm_eval_compat`). Nothing here imports lm-eval.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prbench.options import OptionsError, parse_kv_string

#: Why lm-eval's ``--use_cache`` is not taken (one ``error:`` line).
USE_CACHE_REFUSED = (
    "--use_cache is refused: lm-eval's response cache stores pickles, and reading a tampered "
    "cache file runs its code; prbench's own score cache already keeps every score safely "
    "(SQLite, no pickles; runtime option cache=true by default, cache_path=FILE to choose the "
    "file, e.g. --model_args scorer=length,cache_path=scores.sqlite)"
)


def unquoted(text: str) -> str:
    """A ``key=value`` value as text: stripped, one pair of surrounding quotes removed."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _cut(value: str, most: int = 80) -> str:
    return value if len(value) <= most else value[: most - 1] + "…"


def _json_object(text: str, flag: str) -> list[tuple[str, Any]]:
    """A JSON object's items in order; a key twice in any object of it is an error."""

    def pairs_hook(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise OptionsError(f"{flag}: {key!r} is given twice ({key}={out[key]} and "
                                   f"{key}={value}); give {key} once")
            out[key] = value
        return out

    try:
        parsed = json.loads(text, object_pairs_hook=pairs_hook)
    except json.JSONDecodeError as exc:
        raise OptionsError(
            f"{flag}: invalid JSON at line {exc.lineno} column {exc.colno} (character {exc.pos}): "
            f"{exc.msg}, in {_cut(text)!r}; JSON needs double quotes around keys and strings"
        ) from None
    if not isinstance(parsed, dict):
        kind = "array" if isinstance(parsed, list) else type(parsed).__name__
        raise OptionsError(f"{flag} must be a JSON object ({{\"key\": value, ...}}) or key=value "
                           f"pairs, got a JSON {kind}: {_cut(text)!r}")
    return [(str(k), v) for k, v in parsed.items()]


def read_model_args(texts: Sequence[str] | str | None, flag: str = "--model_args"
                    ) -> dict[str, Any]:
    """Every ``--model_args`` value as one mapping, each key given once.

    A value is a JSON object (its values keep their JSON types) or ``key=value,...`` text (each
    value the user's text, one pair of surrounding quotes removed; the option's declared type
    reads it later). A key given twice, in one value or across flags, is an error naming both
    values: lm-eval would keep the last without a word.

    Raises:
        OptionsError: a key twice, malformed JSON, a JSON value that is not an object, or an
            item without ``=``.
    """
    if texts is None:
        return {}
    out: dict[str, Any] = {}
    for text in [texts] if isinstance(texts, str) else texts:
        stripped = str(text).strip()
        if stripped.startswith(("{", "[")):
            items = _json_object(stripped, flag)
        else:
            items = [(k, unquoted(v)) for k, v in parse_kv_string(stripped).items()]
        for key, value in items:
            if key in out:
                raise OptionsError(
                    f"{flag}: {key!r} is given twice ({key}={out[key]} and {key}={value}); "
                    f"give {key} once")
            out[key] = value
    return out


def json_flag_problem(argv: Sequence[str], flags: Sequence[str]) -> str | None:
    """A one-line error for a ``flags`` value in ``argv`` that starts like JSON but is not an
    object, else ``None`` (lm-eval raises a bare ``ValueError: Invalid JSON`` naming no flag).
    """  # noqa: D205
    args = list(argv)
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag not in flags:
            continue
        value = value if eq else (args[i + 1] if i + 1 < len(args) else "")
        if value.lstrip().startswith(("{", "[")):
            try:
                _json_object(value.strip(), flag)
            except OptionsError as exc:
                return str(exc)
    return None


def read_metadata(text: Sequence[str] | str | None) -> dict[str, Any]:
    """``--metadata``: a JSON object (or ``key=value`` text), each key once.

    Raises:
        OptionsError: as :func:`read_model_args`.
    """
    return read_model_args(text or [], flag="--metadata")


def parse_seed(text: str) -> tuple[int | None, int | None, int | None, int | None]:
    """``--seed``: one integer for all four seeds lm-eval sets, or four comma-separated.

    The four are Python's ``random``, numpy, torch and the few-shot sampler; ``None`` (the word)
    leaves that seed unset. One integer sets Python's and keeps lm-eval's defaults (1234) for
    the other three, as ``lm_eval --seed N`` does.

    Raises:
        argparse.ArgumentTypeError: not an integer (or ``None``), or not one or four values.
    """
    parts = [p.strip() for p in str(text).split(",")]

    def one(part: str) -> int | None:
        if part.lower() == "none":
            return None
        try:
            return int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer, or four comma-separated integers or None (python,numpy,"
                f"torch,fewshot), got {text!r}") from None

    if len(parts) == 1:
        return one(parts[0]), 1234, 1234, 1234
    if len(parts) != 4:
        raise argparse.ArgumentTypeError(
            f"expected one integer or four comma-separated values (python,numpy,torch,fewshot), "
            f"got {len(parts)}: {text!r}")
    a, b, c, d = (one(p) for p in parts)
    return a, b, c, d


def parse_limit(text: str) -> float:
    """``--limit``: pairs per task (a whole number ≥ 1) or a fraction of them (0 < x < 1).

    Raises:
        argparse.ArgumentTypeError: not a number, not above 0, or a non-whole number above 1.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of pairs per task (e.g. 10) or a fraction of them (e.g. 0.5), "
            f"got {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(
            f"{text} leaves no pair to evaluate: give a number of pairs per task (e.g. 10) or a "
            "fraction of them (e.g. 0.5), or leave --limit out")
    if value > 1 and value != int(value):
        raise argparse.ArgumentTypeError(
            f"{text}: above 1 it is a number of pairs and must be whole (e.g. 10)")
    return value


def limit_note(limit: float, n_pairs: int | None = None) -> str | None:
    """The one line said of a run under ``--limit``; ``None`` when it took every pair.

    Args:
        limit: ``--limit`` as given.
        n_pairs: the fewest pairs of any requested task, where known: a limit at or above it
            evaluates every pair, and nothing is said.
    """
    if n_pairs is not None and limit >= 1 and limit >= n_pairs:
        return None
    if limit >= 1:
        shown = f"{limit:g} pair{'' if limit == 1 else 's'} per task"
    else:
        shown = f"{limit:.0%} of each task's pairs"
    verb = "is" if limit == 1 else "are"
    return (f"--limit {limit:g}: only {shown} {verb} evaluated; the numbers are not benchmark "
            "results (for a quick check, not for a table)")


def requested_tasks(tasks: Sequence[str] | str | None) -> list[str]:
    """``--tasks`` values split into names (commas and separate words alike)."""
    items = [tasks] if isinstance(tasks, str) else list(tasks or [])
    return [t.strip() for item in items for t in str(item).split(",") if t.strip()]


def prbench_groups(names: set[str]) -> list[str]:
    """The benchmark groups among task ``names`` (not the per-domain tasks), sorted."""
    from prbench.records import DOMAINS

    slugs = [d.lower() for d in DOMAINS]
    return sorted(n for n in names if n.startswith("personalized_rewardbench")
                  and not any(d in n for d in slugs))


def misspelt_task(requested: Sequence[str], names: set[str]) -> str | None:
    """An error for a requested name that looks like a misspelt prbench task, else None.

    A name close to a prbench task (or starting with ``personalized_rewardbench``) that matches
    none is almost surely a typo; anything else is left to lm-eval's own index.
    """
    from prbench.options import suggest

    for item in requested:
        if item.endswith(".yaml") or Path(item).exists() or fnmatch.filter(sorted(names), item):
            continue
        hint = suggest(item, names)
        if hint or item.startswith("personalized_rewardbench"):
            groups = ", ".join(prbench_groups(names))
            return f"unknown task {item!r}{hint}; prbench's groups: {groups}"
    return None


def unknown_task(requested: Sequence[str], names: set[str]) -> str | None:
    """``prbench eval``: the first requested name no task folder defines, as one error."""
    from prbench.options import suggest

    for item in requested:
        if not fnmatch.filter(sorted(names), item):
            return (f"unknown task {item!r}{suggest(item, names)}; prbench's groups: "
                    f"{', '.join(prbench_groups(names))} (a task of your own: --include_path DIR; "
                    "lm-eval's own tasks are not reward-model tasks: run them with lm_eval)")
    return None


def other_model_problem(model: str, model_args: Mapping[str, Any]) -> str | None:
    """An lm-eval model (``--model hf``) whose ``pretrained=`` cannot load offline, else None.

    Checked before lm-eval starts: transformers would otherwise raise a 60-line ``OSError``
    after the tasks are built.
    """
    pretrained = str(model_args.get("pretrained", "") or "")
    from prbench.model_ref import hub_offline

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


def reserved_metadata_keys(metadata: Mapping[str, Any]) -> list[str]:
    """Task-fixed ``prbench_`` keys given in ``--metadata`` (lm-eval would crash on them)."""
    from prbench.harness.task_options import TASK_DEFAULT_KEYS, TASK_KEYS

    return [k for k in (*TASK_KEYS, *TASK_DEFAULT_KEYS) if k in metadata]


def profile_metadata(profile_args: str | None, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``--profile_args builder=ID,k=N,K=V`` as the tasks' ``prbench_profile*`` metadata keys.

    Returns:
        ``metadata`` with the profile keys added (unchanged without ``--profile_args``).

    Raises:
        OptionsError: a list without ``builder=``, a bad option, or a profile key also set in
            ``--metadata``.
        UnknownComponentError: no such builder.
    """
    if profile_args is None:
        return dict(metadata)
    from prbench.options import options_to_dict
    from prbench.plugins import get_registry

    options = read_model_args(profile_args, flag="--profile_args")
    builder = str(options.pop("builder", "") or "")
    if not builder:
        raise OptionsError(f"--profile_args {profile_args!r} names no builder: write "
                           f"--profile_args builder=ID,{profile_args}")
    parsed = get_registry().get("profile-builder", builder).parse_options(options)
    typed = {k: v for k, v in options_to_dict(parsed).items() if k in options}
    keys: dict[str, Any] = {"prbench_profile": builder}
    if "k" in typed:
        keys["prbench_profile_k"] = typed.pop("k")
    if typed:
        keys["prbench_profile_options"] = typed
    clash = sorted(k for k in keys if k in metadata) or sorted(
        k for k in ("prbench_profile", "prbench_profile_k", "prbench_profile_options")
        if k in metadata)
    if clash:
        raise OptionsError(f"--profile_args and --metadata both set the profile ({', '.join(clash)}"
                           "): give it once, with --profile_args builder=ID,K=V")
    return {**metadata, **keys}


# -- a plain ``lm_eval`` command line, read by prbench ----------------------------------------


def running_lm_eval_cli() -> bool:
    """True in a process started as the ``lm_eval`` command (or ``python -m lm_eval``)."""
    first = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if first is None:
        return False
    return first.name in ("lm_eval", "lm-eval") or (
        first.name == "__main__.py" and first.parent.name == "lm_eval")


#: ``lm_eval run``'s long flags (lm-eval 0.4.13; tests/test_lm_eval_compat.py pins them against
#: its parser): what an abbreviation on a plain ``lm_eval`` command line stands for
LM_EVAL_RUN_FLAGS = (
    "--config", "--tasks", "--model", "--model_args", "--apply_chat_template", "--limit",
    "--use_cache", "--num_fewshot", "--batch_size", "--max_batch_size", "--device",
    "--output_path", "--log_samples", "--samples", "--cache_requests", "--check_integrity",
    "--system_instruction", "--fewshot_as_multiturn", "--include_path", "--verbosity",
    "--write_out", "--show_config", "--predict_only", "--seed", "--gen_kwargs",
    "--wandb_args", "--wandb_config_args", "--trackio_args", "--hf_hub_log_args",
    "--metadata", "--trust_remote_code", "--confirm_run_unsafe_code",
)


def _flag(arg: str) -> str:
    """A long flag as argparse reads it: an unambiguous prefix of an lm-eval flag expanded."""
    if not arg.startswith("--") or arg in LM_EVAL_RUN_FLAGS:
        return arg
    matches = [f for f in LM_EVAL_RUN_FLAGS if f.startswith(arg)]
    return matches[0] if len(matches) == 1 else arg


def argv_values(argv: Sequence[str], *flags: str) -> list[str]:
    """The values of ``flags`` in ``argv`` (``--flag V``, ``--flag=V``, abbreviations), in order.

    A flag followed by several values (``--model_args a=1 b=2``) gives each.
    """
    args = list(argv)
    out: list[str] = []
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if _flag(name) not in flags:
            continue
        if eq:
            out.append(value)
            continue
        for nxt in args[i + 1:]:
            if nxt.startswith("-") and nxt != "-":
                break
            out.append(nxt)
    return out


def argv_given(argv: Sequence[str], *flags: str) -> bool:
    """Whether any of ``flags`` is on the command line (abbreviations too)."""
    return any(_flag(a.partition("=")[0]) in flags for a in argv)


def json_flag_argv(argv: Sequence[str]) -> list[str]:
    """A plain ``lm_eval`` command line with its ``--model_args`` and ``--metadata`` as JSON.

    lm-eval types each ``key=value`` value itself (``00123456`` becomes 123456), splits on commas
    inside quotes its own way, keeps the last of a key given twice, and raises ``Invalid JSON``
    for a value holding ``{`` (``user_format={question}``). Each of the two flags is read here
    by prbench's reader instead (:func:`read_model_args`: every flag's values, each key once)
    and handed to lm-eval as one JSON object, which lm-eval takes as it is: every value the
    user's text, or the JSON value given.

    Raises:
        OptionsError: a key given twice, or a value that does not read.
    """
    groups = {"--model_args": ("--model_args", "-a"), "--metadata": ("--metadata",)}
    out: list[str] = []
    args = list(argv)
    done: set[str] = set()
    i = 0
    while i < len(args):
        name, eq, _value = args[i].partition("=")
        flag = next((g for g, names in groups.items() if _flag(name) in names), None)
        if flag is None:
            out.append(args[i])
            i += 1
            continue
        n = 1
        if not eq:
            while i + n < len(args) and (not args[i + n].startswith("-") or args[i + n] == "-"):
                n += 1
        i += n
        if flag not in done:
            done.add(flag)
            given = read_model_args(argv_values(argv, *groups[flag]), flag=flag)
            out += [flag, json.dumps(given, ensure_ascii=False)]
    return out


__all__ = [
    "LM_EVAL_RUN_FLAGS",
    "USE_CACHE_REFUSED",
    "argv_given",
    "argv_values",
    "json_flag_argv",
    "json_flag_problem",
    "limit_note",
    "misspelt_task",
    "other_model_problem",
    "parse_limit",
    "parse_seed",
    "prbench_groups",
    "profile_metadata",
    "read_metadata",
    "read_model_args",
    "requested_tasks",
    "reserved_metadata_keys",
    "running_lm_eval_cli",
    "unknown_task",
    "unquoted",
]
