"""The batching engine (planning, running, OOM back-off, padding) and prefix grouping/sharing."""

from __future__ import annotations

import random

import pytest

from prbench.scoring.engine import (
    BatchStats,
    is_oom_error,
    pad_batch,
    plan_batches,
    run_batches,
)
from prbench.scoring.prefix import (
    PrefixGroup,
    common_prefix_length,
    group_shared_prefixes,
)

# -- plan_batches ---------------------------------------------------------------------------------


def _check_plan(lengths, plan, budget, cap=None):
    flat = [i for b in plan for i in b]
    assert sorted(flat) == list(range(len(lengths))), "every index exactly once"
    for batch in plan:
        width = max(lengths[i] for i in batch)
        if len(batch) > 1:
            assert len(batch) * width <= budget
        if cap:
            assert len(batch) <= cap
    order = [lengths[i] for i in flat]
    assert order == sorted(order, reverse=True), "longest first"


@pytest.mark.parametrize("seed", range(5))
def test_plan_batches_respects_budget_and_covers_all(seed):
    rng = random.Random(seed)
    lengths = [rng.randint(1, 300) for _ in range(rng.randint(1, 120))]
    for budget in (1, 50, 512, 4096):
        plan = plan_batches(lengths, token_budget=budget)
        _check_plan(lengths, plan, budget)
        plan = plan_batches(lengths, token_budget=budget, max_batch_size=3)
        _check_plan(lengths, plan, budget, cap=3)


def test_plan_batches_sorted_batches_pack_tightly():
    lengths = [10, 100, 11, 99, 12, 98]
    plan = plan_batches(lengths, token_budget=300)
    assert plan == [[1, 3, 5], [4, 2, 0]]


def test_plan_batches_overlong_item_alone_and_ties_stable():
    plan = plan_batches([5, 1000, 5, 5], token_budget=100)
    assert plan[0] == [1]
    assert plan[1] == [0, 2, 3]


def test_plan_batches_pad_free_from_groups_long_items_by_exact_length():
    lengths = [300, 300, 299, 50, 40, 300]
    plan = plan_batches(lengths, token_budget=10_000, pad_free_from=256)
    assert plan == [[0, 1, 5], [2], [3, 4]]


def test_plan_batches_rejects_bad_arguments():
    with pytest.raises(ValueError, match="token_budget"):
        plan_batches([1, 2], token_budget=0)
    with pytest.raises(ValueError, match="negative"):
        plan_batches([1, -2], token_budget=10)
    assert plan_batches([], token_budget=10) == []


# -- run_batches ----------------------------------------------------------------------------------


def test_run_batches_restores_order_and_commits_each_batch():
    rng = random.Random(0)
    lengths = [rng.randint(1, 50) for _ in range(40)]
    committed: list[list[int]] = []
    stats = BatchStats()
    out = run_batches(
        lengths,
        lambda batch: [lengths[i] * 10 + i for i in batch],
        token_budget=120,
        on_batch=lambda batch, res: committed.append(list(batch)),
        stats=stats,
    )
    assert out == [n * 10 + i for i, n in enumerate(lengths)]
    assert sorted(i for b in committed for i in b) == list(range(40))
    assert stats.batches == len(committed) and stats.items == 40
    assert stats.real_tokens == sum(lengths)
    assert 0 <= stats.padding_fraction < 0.5


def test_run_batches_backs_off_on_out_of_memory():
    lengths = [20] * 30
    calls = []

    def fn(batch):
        calls.append(len(batch))
        if len(batch) * 20 > 100:  # "GPU memory" holds at most 100 tokens
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return [i for i in batch]

    stats = BatchStats()
    out = run_batches(lengths, fn, token_budget=400, stats=stats)
    assert out == list(range(30))
    assert stats.oom_retries >= 1
    assert stats.token_budget <= 100
    assert calls[0] == 20 and max(calls[1:]) * 20 <= 200


class _Frame:
    """Stands for the tensors a failed forward pass holds in its frame."""


def _released_check(monkeypatch, module, refs, seen):
    """Patch ``module.free_accelerator_memory`` to record whether the failed frames are gone."""
    import sys

    def free():
        seen.append((sys.exc_info()[0], [r() for r in refs]))

    monkeypatch.setattr(module, "free_accelerator_memory", free)


