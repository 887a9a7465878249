from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prbench.harness import tasks
from prbench.harness.eval_options import requested_tasks, unknown_task
from tests._harness_fixtures import (
    PYTHON,
    read_log,
    results_and_manifest,
    run,
    run_eval,
    subprocess_env,
    write_plugin,
)
from tests._records_fixtures import record, write_jsonl

#: whole commands end to end (lm-eval runs, subprocesses): `make test-fast` leaves them out
pytestmark = pytest.mark.slow

GROUP = "personalized_rewardbench_sample_noprofile"
DOMAIN_TASKS = [
    f"personalized_rewardbench_sample_{d}_noprofile"
    for d in ("art_and_entertainment", "lifestyle_and_personal_development", "society_and_culture")
]


@pytest.fixture(autouse=True)
def _fresh_task_state() -> None:
    tasks.reset()
    yield
    tasks.reset()


@pytest.fixture
def indexed(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Record the folders every TaskManager indexes."""
    from lm_eval.tasks._index import TaskIndex

    seen: list[list[str]] = []
    build = TaskIndex.build

    def recording(paths: Any, **kwargs: Any) -> Any:
        paths = list(paths)
        seen.append([str(p) for p in paths])
        return build(paths, **kwargs)

    monkeypatch.setattr(TaskIndex, "build", staticmethod(recording))
    return seen


def _eval_group(
    scorer: str, output: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[str, dict[str, Any], dict[str, Any], Path]:
    """``prbench eval`` of GROUP with ``scorer``, checked to succeed.

    Returns:
        (stdout, results, manifest, results file).
    """
    code, out, _ = run_eval(
        ["eval", "--tasks", GROUP, "--model_args", f"scorer={scorer}",
         "--output_path", str(output), *extra],
        capsys,
    )
    assert code == 0
    results, manifest, path = results_and_manifest(output)
    return out, results, manifest, path


def test_task_selection() -> None:
    names = tasks.task_names()
    assert requested_tasks(["a,b", "c"]) == ["a", "b", "c"]
    assert requested_tasks(["a b"]) == ["a b"] and requested_tasks("a, b") == ["a", "b"]
    assert unknown_task(["personalized_rewardbench_sample"], names) is None
    assert unknown_task(["personalized_rewardbench_sample_*"], names) is None
    assert "unknown task 'hellaswag'" in str(
        unknown_task(["personalized_rewardbench_sample", "hellaswag"], names))


def test_constant_scores_zero_with_all_ties(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], indexed: list[list[str]]
) -> None:
    out, results, manifest, path = _eval_group("constant", tmp_path / "out", capsys,
                                               "--show_lm_eval_tables")
    assert path.parent.name == "prbench-constant"  # unnamed runs are named after the scorer
    group = results["results"][GROUP]
    assert group["acc,none"] == 0 and group["tie,none"] == 1 and group["acc_macro,none"] == 0
    for task in DOMAIN_TASKS:
        assert results["results"][task]["acc,none"] == 0.0
        assert results["n-samples"][task]["effective"] == 15
    # the summary follows lm-eval's tables
    assert "prbench summary: scorer constant" in out
    assert "macro (domains)" in out and "95% CI" in out
    assert "Art_and_Entertainment" in out and "[0.000, 0.000]*" in out
    # a zero-width interval is explained; the bootstrap says it is stratified
    assert "* zero-width interval: every pair behind it had the same outcome" in out
    assert "percentile bootstrap stratified by domain" in out
    assert "--limit" not in out
    # lm-eval's tables show acc_macro once per table, on the group's row, not per domain
    macro_rows = [line for line in out.splitlines() if "|acc_macro" in line]
    assert len(macro_rows) == 2  # the group in the tasks table and in the groups table; was 5
    assert group["acc_macro,none"] == 0 and "acc_macro,none" in results["results"][DOMAIN_TASKS[0]]
    # lm-eval's own ~14.7k tasks were not indexed
    import lm_eval.tasks

    builtin = str(Path(lm_eval.tasks.__file__).parent)
    assert indexed and all(builtin not in paths for paths in indexed)
    # the manifest
    assert {"prbench", "lm_eval", "torch", "transformers"} <= set(manifest["versions"])
    assert manifest["scorer"]["id"] == "constant" and manifest["scorer"]["options"] == {
        "value": 0.0
    }
    assert manifest["results_file"] == str(path)
    assert manifest["seeds"]["random_seed"] == 0
    task_info = manifest["tasks"][DOMAIN_TASKS[0]]
    assert task_info["condition"] == "noprofile" and task_info["profile_builder"] == "none"
    assert all(len(d["file_hashes"]) == 3 for d in manifest["data"])
    assert any(p["name"] == "prbench.tasks" for p in manifest["plugins"])
    assert manifest["command"][:2] == ["prbench", "eval"]
    section = manifest["summary"]["sections"][0]
    assert section["title"] == GROUP and section["accuracy"]["micro"]["value"] == 0.0


def test_oracle_upper_bound_and_length_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, results, manifest, _ = _eval_group("oracle-rubric", tmp_path / "oracle", capsys)
    # by default prbench's summary is the one results table: lm-eval's tables are not printed
    assert "prbench summary: scorer oracle-rubric" in out and "percentile bootstrap" in out
    assert "|acc" not in out and "gen_kwargs" not in out
    assert results["results"][GROUP]["acc,none"] >= 0.9
    assert "DIAGNOSTIC" in out and manifest["scorer"]["diagnostic"] is True
    baseline = {
        t["task"]: t["length_acc"] for t in manifest["summary"]["sections"][0]["tasks"]
    }
    tasks.reset()
    _, length_results, _, _ = _eval_group("length", tmp_path / "length", capsys)
    for task in DOMAIN_TASKS:
        assert baseline[task] == pytest.approx(length_results["results"][task]["acc,none"])


def test_limit_and_samples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plugin = write_plugin(tmp_path)
    log = tmp_path / "calls.jsonl"
    argv = [
        "--plugin", str(plugin), "eval", "--tasks", GROUP, "--limit", "2",
        "--model_args", f"scorer=counting,log={log}", "--log_samples",
    ]
    code, out, _ = run_eval([*argv, "--output_path", str(tmp_path / "first")], capsys)
    assert code == 0
    assert "--limit 2: only part of each task was evaluated" in out
    events = read_log(log)
    assert len(events) == 1 and events[0]["n"] == 12  # one batched call: 3 tasks x 2 pairs x 2
    first, manifest, path = results_and_manifest(tmp_path / "first")
    assert manifest["scorer"]["calls"] == 1 and manifest["limit"] == 2
    samples = sorted(path.parent.glob("samples_*.jsonl"))
    assert len(samples) == 3
    assert [line for line in out.splitlines() if line.startswith("samples: ")] == [
        f"samples: {s}" for s in samples
    ]
    rows = [json.loads(line) for line in samples[0].read_text().splitlines()]
    assert len(rows) == 2 and rows[0]["doc"]["profile_builder"] == "none"
    assert {"acc", "tie", "margin"} <= set(rows[0])
    for task in DOMAIN_TASKS:
        assert first["n-samples"][task]["effective"] == 2


def test_any_data_in_the_schema_through_metadata(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    write_jsonl(
        folder / "Society_and_Culture.jsonl",
        [record(id=f"s{i}", chosen=f"A fitting answer number {i}, longer.") for i in range(3)],
    )
    meta = json.dumps({"prbench_data": str(folder)})
    code, _, _ = run_eval(
        ["eval", "--tasks",
         "personalized_rewardbench_sample_society_and_culture_noprofile,"
         "personalized_rewardbench_custom_noprofile",
         "--model_args", "scorer=length", "--metadata", meta,
         "--output_path", str(tmp_path / "out")],
        capsys,
    )
    assert code == 0
    # lm-eval's "--metadata can be passed" hint is not repeated when --metadata was given
    assert not [r for r in caplog.records if "Custom kwargs can be passed" in r.getMessage()]
    results, manifest, _ = results_and_manifest(tmp_path / "out")
    assert results["n-samples"]["personalized_rewardbench_custom_noprofile"]["effective"] == 3
    domain_task = "personalized_rewardbench_sample_society_and_culture_noprofile"
    assert results["n-samples"][domain_task]["effective"] == 3
    assert manifest["tasks"][domain_task]["data"] == str(folder)
    assert all(d["data"] == str(folder) for d in manifest["data"])
    assert list(manifest["data"][0]["file_hashes"]) == [str(folder / "Society_and_Culture.jsonl")]


def test_invalid_data_stops_with_the_validation_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write_jsonl(tmp_path / "Art_and_Entertainment.jsonl", [record(), record(question="")])
    code, _, err = run_eval(
        ["eval", "--tasks", "personalized_rewardbench_custom_noprofile",
         "--model_args", "scorer=length", "--metadata", f"prbench_data={bad}"],
        capsys,
    )
    assert code == 1
    assert f"{bad}:2" in err and "'question'" in err and "duplicate id" in err


def test_clear_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_eval(
        ["eval", "--tasks", "personalized_rewardbench_custom_noprofile",
         "--model_args", "scorer=lenght"],
        capsys,
    )
    assert code == 1 and "did you mean 'length'" in err
    code, _, err = run_eval(
        ["eval", "--tasks", "personalized_rewardbench_art_and_entertainment_noprofile",
         "--model_args", "scorer=length"],
        capsys,
    )
    assert code == 1 and "offline" in err and "prbench_data" in err
    with pytest.raises(SystemExit) as exc:
        run_eval(["eval", "--help"], capsys)
    out = capsys.readouterr().out
    assert exc.value.code == 0 and "--model_args" in out
    assert "plain 'lm_eval --model prbench' takes every lm-eval flag" in " ".join(out.split())


def test_predict_only_is_refused_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_eval(
        ["eval", "--tasks", DOMAIN_TASKS[0], "--model_args", "scorer=length", "--predict_only"],
        capsys,
    )
    assert code == 2 and err.strip() == (
        "error: prbench eval does not take --predict_only (a reward model's scores are its "
        "predictions); plain `lm_eval --model prbench` takes every lm-eval flag")


def test_hf_causal_lm_likelihood_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests._hf_fixtures import build_tiny_model

    model = build_tiny_model(tmp_path / "tiny", kind="causal-lm")
    code, out, _ = run_eval(
        ["eval", "--model", "hf", "--model_args", f"pretrained={model},dtype=float32",
         "--device", "cpu", "--batch_size", "4", "--tasks", GROUP, "--limit", "2",
         "--output_path", str(tmp_path / "out"), "--log_samples"],
        capsys,
    )
    assert code == 0
    results, manifest, path = results_and_manifest(tmp_path / "out")
    assert path.parent.name == str(model).replace("/", "__")
    for task in DOMAIN_TASKS:
        assert results["results"][task]["acc,none"] in (0.0, 0.5, 1.0)
    sample = json.loads(next(path.parent.glob("samples_*.jsonl")).read_text().splitlines()[0])
    loglik = [float(r[0][0]) for r in sample["resps"]]
    assert all(v < 0 for v in loglik)  # real log-likelihoods, not rewards
    assert sample["acc"] == (1.0 if loglik[0] > loglik[1] else 0.0)
    assert manifest["scorer"] is None and manifest["lm_eval_model"] == "hf"
    assert "prbench summary" in out


@pytest.mark.slow
def test_readme_command_with_the_embedding_scorer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's run command (with --limit to keep the test short): dense profile, MiniLM."""
    code, out, _ = run_eval(
        ["eval", "--tasks", "personalized_rewardbench_sample",
         "--model_args", "scorer=embedding-similarity", "--output_path", str(tmp_path / "res"),
         "--limit", "5"],
        capsys,
    )
    assert code == 0
    results, manifest, _ = results_and_manifest(tmp_path / "res")
    assert "prbench summary: scorer embedding-similarity" in out
    assert "personalized_rewardbench_sample: profile dense(k=5)" in out
    for domain in ("Art_and_Entertainment", "Lifestyle_and_Personal_Development",
                   "Society_and_Culture"):
        assert domain in out
    assert 0.0 <= results["results"]["personalized_rewardbench_sample"]["acc,none"] <= 1.0
    builders = {d["profile_builder"]["description"] for d in manifest["data"]}
    assert builders == {"dense(k=5,model=minilm,similarity=dot)"}
    assert manifest["scorer"]["options"]["model"] == "minilm"


def test_misspelt_prbench_task_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.cli import main

    assert main(["eval", "--tasks", "personalized_rewardbench_smaple", "--model_args",
                 "scorer=length"]) == 1
    err = capsys.readouterr().err
    assert "unknown task 'personalized_rewardbench_smaple'" in err
    assert "did you mean 'personalized_rewardbench_sample'" in err
    assert "personalized_rewardbench_sample_noprofile" in err
    assert "art_and_entertainment" not in err.split("groups:")[1]


def test_bootstrap_resamples_are_checked_before_the_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from prbench.cli import main

    for bad in ("0", "-5", "many"):
        with pytest.raises(SystemExit) as exc:
            main(["eval", "--bootstrap-resamples", bad, "--tasks", GROUP,
                  "--model_args", "scorer=length"])
        assert exc.value.code == 2
        assert "--bootstrap_resamples" in capsys.readouterr().err


def test_task_fixed_keys_in_metadata_are_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.cli import main

    code = main(["eval", "--tasks", "personalized_rewardbench_sample", "--model_args",
                 "scorer=length", "--metadata", '{"prbench_condition": "noprofile"}'])
    assert code == 1
    assert "--metadata sets prbench_condition" in capsys.readouterr().err


def test_metadata_hint_only_with_verbosity_info(tmp_path: Path) -> None:
    """lm-eval's --metadata hint and INFO lines: silent under prbench eval, shown with INFO.

    Fresh processes, as a user runs them (lm-eval's log handler writes to the real stderr).
    """
    argv = [PYTHON, "-m", "prbench.cli", "eval", "--tasks", GROUP, "--model_args",
            "scorer=constant", "--limit", "1", "--no_progress"]
    out = run(argv, env=subprocess_env(), cwd=tmp_path)
    assert "Custom kwargs" not in out and " INFO " not in out, out
    assert "prbench summary: scorer constant" in out
    out = run([*argv, "--verbosity", "INFO"], env=subprocess_env(), cwd=tmp_path)
    assert out.count("Custom kwargs can be passed") == 1, out  # lm-eval: once per task
    assert " INFO " in out


def test_argument_errors_are_one_line_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_eval(["eval", "--model_args", "scorer=length"], capsys)
    assert code == 1
    (line,) = err.strip().splitlines()
    assert line.startswith(
        "error: no --tasks given: name the tasks to run, e.g. --tasks "
        "personalized_rewardbench_sample (prbench's groups: "
    )
    assert "personalized_rewardbench_sample_noprofile" in line
    code, _, err = run_eval(
        ["eval", "--tasks", GROUP, "--model_args", "scorer=length", "--log_samples"], capsys
    )
    assert code == 1
    assert err.strip() == (
        "error: --log_samples writes per-pair samples files and needs a folder for them: add "
        "--output_path DIR (e.g. --output_path results)"
    )


def test_user_errors_of_any_command_are_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``prbench`` turns data, option and id errors of every command into ``error:`` + exit 1."""
    import prbench.commands.validate as validate
    from prbench.cli import main
    from prbench.options import OptionsError
    from prbench.plugins import UnknownComponentError
    from prbench.records import DataSourceError, RecordValidationError

    for exc in (
        DataSourceError("data.jsonl: no such file"),
        RecordValidationError("data.jsonl:3: record 'r1': field 'chosen' is missing"),
        OptionsError("scorer 'length': unknown option 'x'"),
        UnknownComponentError("unknown scorer 'x'"),
    ):
        def boom(args: Any, exc: Exception = exc) -> int:
            raise exc

        monkeypatch.setattr(validate, "run", boom)
        assert main(["validate", "sample"]) == 1
        assert capsys.readouterr().err == f"error: {exc}\n"

    def bug(args: Any) -> int:
        raise RuntimeError("a real bug keeps its traceback")

    monkeypatch.setattr(validate, "run", bug)
    with pytest.raises(RuntimeError):
        main(["validate", "sample"])


def test_no_progress_turns_bars_off_for_the_command_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    import prbench.commands.validate as validate
    from prbench.cli import main
    from prbench.progress import progress_enabled

    monkeypatch.setenv("PRBENCH_PROGRESS", "1")
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    seen: dict[str, Any] = {}


    import tqdm.std

    original_init = tqdm.std.tqdm.__dict__["__init__"]

    def record(args: Any) -> int:
        seen["enabled"] = progress_enabled()
        seen["tqdm"] = os.environ.get("TQDM_DISABLE")
        return 0

    monkeypatch.setattr(validate, "run", record)
    assert main(["validate", "sample"]) == 0
    assert seen == {"enabled": True, "tqdm": None}
    assert main(["validate", "--no-progress", "sample"]) == 0
    # prbench's bars off, and the libraries' in child processes (and in this one where tqdm is
    # first imported now) by the variable; nothing of tqdm is replaced
    assert seen == {"enabled": False, "tqdm": "1"}
    assert os.environ["PRBENCH_PROGRESS"] == "1" and "TQDM_DISABLE" not in os.environ
    assert tqdm.std.tqdm.__dict__["__init__"] is original_init


def test_a_requested_bar_is_drawn_whatever_tqdm_was_imported_under(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tqdm first imported under ``TQDM_DISABLE=1`` keeps that default: prbench's bars that
    the user asked for still draw, and a ``TQDM_DISABLE`` the user set turns prbench's off."""
    import functools

    import tqdm.std

    from prbench.progress import progress_bar, progress_enabled

    baked = functools.partialmethod(tqdm.std.tqdm.__dict__["__init__"], disable=True)
    monkeypatch.setattr(tqdm.std.tqdm, "__init__", baked)  # what envwrap leaves at import
    monkeypatch.setenv("PRBENCH_PROGRESS", "1")
    bar = progress_bar(4, desc="judging", unit="pair")
    bar.update(2)
    bar.close()
    assert "judging" in capsys.readouterr().err
    monkeypatch.delenv("PRBENCH_PROGRESS")
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert not progress_enabled()
