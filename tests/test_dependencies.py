"""Declared dependencies are the imported ones: pyproject.toml against the code's imports.

Every third-party module ``prbench/`` imports (imports inside functions and under
``TYPE_CHECKING`` included) belongs to a distribution declared in pyproject.toml, in the core
dependencies or in an extra; one that only an extra declares is imported lazily (inside a function
or a ``try``), so ``import prbench`` works without that extra; ``prbench/testing.py`` (the test
set-up that plugins' tests share) may import the test extras' distributions. The other way round,
every declared distribution is imported somewhere: by ``prbench/`` for the core and the feature
extras, by ``tests/`` for the test-only extras, or it is one of the few listed in
:data:`NOT_IMPORTED`, each with the reason it is declared though nothing imports it.

Import names are mapped to distributions by ``importlib.metadata.packages_distributions`` over the
environment of ``make setup`` (every extra installed).
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: extras whose distributions serve the tests (imported under ``tests/``), not prbench itself
TEST_EXTRAS = ("dev", "test-models", "peers")

#: declared distributions nothing in ``prbench/`` or ``tests/`` imports, and why each is declared
NOT_IMPORTED = {
    "ruff": "a command (make lint, .ci/run), never imported",
    "hatchling": "the build backend; `make dist` builds wheels with the venv's copy",
    "gguf": "transformers imports it to load GGUF weights (`gguf_file=`)",
    "omegaconf": "verl's config objects, read by verl itself in the reward-server tests",
    "aiohttp": "OpenRLHF's agent executor imports it in the reward-server tests",
    "pylatexenc": "verl's reward utilities import it in the reward-server tests",
}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(spec: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
    assert match, f"pyproject.toml: cannot read the requirement {spec!r}"
    return _normalise(match.group(1))


def declared() -> tuple[set[str], dict[str, set[str]]]:
    """The core distributions and each extra's (``all``, which names extras, left out)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {_requirement_name(s) for s in project["dependencies"]}
    extras = {
        extra: {_requirement_name(s) for s in specs}
        for extra, specs in project["optional-dependencies"].items()
        if not all(s.startswith("prbench[") for s in specs)
    }
    return core, extras


def _lazy_nodes(tree: ast.AST) -> set[int]:
    """ids of import nodes inside a function, a ``try`` or an ``if`` (not run at import)."""
    lazy: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Try | ast.If):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom) and inner is not node:
                    lazy.add(id(inner))
    return lazy


def imports(folder: Path) -> Iterator[tuple[str, Path, int, bool]]:
    """``(top-level module, file, line, lazy)`` of every absolute import under ``folder``."""
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        lazy = _lazy_nodes(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                yield name.partition(".")[0], path, node.lineno, id(node) in lazy


def third_party(folder: Path) -> dict[str, list[tuple[Path, int, bool]]]:
    """Each third-party distribution imported under ``folder``, with where."""
    ours = {"prbench", "tests", "_hf_fixtures", "_backend_fixtures", "conftest"}
    ours |= {p.stem for p in (ROOT / "tests").glob("_*.py")}
    ours |= {p.stem for p in (ROOT / "benchmarks").glob("*.py")}  # tests of the benchmark scripts
    dists = importlib.metadata.packages_distributions()
    out: dict[str, list[tuple[Path, int, bool]]] = {}
    unknown = []
    for module, path, line, lazy in imports(folder):
        if module in sys.stdlib_module_names or module in ours or module == "__future__":
            continue
        if module.startswith("prbench_plugin_"):  # the plugins, installed from plugins/
            continue
        names = dists.get(module)
        if not names:
            unknown.append(f"{path.relative_to(ROOT)}:{line}: {module}")
            continue
        for name in names:
            out.setdefault(_normalise(name), []).append((path, line, lazy))
    assert not unknown, (
        "imports of modules no installed distribution provides (run `make setup`, or declare "
        "and install the package):\n" + "\n".join(unknown)
    )
    return out


@pytest.fixture(scope="module")
def prbench_imports() -> dict[str, list[tuple[Path, int, bool]]]:
    return third_party(ROOT / "prbench")


def test_every_import_of_prbench_is_declared(
    prbench_imports: dict[str, list[tuple[Path, int, bool]]]
) -> None:
    core, extras = declared()
    optional = set().union(*(names for extra, names in extras.items() if extra not in TEST_EXTRAS))
    for_tests = set().union(*(extras.get(extra, set()) for extra in TEST_EXTRAS))
    testing = ROOT / "prbench" / "testing.py"
    problems = []
    for dist, where in sorted(prbench_imports.items()):
        first = f"{where[0][0].relative_to(ROOT)}:{where[0][1]}"
        if dist in for_tests and dist not in core | optional and all(
                p == testing for p, _, _ in where):
            continue  # the shared test set-up: the test extras serve it
        if dist not in core and dist not in optional:
            problems.append(f"{first}: imports {dist}, which pyproject.toml does not declare "
                            "(add it to dependencies, or to the extra that needs it)")
        elif dist not in core:
            eager = [(p, n) for p, n, lazy in where if not lazy]
            if eager:
                p, n = eager[0]
                problems.append(f"{p.relative_to(ROOT)}:{n}: imports {dist} (an extra) at module "
                                "level; import it inside the function that needs it")
    assert not problems, "\n".join(problems)


def test_every_declared_dependency_is_imported(
    prbench_imports: dict[str, list[tuple[Path, int, bool]]]
) -> None:
    core, extras = declared()
    test_imports = third_party(ROOT / "tests")
    problems = []
    for group, names in [("dependencies", core), *extras.items()]:
        used = test_imports if group in TEST_EXTRAS else prbench_imports
        for dist in sorted(names):
            if dist in NOT_IMPORTED:
                assert dist not in used, (
                    f"{dist} is imported now: take it off NOT_IMPORTED in {Path(__file__).name}"
                )
            elif dist not in used:
                where = "tests/" if group in TEST_EXTRAS else "prbench/"
                problems.append(f"pyproject.toml [{group}]: {dist} is declared but nothing under "
                                f"{where} imports it (drop it, or say why in NOT_IMPORTED)")
    all_declared = core.union(*extras.values())
    stale = sorted(set(NOT_IMPORTED) - all_declared)
    assert not stale, f"NOT_IMPORTED names distributions pyproject.toml no longer declares: {stale}"
    assert not problems, "\n".join(problems)


def test_the_import_walk_sees_lazy_and_eager_imports(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "import json\nimport numpy as np\nfrom yaml import safe_load\n"
        "def f():\n    import scipy.stats\n"
        "try:\n    import torch\nexcept ImportError:\n    torch = None\n"
        "from . import sibling\n"
    )
    found = {(module, lazy) for module, _, _, lazy in imports(tmp_path)}
    assert found == {("json", False), ("numpy", False), ("yaml", False), ("scipy", True),
                     ("torch", True)}
