"""prbench's HTTP transport on httpx: pooled connections, proxies, a CA bundle, the retry policy.

Both clients are exercised: the OpenAI-compatible backend (``prbench.backends.http``) and the
reward server's client (``prbench.downstream.serve_client``). Every server here listens on
127.0.0.1 and is stopped by the test that started it; names such as ``judge.example.test`` are
never resolved (a proxy stand-in answers for them, or the resolver is replaced).
"""

from __future__ import annotations

import email.utils
import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from prbench.backends import BackendSpec, GenerationConfig, GenerationFailure
from prbench.backends.http import BackendRequestError, OpenAIBackend
from prbench.backends.http_exchange import (
    CABundleError,
    HttpSession,
    ProxySettingError,
    _Backend,
    is_loopback,
)
from prbench.backends.http_retry import RETRY_STATUSES, backoff_delay, retry_after_seconds
from prbench.downstream.serve_client import RewardClient, RewardServerError
from prbench.testing import send_json

GREEDY = GenerationConfig(max_new_tokens=8)
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "REQUEST_METHOD")
CA_VARS = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "SSL_CERT_DIR")


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def completion(text: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}]}


def http_date(offset_s: float) -> str:
    """An HTTP date ``offset_s`` seconds from now (RFC 9110's IMF-fixdate)."""
    return email.utils.formatdate(time.time() + offset_s, usegmt=True)


@pytest.fixture(autouse=True)
def no_proxy_or_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts without the machine's proxy and CA-bundle settings."""
    for name in PROXY_VARS + CA_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


class KeepAliveServer:
    """An HTTP/1.1 server on 127.0.0.1 that keeps connections open and counts them.

    It answers ``POST .../chat/completions`` with ``reply to <last message>`` and
    ``POST /score`` with one score per item; ``refusals`` is a list of ``(status, headers)``
    answered, in order, to the first requests instead.

    Attributes:
        connections: connections accepted so far.
        requests: request paths received so far.
    """

    def __init__(self, *, tls: ssl.SSLContext | None = None,
                 answer: Callable[[str], str] = lambda text: f"reply to {text}",
                 host: str = "127.0.0.1") -> None:
        self.connections = 0
        self.ended = threading.Semaphore(0)  # released once per connection the client closed
        self.requests: list[str] = []
        self.refusals: list[tuple[int, dict[str, str]]] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return

            def finish(self) -> None:
                super().finish()
                owner.ended.release()

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with owner.lock:
                    owner.requests.append(self.path)
                    refusal = owner.refusals.pop(0) if owner.refusals else None
                if refusal is not None:
                    status, headers = refusal
                    self._send(status, {"error": "busy"}, headers)
                elif self.path == "/score":
                    self._send(200, {"scores": [float(len(i["response"])) for i in body["items"]]})
                else:
                    self._send(200, completion(answer(body["messages"][-1]["content"])))

            def _send(self, status: int, document: Any, headers: dict[str, str] | None = None,
                      ) -> None:
                send_json(self, document, status, headers)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def get_request(self) -> tuple[socket.socket, Any]:
                sock, address = super().get_request()
                with owner.lock:
                    owner.connections += 1
                if tls is not None:
                    sock = tls.wrap_socket(sock, server_side=True)
                return sock, address

        self._server = Server((host, 0), Handler)
        self.port = self._server.server_address[1]
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://{host}:{self.port}"

    def __enter__(self) -> KeepAliveServer:
        threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def backend(base_url: str, **fields: Any) -> OpenAIBackend:
    spec = {"backend": "openai", "model": "m", "base_url": base_url, "cache_dir": "",
            "max_concurrency": 1, **fields}
    out = OpenAIBackend(BackendSpec(**spec))
    out.backoff_base = 0.01
    return out


# -- connection pooling -------------------------------------------------------------------------


def test_one_connection_serves_a_runs_requests_and_close_releases_it() -> None:
    with KeepAliveServer() as server:
        judge = backend(f"{server.url}/v1")
        out = judge.generate([chat(f"q{i}") for i in range(5)], GREEDY)
        judge.generate([chat("q5")], GREEDY)
        assert out == [f"reply to q{i}" for i in range(5)]
        assert len(server.requests) == 6
        assert server.connections == 1  # kept open between requests and between calls
        judge.close()
        assert judge.generate([chat("again")], GREEDY) == ["reply to again"]
        assert server.connections == 2  # closed by close(); the next request opened a new one
        judge.close()


