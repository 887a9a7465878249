"""lm-eval's ``--apply_chat_template`` and ``--write_out`` with the prbench model (both CLIs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prbench.harness import tasks
from prbench.harness.lm import CHAT_TEMPLATE_NOTE
from tests._harness_fixtures import (
    PYTHON,
    read_log,
    results_and_manifest,
    run,
    run_eval,
    subprocess_env,
    write_plugin,
)

TASK = "personalized_rewardbench_sample_art_and_entertainment"
BM25 = json.dumps({"prbench_profile": "bm25", "prbench_profile_k": 2})
PLACEHOLDER = "built when scored]"


@pytest.fixture(autouse=True)
def _fresh_task_state() -> None:
    tasks.reset()
    yield
    tasks.reset()


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from tests._hf_fixtures import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("rm") / "rm", arch="qwen2", kind="seq-cls")


def _eval(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
          *extra: str) -> tuple[str, dict[str, Any]]:
    code, _, err = run_eval(["eval", "--tasks", f"{TASK}_noprofile", "--limit", "3",
                             "--model_args", "scorer=length", "--output_path",
                             str(tmp_path / name), *extra], capsys)
    assert code == 0, err
    results, _, _ = results_and_manifest(tmp_path / name)
    return err, results


def test_prbench_eval_refuses_apply_chat_template_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_eval(["eval", "--tasks", f"{TASK}_noprofile", "--model_args",
                             "scorer=length", "--apply_chat_template"], capsys)
    assert code == 2 and err.strip().splitlines() == [
        "error: prbench eval does not take --apply_chat_template (a chat reward model always "
        "applies its own chat template); plain `lm_eval --model prbench` takes every lm-eval "
        "flag"]


def _profile_block(err: str) -> str:
    """The indented profile text under ``profile (...):`` in the write-out."""
    lines = err.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("profile (bm25, 2 posts"))
    block = []
    for line in lines[start + 1:]:
        if not line.startswith("    "):
            break
        block.append(line[4:])
    return "\n".join(block)


def test_prbench_eval_write_out_shows_the_profile_the_scorer_gets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugin = write_plugin(tmp_path)
    log = tmp_path / "calls.jsonl"
    code, out, err = run_eval(
        ["--plugin", str(plugin), "eval", "--tasks", TASK, "--limit", "1", "--write_out",
         "--metadata", BM25, "--model_args", f"scorer=counting,log={log}",
         "--output_path", str(tmp_path / "out")], capsys)
    assert code == 0, err
    scored = read_log(log)[0]["profiles"]
    assert scored[0].startswith("Post 1 (Category: ")
    assert _profile_block(err) == scored[0]  # the very text the scorer was given
    assert "document 0 (record 'ae-01')" in err and "as the scorer 'counting' gets it" in err
    assert "question: What camera settings" in err
    assert "answer (chosen):" in err and "answer (rejected):" in err
    assert PLACEHOLDER not in out + err


def test_prbench_eval_write_out_for_a_scorer_that_reads_no_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_eval(
        ["eval", "--tasks", TASK, "--limit", "1", "--write_out", "--metadata", BM25,
         "--model_args", "scorer=length", "--output_path", str(tmp_path / "out")], capsys)
    assert code == 0, err
    assert "profile: not built (the scorer 'length' reads no profile)" in err
    assert PLACEHOLDER not in out + err


@pytest.mark.slow
def test_lm_eval_cli_apply_chat_template_and_write_out(tmp_path: Path, tiny_rm: Path) -> None:
    """Plain ``lm_eval``: no traceback, one note, and the chat the reward model gets."""
    argv = [PYTHON, "-m", "lm_eval", "--model", "prbench", "--tasks", TASK, "--limit", "1",
            "--model_args", f"scorer=hf-classifier,pretrained={tiny_rm}",
            "--metadata", BM25, "--apply_chat_template", "--write_out"]
    output = run(argv, env=subprocess_env(), cwd=tmp_path)
    assert "Traceback" not in output and output.count(CHAT_TEMPLATE_NOTE) == 1
    assert "as the scorer 'hf-classifier' gets it" in output
    assert "profile (bm25, 2 posts" in output
    chats = output.split("chat for the ")[1:]
    assert [c.split(" answer")[0] for c in chats] == ["chosen", "rejected"]
    for chat in chats:  # the profile in the user turn (hf-classifier's default position)
        user = chat.split("  [user]\n")[1].split("  [assistant]\n")[0]
        assert "Some of my earlier posts:" in user and "Post 1 (Category: " in user
        assert "My question: What camera settings" in user
    assert PLACEHOLDER not in output
