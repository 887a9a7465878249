"""Reward-model scoring speed: the released benchmark's path vs prbench vs the compute floor.

Builds a random-weight Llama-style sequence-classifier RM of realistic shape for a CPU (hidden
512, 8 layers by default) with a word-level tokenizer (one word = one token, so lengths are
controlled), and synthetic pairs shaped like Personalized RewardBench:

- ``question-only``: a ~12-word question, two answers of ~130 tokens each;
- ``top-10 profile``: the same plus ten retrieved posts (~1,500 tokens in all, post lengths
  log-normal as on StackExchange) before the question in the user turn.

For each condition it times, in one run and on the same model:

(a) ``naive``: what the released evaluation code does — sequences in dataset order (chosen,
    rejected, chosen, ...), a fixed batch of 8, padded to the longest, every sequence scored in
    full through the model's own forward;
(b) ``prbench``: the ``hf-classifier`` scorer (length-sorted token-budget batches, prefix
    sharing; score cache off);
(c) ``floor``: the same real tokens with no padding and no repeated prefix — each prompt run
    once, each answer run once from the prompt's cached state, one sequence at a time.

All three run on the same device in the same dtype (``--device``, ``--dtype``: by default CUDA
in bf16 when there is a GPU, else the CPU in fp32), and are timed by the wall clock with CUDA
synchronised. It prints pairs/s, prbench's speed-up over (a), the padded-token fraction of (a)
and (b), and prbench's time relative to (c). Absolute times vary a lot on a shared machine;
compare the ratios, which come from one run. For MFU, real model shapes and the whole GPU table
see ``bench_gpu_table.py``. Example::

    python benchmarks/bench_scoring.py                # defaults: 64 + 16 pairs
    python benchmarks/bench_scoring.py --pairs 32 --profile-pairs 8 --hidden 256 --layers 4
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DTYPES, resolve, timed

VOCAB_WORDS = 6000
SPECIALS = ["<pad>", "<s>", "</s>", "<unk>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)


def build_tokenizer(folder: Path) -> Any:
    """Save a word-level tokenizer (one word = one token, adds one BOS) to ``folder``; return it."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    for i in range(VOCAB_WORDS):
        vocab[f"w{i}"] = len(vocab)
    for extra in ("Post", "(Category:", "Some", "of", "my", "earlier", "posts:", "My", "question:"):
        vocab.setdefault(extra, len(vocab))
    for i in range(1, 11):
        vocab.setdefault(f"{i}", len(vocab))
    for c in ("arts", "lifestyle", "society"):
        vocab.setdefault(f"{c}):", len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", vocab["<s>"])]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
        unk_token="<unk>", additional_special_tokens=SPECIALS[4:],
    )
    fast.chat_template = TEMPLATE
    fast.save_pretrained(folder)
    return fast


