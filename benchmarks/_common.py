"""What the benchmark scripts share: device and dtype, wall-clock timing, model shapes, FLOPs.

- :func:`resolve` turns ``--device`` / ``--dtype`` into a ``torch.device`` and a dtype name
  (``auto``: CUDA when available, else the CPU; bf16 on CUDA, fp32 on a CPU — the
  ``hf-classifier`` scorer's own rule, so a baseline and the scorer always run alike).
- :func:`timed` measures wall-clock seconds (``time.perf_counter``), synchronising CUDA before and
  after, so queued kernels are counted; process CPU time would miss all GPU work.
- :data:`SHAPES` holds random-weight reward models of real shapes, written out from the public
  ``config.json`` of each checkpoint (hidden size, layers, heads, key/value heads, head size,
  intermediate size, vocabulary), and :func:`build_shape_model` builds one in memory with
  ``AutoModelForSequenceClassification.from_config`` (``num_labels=1``): no network, no download.
  Rotary scaling, soft-capping and other settings that change values but not the work done are
  left at their defaults.
- The compute floor. A forward pass over ``new`` tokens that follow ``context`` tokens already in
  the key/value cache costs::

      2 * N * new  +  4 * L * d_attn * (new * context + new * (new + 1) / 2)

  FLOPs, where ``N`` is the non-embedding parameter count (every weight except the token
  embedding, which is a lookup; each weight is one multiply-add per token), ``L`` the layer count
  and ``d_attn = heads * head_dim``. The second term is causal attention: the token at position
  ``p`` attends to ``p + 1`` keys, and ``Q K^T`` and ``A V`` cost ``2 * d_attn`` FLOPs per key
  each. A whole sequence of ``T`` tokens is ``new = T, context = 0`` (``2NT + 2 L d_attn
  T (T + 1)``). :func:`floor_flops` charges each shared prompt once and each answer once from the
  prompt's cache, with no padding: the work no implementation can skip.
  An encoder (no causal mask) costs ``2NT + 4 L d_attn T^2`` per sequence
  (:meth:`FlopModel.bidirectional`).
- :func:`measure_peak_flops` times a large square matmul in the run's dtype on the run's device
  (on a CPU, the faster of that dtype and fp32); MFU is then ``floor FLOPs / (wall seconds *
  peak)``.

Nothing here imports torch at module import.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, TypeVar

from prbench.flops import FlopModel, flop_model, non_embedding_params  # noqa: F401 (re-exported)

T = TypeVar("T")

#: ``--dtype`` spellings and the dtype name each means.
DTYPES = {"auto": "auto", "float32": "float32", "fp32": "float32", "bfloat16": "bfloat16",
          "bf16": "bfloat16", "float16": "float16", "fp16": "float16"}


@dataclasses.dataclass(frozen=True)
class Shape:
    """A reward model's shape (from its checkpoint's ``config.json``)."""

    arch: str  # llama, qwen3 or gemma2
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int  # 0: the tokenizer's size
    source: str
    extra: tuple[tuple[str, Any], ...] = ()


#: Random-weight shapes selectable with ``--shape`` (values from each model's public config.json).
SHAPES: dict[str, Shape] = {
    "tiny": Shape("llama", 64, 2, 4, 2, 16, 176, 0, "a tiny Llama for CPU and CI smoke runs"),
    "qwen3-0.6b": Shape("qwen3", 1024, 28, 16, 8, 128, 3072, 151936, "Qwen/Qwen3-0.6B"),
    "llama-3.1-8b": Shape("llama", 4096, 32, 32, 8, 128, 14336, 128256,
                          "meta-llama/Llama-3.1-8B"),
    "gemma-2-27b": Shape(
        "gemma2", 4608, 46, 32, 16, 128, 36864, 256000, "google/gemma-2-27b",
        (("query_pre_attn_scalar", 144), ("sliding_window", 4096),
         ("attn_logit_softcapping", 50.0), ("final_logit_softcapping", 30.0)),
    ),
}


def resolve(device: str, dtype: str) -> tuple[Any, str]:
    """The ``torch.device`` and dtype name (``float32``, ``bfloat16``, ``float16``) to run with.

    Raises:
        ValueError: an unknown device or dtype.
    """
    from prbench.devices import resolve_dtype, torch_device

    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose from {', '.join(DTYPES)}")
    dev = torch_device(device)
    return dev, resolve_dtype(DTYPES[dtype], dev)


def sync(device: Any) -> None:
    """Wait for queued CUDA work on ``device`` (nothing on a CPU)."""
    if getattr(device, "type", str(device)).startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def timed(fn: Callable[[], T], device: Any) -> tuple[float, T]:
    """``(wall seconds, fn())``, synchronising CUDA before and after."""
    sync(device)
    start = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - start, out


def best_of(repeats: int, fn: Callable[[], T], device: Any) -> tuple[float, T]:
    """The fastest wall time of ``repeats`` runs of ``fn`` and the last run's result."""
    best, out = float("inf"), None
    for _ in range(max(1, repeats)):
        secs, out = timed(fn, device)
        best = min(best, secs)
    return best, out  # type: ignore[return-value]


