"""One way to hash: every site's key or fingerprint pinned to the digest it had before the merge.

Each call below is a cache key or fingerprint stored on users' disks; a change of one digest
throws that cache away, so each is pinned to the value computed before the sites shared
:mod:`prbench.hashing`.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from prbench.hashing import (
    canonical_json,
    folder_files,
    json_sha256,
    seeded_unit,
    stable_hash,
    update_file_digest,
)

VALUE = {"b": [1.5, None, True], "a": "héllo ü", "z": {"y": 2, "x": Path("/p")}}


def test_stable_hash_and_seeded_unit_are_pinned() -> None:
    assert stable_hash("part", 3, VALUE) == (
        "6b712986d1a915adfd49903fbeede728b77759248752fe7b71c41b2702a4295d")
    assert seeded_unit("rm-r1-order", 7, "r1") == 0.06493756564528493


def test_score_cache_fingerprint_is_pinned() -> None:
    from prbench.scoring.cache import fingerprint_of

    assert fingerprint_of(VALUE) == (
        "f064b0e735bd90aef5dca9ce8a6180de741622d537f0b186b641a5de65abd7a1")


def test_score_request_keys_are_pinned() -> None:
    from prbench.scoring.base import PairRequest, ScoreRequest
    from prbench.scoring.request_key import request_key

    score = ScoreRequest(record_id="r1", question="Où?", response="ici ✓", category="c",
                         domain="d")
    assert request_key(score) == (
        "ac7106eaf435e263dd08fac69727c9163924f2825c826ae10f6c942e58bf55ba")
    pair = PairRequest(record_id="r1", question="Q", first="A é", second="B")
    assert request_key(pair) == (
        "d28526e022f27a7444044b8b71f598e9e6688b557221f0473d75d82ad529842c")


def test_http_reply_cache_key_is_pinned_and_strict() -> None:
    from prbench.backends.cache import request_key

    request = {"model": "m", "messages": [{"role": "user", "content": "héllo"}],
               "temperature": 0.0}
    assert request_key(request) == (
        "330aa611d8dbd74fd3f4e8e9ec6b418211e1d96b5f401e75e7df0b23b0eb5c5f")
    with pytest.raises(TypeError):  # never a key made from a value's str()
        request_key({"x": object()})


def test_sweep_cell_fingerprint_is_pinned() -> None:
    from prbench.harness.sweep_file import Cell, Condition, Scorer

    cell = Cell(Scorer("s", "scorer=length,é=1", {}),
                Condition("c", ("t1", "t2"), {"prbench_k": 3, "x": "ü"}), 0.5, ("--seed", "1"))
    assert cell.fingerprint() == "592e93f345df0bfe"


@pytest.fixture
def model_folder(tmp_path: Path) -> Path:
    (tmp_path / "config.json").write_text('{"a": 1}')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "tok.txt").write_text("tokens é", encoding="utf-8")
    (tmp_path / "model.bin").write_bytes(bytes(range(256)) * (5 * 4096 + 7))  # > 1 MiB
    (tmp_path / ".hidden").write_text("x")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref")
    for path in tmp_path.rglob("*"):
        if path.is_file():
            os.utime(path, ns=(1_700_000_000_000_000_000, 1_700_000_000_123_456_789))
    return tmp_path


def test_score_cache_model_identity_is_pinned(model_folder: Path) -> None:
    from prbench.scoring.cache import model_identity

    files = model_identity(str(model_folder), "main")["files"]
    assert {k.replace(os.sep, "/"): v for k, v in files.items()} == {
        ".git/HEAD": "95ebc4821cc7c04f", "config.json": "034a36cc6e05c1eb",
        "model.bin": "9ec5d888c7671192", "sub/tok.txt": "d675da15860b23d3",
    }


def test_embedding_model_fingerprint_is_pinned(model_folder: Path) -> None:
    from prbench.model_ref import _dir_fingerprint

    assert _dir_fingerprint(model_folder) == "dir:33e247166cfbcdf856a13ea163005fff"


def test_the_two_large_file_rules(model_folder: Path) -> None:
    big = model_folder / "model.bin"
    data, stat = big.read_bytes(), big.stat()
    ends = hashlib.sha256()
    update_file_digest(ends, big, large="ends")
    assert ends.hexdigest() == hashlib.sha256(
        data[:65536] + data[-65536:] + str(stat.st_mtime_ns).encode()).hexdigest()
    by_stat = hashlib.sha256()
    update_file_digest(by_stat, big, large="stat")
    assert by_stat.hexdigest() == hashlib.sha256(
        f"{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()
    small = hashlib.sha256()
    update_file_digest(small, model_folder / "config.json", large="stat")
    assert small.hexdigest() == hashlib.sha256(b'{"a": 1}').hexdigest()
    names = [p.relative_to(model_folder).as_posix()
             for p in folder_files(model_folder, hidden="any-part")]
    assert names == ["config.json", "model.bin", "sub/tok.txt"]
    assert ".git/HEAD" in [p.relative_to(model_folder).as_posix()
                           for p in folder_files(model_folder, hidden="name")]


def test_canonical_json_flavours() -> None:
    value = {"b": 1, "a": "é"}
    assert canonical_json(value) == '{"a": "é", "b": 1}'
    assert canonical_json(value, compact=True, ascii=True) == '{"a":"\\u00e9","b":1}'
    assert json_sha256(value) == hashlib.sha256(
        json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    assert json_sha256({"s": "\ud800"})  # a lone surrogate is hashed, not refused


def test_too_deep_names_the_path_and_counts_the_top_as_level_one() -> None:
    from prbench.nesting import too_deep

    assert too_deep("text", 0) is None
    assert too_deep([[1]], 2) is None
    assert too_deep([[1]], 1) == (0,)
    assert too_deep({"a": [1], "b": {"c": [[]]}}, 3) == ("b", "c", 0)
    deep: list = []
    for _ in range(100_000):  # far past the recursion limit: walked without recursion
        deep = [deep]
    assert too_deep({"meta": deep}, 64) is not None
    assert too_deep({"meta": deep}, 64)[0] == "meta"


def test_records_and_request_bodies_share_the_depth_check() -> None:
    from prbench.downstream.serve_schema import MAX_DEPTH, _depth_error
    from prbench.unicode_text import text_problems

    def nested(levels: int) -> list:
        value: list = ["x"]
        for _ in range(levels - 1):
            value = [value]
        return value

    assert _depth_error(nested(MAX_DEPTH), "labels") == ""
    assert _depth_error(nested(MAX_DEPTH + 1), "labels") == (
        f"labels: nested more than {MAX_DEPTH} levels deep")
    # a record object is level 1: a field may hold 63 more levels under a limit of 64
    assert list(text_problems({"meta": nested(63)}, 64)) == []
    assert list(text_problems({"meta": nested(64)}, 64)) == [
        ("meta", "is nested more than 64 lists/objects deep", "too-deeply-nested")]
