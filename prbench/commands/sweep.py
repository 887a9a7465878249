"""Run a grid of scorers x conditions from a sweep file, resumably, and tabulate it.

Each cell (one scorer under one condition) is a `prbench eval --log_samples` run; a re-run skips
the finished cells, runs again the failed, killed or changed ones, and exits 1 if any cell failed
(each failed cell's error is in OUT/cells/<scorer>/<condition>.json; the sweep goes on past it).
At the end: OUT/sweep_table.md and .csv (rows = scorers plus the length baseline, columns =
conditions x domains, each with a 95% CI) and OUT/report/ (`prbench report` of every cell, with
the same table). The sweep file format is in prbench/harness/sweep_file.py and docs/reproducing.md.

Examples:
  prbench sweep sweeps/sample.yaml -o results/sweep-sample
  prbench sweep sweeps/paper.yaml --dry_run --tokens_per_s 20000
  prbench sweep sweeps/sample.yaml --reuse_model --limit 5
  prbench sweep sweeps/sample.yaml --executor ray --ray_address 10.0.0.1:6379

With --executor ray each cell is a Ray task on a node of the cluster (docs/scale.md, "On a
cluster"; needs `pip install "prbench[cluster]"`); the output folder must be shared storage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prbench.commands import positive_int, positive_number
from prbench.outputs import check_output_dir


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``prbench sweep``."""
    from prbench.harness.sweep_plan import DEFAULT_POST_WORDS, DEFAULT_TOKENS_PER_WORD
    from prbench.metrics import DEFAULT_RESAMPLES

    parser.add_argument("sweep_file", metavar="SWEEP.yaml", help="the sweep file")
    parser.add_argument(
        "-o", "--output_path", default=None,
        help="output folder (default: the sweep file's output_path, else results/sweep-<name>)",
    )
    parser.add_argument(
        "--limit", type=positive_number, default=None, metavar="N",
        help="pairs per task for every cell (a fraction below 1 = share of the pairs), over the "
        "sweep file's limit (default: the file's, else every pair)",
    )
    parser.add_argument(
        "--reuse_model", action="store_true",
        help="load each scorer once: its conditions that share metadata run as one "
        "`prbench eval` call with all their tasks, in this process (default: one process per cell)",
    )
    parser.add_argument(
        "--dry_run", action="store_true",
        help="print the cells, pairs, scored tokens and GPU-hours per cell; run nothing (offline)",
    )
    parser.add_argument(
        "--tokens_per_s", type=positive_number, default=None, metavar="N",
        help="--dry_run: scoring throughput for GPU-hours (default: the scorer's estimate in the "
        "sweep file, else an H100 figure computed from its params_b)",
    )
    parser.add_argument(
        "--tokens_per_word", type=positive_number, default=DEFAULT_TOKENS_PER_WORD, metavar="X",
        help=f"--dry_run: tokens per word (default: {DEFAULT_TOKENS_PER_WORD:g})",
    )
    parser.add_argument(
        "--post_words", type=positive_number, default=DEFAULT_POST_WORDS, metavar="N",
        help="--dry_run: words per profile post where the statistics have none (default: "
        f"{DEFAULT_POST_WORDS:g}, the bundled sample's mean)",
    )
    parser.add_argument(
        "--bootstrap_resamples", type=positive_int, default=DEFAULT_RESAMPLES, metavar="N",
        help="bootstrap resamples of the table's intervals",
    )
    parser.add_argument("--bootstrap_seed", type=int, default=0, metavar="SEED",
                        help="bootstrap seed (default: 0)")
    parser.add_argument(
        "--executor", choices=("local", "ray"), default="local",
        help="where cells run: local (this machine, one after the other) or ray (each cell a "
        "Ray task on the cluster; -o must be storage every node sees) (default: local)",
    )
    parser.add_argument(
        "--ray_address", default=None, metavar="HOST:PORT",
        help="--executor ray: the cluster's head (what `ray start --head` printed; default: "
        "RAY_ADDRESS where set, else a Ray cluster of this command's own on this machine)",
    )
    parser.add_argument(
        "--max_retries", type=int, default=None, metavar="N",
        help="--executor ray: retries of a cell the machine ended (node died, out of memory); a "
        "cell that fails on its input is never retried (default: 1)",
    )
    parser.add_argument("--no_report", action="store_true",
                        help="write the table only, not OUT/report/ (default: write both)")


def _output(args: argparse.Namespace, sweep: object) -> Path:
    if args.output_path:
        return Path(args.output_path)
    given = getattr(sweep, "output_path", None)
    if given:
        return Path(given)
    return Path("results") / f"sweep-{Path(args.sweep_file).stem}"


