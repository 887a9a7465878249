"""``prbench plugins new NAME``: the template plugin, renamed, as a package that installs and runs.

The fast tests check the names, the refusals (one ``error:`` line each) and that nothing of the
template's own names is left in the new package; the slow test builds the new package into a
wheel, installs it with ``--target`` into a temporary folder (nothing is installed into the
environment running the tests), and runs its task through ``prbench eval`` and plain
``lm_eval``, and the package's own tests.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from prbench import plugin_scaffold as scaffold
from prbench.testing import PluginRegistry, run_cli

ROOT = Path(__file__).resolve().parents[1]


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    """The one ``error:`` line of a refused command (and nothing else said)."""
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    return lines[0]


def _template_names() -> set[str]:
    """The ids, namespace and task names the installed template plugin registers."""
    registry = PluginRegistry(env={"PRBENCH_LOAD_PLUGINS": "template"})
    info = registry.plugins["template"]
    assert info.status == "ok", info.problems
    names = {"template", *(c.partition(":")[2] for c in info.components)}
    for folder in info.task_dirs:
        for yaml in Path(folder).glob("*.yaml"):
            names |= set(re.findall(r"^(?:task|group): *(\S+)", yaml.read_text(), re.M))
    return names


def test_names_derive_from_the_plugin_name() -> None:
    names = scaffold.check_name("my-rm")
    assert (names.distribution, names.module, names.snake, names.scorer, names.builder) == (
        "prbench-plugin-my-rm", "prbench_plugin_my_rm", "my_rm", "my-rm", "my-rm-last-posts")
    assert (names.camel, scaffold.check_name("rm-r1").camel,
            scaffold.check_name("mymodel").camel) == ("MyRm", "RmR1", "Mymodel")


def test_renaming_takes_whole_words_once() -> None:
    names = scaffold.PluginNames("my-template")
    text = ("prbench-plugin-template prbench_plugin_template template_sample_last_posts "
            "`template/question-overlap` last-posts(k=2) templates question-overlaps "
            "test_template.py \"template\"")
    assert scaffold.rename(text, names) == (
        "prbench-plugin-my-template prbench_plugin_my_template my_template_sample_last_posts "
        "`my-template/my-template` my-template-last-posts(k=2) templates question-overlaps "
        "test_my_template.py \"my-template\"")


def test_class_and_test_names_are_renamed_too() -> None:
    """The scorer a new plugin starts from is its own: no class named after the template's."""
    names = scaffold.PluginNames("my-rm")
    text = ("class QuestionOverlapScorer: scorer:QuestionOverlapScorer QuestionOverlapOptions "
            "LastPostsBuilder(LastPostsOptions) test_scores_follow_question_overlap_in_order "
            "QuestionOverlaps XQuestionOverlapScorer last_posts")
    assert scaffold.rename(text, names) == (
        "class MyRmScorer: scorer:MyRmScorer MyRmOptions "
        "MyRmLastPostsBuilder(MyRmLastPostsOptions) test_scores_follow_my_rm_in_order "
        "QuestionOverlaps XQuestionOverlapScorer last_posts")


