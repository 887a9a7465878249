"""Run the benchmark through lm-eval; every `lm_eval run` flag passes through.

Examples:
  prbench eval --tasks personalized_rewardbench_sample --model_args scorer=embedding-similarity
  prbench eval --tasks personalized_rewardbench_sample_noprofile --output_path results
  prbench eval --lm_eval_help                # lm-eval's own flags

Before lm-eval starts, prbench loads its plugins (also --plugin FILE) with their task folders and
registers the `prbench` model (the default --model here). When every requested task is a prbench
task, lm-eval's ~14.7k built-in tasks are not indexed (that costs seconds at every start). The
results table is prbench's summary: per-domain accuracy with 95% bootstrap intervals (the method
named under it), ties, the length baseline and micro/macro overall accuracy (lm-eval's own tables
with --show_lm_eval_tables; its INFO log lines with --verbosity INFO). With --output_path,
prbench_manifest_<date>.json (versions, scorer and options, profile condition, data hashes, seeds)
is written next to lm-eval's results_<date>.json, in the folder prbench-<scorer>.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prbench.commands import positive_int
from prbench.commands.eval_args import (
    argument_problem,
    device_problem,
    groups_hint,
    ignored_flags_warning,
    lm_eval_argv,
    lm_eval_namespace,
    misspelt_task,
    only_prbench_tasks,
    other_model_problem,
    profile_metadata,
    requested_tasks,
    reserved_metadata_keys,
    unknown_flag_problem,
    verbosity_shown,
)
from prbench.commands.eval_output import capture_lm_eval

#: ``prbench.cli`` passes the arguments it does not know (lm-eval's) in ``args.extra_args``
ACCEPTS_EXTRA_ARGS = True



def _fraction(text: str) -> float:
    """The type of a fraction option: a number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {value:g}")
    return value


