"""Per-user preference data: ``prbench prefs convert`` turns PRISM or personalised Chatbot Arena
data into records with ``user_id`` + ``preferences`` (held-out pairs as records).

The output is one ``.jsonl`` file that ``prbench validate`` accepts and the tasks read
(``--metadata '{"prbench_data": "OUT.jsonl"}'`` with ``personalized_rewardbench_custom`` or
``personalized_preferences_sample``); methods that fit on a user's pairs read the same file
(e.g. ``preferences_data=OUT.jsonl`` for ``synthesizeme``). The report (counts, skipped users and
pairs with the reason, the hub revision read) is printed, and written with ``--report``.
"""  # noqa: D205

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from prbench.outputs import write_jsonl, write_text

#: where the command writes, checked before any work (:func:`prbench.cli.check_outputs`)
OUTPUTS = {"output_path": "file", "report": "file"}

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``prbench prefs``."""
    from prbench.preference_data.convert import HOLDOUT_ORDERS, HUB_REVISION, HUB_SOURCES

    sub = parser.add_subparsers(dest="prefs_command", metavar="ACTION", required=True)
    p = sub.add_parser("convert", help="convert PRISM / personalised Chatbot Arena data",
                       description=(__doc__ or "").strip())
    p.add_argument("--source", required=True, choices=sorted(HUB_SOURCES),
                   help="prism: " + HUB_SOURCES["prism"][0] + " (conversations); arena: "
                   + HUB_SOURCES["arena"][0])
    p.add_argument("--input", required=True,
                   help="a downloaded data file or folder (.jsonl/.json/.parquet), or the hub id")
    p.add_argument("-o", "--output_path", required=True,
                   help="the records file to write (.jsonl)")
    p.add_argument("--revision", default=None,
                   help=f"hub revision (hub ids only; default {HUB_REVISION}: a commit cannot be "
                   "looked up offline, the report records what was read)")
    p.add_argument("--holdout", type=int, default=2,
                   help="held-out pairs per user (evaluation records)")
    p.add_argument("--min_fit", type=int, default=4,
                   help="fewest fitting pairs a user must keep (fewer: the user is skipped, "
                   "counted)")
    p.add_argument("--holdout_order", choices=HOLDOUT_ORDERS, default="temporal",
                   help="temporal: each user's last pairs are held out; shuffled: seeded; "
                   "source: the release's own test rows (arena)")
    p.add_argument("--seed", type=int, default=0, help="seed of --holdout_order shuffled")
    p.add_argument("--report", default=None, metavar="PATH",
                   help="also write the conversion report as JSON")


def run(args: argparse.Namespace) -> int:
    """Convert, write the records and print the report."""
    from prbench.preference_data.convert import ConvertError, convert

    try:
        records, report = convert(args.source, args.input, revision=args.revision,
                                  holdout=args.holdout, min_fit=args.min_fit,
                                  holdout_order=args.holdout_order, seed=args.seed)
    except ConvertError as exc:
        print(f"error: {args.input}: rows that do not fit the published {args.source} fields "
              f"(each listed below):\n{exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        if type(exc) is not ValueError:
            raise  # the CLI's own data errors print themselves
        print(f"error: {exc}", file=sys.stderr)
        return 1
    out = Path(args.output_path)
    if not records:
        print(f"error: no records: {report.users} user(s), none with {args.min_fit}+ fitting "
              f"and {args.holdout} held-out pair(s); see the skipped users below", file=sys.stderr)
        _print(report.as_dict(), sys.stderr)
        return 1
    write_jsonl(out, records)
    data = report.as_dict()
    data["output"] = str(out)
    if args.report:
        write_text(args.report, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    _print(data, sys.stdout)
    return 0


def _print(data: dict, stream: object) -> None:
    lines = [
        f"source {data['source']} ({data['settings']['hub_dataset']}), input {data['input']}"
        + (f", revision {data['revision']}" if data["revision"] else ""),
        f"{data['rows']} rows -> {data['pairs']} labelled pairs of {data['users']} users; "
        f"pairs skipped: {data['skipped_pairs'] or 'none'}",
        f"{data['users_kept']} users kept, {data['n_skipped_users']} skipped (too few pairs); "
        f"{data['records']} held-out records, {data['fitting_pairs']} fitting pairs",
    ]
    for user, why in list(data["skipped_users"].items())[:20]:
        lines.append(f"  skipped user {user}: {why}")
    if data["n_skipped_users"] > 20:
        lines.append(f"  ... and {data['n_skipped_users'] - 20} more skipped users")
    if data.get("output"):
        lines.append(f"wrote {data['output']}")
    print("\n".join(lines), file=stream)  # type: ignore[call-overload]
