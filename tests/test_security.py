"""No model code runs unless asked: every model-loading call says trust_remote_code explicitly.

transformers asks on standard input before running code shipped with a model when
``trust_remote_code`` is not given, and a "y" (or a script that pipes one) runs it. So every
``from_pretrained``, ``SentenceTransformer(...)`` and ``pipeline(...)`` call in ``prbench/`` and in
the plugins passes it, as a keyword or inside a ``**kwargs`` dict built in the same function with
that key. The scan walks the syntax tree, so a comment or a string never counts.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOADERS = frozenset({"from_pretrained", "SentenceTransformer", "pipeline"})
KEY = "trust_remote_code"
SKIP_DIRS = frozenset({".venv", "build", "dist", "__pycache__", "node_modules"})


def _called_name(call: ast.Call, aliases: dict[str, str]) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr if func.attr in LOADERS else None
    if isinstance(func, ast.Name):
        name = aliases.get(func.id, func.id)
        return name if name in LOADERS else None
    return None


def _dict_names_with_key(scope: ast.AST) -> set[str]:
    """Names bound in ``scope`` to a dict that carries ``trust_remote_code``."""
    names: set[str] = set()
    for node in ast.walk(scope):
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        for target in targets:
            if isinstance(target, ast.Name) and _dict_has_key(value):
                names.add(target.id)
            # kwargs["trust_remote_code"] = ...
            if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                    and isinstance(target.slice, ast.Constant) and target.slice.value == KEY):
                names.add(target.value.id)
    return names


def _dict_has_key(value: ast.expr | None) -> bool:
    if isinstance(value, ast.Dict):
        return any(isinstance(k, ast.Constant) and k.value == KEY for k in value.keys)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
        return any(k.arg == KEY for k in value.keywords)
    return False


def unguarded_calls(source: str, where: str) -> list[str]:
    """``where:line name(...)`` for every loader call that does not pass trust_remote_code."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name in LOADERS and alias.asname:
                    aliases[alias.asname] = alias.name
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _called_name(node, aliases)
        if name is None or any(k.arg == KEY for k in node.keywords):
            continue
        spread = [k.value.id for k in node.keywords
                  if k.arg is None and isinstance(k.value, ast.Name)]
        scope: ast.AST = node
        while scope in parents and not isinstance(
            scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module
        ):
            scope = parents[scope]
        if spread and set(spread) & _dict_names_with_key(scope):
            continue
        found.append(f"{where}:{node.lineno} {name}(...)")
    return found


def _sources() -> list[Path]:
    files = list((ROOT / "prbench").rglob("*.py"))
    for plugin in sorted((ROOT / "plugins").glob("*/")):
        files += plugin.rglob("*.py")
    return sorted(p for p in files if not SKIP_DIRS & set(p.relative_to(ROOT).parts))


def test_every_model_loading_call_passes_trust_remote_code() -> None:
    files = _sources()
    assert len(files) > 50 and any("plugins" in p.parts for p in files)
    problems = [
        problem
        for path in files
        for problem in unguarded_calls(path.read_text(encoding="utf-8"),
                                       str(path.relative_to(ROOT)))
    ]
    assert not problems, (
        "pass trust_remote_code explicitly (False unless the user opted in):\n"
        + "\n".join(problems)
    )


def test_the_scan_finds_calls_that_do_not_pass_it() -> None:
    source = '''
from sentence_transformers import SentenceTransformer as ST
from transformers import AutoModel, AutoTokenizer, pipeline

def good(path, trust):
    kwargs = {"revision": "main", "trust_remote_code": trust}
    extra: dict = {}
    extra["trust_remote_code"] = trust
    AutoModel.from_pretrained(path, trust_remote_code=trust)
    AutoModel.from_pretrained(path, **kwargs)
    AutoTokenizer.from_pretrained(path, **extra)
    pipeline("text-classification", model=path, trust_remote_code=False)

def bad(path):
    kwargs = {"revision": "main"}
    AutoModel.from_pretrained(path)
    AutoTokenizer.from_pretrained(path, **kwargs)
    ST(path)
    pipeline("text-classification", model=path)
    # AutoModel.from_pretrained(path, trust_remote_code=False) in a comment does not count
    return "AutoModel.from_pretrained(path, trust_remote_code=False)"
'''
    assert unguarded_calls(source, "x.py") == [
        "x.py:16 from_pretrained(...)", "x.py:17 from_pretrained(...)",
        "x.py:18 SentenceTransformer(...)", "x.py:19 pipeline(...)",
    ]


# -- prbench rl on a policy that needs its own code ------------------------------------------------


@pytest.fixture(scope="module")
def remote_code_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny causal LM whose config names a model type only its own (booby-trapped) code knows."""
    pytest.importorskip("transformers")
    from prbench.testing import build_tiny_causal_lm

    folder = build_tiny_causal_lm(tmp_path_factory.mktemp("policy") / "needs-code")
    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = "prbench_untrusted"
    config["auto_map"] = {"AutoConfig": "configuration_untrusted.UntrustedConfig",
                          "AutoModelForCausalLM": "modeling_untrusted.UntrustedForCausalLM"}
    (folder / "config.json").write_text(json.dumps(config))
    marker = folder.parent / "CODE_RAN"
    trap = f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
    (folder / "configuration_untrusted.py").write_text(trap)
    (folder / "modeling_untrusted.py").write_text(trap)
    return folder


def test_rl_refuses_a_policy_that_needs_remote_code_in_one_line(
    remote_code_policy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("trl")
    from prbench.cli import main

    out = tmp_path / "run"
    code = main(["rl", "--policy_args", f"model={remote_code_policy}", "--model_args",
                 "scorer=length", "--judge_args", "judge=none", "--limit", "2", "--max_steps", "1",
                 "-o", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1 and err[0].startswith(f"error: policy {remote_code_policy}: ")
    assert "needs code shipped with it" in err[0] and "--trust_remote_code" in err[0]
    assert not (remote_code_policy.parent / "CODE_RAN").exists()
    assert not out.exists()  # refused before anything was written


def test_check_policy_passes_the_option_through(remote_code_policy: Path, tmp_path: Path) -> None:
    from prbench.downstream.rl_config import RLConfig
    from prbench.downstream.rl_policy import check_policy
    from prbench.options import OptionsError
    from prbench.testing import build_tiny_causal_lm

    plain = build_tiny_causal_lm(tmp_path / "plain")
    check_policy(RLConfig(policy=str(plain), output_dir="o", scorer="length"))
    with pytest.raises(OptionsError, match="needs code shipped with it"):
        check_policy(RLConfig(policy=str(remote_code_policy), output_dir="o", scorer="length"))
    with pytest.raises(OptionsError, match=r"policy .*missing: cannot load it"):
        check_policy(RLConfig(policy=str(tmp_path / "missing"), output_dir="o", scorer="length"))
    assert not (remote_code_policy.parent / "CODE_RAN").exists()
