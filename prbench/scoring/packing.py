"""Padding-free (packed) forward passes: several sequences in one row, kept apart by the mask.

A padded batch computes ``rows × longest`` token slots; a packed batch puts several sequences
end to end in one row of at most :data:`PACK_ROW_TOKENS` tokens (at least the longest one), with
position ids that restart at 0 for each sequence, so only the slack at the end of each row is
padding. Each sequence sees only its own tokens (and, for prefix sharing, its group's prompt):

- **plain sequences** use transformers' own packed path: ``position_ids`` restarting per
  sequence and no ``attention_mask``; the model's mask builder
  (:mod:`transformers.masking_utils`) then makes the mask block-diagonal for every attention
  implementation it knows (``sdpa`` and ``eager`` a dense block-diagonal causal mask,
  ``flex_attention`` a block-sparse document mask, ``flash_attention_2`` variable-length
  kernels, which read the boundaries only in a batch of one row: see :func:`one_row_only`),
  sliding-window layers included. prbench writes no attention code of its own here;
- **prefix sharing** (:mod:`prbench.scoring.prefix`) runs with a key/value cache, where
  transformers does not look for packed sequences: the prompts are packed the same way and the
  continuations of several groups share a row over their groups' cached prompts, with a 4-D mask
  built here (:func:`block_mask`) that each query row reads as "my group's prompt, then my own
  sequence up to me". Only the ``sdpa`` and ``eager`` kernels take such a mask
  (:func:`shared_packing_support`); elsewhere shared prompts keep padded batches.

Rows are cut so that attention's dense cost stays small: a query of a packed row attends (in
``sdpa``/``eager``) over the whole row, so a row of 2,048 tokens adds at most 2,048 key
positions per query (on an 8B model, ~6% of the linear layers' FLOPs), where padding to the
longest sequence of a batch wastes whole tokens in every layer.

Which models pack: decoders whose modelling code builds its mask with transformers' mask
builder (:func:`packing_support`), checked on load by scoring two probe sequences packed and
padded (the scorer's job, e.g. :meth:`prbench.backends.hf_classifier.HFClassifierScorer`);
remote-code models with masks of their own do not, and keep padded batches.

Nothing here imports torch at module import time.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Sequence
from typing import Any

#: The most tokens of one packed row (a longer sequence gets a row of its own): bounds the dense
#: attention of an ``sdpa``/``eager`` row (see above). Not yet measured on a GPU (docs/scale.md).
PACK_ROW_TOKENS = 2048

#: The attention implementations that take prbench's 4-D mask (packed prefix sharing).
MASK_KERNELS = ("sdpa", "eager")


def one_row_only(model: Any) -> bool:
    """Whether the kernel finds packed sequences only in a batch of one row.

    transformers' flash-attention kernels read the boundaries from ``position_ids`` only when
    the batch is a single row (``_is_packed_sequence``); several rows would be read as one
    sequence each. Such a model gets all of a forward pass's sequences in one row, as long as
    the token budget (variable-length kernels waste nothing on a long row).
    """
    return attention_kind(model).startswith("flash")


def attention_kind(model: Any) -> str:
    """The attention implementation the model runs (``sdpa``, ``eager``, ...)."""
    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return str(getattr(text, "_attn_implementation", None) or "eager")


def packing_support(model: Any, base: Any) -> tuple[bool, str]:
    """Whether ``base`` (the decoder stack of ``model``) honours transformers' packed path.

    That is a causal decoder (not encoder-decoder) whose forward takes ``position_ids`` and whose
    modelling module builds its mask with :mod:`transformers.masking_utils` under an attention
    implementation that module knows. The scorer also compares a packed and a padded probe
    before trusting it.

    Returns:
        ``(supported, reason)``; the reason names what is missing when unsupported.
    """
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    config = model.config
    if getattr(config, "is_encoder_decoder", False):
        return False, "encoder-decoder model"
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if not getattr(text, "is_causal", True):
        return False, "bidirectional attention (config.is_causal is false)"
    if "position_ids" not in inspect.signature(type(base).forward).parameters:
        return False, f"{type(base).__name__}.forward takes no 'position_ids'"
    module = sys.modules.get(type(base).__module__)
    builders = ("create_causal_mask", "create_sliding_window_causal_mask")
    if module is None or not any(hasattr(module, b) for b in builders):
        return False, (f"{type(base).__name__} builds its attention mask itself, not with "
                       "transformers' mask builder (remote code or an older design)")
    kind = attention_kind(model)
    if kind not in ALL_MASK_ATTENTION_FUNCTIONS:
        return False, f"attn_implementation={kind} has no mask builder in transformers"
    return True, ""


def shared_packing_support(model: Any) -> tuple[bool, str]:
    """Whether packed prefix sharing can run: the kernel must take a 4-D mask (sdpa, eager)."""
    kind = attention_kind(model)
    if kind not in MASK_KERNELS:
        return False, f"attn_implementation={kind} takes no 4-D mask"
    return True, ""


def row_width(lengths: Sequence[int], limit: int) -> int:
    """The width of packed rows: ``limit``, or the longest item when that is longer."""
    return max([limit, *lengths]) if lengths else limit


def plan_rows(
    lengths: Sequence[int], width: int, max_items: int | None = None
) -> list[list[int]]:
    """Pack items into rows of at most ``width`` tokens (first fit, longest first).

    Deterministic (ties keep input order). An item longer than ``width`` gets a row of its own;
    ``max_items`` caps the items of a row (a caller's ``max_batch_size``).

    Returns:
        Rows of indices into ``lengths``; every index appears exactly once.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    rows: list[list[int]] = []
    room: list[int] = []
    cap = max_items or len(lengths) or 1
    for i in order:
        n = max(int(lengths[i]), 1)
        for r, free in enumerate(room):
            if n <= free and len(rows[r]) < cap:
                rows[r].append(i)
                room[r] -= n
                break
        else:
            rows.append([i])
            room.append(max(width - n, 0))
    return rows


def plan_shared_rows(
    groups: Sequence[int], lengths: Sequence[int], prefix_lengths: Sequence[int], width: int,
    max_items: int | None = None,
) -> list[list[int]]:
    """Pack continuations into rows that also hold their groups' prompts (next fit).

    A row's cost is the prompts of the distinct groups in it (its keys) plus its continuations;
    continuations of one group stay in one row while it has room, so its prompt is held once.

    Args:
        groups: the group of each continuation (continuations of a group are consecutive).
        lengths: each continuation's length.
        prefix_lengths: each group's prompt length.
        width: the most tokens (prompts + continuations) per row; one continuation with its
            prompt that is longer gets a row of its own.
        max_items: the most continuations per row (``None``: no cap).

    Returns:
        Rows of continuation indices, in input order.
    """
    rows: list[list[int]] = []
    used = width + 1  # no open row
    seen: set[int] = set()
    for k, (g, n) in enumerate(zip(groups, lengths, strict=True)):
        cost = n + (0 if g in seen else prefix_lengths[g])
        if rows and used + cost <= width and len(rows[-1]) < (max_items or len(groups)):
            rows[-1].append(k)
            used += cost
        else:
            rows.append([k])
            used, seen = n + prefix_lengths[g], set()
        seen.add(g)
    return rows


def packed_row_inputs(
    rows: Sequence[Sequence[Sequence[int]]], *, pad_id: int, device: Any, start: Sequence[
        Sequence[int]] | None = None,
) -> tuple[Any, Any, list[list[int]]]:
    """Token ids and position ids of packed rows, and where each sequence ends.

    Args:
        rows: per row, its sequences' token ids.
        pad_id: written into the slack at the end of a row (its own segment: positions restart
            there too, so no real token attends to it).
        device: where the tensors go.
        start: per row, each sequence's first position (default 0: a whole sequence; the
            prompt's length for a continuation).

    Returns:
        ``(input_ids, position_ids, last)``: ``[rows, width]`` int64 tensors and, per row, the
        column of each sequence's last token.
    """
    import torch

    width = max(sum(len(s) for s in row) for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    pos = torch.zeros((len(rows), width), dtype=torch.long)
    last: list[list[int]] = []
    for r, row in enumerate(rows):
        col, ends = 0, []
        for j, seq in enumerate(row):
            n = len(seq)
            first = start[r][j] if start is not None else 0
            ids[r, col : col + n] = torch.as_tensor(seq, dtype=torch.long)
            pos[r, col : col + n] = torch.arange(first, first + n)
            col += n
            ends.append(col - 1)
        pos[r, col:] = torch.arange(width - col)
        last.append(ends)
    return ids.to(device), pos.to(device), last


def block_mask(
    segments: Sequence[Sequence[tuple[int, int, int, int]]], *, keys_before: int, width: int,
    dtype: Any, device: Any, additive: bool,
) -> Any:
    """A 4-D mask for packed rows whose queries also read cached keys placed before them.

    Each row's keys are ``keys_before`` cached positions followed by the row's own ``width``
    tokens. A segment ``(start, length, cached_from, cached_to)`` covers the row's columns
    ``start:start+length``: its queries read the cached keys ``cached_from:cached_to`` and,
    causally, their own segment. The slack at the end of a row reads only itself (never a fully
    masked query, whose NaN would reach real tokens through zero weights).

    Args:
        segments: per row, ``(start, length, cached_from, cached_to)`` per segment.
        keys_before: cached key positions before the row's tokens.
        width: the row width (query positions).
        dtype: the model's compute dtype (for an additive mask).
        device: where the mask goes.
        additive: ``True`` for a float mask (``eager``: 0 where read, the dtype's minimum
            elsewhere), ``False`` for a boolean one (``sdpa``: ``True`` where read).

    Returns:
        ``[rows, 1, width, keys_before + width]``.
    """
    import torch

    allowed = torch.zeros((len(segments), 1, width, keys_before + width), dtype=torch.bool)
    causal = torch.ones((width, width), dtype=torch.bool).tril()
    for r, row in enumerate(segments):
        end = 0
        for begin, length, c_from, c_to in row:
            q = slice(begin, begin + length)
            allowed[r, 0, q, c_from:c_to] = True
            allowed[r, 0, q, keys_before + begin : keys_before + begin + length] = causal[
                :length, :length]
            end = max(end, begin + length)
        slack = torch.arange(end, width)
        allowed[r, 0, slack, keys_before + slack] = True
    allowed = allowed.to(device)
    if not additive:
        return allowed
    out = torch.zeros(allowed.shape, dtype=dtype, device=device)
    return out.masked_fill_(~allowed, torch.finfo(dtype).min)


def packed_shared_hidden(
    base: Any,
    groups: Sequence[Any],
    *,
    pad_id: int,
    device: Any,
    row_tokens: int,
    additive: bool,
    counter: dict[str, int] | None = None,
    batch_overhead: int = 32,
    max_batch_size: int | None = None,
    token_budget: int | None = None,
) -> list[Any]:
    """:func:`prbench.scoring.prefix.shared_prefix_hidden` (``positions="last"``), packed.

    The groups' prompts run packed in rows of ``row_tokens`` (each prompt's states are then
    kept once, as in the padded path); the continuations run packed too, several groups per row,
    each reading its own group's prompt from the cache and its own tokens (:func:`block_mask`).
    Batches of rows are cut by :func:`prbench.scoring.engine.plan_batches` under
    ``token_budget``; ``max_batch_size`` caps the rows of a batch.

    Args:
        base: the decoder stack (returning ``last_hidden_state`` and a key/value cache).
        groups: :class:`~prbench.scoring.prefix.PrefixGroup` objects.
        pad_id: the id written into the slack at the end of rows.
        device: where inputs go.
        row_tokens: the most tokens of one row (a longer prompt or continuation gets its own).
        additive: a float mask (``eager``) rather than a boolean one (``sdpa``).
        counter: as in :func:`~prbench.scoring.prefix.shared_prefix_hidden` (token slots of the
            packed rows, real tokens, forward passes).
        batch_overhead: see :func:`prbench.scoring.engine.plan_batches`.
        max_batch_size: the most prompts (or continuations) per forward pass: with it, a row
            holds at most that many and runs alone.
        token_budget: the most token slots per forward pass (``None``: no limit).

    Returns:
        One hidden state per continuation (``[hidden]``), in group order and member order.
    """
    from prbench.scoring.engine import plan_batches
    from prbench.scoring.prefix import _cache_param, _check_cache, _output_cache, _prefix_cache

    dtype = next(base.parameters()).dtype
    counts: dict[str, int] = {}

    def count(slots: int, real: int) -> None:
        counts["forward_passes"] = counts.get("forward_passes", 0) + 1
        counts["padded_tokens"] = counts.get("padded_tokens", 0) + slots
        counts["real_tokens"] = counts.get("real_tokens", 0) + real

    plens = [len(g.prefix) for g in groups]
    kv: list[list[tuple[Any, Any]]] = [[] for _ in groups]
    rows = plan_rows(plens, row_width(plens, row_tokens), max_batch_size)
    sizes = [sum(plens[g] for g in row) for row in rows]
    budget = token_budget or max(sizes) * len(rows)
    per_batch = 1 if max_batch_size else None
    for sub in plan_batches(sizes, token_budget=budget, batch_overhead=batch_overhead,
                            max_batch_size=per_batch):
        batch = [rows[r] for r in sub]
        ids, pos, _ = packed_row_inputs(
            [[groups[g].prefix for g in row] for row in batch], pad_id=pad_id, device=device)
        segments = [_segments([plens[g] for g in row]) for row in batch]
        mask = block_mask(segments, keys_before=0, width=ids.shape[1], dtype=dtype,
                          device=ids.device, additive=additive)
        out = base(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
        count(ids.numel(), sum(sizes[r] for r in sub))
        past = _output_cache(out)
        _check_cache(past)
        for b, row in enumerate(batch):
            for g, (begin, n, _, _) in zip(row, segments[b], strict=True):
                span = slice(begin, begin + n)
                kv[g] = [(layer.keys[b, :, span], layer.values[b, :, span])
                         for layer in past.layers]
        del out, past

    conts = [(g, suffix) for g, group in enumerate(groups) for suffix in group.suffixes]
    c_rows = plan_shared_rows([c[0] for c in conts], [len(c[1]) for c in conts], plens,
                              row_tokens, max_batch_size)
    layouts: list[list[tuple[int, int]]] = []
    for row in c_rows:
        places: list[tuple[int, int]] = []
        offset = 0
        for k in row:
            g = conts[k][0]
            if all(g != p[0] for p in places):
                places.append((g, offset))
                offset += plens[g]
        layouts.append(places)
    keys_part = [sum(plens[g] for g, _ in places) for places in layouts]
    own_part = [sum(len(conts[k][1]) for k in row) for row in c_rows]
    result: list[Any] = [None] * len(conts)
    budget = token_budget or len(c_rows) * (max(keys_part) + max(own_part))
    for sub in plan_batches(own_part, widths=keys_part, token_budget=budget,
                            batch_overhead=batch_overhead, max_batch_size=per_batch):
        batch = [c_rows[r] for r in sub]
        width = max(keys_part[r] for r in sub)
        ids, pos, last = packed_row_inputs(
            [[conts[k][1] for k in row] for row in batch], pad_id=pad_id, device=device,
            start=[[plens[conts[k][0]] for k in row] for row in batch])
        segments = []
        for b, r in enumerate(sub):
            where = dict(layouts[r])
            spans = _segments([len(conts[k][1]) for k in batch[b]])
            segments.append([
                (begin, n, where[conts[k][0]], where[conts[k][0]] + plens[conts[k][0]])
                for k, (begin, n, _, _) in zip(batch[b], spans, strict=True)])
        mask = block_mask(segments, keys_before=width, width=ids.shape[1], dtype=dtype,
                          device=ids.device, additive=additive)
        cache = _prefix_cache(kv, [layouts[r] for r in sub], width)
        out = base(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True,
                   **{_cache_param(base): cache})
        count(ids.numel(), sum(own_part[r] for r in sub))
        hidden = out.last_hidden_state
        for b, row in enumerate(batch):
            for k, col in zip(row, last[b], strict=True):
                result[k] = hidden[b, col]
        del out, hidden, cache
    if counter is not None:
        for key, value in counts.items():
            counter[key] = counter.get(key, 0) + value
    return result


def _segments(lengths: Sequence[int]) -> list[tuple[int, int, int, int]]:
    """Consecutive spans ``(start, length, 0, 0)`` of sequences laid end to end in a row."""
    spans, col = [], 0
    for n in lengths:
        spans.append((col, n, 0, 0))
        col += n
    return spans