#: Default of ``--max_invalid``: the share of pairs without a verdict a run may have and exit 0.
DEFAULT_MAX_INVALID = 0.1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``prbench eval`` (lm-eval's own flags are passed through unchanged).

    ``--tasks`` and ``--model_args`` are lm-eval's flags; they are declared here too so that
    ``--help`` lists them, and :func:`~prbench.commands.eval_args.lm_eval_argv` hands them on to
    lm-eval as given.
    """
    from prbench.analysis.metrics import DEFAULT_RESAMPLES

    parser.add_argument(
        "--tasks", metavar="TASK,...",
        help="the tasks or groups to run, comma-separated, e.g. personalized_rewardbench_sample "
        "(required; lm-eval's flag)",
    )
    parser.add_argument(
        "--model_args", metavar="scorer=ID,K=V,...",
        help="the scorer and its options, e.g. scorer=hf-classifier,pretrained=PATH (`prbench "
        "scorers --options` lists them; runtime options cache=, cache_path=, chunk_size= work "
        "too; lm-eval's flag) (default: scorer=embedding-similarity, the prbench model's "
        "DEFAULT_SCORER)",
    )
    parser.add_argument(
        "--profile_args", metavar="builder=ID,K=V,...",
        help="the profile builder of the tasks' profile condition and its options, e.g. "
        "builder=bm25,k=3 (the --metadata keys prbench_profile, prbench_profile_k and "
        "prbench_profile_options) (default: the task's, builder=dense,k=5; the _noprofile tasks "
        "build none)",
    )
    parser.add_argument(
        "--lm_eval_help", action="store_true", help="show the lm-eval flags this command accepts"
    )
    parser.add_argument(
        "--index_lm_eval_tasks",
        action="store_true",
        help="index lm-eval's built-in tasks even when only prbench tasks are requested",
    )
    parser.add_argument("--no_summary", action="store_true", help="do not print prbench's summary")
    parser.add_argument(
        "--show_lm_eval_tables", action="store_true",
        help="also print lm-eval's own results tables (prbench's summary is the results table)",
    )
    parser.add_argument(
        "--bootstrap_resamples", type=positive_int, default=DEFAULT_RESAMPLES, metavar="N",
        help="bootstrap resamples of the summary's confidence intervals",
    )
    parser.add_argument(
        "--bootstrap_seed", type=int, default=0, metavar="SEED",
        help="seed of the summary's bootstrap",
    )
    parser.add_argument(
        "--max_invalid", type=_fraction, default=DEFAULT_MAX_INVALID, metavar="FRACTION",
        help="exit 1 (results still written) when more than this share of pairs got no verdict, "
        "e.g. unreadable judge replies (1 never fails)",
    )
    parser.epilog = textwrap.fill(
        "Every other flag goes to `lm_eval run` unchanged (--tasks, --model_args, --limit, "
        "--output_path, --log_samples, --metadata, --verbosity, ...; not --use_cache: prbench's "
        "own score cache does its job); see --lm_eval_help. lm-eval's log lines below WARNING "
        "are shown with --verbosity INFO.", width=79,
    )


def _changed_options(registry: Any, scorer: dict[str, Any]) -> dict[str, Any]:
    """The scorer's options that differ from their defaults (for the summary's title line)."""
    import dataclasses

    try:
        cls = registry.get("scorer", scorer["qualified_id"]).options
    except Exception:
        return dict(scorer.get("options") or {})
    defaults = {}
    for f in dataclasses.fields(cls) if cls is not None else ():
        if f.default is not dataclasses.MISSING:
            defaults[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            defaults[f.name] = f.default_factory()
    defaults = json.loads(json.dumps(defaults, default=str))  # as recorded (tuples -> lists)
    return {k: v for k, v in (scorer.get("options") or {}).items()
            if k not in defaults or defaults[k] != v}


def run(args: argparse.Namespace) -> int:
    """Run lm-eval with prbench's plugins, print the summary and write the manifest."""
    from prbench.errors import PrbenchUserError, one_line
    from prbench.harness.lm_eval_args import (
        USE_CACHE_REFUSED,
        json_flag_problem,
        model_args_problem,
        restore_option_text,
    )
    from prbench.plugins import get_registry

    expected = PrbenchUserError
    registry = get_registry(getattr(args, "plugin", None) or ())
    from prbench.harness import bridge, lm_eval_messages

    lm_eval_messages.warn_troubled_plugins()  # one line per failed or partial plugin

    from lm_eval.utils import setup_logging

    extra = lm_eval_argv(args)
    args.extra_args = extra
    verbose = verbosity_shown(extra)
    setup_logging(logging.DEBUG if verbose == "DEBUG" else logging.INFO if verbose
                  else logging.WARNING)
    problem = json_flag_problem(extra) or model_args_problem(extra)
    if problem:  # lm-eval would raise a bare ValueError naming no flag, or keep the last key
        print(f"error: {problem}", file=sys.stderr)
        return 1
    own_parser = getattr(args, "_parser", None)
    problem = unknown_flag_problem(extra, own_parser.flags() if own_parser is not None else ())
    if problem:  # lm-eval would print its usage, without a suggestion
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        ns = lm_eval_namespace(extra, show_help=args.lm_eval_help)
    except SystemExit as exc:  # --help, or an argparse error already printed
        return int(exc.code or 0)
    if not getattr(ns, "config", None):  # a --config YAML sets these itself
        if ns.model is None:
            ns.model = "prbench"
        if ns.model == "prbench" and not hasattr(ns, "batch_size"):
            ns.batch_size = "auto"  # the scorer's own default, not lm-eval's 1
        problem = (argument_problem(ns, tasks_hint=groups_hint) or other_model_problem(ns)
                   or device_problem(ns, extra)
                   or lm_eval_messages.model_args_problem_early(extra, model=ns.model))
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 1

    # the user's text back where lm-eval typed it; each option's declared type decides
    if ns.model == "prbench" and isinstance(getattr(ns, "model_args", None), dict):
        ns.model_args = restore_option_text(ns.model_args, extra)
    if isinstance(getattr(ns, "metadata", None), dict):
        ns.metadata = restore_option_text(ns.metadata, extra, flags=("metadata",))

    try:
        with_profile = profile_metadata(args.profile_args, getattr(ns, "metadata", None))
    except expected as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 1
    if with_profile is not None:
        ns.metadata = with_profile
        args.extra_args = [*extra, "--profile_args", args.profile_args]  # for the manifest
    warning = ignored_flags_warning(ns)
    if warning:
        print(warning, file=sys.stderr)

    reserved = reserved_metadata_keys(getattr(ns, "metadata", None))
    if reserved:
        print(
            f"error: --metadata sets {', '.join(reserved)}, which the task YAMLs fix; choose the "
            "domain and condition by task name (e.g. personalized_rewardbench_sample_noprofile)",
            file=sys.stderr,
        )
        return 1

    if getattr(ns, "use_cache", None):
        print(f"error: {USE_CACHE_REFUSED}", file=sys.stderr)  # a pickle cache: never
        return 1
    try:
        check_lm_eval_output(getattr(ns, "output_path", None))
    except expected as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 1

    from prbench.harness import tasks

    dirs = tasks.task_dirs()
    lm_eval_messages.warn_unreadable_task_files(dirs)  # lm-eval would skip them without a word
    own = [*dirs, *([ns.include_path] if getattr(ns, "include_path", None) else [])]
    own_names = tasks.task_names(own)
    typo = misspelt_task(requested_tasks(ns.tasks), own_names)
    if typo:
        print(f"error: {typo}", file=sys.stderr)
        return 1
    skip_defaults = not args.index_lm_eval_tasks and only_prbench_tasks(
        requested_tasks(ns.tasks), own_names
    )
    bridge.configure(include_defaults=False if skip_defaults else None, extra_dirs=tuple(dirs))
    bridge.install()
    # lm-eval's hint to pass task kwargs through --metadata: never for prbench's tasks here
    lm_eval_messages.quiet_metadata_hint(
        metadata_given=bool(getattr(ns, "metadata", None)) or not verbose)
    # a new run in this process (a sweep's --reuse_model, tests, notebooks): nothing of an
    # earlier run carries over, least of all profiles marked "not built" for a scorer that did
    # not read them (the next scorer would see them empty)
    tasks.reset()
    try:
        with capture_lm_eval(tables=args.show_lm_eval_tables) as captured, \
                lm_eval_messages.reworded_limit_warning(getattr(ns, "limit", None)):
            ns.func(ns)
    except expected as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 1
    except ValueError as exc:  # lm-eval's own argument checks, with the fix added
        fixed = lm_eval_messages.lm_eval_error_fix(exc)
        if fixed is None:
            raise
        print(f"error: {fixed}", file=sys.stderr)
        return 1
    except OSError as exc:  # an lm-eval model's files (--model hf, ...) that cannot be had
        if ns.model == "prbench":
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"error: --model {ns.model} could not load its model: {first}", file=sys.stderr)
        return 1
    finally:
        bridge.configure()
    results = captured.get("results")
    if results is None:  # not rank 0 of a multi-process run, or nothing evaluated
        return 0
    sections = _report(args, results, captured, registry,
                       length_baseline=not getattr(ns, "samples", None),
                       limit=getattr(ns, "limit", None))
    return invalid_exit_code(sections, args.max_invalid, causes=failure_causes(results))


