"""The scorer runtime: keys, dedup, cache, chunks, OOM back-off, describe/close, build_runtime."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest

from prbench.oom import ScorerOutOfMemoryError
from prbench.options import OptionsError
from prbench.profiles.base import ProfileView
from prbench.records import ProfileItem
from prbench.scoring.base import PairRequest, ScoreRequest, ScorerFaultError
from prbench.scoring.request_key import request_key
from prbench.scoring.runtime import ScorerRuntime
from prbench.scoring.spec import build_runtime
from prbench.store import StoreError


class Fake:
    """A pointwise scorer that records its calls; score = length of the response."""

    def __init__(self, fp: str | None = "fp-1", fail_from_call: int | None = None) -> None:
        self.calls: list[list[str]] = []
        self.closed = 0
        self._fp = fp
        self.fail_from_call = fail_from_call

    def score(self, requests):
        if self.fail_from_call is not None and len(self.calls) >= self.fail_from_call:
            raise KeyboardInterrupt("killed")
        self.calls.append([r.response for r in requests])
        return [float(len(r.response)) for r in requests]

    def describe(self):
        return {"model": "fake", "revision": "abc"}

    def close(self):
        self.closed += 1


class FakeFP(Fake):
    def fingerprint(self):
        return self._fp


def _req(i: int, q: str = "q", profile: str = "p", **kw) -> ScoreRequest:
    return ScoreRequest(record_id=f"r{i}", question=q, response="x" * (i + 1),
                        profile=ProfileView(text=profile), **kw)


def test_request_key_covers_every_field():
    base = _req(1)
    key = request_key(base)
    assert key == request_key(_req(1))
    variants = [
        _req(2),
        ScoreRequest(record_id="other", question="q", response="xx", profile=ProfileView(text="p")),
        _req(1, q="q2"),
        _req(1, profile="p2"),
        _req(1, category="c"),
        _req(1, domain="d"),
        _req(1, hidden={"narrative": "n"}),
        ScoreRequest(record_id="r1", question="q", response="xx", profile=ProfileView(
            text="p", items=(ProfileItem(id="7", category="c", text="t"),))),
    ]
    keys = {request_key(v) for v in variants}
    assert key not in keys and len(keys) == len(variants)
    pair = PairRequest(record_id="r1", question="q", first="xx", second="",
                       profile=ProfileView(text="p"))
    assert request_key(pair) != key
    # provenance of the view is not part of the key
    view = ProfileView(text="p", n_tokens=9, builder="dense")
    assert request_key(ScoreRequest(record_id="r1", question="q", response="xx",
                                    profile=view)) == key
    with pytest.raises(TypeError, match="ScoreRequest or a PairRequest"):
        request_key("text")  # type: ignore[arg-type]


def test_duplicates_run_once_in_request_order():
    scorer = Fake(fp=None)
    rt = ScorerRuntime(scorer, progress=False)
    reqs = [_req(0), _req(3), _req(0), _req(1), _req(3)]
    assert rt.score(reqs) == [1.0, 4.0, 1.0, 2.0, 4.0]
    assert sum(len(c) for c in scorer.calls) == 3
    stats = rt.stats()
    assert stats["requests"] == 5 and stats["unique"] == 3 and stats["computed"] == 3
    assert rt.score([]) == []


def test_no_fingerprint_means_no_persistent_cache(tmp_path):
    db = tmp_path / "scores.sqlite"
    scorer = Fake(fp=None)
    rt = ScorerRuntime(scorer, cache_path=str(db), progress=False)
    assert rt.fingerprint is None and rt.cache is None and not rt.cache_enabled
    rt.score([_req(0)])
    assert not db.exists()
    assert rt.describe()["runtime"]["cache"] is False


def test_fingerprint_must_be_a_method():
    class Attr(Fake):
        fingerprint = "abc"

    with pytest.raises(TypeError, match="fingerprint must be a method"):
        ScorerRuntime(Attr(), progress=False)


def test_persistent_cache_second_run_computes_nothing(tmp_path):
    db = str(tmp_path / "scores.sqlite")
    reqs = [_req(i, q=f"q{i % 3}") for i in range(10)]
    first = ScorerRuntime(FakeFP(), cache_path=db, progress=False)
    scores = first.score(reqs)
    first.close()
    again = FakeFP()
    second = ScorerRuntime(again, cache_path=db, progress=False)
    assert second.score(reqs) == scores and again.calls == []
    assert second.stats()["cache_hits"] == 10 and second.stats()["cache_hit_rate"] == 1.0
    other = FakeFP(fp="fp-2")  # another fingerprint sees nothing of the first
    assert ScorerRuntime(other, cache_path=db, progress=False).score(reqs) == scores
    assert sum(len(c) for c in other.calls) == 10
    off = FakeFP()
    ScorerRuntime(off, cache=False, cache_path=db, progress=False).score(reqs)
    assert sum(len(c) for c in off.calls) == 10


def test_chunks_keep_groups_together_and_commit_one_by_one(tmp_path):
    db = str(tmp_path / "scores.sqlite")
    # three (question, profile) groups interleaved; chunk_size 4
    reqs = [_req(i, q=f"q{i % 3}") for i in range(9)]
    scorer = FakeFP()
    rt = ScorerRuntime(scorer, cache_path=db, chunk_size=4, progress=False)
    rt.score(reqs)
    for call in scorer.calls:
        questions = [next(r.question for r in reqs if r.response == resp) for resp in call]
        # each group of 3 sits whole in one chunk
        assert all(questions.count(q) == 3 for q in set(questions)), questions
    assert rt.stats()["chunks"] == len(scorer.calls) == 3

    # killed during the third chunk: the first two chunks are stored, the rerun does the rest
    db2 = str(tmp_path / "killed.sqlite")
    dying = FakeFP(fail_from_call=2)
    with pytest.raises(KeyboardInterrupt):
        ScorerRuntime(dying, cache_path=db2, chunk_size=3, progress=False).score(reqs)
    with sqlite3.connect(db2) as conn:
        assert conn.execute("SELECT COUNT(*) FROM scores").fetchone()[0] == 6
    resumed = FakeFP()
    rt2 = ScorerRuntime(resumed, cache_path=db2, chunk_size=3, progress=False)
    assert rt2.score(reqs) == [float(i + 1) for i in range(9)]
    assert rt2.stats()["cache_hits"] == 6 and rt2.stats()["computed"] == 3


class BatchSensitive(FakeFP):
    """Like a padded model on a CPU: a score's last bits depend on what else is in the batch."""

    def score(self, requests):
        if self.fail_from_call is not None and len(self.calls) >= self.fail_from_call:
            raise KeyboardInterrupt("killed")
        self.calls.append([r.response for r in requests])
        longest = max(len(r.response) for r in requests)
        return [len(r.response) + 1e-9 * longest for r in requests]


