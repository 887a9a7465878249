"""Online RL (TRL GRPO/RLOO) with a prbench scorer as the reward, on a tiny random policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prbench.downstream.rl import ScorerReward, completion_text, format_summary
from prbench.downstream.rl_config import RLConfig
from prbench.profiles.base import ProfileView
from prbench.records import load_records


class RecordingRuntime:
    """Stands in for the scorer runtime: records each call, scores by word count."""

    def __init__(self) -> None:
        self.calls: list[list] = []

    def score(self, requests):
        self.calls.append(list(requests))
        return [float(len(r.response.split())) for r in requests]


def test_summary_says_which_training_rewards_it_compares() -> None:
    part = {"mean_reward": 0.1, "mean_quality": None, "judge_failures": 0}
    results = {"before": part, "after": {**part, "mean_reward": 0.3},
               "train": {"steps": 10, "records": 4, "reward_first": 0.324, "reward_last": 0.214,
                         "curve": []}}
    summary = format_summary(results)
    assert "training reward, first step -> last step: 0.3240 -> 0.2140" in summary
    assert "| before | 0.1000 |" in summary and "| after | 0.3000 |" in summary


def test_reward_function_sends_record_context_in_one_batched_call() -> None:
    records = load_records("sample")[:2]
    views = {r.id: ProfileView(text=f"posts of {r.id}") for r in records}
    runtime = RecordingRuntime()
    reward = ScorerReward(runtime, {r.id: r for r in records}, views)
    ids = [records[0].id, records[0].id, records[1].id]
    completions = [[{"role": "assistant", "content": "one two"}],
                   [{"role": "assistant", "content": "one"}], "a b c"]
    out = reward(prompts=["p"] * 3, completions=completions, record_id=ids,
                 completion_ids=[[1]] * 3)
    assert out == [2.0, 1.0, 3.0]
    assert len(runtime.calls) == 1
    sent = runtime.calls[0]
    assert [r.record_id for r in sent] == ids
    assert sent[2].question == records[1].question
    assert sent[2].profile.text == f"posts of {records[1].id}"
    assert sent[0].category == records[0].category and sent[0].hidden is None
    diag = ScorerReward(runtime, {r.id: r for r in records}, views, diagnostic=True)
    diag(prompts=["p"], completions=["x"], record_id=[records[0].id])
    assert runtime.calls[-1][0].hidden["rubric_aspects"][0]["aspect"] == \
        records[0].rubric_aspects[0].aspect
    with pytest.raises(ValueError, match="record_id"):
        reward(prompts=["p"], completions=["x"])


def test_unmark_gguf_clears_the_quantized_flag_only_for_gguf() -> None:
    from types import SimpleNamespace

    from prbench.downstream.rl_policy import unmark_gguf

    class GgufHfQuantizer:
        pass

    class BnbQuantizer:
        pass

    model = SimpleNamespace(hf_quantizer=GgufHfQuantizer(), is_quantized=True,
                            config=SimpleNamespace(quantization_config={"quant_method": "gguf"}))
    unmark_gguf(model)
    assert model.hf_quantizer is None and model.is_quantized is False
    assert not hasattr(model.config, "quantization_config")
    other = SimpleNamespace(hf_quantizer=BnbQuantizer(), is_quantized=True,
                            config=SimpleNamespace())
    with pytest.raises(ValueError, match="only GGUF"):
        unmark_gguf(other)


def test_completion_text_and_config_checks() -> None:
    assert completion_text([{"role": "assistant", "content": "hi"}]) == "hi"
    with pytest.raises(ValueError, match="PPO is not in trl"):
        RLConfig(policy="p", output_dir="o", scorer="length", algorithm="ppo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_generations must be at least 2"):
        RLConfig(policy="p", output_dir="o", scorer="length", num_generations=1)


def test_online_rl_is_a_registered_downstream_evaluator(capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.cli import main
    from prbench.downstream.rl import OnlineRLEvaluator
    from prbench.options import OptionsError
    from prbench.plugins import get_registry

    registry = get_registry()
    evaluator = registry.build("downstream-evaluator", "online-rl",
                               {"policy": "p", "output_dir": "o", "scorer": "length",
                                "scorer_options": '{"prefer": "shorter"}', "max_steps": "3"})
    assert isinstance(evaluator, OnlineRLEvaluator)
    assert evaluator.options.max_steps == 3 and evaluator.options.scorer_options == {
        "prefer": "shorter"}
    with pytest.raises(OptionsError, match="'ppo' is not one of 'grpo', 'rloo'"):
        registry.build("downstream-evaluator", "online-rl",
                       {"policy": "p", "output_dir": "o", "scorer": "length", "algorithm": "ppo"})
    # the CLI goes through the same component: a bad value is one error line
    code = main(["rl", "--policy_args", "model=p", "--model_args", "scorer=length", "-o", "o",
                 "--num_generations", "1"])
    assert code == 1 and ("option 'num_generations' must be >= 2, <= 1024, got 1"
                          in capsys.readouterr().err)


def test_reward_curve_prints_one_line_per_step_with_eta(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from prbench.downstream.rl_progress import RewardCurve, trainer_callback

    monkeypatch.delenv("PRBENCH_PROGRESS", raising=False)
    now = iter([100.0, 104.0, 108.0, 112.0])
    curve = RewardCurve(clock=lambda: next(now))
    callback = trainer_callback(curve)
    callback.on_train_begin(None, SimpleNamespace(max_steps=5, global_step=0), None)
    for step, reward in ((1, 0.25), (2, 0.5)):
        callback.on_log(None, SimpleNamespace(max_steps=5, global_step=step), None,
                        logs={"reward": reward, "reward_std": 0.1,
                              "completions/mean_length": 12.0})
    callback.on_log(None, SimpleNamespace(max_steps=5, global_step=2), None,
                    logs={"train_runtime": 8.0})  # the final summary has no reward: no line
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "rl: step 1/5  reward 0.2500 (std 0.100)  len 12.0  4.0 s/step  ETA 16s",
        "rl: step 2/5  reward 0.5000 (std 0.100)  len 12.0  4.0 s/step  ETA 12s",
    ]
    summary = curve.summary()
    assert summary["reward_first"] == 0.25 and summary["reward_last"] == 0.5
    assert [(p["step"], p["reward"], p["seconds"]) for p in summary["curve"]] == [
        (1, 0.25, 4.0), (2, 0.5, 8.0)]
    monkeypatch.setenv("PRBENCH_PROGRESS", "0")  # what --no-progress sets
    from prbench.downstream.rl_progress import step_lines_enabled

    assert not step_lines_enabled() and not step_lines_enabled(False)
    quiet = RewardCurve(show=False, clock=lambda: 0.0)
    quiet.start(2)
    assert quiet.record(1, {"reward": 1.0}) is not None
    assert capsys.readouterr().err == "" and len(quiet.points) == 1


def test_freeze_below_leaves_only_the_top_blocks_trainable(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    from prbench.downstream.rl_policy import freeze_below
    from tests._hf_fixtures import build_tiny_model

    model = AutoModelForCausalLM.from_pretrained(
        build_tiny_model(tmp_path / "policy", arch="llama", kind="causal-lm"))
    blocks = model.get_decoder().layers
    count = freeze_below(model, 1)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    top = len(blocks) - 1
    assert trainable and all(f"layers.{top}." in n or n == "model.norm.weight"
                             for n in trainable)
    assert "model.norm.weight" in trainable
    assert not any("embed" in n or "lm_head" in n for n in trainable)
    assert count == sum(p.numel() for p in model.parameters() if p.requires_grad)
    with pytest.raises(ValueError, match="only"):
        freeze_below(model, len(blocks) + 1)
    with pytest.raises(ValueError, match="train_layers must be 0"):
        RLConfig(policy="p", output_dir="o", scorer="length", train_layers=-1)


@pytest.mark.slow
def test_tiny_rl_run_trains_checkpoints_and_evaluates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("trl")
    import torch
    from transformers import AutoModelForCausalLM

    from prbench.downstream.rl import run_rl
    from tests._hf_fixtures import build_tiny_model

    policy = build_tiny_model(tmp_path / "policy", arch="qwen2", kind="causal-lm")
    records = load_records("sample")
    config = RLConfig(
        policy=str(policy), output_dir=str(tmp_path / "run"), scorer="length",
        scorer_options={"cache": "false"}, algorithm="grpo", num_generations=2,
        prompts_per_step=2, max_steps=2, max_completion_length=8, learning_rate=1e-2,
        judge="oracle-rubric", eval_max_new_tokens=8, save_steps=1, progress=False,
    )
    monkeypatch.delenv("PRBENCH_PROGRESS", raising=False)
    results = run_rl(config, records[:4], records[4:6])
    saved = json.loads((tmp_path / "run" / "rl_results.json").read_text())
    assert saved["train"]["steps"] == 2 and results["train"]["reward_calls"] == 2
    # one progress line per step on stderr, and the same curve in the results
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("rl: step")]
    assert [x.split()[2] for x in lines] == ["1/2", "2/2"] and all("ETA" in x for x in lines)
    curve = saved["train"]["curve"]
    assert [p["step"] for p in curve] == [1, 2]
    assert all(isinstance(p["reward"], float) and p["seconds"] > 0 for p in curve)
    assert saved["train"]["reward_first"] == curve[0]["reward"]
    assert saved["train"]["reward_last"] == curve[-1]["reward"]
    assert set(saved["seconds"]) == {"profiles", "eval_before", "load_policy", "train",
                                     "eval_after"}
    assert (tmp_path / "run" / "checkpoint-1").is_dir()
    assert (tmp_path / "run" / "checkpoint-2").is_dir()
    for part in ("before", "after"):
        assert saved[part]["n"] == 2 and saved[part]["judge_failures"] == 0
        assert [i["record_id"] for i in saved[part]["items"]] == [r.id for r in records[4:6]]
        assert all(i["reward"] == len(i["answer"].split()) for i in saved[part]["items"])
        assert 0.0 <= saved[part]["mean_quality"] <= 1.0
    assert saved["config"]["seed"] == 0 and saved["judge"] is not None
    before = AutoModelForCausalLM.from_pretrained(policy)
    after = AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "final")
    changed = any(not torch.equal(a, b) for a, b in
                  zip(before.state_dict().values(), after.state_dict().values(), strict=True))
    assert changed, "training left the policy unchanged"
    summary = format_summary(results)
    assert "| before |" in summary
    assert f"reward by step: {curve[0]['reward']:.3f} {curve[1]['reward']:.3f}" in summary
    assert "seconds: profiles" in summary and "train " in summary


@pytest.mark.slow
def test_cli_rl_with_rloo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("trl")
    from prbench.cli import main
    from tests._hf_fixtures import build_tiny_model

    policy = build_tiny_model(tmp_path / "policy", arch="llama", kind="causal-lm")
    code = main([
        "rl", "--policy_args", f"model={policy}", "--model_args", "scorer=random,seed=1",
        "-o", str(tmp_path / "run"), "--limit", "4", "--eval_limit", "2", "--algorithm", "rloo",
        "--num_generations", "2", "--max_steps", "1", "--max_completion_length", "6",
        "--eval_max_new_tokens", "6", "--judge_args", "judge=none", "--no-progress",
        "--train_layers", "1",
    ])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, out
    saved = json.loads((tmp_path / "run" / "rl_results.json").read_text())
    assert saved["config"]["algorithm"] == "rloo" and saved["train"]["steps"] == 1
    assert saved["config"]["train_layers"] == 1
    assert "rl: step" not in captured.err  # --no-progress: no step lines
    assert saved["eval_overlaps_train"] == 2 and "also trained on" in out
    assert "mean_quality" not in saved["after"]


def test_cli_rl_help(capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["rl", "--help"])
    assert exc.value.code == 0
    assert "--num_generations" in capsys.readouterr().out


class _Stop(Exception):
    """Raised where the RL run would start: the command line has been read."""


@pytest.fixture
def rl_configs(monkeypatch: pytest.MonkeyPatch) -> list[RLConfig]:
    """The settings each ``prbench rl`` call hands the evaluator (which then stops: ``_Stop``)."""
    pytest.importorskip("trl")
    from prbench.downstream.rl import OnlineRLEvaluator

    seen: list[RLConfig] = []

    def run(self: OnlineRLEvaluator, *args: object, **kwargs: object) -> None:
        seen.append(self.options)
        raise _Stop

    monkeypatch.setattr(OnlineRLEvaluator, "run", run)
    return seen


def test_cli_rl_policy_is_given_as_policy_args(
    rl_configs: list[RLConfig], capsys: pytest.CaptureFixture[str]
) -> None:
    from prbench.cli import main

    seen = rl_configs
    with pytest.raises(_Stop):
        main(["rl", "--policy_args", "model=/models/p,gguf_file=p.Q4.gguf", "--model_args",
              "scorer=length", "-o", "o", "--judge_args", "judge=none", "--limit", "1"])
    assert (seen[0].policy, seen[0].gguf_file) == ("/models/p", "p.Q4.gguf")
    with pytest.raises(_Stop):
        main(["rl", "--policy-args", "model=hub/id", "--model_args", "scorer=length", "-o", "o",
              "--judge_args", "judge=none", "--limit", "1"])
    assert (seen[1].policy, seen[1].gguf_file) == ("hub/id", "")
    assert "note:" not in capsys.readouterr().err  # the one form: nothing to note
    with pytest.raises(_Stop):  # bon's form of the same policy: the same run
        main(["rl", "--policy_args", "backend=hf,model=hub/id", "--model_args", "scorer=length",
              "-o", "o", "--judge_args", "judge=none", "--limit", "1"])
    assert (seen[2].policy, seen[2].gguf_file) == ("hub/id", "")

    for bad, said in (("modle=p", "unknown option 'modle' (did you mean 'model'?)"),
                      ("gguf_file=f.gguf", "--policy_args names no model"),
                      ("backend=openai,model=p", "backend=openai: prbench rl trains the policy"),
                      ("model=p,seed=3", "sets sampling with flags: write --seed 3"),
                      ("p", "--policy_args 'p' is not a K=V list: write --policy_args model=p")):
        code = main(["rl", "--policy_args", bad, "--model_args", "scorer=length", "-o", "o"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 1 and len(err) == 1 and err[0].startswith("error: --policy_args")
        assert said in err[0], err[0]
    assert len(seen) == 3  # no bad form reached the evaluator


@pytest.mark.parametrize(("old", "new"), [
    (["--policy", "/models/p"], "--policy is now --policy_args model=PATH"),
    (["--policy_args", "model=p", "--gguf-file", "f.gguf"],
     "--gguf-file is now --policy_args model=PATH,gguf_file=F"),
])
def test_cli_rl_old_policy_flags_are_refused_naming_the_form(
    old: list[str], new: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--policy``/``--gguf_file`` were never released: one error line names the one form."""
    from prbench.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["rl", *old, "--model_args", "scorer=length", "-o", "o"])
    assert exc.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: prbench rl: ") and f"({new})" in line, line
    assert "--policy " not in subprocess_free_usage()


def subprocess_free_usage() -> str:
    """``prbench rl --help`` as text, in-process."""
    import contextlib
    import io

    from prbench.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["rl", "--help"])
    return out.getvalue()


def test_cli_rl_without_a_policy_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.cli import main

    code = main(["rl", "--model_args", "scorer=length", "-o", "o"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1, err
    assert err[0].startswith("error: --policy_args names no model"), err
