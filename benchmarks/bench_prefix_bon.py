"""Best-of-N scoring with prefix sharing: N candidates of one prompt vs one prompt + N answers.

Builds the random Llama sequence-classifier RM of ``bench_scoring.py`` (word-level tokenizer, one
word = one token) and, per prompt, a question with a top-10 profile (~1,500 tokens, post lengths
log-normal as on StackExchange) and N candidate answers (~130 tokens each). In one run, through
the shared scorer runtime (score cache off), it times:

(a) ``shared``: ``hf-classifier`` with ``prefix_sharing=on`` — the prompt runs once per group;
(b) ``independent``: the same scorer with ``prefix_sharing=off`` — every candidate in full;
(c) the reference ``one prompt + N answers``: the prompt scored once on its own (with a one-word
    answer) plus the N answers scored with an empty question and no profile;
(d) ``floor``: the prompt run once and each answer run from its cached state, one at a time, no
    padding (``bench_scoring.floor_run``) — (c) plus the answers' attention to the prompt, which
    no implementation can avoid.

It prints (a)/(b) (the saving), (a)/(c) (how close sharing gets to one prompt plus N answers),
(a)/(d) (overhead over the floor), the same ratios counted in tokens, and the largest score
difference between (a) and (b). Times are wall-clock seconds (CUDA synchronised), best of
``--repeats`` interleaved runs, on ``--device`` in ``--dtype`` (default: CUDA in bf16 when
there is a GPU, else the CPU in fp32); compare the ratios, not absolute times. Example::

    python benchmarks/bench_prefix_bon.py                 # N=16, 4 prompts
    python benchmarks/bench_prefix_bon.py --n 32 --prompts 2 --hidden 256 --layers 4
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DTYPES, resolve, timed
from bench_scoring import build_model, floor_run, words


def make_groups(n_prompts: int, n: int, seed: int) -> list[list]:
    """``n_prompts`` groups of ``n`` requests sharing a question and a top-10 profile."""
    from prbench.profiles.base import ProfileView, render_posts
    from prbench.records import ProfileItem
    from prbench.scoring.base import ScoreRequest

    rng = random.Random(seed)
    groups = []
    for i in range(n_prompts):
        question = words(rng, rng.randint(9, 15))
        items = []
        for k in range(10):
            length = min(max(int(rng.lognormvariate(math.log(150) - 0.32, 0.8)), 15), 700)
            cat = rng.choice(["arts", "lifestyle", "society"])
            items.append(ProfileItem(id=f"{i}-{k}", category=cat, text=words(rng, length)))
        view = ProfileView(text=render_posts(items), items=tuple(items))
        groups.append([
            ScoreRequest(record_id=f"q{i}", question=question, profile=view,
                         response=words(rng, max(60, min(200, int(rng.gauss(130, 25))))))
            for _ in range(n)
        ])
    return groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=16, help="candidates per prompt")
    parser.add_argument("--prompts", type=int, default=4, help="prompts (groups) per run")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2, help="best of N interleaved runs")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda:N")
    parser.add_argument("--dtype", default="auto", choices=sorted(DTYPES),
                        help="auto = bf16 on CUDA, fp32 on a CPU")
    args = parser.parse_args()

    import torch

    from prbench.scoring.base import ScoreRequest, ScorerFaultError
    from prbench.scoring.spec import build_runtime

    try:
        device, dtype = resolve(args.device, args.dtype)
    except ValueError as exc:
        parser.error(str(exc))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="prbench-bench-bon-") as tmp:
        folder = Path(tmp, "rm")
        build_model(folder, args.hidden, args.layers)
        os.environ.setdefault("PRBENCH_CACHE_DIR", str(Path(tmp, "cache")))
        common = {"pretrained": str(folder), "cache": "false", "progress": "false",
                  "device": str(device), "dtype": dtype}
        shared = build_runtime("hf-classifier", {**common, "prefix_sharing": "on"})
        plain = build_runtime("hf-classifier", {**common, "prefix_sharing": "off"})
        groups = make_groups(args.prompts, args.n, seed=7)
        flat = [r for g in groups for r in g]
        prompt_only = [ScoreRequest(g[0].record_id, g[0].question, "w1", g[0].profile)
                       for g in groups]
        answers_only = [ScoreRequest(r.record_id, "", r.response) for r in flat]
        warm = make_groups(1, 2, seed=99)[0]
        try:
            shared.score(warm)
        except ScorerFaultError as exc:  # e.g. a transformers release prefix sharing cannot run
            sys.exit(f"error: prefix sharing cannot run here: {exc.__cause__ or exc}")
        plain.score(warm)

        best = {"shared": math.inf, "independent": math.inf, "prompt": math.inf,
                "answers": math.inf, "floor": math.inf}
        for rep in range(args.repeats):
            # distinct requests per repeat (a suffix word) so the runtime never dedups across runs
            def tag(reqs, rep=rep):
                import dataclasses

                return [dataclasses.replace(r, response=f"{r.response} w{rep + 1}") for r in reqs]

            t, s_shared = timed(lambda: shared.score(tag(flat)), device)
            best["shared"] = min(best["shared"], t)
            t, s_plain = timed(lambda: plain.score(tag(flat)), device)
            best["independent"] = min(best["independent"], t)
            t, _ = timed(lambda: plain.score(tag(prompt_only)), device)
            best["prompt"] = min(best["prompt"], t)
            t, _ = timed(lambda: plain.score(tag(answers_only)), device)
            best["answers"] = min(best["answers"], t)
            t, _ = timed(lambda: floor_run(shared.scorer, tag(flat)), device)
            best["floor"] = min(best["floor"], t)
        enc = shared.scorer.encode
        full = [len(s) for s in enc(flat)]
        prompt_tokens = [len(s) - 1 for s in enc(prompt_only)]  # minus the one-word answer
        answer_tokens = [len(s) for s in enc(answers_only)]
        sharing = shared.describe().get("scorer", {}).get("resolved", {}).get("prefix_sharing")
        shared.close()
        plain.close()

    reference = best["prompt"] + best["answers"]
    ideal_tokens = sum(prompt_tokens) + sum(answer_tokens)
    diff = max(abs(a - b) for a, b in zip(s_shared, s_plain, strict=True))
    where = (torch.cuda.get_device_name(device) if device.type == "cuda"
             else f"CPU, {args.threads} thread(s)")
    print(f"model: random Llama RM, hidden {args.hidden}, {args.layers} layers, {dtype} on "
          f"{where}; prefix sharing: {sharing}")
    mean_prompt = sum(prompt_tokens) // len(prompt_tokens)
    mean_answer = sum(answer_tokens) // len(answer_tokens)
    print(f"{args.prompts} prompt(s) x N={args.n} candidates; prompt ~{mean_prompt} tokens "
          f"(top-10 profile), answers ~{mean_answer} tokens")
    print("wall seconds (best of runs): "
          + ", ".join(f"{k} {v:.3f}" for k, v in best.items()))
    print(f"shared / independent          : {best['shared'] / best['independent']:.3f} "
          f"(tokens {ideal_tokens / sum(full):.3f})")
    print(f"shared / (one prompt + N answers): {best['shared'] / reference:.3f} "
          "(1.0 = the ideal; tokens 1.000)")
    print(f"shared / floor (prompt once, answers from its cache): "
          f"{best['shared'] / best['floor']:.3f}; floor / (one prompt + N answers): "
          f"{best['floor'] / reference:.3f}")
    print(f"independent / (one prompt + N answers): {best['independent'] / reference:.3f} "
          f"(tokens {sum(full) / ideal_tokens:.3f})")
    print(f"max |score shared - score independent| = {diff:.1e}")


if __name__ == "__main__":
    main()
