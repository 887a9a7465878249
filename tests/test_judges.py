"""llm-judge, llm-rating and rubric-judge around a scripted backend (parsing, orders, counting)."""

from __future__ import annotations

import math

import pytest
from _judges_fixtures import ScriptedBackend, tagged, user_text

from prbench.judges.common import generate_in_batches
from prbench.judges.pairwise import LLMJudgeOptions, LLMPairwiseJudge
from prbench.judges.rating import JudgeParseError, LLMRatingOptions, LLMRatingScorer
from prbench.judges.rubric import RubricItem, RubricJudge, RubricJudgeOptions
from prbench.options import OptionsError
from prbench.plugins import get_registry
from prbench.profiles.base import ProfileView
from prbench.records import RubricAspect
from prbench.scoring.base import PairRequest, ScoreRequest


def pair(rid: str, first: str, second: str, profile: str = "Post 1: no oven.") -> PairRequest:
    return PairRequest(
        record_id=rid, question="What should I cook?", first=first, second=second,
        profile=ProfileView(text=profile),
    )


def prefers(word: str):
    """A judge that picks the answer containing ``word`` (content-based, order-independent)."""

    def respond(chat):
        a, b = tagged(chat, "answer_a"), tagged(chat, "answer_b")
        if word in a and word not in b:
            return "Answer A fits the user.\nVerdict: A"
        if word in b and word not in a:
            return "Answer B fits the user.\nVerdict: B"
        return "They are the same to me."

    return respond


def judge(respond, **options) -> tuple[LLMPairwiseJudge, ScriptedBackend]:
    backend = ScriptedBackend(respond)
    return LLMPairwiseJudge(LLMJudgeOptions(**options), backend=backend), backend


def test_both_orders_are_judged_and_averaged():
    j, backend = judge(prefers("STOVE"))
    pairs = [pair("r1", "use the STOVE", "bake it"), pair("r2", "bake it", "use the STOVE")]
    assert j.compare(pairs) == [1.0, 0.0]
    assert len(backend.chats) == 4  # two orders per pair
    shown = [(tagged(c, "answer_a"), tagged(c, "answer_b")) for c in backend.chats]
    assert shown[0] == ("use the STOVE", "bake it") and shown[1] == ("bake it", "use the STOVE")
    stats = j.stats()
    assert stats["n_pairs"] == 2 and stats["n_replies"] == 4 and stats["n_parse_failures"] == 0
    assert stats["first_shown_win_rate"] == 0.5
    assert stats["order_agreement"] == 1.0
    assert stats["n_pairs_unjudged"] == 0


def test_the_prompt_holds_profile_question_and_no_hidden_fields():
    j, backend = judge(prefers("x"))
    j.compare([pair("r1", "x one", "two", profile="Post 1 (Category: Cooking): I own a wok.")])
    text = user_text(backend.chats[0])
    assert "I own a wok." in text and "What should I cook?" in text
    j.compare([pair("r2", "x one", "two", profile="")])
    assert "no information about this user" in user_text(backend.chats[-1])


def test_a_judge_that_always_says_a_is_pure_position_bias():
    j, _ = judge(lambda chat: "Verdict: A")
    out = j.compare([pair(f"r{i}", f"first {i}", f"second {i}") for i in range(3)])
    assert out == [0.5, 0.5, 0.5]
    stats = j.stats()
    assert stats["first_shown_win_rate"] == 1.0
    assert stats["order_agreement"] == 0.0


def test_one_unreadable_order_leaves_the_other():
    def respond(chat):
        if tagged(chat, "answer_a").startswith("good"):
            return "Verdict: A"
        return "Both have merits; I cannot choose."

    j, _ = judge(respond)
    assert j.compare([pair("r1", "good answer", "weak answer")]) == [1.0]
    stats = j.stats()
    assert stats["n_parse_failures"] == 1
    assert stats["parse_failure_reasons"] == {"no-verdict": 1}
    assert stats["n_pairs_both_orders_read"] == 0 and stats["order_agreement"] is None
    detail = j.details()[0]
    assert [o["failure"] for o in detail["orders"]] == [None, "no-verdict"]


def test_a_pair_whose_every_order_failed_is_nan_never_a():
    # The released code maps an unreadable verdict to "A" (p=1 in the first order); we must not.
    j, _ = judge(lambda chat: "Verdict: A or B, hard to say")
    out = j.compare([pair("r1", "one", "two"), pair("r2", "three", "four")])
    assert all(math.isnan(p) for p in out)
    stats = j.stats()
    assert stats["n_pairs_unjudged"] == 2
    assert stats["n_parse_failures"] == 4 and stats["parse_failure_reasons"] == {"both": 4}
    assert stats["n_verdicts"] == 0 and stats["first_shown_win_rate"] is None


def test_conflicting_orders_give_one_half():
    # position-consistent judge (always the answer shown second) -> orders disagree
    j, _ = judge(lambda chat: "Verdict: B")
    assert j.compare([pair("r1", "a", "b")]) == [0.5]
    assert j.stats()["first_shown_win_rate"] == 0.0


