"""Data parallel runs: N processes write what one process writes.

Under ``accelerate launch`` (or ``torchrun``) lm-eval 0.4.13 gives each process every
``world_size``-th document of each task (document ``i`` to rank ``i mod N``), each process scores
its own shard, and rank 0 gathers the logged samples and the per-pair metric lists with
``lm.gather_object`` and writes the files. Left to itself that output differs from a one-process
run in three ways, which this module undoes for the ``prbench`` model
(:class:`prbench.harness.lm.PRBenchLM`):

- **Order.** lm-eval concatenates what it gathers rank by rank (documents 0, 2, 4, ..., then
  1, 3, 5, ...), so samples files come out in another order and float aggregations (the mean
  margin, standard errors) differ in their last bits. :func:`merge_gathered` puts the gathered
  samples and metric lists back in document order (the inverse of the round-robin split).
- **Padding.** A process with fewer requests than the others gets copies of its last request
  so that every process runs as many; lm-eval appends their responses to that request, whose
  sample then shows extra responses. :func:`padding` finds those copies in a request list and
  :func:`trim_padding` drops their responses before the results are read.
- **Provenance.** What the scorer did (requests, cache hits, profiles built) is known per
  process; each process's counts are gathered with the metrics
  (:meth:`prbench.harness.lm.PRBenchLM.gather_object`), :func:`merge_stats` adds them up and
  :func:`prbench.harness.profile_rows.note_peer_profiles` records the profiles the other
  processes built, so the manifest describes the whole run.

The scorer (and its model) is replicated: each process loads it on its own device. A model too
big for one device is served instead (see "Served reward models" in docs/scale.md).

- **Exit.** Every process destroys its process group before the interpreter shuts down
  (:func:`finish`, registered with :mod:`atexit` by :func:`start`; plain ``lm_eval`` gives the
  model no end-of-run call). Left alive, the group is torn down during interpreter finalization:
  a gloo worker thread that still holds the last collective's work (and with it tensors that
  hold Python objects) then takes the GIL to release them, the finalizing interpreter ends that
  thread, and the C++ runtime aborts the process (``terminate called without an active
  exception``, exit -6). Rank 1 is the one at risk: it exits right after the last gather, while
  rank 0 writes the files; under load the worker thread is still holding the work when it does.
  ``torch.distributed.destroy_process_group`` waits for the work and joins the threads while
  the interpreter is whole.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

#: runtime stats that are not counts: the smallest over the processes is reported
_MIN_STATS = ("chunk_size",)


def world_size_from_env() -> int:
    """The number of processes the launcher started (``WORLD_SIZE``; 1 when not launched)."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1") or 1))
    except ValueError:
        return 1


def start(device: str | None) -> Any:
    """The ``accelerate.Accelerator`` of this process when launched with several, else ``None``.

    CPU processes (no CUDA, or ``device=cpu`` asked for) get ``cpu=True``, which sets up a gloo
    process group; with CUDA each process takes the GPU of its local rank (NCCL).
    """
    if world_size_from_env() <= 1:
        return None
    import torch
    from accelerate import Accelerator

    cpu = not torch.cuda.is_available() or str(device or "").startswith("cpu")
    accelerator = Accelerator(cpu=cpu)
    atexit.unregister(finish)  # once, however many models this process builds
    atexit.register(finish)
    return accelerator


def finish() -> None:
    """Destroy this process's process group, if one is up (see "Exit" above); else nothing."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def process_device(accelerator: Any) -> str:
    """This process's device as a scorer option: ``cpu``, or ``cuda:<local rank>``."""
    device = accelerator.device
    if getattr(device, "type", str(device)) == "cpu":
        return "cpu"
    return str(device)


