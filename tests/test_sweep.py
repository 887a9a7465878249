"""``prbench sweep``: a grid of scorers x conditions, resumable, with the paper-style table.

Cells run on the bundled sample with ``--limit``, with the cheap built-in scorers (``length``,
``oracle-rubric``) and, for the kill test, a ``--plugin`` scorer that blocks while a marker file
exists, so the sweep is killed while that cell is certainly running.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from prbench.harness import tasks
from tests._harness_fixtures import PYTHON, REPO, run_eval, subprocess_env

#: whole commands end to end (lm-eval runs, subprocesses): `make test-fast` leaves them out
pytestmark = pytest.mark.slow

OWN = "personalized_rewardbench_sample"
NONE = "personalized_rewardbench_sample_noprofile"
DOMAINS = ("Art_and_Entertainment", "Lifestyle_and_Personal_Development", "Society_and_Culture")

#: a --plugin file: ``blocking`` scores like ``length`` but first waits while $SWEEP_BLOCK exists
BLOCKING = '''
import dataclasses
import os
import time
from pathlib import Path

from prbench import hookimpl


@dataclasses.dataclass(frozen=True)
class Options:
    pass


class Blocking:
    def __init__(self, options):
        self.options = options

    def score(self, requests):
        marker = Path(os.environ.get("SWEEP_BLOCK", "/nonexistent"))
        if marker.exists():
            Path(str(marker) + ".started").write_text("x")
            while marker.exists():
                time.sleep(0.2)
        return [float(len(r.response.split())) for r in requests]


class ProfileWords:
    def __init__(self, options):
        self.options = options

    def score(self, requests):
        return [float(len(r.profile.text.split())) for r in requests]


@hookimpl
def register_scorers(register):
    register("blocking", Blocking, options=Options, reads_profile=False,
             description="length, after waiting for a marker file to go")
    register("profile-words", ProfileWords, options=Options,
             description="words of the profile shown (reads profiles)")
'''


@pytest.fixture(autouse=True)
def _fresh_tasks() -> None:
    tasks.reset()
    yield
    tasks.reset()


def _sweep_file(path: Path, scorers: list[dict], conditions: list[dict], **extra: object) -> Path:
    import yaml

    path.write_text(yaml.safe_dump({"scorers": scorers, "conditions": conditions, **extra}),
                    encoding="utf-8")
    return path


def _record(out: Path, scorer: str, condition: str) -> dict:
    return json.loads((out / "cells" / scorer / f"{condition}.json").read_text(encoding="utf-8"))


def _acc(results_file: str, condition: str) -> tuple[int, int]:
    """(correct, pairs) of one condition's tasks in a results file."""
    from prbench.harness.summary import task_rows

    results = json.loads(Path(results_file).read_text(encoding="utf-8"))
    rows = [r for r in task_rows(results, length_baseline=False).values()
            if r.condition == condition]
    return sum(r.correct for r in rows), sum(r.n for r in rows)


