"""CONTRIBUTING's plugin, copied as a reader would, builds into a wheel that prbench finds and runs.

The files are the fenced blocks of CONTRIBUTING.md and then docs/plugin-api.md (which continues the
plugin with its task folder) whose first line is a ``# <path>`` comment
(``# pyproject.toml``, ``# prbench_plugin_mymodel/plugin.py``, ...; a ``# <path>, continued`` block
is appended to the file). They are built with pip, offline, without build isolation (hatchling
comes from the dev extra), and installed with ``--target`` into a temporary folder: nothing is
installed into the environment running the tests.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: where the plugin's task folder (a ``# <path>, continued`` block) is shown
PLUGIN_API = "docs/plugin-api.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
HEADER = re.compile(r"# ((?:pyproject\.toml|prbench_plugin_mymodel/[\w/.]+))(, continued.*)?$")


def snippet_files(markdown: str) -> dict[str, str]:
    """The files CONTRIBUTING shows, by relative path (continued blocks appended)."""
    files: dict[str, str] = {}
    for _lang, body in BLOCK.findall(markdown):
        first, _, rest = body.partition("\n")
        match = HEADER.fullmatch(first.strip())
        if not match:
            continue
        path, continued = match.groups()
        if continued:
            assert path in files, f"{path} is continued before it is shown"
            files[path] += "\n\n" + rest
        else:
            assert path not in files, f"{path} is shown twice"
            files[path] = body
    return files


def _pip(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def _env(site: Path, tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p)
    env["PRBENCH_LOAD_PLUGINS"] = "mymodel"
    env["PRBENCH_CACHE_DIR"] = str(tmp_path / "cache")
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The snippet plugin, built into a wheel and installed into a folder of its own."""
    tmp = tmp_path_factory.mktemp("snippet")
    files = snippet_files("\n".join(
        (ROOT / name).read_text(encoding="utf-8") for name in ("CONTRIBUTING.md", PLUGIN_API)))
    assert set(files) == {
        "pyproject.toml", "prbench_plugin_mymodel/plugin.py", "prbench_plugin_mymodel/scorer.py",
        "prbench_plugin_mymodel/tasks/mymodel_sample.yaml",
    }
    src = tmp / "src"
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text, encoding="utf-8")
    (src / "prbench_plugin_mymodel" / "__init__.py").write_text("")  # "add an empty __init__.py"
    _pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(tmp / "dist"),
         str(src))
    (wheel,) = (tmp / "dist").glob("prbench_plugin_mymodel-0.1.0-*.whl")
    site = tmp / "site"
    _pip("install", "--no-deps", "--no-index", "--target", str(site), str(wheel))
    return site


def test_snippet_headers_are_found() -> None:
    text = "```toml\n# pyproject.toml\n[project]\n```\n```python\nx = 1\n```\n" \
           "```python\n# prbench_plugin_mymodel/a.py\na = 1\n```\n" \
           "```python\n# prbench_plugin_mymodel/a.py, continued: more\nb = 2\n```\n"
    assert snippet_files(text) == {"pyproject.toml": "# pyproject.toml\n[project]\n",
                                   "prbench_plugin_mymodel/a.py":
                                   "# prbench_plugin_mymodel/a.py\na = 1\n\n\nb = 2\n"}


def test_snippet_plugin_is_found_through_its_entry_point_and_scores(
    installed: Path, tmp_path: Path
) -> None:
    probe = """
import json
from prbench.api import ProfileView, ScoreRequest
from prbench.testing import PluginRegistry

registry = PluginRegistry()
info = registry.plugins["mymodel"]
scorer = registry.build("scorer", "mymodel", {"min_length": "5"})
requests = [
    ScoreRequest("r1", "Which lens?", "Night photography with a prime lens",
                 ProfileView("I love night photography")),
    ScoreRequest("r2", "Which lens?", "", ProfileView("I love night photography")),
]
print(json.dumps({"origin": info.origin, "dist": info.dist, "version": info.version,
                  "status": info.status, "task_dirs": info.task_dirs,
                  "scores": scorer.score(requests), "fingerprint": scorer.fingerprint()}))
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=_env(installed, tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert (got["origin"], got["dist"], got["version"], got["status"]) == (
        "entry-point", "prbench-plugin-mymodel", "0.1.0", "ok")
    # answer words of >= 5 letters: night, photography, prime; the profile has two of them
    assert got["scores"] == [2 / 3, 0.0]
    assert len(got["fingerprint"]) == 64
    (task_dir,) = got["task_dirs"]
    assert Path(task_dir) == installed / "prbench_plugin_mymodel" / "tasks"
    assert (Path(task_dir) / "mymodel_sample.yaml").is_file()  # the YAML is in the wheel


@pytest.mark.slow
def test_snippet_plugin_task_runs_through_prbench_eval(installed: Path, tmp_path: Path) -> None:
    run = "import sys; from prbench.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", run, "eval", "--tasks", "mymodel_sample", "--model_args",
         "scorer=mymodel", "--limit", "2", "--output_path", str(tmp_path / "out"),
         "--no-progress"],
        capture_output=True, text=True, env=_env(installed, tmp_path), cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (path,) = (tmp_path / "out").rglob("results_*.json")
    results = json.loads(path.read_text())
    assert results["n-samples"]["mymodel_sample"]["effective"] == 2
    assert 0.0 <= results["results"]["mymodel_sample"]["acc,none"] <= 1.0
