"""Scripted stand-ins for the SynthesizeMe tests: a backend, a loopback server, a tiny causal LM."""

from __future__ import annotations

import json
import random
import re
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Script = Callable[[Sequence[dict[str, str]]], str]
_A = re.compile(r"<answer_a>\n(.*?)\n</answer_a>", re.S)
_B = re.compile(r"<answer_b>\n(.*?)\n</answer_b>", re.S)


def kind(chat: Sequence[dict[str, str]]) -> str:
    """Which SynthesizeMe prompt a chat is: persona, bootstrap, judge or rating."""
    user = chat[-1]["content"]
    if "Write a persona" in user:
        return "persona"
    if "The person preferred one of these answers" in user:
        return "bootstrap"
    if "<answer_a>" in user:
        return "judge"
    return "rating"


def answers(chat: Sequence[dict[str, str]]) -> tuple[str, str]:
    """The texts shown as answer A and answer B."""
    user = chat[-1]["content"]
    return _A.search(user).group(1), _B.search(user).group(1)


class ScriptedBackend:
    """A generation backend replying ``script(chat)``; it records every chat it was sent."""

    fingerprint = "scripted-synthesizeme"

    def __init__(self, script: Script) -> None:
        self.script = script
        self.chats: list[Any] = []

    def generate(self, chats: Sequence[Any], config: Any) -> list[str]:
        self.chats.extend(chats)
        return [self.script(c) for c in chats]

    def logprobs(self, chats: Sequence[Any], continuations: Sequence[str]) -> list[float]:
        raise NotImplementedError

    def count(self, what: str) -> int:
        return sum(kind(c) == what for c in self.chats)


class LoopbackOpenAI:
    """A real HTTP server on 127.0.0.1 answering ``/v1/chat/completions`` with ``script(chat)``."""

    def __init__(self, script: Script) -> None:
        self.calls = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.calls += 1
                text = script(body["messages"])
                data = json.dumps({
                    "id": "x", "object": "chat.completion", "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

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
    """A tiny random Llama causal LM with a BPE tokenizer trained on the fly and a chat template."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        AutoModelForCausalLM,
        LlamaConfig,
        PreTrainedTokenizerFast,
    )

    words = ["the", "person", "answer", "verdict", "rating", "persona", "likes", "needs",
             "garden", "music", "plan", "budget", "time", "family", "photo", "night", "walk",
             "cook", "paint", "read"]
    rng = random.Random(seed)
    corpus = [" ".join(rng.choice(words) for _ in range(30)) for _ in range(200)]
    specials = ["<pad>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainer=trainers.BpeTrainer(
        vocab_size=320, special_tokens=specials, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    ))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", additional_special_tokens=specials[3:])
    fast.chat_template = (
        "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}</s>\n"
        "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
    )
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(path)
    config = LlamaConfig(
        vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
        pad_token_id=fast.pad_token_id, bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id, tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(config).save_pretrained(path)
    return path
