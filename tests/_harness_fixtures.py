"""Helpers for the lm-eval harness tests: a plugin file with instrumented scorers, runners."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

#: ``python -c LM_EVAL <argv>`` runs ``lm_eval <argv>`` with this checkout's start-up hook
#: (``prbench/harness/_startup.py``) instead of the installed one, so a test checks the code under
#: test even before a reinstall
LM_EVAL = f"""
import importlib.util, sys
try:
    import _prbench_lm_eval_startup as installed
    installed.uninstall()
except ImportError:
    pass
spec = importlib.util.spec_from_file_location(
    "_prbench_lm_eval_startup_tree", {str(REPO / "prbench" / "harness" / "_startup.py")!r})
hook = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hook)
sys.argv = ["lm_eval", *sys.argv[1:]]
from lm_eval.__main__ import cli_evaluate
sys.exit(cli_evaluate())
"""

#: A plugin file: scorers that log every call to a jsonl file, so tests can count scorer calls.
PLUGIN_SOURCE = '''
import dataclasses
import json
import math
from prbench import hookimpl


def _log(path, **event):
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(event) + "\\n")


@dataclasses.dataclass(frozen=True)
class CountingOptions:
    log: str = ""
    device: str = "auto"
    batch_size: int = 16
    bonus: float = 0.0


class Counting:
    """Scores an answer by its number of characters; logs each call."""

    def __init__(self, options):
        self.options = options

    def score(self, requests):
        _log(
            self.options.log, kind="score", n=len(requests),
            ids=[r.record_id for r in requests],
            hidden=[r.hidden is not None for r in requests],
            profiles=[r.profile.text for r in requests],
            device=self.options.device, batch_size=self.options.batch_size,
        )
        return [len(r.response) + self.options.bonus for r in requests]

    def stats(self):
        return {"counted": True}


@dataclasses.dataclass(frozen=True)
class JudgeOptions:
    log: str = ""
    p: float = 0.8
    fail: str = ""


class FixedJudge:
    """P(first better) = p, except nan for the record ids listed in ``fail`` (|-separated)."""

    def __init__(self, options):
        self.options = options

    def compare(self, pairs):
        failing = set(filter(None, self.options.fail.split("|")))
        _log(self.options.log, kind="compare", n=len(pairs), firsts=[p.first for p in pairs])
        return [math.nan if p.record_id in failing else self.options.p for p in pairs]

    def stats(self):
        return {"failures": len(set(filter(None, self.options.fail.split("|"))))}


@hookimpl
def register_scorers(register):
    register("counting", Counting, options=CountingOptions, description="test: length in chars")
    register("counting-oracle", Counting, options=CountingOptions, diagnostic=True,
             description="test: a diagnostic")
    register("fixed-judge", FixedJudge, options=JudgeOptions, tags=("pairwise",),
             description="test: a pairwise judge")
'''


def write_plugin(tmp_path: Path) -> Path:
    """Write the instrumented plugin file and return its path."""
    path = tmp_path / "harness_test_plugin.py"
    path.write_text(PLUGIN_SOURCE, encoding="utf-8")
    return path


def read_log(path: Path) -> list[dict[str, Any]]:
    """The events a logging scorer wrote (empty when it was never called)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def run_eval(argv: list[str], capsys: Any) -> tuple[int, str, str]:
    """Run ``prbench <argv>`` in-process; returns (exit code, stdout, stderr)."""
    from prbench.cli import main

    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def results_and_manifest(output: Path) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """The single results file under ``output`` and its manifest."""
    found = sorted(output.rglob("results_*.json"))
    assert len(found) == 1, found
    path = found[0]
    manifest = path.with_name(path.name.replace("results_", "prbench_manifest_"))
    assert manifest.exists(), f"no manifest next to {path}"
    return (
        json.loads(path.read_text(encoding="utf-8")),
        json.loads(manifest.read_text(encoding="utf-8")),
        path,
    )


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment of a subprocess test: offline, repo importable, private caches.

    ``PRBENCH_EMBED_PROBE=0`` too (as :func:`prbench.testing.isolated_tests` sets it in-process,
    which a module-scoped fixture's subprocesses start before): ``embed_backend=auto`` never
    times torch against OpenVINO, so two runs that must agree byte for byte use one runtime.
    """
    env = dict(os.environ)
    env.update(OFFLINE)
    env["PRBENCH_EMBED_PROBE"] = "0"
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), env.get("PYTHONPATH", "")) if p
    )
    env.update(extra)
    return env


def run(cmd: list[str], *, env: dict[str, str], cwd: Path, timeout: int = 300) -> str:
    """Run a command; return its combined output, failing with it when the command fails."""
    proc = subprocess.run(
        cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{cmd} failed ({proc.returncode}):\n{output[-4000:]}"
    return output
