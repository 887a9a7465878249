"""Every user-reachable mistake of issue 19 ends in one ``error:`` line, never a traceback.

Each case runs as a user runs it, in a fresh process (``prbench ...`` or plain ``lm_eval ...``).
Plain ``lm_eval`` runs with this checkout's start-up hook in place of the installed copy
(``tests._harness_fixtures.LM_EVAL``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests._harness_fixtures import LM_EVAL, PYTHON, subprocess_env

#: whole commands end to end (lm-eval runs, subprocesses): `make test-fast` leaves them out
pytestmark = pytest.mark.slow

SAMPLE = "personalized_rewardbench_sample_noprofile"


def _run(argv: list[str], tmp_path: Path, *, lm_eval: bool = False) -> tuple[int, str, str]:
    cmd = [PYTHON, "-c", LM_EVAL, *argv] if lm_eval else [PYTHON, "-m", "prbench.cli", *argv]
    proc = subprocess.run(cmd, env=subprocess_env(), cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def _one_error(argv: list[str], tmp_path: Path, *, lm_eval: bool = False) -> str:
    """Run; check exit 1, no traceback and exactly one ``error:`` line; return that line."""
    code, out, err = _run(argv, tmp_path, lm_eval=lm_eval)
    assert "Traceback" not in out + err, err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err[-3000:]
    assert code == 1, (code, err[-3000:])
    return errors[0]


def test_rl_judge_without_a_model(tmp_path: Path) -> None:
    line = _one_error(["rl", "--policy_args", f"model={tmp_path / 'policy'}", "--model_args",
                       "scorer=length", "-o", str(tmp_path / "rl"), "--judge_args",
                       "judge=rubric-judge"],
                      tmp_path)
    pytest.importorskip("trl")
    assert line == (
        "error: judge 'rubric-judge': set the option `model` (a hub id, local folder or served "
        "model name), e.g. model=HuggingFaceTB/SmolLM2-135M-Instruct"
    )


def test_rl_default_judge_is_offline_and_flagged() -> None:
    from prbench.downstream.rl_config import RLConfig
    from prbench.plugins import get_registry

    judge = RLConfig(policy="", output_dir="", scorer="").judge
    assert judge == "oracle-rubric" and get_registry().get("scorer", judge).diagnostic


def test_eval_llm_judge_without_a_model(tmp_path: Path) -> None:
    line = _one_error(["eval", "--tasks", SAMPLE, "--model_args", "scorer=llm-judge",
                       "--limit", "1"], tmp_path)
    assert line.startswith("error: llm-judge: set the option `model`")


@pytest.mark.parametrize(
    ("model_args", "expected"),
    [
        ("scorer=llm-judge,model=x", "error: served scorer 'llm-judge' is pairwise"),
        ("scorer=length,unitt=word", "error: scorer 'length': unknown option 'unitt' (did you "
         "mean 'unit'?)"),
        ("scorer=hf-classifier,pretrained=./no-such-model", "error: scorer 'hf-classifier' "
         "could not be built, nothing was served: "),
    ],
)
def test_serve_checks_the_scorer_before_it_starts(
    model_args: str, expected: str, tmp_path: Path
) -> None:
    pytest.importorskip("uvicorn")
    line = _one_error(["serve", "--model_args", model_args, "--port", "0"], tmp_path)
    assert line.startswith(expected), line


def test_eval_metadata_invalid_json(tmp_path: Path) -> None:
    line = _one_error(["eval", "--tasks", SAMPLE, "--metadata", "{bad"], tmp_path)
    assert line.startswith("error: --metadata: invalid JSON at line 1 column 2"), line


@pytest.mark.parametrize("flag", ["--metadata", "--model_args"])
def test_plain_lm_eval_invalid_json(flag: str, tmp_path: Path) -> None:
    line = _one_error(["--model", "prbench", "--tasks", SAMPLE, flag, "{'a': 1}"], tmp_path,
                      lm_eval=True)
    assert line.startswith(f"error: {flag}: invalid JSON at line 1 column 2"), line


def test_prbench_data_missing_folder(tmp_path: Path) -> None:
    folder = f"{tmp_path / 'no-such-data'}/"
    line = _one_error(["eval", "--tasks", "personalized_rewardbench", "--limit", "1",
                       "--model_args", "scorer=length",
                       "--metadata", f'{{"prbench_data": "{folder}"}}'], tmp_path)
    assert line.endswith("no-such-data/: no such folder"), line


def test_plain_lm_eval_without_model_prbench(tmp_path: Path) -> None:
    line = _one_error(["--tasks", SAMPLE, "--limit", "1"], tmp_path, lm_eval=True)
    assert "add --model prbench" in line and "not by --model hf (lm-eval's default)" in line


