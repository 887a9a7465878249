"""A bound on each scorer call: a call that does not return in time ends the run.

The scorer keeps running in the thread that called it (its models, connections and thread-local
state stay where it made them). In the main thread the bound is a ``SIGALRM`` timer, which also
breaks a blocking sleep or socket wait; in another thread (a reward server's worker) a watchdog
raises the timeout in that thread when it next runs Python code. Either way the scorer sees
:class:`CallTimedOut`, a ``BaseException`` so that a scorer's own ``except Exception`` cannot
swallow it, and the runtime turns it into one error naming the scorer, with every chunk scored
before it kept in the score cache.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = ["CallTimedOut", "call_with_timeout"]

T = TypeVar("T")


class CallTimedOut(BaseException):
    """Raised inside a scorer call that ran longer than its runtime option ``call_timeout``."""

    def __init__(self, seconds: float = 0.0) -> None:
        super().__init__(seconds)
        self.seconds = seconds

    def __str__(self) -> str:
        return (f"no result within {self.seconds:g} s (runtime option call_timeout=SECONDS; 0 "
                "turns the limit off)")


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """``SIGALRM`` after ``seconds`` raises :class:`CallTimedOut` (main thread only)."""

    def on_alarm(signum: int, frame: Any) -> None:
        raise CallTimedOut(seconds)

    previous = signal.signal(signal.SIGALRM, on_alarm)
    remaining = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if remaining[0] > 0:  # someone else's timer was running: give it back
            signal.setitimer(signal.ITIMER_REAL, *remaining)


@contextlib.contextmanager
def _watchdog(seconds: float) -> Iterator[None]:
    """Raise :class:`CallTimedOut` in this thread after ``seconds`` (at its next bytecode)."""
    ident = threading.get_ident()
    fired = threading.Event()
    done = threading.Event()
    lock = threading.Lock()

    def fire() -> None:
        with lock:
            if done.is_set():
                return
            fired.set()
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(ident), ctypes.py_object(CallTimedOut)
            )

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    except CallTimedOut:
        raise CallTimedOut(seconds) from None  # the async one carries no seconds
    finally:
        with lock:
            done.set()
            timer.cancel()
        if fired.is_set():  # fired too late to be raised: clear it so it cannot hit later code
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), None)


def call_with_timeout(fn: Callable[[Any], T], arg: Any, seconds: float) -> T:
    """``fn(arg)``, raising :class:`CallTimedOut` inside it after ``seconds`` (0: no limit).

    Raises:
        CallTimedOut: the call ran longer than ``seconds``.
    """
    if not seconds or seconds <= 0:
        return fn(arg)
    main = threading.current_thread() is threading.main_thread()
    guard = _alarm(seconds) if main and hasattr(signal, "setitimer") else _watchdog(seconds)
    with guard:
        return fn(arg)