def test_single_order_is_seeded_and_batch_independent():
    pairs = [pair(f"r{i}", f"first {i}", f"second {i}") for i in range(40)]

    def shown_first(seed, subset):
        j, backend = judge(lambda chat: "Verdict: A", orders="one", seed=seed)
        j.compare(subset)
        return [tagged(c, "answer_a").startswith("first") for c in backend.chats]

    full = shown_first(3, pairs)
    assert len(full) == 40  # one order per pair
    assert shown_first(3, pairs) == full
    assert shown_first(3, pairs[10:20]) == full[10:20]  # the choice depends on the pair only
    assert shown_first(4, pairs) != full
    assert 8 < sum(full) < 32  # both positions are used


def test_single_order_probability_maps_back_to_the_pair():
    j, backend = judge(prefers("GOOD"), orders="one", seed=1)
    pairs = [pair(f"r{i}", f"GOOD {i}", f"meh {i}") for i in range(12)]
    assert j.compare(pairs) == [1.0] * 12
    firsts = {tagged(c, "answer_a").startswith("GOOD") for c in backend.chats}
    assert firsts == {True, False}


def test_decoding_settings_and_batches_reach_the_backend():
    j, backend = judge(lambda chat: "Verdict: A", seed=7, temperature=0.5, batch_size=3,
                       max_new_tokens=64)
    j.compare([pair(f"r{i}", "a", "b") for i in range(4)])
    assert [len(batch) for batch, _ in backend.calls] == [3, 3, 2]
    config = backend.calls[0][1]
    assert (config.seed, config.temperature, config.max_new_tokens) == (7, 0.5, 64)


def test_stats_reset():
    j, _ = judge(lambda chat: "Verdict: A")
    j.compare([pair("r1", "a", "b")])
    j.reset_stats()
    assert j.stats()["n_pairs"] == 0 and j.details() == []


def test_generate_in_batches_checks_the_reply_count():
    backend = ScriptedBackend(lambda chat: "x")
    backend.generate = lambda chats, config: ["only one"]  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="returned 1 replies for 2 chats"):
        generate_in_batches(backend, [[{"role": "user", "content": "a"}]] * 2,
                            LLMJudgeOptions().generation_config(), 8)


# -- llm-rating ------------------------------------------------------------------------------------


def request(rid: str, response: str) -> ScoreRequest:
    return ScoreRequest(record_id=rid, question="What should I cook?", response=response,
                        profile=ProfileView(text="Post 1: no oven"))


def test_rating_reads_grades_and_counts_failures():
    replies = {"good": "Fits well.\nRating: 9", "bad": "Rating: 2/10", "odd": "A solid effort."}
    backend = ScriptedBackend(lambda chat: replies[tagged(chat, "answer")])
    scorer = LLMRatingScorer(LLMRatingOptions(), backend=backend)
    out = scorer.score([request("r1", "good"), request("r2", "bad"), request("r3", "odd")])
    assert out[:2] == [9.0, 2.0] and math.isnan(out[2])
    stats = scorer.stats()
    assert stats["n_replies"] == 3 and stats["n_parse_failures"] == 1
    assert stats["parse_failure_reasons"] == {"no-verdict": 1}


def test_rating_can_raise_instead_of_nan():
    backend = ScriptedBackend(lambda chat: "Rating: 12")
    scorer = LLMRatingScorer(LLMRatingOptions(on_failure="raise"), backend=backend)
    with pytest.raises(JudgeParseError, match=r"record 'r1'.*out-of-range"):
        scorer.score([request("r1", "x")])


def test_rating_scale_is_in_the_prompt_and_checked():
    backend = ScriptedBackend(lambda chat: "Rating: 5")
    scorer = LLMRatingScorer(LLMRatingOptions(low=1, high=5), backend=backend)
    assert scorer.score([request("r1", "x")]) == [5.0]
    assert "from 1 (useless" in user_text(backend.chats[0])
    with pytest.raises(ValueError, match="low must be below high"):
        LLMRatingOptions(low=5, high=5)


# -- rubric-judge ----------------------------------------------------------------------------------

ASPECTS = (
    RubricAspect("stovetop-only recipes", "no oven", "they have no oven"),
    RubricAspect("child-friendly food", "two kids", "they cook for children"),
)


def test_rubric_list_mode_mean_and_unit_scale():
    replies = {"full": "Scores: [2, 2]", "half": "Scores: [2, 0]", "short": "Scores: [1]"}
    backend = ScriptedBackend(lambda chat: replies[tagged(chat, "answer")])
    rj = RubricJudge(RubricJudgeOptions(), backend=backend)
    items = [RubricItem("q?", ASPECTS, answer, key=answer) for answer in ("full", "half", "short")]
    full, half, short = rj.judge(items)
    assert full.aspect_scores == (2, 2) and full.mean == 2.0 and full.unit == 1.0
    assert half.mean == 1.0 and half.unit == 0.5
    assert not short.ok and math.isnan(short.mean) and short.failure.reason == "wrong-length"
    assert len(backend.chats) == 3
    prompt = user_text(backend.chats[0])
    assert "1. stovetop-only recipes (why it matters to them: they have no oven)" in prompt
    assert "<details>" not in prompt  # no narrative unless asked
    stats = rj.stats()
    assert stats["n_items"] == 3 and stats["n_items_failed"] == 1
    assert stats["parse_failure_reasons"] == {"wrong-length": 1}