def check_lm_eval_output(output_path: str | None) -> None:
    """Check lm-eval's ``--output_path`` before anything runs (lm-eval writes there at the end).

    A path ending in ``.json`` names the results file (lm-eval writes ``<stem>_<date>.json``
    beside it); anything else is the folder that gets ``prbench-<scorer>/``.

    Raises:
        OutputPathError: not creatable, not writable, or a file where a folder is needed.
    """
    from prbench.outputs import check_output_dir, check_output_file

    if not output_path:
        return
    if Path(output_path).suffix == ".json":
        check_output_file(output_path, flag="--output_path")
    else:
        check_output_dir(output_path, flag="--output_path")


def failure_causes(results: dict[str, Any], most: int = 3) -> str:
    """The scorer's failures by reason, each with its first detail, for the ``error:`` line.

    Reads the ``failures`` list (``reason``, ``detail``) that ``served-rm`` and the LLM judges
    keep in their stats (the manifest's ``scorer.stats``); ``""`` where there is none.
    """
    info = ((results.get("config") or {}).get("prbench") or {}).get("scorer") or {}
    failures = (info.get("stats") or {}).get("failures") if isinstance(info, dict) else None
    if not isinstance(failures, list):
        return ""
    first: dict[str, str] = {}
    count: dict[str, int] = {}
    for f in failures:
        if not isinstance(f, dict):
            continue
        reason = str(f.get("reason") or "unknown")
        count[reason] = count.get(reason, 0) + 1
        first.setdefault(reason, " ".join(str(f.get("detail") or "").split())[:240])
    parts = [f"{reason} x{n}" + (f" ({first[reason]})" if first[reason] else "")
             for reason, n in sorted(count.items(), key=lambda kv: -kv[1])[:most]]
    if len(count) > most:
        parts.append(f"{len(count) - most} other reason(s)")
    return "; ".join(parts)