def test_two_scorers_two_tasks_table_and_report(tmp_path: Path, capsys) -> None:
    """2 scorers x 2 conditions, one model load per scorer: four finished cells, the table
    (markdown, CSV, report) with the length baseline row, and the aspect analysis."""
    sweep = _sweep_file(tmp_path / "grid.yaml",
                        [{"name": "length", "model_args": {"scorer": "length"}},
                         {"model_args": "scorer=oracle-rubric"}],
                        [{"name": "own", "tasks": OWN}, {"name": "none", "tasks": [NONE]}],
                        limit=2)
    out = tmp_path / "out"
    code, stdout, err = run_eval(["sweep", str(sweep), "-o", str(out), "--reuse_model"], capsys)
    assert code == 0, err
    assert "cells: 4 run, 0 already finished, 0 failed" in stdout
    for scorer in ("length", "oracle-rubric"):
        own, none = _record(out, scorer, "own"), _record(out, scorer, "none")
        assert own["status"] == none["status"] == "done"
        assert own["results"] == none["results"]  # one eval call for both conditions
        argv = own["argv"]
        assert argv[argv.index("--tasks") + 1] == f"{OWN},{NONE}"
        assert argv[argv.index("--limit") + 1] == "2"
    with (out / "sweep_table.csv").open(encoding="utf-8") as fh:
        rows = {r["scorer"]: r for r in csv.DictReader(fh)}
    assert set(rows) == {"length", "oracle-rubric", "length baseline (longer answer wins)"}
    assert rows["oracle-rubric"]["diagnostic"] == "True"
    for scorer in ("length", "oracle-rubric"):
        correct, n = _acc(_record(out, scorer, "own")["results"], "profile")
        assert n == 6  # 3 domains x --limit 2
        assert rows[scorer]["own: all (micro) n"] == "6"
        assert float(rows[scorer]["own: all (micro) acc"]) == pytest.approx(correct / 6)
        low = float(rows[scorer]["own: all (micro) ci_low"])
        high = float(rows[scorer]["own: all (micro) ci_high"])
        assert low <= correct / 6 <= high
        for d in DOMAINS:
            assert rows[scorer][f"none: {d} n"] == "2"
    # the length scorer is the length baseline: same pairs, same outcomes
    base = rows["length baseline (longer answer wins)"]
    for d in (*DOMAINS, "all (micro)"):
        for x in ("acc", "ci_low", "ci_high", "n"):
            assert base[f"own: {d} {x}"] == rows["length"][f"own: {d} {x}"]
    md = (out / "sweep_table.md").read_text(encoding="utf-8")
    assert "| oracle-rubric (DIAGNOSTIC) |" in md and "| length baseline" in md
    assert "own: all (micro)" in md and "bundled SAMPLE" in md
    report = (out / "report" / "report.md").read_text(encoding="utf-8")
    assert "## Sweep (out): scorers x conditions" in report
    assert "## Where scorers fail: accuracy by record property" in report
    for factor in ("rubric_aspects", "profile_posts", "length_diff"):
        assert (out / "report" / f"accuracy_by_{factor}.png").is_file()
    # a second run finds everything finished and runs nothing
    code, stdout, _ = run_eval(["sweep", str(sweep), "-o", str(out), "--no_report"], capsys)
    assert code == 0 and "cells: 0 run, 4 already finished, 0 failed" in stdout


def test_failed_cell_is_recorded_and_the_sweep_goes_on(tmp_path: Path, capsys) -> None:
    """A cell whose eval fails is recorded with its error; the next cell runs; exit 1."""
    missing = str(tmp_path / "no-such-model")  # found only when the cell builds the scorer
    sweep = _sweep_file(tmp_path / "grid.yaml",
                        [{"name": "broken", "model_args": {"scorer": "hf-classifier",
                                                           "pretrained": missing}},
                         {"name": "length", "model_args": {"scorer": "length"},
                          "stand_in": "word count stands in for a reward model"}],
                        [{"name": "none", "tasks": NONE}], limit=1)
    out = tmp_path / "out"
    code, stdout, err = run_eval(["sweep", str(sweep), "-o", str(out), "--no_report"], capsys)
    assert code == 1
    broken = _record(out, "broken", "none")
    assert broken["status"] == "failed" and broken["exit_code"] == 1
    assert not broken["error"].startswith("error:") and "no-such-model" in broken["error"]
    assert _record(out, "length", "none")["status"] == "done"
    errors = [line for line in err.splitlines() if "error:" in line]  # said once, not twice
    assert len(errors) == 1 and errors[0].startswith("error: cell broken/none failed: ")
    assert "no-such-model" in errors[0]
    assert "| broken | failed |" in (out / "sweep_table.md").read_text(encoding="utf-8")
    assert "cells: 1 run, 0 already finished, 1 failed" in stdout
    # the stand-in is labelled in the printed table and its notes
    assert "| length (STAND-IN) |" in stdout
    assert "STAND-IN length: word count stands in for a reward model" in stdout


