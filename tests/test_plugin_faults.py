"""A faulty plugin is named in one ``error:`` line, never a traceback, and costs no scored work.

The plugin-fault corpus: throwaway ``--plugin`` files whose scorer raises or returns the wrong
thing (too few or too many scores, strings, bools, ``None``, lists) and whose profile builder
returns garbage (``None``, strings, wrong counts, views with a text that is not a string, items
that are not posts, token counts that are not whole numbers, ...). Each is checked where the
check lives (the scorer runtime, ``build_views``) and some through the commands users run
(``prbench eval``, ``prbench bon``, plain ``lm_eval --model prbench``). Also here: strict JSON
output, option text kept exact, per-domain rows for custom data, qualified ids in Best-of-N,
``--use_cache`` refused, unreadable task YAMLs named, bad ``--limit``/``--metadata`` values.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sysconfig
import textwrap
from pathlib import Path
from typing import Any

import pytest

from prbench.harness import tasks
from prbench.plugins import PluginRegistry
from prbench.profiles.base import ProfileBuilderFaultError, ProfileView, build_views
from prbench.records import ProfileItem, load_records
from prbench.scoring.base import ScoreRequest, ScorerFaultError, check_scores
from prbench.scoring.runtime import build_runtime
from tests._harness_fixtures import PYTHON, REPO, run_eval, subprocess_env

GROUP = "personalized_rewardbench_sample_noprofile"
CUSTOM = "personalized_rewardbench_custom_noprofile"

FAULTY = '''
import dataclasses
import json
import math
import os

import numpy as np

from prbench import hookimpl
from prbench.profiles.base import ProfileView
from prbench.records import ProfileItem


@dataclasses.dataclass(frozen=True)
class ScorerOptions:
    mode: str = "ok"
    fail_after: int = -1  # calls that succeed before the fault (-1: never fail)
    log: str = ""


class Faulty:
    """Length in characters, or one of many faults (``mode``) after ``fail_after`` calls."""

    def __init__(self, options):
        self.options = options
        self.calls = 0

    def fingerprint(self):
        return "faulty-v1"  # faults do not change the scores it does give

    def score(self, requests):
        self.calls += 1
        if self.options.log:
            with open(self.options.log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(len(requests)) + "\\n")
        good = [float(len(r.response)) for r in requests]
        if self.options.fail_after < 0 or self.calls <= self.options.fail_after:
            return good
        mode = self.options.mode
        if mode == "raise":
            raise ZeroDivisionError("model exploded\\non two lines")
        if mode == "short":
            return good[:-1]
        if mode == "long":
            return good + [1.0]
        if mode == "string-number":
            return ["1.5" for _ in requests]
        if mode == "bool":
            return [True for _ in requests]
        if mode == "none":
            return None
        if mode == "string":
            return "1.5"
        if mode == "nested":
            return [[s] for s in good]
        if mode == "nan":
            return [math.nan for _ in requests]
        if mode == "numpy":
            return list(np.asarray(good, dtype=np.float32))
        return good


@dataclasses.dataclass(frozen=True)
class EchoOptions:
    revision: str = ""
    kind: str = ""
    n: int = 0
    ratio: float = 0.0


class Echo:
    """A constant scorer whose options are recorded in the manifest."""

    def __init__(self, options):
        self.options = options

    def score(self, requests):
        return [1.0 for _ in requests]


@dataclasses.dataclass(frozen=True)
class BuilderOptions:
    mode: str = "ok"


def _post(record):
    p = record.profile[0]
    return ProfileItem(id=p.id, category=p.category, text=p.text)


class Garbage:
    """A profile builder returning one kind of garbage (``mode``)."""

    def __init__(self, options):
        self.options = options

    def build(self, records):
        mode = self.options.mode
        ok = [ProfileView(text=r.profile[0].text, items=(_post(r),), n_tokens=3, builder="g")
              for r in records]
        if mode == "raise":
            raise KeyError("profile")
        if mode == "none":
            return None
        if mode == "string":
            return "a profile"
        if mode == "strings":
            return ["a profile" for _ in records]
        if mode == "short":
            return ok[:-1]
        if mode == "dict":
            return [{"text": "x"} for _ in records]
        if mode == "text-list":
            return [ProfileView(text=["a", "b"]) for _ in records]
        if mode == "items-strings":
            return [ProfileView(text="x", items=("post 1", "post 2")) for _ in records]
        if mode == "tokens-string":
            return [ProfileView(text="x", n_tokens="12") for _ in records]
        if mode == "tokens-float":
            return [ProfileView(text="x", n_tokens=12.5) for _ in records]
        if mode == "tokens-negative":
            return [ProfileView(text="x", n_tokens=-1) for _ in records]
        if mode == "builder-none":
            return [ProfileView(text="x", builder=None) for _ in records]
        return ok


@hookimpl
def register_scorers(register):
    register("faulty", Faulty, options=ScorerOptions, description="test: faults on demand")
    register("echo", Echo, options=EchoOptions, description="test: records its options")
    register("length", Faulty, options=ScorerOptions, description="test: clashes with prbench's")


@hookimpl
def register_profile_builders(register):
    register("garbage", Garbage, options=BuilderOptions, description="test: garbage views")
'''

SCORER = "scorer 'faulty/faulty' (plugin 'faulty')"
BUILDER = "profile builder 'faulty/garbage' (plugin 'faulty')"


@pytest.fixture(autouse=True)
def _no_stale_log_handlers() -> None:
    """Drop log handlers bound to an earlier test's captured (now closed) stderr.

    lm-eval's ``setup_logging`` binds a handler to the ``sys.stderr`` of the run that called it;
    in a later in-process run its writes fail with a logging traceback that is not the command's.
    """
    import logging

    for name in ("", "lm_eval"):
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            if getattr(getattr(handler, "stream", None), "closed", False):
                logger.removeHandler(handler)


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    """The faulty plugin as a ``--plugin`` file (its stem, ``faulty``, names the plugin)."""
    path = tmp_path / "faulty.py"
    path.write_text(FAULTY, encoding="utf-8")
    tasks.reset()
    yield path
    tasks.reset()


@pytest.fixture
def registry(plugin: Path) -> PluginRegistry:
    """A registry with the built-ins and the faulty plugin."""
    return PluginRegistry(plugin_files=[str(plugin)])


def _requests(n: int) -> list[ScoreRequest]:
    return [
        ScoreRequest(record_id=f"r{i // 2}", question=f"q{i // 2}", response="x" * (i + 1))
        for i in range(n)
    ]


def _one_error_line(err: str) -> str:
    """The single ``error:`` line of a command's stderr (and no traceback)."""
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err[-3000:]
    return lines[0]


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
    from prbench.cli import user_errors

    options = {"mode": mode, "fail_after": 0, "cache": False}
    with (
        build_runtime("faulty/faulty", options, registry=registry, progress=False) as rt,
        pytest.raises(ScorerFaultError) as info,
    ):
        rt.score(_requests(4))
    message = str(info.value)
    assert message.startswith(SCORER) and SCORER_FAULTS[mode] in message, message
    assert "\n" not in message
    assert isinstance(info.value, user_errors())  # shown as one line by every command


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
    from prbench.cli import user_errors

    component = registry.get("profile-builder", "garbage")
    what = f"profile builder {component.qualified_id!r} (plugin {component.plugin!r})"
    records = load_records("sample")[:2]
    with pytest.raises(ProfileBuilderFaultError) as info:
        build_views(component.build({"mode": mode}), records, what)
    message = str(info.value)
    assert message.startswith(BUILDER) and BUILDER_FAULTS[mode] in message, message
    assert isinstance(info.value, user_errors()) and isinstance(info.value, ValueError)


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
    plugin: Path, capsys: pytest.CaptureFixture[str], scorer_args: str, expected: str
) -> None:
    code, _, err = run_eval(
        ["--plugin", str(plugin), "eval", "--tasks", GROUP, "--limit", "2", "--model_args",
         f"scorer=faulty,{scorer_args},fail_after=0,cache=false"],
        capsys,
    )
    assert code == 1
    line = _one_error_line(err)
    assert line.startswith(f"error: {SCORER}") and expected in line, line


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("none", "returned None (NoneType), not a list of 15 ProfileView"),
        ("items-strings", "record 'ae-01': view.items[0] must be a ProfileItem"),
        ("tokens-string", "record 'ae-01': view.n_tokens must be a whole number"),
    ],
)
def test_eval_with_a_garbage_profile_builder(
    plugin: Path, capsys: pytest.CaptureFixture[str], mode: str, expected: str
) -> None:
    meta = json.dumps({"prbench_profile": "garbage", "prbench_profile_options": {"mode": mode}})
    code, _, err = run_eval(
        ["--plugin", str(plugin), "eval", "--tasks", "personalized_rewardbench_sample",
         "--limit", "1", "--model_args", "scorer=constant", "--metadata", meta],
        capsys,
    )
    assert code == 1
    line = _one_error_line(err)
    assert line.startswith(f"error: {BUILDER}") and expected in line, line


