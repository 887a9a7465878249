"""Check a data file or folder against the record schema and print per-domain statistics.

Problems go to stderr one ``error:`` line each (file, line, record, field, code) and exit 1; a
source without any record is such a problem too. Warnings (unknown fields, kept as extra fields)
go to stderr one line per kind, and every path of a folder that was not read is listed with the
reason; both are counted in the summary and do not change the exit status.

The source is read as a stream and the statistics are running sums, so memory does not grow with
the file (only the ids seen are kept, for the duplicate check); with ``--pools`` the records are
kept, since the pools are checked against them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

from prbench.jsonio import Issue, shown_path, summarize
from prbench.records import DataSourceError, LoadReport, validate


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``prbench validate``."""
    parser.add_argument(
        "path",
        help="a .jsonl/.json/.parquet file (.jsonl.gz/.json.gz and .bz2/.xz too), a folder of "
        "per-domain files, 'sample' (the bundled sample) or a hub dataset id",
    )
    parser.add_argument("--revision", default=None, help="hub revision (hub ids only)")
    parser.add_argument("--split", default="test", help="hub split (hub ids only)")
    parser.add_argument(
        "--pools",
        default=None,
        metavar="PATH",
        help="also validate a Best-of-N candidate-pool file against the records "
        "(default for 'sample': the bundled pools)",
    )
    parser.add_argument(
        "--format",
        choices=("text", "markdown", "json"),
        default="text",
        help="how to print the statistics (json: also the problems, warnings and skipped paths)",
    )


def run(args: argparse.Namespace) -> int:
    """Validate; print statistics (exit 0) or every problem (exit 1).

    A reader that stops early (``prbench validate ... --format json | head``) closes the pipe:
    the command then ends quietly, as Python's documentation of ``SIGPIPE`` advises, its
    stdout pointed at the null device so that the interpreter's last flush cannot fail again.
    """
    try:
        code = _validate(args)
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
        return 1
    return code


def _quiet_stdout() -> None:
    """Point stdout at the null device after its reader went away (no second broken pipe)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture): nothing to do
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _validate(args: argparse.Namespace) -> int:
    """The command itself: validate, print statistics (0) or every problem (1)."""
    from prbench.analysis.dataset_stats import StatsAccumulator, format_table

    pools_path = args.pools
    if pools_path is None and args.path == "sample":
        from prbench.records import SAMPLE_POOLS

        pools_path = str(SAMPLE_POOLS)
    stats = StatsAccumulator()
    try:
        report = validate(
            args.path,
            revision=args.revision,
            split=args.split,
            keep_records=pools_path is not None,
            on_record=stats.add,
        )
    except DataSourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if report.valid == 0 and not report.issues:  # every reader names an empty file; a backstop
        where = ", ".join(shown_path(f) for f in report.files) or shown_path(args.path)
        report.issues.append(Issue(where, None, None, None, "holds no records", "no-records"))
    pool_report = None
    if pools_path is not None:
        from prbench.downstream.pools import validate_pools

        pool_report = validate_pools(pools_path, report.records)
    issues = list(report.issues) + (list(pool_report.issues) if pool_report else [])
    for line in summarize(report.warnings):
        print(f"warning: {line}", file=sys.stderr)
    for skipped in report.skipped:
        print(skipped, file=sys.stderr)
    common = {
        "files": report.files,
        "rows": report.rows,
        "valid": report.valid,
        "warnings": [dataclasses.asdict(w) for w in report.warnings],
        "skipped": [{"path": s.file, "reason": s.message, "code": s.code} for s in report.skipped],
    }
    if issues:
        for issue in issues:
            print(f"error: {issue}", file=sys.stderr)
        bad = len({(i.file, i.line) for i in report.issues})
        print(
            f"\n{len(issues)} problem(s); {report.rows} rows read, {report.valid} valid, "
            f"{bad} row(s) or line(s) with problems, {_notes(report)}, "
            f"in {', '.join(shown_path(f) for f in report.files)}",
            file=sys.stderr,
        )
        if args.format == "json":
            problems = [dataclasses.asdict(i) for i in issues]
            print(json.dumps({"ok": False, "problems": problems, **common}, indent=2))
        return 1
    rows = stats.rows()
    if args.format == "json":
        payload = {"ok": True, **common, "domains": rows}
        if pool_report is not None:
            payload["pools"] = pool_report.stats()
        print(json.dumps(payload, indent=2))
        return 0
    print(format_table(rows, markdown=args.format == "markdown"))
    if pool_report is not None:
        print()
        print(pool_report.format(markdown=args.format == "markdown"))
    if args.format == "text":
        print(
            f"\nOK: {report.valid} records in {len(report.files)} file(s); {_notes(report)}."
        )
    elif report.warnings or report.skipped:
        print(f"\n{_notes(report)}.")
    return 0


def _notes(report: LoadReport) -> str:
    """``"N warning(s), M path(s) skipped"`` for the summary line."""
    kinds = len(summarize(report.warnings))
    of = f" ({kinds} kind(s))" if report.warnings else ""
    return f"{len(report.warnings)} warning(s){of}, {len(report.skipped)} path(s) skipped"
