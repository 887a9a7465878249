"""The OpenAI-compatible HTTP backend against a real scripted server on 127.0.0.1."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import uuid
from pathlib import Path

import pytest
from _backend_fixtures import ScriptedOpenAIServer

from prbench.backends import (
    BackendFatalError,
    BackendSpec,
    GenerationConfig,
    GenerationFailure,
    build_backend,
)
from prbench.backends.http import (
    BackendCapabilityError,
    BackendRequestError,
    OpenAIBackend,
)
from prbench.testing import send_json

GREEDY = GenerationConfig(max_new_tokens=32)


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]


@pytest.fixture
def server():
    with ScriptedOpenAIServer() as srv:
        yield srv


def make_backend(server: ScriptedOpenAIServer, **overrides) -> OpenAIBackend:
    fields = {"backend": "openai", "model": "tiny-judge", "base_url": server.base_url}
    fields.update(overrides)
    backend = build_backend(BackendSpec(**fields))
    assert isinstance(backend, OpenAIBackend)
    backend.backoff_base = 0.01
    return backend


def test_generate_sends_the_request_and_keeps_order(server):
    backend = make_backend(server, cache_dir="")
    config = GenerationConfig(max_new_tokens=7, temperature=0.5, top_p=0.9, seed=11, stop=("!!",))
    out = backend.generate([chat("first"), chat("second"), chat("third")], config)
    assert out == [f"reply to {w} (t=0.5, seed=11)" for w in ("first", "second", "third")]
    assert len(server.requests) == 3
    path, headers, body = next(
        r for r in server.requests if r[2]["messages"][-1]["content"] == "second"
    )
    assert path == "/v1/chat/completions"
    assert headers["Content-Type"] == "application/json"
    assert body == {
        "model": "tiny-judge",
        "messages": chat("second"),
        "max_tokens": 7,
        "temperature": 0.5,
        "top_p": 0.9,
        "seed": 11,
        "stop": ["!!"],
    }
    assert backend.fingerprint == f"openai:tiny-judge@{server.base_url}"


def test_stop_strings_are_applied_to_the_answer(server):
    server.reply_suffix = " STOP and more"
    backend = make_backend(server)
    out = backend.generate([chat("x")], GenerationConfig(stop=(" STOP",)))
    assert out == ["reply to x (t=0.0, seed=0)"]


def test_retry_after_a_500(server, caplog):
    backend = make_backend(server)
    with caplog.at_level(logging.WARNING, logger="prbench.backends.http"):
        out = backend.generate([chat("FAIL500 once"), chat("fine")], GREEDY)
    assert out == ["reply to FAIL500 once (t=0.0, seed=0)", "reply to fine (t=0.0, seed=0)"]
    assert server.count("FAIL500") == 2
    assert server.count("fine") == 1
    assert backend.retries == 1
    assert "HTTP 500" in caplog.text and "retry 1 of 5" in caplog.text


def test_retries_exhausted_fail_that_item_only(server, caplog):
    backend = make_backend(server, max_retries=2)
    with caplog.at_level(logging.WARNING, logger="prbench.backends.http"):
        fine, failed = backend.generate([chat("fine"), chat("ALWAYS503 busy")], GREEDY)
    assert fine == "reply to fine (t=0.0, seed=0)"
    assert isinstance(failed, GenerationFailure) and failed.reason == "http-503"
    assert "request 1 " in failed.detail and "3 attempts" in failed.detail
    assert "HTTP 503" in failed.detail and "overloaded" in failed.detail
    assert "recorded as invalid" in caplog.text
    assert server.count("ALWAYS503") == 3
    assert backend.failed == 1


def test_backoff_grows_exponentially_and_honours_retry_after(server):
    backend = make_backend(server, max_retries=3)
    backend.backoff_base = 1.0
    waits: list[float] = []
    backend._sleep = waits.append
    (failed,) = backend.generate([chat("ALWAYS503")], GREEDY)
    assert isinstance(failed, GenerationFailure)
    assert len(waits) == 3
    for attempt, wait in enumerate(waits):
        assert 0.5 * 2**attempt <= wait <= 2**attempt
    waits.clear()
    assert backend.generate([chat("RATE429")], GREEDY) == ["reply to RATE429 (t=0.0, seed=0)"]
    assert len(waits) == 1 and waits[0] >= 2.0


def test_client_errors_are_not_retried_and_fail_that_item(server):
    backend = make_backend(server)
    failed, fine = backend.generate([chat("BAD400"), chat("fine")], GREEDY)
    assert isinstance(failed, GenerationFailure) and failed.reason == "http-400"
    assert "after 1 attempt:" in failed.detail and "max_tokens is too large" in failed.detail
    assert fine == "reply to fine (t=0.0, seed=0)"
    assert server.count("BAD400") == 1
    assert backend.retries == 0


def test_unknown_model_stops_the_run_with_one_line_naming_server_and_fix(server):
    backend = make_backend(server, max_retries=3)
    with pytest.raises(BackendFatalError) as info:
        backend.generate([chat("fine"), chat("MISSING404")], GREEDY)
    message = str(info.value)
    assert "\n" not in message
    assert f"{server.base_url}/chat/completions answered HTTP 404" in message
    assert "not found" in message and "check base_url" in message and "'tiny-judge'" in message
    assert server.count("MISSING404") == 1  # not retried


def test_concurrency_limit_holds():
    with ScriptedOpenAIServer(delay=0.3) as srv:
        backend = make_backend(srv, max_concurrency=3, cache_dir="")
        chats = [chat(f"question {i}") for i in range(9)]
        errors: list[BaseException] = []

        def run() -> None:
            try:
                backend.generate(chats, GREEDY)
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=run) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors
        assert len(srv.requests) == 18
        # two callers, 9 requests each, 0.3 s per request: the limit is reached and never passed
        assert srv.max_in_flight == 3


def test_cache_hit_makes_no_request(server):
    backend = make_backend(server)
    chats = [chat("a"), chat("b"), chat("a")]
    first = backend.generate(chats, GREEDY)
    assert first[0] == first[2]
    assert len(server.requests) == 2  # identical requests within a call are sent once
    again = make_backend(server)  # a new backend (a new run) reads the same on-disk cache
    assert again.generate(chats, GREEDY) == first
    assert len(server.requests) == 2
    assert again.cache is not None and again.cache.hits == 2
    root = Path(os.environ["PRBENCH_CACHE_DIR"], "responses")
    assert again.cache.root == root
    assert len(again.cache) == 2 and again.cache.path == root / "responses.sqlite"
    # any change to the request is a different key
    again.generate([chat("a")], GenerationConfig(max_new_tokens=32, seed=1))
    assert len(server.requests) == 3


def test_cache_can_be_disabled_or_moved(server, tmp_path):
    off = make_backend(server, cache_dir="")
    assert off.cache is None
    off.generate([chat("a")], GREEDY)
    off.generate([chat("a")], GREEDY)
    assert len(server.requests) == 2
    moved = make_backend(server, cache_dir=str(tmp_path / "mine"))
    moved.generate([chat("a")], GREEDY)
    moved.generate([chat("a")], GREEDY)
    assert len(server.requests) == 3
    assert moved.cache is not None and moved.cache.path.parent == tmp_path / "mine"
    assert len(moved.cache) == 1


def test_a_timeout_on_every_attempt_fails_that_item(server):
    backend = make_backend(server, timeout=0.3, max_retries=1)
    failed, fine = backend.generate([chat("SLOW answer"), chat("quick")], GREEDY)
    assert isinstance(failed, GenerationFailure) and failed.reason == "timeout"
    assert "request 0" in failed.detail
    assert "no complete response within 0.3 s" in failed.detail
    assert "2 attempts" in failed.detail and "raise `timeout`" in failed.detail
    assert fine == "reply to quick (t=0.0, seed=0)"
    assert server.count("SLOW") == 2


@pytest.mark.parametrize(
    ("kind", "problem"),
    [
        ("NOCONTENT", "content is NoneType"),
        ("NOTJSON", "not JSON"),
        ("NOCHOICES", "no choices"),
    ],
)
def test_a_malformed_reply_is_retried_then_fails_that_item_and_is_not_cached(
    server, kind, problem
):
    backend = make_backend(server, max_retries=2)
    for run in range(2):
        fine, failed = backend.generate([chat("fine"), chat(f"{kind} please")], GREEDY)
        assert fine == "reply to fine (t=0.0, seed=0)"
        assert isinstance(failed, GenerationFailure) and failed.reason == "bad-response"
        assert "malformed reply" in failed.detail and problem in failed.detail
        assert server.count(kind) == 3 * (run + 1)  # asked again: a failure is never cached
    assert server.count("fine") == 1  # the good answer was cached
    assert backend.retries == 4


def test_a_malformed_reply_once_is_retried_like_a_5xx(server):
    backend = make_backend(server)
    assert backend.generate([chat("GARBLED once")], GREEDY) == [
        "reply to GARBLED once (t=0.0, seed=0)"
    ]
    assert server.count("GARBLED") == 2 and backend.retries == 1


def test_unreachable_server_is_retried_then_stops_the_run():
    with ScriptedOpenAIServer() as srv:
        url = srv.base_url
    backend = build_backend(
        BackendSpec(backend="openai", model="m", base_url=url, max_retries=1, cache_dir="")
    )
    backend.backoff_base = 0.01
    with pytest.raises(BackendRequestError) as info:
        backend.generate([chat("hello")], GREEDY)
    message = str(info.value)
    assert isinstance(info.value, BackendFatalError) and "\n" not in message
    assert f"cannot reach the server at {url}: connection failed" in message
    assert "all 2 attempts" in message and "start the server or fix `base_url`" in message


def test_logprobs_is_not_offered(server):
    backend = make_backend(server)
    with pytest.raises(BackendCapabilityError, match="backend='hf'"):
        backend.logprobs([chat("a")], ["b"])
    assert isinstance(BackendCapabilityError("x"), NotImplementedError)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"base_url": ""}, "needs `base_url`"),
        ({"base_url": "ftp://host/v1"}, "http"),
        ({"base_url": "http://user:pw@host/v1"}, "carries a user name or password"),
        ({"base_url": "http://host/v1", "max_concurrency": 0}, "max_concurrency"),
        ({"base_url": "http://host/v1", "timeout": 0}, "timeout"),
    ],
)
def test_bad_settings_are_rejected(fields, match):
    with pytest.raises(ValueError, match=match):
        build_backend(BackendSpec(backend="openai", model="m", **fields))


def test_bad_chats_are_rejected_before_any_request(server):
    backend = make_backend(server)
    with pytest.raises(TypeError, match=r"chat 1, message 0: field 'content' must be a string"):
        backend.generate([chat("a"), [{"role": "user", "content": None}]], GREEDY)
    assert server.requests == []


def test_api_key_reaches_the_server_and_never_appears_elsewhere(
    server, monkeypatch, caplog, capsys, tmp_path
):
    secret = f"sk-prbench-{uuid.uuid4().hex}"
    monkeypatch.setenv("PRBENCH_TEST_KEY", secret)
    cache = tmp_path / "cache"
    backend = make_backend(server, api_key_env="PRBENCH_TEST_KEY", cache_dir=str(cache))
    texts: list[str] = [repr(backend), backend.fingerprint, repr(backend.spec)]
    with caplog.at_level(logging.DEBUG):
        texts += backend.generate([chat("hello"), chat("FAIL500 then fine")], GREEDY)
        with pytest.raises(BackendRequestError) as info:
            backend.generate([chat("ECHO401 who am I")], GREEDY)
    texts += [str(info.value), repr(info.value)]
    # the header reached the server, and the echoing server's error text was redacted
    assert all(h.get("Authorization") == f"Bearer {secret}" for _, h, _ in server.requests)
    assert "invalid credentials: Bearer ***" in str(info.value)
    assert "$PRBENCH_TEST_KEY is set" in str(info.value)
    assert "retry 1 of 5" in caplog.text
    captured = capsys.readouterr()
    texts += [caplog.text, captured.out, captured.err]
    files = [p for p in cache.rglob("*") if p.is_file()]  # the database, its WAL and index
    assert files and backend.cache is not None and len(backend.cache) == 2
    texts += [p.read_bytes().decode("utf-8", "replace") for p in files]
    for text in texts:
        assert secret not in text


def test_no_key_means_no_authorization_header(server, monkeypatch):
    monkeypatch.delenv("PRBENCH_ABSENT_KEY", raising=False)
    backend = make_backend(server, api_key_env="PRBENCH_ABSENT_KEY")
    backend.generate([chat("a")], GREEDY)
    assert "Authorization" not in server.requests[0][1]
    with pytest.raises(BackendRequestError, match=r"\$PRBENCH_ABSENT_KEY is not set"):
        backend.generate([chat("ECHO401")], GREEDY)


def test_an_unreadable_cache_entry_is_asked_again_and_overwritten(server, caplog):
    import sqlite3

    backend = make_backend(server)
    backend.generate([chat("a")], GREEDY)
    assert backend.cache is not None
    with sqlite3.connect(backend.cache.path) as conn:
        conn.execute("UPDATE responses SET response = '{\"choices\": '")
    with caplog.at_level(logging.WARNING):
        assert backend.generate([chat("a")], GREEDY) == ["reply to a (t=0.0, seed=0)"]
    assert "unreadable" in caplog.text and str(backend.cache.path) in caplog.text
    assert len(server.requests) == 2
    assert backend.generate([chat("a")], GREEDY) == ["reply to a (t=0.0, seed=0)"]
    assert len(server.requests) == 2, "the fresh reply replaced the damaged entry"


def test_a_corrupt_cache_file_names_itself(server, tmp_path):
    from prbench.store import StoreError

    folder = tmp_path / "responses"
    folder.mkdir()
    (folder / "responses.sqlite").write_bytes(b"not a database at all" * 200)
    with pytest.raises(StoreError) as info:
        make_backend(server, cache_dir=str(folder))
    text = str(info.value)
    assert str(folder / "responses.sqlite") in text
    assert 'cache_dir=""' in text and "move the file aside" in text


class DroppingServer:
    """A loopback OpenAI-compatible server that drops connections without answering.

    The first ``drop_first`` requests are read and then dropped (``how="close"``: the connection
    is closed; ``"reset"``: reset); after ``stop_after`` answers the next request is dropped and
    the server stops listening, so later connections are refused (``closed`` is set then).
    Answers are ``answer(text of the last message)``.
    """

    def __init__(self, *, drop_first: int = 0, how: str = "close", stop_after: int = 0,
                 port: int = 0, answer=lambda text: f"reply to {text}") -> None:
        import json
        import socket
        import struct
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.drop_first, self.stop_after = drop_first, stop_after
        self.received: list[str] = []
        self.answered = 0
        self.closed = threading.Event()
        lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                text = body["messages"][-1]["content"]
                with lock:
                    owner.received.append(text)
                    drop = len(owner.received) <= owner.drop_first
                    stop = bool(owner.stop_after) and owner.answered >= owner.stop_after
                    if not (drop or stop):
                        owner.answered += 1
                if drop or stop:
                    if how == "reset":
                        self.connection.setsockopt(
                            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                        )
                    self.close_connection = True
                    if stop:
                        threading.Thread(target=owner.stop, daemon=True).start()
                    return
                send_json(self, {"choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": answer(text)}}]})

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        if not self.closed.is_set():
            self._server.shutdown()
            self._server.server_close()
            self.closed.set()

    def __enter__(self) -> DroppingServer:
        threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _http_backend(base_url: str, **overrides) -> OpenAIBackend:
    fields = {"backend": "openai", "model": "m", "base_url": base_url, "max_concurrency": 1}
    fields.update(overrides)
    backend = build_backend(BackendSpec(**fields))
    assert isinstance(backend, OpenAIBackend)
    backend.backoff_base = 0.01
    return backend


@pytest.mark.parametrize("how", ["close", "reset"])
def test_a_dropped_connection_is_retried_like_a_5xx_then_succeeds(how, caplog):
    with DroppingServer(drop_first=2, how=how) as srv:
        backend = _http_backend(srv.base_url, max_retries=3, cache_dir="")
        with caplog.at_level(logging.WARNING, logger="prbench.backends.http"):
            out = backend.generate([chat("a"), chat("b")], GREEDY)
    assert out == ["reply to a", "reply to b"]
    assert srv.received == ["a", "a", "a", "b"]  # the first request was dropped twice, then asked
    assert backend.retries == 2 and backend.failed == 0
    assert "connection dropped before a complete reply" in caplog.text


def test_a_connection_dropped_on_every_attempt_fails_that_item_not_the_run():
    with DroppingServer(drop_first=3) as srv:
        backend = _http_backend(srv.base_url, max_retries=2, cache_dir="")
        failed, fine = backend.generate([chat("a"), chat("b")], GREEDY)
    assert isinstance(failed, GenerationFailure) and failed.reason == "connection"
    assert "connection dropped before a complete reply" in failed.detail
    assert "3 attempts" in failed.detail
    assert fine == "reply to b"


def test_a_refused_connection_stops_the_run_and_keeps_the_replies_received(tmp_path):
    cache = str(tmp_path / "responses")
    chats = [chat(w) for w in ("one", "two", "three", "four")]
    with DroppingServer(stop_after=2) as srv:
        port = srv.port
        backend = _http_backend(srv.base_url, max_retries=1, cache_dir=cache)
        backend._sleep = lambda seconds: srv.closed.wait(10)  # retry once nobody listens
        with pytest.raises(BackendRequestError) as info:
            backend.generate(chats, GREEDY)
    message = str(info.value)
    assert "\n" not in message and isinstance(info.value, BackendFatalError)
    assert f"cannot reach the server at {srv.base_url}: connection failed" in message
    assert "ConnectionRefusedError" in message and "all 2 attempts" in message
    assert "re-running the same command resumes" in message
    # "three" was dropped, then refused: a per-item failure; "four" was refused on every attempt
    assert srv.received == ["one", "two", "three"]
    assert backend.cache is not None and len(backend.cache) == 2
    with DroppingServer(port=port) as again:  # the same command, the server back
        resumed = _http_backend(again.base_url, max_retries=1, cache_dir=cache)
        out = resumed.generate(chats, GREEDY)
    assert out == [f"reply to {w}" for w in ("one", "two", "three", "four")]
    assert again.received == ["three", "four"]  # the replies already received were not asked again


def test_an_unknown_host_is_fatal(monkeypatch):
    import socket

    def no_such_host(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "create_connection", no_such_host)
    backend = _http_backend("http://judge.internal.example:8000/v1", max_retries=1, cache_dir="")
    with pytest.raises(BackendRequestError) as info:
        backend.generate([chat("a")], GREEDY)
    message = str(info.value)
    assert "cannot reach the server at http://judge.internal.example:8000/v1" in message
    assert "gaierror" in message and "fix `base_url`" in message
    assert message.endswith("then re-run the same command")


def test_a_judge_run_stopped_by_a_refused_connection_resumes_from_the_replies_received(tmp_path):
    """Through the scorer runtime, as `prbench eval` runs a judge: stop, then the same run again."""
    import math

    from prbench.scoring.base import PairRequest
    from prbench.scoring.spec import build_runtime

    pairs = [PairRequest(record_id=f"r{i}", question=f"question {i}", first=f"answer one {i}",
                         second=f"answer two {i}") for i in range(4)]  # 8 chats: both orders

    def options(url: str) -> dict[str, str]:
        return {"backend": "openai", "model": "judge", "base_url": url, "max_retries": "1",
                "max_concurrency": "1", "cache_dir": str(tmp_path / "responses"),
                "chunk_size": "2", "progress": "false"}

    def verdict(text: str) -> str:
        return "Result: A"

    with DroppingServer(stop_after=3, answer=verdict) as srv:
        port = srv.port
        with build_runtime("llm-judge", options(srv.base_url)) as runtime:
            runtime.scorer.backend.backoff_base = 0.01
            runtime.scorer.backend._sleep = lambda seconds: srv.closed.wait(10)
            with pytest.raises(BackendFatalError) as info:
                runtime.compare(pairs)
    assert "cannot reach the server" in str(info.value)
    assert "re-running the same command resumes" in str(info.value)
    assert len(srv.received) == 4  # 3 answered, the 4th dropped; then nobody listened
    with (DroppingServer(port=port, answer=verdict) as again,
          build_runtime("llm-judge", options(again.base_url)) as runtime):
        out = runtime.compare(pairs)
    assert len(again.received) == 5  # only what the stopped run had not received
    assert len(out) == 4 and not any(math.isnan(p) for p in out)


# -- reasoning parsers and the served context --------------------------------------------------


def test_reasoning_content_is_kept_beside_the_reply() -> None:
    from prbench.backends.base import Completion
    from prbench.testing import LoopbackOpenAI

    def script(messages):
        if messages[-1]["content"] == "cut":  # thinking that never ended: content null
            return Completion("", "length", "still weighing A against B")
        return Completion("B is better.", "stop", "A is short; B answers it.")

    with LoopbackOpenAI(script) as server:
        backend = OpenAIBackend(BackendSpec(backend="openai", model="m", base_url=server.base_url,
                                            cache_dir="", max_retries=0))
        done, cut = backend.generate([chat("done"), chat("cut")], GREEDY)
        assert server.calls == 2  # a null content beside reasoning is a reply, not retried
    assert (str(done), done.reasoning, done.finish_reason) == (
        "B is better.", "A is short; B answers it.", "stop")
    assert (str(cut), cut.reasoning, cut.truncated) == ("", "still weighing A against B", True)


def test_fit_budgets_without_a_card_keeps_the_asked_budget() -> None:
    from prbench.testing import LoopbackOpenAI

    with LoopbackOpenAI(lambda messages: "ok") as server:  # no /v1/models, no /tokenize
        backend = OpenAIBackend(BackendSpec(backend="openai", model="m", base_url=server.base_url,
                                            cache_dir=""))
        budgets, info = backend.fit_budgets([chat("a"), chat("b")], 300)
        assert backend.model_card() is None
        with pytest.raises(ValueError, match="at least 1 token"):
            backend.generate([chat("a")], GREEDY, budgets=[0])
    assert budgets == [300, 300] and "no max_model_len" in info["source"]


# -- a call that is given up on ------------------------------------------------------------------


class StuckServer:
    """Accepts each request and answers only after ``answer_after`` seconds; a client that
    closes its connection before then is counted in ``abandoned`` (the socket reads EOF)."""

    def __init__(self, answer_after: float) -> None:
        import socket

        self.answer_after = answer_after
        self.received = 0
        self.abandoned = 0
        self.answered = 0
        self.lock = threading.Lock()
        self.all_abandoned = threading.Event()
        self.stop = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.1)
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.expected = 0
        self.threads = [threading.Thread(target=self._serve, daemon=True)]

    def __enter__(self) -> StuckServer:
        self.threads[0].start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in list(self.threads):
            thread.join(timeout=5)
        self.sock.close()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            worker = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            self.threads.append(worker)
            worker.start()

    def _handle(self, conn) -> None:
        import select
        import time

        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                body += conn.recv(65536)
            with self.lock:
                self.received += 1
            until = time.monotonic() + self.answer_after
            while time.monotonic() < until and not self.stop.is_set():
                readable, _, _ = select.select([conn], [], [], 0.05)
                if readable and not conn.recv(1):  # EOF: the client gave up on this request
                    with self.lock:
                        self.abandoned += 1
                        if self.abandoned == self.expected:
                            self.all_abandoned.set()
                    return
            reply = b'{"choices": [{"message": {"content": "late"}, "finish_reason": "stop"}]}'
            with contextlib.suppress(OSError):
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: " + str(len(reply)).encode() + b"\r\n\r\n" + reply)
                with self.lock:
                    self.answered += 1


def test_a_timed_out_call_abandons_its_requests_in_flight() -> None:
    """``call_timeout`` ends a call whose HTTP requests are stuck: the requests are abandoned
    (their connections closed, which the server sees) and no worker thread is left waiting for
    the server's answer, instead of the run ending only when the server answers."""
    from prbench.scoring.timeout import CallTimedOut, call_with_timeout

    with StuckServer(answer_after=30.0) as server:
        server.expected = 2
        backend = OpenAIBackend(BackendSpec(backend="openai", model="m", base_url=server.base_url,
                                            cache_dir="", max_retries=0, timeout=60.0,
                                            max_concurrency=2))
        with pytest.raises(CallTimedOut):
            call_with_timeout(lambda chats: backend.generate(chats, GREEDY),
                              [chat("one"), chat("two")], 1.0)
        # structure, not speed: both requests reached the server, and the server saw both
        # connections closed by the client before it answered either
        assert server.all_abandoned.wait(20), (server.received, server.abandoned)
        assert server.received == 2 and server.answered == 0
        workers = [t for t in threading.enumerate() if t.name.startswith("prbench-http")]
        for worker in workers:
            worker.join(timeout=10)
        assert not [t for t in workers if t.is_alive()]
        assert server.answered == 0  # nobody waited for the answer
