"""Telling the user's Ctrl-C apart from a plugin that raises ``KeyboardInterrupt`` or exits.

A scorer or profile builder that raises ``SystemExit`` (``sys.exit(0)`` deep in a library) or
``KeyboardInterrupt`` would end the run with no results and, for ``SystemExit(0)``, exit 0 and no
message. The fault wrappers treat both as plugin faults (:func:`plugin_escape`), except a
``KeyboardInterrupt`` that follows a real ``SIGINT``: :func:`watch_sigint` (installed by the
``prbench`` command) records each one, so Ctrl-C still stops the run with exit 130.

Ground floor: imports nothing from prbench.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["plugin_escape", "sigint_seen", "watch_sigint"]

_state = {"watching": False, "seen": 0}


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _state["seen"] += 1
    signal.default_int_handler(signum, frame)  # raises KeyboardInterrupt, as Python's own


@contextlib.contextmanager
def watch_sigint() -> Iterator[None]:
    """Record every ``SIGINT`` while the block runs (main thread, default handler only).

    Outside such a block (a library caller, another handler installed), every
    ``KeyboardInterrupt`` counts as the user's.
    """
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    previous = dict(_state)
    _state.update(watching=True, seen=0)
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _state.update(previous)


def sigint_seen() -> bool:
    """True when a ``SIGINT`` arrived, or when nobody watches (assume the user's)."""
    return not _state["watching"] or _state["seen"] > 0


def plugin_escape(exc: BaseException) -> bool:
    """True for a ``SystemExit``, or a ``KeyboardInterrupt`` no ``SIGINT`` explains.

    Such an exception raised inside a plugin's code is that plugin's fault, reported like any
    other error it raises.
    """
    if isinstance(exc, SystemExit):
        return True
    return isinstance(exc, KeyboardInterrupt) and not sigint_seen()
