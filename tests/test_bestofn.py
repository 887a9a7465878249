"""Best-of-N: exact tie credit, pools with and without labels, the evaluator on the sample."""

from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path

import pytest

from prbench.downstream.bestofn import expected_best_quality, format_table, k_values
from prbench.downstream.pools import load_pools, validate_pools, write_pools
from prbench.options import OptionsError
from prbench.records import load_records


def brute_force(scores: list[float], qualities: list[float], k: int) -> float:
    """Enumerate every k-subset; the pick is uniform among the subset's tied maxima."""
    n = len(scores)
    k = min(k, n)
    rank = [s if math.isfinite(s) else -math.inf for s in scores]
    total = 0.0
    subsets = list(itertools.combinations(range(n), k))
    for subset in subsets:
        top = max(rank[i] for i in subset)
        tied = [qualities[i] for i in subset if rank[i] == top]
        total += sum(tied) / len(tied)
    return total / len(subsets)


def test_k_values() -> None:
    assert k_values(16) == [1, 2, 4, 8, 16]
    assert k_values(6) == [1, 2, 4, 6]
    assert k_values(1) == [1]
    with pytest.raises(ValueError):
        k_values(0)


def test_hand_computed_expectations() -> None:
    # strict order, k=2: subsets {0,1}->1, {0,2}->1, {1,2}->0
    assert expected_best_quality([2, 1, 0], [1, 0, 0], 2) == pytest.approx(2 / 3)
    # all tied: every k gives the pool mean (the random baseline)
    assert expected_best_quality([5, 5, 5, 5], [1, 0, 0, 0.5], 3) == pytest.approx(0.375)
    # two tied maxima: tie credit is their mean, not the first one
    assert expected_best_quality([1, 1, 0], [1, 0, 0.2], 3) == pytest.approx(0.5)
    # k larger than the pool: the whole pool
    assert expected_best_quality([3, 1], [0.2, 0.9], 8) == pytest.approx(0.2)
    # a NaN score (no verdict) ranks below every finite score
    assert expected_best_quality([math.nan, 0.0], [1.0, 0.0], 2) == pytest.approx(0.0)


def test_matches_brute_force_on_random_pools() -> None:
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 7)
        scores = [float(rng.randint(0, 3)) for _ in range(n)]  # many ties
        if rng.random() < 0.2:
            scores[rng.randrange(n)] = math.nan
        qualities = [rng.choice([0.0, 0.25, 0.5, 1.0]) for _ in range(n)]
        for k in range(1, n + 2):
            assert expected_best_quality(scores, qualities, k) == pytest.approx(
                brute_force(scores, qualities, k), abs=1e-12
            )
        # best-of-1 is always the random pick
        assert expected_best_quality(scores, qualities, 1) == pytest.approx(sum(qualities) / n)


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="2 scores but 1"):
        expected_best_quality([1, 2], [0.5], 1)
    with pytest.raises(ValueError, match="empty"):
        expected_best_quality([], [], 1)


def _two_records(tmp_path: Path) -> tuple[list, Path]:
    records = load_records("sample")[:2]
    return records, tmp_path / "pools.jsonl"