def test_a_judge_run_closes_its_connections_when_it_ends() -> None:
    """Through the scorer runtime, as `prbench eval` runs a judge: one connection, closed at the
    end (the server sees it end)."""
    from prbench.scoring.base import PairRequest
    from prbench.scoring.spec import build_runtime

    pairs = [PairRequest(record_id=f"r{i}", question=f"q{i}", first=f"one {i}",
                         second=f"two {i}") for i in range(3)]
    with KeepAliveServer(answer=lambda text: "Result: A") as server:
        options = {"backend": "openai", "model": "judge", "base_url": f"{server.url}/v1",
                   "max_concurrency": "1", "cache_dir": "", "progress": "false"}
        with build_runtime("llm-judge", options) as runtime:
            assert len(runtime.compare(pairs)) == 3
            assert not server.ended.acquire(timeout=0.5)  # still open while the run goes on
        assert server.ended.acquire(timeout=30)  # closed by the run's end
    assert len(server.requests) == 6 and server.connections == 1  # both orders of 3 pairs


def test_the_reward_client_reuses_its_connection() -> None:
    with KeepAliveServer() as server:
        client = RewardClient(server.url)
        scores = [client.score([{"question": "q", "response": "x" * n}]) for n in range(1, 5)]
        assert scores == [[1.0], [2.0], [3.0], [4.0]]
        assert server.connections == 1
        client.close()


def test_every_transport_of_the_client_keeps_the_deadline_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The httpx internals prbench relies on are where it expects them (httpx is pinned)."""
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    session = HttpSession(max_connections=2)
    session.client()
    assert len(session.pools) == 2  # the direct one and the proxy's
    for transport in session.pools:
        assert isinstance(transport._pool._network_backend, _Backend)
    session.close()


# -- the whole-exchange deadline ----------------------------------------------------------------


class DrippingServer:
    """Answers headers at once, then one body byte every 0.25 s for 40 bytes (10 s in all)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.1)
        self.stop = threading.Event()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> DrippingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.sock.close()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 40\r\n\r\n")
                for _ in range(40):
                    if self.stop.wait(0.25):
                        return
                    conn.sendall(b" ")
            except OSError:
                return  # the client gave up


def test_the_deadline_covers_the_whole_exchange_not_each_read() -> None:
    """Every read of the trickled body comes well within ``timeout``; the whole does not."""
    with DrippingServer() as server:
        judge = backend(server.url, timeout=1.0, max_retries=0)
        (failed,) = judge.generate([chat("a")], GREEDY)
        judge.close()
    assert isinstance(failed, GenerationFailure) and failed.reason == "timeout"
    assert "no complete response within 1 s" in failed.detail


# -- proxies from the environment ---------------------------------------------------------------


class StandInProxy:
    """A forward proxy stand-in on 127.0.0.1: it records each request line and answers itself.

    A request in absolute form (``POST http://host/path``) gets the answer a server would give;
    a ``CONNECT`` (a tunnel for HTTPS) is refused with 403.
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_CONNECT(self) -> None:
                owner.lines.append(self.requestline)
                self.send_response(403)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                owner.lines.append(self.requestline)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path.endswith("/score"):
                    document: Any = {"scores": [7.0 for _ in body["items"]]}
                else:
                    document = completion("from the proxy")
                send_json(self, document)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> StandInProxy:
        threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def proxy() -> Iterator[StandInProxy]:
    with StandInProxy() as stand_in:
        yield stand_in


def no_resolver(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Replace direct connections by a recorder that fails as an unknown host would."""
    asked: list[tuple[Any, ...]] = []

    def unknown(address: tuple[Any, ...], *args: Any, **kwargs: Any) -> socket.socket:
        asked.append(address)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "create_connection", unknown)
    return asked