def test_killed_sweep_resumes_only_what_was_left(tmp_path: Path, capsys) -> None:
    """SIGKILL the sweep (and its eval) while the second cell runs; the re-run skips the first
    cell (its results file untouched) and finishes the second."""
    plugin = tmp_path / "blocker.py"
    plugin.write_text(BLOCKING, encoding="utf-8")
    marker = tmp_path / "block"
    marker.write_text("x")
    sweep = _sweep_file(tmp_path / "grid.yaml",
                        [{"name": "length", "model_args": {"scorer": "length"}},
                         {"name": "slow", "model_args": {"scorer": "blocking"}}],
                        [{"name": "none", "tasks": NONE}], limit=1)
    out = tmp_path / "out"
    env = subprocess_env(SWEEP_BLOCK=str(marker))
    proc = subprocess.Popen(
        [PYTHON, "-m", "prbench.cli", "--plugin", str(plugin), "sweep", str(sweep), "-o",
         str(out)], env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True)
    started = Path(str(marker) + ".started")
    deadline = time.monotonic() + 240
    while not started.exists():
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        assert time.monotonic() < deadline, "the second cell never started scoring"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep and the eval it runs
    proc.wait(timeout=30)
    first = _record(out, "length", "none")
    assert first["status"] == "done"
    assert _record(out, "slow", "none")["status"] == "running"  # killed mid-cell
    first_mtime = Path(first["results"]).stat().st_mtime_ns
    marker.unlink()
    os.environ["SWEEP_BLOCK"] = str(marker)  # gone: the blocking scorer no longer waits
    try:
        code, stdout, err = run_eval(
            ["--plugin", str(plugin), "sweep", str(sweep), "-o", str(out), "--no_report"], capsys)
    finally:
        del os.environ["SWEEP_BLOCK"]
    assert code == 0, err
    assert "sweep: skip length/none (finished" in stdout
    assert "sweep: run slow/none" in stdout and "sweep: run length/none" not in stdout
    assert "cells: 1 run, 1 already finished, 0 failed" in stdout
    assert Path(_record(out, "length", "none")["results"]).stat().st_mtime_ns == first_mtime
    assert _record(out, "slow", "none")["status"] == "done"
    # a changed cell definition is not finished any more
    from prbench.harness.sweep import finished
    from prbench.harness.sweep_file import load_sweep

    cells = load_sweep(sweep).cells(limit=2)
    assert not finished(out, cells[0])
    assert finished(out, load_sweep(sweep).cells()[0])


@pytest.mark.parametrize(("name", "scorers"), [("paper.yaml", 10), ("paper_defaults.yaml", 9)])
def test_paper_sweep_dry_run_offline(tmp_path: Path, capsys, monkeypatch, name, scorers) -> None:
    """The paper's sweep files (exact modes; prbench's defaults): pairs from the bundled
    published statistics, every stand-in labelled."""
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(var, "1")
    monkeypatch.setenv("PRBENCH_LOAD_PLUGINS", "")  # even without the RM plugins installed
    code, stdout, err = run_eval(
        ["sweep", str(REPO / "sweeps" / name), "--dry_run", "--tokens_per_s", "10000"],
        capsys)
    assert code == 0, err
    assert f"{scorers} scorers x 3 conditions = {scorers * 3} cells (dry run)" in stdout
    lines = [ln for ln in stdout.splitlines() if "/no profile " in ln or "/top-10 " in ln]
    assert len(lines) == 2 * scorers
    planner = [ln for ln in stdout.splitlines() if "/planner " in ln]
    assert len(planner) == scorers and all("(STAND-IN)" in ln for ln in planner)
    assert "STAND-IN planner: Qwen/Qwen2.5-0.5B-Instruct plans the aspects" in stdout
    from prbench.harness.sweep_file import load_sweep

    sweep = load_sweep(REPO / "sweeps" / name)
    args = {s.name: s.model_args for s in sweep.scorers}
    exact = name == "paper.yaml"
    skywork = args["Skywork-Reward-V2-Qwen3-0.6B"]
    assert ("input_format=released_profile" in skywork) is exact
    assert ("prefix_sharing=off" in skywork) is exact
    assert ("call=get_score" in args["internlm2-7b-reward"]) is exact
    assert ("parse=original" in args["RM-R1-Qwen2.5-Instruct-7B"]) is exact
    if exact:
        judge = "llm-judge Qwen2.5-7B-Instruct (released protocol)"
        assert "protocol=released" in args[judge]
        assert sweep.stand_ins()[judge].startswith("Qwen/Qwen2.5-7B-Instruct judges")
        assert all("(STAND-IN)" in ln for ln in stdout.splitlines() if ln.startswith(judge))
    assert all(" 2830 " in ln for ln in lines)  # 767 + 989 + 1074 published pairs
    # no profile: 2 requests x (11.5 question + 100 answer words) x 1.3 tokens per word
    expected = 2830 * 2 * (11.5 + 100) * 1.3
    row = next(ln for ln in stdout.splitlines()
               if ln.startswith("Skywork-Reward-V2-Qwen3-0.6B/no profile"))
    assert f"{expected / 1e6:.2f}M" in row
    assert f"{expected / 10000 / 3600:.3f}" in row
    assert "published statistics bundled with the task" in stdout
    assert not (Path.cwd() / "results" / "sweep-paper").exists()


