"""A batched HTTP reward server for distributed RL engines (OpenRLHF, verl) and other clients.

``prbench serve --model_args scorer=ID`` puts any prbench scorer behind FastAPI + uvicorn:

- requests are **coalesced**: one worker takes waiting requests until a batch holds
  ``batch_tokens`` (approximate tokens, characters / 4) or ``max_batch_items`` items, or until
  ``max_wait_ms`` has passed since the first one, and scores the batch with one call of the shared
  scorer runtime (dedup, score cache, chunking, out-of-memory back-off) in a worker thread;
- the queue is **bounded**: with ``max_queue`` requests waiting, a new one is answered HTTP 503
  with ``Retry-After`` (clients back off and retry; see :mod:`prbench.downstream.serve_client`);
- ``GET /health`` and ``GET /metrics`` (JSON: requests, items, batches, mean batch size, queue
  depth, latency percentiles, errors, rejected, unauthorized, too large, the runtime's stats);
- **guarded** (:mod:`prbench.downstream.serve_guard`): bodies over ``max_body_bytes`` are answered
  413 before they are read in full or parsed, and with a token every path but ``/health`` needs
  ``Authorization: Bearer <token>`` (401 otherwise). A body that is not JSON, or nests too deeply,
  is answered 400 with a JSON error, like every other bad request.

Endpoints that score (request shapes in :mod:`prbench.downstream.serve_schema`):
``POST /get_reward`` (OpenRLHF's remote reward-model schema, answer ``{"rewards": [...]}``) and
``POST /score`` (native structured records, answer ``{"scores": [...]}``). Rewards come back in
request order; a non-finite score is sent as ``null``. ``/get_reward`` always answers
``{"rewards", "scores", "extra_logs"}`` (also for an empty query list), which OpenRLHF and verl
clients read; ``extra_logs["prompt_cut_left"]`` is 1.0 for each query that carried only the end of
its prompt (OpenRLHF cuts long prompts from the left), 0.0 otherwise, and ``/metrics`` counts them.

The runtime is built, used and closed in one dedicated thread, so scorers and caches that are
bound to a thread (SQLite connections, CUDA streams) work unchanged.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
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


class _Metrics:
    """Counters and a window of recent latencies."""

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
        self.metrics = _Metrics(config.latency_window)

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


def _json_scores(values: Sequence[float], metrics: _Metrics) -> list[float | None]:
    out: list[float | None] = []
    for v in values:
        if math.isfinite(v):
            out.append(v)
        else:
            metrics.non_finite += 1
            out.append(None)
    return out


def create_app(
    runtime_factory: Callable[[], Any],
    config: ServerConfig | None = None,
    *,
    scorer: str = "",
    diagnostic: bool = False,
    api_key: str | None = None,
) -> Any:
    """The FastAPI application (the runtime is built when the app starts).

    Args:
        runtime_factory: builds the scorer runtime (called once, in the worker thread).
        config: batching, queueing and body-size settings.
        scorer: the scorer id (shown by ``/health``).
        diagnostic: the scorer reads hidden fields; items may carry ``narrative`` and
            ``rubric_aspects``, and ``/health`` flags it.
        api_key: the bearer token every path but ``/health`` needs; ``None`` or ``""``: none.
            Only its digest is kept (see :mod:`prbench.downstream.serve_guard`).
    """
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    from prbench.downstream.serve_guard import RequestGuard, token_digest
    from prbench.downstream.serve_schema import (
        PayloadError,
        decode_body,
        native_requests,
        openrlhf_batch,
    )

    cfg = config or ServerConfig()
    batcher = RewardBatcher(runtime_factory, cfg)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        try:
            await batcher.start()
        except Exception as exc:  # reported in one line by whoever runs the app
            app.state.startup_error = exc
            raise
        try:
            yield
        finally:
            await batcher.stop()

    app = FastAPI(title="prbench reward server", lifespan=lifespan)
    app.state.batcher = batcher
    app.state.startup_error = None

    def count(kind: str) -> None:
        setattr(batcher.metrics, kind, getattr(batcher.metrics, kind) + 1)

    token = (api_key or "").strip()
    app.add_middleware(RequestGuard, max_body_bytes=cfg.max_body_bytes, count=count,
                       api_key_digest=token_digest(token) if token else None)
    app.add_middleware(_NoStartupTraceback)

    def error(status: int, message: str, **headers: str) -> Any:
        return JSONResponse({"error": message}, status_code=status, headers=headers or None)

    def answer(key: str, values: list[float | None], logs: dict[str, list[float]]) -> Any:
        if key == "rewards":  # OpenRLHF reads "rewards"; newer versions also "scores"/"extra_logs"
            return JSONResponse({"rewards": values, "scores": values, "extra_logs": logs})
        return JSONResponse({key: values})

    Parsed = tuple[list[ScoreRequest], dict[str, list[float]]]

    async def handle(request: Request, parse: Callable[[Any], Parsed], key: str) -> Any:
        try:  # the guard has already refused bodies over max_body_bytes
            requests, logs = parse(decode_body(await request.body()))
        except PayloadError as exc:
            batcher.metrics.bad_requests += 1
            return error(400, str(exc))
        if len(requests) > cfg.max_items_per_request:
            batcher.metrics.bad_requests += 1
            return error(413, f"{len(requests)} items in one request; the limit is "
                              f"{cfg.max_items_per_request} (split the request)")
        if not requests:
            return answer(key, [], logs)
        try:
            scores = await batcher.submit(requests)
        except QueueFullError as exc:
            return error(503, f"queue full ({exc}); retry later", **{
                "Retry-After": str(cfg.retry_after_s)})
        except Exception as exc:
            return error(500, f"scoring failed: {type(exc).__name__}: {exc}")
        # counted once scored, so a request retried after a 503 is not counted twice
        batcher.metrics.prompt_cut_left += int(sum(logs.get("prompt_cut_left", ())))
        return answer(key, _json_scores(scores, batcher.metrics), logs)

    def parse_openrlhf(body: Any) -> Parsed:
        batch = openrlhf_batch(body, strip=cfg.strip, diagnostic=diagnostic)
        return batch.requests, batch.extra_logs()

    async def get_reward(request: Request) -> Any:
        return await handle(request, parse_openrlhf, "rewards")

    async def score(request: Request) -> Any:
        return await handle(request, lambda b: (native_requests(b, diagnostic=diagnostic), {}),
                            "scores")

    async def health() -> Any:
        return {"status": "ok", "scorer": scorer, "diagnostic": diagnostic,
                "queue_depth": batcher.queue_depth}

    async def metrics() -> Any:
        return batcher.snapshot()

    async def internal_error(request: Request, exc: Exception) -> Any:
        # a bug, never a bad request: still a JSON body for the client (the log has the traceback)
        return error(500, f"internal error: {type(exc).__name__}: {exc}")

    app.add_exception_handler(Exception, internal_error)

    # annotations are strings under `from __future__ import annotations` and FastAPI resolves them
    # in this module's globals, where the lazily imported Request is not: give it the class
    for endpoint in (get_reward, score):
        endpoint.__annotations__["request"] = Request
    app.add_api_route("/get_reward", get_reward, methods=["POST"])
    app.add_api_route("/score", score, methods=["POST"])
    app.add_api_route("/health", health, methods=["GET"])
    app.add_api_route("/metrics", metrics, methods=["GET"])
    return app


class _NoStartupTraceback:
    """Keeps the ASGI server from logging a traceback when the scorer cannot be built.

    Starlette reports a failed start-up with the whole traceback, which uvicorn logs. The app
    keeps the error in ``app.state.startup_error`` instead, and ``prbench serve`` (or
    :func:`start_in_thread`) reports it in one line.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def quiet(message: Any) -> None:
            if message.get("type") == "lifespan.startup.failed":
                message = {**message, "message": ""}
            await send(message)

        await self.app(scope, receive, quiet)


