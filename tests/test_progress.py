"""Progress a person or a log can follow (issue 38 item 3).

On a terminal prbench draws labelled tqdm bars and no unlabelled library bar; without one
(a log, CI, SLURM) it prints a heartbeat line at most every ``PRBENCH_PROGRESS_INTERVAL``
seconds with done/total and rate. The heartbeat is tested with an injected clock (no sleeping);
two subprocess tests run ``prbench eval`` as a user does, once with standard error a pipe and
once a pseudo-terminal.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from prbench.progress import (
    HEARTBEAT_PREFIX,
    HeartbeatBar,
    NullBar,
    heartbeat_interval,
    progress_bar,
)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _bar(total: int | None, clock: Clock, out: io.StringIO, interval: float = 30.0) -> HeartbeatBar:
    return HeartbeatBar(total, desc="scoring: length", unit="pair", interval=interval,
                        stream=out, clock=clock)


def test_a_heartbeat_line_at_most_every_interval_with_done_total_and_rate() -> None:
    clock, out = Clock(), io.StringIO()
    bar = _bar(100, clock, out)
    for _ in range(10):  # 10 pairs in 20 s: no line yet
        clock.now += 2
        bar.update()
    assert out.getvalue() == ""
    clock.now += 10  # 30 s since the start
    bar.update(5)
    lines = out.getvalue().splitlines()
    assert lines == [f"{HEARTBEAT_PREFIX}scoring: length: 15/100 pair (15%), 0.5 pair/s, "
                     "30 s elapsed, ~2.8 min left"]
    for _ in range(29):  # 29 s more, one update a second: still within the interval
        clock.now += 1
        bar.update()
    assert len(out.getvalue().splitlines()) == 1
    clock.now += 1
    bar.set_postfix(now="chunk 3")
    bar.update()
    second = out.getvalue().splitlines()[1]
    assert second.startswith(f"{HEARTBEAT_PREFIX}scoring: length: 45/100 pair (45%), 0.75 pair/s")
    assert second.endswith("60 s elapsed, ~73 s left, now=chunk 3")
    clock.now += 20
    bar.close()
    assert out.getvalue().splitlines()[2] == (
        f"{HEARTBEAT_PREFIX}scoring: length: done, 45/100 pair in 80 s, 0.562 pair/s")
    bar.close()  # once only
    assert len(out.getvalue().splitlines()) == 3


def test_a_short_step_prints_nothing_and_an_unknown_total_still_counts() -> None:
    clock, out = Clock(), io.StringIO()
    with _bar(10, clock, out) as bar:
        clock.now += 29.9
        bar.update(10)
    assert out.getvalue() == ""
    bar = _bar(None, clock, out, interval=5)
    clock.now += 10
    bar.update(3)
    assert out.getvalue() == (
        f"{HEARTBEAT_PREFIX}scoring: length: 3 pair, 0.3 pair/s, 10 s elapsed\n")


def test_progress_bar_picks_bars_lines_or_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRBENCH_PROGRESS", raising=False)
    monkeypatch.setenv("PRBENCH_PROGRESS_INTERVAL", "30")
    # standard error is pytest's capture here, not a terminal: lines
    bar = progress_bar(4, desc="profiles: dense", unit="record")
    assert isinstance(bar, HeartbeatBar) and bar.interval == 30.0
    assert isinstance(progress_bar(4, desc="x", enabled=False), NullBar)  # a component's switch
    monkeypatch.setenv("PRBENCH_PROGRESS_INTERVAL", "inf")
    assert isinstance(progress_bar(4, desc="x"), NullBar)
    monkeypatch.setenv("PRBENCH_PROGRESS_INTERVAL", "30")
    monkeypatch.setenv("PRBENCH_PROGRESS", "0")  # --no_progress
    assert isinstance(progress_bar(4, desc="x"), NullBar)
    monkeypatch.setenv("PRBENCH_PROGRESS", "1")  # bars forced on
    forced = progress_bar(4, desc="x")
    import tqdm.std

    assert isinstance(forced, tqdm.std.tqdm) and not forced.disable
    forced.close()
    monkeypatch.delenv("PRBENCH_PROGRESS")
    # TQDM_DISABLE (set for child processes whenever library bars are off) is about bars
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert isinstance(progress_bar(4, desc="x"), HeartbeatBar)


@pytest.mark.parametrize("raw", ["soon", "-5", "nan"])
def test_a_bad_interval_is_one_error_naming_the_variable(
        raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from prbench.errors import PrbenchUserError

    monkeypatch.setenv("PRBENCH_PROGRESS_INTERVAL", raw)
    with pytest.raises(PrbenchUserError, match=r"PRBENCH_PROGRESS_INTERVAL=.* is not a number "
                                               r"of seconds: set it to"):
        heartbeat_interval()


def test_library_bars_off_is_environment_only() -> None:
    import os

    import tqdm.std

    from prbench.progress import library_bars_off

    original = tqdm.std.tqdm.__dict__["__init__"]
    before = os.environ.get("TQDM_DISABLE")
    with library_bars_off():
        assert os.environ["TQDM_DISABLE"] == "1"
        assert os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] == "1"
        assert tqdm.std.tqdm.__dict__["__init__"] is original  # nothing of tqdm replaced
    assert os.environ.get("TQDM_DISABLE") == before


def test_correlate_bootstrap_reports_progress(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.analysis.correlation import Side, correlate

    monkeypatch.setenv("PRBENCH_PROGRESS_INTERVAL", "0")  # a line at every resample
    bench = Side({"a": {"x": 1.0, "y": 0.0}, "b": {"x": 0.0, "y": 0.0}, "c": {"x": 1, "y": 1}},
                 "acc")
    down = Side({"a": {"r": 0.5}, "b": {"r": 0.2}, "c": {"r": 0.9}}, "bon")
    correlate(bench, down, resamples=3)
    err = capsys.readouterr().err
    assert f"{HEARTBEAT_PREFIX}correlate: bootstrap: 3/3 resample (100%)" in err
    assert f"{HEARTBEAT_PREFIX}correlate: bootstrap: done, 3/3 resample" in err
    correlate(bench, down, resamples=3, progress=False)
    assert capsys.readouterr().err == ""


# -- as a user runs it -----------------------------------------------------------------------------

ARGS = ["eval", "--tasks", "personalized_rewardbench_sample_noprofile", "--limit", "2",
        "--model_args", "scorer=length", "--output_path", "out"]


@pytest.mark.slow
def test_a_run_without_a_terminal_prints_labelled_progress_lines(tmp_path: Path) -> None:
    """stderr a pipe (a log): heartbeat lines, labelled; no bar redraws; no git noise."""
    from tests._harness_fixtures import PYTHON, subprocess_env

    env = subprocess_env(PRBENCH_PROGRESS_INTERVAL="0", PRBENCH_CACHE_DIR=str(tmp_path / "c"))
    env.pop("PRBENCH_PROGRESS", None)
    proc = subprocess.run([PYTHON, "-m", "prbench.cli", *ARGS], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith(HEARTBEAT_PREFIX)]
    # 2 records x 3 domains, two answers each: the scorer's requests
    assert any(re.match(r"\[prbench\] scoring: length: \d+/12 req \(\d+%\), [\d.,]+ req/s", x)
               for x in lines), proc.stderr[-3000:]
    assert any(x.startswith("[prbench] scoring: length: done, 12/12 req in ") for x in lines)
    assert "\r" not in proc.stderr  # no bar redrawn into the log


def _on_a_terminal(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """Run ``cmd`` with standard error a pseudo-terminal; return its exit code and what it drew."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    # a terminal of 40 x 120 characters (a new pseudo-terminal is 0 x 0: tqdm would draw nothing)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    try:
        code = proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=30)
    os.close(master)
    return code, b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.slow