def test_the_dry_run_counts_a_one_order_judge_once(capsys, monkeypatch) -> None:
    """The paper sweep's ``protocol=released`` judge judges one order per pair (its resolved
    ``orders``): the dry run says so and counts one prompt and one reply per pair."""
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(var, "1")
    monkeypatch.setenv("PRBENCH_LOAD_PLUGINS", "")
    code, stdout, err = run_eval(["sweep", str(REPO / "sweeps" / "paper.yaml"), "--dry_run"],
                                 capsys)
    assert code == 0, err
    judge = "llm-judge Qwen2.5-7B-Instruct (released protocol)"
    row = next(ln for ln in stdout.splitlines() if ln.startswith(f"{judge}/no profile"))
    # one prompt per pair: question + both answers (11.5 + 2 x 100 words x 1.3), + 512 replied
    expected = 2830 * ((11.5 + 2 * 100) * 1.3 + 512)
    assert f"{expected / 1e6:.2f}M" in row, row
    assert "llm-judge: pairwise judge, one order per pair; 512 generated tokens" in stdout
    assert "llm-judge: pairwise judge, both orders" not in stdout


def test_the_dry_run_counts_both_orders_of_a_prbench_judge(tmp_path: Path, capsys) -> None:
    """The same judge under prbench's protocol (both orders by default) counts twice as much."""
    sweep = _sweep_file(tmp_path / "s.yaml", [
        {"name": "two", "model_args": {"scorer": "llm-judge", "backend": "openai", "model": "m",
                                       "base_url": "http://127.0.0.1:9/v1"},
         "estimate": {"generated_tokens": 10}},
        {"name": "one", "model_args": {"scorer": "llm-judge", "backend": "openai", "model": "m",
                                       "base_url": "http://127.0.0.1:9/v1", "orders": "one"},
         "estimate": {"generated_tokens": 10}},
    ], [{"name": "none", "tasks": NONE}])
    code, stdout, err = run_eval(["sweep", str(sweep), "--dry_run"], capsys)
    assert code == 0, err
    tokens = {ln.split()[0]: float(ln.split()[3].rstrip("M")) for ln in stdout.splitlines()
              if ln.startswith(("two/", "one/"))}
    assert tokens["two/none"] == pytest.approx(2 * tokens["one/none"], rel=0.02), tokens


def test_dry_run_counts_the_profile_embedding_work(capsys, monkeypatch) -> None:
    """Conditions whose builder embeds posts carry the encoder's work; cells share it once."""
    from prbench.flops import KNOWN_ENCODER_CONFIGS, encoder_flop_model_from_config
    from prbench.harness.sweep_plan import _mid, published_statistics

    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(var, "1")
    monkeypatch.setenv("PRBENCH_LOAD_PLUGINS", "")
    code, stdout, err = run_eval(["sweep", str(REPO / "sweeps" / "paper.yaml"), "--dry_run"],
                                 capsys)
    assert code == 0, err
    stats = published_statistics()
    posts = _mid(stats["profile_posts"])
    texts = sum(d["records"] for d in stats["domains"].values()) * (posts + 1)
    # contriever (BERT-base) over every post and question at 41 words x 1.3 tokens + 2
    flops = encoder_flop_model_from_config(
        KNOWN_ENCODER_CONFIGS["facebook/contriever-msmarco"]).bidirectional(round(41 * 1.3 + 2))
    rows = {ln.split("  ")[0]: ln.split() for ln in stdout.splitlines()}
    top10 = rows["Skywork-Reward-V2-Qwen3-0.6B/top-10"]
    assert top10[-2] == f"{texts:,.0f}"
    assert top10[-1] == f"{texts * flops / 1e12:.2f}"
    none = rows["Skywork-Reward-V2-Qwen3-0.6B/no profile"]
    assert none[-2:] == ["-", "-"]  # no profile: nothing embedded
    # 18 cells embed with the same encoder on the same data: the total counts it once
    assert rows["total"][-1] == top10[-1]


