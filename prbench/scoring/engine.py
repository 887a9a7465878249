"""The batching engine shared by every in-process model backend.

Work items (token sequences, or groups of sequences sharing a prefix) are planned into batches by
:func:`plan_batches`: sorted by length, longest first, and cut so that each batch's *padded* size
(items × longest item) stays within a token budget rather than a fixed item count. Short inputs
therefore travel in large batches and long ones in small batches, and padding is nearly nil.
:func:`run_batches` runs a callable over the planned batches with a progress bar, hands every
finished batch to a callback (the score cache commits there), backs off when the accelerator runs
out of memory (halving the budget and re-planning what is left; the budget grows back after a
streak of batches that fit, see :mod:`prbench.oom`), and returns the results in the
original input order.

Longest-first matters on a GPU: the biggest batch runs first, so an over-large budget fails at once
rather than after an hour. :func:`auto_token_budget` picks a first budget from free GPU memory.

Nothing here imports torch at module import time.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

from prbench import oom
from prbench.oom import AdaptiveLimit, is_oom_error, uncounted_if_out_of_memory

__all__ = [
    "BatchStats",
    "auto_token_budget",
    "batch_overhead_tokens",
    "is_oom_error",
    "last_token_index",
    "pad_batch",
    "pad_free_threshold",
    "padded_tokens",
    "plan_batches",
    "run_batches",
    "uncounted_if_out_of_memory",
]

logger = logging.getLogger(__name__)

R = TypeVar("R")

#: Padded tokens per batch on a CPU (where larger batches gain nothing but memory use).
DEFAULT_CPU_TOKEN_BUDGET = 16384
#: On a CPU, sequences at least this long are batched only with sequences of their exact length
#: (see ``pad_free_from`` in :func:`plan_batches`); shorter ones gain more from batching.
CPU_PAD_FREE_FROM = 256


def pad_free_threshold(device: Any) -> int | None:
    """:data:`CPU_PAD_FREE_FROM` on a CPU; ``None`` on an accelerator (fast masked kernels)."""
    return CPU_PAD_FREE_FROM if getattr(device, "type", str(device)) == "cpu" else None


def plan_batches(
    lengths: Sequence[int],
    *,
    token_budget: int,
    max_batch_size: int | None = None,
    pad_free_from: int | None = None,
    batch_overhead: int | None = None,
    widths: Sequence[int] | None = None,
) -> list[list[int]]:
    """Split items into length-sorted batches bounded by a padded-token budget.

    Items are sorted by length, longest first (ties keep input order, so the plan is
    deterministic), and cut into runs with ``len(batch) * max_length_in_batch <= token_budget``
    and, when given, ``len(batch) <= max_batch_size``. An item longer than the budget forms a
    batch of its own.

    With ``widths`` (e.g. the cached prefix each continuation attends to), an item costs its
    width plus its length and a batch holds ``len(batch) * (max width + max length)`` token slots:
    items are then sorted by width plus length and the budget bounds those slots.

    Without ``batch_overhead`` the runs are filled greedily up to the budget. With it, the cut
    points minimise ``padded tokens + batch_overhead * number of batches`` (an exact dynamic
    programme over the sorted order): a big budget then no longer forces 200-token and 140-token
    sequences into one batch when two batches cost less than the padding.

    Args:
        lengths: the length (tokens, or any additive cost) of each item.
        token_budget: the most padded tokens a batch may hold (>= 1).
        max_batch_size: an optional cap on items per batch (``None`` or 0: no cap).
        pad_free_from: items at least this long share a batch only with items of exactly their
            length, so their batch needs no padding. On a CPU a padded batch needs an explicit
            attention mask, and masked attention cannot skip the upper triangle (it costs twice
            the causal kernel at ~1,500 tokens); ``None`` disables the rule.
        batch_overhead: the fixed cost of one more batch, in tokens (see
            :func:`batch_overhead_tokens`); ``None`` plans greedily.
        widths: an optional second extent per item, padded separately from ``lengths``.

    Returns:
        Batches of indices into ``lengths``; every index appears exactly once.

    Raises:
        ValueError: a non-positive budget, a negative length, or widths of the wrong count.
    """
    if token_budget < 1:
        raise ValueError(f"token_budget must be at least 1, got {token_budget}")
    if max_batch_size is not None and max_batch_size < 0:
        raise ValueError(f"max_batch_size must be >= 0, got {max_batch_size}")
    if widths is not None and len(widths) != len(lengths):
        raise ValueError(f"{len(widths)} widths for {len(lengths)} items")
    cap = max_batch_size or len(lengths) or 1
    for i, n in enumerate(lengths):
        if n < 0:
            raise ValueError(f"length {i} is negative ({n})")
    wide = [max(int(w), 0) for w in widths] if widths is not None else [0] * len(lengths)
    order = sorted(range(len(lengths)), key=lambda i: (-(lengths[i] + wide[i]), i))
    size = [max(int(lengths[i]), 1) for i in order]
    width = [wide[i] for i in order]

    def slots(count: int, top_len: int, low_len: int, top_width: int) -> int | None:
        """Token slots of ``count`` items as one batch (None: they cannot be one batch)."""
        if count == 1:
            return top_len + top_width
        total = count * (top_len + top_width)
        if count > cap or total > token_budget:
            return None
        if pad_free_from is not None and top_len >= pad_free_from and low_len != top_len:
            return None
        return total

    if batch_overhead is None:
        batches: list[list[int]] = []
        start, top_len, low_len, top_width = 0, 0, 0, 0
        for k in range(len(order)):
            if k > start:
                grown = (max(top_len, size[k]), min(low_len, size[k]), max(top_width, width[k]))
                if slots(k - start + 1, *grown) is not None:
                    top_len, low_len, top_width = grown
                    continue
                batches.append(order[start:k])
                start = k
            top_len, low_len, top_width = size[k], size[k], width[k]
        if order:
            batches.append(order[start:])
        return batches
    # best[j]: cheapest plan of the first j sorted items; a batch only gets costlier as it
    # reaches back to longer items, so each inner loop stops at the first infeasible start.
    n_items = len(order)
    best = [0.0] + [float("inf")] * n_items
    cut = [0] * (n_items + 1)
    for j in range(1, n_items + 1):
        top_len, low_len, top_width = 0, size[j - 1], 0
        for i in range(j - 1, -1, -1):
            top_len, low_len = max(top_len, size[i]), min(low_len, size[i])
            top_width = max(top_width, width[i])
            cost = slots(j - i, top_len, low_len, top_width)
            if cost is None:
                break
            total = best[i] + cost + batch_overhead
            if total < best[j]:
                best[j], cut[j] = total, i
    plan: list[list[int]] = []
    j = n_items
    while j > 0:
        plan.append(order[cut[j] : j])
        j = cut[j]
    plan.reverse()
    return plan


def batch_overhead_tokens(device: Any) -> int:
    """The fixed cost of one more forward pass, in tokens, for :func:`plan_batches`.

    On a CPU a forward pass costs little beyond its tokens (measured here: ~15 tokens' worth for
    a 30M-parameter model), so batches are split wherever that saves padding. On an accelerator
    small batches leave the device idle, so batches stay large unless padding is substantial.
    """
    return 32 if getattr(device, "type", str(device)) == "cpu" else 2048


def padded_tokens(lengths: Sequence[int], batch: Sequence[int]) -> int:
    """``len(batch) * max length`` — the tokens a right- or left-padded batch computes."""
    return len(batch) * max((lengths[i] for i in batch), default=0)


@dataclasses.dataclass
class BatchStats:
    """What a :func:`run_batches` call did (for reports and benchmarks).

    Attributes:
        items: items processed.
        batches: batches run successfully.
        real_tokens: the sum of the items' lengths.
        padded_tokens: the sum over batches of ``len(batch) * max length``.
        oom_retries: batches that ran out of memory and were re-planned.
        wasted_tokens: the real tokens of those batches (computed again after the back-off; not
            in ``real_tokens``).
        token_budget: the budget in force at the end (lower than the start after a back-off,
            unless enough batches fitted since for it to grow back).
    """

    items: int = 0
    batches: int = 0
    real_tokens: int = 0
    padded_tokens: int = 0
    oom_retries: int = 0
    wasted_tokens: int = 0
    token_budget: int = 0

    @property
    def padding_fraction(self) -> float:
        """Share of computed tokens that were padding (0 when nothing ran)."""
        if not self.padded_tokens:
            return 0.0
        return 1.0 - self.real_tokens / self.padded_tokens


def make_progress(total: int, *, enabled: bool, desc: str, unit: str = "seq") -> Any:
    """A progress bar for scoring (see :func:`prbench.progress.progress_bar`)."""
    from prbench.progress import progress_bar

    return progress_bar(total, desc=desc, unit=unit, enabled=enabled)


def run_batches(
    lengths: Sequence[int],
    fn: Callable[[list[int]], Sequence[R]],
    *,
    token_budget: int | AdaptiveLimit,
    max_batch_size: int | None = None,
    on_batch: Callable[[list[int], list[R]], None] | None = None,
    progress: bool | Any = False,
    desc: str = "scoring",
    weights: Sequence[int] | None = None,
    oom_backoff: bool = True,
    stats: BatchStats | None = None,
    pad_free_from: int | None = None,
    batch_overhead: int | None = None,
    floors: Sequence[int] | None = None,
) -> list[R]:
    """Run ``fn`` over length-sorted, token-budgeted batches and return results in input order.

    This is the one batching loop of prbench's in-process backends: the sequence classifier uses it
    for rewards, and any other backend (e.g. causal-LM log-probabilities) can use it the same way.

    Args:
        lengths: each item's length (its padded cost is ``len(batch) * max(lengths in batch)``).
        fn: called with a batch of item indices (longest first); must return one result per index,
            in the same order.
        token_budget: the most padded tokens per batch (see :func:`plan_batches`), or an
            :class:`~prbench.oom.AdaptiveLimit` that keeps what the back-offs learn across
            calls (``fn`` may read its ``current`` value to cut an item's own work).
        max_batch_size: an optional cap on items per batch.
        on_batch: called after each successful batch with its indices and results — e.g. to
            commit them to a cache, so that an interrupted run loses at most one batch.
        progress: ``True`` for a tqdm bar, ``False`` for none, or an existing bar (any object
            with ``update(n)``) to advance.
        desc: the progress-bar label.
        weights: how far each item advances the bar (default 1 each; e.g. a group's size).
        oom_backoff: on an out-of-memory error, halve the budget and re-plan the unfinished items;
            after :data:`~prbench.oom.GROW_AFTER` batches in a row that fit, the budget
            doubles again (up to where it started). A failed batch counts only in
            ``stats.oom_retries`` and ``stats.wasted_tokens``; accelerator memory is emptied once
            its frames are released.
        stats: a :class:`BatchStats` to fill in.
        pad_free_from: see :func:`plan_batches`.
        batch_overhead: see :func:`plan_batches`.
        floors: the smallest budget each item can run under, for items that cut their own work
            by the budget (a group of continuations over a shared prompt). A single item that
            runs out of memory is retried under a halved budget while that stays above its
            floor; by default a single item is never retried (its cost does not depend on the
            budget).

    Returns:
        ``results[i]`` is the result for item ``i``.

    Raises:
        RuntimeError: ``fn`` returned the wrong number of results.
        Exception: whatever ``fn`` raised (an out-of-memory error only when it cannot back off).
    """
    n = len(lengths)
    if weights is not None and len(weights) != n:
        raise ValueError(f"weights has {len(weights)} entries for {n} items")
    if floors is not None and len(floors) != n:
        raise ValueError(f"floors has {len(floors)} entries for {n} items")
    limit = token_budget if isinstance(token_budget, AdaptiveLimit) else AdaptiveLimit(token_budget)
    stats = stats if stats is not None else BatchStats()
    stats.token_budget = limit.current
    own_bar = isinstance(progress, bool)
    total = sum(weights) if weights is not None else n
    bar = make_progress(total, enabled=bool(progress), desc=desc) if own_bar else progress
    results: list[Any] = [None] * n
    pending = list(range(n))
    try:
        while pending:
            plan = plan_batches(
                [lengths[i] for i in pending], token_budget=limit.current,
                max_batch_size=max_batch_size, pad_free_from=pad_free_from,
                batch_overhead=batch_overhead,
            )
            finished: set[int] = set()
            replan = False
            for local in plan:
                batch = [pending[j] for j in local]
                floor = floors[batch[0]] if floors is not None else limit.current
                try:
                    out = list(fn(batch))
                except Exception as exc:
                    retry = len(batch) > 1 or floor < limit.current
                    if not (oom_backoff and retry and is_oom_error(exc)):
                        raise
                    replan = True
                if replan:  # out of the except block: the failed batch's frames are released
                    oom.free_accelerator_memory()
                    slots = padded_tokens(lengths, batch)
                    before = limit.current
                    limit.shrink(slots, floor=floor if len(batch) == 1 else 1)
                    logger.warning(
                        "out of memory on a batch of %d items (%d padded tokens); "
                        "lowering the token budget from %d to %d and re-planning",
                        len(batch), slots, before, limit.current,
                    )
                    stats.oom_retries += 1
                    stats.wasted_tokens += sum(lengths[i] for i in batch)
                    stats.token_budget = limit.current
                    break
                if len(out) != len(batch):
                    raise RuntimeError(
                        f"batch function returned {len(out)} results for {len(batch)} items"
                    )
                for i, r in zip(batch, out, strict=True):
                    results[i] = r
                finished.update(batch)
                stats.items += len(batch)
                stats.batches += 1
                stats.real_tokens += sum(lengths[i] for i in batch)
                stats.padded_tokens += padded_tokens(lengths, batch)
                if on_batch is not None:
                    on_batch(batch, out)
                bar.update(sum(weights[i] for i in batch) if weights is not None else len(batch))
                if oom_backoff and limit.success():  # memory to spare again: bigger batches
                    stats.token_budget = limit.current
                    replan = True
                    break
            pending = [i for i in pending if i not in finished] if replan else []
    finally:
        if own_bar:
            bar.close()
    return results


def pad_batch(
    sequences: Sequence[Sequence[int]],
    *,
    pad_id: int,
    side: Literal["right", "left"] = "right",
    device: Any = None,
) -> tuple[Any, Any, Any]:
    """Pad token sequences into tensors.

    Position ids count real tokens only (``cumsum(mask) - 1``), so a sequence gets the same
    positions whichever side it is padded on and whatever batch it lands in — one of the things
    that keeps scores batch-size and padding-side invariant.

    Args:
        sequences: token ids, one list per sequence (each non-empty).
        pad_id: the id written into padded slots (masked out; its value does not matter).
        side: where the padding goes.
        device: where to put the tensors.

    Returns:
        ``(input_ids, attention_mask, position_ids)``, each ``[batch, longest]`` int64.
    """
    import torch

    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        n = len(seq)
        cols = slice(0, n) if side == "right" else slice(width - n, width)
        ids[row, cols] = torch.as_tensor(seq, dtype=torch.long)
        mask[row, cols] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    if device is not None:
        ids, mask, positions = ids.to(device), mask.to(device), positions.to(device)
    return ids, mask, positions


def last_token_index(attention_mask: Any) -> Any:
    """Index of each row's last real token (works for left and right padding)."""
    import torch

    width = attention_mask.shape[-1]
    cols = torch.arange(width, device=attention_mask.device)
    return (attention_mask * cols).argmax(-1)


def auto_token_budget(
    model: Any,
    device: Any,
    *,
    kv_cache: bool = False,
    max_length: int = 8192,
    memory_fraction: float = 0.6,
    cpu_budget: int = DEFAULT_CPU_TOKEN_BUDGET,
) -> int:
    """A first token budget for ``model`` on ``device`` (the OOM back-off refines it).

    On a CPU this is ``cpu_budget``. On a CUDA device it is the free memory times
    ``memory_fraction`` divided by a per-token estimate: one layer's peak activations (residual,
    attention projections, MLP), eager attention scores when the model uses eager attention, and,
    with ``kv_cache``, the key/value cache of every layer (counted twice: the prefix states kept
    per group, and the padded prefix each continuation row attends to).

    Args:
        model: a loaded transformers model.
        device: a ``torch.device``.
        kv_cache: whether the run keeps a key/value cache (prefix sharing does).
        max_length: the longest input (bounds the eager attention estimate).
        memory_fraction: the share of free memory to plan for.
        cpu_budget: the budget returned off-GPU.

    Returns:
        Padded tokens per batch, at least the model's longest input so one item always fits.
    """
    import torch

    if getattr(device, "type", str(device)) != "cuda" or not torch.cuda.is_available():
        return cpu_budget
    free, _total = torch.cuda.mem_get_info(device)
    cfg = model.config
    cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    hidden = int(getattr(cfg, "hidden_size", 4096))
    inter = int(getattr(cfg, "intermediate_size", 4 * hidden) or 4 * hidden)
    heads = int(getattr(cfg, "num_attention_heads", 32))
    kv_heads = int(getattr(cfg, "num_key_value_heads", heads) or heads)
    head_dim = int(getattr(cfg, "head_dim", 0) or hidden // max(heads, 1))
    layers = int(getattr(cfg, "num_hidden_layers", 32))
    elt = next(model.parameters()).element_size()
    per_token = elt * (6 * hidden + 3 * inter + 2 * heads * head_dim)
    if getattr(cfg, "_attn_implementation", "sdpa") == "eager":
        per_token += 4 * heads * min(max_length, 8192)
    if kv_cache:
        per_token += 2 * elt * layers * 2 * kv_heads * head_dim
    budget = int(free * memory_fraction / max(per_token, 1))
    return max(budget, min(max_length, 1 << 20), 256)

