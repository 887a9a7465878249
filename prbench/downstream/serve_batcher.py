"""The reward server's queue: requests coalesced into batches scored in one worker thread.

One worker takes waiting requests until a batch holds ``batch_tokens`` (approximate tokens,
characters / 4) or ``max_batch_items`` items, or until ``max_wait_ms`` has passed since the first
one, and scores the batch with one call of the shared scorer runtime in its own thread (the
runtime is built, used and closed there, so scorers and caches bound to a thread work unchanged).
The queue is bounded: with ``max_queue`` requests waiting a new one is refused
(:class:`QueueFullError`, answered 503 by :mod:`prbench.downstream.serve`). A batch that fails is
scored again request by request, so one bad request does not fail the others. Also here: the
server's settings (:class:`ServerConfig`) and its counters (:class:`ServerMetrics`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from prbench.downstream.serve_guard import DEFAULT_MAX_BODY_BYTES
from prbench.scoring.base import ScoreRequest


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    """Batching and queueing settings of the reward server.

    Attributes:
        batch_tokens: approximate tokens per batch (characters / 4); a single larger request runs
            alone.
        max_batch_items: most items (responses) per batch.
        max_wait_ms: longest a request waits for others to join its batch.
        max_queue: most requests waiting; beyond it the server answers 503 + ``Retry-After``.
        max_items_per_request: most items in one HTTP request (larger ones get 413).
        max_body_bytes: the largest request body; a larger one gets 413 before it is parsed.
        retry_after_s: the ``Retry-After`` value sent with 503.
        strip: strings removed from the end of OpenRLHF responses (EOS / pad tokens).
        latency_window: how many recent request latencies the percentiles are computed from.
    """

    batch_tokens: int = 65536
    max_batch_items: int = 256
    max_wait_ms: float = 5.0
    max_queue: int = 1024
    max_items_per_request: int = 4096
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    retry_after_s: int = 1
    strip: tuple[str, ...] = ()
    latency_window: int = 10000

    def __post_init__(self) -> None:
        for name in ("batch_tokens", "max_batch_items", "max_queue", "max_items_per_request",
                     "max_body_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"server option {name} must be at least 1")
        if self.max_wait_ms < 0:
            raise ValueError("server option max_wait_ms must be >= 0")


class QueueFullError(RuntimeError):
    """The request queue is full; the client should retry later."""


@dataclasses.dataclass
class _Job:
    requests: list[ScoreRequest]
    tokens: int
    future: asyncio.Future[list[float]]
    start: float


class ServerMetrics:
    """The server's counters and a window of recent request latencies (``/metrics``)."""

    def __init__(self, window: int) -> None:
        self.started = time.monotonic()
        self.requests = 0
        self.items = 0
        self.batches = 0
        self.batch_items = 0
        self.batch_requests = 0
        self.max_batch_items = 0
        self.errors = 0
        self.bad_requests = 0
        self.rejected = 0
        self.unauthorized = 0
        self.too_large = 0
        self.non_finite = 0
        self.prompt_cut_left = 0
        self.latencies: collections.deque[float] = collections.deque(maxlen=window)

    def percentiles(self) -> dict[str, float | None]:
        """Latency percentiles (p50, p90, p95, p99), mean and max in milliseconds."""
        values = sorted(self.latencies)
        if not values:
            return {"p50": None, "p90": None, "p95": None, "p99": None, "mean": None, "max": None}

        def pick(q: float) -> float:
            return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))] * 1e3

        return {
            "p50": pick(0.50), "p90": pick(0.90), "p95": pick(0.95), "p99": pick(0.99),
            "mean": sum(values) / len(values) * 1e3, "max": values[-1] * 1e3,
        }


