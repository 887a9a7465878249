from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _rmr1_fakes import LoopbackOpenAI, ScriptedBackend, answers, build_tiny_causal_lm, verdict
from prbench_plugin_rm_r1.judge import RMR1Judge, RMR1ScalarScorer
from prbench_plugin_rm_r1.parsing import parse_answer
from prbench_plugin_rm_r1.plugin import RMR1Options, RMR1ScalarOptions

from prbench.api import GenerationFailure, OptionsError, PairRequest, ProfileView, ScoreRequest
from prbench.testing import PluginRegistry

GOOD, BAD = "GOOD: a fast prime lens, since you shoot handheld at night.", "BAD: any lens."


def pair(rid: str, question: str = "Which lens?", first: str = GOOD, second: str = BAD,
         profile: str = "") -> PairRequest:
    return PairRequest(rid, question, first, second, profile=ProfileView(text=profile))


def prefers_good(chat) -> str:
    """A faithful judge: picks the GOOD answer; unreadable for BROKEN questions."""
    if "BROKEN" in chat[-1]["content"]:
        return "Both replies have merit.\n<answer>[[A]] or [[B]]</answer>"
    a, _ = answers(chat)
    return verdict("A" if a.startswith("GOOD") else "B")


def judge(script, **options) -> RMR1Judge:
    return RMR1Judge(RMR1Options(model="scripted", **options), backend=ScriptedBackend(script))


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (verdict("A"), "A"),
        ("<think>A looks fine but B fits.</think>\n<answer>[[B]]</answer>", "B"),
        ("<answer> [[ B ]] </answer>\n<answer>[[B]]</answer>", "B"),
        ("<think>still thinking about [[A]]", "unterminated-reasoning"),
        ("Chatbot A is better. [[A]]", "no-answer-tag"),
        ("<eval>ok</eval><answer>[[A]]", "unterminated-answer"),
        ("<answer>[[A]] and [[B]] are equal</answer>", "both"),
        ("<answer>A</answer>", "no-marker"),
        ("<answer>[[A]]</answer> ... on reflection <answer>[[B]]</answer>", "conflicting"),
        ("", "empty"),
        (GenerationFailure(reason="http-503", detail="server busy"), "generation-failed"),
    ],
)
def test_verdict_parsing_is_strict(reply, expected) -> None:
    parsed = parse_answer(reply)
    assert (parsed if isinstance(parsed, str) else parsed.reason) == expected


def test_both_orders_and_invalid_counting() -> None:
    backend = ScriptedBackend(prefers_good)
    rm = RMR1Judge(RMR1Options(model="scripted"), backend=backend)
    pairs = [pair("r1"), pair("r2", first=BAD, second=GOOD), pair("r3", question="BROKEN?")]
    out = rm.compare(pairs)
    assert out[:2] == [1.0, 0.0]
    assert math.isnan(out[2])  # never defaulted to a verdict
    assert len(backend.chats) == 6  # every pair in both orders
    shown = [answers(c)[0] for c in backend.chats[:2]]
    assert shown == [GOOD, BAD]  # the same pair with A/B swapped
    stats = rm.stats()
    assert stats["n_pairs"] == 3 and stats["n_orders"] == 6
    assert stats["n_invalid_orders"] == 2 and stats["n_pairs_unjudged"] == 1
    assert stats["parse_failure_reasons"] == {"both": 2}
    assert stats["first_shown_win_rate"] == 0.5 and stats["n_order_flips"] == 0
    assert stats["order_agreement"] == 1.0
    assert [f["item"] for f in stats["failures"]] == ["r3", "r3"]
    assert rm.details()[2]["orders"][0]["failure"] == "both"
    # each order's reply reaches the harness with its verdict (the samples file, the explorer)
    (_, _, broken) = rm.request_extras(pairs)
    assert [r["reply"] for r in broken["replies"]] == [
        "Both replies have merit.\n<answer>[[A]] or [[B]]</answer>"] * 2
    assert [r["failure"] for r in broken["replies"]] == ["both", "both"]


def test_position_bias_is_reported() -> None:
    rm = judge(lambda chat: verdict("A"))  # always picks whatever is shown first
    out = rm.compare([pair("r1"), pair("r2")])
    assert out == [0.5, 0.5]
    stats = rm.stats()
    assert stats["first_shown_win_rate"] == 1.0
    assert stats["n_order_flips"] == 2 and stats["order_agreement"] == 0.0
    assert rm.describe()["stats"]["n_order_flips"] == 2