def test_unlabelled_pools_round_trip(tmp_path: Path) -> None:
    records, path = _two_records(tmp_path)
    lines = [
        {"id": r.id, "policy": {"model": "m"},
         "candidates": [{"id": f"{r.id}-a", "text": "one"}, {"id": f"{r.id}-b", "text": "two"}]}
        for r in records
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    pools = load_pools(path, records)
    assert [p.labelled for p in pools] == [False, False]
    assert pools[0].candidates[0].quality is None
    assert pools[0].extra == {"policy": {"model": "m"}}
    again = tmp_path / "again.jsonl"
    write_pools(again, pools)
    assert [x.to_dict() for x in load_pools(again, records)] == [x.to_dict() for x in pools]


def test_a_pool_labels_all_candidates_or_none(tmp_path: Path) -> None:
    records, path = _two_records(tmp_path)
    r = records[0]
    n = len(r.rubric_aspects)
    line = {"id": r.id, "pair_labels": {"chosen": [2] * n, "rejected": [0] * n},
            "candidates": [{"id": "a", "text": "x", "coverage": [1] * n}, {"id": "b", "text": "y"}]}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    report = validate_pools(path, records)
    assert not report.pools
    (issue,) = report.issues
    assert "candidates[1].coverage" in str(issue) and r.id in str(issue)


@pytest.fixture
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRBENCH_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def evaluator_result(isolated_cache: None) -> dict:
    from prbench.plugins import get_registry

    evaluator = get_registry().build(
        "downstream-evaluator", "best-of-n",
        {"profile": "none", "resamples": 200, "progress": False},
    )
    return evaluator.run(["length", "oracle-rubric", "constant"])


def _values(result: dict, group: str, label: str) -> list[float]:
    return [p["value"] for p in result[group][label]["curve"]["points"]]


def test_evaluator_on_the_sample_pools(evaluator_result: dict) -> None:
    r = evaluator_result
    assert r["kind"] == "prbench-best-of-n"
    assert r["ks"] == [1, 2, 4, 6] and r["n_pools"] == 45 and r["sample"]
    assert r["quality"]["source"] == "gold labels"
    random_curve = _values(r, "baselines", "random")
    # a constant scorer ties everything: exactly the random baseline at every k
    assert _values(r, "scorers", "constant") == pytest.approx(random_curve)
    # the length scorer is the length baseline
    assert _values(r, "scorers", "length") == pytest.approx(_values(r, "baselines", "length"))
    gold = _values(r, "baselines", "gold-best")
    for label in ("length", "oracle-rubric", "constant"):
        curve = _values(r, "scorers", label)
        assert curve[0] == pytest.approx(random_curve[0])  # best-of-1 is a random pick
        assert all(c <= g + 1e-12 for c, g in zip(curve, gold, strict=True))
        assert all(0.0 <= c <= 1.0 for c in curve)
    oracle = _values(r, "scorers", "oracle-rubric")
    assert all(o >= x for o, x in zip(oracle, random_curve, strict=True))
    assert oracle[-1] > random_curve[-1] + 0.2
    assert r["scorers"]["oracle-rubric"]["diagnostic"] is True
    assert r["scorers"]["oracle-rubric"]["pair_accuracy"]["value"] > 0.9
    assert r["scorers"]["constant"]["pair_accuracy"]["value"] == 0.0  # ties are wrong
    table = format_table(r)
    assert "oracle-rubric (DIAGNOSTIC)" in table and "SAMPLE" in table
    assert table.count("\n| ") >= 5


def test_pairwise_judges_are_refused() -> None:
    from prbench.plugins import get_registry

    evaluator = get_registry().build(
        "downstream-evaluator", "best-of-n", {"profile": "none", "progress": False}
    )
    with pytest.raises(OptionsError, match="pairwise"):
        evaluator.run(["llm-judge:model=x"])


def test_generated_pools_are_seeded_saved_and_resumed(tmp_path: Path) -> None:
    from prbench.downstream.policy import PolicyOptions, generate_pools
    from prbench.profiles.base import ProfileView
    from tests._backend_fixtures import ScriptedOpenAIServer

    records = load_records("sample")[:2]
    views = [ProfileView(text="Post 1 (Category: x): hello") for _ in records]
    path = tmp_path / "gen" / "pools.jsonl"
    with ScriptedOpenAIServer() as server:
        opts = PolicyOptions(backend="openai", model="m", base_url=server.base_url, cache_dir="",
                             seed=3)
        pools = generate_pools(records, views, opts, 3, path)
        assert len(server.requests) == 6
        texts = [c.text for c in pools[0].candidates]
        assert len(set(texts)) == 3 and "seed=3" in texts[0] and "seed=5" in texts[2]
        assert [c.id for c in pools[0].candidates][-1] == f"{records[0].id}-s5"
        assert "under 100 words" in server.requests[0][2]["messages"][-1]["content"]
        # a rerun asks for nothing; asking for more asks only for the new candidates
        assert generate_pools(records, views, opts, 3, path) == pools
        assert len(server.requests) == 6
        more = generate_pools(records, views, opts, 4, path)
        assert len(server.requests) == 8 and len(more[1].candidates) == 4
        other = PolicyOptions(backend="openai", model="m", base_url=server.base_url,
                              cache_dir="", seed=3, temperature=0.5)
        with pytest.raises(ValueError, match="other policy settings"):
            generate_pools(records, views, other, 4, path)
    assert not load_pools(path, records)[0].labelled


def test_quality_from_the_rubric_judge(tmp_path: Path, isolated_cache: None) -> None:
    from prbench.plugins import get_registry
    from prbench.records import SAMPLE_POOLS
    from tests._backend_fixtures import ScriptedOpenAIServer

    (record,) = [r for r in load_records("sample") if r.id == "sc-03"]
    assert len(record.rubric_aspects) == 3
    data = tmp_path / "records.jsonl"
    data.write_text(json.dumps(record.to_dict()) + "\n", encoding="utf-8")
    pools = tmp_path / "pools.jsonl"
    line = next(x for x in SAMPLE_POOLS.read_text().splitlines() if '"sc-03"' in x[:20])
    pools.write_text(line + "\n", encoding="utf-8")
    with ScriptedOpenAIServer() as server:
        # the scripted server echoes the prompt, whose format example is "Scores: [0, 2, 1]"
        server.reply_suffix = "\nScores: [0, 2, 1]"
        evaluator = get_registry().build("downstream-evaluator", "best-of-n", {
            "data": str(data), "pools": str(pools), "quality": "rubric-judge", "n": 4,
            "judge": f"backend=openai,model=judge,base_url={server.base_url},cache_dir=",
            "profile": "none", "resamples": 20, "progress": False,
        })
        result = evaluator.run(["length"])
        prompts = [body["messages"][-1]["content"] for _, _, body in server.requests]
    assert result["quality"]["source"] == "rubric-judge"
    assert result["quality"]["judge"]["component"]["id"] == "rubric-judge"
    assert len(prompts) == 4  # the first n=4 candidates, each judged once
    assert record.rubric_aspects[0].aspect in prompts[0]
    assert result["items"][0]["quality"] == [pytest.approx(0.5)] * 4
    assert result["ks"] == [1, 2, 4]