def test_http_proxy_from_the_environment_carries_the_request(
    proxy: StandInProxy, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    judge = backend("http://judge.example.test:8000/v1")
    assert judge.generate([chat("hi")], GREEDY) == ["from the proxy"]
    judge.close()
    assert proxy.lines == ["POST http://judge.example.test:8000/v1/chat/completions HTTP/1.1"]


def test_https_proxy_from_the_environment_is_asked_for_a_tunnel(
    proxy: StandInProxy, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    judge = backend("https://judge.example.test/v1", max_retries=0)
    with pytest.raises(BackendRequestError, match="cannot reach the server at https://judge"):
        judge.generate([chat("hi")], GREEDY)
    judge.close()
    assert proxy.lines == ["CONNECT judge.example.test:443 HTTP/1.1"]


def test_no_proxy_sends_the_request_directly(
    proxy: StandInProxy, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "example.test")
    asked = no_resolver(monkeypatch)
    judge = backend("http://judge.example.test:8000/v1", max_retries=0)
    with pytest.raises(BackendRequestError, match="gaierror"):
        judge.generate([chat("hi")], GREEDY)
    judge.close()
    assert proxy.lines == []
    assert asked == [("judge.example.test", 8000)]


def test_a_loopback_server_is_reached_directly_even_with_a_proxy_set(
    proxy: StandInProxy, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with KeepAliveServer() as server:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        judge = backend(f"{server.url}/v1")
        assert judge.generate([chat("hi")], GREEDY) == ["reply to hi"]
        judge.close()
    assert proxy.lines == [] and server.requests == ["/v1/chat/completions"]


def test_every_loopback_address_is_reached_directly_with_a_proxy_set(
    proxy: StandInProxy, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not only 127.0.0.1: all of 127.0.0.0/8 and ``localhost`` bypass a good proxy too."""
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("ALL_PROXY", proxy.url)
    with KeepAliveServer(host="127.0.0.2") as server:
        judge = backend(f"{server.url}/v1")
        assert judge.generate([chat("hi")], GREEDY) == ["reply to hi"]
        judge.close()
    with KeepAliveServer() as server:
        judge = backend(f"http://localhost:{server.port}/v1")
        assert judge.generate([chat("hi")], GREEDY) == ["reply to hi"]
        judge.close()
    assert proxy.lines == []


def test_what_counts_as_loopback() -> None:
    for host in ("127.0.0.1", "127.1.2.3", "localhost", "LOCALHOST.", "api.localhost", "::1",
                 "[::1]"):
        assert is_loopback(host), host
    for host in ("128.0.0.1", "10.0.0.1", "localhost.example.test", "::2", "", "example.test"):
        assert not is_loopback(host), host


UNREADABLE_PROXIES = ["::garbage::", "http://proxy.test:notaport", "ftp://proxy.test:21",
                      "http://", "http://user:pw-r5-0123456789@[::1"]


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "https_proxy"])
@pytest.mark.parametrize("value", UNREADABLE_PROXIES)
def test_an_unreadable_proxy_variable_leaves_a_loopback_server_reachable(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``HTTP_PROXY=::garbage::`` used to stop a judge on 127.0.0.1 (``InvalidURL: Invalid
    port``): a loopback server is reached directly whatever the variable holds."""
    monkeypatch.setenv(variable, value)
    with KeepAliveServer() as server:
        judge = backend(f"{server.url}/v1")
        assert judge.generate([chat("hi")], GREEDY) == ["reply to hi"]
        judge.close()
        client = RewardClient(f"http://localhost:{server.port}", retries=1)
        assert client.score([{"question": "q", "response": "abc"}]) == [3.0]
        client.close()


@pytest.mark.parametrize("value", UNREADABLE_PROXIES)
def test_an_unreadable_proxy_variable_is_one_error_naming_it_for_another_host(
    value: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A request that would go through it: one error naming the variable and the fix, no
    credential of the value; nothing is sent anywhere."""
    monkeypatch.setenv("http_proxy", value)
    asked = no_resolver(monkeypatch)
    judge = backend("http://judge.example.test:8000/v1")
    with pytest.raises(ProxySettingError, match=r"^\$http_proxy is not a proxy URL") as caught:
        judge.generate([chat("hi")], GREEDY)
    judge.close()
    assert "unset it" in str(caught.value) and "pw-r5" not in str(caught.value)
    assert asked == []
    with pytest.raises(ProxySettingError, match=r"\$http_proxy"):
        RewardClient("http://reward.example.test:8000", retries=1).score([])
    monkeypatch.setenv("NO_PROXY", "example.test")  # the fix it names: reached directly
    judge = backend("http://judge.example.test:8000/v1", max_retries=0)
    with pytest.raises(BackendRequestError, match="gaierror"):
        judge.generate([chat("hi")], GREEDY)
    judge.close()


def test_a_judge_run_with_an_unreadable_proxy_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """Through ``prbench eval``: a judge on 127.0.0.1 runs; one on another host is one
    ``error:`` line naming the variable, no traceback."""
    from _backend_fixtures import ScriptedOpenAIServer
    from _faults_fixtures import GROUP

    from prbench.cli import main

    monkeypatch.setenv("HTTP_PROXY", "::garbage::")

    def run(base_url: str, out: str) -> tuple[int, str]:
        code = main(["eval", "--tasks", GROUP, "--limit", "1", "--output_path",
                     str(tmp_path / out), "--model_args",
                     f"scorer=llm-judge,backend=openai,model=j,base_url={base_url},"
                     f"cache_dir=,cache_path={tmp_path / out / 'scores.sqlite'}"])
        return code, capsys.readouterr().err

    with ScriptedOpenAIServer() as server:
        server.answer = lambda _text: "Verdict: [[A]]"
        code, err = run(server.base_url, "local")
        assert code == 0 and "Traceback" not in err, err[-3000:]
        assert server.requests
    no_resolver(monkeypatch)
    code, err = run("http://judge.example.test:8000/v1", "remote")
    errors = [x for x in err.splitlines() if x.startswith("error:")]
    assert code == 1 and "Traceback" not in err, err[-3000:]
    assert len(errors) == 1 and "$HTTP_PROXY is not a proxy URL" in errors[0], errors


def test_the_reward_client_honours_the_proxy_settings(
    proxy: StandInProxy, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    client = RewardClient("http://reward.example.test:8000", retries=1)
    assert client.score([{"question": "q", "response": "r"}]) == [7.0]
    client.close()
    assert proxy.lines == ["POST http://reward.example.test:8000/score HTTP/1.1"]
    monkeypatch.setenv("NO_PROXY", "reward.example.test")
    asked = no_resolver(monkeypatch)
    with pytest.raises(RewardServerError, match="gave up after 1 tries"):
        RewardClient("http://reward.example.test:8000", retries=1).score([])
    assert len(proxy.lines) == 1 and asked == [("reward.example.test", 8000)]


# -- a CA bundle --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key: ``(cert.pem, key.pem)``."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no `openssl` command to make a self-signed certificate with")
    done = subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"openssl could not make a self-signed certificate: {done.stderr.strip()}")
    return cert, key


@pytest.fixture
def tls_server(self_signed: tuple[Path, Path]) -> Iterator[KeepAliveServer]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*self_signed)
    with KeepAliveServer(tls=context) as server:
        yield server


def test_an_unknown_certificate_is_a_fatal_tls_error(tls_server: KeepAliveServer) -> None:
    judge = backend(f"{tls_server.url}/v1")
    with pytest.raises(BackendRequestError) as info:
        judge.generate([chat("hi")], GREEDY)
    assert f"TLS with {tls_server.url}/v1 failed" in str(info.value)
    assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)


@pytest.mark.parametrize("variable", ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"])
def test_the_ca_bundle_named_in_the_environment_is_trusted(
    tls_server: KeepAliveServer, self_signed: tuple[Path, Path], variable: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(variable, str(self_signed[0]))
    judge = backend(f"{tls_server.url}/v1")
    assert judge.generate([chat("a"), chat("b")], GREEDY) == ["reply to a", "reply to b"]
    judge.close()
    client = RewardClient(tls_server.url, retries=1)
    assert client.score([{"question": "q", "response": "abc"}]) == [3.0]
    client.close()
    assert tls_server.connections == 2  # one TLS connection each, kept for its requests


def test_a_missing_ca_bundle_is_one_clear_error(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "absent.pem"))
    with pytest.raises(CABundleError) as info:
        backend("https://judge.example.test/v1")
    message = str(info.value)
    assert "\n" not in message and "$REQUESTS_CA_BUNDLE" in message
    assert "unset it to use the system's store" in message


# -- the one retry policy -----------------------------------------------------------------------


def test_retry_after_is_read_as_seconds_or_as_an_http_date() -> None:
    now = 1_800_000_000.0
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds(" 1.5 ") == 1.5
    date = email.utils.formatdate(now + 120, usegmt=True)
    assert retry_after_seconds(date, now=now) == 120.0
    assert retry_after_seconds(email.utils.formatdate(now - 5, usegmt=True), now=now) == 0.0
    for value in (None, "", "-3", "soon", "nan", "Wed, 99 Foo 2026 07:28:00 GMT"):
        assert retry_after_seconds(value, now=now) is None, value


def test_backoff_doubles_is_capped_and_yields_to_retry_after() -> None:
    for attempt in range(5):
        assert 0.5 * 2**attempt <= backoff_delay(attempt, base=1.0, cap=60.0) <= 2**attempt
    assert backoff_delay(200, base=1.0, cap=60.0) <= 60.0  # no overflow on a long run
    assert backoff_delay(0, base=0.01, cap=10.0, retry_after=3.0) == 3.0
    assert backoff_delay(0, base=0.01, cap=10.0, retry_after=300.0) == 10.0
    assert {408, 409, 429, 500, 503, 599} <= RETRY_STATUSES and 400 not in RETRY_STATUSES


def refused_then_answered(server: KeepAliveServer, status: int, retry_after: str | float,
                          ) -> None:
    """The first request is answered ``status`` with ``Retry-After``: a text as given, or an
    HTTP date that many seconds from now."""
    value = retry_after if isinstance(retry_after, str) else http_date(retry_after)
    server.refusals = [(status, {"Retry-After": value})]


@pytest.mark.parametrize(("retry_after", "low", "high"), [
    ("7", 7.0, 7.0),
    (300.0, 200.0, 300.0),  # a date 5 minutes ahead, read as ~300 s
    (-60.0, 0.0, 0.01),     # a date passed: the computed backoff applies
])
def test_the_backend_waits_as_retry_after_says(retry_after: str | float, low: float,
                                               high: float) -> None:
    with KeepAliveServer() as server:
        refused_then_answered(server, 429, retry_after)
        judge = backend(f"{server.url}/v1")
        judge.backoff_max = 1000.0
        waits: list[float] = []
        judge._sleep = waits.append
        assert judge.generate([chat("hi")], GREEDY) == ["reply to hi"]
        judge.close()
    assert len(waits) == 1 and low <= waits[0] <= high, waits


@pytest.mark.parametrize(("retry_after", "low", "high"), [
    ("3", 3.0, 3.0),
    (300.0, 10.0, 10.0),   # a date read as ~300 s, then capped at the client's 10 s
    (-60.0, 0.0, 0.01),
])
def test_the_reward_client_waits_as_retry_after_says(retry_after: str | float, low: float,
                                                     high: float) -> None:
    with KeepAliveServer() as server:
        refused_then_answered(server, 503, retry_after)
        client = RewardClient(server.url, backoff=0.01)
        waits: list[float] = []
        client._sleep = waits.append
        assert client.score([{"question": "q", "response": "ab"}]) == [2.0]
        client.close()
    assert client.busy_retries == 1
    assert len(waits) == 1 and low <= waits[0] <= high, waits


@pytest.mark.parametrize(("status", "retried"), [(429, True), (502, True), (500, False),
                                                  (400, False)])
def test_the_reward_client_retries_what_the_shared_policy_retries(status: int,
                                                                  retried: bool) -> None:
    """Except 500: the reward server's answer for a scorer failure, which would fail again."""
    with KeepAliveServer() as server:
        server.refusals = [(status, {})]
        client = RewardClient(server.url, backoff=0.01)
        client._sleep = lambda seconds: None

        def call() -> Any:
            return client.score([{"question": "q", "response": "a"}])

        if retried:
            assert call() == [1.0]
        else:
            with pytest.raises(RewardServerError, match=f"HTTP {status}"):
                call()
        client.close()
    assert len(server.requests) == (2 if retried else 1)