def invalid_exit_code(sections: Sequence[Any], max_invalid: float, causes: str = "") -> int:
    """1 (with one ``error:`` line) when the share of pairs without a verdict exceeds the limit.

    Pairs without a verdict (a judge reply that could not be had or read, a non-finite reward)
    are counted wrong in every accuracy and listed in the manifest; the run's results are written
    either way. Only the exit code tells a script that too many were lost. ``causes`` (see
    :func:`failure_causes`) names the reasons on the line itself.
    """
    n = sum(r.n for s in sections for r in s.rows)
    invalid = sum(r.invalid for s in sections for r in s.rows)
    if n and invalid / n > max_invalid:
        why = f"; causes: {causes}" if causes else ""
        print(
            f"error: {invalid} of {n} pairs ({invalid / n:.1%}) got no verdict, more than "
            f"--max_invalid {max_invalid:g}{why}; the results and manifest are written (the "
            "failures and their reasons are in the manifest). Pass --max_invalid 1 to accept "
            "this.",
            file=sys.stderr,
        )
        return 1
    return 0


def _report(
    args: argparse.Namespace,
    results: dict[str, Any],
    captured: dict[str, Any],
    registry: Any,
    *,
    length_baseline: bool,
    limit: float | None = None,
) -> list[Any]:
    from prbench.harness import manifest, profile_rows, summary

    sections = summary.summarize(
        results, resamples=args.bootstrap_resamples, seed=args.bootstrap_seed,
        length_baseline=length_baseline,
    )
    info = (results.get("config") or {}).get("prbench") or {}
    scorer = dict(info.get("scorer") or {})
    if scorer:
        scorer["changed_options"] = _changed_options(registry, scorer)
    if sections and not args.no_summary:
        print()
        print(summary.format_sections(sections, scorer=scorer or None, limit=limit))
    argv = [
        "prbench", *(f"--plugin={p}" for p in getattr(args, "plugin", None) or ()), "eval",
        *(getattr(args, "extra_args", None) or []),
    ]
    written = manifest.write_run_manifest(
        results, captured, argv=argv, sections=sections, plugins=registry.provenance(),
        data=list(profile_rows.PROVENANCE),
    )
    if written is None:
        return sections
    path, manifest_file = written
    print(f"\nresults: {path}\nmanifest: {manifest_file}")
    for sample_file in samples_files(path, captured.get("date_id")):
        print(f"samples: {sample_file}")
    return sections


def samples_files(results_path: Path, date_id: Any) -> list[Path]:
    """The per-task samples files lm-eval wrote next to ``results_path`` in this run."""
    if not date_id:
        return []
    return sorted(results_path.parent.glob(f"samples_*_{date_id}.jsonl"))


