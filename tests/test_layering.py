"""The floors of ARCHITECTURE.md, kept: no import from a higher floor, no cycle between files.

The floor table lives in ARCHITECTURE.md and only there: this test parses it. The checker reads
every import of ``prbench/`` and of the plugin packages under ``plugins/`` with :mod:`ast`
(imports inside functions, under ``TYPE_CHECKING`` and ``importlib.import_module("...")`` with a
constant name included). Which prbench modules plugins may import is the narrower rule of
``tests/test_plugin_api.py``; this test checks floors and cycles only.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Folders (globs, relative to the root) whose packages the checker reads: a package is a folder
#: holding ``__init__.py``; its module names start with the folder's own name.
PACKAGE_GLOBS = ("prbench", "plugins/*/*")
_ROW = re.compile(r"^\|(?P<cells>.*)\|\s*$")
_PATH = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Layout:
    """The floor table and the deliberate exceptions, as read from ARCHITECTURE.md."""

    floors: dict[str, int]
    cycles: list[frozenset[str]] = field(default_factory=list)
    imports: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Edge:
    """One import: ``source`` (a file, relative to the root) imports ``target`` at ``line``."""

    source: str
    target: str
    line: int


def parse_architecture(text: str) -> Layout:
    """Read the floor rows (``| 3 | `path` | owns |``) and exception rows of ARCHITECTURE.md.

    Exception rows are ``| cycle | `a.py`, `b.py` | why |`` (exactly that set of files may form
    one cycle) and ``| import | `low.py`, `high.py` | why |`` (``low.py`` may import ``high.py``).
    """
    layout = Layout(floors={})
    for line in text.splitlines():
        match = _ROW.match(line.strip())
        if not match:
            continue
        cells = [c.strip() for c in match["cells"].split("|")]
        paths = _PATH.findall(cells[1]) if len(cells) > 1 else []
        if cells[0].isdigit():
            assert len(paths) == 1, f"a floor row names one path: {line}"
            assert paths[0] not in layout.floors, f"{paths[0]} has two floor rows"
            layout.floors[paths[0]] = int(cells[0])
        elif cells[0] == "cycle":
            layout.cycles.append(frozenset(paths))
        elif cells[0] == "import":
            assert len(paths) == 2, f"an import exception names two files: {line}"
            layout.imports.append((paths[0], paths[1]))
    return layout


def module_files(root: Path) -> dict[str, str]:
    """Every module of the checked packages: dotted name -> file path relative to ``root``."""
    modules: dict[str, str] = {}
    for pattern in PACKAGE_GLOBS:
        for package in sorted(root.glob(pattern)):
            if not (package / "__init__.py").is_file():
                continue
            for path in sorted(package.rglob("*.py")):
                parts = [package.name, *path.relative_to(package).with_suffix("").parts]
                if parts[-1] == "__init__":
                    parts.pop()
                modules[".".join(parts)] = path.relative_to(root).as_posix()
    return modules


def _imported_names(node: ast.AST, package: str) -> Iterator[str]:
    """Dotted names one AST node imports (``from a import b`` yields ``a.b`` then ``a``)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            parts = parts[:len(parts) - node.level + 1]
            base = ".".join([*parts, base] if base else parts)
        for alias in node.names:
            yield f"{base}.{alias.name}"
        yield base
    elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
          and isinstance(node.args[0].value, str)
          and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"):
        yield node.args[0].value


def import_edges(root: Path, modules: dict[str, str]) -> list[Edge]:
    """Every import from one checked file to another, wherever in the file it is written."""
    edges = []
    for name, rel in modules.items():
        package = name if rel.endswith("__init__.py") else name.rpartition(".")[0]
        tree = ast.parse((root / rel).read_text(encoding="utf-8"), filename=rel)
        for node in ast.walk(tree):
            seen: set[str] = set()
            for dotted in _imported_names(node, package):
                target = dotted
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if not target or target == name or modules[target] in seen:
                    continue
                if isinstance(node, ast.ImportFrom) and dotted == (node.module or "") and seen:
                    continue  # `from a import b` already resolved to the submodule a.b
                seen.add(modules[target])
                edges.append(Edge(rel, modules[target], node.lineno))
    return edges


