"""The persistent score cache: exact round trips, isolation, several processes, crash resume."""

from __future__ import annotations

import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from prbench.scoring.cache import ScoreCache, default_cache_path, fingerprint_of

REPO = Path(__file__).resolve().parents[1]

# -- the cache itself -----------------------------------------------------------------------------


def test_round_trip_is_exact_and_fingerprints_are_isolated(tmp_path):
    db = tmp_path / "s.sqlite"
    a = ScoreCache("fp-a", db, description={"model": "a"})
    b = ScoreCache("fp-b", db)
    values = {"k1": 0.1 + 0.2, "k2": -1e-300, "k3": 1e300, "k4": -3.25}
    assert a.put_many(values) == 4
    assert a.get_many(["k1", "k2", "k3", "k4", "missing"]) == values
    assert b.get_many(values) == {}
    assert a.count() == 4 and len(b) == 0
    b.put("k1", 7.0)
    assert a.get("k1") == 0.1 + 0.2 and b.get("k1") == 7.0
    assert a.description() == {"model": "a"}
    a.close()
    assert ScoreCache("fp-a", db).get("k3") == 1e300  # survives reopening
    assert a.clear() == 4 and a.count() == 0 and b.count() == 1


def test_non_finite_scores_are_not_cached(tmp_path):
    cache = ScoreCache("fp", tmp_path / "s.sqlite")
    assert cache.put_many([("nan", math.nan), ("inf", math.inf), ("ok", 1.0)]) == 1
    assert cache.get_many(["nan", "inf", "ok"]) == {"ok": 1.0}


def test_keys_are_exact_and_typed():
    assert ScoreCache.make_key([1, 2, 3]) == ScoreCache.make_key((1, 2, 3))
    assert ScoreCache.make_key([1, 2, 3]) != ScoreCache.make_key([1, 2, 3, 0])
    assert ScoreCache.make_key([1, 2]) != ScoreCache.make_key([2, 1])
    assert ScoreCache.make_key("ab") != ScoreCache.make_key(b"ab")
    assert ScoreCache.make_key("ab") != ScoreCache.make_key("ab ")
    assert fingerprint_of({"a": 1, "b": [1, 2]}) == fingerprint_of({"b": [1, 2], "a": 1})
    assert fingerprint_of({"a": 1}) != fingerprint_of({"a": 2})