def test_on_a_terminal_prbench_draws_labelled_bars(tmp_path: Path) -> None:
    """stderr a terminal: prbench's labelled bar is drawn (lm-eval's own bars are lm-eval's:
    nothing of tqdm is replaced)."""
    from tests._harness_fixtures import PYTHON, subprocess_env

    env: dict[str, Any] = subprocess_env(PRBENCH_CACHE_DIR=str(tmp_path / "c"))
    for name in ("PRBENCH_PROGRESS", "TQDM_DISABLE", "PRBENCH_PROGRESS_INTERVAL"):
        env.pop(name, None)
    code, drawn = _on_a_terminal([PYTHON, "-m", "prbench.cli", *ARGS], env, tmp_path)
    assert code == 0, drawn[-3000:]
    assert "scoring: length:" in drawn and "req/s" in drawn, drawn[-3000:]
    assert HEARTBEAT_PREFIX not in drawn  # bars, not log lines, on a terminal


def test_a_report_names_each_step_in_its_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.analysis.report import build_report
    from tests.test_report import write_run

    monkeypatch.setenv("PRBENCH_PROGRESS_INTERVAL", "0")
    write_run(tmp_path / "runs" / "a", "alpha", {"profile": [1, 0, 1, 1]})
    build_report([tmp_path / "runs"], tmp_path / "out", resamples=20)
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith(HEARTBEAT_PREFIX)]
    assert lines[0].startswith("[prbench] report: 1/5 step (20%), ")
    assert lines[0].endswith("now=sensitivity and paired tests")  # the step starting now
    assert lines[-2].startswith("[prbench] report: 5/5 step (100%)")
    assert lines[-1].startswith("[prbench] report: done, 5/5 step in ")
