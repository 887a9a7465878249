"""The reward server exposed to a network: body limit, bearer token, bad bodies, the bind check."""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from prbench.downstream.serve import create_app, runtime_factory, start_in_thread
from prbench.downstream.serve_batcher import ServerConfig
from prbench.downstream.serve_client import KEY_ENV, RewardClient, RewardServerError
from prbench.downstream.serve_guard import bearer_token, is_loopback
from prbench.downstream.serve_schema import MAX_DEPTH, PayloadError, decode_body

TOKEN = "prbench-test-token-5f1c9e2a7d"
ONE = {"items": [{"question": "q", "response": "one two three"}]}


def length_app(**kwargs: Any) -> Any:
    config = kwargs.pop("config", None)
    return create_app(runtime_factory("length", {"cache": "false"}), config, scorer="length",
                      **kwargs)


def request(url: str, method: str, path: str, body: Any = None,
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
    """One HTTP exchange; the decoded JSON answer (the raw text when it is not JSON)."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        try:
            decoded: Any = json.loads(data)
        except ValueError:
            decoded = data.decode("utf-8", "replace")
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, decoded
    finally:
        conn.close()


def post_json(url: str, path: str, payload: Any, token: str | None = None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    status, _, body = request(url, "POST", path, json.dumps(payload).encode(), headers)
    return status, body


# -- the body limit ------------------------------------------------------------------------------


def test_a_streamed_oversize_body_is_refused_after_at_most_the_limit_is_read() -> None:
    """A chunked body past the limit: 413 while streaming, the rest never pulled, nothing parsed."""
    limit, chunk, chunks_offered = 1000, 100, 10_000  # 1 MB offered, 1 KB allowed
    app = length_app(config=ServerConfig(max_body_bytes=limit))
    pulled = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        if pulled >= chunk * chunks_offered:
            return {"type": "http.disconnect"}
        pulled += chunk
        return {"type": "http.request", "body": b" " * chunk,
                "more_body": pulled < chunk * chunks_offered}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/score", "raw_path": b"/score", "query_string": b"",
        "root_path": "", "headers": [(b"content-type", b"application/json"),
                                     (b"transfer-encoding", b"chunked")],
        "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000),
    }
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = json.loads(b"".join(m.get("body", b"") for m in sent if m["type"] ==
                               "http.response.body"))
    assert start["status"] == 413
    assert "request body too large" in body["error"] and "--max_body_bytes" in body["error"]
    assert limit < pulled <= limit + chunk  # memory flat: at most one chunk past the limit
    metrics = app.state.batcher.metrics
    assert metrics.too_large == 1
    assert metrics.bad_requests == 0 and metrics.requests == 0  # never parsed, never queued


def test_a_declared_oversize_body_is_refused_before_it_is_sent_and_health_answers() -> None:
    app = length_app(config=ServerConfig(max_body_bytes=4096))
    with start_in_thread(app) as server:
        parts = urllib.parse.urlsplit(server.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        conn.putrequest("POST", "/score")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(300 * 1024 * 1024))  # 300 MB announced
        conn.endheaders()
        conn.send(b'{"items": [')  # ... and never sent: the answer must not wait for it
        resp = conn.getresponse()
        status, answer = resp.status, json.loads(resp.read())
        conn.close()
        health = request(server.url, "GET", "/health")
        fits = post_json(server.url, "/score", ONE)
        metrics = server.metrics()
    assert status == 413 and "Content-Length 314572800" in answer["error"]
    assert "the limit is 4096 bytes" in answer["error"]
    assert health[0] == 200 and health[2]["status"] == "ok"
    assert fits == (200, {"scores": [3.0]})
    assert metrics["too_large"] == 1 and metrics["config"]["max_body_bytes"] == 4096


def test_a_chunked_body_within_the_limit_is_scored() -> None:
    app = length_app(config=ServerConfig(max_body_bytes=4096))
    payload = json.dumps(ONE).encode()
    with start_in_thread(app) as server:
        parts = urllib.parse.urlsplit(server.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        conn.request("POST", "/score", body=iter([payload[:10], payload[10:]]),
                     headers={"Content-Type": "application/json"}, encode_chunked=True)
        resp = conn.getresponse()
        status, answer = resp.status, json.loads(resp.read())
        conn.close()
        # an iterable body without a length: http.client sends it chunked
        too_big = request(server.url, "POST", "/score", body=iter([b" " * 3000] * 3))
    assert (status, answer) == (200, {"scores": [3.0]})
    assert too_big[0] == 413 and "more than 4096 bytes" in too_big[2]["error"]


# -- bad bodies ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[" * 200_000 + b"]" * 200_000, f"nested more than {MAX_DEPTH} levels deep"),
        (b'{"items": ' + b"[" * (MAX_DEPTH + 5) + b"]" * (MAX_DEPTH + 5) + b"}",
         f"nested more than {MAX_DEPTH} levels deep"),
        (b"{not json", "body: not JSON"),
        (b'{"items": "\xff\xfe"}', "body: not JSON"),
        (b"", "body: empty"),
    ],
    ids=["deep-recursion", "too-deep", "not-json", "not-utf8", "empty"],
)
def test_an_unreadable_body_is_a_400_with_a_json_error(body: bytes, message: str) -> None:
    app = length_app()
    with start_in_thread(app) as server:
        answers = [request(server.url, "POST", path, body, {"Content-Type": "application/json"})
                   for path in ("/score", "/get_reward")]
        after = post_json(server.url, "/score", ONE)
        metrics = server.metrics()
    for status, headers, answer in answers:
        assert status == 400 and headers["content-type"] == "application/json"
        assert isinstance(answer, dict) and message in answer["error"]
    assert after == (200, {"scores": [3.0]})
    assert metrics["bad_requests"] == 2 and metrics["errors"] == 0


def test_a_deep_label_inside_a_get_reward_body_is_a_payload_error() -> None:
    label = '{"question": ' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "}"
    with pytest.raises(PayloadError, match=r"labels\[0\]: nested more than"):
        from prbench.downstream.serve_schema import openrlhf_requests

        openrlhf_requests({"query": ["x"], "prompts": [""], "labels": [label]})
    assert decode_body(b' {"query": []} ') == {"query": []}


def test_an_empty_get_reward_answer_has_the_full_openrlhf_shape() -> None:
    app = length_app()
    with start_in_thread(app) as server:
        empty = post_json(server.url, "/get_reward", {"query": []})
        one = post_json(server.url, "/get_reward", {"query": ["PROMPT a b"],
                                                    "prompts": ["PROMPT"]})
        native = post_json(server.url, "/score", {"items": []})
    assert empty == (200, {"rewards": [], "scores": [], "extra_logs": {"prompt_cut_left": []}})
    assert one == (200, {"rewards": [2.0], "scores": [2.0],
                         "extra_logs": {"prompt_cut_left": [0.0]}})
    assert native == (200, {"scores": []})


# -- the bearer token ----------------------------------------------------------------------------


def test_the_token_is_required_everywhere_but_health(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    app = length_app(api_key=TOKEN)
    with caplog.at_level(logging.DEBUG), start_in_thread(app) as server:
        missing = post_json(server.url, "/score", ONE)
        wrong = post_json(server.url, "/score", ONE, token=TOKEN[:-1] + "x")
        prefix = post_json(server.url, "/get_reward", {"query": []}, token=TOKEN[:8])
        basic = request(server.url, "POST", "/score", json.dumps(ONE).encode(),
                        {"Authorization": f"Basic {TOKEN}"})
        right = post_json(server.url, "/score", ONE, token=TOKEN)
        health = request(server.url, "GET", "/health")
        metrics_closed = request(server.url, "GET", "/metrics")
        metrics_open = request(server.url, "GET", "/metrics", headers={
            "Authorization": f"bearer {TOKEN}"})  # the scheme is case-insensitive
        # the client reads the token from $PRBENCH_REWARD_API_KEY at each request
        monkeypatch.delenv(KEY_ENV, raising=False)
        with pytest.raises(RewardServerError, match="HTTP 401"):
            RewardClient(server.url, retries=1).score(ONE["items"])
        monkeypatch.setenv(KEY_ENV, TOKEN)
        client = RewardClient(server.url)
        via_client = (client.score(ONE["items"]), client.get_reward([]), client.metrics())
    for status, answer in (missing, wrong, prefix, basic[::2]):
        assert status == 401 and "bearer token" in answer["error"]
        # OpenRLHF turns a 401 into a None reward: the body says what to change
        assert "--api_key_env" in answer["error"]
        assert "examples/openrlhf_reward_func.py" in answer["error"]
        assert "PRBENCH_REWARD_API_KEY" in answer["error"]
    assert basic[1]["www-authenticate"].startswith("Bearer")
    assert right == (200, {"scores": [3.0]})
    assert health[0] == 200 and metrics_closed[0] == 401 and metrics_open[0] == 200
    assert via_client[0] == [3.0] and via_client[1] == []
    assert via_client[2]["unauthorized"] == 6
    # never logged, never in an answer, never kept in the app (only a digest)
    captured = capsys.readouterr()
    texts = [caplog.text, captured.out, captured.err, json.dumps(via_client[2]),
             json.dumps(metrics_open[2]), repr(app.user_middleware),
             repr([m.kwargs for m in app.user_middleware])]
    assert all(TOKEN not in text for text in texts)


def test_bearer_header_parsing_and_loopback_hosts() -> None:
    assert bearer_token([(b"authorization", b"Bearer abc ")]) == b"abc"
    assert bearer_token([(b"Authorization", b"BEARER abc")]) == b"abc"
    assert bearer_token([(b"authorization", b"Basic abc")]) is None
    assert bearer_token([(b"accept", b"*/*")]) is None
    for host in ("127.0.0.1", "127.8.9.1", "localhost", "::1", "[::1]"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "example.org", ""):
        assert not is_loopback(host), host


# -- prbench serve: the bind check ---------------------------------------------------------------


@pytest.fixture
def fake_uvicorn(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """uvicorn.run replaced by a recorder (the command returns instead of serving).

    Nothing listens, so the command's check that the address is free (a real bind, tested in
    the fault corpus) is skipped too: these tests must not depend on the machine's port 8000.
    """
    import uvicorn

    from prbench.commands import serve

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append({"app": app, **kw}))
    monkeypatch.setattr(serve, "check_address", lambda host, port: None)
    return calls


def test_serve_refuses_a_network_address_without_a_token(
    fake_uvicorn: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    from prbench.cli import main

    assert main(["serve", "--model_args", "scorer=length", "--host", "0.0.0.0"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --host 0.0.0.0")
    assert "--api_key_env" in err[0] and "--insecure" in err[0]
    assert fake_uvicorn == []
    assert main(["serve", "--model_args", "scorer=length", "--host", "0.0.0.0", "--insecure"]) == 0
    assert "no authentication (--insecure)" in capsys.readouterr().err
    assert main(["serve", "--model_args", "scorer=length"]) == 0  # loopback: no token needed
    assert [c["host"] for c in fake_uvicorn] == ["0.0.0.0", "127.0.0.1"]


def test_serve_reads_the_token_from_the_named_variable_and_never_prints_it(
    fake_uvicorn: list[dict[str, Any]], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from prbench.cli import main

    monkeypatch.delenv("PRBENCH_SERVE_TEST_KEY", raising=False)
    args = ["serve", "--model_args", "scorer=length", "--host", "0.0.0.0",
            "--api_key_env", "PRBENCH_SERVE_TEST_KEY", "--max_body_bytes", "2048"]
    assert main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --api_key_env PRBENCH_SERVE_TEST_KEY: the environment variable "
                   "$PRBENCH_SERVE_TEST_KEY is not set or empty; export the token there"]
    monkeypatch.setenv("PRBENCH_SERVE_TEST_KEY", TOKEN)
    assert main(args) == 0
    err_text = capsys.readouterr().err
    assert "bearer token from $PRBENCH_SERVE_TEST_KEY" in err_text and TOKEN not in err_text
    (call,) = fake_uvicorn
    app = call["app"]
    assert call["host"] == "0.0.0.0"
    assert app.state.batcher.config.max_body_bytes == 2048
    with start_in_thread(app) as server:  # the app the command built is guarded
        assert post_json(server.url, "/score", ONE)[0] == 401
        assert post_json(server.url, "/score", ONE, token=TOKEN) == (200, {"scores": [3.0]})
        big = post_json(server.url, "/score", {"items": [{"question": "q",
                                                          "response": "x " * 2000}]}, TOKEN)
    assert big[0] == 413


def test_serve_reports_a_scorer_that_cannot_be_built_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A corrupt score cache: one error line naming the file, exit 1, the port never bound."""
    pytest.importorskip("transformers")
    from prbench.cli import main
    from tests._hf_fixtures import build_tiny_model

    model = build_tiny_model(tmp_path / "rm", arch="qwen2", kind="seq-cls")
    corrupt = tmp_path / "scores.sqlite"
    corrupt.write_bytes(b"not a database at all" * 200)
    capsys.readouterr()  # the fixture's own output
    code = main(["serve", "--port", "0", "--log_level", "critical", "--model_args",
                 f"scorer=hf-classifier,pretrained={model},cache_path={corrupt}"])
    err = [line for line in capsys.readouterr().err.splitlines()
           if not line.startswith("prbench serve: ")]
    assert code == 1
    assert len(err) == 1, err
    assert err[0].startswith("error: scorer 'hf-classifier' could not be built, nothing was "
                             "served: StoreError: ")
    assert str(corrupt) in err[0] and "Traceback" not in err[0]
    with pytest.raises(RuntimeError, match=r"did not start \(StoreError: .*scores\.sqlite"):
        start_in_thread(create_app(runtime_factory("hf-classifier", {
            "pretrained": str(model), "cache_path": str(corrupt)})))
