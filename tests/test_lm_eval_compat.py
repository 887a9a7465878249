"""The one seam with lm-eval: public API under ``prbench eval``, every other touch pinned here."""

from __future__ import annotations

import ast
import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from _harness_fixtures import run_eval, write_plugin

from prbench.harness import lm_eval_compat

REPO = Path(__file__).resolve().parents[1]
GROUP = "personalized_rewardbench_sample_noprofile"
#: third-party packages whose module attributes prbench must not reassign outside the seam
THIRD_PARTY = ("lm_eval", "tqdm", "transformers", "datasets", "torch", "accelerate", "httpx",
               "httpcore", "ray", "sentence_transformers", "huggingface_hub")


def _third_party_assignments(path: Path) -> list[str]:
    """``module.attr = ...`` / ``setattr(module, ...)`` on imported third-party modules."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in THIRD_PARTY:
                    aliases.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in THIRD_PARTY:
            aliases.update(a.asname or a.name for a in node.names)

    def root(expr: ast.expr) -> str | None:
        while isinstance(expr, ast.Attribute):
            expr = expr.value
        return expr.id if isinstance(expr, ast.Name) else None

    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for t in targets:
            if isinstance(t, ast.Attribute) and root(t) in aliases:
                found.append(f"{path.name}:{node.lineno}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "setattr" and node.args and root(node.args[0]) in aliases):
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_third_party_attributes_are_replaced_in_one_module_only() -> None:
    sites = {str(p.relative_to(REPO)): _third_party_assignments(p)
             for p in (REPO / "prbench").rglob("*.py")}
    outside = {k: v for k, v in sites.items() if v and not k.endswith("lm_eval_compat.py")}
    assert outside == {}
    inside = sites["prbench/harness/lm_eval_compat.py"]
    assert 1 <= len(inside) <= 4, inside
    assert len(lm_eval_compat.REPLACED) <= 4


def test_the_files_that_import_lm_eval_stay_small() -> None:
    total = 0
    for path in (REPO / "prbench").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if any(line.lstrip().startswith(("import lm_eval", "from lm_eval"))
               for line in text.splitlines()):
            total += len(text.splitlines())
    assert total <= 2800, total


@pytest.mark.parametrize(("module", "name"), lm_eval_compat.PRIVATE_NAMES)
def test_every_private_lm_eval_name_prbench_reads_is_there(module: str, name: str) -> None:
    assert lm_eval_compat.private(module, name) is not None


@pytest.mark.parametrize(("module", "attribute", "why"), lm_eval_compat.REPLACED)
def test_every_attribute_plain_lm_eval_gets_replaced_is_there(module: str, attribute: str,
                                                              why: str) -> None:
    obj: Any = importlib.import_module(module)
    for part in attribute.split("."):
        assert hasattr(obj, part), f"lm-eval moved {module}.{attribute} ({why})"
        obj = getattr(obj, part)
    assert why in (REPO / "docs" / "plugin-api.md").read_text(encoding="utf-8")


def test_a_moved_private_name_is_a_clear_error() -> None:
    with pytest.raises(lm_eval_compat.LmEvalMovedError, match=r"lm-eval moved lm_eval\.nowhere\.X"):
        lm_eval_compat.private("lm_eval.nowhere", "X")


def test_the_lm_eval_run_flags_prbench_knows_are_lm_evals() -> None:
    """An abbreviation on a plain ``lm_eval`` line is read as lm-eval reads it."""
    from lm_eval._cli.harness import HarnessCLI

    from prbench.harness.eval_options import LM_EVAL_RUN_FLAGS

    run = HarnessCLI()._parser._subparsers._group_actions[0].choices["run"]
    theirs = {o for o in run._option_string_actions if o.startswith("--") and o != "--help"}
    assert set(LM_EVAL_RUN_FLAGS) == theirs


def _snapshot() -> dict[str, Any]:
    """Every attribute of every loaded lm-eval and tqdm module, and of their key classes."""
    import lm_eval.loggers
    import lm_eval.tasks
    import tqdm.std

    out: dict[str, Any] = {}
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in ("lm_eval", "tqdm") and module is not None:
            for key, value in list(vars(module).items()):
                out[f"{name}.{key}"] = value
    for cls in (lm_eval.tasks.TaskManager, lm_eval.loggers.EvaluationTracker, tqdm.std.tqdm):
        for key, value in vars(cls).items():
            out[f"{cls.__qualname__}.{key}"] = value
    return out


def test_prbench_eval_changes_nothing_of_lm_eval_or_tqdm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from prbench.harness.lm import PRBenchLM

    run_eval(["eval", "--tasks", GROUP, "--model_args", "scorer=length", "--limit", "1"],
             capsys)  # everything a run imports is loaded
    before = _snapshot()
    during: list[dict[str, Any]] = []
    original = PRBenchLM.loglikelihood

    def watched(self: Any, requests: Any, disable_tqdm: bool = False) -> Any:
        during.append(_snapshot())
        return original(self, requests, disable_tqdm)

    monkeypatch.setattr(PRBenchLM, "loglikelihood", watched)
    code, _, err = run_eval(["eval", "--tasks", GROUP, "--model_args", "scorer=length",
                             "--limit", "2", "--write_out", "-o", str(tmp_path / "o"),
                             "--log_samples"], capsys)
    assert code == 0, err
    after = _snapshot()
    for snap in (*during, after):
        changed = [k for k, v in before.items() if k in snap and snap[k] is not v]
        assert changed == [], changed[:10]
    assert during


def test_two_runs_in_one_process_share_no_pairs(tmp_path: Path) -> None:
    """The Python API: a judge's run and a reward model's in one process; each file holds only
    its own scorer's results (per-pair extras ride on the results, never in module state)."""
    from prbench.harness import evaluate, tasks
    from prbench.plugins import get_registry
    from prbench.profiles import lazy
    from prbench.scoring.spec import resolve_scorer

    get_registry([str(write_plugin(tmp_path))])
    outs = []
    lazy.STORE.reset()
    for i, given in enumerate(({"scorer": "fixed-judge", "p": "0.9"}, {"scorer": "counting"})):
        run = evaluate.Evaluation(
            spec=resolve_scorer(given), model_args=given,
            tasks=("personalized_rewardbench_sample_art_and_entertainment",),
            task_dirs=tuple(tasks.task_dirs()), limit=3, output_path=str(tmp_path / f"r{i}"),
            log_samples=True)
        outcome = evaluate.evaluate(run)
        outcome.lm.close()
        outs.append(outcome)
        assert lazy.STORE.statuses() == {}  # the run's profiles lived in a store of its own
    judge, counting = (o.results for o in outs)
    assert judge is not None and counting is not None
    assert judge["config"]["prbench"]["scorer"]["id"] == "fixed-judge"
    assert counting["config"]["prbench"]["scorer"]["id"] == "counting"
    lines = [json.loads(line) for path in sorted((tmp_path / "r1").rglob("samples_*.jsonl"))
             for line in path.read_text(encoding="utf-8").splitlines()]
    assert lines and all(float(line["filtered_resps"][0][0]) == len(line["doc"]["chosen"])
                         for line in lines)  # counting's scores, never the judge's 0.9


