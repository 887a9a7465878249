"""Dense profile building with the bundled MiniLM: cold vs cached, and batch size 1 vs 32.

Prints ratios measured in one run (absolute times vary a lot between runs on shared CPUs):

    python benchmarks/bench_dense_profiles.py [--users 8] [--posts 15]

The records are synthetic (sentences assembled from a fixed word list, seeded), so the run needs
no data and no network. The cache goes to a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time

WORDS = (
    "paint", "watercolor", "paper", "brush", "canvas", "guitar", "chord", "song", "film", "camera",
    "lens", "garden", "soil", "tomato", "recipe", "bread", "oven", "travel", "train", "hostel",
    "budget", "rent", "salary", "career", "interview", "sleep", "toddler", "school", "homework",
    "neighbour", "noise", "running", "knee", "marathon", "diet", "coffee", "tea", "novel",
    "poetry", "chess", "history", "museum", "vote", "community", "church", "festival", "language",
    "grammar",
)


def make_records(users: int, posts: int, seed: int = 0) -> list:
    from prbench.records import ProfileItem, Record

    rng = random.Random(seed)

    def sentence(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."

    records = []
    for u in range(users):
        profile = tuple(
            ProfileItem(id=f"u{u}-p{i}", category="General", text=sentence(rng.randint(15, 80)))
            for i in range(posts)
        )
        records.append(
            Record(id=f"u{u}", question=sentence(12), profile=profile, chosen="a", rejected="b")
        )
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--posts", type=int, default=15)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["PRBENCH_CACHE_DIR"] = tempfile.mkdtemp(prefix="prbench-bench-")

    from prbench.profiles.dense import DenseBuilder, DenseOptions
    from prbench.profiles.embed import Encoder, EncoderSpec

    records = make_records(args.users, args.posts)
    n_texts = sum(len(r.profile) + 1 for r in records)
    # load the model once so that neither timing includes it
    Encoder(EncoderSpec(), device="cpu", cache=False).encode(["warm up"])

    timings = {}
    for label, options in [
        ("cold (batch 32)", DenseOptions(device="cpu")),
        ("cached", DenseOptions(device="cpu")),
        ("no cache, batch 1", DenseOptions(device="cpu", cache=False, batch_size=1)),
    ]:
        builder = DenseBuilder(options)
        start = time.perf_counter()
        builder.build(records)
        timings[label] = time.perf_counter() - start
        print(f"{label:>18}: {timings[label]:.3f} s  {builder.encoder.stats}")
    cold = timings["cold (batch 32)"]
    print(f"\n{len(records)} users, {n_texts} texts embedded")
    print(f"cold / cached build:          {cold / timings['cached']:.1f}x")
    print(f"batch 1 / batch 32 (no cache): {timings['no cache, batch 1'] / cold:.2f}x")


if __name__ == "__main__":
    main()