def test_one_order_is_seeded_and_batch_independent() -> None:
    pairs = [pair(f"r{i}", first=f"GOOD {i}", second=f"BAD {i}") for i in range(12)]
    a = judge(prefers_good, orders="one", seed=3)
    b = judge(prefers_good, orders="one", seed=3, batch_size=1)
    assert a.compare(pairs) == [1.0] * 12 == b.compare(pairs[::-1])[::-1]
    shown_a = [answers(c)[0] for c in a.backend.chats]
    shown_b = [answers(c)[0] for c in b.backend.chats][::-1]
    assert shown_a == shown_b and len(shown_a) == 12
    assert 0 < sum(s.startswith("GOOD") for s in shown_a) < 12  # both positions used
    c = judge(prefers_good, orders="one", seed=4)
    c.compare(pairs)
    assert [answers(ch)[0] for ch in c.backend.chats] != shown_a


def test_profile_goes_into_the_prompt_only_when_shown() -> None:
    rm = judge(prefers_good)
    rm.compare([pair("r1", profile="Post 1 (Category: Art): I shoot at night."), pair("r2")])
    with_profile, without = rm.backend.chats[0], rm.backend.chats[2]
    assert with_profile[0]["role"] == "system"
    assert "[Client's Earlier Posts]\nPost 1 (Category: Art): I shoot at night." in (
        with_profile[1]["content"]
    )
    assert "Earlier Posts" not in without[1]["content"]
    assert "earlier posts" not in without[0]["content"]
    assert "<answer>[[A]]</answer>" in without[0]["content"]


def test_style_and_token_budget_follow_the_checkpoint(tmp_path: Path) -> None:
    distilled = RMR1Options(model="gaotang/RM-R1-DeepSeek-Distilled-Qwen-7B")
    assert distilled.resolved_style() == ("reasoning", "name")
    assert distilled.max_new_tokens == 32768
    instruct = RMR1Options(model="gaotang/RM-R1-Qwen2.5-Instruct-7B")
    assert instruct.resolved_style() == ("instruct", "default")
    assert instruct.max_new_tokens == 8192
    assert RMR1Options(model="my/R1-Distill-Qwen-7B-judge").resolved_style()[0] == "reasoning"
    # a local folder: its config names the distilled origin, or its template opens <think>
    folder = tmp_path / "local"
    folder.mkdir()
    (folder / "config.json").write_text('{"_name_or_path": "x/RM-R1-DeepSeek-Distilled"}')
    assert RMR1Options(model=str(folder)).resolved_style() == ("reasoning", "config")
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer_config.json").write_text('{"chat_template": "{{ m }}<think>\\n"}')
    assert RMR1Options(model=str(folder)).resolved_style() == ("reasoning", "config")
    # the explicit option wins; an explicit budget is kept
    forced = RMR1Options(model="gaotang/RM-R1-DeepSeek-Distilled-Qwen-7B", style="instruct")
    assert forced.resolved_style() == ("instruct", "option") and forced.max_new_tokens == 8192
    assert RMR1Options(model="x", style="reasoning", max_new_tokens=50000).max_new_tokens == 50000
    rm = judge(prefers_good, style="reasoning")
    rm.compare([pair("r1")])
    assert [m["role"] for m in rm.backend.chats[0]] == ["user"]
    described = rm.describe()
    assert described["prompt_style"] == "reasoning" and described["style_source"] == "option"
    assert described["max_new_tokens"] == 32768 and described["options"]["max_new_tokens"] == 32768
    assert rm.backend.chats and described["prompt"] == "builtin" and described["parse"] == "strict"


def test_fingerprint_tracks_prompt_and_decoding() -> None:
    base = judge(prefers_good).fingerprint()
    assert base == judge(prefers_good).fingerprint()
    assert base != judge(prefers_good, style="reasoning").fingerprint()
    assert base != judge(prefers_good, parse="original").fingerprint()
    assert base != judge(prefers_good, max_new_tokens=100).fingerprint()


