"""Where prbench writes: output locations checked first, atomic files, one folder rule, escapes.

Every command's output location is checked before any work (a file where a folder is needed, a
folder where a file is needed, a folder that cannot be written: one ``error:`` line, exit 1,
nothing scored); every file is written under a temporary name and renamed, so a write that fails
(a file size limit, run here with ``RLIMIT_FSIZE`` in a child process) is one ``error:`` naming the
file and leaves nothing half-written or listed as written; every ``prbench`` run writes into
``<output_path>/prbench-<scorer>/`` whatever ``pretrained=`` says; and a plugin that exits or
raises ``KeyboardInterrupt`` is a plugin fault, while the user's Ctrl-C still ends the run with 130.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from prbench.outputs import (
    OutputPathError,
    OutputWriteError,
    check_json_file,
    check_jsonl_file,
    check_output_dir,
    check_output_file,
    write_text,
)
from tests._faults_fixtures import (
    BUILDER,
    GROUP,
    one_error_line,
    unwritable_folder,
)
from tests._harness_fixtures import PYTHON, run_eval, subprocess_env

# -- the shared checks ---------------------------------------------------------------------------


def test_output_dir_checks_create_nothing(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    assert check_output_dir(target) == target
    assert not (tmp_path / "a").exists()  # checked, not created
    assert list(tmp_path.iterdir()) == []  # the probe file is gone


def test_output_locations_that_cannot_be_used(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(OutputPathError, match=r"afile is a file, not a folder"):
        check_output_dir(afile)
    with pytest.raises(OutputPathError, match=r"is under .*afile, which is a file"):
        check_output_dir(afile / "sub")
    with pytest.raises(OutputPathError, match=r"is a folder; this option names a file"):
        check_output_file(tmp_path, flag="-o")
    with pytest.raises(OutputPathError, match=r"is a folder"):
        check_output_file(f"{tmp_path}/new/", flag="-o")
    with pytest.raises(OutputPathError, match=r"cannot write in"):
        check_output_dir(unwritable_folder(tmp_path) / "out")


def test_write_text_is_atomic(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "f.json"
    write_text(target, "one\n")
    write_text(target, "two\n")
    assert target.read_text() == "two\n"
    assert [p.name for p in target.parent.iterdir()] == ["f.json"]  # no temporary left


def test_write_jsonl_writes_one_line_per_value_atomically(tmp_path: Path) -> None:
    from prbench.outputs import write_jsonl

    target = tmp_path / "rows.jsonl"
    rows = [{"id": "é", "n": [1, 2.5]}, "text", None]
    assert write_jsonl(target, rows) == target
    assert target.read_bytes() == '{"id": "é", "n": [1, 2.5]}\n"text"\nnull\n'.encode()
    with pytest.raises(TypeError):  # not JSON: nothing written, the old file kept
        write_jsonl(target, [{"x": object()}])
    assert target.read_text(encoding="utf-8").startswith('{"id": "é"')
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002])
def test_written_files_honour_the_umask_and_keep_a_replaced_files_mode(
        tmp_path: Path, umask: int) -> None:
    """Files are readable as an ordinary open() would leave them (0644 typically), not 0600."""
    import os

    old = os.umask(umask)
    try:
        new = write_text(tmp_path / "report.html", "x")
        assert new.stat().st_mode & 0o777 == 0o666 & ~umask
        kept = tmp_path / "kept.json"
        kept.write_text("{}")
        kept.chmod(0o640)
        write_text(kept, "{\"a\": 1}")
        assert kept.stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)


def test_a_write_beyond_the_file_size_limit_is_one_error(tmp_path: Path) -> None:
    """Python ignores SIGXFSZ: the write raises EFBIG, the old file stays, no temporary left."""
    target = tmp_path / "big.json"
    target.write_text("old\n")
    code = (
        "import resource, sys\n"
        "from prbench.outputs import write_text, OutputWriteError\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "try:\n"
        f"    write_text({str(target)!r}, 'x' * 100000)\n"
        "except OutputWriteError as exc:\n"
        "    print(exc)\n"
        "    sys.exit(3)\n"
    )
    proc = subprocess.run([PYTHON, "-c", code], env=subprocess_env(), capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 3, proc.stderr
    assert f"could not write {target}: File too large" in proc.stdout
    assert "file size limit" in proc.stdout and "the file was not written" in proc.stdout
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["big.json"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_an_append_to_a_full_disk_is_one_error() -> None:
    """``prbench rank`` and ``build`` append unbuffered: the failure is raised once, named."""
    from prbench.outputs import append_line

    with (
        Path("/dev/full").open("ab", buffering=0) as handle,
        pytest.raises(OutputWriteError) as info,
    ):
        append_line(handle, '{"id": "r1"}\n', "ranking.jsonl")
    text = str(info.value)
    assert text.startswith("could not append to ranking.jsonl: No space left on device")
    assert "(the disk is full)" in text and "lines written before it are kept" in text


def test_files_of_other_writers_are_read_back(tmp_path: Path) -> None:
    good = tmp_path / "r.json"
    good.write_text('{"a": 1}\n')
    assert check_json_file(good) == good
    cut = tmp_path / "cut.json"
    cut.write_text('{"a": [1, 2')
    with pytest.raises(OutputWriteError, match=r"cut.json was not written in full \(invalid JSON"):
        check_json_file(cut, what="the results file")
    assert not cut.exists()  # a cut file never passes for a result
    lines = tmp_path / "s.jsonl"
    lines.write_text('{"a": 1}\n{"a": 2}\n')
    assert check_jsonl_file(lines, 2) == lines
    lines.write_text('{"a": 1}\n{"a": ')
    with pytest.raises(OutputWriteError, match=r"line 2 is cut short"):
        check_jsonl_file(lines, 2)
    with pytest.raises(OutputWriteError, match=r"was not written"):
        check_jsonl_file(tmp_path / "missing.jsonl")


# (every command's output check before any work, a file size limit, a plugin's SystemExit and
# KeyboardInterrupt, a broken fingerprint, the user's Ctrl-C and call_timeout run through the
# command line in tests/test_fault_corpus.py)


# -- one folder rule ------------------------------------------------------------------------------


@pytest.mark.parametrize("pretrained", ["/tmp/rmA", "../../elsewhere"])  # "..": test_fault_corpus
def test_pretrained_never_names_the_folder(
    faulty_plugin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], pretrained: str
) -> None:
    out = tmp_path / "deep" / "out"
    code, stdout, err = run_eval(
        ["--plugin", str(faulty_plugin), "eval", "--tasks", GROUP, "--limit", "1", "--model_args",
         f"scorer=echo,pretrained={pretrained}", "--output_path", str(out)], capsys)
    assert code == 0, err[-3000:]
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert written and all(p.parts[:3] == ("deep", "out", "prbench-echo") for p in written
                           if p.name != "faulty.py"), written
    assert f"results: {out / 'prbench-echo'}" in stdout


def test_plain_lm_eval_folder_rule() -> None:
    """prbench's tracker names a prbench run's folder the same way (plain ``lm_eval``)."""
    from prbench.harness.run_files import tracker_class

    tracker = tracker_class()().general_config_tracker
    tracker.log_experiment_args("prbench", "scorer=hf-classifier,pretrained=/tmp/rmA", None,
                                None, False)
    assert tracker.model_name_sanitized == "prbench-hf-classifier"
    other = tracker_class()().general_config_tracker
    other.log_experiment_args("hf", "pretrained=/tmp/rmA", None, None, False)
    assert other.model_name_sanitized == "__tmp__rmA"  # lm-eval's rule for its own models


def test_prbench_subclasses_lm_evals_tracker_and_patches_none_of_its_methods(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """prbench eval passes its subclass to simple_evaluate; lm-eval's own class is intact."""
    import lm_eval.loggers
    from lm_eval.loggers.evaluation_tracker import EvaluationTracker, GeneralConfigTracker

    from prbench.cli import main
    from prbench.harness.run_files import tracker_class

    methods = (EvaluationTracker.save_results_aggregated, EvaluationTracker.save_results_samples,
               GeneralConfigTracker.log_experiment_args)
    before = lm_eval.loggers.EvaluationTracker
    assert issubclass(tracker_class(), EvaluationTracker)
    assert main(["eval", "--tasks", "personalized_rewardbench_sample_noprofile", "--model_args",
                 "scorer=length", "--limit", "1", "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    assert lm_eval.loggers.EvaluationTracker is before
    assert (EvaluationTracker.save_results_aggregated, EvaluationTracker.save_results_samples,
            GeneralConfigTracker.log_experiment_args) == methods
    assert list(tmp_path.glob("prbench-length/results_*.json"))


def test_a_task_name_with_path_separators_stays_in_the_folder(tmp_path: Path) -> None:
    from lm_eval.loggers.evaluation_tracker import EvaluationTracker

    from prbench.harness.manifest import safe_task_file_name, save_samples_strictly

    assert safe_task_file_name("../../x") == ".._.._x"
    tracker = EvaluationTracker(output_path=str(tmp_path / "out"))
    tracker.general_config_tracker.model_name_sanitized = "prbench-length"
    tracker.date_id = "D"
    sample = {"doc_id": 0, "arguments": [["q", "a"]], "resps": [[[1.0, False]]],
              "filtered_resps": [[1.0, False]], "target": 0}
    save_samples_strictly(EvaluationTracker.save_results_samples, tracker, "../../x", [sample])
    files = [p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()]
    assert files == [Path("out/prbench-length/samples_.._.._x_D.jsonl")]


# -- a plugin that exits or interrupts is a plugin fault -----------------------------------------


def test_a_profile_builder_that_exits_is_a_plugin_fault(
    faulty_plugin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_eval(
        ["--plugin", str(faulty_plugin), "bon", "--model_args", "scorer=constant", "--profile_args",
         "builder=faulty/garbage,mode=exit", "-o", str(tmp_path / "bon")],
        capsys,
    )
    assert code == 1
    line = one_error_line(err)
    assert line.startswith(f"error: {BUILDER} failed") and "SystemExit" in line, line


# -- a bound on every scorer call -----------------------------------------------------------------


def test_the_call_bound_works_outside_the_main_thread() -> None:
    """A reward server's worker thread: the watchdog raises in that thread, then stays quiet."""
    import threading
    import time

    from prbench.scoring.timeout import CallTimedOut, call_with_timeout

    def spin(seconds: float) -> str:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass
        return "done"

    seen: dict[str, object] = {}

    def worker() -> None:
        try:
            call_with_timeout(spin, 30.0, 0.3)
        except CallTimedOut as exc:
            seen["timeout"] = str(exc)
        seen["after"] = call_with_timeout(spin, 0.5, 5.0)  # a later call is not hit

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(60)
    assert "no result within 0.3 s" in str(seen.get("timeout")), seen
    assert seen.get("after") == "done"
    assert call_with_timeout(spin, 0.0, 0) == "done"  # 0: no limit


def test_a_negative_call_timeout_is_an_option_error() -> None:
    from prbench.options import OptionsError
    from prbench.scoring.spec import build_runtime

    with pytest.raises(OptionsError, match=r"option 'call_timeout' must be >= 0, <= 604800"):
        build_runtime("length", {"call_timeout": "-1"})