def test_rubric_per_aspect_mode_one_call_per_aspect_and_strict_items():
    def respond(chat):
        aspect_is_kids = "child-friendly" in user_text(chat)
        if tagged(chat, "answer") == "broken" and aspect_is_kids:
            return "Score: maybe"
        return "Score: 1" if aspect_is_kids else "Score: 2"

    backend = ScriptedBackend(respond)
    rj = RubricJudge(RubricJudgeOptions(mode="per-aspect", include_narrative=True), backend=backend)
    ok, broken = rj.judge([
        RubricItem("q?", ASPECTS, "fine", narrative="I have no oven."),
        RubricItem("q?", ASPECTS, "broken"),
    ])
    assert len(backend.chats) == 4
    assert ok.aspect_scores == (2, 1) and ok.mean == 1.5
    assert broken.aspect_scores == (2, None) and math.isnan(broken.mean)
    assert "I have no oven." in user_text(backend.chats[0])


def test_rubric_judge_as_a_diagnostic_scorer_reads_hidden_fields():
    backend = ScriptedBackend(lambda chat: "Scores: [2, 1]")
    rj = RubricJudge(RubricJudgeOptions(), backend=backend)
    hidden = {"narrative": "", "rubric_aspects": [
        {"aspect": a.aspect, "evidence": a.evidence, "reason": a.reason} for a in ASPECTS]}
    req = ScoreRequest(record_id="r1", question="q?", response="ans", hidden=hidden)
    assert rj.score([req]) == [0.75]
    raw = RubricJudge(RubricJudgeOptions(scale="raw"), backend=backend)
    assert raw.score([req]) == [1.5]
    with pytest.raises(ValueError, match="needs the hidden rubric"):
        rj.score([ScoreRequest(record_id="r2", question="q?", response="ans")])
    with pytest.raises(ValueError, match="no rubric aspects"):
        rj.score([ScoreRequest(record_id="r3", question="q", response="a",
                               hidden={"rubric_aspects": []})])


def test_rubric_judge_raise_mode_names_the_item():
    backend = ScriptedBackend(lambda chat: "no scores here")
    rj = RubricJudge(RubricJudgeOptions(on_failure="raise"), backend=backend)
    with pytest.raises(JudgeParseError, match=r"record 'cand-7'.*no-list"):
        rj.judge([RubricItem("q?", ASPECTS, "x", key="cand-7")])


# -- registration ----------------------------------------------------------------------------------


def test_components_are_registered_with_flags():
    reg = get_registry()
    assert reg.get("scorer", "llm-judge").tags == ("pairwise",)
    assert reg.get("scorer", "rubric-judge").diagnostic is True
    assert reg.get("scorer", "llm-rating").diagnostic is False
    assert reg.get("profile-builder", "planner").options is not None
    assert reg.get("pair-generator", "rubric-contrast").options is not None


def test_building_a_judge_without_a_model_is_a_clear_error():
    with pytest.raises(ValueError, match="set the option `model`"):
        get_registry().build("scorer", "llm-judge", {})
    with pytest.raises(OptionsError, match="orders"):
        get_registry().build("scorer", "llm-judge", {"model": "m", "orders": "three"})
    with pytest.raises(OptionsError, match="unknown option 'temprature'"):
        get_registry().build("scorer", "llm-rating", {"temprature": "0.3"})


# -- with a real (tiny, random) causal LM ---------------------------------------------------


def test_real_hf_backend_gibberish_is_counted_never_a_verdict(tmp_path):
    from _judges_fixtures import tiny_chat_lm_long_context

    folder = tiny_chat_lm_long_context(tmp_path / "tiny")
    j = get_registry().build(
        "scorer", "llm-judge",
        {"model": str(folder), "device": "cpu", "max_new_tokens": 4, "cache_dir": ""},
    )
    out = j.compare([pair("r1", "use the stove", "bake it")])
    stats = j.stats()
    assert stats["n_replies"] == 2
    # a reply that used all 4 tokens is `truncated` (a generation failure), never parsed
    assert stats["n_parse_failures"] + stats["n_generation_failures"] == 2 - stats["n_verdicts"]
    assert set(stats["generation_failure_reasons"]) <= {"truncated"}
    # whatever a random model says, a pair is nan exactly when none of its orders was readable
    for p, detail in zip(out, j.details(), strict=True):
        read = [o for o in detail["orders"] if o["verdict"] is not None]
        assert math.isnan(p) == (not read)
    assert stats["backend"].startswith("hf:")


# -- replies that cannot be used: invalid items, never verdicts, never a crashed run ---------------

BAD_KINDS = {
    "r-503": "ALWAYS503",
    "r-timeout": "SLOW",
    "r-notjson": "NOTJSON",
    "r-nochoices": "NOCHOICES",
    "r-null": "NOCONTENT",
}


def _marked(rid: str) -> str:
    return f"What should I cook? [{rid}]"


def _route(content: str) -> str:
    """Send a prompt to the server's scripted failure named by the record id it mentions."""
    for rid, kind in BAD_KINDS.items():
        if f"[{rid}]" in content:
            return f"{kind} {rid}"
    return content


