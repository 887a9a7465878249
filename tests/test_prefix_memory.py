"""Out-of-memory back-off does not leak into the counts: failed attempts are reported apart.

The device is simulated: the decoder's forward raises ``torch.OutOfMemoryError`` when a call
would hold more token slots than a limit, counting the key/value cache each row attends to (so a
batch of continuations over a long shared prompt fails while the prompt alone fits). A run that
backs off must then report the stats of a clean run, except ``oom_retries`` and
``wasted_tokens``.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from prbench.profiles.base import ProfileView
from prbench.scoring.base import ScoreRequest
from prbench.scoring.runtime import build_runtime
from tests._hf_fixtures import build_tiny_model, sample_text

RETRY_FIELDS = {"oom_retries", "wasted_tokens"}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("oom") / "rm", arch="llama")


def _requests() -> list[ScoreRequest]:
    rng = random.Random(3)
    out = []
    for g in range(6):
        question = sample_text(rng, 8)
        profile = ProfileView(text=sample_text(rng, rng.randint(30, 60)))
        for _ in range(4):
            out.append(ScoreRequest(record_id=f"u{g}", question=question, profile=profile,
                                    response=sample_text(rng, rng.randint(3, 20))))
    return out


def _run(model: Path, *, limit: int, sharing: str, batch_tokens: int, chunk_size: int) -> Any:
    import torch

    rt = build_runtime(
        "hf-classifier",
        {"pretrained": str(model), "device": "cpu", "cache": False, "progress": False,
         "prefix_sharing": sharing, "batch_tokens": batch_tokens, "chunk_size": chunk_size},
    )
    rt.scorer._load()
    base = rt.scorer._parts[0]
    forward = base.forward
    calls = {"oom": 0}

    def limited(*args: Any, **kwargs: Any) -> Any:
        ids, cache = kwargs["input_ids"], kwargs.get("past_key_values")
        width = cache.get_seq_length() if cache is not None else 0
        if limit and ids.shape[0] * (width + ids.shape[1]) > limit:
            calls["oom"] += 1
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return forward(*args, **kwargs)

    base.forward = limited
    with rt:
        scores = rt.score(_requests())
        return scores, rt.scorer.stats(), rt.stats(), calls["oom"]


@pytest.mark.parametrize(
    ("sharing", "limit"),
    [
        ("off", 600),  # plain batches: the scorer's token budget is halved
        ("on", 1200),  # continuations over shared prompts fail after the prompts ran
        ("auto", 700),  # the sharing check (a whole group at once) fails: the runtime halves
        # its chunk until a group is split; what the failed attempts counted is undone
    ],
)
def test_stats_after_out_of_memory_equal_a_clean_run_but_for_the_retries(
    model: Path, sharing: str, limit: int
) -> None:
    scores, stats, runtime, failures = _run(
        model, limit=limit, sharing=sharing, batch_tokens=100_000, chunk_size=24
    )
    assert failures > 0
    if sharing == "auto":  # retried by the runtime: the scorer's own counts were rolled back
        assert runtime["oom_retries"] > 0 and runtime["chunk_size"] < 24
    else:  # retried inside the scorer: the failed batches count only as waste
        assert stats["oom_retries"] > 0 and stats["wasted_tokens"] > 0
    # a clean run planned from the start with what the back-offs ended at
    clean_scores, clean, clean_runtime, none = _run(
        model, limit=0, sharing=sharing, batch_tokens=stats["token_budget"],
        chunk_size=runtime["chunk_size"],
    )
    assert none == 0 and clean["oom_retries"] == clean["wasted_tokens"] == 0
    assert {k: v for k, v in stats.items() if k not in RETRY_FIELDS} == {
        k: v for k, v in clean.items() if k not in RETRY_FIELDS
    }
    assert stats["requests"] == len(scores) == 24
    assert stats["real_tokens"] == clean["real_tokens"]
    assert {k: v for k, v in runtime.items() if k != "oom_retries"} == {
        k: v for k, v in clean_runtime.items() if k != "oom_retries"
    }
    assert scores == pytest.approx(clean_scores, abs=1e-5)
