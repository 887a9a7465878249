"""rm-r1 in exact mode: user prompt files, the two parse rules, truncation, the native metric."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from _rmr1_fakes import LoopbackOpenAI, ScriptedBackend, build_tiny_causal_lm
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
    (Completion("<answer>[[A]]</answer>", "length"), "truncated", "truncated"),  # cut at budget
    (truncation_failure("<think>[[A]] so far"), "truncated", "truncated"),
    (GenerationFailure(reason="http-503", detail="busy"), "generation-failed", "generation-failed"),
    (Completion("<answer>[[B]]</answer>", "stop"), "B", "B"),
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


@pytest.mark.parametrize(("kind", "message"), [
    ("fifo", "is a FIFO (named pipe), not a regular file"),
    ("dev-zero", "is a device, not a regular file"),
    ("huge", "bytes, more than the 33,554,432 an option file may have"),
    ("folder", "is a folder, not a regular file"),
])
def test_a_template_file_that_is_no_text_file_is_refused(
    tmp_path: Path, kind: str, message: str
) -> None:
    """Never a hang on a FIFO, never an endless read of /dev/zero or of 200 MB."""
    import os

    if kind == "fifo":
        path = tmp_path / "prompt.fifo"
        os.mkfifo(path)
    elif kind == "dev-zero":
        path = Path("/dev/zero")
    elif kind == "huge":
        path = tmp_path / "huge.txt"
        with path.open("wb") as fh:
            fh.truncate(200 * 1024 * 1024)  # sparse: 200 MB without writing them
    else:
        path = tmp_path
    with pytest.raises(OptionsError) as err:
        PluginRegistry().build("scorer", "rm-r1", {"model": "m", "user_prompt_file": str(path)})
    text = str(err.value)
    assert f"user_prompt_file {path}: " in text and message in text and "\n" not in text, text


# -- truncation: a reply cut at the token budget is invalid, never a verdict ----------------------


def test_exact_mode_never_reads_a_truncated_reply(tmp_path: Path) -> None:
    def script(chat):
        # the reasoning already names a reply when the budget runs out; the other order finishes
        if "A says:\nGOOD" in chat[-1]["content"]:
            return Completion("<think>A is better, so [[A]]", "length")
        return "[[B]]"

    rm = _exact(script, tmp_path)
    assert rm.compare([_pair("r1")]) == [1.0]  # only the finished order (GOOD shown as B) counts
    stats = rm.stats()
    assert stats["generation_failure_reasons"] == {"truncated": 1} and stats["n_verdicts"] == 1
    assert [f["reason"] for f in stats["failures"]] == ["truncated"]


def test_a_truncated_http_reply_is_invalid(tmp_path: Path) -> None:
    def script(messages):
        return Completion("<think>[[A]] for now", "length")

    with LoopbackOpenAI(script) as server:
        rm = PluginRegistry().build("scorer", "rm-r1", {
            "backend": "openai", "model": "gaotang/RM-R1-DeepSeek-Distilled-Qwen-7B",
            "base_url": server.base_url, "cache_dir": "", "parse": "original",
            **_files(tmp_path, system=None)})
        out = rm.compare([_pair("r1"), _pair("r2")])
    assert all(math.isnan(p) for p in out)
    stats = rm.stats()
    assert stats["generation_failure_reasons"] == {"truncated": 4}
    assert stats["max_new_tokens"] == 32768 and stats["prompt_style"] == "reasoning"


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("rmr1-exact") / "lm")


def test_local_generation_cut_at_two_tokens_is_truncated(tiny_lm: Path, tmp_path: Path) -> None:
    rm = PluginRegistry().build("scorer", "rm-r1", {
        "backend": "hf", "model": str(tiny_lm), "max_new_tokens": "2", "device": "cpu",
        "cache_dir": "", "parse": "original", **_files(tmp_path)})
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
    # split half: .5 + 1 + 1 (p3's one readable order) + .5 = 3 of 4
    assert got["acc_split_half"] == 0.75
    # verdicts won by the answer shown as A: p1 2, p2 1, p3 0, p4 0 of 2+2+1+2 = 7
    assert got["position_bias"] == pytest.approx(3 / 7)
    assert got["n_order_flips"] == 2
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