def test_encoder_flops_from_config_match_the_loaded_model() -> None:
    from transformers import BertConfig, BertModel

    from prbench.flops import encoder_flop_model_from_config, flop_model

    cfg = BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=24, max_position_embeddings=32)
    loaded = flop_model(BertModel(cfg, add_pooling_layer=False))
    assert encoder_flop_model_from_config(cfg.to_dict()) == loaded


def test_dry_run_counts_the_sample_records(tmp_path: Path, capsys) -> None:
    """Local data: pairs counted from the records; --limit caps them per task; profile words
    only for scorers that read profiles."""
    sweep = _sweep_file(tmp_path / "s.yaml",
                        [{"model_args": {"scorer": "length"}},
                         {"model_args": {"scorer": "embedding-similarity"}}],
                        [{"name": "own", "tasks": OWN}, {"name": "none", "tasks": NONE}])
    code, stdout, _ = run_eval(["sweep", str(sweep), "--dry_run"], capsys)
    assert code == 0
    cols = {ln.split()[0]: ln.split() for ln in stdout.splitlines()
            if ln.strip() and "/" in ln.split()[0]}
    assert {c[2] for c in cols.values()} == {"45"}
    assert cols["length/own"][3] == cols["length/none"][3]  # length reads no profile
    own, none = (float(cols[f"embedding-similarity/{c}"][3].rstrip("M")) for c in ("own", "none"))
    assert own > none
    code, stdout, _ = run_eval(["sweep", str(sweep), "--dry_run", "--limit", "4"], capsys)
    assert next(ln for ln in stdout.splitlines() if ln.startswith("length/own")).split()[2] \
        == "12"
    assert "give --tokens_per_s" in stdout  # no throughput known: said, not invented


@pytest.mark.parametrize(("first", "second", "twins"), [
    ({"scorer": "random", "seed": 0}, {"scorer": "random"}, True),  # the default written out
    ({"scorer": "random", "seed": "0"}, "scorer=random,seed=00", True),  # as text, as YAML
    ({"scorer": "length"}, {"scorer": "length", "unit": "words", "cache": False}, True),
    ({"scorer": "random", "seed": 0}, {"scorer": "random", "seed": 1}, False),
    ({"scorer": "random"}, {"scorer": "length"}, False),
    ({"scorer": "not-installed", "x": 1}, {"scorer": "not-installed", "x": 2}, False),
])
def test_identical_cells_are_found_by_their_resolved_options(
        tmp_path: Path, capsys, first: dict, second: dict | str, twins: bool) -> None:
    """Two scorers whose options resolve alike (defaults filled in; the runtime's options,
    which change no score, left out) would be one cell run twice: refused, naming both."""
    sweep = _sweep_file(tmp_path / "s.yaml", [{"name": "a", "model_args": first},
                                              {"name": "b", "model_args": second}],
                        [{"name": "none", "tasks": NONE}])
    code, _, err = run_eval(["sweep", str(sweep), "--dry_run"], capsys)
    said = "scorers 'a' and 'b' have the same model_args: their cells would be identical"
    assert (said in err) is twins, err[-2000:]
    if twins:
        assert code == 1 and err.count("error:") == 1


def test_default_post_words_is_the_sample_mean() -> None:
    from prbench.harness.sweep_plan import DEFAULT_POST_WORDS
    from prbench.records import load_records

    loaded = load_records("sample")
    records = loaded[0] if isinstance(loaded, tuple) else loaded
    words = [len(p.text.split()) for r in records for p in r.profile]
    assert round(sum(words) / len(words)) == DEFAULT_POST_WORDS


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("scorers: []\nconditions: [{tasks: x}]\n", "scorers must be a non-empty list"),
        ("scorers: [{model_args: {scorer: length}}]\nconditon: []\n",
         "unknown key 'conditon' (did you mean 'conditions'?)"),
        ("scorers: [{model_args: {scorer: length}, estimat: {}}]\nconditions: [{tasks: x}]\n",
         "scorers[0]: unknown key 'estimat'"),
        ("scorers: [{model_args: {scorer: length}}]\nconditions: [{tasks: x}]\n"
         "eval_args: ['--limit', '3']\n", "--limit is set by the sweep itself"),
        ("scorers: [{model_args: {scorer: length}}, {model_args: {scorer: length}}]\n"
         "conditions: [{tasks: x}]\n", "two scorers named 'length'"),
        ("scorers: [\n", "not valid YAML"),
        ("scorers: [{model_args: {scorer: length}}]\nconditions: [{tasks: x}]\n"
         "scorers: [{model_args: {scorer: random}}]\n",
         "line 3 not valid YAML (the key 'scorers' is given twice (first on line 1)"),
        ("scorers:\n  - model_args: {scorer: length, scorer: random}\n"
         "conditions: [{tasks: x}]\n",
         "line 2 not valid YAML (the key 'scorer' is given twice (first on line 2)"),
    ],
)
def test_bad_sweep_file_is_one_error_line(tmp_path: Path, capsys, text: str, message: str
                                          ) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    code, _, err = run_eval(["sweep", str(path), "--dry_run"], capsys)
    assert code == 1
    assert err.startswith("error: ") and message in err and str(path) in err
    assert "Traceback" not in err