def floor_of(rel: str, floors: dict[str, int]) -> int | None:
    """The floor of the longest row matching ``rel`` (a file row, or a folder row ending in /)."""
    best: tuple[int, int] | None = None
    for row, floor in floors.items():
        hit = (fnmatch.fnmatchcase(rel, row + "*") if row.endswith("/")
               else fnmatch.fnmatchcase(rel, row))
        if hit and (best is None or len(row) > best[0]):
            best = (len(row), floor)
    return None if best is None else best[1]


def _cycles(files: list[str], edges: list[Edge]) -> list[list[str]]:
    """The import cycles: strongly connected sets of more than one file (Tarjan, iterative)."""
    graph: dict[str, list[str]] = {f: [] for f in files}
    for edge in edges:
        graph[edge.source].append(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in files:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def layering_problems(root: Path, layout: Layout) -> list[str]:
    """Every file without a floor, import from a higher floor, cycle, and stale exception."""
    modules = module_files(root)
    files = sorted(modules.values())
    edges = import_edges(root, modules)
    problems = []
    floors = {f: floor_of(f, layout.floors) for f in files}
    problems += [f"no floor: {f} matches no row of ARCHITECTURE.md" for f in files
                 if floors[f] is None]
    allowed_up = set(layout.imports)
    used_up = set()
    for edge in edges:
        low, high = floors[edge.source], floors[edge.target]
        if low is None or high is None or high <= low:
            continue
        if (edge.source, edge.target) in allowed_up:
            used_up.add((edge.source, edge.target))
            continue
        problems.append(f"import from a higher floor: {edge.source}:{edge.line} (floor {low}) "
                        f"imports {edge.target} (floor {high})")
    used_cycles = set()
    for cycle in _cycles(files, edges):
        if frozenset(cycle) in layout.cycles:
            used_cycles.add(frozenset(cycle))
            continue
        members = set(cycle)
        arrows = [f"{e.source}:{e.line} -> {e.target}"
                  for e in sorted(edges, key=lambda e: (e.source, e.line, e.target))
                  if e.source in members and e.target in members]
        problems.append(f"import cycle between {len(cycle)} files:\n    " + "\n    ".join(arrows))
    problems += [f"stale exception: {a} no longer imports {b}; remove its row"
                 for a, b in sorted(allowed_up - used_up)]
    problems += [f"stale exception: {', '.join(sorted(c))} no longer form a cycle; remove its row"
                 for c in layout.cycles if c not in used_cycles]
    return problems


def test_prbench_and_the_plugins_keep_the_floors_of_architecture_md() -> None:
    layout = parse_architecture((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    assert len(layout.floors) > 20
    modules = module_files(ROOT)
    assert "prbench.cli" in modules and "prbench_plugin_skywork" in modules  # not an empty glob
    problems = layering_problems(ROOT, layout)
    assert problems == [], "ARCHITECTURE.md is not kept:\n" + "\n".join(problems)


# --- the checker on a tiny planted package: it must see what it is meant to see -----------------

_FAKE_ARCHITECTURE = """\
| floor | path | owns |
|---|---|---|
| 0 | `prbench/__init__.py` | the root |
| 0 | `prbench/low.py` | the ground |
| 1 | `prbench/mid/` | the middle |
| 2 | `prbench/high.py` | the top |
| 3 | `plugins/*/` | plugins |
"""


def _plant(root: Path, files: dict[str, str], architecture: str = _FAKE_ARCHITECTURE) -> Layout:
    for rel, source in {"prbench/__init__.py": "", "prbench/mid/__init__.py": "",
                        "plugins/prbench-plugin-x/prbench_plugin_x/__init__.py": "",
                        "prbench/low.py": "", "prbench/high.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(source, encoding="utf-8")
    return parse_architecture(architecture)


def test_a_clean_planted_package_passes(tmp_path: Path) -> None:
    layout = _plant(tmp_path, {
        "prbench/mid/a.py": "from prbench import low\nfrom . import b\n",
        "prbench/mid/b.py": "import prbench.low\n",
        "prbench/high.py": "from prbench.mid.a import thing\n",
        "plugins/prbench-plugin-x/prbench_plugin_x/__init__.py": "from prbench import high\n",
    })
    assert layering_problems(tmp_path, layout) == []


@pytest.mark.parametrize("source", [
    "from prbench.high import thing\n",
    "import prbench.high\n",
    "def f():\n    from prbench import high\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from prbench.high import T\n",
    "import importlib\nimportlib.import_module('prbench.high')\n",
    "from .. import high\n",
])
def test_a_planted_back_import_fails(tmp_path: Path, source: str) -> None:
    layout = _plant(tmp_path, {"prbench/mid/a.py": source})
    problems = layering_problems(tmp_path, layout)
    assert len(problems) == 1
    assert problems[0].startswith("import from a higher floor: prbench/mid/a.py:")
    assert problems[0].endswith("(floor 1) imports prbench/high.py (floor 2)")


def test_a_planted_cycle_fails_and_names_its_arrows(tmp_path: Path) -> None:
    layout = _plant(tmp_path, {
        "prbench/mid/a.py": "from prbench.mid.b import x\n",
        "prbench/mid/b.py": "def f():\n    from prbench.mid import c\n",
        "prbench/mid/c.py": "\n\nimport prbench.mid.a\n",
    })
    problems = layering_problems(tmp_path, layout)
    assert problems == ["import cycle between 3 files:\n"
                        "    prbench/mid/a.py:1 -> prbench/mid/b.py\n"
                        "    prbench/mid/b.py:2 -> prbench/mid/c.py\n"
                        "    prbench/mid/c.py:3 -> prbench/mid/a.py"]


def test_listed_exceptions_pass_and_stale_ones_fail(tmp_path: Path) -> None:
    files = {"prbench/mid/a.py": "from prbench.mid import b\n",
             "prbench/mid/b.py": "from prbench.mid import a\n",
             "prbench/low.py": "from prbench import high\n"}
    exceptions = ("| cycle | `prbench/mid/a.py`, `prbench/mid/b.py` | planted |\n"
                  "| import | `prbench/low.py`, `prbench/high.py` | planted |\n")
    layout = _plant(tmp_path, files, _FAKE_ARCHITECTURE + exceptions)
    assert layering_problems(tmp_path, layout) == []
    (tmp_path / "prbench/low.py").write_text("", encoding="utf-8")
    (tmp_path / "prbench/mid/b.py").write_text("", encoding="utf-8")
    assert layering_problems(tmp_path, layout) == [
        "stale exception: prbench/low.py no longer imports prbench/high.py; remove its row",
        "stale exception: prbench/mid/a.py, prbench/mid/b.py no longer form a cycle; "
        "remove its row"]


def test_a_file_without_a_row_fails(tmp_path: Path) -> None:
    layout = _plant(tmp_path, {"prbench/stray.py": ""})
    assert layering_problems(tmp_path, layout) == [
        "no floor: prbench/stray.py matches no row of ARCHITECTURE.md"]


def test_a_file_row_outranks_its_folder_row(tmp_path: Path) -> None:
    architecture = _FAKE_ARCHITECTURE + "| 2 | `prbench/mid/top.py` | a top module in mid |\n"
    layout = _plant(tmp_path, {"prbench/mid/top.py": "from prbench import high\n"},
                    architecture)
    assert floor_of("prbench/mid/top.py", layout.floors) == 2
    assert floor_of("prbench/mid/a.py", layout.floors) == 1
    assert layering_problems(tmp_path, layout) == []