@pytest.mark.parametrize("killed_after", [1, 2, 3])
def test_resumed_scores_equal_uninterrupted_ones_bit_for_bit(tmp_path, killed_after):
    # groups of 4, 4, 3, 3 and one larger than a chunk, cut into chunks of 5
    reqs = [_req(i, q=f"q{i % 4}") for i in range(14)] + [_req(20 + i, q="big") for i in range(7)]
    whole = ScorerRuntime(BatchSensitive(), cache=False, chunk_size=5, progress=False).score(reqs)
    db = str(tmp_path / "killed.sqlite")
    with pytest.raises(KeyboardInterrupt):
        ScorerRuntime(BatchSensitive(fail_from_call=killed_after), cache_path=db, chunk_size=5,
                      progress=False).score(reqs)
    rt = ScorerRuntime(BatchSensitive(), cache_path=db, chunk_size=5, progress=False)
    assert rt.score(reqs) == whole  # exact, not approximate
    assert rt.stats()["cache_hits"] > 0


@pytest.mark.parametrize("killed_after", [1, 2, 3, 4])
def test_resume_is_bit_exact_when_a_split_group_interleaves_with_others(tmp_path, killed_after):
    # "big" (7 answers) exceeds a chunk of 3 and its answers alternate with other groups' ones:
    # once its first chunk is stored, its first missing answer comes after theirs
    reqs = []
    for i in range(7):
        reqs.append(_req(i, q="big"))
        reqs.append(_req(10 + i, q=f"q{i % 3}"))
    whole = ScorerRuntime(BatchSensitive(), cache=False, chunk_size=3, progress=False).score(reqs)
    db = str(tmp_path / "killed.sqlite")
    with pytest.raises(KeyboardInterrupt):
        ScorerRuntime(BatchSensitive(fail_from_call=killed_after), cache_path=db, chunk_size=3,
                      progress=False).score(reqs)
    rt = ScorerRuntime(BatchSensitive(), cache_path=db, chunk_size=3, progress=False)
    assert rt.score(reqs) == whole  # exact, not approximate