def startup_error(app: Any) -> str:
    """One line saying why ``app`` could not start (``""`` when it did, or has not tried)."""
    exc = getattr(getattr(app, "state", None), "startup_error", None)
    if exc is None:
        return ""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def runtime_factory(scorer: str, options: Mapping[str, Any] | None = None) -> Callable[[], Any]:
    """A factory that builds the shared scorer runtime for ``scorer`` (progress bars off)."""
    raw = dict(options or {})

    def build() -> Any:
        from prbench.scoring.runtime import build_runtime

        return build_runtime(scorer, raw, progress=False)

    return build


class ServerHandle:
    """A server running in a background thread (tests, benchmarks, notebooks).

    Attributes:
        url: ``http://host:port`` of the running server.
        app: the FastAPI app.
    """

    def __init__(self, server: Any, thread: threading.Thread, app: Any, url: str) -> None:
        self._server = server
        self._thread = thread
        self.app = app
        self.url = url

    def metrics(self) -> dict[str, Any]:
        """The current ``/metrics`` document (read in-process)."""
        snapshot: dict[str, Any] = self.app.state.batcher.snapshot()
        return snapshot

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the server to exit and wait for it."""
        self._server.should_exit = True
        self._thread.join(timeout)

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_in_thread(app: Any, host: str = "127.0.0.1", port: int = 0,
                    timeout: float = 120.0) -> ServerHandle:
    """Run ``app`` with uvicorn in a daemon thread; ``port=0`` picks a free port.

    Raises:
        RuntimeError: the server did not start within ``timeout`` seconds (e.g. the scorer
            failed to build; the error is in the log).
    """
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    def serve() -> None:
        with contextlib.suppress(SystemExit):  # uvicorn's exit on a failed start-up: raised below
            server.run()

    thread = threading.Thread(target=serve, name="prbench-reward-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            why = startup_error(app) or "see the log above"
            raise RuntimeError(f"the reward server did not start ({why})")
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()
    return ServerHandle(server, thread, app, f"http://{bound[0]}:{bound[1]}")
