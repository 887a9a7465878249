"""``prbench rank --executor ray``: the posts to embed, split into shards embedded as Ray tasks.

The records to rank are cut into the same steps a local ``prbench rank`` embeds one after the
other (``--step_posts``); a shard is a run of whole steps, and its task embeds them step by
step exactly as the local run would (same texts per encoder call, same batches), so the scores,
and the rank file the driver writes from them in record order, are the local run's byte for byte
(with ``embed_dtype=float32``; bf16 autocast may differ between machines).

Each finished shard's scores are written by the driver to ``<rank file>.shards/<digest>.json``
(the digest covers the encoder's identity, the profile source and the shard's records with their
content hashes); a re-run after a stop finds the finished shards there and embeds only the
others. The folder is removed once the rank file holds every record.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prbench.hashing import json_sha256
from prbench.records import Record

#: a shard file's format tag
SHARD_FORMAT = "prbench-rank-shard"


@dataclasses.dataclass(frozen=True)
class Shard:
    """A run of whole steps, embedded by one task."""

    index: int
    steps: list[list[Record]]
    digest: str

    @property
    def posts(self) -> int:
        """Posts in the shard."""
        return sum(len(r.profile) for step in self.steps for r in step)


def split_shards(steps: Sequence[list[Record]], shards: int, identity: dict[str, Any]
                 ) -> list[Shard]:
    """``steps`` in at most ``shards`` contiguous runs of equal step counts (never a split step).

    Args:
        steps: the local run's steps, in order.
        shards: how many shards were asked for (fewer when there are fewer steps).
        identity: the encoder's identity and the profile source (part of each shard's digest).
    """
    from prbench.profiles.lazy import record_digest
    from prbench.profiles.ranked import record_key

    n = max(1, min(shards, len(steps)))
    bounds = [round(i * len(steps) / n) for i in range(n + 1)]  # steps hold ~step_posts each
    groups = [list(steps[bounds[i]:bounds[i + 1]]) for i in range(n)]
    out = []
    for i, group in enumerate(g for g in groups if g):
        keys = [[record_key(r.domain, r.id), record_digest(r)] for step in group for r in step]
        sizes = [len(step) for step in group]
        digest = json_sha256({"identity": identity, "records": keys, "steps": sizes}, ascii=True)
        out.append(Shard(i, group, digest[:20]))
    return out


def embed_shard(builder_id: str, options: dict[str, Any],
                steps: list[list[Record]], nice: int = 0) -> dict[str, Any]:
    """Task body: each step's retrieval scores, computed as a local ``prbench rank`` does.

    An unset ``batch_size`` is the default of the node's own device kind (the encoder's). The
    work runs at the driver's niceness ``nice`` where the worker may lower its own (Ray's
    workers run at 15; :func:`prbench.cluster.driver_priority`); ``"nice"`` in the result says
    what it got.
    """
    from prbench.cluster import driver_priority, this_node, use_local_threads
    from prbench.plugins import get_registry
    from prbench.progress import ENV_VAR

    os.environ[ENV_VAR] = "0"  # no encoder bars in a worker's log
    use_local_threads()  # a local rank's thread count, not Ray's per-task limit: the same sums
    with driver_priority(nice) as ran_at:
        builder = get_registry().get("profile-builder", builder_id).build(options)
        before = dataclasses.replace(builder.encoder.stats)
        scores = [builder.score_records(step) for step in steps]
        after = builder.encoder.stats
    return {"scores": scores, "node": this_node(), "nice": ran_at,
            "computed": after.computed - before.computed, "cached": after.cached - before.cached}


def _read_shard(path: Path, shard: Shard) -> list[list[list[float]]] | None:
    """A finished shard's scores, or None (absent, unreadable, another shard's)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("format") != SHARD_FORMAT \
            or data.get("digest") != shard.digest:
        return None
    scores = data.get("scores")
    if not isinstance(scores, list) or [len(s) for s in scores] != [len(s) for s in shard.steps]:
        return None
    return scores