class CheckedOnFirstGroup(BatchSensitive):
    """Like prefix sharing checked on the first group a process meets: the check's outcome (here,
    which group it ran on) changes the last bits of every later score."""

    def __init__(self, fail_from_call: int | None = None) -> None:
        super().__init__(fail_from_call=fail_from_call)
        self.mode: str | None = None
        self.adopted: list[dict] = []

    def decisions(self):
        return {} if self.mode is None else {"mode": self.mode}

    def adopt_decisions(self, decisions):
        self.adopted.append(dict(decisions))
        self.mode = decisions.get("mode", self.mode)

    def score(self, requests):
        if self.mode is None:
            self.mode = requests[0].question
        bump = 1e-7 if self.mode == "q0" else 2e-7
        return [s + bump for s in super().score(requests)]


@pytest.mark.parametrize("killed_after", [1, 2])
def test_a_resumed_run_reuses_the_decisions_stored_with_the_cache(tmp_path, killed_after):
    reqs = [_req(i, q=f"q{i % 4}") for i in range(16)]
    whole = ScorerRuntime(CheckedOnFirstGroup(), cache=False, chunk_size=4,
                          progress=False).score(reqs)
    db = str(tmp_path / "killed.sqlite")
    with pytest.raises(KeyboardInterrupt):
        ScorerRuntime(CheckedOnFirstGroup(fail_from_call=killed_after), cache_path=db,
                      chunk_size=4, progress=False).score(reqs)
    scorer = CheckedOnFirstGroup()
    rt = ScorerRuntime(scorer, cache_path=db, chunk_size=4, progress=False)
    assert rt.score(reqs) == whole  # a fresh decision would be made on group q<killed_after>
    assert scorer.adopted == [{"mode": "q0"}]
    assert rt.describe()["runtime"]["decisions"] == {"mode": "q0"}
    # a run under another fingerprint decides for itself
    other = CheckedOnFirstGroup()
    other._fp = "fp-2"
    ScorerRuntime(other, cache_path=db, chunk_size=4, progress=False).score(reqs[5:13])
    assert other.adopted == [] and other.mode == "q1"


class Raced(CheckedOnFirstGroup):
    """Another process stores its decision while this one computes its first chunk."""

    def __init__(self, db: str, theirs: str, stubborn: bool = False) -> None:
        super().__init__()
        self.db, self.theirs, self.stubborn = db, theirs, stubborn

    def score(self, requests):
        if not self.calls:
            from prbench.scoring.cache import ScoreCache

            ScoreCache("fp-1", self.db).decide({"mode": self.theirs})
        return super().score(requests)

    def adopt_decisions(self, decisions):
        if self.stubborn:
            self.adopted.append(dict(decisions))
        else:
            super().adopt_decisions(decisions)


def test_a_decision_stored_first_by_another_run_wins_and_the_chunk_is_redone(tmp_path):
    db = str(tmp_path / "race.sqlite")
    reqs = [_req(i, q=f"q{i % 2}") for i in range(6)]
    scorer = Raced(db, theirs="q1")
    got = ScorerRuntime(scorer, cache_path=db, chunk_size=4, progress=False).score(reqs)
    assert scorer.mode == "q1" and scorer.adopted == [{"mode": "q1"}]
    expected = ScorerRuntime(CheckedOnFirstGroup(), cache=False, chunk_size=4, progress=False)
    expected.scorer.mode = "q1"
    assert got == expected.score(reqs)
    assert len(scorer.calls) == len(expected.scorer.calls) + 1  # the first chunk was redone


