"""The GPU table: RM scoring throughput, MFU, batch drift, OOM back-off and Best-of-N sharing.

One command measures, on one device in one dtype, a random-weight reward model of a real shape
(``--shape``: ``tiny``, ``qwen3-0.6b``, ``llama-3.1-8b``, ``gemma-2-27b``; ``--layers N`` cuts
the depth, and the FLOPs follow) on synthetic pairs at the published sizes (``bench_scoring``'s
generator: a ~12-word question, answers of ~130 tokens, a top-10 profile of ~1,500 tokens), and
prints one table, the same rows on a CPU and on CUDA:

- ``question-only`` and ``top-10 profile`` throughput: the released path (the authors' plain HF
  forward: dataset order, batches of 8, padded to the longest; same device and dtype), the
  prbench runtime (``hf-classifier``, score cache off), the same with ``packing=on`` (sequences
  packed end to end in rows, no padding; max |Δ| against the padded runtime) and the FLOP floor
  (each prompt once, each answer once, no padding, at the measured peak);
- ``chunk sweep``: the runtime's ``chunk_size`` on the question-only pairs;
- ``drift``: the same pair's scores alone (one sequence per forward) against inside different
  batches — prbench's, other neighbours, the released path's — as max |Δ| and verdict flips;
- ``oom back-off``: the drift pairs on a simulated device that holds a fixed number of token
  slots (:func:`prbench.testing.token_slot_limit`), against a clean run (question-only: on a
  CPU a profile input is batched alone, so it could never run out of memory in a batch);
- ``best-of-16``: N candidates of a top-10-profile prompt with prefix sharing against without,
  and prefix sharing with ``packing=on``.

Times are wall-clock seconds with CUDA synchronised, after a warm-up, best of ``--repeats``. MFU is
the floor's FLOPs (see ``_common.py``: ``2 * N * tokens`` with ``N`` the non-embedding parameters,
plus causal attention ``4 * L * d_attn`` per (query, key) pair; each shared prompt once) divided by
wall time times the peak of a large matmul in the same dtype measured in the same run. Every row
of a section does the same useful work, so MFU compares them directly. Examples::

    python benchmarks/bench_gpu_table.py           # CUDA: llama-3.1-8b in bf16; CPU: tiny
    python benchmarks/bench_gpu_table.py --shape qwen3-0.6b --layers 2 --json table.json
    python benchmarks/bench_gpu_table.py --shape gemma-2-27b --pairs 256   # needs ~60 GB
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    DTYPES,
    SHAPES,
    best_of,
    build_shape_model,
    floor_flops,
    flop_model,
    lent_model,
    measure_peak_flops,
    resolve,
    shape_config,
    timed,
)
from bench_prefix_bon import make_groups
from bench_scoring import build_tokenizer, make_requests, naive_scores

#: Workload defaults per device type (a flag given on the command line wins).
DEFAULTS: dict[str, dict[str, Any]] = {
    "cuda": {"shape": "llama-3.1-8b", "pairs": 1024, "profile_pairs": 128, "bon_prompts": 8,
             "chunks": "32,128,512,2048", "drift_pairs": 128},
    "cpu": {"shape": "tiny", "pairs": 16, "profile_pairs": 4, "bon_prompts": 1,
            "chunks": "4,16,64", "drift_pairs": 16},
}
COLUMNS = ("section", "row", "items", "wall s", "items/s", "MFU", "vs ref", "notes")
#: ``--sections`` names: the throughput sections, the chunk sweep, drift, OOM back-off, Best-of-N.
SECTIONS = ("throughput", "chunks", "drift", "oom", "bon")


@dataclasses.dataclass
class Row:
    """One line of the table.

    Attributes:
        section: the table section.
        name: what ran.
        items: pairs (or candidates) scored.
        unit: ``pairs`` or ``cands``.
        wall: wall seconds (``None``: not timed on its own).
        mfu: the floor's FLOPs / (wall * peak).
        ratio: the section reference's time / this time (> 1: faster than the reference).
        notes: tokens, padding, differences, back-offs.
        figures: the numbers behind the notes (for ``--json``).
    """

    section: str
    name: str
    items: int
    unit: str
    wall: float | None
    mfu: float | None
    ratio: float | None
    notes: str
    figures: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def rate(self) -> float | None:
        """Items per second."""
        return self.items / self.wall if self.wall else None


def _flips(ref: Sequence[float], other: Sequence[float]) -> int:
    """Pairs (chosen, rejected in turn) whose verdict differs between two score lists."""
    return sum(
        (ref[i] > ref[i + 1]) != (other[i] > other[i + 1]) for i in range(0, len(ref) - 1, 2)
    )


def _max_diff(a: Sequence[float], b: Sequence[float]) -> float:
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


def _scale(scores: Sequence[float]) -> tuple[float, float]:
    """``(median |score|, median |margin|)`` of scores listed chosen, rejected in turn."""
    import statistics

    margins = [abs(scores[i] - scores[i + 1]) for i in range(0, len(scores) - 1, 2)]
    return statistics.median(abs(s) for s in scores), statistics.median(margins)


def _near_ties(scores: Sequence[float], bound: float) -> int:
    """Pairs whose margin is at most ``bound`` (their verdict can turn on rounding alone)."""
    return sum(abs(scores[i] - scores[i + 1]) <= bound for i in range(0, len(scores) - 1, 2))


class Table:
    """Runs the sections on one model and collects their rows."""

    def __init__(self, args: argparse.Namespace, device: Any, dtype: str, model: Any,
                 folder: Path, tokenizer: Any, peak: float) -> None:
        self.args, self.device, self.dtype, self.model = args, device, dtype, model
        self.folder, self.tokenizer, self.peak = folder, tokenizer, peak
        self.flops = flop_model(model)
        self.rows: list[Row] = []
        self.warm = make_requests(2, profile=False, seed=99)

    def runtime(self, **options: Any) -> Any:
        """An ``hf-classifier`` runtime on the benchmark's model, warmed up (cache off)."""
        from prbench.scoring.spec import build_runtime

        rt = build_runtime("hf-classifier", {
            "pretrained": str(self.folder), "device": str(self.device), "dtype": self.dtype,
            "cache": False, "progress": False, **options,
        })
        rt.score(self.warm)  # loads, picks the token budget, runs the sharing check
        return rt

    def floor(self, scorer: Any, requests: Sequence[Any]) -> tuple[int, int]:
        """The floor's (FLOPs, tokens) for ``requests`` (each prompt once, no padding)."""
        seqs = scorer.encode(requests)
        return floor_flops(self.flops, seqs, [(r.question, r.profile.text) for r in requests])

    def mfu(self, flops: int, wall: float | None) -> float | None:
        return flops / (wall * self.peak) if wall else None

    def add(self, *rows: Row) -> None:
        self.rows.extend(rows)

    def _floor_row(self, section: str, items: int, unit: str, flops: int, tokens: int,
                   ref: float) -> Row:
        secs = flops / self.peak
        return Row(section, "FLOP floor (at the measured peak)", items, unit, secs, 1.0,
                   ref / secs, f"{tokens / 1e3:.1f}k tokens, {flops / 1e12:.3g} TFLOP",
                   {"flops": flops, "tokens": tokens})

    def throughput(self, section: str, requests: list[Any]) -> tuple[list[float], list[float]]:
        """Released path vs prbench vs floor; returns (prbench scores, released scores)."""
        reps, dev, n = self.args.repeats, self.device, len(requests) // 2
        t_rel, (released, slots, real) = best_of(
            reps, lambda: naive_scores(self.model, self.tokenizer, requests), dev)
        rt = self.runtime()
        before = dict(rt.scorer.stats)
        t_prb, ours = best_of(reps, lambda: rt.score(requests), dev)
        p_slots = rt.scorer.stats["padded_tokens"] - before["padded_tokens"]
        p_real = rt.scorer.stats["real_tokens"] - before["real_tokens"]
        sharing = rt.scorer.stats()["prefix_sharing"]
        flops, tokens = self.floor(rt.scorer, requests)
        rt.close()
        diff = _max_diff(released, ours)
        packed = self.packed_row(section, requests, ours, flops, t_rel)
        self.add(
            Row(section, "released path (HF forward, batch 8)", n, "pairs", t_rel,
                self.mfu(flops, t_rel), 1.0,
                f"{slots / 1e3:.1f}k slots, {1 - real / slots:.0%} padding",
                {"slots": slots, "real_tokens": real}),
            Row(section, "prbench runtime", n, "pairs", t_prb, self.mfu(flops, t_prb),
                t_rel / t_prb,
                f"{p_slots / reps / 1e3:.1f}k slots, {1 - p_real / p_slots:.0%} padding; max|Δ| "
                f"vs released {diff:.1e}; sharing: {sharing}",
                {"slots": p_slots // reps, "real_tokens": p_real // reps,
                 "max_diff_vs_released": diff, "prefix_sharing": sharing}),
            packed,
            self._floor_row(section, n, "pairs", flops, tokens, t_rel),
        )
        return ours, released

    def packed_row(self, section: str, requests: list[Any], padded: list[float], flops: int,
                   ref: float, unit: str = "pairs", **options: Any) -> Row:
        """The prbench runtime with ``packing=on`` (rows without padding) against padded batches.

        ``padded`` are the same requests' scores from padded batches (the row reports max |Δ|).
        """
        reps, items = self.args.repeats, len(requests) // (2 if unit == "pairs" else 1)
        rt = self.runtime(packing="on", **options)
        before = dict(rt.scorer.stats)
        secs, scores = best_of(reps, lambda: rt.score(requests), self.device)
        slots = rt.scorer.stats["padded_tokens"] - before["padded_tokens"]
        real = rt.scorer.stats["real_tokens"] - before["real_tokens"]
        note = rt.scorer.stats()["packing"]
        rt.close()
        diff = _max_diff(padded, scores)
        name = "prbench runtime, packed" if unit == "pairs" else "prefix sharing, packed"
        return Row(section, name, items, unit, secs, self.mfu(flops, secs), ref / secs,
                   f"{slots / reps / 1e3:.1f}k slots, {1 - real / slots:.0%} padding; max|Δ| vs "
                   f"padded {diff:.1e}; packing: {note}",
                   {"slots": slots // reps, "real_tokens": real // reps,
                    "max_diff_vs_padded": diff, "packing": note})

    def chunk_sweep(self, requests: list[Any], chunks: Sequence[int]) -> None:
        """The runtime's chunk size: time and MFU per size, against the first size."""
        ref = None
        n = len(requests) // 2
        for size in chunks:
            rt = self.runtime(chunk_size=size)
            before = dict(rt.scorer.stats)
            secs, _ = best_of(self.args.repeats, lambda rt=rt: rt.score(requests), self.device)
            batches = (rt.scorer.stats["batches"] - before["batches"]) // self.args.repeats
            flops, _ = self.floor(rt.scorer, requests)
            budget = rt.scorer.stats()["token_budget"]
            rt.close()
            ref = ref or secs
            self.add(Row("chunk sweep", f"chunk_size {size}", n, "pairs", secs,
                         self.mfu(flops, secs), ref / secs,
                         f"{batches} batches, token budget {budget}",
                         {"chunk_size": size, "batches": batches, "token_budget": budget}))

    def drift(self, requests: list[Any], batched: list[float], released: list[float]) -> None:
        """The same pairs' scores alone vs inside different batches (max |Δ|, verdict flips)."""
        k = min(len(requests), 2 * self.args.drift_pairs)
        reqs, n = requests[:k], k // 2
        section = f"drift ({self.dtype})"
        rt = self.runtime(max_batch_size=1, prefix_sharing="off")
        t_alone, alone = timed(lambda: rt.score(reqs), self.device)
        flops, _ = self.floor(rt.scorer, reqs)
        rt.close()
        # other neighbours: mixed with other pairs and shuffled, plain batches, another chunking
        others = make_requests(n, profile=False, seed=3)
        mixed = reqs + others
        order = list(range(len(mixed)))
        random.Random(5).shuffle(order)
        rt = self.runtime(prefix_sharing="off", chunk_size=max(2, k // 3))
        shuffled = rt.score([mixed[i] for i in order])
        rt.close()
        neighbours = [0.0] * len(mixed)
        for pos, i in enumerate(order):
            neighbours[i] = shuffled[pos]
        others_scores = {"prbench batches (as timed above)": batched[:k],
                         "prbench, other neighbours": neighbours[:k],
                         "released path, batches of 8": released[:k]}
        worst = max(_max_diff(alone, s) for s in others_scores.values())
        size, margin = _scale(alone)
        near = _near_ties(alone, worst)
        self.add(Row(section, "alone (one sequence per forward)", n, "pairs", t_alone,
                     self.mfu(flops, t_alone), 1.0,
                     f"the reference scores: median |score| {size:.3g}, median |margin| "
                     f"{margin:.3g}; {near}/{n} pairs with |margin| <= the largest |Δ| below",
                     {"median_abs_score": size, "median_abs_margin": margin, "near_ties": near}))
        for name, scores in others_scores.items():
            diff, flips = _max_diff(alone, scores), _flips(alone, scores)
            self.add(Row(section, name, n, "pairs", None, None, None,
                         f"max|Δ| vs alone {diff:.1e}, verdict flips {flips}/{n}",
                         {"max_diff": diff, "flips": flips}))

    def oom(self, requests: list[Any]) -> None:
        """A clean run against one on a simulated device too small for its largest forward.

        The device holds ``--oom-slots`` token slots (default: a quarter of the clean run's
        largest forward pass, at least twice the longest input, so every input still fits).
        """
        from prbench.testing import token_slot_limit

        n = len(requests) // 2
        section = "oom back-off"
        clean_rt = self.runtime()
        decoder = clean_rt.scorer._parts[0] if clean_rt.scorer._parts else clean_rt.scorer.model
        before = dict(clean_rt.scorer.stats)
        with token_slot_limit(decoder, 0) as needed:
            t_clean, clean = timed(lambda: clean_rt.score(requests), self.device)
        clean_real = clean_rt.scorer.stats["real_tokens"] - before["real_tokens"]
        budget = clean_rt.scorer.stats()["token_budget"]
        longest = max(len(s) for s in clean_rt.scorer.encode(requests))
        flops, _ = self.floor(clean_rt.scorer, requests)
        clean_rt.close()
        limit = self.args.oom_slots or max(2 * longest, needed["max_slots"] // 4)
        rt = self.runtime()
        scorer = rt.scorer
        before = dict(scorer.stats)
        runtime_before = rt.stats()["oom_retries"]
        with token_slot_limit(decoder, limit) as counts:
            t_oom, scores = timed(lambda: rt.score(requests), self.device)
        after = scorer.stats()
        retries = after["oom_retries"] - before["oom_retries"]
        runtime_retries = rt.stats()["oom_retries"] - runtime_before
        wasted = after["wasted_tokens"] - before["wasted_tokens"]
        real = after["real_tokens"] - before["real_tokens"]
        chunk = rt.stats()["chunk_size"]
        rt.close()
        diff = _max_diff(clean, scores)
        same = "equal" if real == clean_real else f"{real} vs {clean_real}"
        self.add(
            Row(section, "clean run", n, "pairs", t_clean, self.mfu(flops, t_clean), 1.0,
                f"token budget {budget}, largest forward {needed['max_slots']} slots, "
                f"{clean_real / 1e3:.1f}k real tokens",
                {"token_budget": budget, "max_slots": needed["max_slots"],
                 "real_tokens": clean_real}),
            Row(section, f"simulated OOM past {limit} slots", n, "pairs", t_oom,
                self.mfu(flops, t_oom), t_clean / t_oom,
                f"{counts['failures']} OOMs: {retries} scorer + {runtime_retries} runtime "
                f"back-offs, {wasted / 1e3:.1f}k wasted tokens; budget {budget}->"
                f"{after['token_budget']}, chunk {chunk}; real tokens {same}; max|Δ| {diff:.1e}",
                {"limit": limit, "failures": counts["failures"], "scorer_oom_retries": retries,
                 "runtime_oom_retries": runtime_retries, "wasted_tokens": wasted,
                 "token_budget": after["token_budget"], "chunk_size": chunk,
                 "real_tokens": real, "max_diff": diff}),
        )

    def best_of_n(self, groups: list[list[Any]]) -> None:
        """N candidates per prompt: prefix sharing (auto) against none."""
        flat = [r for g in groups for r in g]
        n = len(flat)
        section = f"best-of-{len(groups[0])}"
        plain = self.runtime(prefix_sharing="off")
        t_plain, s_plain = best_of(self.args.repeats, lambda: plain.score(flat), self.device)
        plain.close()
        shared = self.runtime(prefix_sharing="auto")
        before = dict(shared.scorer.stats)
        t_shared, s_shared = best_of(self.args.repeats, lambda: shared.score(flat), self.device)
        saved = (shared.scorer.stats["shared_tokens_saved"]
                 - before["shared_tokens_saved"]) // self.args.repeats
        state = shared.scorer.stats()["prefix_sharing"]
        flops, tokens = self.floor(shared.scorer, flat)
        shared.close()
        diff = _max_diff(s_plain, s_shared)
        packed = self.packed_row(section, flat, s_shared, flops, t_plain, unit="cands",
                                 prefix_sharing="auto")
        self.add(
            Row(section, "no sharing", n, "cands", t_plain, self.mfu(flops, t_plain), 1.0,
                f"{len(groups)} prompt(s) x {len(groups[0])}"),
            Row(section, "prefix sharing", n, "cands", t_shared, self.mfu(flops, t_shared),
                t_plain / t_shared,
                f"{saved / 1e3:.1f}k tokens saved; max|Δ| {diff:.1e}; sharing: {state}",
                {"saved_tokens": saved, "max_diff": diff, "prefix_sharing": state}),
            packed,
            self._floor_row(section, n, "cands", flops, tokens, t_plain),
        )


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None or not math.isfinite(value) else format(value, spec)


def format_table(rows: Sequence[Row]) -> list[str]:
    """The table's lines: a header, then one line per row, sections separated by a rule."""
    head = (f"{COLUMNS[0]:<16} {COLUMNS[1]:<38} {COLUMNS[2]:>10} {COLUMNS[3]:>8} "
            f"{COLUMNS[4]:>9} {COLUMNS[5]:>6} {COLUMNS[6]:>7}  {COLUMNS[7]}")
    lines, last = [head, "-" * len(head)], None
    for r in rows:
        if last is not None and r.section != last:
            lines.append("")
        last = r.section
        ratio = "-" if r.ratio is None else f"{r.ratio:.2f}x"
        lines.append(
            f"{r.section:<16} {r.name:<38} {f'{r.items} {r.unit}':>10} {_fmt(r.wall, '8.3f'):>8} "
            f"{_fmt(r.rate, '9.1f'):>9} {_fmt(r.mfu, '6.3f'):>6} {ratio:>7}  {r.notes}"
        )
    return lines


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line, with workload defaults filled in for the device."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda:N")
    parser.add_argument("--dtype", default="auto", choices=list(DTYPES),
                        help="auto = bf16 on CUDA, fp32 on a CPU")
    parser.add_argument("--shape", choices=["auto", *SHAPES], default="auto",
                        help="model shape (auto: llama-3.1-8b on CUDA, tiny on a CPU)")
    parser.add_argument("--layers", type=int, default=0, help="cut the shape to N layers")
    parser.add_argument("--pairs", type=int, help="question-only pairs (CUDA 1024, CPU 16)")
    parser.add_argument("--profile-pairs", type=int, help="top-10-profile pairs (CUDA 128, CPU 4)")
    parser.add_argument("--bon-prompts", type=int, help="Best-of-N prompts (CUDA 8, CPU 1)")
    parser.add_argument("--n", type=int, default=16, help="Best-of-N candidates per prompt")
    parser.add_argument("--chunks",
                        help="chunk sizes to sweep (CUDA 32,128,512,2048; CPU 4,16,64)")
    parser.add_argument("--drift-pairs", type=int, help="pairs scored alone (CUDA 128, CPU 16)")
    parser.add_argument("--oom-slots", type=int, default=0,
                        help="simulated device size in token slots (0: a quarter of the largest "
                        "forward of a clean run, at least twice the longest input)")
    parser.add_argument("--repeats", type=int, default=1, help="best of N timed runs")
    parser.add_argument("--peak-size", type=int, default=0,
                        help="matmul size for the peak (0: 8192 on CUDA, 1024 on a CPU)")
    parser.add_argument("--threads", type=int, default=0, help="CPU torch threads (0: as is)")
    parser.add_argument("--json", metavar="OUT", help="also write the figures to this JSON file")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated sections to run (default all: {','.join(SECTIONS)};"
                        " drift needs throughput)")
    args = parser.parse_args(argv)
    args.sections = [x.strip() for x in str(args.sections).split(",") if x.strip()]
    unknown = [x for x in args.sections if x not in SECTIONS]
    if unknown or not args.sections:
        parser.error(f"--sections: unknown section {', '.join(unknown) or '(none)'}; choose from "
                     f"{', '.join(SECTIONS)}")
    if "drift" in args.sections and "throughput" not in args.sections:
        parser.error("--sections: drift compares against the throughput section's scores")
    try:
        args.device, args.dtype = resolve(args.device, args.dtype)
    except ValueError as exc:
        parser.error(str(exc))
    defaults = DEFAULTS["cuda" if args.device.type == "cuda" else "cpu"]
    for key, value in defaults.items():
        if getattr(args, key) in (None, "auto"):
            setattr(args, key, value)
    try:
        args.chunks = [int(c) for c in str(args.chunks).split(",") if c.strip()]
    except ValueError:
        parser.error(f"--chunks: expected comma-separated integers, got {args.chunks!r}")
    for name in ("pairs", "profile_pairs", "bon_prompts", "n", "drift_pairs", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.n < 2:
        parser.error("--n must be at least 2 (candidates share a prompt)")
    if not args.chunks or min(args.chunks) < 1:
        parser.error("--chunks: every chunk size must be at least 1")
    for name in ("layers", "oom_slots", "peak_size", "threads"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0")
    if args.json and not Path(args.json).resolve().parent.is_dir():
        parser.error(f"--json: folder {Path(args.json).resolve().parent} does not exist")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the whole table, print it (and write ``--json``); return the figures."""
    args = parse_args(argv)
    start = time.perf_counter()
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    prbench_log = logging.getLogger("prbench")
    level = prbench_log.level
    hf_logging.set_verbosity_error()
    prbench_log.setLevel(logging.ERROR)  # back-offs are in the table's notes
    try:
        return _run_table(args, start)
    finally:  # the caller's logging (a test, a notebook) is left as it was
        prbench_log.setLevel(level)
        hf_logging.set_verbosity(verbosity)


def _run_table(args: argparse.Namespace, start: float) -> dict[str, Any]:
    """The body of :func:`main`, with its logging set."""
    import torch

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.threads:
        torch.set_num_threads(args.threads)
    device, dtype, shape = args.device, args.dtype, SHAPES[args.shape]
    with tempfile.TemporaryDirectory(prefix="prbench-gpu-table-") as tmp:
        folder = Path(tmp, "rm")
        tokenizer = build_tokenizer(folder)
        config = shape_config(shape, layers=args.layers, vocab=len(tokenizer),
                              pad_id=tokenizer.pad_token_id, bos_id=tokenizer.bos_token_id)
        config.save_pretrained(folder)
        model = build_shape_model(config, device, dtype)
        peak = measure_peak_flops(device, dtype, size=args.peak_size)
        table = Table(args, device, dtype, model, folder, tokenizer, peak)
        with lent_model(model):
            naive_scores(model, tokenizer, table.warm)
            question = make_requests(args.pairs, profile=False, seed=1)
            profile = make_requests(args.profile_pairs, profile=True, seed=2)
            wanted = set(args.sections)
            if "throughput" in wanted:
                batched, released = table.throughput("question-only", question)
                table.throughput("top-10 profile", profile)
            if "chunks" in wanted:
                table.chunk_sweep(question, args.chunks)
            if "drift" in wanted:
                table.drift(question, batched, released)
            if "oom" in wanted:
                table.oom(question[: 2 * args.drift_pairs])
            if "bon" in wanted:
                table.best_of_n(make_groups(args.bon_prompts, args.n, seed=7))
    where = (torch.cuda.get_device_name(device) if device.type == "cuda"
             else f"CPU, {torch.get_num_threads()} thread(s)")
    total = sum(p.numel() for p in model.parameters())
    meta = {
        "device": str(device), "device_name": where, "dtype": dtype, "shape": args.shape,
        "arch": shape.arch, "source": shape.source, "layers": config.num_hidden_layers,
        "hidden": shape.hidden, "params": total, "non_embedding_params": table.flops.params,
        "attn_dim": table.flops.attn_dim, "peak_flops": peak, "pairs": args.pairs,
        "profile_pairs": args.profile_pairs, "bon_prompts": args.bon_prompts, "n": args.n,
        "repeats": args.repeats, "torch": torch.__version__,
    }
    matmul = (dtype if device.type == "cuda" or dtype == "float32"
              else f"the faster of a {dtype} and a float32")
    lines = [
        f"prbench GPU table: {where}, {dtype}; shape {args.shape} ({shape.source}; "
        f"{config.num_hidden_layers} layers, hidden {shape.hidden}): "
        f"{table.flops.params / 1e6:.1f}M non-embedding params, {total / 1e6:.1f}M in all",
        f"peak {peak / 1e12:.3g} TFLOP/s ({matmul} matmul, this run); floor FLOPs = 2*N*tokens + "
        "4*L*d_attn*(query, key) pairs, each prompt once, no padding; MFU = floor / (wall * peak)",
        "", *format_table(table.rows), "",
        f"wall clock (CUDA synchronised), after a warm-up, best of {args.repeats}; vs ref = the "
        "section's first row's time / this row's time",
    ]
    if any(r.mfu is not None and r.mfu > 1 for r in table.rows):
        lines.append("note: an MFU above 1 means the model ran faster than the measured matmul "
                     "peak: the peak is too low (raise --peak-size)")
    elapsed = time.perf_counter() - start
    lines.append(f"whole table: {elapsed:.0f} s")
    print("\n".join(lines))
    result = {"meta": meta, "seconds": elapsed,
              "rows": [{**dataclasses.asdict(r), "rate": r.rate} for r in table.rows]}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