def test_dry_run_unknown_task_and_missing_file(tmp_path: Path, capsys) -> None:
    sweep = _sweep_file(tmp_path / "s.yaml", [{"model_args": {"scorer": "length"}}],
                        [{"tasks": "personalized_rewardbench_sampel"}])
    code, _, err = run_eval(["sweep", str(sweep), "--dry_run"], capsys)
    assert code == 1 and "unknown task 'personalized_rewardbench_sampel'" in err
    assert "did you mean 'personalized_rewardbench_sample'" in err
    code, _, err = run_eval(["sweep", str(tmp_path / "nope.yaml")], capsys)
    assert code == 1 and err.startswith("error: ") and "cannot read the sweep file" in err


def test_second_in_process_eval_builds_profiles(tmp_path: Path, capsys) -> None:
    """A profile-reading scorer after one that reads none, in one process (--reuse_model),
    gets its profiles built (an earlier run's "not built" marks do not carry over)."""
    plugin = tmp_path / "blocker.py"
    plugin.write_text(BLOCKING, encoding="utf-8")
    out = tmp_path / "o"
    common = ["--plugin", str(plugin), "eval", "--tasks", OWN, "--limit", "1", "--output_path",
              str(out), "--no-summary"]
    code, _, err = run_eval([*common, "--model_args", "scorer=length"], capsys)
    assert code == 0, err
    code, _, err = run_eval([*common, "--model_args", "scorer=profile-words"], capsys)
    assert code == 0, err
    found = sorted((out / "prbench-profile-words").glob("results_*.json"))
    data = json.loads(found[0].read_text(encoding="utf-8"))["config"]["prbench"]["data"]
    assert {d["profile_builder"]["status"] for d in data} == {"built"}


_GRID = "scorers: [{model_args: {scorer: length}}]\nconditions: [{tasks: x}]\n"


@pytest.mark.parametrize(
    "eval_args",
    [
        ["--model_args=scorer=constant"],
        ["--model-args=scorer=constant"],
        ["--model_arg", "scorer=constant"],  # an abbreviation (prbench eval does not take it)
        ["-a", "scorer=constant"],
        ["--batch_size", "2", "-o", "elsewhere"],
        ["--output", "elsewhere"],  # a removed draft form of -o/--output_path
        ["--log-samples"],
        ["-t", "personalized_rewardbench_sample"],
        ["--config", "other.yaml"],  # an lm-eval flag prbench eval does not take
    ],
)
def test_every_spelling_of_a_sweep_flag_is_refused(eval_args: list[str], tmp_path: Path,
                                                   capsys) -> None:
    """eval_args are parsed as `prbench eval` parses them: no spelling slips past the check (a
    passed --model-args would make the row labelled `length` the scores of `constant`)."""
    import yaml

    path = tmp_path / "s.yaml"
    path.write_text(_GRID + f"eval_args: {yaml.safe_dump(eval_args, default_flow_style=True)}",
                    encoding="utf-8")
    code, _, err = run_eval(["sweep", str(path), "--dry_run"], capsys)
    assert code == 1 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: eval_args ")
    assert any(why in lines[0] for why in ("set by the sweep itself", "unrecognized arguments",
                                           "does not take")), lines[0]


def test_eval_args_the_sweep_does_not_set_are_kept(tmp_path: Path) -> None:
    from prbench.harness.sweep_file import load_sweep

    path = tmp_path / "s.yaml"
    path.write_text(_GRID + "eval_args: ['--batch-size', '4', '--max_invalid', '0.5']\n",
                    encoding="utf-8")
    assert load_sweep(path).eval_args == ("--batch-size", "4", "--max_invalid", "0.5")
    path.write_text(_GRID + "eval_args: ['--no_such_flag']\n", encoding="utf-8")
    with pytest.raises(Exception, match="prbench eval: unrecognized arguments: --no_such_flag"):
        load_sweep(path)


