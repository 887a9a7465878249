"""Out-of-memory handling shared by the scorer runtime and the batching engine.

Three things every back-off needs, kept in one place:

- :func:`is_oom_error` tells an out-of-memory error from any other. It asks accelerate first
  (``accelerate.utils.memory.should_reduce_batch_size``: the messages of CUDA, ROCm, XPU, MPS, HPU
  and the CPU allocator, and cuDNN's "not supported" that an oversized batch causes), then keeps
  what accelerate's list does not match: torch's typed ``OutOfMemoryError`` (whatever its text),
  Python's ``MemoryError``, and a ``RuntimeError`` whose text says "out of memory" or "cannot/can't
  allocate memory" in another spelling (the CUDA driver's ``CUDA error: out of memory``, the
  message without accelerate's final full stop);
- :func:`free_accelerator_memory` collects garbage, then returns the allocator's cached blocks to
  the driver with ``accelerate.utils.memory.clear_device_cache``, which knows every device torch
  runs on (CUDA, XPU, NPU, MPS, MLU, MUSA, ...). It is called by the retry loops *after* their
  ``except`` block has ended: while the block runs, the exception's traceback still holds the
  frames of the failed forward pass and every tensor in them, so emptying the cache there frees
  nothing;
- :class:`AdaptiveLimit` is a learned size (requests per chunk, padded tokens per batch): halved
  when a unit of work runs out of memory, grown back by doubling after a streak of successes, up
  to the size it started at. A size reached by growing that fails again doubles the streak needed
  before the next growth, so a limit that sits right at the edge of memory costs a logarithmic
  number of failed attempts, not one per streak. On a device that never runs out of memory the
  limit never moves, so chunk and batch boundaries (and the last bits of scores) stay those of a
  run without back-off.

:func:`uncounted_if_out_of_memory` keeps a failed attempt out of a scorer's running counts: the
caller redoes the work, so the counts of a run that backed off equal those of a clean run, apart
from ``oom_retries`` and ``wasted_tokens``.

:class:`AdaptiveLimit` and :func:`uncounted_if_out_of_memory` stay prbench's: accelerate's
``find_executable_batch_size`` only halves (it never grows a size back after a transient
failure) and retries a whole function, where prbench backs off per chunk and per batch.

Nothing here imports torch or accelerate at module import time.
"""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import Iterator, MutableMapping
from typing import Any

from prbench.errors import PrbenchUserError

logger = logging.getLogger(__name__)

#: Successes in a row at a lowered limit before it doubles again (see :class:`AdaptiveLimit`).
GROW_AFTER = 8


class ScorerOutOfMemoryError(PrbenchUserError, RuntimeError):
    """A single request does not fit in accelerator memory, even alone."""


def one_request_too_big(scorer: str, request: Any, back_offs: int) -> ScorerOutOfMemoryError:
    """The one-line error for a request that runs out of memory on its own (names its record)."""
    return ScorerOutOfMemoryError(
        f"scorer {scorer!r} ran out of memory on a single request "
        f"(record {getattr(request, 'record_id', '?')!r}) after {back_offs} back-offs; lower the "
        "scorer's batch or length options (e.g. max_length, batch_tokens), use a smaller dtype, "
        "or a device with more memory"
    )


def is_oom_error(exc: BaseException) -> bool:
    """True for an out-of-memory error (any torch device, or the CPU allocator).

    accelerate's ``should_reduce_batch_size`` decides first; torch's typed errors, ``MemoryError``
    and other spellings of the message are recognised beside it (see the module docstring).
    """
    if isinstance(exc, MemoryError):
        return True
    if not isinstance(exc, RuntimeError):
        return False  # every torch out-of-memory error is a RuntimeError
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a core dependency
        torch = None  # type: ignore[assignment]
    if torch is not None:
        oom_types = tuple(
            t
            for t in (getattr(torch, "OutOfMemoryError", None),
                      getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None))
            if isinstance(t, type)
        )
        if oom_types and isinstance(exc, oom_types):
            return True
    if _accelerate_says_oom(exc):
        return True
    text = str(exc).lower()
    return (
        "out of memory" in text
        or "can't allocate memory" in text
        or "cannot allocate memory" in text
    )


