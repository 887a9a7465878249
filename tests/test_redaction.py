"""No secret prbench holds reaches a file it writes (issue 35, item 1).

A judge server that echoes its request (the ``Authorization`` header included) into its replies
used to get the API key stored in the samples file through ``judge_replies``. One module knows
the secrets (:mod:`prbench.redaction`); files are masked where they are written.
"""

from __future__ import annotations

import json
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


def test_a_judge_server_that_echoes_the_key_leaves_no_key_on_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """The key reached the server and came back in every reply; no file under the output
    folder, the response cache or the score cache holds it, and the samples file shows it
    masked where the reply quoted it."""
    from prbench.cli import main

    monkeypatch.setenv("PRBENCH_ROUND4_KEY", KEY)
    out, cache = tmp_path / "out", tmp_path / "cache"
    with EchoingServer() as server:
        code = main([
            "eval", "--tasks", GROUP, "--limit", "1", "--log_samples", "--output_path", str(out),
            "--model_args",
            f"scorer=llm-judge,backend=openai,model=judge,base_url={server.base_url},"
            f"api_key_env=PRBENCH_ROUND4_KEY,cache_dir={cache / 'responses'},"
            f"cache_path={cache / 'scores.sqlite'}",
        ])
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