def test_process_results_reads_the_judges_orders_from_the_results_only() -> None:
    from prbench.harness.scored import Scored, annotate_sample
    from prbench.harness.tasks import process_results

    doc = {"id": "r1", "chosen": "a b c", "rejected": "a", "domain": "Art_and_Entertainment"}
    outcome = {"orders": [["first", "first"], ["second", "second"]]}
    judged = process_results(doc, [Scored(0.9, {"orders": outcome}), Scored(0.1)])
    plain = process_results(doc, [(0.9, False), (0.1, False)])
    # the judge flipped with the order: strict acc 0, whatever the probability says
    assert judged["acc"] == 0.0 and judged["n_order_flips"] == 1 and "judge_counts" in judged
    assert plain["acc"] == 1.0 and set(plain) == {"acc", "acc_macro", "tie", "margin", "invalid"}
    line = annotate_sample({"filtered_resps": [Scored(float("nan"), {"invalid": "too long"}),
                                               Scored(0.2)]})
    assert line["invalid_reason"] == {"chosen": "too long"}
    import pickle

    back = pickle.loads(pickle.dumps(Scored(0.5, {"invalid": "x"})))
    assert back == (0.5, False) and back.extras == {"invalid": "x"}


@pytest.mark.parametrize(("argv0", "patched"), [("/venv/bin/prbench", False),
                                                ("/venv/prbench/cli.py", False),
                                                ("notebook", True)])
def test_the_hook_leaves_lm_eval_alone_in_prbenchs_own_commands(argv0: str, patched: bool
                                                                ) -> None:
    """A process of the prbench command imports lm-eval with nothing replaced; a program using
    lm-eval's Python API with the hook installed gets prbench's task folders indexed."""
    import subprocess

    from _harness_fixtures import PYTHON, subprocess_env

    script = (f"import sys; sys.argv[0] = {argv0!r}\n"
              "from lm_eval.tasks.manager import TaskManager\n"
              "print(getattr(TaskManager.__init__, '_prbench_compat', False))\n")
    proc = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, timeout=120,
                          env=subprocess_env(), check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == str(patched)


@pytest.mark.slow
@pytest.mark.parametrize("scorer", ["length", "embedding-similarity", "llm-judge"])
def test_prbench_eval_and_plain_lm_eval_give_identical_metrics(
    scorer: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same run through ``prbench eval`` (lm-eval's Python API) and plain ``lm_eval``
    (lm-eval's CLI with the start-up hook): every metric value the same."""
    import contextlib

    from _backend_fixtures import ScriptedOpenAIServer
    from _harness_fixtures import PYTHON, results_and_manifest, run, subprocess_env

    group = "personalized_rewardbench_sample"
    with contextlib.ExitStack() as stack:
        args = f"scorer={scorer},cache=false"
        if scorer == "llm-judge":
            server = stack.enter_context(ScriptedOpenAIServer())
            server.answer = lambda content: "Comparing both. Verdict: [[A]]"
            args += f",backend=openai,model=judge,base_url={server.base_url}"
        common = ["--tasks", group, "--limit", "3", "--model_args", args]
        code, _, err = run_eval(["eval", *common, "-o", str(tmp_path / "api")], capsys)
        assert code == 0, err
        run([PYTHON, "-m", "lm_eval", "--model", "prbench", *common, "--output_path",
             str(tmp_path / "cli")], env=subprocess_env(), cwd=tmp_path)
    api, _, _ = results_and_manifest(tmp_path / "api")
    cli, _, _ = results_and_manifest(tmp_path / "cli")
    assert api["results"] and api["results"] == cli["results"]
    assert api["groups"] == cli["groups"]
