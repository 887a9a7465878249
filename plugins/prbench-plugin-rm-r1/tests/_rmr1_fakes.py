"""Scripted RM-R1 replies, on the stand-ins :mod:`prbench.testing` ships for plugin tests."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from prbench.testing import LoopbackOpenAI, build_tiny_causal_lm
from prbench.testing import ScriptedBackend as _Scripted

_A = re.compile(r"\[The Start of Chatbot A's Response\]\n(.*?)\n\[The End of Chatbot A", re.S)
_B = re.compile(r"\[The Start of Chatbot B's Response\]\n(.*?)\n\[The End of Chatbot B", re.S)


def answers(chat: Sequence[dict[str, str]]) -> tuple[str, str]:
    """The texts shown as Chatbot A and Chatbot B in a judge chat."""
    user = chat[-1]["content"]
    return _A.search(user).group(1), _B.search(user).group(1)


def verdict(label: str) -> str:
    """A well-formed RM-R1 reply choosing ``label``."""
    return (
        "<type>Chat</type>\n<rubric>1. Fits the client (weight 1).</rubric>\n"
        "<justify>The client asked for it.</justify>\n<eval><summary_A>...</summary_A>"
        f"<summary_B>...</summary_B></eval>\n<answer>[[{label}]]</answer>"
    )


#: an in-process backend answering ``script(chat)`` (records every chat in ``.chats``)
ScriptedBackend = functools.partial(_Scripted, fingerprint="scripted-rm-r1")

__all__ = ["FakeVLLM", "LoopbackOpenAI", "ScriptedBackend", "answers", "build_tiny_causal_lm",
           "verdict"]


class FakeVLLM:
    """A loopback vLLM-like server: ``/v1/models`` (a card with ``max_model_len``), ``/tokenize``
    (one token per whitespace-separated word of the messages) and ``/v1/chat/completions``, which
    answers HTTP 400 -- as vLLM does -- when prompt tokens + ``max_tokens`` exceed the context.

    ``reply(messages) -> (content, reasoning, finish_reason)``; ``reasoning`` is sent as
    ``reasoning_content`` (a reasoning parser's output) when not ``None``. ``requests`` keeps each
    chat request's ``max_tokens`` and prompt size; ``refused`` counts the 400s.
    """

    def __init__(self, reply, max_model_len: int = 200, tokenize: bool = True) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.reply, self.max_model_len, self.tokenize = reply, max_model_len, tokenize
        self.requests: list[dict] = []
        self.refused = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def _send(self, status: int, answer: object) -> None:
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path != "/v1/models":
                    return self._send(404, {"error": "no route"})
                self._send(200, {"object": "list", "data": [{
                    "id": "rm", "object": "model", "root": "rm",
                    "max_model_len": owner.max_model_len}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                n = owner.count(body["messages"])
                if self.path == "/tokenize" and owner.tokenize:
                    return self._send(200, {"count": n, "max_model_len": owner.max_model_len})
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": "no route"})
                owner.requests.append({"max_tokens": body["max_tokens"], "prompt_tokens": n})
                if n + body["max_tokens"] > owner.max_model_len:
                    owner.refused += 1
                    return self._send(400, {"error": {"message": "maximum context length"}})
                content, reasoning, finish = owner.reply(body["messages"])
                message = {"role": "assistant", "content": content}
                if reasoning is not None:
                    message["reasoning_content"] = reasoning
                self._send(200, {"id": "x", "object": "chat.completion", "model": "rm",
                                 "choices": [{"index": 0, "finish_reason": finish,
                                              "message": message}]})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True)

    @staticmethod
    def count(messages) -> int:
        """The prompt's tokens: its words plus 2 per message (the template's markers)."""
        return sum(len(m["content"].split()) + 2 for m in messages)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeVLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
