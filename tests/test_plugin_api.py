"""The declared plugin API: plugins import prbench only from prbench.api (tests: also testing)."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "plugins"
#: What plugin code may import from prbench; plugin tests may also import prbench.testing.
CODE_MODULES = frozenset({"prbench.api"})
TEST_MODULES = frozenset({"prbench.api", "prbench.testing"})


def _is_test_file(path: Path) -> bool:
    return "tests" in path.relative_to(PLUGINS).parts


def forbidden_imports(path: Path, source: str) -> list[str]:
    """Every import of a prbench module other than the public ones, as ``file:line: module``."""
    allowed = TEST_MODULES if _is_test_file(path) else CODE_MODULES
    found = []
    for node in ast.walk(ast.parse(source, filename=str(path))):
        modules: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "prbench":  # `from prbench import api` is fine, `hookimpl` is not
                modules = [f"prbench.{alias.name}" for alias in node.names]
            else:
                modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif (isinstance(node, ast.Call) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"):
            modules = [node.args[0].value]
        for module in modules:
            if (module == "prbench" or module.startswith("prbench.")) and module not in allowed:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {module}")
    return found


def test_plugins_import_prbench_only_through_the_public_api() -> None:
    files = sorted(PLUGINS.rglob("*.py"))
    assert len(files) > 30  # every plugin's code and tests, not an empty glob
    problems = [p for f in files for p in forbidden_imports(f, f.read_text(encoding="utf-8"))]
    assert problems == [], "plugins must import prbench only from prbench.api:\n" + "\n".join(
        problems)


@pytest.mark.parametrize(("where", "source", "bad"), [
    ("pkg/plugin.py", "from prbench.scoring.base import ScoreRequest\n", "prbench.scoring.base"),
    ("pkg/plugin.py", "from prbench import hookimpl\n", "prbench.hookimpl"),
    ("pkg/plugin.py", "import prbench.records\n", "prbench.records"),
    ("pkg/plugin.py", "def f():\n    from prbench.devices import torch_device\n",
     "prbench.devices"),
    ("pkg/plugin.py", "import importlib\nimportlib.import_module('prbench.store')\n",
     "prbench.store"),
    ("pkg/plugin.py", "from prbench.testing import ScriptedBackend\n", "prbench.testing"),
    ("tests/test_x.py", "from prbench.plugins import PluginRegistry\n", "prbench.plugins"),
])
def test_the_checker_catches_each_way_of_reaching_internals(where: str, source: str,
                                                            bad: str) -> None:
    path = PLUGINS / "prbench-plugin-x" / where
    assert [p.rsplit(": ", 1)[1] for p in forbidden_imports(path, source)] == [bad]


def test_the_checker_allows_the_public_modules() -> None:
    code = PLUGINS / "prbench-plugin-x" / "pkg" / "plugin.py"
    test = PLUGINS / "prbench-plugin-x" / "tests" / "test_x.py"
    source = "from prbench.api import hookimpl\nimport prbench.api\nfrom prbench import api\n"
    assert forbidden_imports(code, source) == []
    assert forbidden_imports(test, source + "from prbench.testing import run_cli\n") == []


def test_every_api_name_exists_and_is_documented() -> None:
    import prbench.api as api

    assert re.fullmatch(r"\d+\.\d+", api.API_VERSION)
    assert len(set(api.__all__)) == len(api.__all__)
    doc = api.__doc__ or ""
    for name in api.__all__:
        obj = getattr(api, name)  # AttributeError names the missing export
        if name != "API_VERSION":
            assert f"``{name}``" in doc, f"{name} is exported but not listed in the docstring"
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"prbench.api.{name} has no docstring"
    # nothing public beyond __all__ (imports of the module's own machinery excepted)
    public = {n for n in vars(api) if not n.startswith("_")} - {"annotations"}
    assert public == set(api.__all__)


def test_names_removed_in_api_2_are_gone_and_each_has_a_replacement() -> None:
    import prbench.api as api

    doc = (Path(__file__).resolve().parents[1] / "docs" / "plugin-api.md").read_text()
    section = doc.split("### Removed in API 2.0", 1)[1].split("\n## ", 1)[0]
    removed = {name for line in section.splitlines() if line.startswith("| `")
               for name in re.findall(r"`(\w+)`", line.split("|")[1])}
    assert removed == {"DEFAULT_USER_FORMAT", "DEFAULT_SYSTEM_FORMAT", "resolve_dtype",
                       "template_sha256", "text_hash", "user_of", "check_scores",
                       "is_hub_id"}
    for name in removed:
        assert not hasattr(api, name), f"{name} is listed as removed but still exported"
    assert int(api.API_VERSION.split(".")[0]) == 2


def test_record_user_is_the_user_id_field_else_the_id() -> None:
    from prbench.api import Record

    def record(rid: str, **extra: object) -> Record:
        return Record(id=rid, question="q", profile=(), chosen="a", rejected="b", extra=extra)

    assert record("r1", user_id=7).user == "7"
    assert record("r1", user_id="  ").user == "r1"  # blank: no user
    assert record("r2").user == "r2"


def test_testing_module_exports_what_plugin_tests_use() -> None:
    import prbench.testing as testing

    for name in testing.__all__:
        assert getattr(testing, name) is not None
    assert testing.run_cli(["plugins", "--no-such-flag"]) == 2  # argparse exit, returned


def test_importing_the_api_loads_no_heavy_library() -> None:
    code = ("import sys, prbench.api, prbench.testing; "
            "print(sorted(m for m in ('torch', 'transformers', 'numpy', 'scipy', 'lm_eval', "
            "'datasets', 'sentence_transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_name_plugins_import_is_exported() -> None:
    """Imports inside functions (run only by slow tests) name real exports too."""
    import prbench.api as api
    import prbench.testing as testing

    exported = {"prbench.api": set(api.__all__), "prbench.testing": set(testing.__all__)}
    missing = []
    for path in sorted(PLUGINS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in exported:
                missing += [f"{path.relative_to(ROOT)}:{node.lineno}: {node.module}.{a.name}"
                            for a in node.names if a.name not in exported[node.module]]
    assert missing == []
