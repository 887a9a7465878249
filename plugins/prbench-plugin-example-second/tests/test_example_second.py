"""The second example plugin: registration, the scorer, and its task through prbench eval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# CI installs this plugin before `make test` (.ci/run); `make setup` does not
pytest.importorskip("prbench_plugin_example_second", reason="plugin not installed")

from prbench.api import ProfileView, ScoreRequest
from prbench.testing import PluginRegistry

ONLY_ME = {"PRBENCH_LOAD_PLUGINS": "example-second"}  # independent of other installed plugins
TASK = "example_second_sample_all_posts"


def test_registered_through_the_entry_point() -> None:
    registry = PluginRegistry(env=ONLY_ME)
    info = registry.plugins["example-second"]
    assert info.status == "ok" and info.dist == "prbench-plugin-example-second"
    assert info.components == ["scorer:profile-vocabulary"]
    assert len(info.task_dirs) == 1 and Path(info.task_dirs[0]).name == "tasks"
    assert (Path(info.task_dirs[0]) / f"{TASK}.yaml").is_file()


def test_scores_the_share_of_answer_words_from_the_profile() -> None:
    scorer = PluginRegistry(env=ONLY_ME).build("scorer", "example-second/profile-vocabulary")
    profile = ProfileView(text="Post 1 (Category: film): I shoot analogue street photography.")
    requests = [
        ScoreRequest("r", "q?", "Street photography on analogue cameras", profile=profile),
        ScoreRequest("r", "q?", "Buy whatever cameras reviewers recommend", profile=profile),
        ScoreRequest("r", "q?", "Street photography on analogue cameras"),  # no profile shown
    ]
    # {street, photography, analogue, cameras}: 3 of 4 in the profile; then 0 of 4; then none
    assert scorer.score(requests) == [0.75, 0.0, 0.0]
    assert scorer.score(requests[::-1]) == [0.0, 0.0, 0.75]


def test_task_runs_through_prbench_eval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from prbench.testing import reset_registry, reset_task_state, run_cli

    monkeypatch.setenv("PRBENCH_LOAD_PLUGINS", "example-second")
    reset_registry()
    reset_task_state()
    code = run_cli(["eval", "--tasks", TASK, "--model_args", "scorer=profile-vocabulary",
                 "--limit", "4", "--output_path", str(tmp_path / "out"), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    (path,) = (tmp_path / "out").rglob("results_*.json")
    results = json.loads(path.read_text())
    assert results["n-samples"][TASK]["effective"] == 4
    assert 0.0 <= results["results"][TASK]["acc,none"] <= 1.0
    assert f"{TASK}: profile all; data sample" in out  # the built-in `all` builder ran
    reset_registry()