def test_a_scorer_that_ignores_the_stored_decision_is_refused(tmp_path):
    from prbench.scoring.cache import ScoreCache

    db = str(tmp_path / "stubborn.sqlite")
    rt = ScorerRuntime(Raced(db, theirs="q9", stubborn=True), cache_path=db, progress=False)
    with pytest.raises(RuntimeError, match=r"'Raced' did not adopt .*mode"):
        rt.score([_req(0)])
    assert ScoreCache("fp-1", db).count() == 0  # nothing stored under the wrong decision


def test_a_group_larger_than_a_chunk_is_split():
    scorer = Fake(fp=None)
    rt = ScorerRuntime(scorer, chunk_size=2, progress=False)
    rt.score([_req(i) for i in range(5)])
    assert [len(c) for c in scorer.calls] == [2, 2, 1]


class Hungry(Fake):
    """Runs out of memory on chunks bigger than ``fits``."""

    def __init__(self, fits: int, error: str = "torch") -> None:
        super().__init__(fp=None)
        self.fits, self.error = fits, error

    def score(self, requests):
        if len(requests) > self.fits:
            if self.error == "torch":
                import torch

                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")
            raise RuntimeError("CUDA error: out of memory")
        return super().score(requests)


@pytest.mark.parametrize("error", ["torch", "runtime"])
def test_out_of_memory_halves_the_chunk(error):
    scorer = Hungry(fits=3, error=error)
    rt = ScorerRuntime(scorer, chunk_size=16, progress=False)
    reqs = [_req(i) for i in range(13)]
    assert rt.score(reqs) == [float(i + 1) for i in range(13)]
    stats = rt.stats()
    assert stats["oom_retries"] == 2 and stats["chunk_size"] == 3  # a chunk of 13 -> 6 -> 3
    assert all(len(c) <= 3 for c in scorer.calls)
    assert stats["computed"] == 13
    # the lowered size stays for later calls
    before = stats["oom_retries"]
    rt.score([_req(i, q="new") for i in range(4)])
    assert rt.stats()["oom_retries"] == before


def test_accelerator_memory_is_emptied_once_the_failed_chunk_is_released(monkeypatch):
    import sys
    import weakref

    import prbench.oom as oom

    class Held:
        pass

    refs, seen = [], []

    class HoldsTensors(Hungry):
        def score(self, requests):
            held = Held()  # what a failed forward pass keeps alive through its traceback
            refs.append(weakref.ref(held))
            return super().score(requests)

    monkeypatch.setattr(
        oom, "free_accelerator_memory",
        lambda: seen.append((sys.exc_info()[0], [r() for r in refs])),
    )
    rt = ScorerRuntime(HoldsTensors(fits=3), chunk_size=16, progress=False)
    rt.score([_req(i) for i in range(8)])
    assert len(seen) == rt.stats()["oom_retries"] == 2
    assert all(exc is None and all(r is None for r in alive) for exc, alive in seen)


def test_out_of_memory_on_one_request_is_a_clear_error():
    rt = ScorerRuntime(Hungry(fits=0), chunk_size=4, progress=False)
    with pytest.raises(ScorerOutOfMemoryError, match=r"single request .*record 'r0'.*max_length"):
        rt.score([_req(0)])


def test_other_errors_are_not_retried():
    class Broken(Fake):
        def score(self, requests):
            self.calls.append([])
            raise ValueError("bad input")

    scorer = Broken(fp=None)
    # one error naming the scorer, the original exception kept as its cause
    with pytest.raises(ScorerFaultError, match=r"scorer 'Broken' failed .*ValueError: bad input"):
        ScorerRuntime(scorer, chunk_size=8, progress=False).score([_req(i) for i in range(4)])
    assert len(scorer.calls) == 1