def test_joined_condition_folders_cannot_clash(tmp_path: Path, capsys) -> None:
    """Conditions a, b and a+b: under --reuse_model a and b run together in the folder a+b, the
    folder of condition a+b. Refused before anything runs; and a later run without
    --reuse_model does not delete the results a finished cell keeps there."""
    conditions = [{"name": "a", "tasks": NONE}, {"name": "b", "tasks": OWN},
                  {"name": "a+b", "tasks": [NONE, OWN]}]
    sweep = _sweep_file(tmp_path / "grid.yaml", [{"model_args": {"scorer": "length"}}],
                        conditions, limit=1)
    out = tmp_path / "out"
    code, _, err = run_eval(["sweep", str(sweep), "-o", str(out), "--reuse_model"], capsys)
    assert code == 1 and "Traceback" not in err
    assert "condition 'a+b' of scorer 'length' would share its folder" in err
    assert not out.exists()
    # a and b finished together (folder runs/length/a+b), then a+b is added, run separately
    first = _sweep_file(tmp_path / "first.yaml", [{"model_args": {"scorer": "length"}}],
                        conditions[:2], limit=1)
    code, _, err = run_eval(["sweep", str(first), "-o", str(out), "--reuse_model",
                             "--no_report"], capsys)
    assert code == 0, err
    kept = sorted((out / "runs" / "length" / "a+b").rglob("*.json"))
    assert kept
    code, _, err = run_eval(["sweep", str(sweep), "-o", str(out), "--no_report"], capsys)
    assert code == 1 and "Traceback" not in err
    assert "which holds the results of cell length/a" in err
    assert sorted((out / "runs" / "length" / "a+b").rglob("*.json")) == kept
    assert _record(out, "length", "a")["status"] == "done"


def test_the_up_front_check_leaves_out_cells_already_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A re-run needs no plugin for finished cells; a cell still to run is checked."""
    from prbench.commands.sweep import check_cells
    from prbench.harness import sweep as sweep_run
    from prbench.harness.sweep_file import SweepFileError, load_sweep

    path = tmp_path / "grid.yaml"
    path.write_text("scorers:\n- {name: gone, model_args: {scorer: no-longer-installed}}\n"
                    "- {name: len, model_args: {scorer: length}}\n"
                    "conditions: [{name: p, tasks: personalized_rewardbench_sample}]\n",
                    encoding="utf-8")
    sweep = load_sweep(str(path))
    with pytest.raises(SweepFileError, match=r"scorer 'gone'.*no-longer-installed"):
        check_cells(sweep, ())  # no folder: every cell is checked
    done: set[str] = set()
    monkeypatch.setattr(sweep_run, "finished", lambda _out, cell: cell.scorer.name in done)
    with pytest.raises(SweepFileError, match="scorer 'gone'"):
        check_cells(sweep, (), tmp_path, None)  # nothing finished yet
    done.add("gone")
    check_cells(sweep, (), tmp_path, None)  # its cell is finished: not checked again


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_sweep_file_that_is_no_regular_file_is_refused_unread(tmp_path: Path, capsys,
                                                                 kind: str) -> None:
    """A FIFO (or /dev/stdin) as the sweep file was read until a writer came: forever."""
    import errno
    import threading

    path = tmp_path / "grid.yaml"
    done = threading.Event()

    def release_a_reader() -> None:  # a waiting read gets EOF: the test fails, never hangs
        while not done.wait(0.05):
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError as exc:
                if exc.errno != errno.ENXIO:  # ENXIO: no reader yet
                    return
            else:
                return

    if kind == "fifo":
        os.mkfifo(path)
        threading.Thread(target=release_a_reader, daemon=True).start()
    else:
        path.mkdir()
    try:
        code, _, err = run_eval(["sweep", str(path), "--dry_run"], capsys)
    finally:
        done.set()
    assert code == 1
    what = "a FIFO (named pipe)" if kind == "fifo" else "a folder"
    assert err == f"error: {path}: the sweep file is {what}; name a YAML file\n"
