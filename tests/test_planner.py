"""The planner profile condition: plans from retrieved posts, the plan cache, failures."""

from __future__ import annotations

import pytest
from _judges_fixtures import ScriptedBackend, source_row, tagged, user_text

from prbench.jsonio import Row
from prbench.judges.planner import PlannerOptions, PlannerProfileBuilder
from prbench.judges.rating import JudgeParseError
from prbench.options import OptionsError
from prbench.plugins import get_registry
from prbench.records import Record, RecordChecker

PLAN = "- meals cooked on a stove only\n- vegetables children will eat\n- costs under forty dollars"


def records(n: int = 2) -> list[Record]:
    out = []
    for i in range(n):
        row = source_row(f"r{i}")
        row.update(chosen="c", rejected="r")
        rec = RecordChecker().record(Row("mem.jsonl", i + 1, row), "Lifestyle")
        assert rec is not None
        out.append(rec)
    return out


def planner(respond=lambda chat: PLAN, fingerprint="scripted-v1", **options):
    backend = ScriptedBackend(respond, fingerprint=fingerprint)
    opts = PlannerOptions(retriever="all", **options)
    return PlannerProfileBuilder(opts, backend=backend), backend


def test_the_rm_sees_the_inferred_plan_built_from_retrieved_posts():
    builder, backend = planner()
    recs = records(2)
    views = builder.build(recs)
    assert len(views) == 2
    view = views[0]
    assert view.extra["plan"] == [
        "meals cooked on a stove only", "vegetables children will eat", "costs under forty dollars"
    ]
    assert "- vegetables children will eat" in view.text
    assert "Is a stovetop enough" not in view.text  # show=plan: the posts are not repeated
    assert [p.id for p in view.items] == ["r0-p1", "r0-p2", "r0-p3"]
    assert view.builder.startswith("planner(retriever=all")
    prompt = user_text(backend.chats[0])
    assert "Is a stovetop enough for bread?" in tagged(backend.chats[0], "profile")
    assert recs[0].question in prompt
    assert recs[0].narrative not in prompt  # the planner never sees hidden fields
    assert "stovetop-only recipes" not in prompt


def test_plan_plus_posts():
    builder, _ = planner(show="plan+posts")
    text = builder.build(records(1))[0].text
    assert text.index("costs under forty dollars") < text.index("Is a stovetop enough")


def test_plans_are_cached_by_fingerprint_and_prompt(tmp_path):
    first, backend = planner(plan_cache_dir=str(tmp_path))
    views = first.build(records(2))
    assert len(backend.chats) == 2

    def must_not_run(chat):
        raise AssertionError("the cache should have answered")

    again, _ = planner(must_not_run, plan_cache_dir=str(tmp_path))
    assert [v.text for v in again.build(records(2))] == [v.text for v in views]
    assert again.stats()["n_cache_hits"] == 2 and again.stats()["n_generated"] == 0

    other_model, other_backend = planner(fingerprint="scripted-v2", plan_cache_dir=str(tmp_path))
    other_model.build(records(2))
    assert len(other_backend.chats) == 2  # another model's plans are not reused

    other_prompt, prompt_backend = planner(plan_cache_dir=str(tmp_path), max_aspects=3)
    other_prompt.build(records(1))
    assert len(prompt_backend.chats) == 1  # another prompt (max_aspects is in it) regenerates

    off, off_backend = planner(plan_cache_dir=str(tmp_path), use_plan_cache=False)
    off.build(records(1))
    assert len(off_backend.chats) == 1


def test_default_cache_lives_under_prbench_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("PRBENCH_CACHE_DIR", str(tmp_path))
    builder, _ = planner()
    builder.build(records(1))
    assert (tmp_path / "planner" / "plans.sqlite").is_file()


def test_an_unreadable_plan_is_empty_flagged_and_counted():
    def respond(chat):
        return "They want cheap food." if "(r1)" in user_text(chat) else PLAN

    builder, _ = planner(respond)
    ok, bad = builder.build(records(2))
    assert ok.extra["plan_failure"] is None and ok.text
    assert bad.extra["plan_failure"] == "no-list" and bad.extra["plan"] == [] and bad.text == ""
    stats = builder.stats()
    assert stats["n_parse_failures"] == 1 and stats["parse_failure_reasons"] == {"no-list": 1}

    strict, _ = planner(respond, on_failure="raise")
    with pytest.raises(JudgeParseError, match="record 'r1'"):
        strict.build(records(2))


def test_max_aspects_caps_the_plan():
    builder, _ = planner(max_aspects=2)
    assert len(builder.build(records(1))[0].extra["plan"]) == 2