def test_scalar_mode_is_a_win_rate_against_the_reference(tmp_path: Path) -> None:
    def script(chat):
        a, b = answers(chat)
        if "UNREADABLE" in a + b:
            return "no idea"
        return verdict("A" if len(a) >= len(b) else "B")  # the longer answer wins

    reqs = [ScoreRequest("r1", "Q?", "a long and detailed answer"), ScoreRequest("r1", "Q?", "x"),
            ScoreRequest("r2", "Q?", "UNREADABLE")]
    scorer = RMR1ScalarScorer(
        RMR1ScalarOptions(model="scripted", reference_text="medium answer"),
        backend=ScriptedBackend(script),
    )
    out = scorer.score(reqs)
    assert out[:2] == [1.0, 0.0] and math.isnan(out[2])
    assert scorer.stats()["n_pairs_unjudged"] == 1
    refs = tmp_path / "refs.jsonl"
    refs.write_text(json.dumps({"id": "r1", "reference": "medium answer"}) + "\n")
    by_file = RMR1ScalarScorer(
        RMR1ScalarOptions(model="scripted", reference_file=str(refs)),
        backend=ScriptedBackend(script),
    )
    assert by_file.score(reqs[:2]) == [1.0, 0.0]
    with pytest.raises(ValueError, match="record 'r2' has no reference"):
        by_file.score(reqs[2:])
    refs.write_text('{"id": "r1"}\n')
    with pytest.raises(ValueError, match=r"refs.jsonl:1: needs a string 'id'"):
        RMR1ScalarScorer(RMR1ScalarOptions(model="scripted", reference_file=str(refs)),
                         backend=ScriptedBackend(script))
    with pytest.raises(OptionsError, match="exactly one of reference_text"):
        PluginRegistry().build("scorer", "rm-r1-scalar", {"model": "m"})


def test_openai_compatible_server(tmp_path: Path) -> None:
    with LoopbackOpenAI(prefers_good) as server:
        rm = PluginRegistry().build("scorer", "rm-r1", {
            "backend": "openai", "model": "rm-r1", "base_url": server.base_url,
            "cache_dir": "", "max_retries": "0",
        })
        out = rm.compare([pair("r1"), pair("r2", first=BAD, second=GOOD),
                          pair("r3", question="BROKEN?")])
        assert out[:2] == [1.0, 0.0] and math.isnan(out[2])
        # r2 is r1 with the answers swapped: its two chats are r1's, sent once each
        assert server.calls == 4
        assert rm.stats()["n_invalid_orders"] == 2


def _sample_eval(args: str, output: Path, capsys, *extra: str) -> dict:
    from prbench.testing import run_cli

    code = run_cli(["eval", "--tasks", "personalized_rewardbench_sample_noprofile", "--model_args",
                 args, "--output_path", str(output), *extra])
    out = capsys.readouterr().out
    assert code == 0, out[-2000:]
    found = sorted(output.rglob("results_*.json"))
    assert len(found) == 1
    assert found[0].with_name(found[0].name.replace("results_", "prbench_manifest_")).exists()
    return json.loads(found[0].read_text())


def test_prbench_eval_through_a_server(tmp_path: Path, capsys) -> None:
    def longer_wins(chat):
        a, b = answers(chat)
        return verdict("A" if len(a) >= len(b) else "B")

    with LoopbackOpenAI(longer_wins) as server:
        results = _sample_eval(
            f"scorer=rm-r1,backend=openai,model=rm-r1,base_url={server.base_url},cache_dir=",
            tmp_path / "out", capsys,
        )
    group = results["results"]["personalized_rewardbench_sample_noprofile"]
    print("rm-r1 scripted server (longer wins) sample acc_macro:", group["acc_macro,none"])
    assert 0.0 <= group["acc_macro,none"] <= 1.0
    stats = results["config"]["prbench"]["scorer"]["stats"]
    assert stats["n_pairs"] == 45 and stats["n_invalid_orders"] == 0


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("rmr1") / "lm")


def test_tiny_random_causal_lm_gives_invalid_not_verdicts(tiny_lm: Path) -> None:
    rm = PluginRegistry().build("scorer", "rm-r1", {
        "backend": "hf", "model": str(tiny_lm), "max_new_tokens": "6", "device": "cpu",
        "cache_dir": "",
    })
    out = rm.compare([pair("r1"), pair("r2")])
    assert all(math.isnan(p) for p in out)
    stats = rm.stats()
    assert stats["n_invalid_orders"] == 4 and stats["n_verdicts"] == 0


