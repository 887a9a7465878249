"""Run the benchmark: lm-eval's tasks scored by a prbench scorer, on lm-eval's public API.

Examples:
  prbench eval --tasks personalized_rewardbench_sample --model_args scorer=embedding-similarity
  prbench eval --tasks personalized_rewardbench_sample_noprofile --output_path results
  prbench eval --tasks personalized_rewardbench_sample --model_args scorer=length --limit 5

Each option is read once into its typed value and checked, with the scorer's options, the
device, the output folder and the task names, before any model loads or data is read; then the
scorer is built and lm-eval's ``simple_evaluate`` runs prbench's tasks (only the task folders of
prbench, its plugins and --include_path are indexed, not lm-eval's ~14.7k built-in tasks). The
results table is prbench's summary: per-domain accuracy with 95% bootstrap intervals (the
method named under it), ties, the length baseline and micro/macro overall accuracy. With
--output_path, lm-eval's results_<date>.json (and samples_<task>_<date>.jsonl with --log_samples)
and prbench_manifest_<date>.json (versions, scorer and options, profile condition, data hashes,
seeds) are written in the folder prbench-<scorer>. The lm-eval flags this command takes are
declared below; plain `lm_eval --model prbench` takes every lm-eval flag.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prbench.commands import positive_int

#: ``prbench.cli`` passes the arguments it does not know in ``args.extra_args``: each is an error
#: naming it (:func:`undeclared_flags_problem`)
ACCEPTS_EXTRA_ARGS = True
OUTPUTS: dict[str, str] = {}  # --output_path is checked in run() (a .json path names a file)


def _fraction(text: str) -> float:
    """The type of a fraction option: a number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {value:g}")
    return value


def _seed(text: str) -> tuple[int | None, ...]:
    from prbench.harness.eval_options import parse_seed

    return parse_seed(text)


def _limit(text: str) -> float:
    from prbench.harness.eval_options import parse_limit

    return parse_limit(text)


#: Default of ``--max_invalid``: the share of pairs without a verdict a run may have and exit 0.
DEFAULT_MAX_INVALID = 0.1