def _template_classes() -> set[str]:
    """The classes the template plugin's modules define."""
    import ast

    out: set[str] = set()
    for rel in scaffold.template_files():
        if rel.suffix == ".py":
            tree = ast.parse((scaffold.template_dir() / rel).read_text(encoding="utf-8"))
            out |= {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    return out


@pytest.mark.parametrize(("name", "says"), [
    ("My_RM", "e.g. 'my-rm'"),
    ("prbench-plugin-skywork3", "`prbench plugins new skywork3`"),
    ("prbench_plugin_my_rm", "`prbench plugins new my-rm`"),
    ("3rm", "a letter first"),
    ("my--rm", "single hyphens"),
    ("a/b", "lowercase letters and digits"),
])
def test_a_bad_name_is_one_error_line(
    name: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["plugins", "new", name, "-o", str(tmp_path / "out")]) == 1
    assert says in _one_error(capsys)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_folder_is_refused_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "prbench-plugin-mine"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    assert run_cli(["plugins", "new", "mine", "-o", str(target)]) == 1
    assert "exists already" in _one_error(capsys)
    assert [p.name for p in target.iterdir()] == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prbench-plugin-mine"]


def test_a_name_a_loaded_component_uses_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `length` is a built-in scorer: the new plugin's bare id would be ambiguous
    assert run_cli(["plugins", "new", "length", "-o", str(tmp_path / "out")]) == 1
    assert "the scorer 'length'" in _one_error(capsys)
    assert not (tmp_path / "out").exists()


def test_the_package_is_the_template_under_the_new_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # outside the checkout: the constraints file is named in full
    out = tmp_path / "plugins" / "prbench-plugin-my-rm"
    assert run_cli(["plugins", "new", "my-rm", "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "scorer my-rm" in said and "--model_args scorer=my-rm" in said
    # the install line pins torch with prbench's constraints file, as every install in the docs
    assert f"pip install -c {ROOT / 'constraints-cpu.txt'} -e {out}\n" in said
    assert "then rewrite MyRmScorer (prbench_plugin_my_rm/scorer.py) and MyRmOptions" in said
    template = scaffold.template_dir()
    assert template == ROOT / "plugins" / "prbench-plugin-template"  # the checkout's, here
    names = scaffold.check_name("my-rm")
    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert files == sorted(Path(scaffold.rename(p.as_posix(), names))
                           for p in scaffold.template_files())
    assert Path("prbench_plugin_my_rm/scorer.py") in files
    assert Path("tests/test_my_rm.py") in files
    assert sorted(p.name for p in out.parent.iterdir()) == ["prbench-plugin-my-rm"]  # no stage

    project = tomllib.loads((out / "pyproject.toml").read_text())
    assert project["project"]["name"] == "prbench-plugin-my-rm"
    assert project["project"]["entry-points"]["prbench"] == {"my-rm": "prbench_plugin_my_rm.plugin"}
    assert project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == [
        "prbench_plugin_my_rm"]
    yaml = (out / "prbench_plugin_my_rm" / "tasks" / "my_rm_sample_last_posts.yaml").read_text()
    assert "task: my_rm_sample_last_posts" in yaml and "prbench_profile: my-rm-last-posts" in yaml
    # the classes carry the new name, so the scorer is rewritten in place, not replaced
    scorer_py = (out / "prbench_plugin_my_rm" / "scorer.py").read_text()
    plugin_py = (out / "prbench_plugin_my_rm" / "plugin.py").read_text()
    assert "class MyRmScorer:" in scorer_py and "class MyRmOptions:" in plugin_py
    assert '"prbench_plugin_my_rm.scorer:MyRmScorer"' in plugin_py
    # its README installs it with the constraints file and names its own task and scorer
    readme = (out / "README.md").read_text()
    assert "pip install -c constraints-cpu.txt -e plugins/prbench-plugin-my-rm\n" in readme
    assert "--tasks my_rm_sample_last_posts --model_args scorer=my-rm," in readme
    assert "rewrite `MyRmScorer` in `scorer.py`" in readme
    # nothing of the template's own names is left: a name added to the template without a
    # renaming rule fails here (the new plugin would clash with the installed template)
    leftover = (_template_names() | _template_classes()
                | {"prbench-plugin-template", "prbench_plugin_template"})
    assert {"QuestionOverlapScorer", "LastPostsBuilder"} <= leftover
    for rel in files:
        text = (out / rel).read_text(encoding="utf-8")
        if rel.suffix == ".py":
            compile(text, str(rel), "exec")
        words = set(re.findall(r"[A-Za-z0-9_-]+", text))
        assert not re.search(r"template", text, re.I), rel
        assert not words & leftover, (rel, words & leftover)


def test_an_interrupted_write_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prbench.outputs import OutputWriteError, write_text

    calls = []

    def failing(path: Path, text: str) -> Path:
        calls.append(path)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return write_text(path, text)

    monkeypatch.setattr(scaffold, "write_text", failing)
    with pytest.raises(OutputWriteError, match="the disk is full"):
        scaffold.write_plugin("my-rm", tmp_path / "prbench-plugin-my-rm")
    assert list(tmp_path.iterdir()) == []  # neither the plugin nor its hidden staging folder


# -- the new package installed and run ----------------------------------------------------------


def _pip(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_the_new_plugin_installs_and_runs_through_prbench_eval_and_lm_eval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "prbench-plugin-my-rm"
    assert run_cli(["plugins", "new", "my-rm", "-o", str(src)]) == 0
    capsys.readouterr()
    _pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(tmp_path / "dist"),
         str(src))
    (wheel,) = (tmp_path / "dist").glob("prbench_plugin_my_rm-0.1.0-*.whl")
    site = tmp_path / "site"
    _pip("install", "--no-deps", "--no-index", "--target", str(site), str(wheel))
    env = dict(os.environ)  # found through its dist-info on PYTHONPATH, alone among plugins
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p)
    env.update(PRBENCH_LOAD_PLUGINS="my-rm", PRBENCH_CACHE_DIR=str(tmp_path / "cache"))
    task = "my_rm_sample_last_posts"
    commands = {
        "prbench": [sys.executable, "-m", "prbench.cli", "eval", "--no_progress"],
        "lm_eval": [sys.executable, "-m", "lm_eval", "--model", "prbench"],
    }
    for how, command in commands.items():
        done = subprocess.run(
            [*command, "--tasks", task, "--model_args", "scorer=my-rm", "--limit", "2",
             "--output_path", str(tmp_path / how)],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
        assert done.returncode == 0, (how, done.stdout[-3000:] + done.stderr[-3000:])
        (path,) = (tmp_path / how).rglob("results_*.json")
        results = json.loads(path.read_text())
        assert results["n-samples"][task]["effective"] == 2, how
        info = results["config"]["prbench"]
        assert info["scorer"]["id"] == "my-rm", how
        assert info["scorer"]["plugin"] == "my-rm", how
        assert info["scorer"]["scored"] == 4, how  # 2 pairs x 2 answers: the scorer ran
        assert 0.0 <= results["results"][task]["acc,none"] <= 1.0, how
    # the package's own tests pass against the installed wheel
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(src / "tests")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "4 passed" in done.stdout
