"""One-page report (markdown + standalone HTML with PNGs) of eval, Best-of-N and correlation runs.

RESULTS are files or folders: lm-eval results of ``prbench eval`` (run it with ``--log_samples``
so the paired statistics can use every pair), ``bon_results.json`` of ``prbench bon`` and
``correlation.json`` of ``prbench correlate``. The page has the leaderboard (accuracy per domain
with CIs, micro/macro, ties, invalid, length baseline), the personalization gap and sensitivity
(own profile vs no profile and the other profile sources that were run, per scorer and domain,
paired CI, McNemar, also printed here), paired tests between scorers on the same pairs, a pair
explorer page per run (explorer/*.html), Best-of-N curves and correlation plots. Results files
of the same scorer, tasks and profile settings (a rerun into one folder): the newest is used.

Given folders holding several runs (a tree of ``prbench eval`` output folders, or several), it
also writes index.html: every run found, finished or not (``prbench eval`` keeps a status file
from the start: failed runs, with their error, and interrupted ones are listed too), with its
task, scorer, profile condition, status, start, headline accuracy and a link to its explorer
page; sortable by any column, searchable, one offline file. A folder with no run is an error.

Example: ``prbench report results/ bon/bon_results.json correlation/correlation.json -o report``
"""

from __future__ import annotations

import argparse

from prbench.analysis.report import DEFAULT_REPORT_RESAMPLES

#: where the command writes, checked before any work (:func:`prbench.cli.check_outputs`)
OUTPUTS = {"output_path": "dir"}

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``prbench report``."""
    parser.add_argument("results", nargs="+", help="results files or folders")
    parser.add_argument("-o", "--output_path", default="report", help="output folder")
    parser.add_argument("--title", default="prbench report", help="page title")
    parser.add_argument(
        "--resamples", type=int, default=DEFAULT_REPORT_RESAMPLES,
        help="bootstrap resamples of the paired statistics",
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument(
        "--keep_reruns", action="store_true",
        help="keep every results file of the same scorer, tasks and profile settings (default: "
             "the newest replaces older ones, and the report says which)",
    )


def run(args: argparse.Namespace) -> int:
    """Write the report, and the index of runs when there are several (or one without results)."""
    from pathlib import Path

    from prbench.analysis.report import build_report
    from prbench.analysis.run_index import find_runs, write_index

    found = find_runs(args.results, resamples=args.resamples, seed=args.seed)
    pages: dict[Path, Path] = {}
    page = None
    if found.inputs:
        md, page = build_report(
            found.inputs, args.output_path, resamples=args.resamples, seed=args.seed,
            title=args.title, on_text=print, keep_reruns=args.keep_reruns, explorer_pages=pages,
        )
        print(f"report: {md}\n        {page}")
    else:
        print("note: no run ended with results: no report, only the index of runs")
    if found.count > 1 or found.unfinished:
        index = write_index(found, Path(args.output_path), searched=args.results,
                            explorer_pages=pages, report=page, title=f"{args.title}: runs")
        print(f"index:  {index} ({found.count} runs)")
    return 0
