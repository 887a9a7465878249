"""Rank correlation of benchmark accuracy and downstream quality across scorers, with CIs.

DOWNSTREAM is a ``bon_results.json`` written by ``prbench bon``: each scorer's best-of-k quality
(``--k``, default the largest k). The benchmark side is each scorer's pair accuracy: by default
on the same records' chosen/rejected pairs (from the same file), or from ``--benchmark`` files:
lm-eval results written by ``prbench eval`` (files or folders; with ``--log_samples`` the pairs
are resampled together across scorers) or another ``bon_results.json``. Scorers are matched by
label, then by scorer id. Prints Spearman, Kendall, weighted Kendall, NDCG and RBO with bootstrap
CIs (items resampled on both sides) and writes OUT/correlation.{json,md,png}.

Example: ``prbench correlate bon/bon_results.json --benchmark results/ -o correlation``
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prbench.analysis.correlation import DEFAULT_CORR_RESAMPLES, DEFAULT_RBO_P, Side
from prbench.outputs import write_text
from prbench.strict_json import write_json

#: where the command writes, checked before any work (:func:`prbench.cli.check_outputs`)
OUTPUTS = {"output_path": "dir"}

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``prbench correlate``."""
    parser.add_argument("downstream", help="bon_results.json from `prbench bon`")
    parser.add_argument(
        "--benchmark", nargs="+", default=None, metavar="PATH",
        help="lm-eval results files/folders of `prbench eval` (one per scorer) or a "
        "bon_results.json; default: the pair accuracy in DOWNSTREAM",
    )
    parser.add_argument("--k", type=int, default=None, help="best-of-k to use (default: largest)")
    parser.add_argument(
        "--condition", choices=("profile", "noprofile"), default="profile",
        help="profile condition of lm-eval runs (default: profile; a run with only the other "
        "condition uses that one)",
    )
    parser.add_argument(
        "--include_diagnostic", action="store_true",
        help="rank DIAGNOSTIC scorers (oracles that read the hidden rubric) with the reward "
        "models; by default they are left out, and the table names them",
    )
    parser.add_argument(
        "--exclude_diagnostic", action="store_true",
        help="the default (kept so older command lines still run)",
    )
    parser.add_argument("--rbo_p", type=float, default=DEFAULT_RBO_P,
                        help="RBO persistence (weight of the top of the ranking)")
    parser.add_argument("--resamples", type=int, default=DEFAULT_CORR_RESAMPLES,
                        help="bootstrap resamples (items resampled on both sides)")
    parser.add_argument("--confidence", type=float, default=0.95, help="interval confidence")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("-o", "--output_path", default="correlation", help="output folder")


def downstream_side(bon: Mapping[str, Any], k: int | None) -> tuple[Side, int, set[str]]:
    """Per-record best-of-k quality of each scorer; also k and the diagnostic labels.

    Raises:
        ValueError: k is not one of the file's ks.
    """
    ks = list(bon["ks"])
    k = ks[-1] if k is None else k
    if k not in ks:
        raise ValueError(f"--k {k} is not in the Best-of-N results (ks: {ks})")
    j = ks.index(k)
    items = {
        label: {rid: values[j] for rid, values in block["curve"]["per_record"].items()}
        for label, block in bon["scorers"].items()
    }
    diagnostic = {label for label, block in bon["scorers"].items() if block.get("diagnostic")}
    return Side(items, f"best-of-{k} quality"), k, diagnostic


def bon_benchmark(bon: Mapping[str, Any]) -> Side:
    """Strict pair accuracy on the records' own chosen/rejected pairs, from a Best-of-N file."""
    return Side(
        {
            label: {rid: o["correct"] for rid, o in block["pair_outcomes"].items()}
            for label, block in bon["scorers"].items()
        },
        "pair accuracy",
    )


def _match(label: str, ids: Mapping[str, str], wanted: Sequence[str]) -> str | None:
    if label in wanted:
        return label
    hits = [w for w, scorer_id in ids.items() if scorer_id == label]
    return hits[0] if len(hits) == 1 else None