def test_planner_through_the_registry_resolves_its_retriever():
    builder = get_registry().build(
        "profile-builder", "planner",
        {"model": "unused", "retriever": "all", "retriever_options": '{"max_tokens": 12}'},
    )
    builder._backend = ScriptedBackend(lambda chat: PLAN)
    view = builder.build(records(1))[0]
    assert view.extra["plan"]
    assert len(view.items) == 1  # the retriever's own options (a 12-word budget) were applied


def test_unknown_retriever_is_a_clear_error():
    builder, _ = planner()
    builder.options = PlannerOptions(retriever="dnese")
    builder._retriever = None
    with pytest.raises(ValueError, match=r"option `retriever`.*'dnese'.*did you mean 'dense'"):
        builder.build(records(1))


def test_bad_retriever_options_are_a_clear_error():
    builder = PlannerProfileBuilder(
        PlannerOptions(retriever="all", retriever_options={"k": 3}),
        backend=ScriptedBackend(lambda chat: PLAN),
    )
    with pytest.raises(ValueError, match=r"bad options for the profile-builder 'all'.*'k'"):
        builder.build(records(1))


def test_the_planner_cannot_retrieve_with_itself():
    with pytest.raises(OptionsError, match="cannot be the planner itself"):
        get_registry().build("profile-builder", "planner", {"retriever": "planner"})


def test_planner_needs_a_model_only_when_it_generates(tmp_path):
    builder = PlannerProfileBuilder(PlannerOptions(retriever="all"))
    with pytest.raises(ValueError, match="set the option `model`"):
        builder.build(records(1))


def test_planner_with_a_real_tiny_model_caches_by_its_fingerprint(tmp_path):
    from _judges_fixtures import tiny_chat_lm_long_context

    folder = tiny_chat_lm_long_context(tmp_path / "tiny")
    options = {"model": str(folder), "device": "cpu", "retriever": "all", "max_new_tokens": 12,
               "cache_dir": "", "plan_cache_dir": str(tmp_path / "plans")}
    first = get_registry().build("profile-builder", "planner", options)
    views = first.build(records(2))
    stats = first.stats()
    assert stats["n_generated"] == 2 and stats["backend"].startswith("hf:")
    assert stats["n_parse_failures"] == sum(v.extra["plan_failure"] is not None for v in views)
    # a plan cut at max_new_tokens is a failure (`truncated`) and, like every failure, not cached
    cut = sum(v.extra["plan_failure"] == "truncated" for v in views)
    second = get_registry().build("profile-builder", "planner", options)
    assert [v.text for v in second.build(records(2))] == [v.text for v in views]
    assert second.stats()["n_generated"] == cut and second.stats()["n_cache_hits"] == 2 - cut


class _DownFor(ScriptedBackend):
    """Answers with PLAN, except a generation failure for chats mentioning ``(<rid>)``."""

    def __init__(self, rid: str) -> None:
        super().__init__(lambda chat: PLAN)
        self.rid = rid

    def generate(self, chats, config):
        from prbench.backends import GenerationFailure

        out = super().generate(chats, config)
        return [
            GenerationFailure("timeout", "no complete response within 120 s")
            if f"({self.rid})" in user_text(chat) else reply
            for chat, reply in zip(chats, out, strict=True)
        ]


def test_a_plan_the_backend_could_not_generate_is_empty_counted_and_not_cached(tmp_path):
    backend = _DownFor("r1")
    builder = PlannerProfileBuilder(
        PlannerOptions(retriever="all", plan_cache_dir=str(tmp_path)), backend=backend
    )
    ok, failed = builder.build(records(2))
    assert ok.extra["plan"] and failed.extra["plan"] == [] and failed.text == ""
    assert failed.extra["plan_failure"] == "generation-failed"
    assert builder.stats()["parse_failure_reasons"] == {"generation-failed": 1}
    again, backend2 = planner(plan_cache_dir=str(tmp_path))
    views = again.build(records(2))
    assert len(backend2.chats) == 1 and "(r1)" in user_text(backend2.chats[0])  # only r1 again
    assert views[1].extra["plan"]


@pytest.mark.parametrize("env", ["1", "0"])
def test_planning_shows_a_progress_bar_unless_turned_off(monkeypatch, capsys, env):
    monkeypatch.setenv("PRBENCH_PROGRESS", env)
    builder, _ = planner(batch_size=1)
    builder.build(records(3))
    err = capsys.readouterr().err
    if env == "1":
        assert "planner" in err and "/3 " in err and "plan/s" in err
    else:
        assert err == ""