def test_wrong_count_names_the_scorer():
    class Short(Fake):
        def score(self, requests):
            return [1.0]

    with pytest.raises(RuntimeError, match="returned 1 scores for 2 requests"):
        ScorerRuntime(Short(fp=None), progress=False).score([_req(0), _req(1)])


def test_non_finite_scores_are_returned_but_never_cached(tmp_path):
    class Nan(FakeFP):
        def score(self, requests):
            self.calls.append([r.response for r in requests])
            return [math.nan if r.record_id == "r0" else 1.0 for r in requests]

    db = str(tmp_path / "s.sqlite")
    rt = ScorerRuntime(Nan(), cache_path=db, progress=False)
    out = rt.score([_req(0), _req(1)])
    assert math.isnan(out[0]) and out[1] == 1.0 and rt.stats()["nonfinite"] == 1
    again = Nan()
    ScorerRuntime(again, cache_path=db, progress=False).score([_req(0), _req(1)])
    assert again.calls == [["x"]]


class Judge:
    def __init__(self):
        self.calls = 0

    def compare(self, pairs):
        self.calls += len(pairs)
        return [1.0 if len(p.first) > len(p.second) else math.nan for p in pairs]

    def fingerprint(self):
        return "judge-fp"


def test_compare_goes_through_the_same_machinery(tmp_path):
    db = str(tmp_path / "s.sqlite")
    pairs = [PairRequest(record_id=f"r{i}", question="q", first="aa", second="a" * i)
             for i in range(3)]
    judge = Judge()
    rt = ScorerRuntime(judge, cache_path=db, progress=False, pairwise=True)
    out = rt.compare(pairs + pairs)
    assert out[:2] == [1.0, 1.0] and math.isnan(out[2]) and judge.calls == 3
    with pytest.raises(TypeError, match="pairwise judge: call compare"):
        rt.score([_req(0)])
    second = Judge()
    ScorerRuntime(second, cache_path=db, progress=False, pairwise=True).compare(pairs)
    assert second.calls == 1  # only the NaN verdict is asked again
    with pytest.raises(TypeError, match="without a compare"):
        ScorerRuntime(Fake(), pairwise=True)


def test_describe_is_json_ready_and_close_closes_everything(tmp_path):
    scorer = FakeFP()
    with ScorerRuntime(scorer, cache_path=str(tmp_path / "s.sqlite"), progress=False) as rt:
        rt.score([_req(0)])
        info = rt.describe()
    assert json.loads(json.dumps(info)) == info
    assert info["fingerprint"] == "fp-1" and info["scorer"] == {"model": "fake", "revision": "abc"}
    assert info["runtime"]["cache"] is True and info["runtime"]["cache_path"].endswith("s.sqlite")
    assert info["stats"]["computed"] == 1
    assert scorer.closed == 1 and rt.closed
    rt.close()
    assert scorer.closed == 1, "close is idempotent"
    with pytest.raises(RuntimeError, match="closed"):
        rt.score([_req(0)])


def test_build_runtime_splits_and_validates_options(tmp_path):
    db = tmp_path / "s.sqlite"
    rt = build_runtime("length", {"unit": "chars", "cache": "false", "chunk_size": "3",
                                  "cache_path": str(db), "progress": "0"})
    assert rt.chunk_size == 3 and not rt.progress and not rt.cache_enabled
    assert rt.options.unit == "chars" and not rt.pairwise
    assert rt.score([_req(0), _req(4)]) == [1.0, 5.0]
    info = rt.describe()
    assert info["component"]["id"] == "length" and info["options"]["unit"] == "chars"
    with pytest.raises(OptionsError, match=r"unknown option 'chunk_sise'.*'chunk_size'"):
        build_runtime("length", {"chunk_sise": 3})
    with pytest.raises(OptionsError, match="option 'chunk_size' must be >= 0, <= 1048576, got -1"):
        build_runtime("length", {"chunk_size": -1})
    assert build_runtime("length", {"chunk_size": 0}).chunk_size == 256  # no default of its own
    with pytest.raises(OptionsError, match="cache"):
        build_runtime("length", {"cache": "maybe"})


