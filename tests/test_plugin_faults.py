"""A faulty plugin is named in one ``error:`` line, never a traceback, and costs no scored work.

The plugin-fault corpus: throwaway ``--plugin`` files whose scorer raises or returns the wrong
thing (too few or too many scores, strings, bools, ``None``, lists) and whose profile builder
returns garbage (``None``, strings, wrong counts, views with a text that is not a string, items
that are not posts, token counts that are not whole numbers, ...). Each is checked where the
check lives (the scorer runtime, ``build_views``) and some through the commands users run
(``prbench eval``, ``prbench bon``, plain ``lm_eval --model prbench``), with a damaged score
cache as one more fault. The other user-facing runtime items are in ``test_run_outputs.py``.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sysconfig
from pathlib import Path

import pytest

from prbench.plugins import PluginRegistry
from prbench.profiles.base import ProfileBuilderFaultError, ProfileView, build_views
from prbench.records import ProfileItem, load_records
from prbench.scoring.base import ScoreRequest, ScorerFaultError, check_scores
from prbench.scoring.spec import build_runtime
from tests._faults_fixtures import (
    BUILDER,
    FAULTY,
    GROUP,
    SCORER,
    one_error_line,
)
from tests._harness_fixtures import PYTHON, REPO, run_eval, subprocess_env


@pytest.fixture
def registry(faulty_plugin: Path) -> PluginRegistry:
    """A registry with the built-ins and the faulty plugin."""
    return PluginRegistry(plugin_files=[str(faulty_plugin)])


def _requests(n: int) -> list[ScoreRequest]:
    return [
        ScoreRequest(record_id=f"r{i // 2}", question=f"q{i // 2}", response="x" * (i + 1))
        for i in range(n)
    ]


# -- scorer faults, where the check lives (the runtime) --------------------------------------------

SCORER_FAULTS = {
    "raise": "failed on 4 request(s) (records 'r0', 'r1'): ZeroDivisionError: model exploded "
             "on two lines",
    "short": "returned 3 scores for 4 requests",
    "long": "returned 5 scores for 4 requests",
    "string-number": "returned '1.5' (str) for request 0: a score must be a real number",
    "bool": "returned True (bool) for request 0",
    "none": "returned None (NoneType), not a list of 4 numbers",
    "string": "returned '1.5' (str), not a list of 4 numbers",
    "nested": "returned [1.0] (list) for request 0",
}


@pytest.mark.parametrize("mode", sorted(SCORER_FAULTS))
def test_scorer_fault_is_one_error_naming_plugin_and_component(
    registry: PluginRegistry, mode: str
) -> None:
    from prbench.errors import PrbenchUserError

    options = {"mode": mode, "fail_after": 0, "cache": False}
    with (
        build_runtime("faulty/faulty", options, registry=registry, progress=False) as rt,
        pytest.raises(ScorerFaultError) as info,
    ):
        rt.score(_requests(4))
    message = str(info.value)
    assert message.startswith(SCORER) and SCORER_FAULTS[mode] in message, message
    assert "\n" not in message
    assert isinstance(info.value, PrbenchUserError)  # shown as one line by every command


def test_a_scorer_that_rewrites_its_requests_changes_nothing_else(
    registry: PluginRegistry,
) -> None:
    """``meddle`` rewrites each request it is handed and the profile view the answers of a
    question share (through ``object.__setattr__``; the views are frozen): the next request,
    the next call and the caller's requests still hold what was built."""
    view = ProfileView(text="I bake bread every weekend.")
    reqs = [ScoreRequest(record_id=f"r{i // 2}", question=f"q{i // 2}", response="x" * (i + 1),
                         profile=view) for i in range(4)]
    expected = [float(i + 1 + len(view.text)) for i in range(4)]
    options = {"mode": "meddle", "fail_after": 0, "cache": False, "chunk_size": 2}
    with build_runtime("faulty/faulty", options, registry=registry, progress=False) as rt:
        assert rt.score(reqs) == expected
    with build_runtime("faulty/faulty", options, registry=registry, progress=False) as rt:
        assert rt.score(reqs) == expected  # a later scorer sees the same
    assert view.text == "I bake bread every weekend."
    assert [r.response for r in reqs] == ["x" * (i + 1) for i in range(4)]


def test_nan_numpy_and_tensor_scores_are_numbers() -> None:
    import numpy as np
    import torch

    assert check_scores([1, 2.5, np.float32(0.5), np.float64(3)], 4, "s") == [1.0, 2.5, 0.5, 3.0]
    assert check_scores([torch.tensor(0.25), np.array(2.0)], 2, "s") == [0.25, 2.0]
    assert math.isnan(check_scores([math.nan], 1, "s")[0])  # nan marks "no verdict"
    for bad in ([np.bool_(True)], [torch.tensor([1.0])], [torch.tensor(True)], [b"1"]):
        with pytest.raises(ScorerFaultError, match="a score must be a real number"):
            check_scores(bad, 1, "s")


