"""Loopback fakes of a vLLM and an SGLang reward-model server, backed by a real tiny model.

:class:`FakeRMServer` is a real HTTP server on 127.0.0.1 (port 0) that speaks the published
request/response schemas the ``served-rm`` scorer uses, and answers with the scores of a tiny
``*ForSequenceClassification`` model (from :func:`tests._hf_fixtures.build_tiny_model`) run on
exactly the token ids it receives, one sequence at a time (no padding), read at the **last** id
received, pad or not, as both servers pool a sequence classifier (``LAST`` pooling):

* ``engine="vllm"``: ``GET /v1/models`` (model cards with ``id``, ``root``, ``max_model_len``, ...);
  ``POST /pooling`` (``{"model", "input": [[ids]...], "use_activation", "task"}`` ->
  ``{"data": [{"index", "object": "pooling", "data": [...]}]}``; ``data`` is one value per label,
  or with ``per_token=True`` one row per token, as the ``token_classify`` task returns) and
  ``POST /classify`` (-> ``{"data": [{"index", "label", "probs", "num_classes"}]}``). As vLLM
  does, the activation (sigmoid for one label, softmax for more) is applied unless
  ``use_activation`` is false.
* ``engine="sglang"``: ``GET /v1/models`` and the native ``POST /classify``
  (``{"model", "input_ids": [[ids]...]}`` -> ``[{"embedding": [...], "meta_info": {...}}, ...]``,
  the raw head output).

An unknown model name is a 404, an unknown route a 404, a body without token-id lists a 400.
``faults`` scripts the next POSTs, one entry each: ``"503"`` (HTTP 503), ``"slow"`` (waits
``slow_seconds`` before answering), ``"malformed"`` (a 200 whose body breaks the schema),
``"short"`` (a well-formed reply with one result too few), ``"dup-index"`` /
``"extra-index"`` (vLLM: the last result carries the index 0 / one past the last), ``"nan"`` /
``"inf"`` / ``"text"`` (the first result's value is NaN / infinite / a string); ``always``
applies one of them to every POST; ``models_status`` other than 200 answers ``GET /v1/models``
with that status.
``requests`` records ``(method, path, body)`` of every request.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prbench.testing import send_json


class FakeRMServer:
    """See the module docstring.

    Args:
        model_path: folder of a tiny sequence-classification model.
        engine: ``"vllm"`` or ``"sglang"``.
        served_name: the model name the server answers to (``--served-model-name``).
        per_token: vLLM ``/pooling`` returns one row per token.
        list_models: serve ``/v1/models`` (else 404).
        root: the ``root`` of the model card (defaults to ``model_path``).
        max_model_len: the model card's ``max_model_len``.
    """

    def __init__(
        self,
        model_path: Path,
        *,
        engine: str = "vllm",
        served_name: str = "tiny-rm",
        per_token: bool = False,
        list_models: bool = True,
        root: str | None = None,
        max_model_len: int = 4096,
        slow_seconds: float = 2.0,
    ) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification

        self.engine = engine
        self.served_name = served_name
        self.per_token = per_token
        self.list_models = list_models
        self.root = root if root is not None else str(model_path)
        self.max_model_len = max_model_len
        self.slow_seconds = slow_seconds
        self.faults: list[str] = []
        self.models_status = 200
        self.always = ""
        self.requests: list[tuple[str, str, Any]] = []
        self.model = AutoModelForSequenceClassification.from_pretrained(
            model_path, dtype=torch.float32
        ).eval()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (the server's root)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeRMServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def posts(self) -> list[Any]:
        """Bodies of the POST requests received, in order."""
        with self._lock:
            return [body for method, _, body in self.requests if method == "POST"]

    # -- the model ------------------------------------------------------------------------------

    def head_output(self, ids: Sequence[int]) -> list[list[float]]:
        """The classifier head's output at every position of ``ids``.

        The last row is the sequence's logits, as the model's own forward pools them.
        """
        import torch

        base = getattr(self.model, self.model.base_model_prefix)
        with self._lock, torch.inference_mode():
            hidden = base(input_ids=torch.tensor([list(ids)])).last_hidden_state[0]
            return self.model.score(hidden).float().tolist()

    def logits(self, ids: Sequence[int]) -> list[float]:
        """The head's output at the **last** id received, as vLLM and SGLang pool (``LAST``).

        The model's own forward would skip pad ids that end the input; the servers do not, and
        neither does this fake.
        """
        return self.head_output(ids)[-1]

    @staticmethod
    def activate(values: list[float]) -> list[float]:
        """vLLM's default classify activation: sigmoid for one label, softmax for more."""
        import torch

        t = torch.tensor(values)
        return (torch.sigmoid(t) if len(values) == 1 else torch.softmax(t, -1)).tolist()

    # -- the protocol ---------------------------------------------------------------------------

    def models(self) -> tuple[int, Any]:
        if self.models_status != 200:
            return self.models_status, {"error": {"message": "scripted"}}
        if not self.list_models:
            return 404, {"detail": "Not Found"}
        card = {"id": self.served_name, "object": "model", "created": 1700000000,
                "owned_by": self.engine, "root": self.root, "parent": None,
                "max_model_len": self.max_model_len,
                "permission": [{"id": "modelperm-1", "created": 1700000000}]}
        return 200, {"object": "list", "data": [card]}

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        with self._lock:
            fault = self.faults.pop(0) if self.faults else self.always
        if fault == "503":
            return 503, {"error": {"message": "engine overloaded"}}
        if fault == "slow":
            self._stop.wait(self.slow_seconds)
        routes = {"vllm": ("/pooling", "/classify"), "sglang": ("/classify",)}[self.engine]
        if path not in routes:
            return 404, {"detail": "Not Found"}
        if not isinstance(body, dict) or body.get("model") != self.served_name:
            return 404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}}
        field = "input_ids" if self.engine == "sglang" else "input"
        batch = body.get(field)
        if not (isinstance(batch, list) and batch and all(
            isinstance(x, list) and x and all(type(t) is int for t in x) for x in batch
        )):
            return 400, {"error": {"message": f"{field} must be a list of token-id lists"}}
        if fault == "malformed":
            return 200, {"object": "list", "data": "not a list"} if self.engine == "vllm" else {
                "embedding": None}
        if fault == "short":
            batch = batch[:-1]
        if self.engine == "sglang":
            return 200, [
                {"embedding": self.logits(ids),
                 "meta_info": {"id": f"req-{i}", "prompt_tokens": len(ids)}}
                for i, ids in enumerate(batch)
            ]
        activation = body.get("use_activation")
        activate = activation is None or bool(activation)
        data = []
        for i, ids in enumerate(batch):
            if path == "/classify":
                probs = self.logits(ids)
                probs = self.activate(probs) if activate else probs
                data.append({"index": i, "label": f"LABEL_{probs.index(max(probs))}",
                             "probs": probs, "num_classes": len(probs)})
            elif self.per_token:
                rows = self.head_output(ids)
                rows = [self.activate(r) for r in rows] if activate else rows
                data.append({"index": i, "object": "pooling", "data": rows})
            else:
                values = self.logits(ids)
                data.append({"index": i, "object": "pooling",
                             "data": self.activate(values) if activate else values})
        if fault in ("nan", "inf", "text"):  # the first result's value: NaN, inf or a string
            bad = {"nan": math.nan, "inf": math.inf, "text": "n/a"}[fault]
            key = "probs" if path == "/classify" else "data"
            first = data[0][key]
            if isinstance(first[0], list):
                first[-1][0] = bad
            else:
                first[0] = bad
        if fault == "dup-index":  # the last result claims the first one's index
            data[-1]["index"] = 0
        if fault == "extra-index":
            data[-1]["index"] = len(data)
        data.reverse()  # results carry their index; order in the list is not promised
        tokens = sum(len(x) for x in batch)
        return 200, {"id": "pool-1", "object": "list", "created": 1700000000,
                     "model": self.served_name, "data": data,
                     "usage": {"prompt_tokens": tokens, "total_tokens": tokens,
                               "completion_tokens": 0, "prompt_tokens_details": None}}


def _handler(server: FakeRMServer) -> type:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return

        def _send(self, status: int, answer: Any) -> None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # client gave up
                send_json(self, answer, status)

        def do_GET(self) -> None:
            with server._lock:
                server.requests.append(("GET", self.path, None))
            if self.path == "/v1/models":
                self._send(*server.models())
            else:
                self._send(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                self._send(400, {"error": {"message": "body is not JSON"}})
                return
            with server._lock:
                server.requests.append(("POST", self.path, body))
            self._send(*server.post(self.path, body))

    return Handler