def _http_judge(server, cache_dir: str, **options) -> LLMPairwiseJudge:
    server.route = _route
    server.answer = lambda content: prefers("STOVE")([{"role": "user", "content": content}])
    j = get_registry().build(
        "scorer", "llm-judge",
        {"backend": "openai", "model": "judge", "base_url": server.base_url, "max_retries": "1",
         "timeout": "0.5", "cache_dir": cache_dir, **options},
    )
    j.backend.backoff_base = 0.01
    return j


def test_bad_http_replies_are_invalid_items_with_reasons_and_the_run_finishes(tmp_path):
    from _backend_fixtures import ScriptedOpenAIServer

    pairs = [PairRequest(record_id=rid, question=_marked(rid), first="use the STOVE",
                         second="bake it", profile=ProfileView(text="no oven"))
             for rid in ["r-ok", *BAD_KINDS]]
    pairs.append(PairRequest(record_id="r-ok2", question=_marked("r-ok2"), first="bake it",
                             second="use the STOVE", profile=ProfileView(text="no oven")))
    with ScriptedOpenAIServer(slow_seconds=2.0) as server:
        j = _http_judge(server, str(tmp_path / "responses"))
        out = j.compare(pairs)
        assert out[0] == 1.0 and out[-1] == 0.0
        assert all(math.isnan(p) for p in out[1:-1])
        stats = j.stats()
        assert stats["n_pairs"] == 7 and stats["n_pairs_unjudged"] == 5
        assert stats["n_generation_failures"] == 10 and stats["n_parse_failures"] == 0
        assert stats["generation_failure_reasons"] == {
            "bad-response": 6, "http-503": 2, "timeout": 2
        }
        by_item: dict[str, set[str]] = {}
        for failure in stats["failures"]:
            assert failure["stage"] == "generation" and failure["shown_first"] in (
                "first", "second")
            by_item.setdefault(failure["item"], set()).add(failure["reason"])
        assert by_item == {"r-503": {"http-503"}, "r-timeout": {"timeout"},
                           "r-notjson": {"bad-response"}, "r-nochoices": {"bad-response"},
                           "r-null": {"bad-response"}}
        detail = next(f["detail"] for f in stats["failures"] if f["item"] == "r-null")
        assert "content is NoneType" in detail and "2 attempts" in detail
        described = j.describe()
        assert described["component"] == "llm-judge"
        assert described["stats"]["failures"] == stats["failures"]
        assert described["options"]["base_url"] == server.base_url
        # nothing unusable was cached: a new run asks only for the failed items again
        sent = len(server.requests)
        again = _http_judge(server, str(tmp_path / "responses"))
        out2 = again.compare(pairs)
        assert out2[0] == 1.0 and out2[-1] == 0.0 and all(math.isnan(p) for p in out2[1:-1])
        assert len(server.requests) - sent == 10 * 2  # 10 failed chats, 2 attempts each


def test_a_fatal_backend_error_stops_the_judge_with_one_line():
    from _backend_fixtures import ScriptedOpenAIServer

    from prbench.backends import BackendFatalError

    with ScriptedOpenAIServer() as server:
        j = _http_judge(server, "")
        server.route = lambda content: "MISSING404"
        with pytest.raises(BackendFatalError) as info:
            j.compare([pair("r1", "use the STOVE", "bake it")])
    assert "answered HTTP 404" in str(info.value) and "\n" not in str(info.value)


class _FailingBackend(ScriptedBackend):
    """A scripted backend whose reply is a generation failure where ``respond`` says ``FAIL``."""

    def generate(self, chats, config):
        from prbench.backends import GenerationFailure

        return [
            GenerationFailure("http-503", "request to the server failed after 6 attempts")
            if r == "FAIL" else r
            for r in super().generate(chats, config)
        ]


def test_callers_that_need_every_reply_get_a_clear_error_not_a_failure_object():
    from prbench.backends import BackendFatalError, GenerationFailedError

    backend = _FailingBackend(lambda chat: "FAIL" if user_text(chat) == "b" else "fine")
    chats = [[{"role": "user", "content": t}] for t in ("a", "b")]
    config = LLMJudgeOptions().generation_config()
    with pytest.raises(GenerationFailedError) as info:
        generate_in_batches(backend, chats, config, 8)
    assert isinstance(info.value, BackendFatalError) and info.value.index == 1
    assert "chat 1 got no reply (http-503: request to the server failed" in str(info.value)
    kept = generate_in_batches(backend, chats, config, 8, keep_failures=True)
    assert kept[0] == "fine" and kept[1].reason == "http-503"


def test_rating_turns_a_generation_failure_into_nan_with_its_reason():
    replies = {"good": "Rating: 8", "down": "FAIL", "odd": "no idea"}
    backend = _FailingBackend(lambda chat: replies[tagged(chat, "answer")])
    scorer = LLMRatingScorer(LLMRatingOptions(), backend=backend)
    out = scorer.score([request("r1", "good"), request("r2", "down"), request("r3", "odd")])
    assert out[0] == 8.0 and math.isnan(out[1]) and math.isnan(out[2])
    stats = scorer.stats()
    assert stats["n_generation_failures"] == 1 and stats["generation_failure_reasons"] == {
        "http-503": 1}
    assert stats["n_parse_failures"] == 1 and stats["parse_failure_rate"] == 0.5
    assert [(f["item"], f["stage"], f["reason"]) for f in stats["failures"]] == [
        ("r2", "generation", "http-503"), ("r3", "parse", "no-verdict")]
    assert scorer.describe()["stats"]["failures"] == stats["failures"]