def build_model(folder: Path, hidden: int, layers: int) -> None:
    """A word-level tokenizer (adds one BOS) and a random Llama sequence classifier."""
    import torch
    from transformers import AutoModelForSequenceClassification, LlamaConfig

    fast = build_tokenizer(folder)
    config = LlamaConfig(
        vocab_size=len(fast), hidden_size=hidden, intermediate_size=int(hidden * 2.75),
        num_hidden_layers=layers, num_attention_heads=max(hidden // 64, 1),
        num_key_value_heads=max(hidden // 64, 1), max_position_embeddings=8192,
        pad_token_id=fast.pad_token_id, bos_token_id=fast.bos_token_id, num_labels=1,
    )
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(config)
    model.save_pretrained(folder)


def words(rng: random.Random, n: int) -> str:
    """``n`` random vocabulary words."""
    return " ".join(f"w{rng.randrange(VOCAB_WORDS)}" for _ in range(n))


def make_requests(n_pairs: int, *, profile: bool, seed: int) -> list:
    """``2 * n_pairs`` score requests (chosen, rejected per pair) in dataset order."""
    from prbench.profiles.base import ProfileView
    from prbench.records import ProfileItem
    from prbench.scoring.base import ScoreRequest

    rng = random.Random(seed)
    out = []
    for i in range(n_pairs):
        question = words(rng, rng.randint(9, 15))
        view = ProfileView(text="")
        if profile:
            from prbench.profiles.base import render_posts

            items = []
            for k in range(10):
                n = min(max(int(rng.lognormvariate(math.log(150) - 0.32, 0.8)), 15), 700)
                cat = rng.choice(["arts", "lifestyle", "society"])
                items.append(ProfileItem(id=f"{i}-{k}", category=cat, text=words(rng, n)))
            view = ProfileView(text=render_posts(items), items=tuple(items))
        for _ in range(2):
            answer = words(rng, max(60, min(200, int(rng.gauss(130, 25)))))
            out.append(ScoreRequest(record_id=f"q{i}", question=question, response=answer,
                                    profile=view))
    return out


def naive_scores(model, tokenizer, requests, *, batch_size: int = 8) -> tuple[list, int, int]:
    """The released path: dataset order, fixed batches, pad to longest, model's own forward.

    Inputs go to the model's device, and the model runs in the dtype it was loaded in: give it
    the scorer's device and dtype, so the two paths compare like with like.
    """
    import torch

    from prbench.backends.chat_inputs import build_chat

    device = next(model.parameters()).device
    scores: list[float] = []
    slots = real = 0
    for start in range(0, len(requests), batch_size):
        batch = requests[start : start + batch_size]
        texts = [
            tokenizer.apply_chat_template(
                build_chat(r.question, r.response, r.profile.text), tokenize=False
            )
            for r in batch
        ]
        enc = tokenizer(texts, padding=True, truncation=True, max_length=8192, return_tensors="pt")
        with torch.inference_mode():
            logits = model(**enc.to(device)).logits
        scores.extend(logits[:, 0].float().tolist())
        slots += enc["attention_mask"].numel()
        real += int(enc["attention_mask"].sum())
    return scores, slots, real


def floor_run(scorer, requests) -> int:
    """Each prompt once and each answer once from its cached state, one sequence at a time."""
    import torch

    from prbench.scoring.prefix import group_shared_prefixes

    seqs = scorer.encode(requests)
    keys = [(r.question, r.profile.text) for r in requests]
    groups, singles = group_shared_prefixes(seqs, keys, min_prefix_tokens=1)
    base = scorer._parts[0]
    dev = scorer.device
    tokens = 0
    with torch.inference_mode():
        for g in groups:
            prefix = torch.as_tensor([g.prefix], device=dev)
            cache = base(input_ids=prefix, use_cache=True).past_key_values
            for suffix in g.suffixes:
                pos = torch.arange(len(g.prefix), len(g.prefix) + len(suffix), device=dev)[None]
                base(input_ids=torch.as_tensor([suffix], device=dev), position_ids=pos,
                     past_key_values=cache, use_cache=True)
                cache.crop(-len(suffix))
            tokens += g.real_tokens
        for i in singles:
            base(input_ids=torch.as_tensor([seqs[i]], device=dev))
            tokens += len(seqs[i])
    return tokens


def run_condition(name: str, requests, model, tokenizer, scorer, repeats: int) -> dict:
    """Time (a), (b), (c) for one condition: best wall time of ``repeats`` interleaved runs."""
    n_pairs = len(requests) // 2
    best = dict.fromkeys(("naive", "prbench", "floor"), math.inf)
    dev = scorer.device
    for _ in range(repeats):
        t, (naive, slots, real) = timed(lambda: naive_scores(model, tokenizer, requests), dev)
        best["naive"] = min(best["naive"], t)
        before = dict(scorer.stats)
        t, ours = timed(lambda: scorer.score(requests), dev)
        best["prbench"] = min(best["prbench"], t)
        p_slots = scorer.stats["padded_tokens"] - before["padded_tokens"]
        p_real = scorer.stats["real_tokens"] - before["real_tokens"]
        t, floor_tokens = timed(lambda: floor_run(scorer, requests), dev)
        best["floor"] = min(best["floor"], t)
    return {
        "name": name, "pairs": n_pairs,
        "pps": {k: n_pairs / v for k, v in best.items()},
        "speedup": best["naive"] / best["prbench"], "vs_floor": best["prbench"] / best["floor"],
        "naive_pad": 1 - real / slots, "prbench_pad": 1 - p_real / p_slots,
        "naive_tokens": slots, "prbench_tokens": p_slots, "floor_tokens": floor_tokens,
        "max_diff": max(abs(a - b) for a, b in zip(naive, ours, strict=True)),
    }


def main() -> None:
    """Parse arguments, build the model, run both conditions and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=64, help="question-only pairs")
    parser.add_argument("--profile-pairs", type=int, default=16, help="pairs with a top-10 profile")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=1, help="best of N interleaved runs")
    parser.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda:N")
    parser.add_argument("--dtype", default="auto", choices=sorted(DTYPES),
                        help="auto = bf16 on CUDA, fp32 on a CPU; both paths use it")
    parser.add_argument(
        "--threads", type=int, default=1,
        help="torch threads (default 1: on a shared machine multi-threaded timings are noise)",
    )
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from prbench.backends.hf_classifier import HFClassifierScorer
    from prbench.backends.hf_classifier_options import HFClassifierOptions

    try:
        device, dtype = resolve(args.device, args.dtype)
    except ValueError as exc:
        parser.error(str(exc))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="prbench-bench-") as tmp:
        folder = Path(tmp, "rm")
        build_model(folder, args.hidden, args.layers)
        os.environ.setdefault("PRBENCH_CACHE_DIR", str(Path(tmp, "cache")))
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForSequenceClassification.from_pretrained(
            folder, dtype=getattr(torch, dtype)
        )
        model.to(device).eval()
        scorer = HFClassifierScorer(
            HFClassifierOptions(pretrained=str(folder), device=str(device), dtype=dtype)
        )
        warm = make_requests(2, profile=False, seed=99)
        naive_scores(model, tokenizer, warm)
        scorer.score(warm)
        rows = [
            run_condition("question-only", make_requests(args.pairs, profile=False, seed=1),
                          model, tokenizer, scorer, args.repeats),
            run_condition("top-10 profile", make_requests(args.profile_pairs, profile=True, seed=2),
                          model, tokenizer, scorer, args.repeats),
        ]
    n_params = sum(p.numel() for p in model.parameters()) / 1e6
    where = (torch.cuda.get_device_name(device) if device.type == "cuda"
             else f"CPU, {torch.get_num_threads()} thread(s)")
    print(f"model: random Llama RM, hidden {args.hidden}, {args.layers} layers, {n_params:.1f}M "
          f"params, {dtype} on {where} (both paths); prbench prefix sharing: "
          f"{scorer.describe()['resolved']['prefix_sharing']}")
    print("pairs/s and ratios from wall-clock time (CUDA synchronised), best of runs")
    print(f"{'condition':<15} {'pairs':>5} {'naive p/s':>9} {'prbench p/s':>11} {'floor p/s':>9} "
          f"{'speed-up':>8} {'vs floor':>8} {'pad naive':>9} {'pad prb':>7} "
          f"{'tokens n/p/f (k)':>17} {'max|Δ|':>8}")
    for r in rows:
        toks = "/".join(
            f"{r[k] / 1e3:.1f}" for k in ("naive_tokens", "prbench_tokens", "floor_tokens")
        )
        print(f"{r['name']:<15} {r['pairs']:>5} {r['pps']['naive']:>9.2f} "
              f"{r['pps']['prbench']:>11.2f} {r['pps']['floor']:>9.2f} {r['speedup']:>7.2f}x "
              f"{r['vs_floor']:>7.2f}x {r['naive_pad']:>9.1%} {r['prbench_pad']:>7.1%} "
              f"{toks:>17} {r['max_diff']:>8.1e}")
    print("targets: speed-up >= 2x (question-only), >= 3x (profile); prbench <= 1.3x the floor")


if __name__ == "__main__":
    main()
