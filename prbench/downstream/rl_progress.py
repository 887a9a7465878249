"""Per-step progress of an RL run: one line per optimisation step and the reward curve.

TRL logs the mean reward of every step (``logging_steps=1``); :class:`RewardCurve` keeps those
figures (step, mean and spread of the reward, completion length, seconds since training began)
and, unless progress is off, prints one line per step to standard error::

    rl: step 3/20  reward 0.412 (std 0.051)  len 31.5  5.2 s/step  ETA 1m31s

Lines rather than a bar, so a log file or CI output keeps them; ``--no-progress`` (which sets
``PRBENCH_PROGRESS=0``) turns them off, and ``step_lines=false`` on the ``online-rl`` component.
:func:`trainer_callback` wraps a curve as a ``transformers.TrainerCallback``.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from prbench.progress import ENV_VAR

#: TRL's log keys for the figures kept per step (first key found wins)
_KEYS = {
    "reward": ("reward",),
    "reward_std": ("reward_std",),
    "completion_length": ("completions/mean_length", "completion_length"),
}


def step_lines_enabled(wanted: bool = True) -> bool:
    """Whether to print step lines: the caller's wish, unless ``PRBENCH_PROGRESS`` is off.

    Unlike progress bars they do not need a terminal (a line per step reads fine in a log).
    """
    env = os.environ.get(ENV_VAR, "").strip().lower()
    return wanted and env not in ("0", "false", "no", "off")


def format_duration(seconds: float) -> str:
    """``75`` -> ``1m15s``; ``3700`` -> ``1h01m``; under a minute ``42s``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


class RewardCurve:
    """The per-step reward of a run, printed as it grows.

    Args:
        show: print one line per step.
        stream: where lines go (default: standard error at the time of printing).
        clock: seconds, monotonic (a parameter so tests can drive it).
    """

    def __init__(self, *, show: bool = True, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.show = show
        self.stream = stream
        self.clock = clock
        self.total = 0
        self.started: float | None = None
        self.points: list[dict[str, Any]] = []

    def start(self, total_steps: int) -> None:
        """Training begins; ``total_steps`` is the number of optimisation steps planned."""
        self.total = total_steps
        self.started = self.clock()

    def record(self, step: int, logs: Mapping[str, Any]) -> str | None:
        """Keep the figures of one logged step; return (and print) its line.

        Logs without a reward (TRL's final summary, a checkpoint note) are skipped (``None``).
        """
        values = {name: _first(logs, keys) for name, keys in _KEYS.items()}
        if values["reward"] is None:
            return None
        if self.started is None:
            self.start(self.total)
        elapsed = self.clock() - (self.started or 0.0)
        point = {"step": step, **values, "seconds": round(elapsed, 3)}
        self.points.append(point)
        line = self.line(point)
        if self.show:
            print(line, file=self.stream or sys.stderr, flush=True)
        return line

    def line(self, point: Mapping[str, Any]) -> str:
        """The progress line of one point."""
        step = int(point["step"])
        total = f"/{self.total}" if self.total > 0 else ""
        parts = [f"rl: step {step}{total}", f"reward {point['reward']:.4f}"]
        if point.get("reward_std") is not None:
            parts[-1] += f" (std {point['reward_std']:.3f})"
        if point.get("completion_length") is not None:
            parts.append(f"len {point['completion_length']:.1f}")
        done = len(self.points)
        per_step = point["seconds"] / done if done else 0.0
        parts.append(f"{per_step:.1f} s/step")
        if self.total > 0:
            parts.append(f"ETA {format_duration(per_step * max(0, self.total - step))}")
        return "  ".join(parts)

    def summary(self) -> dict[str, Any]:
        """First and last reward and the whole curve (what ``rl_results.json`` keeps)."""
        rewards = [p["reward"] for p in self.points]
        return {
            "reward_first": rewards[0] if rewards else None,
            "reward_last": rewards[-1] if rewards else None,
            "curve": list(self.points),
        }


def _first(logs: Mapping[str, Any], keys: tuple[str, ...]) -> float | None:
    for key in keys:
        value = logs.get(key)
        if isinstance(value, (int, float)) and not math.isnan(float(value)):
            return float(value)
    return None


def trainer_callback(curve: RewardCurve) -> Any:
    """A ``transformers.TrainerCallback`` feeding ``curve`` from the trainer's logs."""
    from transformers import TrainerCallback

    class _RewardCurveCallback(TrainerCallback):  # type: ignore[misc]
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            curve.start(int(state.max_steps or 0))

        def on_log(self, args: Any, state: Any, control: Any,
                   logs: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
            if logs:
                curve.record(int(state.global_step), logs)

    return _RewardCurveCallback()
