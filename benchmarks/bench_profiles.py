"""Profile embedding speed and retrieval fidelity per encoder and backend, with a projection.

Generates seeded synthetic records at the published sizes (a ~12-word question; profiles of
log-normal size with mean ~125 posts, capped by ``--max-posts``; posts of 60-200 words drawn
from a few topics per user, so retrieval has something to find) and, for each encoder model:

- ``before``: the order of work before the encoder sorted a call's texts — record order, in steps
  of 256 (each step sorted by the model itself);
- ``torch``: the encoder as it runs now (texts sorted longest first over the whole call);
- ``int8``: an experiment that prbench does not ship: the same model with PyTorch's dynamic int8
  quantisation of every linear layer (CPU only), to show whether it keeps the ranking.

Each row prints posts/s, the speed-up over ``before``, the top-k overlap of each record's ranking
(question vs posts, dot product) with the ``torch`` ranking, the fitted cost per post (time =
fixed + per-post x posts, from two sizes; ``torch`` only) and the projected time to embed the
full test set (2,830 records x ~125 posts = ~354k posts). The cache is off for every timing.
Wall-clock timing with CUDA synchronisation; a warm-up pass loads each model first. Compare the
ratios of one run: absolute times vary between runs on a shared machine. Example::

    python benchmarks/bench_profiles.py                          # MiniLM, CPU
    python benchmarks/bench_profiles.py --models minilm,contriever --device cuda --records 40
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

from _common import timed

FULL_SET_POSTS = 2830 * 125
FUNCTION = [
    "the", "a", "of", "to", "in", "and", "with", "for", "on", "my", "i", "it", "is", "was", "have",
    "do", "can", "should", "but", "so", "this", "that", "when", "about", "because", "really",
    "just", "also", "more", "than", "very", "some", "what", "how",
]
TOPICS = {
    "painting": "paint watercolor brush canvas pigment palette sketch gallery easel colour",
    "music": "guitar chord song band bass rehearsal melody lyrics amplifier concert",
    "garden": "soil tomato compost seedling pruning mulch greenhouse harvest weeds bulbs",
    "cooking": "recipe bread oven dough flour spice simmer roast sauce knife",
    "travel": "train hostel passport luggage itinerary border ferry visa backpack map",
    "money": "budget rent salary savings loan interest mortgage pension tax invoice",
    "career": "interview manager promotion resume colleague deadline meeting contract office",
    "parenting": "toddler school homework bedtime nursery tantrum teacher playground siblings",
    "running": "marathon knee stride pace trainers hill tempo injury stretching race",
    "chess": "opening endgame bishop knight rook gambit tournament rating checkmate pawn",
    "language": "grammar vocabulary accent fluency verb tense dictionary pronunciation idiom",
    "faith": "church prayer community festival tradition scripture ritual pilgrimage choir",
}


def make_records(n: int, max_posts: int, seed: int = 0) -> list:
    """Synthetic records at the published sizes (see the module docstring)."""
    from prbench.records import ProfileItem, Record

    rng = random.Random(seed)
    topics = {name: words.split() for name, words in TOPICS.items()}
    names = sorted(topics)

    def text(topic_mix: list[str], words: int) -> str:
        out = []
        for _ in range(words):
            if rng.random() < 0.45:
                out.append(rng.choice(FUNCTION))
            else:
                out.append(rng.choice(topics[rng.choice(topic_mix)]))
        return " ".join(out).capitalize() + "."

    records = []
    mu = math.log(125) - 0.9**2 / 2  # log-normal with mean ~125 posts
    for u in range(n):
        own = rng.sample(names, rng.randint(2, 4))
        size = max(2, min(max_posts, round(rng.lognormvariate(mu, 0.9))))
        profile = tuple(
            ProfileItem(id=f"u{u}-p{i}", category="General",
                        text=text([rng.choice(own)], rng.randint(60, 200)))
            for i in range(size)
        )
        records.append(Record(id=f"u{u}", question=text([own[0]], 12), profile=profile,
                              chosen="a", rejected="b"))
    return records


def _int8_copy(model):
    """A deep copy of a loaded encoder model with dynamic int8 linear layers (the experiment)."""
    import copy
    import warnings

    import torch

    clone = copy.deepcopy(model)
    with warnings.catch_warnings():  # torch points eager quantisation users at torchao
        warnings.simplefilter("ignore")
        torch.ao.quantization.quantize_dynamic(
            clone.model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
        )
    return clone


def _before(encoder, texts: list[str]):
    """The encoder's model fed in record order, 256 texts per step (the old order of work)."""
    import numpy as np

    model = encoder._get_model()
    step = max(encoder.batch_size * 8, 256)
    return np.concatenate([model.embed(texts[i : i + step], encoder.batch_size)
                           for i in range(0, len(texts), step)])