def embed_on_ray(
    steps: Sequence[list[Record]],
    *,
    builder_id: str,
    options: dict[str, Any],
    identity: dict[str, Any],
    shards: int,
    state_dir: Path,
    address: str | None,
    resources: dict[str, float],
    max_retries: int,
    say: Callable[[str], None],
) -> tuple[list[list[list[float]]], dict[str, int]]:
    """Every step's scores (in order), the unfinished shards embedded as Ray tasks.

    Args:
        steps: the records to rank, in the local run's steps.
        builder_id: the ranking profile builder (``dense``).
        options: its options (as given to its factory).
        identity: what makes a shard's digest (encoder identity and profile source).
        shards: shards asked for.
        state_dir: where finished shards are kept until the rank file holds them.
        address: the cluster (``--ray_address``).
        resources: per shard task (``gpus``, ``cpus``, ``memory`` in GiB).
        max_retries: retries of a task the machine ended (a node died).
        say: where progress lines go.

    Returns:
        The scores per step, and counts: shards reused, shards embedded, texts embedded now.

    Raises:
        KeyboardInterrupt: Ctrl-C; outstanding tasks are cancelled, finished shards kept.
    """
    from prbench.cluster import (
        RayTasks,
        alive_nodes,
        connect,
        niceness,
        niceness_warning,
        node_label,
        task_options,
    )
    from prbench.outputs import write_text
    from prbench.progress import progress_bar

    parts = split_shards(steps, shards, identity)
    if len(parts) < shards:
        say(f"rank: {len(steps)} step(s) of --step_posts make {len(parts)} shard(s), not "
            f"{shards} (a shard is whole steps, so each embeds as a local run would)")
    found: dict[int, list[list[list[float]]]] = {}
    for shard in parts:
        got = _read_shard(state_dir / f"{shard.digest}.json", shard)
        if got is not None:
            found[shard.index] = got
    todo = [s for s in parts if s.index not in found]
    say(f"rank: {len(parts)} shard(s), {len(found)} finished before, {len(todo)} to embed "
        "on Ray")
    counts = {"reused": len(found), "embedded": 0, "computed": 0}
    if todo:
        ray = connect(address)
        opts = task_options(resources, alive_nodes(ray), "a rank shard")
        remote = ray.remote(embed_shard)
        driver_nice = niceness()
        lowly: dict[str, int] = {}  # node -> the niceness shards ran at, above the driver's
        refs = {remote.options(**opts, max_retries=max_retries).remote(
            builder_id, options, shard.steps, driver_nice): shard for shard in todo}
        state_dir.mkdir(parents=True, exist_ok=True)
        bar = progress_bar(sum(s.posts for s in todo), desc="rank (ray)", unit="post")
        tasks = RayTasks(ray, refs)
        try:
            for ref in tasks.finished():
                shard = refs[ref]
                result = ray.get(ref)
                write_text(state_dir / f"{shard.digest}.json", json.dumps({
                    "format": SHARD_FORMAT, "digest": shard.digest,
                    "scores": result["scores"]}) + "\n")
                found[shard.index] = result["scores"]
                counts["embedded"] += 1
                counts["computed"] += int(result["computed"])
                node = result["node"]
                say(f"rank: shard {shard.index + 1}/{len(parts)} ({shard.posts} posts) "
                    f"embedded on node {node_label(node['id'], node['ip'])}: "
                    f"{result['computed']} texts embedded, {result['cached']} from its cache")
                bar.update(shard.posts)
                if int(result.get("nice", driver_nice)) > driver_nice:
                    lowly.setdefault(node_label(node["id"], node["ip"]), int(result["nice"]))
            if lowly:
                say(niceness_warning("shards", max(lowly.values()), driver_nice,
                                     "node(s) " + ", ".join(sorted(lowly))))
        except KeyboardInterrupt:
            cancelled = tasks.cancel_rest()
            say(f"rank: interrupted; {cancelled} shard task(s) cancelled, finished shards "
                f"kept in {state_dir} (a re-run embeds the rest)")
            raise
        finally:
            bar.close()
    scores = [step for shard in parts for step in found[shard.index]]
    return scores, counts


__all__ = ["SHARD_FORMAT", "Shard", "embed_on_ray", "embed_shard", "split_shards"]