def test_rubric_item_with_a_failed_aspect_reply_is_nan_never_averaged():
    def respond(chat):
        return "FAIL" if "child-friendly" in user_text(chat) else "Score: 2"

    rj = RubricJudge(RubricJudgeOptions(mode="per-aspect"), backend=_FailingBackend(respond))
    (result,) = rj.judge([RubricItem("What should I cook?", ASPECTS, "Use the stove.", key="k1")])
    assert math.isnan(result.mean) and result.failure is not None
    assert result.failure.reason == "generation-failed" and "http-503" in result.failure.detail
    assert result.aspect_scores[0] == 2 and result.aspect_scores[1] is None
    stats = rj.stats()
    assert stats["n_items_failed"] == 1
    assert [(f["item"], f["aspect"], f["stage"]) for f in stats["failures"]] == [
        ("k1", 1, "generation")]


@pytest.mark.parametrize("env", ["1", "0"])
def test_judging_shows_a_progress_bar_unless_turned_off(monkeypatch, capsys, env):
    monkeypatch.setenv("PRBENCH_PROGRESS", env)
    j, _ = judge(prefers("STOVE"), batch_size=1)
    j.compare([pair("r1", "use the STOVE", "bake it"), pair("r2", "bake it", "STOVE")])
    err = capsys.readouterr().err
    if env == "1":
        assert "llm-judge" in err and "/4 " in err and "verdict/s" in err
    else:
        assert err == ""


def _eval_judge(server, tmp_path, capsys, *extra: str) -> tuple[int, str]:
    from prbench.harness import tasks
    from tests._harness_fixtures import run_eval

    tasks.reset()
    args = (f"scorer=llm-judge,backend=openai,model=judge,base_url={server.base_url},"
            "max_retries=0,cache_dir=")
    try:
        code, _, err = run_eval(
            ["eval", "--tasks", "personalized_rewardbench_sample_noprofile", "--limit", "2",
             "--model_args", args, "--output_path", str(tmp_path / "out"), *extra],
            capsys,
        )
    finally:
        tasks.reset()
    return code, err


def test_prbench_eval_with_a_failing_judge_server_finishes_and_reports_invalid_items(
    tmp_path, capsys
):
    from _backend_fixtures import ScriptedOpenAIServer

    from tests._harness_fixtures import results_and_manifest

    with ScriptedOpenAIServer() as server:
        # the first Art_and_Entertainment pair (its question mentions the northern lights) fails
        server.route = lambda content: "ALWAYS503" if "northern" in content else content
        server.answer = lambda content: "Verdict: A"
        code, _ = _eval_judge(server, tmp_path, capsys, "--max-invalid", "0.2")
        assert code == 0  # the run finished and wrote its results: 1 of 6 pairs is under 0.2
        # the default limit (0.1) is exceeded: exit 1, one error line, the results still written
        code, err = _eval_judge(server, tmp_path / "strict", capsys)
    assert code == 1
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert "1 of 6 pairs (16.7%) got no verdict, more than --max_invalid 0.1" in line
    results_and_manifest(tmp_path / "strict" / "out")
    results, manifest, _ = results_and_manifest(tmp_path / "out")
    art = "personalized_rewardbench_sample_art_and_entertainment_noprofile"
    assert results["results"][art]["invalid,none"] == 0.5
    stats = manifest["scorer"]["stats"]
    assert stats["n_pairs_unjudged"] == 1 and stats["generation_failure_reasons"] == {"http-503": 2}
    assert {(f["item"], f["reason"]) for f in stats["failures"]} == {("ae-01", "http-503")}


def test_prbench_eval_stops_with_one_line_when_the_judge_server_rejects_the_model(
    tmp_path, capsys
):
    from _backend_fixtures import ScriptedOpenAIServer

    with ScriptedOpenAIServer() as server:
        server.route = lambda content: "MISSING404"
        code, err = _eval_judge(server, tmp_path, capsys)
    assert code == 1  # main() caught it: one error line, no traceback, no results
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert f"{server.base_url}/chat/completions answered HTTP 404" in line
    assert "check base_url" in line


# -- both-order metrics: one rule for every order-swapping judge -----------------------------------

#: verdict per (pair, chosen shown first?) -- "?" is an unreadable reply
PATTERNS = {
    "p1": {True: "A", False: "A"},  # the first-shown answer always wins: split, a flip
    "p2": {True: "A", False: "B"},  # chosen both times
    "p3": {True: "B", False: "A"},  # rejected both times
    "p4": {True: "B", False: "B"},  # the second-shown answer always wins: split, a flip
    "p5": {True: "A", False: "?"},  # chosen first: read; chosen second: unreadable
}


def _patterned(chat):
    shown_a = tagged(chat, "answer_a")
    rid, role = shown_a.split()[0], shown_a.split()[1]
    verdict = PATTERNS[rid][role == "chosen"]
    return "I cannot tell." if verdict == "?" else f"Verdict: {verdict}"


