"""Rank every record's posts once with an embedding model, for the `ranked` profile builder.

``prbench rank DATA -o OUT`` embeds each record's question and posts with the ``dense`` builder
(``--profile_args builder=dense,model=contriever``) and writes each record's posts in
retrieval order with their scores, the encoder's identity and a hash of each record's question and
posts (see :mod:`prbench.profiles.ranked`). Evaluations then read their top-k from OUT on any
machine (``--metadata '{"prbench_ranked": "OUT"}'``) instead of embedding: run this once on a GPU,
evaluate anywhere. Running it again on the same OUT ranks only the records not in it yet (a run
that was stopped resumes); OUT made with another encoder or another --profile_source, holding
other versions of the same records, or edited by hand (each line carries a chained checksum), is
refused.

``--executor ray --shards N`` embeds the records to rank as N shards, each a Ray task on the
cluster (:mod:`prbench.profiles.rank_shards`), and writes the same rank file a local run
would, byte for byte with ``embed_dtype=float32``; a re-run embeds only the unfinished shards.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prbench.profiles.embed import EncodeStats

from prbench.outputs import append_line, write_text

#: posts embedded per step; each step's records are written before the next starts
DEFAULT_STEP_POSTS = 4096


#: where the command writes, checked before any work (:func:`prbench.cli.check_outputs`)
OUTPUTS = {"output_path": "file"}

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``prbench rank``."""
    from prbench.commands import add_component_argument

    parser.add_argument(
        "data",
        help="a .jsonl/.json/.parquet file, a folder of per-domain files, 'sample' or a hub "
        "dataset id",
    )
    parser.add_argument("-o", "--output_path", required=True,
                        help="the ranking file to write (.jsonl); an existing one is resumed")
    add_component_argument(
        parser, "profile", default="dense",
        help="the profile builder that ranks (dense, the only one that embeds) and its options, "
        "e.g. builder=dense,model=contriever (listed by `prbench scorers --kind profile-builder "
        "--options dense`)",
    )
    parser.add_argument("--device", default=None,
                        help="auto | cpu | cuda | cuda:N (default: the builder's device option, "
                        "auto unless --profile_args sets it)")
    parser.add_argument(
        "--batch_size", default="auto",
        help="texts per forward pass; auto = the builder's batch_size option, else the measured "
        "default of the device kind (512 on a GPU, 16 on a CPU)",
    )
    parser.add_argument("--step_posts", type=int, default=DEFAULT_STEP_POSTS, metavar="N",
                        help="posts embedded per step; each step is written before the next")
    parser.add_argument(
        "--profile_source", "--profile-source", default="own", choices=("own", "swapped"),
        help="whose posts to rank for each question: own, or swapped (another user's of the "
        "same domain, the derangement the _swapped tasks use); a ranking serves one source",
    )
    parser.add_argument(
        "--profile_swap_seed", "--profile-swap-seed", type=int, default=None, metavar="N",
        help="the swap derangement's seed (default: the tasks' default, "
        "prbench.profiles.sources.DEFAULT_SWAP_SEED)",
    )
    parser.add_argument(
        "--executor", choices=("local", "ray"), default="local",
        help="where the posts are embedded: local, or ray (--shards tasks on the cluster; "
        "docs/scale.md \"On a cluster\") (default: local)",
    )
    parser.add_argument("--shards", type=int, default=None, metavar="N",
                        help="--executor ray: shards (tasks) to embed in (default: one per node)")
    parser.add_argument(
        "--ray_address", default=None, metavar="HOST:PORT",
        help="--executor ray: the cluster's head (default: RAY_ADDRESS where set, else a Ray "
        "cluster of this command's own on this machine)",
    )
    parser.add_argument("--shard_resources", default=None, metavar="SPEC",
                        help="--executor ray: what each shard asks of a node, e.g. "
                        "gpus=1,cpus=4,memory=16 (memory in GiB) (default: 1 CPU, and 1 GPU "
                        "when the builder's device is not cpu and the cluster has a GPU)")
    parser.add_argument("--max_retries", type=int, default=None, metavar="N",
                        help="--executor ray: retries of a shard the machine ended (default: 1)")
    parser.add_argument("--revision", default=None, help="hub revision (hub ids only)")
    parser.add_argument("--split", default="test", help="hub split (hub ids only)")


