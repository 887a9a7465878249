"""rm-r1 in exact mode: user prompt files, the two parse rules, truncation, the native metric."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from _rmr1_fakes import FakeVLLM, LoopbackOpenAI, ScriptedBackend, build_tiny_causal_lm
from prbench_plugin_rm_r1.judge import RMR1Judge
from prbench_plugin_rm_r1.parsing import parse_answer, parse_original
from prbench_plugin_rm_r1.plugin import RMR1Options

from prbench.api import (
    Completion,
    GenerationFailure,
    OptionsError,
    PairRequest,
    ProfileView,
    aggregate_order_metrics,
    is_truncated,
    truncation_failure,
)
from prbench.testing import PluginRegistry

# -- the parser corpus: (reply, strict rule, original rule) ---------------------------------------

THINK_A = "<think>Chatbot A covers the night shots, so [[A]] looks right.</think>\n"
CORPUS = [
    ("<answer>[[A]]</answer>", "A", "A"),
    ("<type>Chat</type><rubric>r</rubric><eval>e</eval>\n<answer>[[B]]</answer>", "B", "B"),
    ("<answer>[[A]] and [[B]] are equal</answer>", "both", "both"),
    ("Both are fine: [[A]] or [[B]].", "no-answer-tag", "both"),
    ("No verdict at all.", "no-answer-tag", "no-marker"),
    ("<answer>A</answer>", "no-marker", "no-marker"),
    (THINK_A + "<answer>[[B]]</answer>", "B", "both"),  # a marker inside the reasoning
    ("<think>I lean to [[B]] but let me keep thinking", "unterminated-reasoning", "B"),
    (THINK_A + "On reflection B wins: [[B]]", "no-answer-tag", "both"),
    ("</think>\n<answer>[[A]]</answer>", "A", "A"),  # after a closing think tag
    ("<answer>[[a]]</answer>", "no-marker", "no-marker"),  # lower case
    ("<answer> [[ B ]] </answer>", "B", "no-marker"),  # extra spaces
    ("Verdict: [[A]]", "no-answer-tag", "A"),  # no answer tag
    ("<answer>[[B]]</answer>\n<answer>[[B]]</answer>", "B", "B"),  # the same marker twice
    ("[[A]] ... [[A]]", "no-answer-tag", "A"),
    ("<answer>[[A]]</answer> ... <answer>[[B]]</answer>", "conflicting", "both"),
    ("<eval>ok</eval><answer>[[A]]", "unterminated-answer", "A"),
    ("", "empty", "empty"),
    ("   \n ", "empty", "empty"),
    (Completion("<answer>[[A]]</answer>", "length"), "truncated", "A"),  # cut: the authors read it
    (Completion("<think>[[B]] wins so far", "length"), "truncated", "B"),
    (truncation_failure("<think>[[A]] so far"), "truncated", "truncated"),
    (GenerationFailure(reason="http-503", detail="busy"), "generation-failed", "generation-failed"),
    (Completion("<answer>[[B]]</answer>", "stop"), "B", "B"),
    # a reasoning parser moved the thinking to reasoning_content: the authors' rule reads it too
    (Completion("<answer>[[B]]</answer>", "stop", "A looks better: [[A]]"), "B", "both"),
    (Completion("", "length", "still thinking, [[A]] so far"), "truncated", "A"),
    (Completion("", "stop", "no marker in the thinking"), "empty", "no-marker"),
]


def _outcome(parsed) -> str:
    return parsed if isinstance(parsed, str) else parsed.reason


@pytest.mark.parametrize(("reply", "strict", "original"), CORPUS)
def test_parser_corpus(reply, strict, original) -> None:
    assert _outcome(parse_answer(reply)) == strict
    assert _outcome(parse_original(reply)) == original


def test_the_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 15
    assert len({r for _, _, r in CORPUS}) >= 5 and len({s for _, s, _ in CORPUS}) >= 7


# -- user prompt files ----------------------------------------------------------------------------

SYSTEM = "Judge two chatbot replies for the client. End with <answer>[[A]]</answer> or [[B]].\n"
USER = ("Question:\n{question}\n\nProfile: {profile}\n\nA says:\n{answer_a}\n\nB says:\n"
        "{answer_b}\n\nLiteral braces: {{not a field}}")


def _files(tmp_path: Path, system: str | None = SYSTEM, user: str | None = USER) -> dict:
    out = {}
    if system is not None:
        (tmp_path / "system.txt").write_text(system, encoding="utf-8")
        out["system_prompt_file"] = str(tmp_path / "system.txt")
    if user is not None:
        (tmp_path / "user.txt").write_text(user, encoding="utf-8")
        out["user_prompt_file"] = str(tmp_path / "user.txt")
    return out


def _pair(rid: str, first: str = "GOOD answer", second: str = "BAD answer",
          profile: str = "") -> PairRequest:
    return PairRequest(rid, "Which lens?", first, second, profile=ProfileView(text=profile))


def _exact(script, tmp_path: Path, **options) -> RMR1Judge:
    opts = RMR1Options(model="gaotang/RM-R1-Qwen2.5-Instruct-7B", parse="original",
                       **_files(tmp_path), **options)
    return RMR1Judge(opts, backend=ScriptedBackend(script))


def test_exact_mode_renders_the_user_prompt_files(tmp_path: Path) -> None:
    rm = _exact(lambda chat: "[[A]]", tmp_path)
    rm.compare([_pair("r1", profile="Post 1: I shoot at night.")])
    first, second = rm.backend.chats
    assert first == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Question:\nWhich lens?\n\nProfile: Post 1: I shoot at "
         "night.\n\nA says:\nGOOD answer\n\nB says:\nBAD answer\n\nLiteral braces: {not a field}"},
    ]
    assert "A says:\nBAD answer" in second[1]["content"]  # the other order
    prompt = rm.describe()["prompt"]
    assert prompt["system_prompt_file"].endswith("system.txt")
    assert prompt["user_prompt_file"].endswith("user.txt")
    assert len(prompt["system_sha256"]) == 64 and prompt["system_sha256"] != prompt["user_sha256"]
    assert rm.stats()["parse"] == "original"
    # another template text is another prompt: another fingerprint (no stale cached verdicts)
    other = tmp_path / "other"
    other.mkdir()
    opts = RMR1Options(model="gaotang/RM-R1-Qwen2.5-Instruct-7B", parse="original",
                       **_files(other, user=USER + "\n"))
    assert RMR1Judge(opts, backend=rm.backend).fingerprint() != rm.fingerprint()


def test_a_user_template_alone_has_no_system_turn(tmp_path: Path) -> None:
    opts = RMR1Options(model="m", **_files(tmp_path, system=None))
    rm = RMR1Judge(opts, backend=ScriptedBackend(lambda chat: "[[B]]"))
    rm.compare([_pair("r1")])
    assert [m["role"] for m in rm.backend.chats[0]] == ["user"]
    assert "prompt" in rm.describe() and "system_prompt_file" not in rm.describe()["prompt"]


def test_a_system_template_alone_keeps_the_builtin_user_turn(tmp_path: Path) -> None:
    opts = RMR1Options(model="m", **_files(tmp_path, user=None))
    rm = RMR1Judge(opts, backend=ScriptedBackend(lambda chat: "[[B]]"))
    rm.compare([_pair("r1")])
    system, user = rm.backend.chats[0]
    assert system["content"] == SYSTEM and "[The Start of Chatbot A's Response]" in user["content"]


@pytest.mark.parametrize(
    ("system", "user", "message"),
    [
        (None, "{question} {answer_a} {answer_b} {persona}", "unknown field {persona}"),
        (None, "{question} {answer_a}", "never shows the field {answer_b}"),
        (None, "{question} {answer_a} {answer_b} {", "not a valid prompt template"),
        (None, "{question!r} {answer_a} {answer_b}", "conversion or format spec"),
        ("{}", "{question} {answer_a} {answer_b}", "unknown field {}"),
        (None, "", "the file is empty"),
    ],
)
def test_bad_templates_are_one_clear_error(tmp_path: Path, system, user, message) -> None:
    files = _files(tmp_path, system=system, user=user)
    with pytest.raises(OptionsError) as err:
        PluginRegistry().build("scorer", "rm-r1", {"model": "m", **files})
    text = str(err.value)
    assert message in text and "\n" not in text
    assert ("system.txt" if system == "{}" else "user.txt") in text


def test_a_missing_template_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(OptionsError, match=r"user_prompt_file .*nope\.txt: cannot read it"):
        PluginRegistry().build("scorer", "rm-r1", {
            "model": "m", "user_prompt_file": str(tmp_path / "nope.txt")})


# -- truncation: a reply cut at the token budget is invalid, never a verdict ----------------------


def _cut_script(chat):
    # the reasoning already names a reply when the budget runs out; the other order finishes
    if "A says:\nGOOD" in chat[-1]["content"]:
        return Completion("<think>A is better, so [[A]]", "length")
    return "[[B]]"


def test_strict_mode_never_reads_a_truncated_reply(tmp_path: Path) -> None:
    def script(chat):
        reply = _cut_script(chat)
        return reply if is_truncated(reply) else "<answer>[[B]]</answer>"

    rm = RMR1Judge(RMR1Options(model="gaotang/RM-R1-Qwen2.5-Instruct-7B", **_files(tmp_path)),
                   backend=ScriptedBackend(script))
    assert rm.compare([_pair("r1")]) == [1.0]  # only the finished order (GOOD shown as B) counts
    stats = rm.stats()
    assert stats["generation_failure_reasons"] == {"truncated": 1} and stats["n_verdicts"] == 1
    assert [f["reason"] for f in stats["failures"]] == ["truncated"]
    assert stats["n_cut_replies_read"] == 0


def test_original_mode_reads_a_truncated_reply_as_the_authors_do(tmp_path: Path) -> None:
    rm = _exact(_cut_script, tmp_path)
    assert rm.compare([_pair("r1")]) == [1.0]  # both orders read: GOOD won as A and as B
    stats = rm.stats()
    assert stats["n_verdicts"] == 2 and stats["failures"] == []
    assert stats["n_cut_replies_read"] == 1  # said, not silent


def test_a_truncated_http_reply(tmp_path: Path) -> None:
    def script(messages):
        return Completion("<think>[[A]] for now", "length")

    opts = {"backend": "openai", "model": "gaotang/RM-R1-DeepSeek-Distilled-Qwen-7B",
            "cache_dir": "", **_files(tmp_path, system=None)}
    with LoopbackOpenAI(script) as server:
        strict = PluginRegistry().build("scorer", "rm-r1", {**opts, "base_url": server.base_url})
        out = strict.compare([_pair("r1"), _pair("r2")])
        original = PluginRegistry().build("scorer", "rm-r1", {
            **opts, "base_url": server.base_url, "parse": "original"})
        read = original.compare([_pair("r1"), _pair("r2")])
    assert all(math.isnan(p) for p in out)
    stats = strict.stats()
    assert stats["generation_failure_reasons"] == {"truncated": 4}
    assert stats["max_new_tokens"] == 32768 and stats["prompt_style"] == "reasoning"
    assert read == [0.5, 0.5]  # always [[A]]: the first answer wins one order of two
    assert original.stats()["n_cut_replies_read"] == 4


# -- the served context: budgets fitted so that no request is refused ------------------------------


def _served(server: FakeVLLM, tmp_path: Path, **extra):
    return PluginRegistry().build("scorer", "rm-r1", {
        "backend": "openai", "model": "rm", "base_url": server.base_url, "cache_dir": "",
        "style": "reasoning", "max_retries": "0", **_files(tmp_path, system=None), **extra})


def test_budget_is_fitted_to_the_served_context(tmp_path: Path) -> None:
    def reply(messages):
        return "<answer>[[A]]</answer>", None, "stop"

    long_question = "Which lens? " + "detail " * 250  # this prompt leaves no room at all
    with FakeVLLM(reply, max_model_len=200) as server:
        rm = _served(server, tmp_path, max_new_tokens="50000", parse="original")
        medium = PairRequest("medium", "Which lens? " + "detail " * 40, "GOOD answer",
                             "BAD answer", profile=ProfileView(text=""))
        out = rm.compare([_pair("short"), PairRequest("long", long_question, "GOOD answer",
                                                      "BAD answer", profile=ProfileView(text="")),
                          medium])
    assert server.refused == 0  # no request got a 400
    prompt = min(r["prompt_tokens"] for r in server.requests)
    assert all(r["max_tokens"] == 200 - r["prompt_tokens"]
               for r in server.requests)  # min(50,000, context - prompt), per request
    assert len(server.requests) == 4 and len({r["max_tokens"] for r in server.requests}) == 2
    assert out[0] == 0.5 and math.isnan(out[1]) and out[2] == 0.5
    stats = rm.stats()
    assert stats["generation_failure_reasons"] == {"prompt-too-long": 2}
    assert stats["budget"]["source"] == "served context"
    assert stats["budget"]["max_model_len"] == 200 and stats["budget"]["n_no_room"] == 2
    assert stats["budget"]["n_fitted"] == 6
    assert stats["budget"]["smallest"] == 200 - max(r["prompt_tokens"] for r in server.requests)
    assert prompt < 200
    # a budget that fits is kept as asked
    with FakeVLLM(reply, max_model_len=100_000) as server:
        small = _served(server, tmp_path, max_new_tokens="64")
        small.compare([_pair("short")])
        # the served context is part of the fingerprint (another context, other verdicts)
        assert small.fingerprint() != rm.fingerprint()
    assert [r["max_tokens"] for r in server.requests] == [64, 64]
    assert small.stats()["budget"]["n_fitted"] == 0


def test_without_a_token_count_the_budget_stays_as_asked(tmp_path: Path) -> None:
    with FakeVLLM(lambda m: ("[[B]]", None, "stop"), max_model_len=100_000,
                  tokenize=False) as server:
        rm = _served(server, tmp_path, max_new_tokens="300")
        rm.compare([_pair("short")])
    assert [r["max_tokens"] for r in server.requests] == [300, 300]
    assert "no /tokenize" in rm.stats()["budget"]["source"]


def test_original_mode_reads_reasoning_content(tmp_path: Path) -> None:
    # vLLM with --reasoning-parser: the thinking arrives as reasoning_content, content keeps the
    # rest; a trace cut inside its thinking has content null
    def reply(messages):
        if "A says:\nGOOD" in messages[-1]["content"]:
            return None, "GOOD answers the night question: [[A]]", "length"
        return "", "B is the better one here. [[B]]", "stop"

    with FakeVLLM(reply, max_model_len=100_000) as server:
        original = _served(server, tmp_path, parse="original", max_new_tokens="64")
        got = original.compare([_pair("r1")])
        strict = _served(server, tmp_path, max_new_tokens="64")
        invalid = strict.compare([_pair("r1")])
    assert got == [1.0] and original.stats()["n_cut_replies_read"] == 1
    assert math.isnan(invalid[0])  # strict reads content only: one cut, one empty
    assert strict.stats()["parse_failure_reasons"] == {"empty": 1}
    assert strict.stats()["generation_failure_reasons"] == {"truncated": 1}


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("rmr1-exact") / "lm")


def test_local_generation_cut_at_two_tokens_is_truncated(tiny_lm: Path, tmp_path: Path) -> None:
    rm = PluginRegistry().build("scorer", "rm-r1", {
        "backend": "hf", "model": str(tiny_lm), "max_new_tokens": "2", "device": "cpu",
        "cache_dir": "", "parse": "strict", **_files(tmp_path)})
    replies = rm.backend.generate([[{"role": "user", "content": "hello"}]],
                                  rm.options.generation_config())
    assert isinstance(replies[0], Completion) and replies[0].finish_reason == "length"
    out = rm.compare([_pair("r1")])
    assert math.isnan(out[0])
    assert rm.stats()["generation_failure_reasons"] == {"truncated": 2}


# -- the native metric on a hand-computed example ------------------------------------------------

#: verdict per (pair, chosen answer shown as A?): the authors score one order per pair, an
#: unreadable reply counting wrong; both-order metrics give both single-order accuracies
PATTERNS = {
    "p1": {True: "[[A]]", False: "[[A]]"},          # always A: a flip
    "p2": {True: "[[A]]", False: "[[B]]"},          # right in both orders
    "p3": {True: "<think>[[B]]?</think>[[A]]", False: "[[B]]"},  # both markers: invalid
    "p4": {True: "[[B]]", False: "[[B]]"},          # always B: a flip
}


def test_native_metric_on_a_hand_computed_example(tmp_path: Path) -> None:
    def script(chat):
        user = chat[-1]["content"]
        rid = user.split("Question:\n")[1].split("\n")[0]
        return PATTERNS[rid]["A says:\nchosen" in user]

    opts = RMR1Options(model="gaotang/RM-R1-Qwen2.5-Instruct-7B", parse="original",
                       **_files(tmp_path))
    rm = RMR1Judge(opts, backend=ScriptedBackend(script))
    pairs = [PairRequest(rid, rid, "chosen", "rejected", profile=ProfileView(text=""))
             for rid in PATTERNS]
    assert rm.compare(pairs) == [0.5, 1.0, 1.0, 0.5]
    got = aggregate_order_metrics(rm.request_extras(pairs))
    # chosen shown as A: p1 right, p2 right, p3 invalid (wrong), p4 wrong -> 2/4
    assert got["acc_chosen_first"] == 0.5
    # chosen shown as B: p1 wrong, p2 right, p3 right, p4 right -> 3/4
    assert got["acc_chosen_second"] == 0.75
    # the authors' single-order accuracy, over a fair coin per pair, is the mean of the two
    assert (got["acc_chosen_first"] + got["acc_chosen_second"]) / 2 == 0.625
    # single order: .5 + 1 + .5 (p3's invalid order counts 0) + .5 = 2.5 of 4, the same number
    assert got["acc_single_order"] == 0.625
    # strict: only p2 (p3 has an invalid order: never a win)
    assert got["acc"] == 0.25
    assert got["position_bias"] == 0.25  # |0.5 - 0.75|, as the released script
    # verdicts won by the answer shown as A: p1 2, p2 1, p3 0, p4 0 of 2+2+1+2 = 7
    assert got["first_shown_win_rate"] == pytest.approx(3 / 7)
    assert got["n_order_flips"] == 2 and got["n_unreadable"] == 1
    # with orders=one the shown order is a seeded per-pair coin: the score is that order's
    one = RMR1Judge(RMR1Options(model="gaotang/RM-R1-Qwen2.5-Instruct-7B", parse="original",
                                orders="one", seed=3, **_files(tmp_path)),
                    backend=ScriptedBackend(script))
    probs = one.compare(pairs)
    for p, outcome in zip(probs, one.request_extras(pairs), strict=True):
        ((_shown, winner),) = outcome["orders"]
        assert (math.isnan(p) and winner is None) or p == float(winner == "first")
    again = RMR1Judge(one.options, backend=ScriptedBackend(script))
    assert again.compare(list(reversed(pairs))) == list(reversed(probs))  # batch-independent
