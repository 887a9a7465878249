"""The one switch and factory for progress bars on long work.

Every step that can take more than a couple of seconds (profile building, embedding, scoring,
judging, building pairs, Best-of-N) shows a tqdm bar made by :func:`progress_bar`. Bars are off
when the user passed ``--no_progress`` (the CLI sets ``PRBENCH_PROGRESS=0``), when a component's own
``progress`` option is false, or when standard error is not a terminal (logs and CI stay clean);
``PRBENCH_PROGRESS=1`` forces them on.
"""

from __future__ import annotations

import os
import sys
from typing import Any

ENV_VAR = "PRBENCH_PROGRESS"


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


def progress_enabled(enabled: bool = True) -> bool:
    """Whether to show a bar: the caller's wish, then ``PRBENCH_PROGRESS``, then the TTY."""
    if not enabled:
        return False
    env = os.environ.get(ENV_VAR, "").strip().lower()
    if env in ("0", "false", "no", "off"):
        return False
    if env in ("1", "true", "yes", "on"):
        return True
    stream = sys.stderr
    return bool(stream is not None and hasattr(stream, "isatty") and stream.isatty())


def progress_bar(total: int | None, *, desc: str, unit: str = "it", enabled: bool = True) -> Any:
    """A tqdm bar with counts and rate, or a :class:`NullBar` when bars are off.

    Args:
        total: the number of units of work (``None`` if unknown).
        desc: a short label (``"scoring"``, ``"profiles"``, ...).
        unit: the unit shown with the rate (``"pair"``, ``"seq"``, ...).
        enabled: the caller's own switch (e.g. a component's ``progress`` option).

    Returns:
        An object with ``update(n)``, ``set_postfix(...)`` and ``close()``; usable as a context
        manager.
    """
    if not progress_enabled(enabled):
        return NullBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True, leave=False)


def disable_progress() -> None:
    """Turn bars off for this process and its children (what ``--no_progress`` does)."""
    os.environ[ENV_VAR] = "0"