def test_bon_with_a_garbage_profile_builder(
    plugin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_eval(
        ["--plugin", str(plugin), "bon", "--scorer", "constant", "--profile", "faulty/garbage",
         "--profile-options", '{"mode": "dict"}', "-o", str(tmp_path / "bon")],
        capsys,
    )
    assert code == 1
    assert _one_error_line(err).startswith(f"error: {BUILDER}, record 'ae-01': returned")


def test_eval_subprocess_fault_keeps_cached_chunks(plugin: Path, tmp_path: Path) -> None:
    """``prbench eval`` in a fresh process: one line, exit 1, the first chunks in the cache."""
    db = tmp_path / "scores.sqlite"
    log = tmp_path / "calls.jsonl"
    args = ["--tasks", GROUP, "--limit", "2", "--model_args",
            f"scorer=faulty,mode=raise,fail_after=2,chunk_size=2,cache_path={db},log={log}"]
    proc = subprocess.run(
        [PYTHON, "-m", "prbench.cli", "--plugin", str(plugin), "eval", *args],
        env=subprocess_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    line = _one_error_line(proc.stderr)
    assert line.startswith(f"error: {SCORER} failed on 2 request(s)"), line
    assert "the 4 scores computed before it are kept in the score cache" in line
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM scores").fetchone()[0] == 4
    # the rerun (no fault) reuses them: only the 8 missing answers reach the scorer
    log.unlink()
    rerun = [a.replace("fail_after=2", "fail_after=-1") for a in args]
    proc = subprocess.run(
        [PYTHON, "-m", "prbench.cli", "--plugin", str(plugin), "eval", *rerun],
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
    line = _one_error_line(proc.stderr)
    assert line == (
        "error: scorer 'faulty/faulty' (plugin 'faulty') returned True (bool) for request 0: a "
        "score must be a real number (int or float; nan marks a missing verdict), never a bool "
        "or a string"
    )


def test_corrupt_score_cache_is_one_line(
    plugin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "scores.sqlite"
    db.write_bytes(b"this is not a database" * 100)
    code, _, err = run_eval(
        ["--plugin", str(plugin), "eval", "--tasks", GROUP, "--limit", "1", "--model_args",
         f"scorer=faulty,cache_path={db}"],
        capsys,
    )
    assert code == 1
    line = _one_error_line(err)
    assert str(db) in line and "cache=false" in line, line
    code, _, err = run_eval(
        ["--plugin", str(plugin), "bon", "--scorer", f"faulty:cache_path={db}", "--profile",
         "none", "-o", str(tmp_path / "bon")],
        capsys,
    )
    assert code == 1 and str(db) in _one_error_line(err)


# -- strict JSON -----------------------------------------------------------------------------------


def _strict_load(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"bare {constant} in a JSON file")

    return json.loads(text, parse_constant=refuse)


def test_strict_json_round_trip() -> None:
    from prbench.analysis.strict_json import dumps, restore, strict

    data = {"margin": math.nan, "scores": [1.0, math.inf, [2.0, -math.inf]], "n": 3, "ok": True}
    text = dumps(data)
    written = _strict_load(text)
    assert written["margin"] is None and written["margin_nonfinite"] == "NaN"
    assert written["scores"] == [1.0, None, [2.0, None]]
    assert written["scores_nonfinite"] == {"1": "Infinity", "2.1": "-Infinity"}
    back = restore(written)
    assert math.isnan(back["margin"]) and back["scores"][1] == math.inf
    assert back["scores"][2][1] == -math.inf and set(back) == set(data)
    assert strict({"a": 1.5}) == {"a": 1.5}
    import numpy as np

    numpy_values = {"f": np.float32(0.5), "i": np.int64(3), "b": np.bool_(True)}
    assert _strict_load(dumps(numpy_values, default=str)) == {"f": 0.5, "i": 3, "b": True}


def test_results_samples_and_manifest_are_strict_json(
    plugin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, _, err = run_eval(
        ["--plugin", str(plugin), "eval", "--tasks", GROUP, "--limit", "2", "--max-invalid", "1",
         "--model_args", "scorer=faulty,mode=nan,fail_after=0", "--log_samples",
         "--output_path", str(out)],
        capsys,
    )
    assert code == 0, err[-2000:]
    files = sorted(out.rglob("*.json*"))
    assert {f.name.split("_")[0] for f in files} == {"results", "prbench", "samples"}
    for f in files:
        for line in f.read_text(encoding="utf-8").splitlines() if f.suffix == ".jsonl" else [
            f.read_text(encoding="utf-8")
        ]:
            _strict_load(line)
    [results_file] = out.rglob("results_*.json")
    task = _strict_load(results_file.read_text())["results"][
        "personalized_rewardbench_sample_art_and_entertainment_noprofile"
    ]
    assert task["margin,none"] is None and task["margin,none_nonfinite"] == "NaN"
    assert task["invalid,none"] == 1.0
    from prbench.analysis.runs import read_json

    assert math.isnan(read_json(results_file)["results"][
        "personalized_rewardbench_sample_art_and_entertainment_noprofile"]["margin,none"])


# -- option text, qualified ids, refused flags, task files -----------------------------------------


def test_declared_str_options_keep_the_users_text(
    plugin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, _, err = run_eval(
        ["--plugin", str(plugin), "eval", "--tasks", GROUP, "--limit", "1", "--output_path",
         str(out), "--model_args", "scorer=echo,revision=00123456,kind=1e3,n=0012,ratio=1e3"],
        capsys,
    )
    assert code == 0, err[-2000:]
    [manifest] = out.rglob("prbench_manifest_*.json")
    options = json.loads(manifest.read_text())["scorer"]["options"]
    assert options == {"revision": "00123456", "kind": "1e3", "n": 12, "ratio": 1000.0}


def test_metadata_revision_keeps_the_users_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_eval(
        ["eval", "--tasks", CUSTOM, "--model_args", "scorer=constant", "--metadata",
         "prbench_data=someone/dataset", "prbench_revision=00123456"],
        capsys,
    )
    assert code == 1  # offline: the hub data cannot load, and the message shows the revision
    line = _one_error_line(err)
    assert "'someone/dataset' (revision 00123456)" in line, line
    from prbench.harness.lm_eval_args import restore_option_text

    argv = ["--model", "prbench", "--metadata", "prbench_revision=00123456"]
    kwargs = {"prbench_revision": 123456, "prbench_domain": "*"}
    assert restore_option_text(kwargs, argv, flags=("metadata", "model_args")) == {
        "prbench_revision": "00123456", "prbench_domain": "*"}


def test_plain_lm_eval_model_args_keep_the_users_text() -> None:
    from prbench.harness.lm_eval_args import model_args_text, restore_option_text

    argv = ["run", "--model", "prbench", "--model_args", "revision=00123456,kind=1e3",
            "--model_args", "label='0.50'", "--tasks", GROUP]
    assert model_args_text(argv) == {"revision": "00123456", "kind": "1e3", "label": "0.50"}
    typed = {"revision": 123456, "kind": 1000.0, "label": "0.50", "set_in_code": 7}
    assert restore_option_text(typed, argv) == {
        "revision": "00123456", "kind": "1e3", "label": "0.50", "set_in_code": 7,
    }
    # a JSON object keeps its own types
    as_json = ["--model", "prbench", "--model_args", '{"revision": 123}']
    assert restore_option_text({"revision": 123}, as_json) == {"revision": 123}


def test_lm_create_from_arg_string_keeps_text(plugin: Path) -> None:
    from prbench.harness.lm import PRBenchLM
    from prbench.plugins import get_registry

    get_registry([str(plugin)])
    lm = PRBenchLM.create_from_arg_string("scorer=echo,revision=00123456,kind=1e3,n=7")
    assert (lm.options.revision, lm.options.kind, lm.options.n) == ("00123456", "1e3", 7)


def test_bon_with_a_qualified_id_when_two_plugins_register_it(
    plugin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bon"
    code, _, err = run_eval(
        ["--plugin", str(plugin), "bon", "--scorer", "prbench/length", "--profile", "none",
         "--resamples", "50", "-o", str(out)],
        capsys,
    )
    assert code == 0, err[-2000:]
    result = _strict_load((out / "bon_results.json").read_text())
    assert result["scorers"]["prbench/length"]["qualified_id"] == "prbench/length"
    assert "length" in result["baselines"]  # prbench's own baseline, asked for qualified
    code, _, err = run_eval(
        ["--plugin", str(plugin), "bon", "--scorer", "length", "--profile", "none",
         "-o", str(out)],
        capsys,
    )
    assert code == 1 and "'length' is ambiguous" in _one_error_line(err)


def test_use_cache_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_eval(
        ["eval", "--tasks", GROUP, "--model_args", "scorer=constant", "--use_cache",
         str(tmp_path / "cache")],
        capsys,
    )
    assert code == 1
    line = _one_error_line(err)
    assert "--use_cache is refused" in line and "pickles" in line and "cache_path=" in line
    assert not list(tmp_path.glob("cache*"))
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "`--use_cache`, refused" in readme


def test_plain_lm_eval_use_cache_is_refused_before_the_cache_opens() -> None:
    from prbench.harness.lm_eval_args import check_no_use_cache
    from prbench.options import OptionsError

    for flag in (["--use_cache", "c"], ["--use_c", "c"], ["-c", "c"]):
        with pytest.raises(OptionsError, match="--use_cache is refused"):
            check_no_use_cache(["--model", "prbench", "--tasks", GROUP, *flag])
    check_no_use_cache(["--model", "prbench", "--tasks", GROUP])  # no flag, no error


def test_plain_lm_eval_limit_zero_gets_the_fix() -> None:
    from prbench.harness.bridge import lm_eval_error_fix

    fixed = lm_eval_error_fix(ValueError("task.build_requests() did not find any docs!"))
    assert fixed is not None and "--limit must be above 0" in fixed


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--limit", "0"], "--limit 0 leaves no pair to evaluate"),
        (["--limit", "-3"], "--limit -3 leaves no pair to evaluate"),
        (["--metadata", '{"prbench_data": sample}'],
         "--metadata: invalid JSON at line 1 column 18 (character 17): Expecting value"),
        (['--model_args={"scorer": constant}'],
         "--model_args: invalid JSON at line 1 column 12 (character 11): Expecting value"),
    ],
)
def test_bad_limit_and_json_values_are_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    code, _, err = run_eval(["eval", "--tasks", GROUP, *argv], capsys)
    assert code == 1
    assert _one_error_line(err).startswith(f"error: {expected}")


def test_unreadable_task_yaml_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "ptasks"
    folder.mkdir()
    (folder / "good.yaml").write_text(
        "class: !function prbench.harness.plugin_task.PersonalizedRewardBenchTask\n"
        "task: taskplug_sample_noprofile\ndataset_kwargs:\n  prbench_domain: '*'\n"
        "  prbench_condition: noprofile\n  prbench_default_data: sample\n"
    )
    (folder / "bad.yaml").write_text(
        "task: taskplug_bad\nextra: !!python/object/apply:os.system ['echo pwned']\n"
    )
    plugin = tmp_path / "taskplug.py"
    plugin.write_text(textwrap.dedent(f"""
        from prbench import hookimpl

        @hookimpl
        def register_task_dirs(register):
            register({str(folder)!r})
    """))
    from prbench.harness.bridge import unreadable_task_files

    [(path, reason)] = unreadable_task_files([str(folder)])
    assert path.name == "bad.yaml" and reason.startswith("ConstructorError: could not determine")
    code, _, err = run_eval(
        ["--plugin", str(plugin), "eval", "--tasks", "taskplug_bad", "--model_args",
         "scorer=constant"],
        capsys,
    )
    assert code == 1
    warning = [line for line in err.splitlines() if "bad.yaml" in line]
    assert len(warning) == 1 and "python/object/apply:os.system" in warning[0]
    assert warning[0].startswith(f"prbench: warning: task file {folder / 'bad.yaml'} is skipped")
    assert "Tasks not found: taskplug_bad" in _one_error_line(err)


# -- per-domain rows for custom data --------------------------------------------------------------


def test_custom_data_keeps_per_domain_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests._records_fixtures import record, write_jsonl

    folder = tmp_path / "data"
    folder.mkdir()
    longer = "a chosen answer that is clearly the longer of the two"
    # the length scorer gets Society right 4/4 and Lifestyle 0/2: micro 4/6, macro 1/2
    write_jsonl(folder / "Society_and_Culture.jsonl",
                [record(id=f"s{i}", chosen=longer, rejected="short") for i in range(4)])
    write_jsonl(folder / "Lifestyle_and_Personal_Development.jsonl",
                [record(id=f"l{i}", chosen="short", rejected=longer) for i in range(2)])
    out = tmp_path / "out"
    code, stdout, err = run_eval(
        ["eval", "--tasks", CUSTOM, "--model_args", "scorer=length", "--output_path", str(out),
         "--metadata", json.dumps({"prbench_data": str(folder)})],
        capsys,
    )
    assert code == 0, err[-2000:]
    [results_file] = out.rglob("results_*.json")
    results = json.loads(results_file.read_text())
    assert results["results"][CUSTOM]["domains,none"] == {
        "Lifestyle_and_Personal_Development": {
            "n": 2, "correct": 0, "ties": 0, "invalid": 0, "length_correct": 0},
        "Society_and_Culture": {"n": 4, "correct": 4, "ties": 0, "invalid": 0,
                                "length_correct": 4},
    }
    assert "acc_macro,none" not in results["results"][CUSTOM]  # it would only repeat acc
    rows = {line.split()[0]: line.split() for line in stdout.splitlines() if line.startswith("  ")}
    assert rows["Society_and_Culture"][1:3] == ["4", "1.000"]
    assert rows["Lifestyle_and_Personal_Development"][1:3] == ["2", "0.000"]
    assert rows["micro"][2:4] == ["6", "0.667"] and rows["macro"][2:4] == ["6", "0.500"]
    assert "|domains" not in stdout  # the counts are the summary's, not lm-eval's table's
    [manifest] = out.rglob("prbench_manifest_*.json")
    [section] = json.loads(manifest.read_text())["summary"]["sections"]
    assert section["title"] == CUSTOM
    assert [t["domain"] for t in section["tasks"]] == [
        "Lifestyle_and_Personal_Development", "Society_and_Culture"]
    assert section["accuracy"]["macro"]["value"] == pytest.approx(0.5)


def test_the_qualified_default_builder_keeps_the_tasks_defaults() -> None:
    task = {"prbench_domain": "*", "prbench_condition": "profile",
            "prbench_default_data": "sample", "prbench_default_profile_k": 10,
            "prbench_default_profile_options": {"model": "contriever"}}
    bare = tasks.parse_request({**task, "prbench_profile": "dense"})
    qualified = tasks.parse_request({**task, "prbench_profile": "prbench/dense"})
    assert bare.builder_options == qualified.builder_options == {"model": "contriever", "k": 10}
