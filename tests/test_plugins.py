"""The plugin system: load order, failures, duplicates, env vars, the real entry-point path."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from prbench.plugins import (
    AmbiguousComponentError,
    PluginError,
    PluginRegistry,
    UnknownComponentError,
)

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "plugins" / "prbench-plugin-template"
NO_EP = {"PRBENCH_LOAD_PLUGINS": ""}  # built-ins only: independent of what is installed


def plugin_file(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text("from prbench import hookimpl\n" + textwrap.dedent(body))
    return path


SCORER_PLUGIN = """
import dataclasses

@dataclasses.dataclass(frozen=True)
class Opts:
    bonus: float = 1.0

class Scorer:
    def __init__(self, options):
        self.options = options
    def score(self, requests):
        return [self.options.bonus * len(r.response) for r in requests]

@hookimpl
def register_scorers(register):
    register("{name}", Scorer, options=Opts, description="test scorer")
"""


def test_builtins_are_registered_through_the_hooks() -> None:
    registry = PluginRegistry(env=NO_EP)
    info = registry.plugins["prbench.baselines"]
    assert info.origin == "builtin" and info.status == "ok"
    assert "scorer:length" in info.components
    assert registry.get("scorer", "prbench/length").name == "length"
    assert registry.get("scorer", "oracle-rubric").diagnostic


def test_file_plugin_loads_last_and_builds_with_options(tmp_path: Path) -> None:
    path = plugin_file(tmp_path, "mine", SCORER_PLUGIN.format(name="char-count"))
    registry = PluginRegistry(plugin_files=[path], env=NO_EP)
    assert list(registry.plugins)[-1] == "mine"
    scorer = registry.build("scorer", "mine/char-count", {"bonus": "2"})
    from prbench.scoring.base import ScoreRequest

    assert scorer.score([ScoreRequest("r", "q", "abc")]) == [6.0]


def test_duplicate_id_is_ambiguous_only_when_asked_for(tmp_path: Path) -> None:
    a = plugin_file(tmp_path, "first_plugin", SCORER_PLUGIN.format(name="same"))
    b = plugin_file(tmp_path, "second_plugin", SCORER_PLUGIN.format(name="same"))
    registry = PluginRegistry(plugin_files=[a, b], env=NO_EP)  # loading does not fail
    assert registry.plugins["first_plugin"].status == "ok"
    second = registry.plugins["second_plugin"]
    assert second.status == "partial"
    assert "'same' is also registered by plugin 'first_plugin'" in second.problems[0]
    assert "use 'first_plugin/same' or 'second_plugin/same'" in second.problems[0]
    with pytest.raises(AmbiguousComponentError) as err:
        registry.get("scorer", "same")
    assert str(err.value) == (
        "scorer 'same' is ambiguous: plugins 'first_plugin' and 'second_plugin' both register "
        "it; ask for 'first_plugin/same' or 'second_plugin/same'"
    )
    assert registry.get("scorer", "second_plugin/same").plugin == "second_plugin"
    assert [c.qualified_id for c in registry.list("scorer") if c.name == "same"] == [
        "first_plugin/same", "second_plugin/same"
    ]
    assert registry.get("scorer", "length").name == "length"  # everything else unaffected


def test_duplicate_of_a_builtin_leaves_the_builtin_reachable(tmp_path: Path) -> None:
    path = plugin_file(tmp_path, "shadow", SCORER_PLUGIN.format(name="length"))
    registry = PluginRegistry(plugin_files=[path], env=NO_EP)
    assert registry.plugins["shadow"].status == "partial"
    assert "prbench.baselines" in registry.plugins["shadow"].problems[0]
    with pytest.raises(AmbiguousComponentError, match=r"'prbench/length' or 'shadow/length'"):
        registry.build("scorer", "length")
    assert registry.get("scorer", "prbench/length").plugin == "prbench.baselines"
    assert registry.get("scorer", "constant").plugin == "prbench.baselines"


BAD_REGISTRATIONS = """
import dataclasses

class Takes:
    def __init__(self, options):
        self.options = options
    def score(self, requests):
        return [0.0] * len(requests)

def no_args():
    return Takes(None)

@dataclasses.dataclass(frozen=True)
class Opts:
    x: int = 1