class OwnChunk(Fake):
    """A scorer that names its own chunk size (as ``hf-classifier`` does per device)."""

    def __init__(self, value: object) -> None:
        super().__init__()
        self.value = value

    def default_chunk_size(self) -> object:
        return self.value


def test_chunk_size_zero_takes_the_scorers_default():
    assert ScorerRuntime(OwnChunk(7), cache=False, progress=False).chunk_size == 7
    assert ScorerRuntime(OwnChunk(7), cache=False, progress=False, chunk_size=3).chunk_size == 3
    assert ScorerRuntime(Fake(), cache=False, progress=False).chunk_size == 256
    rt = ScorerRuntime(OwnChunk(2), cache=False, progress=False)
    rt.score([_req(i, q=str(i)) for i in range(5)])
    assert rt.stats()["chunks"] == 3 and rt.describe()["runtime"]["chunk_size"] == 2
    for bad in (0, "8", True, 2.5):
        with pytest.raises(ScorerFaultError,
                           match=r"default_chunk_size\(\) must return a positive"):
            ScorerRuntime(OwnChunk(bad), cache=False, progress=False)


# -- a damaged cache ------------------------------------------------------------------------------


def test_a_corrupt_cache_file_names_itself_and_the_ways_out(tmp_path):
    db = tmp_path / "scores.sqlite"
    db.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(StoreError) as err:
        ScorerRuntime(FakeFP(), cache_path=str(db), progress=False)
    text = str(err.value)
    assert str(db) in text and "cache=false" in text and "move the file aside" in text


def test_a_truncated_cache_file_names_itself(tmp_path):
    db = tmp_path / "scores.sqlite"
    rt = ScorerRuntime(FakeFP(), cache_path=str(db), progress=False)
    rt.score([_req(i, q=f"q{i}") for i in range(300)])
    rt.close()
    for extra in ("-wal", "-shm"):
        (tmp_path / f"scores.sqlite{extra}").unlink(missing_ok=True)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])
    with pytest.raises(StoreError, match=r"scores\.sqlite is unusable.*cache=false"):
        again = ScorerRuntime(FakeFP(), cache_path=str(db), progress=False)
        again.score([_req(i, q=f"q{i}") for i in range(300)])


def test_stored_non_numbers_are_misses_and_get_overwritten(tmp_path):
    db = tmp_path / "scores.sqlite"
    # a table without NOT NULL, so a NULL row can exist next to a text row
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE scores (fingerprint TEXT NOT NULL, key TEXT NOT NULL, "
                     "score REAL, created REAL NOT NULL, PRIMARY KEY (fingerprint, key)) "
                     "WITHOUT ROWID")
        conn.executemany("INSERT INTO scores VALUES ('fp-1', ?, ?, 0)",
                         [(request_key(_req(0)), "oops"), (request_key(_req(1)), None),
                          (request_key(_req(2)), 42.0)])
    scorer = FakeFP()
    rt = ScorerRuntime(scorer, cache_path=str(db), progress=False)
    assert rt.score([_req(0), _req(1), _req(2)]) == [1.0, 2.0, 42.0]
    assert sorted(scorer.calls[0]) == ["x", "xx"]
    with sqlite3.connect(db) as conn:
        stored = dict(conn.execute("SELECT key, score FROM scores").fetchall())
    assert stored[request_key(_req(0))] == 1.0 and stored[request_key(_req(1))] == 2.0


