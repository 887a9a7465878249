"""Best-of-N with each scorer: best-of-k quality for k = 1, 2, 4, ..., N with CIs and baselines.

Candidates come from a pool file (the bundled sample's pools work offline) or are sampled from a
policy (``--policy backend=hf,model=...``; saved to a pool file so a rerun resumes). Every
candidate is scored once per scorer through the scorer runtime (cached, resumable). Best-of-k
earns the exact expected quality over random k-subsets with tie credit; quality comes from the
pools' gold coverage labels or from the rubric-judge (``--quality rubric-judge --judge ...``).
Writes ``OUT/bon_results.json`` and ``OUT/bon_table.md`` and prints the table.

Example: ``prbench bon --model_args scorer=length --model_args scorer=embedding-similarity
--model_args scorer=oracle-rubric -o bon`` (one ``--model_args scorer=ID,K=V`` per scorer; the old
``--scorer ID:K=V`` still works, with a note)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prbench.downstream.evaluator import DEFAULT_N

RESULTS_NAME = "bon_results.json"
TABLE_NAME = "bon_table.md"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``prbench bon``."""
    from prbench.analysis.metrics import DEFAULT_RESAMPLES
    from prbench.commands import add_scorer_argument

    add_scorer_argument(parser, repeatable=True)
    parser.add_argument("-o", "--output_path", default="bon", help="output folder")
    parser.add_argument("--data", default="sample",
                        help="records: a file, a folder, 'sample' or a hub dataset id")
    parser.add_argument(
        "--pools", default=None,
        help="candidate pool file (default: the bundled pools for --data sample; with --policy: "
        "OUT/pools.jsonl, written and resumed)",
    )
    parser.add_argument(
        "--policy", default="", metavar="K=V,...",
        help="sample candidates from a policy: 'backend=hf,model=PATH[,gguf_file=F],seed=0' or "
        "'backend=openai,model=NAME,base_url=URL' (temperature 1.0, top_p 0.9 by default)",
    )
    parser.add_argument("--n", type=int, default=DEFAULT_N, help="candidates per record")
    parser.add_argument(
        "--quality", choices=("auto", "gold", "rubric-judge"), default="auto",
        help="candidate quality: gold coverage labels or the rubric-judge (auto: gold if labelled)",
    )
    parser.add_argument(
        "--judge", default="", metavar="K=V,...",
        help="rubric-judge options, e.g. 'backend=openai,model=NAME,base_url=URL'",
    )
    parser.add_argument("--profile", default="dense", help="profile builder")
    parser.add_argument("--profile_k", type=int, default=5, help="posts kept")
    parser.add_argument(
        "--profile_options", default="", metavar="JSON", help="further builder options (JSON)"
    )
    parser.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES,
                        help="bootstrap resamples")
    parser.add_argument("--confidence", type=float, default=0.95, help="interval confidence")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")


def run(args: argparse.Namespace) -> int:
    """Run Best-of-N and write the results."""
    from prbench.analysis.strict_json import write_json
    from prbench.commands import scorer_specs
    from prbench.downstream.bestofn import format_table
    from prbench.plugins import get_registry

    specs = scorer_specs(args)
    out_dir = Path(args.output_path)
    pools = args.pools
    if pools is None and args.policy:
        pools = str(out_dir / "pools.jsonl")
    options = {
        "data": args.data, "pools": pools or "", "policy": args.policy, "n": args.n,
        "quality": args.quality, "judge": args.judge, "profile": args.profile,
        "profile_k": args.profile_k, "profile_options": args.profile_options,
        "resamples": args.resamples, "confidence": args.confidence, "seed": args.seed,
    }
    evaluator = get_registry(args.plugin).build("downstream-evaluator", "best-of-n", options)
    try:
        result = evaluator.run(specs)
    except ValueError as exc:  # bad pools or policy output (options errors are the CLI's)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    out_dir.mkdir(parents=True, exist_ok=True)
    results_path = out_dir / RESULTS_NAME
    write_json(results_path, result, indent=1)  # strict JSON: NaN as null + a note
    table = format_table(result)
    (out_dir / TABLE_NAME).write_text(table + "\n", encoding="utf-8")
    print(table)
    print(f"\nresults: {results_path}")
    return 0