def _overlap(records, questions, posts, ref_q, ref_p, k: int) -> float:
    """Mean top-k overlap of each record's post ranking with the reference ranking."""
    import numpy as np

    shares, start = [], 0
    for i, r in enumerate(records):
        n = len(r.profile)
        kk = min(k, n)
        mine = np.argsort(-(posts[start : start + n] @ questions[i]), kind="stable")[:kk]
        ref = np.argsort(-(ref_p[start : start + n] @ ref_q[i]), kind="stable")[:kk]
        shares.append(len(set(mine) & set(ref)) / kk)
        start += n
    return float(sum(shares) / len(shares))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="minilm",
                        help="comma list: minilm, contriever, a hub id or a folder")
    parser.add_argument("--backends", default="torch,int8",
                        help="comma list: torch, int8 (the experiment, not shipped)")
    parser.add_argument("--records", type=int, default=4)
    parser.add_argument("--max-posts", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--k", default="5,10")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["PRBENCH_CACHE_DIR"] = tempfile.mkdtemp(prefix="prbench-bench-")

    from prbench.profiles.embed import Encoder, EncoderSpec, ModelUnavailableError

    records = make_records(args.records, args.max_posts)
    texts = [p.text for r in records for p in r.profile]
    questions = [r.question for r in records]
    half = texts[: len(texts) // 2]
    ks = [int(k) for k in args.k.split(",")]
    words = sum(len(t.split()) for t in texts) / len(texts)
    print(f"{len(records)} records, {len(texts)} posts (mean {words:.0f} words), "
          f"device {args.device}, batch {args.batch_size}; cache off")
    head = f"{'model':<12} {'path':<7} {'posts/s':>8} {'vs before':>9} " + " ".join(
        f"{'top' + str(k):>6}" for k in ks) + f" {'s/post':>8} {'fixed s':>8} {'full set':>9}"
    print(head)
    for model in args.models.split(","):
        rows: dict[str, tuple[float, object, object, str]] = {}
        for path in ["before", *args.backends.split(",")]:
            backend = "torch" if path == "before" else path
            if backend == "int8" and not args.device.startswith("cpu"):
                print(f"{model:<12} {path:<7} skipped: int8 runs on a CPU only")
                continue
            try:
                enc = Encoder(EncoderSpec(model=model), device=args.device,
                              batch_size=args.batch_size, cache=False)
                if backend == "int8":  # a private copy of the model, quantised in place
                    enc._model = _int8_copy(enc._get_model())
                enc.encode(texts[:8])  # warm-up: load the model, first kernels
            except ModelUnavailableError as exc:
                print(f"{model:<12} skipped: {exc}")
                break
            if path == "before":
                secs, posts = timed(lambda enc=enc: _before(enc, texts), args.device)
            else:
                secs, posts = timed(lambda enc=enc: enc.encode(texts), args.device)
            rate = len(texts) / secs
            if path == "torch":  # time = fixed + per_post x posts, from two sizes
                t_half, _ = timed(lambda enc=enc: enc.encode(half), args.device)
                per_post = (secs - t_half) / (len(texts) - len(half))
                fixed = max(0.0, secs - per_post * len(texts))
                fit = (f" {per_post:>8.4f} {fixed:>8.2f} "
                       f"{(fixed + per_post * FULL_SET_POSTS) / 3600:>8.2f}h")
            else:
                fit = f" {'':>8} {'':>8} {FULL_SET_POSTS / rate / 3600:>8.2f}h"
            rows[path] = (rate, enc.encode(questions), posts, fit)
        if "torch" not in rows or "before" not in rows:
            continue
        _, ref_q, ref_p, _ = rows["torch"]
        base = rows["before"][0]
        for path, (rate, q, posts, fit) in rows.items():
            overlaps = [_overlap(records, q, posts, ref_q, ref_p, k) for k in ks]
            print(f"{model:<12} {path:<7} {rate:>8.1f} {rate / base:>8.2f}x "
                  + " ".join(f"{o:>6.3f}" for o in overlaps) + fit)
    print("overlap: share of each record's top-k posts (vs the torch ranking) kept; "
          "full set: 2,830 records x ~125 posts")


if __name__ == "__main__":
    main()
