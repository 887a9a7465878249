"""The wheel ships what an installed prbench needs: tasks, the sample data, the lm-eval hook."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--wheel-dir", str(out), str(REPO)],
        check=True, capture_output=True,
    )
    (path,) = out.glob("prbench-*.whl")
    return zipfile.ZipFile(path)


def test_wheel_ships_tasks_sample_and_hook(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    task_dir = "prbench/_tasks/personalized_rewardbench/"
    assert f"{task_dir}_template_yaml" in names
    assert f"{task_dir}utils.py" in names
    assert f"{task_dir}sample/_personalized_rewardbench_sample.yaml" in names
    assert f"{task_dir}published/_personalized_rewardbench.yaml" in names
    for domain in ("Art_and_Entertainment", "Lifestyle_and_Personal_Development",
                   "Society_and_Culture"):
        assert f"prbench/data/sample/pairs/{domain}.jsonl" in names
    assert "prbench/data/sample/pools.jsonl" in names
    assert "prbench/data/sample/README.md" in names
    assert "prbench_lm_eval.pth" in names
    assert "_prbench_lm_eval_startup.py" in names
    # what a plugin's task YAML names with `class: !function ...` (CONTRIBUTING, plugin tasks)
    assert "prbench/harness/plugin_task.py" in names
    assert not [n for n in names if "/.parts/" in n or n.endswith(".pyc")]


def test_wheel_declares_console_script_and_lm_eval_entry_points(wheel: zipfile.ZipFile) -> None:
    (ep_name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(ep_name).decode()
    assert "prbench = prbench.cli:main" in text
    assert "[lm_eval.models]" in text and "prbench.harness.lm:PRBenchLM" in text
    assert "[lm_eval.tasks]" in text