def test_a_fault_keeps_the_chunks_scored_before_it(
    registry: PluginRegistry, tmp_path: Path
) -> None:
    db = str(tmp_path / "scores.sqlite")
    reqs = _requests(8)  # 4 (question, profile) groups of 2; chunks of 2
    faulty = {"mode": "raise", "fail_after": 2, "cache_path": db, "chunk_size": 2}
    with (
        build_runtime("faulty/faulty", faulty, registry=registry, progress=False) as rt,
        pytest.raises(ScorerFaultError, match="the 4 scores computed before it are kept"),
    ):
        rt.score(reqs)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM scores").fetchone()[0] == 4
    good = {"cache_path": db, "chunk_size": 2}
    with build_runtime("faulty/faulty", good, registry=registry, progress=False) as rt:
        assert rt.score(reqs) == [float(i + 1) for i in range(8)]
        assert rt.stats()["cache_hits"] == 4 and rt.stats()["computed"] == 4


# -- profile-builder garbage, where the check lives (build_views) ----------------------------------

BUILDER_FAULTS = {
    "raise": "failed on 2 record(s): KeyError: 'profile'",
    "none": "returned None (NoneType), not a list of 2 ProfileView",
    "string": "returned 'a profile' (str), not a list of 2 ProfileView",
    "strings": "record 'ae-01': returned 'a profile' (str), not a ProfileView",
    "short": "returned 1 views for 2 records",
    "dict": "record 'ae-01': returned {'text': 'x'} (dict), not a ProfileView",
    "text-list": "record 'ae-01': view.text must be a string, got ['a', 'b'] (list)",
    "items-strings": "record 'ae-01': view.items[0] must be a ProfileItem (the post used), got "
                     "'post 1' (str)",
    "tokens-string": "record 'ae-01': view.n_tokens must be a whole number of at least 0, got "
                     "'12' (str)",
    "tokens-float": "view.n_tokens must be a whole number of at least 0, got 12.5 (float)",
    "tokens-negative": "view.n_tokens must be a whole number of at least 0, got -1 (int)",
    "builder-none": "record 'ae-01': view.builder must be a string, got NoneType",
}


@pytest.mark.parametrize("mode", sorted(BUILDER_FAULTS))
def test_profile_builder_garbage_is_one_error_naming_builder_and_record(
    registry: PluginRegistry, mode: str
) -> None:
    from prbench.errors import PrbenchUserError

    component = registry.get("profile-builder", "garbage")
    what = f"profile builder {component.qualified_id!r} (plugin {component.plugin!r})"
    records = load_records("sample")[:2]
    with pytest.raises(ProfileBuilderFaultError) as info:
        build_views(component.build({"mode": mode}), records, what)
    message = str(info.value)
    assert message.startswith(BUILDER) and BUILDER_FAULTS[mode] in message, message
    assert isinstance(info.value, PrbenchUserError) and isinstance(info.value, ValueError)


def test_a_valid_view_passes(registry: PluginRegistry) -> None:
    records = load_records("sample")[:2]
    views = build_views(registry.build("profile-builder", "garbage"), records, "b")
    assert [v.items[0] for v in views] == [
        ProfileItem(id=r.profile[0].id, category=r.profile[0].category, text=r.profile[0].text)
        for r in records
    ]
    assert all(isinstance(v, ProfileView) for v in views)


# -- through the commands ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scorer_args", "expected"),
    [
        ("mode=raise", "ZeroDivisionError: model exploded on two lines"),
        ("mode=string-number", "returned '1.5' (str) for request 0"),
        ("mode=bool", "returned True (bool) for request 0"),
        ("mode=short", "returned 11 scores for 12 requests"),
    ],
)
def test_eval_with_a_faulty_scorer(
    faulty_plugin: Path, capsys: pytest.CaptureFixture[str], scorer_args: str, expected: str
) -> None:
    code, _, err = run_eval(
        ["--plugin", str(faulty_plugin), "eval", "--tasks", GROUP, "--limit", "2", "--model_args",
         f"scorer=faulty,{scorer_args},fail_after=0,cache=false"],
        capsys,
    )
    assert code == 1
    line = one_error_line(err)
    assert line.startswith(f"error: {SCORER}") and expected in line, line


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        # --limit 1 over the group's three tasks: one build call for the three rows scored
        ("none", "returned None (NoneType), not a list of 3 ProfileView"),
        ("items-strings", "record 'ae-01': view.items[0] must be a ProfileItem"),
        ("tokens-string", "record 'ae-01': view.n_tokens must be a whole number"),
    ],
)
def test_eval_with_a_garbage_profile_builder(
    faulty_plugin: Path, capsys: pytest.CaptureFixture[str], mode: str, expected: str
) -> None:
    meta = json.dumps({"prbench_profile": "garbage", "prbench_profile_options": {"mode": mode}})
    code, _, err = run_eval(
        ["--plugin", str(faulty_plugin), "eval", "--tasks", "personalized_rewardbench_sample",
         # a scorer that reads profiles (none is built for one that does not, e.g. constant)
         "--limit", "1", "--model_args", "scorer=embedding-similarity", "--metadata", meta],
        capsys,
    )
    assert code == 1
    line = one_error_line(err)
    assert line.startswith(f"error: {BUILDER}") and expected in line, line


