"""A prefix-shared ``hf-classifier`` run killed with SIGKILL mid-scoring resumes bit for bit.

The killed run is a real child process that sends itself SIGKILL right after its K-th chunk is
committed to the score cache (its ``ScoreCache.put_many`` is wrapped, so the kill point does not
depend on timing). The rerun completes from the cache and every score must equal, as a float64
bit pattern, the score of an uninterrupted run.
"""

from __future__ import annotations

import json
import os
import random
import signal
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from prbench.profiles.base import ProfileView
from prbench.scoring.base import ScoreRequest
from prbench.scoring.cache import ScoreCache
from prbench.scoring.spec import build_runtime
from tests._hf_fixtures import build_tiny_model, sample_text

CHUNK = 8
GROUPS = 12  # three answers each, plus one group of ten answers (more than a chunk holds)
BIG = 10

CHILD = textwrap.dedent(
    """
    import json, os, signal, sys

    from prbench.profiles.base import ProfileView
    from prbench.scoring.base import ScoreRequest
    from prbench.scoring.cache import ScoreCache
    from prbench.scoring.spec import build_runtime

    spec = json.loads(open(sys.argv[1], encoding="utf-8").read())
    put_many = ScoreCache.put_many
    committed = 0

    def put_then_die(self, items):
        global committed
        stored = put_many(self, items)
        committed += 1
        if committed == spec["kill_after"]:
            os.kill(os.getpid(), signal.SIGKILL)
        return stored

    ScoreCache.put_many = put_then_die
    requests = [
        ScoreRequest(record_id=r["id"], question=r["q"], response=r["a"],
                     profile=ProfileView(text=r["p"]))
        for r in spec["requests"]
    ]
    with build_runtime("hf-classifier", spec["options"]) as rt:
        rt.score(requests)
    sys.exit(3)  # not killed: the test fails on the return code
    """
)


def _requests() -> list[dict[str, str]]:
    """Groups of three answers sharing a long prompt; the big group's answers are interleaved
    with the first groups' ones, so it is split across chunks early in the run."""
    rng = random.Random(7)

    def group(name: str, answers: int) -> list[dict[str, str]]:
        question = sample_text(rng, rng.randint(6, 14))
        profile = sample_text(rng, rng.randint(40, 80))  # a long prefix shared by the answers
        return [
            {"id": name, "q": question, "p": profile,
             "a": f"{a}: {sample_text(rng, rng.randint(3, 25))}"}
            for a in range(answers)
        ]

    big = group("big", BIG)
    small = [r for g in range(GROUPS) for r in group(f"u{g}", 3)]
    head = [r for pair in zip(big, small, strict=False) for r in pair]
    return head + small[BIG:]


def _score_requests(spec: list[dict[str, str]]) -> list[ScoreRequest]:
    return [
        ScoreRequest(record_id=r["id"], question=r["q"], response=r["a"],
                     profile=ProfileView(text=r["p"]))
        for r in spec
    ]


def _bits(scores: list[float]) -> list[bytes]:
    return [struct.pack("<d", s) for s in scores]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    model = build_tiny_model(tmp_path_factory.mktemp("resume") / "rm", arch="llama")
    options = {"pretrained": str(model), "device": "cpu", "chunk_size": CHUNK,
               "progress": False}
    spec = _requests()
    with build_runtime("hf-classifier", {**options, "cache": False}) as rt:
        whole = rt.score(_score_requests(spec))
        stats = rt.scorer.stats()
    assert stats["shared_groups"] > GROUPS and stats["prefix_sharing"].startswith("verified")
    return {"options": options, "spec": spec, "whole": whole}


@pytest.mark.parametrize("kill_after", [1, 2, 3])
@pytest.mark.slow
def test_a_run_killed_after_chunk_k_resumes_to_the_uninterrupted_scores(
    setup: dict[str, Any], tmp_path: Path, kill_after: int
) -> None:
    db = tmp_path / "scores.sqlite"
    options = {**setup["options"], "cache_path": str(db)}
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(
        json.dumps({"options": options, "requests": setup["spec"], "kill_after": kill_after}),
        encoding="utf-8",
    )
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd()), *sys.path])}
    child = subprocess.run(
        [sys.executable, str(script), str(spec_file)], env=env, capture_output=True, text=True,
        timeout=300,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]

    requests = _score_requests(setup["spec"])
    with build_runtime("hf-classifier", options) as rt:
        stored = rt.cache.count()
        assert 0 < stored < len(requests)  # killed mid-scoring, K chunks kept
        resumed = rt.score(requests)
        stats, described = rt.stats(), rt.describe()
        scorer_stats = rt.scorer.stats()
    assert _bits(resumed) == _bits(setup["whole"])
    assert stats["cache_hits"] == stored and stats["computed"] == len(requests) - stored
    # the killed run's sharing check is reused, not made again on another group
    assert described["runtime"]["decisions"] == {"prefix_sharing": True}
    assert "stored with the cache" in scorer_stats["prefix_sharing"]
    assert scorer_stats["shared_groups"] > 0


@pytest.mark.slow
def test_a_stored_sharing_decision_is_taken_by_a_fresh_scorer(
    setup: dict[str, Any], tmp_path: Path
) -> None:
    requests = _score_requests(setup["spec"])
    db = str(tmp_path / "scores.sqlite")
    options = {**setup["options"], "cache_path": db}
    with build_runtime("hf-classifier", {**setup["options"], "cache": False,
                                         "prefix_sharing": "off"}) as rt:
        plain = rt.score(requests)
    with build_runtime("hf-classifier", options) as rt:
        ScoreCache(rt.fingerprint, db).decide({"prefix_sharing": False})  # an earlier run's check
        got = rt.score(requests)
        stats = rt.scorer.stats()
    assert stats["shared_groups"] == 0 and stats["prefix_sharing"].startswith("disabled")
    assert _bits(got) == _bits(plain)
    assert _bits(got) != _bits(setup["whole"])  # sharing changes the last bits: the test can fail
