"""Best-of-N with each scorer: best-of-k quality for k = 1, 2, 4, ..., N with CIs and baselines.

Candidates come from a pool file (the bundled sample's pools work offline) or are sampled from a
policy (``--policy_args backend=hf,model=...``; saved to a pool file so a rerun resumes). Every
candidate is scored once per scorer through the scorer runtime (cached, resumable). Best-of-k
earns the exact expected quality over random k-subsets with tie credit; quality comes from the
pools' gold coverage labels or from the rubric-judge (``--quality rubric-judge --judge_args
judge=rubric-judge,...``).
Writes ``OUT/bon_results.json`` and ``OUT/bon_table.md`` and prints the table.

Example: ``prbench bon --model_args scorer=length --model_args scorer=embedding-similarity
--model_args scorer=oracle-rubric -o bon`` (one ``--model_args scorer=ID,K=V`` per scorer)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from prbench.downstream.evaluator import DEFAULT_N
from prbench.outputs import write_text

RESULTS_NAME = "bon_results.json"
TABLE_NAME = "bon_table.md"


#: where the command writes, checked before any work (:func:`prbench.cli.check_outputs`)
OUTPUTS = {"output_path": "dir"}

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``prbench bon``."""
    from prbench.commands import add_component_argument, add_scorer_argument
    from prbench.metrics import DEFAULT_RESAMPLES

    add_scorer_argument(parser, repeatable=True)
    parser.add_argument("-o", "--output_path", default="bon", help="output folder")
    parser.add_argument("--data", default="sample",
                        help="records: a file, a folder, 'sample' or a hub dataset id")
    parser.add_argument(
        "--pools", default=None,
        help="candidate pool file (default: the bundled pools for --data sample; with "
        "--policy_args: OUT/pools.jsonl, written and resumed)",
    )
    add_component_argument(
        parser, "policy", default="",
        help="sample candidates from a policy: backend=hf,model=PATH[,gguf_file=F],seed=0 or "
        "backend=openai,model=NAME,base_url=URL (temperature 1.0, top_p 0.9 by default)",
    )
    parser.add_argument("--n", type=int, default=DEFAULT_N, help="candidates per record")
    parser.add_argument(
        "--quality", choices=("auto", "gold", "rubric-judge"), default="auto",
        help="candidate quality: gold coverage labels or the rubric-judge (auto: gold if labelled)",
    )
    add_component_argument(
        parser, "judge", default="rubric-judge",
        help="the quality judge of --quality rubric-judge and its options, e.g. "
        "judge=rubric-judge,backend=openai,model=NAME,base_url=URL",
    )
    add_component_argument(
        parser, "profile", default="dense",
        help="profile builder and its options, e.g. builder=dense,k=5,model=minilm (k is 5 "
        "where the builder has it and none is given)",
    )
    parser.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES,
                        help="bootstrap resamples")
    parser.add_argument("--confidence", type=float, default=0.95, help="interval confidence")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")


def run(args: argparse.Namespace) -> int:
    """Run Best-of-N and write the results."""
    from prbench.commands import component_args, kv_text, scorer_specs
    from prbench.downstream.bestofn import format_table
    from prbench.downstream.evaluator import RUBRIC_JUDGE
    from prbench.options import OptionsError
    from prbench.plugins import get_registry
    from prbench.strict_json import write_json

    specs = scorer_specs(args)
    judge, profile, policy = (component_args(args, r) for r in ("judge", "profile", "policy"))
    if judge[0] not in ("rubric-judge", RUBRIC_JUDGE):
        raise OptionsError(f"--judge_args judge={judge[0]}: the quality judge of Best-of-N is "
                           "the rubric-judge (judge=rubric-judge,K=V,...)")
    out_dir = Path(args.output_path)
    pools = args.pools
    if pools is None and policy[1]:
        pools = str(out_dir / "pools.jsonl")
    options = {
        "data": args.data, "pools": pools or "", "policy": kv_text(policy[1]), "n": args.n,
        "quality": args.quality, "judge": kv_text(judge[1]), "profile": profile[0],
        "profile_options": json.dumps(profile[1]) if profile[1] else "",
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
    write_text(out_dir / TABLE_NAME, table + "\n")
    print(table)
    print(f"\nresults: {results_path}")
    return 0