def test_judge_metrics_on_a_hand_computed_example():
    from prbench.judges.order_metrics import aggregate, pair_metrics

    j, _ = judge(_patterned)
    pairs = [pair(rid, f"{rid} chosen answer", f"{rid} rejected answer") for rid in PATTERNS]
    probs = j.compare(pairs)
    assert probs == [0.5, 1.0, 0.0, 0.5, 1.0]
    outcomes = j.request_extras(pairs)
    assert outcomes[0]["orders"] == [["first", "first"], ["second", "second"]]
    assert outcomes[4]["orders"] == [["first", "first"], ["second", None]]
    # each order's reply, its parse and why it was unreadable travel with the outcome
    assert outcomes[4]["replies"] == [
        {"verdict": "A", "reply": "Verdict: A", "failure": None, "detail": None},
        {"verdict": None, "reply": "I cannot tell.", "failure": "no-verdict",
         "detail": outcomes[4]["replies"][1]["detail"]}]
    assert outcomes[4]["replies"][1]["detail"]
    # a sixth pair judged in one order only (orders=one): chosen shown first, and it won
    outcomes.append({"orders": [["first", "first"]]})
    # a pair the judge could not ask at all (e.g. its persona failed): it earns nothing
    assert pair_metrics({"orders": []})["acc"] == 0.0
    assert pair_metrics({"orders": []})["acc_single_order"] == 0.0
    assert pair_metrics(outcomes[5])["acc_chosen_second"] != pair_metrics(outcomes[5])[
        "acc_chosen_second"]  # nan: not judged with the chosen answer second
    # p5 has one right order and one unreadable order: never a strict win
    assert pair_metrics(outcomes[4])["acc"] == 0.0
    got = aggregate(outcomes)
    # strict: p2 and p6 only -> 2/6 (p5's unreadable order is not a win)
    assert got["acc"] == pytest.approx(2 / 6)
    # single order: p1 .5, p2 1, p3 0, p4 .5, p5 .5 (unreadable = 0), p6 1 -> 3.5/6
    assert got["acc_single_order"] == pytest.approx(3.5 / 6)
    # chosen shown first: p1 1, p2 1, p3 0, p4 0, p5 1, p6 1 -> 4/6
    assert got["acc_chosen_first"] == pytest.approx(4 / 6)
    # chosen shown second: p1 0, p2 1, p3 0, p4 1, p5 0 (unreadable counts wrong) -> 2/5
    assert got["acc_chosen_second"] == pytest.approx(2 / 5)
    assert got["position_bias"] == pytest.approx(abs(4 / 6 - 2 / 5))
    # verdicts won by the answer shown first: 2+1+1+0+1+1 = 6 of 2+2+2+2+1+1 = 10 verdicts
    assert got["first_shown_win_rate"] == pytest.approx(0.6)
    assert got["n_unreadable"] == 1 and got["n_order_flips"] == 2


