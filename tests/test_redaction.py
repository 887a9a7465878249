"""No secret prbench holds reaches a file it writes (issue 35, item 1).

A judge server that echoes its request (the ``Authorization`` header included) into its replies
used to get the API key stored in the samples file through ``judge_replies``. One module knows
the secrets (:mod:`prbench.redaction`); files are masked where they are written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _backend_fixtures import ScriptedOpenAIServer
from _faults_fixtures import GROUP

from prbench import redaction

KEY = "sk-round4-0123456789abcdef"


class EchoingServer(ScriptedOpenAIServer):
    """Answers every chat with its verdict and the request's own headers, key included."""

    def respond(self, headers: dict[str, str], body: dict) -> tuple[int, dict[str, str], dict]:
        status, extra, answer = super().respond(headers, body)
        assert isinstance(answer, dict)
        answer["choices"][0]["message"]["content"] = (
            f"You sent {json.dumps(headers)}. Verdict: [[A]]")
        return status, extra, answer


def _every_file(*roots: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for root in roots for p in root.rglob("*") if p.is_file()}



def _judge_eval(base_url: str, out: Path, cache: Path, options: str) -> int:
    """``prbench eval`` of one pair per task with the llm-judge against ``base_url``."""
    from prbench.cli import main

    return main([
        "eval", "--tasks", GROUP, "--limit", "1", "--log_samples", "--output_path", str(out),
        "--model_args",
        f"scorer=llm-judge,backend=openai,model=judge,base_url={base_url},{options},"
        f"cache_dir={cache / 'responses'},cache_path={cache / 'scores.sqlite'}",
    ])

def test_a_judge_server_that_echoes_the_key_leaves_no_key_on_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """The key reached the server and came back in every reply; no file under the output
    folder, the response cache or the score cache holds it, and the samples file shows it
    masked where the reply quoted it."""

    monkeypatch.setenv("PRBENCH_ROUND4_KEY", KEY)
    out, cache = tmp_path / "out", tmp_path / "cache"
    with EchoingServer() as server:
        code = _judge_eval(server.base_url, out, cache, "api_key_env=PRBENCH_ROUND4_KEY")
        sent = [h.get("Authorization") for _, h, _ in server.requests]
    err = capsys.readouterr().err
    assert code == 0, err[-2000:]
    assert sent and all(s == f"Bearer {KEY}" for s in sent)  # the key was used
    files = _every_file(out, cache)
    assert any(p.name.startswith("samples_") for p in files)
    assert any(p.suffix == ".sqlite" for p in files)
    leaked = [p for p, data in files.items() if KEY.encode() in data]
    assert leaked == []
    assert KEY not in err
    assert err.count("echoed a secret prbench holds (an API key or token) in a reply") == 1
    samples = [p for p in files if p.name.startswith("samples_")]
    lines = [json.loads(x) for p in samples for x in p.read_text(encoding="utf-8").splitlines()]
    replies = [json.dumps(line["judge_replies"]) for line in lines]
    assert replies and all("Bearer ***" in r for r in replies), replies[0][:500]