def check_cells(sweep: Any, plugins: Sequence[str], out: Path | None = None,
                limit: float | None = None) -> None:
    """Check the scorer, options and tasks of every cell that will run, before any runs.

    A typo would otherwise surface only when its cell's turn came, after the cells before it ran.
    With ``out``, cells already finished there are left out (a re-run needs no plugin for them).

    Args:
        sweep: the loaded sweep file.
        plugins: the ``--plugin`` files.
        out: the sweep's output folder, or None to check every cell.
        limit: ``--limit`` (overrides the file's; part of a cell's fingerprint).

    Raises:
        SweepFileError: an unknown scorer or option, or a misspelt prbench task, named with the
            sweep file and the scorer or condition.
    """
    from prbench.errors import PrbenchUserError, one_line
    from prbench.harness import tasks
    from prbench.harness.eval_options import misspelt_task
    from prbench.harness.sweep_file import SweepFileError, where_in
    from prbench.options import parse_kv_string
    from prbench.plugins import get_registry
    from prbench.scoring.runtime_options import split_options

    cells = sweep.cells(limit)
    if out is not None:
        from prbench.harness.sweep import finished

        cells = [cell for cell in cells if not finished(out, cell)]
    scorers = {cell.scorer.name: cell.scorer for cell in cells}
    conditions = {cell.condition.name: cell.condition for cell in cells}
    registry = get_registry(plugins)
    for scorer in scorers.values():
        try:
            raw = parse_kv_string(scorer.model_args)
            component = registry.get("scorer", str(raw.pop("scorer", "")))
            component.parse_options(split_options(component, raw)[1])
        except PrbenchUserError as exc:
            raise SweepFileError(where_in(sweep.path, f"scorer {scorer.name!r}: "
                                          f"{one_line(exc)}")) from None
    names = tasks.task_names(tasks.task_dirs())
    for condition in conditions.values():
        typo = misspelt_task(condition.tasks, names)
        if typo:
            raise SweepFileError(where_in(sweep.path, f"condition {condition.name!r}: {typo}"))


def run(args: argparse.Namespace) -> int:
    """Dry-run or run the sweep, then write the table and the report."""
    from prbench.cluster import check_ray_flags
    from prbench.harness.sweep import run_sweep
    from prbench.harness.sweep_file import load_sweep

    check_ray_flags(args.executor, {"--ray_address": args.ray_address,
                                    "--max_retries": args.max_retries}, "the cells run")
    sweep = load_sweep(args.sweep_file)
    if args.dry_run:  # the file alone (a plan for a machine that may have other plugins)
        from prbench.harness.sweep_plan import estimate_sweep, format_estimates

        estimates = estimate_sweep(
            sweep, limit=args.limit, tokens_per_s=args.tokens_per_s,
            tokens_per_word=args.tokens_per_word, post_words=args.post_words,
        )
        print(f"sweep {args.sweep_file}: {len(sweep.scorers)} scorers x "
              f"{len(sweep.conditions)} conditions = {len(estimates)} cells (dry run)")
        print(format_estimates(estimates, tokens_per_word=args.tokens_per_word))
        return 0
    out = check_output_dir(_output(args, sweep))
    check_cells(sweep, getattr(args, "plugin", None) or (), out, args.limit)
    retries = 1 if args.max_retries is None else args.max_retries
    if retries < 0:
        from prbench.options import OptionsError

        raise OptionsError(f"--max_retries must be >= 0, got {retries}")
    outcome = run_sweep(sweep, out, limit=args.limit, reuse_model=args.reuse_model,
                        plugins=getattr(args, "plugin", None) or (),
                        executor=args.executor, ray_address=args.ray_address,
                        max_retries=retries)
    from prbench.analysis.sweep_table import to_markdown, write_table

    table, md, path_csv = write_table(out, resamples=args.bootstrap_resamples,
                                      seed=args.bootstrap_seed)
    print()
    print(to_markdown(table))
    print(f"table: {md}\n       {path_csv}")
    if not args.no_report and (outcome.done or outcome.skipped):
        from prbench.analysis.report import build_report

        report_md, _ = build_report([out], out / "report", resamples=args.bootstrap_resamples,
                                    seed=args.bootstrap_seed, title=f"prbench sweep {out.name}")
        print(f"report: {report_md}")
    print(f"cells: {len(outcome.done)} run, {len(outcome.skipped)} already finished, "
          f"{len(outcome.failed)} failed")
    for key, error in outcome.failed.items():
        print(f"error: cell {key} failed: {error}", file=sys.stderr)
    return 1 if outcome.failed else 0
