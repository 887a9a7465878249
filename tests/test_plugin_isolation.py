"""One bad plugin takes nothing down: `prbench plugins`, `scorers`, `eval` and plain `lm_eval`.

The plugins are real entry-point distributions in a temporary site folder (a hand-written
``.dist-info`` with ``entry_points.txt``), so the same loading path runs as for a pip install.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from prbench.harness import tasks
from tests._harness_fixtures import PYTHON, REPO, run_eval, subprocess_env

GROUP = "personalized_rewardbench_sample_noprofile"

CLASH = """
import dataclasses
from pathlib import Path
from prbench import hookimpl

HERE = Path(__file__).resolve().parent


@dataclasses.dataclass(frozen=True)
class Opts:
    scale: float = 1.0


class WordCount:
    def __init__(self, options):
        self.options = options

    def score(self, requests):
        return [self.options.scale * len(r.response.split()) for r in requests]


@hookimpl
def register_scorers(register):
    register("length", WordCount, options=Opts, description="clash: words, not characters")
    register("bad/id", WordCount, options=Opts)
    register("clash-words", WordCount, options=Opts, description="clash: a fine scorer")
    register("wants-options", WordCount)  # no options= but the class needs them


@hookimpl
def register_task_dirs(register):
    register(str(HERE / "clash_tasks_that_do_not_exist"))
"""

EXTRA = """
from pathlib import Path
from prbench import hookimpl

@hookimpl
def register_task_dirs(register):
    register(str(Path(__file__).resolve().parent / "extra_tasks"))
"""


def _dist(site: Path, name: str, module: str, source: str) -> None:
    info = site / f"{module}-0.3.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: prbench-plugin-{name}\nVersion: 0.3.0\n"
    )
    (info / "entry_points.txt").write_text(f"[prbench]\n{name} = {module}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(source))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two installed third-party plugins: one with bad registrations, one with a task folder."""
    target = tmp_path_factory.mktemp("isolation_site")
    _dist(target, "clash", "prbench_plugin_clash", CLASH)
    _dist(target, "extra", "prbench_plugin_extra", EXTRA)
    (target / "extra_tasks").mkdir()
    (target / "extra_tasks" / "extra_task.yaml").write_text(
        "class: !function prbench.harness.plugin_task.PersonalizedRewardBenchTask\n"
        "task: extra_sample_noprofile\n"
        "dataset_kwargs:\n  prbench_domain: '*'\n  prbench_condition: noprofile\n"
        "  prbench_default_data: sample\n"
    )
    return target