@hookimpl
def register_scorers(register):
    register("bad/id", Takes, options=Opts)
    register("good-one", Takes, options=Opts, description="survives")
    register("good-one", Takes, options=Opts)
    register("no-options", Takes)
    register("no-params", no_args, options=Opts)
    register("lazy-no-options", "prbench.default_plugins.baselines:LengthScorer")
    register("not-a-dataclass", Takes, options=dict)

@hookimpl
def register_task_dirs(register):
    register("/no/such/task/folder")
"""


def test_bad_registrations_are_dropped_and_recorded(tmp_path: Path) -> None:
    path = plugin_file(tmp_path, "messy", BAD_REGISTRATIONS)
    registry = PluginRegistry(plugin_files=[path], env=NO_EP)
    info = registry.plugins["messy"]
    assert info.status == "partial" and info.error is None
    assert info.components == ["scorer:good-one"]
    problems = "\n".join(info.problems)
    assert "scorer 'bad/id' dropped: invalid id" in problems
    assert "scorer 'good-one' dropped: registered twice by this plugin" in problems
    assert (
        "scorer 'no-options' dropped: it is registered without options= but its factory "
        "requires an argument" in problems
    )
    assert (
        "scorer 'no-params' dropped: it is registered with options= but its factory takes "
        "no argument" in problems
    )
    assert "scorer 'lazy-no-options' dropped: it is registered without options=" in problems
    assert "scorer 'not-a-dataclass' dropped: options= must be a dataclass type" in problems
    assert "task directory dropped, it does not exist: /no/such/task/folder" in problems
    assert len(info.problems) == 7
    assert registry.get("scorer", "good-one").description == "survives"
    assert registry.build("scorer", "good-one").score(["r"]) == [0.0]
    with pytest.raises(UnknownComponentError, match="scorer 'no-options' was dropped by plugin "
                       "'messy': scorer 'no-options' dropped: it is registered without options="):
        registry.get("scorer", "no-options")  # the reason, not only "unknown"
    assert "/no/such/task/folder" not in [d[0] for d in registry.task_dirs]
    assert registry.get("scorer", "length")  # the others keep working


def test_plugin_that_registers_nothing_usable_is_failed(tmp_path: Path) -> None:
    path = plugin_file(
        tmp_path, "allbad",
        """
        @hookimpl
        def register_scorers(register):
            register("has space", "os:getcwd")
        """,
    )
    registry = PluginRegistry(plugin_files=[path], env=NO_EP)
    assert registry.plugins["allbad"].status == "failed"
    assert [p.name for p in registry.failed()] == ["allbad"]


def test_factory_signature_is_checked_again_at_build(tmp_path: Path) -> None:
    """A string factory whose __init__ is inherited cannot be read from the source: build says."""
    module = tmp_path / "inherits_mod.py"
    module.write_text(
        "class Base:\n    def __init__(self, options):\n        self.options = options\n"
        "class Child(Base):\n    pass\n"
    )
    path = plugin_file(
        tmp_path, "inherits",
        """
        @hookimpl
        def register_scorers(register):
            register("child", "inherits_mod:Child")
        """,
    )
    sys.path.insert(0, str(tmp_path))
    try:
        registry = PluginRegistry(plugin_files=[path], env=NO_EP)
        assert registry.plugins["inherits"].status == "ok"  # undecidable from the source
        with pytest.raises(PluginError) as err:
            registry.build("scorer", "child")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("inherits_mod", None)
    assert str(err.value) == (
        "scorer 'child' of plugin 'inherits' is registered without options= but its factory "
        "requires an argument; it is built as factory(): register it with options=<dataclass> "
        "(it then gets the options instance) or give the parameter a default"
    )


def test_two_plugins_of_one_name_do_not_stop_loading(tmp_path: Path) -> None:
    a = plugin_file(tmp_path, "twin", SCORER_PLUGIN.format(name="twin-a"))
    other = tmp_path / "other"
    other.mkdir()
    b = plugin_file(other, "twin", SCORER_PLUGIN.format(name="twin-b"))
    registry = PluginRegistry(plugin_files=[a, b], env=NO_EP)
    assert registry.plugins["twin"].status == "ok"
    (second,) = [p for key, p in registry.plugins.items() if key != "twin" and p.name == "twin"]
    assert second.status == "failed" and "another plugin is already named 'twin'" in second.error
    assert registry.get("scorer", "twin-a") and "twin-b" not in registry.components["scorer"]


def test_plugin_that_raises_on_import_is_recorded_and_skipped(tmp_path: Path) -> None:
    bad = plugin_file(tmp_path, "broken", "raise RuntimeError('no weights here')\n")
    good = plugin_file(tmp_path, "fine", SCORER_PLUGIN.format(name="fine-scorer"))
    registry = PluginRegistry(plugin_files=[bad, good], env=NO_EP)
    assert registry.plugins["broken"].status == "failed"
    assert "RuntimeError: no weights here" in registry.plugins["broken"].error
    assert "broken.py:" in registry.plugins["broken"].error
    assert registry.get("scorer", "fine-scorer")
    with pytest.raises(UnknownComponentError, match="failed to load or dropped components: broken"):
        registry.get("scorer", "whatever")


def test_hook_that_raises_rolls_back_its_registrations(tmp_path: Path) -> None:
    path = plugin_file(
        tmp_path,
        "halfway",
        """
        @hookimpl
        def register_scorers(register):
            register("half-one", "os:getcwd")
            raise ValueError("second model missing")
        """,
    )
    registry = PluginRegistry(plugin_files=[path], env=NO_EP)
    assert "ValueError: second model missing" in registry.plugins["halfway"].error
    assert "half-one" not in registry.components["scorer"]
    assert registry.get("scorer", "length")


def test_misspelt_hook_is_caught_by_check_pending(tmp_path: Path) -> None:
    path = plugin_file(
        tmp_path,
        "typo",
        """
        @hookimpl
        def register_scorer(register):
            register("x", "os:getcwd")
        """,
    )
    registry = PluginRegistry(plugin_files=[path], env=NO_EP)
    assert registry.plugins["typo"].status == "failed"
    assert "register_scorer" in registry.plugins["typo"].error


def test_wrong_hook_argument_is_reported(tmp_path: Path) -> None:
    path = plugin_file(
        tmp_path,
        "badargs",
        """
        @hookimpl
        def register_scorers(reg, extra):
            pass
        """,
    )
    registry = PluginRegistry(plugin_files=[path], env=NO_EP)
    assert registry.plugins["badargs"].status == "failed"
    assert "invalid hook implementation" in registry.plugins["badargs"].error


def test_factories_are_lazy_but_resolved_when_the_plugin_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A "module:attribute" factory is found when the plugin loads, never imported before it is
    built; one whose module cannot be found is dropped then, with the reason (issue 38)."""
    (tmp_path / "lazy_target_xyz.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('IMPORTED').touch()\n\n"
        "class Scorer:\n    def score(self, requests):\n        return [1.0 for _ in requests]\n",
        encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = plugin_file(
        tmp_path,
        "lazy",
        """
        @hookimpl
        def register_scorers(register):
            register("heavy", "lazy_target_xyz:Scorer")
            register("gone", "module_that_does_not_exist_xyz:Scorer")
        """,
    )
    registry = PluginRegistry(plugin_files=[path], env=NO_EP)
    component = registry.get("scorer", "heavy")
    assert not (tmp_path / "IMPORTED").exists()  # found, not imported
    assert registry.plugins["lazy"].status == "partial"
    (problem,) = registry.plugins["lazy"].problems
    assert problem.startswith("scorer 'gone' dropped: it has the factory "
                              "'module_that_does_not_exist_xyz:Scorer', whose module cannot be "
                              "imported (no module named 'module_that_does_not_exist_xyz')")
    with pytest.raises(UnknownComponentError, match="scorer 'gone' was dropped by plugin 'lazy'"):
        registry.get("scorer", "gone")
    assert component.build().score(["r"]) == [1.0]
    assert (tmp_path / "IMPORTED").exists()
    sys.modules.pop("lazy_target_xyz", None)


def test_unknown_id_and_option_suggest_close_matches() -> None:
    registry = PluginRegistry(env=NO_EP)
    with pytest.raises(UnknownComponentError, match="did you mean 'length'"):
        registry.get("scorer", "lenght")
    from prbench.options import OptionsError

    with pytest.raises(OptionsError, match="did you mean 'prefer'"):
        registry.build("scorer", "length", {"prefre": "longer"})
    with pytest.raises(OptionsError, match="not one of"):
        registry.build("scorer", "length", {"prefer": "widest"})
    with pytest.raises(OptionsError, match="expected an integer"):
        registry.build("scorer", "random", {"seed": "abc"})


def test_disable_env_var_skips_a_builtin() -> None:
    registry = PluginRegistry(env={"PRBENCH_DISABLE_PLUGINS": "prbench.baselines"})
    assert registry.plugins["prbench.baselines"].status == "disabled"
    assert "length" not in registry.components["scorer"]


def test_import_prbench_and_help_do_not_import_torch() -> None:
    code = (
        "import sys, prbench, prbench.plugins, prbench.records, prbench.cli\n"
        "from prbench.plugins import get_registry\n"
        "get_registry()\n"
        "try:\n    prbench.cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'transformers', 'lm_eval', 'sentence_transformers', "
        "'datasets') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "HEAVY []" in out


# -- the real entry-point path ------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site dir with the template plugin installed by pip and a broken entry-point plugin."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(TEMPLATE),
        ],
        check=True,
        capture_output=True,
    )
    dist = target / "prbench_plugin_broken-0.2.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: prbench-plugin-broken\nVersion: 0.2.0\n"
    )
    (dist / "entry_points.txt").write_text("[prbench]\nbroken = prbench_plugin_broken\n")
    (target / "prbench_plugin_broken.py").write_text("raise ImportError('needs a GPU driver')\n")
    return target


