"""The one switch and factory for progress bars on long work.

Every step that can take more than a couple of seconds (profile building, embedding, scoring,
judging, building pairs, Best-of-N) shows a tqdm bar made by :func:`progress_bar`. Bars are off
when the user passed ``--no_progress`` (the CLI sets ``PRBENCH_PROGRESS=0``), when a component's own
``progress`` option is false, or when standard error is not a terminal (logs and CI stay clean);
``PRBENCH_PROGRESS=1`` forces them on; a ``TQDM_DISABLE`` the user set turns them off.

The libraries prbench drives (lm-eval, datasets, transformers) draw plain tqdm bars;
:func:`library_bars_off` turns those off for one command (``--no_progress``, or standard error
not a terminal). tqdm reads its ``TQDM_*`` variables once, when it is first imported, so the
variable alone would leave a bar-less tqdm behind for the rest of an in-process caller's session
(a notebook, a test run) whenever the command was the first to import it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
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
    """Whether to show a bar: the caller's wish, ``PRBENCH_PROGRESS``, ``TQDM_DISABLE``, the TTY."""
    if not enabled:
        return False
    env = os.environ.get(ENV_VAR, "").strip().lower()
    if env in ("0", "false", "no", "off"):
        return False
    if env in ("1", "true", "yes", "on"):
        return True
    if os.environ.get("TQDM_DISABLE", "").strip().lower() in ("1", "true", "yes", "on"):
        return False
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
    """The tqdm bars of the libraries prbench drives off until the block ends.

    ``TQDM_DISABLE=1`` is set for child processes (a sweep's cells, data-parallel workers; a value
    the user set is kept), and tqdm's own default is switched to ``disable=True`` in this process;
    both are put back on exit. tqdm is imported first, under the caller's environment, so its
    import-time reading of ``TQDM_*`` never sees the temporary value.
    """
    import functools

    import tqdm.std

    original = tqdm.std.tqdm.__dict__["__init__"]
    with restored_env("TQDM_DISABLE"):
        os.environ.setdefault("TQDM_DISABLE", "1")
        tqdm.std.tqdm.__init__ = functools.partialmethod(original, disable=True)  # type: ignore[method-assign]
        try:
            yield
        finally:
            tqdm.std.tqdm.__init__ = original  # type: ignore[method-assign]


def disable_progress() -> None:
    """Turn bars off for this process and its children (what ``--no_progress`` does)."""
    os.environ[ENV_VAR] = "0"