def _task_utils():
    import importlib.util

    from prbench.harness.tasks import builtin_task_dir

    spec = importlib.util.spec_from_file_location(
        "prb_utils", builtin_task_dir() / "personalized_rewardbench" / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    return utils


def test_the_task_metrics_of_the_hand_computed_example():
    """process_results per pair, then the YAML's aggregations: the numbers of the example."""
    from prbench.harness.scored import Scored

    utils = _task_utils()
    j, _ = judge(_patterned)
    docs = [{"id": rid, "question": "What should I cook?", "profile_text": "Post 1: no oven.",
             "chosen": f"{rid} chosen answer", "rejected": f"{rid} rejected answer",
             "domain": "Cooking"}
            for rid in PATTERNS]
    pairs = [pair(d["id"], d["chosen"], d["rejected"]) for d in docs]
    probs = j.compare(pairs)
    # the judge's orders ride on the chosen answer's result, as the prbench model returns it
    rows = [utils.process_results(d, [Scored(p, {"orders": o}), Scored(1 - p)])
            for d, p, o in zip(docs, probs, j.request_extras(pairs), strict=True)]

    def column(name):
        return [r[name] for r in rows]

    # p2 only: p5 (probability 1.0 from its one readable order) is no longer a win
    assert column("acc") == [0.0, 1.0, 0.0, 0.0, 0.0] == column("acc_macro")
    assert sum(column("tie")) == 2
    assert sum(column("acc_single_order")) / 5 == pytest.approx(2.5 / 5)  # .5+1+0+.5+.5
    assert utils.finite_mean(column("acc_chosen_first")) == pytest.approx(3 / 5)
    assert utils.finite_mean(column("acc_chosen_second")) == pytest.approx(2 / 5)
    assert utils.position_bias(column("position_bias")) == pytest.approx(1 / 5)
    assert utils.ratio_of_sums(column("first_shown_win_rate")) == pytest.approx(5 / 9)
    assert utils.total(column("n_unreadable")) == 1
    assert utils.total(column("n_order_flips")) == 2
    (counts,) = utils.judge_counts(column("judge_counts")).values()
    assert counts["n_pairs"] == 5 and counts["n_strict"] == 1 and counts["n_orders"] == 10
    assert "released_acc" not in rows[0]


def test_order_outcomes_must_be_well_formed():
    from prbench.judges.order_metrics import pair_metrics

    for bad in ({}, {"orders": "x"}, {"orders": [["first", "third"]]},
                {"orders": [["first", None], ["first", "first"]]}, {"orders": [["first"]]}):
        with pytest.raises(ValueError, match="order"):
            pair_metrics(bad)


def test_pointwise_llm_scorers_report_no_order_outcomes():
    backend = ScriptedBackend(lambda chat: "Grade: 7")
    scorer = LLMRatingScorer(LLMRatingOptions(), backend=backend)
    reqs = [request("r1", "an answer")]
    scorer.score(reqs)
    assert scorer.request_extras(reqs) == [None]


# -- a reply cut at max_new_tokens is invalid (`truncated`), never a verdict ---------------------


def test_a_truncated_reply_is_invalid_even_when_it_names_a_verdict():
    from prbench.backends.base import Completion

    def respond(chat):
        text = "Verdict: A"  # readable, but the model had not finished
        return Completion(text, "length") if "cut" in tagged(chat, "answer_a") else text

    j, _ = judge(respond, max_new_tokens=7)
    out = j.compare([pair("r1", "cut here", "whole"), pair("r2", "fine", "also fine")])
    assert out[0] == 0.0  # only the uncut order ("whole" shown as A, and A won) counts
    assert out[1] == 0.5
    stats = j.stats()
    assert stats["generation_failure_reasons"] == {"truncated": 1}
    (failure,) = stats["failures"]
    assert failure["reason"] == "truncated" and failure["item"] == "r1"
    assert "max_new_tokens=7" in failure["detail"]
    assert j.details()[0]["orders"][0]["failure"] == "truncated"


def test_truncated_replies_are_failures_for_the_rating_and_rubric_judges():
    from prbench.backends.base import Completion

    rating = LLMRatingScorer(
        LLMRatingOptions(), backend=ScriptedBackend(lambda chat: Completion("Grade: 9", "length"))
    )
    assert math.isnan(rating.score([request("r1", "x")])[0])
    assert rating.stats()["generation_failure_reasons"] == {"truncated": 1}
    rubric = RubricJudge(RubricJudgeOptions(), backend=ScriptedBackend(
        lambda chat: Completion("Scores: [2, 2]", "length")))
    (item,) = rubric.judge([RubricItem("q?", ASPECTS, "an answer", key="k")])
    assert not item.ok and item.failure.reason == "truncated"
    # callers that need every reply (a policy's samples) get the cut text back as it is
    backend = ScriptedBackend(lambda chat: Completion("half a sent", "length"))
    from prbench.backends.base import GenerationConfig

    (text,) = generate_in_batches(backend, [[{"role": "user", "content": "hi"}]],
                                  GenerationConfig(), 4)
    assert text == "half a sent" and text.finish_reason == "length"
    # a caller with its own rule for cut text (the pair generator) can keep it with failures on
    (kept,) = generate_in_batches(backend, [[{"role": "user", "content": "hi"}]],
                                  GenerationConfig(), 4, keep_failures=True,
                                  truncated_is_failure=False)
    assert kept == "half a sent" and kept.finish_reason == "length"


def test_a_reply_cut_by_an_http_server_is_truncated(tmp_path):
    from prbench.backends.base import Completion
    from prbench.testing import LoopbackOpenAI

    def script(messages):
        content = messages[-1]["content"]
        return Completion("Verdict: A", "length") if "<answer_a>\nlong" in content else "Verdict: B"

    with LoopbackOpenAI(script) as server:
        j = get_registry().build("scorer", "llm-judge", {
            "backend": "openai", "model": "judge", "base_url": server.base_url,
            "cache_dir": str(tmp_path / "responses"), "max_new_tokens": "16"})
        replies = j.backend.generate([[{"role": "user", "content": "<answer_a>\nlong"}]],
                                     j.options.generation_config())
        assert replies[0].finish_reason == "length"
        out = j.compare([pair("r1", "long answer", "short")])
        calls = server.calls
        # the cached response keeps its finish_reason: still truncated, not re-asked
        again = get_registry().build("scorer", "llm-judge", {
            "backend": "openai", "model": "judge", "base_url": server.base_url,
            "cache_dir": str(tmp_path / "responses"), "max_new_tokens": "16"})
        again.compare([pair("r1", "long answer", "short")])
        assert server.calls == calls
    assert out == [1.0]  # the uncut order: B ("long answer" shown second) won
    for stats in (j.stats(), again.stats()):
        assert stats["generation_failure_reasons"] == {"truncated": 1}
        assert stats["n_verdicts"] == 1


def _eval_sample(tmp_path, capsys, model_args: str, out: str) -> tuple[dict, dict, str]:
    from prbench.harness import tasks
    from tests._harness_fixtures import results_and_manifest, run_eval

    tasks.reset()
    try:
        code, printed, _ = run_eval(
            ["eval", "--tasks", "personalized_rewardbench_sample_noprofile", "--limit", "2",
             "--model_args", model_args, "--output_path", str(tmp_path / out)],
            capsys,
        )
    finally:
        tasks.reset()
    assert code == 0
    results, manifest, _ = results_and_manifest(tmp_path / out)
    return results, manifest, printed


def test_both_order_metrics_reach_lm_eval_results_summary_and_manifest(tmp_path, capsys):
    from prbench.testing import LoopbackOpenAI

    with LoopbackOpenAI(lambda messages: "Verdict: A") as server:
        args = f"scorer=llm-judge,backend=openai,model=judge,base_url={server.base_url},cache_dir="
        results, manifest, printed = _eval_sample(tmp_path, capsys, args, "out")
    art = "personalized_rewardbench_sample_art_and_entertainment_noprofile"
    got = results["results"][art]
    # "A" always: every pair split -> strict acc 0 (ties), half the single orders right
    assert got["acc,none"] == 0.0 and got["tie,none"] == 1.0
    assert got["acc_single_order,none"] == 0.5
    assert got["acc_chosen_first,none"] == 1.0 and got["acc_chosen_second,none"] == 0.0
    assert got["position_bias,none"] == 1.0 and got["first_shown_win_rate,none"] == 1.0
    assert got["n_order_flips,none"] == 2 and got["n_unreadable,none"] == 0
    assert "pairwise judge (headline: strict acc and single-order acc" in printed
    section = manifest["summary"]["sections"][0]
    assert section["order_metrics"]["acc_single_order"] == 0.5
    assert section["order_metrics"]["n_order_flips"] == 6
    row = next(t for t in section["tasks"] if t["task"] == art)
    assert row["order_metrics"]["position_bias"] == 1.0


class _CachedJudge(LLMPairwiseJudge):
    """llm-judge with a fingerprint, so the runtime keeps its scores in the score cache."""

    def fingerprint(self) -> str:
        return "cached-judge-v1"


def test_order_outcomes_are_kept_with_cached_scores(tmp_path):
    from prbench.scoring.runtime import ScorerRuntime

    pairs = [pair(rid, f"{rid} chosen answer", f"{rid} rejected answer") for rid in PATTERNS]
    first = _CachedJudge(LLMJudgeOptions(), backend=ScriptedBackend(_patterned))
    with ScorerRuntime(first, pairwise=True, cache_path=str(tmp_path / "s.sqlite")) as rt:
        probs = rt.compare(pairs)
        outcomes = rt.extras(pairs)
    assert outcomes == first.request_extras(pairs)
    # a new run reads scores and outcomes from the cache: the model is not asked again
    backend = ScriptedBackend(lambda chat: "Verdict: B")
    second = _CachedJudge(LLMJudgeOptions(), backend=backend)
    with ScorerRuntime(second, pairwise=True, cache_path=str(tmp_path / "s.sqlite")) as rt:
        assert rt.compare(pairs)[:4] == probs[:4]
        assert rt.extras(pairs)[:4] == outcomes[:4]
        assert rt.stats()["cache_hits"] == 5
        # only the latest call's extras stay in memory (a long-running server stays bounded)
        rt.compare(pairs[:1])
        assert rt.extras(pairs)[1:] == [None] * 4 and rt.extras(pairs)[0] == outcomes[0]
    assert backend.chats == []
    # a cached pairwise score without its outcomes (an older cache) is judged again
    from prbench.scoring.cache import ScoreCache

    with ScoreCache("cached-judge-v1", tmp_path / "s.sqlite") as cache:
        cache.store.write("DELETE FROM extras WHERE fingerprint = ?", [("cached-judge-v1",)])
    third = _CachedJudge(LLMJudgeOptions(), backend=ScriptedBackend(_patterned))
    with ScorerRuntime(third, pairwise=True, cache_path=str(tmp_path / "s.sqlite")) as rt:
        assert rt.compare(pairs) == probs and rt.extras(pairs) == outcomes
        assert rt.stats()["cache_hits"] == 0


def test_pointwise_scorers_get_no_order_metrics():
    from prbench.harness.summary import format_sections, summarize

    utils = _task_utils()
    doc = {"id": "never-judged", "question": "q", "profile_text": "", "chosen": "a",
           "rejected": "b"}
    assert set(utils.process_results(doc, [(1.0, False), (0.0, False)])) == {
        "acc", "acc_macro", "tie", "margin", "invalid"}
    results = {
        "results": {"t": {"acc,none": 0.5, "tie,none": 0.0, "invalid,none": 0.0}},
        "configs": {"t": {"dataset_kwargs": {"prbench_condition": "noprofile",
                                             "prbench_domain": "d"}}},
        "n-samples": {"t": {"effective": 4}},
    }
    sections = summarize(results, length_baseline=False, resamples=50)
    assert sections[0].as_dict()["order_metrics"] is None
    assert "both orders" not in format_sections(sections)


def test_request_extras_of_the_wrong_length_is_a_clear_error():
    from prbench.scoring.runtime import ScorerRuntime

    class Sloppy(LLMPairwiseJudge):
        def request_extras(self, requests):
            return [None]

    sloppy = Sloppy(LLMJudgeOptions(), backend=ScriptedBackend(lambda chat: "Verdict: A"))
    with ScorerRuntime(sloppy, pairwise=True, cache=False) as rt, pytest.raises(
        TypeError, match=r"request_extras\(\) must return one value per request \(2\), got 1"
    ):
        rt.compare([pair("r1", "a", "b"), pair("r2", "c", "d")])