def test_run_batches_counts_failed_batches_apart_and_frees_memory_once_they_are_released(
    monkeypatch,
):
    import weakref

    import prbench.oom as oom

    refs, seen = [], []
    _released_check(monkeypatch, oom, refs, seen)
    lengths = [20] * 12 + [10] * 6

    def fn(batch):
        held = _Frame()
        refs.append(weakref.ref(held))
        if sum(lengths[i] for i in batch) > 100:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return list(batch)

    stats, clean = BatchStats(), BatchStats()
    assert run_batches(lengths, fn, token_budget=1000, stats=stats) == list(range(18))
    run_batches(lengths, lambda b: list(b), token_budget=stats.token_budget, stats=clean)
    assert stats.oom_retries == len(seen) >= 2
    # the failed batches are waste, not work: the rest equals a clean run at the final budget
    assert stats.wasted_tokens == 300 + 180  # all 18 items (300 tokens), then 9 items of 20
    assert (stats.items, stats.batches, stats.real_tokens, stats.padded_tokens) == (
        clean.items, clean.batches, clean.real_tokens, clean.padded_tokens
    )
    # emptied outside the except block, with the failed call's frame already gone
    assert all(exc is None and all(r is None for r in alive) for exc, alive in seen)


def test_counts_of_an_attempt_that_runs_out_of_memory_are_undone():
    import torch

    from prbench.oom import uncounted_if_out_of_memory

    counts = {"requests": 4, "real_tokens": 100, "oom_retries": 1, "wasted_tokens": 7}
    with pytest.raises(torch.OutOfMemoryError), uncounted_if_out_of_memory(counts):
        counts["requests"] += 8
        counts["real_tokens"] += 50  # computed, then thrown away with the attempt
        counts["oom_retries"] += 2  # back-offs inside the attempt
        counts["wasted_tokens"] += 30
        counts["new_key"] = 1
        raise torch.OutOfMemoryError("CUDA out of memory")
    assert counts == {"requests": 4, "real_tokens": 100, "oom_retries": 3, "wasted_tokens": 87}
    with pytest.raises(ValueError), uncounted_if_out_of_memory(counts):
        counts["requests"] += 1  # any other error: the counts stay as they are
        raise ValueError("bad input")
    assert counts["requests"] == 5
    with uncounted_if_out_of_memory(counts):
        counts["requests"] += 1
    assert counts["requests"] == 6


