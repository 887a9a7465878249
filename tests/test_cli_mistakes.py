"""Issue 38's newcomer mistakes that the fault corpus cannot check by its one-line rule alone.

The corpus (``tests/test_fault_corpus.py``, the "issue 38" block) checks that each mistake is one
``error:`` line (or one warning) through the real command. Here: that the right thing then works
(CONTRIBUTING's plugin layout loaded with ``--plugin``, ``prbench eval --profile_args``, the
``ScorerReward`` adapter), and the helpers behind the messages, piece by piece.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests._harness_fixtures import results_and_manifest, run_eval

GROUP = "personalized_rewardbench_sample_noprofile"
PROFILE_TASK = "personalized_rewardbench_sample_art_and_entertainment"


@pytest.fixture(autouse=True)
def _fresh_state() -> Any:
    from prbench.harness import tasks
    from prbench.plugins import reset_registry

    tasks.reset()
    reset_registry()
    yield
    tasks.reset()
    reset_registry()


def _package(root: Path) -> Path:
    """CONTRIBUTING's layout: a package whose hook module names its scorer as a string."""
    pkg = root / "prbench-plugin-mine" / "prbench_plugin_mine"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "plugin.py").write_text(textwrap.dedent('''
        import dataclasses

        from prbench.api import ComponentRegister, hookimpl


        @dataclasses.dataclass(frozen=True)
        class MineOptions:
            bonus: float = 0.0


        @hookimpl
        def register_scorers(register: ComponentRegister) -> None:
            register("mine", "prbench_plugin_mine.scorer:MineScorer", options=MineOptions,
                     description="answer length in words plus a bonus")
    '''), encoding="utf-8")
    (pkg / "scorer.py").write_text(textwrap.dedent('''
        from prbench_plugin_mine.plugin import MineOptions


        class MineScorer:
            def __init__(self, options: MineOptions) -> None:
                self.options = options

            def score(self, requests):
                return [len(r.response.split()) + self.options.bonus for r in requests]
    '''), encoding="utf-8")
    return pkg / "plugin.py"