class RewardBatcher:
    """Coalesces scoring requests into runtime calls made in one worker thread.

    Args:
        runtime_factory: builds the scorer runtime; called in the worker thread.
        config: batching and queueing settings.
    """

    def __init__(self, runtime_factory: Callable[[], Any], config: ServerConfig) -> None:
        self.config = config
        self._factory = runtime_factory
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prbench-reward")
        self._pending: collections.deque[_Job] = collections.deque()
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.runtime: Any = None
        self.metrics = ServerMetrics(config.latency_window)

    async def start(self) -> None:
        """Build the runtime (in the worker thread) and start the batching loop."""
        loop = asyncio.get_running_loop()
        self.runtime = await loop.run_in_executor(self._executor, self._factory)
        if getattr(self.runtime, "pairwise", False):
            await loop.run_in_executor(self._executor, self.runtime.close)
            raise ValueError("the reward server needs a pointwise scorer; this one is pairwise "
                             "(it compares two answers and gives no per-answer reward)")
        self._wakeup = asyncio.Event()
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        """Fail waiting requests, stop the loop, close the runtime in its thread."""
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        while self._pending:
            job = self._pending.popleft()
            if not job.future.done():
                job.future.set_exception(RuntimeError("the reward server is shutting down"))
        if self.runtime is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor, self.runtime.close)
        self._executor.shutdown(wait=True)

    @property
    def queue_depth(self) -> int:
        """Requests waiting for a batch."""
        return len(self._pending)

    async def submit(self, requests: list[ScoreRequest]) -> list[float]:
        """Queue ``requests`` for the next batch and wait for their scores (request order).

        Raises:
            QueueFullError: ``max_queue`` requests are already waiting.
        """
        if self._closing or self._wakeup is None:
            raise RuntimeError("the reward server is not running")
        if len(self._pending) >= self.config.max_queue:
            self.metrics.rejected += 1
            raise QueueFullError(f"{len(self._pending)} requests waiting")
        from prbench.downstream.serve_schema import approx_tokens

        loop = asyncio.get_running_loop()
        job = _Job(requests, sum(approx_tokens(r) for r in requests), loop.create_future(),
                   time.monotonic())
        self.metrics.requests += 1
        self.metrics.items += len(requests)
        self._pending.append(job)
        self._wakeup.set()
        try:
            return await job.future
        finally:
            self.metrics.latencies.append(time.monotonic() - job.start)

    def _fits(self, items: int, tokens: int, job: _Job) -> bool:
        c = self.config
        return (items + len(job.requests) <= c.max_batch_items
                and tokens + job.tokens <= c.batch_tokens)

    async def _next_batch(self) -> list[_Job]:
        assert self._wakeup is not None
        while not self._pending:
            self._wakeup.clear()
            await self._wakeup.wait()
        batch = [self._pending.popleft()]
        items, tokens = len(batch[0].requests), batch[0].tokens
        deadline = time.monotonic() + self.config.max_wait_ms / 1e3
        while True:
            if self._pending:
                if not self._fits(items, tokens, self._pending[0]):
                    break
                job = self._pending.popleft()
                batch.append(job)
                items += len(job.requests)
                tokens += job.tokens
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), remaining)
            except TimeoutError:
                break
        return batch

    async def _loop(self) -> None:
        while True:
            batch = await self._next_batch()
            flat = [r for job in batch for r in job.requests]
            m = self.metrics
            m.batches += 1
            m.batch_items += len(flat)
            m.batch_requests += len(batch)
            m.max_batch_items = max(m.max_batch_items, len(flat))
            try:
                scores = await self._score(flat)
            except Exception as exc:
                if len(batch) == 1:
                    self._fail(batch[0], exc)
                    continue
                # one bad request must not fail the others it was batched with: score each alone
                for job in batch:
                    try:
                        self._deliver(job, await self._score(job.requests))
                    except Exception as job_exc:
                        self._fail(job, job_exc)
                continue
            at = 0
            for job in batch:
                self._deliver(job, scores[at : at + len(job.requests)])
                at += len(job.requests)

    async def _score(self, requests: list[ScoreRequest]) -> list[float]:
        loop = asyncio.get_running_loop()
        scores = await loop.run_in_executor(self._executor, self.runtime.score, requests)
        if len(scores) != len(requests):
            raise RuntimeError(f"the runtime returned {len(scores)} scores for {len(requests)} "
                               "requests")
        return [float(s) for s in scores]

    def _deliver(self, job: _Job, scores: list[float]) -> None:
        if not job.future.done():
            job.future.set_result(scores)

    def _fail(self, job: _Job, exc: BaseException) -> None:
        self.metrics.errors += 1
        if not job.future.done():
            job.future.set_exception(exc)

    def snapshot(self) -> dict[str, Any]:
        """The ``/metrics`` document."""
        m = self.metrics
        stats: dict[str, Any] = {}
        if self.runtime is not None and hasattr(self.runtime, "stats"):
            try:
                stats = dict(self.runtime.stats())
            except Exception as exc:  # metrics must never fail because of a scorer
                stats = {"error": str(exc)}
        return {
            "uptime_s": time.monotonic() - m.started,
            "requests": m.requests,
            "items": m.items,
            "batches": m.batches,
            "mean_batch_items": m.batch_items / m.batches if m.batches else 0.0,
            "mean_batch_requests": m.batch_requests / m.batches if m.batches else 0.0,
            "max_batch_items": m.max_batch_items,
            "queue_depth": self.queue_depth,
            "queue_items": sum(len(j.requests) for j in self._pending),
            "errors": m.errors,
            "bad_requests": m.bad_requests,
            "rejected": m.rejected,
            "unauthorized": m.unauthorized,
            "too_large": m.too_large,
            "non_finite": m.non_finite,
            "prompt_cut_left": m.prompt_cut_left,
            "latency_ms": m.percentiles(),
            "config": dataclasses.asdict(self.config),
            "runtime": stats,
        }