def test_every_place_that_writes_masks_a_remembered_secret(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The file writers (atomic text, appended lines), the store behind every cache and the
    error line all mask a secret once it is known; binary files are left as written."""
    from prbench.errors import PrbenchUserError, one_line
    from prbench.outputs import append_line, open_atomic, write_text
    from prbench.store import SQLiteStore

    secret = "tok-remembered-9876543210"
    redaction.remember(secret)
    write_text(tmp_path / "a.txt", f"x {secret} y")
    with open_atomic(tmp_path / "b.txt") as fh:
        fh.write(f"{secret}\n")
        fh.writelines([f"again {secret}\n"])
    with (tmp_path / "c.jsonl").open("ab", buffering=0) as handle:
        append_line(handle, json.dumps({"k": secret}) + "\n", tmp_path / "c.jsonl")
    with open_atomic(tmp_path / "d.bin", "wb") as fh:
        fh.write(secret.encode())
    assert (tmp_path / "a.txt").read_text() == "x *** y"
    assert (tmp_path / "b.txt").read_text() == "***\nagain ***\n"
    assert json.loads((tmp_path / "c.jsonl").read_text()) == {"k": "***"}
    assert (tmp_path / "d.bin").read_bytes() == secret.encode()  # a PNG is never rewritten
    said = [x for x in capsys.readouterr().err.splitlines() if "was in what is written" in x]
    assert [x.split(": ")[2] for x in said] == [str(tmp_path / n) for n in ("a.txt", "b.txt",
                                                                              "c.jsonl")]
    store = SQLiteStore(tmp_path / "s.sqlite", namespace="test", schema_version=1,
                        tables=["CREATE TABLE IF NOT EXISTS t (a TEXT, b REAL)"],
                        label="test cache", off_hint="none")
    store.write("INSERT INTO t VALUES (?, ?)", [(f"reply {secret}", 1.5)])
    assert store.query("SELECT a, b FROM t") == [("reply ***", 1.5)]
    store.close()
    assert one_line(PrbenchUserError(f"server said {secret}")) == "server said ***"


def test_what_counts_as_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """Values read through :func:`secret_from_env`, and the well-known variables, at least
    :data:`MIN_SECRET` characters long; the longest is masked first."""
    monkeypatch.setenv("PRBENCH_ROUND4_SHORT", "EMPTY")
    monkeypatch.setenv("PRBENCH_ROUND4_LONG", "abcdefgh-long-token")
    monkeypatch.setenv("HF_TOKEN", "hf_0123456789token")
    assert redaction.secret_from_env("PRBENCH_ROUND4_SHORT") == "EMPTY"
    assert redaction.secret_from_env("PRBENCH_ROUND4_LONG") == "abcdefgh-long-token"
    assert redaction.secret_from_env("") == ""
    known = redaction.known_secrets()
    assert "EMPTY" not in known and "abcdefgh-long-token" in known
    assert "hf_0123456789token" in known  # never read by prbench itself, still a secret
    text = "EMPTY abcdefgh-long-token hf_0123456789token"
    assert redaction.redact_text(text) == "EMPTY *** ***"
    assert redaction.redact({"abcdefgh-long-token": ["x abcdefgh-long-token", 3, None]}) == {
        "***": ["x ***", 3, None]}


#: a key with the characters URL and base64 encodings change (issue 44, item 1)
ODD_KEY = "sk-r5/a+b=c&d%e-0123456789"


def _encoded_forms(key: str) -> dict[str, str]:
    """The key as servers write it back: URL-encoded, JSON-escaped, base64, in Basic auth."""
    import base64
    from urllib.parse import quote, quote_plus

    return {
        "url": quote(key, safe=""),
        "url-lower": re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(key, safe="")),
        "url-keep-slash": quote(key),
        "url-plus": quote_plus(key),
        "json-slash": key.replace("/", "\\/"),
        "html": key.replace("&", "&amp;"),
        "base64": base64.b64encode(key.encode()).decode(),
        "base64-url": base64.urlsafe_b64encode(key.encode()).decode().rstrip("="),
        "basic": base64.b64encode(f"judge-user:{key}".encode()).decode(),
        "basic-2": base64.b64encode(f"u:{key}".encode()).decode(),
    }


def _form_cores(key: str) -> dict[str, str]:
    """What of each encoded form is made of the key alone (what must never reach a file)."""
    import base64

    forms = _encoded_forms(key)
    inner = base64.b64encode(key.encode()).decode().rstrip("=")[:-1]
    return {**forms, "base64": inner, "base64-url": inner.replace("+", "-").replace("/", "_"),
            "basic": base64.b64encode(f"judge-user:{key}".encode()).decode()[16:-4],
            "basic-2": base64.b64encode(f"u:{key}".encode()).decode()[4:-4]}


def test_every_encoded_form_of_a_secret_is_masked() -> None:
    """URL-encoded (either hex case, ``/`` kept or not, ``+`` for a space), JSON- and
    HTML-escaped, base64 (either alphabet, alone or the tail of ``user:key``): each is masked."""
    for name, form in _encoded_forms(ODD_KEY).items():
        masked = redaction.redact_text(f"server said [{form}]", [ODD_KEY])
        assert "***" in masked, name
        assert all(core not in masked for core in _form_cores(ODD_KEY).values()), (name, masked)
    assert redaction.redact_text("a plain reply", [ODD_KEY]) == "a plain reply"
    spaced = "tok with space 0123"
    assert redaction.redact_text("t=tok+with+space+0123", [spaced]) == "t=***"


class EncodingEchoServer(ScriptedOpenAIServer):
    """Echoes the request's key in every encoded form: in 200 replies, or as HTTP 400 bodies."""

    refuse = False

    def respond(self, headers: dict[str, str], body: dict) -> tuple[int, dict[str, str], dict]:
        status, extra, answer = super().respond(headers, body)
        key = headers.get("Authorization", "").removeprefix("Bearer ")
        echoed = " ".join(f"{name}={form}" for name, form in _encoded_forms(key).items())
        if self.refuse:
            return 400, {}, {"error": {"message": f"bad request from {echoed}"}}
        assert isinstance(answer, dict)
        answer["choices"][0]["message"]["content"] = f"You sent {echoed}. Verdict: [[A]]"
        return status, extra, answer


@pytest.mark.parametrize("refuse", [False, True], ids=["replies", "refusals"])
def test_a_server_that_echoes_the_key_encoded_leaves_no_form_of_it_anywhere(
        refuse: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
) -> None:
    """The key came back URL-encoded, escaped and in base64, in replies (samples, caches) or in
    HTTP 400 bodies (the per-item failures: the manifest, the ``causes:`` of the error line);
    no file and no line on stderr holds any form of it."""

    monkeypatch.setenv("PRBENCH_ROUND5_KEY", ODD_KEY)
    out, cache = tmp_path / "out", tmp_path / "cache"
    with EncodingEchoServer() as server:
        server.refuse = refuse
        code = _judge_eval(server.base_url, out, cache,
                           "api_key_env=PRBENCH_ROUND5_KEY,max_retries=0")
        sent = [h.get("Authorization") for _, h, _ in server.requests]
    err = capsys.readouterr().err
    assert sent and all(s == f"Bearer {ODD_KEY}" for s in sent)
    assert code == (1 if refuse else 0), err[-2000:]
    if refuse:
        assert "causes:" in err and "bad request from" in err
    files = _every_file(out, cache)
    assert any(p.name.startswith("samples_") for p in files)
    cores = _form_cores(ODD_KEY)
    leaked = {(p.name, name) for p, data in files.items() for name, core in cores.items()
              if core.encode() in data}
    assert leaked == set()
    assert [name for name, core in cores.items() if core in err] == []


def test_an_excerpt_cut_inside_the_key_shows_no_part_of_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A refusal quotes the key where the excerpt of its body is cut: the key is masked whole
    before the cut, so no first half of it is left in the failure's detail."""
    from prbench.backends import BackendSpec, GenerationConfig, GenerationFailure
    from prbench.backends.http import OpenAIBackend

    class CutServer(ScriptedOpenAIServer):
        def respond(self, headers: dict[str, str], body: dict,
                    ) -> tuple[int, dict[str, str], dict]:
            key = headers.get("Authorization", "").removeprefix("Bearer ")
            return 400, {}, {"error": "x" * 270 + key}  # the key straddles character 300

    monkeypatch.setenv("PRBENCH_ROUND5_KEY", ODD_KEY)
    with CutServer() as server:
        backend = OpenAIBackend(BackendSpec(backend="openai", model="m",
                                            base_url=server.base_url, cache_dir="",
                                            api_key_env="PRBENCH_ROUND5_KEY", max_retries=0))
        [reply] = backend.generate([[{"role": "user", "content": "hi"}]],
                                   GenerationConfig(max_new_tokens=4))
        backend.close()
    assert isinstance(reply, GenerationFailure)
    assert ODD_KEY[:10] not in reply.detail and "xxx" in reply.detail


def test_the_reward_client_masks_a_token_its_server_echoes_encoded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A reward server that refuses a request quoting the token URL-encoded and in base64: the
    client's error quotes the refusal with the token masked."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from prbench.downstream.serve_client import RewardClient, RewardServerError
    from prbench.testing import send_json

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            token = self.headers.get("Authorization", "").removeprefix("Bearer ")
            echoed = " ".join(_encoded_forms(token).values())
            send_json(self, {"detail": f"token {echoed} refused"}, 400)

    monkeypatch.setenv("PRBENCH_REWARD_API_KEY", ODD_KEY)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    try:
        client = RewardClient(f"http://127.0.0.1:{server.server_address[1]}", retries=1)
        with pytest.raises(RewardServerError) as caught:
            client.score([{"question": "q", "response": "r"}])
        client.close()
    finally:
        server.shutdown()
        server.server_close()
    said = str(caught.value)
    assert "refused" in said and "***" in said
    assert [name for name, core in _form_cores(ODD_KEY).items() if core in said] == []


# -- credentials in a URL (issue 44, secrets item 2) --------------------------------------------

URL_SECRET = "pw-r5-0123456789"


@pytest.mark.parametrize("model_args", [
    f"scorer=llm-judge,backend=openai,model=j,base_url=http://judge:{URL_SECRET}@127.0.0.1:9/v1",
    f"scorer=llm-judge,backend=openai,model=j,base_url=http://{URL_SECRET}@127.0.0.1:9/v1",
    f"scorer=llm-judge,backend=openai,model=j,base_url=http://127.0.0.1:9/v1?access_token={URL_SECRET}",
    f"scorer=served-rm,base_url=http://127.0.0.1:9/?token={URL_SECRET}",
    f"scorer=served-rm,base_url=http://127.0.0.1:9/?Api-Key={URL_SECRET}&x=1",
    f"scorer=served-rm,base_url=http://127.0.0.1:9/v1#password={URL_SECRET}",
], ids=["user-and-password", "token-as-user", "access_token", "token", "api-key", "fragment"])
def test_a_url_with_credentials_is_one_error_that_does_not_show_them(
        model_args: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Refused when the options are read (before a model, a task or an output folder), in one
    ``error:`` line that shows the URL with the secret masked."""
    from prbench.cli import main

    code = main(["eval", "--tasks", GROUP, "--limit", "1", "--output_path", str(tmp_path / "out"),
                 "--model_args", model_args])
    captured = capsys.readouterr()
    said = captured.out + captured.err
    errors = [x for x in captured.err.splitlines() if x.startswith("error:")]
    assert code == 1 and "Traceback" not in said, said[-2000:]
    assert len(errors) == 1 and "base_url carries" in errors[0], errors
    assert "***" in errors[0] and "api_key_env" in errors[0]
    assert URL_SECRET not in said
    assert not (tmp_path / "out").exists()
    assert URL_SECRET in redaction.known_secrets()  # masked wherever else it turns up


def test_what_a_server_url_may_hold() -> None:
    """Credential-like query names in any case or spelling are named as such; a plain query or
    a fragment is refused too (no server URL needs one); a good URL passes."""
    from prbench.backends.urls import ServerURLError, check_server_url, shown_url

    for good in ("http://127.0.0.1:8000/v1", "https://[::1]:8443/v1/", "http://judge.test/a/b",
                 ""):
        check_server_url(good)
    for name in ("token", "KEY", "api_key", "apikey", "access_token", "password", "passwd",
                 "secret", "client_secret", "sig", "x-api-key", "hf_token", "my_token"):
        with pytest.raises(ServerURLError, match="a credential in its query") as caught:
            check_server_url(f"http://h/v1?{name}={URL_SECRET}")
        assert URL_SECRET not in str(caught.value)
    with pytest.raises(ServerURLError, match="a query or fragment"):
        check_server_url("http://h/v1?stream=1")
    for bad in ("ftp://h/v1", "http:///v1", "http://h:99999/v1", "http://[::1/v1", "h:8000"):
        with pytest.raises(ServerURLError, match="must be an http"):
            check_server_url(bad)
    assert shown_url(f"https://u:{URL_SECRET}@h:1/p?a=b&c#{URL_SECRET}") == \
        "https://***@h:1/p?a=***&c#***"


def test_the_reward_client_refuses_a_url_with_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """Given as an argument or in ``$PRBENCH_REWARD_URL``: one message, the token masked."""
    from prbench.backends.urls import ServerURLError
    from prbench.downstream.serve_client import RewardClient

    with pytest.raises(ServerURLError, match="a credential in its query") as caught:
        RewardClient(f"http://127.0.0.1:8000/?token={URL_SECRET}")
    assert URL_SECRET not in str(caught.value)
    monkeypatch.setenv("PRBENCH_REWARD_URL", f"http://reward:{URL_SECRET}@127.0.0.1:8000")
    with pytest.raises(ServerURLError, match=r"\$PRBENCH_REWARD_URL carries a user name") as caught:
        RewardClient()
    assert URL_SECRET not in str(caught.value)