def test_a_plugin_file_inside_its_package_resolves_its_string_factory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`prbench --plugin pkg/plugin.py eval ... scorer=mine` with the factory given as a string
    (CONTRIBUTING's layout) runs; it was a ModuleNotFoundError after the data loaded."""
    plugin = _package(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the package root is added for the run
    try:
        code, out, err = run_eval(["--plugin", str(plugin), "scorers", "--options", "mine"],
                                  capsys)
        assert code == 0 and "bonus" in out, err
        code, out, err = run_eval(
            ["--plugin", str(plugin), "eval", "--tasks", GROUP, "--limit", "1", "--model_args",
             "scorer=mine,bonus=1", "--output_path", str(tmp_path / "out")], capsys)
        assert code == 0, err[-3000:]
        assert "Traceback" not in err and "error:" not in err
        _, manifest, _ = results_and_manifest(tmp_path / "out")
        assert manifest["scorer"]["qualified_id"] == "mine/mine"  # named after the package
    finally:
        for name in [m for m in sys.modules if m.startswith("prbench_plugin_mine")]:
            del sys.modules[name]


def test_a_plugin_folder_names_the_file_to_give(tmp_path: Path) -> None:
    from prbench.plugins import PluginRegistry

    plugin = _package(tmp_path)
    dist = plugin.parent.parent
    (dist / "pyproject.toml").write_text("[project]\nname = 'prbench-plugin-mine'\n")
    registry = PluginRegistry(plugin_files=[dist], load_entry_points=False)
    trouble = registry.file_trouble()
    assert trouble == (f"--plugin {dist}: is a folder: give the plugin's Python file (here: "
                       f"{plugin}) or install it: pip install -e {dist}")


def test_eval_profile_args_set_the_tasks_profile_condition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`prbench eval --profile_args builder=bm25,k=2` is the --metadata profile keys."""
    code, _, err = run_eval(
        ["eval", "--tasks", PROFILE_TASK, "--limit", "1", "--model_args", "scorer=length",
         "--profile_args", "builder=bm25,k=2", "--output_path", str(tmp_path / "out")], capsys)
    assert code == 0, err[-3000:]
    _, manifest, _ = results_and_manifest(tmp_path / "out")
    task = manifest["tasks"][PROFILE_TASK]
    assert task["profile_builder"] == "bm25" and task["profile_options"]["k"] == 2
    assert "--profile_args builder=bm25,k=2" in " ".join(manifest["command"])


def test_profile_metadata_maps_the_list_and_refuses_a_second_source() -> None:
    from prbench.harness.eval_options import profile_metadata
    from prbench.options import OptionsError

    assert profile_metadata(None, {"a": 1}) == {"a": 1}
    assert profile_metadata("builder=dense,k=3,model=minilm", {"prbench_data": "d"}) == {
        "prbench_data": "d", "prbench_profile": "dense", "prbench_profile_k": 3,
        "prbench_profile_options": {"model": "minilm"}}
    assert profile_metadata("builder=none", {"x": 1}) == {"x": 1, "prbench_profile": "none"}
    with pytest.raises(OptionsError, match="--profile_args and --metadata both set the profile "
                       r"\(prbench_profile_k\)"):
        profile_metadata("builder=dense", {"prbench_profile_k": 4})


def test_close_matches_for_misspelt_flags_and_removed_forms() -> None:
    from prbench.commands import unknown_flags_hint
    from prbench.commands.eval import undeclared_flags_problem

    assert unknown_flags_hint(["--limt", "2"], ["--limit", "--tasks"]) == (
        " (did you mean '--limit'?)")
    assert unknown_flags_hint(["--output-dir", "x"], ["--output_path"]) == (
        " (--output-dir is now -o/--output_path)")
    assert unknown_flags_hint(["--zzz"], ["--limit"]) == ""
    assert undeclared_flags_problem([], ["--limit"]) is None
    problem = undeclared_flags_problem(["--bootstrap_sed=1"], ["--bootstrap_seed"])
    assert problem == (
        "prbench eval: unrecognized arguments: --bootstrap_sed (did you mean '--bootstrap_seed'?) "
        "(see 'prbench eval --help'; plain `lm_eval --model prbench` takes every lm-eval flag)")


def test_lm_eval_flags_prbench_eval_does_not_take_are_refused_with_the_reason() -> None:
    from prbench.commands.eval import undeclared_flags_problem

    assert undeclared_flags_problem(["--num-fewshot", "3", "--gen_kwargs", "x"], []) == (
        "prbench eval does not take --num-fewshot (the pairs are scored zero-shot), --gen_kwargs "
        "(nothing is generated); plain `lm_eval --model prbench` takes every lm-eval flag")
    assert "lm-eval's cache stores pickles" in str(undeclared_flags_problem(["--use_cache", "x"],
                                                                            []))


def test_rl_takes_bons_policy_form_and_says_what_it_cannot_take() -> None:
    from prbench.commands.rl import policy_options
    from prbench.options import OptionsError

    def options(text: str) -> dict[str, str]:
        return policy_options(argparse.Namespace(policy_args=text, prbench_default_policy=""))

    assert options("backend=hf,model=P,gguf_file=F") == {"model": "P", "gguf_file": "F"}
    assert options("model=P") == {"model": "P"}
    with pytest.raises(OptionsError, match="backend=openai: prbench rl trains the policy's "
                       "weights in this process"):
        options("backend=openai,model=m,base_url=http://127.0.0.1:9/v1")
    with pytest.raises(OptionsError, match=r"sets sampling with flags: write --temperature 0\.7"):
        options("model=P,temperature=0.7")
    with pytest.raises(OptionsError, match="'P' is not a K=V list: write --policy_args model=P"):
        options("P")


def test_unknown_scorer_hints() -> None:
    from prbench.plugins import PluginRegistry, UnknownComponentError

    registry = PluginRegistry(load_entry_points=False)
    with pytest.raises(UnknownComponentError) as exc:
        registry.get("scorer", "embedding-similarity batch_size=4")
    assert str(exc.value).strip("'\"") == (
        "unknown scorer 'embedding-similarity batch_size=4': options are separated by commas, "
        "not spaces: write embedding-similarity,batch_size=4 (--model_args "
        "scorer=embedding-similarity,batch_size=4)")
    with pytest.raises(UnknownComponentError, match="if a plugin provides it, install the plugin"):
        registry.get("scorer", "mymodel")
    with pytest.raises(UnknownComponentError) as exc:
        registry.get("scorer", "lenght")
    assert "did you mean 'length'" in str(exc.value) and "install" not in str(exc.value)


def test_scorer_reward_is_public_and_builds_from_a_scorer_id(tmp_path: Path) -> None:
    import prbench.api as api
    from prbench.options import OptionsError
    from prbench.records import load_records

    records = load_records("sample")[:2]
    reward = api.ScorerReward.for_records(
        "length", records, scorer_options={"cache_path": str(tmp_path / "s.sqlite")})
    ids = [records[0].id, records[1].id]
    out = reward(prompts=["p", "p"], completions=["one two three", "a b"], record_id=ids)
    assert out == [3.0, 2.0] and reward.calls == 1
    with pytest.raises(OptionsError, match="'llm-judge' is pairwise; a reward needs a pointwise"):
        api.ScorerReward.for_records("llm-judge", records)
    assert json.loads(json.dumps(out)) == out


def test_plain_lm_eval_model_args_are_checked_from_the_command_line_alone(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the start-up hook checks when lm-eval imports its evaluate_config, before it builds
    its TaskManager (no lm-eval task index, no model): the scorer, its options, --device, the
    tasks."""
    from prbench.harness.lm_eval_compat import check_plain_argv

    def problem(*argv: str) -> str | None:
        return check_plain_argv(["--tasks", GROUP, *argv])

    import lm_eval.tasks

    def no_index(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("the check built a TaskManager")

    monkeypatch.setattr(lm_eval.tasks.TaskManager, "__init__", no_index)
    assert str(problem("--model", "prbench", "--model_args", "scorer=lenght")).startswith(
        "unknown scorer 'lenght' (did you mean 'length'?)")
    assert str(problem("--model", "prbench", "--model_args", "scorer=length,unitt=word")
               ).startswith("scorer 'length': unknown option 'unitt' (did you mean 'unit'?)")
    assert problem("--model", "prbench", "--model_args",
                   "scorer=length,pretrained=label,cache=false,prbench_data=x") is None
    assert problem("--model", "hf", "--model_args", "scorer=lenght") is not None  # the fix
    assert problem("--model", "prbench", "--model_args", "scorer=length", "--model_args",
                   "scorer=random") == ("--model_args: 'scorer' is given twice (scorer=length "
                                        "and scorer=random); give scorer once")
    typo = "personalized_rewardbench_smaple"
    assert str(check_plain_argv(["--model", "prbench", "--tasks", typo])).startswith(
        "unknown task 'personalized_rewardbench_smaple' (did you mean")
    assert "--use_cache is refused" in str(problem("--model", "prbench", "--use_cache", "c"))
    import torch

    if not torch.cuda.is_available():
        assert str(problem("--model", "prbench", "--model_args", "scorer=length", "--device",
                           "cuda")).startswith("--device='cuda' asks for CUDA")


def test_a_misspelt_command_or_choice_is_one_line_with_the_close_match(
    capsys: pytest.CaptureFixture[str]
) -> None:
    from prbench.cli import main

    for argv, line in (
        (["evl"], "error: prbench: argument COMMAND: invalid choice: 'evl' (choose from "),
        (["bon", "--quality", "gld"], "error: prbench bon: argument --quality: invalid choice: "
         "'gld' (choose from 'auto', 'gold', 'rubric-judge') (did you mean 'gold'?) (see "
         "'prbench bon --help')"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(line), err
        assert "(did you mean '" in err[0]


def test_an_installed_plugins_own_file_given_with_plugin_says_to_drop_the_flag() -> None:
    from prbench.plugins import PluginRegistry

    root = Path(__file__).resolve().parents[1] / "plugins" / "prbench-plugin-template"
    registry = PluginRegistry(plugin_files=[root / "prbench_plugin_template" / "plugin.py"],
                              env={"PRBENCH_LOAD_PLUGINS": "template"})
    if registry.plugins.get("template") is None or registry.plugins["template"].origin != (
            "entry-point"):
        pytest.skip("the template plugin is not installed")
    trouble = registry.file_trouble()
    assert trouble is not None and "a plugin named 'template' is already loaded" in trouble
    assert "if it is this one, installed, drop --plugin" in trouble
    assert registry.get("scorer", "question-overlap").plugin == "template"  # still usable


def test_limit_is_said_once_and_only_when_it_left_pairs_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """prbench eval says what --limit did under its summary; a limit above every task says
    nothing of "part of the task"."""
    code, out, _ = run_eval(
        ["eval", "--tasks", "personalized_rewardbench_sample", "--model_args",
         "scorer=length", "--limit", "2", "--no_progress", "-o", str(tmp_path / "a")], capsys)
    assert code == 0 and "only part of each task was evaluated" in out
    code, out, _ = run_eval(
        ["eval", "--tasks", "personalized_rewardbench_sample", "--model_args",
         "scorer=length", "--limit", "1000000", "--no_progress", "-o", str(tmp_path / "b")],
        capsys)
    assert code == 0 and "part of" not in out


def test_a_plain_lm_eval_run_of_prbench_rewords_lm_evals_limit_warning() -> None:
    """Plain ``lm_eval --model prbench``: lm-eval's all-caps --limit warning reads as prbench's;
    nothing of tqdm is replaced."""
    import logging

    import tqdm.std

    from prbench.harness import lm_eval_compat as compat

    original = tqdm.std.tqdm.__dict__["__init__"]
    logger = logging.getLogger("lm_eval.config.evaluate_config")
    before = list(logger.filters)
    saved = compat._state["plain"]
    compat._state["plain"] = False
    try:
        compat.quiet_plain_run(["--model", "prbench", "--tasks", "t", "--limit", "1"])
        record = logging.LogRecord(logger.name, logging.WARNING, __file__, 1,
                                   compat.LIMIT_WARNING + ". REAL METRICS ...", None, None)
        assert all(f.filter(record) for f in logger.filters)
        assert record.getMessage().startswith("--limit 1: only 1 pair per task is evaluated")
        assert tqdm.std.tqdm.__dict__["__init__"] is original
    finally:
        compat._state["plain"] = saved
        for name in ("lm_eval.api.task", "lm_eval.config.evaluate_config"):
            lg = logging.getLogger(name)
            for f in list(lg.filters):
                if isinstance(f, compat.PlainRunFilter) and f not in before:
                    lg.removeFilter(f)


def test_a_key_that_differs_only_by_case_names_the_right_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``Scorer=length`` ran the default scorer before (and suggested one of its options)."""
    for argv, right in (
        (["eval", "--tasks", GROUP, "--model_args", "Scorer=length"], "scorer"),
        (["eval", "--tasks", GROUP, "--model_args", "scorer=length,Unit=chars"], "unit"),
        (["bon", "--model_args", "Scorer=length", "-o", str(tmp_path / "bon")], "scorer"),
    ):
        code, _, err = run_eval(argv, capsys)
        assert code == 1 and err.strip().splitlines() == [
            f"error: --model_args: '{right.capitalize()}' is not an option; option names are "
            f"case-sensitive: write {right}= (not {right.capitalize()}=)"], err


def test_a_prbench_scorer_given_to_another_lm_eval_model_names_the_fix(
    capsys: pytest.CaptureFixture[str]
) -> None:
    """``--model hf --model_args scorer=length`` was a TypeError traceback from lm-eval."""
    code, _, err = run_eval(["eval", "--model", "hf", "--tasks", GROUP, "--model_args",
                             "scorer=length"], capsys)
    assert code == 1 and err.strip().splitlines() == [
        "error: --model hf --model_args scorer=length: scorer= picks a prbench scorer, which "
        "--model prbench (the default) runs; drop --model hf"]