#: lm-eval flags ``prbench eval`` does not take, and why (said in the error that names one)
NOT_TAKEN: dict[str, str] = {
    "--num_fewshot": "the pairs are scored zero-shot",
    "--fewshot_as_multiturn": "the pairs are scored zero-shot",
    "--system_instruction": "a scorer builds its own input",
    "--apply_chat_template": "a chat reward model always applies its own chat template",
    "--gen_kwargs": "nothing is generated",
    "--use_cache": "refused: lm-eval's cache stores pickles, and reading a tampered one runs "
                   "its code; prbench's score cache does its job: --model_args "
                   "...,cache_path=FILE",
    "--cache_requests": "prbench's score and profile caches do its job",
    "--predict_only": "a reward model's scores are its predictions",
    "--check_integrity": "prbench's task tests are in its test suite",
    "--config": "each option is a flag here",
    "--samples": "use --limit",
    "--trust_remote_code": "give it to the scorer: --model_args trust_remote_code=true",
    "--confirm_run_unsafe_code": "prbench's tasks run no code",
    "--trackio_args": "not supported by prbench eval",
    "--wandb_config_args": "not supported by prbench eval",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``prbench eval``: the lm-eval flags it takes, typed, and prbench's own."""
    from prbench.metrics import DEFAULT_RESAMPLES

    lm = parser.add_argument_group("lm-eval's flags (as lm_eval run reads them)")
    lm.add_argument(
        "--tasks", "-t", nargs="+", metavar="TASK",
        help="the tasks or groups to run, comma- or space-separated, e.g. "
        "personalized_rewardbench_sample (required)",
    )
    lm.add_argument(
        "--model", "-M", default="prbench", metavar="MODEL",
        help="prbench (a prbench scorer, chosen in --model_args), or one of lm-eval's models "
        "(e.g. hf: a likelihood baseline on the same pairs, built by lm-eval from --model_args)",
    )
    lm.add_argument(
        "--model_args", "-a", action="extend", nargs="+", metavar="scorer=ID,K=V,...",
        help="the scorer and its options, as key=value text or a JSON object; repeatable, each "
        "key once (e.g. scorer=hf-classifier,pretrained=PATH; `prbench scorers --options` lists "
        "them; runtime options cache=, cache_path=, chunk_size= work too) (default: "
        "scorer=embedding-similarity)",
    )
    lm.add_argument("--limit", "-L", type=_limit, metavar="N",
                    help="only the first N pairs of each task (or a fraction below 1): a quick "
                    "check, not a benchmark result")
    lm.add_argument("--output_path", "-o",
                    help="write lm-eval's results file and prbench's manifest under "
                    "DIR/prbench-<scorer>/ (a path ending in .json names the results file)")
    lm.add_argument("--log_samples", "-s", action="store_true",
                    help="also write each pair's scores and record (samples_<task>_<date>.jsonl; "
                    "needs --output_path)")
    lm.add_argument("--write_out", "-w", action="store_true",
                    help="print what the scorer gets for the first pair of each task")
    lm.add_argument("--seed", type=_seed, metavar="SEED",
                    help="the seeds lm-eval sets: one integer (Python's random; numpy, torch and "
                    "few-shot keep 1234) or four separated by commas (default: "
                    "0,1234,1234,1234)")
    lm.add_argument("--device", metavar="DEVICE",
                    help="where the scorer runs (cpu, cuda, cuda:N, mps, auto); a device the "
                    "machine lacks is an error (default: the scorer's own)")
    lm.add_argument("--batch_size", "-b", metavar="N|auto",
                    help="the scorer's batch size (auto: the scorer's default)")
    lm.add_argument("--max_batch_size", type=positive_int, metavar="N",
                    help="the scorer's max_batch_size option, where it has one")
    lm.add_argument("--include_path", metavar="DIR",
                    help="a folder of your own task YAMLs, indexed beside prbench's")
    lm.add_argument("--metadata", action="extend", nargs="+", metavar="JSON",
                    help="keys for the tasks, a JSON object or key=value text, each key once "
                    "(e.g. '{\"prbench_data\": \"DIR\"}')")
    lm.add_argument("--verbosity", "-v", type=str.upper, metavar="LEVEL",
                    choices=("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG"),
                    help="lm-eval's log level (default WARNING; INFO shows its log lines)")
    lm.add_argument("--show_config", action="store_true",
                    help="print the whole results dict (every task's config) at the end")
    lm.add_argument("--hf_hub_log_args", metavar="K=V,...",
                    help="lm-eval's tracker arguments, e.g. hub_results_org=ORG,"
                    "push_results_to_hub=True (HF_TOKEN from the environment)")
    lm.add_argument("--wandb_args", metavar="K=V,...",
                    help="log the run to Weights & Biases (wandb.init arguments, e.g. "
                    "project=prbench); needs the wandb package")
    parser.add_argument(
        "--profile_args", metavar="builder=ID,K=V,...",
        help="the profile builder of the tasks' profile condition and its options, e.g. "
        "builder=bm25,k=3 (the --metadata keys prbench_profile, prbench_profile_k and "
        "prbench_profile_options) (default: the task's, builder=dense,k=5; the _noprofile tasks "
        "build none)",
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
    parser.epilog = ("An lm-eval flag not listed here is refused with the reason; plain "
                     "`lm_eval --model prbench` takes every lm-eval flag.")


def undeclared_flags_problem(extra: Sequence[str], known: Sequence[str]) -> str | None:
    """The error for arguments ``prbench eval`` does not declare, naming each and the way out."""
    from prbench.commands import spellings, unknown_flags_hint

    if not extra:
        return None
    flags = [a.partition("=")[0] for a in extra if a.startswith("-")]
    if not flags:
        return (f"prbench eval: unexpected arguments {' '.join(extra)} (values go after their "
                "flag, e.g. --tasks A,B)")
    reasons = [f"{f} ({NOT_TAKEN[spellings(f)[0]]})" for f in flags
               if f.startswith("--") and spellings(f)[0] in NOT_TAKEN]
    if reasons:
        return (f"prbench eval does not take {', '.join(reasons)}; plain `lm_eval --model "
                "prbench` takes every lm-eval flag")
    hint = unknown_flags_hint(flags, known)
    return (f"prbench eval: unrecognized arguments: {' '.join(flags)}{hint} (see 'prbench eval "
            "--help'; plain `lm_eval --model prbench` takes every lm-eval flag)")


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


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1


def plan(args: argparse.Namespace) -> tuple[Any, Any]:
    """Every option of a ``prbench eval`` command line read once and checked, nothing loaded.

    Returns:
        ``(evaluation, task_manager)``: the :class:`prbench.harness.evaluate.Evaluation` and
        lm-eval's ``TaskManager`` over the task folders (built here for the task-name check).

    Raises:
        PrbenchUserError: the first mistake found, as one line naming it and the fix.
    """
    from prbench.harness import eval_options as eo
    from prbench.harness import evaluate, tasks
    from prbench.harness.lm_eval_compat import warn_troubled_plugins, warn_unreadable_task_files
    from prbench.options import OptionsError, parse_kv_string
    from prbench.scoring.spec import resolve_scorer

    warn_troubled_plugins()  # one line per failed or partial plugin
    requested = eo.requested_tasks(args.tasks)
    if not requested:
        groups = ", ".join(eo.prbench_groups(tasks.task_names()))
        raise OptionsError("no --tasks given: name the tasks to run, e.g. --tasks "
                           f"personalized_rewardbench_sample (prbench's groups: {groups})")
    model_args = eo.read_model_args(args.model_args)
    spec = None
    if args.model == "prbench":
        spec = resolve_scorer(model_args, device=args.device, batch_size=args.batch_size,
                              max_batch_size=args.max_batch_size)
    else:
        if "scorer" in model_args:
            raise OptionsError(
                f"--model {args.model} --model_args scorer={model_args['scorer']}: scorer= picks a "
                "prbench scorer, which --model prbench (the default) runs; drop --model "
                f"{args.model}")
        problem = eo.other_model_problem(args.model, model_args)
        if problem:
            raise OptionsError(problem)
        if args.device:
            from prbench.devices import resolve_device

            resolve_device(str(args.device), option="--device")
    metadata = eo.read_metadata(args.metadata)
    reserved = eo.reserved_metadata_keys(metadata)
    if reserved:
        raise OptionsError(
            f"--metadata sets {', '.join(reserved)}, which the task YAMLs fix; choose the domain "
            "and condition by task name (e.g. personalized_rewardbench_sample_noprofile)")
    metadata = eo.profile_metadata(args.profile_args, metadata)
    if args.log_samples and not args.output_path:
        raise OptionsError("--log_samples writes per-pair samples files and needs a folder for "
                           "them: add --output_path DIR (e.g. --output_path results)")
    check_lm_eval_output(args.output_path)
    tracker_args = {k: _typed(v) for k, v in parse_kv_string(args.hf_hub_log_args or "").items()}
    wandb_args = None
    if args.wandb_args is not None:
        import importlib.util

        if importlib.util.find_spec("wandb") is None:
            raise OptionsError("--wandb_args needs the wandb package: pip install wandb")
        wandb_args = {k: _typed(v) for k, v in parse_kv_string(args.wandb_args).items()}
    dirs = [*tasks.task_dirs(), *([args.include_path] if args.include_path else [])]
    if args.include_path and not Path(args.include_path).is_dir():
        raise OptionsError(f"--include_path {args.include_path}: no such folder")
    warn_unreadable_task_files(dirs)  # lm-eval would skip them without a word
    manager = evaluate.task_manager(dirs, {**model_args, **metadata})
    problem = eo.unknown_task(requested, evaluate.task_names(manager))
    if problem:
        raise OptionsError(problem)
    run = evaluate.Evaluation(
        spec=spec, model_args=model_args, tasks=tuple(requested), task_dirs=tuple(dirs),
        metadata=metadata, limit=args.limit, output_path=args.output_path,
        log_samples=args.log_samples, write_out=args.write_out,
        seeds=args.seed or (0, 1234, 1234, 1234),
        # the scorer's own default for prbench ("auto"), lm-eval's CLI default (1) for others
        batch_size=str(args.batch_size) if args.batch_size is not None else (
            "auto" if args.model == "prbench" else "1"),
        device=args.device, tracker_args=tracker_args, wandb_args=wandb_args,
        show_config=args.show_config, model=args.model,
        command=("prbench", *(f"--plugin={p}" for p in getattr(args, "plugin", None) or ()),
                 "eval", *getattr(args, "argv", [])),
    )
    return run, manager


def _typed(text: str) -> Any:
    """A ``--hf_hub_log_args``/``--wandb_args`` value: true/false and numbers typed."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return json.loads(text)
    except ValueError:
        return text


def run(args: argparse.Namespace) -> int:
    """Check every option, run the tasks through lm-eval, print the summary, write the manifest."""
    from prbench.errors import PrbenchUserError, one_line
    from prbench.plugins import get_registry

    own_parser = getattr(args, "_parser", None)
    problem = undeclared_flags_problem(getattr(args, "extra_args", None) or [],
                                       own_parser.flags() if own_parser is not None else ())
    if problem:  # a usage error, as argparse's
        _fail(problem)
        return 2
    registry = get_registry(getattr(args, "plugin", None) or ())
    from lm_eval.utils import setup_logging

    setup_logging(getattr(logging, args.verbosity or "WARNING"))
    try:
        evaluation, manager = plan(args)
    except PrbenchUserError as exc:
        return _fail(one_line(exc))
    from prbench.harness import evaluate
    from prbench.harness.lm_eval_compat import metadata_hint_once

    shown = args.verbosity in ("INFO", "DEBUG") and not evaluation.metadata
    try:
        with metadata_hint_once(show_first=shown):
            outcome = evaluate.evaluate(evaluation, manager)
    except PrbenchUserError as exc:
        return _fail(one_line(exc))
    if outcome.lm is not None:
        outcome.lm.close()
    results = outcome.results
    if results is None:  # not rank 0 of a multi-process run
        return 0
    if args.show_lm_eval_tables:
        from lm_eval.utils import make_table

        from prbench.harness.summary import table_view

        print(make_table(table_view(results)))
        if "groups" in results:
            print(make_table(table_view(results), "groups"))
    sections = _report(args, results, outcome.saved, registry, length_baseline=True,
                       limit=_effective_limit(args.limit, results))
    return invalid_exit_code(sections, args.max_invalid, causes=failure_causes(results))


def _effective_limit(limit: float | None, results: dict[str, Any]) -> float | None:
    """``--limit`` when it left pairs out of some task, else ``None`` (nothing to say)."""
    if not limit:
        return None
    counts = [n.get("original") for n in (results.get("n-samples") or {}).values()
              if isinstance(n, dict) and isinstance(n.get("original"), int)]
    if limit >= 1 and counts and limit >= min(counts):
        return None
    return limit


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
    saved: dict[str, Any],
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
    argv = ["prbench", *(f"--plugin={p}" for p in getattr(args, "plugin", None) or ()), "eval",
            *getattr(args, "argv", [])]
    written = manifest.write_run_manifest(
        results, saved, argv=argv, sections=sections, plugins=registry.provenance(),
        data=list(profile_rows.PROVENANCE),
    )
    if written is None:
        return sections
    path, manifest_file = written
    print(f"\nresults: {path}\nmanifest: {manifest_file}")
    for sample_file in samples_files(path, saved.get("date_id")):
        print(f"samples: {sample_file}")
    return sections


def samples_files(results_path: Path, date_id: Any) -> list[Path]:
    """The per-task samples files lm-eval wrote next to ``results_path`` in this run."""
    if not date_id:
        return []
    return sorted(results_path.parent.glob(f"samples_*_{date_id}.jsonl"))