def measure_peak_flops(device: Any, dtype: str, *, size: int = 0, seconds: float = 0.5,
                       exact: bool = False) -> float:
    """FLOP/s of a square ``size x size`` matmul in ``dtype`` on ``device`` (best of 3 runs).

    ``size`` 0 picks 8192 on CUDA and 1024 on a CPU. On a CPU, where a bf16 or fp16 matmul can
    run slower than fp32 (and the model's kernels may compute in fp32), the peak is the faster
    of ``dtype`` and fp32, unless ``exact`` asks for ``dtype``'s own peak.
    """

    n = size or (8192 if device.type == "cuda" else 1024)
    dtypes = {dtype, "float32"} if device.type == "cpu" and not exact else {dtype}
    return max(_matmul_flops(device, d, n, seconds) for d in sorted(dtypes))


def _matmul_flops(device: Any, dtype: str, n: int, seconds: float) -> float:
    import torch

    gen = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(n, n, generator=gen).to(device=device, dtype=getattr(torch, dtype))
    b = torch.randn(n, n, generator=gen).to(device=device, dtype=getattr(torch, dtype))
    with torch.inference_mode():
        timed(lambda: a @ b, device)  # warm-up: library start-up, kernel selection
        once, _ = timed(lambda: a @ b, device)
        reps = max(1, min(500, int(seconds / 3 / max(once, 1e-6))))
        best = float("inf")
        for _ in range(3):
            def run() -> None:
                for _ in range(reps):
                    torch.mm(a, b)

            secs, _ = timed(run, device)
            best = min(best, secs / reps)
    return 2.0 * n**3 / best


def floor_flops(flops: FlopModel, seqs: Sequence[Sequence[int]],
                keys: Sequence[Hashable]) -> tuple[int, int]:
    """``(FLOPs, tokens)`` of the floor: each shared prompt once, each answer once, no padding.

    Sequences with equal ``keys`` share their longest common token prefix (as
    :func:`prbench.scoring.prefix.group_shared_prefixes` finds it).
    """
    from prbench.scoring.prefix import group_shared_prefixes

    groups, singles = group_shared_prefixes(seqs, keys, min_prefix_tokens=1)
    total = tokens = 0
    for g in groups:
        total += flops.forward(len(g.prefix))
        total += sum(flops.forward(len(s), len(g.prefix)) for s in g.suffixes)
        tokens += g.real_tokens
    for i in singles:
        total += flops.forward(len(seqs[i]))
        tokens += len(seqs[i])
    return total, tokens


def shape_config(shape: Shape, *, layers: int = 0, vocab: int, pad_id: int, bos_id: int) -> Any:
    """The transformers config of ``shape`` (``layers`` > 0 overrides the depth)."""
    from transformers import AutoConfig

    kwargs: dict[str, Any] = {
        "hidden_size": shape.hidden, "num_hidden_layers": layers or shape.layers,
        "num_attention_heads": shape.heads, "num_key_value_heads": shape.kv_heads,
        "head_dim": shape.head_dim, "intermediate_size": shape.intermediate,
        "vocab_size": shape.vocab or vocab, "max_position_embeddings": 8192,
        "pad_token_id": pad_id, "bos_token_id": bos_id, "num_labels": 1,
        "tie_word_embeddings": False, **dict(shape.extra),
    }
    return AutoConfig.for_model(shape.arch, **kwargs)


def build_shape_model(config: Any, device: Any, dtype: str, *, seed: int = 0) -> Any:
    """A random-weight sequence classifier of ``config``, built on ``device`` in ``dtype``."""
    import torch
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForSequenceClassification.from_config(
            config, dtype=getattr(torch, dtype)
        )
    return model.eval()


@contextlib.contextmanager
def lent_model(model: Any) -> Iterator[None]:
    """Scorers built inside load ``model`` instead of reading weights from their folder.

    Every ``hf-classifier`` scorer then runs the same module (one copy in memory, however many
    runtimes a benchmark compares); the folder still supplies the tokenizer and config.
    """
    from unittest import mock

    from transformers import AutoModelForSequenceClassification

    def load(*_args: Any, **kwargs: Any) -> Any:
        want = kwargs.get("dtype")
        if want not in (None, "auto", model.dtype):
            raise ValueError(f"the benchmark model is {model.dtype}, a scorer asked for {want}; "
                             "give the scorer the benchmark's dtype")
        return model

    with mock.patch.object(AutoModelForSequenceClassification, "from_pretrained", load):
        yield