def test_two_processes_share_one_cache_through_the_runtime(tmp_path):
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    db = tmp_path / "shared.sqlite"
    script = textwrap.dedent(
        f"""
        import sys
        from prbench.profiles.base import ProfileView
        from prbench.scoring.base import ScoreRequest
        from prbench.scoring.runtime import ScorerRuntime

        class Scorer:
            def score(self, requests):
                return [float(len(r.response)) for r in requests]

            def fingerprint(self):
                return "shared-fp"

        start = int(sys.argv[1])
        requests = [ScoreRequest(record_id=f"r{{i}}", question=f"q{{i % 7}}",
                                 response="x" * (i + 1), profile=ProfileView(text="p"))
                    for i in range(start, start + 120)]
        rt = ScorerRuntime(Scorer(), cache_path={str(db)!r}, chunk_size=5, progress=False)
        assert rt.score(requests) == [float(i + 1) for i in range(start, start + 120)]
        """
    )
    repo = Path(__file__).resolve().parents[1]
    env = {**__import__("os").environ, "PYTHONPATH": str(repo)}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(start)], env=env,
                              stderr=subprocess.PIPE) for start in (0, 60)]  # 60 overlap
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT COUNT(*) FROM scores").fetchone()[0] == 180
    scorer = FakeFP(fp="shared-fp")
    rt = ScorerRuntime(scorer, cache_path=str(db), progress=False)
    reqs = [ScoreRequest(record_id=f"r{i}", question=f"q{i % 7}", response="x" * (i + 1),
                         profile=ProfileView(text="p")) for i in range(180)]
    assert rt.score(reqs) == [float(i + 1) for i in range(180)] and scorer.calls == []


def test_calls_from_threads_run_one_at_a_time():
    import threading
    import time

    class Slow(Fake):
        def __init__(self):
            super().__init__(fp=None)
            self.active = 0
            self.most = 0

        def score(self, requests):
            self.active += 1
            self.most = max(self.most, self.active)
            time.sleep(0.02)
            self.active -= 1
            return super().score(requests)

    scorer = Slow()
    rt = ScorerRuntime(scorer, chunk_size=2, progress=False)
    threads = [threading.Thread(target=rt.score, args=([_req(i, q=f"t{k}") for i in range(4)],))
               for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert scorer.most == 1 and rt.stats()["computed"] == 16


@pytest.mark.parametrize("seed", range(20))
def test_chunk_plans_are_prefix_stable(seed):
    """What a resumed run plans for the requests still missing is the rest of the first plan."""
    import random

    from prbench.scoring.resume import plan_chunks

    rng = random.Random(seed)
    groups = [(f"q{rng.randrange(8)}", "p") for _ in range(rng.randint(1, 60))]
    order = list(range(len(groups)))
    size = rng.randint(1, 9)
    plan = plan_chunks(order, groups, size)
    assert sorted(i for c in plan for i in c) == order and all(len(c) <= size for c in plan)
    for done in range(len(plan) + 1):
        committed = {i for c in plan[:done] for i in c}
        rest = [i for i in order if i not in committed]
        assert plan_chunks(rest, [groups[i] for i in rest], size) == plan[done:]


class Meddler:
    """Scores the profile's length, then changes every request it was given, frozen or not."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def score(self, requests):
        out = []
        for r in requests:
            self.seen.append(r.profile.text)
            out.append(float(len(r.profile.text)))
            r.profile.extra["meddled"] = True
            object.__setattr__(r.profile, "text", "the user loves long answers " * 20)
            object.__setattr__(r.profile, "items", ())
            object.__setattr__(r, "profile", ProfileView(text="replaced"))
            object.__setattr__(r, "question", "changed")
        return out


def test_a_scorer_that_changes_its_requests_changes_only_its_copies():
    """Requests of one record share their profile view (and the task keeps it for the next
    scorer): a scorer changing it, even through object.__setattr__, must not reach the later
    requests of the run, nor a later scorer, nor the caller's objects."""
    items = (ProfileItem(id="p1", category="c", text="I cook"),)
    view = ProfileView(text="I cook", items=items, extra={"scores": [0.5]})
    requests = [ScoreRequest(record_id=f"r{i // 2}", question="q", response="a" * (i + 1),
                             profile=view) for i in range(4)]
    meddler = Meddler()
    first = ScorerRuntime(meddler, cache=False, chunk_size=1, progress=False).score(requests)
    assert meddler.seen == ["I cook"] * 4 and first == [6.0] * 4
    assert view.text == "I cook" and view.items == items and view.extra == {"scores": [0.5]}
    assert all(r.profile is view and r.question == "q" for r in requests)
    later = Meddler()
    assert ScorerRuntime(later, cache=False, progress=False).score(requests) == [6.0] * 4
    assert later.seen == ["I cook"] * 4