def _cli(site: Path, *args: str, load: str = "clash") -> subprocess.CompletedProcess[str]:
    env = subprocess_env(PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    env["PRBENCH_LOAD_PLUGINS"] = load
    env.pop("PRBENCH_DISABLE_PLUGINS", None)
    return subprocess.run(
        [PYTHON, "-m", "prbench.cli", *args], capture_output=True, text=True, env=env,
        timeout=300,
    )


@pytest.fixture
def clash_loaded(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The clash plugin installed and loaded in this process (for in-process ``prbench eval``)."""
    from prbench.plugins import reset_registry

    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PRBENCH_LOAD_PLUGINS", "clash")
    reset_registry()
    tasks.reset()
    yield
    reset_registry()
    tasks.reset()


def test_plugins_lists_the_partial_plugin_with_its_problems(site: Path) -> None:
    result = _cli(site, "plugins")
    out = result.stdout
    assert "clash  [partial]  entry-point: prbench-plugin-clash 0.3.0" in out
    assert "    scorer: length\n    scorer: clash-words\n" in out
    assert "    problem: scorer 'length' is also registered by plugin 'prbench.baselines'" in out
    assert "use 'prbench/length' or 'clash/length'" in out
    assert "    problem: scorer 'bad/id' dropped: invalid id" in out
    assert (
        "    problem: scorer 'wants-options' dropped: it is registered without options= but its "
        "factory requires an argument" in out
    )
    assert "    problem: task directory dropped, it does not exist: " in out
    assert "prbench.baselines  [ok]" in out
    assert "Traceback" not in result.stdout + result.stderr
    assert result.returncode == 1  # something to fix, but everything listed


def test_scorers_lists_both_and_only_the_bare_ambiguous_id_fails(site: Path) -> None:
    listing = _cli(site, "scorers")
    assert listing.returncode == 0, listing.stderr
    assert "prbench/length" in listing.stdout and "clash/length" in listing.stdout
    assert "clash/clash-words" in listing.stdout and "bad/id" not in listing.stdout
    assert listing.stderr.count("\n") == 1 and "warning: plugin 'clash' partial" in listing.stderr
    asked = _cli(site, "scorers", "length")
    assert asked.returncode == 1
    assert asked.stderr.strip() == (
        "error: scorer 'length' is ambiguous: plugins 'prbench.baselines' and 'clash' both "
        "register it; ask for 'prbench/length' or 'clash/length'"
    )
    qualified = _cli(site, "scorers", "--options", "clash/length")
    assert qualified.returncode == 0 and "scale: float = 1.0" in qualified.stdout


def test_eval_with_an_unrelated_scorer_runs(
    clash_loaded: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_eval(
        ["eval", "--tasks", GROUP, "--model_args", "scorer=constant", "--limit", "1",
         "--output_path", str(tmp_path / "out")],
        capsys,
    )
    assert code == 0, err[-2000:]
    assert "prbench summary: scorer constant" in out
    warnings = [line for line in err.splitlines() if "clash" in line]
    assert len(warnings) == 1
    assert warnings[0].startswith("prbench: warning: plugin 'clash' partial:")
    assert "(+3 more, see `prbench plugins`)" in warnings[0]


def test_eval_asking_for_the_ambiguous_id_is_one_error_line(
    clash_loaded: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_eval(
        ["eval", "--tasks", GROUP, "--model_args", "scorer=length", "--limit", "1"], capsys
    )
    assert code == 1
    assert "error: scorer 'length' is ambiguous" in err
    assert "AmbiguousComponentError" not in err  # a message, not a traceback
    tasks.reset()
    code, out, err = run_eval(
        ["eval", "--tasks", GROUP, "--model_args", "scorer=clash/length", "--limit", "1"],
        capsys,
    )
    assert code == 0, err[-2000:]
    assert "prbench summary: scorer length" in out


def test_lm_eval_model_path_with_the_bad_plugin(
    clash_loaded: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """What plain ``lm_eval --model prbench`` builds, in process: the model and the task dirs."""
    from lm_eval.api.registry import get_model

    from prbench.harness import lm_eval_compat
    from prbench.harness.task_dirs import task_dirs

    lm_eval_compat.register_model()
    lm = get_model("prbench").create_from_arg_string("scorer=clash-words")
    assert lm.component.qualified_id == "clash/clash-words"
    dirs = task_dirs()
    assert any(d.endswith("tasks") for d in dirs)
    assert not any("clash_tasks_that_do_not_exist" in d for d in dirs)
    lm_eval_compat.warn_troubled_plugins()
    err = capsys.readouterr().err
    assert err.count("prbench: warning: plugin 'clash' partial") == 1
    assert lm_eval_compat.warn_troubled_plugins() == []  # once per process


@pytest.mark.slow
def test_core_tests_pass_with_third_party_plugins_installed(site: Path) -> None:
    """The suite isolates its plugin set (tests/conftest.py): extra plugins change nothing.

    Runs core tests that assert on the exact plugin and task-folder set in a fresh pytest with
    both plugins of the site on the path and no PRBENCH_LOAD_PLUGINS in the environment.
    """
    env = subprocess_env(PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    env.pop("PRBENCH_LOAD_PLUGINS", None)
    probe = subprocess.run(
        [PYTHON, "-m", "prbench.cli", "plugins"], capture_output=True, text=True, env=env,
        cwd=REPO, timeout=300,
    )
    assert "extra  [ok]" in probe.stdout and "clash  [partial]" in probe.stdout  # installed
    result = subprocess.run(
        [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/test_harness_hook.py::test_task_manager_patch",
         "tests/test_plugins.py::test_builtins_are_registered_through_the_hooks",
         "tests/test_plugins.py::test_unknown_id_and_option_suggest_close_matches"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    assert "3 passed" in result.stdout


@pytest.mark.slow
def test_plain_lm_eval_warns_once_and_errors_in_one_line(site: Path, tmp_path: Path) -> None:
    """``lm_eval`` in a fresh interpreter, with the start-up hook as installed (two runs)."""
    env = subprocess_env(PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    env["PRBENCH_LOAD_PLUGINS"] = "clash"
    base = [PYTHON, "-m", "lm_eval", "--model", "prbench", "--limit", "1"]

    def lm_eval(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=300)

    ok = lm_eval("--model_args", "scorer=constant", "--tasks", GROUP)
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert ok.stderr.count("prbench: warning: plugin 'clash' partial") == 1
    assert ok.stderr.count("Custom kwargs can be passed to `--metadata`") == 1  # not per task
    unknown = lm_eval("--model_args", "scorer=lenght-ish", "--tasks", GROUP)
    assert unknown.returncode == 1 and "Traceback" not in unknown.stderr
    assert unknown.stderr.strip().splitlines()[-1].startswith("error: unknown scorer 'lenght-ish'")


def test_clean_errors_hook_turns_prbench_and_lm_eval_errors_into_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The ``sys.excepthook`` the start-up hook installs under plain ``lm_eval``."""
    from prbench.harness.lm_eval_compat import clean_errors_hook
    from prbench.options import OptionsError
    from prbench.plugins import UnknownComponentError

    passed: list[BaseException] = []
    hook = clean_errors_hook(lambda t, e, tb: passed.append(e))
    hook(UnknownComponentError, UnknownComponentError("unknown scorer 'x'"), None)
    hook(OptionsError, OptionsError("scorer 'length': unknown option 'y'"), None)
    hook(ValueError, ValueError("Tasks not found: no_such_task_xyz"), None)
    other = RuntimeError("a real bug")
    hook(RuntimeError, other, None)
    assert capsys.readouterr().err.splitlines() == [
        "error: unknown scorer 'x'",
        "error: scorer 'length': unknown option 'y'",
        "error: Tasks not found: no_such_task_xyz; list the known tasks with `lm_eval ls tasks` "
        "(prbench's start with personalized_rewardbench, e.g. personalized_rewardbench_sample)",
    ]
    assert passed == [other]  # anything else keeps its traceback