def test_bon_with_a_garbage_profile_builder(
    faulty_plugin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_eval(
        ["--plugin", str(faulty_plugin), "bon", "--model_args", "scorer=constant",
         "--profile_args", "builder=faulty/garbage,mode=dict", "-o", str(tmp_path / "bon")],
        capsys,
    )
    assert code == 1
    assert one_error_line(err).startswith(f"error: {BUILDER}, record 'ae-01': returned")


@pytest.mark.slow
def test_eval_subprocess_fault_keeps_cached_chunks(faulty_plugin: Path, tmp_path: Path) -> None:
    """``prbench eval`` in a fresh process: one line, exit 1, the first chunks in the cache."""
    db = tmp_path / "scores.sqlite"
    log = tmp_path / "calls.jsonl"
    args = ["--tasks", GROUP, "--limit", "2", "--model_args",
            f"scorer=faulty,mode=raise,fail_after=2,chunk_size=2,cache_path={db},log={log}"]
    proc = subprocess.run(
        [PYTHON, "-m", "prbench.cli", "--plugin", str(faulty_plugin), "eval", *args],
        env=subprocess_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    line = one_error_line(proc.stderr)
    assert line.startswith(f"error: {SCORER} failed on 2 request(s)"), line
    assert "the 4 scores computed before it are kept in the score cache" in line
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM scores").fetchone()[0] == 4
    # the rerun (no fault) reuses them: only the 8 missing answers reach the scorer
    log.unlink()
    rerun = [a.replace("fail_after=2", "fail_after=-1") for a in args]
    proc = subprocess.run(
        [PYTHON, "-m", "prbench.cli", "--plugin", str(faulty_plugin), "eval", *rerun],
        env=subprocess_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sum(json.loads(n) for n in log.read_text().splitlines()) == 8


def _site_with_faulty(tmp_path: Path) -> Path:
    """The faulty plugin installed as an entry-point distribution (for plain ``lm_eval``)."""
    site = tmp_path / "site"
    info = site / "prbench_plugin_faulty-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: prbench-plugin-faulty\n"
                                   "Version: 0.1.0\n")
    (info / "entry_points.txt").write_text("[prbench]\nfaulty = prbench_plugin_faulty\n")
    (site / "prbench_plugin_faulty.py").write_text(FAULTY, encoding="utf-8")
    return site


@pytest.mark.slow
def test_plain_lm_eval_with_a_faulty_scorer(tmp_path: Path) -> None:
    purelib = Path(sysconfig.get_paths()["purelib"])
    if not (purelib / "prbench_lm_eval.pth").exists():
        pytest.skip("prbench's start-up hook is not installed in this interpreter")
    site = _site_with_faulty(tmp_path)
    env = subprocess_env(PYTHONPATH=os.pathsep.join([str(site), str(REPO)]),
                         PRBENCH_LOAD_PLUGINS="faulty")
    env.pop("PRBENCH_DISABLE_PLUGINS", None)
    proc = subprocess.run(
        [PYTHON, "-m", "lm_eval", "--model", "prbench", "--tasks", GROUP, "--limit", "1",
         "--model_args", "scorer=faulty/faulty,mode=bool,fail_after=0,cache=false"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode != 0
    line = one_error_line(proc.stderr)
    assert line == (
        "error: scorer 'faulty/faulty' (plugin 'faulty') returned True (bool) for request 0: a "
        "score must be a real number (int or float; nan marks a missing verdict), never a bool "
        "or a string"
    )


def test_corrupt_score_cache_is_one_line(
    faulty_plugin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "scores.sqlite"
    db.write_bytes(b"this is not a database" * 100)
    code, _, err = run_eval(
        ["--plugin", str(faulty_plugin), "eval", "--tasks", GROUP, "--limit", "1", "--model_args",
         f"scorer=faulty,cache_path={db}"],
        capsys,
    )
    assert code == 1
    line = one_error_line(err)
    assert str(db) in line and "cache=false" in line, line
    code, _, err = run_eval(
        ["--plugin", str(faulty_plugin), "bon", "--model_args", f"scorer=faulty,cache_path={db}",
         "--profile_args", "builder=none", "-o", str(tmp_path / "bon")],
        capsys,
    )
    assert code == 1 and str(db) in one_error_line(err)


