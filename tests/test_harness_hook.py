from __future__ import annotations

import json
import shutil
import sys
import sysconfig
import types
from pathlib import Path
from typing import Any

import pytest

from prbench.harness import lm_eval_compat as bridge
from tests._harness_fixtures import PYTHON, REPO, run, subprocess_env

STARTUP = REPO / "prbench" / "harness" / "_startup.py"
PTH = REPO / "prbench" / "harness" / "prbench_lm_eval.pth"
GROUP = "personalized_rewardbench_sample_noprofile"


def _site_dir(tmp_path: Path) -> Path:
    """A folder laid out as the wheel installs the hook: the .pth and the top-level module."""
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(PTH, site / PTH.name)
    shutil.copy(STARTUP, site / "_prbench_lm_eval_startup.py")
    return site


@pytest.fixture
def startup() -> Any:
    import prbench.harness._startup as module

    return module


def test_pth_line_imports_the_startup_module() -> None:
    assert PTH.read_text().strip() == "import _prbench_lm_eval_startup"


def test_startup_imports_nothing_else(tmp_path: Path) -> None:
    site = _site_dir(tmp_path)
    code = (
        "import os, sys; before = set(sys.modules); "
        f"sys.path.insert(0, {str(site)!r}); import _prbench_lm_eval_startup; "
        "print(sorted(set(sys.modules) - before)); "
        "print([type(f).__name__ for f in sys.meta_path][0])"
    )
    out = run([PYTHON, "-S", "-c", code], env=subprocess_env(), cwd=tmp_path)
    assert out.splitlines() == ["['_prbench_lm_eval_startup']", "LmEvalHookFinder"]


