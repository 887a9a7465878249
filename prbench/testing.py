"""Offline stand-ins for tests: a scripted backend, a loopback OpenAI server, tiny LMs, OOMs.

A judge or scorer plugin needs a model that says what the test wants (to check parsing, both
orders, invalid counting) and a real model of the right class (to check the loading and
generation path end to end), and a device that runs out of memory (to check the back-offs).
Tests run offline, so prbench ships them here::

    from prbench.testing import (LoopbackOpenAI, ScriptedBackend, build_tiny_causal_lm,
                                 token_slot_limit)

    with LoopbackOpenAI(lambda chat: "Verdict: A") as server:
        judge = registry.build("scorer", "my-judge", {"backend": "openai",
                                                      "base_url": server.base_url, ...})
    lm_folder = build_tiny_causal_lm(tmp_path / "lm", arch="llama")  # random weights, seconds
    with token_slot_limit(decoder, 600) as counts:  # a device that holds 600 token slots
        ...  # scoring here backs off; counts["failures"] says how often

It also holds what a plugin test needs to drive prbench itself: ``PluginRegistry`` (build one
with ``env={"PRBENCH_LOAD_PLUGINS": "myplugin"}`` so only your plugin loads), ``reset_registry``
and ``reset_task_state`` (forget the loaded plugins / the tasks' loaded records between tests),
``run_cli`` (run a ``prbench`` command in-process and get its exit code), and the set-up of a test
folder's ``conftest.py`` -- offline, a fresh registry and a private cache for every test::

    from prbench.testing import isolated_tests, skip_unless_installed

    collect_ignore_glob = skip_unless_installed("prbench_plugin_mine")
    _isolated = isolated_tests(load_plugins="mine")  # only this plugin loads

This module is public, like :mod:`prbench.api`, under the same compatibility promise (see
"Plugin API" in docs/plugin-api.md); plugin tests import prbench only from these two modules.

Nothing here imports torch or transformers at module import.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

from prbench.plugins import PluginRegistry, reset_registry

#: ``script(chat) -> reply``: what a scripted model answers to one chat (a list of messages).
Script = Callable[[Sequence[dict[str, str]]], str]

_WORDS = [
    "the", "a", "of", "to", "answer", "question", "reply", "verdict", "rating", "person",
    "persona", "likes", "needs", "rubric", "garden", "music", "plan", "budget", "time", "family",
    "photo", "night", "walk", "cook", "paint", "read", "write", "book", "lens",
]


class ScriptedBackend:
    """A generation backend whose reply to each chat is ``script(chat)``; it records the chats.

    A script may return a :class:`prbench.backends.base.Completion` (``Completion(text,
    "length")`` plays a reply cut at ``max_new_tokens``); it is passed on as it is.

    Args:
        script: the reply for one chat.
        fingerprint: the backend's identity in scorer fingerprints.
    """

    def __init__(self, script: Script, fingerprint: str = "scripted") -> None:
        self.script = script
        self.fingerprint = fingerprint
        self.chats: list[Any] = []

    def generate(self, chats: Sequence[Any], config: Any) -> list[str]:
        """One scripted reply per chat, in order."""
        self.chats.extend(chats)
        return [self.script(c) for c in chats]

    def logprobs(self, chats: Sequence[Any], continuations: Sequence[str]) -> list[float]:
        """Not scripted: a scripted model has no log-probabilities."""
        raise NotImplementedError("ScriptedBackend has no log-probabilities")


def send_json(handler: BaseHTTPRequestHandler, document: Any, status: int = 200,
              headers: dict[str, str] | None = None) -> None:
    """Answer a stand-in server's request with ``document`` as JSON (bytes are sent as they are).

    Args:
        handler: the request handler answering.
        document: what to send: JSON-able, or ``bytes`` sent unchanged (a malformed reply).
        status: the HTTP status.
        headers: extra headers (``Retry-After``, ...).
    """
    data = document if isinstance(document, bytes) else json.dumps(document).encode()
    handler.send_response(status)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class LoopbackOpenAI:
    """A real HTTP server on 127.0.0.1 answering ``POST /v1/chat/completions`` with ``script``.

    Use it as a context manager; ``base_url`` is what a backend's ``base_url`` option takes, and
    ``calls`` counts the requests served. The reply's ``finish_reason`` is ``"stop"``, or the
    ``finish_reason`` of a :class:`prbench.backends.base.Completion` the script returns
    (``Completion(text, "length")`` plays a reply cut at ``max_tokens``). A ``Completion`` with
    ``reasoning`` plays a server with a reasoning parser: the reasoning is sent as
    ``reasoning_content``, and an empty text as ``content: null`` (thinking that never ended).
    """

    def __init__(self, script: Script) -> None:
        self.script = script
        self.calls = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.calls += 1
                content = owner.script(body["messages"])
                finish = getattr(content, "finish_reason", "stop")  # a Completion says "length"
                reasoning = getattr(content, "reasoning", "")
                message: dict[str, Any] = {"role": "assistant", "content": str(content)}
                if reasoning:
                    message["reasoning_content"] = reasoning
                    message["content"] = str(content) or None
                reply = {
                    "id": f"loopback-{owner.calls}", "object": "chat.completion",
                    "model": body.get("model", ""),
                    "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                }
                send_json(self, reply)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> LoopbackOpenAI:
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


_TEMPLATES = {
    "qwen2": (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    ),
    "llama": (
        "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}</s>\n"
        "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
    ),
}


def build_tiny_causal_lm(
    path: Path, *, arch: Literal["qwen2", "llama"] = "qwen2", seed: int = 0
) -> Path:
    """Save a tiny random causal LM with a BPE tokenizer trained on the fly and a chat template.

    Args:
        path: the folder to write (created).
        arch: ``qwen2`` (ChatML template, no BOS) or ``llama`` (a BOS and role tags).
        seed: seeds the tokenizer corpus and the weights.

    Returns:
        ``path``, loadable with ``AutoModelForCausalLM`` / ``AutoTokenizer``.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedTokenizerFast, Qwen2Config

    rng = random.Random(seed)
    corpus = [" ".join(rng.choice(_WORDS) for _ in range(30)) for _ in range(200)]
    if arch == "qwen2":
        specials = ["<pad>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        names = {"eos_token": "<|im_end|>", "additional_special_tokens": specials[2:]}
    else:
        specials = ["<pad>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>"]
        names = {"bos_token": "<s>", "eos_token": "</s>", "additional_special_tokens": specials[3:]}
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainer=trainers.BpeTrainer(
        vocab_size=350, special_tokens=specials, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    ))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", **names)
    fast.chat_template = _TEMPLATES[arch]
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(path)
    common = {
        "vocab_size": len(fast), "hidden_size": 32, "intermediate_size": 64,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 8192, "pad_token_id": fast.pad_token_id,
        "eos_token_id": fast.eos_token_id, "tie_word_embeddings": False,
    }
    config = (Qwen2Config(**common) if arch == "qwen2"
              else LlamaConfig(bos_token_id=fast.bos_token_id, **common))
    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(config).save_pretrained(path)
    return path


