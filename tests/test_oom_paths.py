"""Out-of-memory back-off on every scoring path, on a simulated device.

The device is simulated: the decoder's forward raises ``torch.OutOfMemoryError`` when a call would
hold more token slots than a limit, counting the key/value cache each row attends to (so a batch
of continuations over a long shared prompt fails while the prompt alone fits). Each path — plain
batches, prefix-shared groups, the prefix-sharing check, a Best-of-N group of candidates — must
then give the scores of a clean run and report its stats, apart from the retry fields
(``oom_retries``, ``wasted_tokens``, ``wasted_requests``) and the fields that describe how the
work was cut (batches, forward passes, padded slots, the budget in force). A single request that
can never fit ends the run with one clear error naming its record.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from prbench.oom import ScorerOutOfMemoryError
from prbench.profiles.base import ProfileView
from prbench.scoring.base import ScoreRequest
from prbench.scoring.spec import build_runtime
from prbench.testing import token_slot_limit
from tests._hf_fixtures import build_tiny_model, sample_text

#: what a back-off may change: the retry counts and how the work was cut
RETRY_FIELDS = {"oom_retries", "wasted_tokens"}
LAYOUT_FIELDS = {"batches", "forward_passes", "padded_tokens", "padded_fraction", "token_budget"}
RUNTIME_LAYOUT = {"oom_retries", "wasted_requests", "chunks", "chunk_size"}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("oom") / "rm", arch="llama")


def _requests(groups: int = 6, members: int = 4, profile_words: tuple[int, int] = (30, 60),
              seed: int = 3) -> list[ScoreRequest]:
    rng = random.Random(seed)
    out = []
    for g in range(groups):
        question = sample_text(rng, 8)
        profile = ProfileView(text=sample_text(rng, rng.randint(*profile_words)))
        for _ in range(members):
            out.append(ScoreRequest(record_id=f"u{g}", question=question, profile=profile,
                                    response=sample_text(rng, rng.randint(3, 20))))
    return out


def _best_of_n_requests(records: int = 2, n: int = 16) -> list[ScoreRequest]:
    """Pools as the Best-of-N evaluator sends them: N candidates, then chosen and rejected."""
    rng = random.Random(11)
    out = []
    for g in range(records):
        question = sample_text(rng, 10)
        profile = ProfileView(text=sample_text(rng, 150))
        for _ in range(n + 2):
            out.append(ScoreRequest(record_id=f"bon{g}", question=question, profile=profile,
                                    response=sample_text(rng, rng.randint(5, 25))))
    return out




def _run(model: Path, requests: list[ScoreRequest], *, limit: int, sharing: str,
         batch_tokens: int = 100_000, chunk_size: int = 256) -> dict[str, Any]:
    rt = build_runtime(
        "hf-classifier",
        {"pretrained": str(model), "device": "cpu", "cache": False, "progress": False,
         "prefix_sharing": sharing, "batch_tokens": batch_tokens, "chunk_size": chunk_size},
    )
    rt.scorer._load()
    with token_slot_limit(rt.scorer._parts[0], limit) as device, rt:
        scores = rt.score(requests)
        return {"scores": scores, "stats": rt.scorer.stats(), "runtime": rt.stats(),
                "device": device}


def _assert_like_clean(run: dict[str, Any], clean: dict[str, Any]) -> None:
    stats, ref = run["stats"], clean["stats"]
    assert clean["device"]["failures"] == 0 and ref["oom_retries"] == ref["wasted_tokens"] == 0
    skip = RETRY_FIELDS | LAYOUT_FIELDS
    assert {k: v for k, v in stats.items() if k not in skip} == {
        k: v for k, v in ref.items() if k not in skip
    }
    assert {k: v for k, v in run["runtime"].items() if k not in RUNTIME_LAYOUT} == {
        k: v for k, v in clean["runtime"].items() if k not in RUNTIME_LAYOUT
    }
    assert run["scores"] == pytest.approx(clean["scores"], abs=1e-5)


def _longest(model: Path, requests: list[ScoreRequest]) -> int:
    return max(len(s) for s in _encoder(model).encode(requests))


_ENCODERS: dict[str, Any] = {}


def _encoder(model: Path) -> Any:
    from prbench.backends.hf_classifier import HFClassifierScorer
    from prbench.backends.hf_classifier_options import HFClassifierOptions

    if str(model) not in _ENCODERS:
        _ENCODERS[str(model)] = HFClassifierScorer(
            HFClassifierOptions(pretrained=str(model), device="cpu")
        )
    return _ENCODERS[str(model)]


@pytest.mark.parametrize(
    ("sharing", "times"),
    [
        ("off", 3),  # plain batches: the scorer's token budget is halved and grows back
        ("on", 2),  # prefix batches and continuation chunks (cache rows counted) back off
        ("auto", 2),  # the sharing check and the groups, all inside the token budget
    ],
)
@pytest.mark.slow
def test_each_path_backs_off_to_the_scores_and_stats_of_a_clean_run(
    model: Path, sharing: str, times: int
) -> None:
    requests = _requests()
    limit = times * _longest(model, requests)
    run = _run(model, requests, limit=limit, sharing=sharing)
    clean = _run(model, requests, limit=0, sharing=sharing)
    device, stats = run["device"], run["stats"]
    assert device["failures"] > 0
    # the scorer backed off inside its own batches: the runtime never split a chunk
    assert stats["oom_retries"] == device["failures"] and stats["wasted_tokens"] > 0
    assert run["runtime"]["oom_retries"] == 0 and run["runtime"]["chunks"] == 1
    if sharing != "off":
        assert stats["shared_groups"] == 6
    if sharing == "auto":  # the check passed under the same limit
        assert stats["prefix_sharing"].startswith("verified")
    assert stats["requests"] == len(run["scores"]) == 24
    _assert_like_clean(run, clean)


@pytest.mark.slow
def test_a_best_of_n_group_is_scored_whole_within_the_budget(model: Path) -> None:
    requests = _best_of_n_requests()
    longest = _longest(model, requests)
    limit = 2 * longest  # two candidates with the shared prompt; one group needs ~18 rows
    run = _run(model, requests, limit=limit, sharing="auto")
    clean = _run(model, requests, limit=0, sharing="auto")
    stats = run["stats"]
    assert run["device"]["failures"] > 0
    # each pool's prompt ran once (no group split by a smaller chunk), as in the clean run
    assert stats["shared_groups"] == clean["stats"]["shared_groups"] == 2
    assert run["runtime"]["oom_retries"] == 0 and run["runtime"]["chunk_size"] == 256
    assert stats["real_tokens"] == clean["stats"]["real_tokens"]
    assert stats["real_tokens"] < sum(len(s) for s in _encoder(model).encode(requests)) // 2
    _assert_like_clean(run, clean)


@pytest.mark.slow
def test_a_request_that_can_never_fit_is_one_clear_error_naming_it(model: Path) -> None:
    rng = random.Random(5)
    requests = _requests(groups=3, members=2, profile_words=(5, 8))
    requests.insert(3, ScoreRequest(record_id="too-long", question=sample_text(rng, 8),
                                    profile=ProfileView(text=sample_text(rng, 300)),
                                    response=sample_text(rng, 10)))
    encoder = _encoder(model)
    lengths = [len(s) for s in encoder.encode(requests)]
    long_one = lengths[3]
    assert long_one > 2 * max(lengths[:3] + lengths[4:])
    for sharing in ("off", "auto"):
        with pytest.raises(ScorerOutOfMemoryError) as err:
            _run(model, requests, limit=long_one - 1, sharing=sharing, chunk_size=8)
        message = str(err.value)
        assert "\n" not in message
        assert "single request (record 'too-long')" in message and "max_length" in message


def test_the_cli_shows_an_out_of_memory_error_as_one_line() -> None:
    from prbench.errors import PrbenchUserError

    assert issubclass(ScorerOutOfMemoryError, PrbenchUserError)


# -- learned sizes grow back ------------------------------------------------------------------


def test_a_learned_limit_halves_grows_back_and_waits_longer_after_a_premature_growth() -> None:
    from prbench.oom import AdaptiveLimit

    limit = AdaptiveLimit(16, grow_after=2)
    assert limit.shrink(13) == 6  # half the work that failed
    assert limit.shrink(100) == 6  # never above the size in force
    assert [limit.success() for _ in range(2)] == [False, True] and limit.current == 12
    assert limit.shrink(12) == 6 and limit.grow_after == 4  # the grown size failed: wait longer
    assert sum(limit.success() for _ in range(8)) == 2 and limit.current == 16  # capped
    assert not limit.success() and limit.current == 16
    assert limit.shrink(3, floor=5) == 5 and limit.shrink(1) == 1
    with pytest.raises(ValueError):
        AdaptiveLimit(0)


def test_run_batches_grows_its_budget_back_after_a_transient_out_of_memory() -> None:
    import torch

    from prbench.oom import GROW_AFTER
    from prbench.scoring.engine import BatchStats, run_batches

    lengths = [10] * 200
    sizes: list[int] = []

    def fn(batch: list[int]) -> list[int]:
        sizes.append(len(batch))
        if len(sizes) == 1:  # memory was short once (another process, fragmentation)
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return list(batch)

    stats = BatchStats()
    assert run_batches(lengths, fn, token_budget=160, stats=stats) == list(range(200))
    assert sizes[:2] == [16, 8]  # halved after the failure ...
    assert sizes[1 : GROW_AFTER + 2] == [8] * GROW_AFTER + [16]  # ... and doubled back
    assert stats.token_budget == 160 and stats.oom_retries == 1 and stats.items == 200


def test_the_runtime_chunk_grows_back_and_keeps_chunks_deterministic() -> None:
    import torch

    from prbench.oom import GROW_AFTER
    from prbench.scoring.runtime import ScorerRuntime

    class Transient:
        def __init__(self) -> None:
            self.calls: list[int] = []

        def score(self, requests: list[ScoreRequest]) -> list[float]:
            self.calls.append(len(requests))
            if len(self.calls) == 1:
                raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
            return [float(len(r.response)) for r in requests]

    rng = random.Random(0)
    requests = [ScoreRequest(record_id=f"r{i}", question=f"q{i}", profile=ProfileView(text=""),
                             response=sample_text(rng, 3)) for i in range(120)]
    scorer = Transient()
    with ScorerRuntime(scorer, chunk_size=8, progress=False) as rt:
        scores = rt.score(requests)
        stats = rt.stats()
    assert scores == [float(len(r.response)) for r in requests]
    assert scorer.calls[:2] == [8, 4] and scorer.calls[1 : GROW_AFTER + 2] == [4] * GROW_AFTER + [8]
    assert stats["chunk_size"] == 8 and stats["oom_retries"] == 1
    assert stats["wasted_requests"] == 8 and stats["computed"] == 120
    # without a failure nothing moves: the chunks of a clean run are the plain cut of chunk_size
    clean = Transient()
    clean.calls.append(0)  # its first call already happened: no failure
    with ScorerRuntime(clean, chunk_size=8, progress=False) as rt:
        rt.score(requests)
    assert clean.calls[1:] == [8] * 15


# -- the prefix cache -------------------------------------------------------------------------


def test_continuations_share_the_prefix_states_and_stay_inside_the_budget(model: Path) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification

    from prbench.scoring.prefix import PrefixGroup, _prefix_cache, shared_prefix_hidden

    base = AutoModelForSequenceClassification.from_pretrained(model).eval().model
    rng = random.Random(1)
    groups = [
        PrefixGroup(tuple(rng.randrange(10, 200) for _ in range(n)), tuple(range(m)),
                    tuple(tuple(rng.randrange(10, 200) for _ in range(rng.randint(2, 9)))
                          for _ in range(m)))
        for n, m in ((40, 6), (25, 3), (33, 5))
    ]
    with torch.inference_mode():
        free = shared_prefix_hidden(base, groups, pad_id=0, device="cpu")
        # a prefix and two continuations, or 3 prefixes, fit in 120 token slots
        with token_slot_limit(base, 120) as device:
            bounded = shared_prefix_hidden(base, groups, pad_id=0, device="cpu",
                                           token_budget=120)
        assert device["failures"] == 0 and device["max_slots"] <= 120
        for a, b in zip(free, bounded, strict=True):
            assert (a - b).abs().max().item() < 1e-4
        out = base(input_ids=torch.as_tensor([list(groups[0].prefix)]), use_cache=True)
    # a chunk's cache shows each row its group's prefix, padded, without a copy per row
    past = out.past_key_values
    kv = [[(layer.keys[0], layer.values[0]) for layer in past.layers]] * 2
    kv[1] = [(k[:, :30], v[:, :30]) for k, v in kv[0]]
    cache = _prefix_cache(kv, [[(0, 0)], [(0, 0)], [(1, 0)]], 40)  # (group, offset) per row
    for layer, (k, _) in zip(cache.layers, kv[0], strict=True):
        assert layer.keys.untyped_storage().data_ptr() == k.untyped_storage().data_ptr()
    new = torch.randn(3, kv[0][0][0].shape[0], 2, kv[0][0][0].shape[-1])
    keys, _ = cache.update(new, new, 0)
    assert keys.shape[2] == 42 and cache.get_seq_length() == 40  # not extended: nothing kept
    assert torch.equal(keys[1, :, :40], kv[0][0][0]) and torch.equal(keys[2, :, :30], kv[1][0][0])
    assert not keys[2, :, 30:40].any() and torch.equal(keys[:, :, 40:], new)
