"""Time and peak memory of ``prbench validate`` on a large synthetic jsonl file.

    python benchmarks/bench_validate.py [--records 20000] [--posts 7] [--keep]

Writes a seeded synthetic file of ``--records`` records into a temporary folder, at the sizes of
the published records (a question of ~12 words, a ~150-word narrative, ~5 rubric aspects, two
~100-word answers, ``--posts`` profile posts of ~60 words: about 6.5 KB a record, the size of the
100,000-record / 650 MB file of issue 15), then runs ``prbench validate FILE --format json`` in a
child process and prints its wall time and peak resident memory (``ru_maxrss`` of the child), and
the file size. The generation happens in this process, so it does not count towards the child's
memory. Absolute times vary a lot on shared CPUs; memory is the stable figure. The child imports
prbench from ``PYTHONPATH``: to compare two checkouts, run the script from a folder outside both,
e.g. ``cd /tmp && PYTHONPATH=/path/to/checkout python .../bench_validate.py``.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = (
    "paint", "watercolor", "paper", "brush", "canvas", "guitar", "chord", "song", "film", "camera",
    "lens", "garden", "soil", "tomato", "recipe", "bread", "oven", "travel", "train", "hostel",
    "budget", "rent", "salary", "career", "interview", "sleep", "toddler", "school", "homework",
    "neighbour", "noise", "running", "knee", "marathon", "diet", "coffee", "tea", "novel",
    "poetry", "chess", "history", "museum", "vote", "community", "church", "festival", "language",
    "grammar", "the", "a", "my", "with", "for", "and", "every", "weekend", "small", "quiet",
)


def write_file(path: Path, n: int, posts: int, seed: int = 0) -> int:
    """Write ``n`` synthetic records as jsonl to ``path``; the file size in bytes."""
    rng = random.Random(seed)

    def words(k: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(k)).capitalize() + "."

    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            row = {
                "id": f"user-{i:07d}",
                "question": words(rng.randint(9, 14)) + "?",
                "profile": [
                    {"id": f"user-{i:07d}-p{j}", "category": "General", "text": words(60)}
                    for j in range(rng.randint(posts - 2, posts + 2))
                ],
                "narrative": words(rng.randint(130, 170)),
                "rubric_aspects": [
                    {"aspect": words(5), "evidence": words(10), "reason": words(8)}
                    for _ in range(rng.randint(4, 6))
                ],
                "category": rng.choice(("cooking", "travel", "music", "parenting")),
                "chosen": words(rng.randint(90, 110)),
                "rejected": words(rng.randint(90, 110)),
            }
            handle.write(json.dumps(row) + "\n")
    return path.stat().st_size


CHILD = """
import contextlib, io, resource, sys, time
from prbench.cli import main
start = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = main(["validate", sys.argv[1], "--format", "json"])
seconds = time.perf_counter() - start
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{code} {seconds:.2f} {peak_mb:.0f}")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--posts", type=int, default=7, help="mean profile posts per record")
    parser.add_argument("--keep", action="store_true", help="keep the generated file")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="prbench-bench-validate-"))
    path = folder / "Society_and_Culture.jsonl"
    size = write_file(path, args.records, args.posts)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    wall = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - wall
    if done.returncode != 0:
        sys.exit(f"the child failed:\n{done.stderr}")
    code, seconds, peak_mb = done.stdout.split()
    print(
        f"records {args.records}, file {size / 2**20:.1f} MiB ({size / args.records / 1024:.2f} "
        f"KiB/record): prbench validate exit {code}, {float(seconds):.1f} s, peak RSS "
        f"{peak_mb} MiB (child wall {wall:.1f} s; children max RSS before {before // 1024} MiB)"
    )
    if args.keep:
        print(f"kept {path}")
    else:
        path.unlink()
        folder.rmdir()


if __name__ == "__main__":
    main()