def reset_task_state() -> None:
    """Forget the records, built profiles and provenance the benchmark tasks have loaded.

    Call it (with :func:`reset_registry`) before a test that runs a task in-process, so the run
    reads its data and builds its profiles afresh.
    """
    from prbench.harness import tasks

    tasks.reset()


def run_cli(argv: Sequence[str]) -> int:
    """Run one ``prbench`` command in this process, e.g. ``run_cli(["eval", "--tasks", ...])``.

    Args:
        argv: the arguments after ``prbench``.

    Returns:
        The command's exit code (0 on success; argparse's exit for a bad flag is returned, not
        raised); its output goes to stdout/stderr as usual.
    """
    from prbench.cli import main

    try:
        return main(list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)


def isolated_tests(load_plugins: str | None = None) -> Any:
    """The set-up of a test folder: offline, and a fresh registry and cache dir for every test.

    Call it in the folder's ``conftest.py`` and bind the result to a name there
    (``_isolated = isolated_tests("mine")``): the call sets ``HF_HUB_OFFLINE``,
    ``HF_DATASETS_OFFLINE`` and ``TRANSFORMERS_OFFLINE`` to ``1`` (and ``TOKENIZERS_PARALLELISM``
    to ``false`` unless set); the returned autouse fixture gives each test its own
    ``PRBENCH_CACHE_DIR`` and a registry built afresh (:func:`reset_registry` before and after),
    sets ``PRBENCH_PROGRESS_INTERVAL=inf`` (no heartbeat lines without a terminal; a test of
    them sets its own interval) and ``PRBENCH_EMBED_PROBE=0`` (``embed_backend=auto`` measures
    nothing; :mod:`prbench.profiles.embed_backend`).

    Args:
        load_plugins: ``PRBENCH_LOAD_PLUGINS`` during each test (``"mine"``: only that plugin,
            whatever else is installed; ``""``: only prbench's built-ins); ``None`` leaves it as
            the environment has it.

    Returns:
        The autouse pytest fixture.
    """
    import os

    import pytest

    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ[var] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    @pytest.fixture(autouse=True)
    def isolated(tmp_path_factory: pytest.TempPathFactory,
                 monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        monkeypatch.setenv("PRBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("prbench_cache")))
        if load_plugins is not None:
            monkeypatch.setenv("PRBENCH_LOAD_PLUGINS", load_plugins)
        # a progress switch left by an earlier in-process command (`--no_progress` sets
        # TQDM_DISABLE) must not decide whether this test's bars are drawn
        monkeypatch.delenv("TQDM_DISABLE", raising=False)
        # no heartbeat lines (a step's progress in a log, every 30 s) in a test's output: whether
        # a step outlasts the interval depends on the machine's load, never on the code
        monkeypatch.setenv("PRBENCH_PROGRESS_INTERVAL", "inf")
        # embed_backend=auto never times torch against OpenVINO: a test's backend is torch
        # unless it asks (a choice made by a timing would depend on the machine's load)
        monkeypatch.setenv("PRBENCH_EMBED_PROBE", "0")
        _log_handlers_follow_stderr()
        reset_registry()
        yield
        reset_registry()

    return isolated


class _CurrentStderr:
    """A stream that writes to whatever ``sys.stderr`` is when it writes (a test's capture)."""

    def write(self, text: str) -> int:
        import sys

        return sys.stderr.write(text)

    def flush(self) -> None:
        import sys

        sys.stderr.flush()


def _log_handlers_follow_stderr() -> None:
    """Point the plain stream handlers of lm-eval (and the root logger) at the current stderr.

    lm-eval's ``setup_logging`` adds its handler once, bound to the ``sys.stderr`` of that
    moment; in a test run that is one test's capture, closed when the test ends, and every
    later warning of lm-eval's would print "--- Logging error ---" into another test's output.
    """
    import contextlib
    import logging

    for handler in [*logging.getLogger("lm_eval").handlers, *logging.getLogger().handlers]:
        if type(handler) is logging.StreamHandler and not isinstance(handler.stream,
                                                                      _CurrentStderr):
            with handler.lock or contextlib.nullcontext():  # not setStream: it flushes the old
                handler.stream = _CurrentStderr()  # stream, which may be closed already


def skip_unless_installed(module: str) -> list[str]:
    """``collect_ignore_glob`` for a plugin's test folder: its tests are skipped when ``module``
    (the plugin's package) is not installed, collected otherwise.

    Args:
        module: the plugin package's import name, e.g. ``"prbench_plugin_mine"``.

    Returns:
        ``["test_*.py"]`` when the package cannot be found, else ``[]``.
    """  # noqa: D205
    import importlib.util

    return [] if importlib.util.find_spec(module) is not None else ["test_*.py"]


@contextlib.contextmanager
def token_slot_limit(module: Any, limit: int) -> Iterator[dict[str, int]]:
    """Simulate a device that holds ``limit`` token slots: ``module``'s forward runs out of memory.

    Inside the block, a call of ``module`` whose rows x (cached tokens + new tokens) exceeds
    ``limit`` raises ``torch.OutOfMemoryError`` before computing anything — the key/value cache a
    row attends to counts, so continuations over a long shared prompt fail where the prompt alone
    fits. Calls within the limit run as usual. The original forward is restored on exit.

    Args:
        module: a decoder (e.g. a sequence classifier's base model) called with ``input_ids``.
        limit: the most token slots one call may hold (0: no limit, nothing fails).

    Yields:
        Counts, updated live: ``failures`` (calls refused), ``calls`` (all calls) and
        ``max_slots`` (the most token slots one call asked for, refused or not; with ``limit`` 0
        this measures what a run needs).
    """
    import torch

    forward = module.forward
    own = module.__dict__.get("forward")  # a forward set on the instance (e.g. by a hook)
    counts = {"failures": 0, "calls": 0, "max_slots": 0}

    def limited(*args: Any, **kwargs: Any) -> Any:
        ids = kwargs.get("input_ids", args[0] if args else None)
        # the key/value cache: ``past_key_values`` (``cache`` in later transformers releases)
        cache = kwargs.get("past_key_values", kwargs.get("cache"))
        counts["calls"] += 1
        if ids is not None:
            width = cache.get_seq_length() if cache is not None else 0
            slots = ids.shape[0] * (width + ids.shape[1])
            counts["max_slots"] = max(counts["max_slots"], slots)
            if limit and slots > limit:
                counts["failures"] += 1
                raise torch.OutOfMemoryError("CUDA out of memory (simulated token-slot limit)")
        return forward(*args, **kwargs)

    module.forward = limited
    try:
        yield counts
    finally:
        if own is not None:
            module.forward = own
        elif module.__dict__.get("forward") is limited:
            del module.forward  # the class's forward again


__all__ = [
    "LoopbackOpenAI",
    "PluginRegistry",
    "Script",
    "ScriptedBackend",
    "build_tiny_causal_lm",
    "isolated_tests",
    "reset_registry",
    "reset_task_state",
    "run_cli",
    "send_json",
    "skip_unless_installed",
    "token_slot_limit",
]
