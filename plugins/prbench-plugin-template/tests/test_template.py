from __future__ import annotations

import json
from pathlib import Path

import pytest

from prbench.api import ProfileItem, Record, ScoreRequest
from prbench.testing import PluginRegistry

ONLY_ME = {"PRBENCH_LOAD_PLUGINS": "template"}  # independent of other installed plugins


def test_registered_through_the_entry_point() -> None:
    registry = PluginRegistry(env=ONLY_ME)
    info = registry.plugins["template"]
    assert info.origin == "entry-point"
    assert info.dist == "prbench-plugin-template"
    assert info.status == "ok"
    assert info.components == ["scorer:question-overlap", "profile-builder:last-posts"]
    assert registry.get("scorer", "template/question-overlap").plugin == "template"
    (task_dir,) = info.task_dirs
    assert (Path(task_dir) / "template_sample_last_posts.yaml").is_file()


def test_scores_follow_question_overlap_in_order() -> None:
    scorer = PluginRegistry(env=ONLY_ME).build(
        "scorer", "question-overlap", {"min_word_length": "3"}
    )
    requests = [
        ScoreRequest("r1", "Which lens suits night photography?", "Any phone works."),
        ScoreRequest(
            "r1", "Which lens suits night photography?", "A fast lens for night photography."
        ),
    ]
    low, high = scorer.score(requests)
    assert low == 0.0
    assert high == 0.6  # lens, night, photography of {which, lens, suits, night, photography}
    assert scorer.score(requests[::-1]) == [high, low]


def _record(rid: str, n_posts: int) -> Record:
    posts = tuple(
        ProfileItem(id=f"{rid}-p{i}", category="c", text=f"post {i}") for i in range(n_posts)
    )
    return Record(id=rid, question="q?", profile=posts, chosen="a", rejected="b", narrative="n",
                  rubric_aspects=())


def test_last_posts_builder_keeps_the_last_k_in_order() -> None:
    builder = PluginRegistry(env=ONLY_ME).build("profile-builder", "last-posts", {"k": 2})
    views = builder.build([_record("a", 3), _record("b", 1), _record("c", 0)])
    assert [tuple(p.id for p in v.items) for v in views] == [("a-p1", "a-p2"), ("b-p0",), ()]
    assert views[0].text == "Post 1 (Category: c): post 1\n\nPost 2 (Category: c): post 2"
    assert views[0].builder == "last-posts(k=2)" and views[2].text == ""
    from prbench.api import OptionsError

    with pytest.raises(OptionsError, match=r"option 'k' must be >= 1, <= 1048576, got 0"):
        PluginRegistry(env=ONLY_ME).build("profile-builder", "last-posts", {"k": 0})


def test_plugin_task_runs_with_the_shared_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The task folder outside prbench's tasks/: one `class:` line brings the shared settings."""
    from prbench.testing import reset_registry, reset_task_state, run_cli

    monkeypatch.setenv("PRBENCH_LOAD_PLUGINS", "template")
    reset_registry()
    reset_task_state()
    # a scorer that reads profiles (the default), so the samples show the profile it saw
    code = run_cli(["eval", "--tasks", "template_sample_last_posts",
                 "--model_args", "scorer=question-overlap",
                 "--limit", "3", "--output_path", str(tmp_path / "out"), "--log_samples",
                 "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    (path,) = (tmp_path / "out").rglob("results_*.json")
    results = json.loads(path.read_text())
    values = results["results"]["template_sample_last_posts"]
    assert {"acc,none", "tie,none", "margin,none", "invalid,none"} <= set(values)
    assert "profile last-posts(k=2)" in out
    (samples,) = path.parent.glob("samples_template_sample_last_posts_*.jsonl")
    row = json.loads(samples.read_text().splitlines()[0])
    assert row["doc"]["profile_builder"] == "last-posts(k=2)"
    assert row["doc"]["profile_text"].startswith("Post 1 (Category: ")
    assert len(row["doc"]["profile_post_ids"]) == min(2, row["doc"]["n_posts"])
    reset_registry()