def test_default_path_follows_prbench_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PRBENCH_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_path() == tmp_path / "c" / "scores" / "scores.sqlite"
    cache = ScoreCache("fp")
    cache.put("k", 1.5)
    assert cache.path.is_file()
    with sqlite3.connect(cache.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_schema_mismatch_is_refused(tmp_path):
    db = tmp_path / "s.sqlite"
    ScoreCache("fp", db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE name = 'schema'")
    with pytest.raises(RuntimeError, match="schema 999"):
        ScoreCache("fp", db)


def test_several_processes_write_and_read_at_once(tmp_path):
    db = tmp_path / "shared.sqlite"
    writer = textwrap.dedent(
        f"""
        import sys
        from prbench.scoring.cache import ScoreCache
        who = sys.argv[1]
        cache = ScoreCache("fp", {str(db)!r}, timeout=60)
        for batch in range(40):
            cache.put_many((f"{{who}}-{{batch}}-{{i}}", batch + i / 10) for i in range(5))
            cache.get_many([f"{{who}}-{{batch}}-0", "w0-0-0"])
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", writer, f"w{k}"], stderr=subprocess.PIPE)
        for k in range(3)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    cache = ScoreCache("fp", db)
    assert cache.count() == 3 * 40 * 5
    assert cache.get("w2-39-4") == 39.4


# -- the cache behind hf-classifier, through the scorer runtime ----------------------------------


@pytest.fixture(scope="module")
def rm_path(tmp_path_factory):
    from tests._hf_fixtures import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("rm") / "m", arch="llama")


def _requests(n_questions, seed=0):
    import random

    from prbench.profiles.base import ProfileView
    from prbench.scoring.base import ScoreRequest
    from tests._hf_fixtures import sample_text

    rng = random.Random(seed)
    out = []
    for i in range(n_questions):
        q = sample_text(rng, rng.randint(5, 15))
        profile = ProfileView(text=sample_text(rng, rng.randint(0, 20)))
        for _ in range(2):
            out.append(ScoreRequest(record_id=f"q{i}", question=q, profile=profile,
                                    response=sample_text(rng, rng.randint(3, 30))))
    return out


def _runtime(rm_path, **options):
    from prbench.scoring.spec import build_runtime

    return build_runtime("hf-classifier", {"pretrained": str(rm_path), "progress": False,
                                           **options})


def test_second_run_makes_no_forward_pass(rm_path, tmp_path):
    db = str(tmp_path / "scores.sqlite")
    requests = _requests(6)
    first = _runtime(rm_path, cache_path=db)
    scores = first.score(requests)
    assert first.stats()["computed"] == len(requests)
    assert first.scorer.stats["forward_passes"] > 0
    # another process-like instance, other batch settings: same fingerprint, all cached
    second = _runtime(rm_path, cache_path=db, max_batch_size=1, prefix_sharing="off")
    assert second.fingerprint == first.fingerprint
    assert second.score(requests) == scores
    assert second.scorer.stats["forward_passes"] == 0 and second.stats()["computed"] == 0
    assert second.stats()["cache_hits"] == len(requests)
    assert not second.scorer.model_loaded, "a fully cached run never loads the weights"
    # new requests: only they run
    more = _requests(3, seed=1)
    mixed = second.score(requests + more)
    assert second.stats()["computed"] == len(more)
    assert mixed[: len(requests)] == scores
    # a different setting that changes scores does not reuse them
    other = _runtime(rm_path, cache_path=db, profile_position="system")
    assert other.fingerprint != first.fingerprint
    other.score(requests)
    assert other.stats()["cache_hits"] == 0


def test_stats_and_describe_report_batches_padding_cache_and_sharing(rm_path, tmp_path):
    db = str(tmp_path / "scores.sqlite")
    requests = _requests(6)
    first = _runtime(rm_path, cache_path=db, prefix_min_tokens=4)
    assert first.scorer.stats()["prefix_sharing"] == "not loaded"
    first.score(requests)
    info = first.describe()
    assert json.loads(json.dumps(info)) == info
    summary = info["scorer_stats"]
    assert summary["computed"] == first.scorer.stats["computed"] == len(requests)
    assert summary["batches"] >= 1 and summary["forward_passes"] >= summary["batches"]
    expected = 1.0 - summary["real_tokens"] / summary["padded_tokens"]
    assert summary["padded_fraction"] == pytest.approx(expected)
    assert 0.0 <= summary["padded_fraction"] < 1.0
    assert summary["shared_groups"] > 0 and summary["prefix_sharing"].startswith("verified")
    assert summary["token_budget"] > 0
    assert info["stats"]["cache_hits"] == 0 and info["stats"]["cache_hit_rate"] == 0.0
    assert info["fingerprint"] == first.scorer.fingerprint() == info["scorer"]["fingerprint"]
    assert info["runtime"]["cache_path"] == db
    second = _runtime(rm_path, cache_path=db)
    second.score(requests)
    again = second.describe()
    assert again["stats"]["cache_hits"] == len(requests) and again["stats"]["cache_hit_rate"] == 1.0
    assert again["scorer_stats"]["batches"] == 0 and again["scorer_stats"]["padded_fraction"] == 0.0


def test_duplicate_inputs_run_once(rm_path):
    requests = _requests(2)
    rt = _runtime(rm_path, cache=False)
    out = rt.score(requests + requests)
    assert out[: len(requests)] == out[len(requests) :]
    assert rt.scorer.stats["computed"] == len(requests) == rt.stats()["computed"]


def test_close_releases_the_model(rm_path):
    rt = _runtime(rm_path, cache=False)
    rt.score(_requests(1))
    assert rt.scorer.model_loaded
    rt.close()
    assert not rt.scorer.model_loaded


CHILD = """
import json, sys, time
from prbench.backends.hf_classifier import HFClassifierScorer
from prbench.profiles.base import ProfileView
from prbench.scoring.base import ScoreRequest
from prbench.scoring.spec import build_runtime

plain = HFClassifierScorer._forward_plain

def slow(self, seqs):  # long enough for the parent to kill us half-way
    time.sleep(0.2)
    return plain(self, seqs)

HFClassifierScorer._forward_plain = slow
rows = json.load(open(sys.argv[1]))
requests = [ScoreRequest(record_id=r["id"], question=r["q"], response=r["a"],
                         profile=ProfileView(text=r["p"])) for r in rows]
options = json.load(open(sys.argv[2]))
build_runtime("hf-classifier", options).score(requests)
print("finished")
"""


def _count_rows(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=30) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM scores").fetchone()[0])
    except sqlite3.OperationalError:  # schema not created yet
        return 0


@pytest.mark.slow
def test_kill_minus_nine_then_resume(rm_path, tmp_path):
    db = tmp_path / "scores.sqlite"
    requests = _requests(20, seed=5)
    rows = [{"id": r.record_id, "q": r.question, "a": r.response, "p": r.profile.text}
            for r in requests]
    # batch size 1 makes every score bit-identical however the rerun is batched; chunks of 2
    # requests (one question's two answers) are committed one by one
    options = {"pretrained": str(rm_path), "cache_path": str(db), "max_batch_size": 1,
               "prefix_sharing": "off", "progress": False, "chunk_size": 2}
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    (tmp_path / "opts.json").write_text(json.dumps(options))
    (tmp_path / "child.py").write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, str(tmp_path / "child.py"), str(tmp_path / "rows.json"),
         str(tmp_path / "opts.json")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 240
    try:
        while _count_rows(db) < 6:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the child committed nothing in time"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    done = _count_rows(db)
    assert 6 <= done < len(requests) and done % 2 == 0, "killed half-way, whole chunks kept"

    rerun = {k: v for k, v in options.items() if k != "pretrained"}
    resumed = _runtime(rm_path, **rerun)
    scores = resumed.score(requests)
    assert resumed.stats()["cache_hits"] == done
    assert resumed.stats()["computed"] == len(requests) - done, "only the missing ones ran"
    reference = _runtime(rm_path, cache=False, max_batch_size=1, prefix_sharing="off")
    assert scores == reference.score(requests)
    again = _runtime(rm_path, **rerun)
    assert again.score(requests) == scores and again.stats()["computed"] == 0