def _options(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The ranking builder's id and options (``--profile_args`` with the device and batch size)."""
    from prbench.commands import component_args
    from prbench.options import OptionsError

    builder, raw = component_args(args, "profile")
    if args.device:
        raw["device"] = args.device
    size = str(args.batch_size).strip().lower()
    if size != "auto":  # auto: the builder's own, which is per device kind where unset
        try:
            raw["batch_size"] = int(size)
        except ValueError:
            raise OptionsError(f"--batch_size must be a positive integer or auto, "
                               f"got {args.batch_size!r}") from None
    if args.step_posts < 1:
        raise OptionsError(f"--step_posts must be >= 1, got {args.step_posts}")
    return builder, raw


def _steps(records: Sequence[Any], posts: int) -> Iterator[list[Any]]:
    step: list[Any] = []
    n = 0
    for r in records:
        if step and n + len(r.profile) > posts:
            yield step
            step, n = [], 0
        step.append(r)
        n += len(r.profile)
    if step:
        yield step


@contextlib.contextmanager
def _inner_bars_off() -> Iterator[None]:
    """The encoder's own per-call bars off while the command's bar (posts/s, ETA) is shown."""
    from prbench.progress import ENV_VAR, restored_env

    with restored_env(ENV_VAR):
        os.environ[ENV_VAR] = "0"
        yield


def _resume(out: Path, identity: dict[str, Any], records: Sequence[Any],
            source: dict[str, Any]) -> tuple[set[str], str]:
    """The keys already ranked in ``out`` and its last ``check`` (rewritten without a torn line).

    Raises:
        prbench.profiles.ranked.RankingError: ``out`` was made with another encoder or from
            another profile source, holds another version of one of ``records``, or was edited.
    """
    from prbench.profiles.lazy import record_digest
    from prbench.profiles.ranked import (
        RankingError,
        identity_problems,
        read_ranking,
        record_key,
    )

    ranking = read_ranking(out, allow_torn_tail=True)
    problems = identity_problems(ranking.header.get("identity") or {}, identity)
    if problems:
        raise RankingError(
            f"{out} holds a ranking made with another encoder ({'; '.join(problems)}); write "
            "to another -o file"
        )
    had = {"profile_source": ranking.header.get("profile_source") or "own",
           "profile_swap_seed": ranking.header.get("profile_swap_seed")}
    want = {"profile_source": source.get("profile_source") or "own",
            "profile_swap_seed": source.get("profile_swap_seed")}
    if had != want:
        what = ("profile source" if had["profile_source"] != want["profile_source"]
                else "swap seed")
        raise RankingError(
            f"{out} ranks the profile source {had['profile_source']!r}"
            + (f" (swap seed {had['profile_swap_seed']})" if had["profile_swap_seed"] is not None
               else "")
            + f"; this run asks for {want['profile_source']!r}"
            + (f" (swap seed {want['profile_swap_seed']})"
               if want["profile_swap_seed"] is not None else "")
            + f": the {what} differs; write to another -o file"
        )
    for r in records:
        entry = ranking.entries.get(record_key(r.domain, r.id))
        if entry is not None and entry["data_hash"] != record_digest(r):
            raise RankingError(
                f"{out}: record {r.id!r} (domain {r.domain!r}, {r.source}) differs from the "
                "version ranked there (question, category or posts changed); write to another "
                "-o file"
            )
    from prbench.outputs import write_jsonl

    write_jsonl(out, [ranking.header, *ranking.entries.values()])
    return set(ranking.entries), ranking.last_check


def run(args: argparse.Namespace) -> int:
    """Rank the records not yet in OUT and append them; print the rate and the time taken."""
    from prbench import __version__
    from prbench.cluster import check_ray_flags
    from prbench.options import OptionsError
    from prbench.plugins import get_registry
    from prbench.profiles.ranked import (
        FORMAT,
        VERSION,
        dense_identity,
        entry_for,
        record_key,
        seal,
    )
    from prbench.progress import progress_bar
    from prbench.records import load_records

    check_ray_flags(args.executor, {
        "--shards": args.shards, "--ray_address": args.ray_address,
        "--shard_resources": args.shard_resources, "--max_retries": args.max_retries,
    }, "the shards embedded")
    builder_id, raw = _options(args)
    if args.executor == "ray":  # Ray missing: one error before any work
        from prbench.cluster import import_ray

        import_ray()
    if builder_id != "dense":
        raise OptionsError(
            f"--profile_args builder={builder_id}: prbench rank ranks with the 'dense' builder "
            "(it embeds every post; the others are cheap enough to run in place)"
        )
    component = get_registry().get("profile-builder", builder_id)
    component.parse_options(raw)  # option errors before the data is read
    records = load_records(args.data, revision=args.revision, split=args.split)
    source: dict[str, Any] = {}
    if args.profile_source != "own":
        from prbench.profiles.sources import DEFAULT_SWAP_SEED, apply_source

        seed = DEFAULT_SWAP_SEED if args.profile_swap_seed is None else args.profile_swap_seed
        records = [s.record for s in apply_source(records, args.profile_source, seed=seed, k=0)]
        source = {"profile_source": args.profile_source, "profile_swap_seed": seed}
    builder = component.build(raw)
    identity = dense_identity(builder.options, encoder=builder.encoder)
    out = Path(args.output_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    done, check = _resume(out, identity, records, source) if out.exists() else (set(), "")
    if not out.exists():
        header = seal({
            "format": FORMAT, "version": VERSION, "builder": builder_id,
            "identity": identity, "encoder": builder.encoder.describe(),
            "data": str(args.data), "prbench": __version__, **source,
        }, "")
        write_text(out, json.dumps(header, ensure_ascii=False) + "\n")
        check = header["check"]
    todo = [r for r in records if record_key(r.domain, r.id) not in done]
    n_posts = sum(len(r.profile) for r in todo)
    from prbench.devices import resolve_device

    device = resolve_device(builder.options.device)
    print(
        f"prbench rank: {len(records)} records, {len(records) - len(todo)} already in {out}, "
        f"{len(todo)} to rank ({n_posts} posts) with {builder.encoder.ref.label} on {device}, "
        f"batch size {builder.encoder.batch_size}",
        file=sys.stderr,
    )
    before = dataclasses.replace(builder.encoder.stats)
    start = time.perf_counter()
    if args.executor == "ray" and todo:
        _rank_on_ray(args, builder_id, raw, identity, source, todo, out, check)
        seconds = time.perf_counter() - start
        print(f"ranked {len(todo)} records ({n_posts} posts) in {seconds:.1f} s on Ray: {out}")
        return 0
    bar = progress_bar(n_posts, desc="rank: dense", unit="post")
    try:
        with out.open("ab", buffering=0) as fh, _inner_bars_off():
            for step in _steps(todo, args.step_posts):
                scores = builder.score_records(step)
                entries = []
                for r, s in zip(step, scores, strict=True):
                    entries.append(seal(entry_for(r, [p.id for p in r.profile], s), check))
                    check = entries[-1]["check"]
                lines = "".join(json.dumps(entry) + "\n" for entry in entries)
                append_line(fh, lines, out)  # a failed write: one line; a rerun resumes
                bar.update(sum(len(r.profile) for r in step))
    finally:
        bar.close()
    seconds = time.perf_counter() - start
    print(f"ranked {len(todo)} records ({n_posts} posts) in {seconds:.1f} s"
          f"{embedding_rate(before, builder.encoder.stats, seconds)}: {out}")
    return 0


def _shard_resources(args: argparse.Namespace, device: str | None) -> dict[str, float]:
    """``--shard_resources`` as numbers, with the defaults (see its help)."""
    from prbench.options import OptionsError, parse_kv_string

    given: dict[str, float] = {}
    if args.shard_resources:
        for key, value in parse_kv_string(args.shard_resources).items():
            if key not in ("gpus", "cpus", "memory"):
                raise OptionsError(f"--shard_resources: unknown key {key!r}; allowed: gpus, "
                                   "cpus, memory (GiB)")
            try:
                given[key] = float(value)
            except (TypeError, ValueError):
                raise OptionsError(f"--shard_resources: {key}={value!r} is not a number") \
                    from None
            if given[key] < 0:
                raise OptionsError(f"--shard_resources: {key} must be >= 0")
    given.setdefault("cpus", 1.0)
    given.setdefault("gpus", -1.0 if str(device or "auto").lower() != "cpu" else 0.0)
    return given


def _rank_on_ray(args: argparse.Namespace, builder_id: str, raw: dict[str, Any],
                 identity: dict[str, Any], source: dict[str, Any], todo: Sequence[Any],
                 out: Path, check: str) -> None:
    """Embed ``todo`` as shards on Ray, then append their entries to ``out`` in record order."""
    import shutil

    from prbench.cluster import alive_nodes, connect
    from prbench.options import OptionsError
    from prbench.profiles.rank_shards import embed_on_ray
    from prbench.profiles.ranked import entry_for, seal

    retries = 1 if args.max_retries is None else args.max_retries
    if retries < 0:
        raise OptionsError(f"--max_retries must be >= 0, got {retries}")
    if args.shards is not None and args.shards < 1:
        raise OptionsError(f"--shards must be >= 1, got {args.shards}")
    resources = _shard_resources(args, raw.get("device"))
    ray = connect(args.ray_address, say=lambda line: print(line, file=sys.stderr))
    nodes = alive_nodes(ray)
    if resources["gpus"] < 0:  # the default: a GPU when the cluster has one
        has_gpu = any((n.get("Resources") or {}).get("GPU", 0) >= 1 for n in nodes)
        resources["gpus"] = 1.0 if has_gpu else 0.0
    if resources["gpus"] == 0 and identity.get("embed_backend"):
        # CPU shards run on the runtime this rank file records (the driver's resolution of
        # embed_backend=auto), not on each node's own measurement: shards made on different
        # CPUs agree with each other and with the file's header
        raw = {**raw, "embed_backend": identity["embed_backend"]}
    steps = list(_steps(todo, args.step_posts))
    scores, counts = embed_on_ray(
        steps, builder_id=builder_id, options=raw, identity={**identity, **source},
        shards=args.shards or len(nodes), state_dir=Path(f"{out}.shards"),
        address=args.ray_address, resources=resources, max_retries=retries,
        say=lambda line: print(line, file=sys.stderr),
    )
    with out.open("ab", buffering=0) as fh:
        for step, step_scores in zip(steps, scores, strict=True):
            entries = []
            for r, s in zip(step, step_scores, strict=True):
                entries.append(seal(entry_for(r, [p.id for p in r.profile], s), check))
                check = entries[-1]["check"]
            append_line(fh, "".join(json.dumps(e) + "\n" for e in entries), out)
    shutil.rmtree(Path(f"{out}.shards"), ignore_errors=True)
    print(f"rank: shards: {counts['reused']} finished before, {counts['embedded']} embedded now "
          f"({counts['computed']} texts embedded on the nodes)", file=sys.stderr)


def embedding_rate(before: EncodeStats, after: EncodeStats, seconds: float) -> str:
    """What the encoder did between two snapshots of its counters, for the closing line.

    The rate counts only the texts the model embedded in this run: texts found in the
    embedding cache (a resumed run's, embedded before it stopped) are named apart, so a resumed
    run does not report a rate it did not reach.

    Args:
        before: the encoder's counters when ranking started.
        after: its counters when ranking ended.
        seconds: the wall time between them.

    Returns:
        ``", N texts embedded (M from the embedding cache), R texts/s"`` or ``""`` when nothing
        was asked of the encoder.
    """
    computed = after.computed - before.computed
    cached = after.cached - before.cached
    if computed + cached == 0:
        return ""
    rate = f", {computed / seconds:.1f} texts/s embedded" if computed and seconds > 0 else ""
    return f", {computed} texts embedded now ({cached} from the embedding cache){rate}"
