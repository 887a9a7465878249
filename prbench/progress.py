r"""The one switch and factory for progress on long work: bars on a terminal, lines in a log.

Every step that can take more than a couple of seconds (profile building, embedding, scoring,
judging, building pairs, Best-of-N, ``correlate``'s bootstrap, ``report``) shows its progress
through :func:`progress_bar`, labelled (``scoring: length``, ``profiles: dense``):

- on a terminal, a tqdm bar with counts and rate;
- without one (standard error is a log file, CI, a SLURM job), a **heartbeat line**
  (:class:`HeartbeatBar`): ``[prbench] scoring: length: 1,200/2,830 pair (42%), 35.1 pair/s,
  34 s elapsed, ~46 s left`` at most every ``PRBENCH_PROGRESS_INTERVAL`` seconds (default 30;
  the first one after that long, so a short step prints nothing), and a closing ``done`` line
  for a step that printed one;
- nothing when the user passed ``--no_progress`` (the CLI sets ``PRBENCH_PROGRESS=0``), when a
  component's own ``progress`` option is false, or with ``PRBENCH_PROGRESS_INTERVAL=inf``.
  ``PRBENCH_PROGRESS=1`` forces tqdm bars even without a terminal; ``TQDM_DISABLE=1`` (which
  prbench also sets for its child processes when it turns library bars off) turns bars, not the
  heartbeat lines, off.

The libraries prbench drives (lm-eval, datasets, transformers) draw plain tqdm bars. Under
``--no_progress`` or without a terminal they are turned off through the environment
(:func:`library_bars_off`: ``TQDM_DISABLE``, datasets' own switch), which tqdm reads when it is
first imported; nothing of tqdm is replaced, so a bar a library draws with its own ``disable=``
stays as the library shows it.

No library does the heartbeat: tqdm draws a bar on a file too, but as ``\r``-separated
redraws at its own ``mininterval``, one unreadable line in a log; ``rich`` and ``enlighten``
target terminals as well. A line per interval is a dozen lines of code here.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

from prbench.errors import PrbenchUserError

ENV_VAR = "PRBENCH_PROGRESS"
#: seconds between two heartbeat lines without a terminal (``inf``: none)
INTERVAL_VAR = "PRBENCH_PROGRESS_INTERVAL"
DEFAULT_INTERVAL_S = 30.0
#: what starts every heartbeat line, so a log reader can grep for them
HEARTBEAT_PREFIX = "[prbench] "


class NullBar:
    """A stand-in with tqdm's ``update``/``close``/``set_postfix`` that shows nothing."""

    def update(self, n: int = 1) -> None:
        """Ignore progress."""

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        """Ignore a status line."""

    def close(self) -> None:
        """Nothing to close."""

    def __enter__(self) -> NullBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _switched_off(enabled: bool) -> bool:
    """Progress of any kind refused: by the caller or by ``PRBENCH_PROGRESS=0``."""
    if not enabled:
        return True
    return os.environ.get(ENV_VAR, "").strip().lower() in ("0", "false", "no", "off")


