"""Prefix sharing for decoder-only models: run a shared prompt once, score each continuation.

Chosen and rejected answers to one question share their whole prompt (template, profile,
question); Best-of-N candidates share it sixteen or more times. In a causal decoder the hidden
states of a prefix do not depend on what follows, so the prefix can run once and every
continuation can run from its key/value cache. The result is the same function as scoring each
full sequence (up to float rounding), at the cost of the prefix once instead of once per answer.

How it is exact:

- sharing works on **token ids**: the shared prefix of a group is the longest common prefix of
  its members' full token sequences, shortened so that every member keeps at least one token of
  its own; each member's tokens are exactly those of its full sequence;
- prefixes of a batch are right-padded; continuations get explicit position ids (their real
  offset, not the padded one) and an attention mask covering prefix + continuation, so padding
  slots are never attended to;
- the last hidden state is read at each continuation's last real token.

Memory: prefix batches and continuation chunks are cut by the caller's token budget, a
continuation row counting the padded prefix it attends to; each group's prefix states are held
once, and a layer assembles the rows' view of them only while it runs (see
:func:`shared_prefix_hidden`). Whether sharing is exact for a model is checked on a bounded
sample of a group (:func:`check_sample`), so the check fits the same budget as any batch.

:func:`prbench.scoring.packing.packed_shared_hidden` is the same computation without padding
(prompts packed in rows, several groups' continuations per row under a block mask), for
``packing=on``; it reuses this module's cache (:func:`_prefix_cache` takes several prompts side
by side in a row).

Only models whose every layer uses full attention (no sliding window, no linear/recurrent layers)
and whose cache is a plain :class:`transformers.DynamicCache` are supported; see
:func:`prefix_sharing_support`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from typing import Any


@dataclasses.dataclass(frozen=True)
class PrefixGroup:
    """Sequences that share a token prefix.

    Attributes:
        prefix: the shared token ids.
        members: indices of the member sequences in the caller's list.
        suffixes: each member's tokens after the prefix (at least one each), in member order.
    """

    prefix: tuple[int, ...]
    members: tuple[int, ...]
    suffixes: tuple[tuple[int, ...], ...]

    @property
    def real_tokens(self) -> int:
        """Tokens computed for this group: the prefix once plus every suffix."""
        return len(self.prefix) + sum(len(s) for s in self.suffixes)

    @property
    def saved_tokens(self) -> int:
        """Tokens not recomputed thanks to sharing (the prefix, for all members but one)."""
        return len(self.prefix) * (len(self.members) - 1)


#: Members of a group the prefix-sharing check scores both ways (a bounded sample: the check
#: must fit the token budget like any batch, whatever the group's size).
CHECK_MEMBERS = 4


def check_sample(group: PrefixGroup, members: int = CHECK_MEMBERS) -> PrefixGroup:
    """The first ``members`` members of ``group`` (at least two), to check sharing on."""
    keep = max(2, members)
    return PrefixGroup(group.prefix, group.members[:keep], group.suffixes[:keep])


def common_prefix_length(sequences: Sequence[Sequence[int]]) -> int:
    """Length of the longest common prefix of token sequences (0 for none)."""
    if not sequences:
        return 0
    first = sequences[0]
    n = min(len(s) for s in sequences)
    for seq in sequences[1:]:
        i = 0
        limit = min(n, len(seq))
        while i < limit and seq[i] == first[i]:
            i += 1
        n = i
        if n == 0:
            break
    return n


def group_shared_prefixes(
    sequences: Sequence[Sequence[int]],
    keys: Sequence[Hashable],
    *,
    min_prefix_tokens: int = 1,
) -> tuple[list[PrefixGroup], list[int]]:
    """Group sequences with equal ``keys`` and find each group's shared token prefix.

    ``keys`` says which sequences are *meant* to share a prompt (e.g. the question and profile of
    a request); the shared part is then measured on the tokens, so a template that renders the
    same prompt differently for different answers simply shares less.

    Args:
        sequences: token ids per sequence (each non-empty).
        keys: one grouping key per sequence.
        min_prefix_tokens: a group whose shared prefix is shorter is not worth sharing; its members
            are returned as singles.

    Returns:
        ``(groups, singles)``: groups of two or more members (in first-appearance order) and the
        indices of sequences to score on their own.

    Raises:
        ValueError: lengths differ or a sequence is empty.
    """
    if len(sequences) != len(keys):
        raise ValueError(f"{len(sequences)} sequences but {len(keys)} keys")
    by_key: dict[Hashable, list[int]] = {}
    for i, (seq, key) in enumerate(zip(sequences, keys, strict=True)):
        if not seq:
            raise ValueError(f"sequence {i} is empty")
        by_key.setdefault(key, []).append(i)
    groups: list[PrefixGroup] = []
    singles: list[int] = []
    for members in by_key.values():
        if len(members) < 2:
            singles.extend(members)
            continue
        seqs = [sequences[i] for i in members]
        n = common_prefix_length(seqs)
        n = min(n, min(len(s) for s in seqs) - 1)  # every member keeps >= 1 token of its own
        if n < max(min_prefix_tokens, 1):
            singles.extend(members)
            continue
        groups.append(
            PrefixGroup(
                prefix=tuple(seqs[0][:n]),
                members=tuple(members),
                suffixes=tuple(tuple(s[n:]) for s in seqs),
            )
        )
    return groups, singles


def prefix_sharing_support(model: Any) -> tuple[bool, str]:
    """Whether :func:`shared_prefix_hidden` can run ``model``'s base decoder exactly.

    Returns:
        ``(supported, reason)``; the reason says what is missing when unsupported.
    """
    import inspect

    config = model.config
    if getattr(config, "is_encoder_decoder", False):
        return False, "encoder-decoder model"
    base = getattr(model, getattr(model, "base_model_prefix", "model"), None)
    if base is None:
        return False, "no base model attribute"
    params = inspect.signature(type(base).forward).parameters
    if _cache_param(base) not in params:
        return False, "the base model's forward takes no 'past_key_values' (or 'cache')"
    for name in ("position_ids", "attention_mask", "use_cache"):
        if name not in params:
            return False, f"the base model's forward takes no {name!r}"
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if not getattr(text, "is_causal", True):
        return False, "bidirectional attention (config.is_causal is false)"
    layer_types = getattr(text, "layer_types", None)
    if layer_types is not None:
        other = sorted({t for t in layer_types if t != "full_attention"})
        if other:
            return False, f"layers of type {', '.join(other)} (only full attention is shared)"
    elif getattr(text, "sliding_window", None) and getattr(text, "use_sliding_window", True):
        return False, "sliding-window attention"
    return True, ""


def _cache_param(base: Any) -> str:
    """The name the decoder's forward takes a key/value cache by (``cache`` in newer releases)."""
    import inspect

    params = inspect.signature(type(base).forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _output_cache(out: Any) -> Any:
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def _check_cache(cache: Any) -> None:
    from transformers.cache_utils import DynamicCache, DynamicLayer

    layers = getattr(cache, "layers", None)
    plain = isinstance(cache, DynamicCache) and all(type(x) is DynamicLayer for x in layers or ())
    if not plain:
        raise NotImplementedError(
            "prefix sharing needs a DynamicCache of full-attention layers, "
            f"got {type(cache).__name__}"
        )


def _prefix_cache(
    kv: Sequence[Sequence[tuple[Any, Any]]], layout: Sequence[Sequence[tuple[int, int]]],
    width: int,
) -> Any:
    """A cache that shows each row its groups' prefix states, without copying them per row.

    Each layer holds the groups' prefix keys and values once. When the layer runs, it builds the
    tensor attention needs (every row's prefixes, padded to ``width``, followed by the new
    states) in one allocation and does not keep it: the continuation's own states are not needed
    afterwards, so no layer's copy outlives the layer and no second copy exists while it is built.

    Args:
        kv: per group, per layer, the prefix ``(keys, values)`` of shape ``[heads, len, dim]``.
        layout: per row of the batch, ``(group, offset)`` of each prefix it reads (one at offset
            0 for a padded row; several side by side for a packed row).
        width: the key positions before the new states (the longest row's prefixes).
    """
    import torch
    from transformers.cache_utils import DynamicCache, DynamicLayer

    by_place: dict[tuple[int, int], list[int]] = {}
    for r, places in enumerate(layout):
        for place in places:
            by_place.setdefault(place, []).append(r)
    first = layout[0][0][0]

    class PrefixLayer(DynamicLayer):
        """One layer's shared prefix states, read by every row and never extended."""

        def __init__(self, layer: int) -> None:
            super().__init__()
            self.index = layer
            keys, values = kv[first][layer]
            self.lazy_initialization(keys, values)
            self.keys, self.values = keys.unsqueeze(0), values.unsqueeze(0)  # views: no copy

        def get_seq_length(self) -> int:
            return width  # the padded prefix every row attends to (what the mask is built from)

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> Any:
            return self._joined(key_states, 0), self._joined(value_states, 1)

        def _joined(self, new: Any, part: int) -> Any:
            shape = (new.shape[0], new.shape[1], width + new.shape[2], new.shape[3])
            out = new.new_zeros(shape)
            for (g, offset), members in by_place.items():
                state = kv[g][self.index][part]
                index = torch.as_tensor(members, device=new.device)
                out[index, :, offset : offset + state.shape[1]] = state.unsqueeze(0)
            out[:, :, width:] = new
            return out

    cache = DynamicCache()
    cache.layers = [PrefixLayer(layer) for layer in range(len(kv[first]))]
    return cache


def shared_prefix_hidden(
    base: Any,
    groups: Sequence[PrefixGroup],
    *,
    pad_id: int,
    device: Any,
    positions: str = "last",
    counter: dict[str, int] | None = None,
    pad_free_from: int | None = None,
    batch_overhead: int = 32,
    max_batch_size: int | None = None,
    token_budget: int | None = None,
) -> list[Any]:
    """Run each group's prefix once and all continuations from the cached prefix states.

    Prefixes run first (batched by length; see ``pad_free_from``), their key/value states are kept
    per group, then the continuations run in length-sorted chunks (cut where padding would cost
    more than another forward pass), each chunk over its groups' prefix states.

    Memory: with ``token_budget``, a prefix batch holds at most that many token slots, and so
    does a continuation chunk counting every row's cached prefix (``rows × (longest prefix +
    longest continuation)``, what its attention reads). The prefix states are kept once per
    group, never copied per row: each layer assembles the rows' padded prefix and new states in
    one tensor that it drops once the layer is done.

    Args:
        base: the decoder stack (e.g. ``model.model`` of a ``LlamaForSequenceClassification``),
            returning ``last_hidden_state`` and ``past_key_values``.
        groups: the groups of this batch.
        pad_id: the id written into padded slots (masked out).
        device: where inputs go.
        positions: ``"last"`` returns, per continuation, the hidden state of its last token
            (shape ``[hidden]``); ``"all"`` returns the hidden states that predict each of its
            tokens and the one after it: the prefix's last position followed by every
            continuation position (shape ``[1 + len(suffix), hidden]``), for log-probabilities.
        counter: if given, ``forward_passes``, ``padded_tokens`` (token slots computed, padding
            included) and ``real_tokens`` (real tokens computed) are
            added to it when the call succeeds (a call that fails, e.g. out of memory, adds
            nothing: it is redone).
        pad_free_from: prefixes at least this long run only with prefixes of their exact length
            (no padding, so the causal attention kernel applies; see
            :func:`prbench.scoring.engine.plan_batches`). ``None``: batch all prefixes together.
        batch_overhead: the cost of one more forward pass in tokens, for splitting prefixes and
            continuations into sub-batches (see :func:`prbench.scoring.engine.plan_batches`).
        max_batch_size: the most sequences (prefixes, or continuations) per forward pass.
        token_budget: the most token slots per forward pass (``None``: no limit). A prefix, or
            one continuation with its prefix, longer than the budget runs alone.

    Returns:
        One tensor per continuation, in group order and member order within a group.
    """
    import torch

    from prbench.scoring.engine import pad_batch, plan_batches

    if positions not in ("last", "all"):
        raise ValueError(f"positions must be 'last' or 'all', got {positions!r}")
    counts: dict[str, int] = {}

    def count(slots: int, real: int) -> None:
        counts["forward_passes"] = counts.get("forward_passes", 0) + 1
        counts["padded_tokens"] = counts.get("padded_tokens", 0) + slots
        counts["real_tokens"] = counts.get("real_tokens", 0) + real

    cache_param = _cache_param(base)
    plens = [len(g.prefix) for g in groups]
    conts = [(g, suffix) for g, group in enumerate(groups) for suffix in group.suffixes]
    c_lens = [len(c[1]) for c in conts]
    widths = [plens[c[0]] for c in conts]
    kv: list[list[tuple[Any, Any]]] = [[] for _ in groups]
    prefix_last: list[Any] = [None] * len(groups)
    for sub in plan_batches(
        plens, token_budget=token_budget or max(plens) * len(plens),
        pad_free_from=pad_free_from, batch_overhead=batch_overhead, max_batch_size=max_batch_size,
    ):
        ids, mask, pos = pad_batch([groups[g].prefix for g in sub], pad_id=pad_id, device=device)
        out = base(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
        count(ids.numel(), sum(plens[g] for g in sub))
        past = _output_cache(out)
        _check_cache(past)
        layers = past.layers
        for row, g in enumerate(sub):
            n = plens[g]
            kv[g] = [(layer.keys[row, :, :n], layer.values[row, :, :n]) for layer in layers]
            if positions == "all":
                prefix_last[g] = out.last_hidden_state[row, n - 1 : n]
        del out, past, layers

    result: list[Any] = [None] * len(conts)
    for chunk in plan_batches(
        c_lens, widths=widths, token_budget=token_budget or len(conts) * (max(plens) + max(c_lens)),
        batch_overhead=batch_overhead,
        max_batch_size=max_batch_size,
    ):
        rows = [conts[k][0] for k in chunk]
        width = max(plens[g] for g in rows)
        cache = _prefix_cache(kv, [[(g, 0)] for g in rows], width)
        prefix_mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, g in enumerate(rows):
            prefix_mask[r, : plens[g]] = 1
        suffixes = [conts[k][1] for k in chunk]
        c_ids, c_mask, _ = pad_batch(suffixes, pad_id=pad_id, device=device)
        offsets = torch.as_tensor([plens[g] for g in rows], dtype=torch.long, device=c_ids.device)
        c_pos = offsets[:, None] + torch.arange(c_ids.shape[1], device=c_ids.device)[None, :]
        full_mask = torch.cat([prefix_mask.to(c_mask.device), c_mask], dim=1)
        out = base(
            input_ids=c_ids, attention_mask=full_mask, position_ids=c_pos, use_cache=True,
            **{cache_param: cache},
        )
        count(c_ids.numel(), sum(len(s) for s in suffixes))
        hidden = out.last_hidden_state
        for r, k in enumerate(chunk):
            n = len(suffixes[r])
            if positions == "last":
                result[k] = hidden[r, n - 1]
            else:
                result[k] = torch.cat([prefix_last[rows[r]], hidden[r, :n]], dim=0)
        del out, hidden, cache
    if counter is not None:
        for key, value in counts.items():
            counter[key] = counter.get(key, 0) + value
    return result
