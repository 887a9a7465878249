"""Peak memory of ``prbench eval`` against the same data loaded by ``datasets``, as ratios.

For each size (records) the script writes a synthetic JSON Lines file in the benchmark's schema
(a question, two answers of about 100 words, a narrative, rubric aspects and a profile of
``--posts`` posts per user), then runs in child processes, one at a time:

* baseline: ``datasets.load_dataset("json", ..., keep_in_memory=True)`` of that file (the data
  as ``datasets`` holds it in memory), and
* ``prbench eval --tasks personalized_rewardbench_custom_noprofile`` with the ``length`` scorer
  (the cheapest: the memory is the data's), once with ``--limit 1`` and once in full.

Each child's peak resident memory (``ru_maxrss`` from ``wait4``) is printed in MB with the ratio
``eval / baseline`` measured in the same run. Nothing is timed.

    python benchmarks/bench_eval_memory.py                   # 2,830 and 20,000 records
    python benchmarks/bench_eval_memory.py --sizes 2830 20000 100000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

WORDS = [
    "the", "a", "user", "asked", "about", "painting", "guitar", "budget", "travel",
    "family", "career", "garden", "recipe", "history", "novel", "film", "practice",
    "routine", "sleep", "diet", "habit", "study", "language", "museum", "camera",
    "workshop", "neighbour", "winter", "summer", "lesson", "project", "advice", "feeling",
    "goal", "plan",
]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def write_data(path: Path, n: int, posts: int, seed: int = 0) -> int:
    """Write ``n`` synthetic records to ``path``; returns its size in bytes."""
    rng = random.Random(seed)
    domains = ("Art_and_Entertainment", "Lifestyle_and_Personal_Development",
               "Society_and_Culture")
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            record = {
                "id": f"r{i}",
                "domain": domains[i % 3],
                "category": "synthetic",
                "question": _text(rng, 12) + "?",
                "narrative": _text(rng, 150),
                "rubric_aspects": [{"aspect": _text(rng, 4), "evidence": _text(rng, 12),
                                    "reason": _text(rng, 12)} for _ in range(5)],
                "profile": [{"id": f"p{i}-{j}", "category": "synthetic",
                             "text": _text(rng, 60)} for j in range(posts)],
                "chosen": _text(rng, 100),
                "rejected": _text(rng, 100),
            }
            fh.write(json.dumps(record) + "\n")
    return path.stat().st_size


def peak_mb(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int]:
    """Run ``argv``; its peak resident memory in MB and its exit code."""
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.stderr.write(err.decode(errors="replace")[-2000:])
    return usage.ru_maxrss / 1024, proc.returncode  # Linux: KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2830, 20000])
    parser.add_argument("--posts", type=int, default=8, help="profile posts per record")
    parser.add_argument("--no_full", action="store_true", help="only the --limit 1 runs")
    args = parser.parse_args()
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", TQDM_DISABLE="1")
    with tempfile.TemporaryDirectory(prefix="prbench-mem-") as tmp:
        folder = Path(tmp)
        env["PRBENCH_CACHE_DIR"] = str(folder / "cache")
        env["HF_DATASETS_CACHE"] = str(folder / "hf")
        print(f"{'records':>8} {'file MB':>8} {'datasets MB':>11} {'eval --limit 1':>15} "
              f"{'ratio':>6} {'eval full':>10} {'ratio':>6}")
        for n in args.sizes:
            data = folder / f"d{n}.jsonl"
            size = write_data(data, n, args.posts)
            base, _ = peak_mb([sys.executable, "-c",
                               "import datasets, sys; d = datasets.load_dataset('json', "
                               "data_files=sys.argv[1], split='train', keep_in_memory=True); "
                               "print(len(d))", str(data)], env, folder)
            run = [sys.executable, "-m", "prbench.cli", "eval", "--tasks",
                   "personalized_rewardbench_custom_noprofile", "--model_args",
                   "scorer=length,cache=false,progress=false", "--metadata",
                   json.dumps({"prbench_data": str(data)}), "--no_summary"]
            one, rc1 = peak_mb([*run, "--limit", "1"], env, folder)
            full, rc2 = (float("nan"), 0) if args.no_full else peak_mb(run, env, folder)
            flag = "" if rc1 == rc2 == 0 else "  (a run failed, see above)"
            print(f"{n:>8} {size / 1e6:>8.1f} {base:>11.0f} {one:>15.0f} {one / base:>6.2f} "
                  f"{full:>10.0f} {full / base:>6.2f}{flag}", flush=True)


if __name__ == "__main__":
    main()