def _accelerate_says_oom(exc: RuntimeError) -> bool:
    """Accelerate's ``should_reduce_batch_size`` (False where accelerate cannot be imported)."""
    if not (len(exc.args) == 1 and isinstance(exc.args[0], str)):
        return False  # accelerate reads args[0] as text
    try:
        from accelerate.utils.memory import should_reduce_batch_size
    except ImportError:  # pragma: no cover - accelerate is a core dependency
        return False
    return bool(should_reduce_batch_size(exc))


def free_accelerator_memory() -> None:
    """Collect unreachable objects, then return cached accelerator memory to the driver.

    Call it once the failed attempt's exception is gone (outside the ``except`` block): the
    collection clears reference cycles that may still hold the attempt's tensors (a traceback's
    frames refer to each other), and only then can the emptied cache give their memory back.
    The cache is emptied by ``accelerate.utils.memory.clear_device_cache`` on whichever device
    torch has (CUDA, XPU, NPU, MPS, ...).
    """
    gc.collect()
    try:
        from accelerate.utils.memory import clear_device_cache

        clear_device_cache(garbage_collection=False)
    except Exception:  # pragma: no cover - best effort
        logger.debug("could not empty the accelerator's cache", exc_info=True)


class AdaptiveLimit:
    """A size learned from out-of-memory errors: halved on failure, grown back after successes.

    Args:
        cap: the size to start at and never exceed (>= 1).
        grow_after: successes in a row at a lowered size before it doubles.

    Attributes:
        cap: the upper bound.
        current: the size in force.
        grow_after: successes needed for the next doubling (doubles when a grown size fails).
        shrinks: how many times the limit was lowered.
        grows: how many times it was raised again.
    """

    def __init__(self, cap: int, *, grow_after: int = GROW_AFTER) -> None:
        if cap < 1:
            raise ValueError(f"a limit must be at least 1, got {cap}")
        if grow_after < 1:
            raise ValueError(f"grow_after must be at least 1, got {grow_after}")
        self.cap = int(cap)
        self.current = int(cap)
        self.grow_after = int(grow_after)
        self.shrinks = 0
        self.grows = 0
        self._streak = 0
        self._grown = False  # the current size was reached by growing (not yet proven)

    def shrink(self, failed: int, *, floor: int = 1) -> int:
        """Lower the limit after work of size ``failed`` ran out of memory.

        Args:
            failed: the size of the work that failed (requests, padded tokens).
            floor: the limit never goes below this.

        Returns:
            The new limit: half of ``failed`` (at least ``floor``), never above the current one.
        """
        if self._grown:  # growing was premature: wait twice as long before trying again
            self.grow_after *= 2
        self._grown = False
        self._streak = 0
        self.current = max(1, int(floor), min(self.current, int(failed) // 2))
        self.shrinks += 1
        return self.current

    def success(self) -> bool:
        """Record one unit of work that fit; returns True when the limit just grew."""
        if self.current >= self.cap:
            self._grown = False
            return False
        self._streak += 1
        if self._streak < self.grow_after:
            return False
        self._streak = 0
        self.current = min(self.cap, self.current * 2)
        self._grown = True
        self.grows += 1
        return True

    def __repr__(self) -> str:
        return f"AdaptiveLimit(current={self.current}, cap={self.cap})"


@contextlib.contextmanager
def uncounted_if_out_of_memory(counts: MutableMapping[str, int]) -> Iterator[None]:
    """Undo what an attempt added to ``counts`` if it runs out of memory (the error propagates).

    The caller (e.g. the scorer runtime, halving its chunk) redoes the work, so the attempt's
    counts would be counted twice: they are restored to their values before the attempt, except
    ``oom_retries`` (back-offs made inside the attempt are kept) and ``wasted_tokens``, which grows
    by the real tokens the attempt computed (``real_tokens``) plus those it already wasted.

    Args:
        counts: running integer counts, e.g. a scorer's stats.
    """
    before = dict(counts)
    try:
        yield
    except Exception as exc:
        if is_oom_error(exc):
            after = dict(counts)
            counts.clear()
            counts.update(before)

            def grew(key: str) -> int:
                return int(after.get(key, 0)) - int(before.get(key, 0))

            counts["oom_retries"] = int(after.get("oom_retries", 0))
            counts["wasted_tokens"] = (
                int(before.get("wasted_tokens", 0)) + grew("real_tokens") + grew("wasted_tokens")
            )
        raise


__all__ = [
    "GROW_AFTER",
    "AdaptiveLimit",
    "ScorerOutOfMemoryError",
    "free_accelerator_memory",
    "is_oom_error",
    "one_request_too_big",
    "uncounted_if_out_of_memory",
]