def round_robin(parts: Sequence[Sequence[T]]) -> list[T] | None:
    """Items dealt round-robin to ``len(parts)`` processes, back in their first order.

    ``parts[r]`` holds items ``r, r + N, r + 2N, ...`` of one list (lm-eval's split). Returns
    ``None`` when the lengths cannot come from such a split (then the order is unknown).
    """
    n_parts = len(parts)
    total = sum(len(p) for p in parts)
    if any(len(p) != (total - r + n_parts - 1) // n_parts for r, p in enumerate(parts)):
        return None
    out: list[T] = []
    for i in range(len(parts[0]) if parts else 0):
        out.extend(p[i] for p in parts if i < len(p))
    return out


def _is_samples(obj: Any) -> bool:
    """``{task: [sample dict with doc_id and filter, ...]}`` (lm-eval's logged samples)."""
    return isinstance(obj, Mapping) and all(
        isinstance(v, list) and all(isinstance(s, Mapping) and "doc_id" in s for s in v)
        for v in obj.values()
    )


def _is_metrics(obj: Any) -> bool:
    """``{task: {(metric, filter): [value per document]}}`` (lm-eval's raw metrics)."""
    return isinstance(obj, Mapping) and all(
        isinstance(v, Mapping)
        and all(isinstance(k, tuple) and len(k) == 2 and isinstance(x, list) for k, x in v.items())
        for v in obj.values()
    )


def _merge_samples(parts: Sequence[Sequence[Mapping[str, Any]]]) -> list[Any]:
    """One task's samples from every process in document order, filter by filter."""
    filters = list(dict.fromkeys(s.get("filter") for part in parts for s in part))
    out: list[Any] = []
    for name in filters:
        shards = [[s for s in part if s.get("filter") == name] for part in parts]
        merged = round_robin(shards)
        out.extend(merged if merged is not None else [s for shard in shards for s in shard])
    return out


def _merge_metrics(parts: Sequence[Mapping[tuple[str, str], list[Any]]]) -> dict[Any, list[Any]]:
    """One task's metric lists from every process in document order.

    A metric every document of a process reported (its list as long as the longest list of
    that filter there) is interleaved back into document order; one only some documents report
    keeps lm-eval's rank-by-rank order, since nothing says which documents gave it.
    """
    keys = list(dict.fromkeys(k for part in parts for k in part))
    docs = [
        {f: max((len(v) for (_, g), v in part.items() if g == f), default=0) for _, f in keys}
        for part in parts
    ]
    out: dict[Any, list[Any]] = {}
    for key in keys:
        shards = [list(part.get(key, [])) for part in parts]
        full = all(len(s) == d[key[1]] for s, d in zip(shards, docs, strict=True))
        merged = round_robin(shards) if full else None
        out[key] = merged if merged is not None else [x for s in shards for x in s]
    return out


def merge_gathered(parts: Sequence[Any]) -> list[Any]:
    """What rank 0 gathered, in one process's document order, as lm-eval reads it.

    lm-eval concatenates the gathered per-process objects; for its logged samples
    (``{task: [sample, ...]}``) and raw metrics (``{task: {(metric, filter): [...]}}``) the first
    element returned holds every process's entries in document order and the others are empty,
    so the concatenation is what one process would have produced. Anything else is returned as
    gathered.

    Args:
        parts: one object per process, in rank order.
    """
    if len(parts) <= 1:
        return list(parts)
    if all(_is_samples(p) for p in parts):
        tasks = list(dict.fromkeys(t for p in parts for t in p))
        merged = {t: _merge_samples([list(p.get(t, [])) for p in parts]) for t in tasks}
        return [merged, *({t: [] for t in tasks} for _ in parts[1:])]
    if all(_is_metrics(p) for p in parts):
        tasks = list(dict.fromkeys(t for p in parts for t in p))
        merged_metrics = {t: _merge_metrics([p.get(t, {}) for p in parts]) for t in tasks}
        empty = [
            {t: {k: [] for k in merged_metrics[t]} for t in tasks} for _ in parts[1:]
        ]
        return [merged_metrics, *empty]
    return list(parts)


def padding(requests: Sequence[Any]) -> list[Any]:
    """The instances of a request list that lm-eval repeated as padding.

    lm-eval lists each instance ``repeats`` times; a process with fewer requests than the others
    gets its last one again (the same object). Returns each instance listed more often than its
    ``repeats``, once.
    """
    counts: dict[int, int] = {}
    for inst in requests:
        counts[id(inst)] = counts.get(id(inst), 0) + 1
    seen: set[int] = set()
    out = []
    for inst in requests:
        key = id(inst)
        if key not in seen and counts[key] > int(getattr(inst, "repeats", 1) or 1):
            seen.add(key)
            out.append(inst)
    return out


def trim_padding(instances: Sequence[Any]) -> None:
    """Drop the responses lm-eval appended to ``instances`` for their padding copies.

    The genuine responses come first (padding is appended after every real request), so each
    instance keeps its first ``repeats`` responses.
    """
    for inst in instances:
        keep = int(getattr(inst, "repeats", 1) or 1)
        resps = getattr(inst, "resps", None)
        if isinstance(resps, list) and len(resps) > keep:
            del resps[keep:]


def merge_stats(stats: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """The runtime stats of a run from those of each process.

    Counts (integers) are added up; ``chunk_size`` is the smallest; ``cache_hit_rate`` is
    recomputed from the summed counts; anything else is rank 0's.
    """
    given = [dict(s) for s in stats if isinstance(s, Mapping)]
    if not given:
        return None
    out = dict(given[0])
    for key in given[0]:
        values = [s.get(key) for s in given]
        if key in _MIN_STATS and all(isinstance(v, int | float) for v in values):
            out[key] = min(values)
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            out[key] = sum(values)
    if isinstance(out.get("unique"), int) and isinstance(out.get("cache_hits"), int):
        out["cache_hit_rate"] = out["cache_hits"] / out["unique"] if out["unique"] else 0.0
    return out


__all__ = [
    "finish",
    "merge_gathered",
    "merge_stats",
    "padding",
    "process_device",
    "round_robin",
    "start",
    "trim_padding",
    "world_size_from_env",
]
