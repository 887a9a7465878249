"""One-page report (markdown + standalone HTML with PNGs) of eval, Best-of-N and correlation runs.

RESULTS are files or folders: lm-eval results of ``prbench eval`` (run it with ``--log_samples``
so the paired statistics can use every pair), ``bon_results.json`` of ``prbench bon`` and
``correlation.json`` of ``prbench correlate``. The page has the leaderboard (accuracy per domain
with CIs, micro/macro, ties, invalid, length baseline), the personalization gap per scorer
(profile minus no profile, paired CI, McNemar), the personalization sensitivity (own profile vs
another user's, random posts and none, per scorer and domain, also printed here), paired tests
between scorers on the same pairs, Best-of-N curves and correlation plots.

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


def run(args: argparse.Namespace) -> int:
    """Write the report."""
    from prbench.analysis.report import build_report

    md, page = build_report(
        args.results, args.output_path, resamples=args.resamples, seed=args.seed,
        title=args.title, on_text=print,
    )
    print(f"report: {md}\n        {page}")
    return 0
