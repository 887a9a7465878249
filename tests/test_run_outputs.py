"""What runs and results look like from outside: strict JSON, option text, ids, flags, tasks.

Strict JSON in every file prbench writes (NaN as null plus a note), option and ``--metadata``
text kept exactly as typed (a ``str`` option keeps ``00123456``), qualified ids in Best-of-N when
two plugins register one id, lm-eval's ``--use_cache`` refused, unreadable task YAMLs named, bad
``--limit``/``--metadata`` values as one line, and per-domain rows for custom data.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest

from prbench.harness import task_options
from tests._faults_fixtures import (
    CUSTOM,
    GROUP,
    one_error_line,
    strict_load,
)
from tests._harness_fixtures import REPO, run_eval

# -- strict JSON -----------------------------------------------------------------------------------


def test_strict_json_round_trip() -> None:
    from prbench.strict_json import dumps, restore, strict

    data = {"margin": math.nan, "scores": [1.0, math.inf, [2.0, -math.inf]], "n": 3, "ok": True}
    text = dumps(data)
    written = strict_load(text)
    assert written["margin"] is None and written["margin_nonfinite"] == "NaN"
    assert written["scores"] == [1.0, None, [2.0, None]]
    assert written["scores_nonfinite"] == {"1": "Infinity", "2.1": "-Infinity"}
    back = restore(written)
    assert math.isnan(back["margin"]) and back["scores"][1] == math.inf
    assert back["scores"][2][1] == -math.inf and set(back) == set(data)
    assert strict({"a": 1.5}) == {"a": 1.5}
    import numpy as np

    numpy_values = {"f": np.float32(0.5), "i": np.int64(3), "b": np.bool_(True)}
    assert strict_load(dumps(numpy_values, default=str)) == {"f": 0.5, "i": 3, "b": True}


def test_results_samples_and_manifest_are_strict_json(
    faulty_plugin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, _, err = run_eval(
        ["--plugin", str(faulty_plugin), "eval", "--tasks", GROUP, "--limit", "2",
         "--max-invalid", "1", "--model_args", "scorer=faulty,mode=nan,fail_after=0",
         "--log_samples", "--output_path", str(out)],
        capsys,
    )
    assert code == 0, err[-2000:]
    files = sorted(out.rglob("*.json*"))
    assert {f.name.split("_")[0] for f in files} == {"results", "prbench", "samples"}
    for f in files:
        for line in f.read_text(encoding="utf-8").splitlines() if f.suffix == ".jsonl" else [
            f.read_text(encoding="utf-8")
        ]:
            strict_load(line)
    [results_file] = out.rglob("results_*.json")
    task = strict_load(results_file.read_text())["results"][
        "personalized_rewardbench_sample_art_and_entertainment_noprofile"
    ]
    assert task["margin,none"] is None and task["margin,none_nonfinite"] == "NaN"
    assert task["invalid,none"] == 1.0
    from prbench.analysis.runs import read_json

    assert math.isnan(read_json(results_file)["results"][
        "personalized_rewardbench_sample_art_and_entertainment_noprofile"]["margin,none"])


# -- option text, qualified ids, refused flags, task files -----------------------------------------


def test_declared_str_options_keep_the_users_text(
    faulty_plugin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, _, err = run_eval(
        ["--plugin", str(faulty_plugin), "eval", "--tasks", GROUP, "--limit", "1", "--output_path",
         str(out), "--model_args", "scorer=echo,revision=00123456,kind=1e3,n=0012,ratio=1e3"],
        capsys,
    )
    assert code == 0, err[-2000:]
    [manifest] = out.rglob("prbench_manifest_*.json")
    options = json.loads(manifest.read_text())["scorer"]["options"]
    assert options == {"revision": "00123456", "kind": "1e3", "n": 12, "ratio": 1000.0,
                       "pretrained": ""}


def test_metadata_revision_keeps_the_users_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_eval(
        ["eval", "--tasks", CUSTOM, "--model_args", "scorer=constant", "--metadata",
         "prbench_data=someone/dataset", "prbench_revision=00123456"],
        capsys,
    )
    assert code == 1  # offline: the hub data cannot load, and the message shows the revision
    line = one_error_line(err)
    assert "someone/dataset" in line and "(revision 00123456)" in line, line
    from prbench.harness.eval_options import json_flag_argv

    argv = ["--model", "prbench", "--metadata", "prbench_revision=00123456", "--limit", "1"]
    assert json_flag_argv(argv) == ["--model", "prbench", "--metadata",
                                    '{"prbench_revision": "00123456"}', "--limit", "1"]


def test_plain_lm_eval_model_args_keep_the_users_text() -> None:
    import json

    from prbench.harness.eval_options import json_flag_argv

    argv = ["run", "--model", "prbench", "--model_args", "revision=00123456,kind=1e3",
            "--model_args", "label='0.50'", "user_format={question}", "--tasks", GROUP]
    out = json_flag_argv(argv)
    assert out[:3] == ["run", "--model", "prbench"] and out[5:] == ["--tasks", GROUP]
    assert json.loads(out[4]) == {"revision": "00123456", "kind": "1e3", "label": "0.50",
                                  "user_format": "{question}"}
    # a JSON object keeps its own types; an abbreviated flag is found too
    as_json = json_flag_argv(["--model", "prbench", "--model_arg", '{"revision": 123}'])
    assert as_json == ["--model", "prbench", "--model_args", '{"revision": 123}']


def test_lm_create_from_arg_string_keeps_text(faulty_plugin: Path) -> None:
    from prbench.harness.lm import PRBenchLM
    from prbench.plugins import get_registry

    get_registry([str(faulty_plugin)])
    lm = PRBenchLM.create_from_arg_string("scorer=echo,revision=00123456,kind=1e3,n=7")
    assert (lm.options.revision, lm.options.kind, lm.options.n) == ("00123456", "1e3", 7)


def test_bon_with_a_qualified_id_when_two_plugins_register_it(
    faulty_plugin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bon"
    code, _, err = run_eval(
        ["--plugin", str(faulty_plugin), "bon", "--model_args", "scorer=prbench/length",
         "--profile_args", "builder=none", "--resamples", "50", "-o", str(out)],
        capsys,
    )
    assert code == 0, err[-2000:]
    result = strict_load((out / "bon_results.json").read_text())
    assert result["scorers"]["prbench/length"]["qualified_id"] == "prbench/length"
    assert "length" in result["baselines"]  # prbench's own baseline, asked for qualified
    code, _, err = run_eval(
        ["--plugin", str(faulty_plugin), "bon", "--model_args", "scorer=length",
         "--profile_args", "builder=none", "-o", str(out)],
        capsys,
    )
    assert code == 1 and "'length' is ambiguous" in one_error_line(err)


def test_use_cache_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_eval(
        ["eval", "--tasks", GROUP, "--model_args", "scorer=constant", "--use_cache",
         str(tmp_path / "cache")],
        capsys,
    )
    assert code == 2
    line = one_error_line(err)
    assert "does not take --use_cache (refused" in line and "pickles" in line
    assert "cache_path=" in line
    assert not list(tmp_path.glob("cache*"))
    usage = (REPO / "docs" / "usage.md").read_text(encoding="utf-8")
    assert "`--use_cache`, refused" in usage


def test_plain_lm_eval_use_cache_is_refused_before_the_cache_opens() -> None:
    from prbench.harness.lm_eval_compat import check_plain_argv

    for flag in (["--use_cache", "c"], ["--use_c", "c"], ["-c", "c"]):
        assert "--use_cache is refused" in str(
            check_plain_argv(["--model", "prbench", "--tasks", GROUP, *flag]))
    assert check_plain_argv(["--model", "prbench", "--tasks", GROUP]) is None


def test_plain_lm_eval_limit_zero_gets_the_fix() -> None:
    from prbench.harness.lm_eval_compat import lm_eval_error_fix

    fixed = lm_eval_error_fix(ValueError("task.build_requests() did not find any docs!"), [])
    assert fixed is not None and "--limit must be above 0" in fixed


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--limit", "0"], "prbench eval: argument -L/--limit: 0 leaves no pair to evaluate"),
        (["--limit=-3"], "prbench eval: argument -L/--limit: -3 leaves no pair to evaluate"),
        (["--metadata", '{"prbench_data": sample}'],
         "--metadata: invalid JSON at line 1 column 18 (character 17): Expecting value"),
        (['--model_args={"scorer": constant}'],
         "--model_args: invalid JSON at line 1 column 12 (character 11): Expecting value"),
    ],
)
def test_bad_limit_and_json_values_are_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    try:
        code, _, err = run_eval(["eval", "--tasks", GROUP, *argv], capsys)
    except SystemExit as exc:  # argparse's own usage error
        code, err = int(exc.code or 0), capsys.readouterr().err
    assert code == (2 if "--limit" in expected else 1)
    assert one_error_line(err).startswith(f"error: {expected}")


@pytest.mark.slow
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
    from prbench.harness.lm_eval_compat import unreadable_task_files

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
    assert "unknown task 'taskplug_bad'" in one_error_line(err)


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
    bare = task_options.parse_request({**task, "prbench_profile": "dense"})
    qualified = task_options.parse_request({**task, "prbench_profile": "prbench/dense"})
    assert bare.builder_options == qualified.builder_options == {"model": "contriever", "k": 10}