def test_prbench_eval_with_a_tiny_causal_lm(tiny_lm: Path, tmp_path: Path, capsys) -> None:
    results = _sample_eval(
        f"scorer=rm-r1,backend=hf,model={tiny_lm},max_new_tokens=4,cache_dir=",
        tmp_path / "out", capsys, "--limit", "3", "--max-invalid", "1",  # no readable verdict
    )
    task = results["results"]["personalized_rewardbench_sample_art_and_entertainment_noprofile"]
    print("rm-r1 tiny causal LM (limit 3):", {k: v for k, v in task.items() if "," in k})
    assert task["invalid,none"] == 1.0 and task["acc,none"] == 0.0


@pytest.mark.slow
def test_plain_lm_eval_through_a_server(tmp_path: Path) -> None:
    with LoopbackOpenAI(prefers_good) as server:
        args = f"scorer=rm-r1,backend=openai,model=rm-r1,base_url={server.base_url},cache_dir="
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "TRANSFORMERS_OFFLINE": "1"}
        proc = subprocess.run(
            [sys.executable, "-m", "lm_eval", "--tasks",
             "personalized_rewardbench_sample_noprofile", "--model", "prbench",
             "--model_args", args, "--output_path", str(tmp_path / "out")],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
        )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    results = json.loads(next((tmp_path / "out").rglob("results_*.json")).read_text())
    assert results["config"]["prbench"]["scorer"]["id"] == "rm-r1"
    assert results["config"]["prbench"]["scorer"]["stats"]["n_pairs"] == 45
    # plain lm_eval reports the both-order metrics too: no sample answer starts with "GOOD", so
    # this judge always says B -- pure position bias, every pair split
    name = "personalized_rewardbench_sample_society_and_culture_noprofile"
    task = results["results"][name]
    assert task["acc,none"] == 0.0 and task["acc_single_order,none"] == 0.5
    assert task["acc_chosen_first,none"] == 0.0 and task["acc_chosen_second,none"] == 1.0
    assert task["position_bias,none"] == 1.0 and task["first_shown_win_rate,none"] == 0.0
    assert task["n_order_flips,none"] == results["n-samples"][name]["effective"]


def test_runtime_reports_the_judge_and_its_bias(tmp_path: Path) -> None:
    from prbench.api import build_runtime

    with LoopbackOpenAI(lambda chat: verdict("A")) as server:
        options = {"backend": "openai", "model": "rm-r1", "base_url": server.base_url,
                   "cache_dir": "", "cache": "false", "progress": "false"}
        with build_runtime("rm-r1", options) as rt:
            assert rt.pairwise
            assert rt.compare([pair("r1"), pair("r2", question="Other?")]) == [0.5, 0.5]
            described = rt.describe()
    assert described["scorer"]["prompt_style"] == "instruct"
    assert described["scorer_stats"]["first_shown_win_rate"] == 1.0
    assert described["scorer_stats"]["n_order_flips"] == 2


def test_a_model_that_needs_its_own_code_is_one_line(tmp_path: Path) -> None:
    """backend=hf on a model whose config needs its own code: the one line hf-classifier gives
    (it was a traceback), and the model's code never runs."""
    folder = build_tiny_causal_lm(tmp_path / "needs-code")
    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = "prbench_untrusted"
    config["auto_map"] = {"AutoConfig": "configuration_untrusted.UntrustedConfig",
                          "AutoModelForCausalLM": "modeling_untrusted.UntrustedForCausalLM"}
    (folder / "config.json").write_text(json.dumps(config))
    trap = f"from pathlib import Path\nPath({str(tmp_path / 'CODE_RAN')!r}).write_text('x')\n"
    for name in ("configuration_untrusted.py", "modeling_untrusted.py"):
        (folder / name).write_text(trap)
    proc = subprocess.run(
        [sys.executable, "-m", "prbench.cli", "eval", "--tasks",
         "personalized_rewardbench_sample_noprofile", "--limit", "1", "--model_args",
         f"scorer=rm-r1,backend=hf,model={folder}", "--no-progress"],
        env=os.environ.copy(), cwd=tmp_path, capture_output=True, text=True, timeout=600,
        check=False,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: {folder}: this model needs code shipped with it (an auto_map in its config) to "
        "load, and prbench runs such code only with the option trust_remote_code=true; set it "
        "only if you trust that code"
    ]
    assert not (tmp_path / "CODE_RAN").exists()