def benchmark_side(
    paths: Sequence[str], bon: Mapping[str, Any], condition: str
) -> tuple[Side, list[str]]:
    """The benchmark side from lm-eval runs and/or Best-of-N files, keyed by downstream labels.

    Returns:
        The side and notes (which run fed which scorer, unmatched runs).
    """
    from prbench.analysis.runs import conditions, counts_outcomes, expand, load_any

    wanted = list(bon["scorers"])
    ids = {label: str(block.get("id", label)) for label, block in bon["scorers"].items()}
    items: dict[str, dict[str, float]] = {}
    notes: list[str] = []
    for path in expand(paths):
        kind, data = load_any(path)
        if kind == "prbench-best-of-n":
            for label, values in bon_benchmark(data).items.items():
                target = _match(label, ids, wanted)
                if target is not None:
                    items[target] = values
            notes.append(f"{path}: pair accuracy of the Best-of-N records")
            continue
        if kind != "lm-eval":
            notes.append(f"{path}: a {kind} file, not used")
            continue
        run = data
        target = _match(run.label, ids, wanted) or _match(str(run.scorer.get("id")), ids, wanted)
        if target is None:
            notes.append(f"{path}: scorer {run.label!r} has no Best-of-N results; not used")
            continue
        conds = conditions(run)
        cond = condition if condition in conds else conds[0]
        if target in items:
            raise ValueError(f"two benchmark results for scorer {target!r} (the second: {path})")
        items[target] = counts_outcomes(run, cond)
        paired = "per pair" if cond in run.outcomes else "from counts (no samples files)"
        notes.append(f"{path}: {target} <- accuracy, condition {cond}, {paired}")
    return Side(items, "benchmark accuracy"), notes


def run(args: argparse.Namespace) -> int:
    """Compute the statistics, print the table and write the files."""
    try:
        return _run(args)
    except ValueError as exc:  # inconsistent inputs; unreadable files are the CLI's errors
        from prbench.records import DataSourceError

        if isinstance(exc, DataSourceError):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    from prbench.analysis.correlation import correlate, diagnostic_note, format_table
    from prbench.analysis.plots import correlation_figure
    from prbench.analysis.runs import read_json

    bon = read_json(args.downstream)
    if bon.get("kind") != "prbench-best-of-n":
        raise ValueError(f"{args.downstream}: not a `prbench bon` results file")
    down, k, diagnostic = downstream_side(bon, args.k)
    if args.benchmark:
        bench, notes = benchmark_side(args.benchmark, bon, args.condition)
    else:
        bench, notes = bon_benchmark(bon), [f"{args.downstream}: pair accuracy of its records"]
    if args.include_diagnostic and args.exclude_diagnostic:
        raise ValueError("--include_diagnostic and --exclude_diagnostic contradict each other: "
                         "give one (leaving DIAGNOSTIC scorers out is the default)")
    excluded: list[str] = []
    if not args.include_diagnostic:
        excluded = sorted(diagnostic & (set(bench.items) | set(down.items)))
        for side in (bench, down):
            side.items = {k2: v for k2, v in side.items.items() if k2 not in diagnostic}
    if excluded and len(set(bench.items) & set(down.items)) < 2:
        raise ValueError(
            f"rank correlation needs at least two scorers besides the DIAGNOSTIC ones "
            f"({', '.join(excluded)}), which are left out by default: add reward models, or "
            "pass --include_diagnostic to rank the oracle with them"
        )
    result = correlate(
        bench, down, p=args.rbo_p, resamples=args.resamples, confidence=args.confidence,
        seed=args.seed,
    )
    result["k"] = k
    result["downstream_file"] = str(args.downstream)
    result["sources"] = notes
    result["diagnostic"] = sorted(diagnostic & set(result["scorers"]))
    result["excluded_diagnostic"] = excluded
    result["sample"] = bool(bon.get("sample"))
    result["points"] = scorer_points(result, bench, down)
    out = Path(args.output_path)
    out.mkdir(parents=True, exist_ok=True)
    table = format_table(result)
    table += diagnostic_note(result)
    if result["sample"]:
        table += "\nData: the bundled SAMPLE, not the benchmark."
    write_json(out / "correlation.json", result, indent=1)  # strict JSON: NaN as null + a note
    write_text(out / "correlation.md", table + "\n")
    try:
        plot = correlation_figure(result, out / "correlation.png")
        print(f"plot: {plot}")
    except RuntimeError as exc:  # matplotlib missing
        print(f"no plot: {exc}")
    print(table)
    for note in notes:
        print(f"  {note}")
    print(f"\nresults: {out / 'correlation.json'}")
    return 0


def scorer_points(result: Mapping[str, Any], bench: Side, down: Side) -> list[dict[str, Any]]:
    """Per scorer: benchmark and downstream values with bootstrap intervals (the plot's points).

    Stored in the results file (``points``), so ``prbench report`` draws the same figure.
    """
    from prbench.metrics import bootstrap_ci

    boot = result["bootstrap"]
    points = []
    for label in result["scorers"]:
        x = bootstrap_ci(list(bench.items[label].values()), resamples=boot["resamples"],
                         confidence=boot["confidence"], seed=boot["seed"])
        y = bootstrap_ci(list(down.items[label].values()), resamples=boot["resamples"],
                         confidence=boot["confidence"], seed=boot["seed"])
        points.append({"label": label, "x": x.value, "x_low": x.low, "x_high": x.high,
                       "y": y.value, "y_low": y.low, "y_high": y.high})
    return points