def test_run_batches_reraises_when_single_item_does_not_fit_or_error_is_not_oom():
    def oom(batch):
        raise RuntimeError("CUDA out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        run_batches([10, 10], oom, token_budget=10)

    def broken(batch):
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        run_batches([10, 10], broken, token_budget=100)

    with pytest.raises(RuntimeError, match="returned 1 results for 2"):
        run_batches([10, 10], lambda b: [0], token_budget=100)


def test_is_oom_error_recognises_torch_and_allocator_errors():
    import torch

    assert is_oom_error(torch.OutOfMemoryError("CUDA out of memory"))
    assert is_oom_error(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried"))
    assert is_oom_error(MemoryError())
    assert not is_oom_error(RuntimeError("shape mismatch"))
    assert not is_oom_error(ValueError("out of memory"))


def test_is_oom_error_asks_accelerate(monkeypatch):
    """accelerate's ``should_reduce_batch_size`` decides first: its list has errors prbench's own
    words did not (cuDNN refusing an oversized batch, HPU's allocator)."""
    import accelerate.utils.memory as memory

    assert is_oom_error(RuntimeError("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may "
                                     "appear if you passed in a non-contiguous input."))
    assert is_oom_error(RuntimeError("FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed"))
    asked: list[BaseException] = []
    monkeypatch.setattr(memory, "should_reduce_batch_size",
                        lambda exc: asked.append(exc) or True)
    error = RuntimeError("a new device's own words for it")
    assert is_oom_error(error) and asked == [error]
    assert not is_oom_error(RuntimeError(5))  # accelerate reads the message as text: not asked
    assert asked == [error]


@pytest.mark.parametrize(("device", "available"), [("xpu", "is_xpu_available"),
                                                    ("mps", "is_mps_available")])
def test_free_accelerator_memory_empties_the_cache_of_any_device(monkeypatch, device, available):
    """Through accelerate's ``clear_device_cache``: not only CUDA (here an XPU, an Apple GPU)."""
    import accelerate.utils.memory as memory
    import torch

    from prbench import oom

    emptied: list[str] = []
    monkeypatch.setattr(memory, available, lambda *args, **kwargs: True)
    monkeypatch.setattr(getattr(torch, device), "empty_cache", lambda: emptied.append(device))
    oom.free_accelerator_memory()
    assert emptied == [device]


def test_pad_batch_positions_do_not_depend_on_side():
    seqs = [[5, 6, 7], [8], [9, 10]]
    r_ids, r_mask, r_pos = pad_batch(seqs, pad_id=0, side="right")
    l_ids, l_mask, l_pos = pad_batch(seqs, pad_id=0, side="left")
    for row, seq in enumerate(seqs):
        assert r_ids[row][r_mask[row].bool()].tolist() == seq
        assert l_ids[row][l_mask[row].bool()].tolist() == seq
        assert r_pos[row][r_mask[row].bool()].tolist() == list(range(len(seq)))
        assert l_pos[row][l_mask[row].bool()].tolist() == list(range(len(seq)))


# -- prefix grouping ------------------------------------------------------------------------------


def test_common_prefix_and_grouping():
    assert common_prefix_length([[1, 2, 3], [1, 2, 4], [1, 2]]) == 2
    assert common_prefix_length([[1], [2]]) == 0
    seqs = [[1, 2, 3, 4], [1, 2, 3, 5, 6], [9, 9], [1, 2, 3, 4], [7, 8, 9]]
    groups, singles = group_shared_prefixes(seqs, ["a", "a", "b", "a", "c"], min_prefix_tokens=2)
    assert singles == [2, 4]
    (g,) = groups
    assert g.members == (0, 1, 3)
    # identical members keep one token of their own; prefix is the common part
    assert g.prefix == (1, 2, 3)
    assert g.suffixes == ((4,), (5, 6), (4,))
    for m, suffix in zip(g.members, g.suffixes, strict=True):
        assert list(g.prefix) + list(suffix) == seqs[m]
    assert g.saved_tokens == 6 and g.real_tokens == 3 + 1 + 2 + 1


def test_grouping_skips_short_prefixes_and_validates():
    groups, singles = group_shared_prefixes([[1, 2, 3], [1, 5, 6]], [0, 0], min_prefix_tokens=2)
    assert groups == [] and singles == [0, 1]
    with pytest.raises(ValueError, match="empty"):
        group_shared_prefixes([[1], []], [0, 0])
    with pytest.raises(ValueError, match="keys"):
        group_shared_prefixes([[1]], [0, 1])


def test_plan_batches_with_overhead_minimises_padding_plus_batches():
    rng = random.Random(3)
    lengths = [rng.randint(50, 200) for _ in range(80)]

    def cost(plan, overhead):
        return sum(len(b) * max(lengths[i] for i in b) for b in plan) + overhead * len(plan)

    greedy = plan_batches(lengths, token_budget=100_000)
    assert len(greedy) == 1
    for overhead in (0, 32, 500):
        plan = plan_batches(lengths, token_budget=100_000, batch_overhead=overhead)
        _check_plan(lengths, plan, 100_000)
        assert cost(plan, overhead) <= cost(greedy, overhead)
        # no single split or merge of neighbouring batches improves it
        for k in range(len(plan) - 1):
            merged = [*plan[:k], plan[k] + plan[k + 1], *plan[k + 2 :]]
            assert cost(plan, overhead) <= cost(merged, overhead)
    zero = plan_batches(lengths, token_budget=100_000, batch_overhead=0)
    assert all(len({lengths[i] for i in b}) == 1 for b in zero), "free batches: no padding at all"
    big = plan_batches(lengths, token_budget=100_000, batch_overhead=10**9)
    assert len(big) == 1
    capped = plan_batches(lengths, token_budget=3000, max_batch_size=7, batch_overhead=32,
                          pad_free_from=150)
    _check_plan(lengths, capped, 3000, cap=7)
    for b in capped:
        if max(lengths[i] for i in b) >= 150:
            assert len({lengths[i] for i in b}) == 1


# -- shared prefix forward vs full forward (causal LM base, all positions) ------------------------


@pytest.fixture(scope="module")
def tiny_causal_lm(tmp_path_factory):
    from tests._hf_fixtures import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("lm") / "m", arch="qwen2", kind="causal-lm")


def test_shared_prefix_hidden_matches_full_forward(tiny_causal_lm):
    import torch
    from transformers import AutoModelForCausalLM

    from prbench.scoring.prefix import shared_prefix_hidden

    model = AutoModelForCausalLM.from_pretrained(tiny_causal_lm, dtype=torch.float32).eval()
    rng = random.Random(0)
    groups = []
    for _ in range(4):
        prefix = tuple(rng.randrange(10, 300) for _ in range(rng.randint(3, 40)))
        suffixes = tuple(
            tuple(rng.randrange(10, 300) for _ in range(rng.randint(1, 25)))
            for _ in range(rng.randint(2, 5))
        )
        groups.append(PrefixGroup(prefix, tuple(range(len(suffixes))), suffixes))
    counter: dict[str, int] = {}
    with torch.inference_mode():
        for pad_free, overhead in ((None, 32), (10, 0), (None, 10**6)):
            shared = shared_prefix_hidden(
                model.model, groups, pad_id=0, device="cpu", positions="all",
                counter=counter, pad_free_from=pad_free, batch_overhead=overhead,
            )
            k = 0
            for g in groups:
                for suffix in g.suffixes:
                    full = torch.as_tensor([list(g.prefix) + list(suffix)])
                    ref = model.model(input_ids=full).last_hidden_state[0, len(g.prefix) - 1 :]
                    assert shared[k].shape == ref.shape
                    assert (shared[k] - ref).abs().max().item() < 1e-4
                    k += 1
    assert counter["forward_passes"] >= 4
    assert counter["real_tokens"] <= counter["padded_tokens"]
