"""The one SQLite store behind the score, embedding, response and planner caches."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from prbench.backends.cache import ResponseCache
from prbench.judges.planner import PlanCache
from prbench.profiles.embed_cache import EmbeddingCache
from prbench.scoring.cache import ScoreCache
from prbench.store import IN_CHUNK, SQLiteStore, StoreError

TABLE = ("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)",)


def _store(path: Path, namespace: str = "test", version: int = 1) -> SQLiteStore:
    return SQLiteStore(path, namespace=namespace, schema_version=version, tables=TABLE,
                       label="test cache", off_hint="test=off")


def test_round_trip_wal_and_chunked_in_queries(tmp_path: Path) -> None:
    store = _store(tmp_path / "sub" / "t.sqlite")
    n = 3 * IN_CHUNK + 7
    assert store.write("INSERT INTO kv VALUES (?, ?)", [(f"k{i}", str(i)) for i in range(n)]) == n
    rows = store.query_in("SELECT k, v FROM kv WHERE k IN ({marks})",
                          [f"k{i}" for i in range(n)] + ["missing", "k0"])
    assert len(rows) == n and dict(rows)["k1234"] == "1234"
    assert store.query("PRAGMA journal_mode")[0][0] == "wal"
    assert store.get_meta("schema") == "1" and store.get_meta("schema:test") == "1"
    store.set_meta("note", "a")
    store.set_meta("note", "b")
    assert store.get_meta("note") == "a"
    store.set_meta("note", "b", replace=True)
    assert store.get_meta("note") == "b"
    store.close()
    assert _store(tmp_path / "sub" / "t.sqlite").query("SELECT COUNT(*) FROM kv")[0][0] == n


def test_a_failed_write_keeps_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path / "t.sqlite")
    with pytest.raises(StoreError, match="unusable"):  # NOT NULL violated on the second row
        store.write("INSERT INTO kv VALUES (?, ?)", [("a", "1"), ("b", None)])
    assert store.query("SELECT COUNT(*) FROM kv")[0][0] == 0


def test_namespaces_share_a_file_and_versions_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    _store(path, "one").close()
    _store(path, "two", version=3).close()
    with pytest.raises(StoreError, match=r"schema 3 \(schema:two\).*expects 4"):
        _store(path, "two", version=4)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '9' WHERE name = 'schema'")
    with pytest.raises(StoreError, match="schema 9"):
        _store(path, "one")


@pytest.mark.parametrize(
    ("make", "hint"),
    [
        (lambda p: ScoreCache("fp", p / "c.sqlite"), "cache=false"),
        (lambda p: EmbeddingCache(p / "c.sqlite"), "cache=false"),
        (lambda p: ResponseCache(p), 'cache_dir=""'),
        (lambda p: PlanCache(p), "use_plan_cache=false"),
    ],
    ids=["scores", "embeddings", "responses", "plans"],
)
def test_every_view_names_a_corrupt_file_and_the_ways_out(tmp_path, make, hint) -> None:
    for name in ("c.sqlite", "responses.sqlite", "plans.sqlite"):
        (tmp_path / name).write_bytes(bytes(range(256)) * 32)
    with pytest.raises(StoreError) as info:
        make(tmp_path)
    text = str(info.value)
    assert str(tmp_path) in text and hint in text and "move the file aside" in text


def test_embedding_cache_unreadable_vector_is_a_miss_and_overwritten(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "e.sqlite", meta={"model": "m"})
    cache.put({"a": np.arange(4, dtype=np.float32), "b": np.ones(4, dtype=np.float32)})
    with sqlite3.connect(tmp_path / "e.sqlite") as conn:
        conn.execute("UPDATE vectors SET data = x'0102' WHERE hash = 'a'")
        conn.execute("UPDATE vectors SET data = 'text' WHERE hash = 'b'")
    assert cache.get(["a", "b"]) == {}
    cache.put({"a": np.full(4, 2.0, dtype=np.float32)})
    np.testing.assert_array_equal(cache.get(["a"])["a"], np.full(4, 2.0, dtype=np.float32))
    assert cache.store.get_meta("model") == '{"model": "m"}'


def test_plan_cache_round_trip_and_non_text_reply_is_a_miss(tmp_path: Path) -> None:
    cache = PlanCache(tmp_path)
    assert cache.get("k") is None
    cache.put("k", "plan text", {"backend": "b"})
    assert PlanCache(tmp_path).get("k") == "plan text"
    with sqlite3.connect(tmp_path / "plans.sqlite") as conn:
        conn.execute("UPDATE plans SET reply = x'00ff' WHERE key = 'k'")
    assert cache.get("k") is None
    cache.put("k", "again", {})
    assert cache.get("k") == "again"


def test_score_cache_stored_non_numbers_are_misses(tmp_path: Path) -> None:
    cache = ScoreCache("fp", tmp_path / "s.sqlite")
    cache.put_many({"a": 1.0, "b": 2.0, "c": 3.0})
    with sqlite3.connect(tmp_path / "s.sqlite") as conn:
        conn.execute("UPDATE scores SET score = 'oops' WHERE key = 'a'")
        conn.execute("UPDATE scores SET score = x'00' WHERE key = 'b'")
    assert cache.get_many(["a", "b", "c"]) == {"c": 3.0}
    cache.put_many({"a": 5.0})
    assert cache.get("a") == 5.0
