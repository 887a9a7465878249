"""A batched HTTP reward server for distributed RL engines (OpenRLHF, verl) and other clients.

``prbench serve --model_args scorer=ID`` puts any prbench scorer behind FastAPI + uvicorn:

- requests are **coalesced**: one worker takes waiting requests until a batch holds
  ``batch_tokens`` (approximate tokens, characters / 4) or ``max_batch_items`` items, or until
  ``max_wait_ms`` has passed since the first one, and scores the batch with one call of the shared
  scorer runtime (dedup, score cache, chunking, out-of-memory back-off) in a worker thread
  (:mod:`prbench.downstream.serve_batcher`);
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

import contextlib
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from prbench.downstream.serve_batcher import (
    QueueFullError,
    RewardBatcher,
    ServerConfig,
    ServerMetrics,
)
from prbench.scoring.base import ScoreRequest


def _json_scores(values: Sequence[float], metrics: ServerMetrics) -> list[float | None]:
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
        ScoreBody,
        decode_body,
        native_requests,
        openapi_body,
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
    # /score reads its raw body (413 and depth guards, prbench's 400s) yet documents its model
    score_body, schemas = openapi_body(ScoreBody)
    app.add_api_route("/score", score, methods=["POST"], openapi_extra={"requestBody": score_body})

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = FastAPI.openapi(app)
            spec.setdefault("components", {}).setdefault("schemas", {}).update(schemas)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
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
        from prbench.scoring.spec import build_runtime

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