#: the plugins of the site fixture: tests stay independent of other installed plugins
SITE_PLUGINS = "template,broken"


def run_cli(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(site), **env}
    full_env["PRBENCH_LOAD_PLUGINS"] = env.get("PRBENCH_LOAD_PLUGINS", SITE_PLUGINS)
    if "PRBENCH_DISABLE_PLUGINS" not in env:
        full_env.pop("PRBENCH_DISABLE_PLUGINS", None)
    return subprocess.run(
        [sys.executable, "-m", "prbench.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
    )


def test_installed_template_is_listed_with_version_and_scorer(site: Path) -> None:
    result = run_cli(site, "plugins")
    assert "template  [ok]  entry-point: prbench-plugin-template 0.1.0" in result.stdout
    assert "scorer: question-overlap" in result.stdout
    # the broken plugin is reported, the others keep working
    assert "broken  [failed]" in result.stdout
    assert "ImportError: needs a GPU driver" in result.stdout
    assert "scorer: length" in result.stdout
    assert result.returncode == 1
    scorers = run_cli(site, "scorers", "--options", "template/question-overlap")
    assert "min_word_length: int = 4" in scorers.stdout
    # every scorer's listing ends with the runtime's options (cache, chunking, progress)
    assert "scorer runtime's options" in scorers.stdout
    assert "chunk_size: int = 256" in scorers.stdout and "cache: bool = True" in scorers.stdout


def test_load_plugins_env_var(site: Path) -> None:
    hidden = run_cli(site, "plugins", PRBENCH_LOAD_PLUGINS="")
    assert "template" not in hidden.stdout and "broken" not in hidden.stdout
    assert hidden.returncode == 0
    only = run_cli(site, "plugins", PRBENCH_LOAD_PLUGINS="prbench-plugin-template")
    assert "template  [ok]" in only.stdout and "broken" not in only.stdout
    disabled = run_cli(site, "plugins", "--all", PRBENCH_DISABLE_PLUGINS="broken")
    assert "broken  [disabled]" in disabled.stdout
    assert disabled.returncode == 0


def test_requirements_lists_installed_plugin_dists(site: Path) -> None:
    result = run_cli(site, "plugins", "--requirements", PRBENCH_DISABLE_PLUGINS="broken")
    assert result.stdout.strip().splitlines() == ["prbench-plugin-template==0.1.0"]


def test_load_list_naming_no_plugin_is_warned(site: Path) -> None:
    result = run_cli(site, "plugins", PRBENCH_LOAD_PLUGINS="prbench-plugin-templat")
    assert "warning: PRBENCH_LOAD_PLUGINS names 'prbench-plugin-templat'" in result.stdout
    assert "did you mean 'prbench-plugin-template'" in result.stdout
