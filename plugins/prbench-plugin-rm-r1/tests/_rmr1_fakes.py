"""Scripted stand-ins for an RM-R1 model: an in-process backend and a loopback OpenAI server."""

from __future__ import annotations

import json
import random
import re
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_WORDS_TEXT = (
    "the a of to answer chatbot client rubric eval better reply question night lens "
    "photo garden habit music book plan walk paint write read"
)
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


class ScriptedBackend:
    """A generation backend whose reply is ``script(chat)``; it records every chat."""

    fingerprint = "scripted-rm-r1"

    def __init__(self, script: Callable[[Sequence[dict[str, str]]], str]) -> None:
        self.script = script
        self.chats: list[Any] = []

    def generate(self, chats: Sequence[Any], config: Any) -> list[str]:
        self.chats.extend(chats)
        return [self.script(c) for c in chats]

    def logprobs(self, chats: Sequence[Any], continuations: Sequence[str]) -> list[float]:
        raise NotImplementedError


class LoopbackOpenAI:
    """A real HTTP server on 127.0.0.1 answering ``/v1/chat/completions`` with ``script(chat)``."""

    def __init__(self, script: Callable[[Sequence[dict[str, str]]], str]) -> None:
        self.script = script
        self.calls = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.calls += 1
                reply = {"choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": owner.script(body["messages"])}}]}
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> LoopbackOpenAI:
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def build_tiny_causal_lm(path: Path, seed: int = 0) -> Path:
    """A tiny random Qwen2 causal LM with a trained BPE tokenizer and a chat template."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen2Config

    words = _WORDS_TEXT.split()
    rng = random.Random(seed)
    corpus = [" ".join(rng.choice(words) for _ in range(30)) for _ in range(200)]
    specials = ["<pad>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainer=trainers.BpeTrainer(
        vocab_size=350, special_tokens=specials, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    ))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                   pad_token="<pad>", additional_special_tokens=specials[2:])
    fast.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(path)
    config = Qwen2Config(
        vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
        pad_token_id=fast.pad_token_id, eos_token_id=fast.eos_token_id, tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(config).save_pretrained(path)
    return path