def test_opt_out(startup: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for value, expected in (("1", True), ("true", True), ("YES", True), ("0", False), ("", False)):
        assert startup.opted_out({startup.OPT_OUT_VARIABLE: value}) is expected
    startup.uninstall()
    monkeypatch.setenv(startup.OPT_OUT_VARIABLE, "1")
    assert startup.install() is False and not startup.installed()
    monkeypatch.delenv(startup.OPT_OUT_VARIABLE)
    assert startup.install() is True and startup.installed()
    startup.install()
    assert sum(getattr(f, "_prbench_lm_eval_hook", False) for f in sys.meta_path) == 1


def test_finder_wraps_only_its_targets(startup: Any) -> None:
    import lm_eval

    finder = startup.LmEvalHookFinder()
    assert finder.find_spec("json") is None
    assert finder.find_spec("lm_eval.evaluator", lm_eval.__path__) is None
    spec = finder.find_spec("lm_eval.models", lm_eval.__path__)
    assert isinstance(spec.loader, startup._LoaderProxy)
    assert spec.loader.get_filename("lm_eval.models").endswith("__init__.py")  # delegated


def test_model_registers_after_the_builtins(tmp_path: Path) -> None:
    site = _site_dir(tmp_path)
    code = (
        f"import sys; sys.path.insert(0, {str(site)!r}); import _prbench_lm_eval_startup\n"
        "from lm_eval.api.registry import get_model, model_registry\n"
        "print(get_model('dummy').__name__, get_model('prbench').__name__,\n"
        "      'hf' in model_registry)\n"
        "from lm_eval.tasks import TaskManager\n"
        "tm = TaskManager(include_defaults=False)\n"
        f"print({GROUP!r} in tm.all_groups)\n"
    )
    out = run([PYTHON, "-c", code], env=subprocess_env(), cwd=tmp_path)
    assert "DummyLM PRBenchLM True\nTrue" in out


def test_without_the_hook_lm_eval_knows_nothing_of_prbench(tmp_path: Path) -> None:
    code = (
        "from lm_eval.api.registry import model_registry, get_model\n"
        "get_model('dummy')\n"
        "print('prbench' in model_registry)\n"
    )
    out = run([PYTHON, "-c", code], env=subprocess_env(PRBENCH_NO_LM_EVAL_HOOK="1"), cwd=tmp_path)
    assert out.strip().endswith("False")


def test_feature_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    import lm_eval.api.registry
    import lm_eval.tasks

    assert lm_eval.api.registry.model_registry is not None

    # lm-eval 0.4.13 reads no entry points
    assert not bridge.lm_eval_discovers(bridge.MODELS_GROUP)
    assert not bridge.lm_eval_discovers(bridge.TASKS_GROUP)
    fake = types.ModuleType("lm_eval.api.registry")
    fake.load_plugins = lambda group, registry: []  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lm_eval.api.registry", fake)
    assert bridge.lm_eval_discovers(bridge.MODELS_GROUP)


def test_stands_aside_where_lm_eval_discovers_entry_points(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import lm_eval.api.registry as registry

    fresh = registry.Registry("model")
    monkeypatch.setattr(registry, "model_registry", fresh)
    monkeypatch.setattr(bridge, "lm_eval_discovers", lambda group: True)
    assert bridge.register_model() == "lm-eval" and "prbench" not in fresh
    monkeypatch.setattr(bridge, "lm_eval_discovers", lambda group: False)
    assert bridge.register_model() == "registered"
    assert fresh.get("prbench").__name__ == "PRBenchLM"
    assert bridge.register_model() == "present"


def test_task_manager_patch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []

    class FakeManager:
        def __init__(self, verbosity=None, include_path=None, include_defaults=True, metadata=None):
            calls.append({"include_path": include_path, "include_defaults": include_defaults})

    assert bridge.patch_task_manager(FakeManager)
    assert not bridge.patch_task_manager(FakeManager)  # once only
    from prbench.harness.tasks import builtin_task_dir

    mine = str(tmp_path)
    FakeManager(include_path=mine)
    assert calls[-1]["include_path"] == [str(builtin_task_dir()), mine]  # the user's path last
    assert calls[-1]["include_defaults"] is True
    FakeManager(None, [mine, str(builtin_task_dir())])
    assert calls[-1]["include_path"] == [str(builtin_task_dir()), mine]  # no duplicates
    monkeypatch.setattr(bridge, "lm_eval_discovers", lambda group: True)
    FakeManager(include_path=mine)
    assert calls[-1]["include_path"] == [mine]  # lm-eval finds prbench's folders itself


def test_pth_file_is_installed() -> None:
    """The wheel (and an editable install) puts the hook into site-packages."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    assert (purelib / PTH.name).exists() and (purelib / "_prbench_lm_eval_startup.py").exists(), (
        f"{PTH.name} is not installed in {purelib}: pyproject.toml must force-include "
        "prbench/harness/prbench_lm_eval.pth and prbench/harness/_startup.py "
        "(as _prbench_lm_eval_startup.py) into the wheel; then reinstall prbench"
    )
    installed = (purelib / "_prbench_lm_eval_startup.py").read_text()
    assert installed == STARTUP.read_text(), "the installed hook is stale: reinstall prbench"


@pytest.mark.slow
def test_plain_lm_eval_runs_the_task(tmp_path: Path) -> None:
    """``lm_eval --model prbench ...`` in a fresh interpreter, with the hook as installed."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    args = ["--model", "prbench", "--model_args", "scorer=constant", "--tasks", GROUP,
            "--limit", "3", "--output_path", str(tmp_path / "out")]
    if (purelib / PTH.name).exists():
        cmd = [PYTHON, "-m", "lm_eval", *args]  # what the `lm_eval` console script runs
    else:  # not installed yet: let `site` process the repository's .pth exactly as at start-up
        site = _site_dir(tmp_path)
        code = (
            f"import site, sys; site.addsitedir({str(site)!r}); "
            f"sys.argv = ['lm_eval', *{args!r}]; "
            "from lm_eval.__main__ import cli_evaluate; cli_evaluate()"
        )
        cmd = [PYTHON, "-c", code]
    out = run(cmd, env=subprocess_env(), cwd=tmp_path)
    rows = [line for line in out.splitlines() if line.startswith(f"|{GROUP}")]
    assert rows, out[-3000:]
    table = out[out.index(rows[-1]):].splitlines()  # the groups table: acc first, tie last
    cells = [[c.strip() for c in line.split("|")] for line in table if line.startswith("|")]
    values = {row[5]: float(row[7]) for row in cells[:5]}
    assert values["acc"] == 0.0 and values["tie"] == 1.0 and values["acc_macro"] == 0.0
    [results] = (tmp_path / "out").rglob("results_*.json")
    assert results.parent.name == "prbench-constant"  # named as `prbench eval` names it
    # plain lm_eval writes prbench's manifest next to the results, as `prbench eval` does
    [manifest_file] = results.parent.glob("prbench_manifest_*.json")
    manifest = json.loads(manifest_file.read_text())
    assert manifest["command"][0] == "lm_eval" and manifest["summary"]["sections"]
    assert "prbench manifest:" in out


@pytest.mark.slow
def test_plain_lm_eval_argument_error_is_one_line(tmp_path: Path) -> None:
    """lm-eval's own flag check (``--log_samples`` without ``--output_path``): no traceback."""
    import subprocess

    purelib = Path(sysconfig.get_paths()["purelib"])
    if not (purelib / PTH.name).exists():
        pytest.skip("prbench's start-up hook is not installed in this interpreter")
    proc = subprocess.run(
        [PYTHON, "-m", "lm_eval", "--model", "prbench", "--tasks", GROUP, "--log_samples"],
        env=subprocess_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300,
        check=False,
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "error: Specify --output_path" in proc.stderr and "--output_path DIR" in proc.stderr