def progress_enabled(enabled: bool = True) -> bool:
    """Whether to draw a bar: the caller's wish, ``PRBENCH_PROGRESS``, ``TQDM_DISABLE``, the TTY."""
    if _switched_off(enabled):
        return False
    if os.environ.get(ENV_VAR, "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    if os.environ.get("TQDM_DISABLE", "").strip().lower() in ("1", "true", "yes", "on"):
        return False
    stream = sys.stderr
    return bool(stream is not None and hasattr(stream, "isatty") and stream.isatty())


def heartbeat_interval() -> float:
    """Seconds between heartbeat lines: ``PRBENCH_PROGRESS_INTERVAL``, else 30.

    Raises:
        PrbenchUserError: the variable is not a number of seconds (``0`` or more, or ``inf``).
    """
    raw = os.environ.get(INTERVAL_VAR, "").strip()
    if not raw:
        return DEFAULT_INTERVAL_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if math.isnan(value) or value < 0:
        raise PrbenchUserError(
            f"{INTERVAL_VAR}={raw!r} is not a number of seconds: set it to the seconds between "
            f"two progress lines in a log (e.g. {DEFAULT_INTERVAL_S:g}; inf for none), or unset it"
        )
    return value


def _count(n: float) -> str:
    return f"{n:,.0f}" if float(n).is_integer() else f"{n:,.1f}"


def _rate(per_second: float) -> str:
    return f"{per_second:,.0f}" if per_second >= 100 else f"{per_second:.3g}"


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


class HeartbeatBar:
    """Progress as plain lines for a log: at most one per ``interval`` seconds, with a rate.

    The first line comes once ``interval`` seconds have passed since the bar was made (a step
    shorter than that prints nothing); each names the step, done/total, the share done, the rate
    (units done / seconds since the start) and, with a total, the time left at that rate. A bar
    that printed a line prints a last one when it is closed. The clock is injectable (tests).
    """

    def __init__(self, total: int | None, *, desc: str, unit: str = "it",
                 interval: float = DEFAULT_INTERVAL_S, stream: IO[str] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """Start the step's clock now; lines go to ``stream`` (standard error when ``None``)."""
        self.total = total
        self.desc = desc
        self.unit = unit
        self.n: float = 0
        self.interval = interval
        self.lines = 0
        self._stream = stream
        self._clock = clock
        self._start = clock()
        self._last = self._start
        self._postfix = ""
        self._closed = False

    def _write(self, text: str) -> None:
        stream = self._stream if self._stream is not None else sys.stderr
        if stream is None:
            return
        stream.write(HEARTBEAT_PREFIX + text + "\n")
        stream.flush()
        self.lines += 1

    def line(self, now: float) -> str:
        """The progress line at time ``now`` (the bar's own clock)."""
        elapsed = now - self._start
        rate = self.n / elapsed if elapsed > 0 else None
        done = _count(self.n)
        if self.total:
            done += f"/{_count(self.total)} {self.unit} ({100 * self.n / self.total:.0f}%)"
        else:
            done += f" {self.unit}"
        parts = [f"{self.desc}: {done}"]
        parts.append(f"{_rate(rate)} {self.unit}/s" if rate is not None else f"- {self.unit}/s")
        parts.append(f"{_duration(elapsed)} elapsed")
        if self.total and rate and self.n < self.total:
            parts.append(f"~{_duration((self.total - self.n) / rate)} left")
        if self._postfix:
            parts.append(self._postfix)
        return ", ".join(parts)

    def update(self, n: float = 1) -> None:
        """Count ``n`` more units; print a line if ``interval`` seconds passed since the last."""
        self.n += n
        now = self._clock()
        if now - self._last >= self.interval:
            self._last = now
            self._write(self.line(now))

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        """A status shown at the end of the next line (``key=value`` pairs, like tqdm's)."""
        kwargs.pop("refresh", None)  # tqdm's redraw switch, not a status
        items = dict(*args, **kwargs) if args or kwargs else {}
        self._postfix = ", ".join(f"{k}={v}" for k, v in items.items())

    def close(self) -> None:
        """Print the closing line when the step printed any (a short step stays silent)."""
        if self._closed:
            return
        self._closed = True
        if self.lines:
            now = self._clock()
            done = _count(self.n) + (f"/{_count(self.total)}" if self.total else "")
            elapsed = now - self._start
            rate = f", {_rate(self.n / elapsed)} {self.unit}/s" if elapsed > 0 else ""
            self._write(f"{self.desc}: done, {done} {self.unit} in {_duration(elapsed)}{rate}")

    def __enter__(self) -> HeartbeatBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(total: int | None, *, desc: str, unit: str = "it", enabled: bool = True) -> Any:
    """A tqdm bar on a terminal, a :class:`HeartbeatBar` without one, a :class:`NullBar` when off.

    Args:
        total: the number of units of work (``None`` if unknown).
        desc: a short label (``"scoring"``, ``"profiles"``, ...).
        unit: the unit shown with the rate (``"pair"``, ``"seq"``, ...).
        enabled: the caller's own switch (e.g. a component's ``progress`` option).

    Returns:
        An object with ``update(n)``, ``set_postfix(...)`` and ``close()``; usable as a context
        manager.

    Raises:
        PrbenchUserError: ``PRBENCH_PROGRESS_INTERVAL`` is not a number of seconds.
    """
    if _switched_off(enabled):
        return NullBar()
    if not progress_enabled(enabled):
        interval = heartbeat_interval()
        if math.isinf(interval):
            return NullBar()
        return HeartbeatBar(total, desc=desc, unit=unit, interval=interval)
    from tqdm.auto import tqdm

    # the decision above is final: a tqdm first imported under another call's TQDM_DISABLE
    # would otherwise swallow a bar the user asked for
    return tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True, leave=False, disable=False)


@contextlib.contextmanager
def restored_env(*names: str) -> Iterator[None]:
    """The environment variables ``names`` put back as they were when the block ends."""
    saved = {name: os.environ.get(name) for name in names}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def library_bars_off() -> Iterator[None]:
    """The tqdm bars of the libraries prbench drives off until the block ends, by environment.

    ``TQDM_DISABLE=1`` (tqdm reads it when it is first imported: in child processes, and in
    this one when nothing imported tqdm before) and ``HF_DATASETS_DISABLE_PROGRESS_BARS=1``
    (datasets' own switch) are set, a value the user set kept; both are put back on exit.
    Nothing of tqdm is replaced: a library that passes ``disable=`` itself keeps its bar.
    """
    with restored_env("TQDM_DISABLE", "HF_DATASETS_DISABLE_PROGRESS_BARS"):
        os.environ.setdefault("TQDM_DISABLE", "1")
        os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
        yield


def disable_progress() -> None:
    """Turn bars off for this process and its children (what ``--no_progress`` does)."""
    os.environ[ENV_VAR] = "0"
