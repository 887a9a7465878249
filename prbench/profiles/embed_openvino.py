"""The profile encoder's transformer run by OpenVINO (``embed_backend=openvino``).

The transformer of the torch model prbench loaded (:mod:`prbench.profiles.embed_models`) is
converted in-process (``openvino.convert_model``): same weights, no other download. Tokenization
and pooling stay the torch model's own (:meth:`EmbeddingModel.tokenize`,
:meth:`EmbeddingModel.pool`): OpenVINO only computes the token states, in fp32, so pooling and
normalisation are those of the torch path.

Shapes: a batch is padded to a bucket length (:func:`bucket_length`: 16, then multiples of 32 up
to 256, of 64 up to 512, of 128 beyond, never past the model's truncation) and to the call's batch
size, so a run compiles one static shape per bucket it meets, a handful. Padding tokens are masked
and cut off before pooling, so they change nothing.

Cache (under ``prbench.paths.cache_dir("openvino")``): the converted model is saved as OpenVINO IR
in a folder keyed by the model's fingerprint, kind, inputs and the OpenVINO version
(:func:`ir_folder`), and each compiled shape is kept by OpenVINO's own model cache
(``CACHE_DIR``, keyed by the model, the shape, the precision hint and the OpenVINO version): a
second run neither converts nor compiles.

Precision: ``float32`` (``INFERENCE_PRECISION_HINT=f32``) or ``bfloat16`` (``bf16``; OpenVINO
runs the matrix products in bf16, at the CPU's AMX peak where it has AMX). Threads: the count
``embed_threads`` resolves to before each step (``INFERENCE_NUM_THREADS``; a shape is compiled once
per count, as torch's count follows the load).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prbench.errors import PrbenchUserError
from prbench.profiles.embed_models import EmbeddingModel

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

#: How to install the backend (named by the errors and the fallback line).
INSTALL_HINT = "pip install 'prbench[openvino]' (or: pip install openvino==2026.4.1)"
#: ``embed_dtype`` -> OpenVINO's ``INFERENCE_PRECISION_HINT``.
OV_PRECISIONS: dict[str, str] = {"float32": "f32", "bfloat16": "bf16"}
_IR_FORMAT = "1"


class OpenVINOMissingError(PrbenchUserError, ImportError):
    """``embed_backend=openvino`` was asked for and the ``openvino`` package is not installed."""


class OpenVINOBackendError(PrbenchUserError, ValueError):
    """The OpenVINO backend cannot run this setting (a device or precision it lacks)."""


def openvino_version() -> str | None:
    """The installed OpenVINO version, or ``None`` when the package is not importable."""
    try:
        import openvino
    except ImportError:
        return None
    return str(getattr(openvino, "__version__", None) or openvino.get_version())


def bucket_length(tokens: int, limit: int) -> int:
    """The padded length of a batch whose longest text has ``tokens`` tokens.

    16, then multiples of 32 up to 256, of 64 up to 512 and of 128 beyond (a post of ~150 tokens
    pads by ~10%), never more than ``limit`` (the truncation, which no batch exceeds).
    """
    if tokens <= 16:
        size = 16
    elif tokens <= 256:
        size = 32 * math.ceil(tokens / 32)
    elif tokens <= 512:
        size = 64 * math.ceil(tokens / 64)
    else:
        size = 128 * math.ceil(tokens / 128)
    return max(tokens, min(size, limit))


def ir_folder(root: Path, fingerprint: str, kind: str, inputs: Sequence[str]) -> Path:
    """The folder of a model's converted IR: keyed by weights, kind, inputs, OpenVINO version."""
    key = "|".join([_IR_FORMAT, fingerprint, kind, ",".join(inputs), str(openvino_version())])
    return root / hashlib.sha256(key.encode()).hexdigest()[:32]


@contextlib.contextmanager
def _quiet_tracing() -> Iterator[None]:
    """No tracer warnings nor transformers' log lines while a model is traced for conversion."""
    from transformers.utils import logging as hf_logging

    before = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(before)


class OpenVINOModel(EmbeddingModel):
    """A torch :class:`EmbeddingModel` whose transformer runs in OpenVINO.

    Args:
        base: the loaded fp32 torch model (its tokenizer, transformer and pooling are used).
        precision: ``float32`` or ``bfloat16``.
        threads: ``INFERENCE_NUM_THREADS`` of every compiled shape.
        cache_root: the folder of the IR and of OpenVINO's compiled-model cache.
        fingerprint: the model's fingerprint (weights) and kind, keying the saved IR.

    Attributes:
        converted: whether this object converted the torch model (False: the IR was on disk).
        compile_seconds: time spent converting, loading and compiling (cumulative).
        shapes: the ``(batch, length)`` shapes compiled (each once per thread count).
        threads: the thread count of the next batches (``embed_threads``, decided again by the
            encoder before each step, as torch's is).
    """

    def __init__(self, base: EmbeddingModel, precision: str, threads: int, cache_root: Path,
                 fingerprint: str) -> None:
        import openvino as ov

        if precision not in OV_PRECISIONS:
            raise OpenVINOBackendError(
                f"embed_backend=openvino runs embed_dtype float32 or bfloat16, not {precision}; "
                "pass embed_dtype=bfloat16 (OpenVINO's bf16) or embed_backend=torch"
            )
        self.base = base
        self.dim = base.dim
        self.label = base.label
        self.precision = precision
        self.threads = threads
        self.batch = 1
        self.converted = False
        self.compile_seconds = 0.0
        self.shapes: list[tuple[int, int]] = []
        self._requests: dict[tuple[int, int, int], Any] = {}
        self._lock = threading.Lock()
        self._core = _process_core(ov)
        self._cache = cache_root / "compiled"
        self._cache.mkdir(parents=True, exist_ok=True)
        example = base.tokenize(["an example text", "another one"])
        self.inputs = [n for n in ("input_ids", "attention_mask", "token_type_ids")
                       if n in example]
        tokenizer = getattr(base, "tokenizer", None) or base.model.tokenizer
        self.pad_id = int(tokenizer.pad_token_id or 0)
        started = time.perf_counter()
        self._model = self._load_ir(ov, base, example, cache_root, fingerprint)
        self.compile_seconds += time.perf_counter() - started

    def _load_ir(self, ov: Any, base: EmbeddingModel, example: dict[str, Any],
                 cache_root: Path, fingerprint: str) -> Any:
        """The converted model: read from its IR folder, or converted now and saved there."""
        import torch

        folder = ir_folder(cache_root, fingerprint, type(base).__name__, self.inputs)
        xml = folder / "model.xml"
        if xml.is_file() and (folder / "model.bin").is_file():
            try:
                return self._core.read_model(str(xml))
            except Exception as exc:  # a damaged file: convert again
                logger.warning("OpenVINO IR %s unreadable (%s); converting again", xml, exc)
        with torch.inference_mode(), _quiet_tracing():
            model = ov.convert_model(base.transformer,
                                     example_input={n: example[n] for n in self.inputs})
        self.converted = True
        folder.mkdir(parents=True, exist_ok=True)
        partial = folder / f"model.{os.getpid()}.{id(self)}.xml"  # racing writers: own names
        ov.save_model(model, str(partial), compress_to_fp16=False)  # fp32 weights kept
        partial.with_suffix(".bin").replace(folder / "model.bin")
        partial.replace(xml)
        # compile what a later run reads back: OpenVINO's cache is keyed by the model's hash,
        # and a model read from IR hashes differently from the one convert_model returned
        return self._core.read_model(str(xml))

    def use_threads(self, count: int) -> None:
        """Run the next batches on ``count`` threads (a shape is compiled once per count)."""
        self.threads = count

    def _request(self, batch: int, length: int) -> Any:
        """The infer request of the compiled ``(batch, length)`` shape at the current thread count.

        Compiled on first use (from OpenVINO's on-disk cache where it was compiled before).
        """
        key = (batch, length, self.threads)
        with self._lock:
            if key not in self._requests:
                started = time.perf_counter()
                model = self._model.clone()
                model.reshape({n: [batch, length] for n in self.inputs})
                compiled = self._core.compile_model(model, "CPU", {
                    "INFERENCE_PRECISION_HINT": OV_PRECISIONS[self.precision],
                    "INFERENCE_NUM_THREADS": self.threads,
                    "PERFORMANCE_HINT": "LATENCY",
                    "CACHE_DIR": str(self._cache),
                })
                self._requests[key] = compiled.create_infer_request()
                self.compile_seconds += time.perf_counter() - started
                if (batch, length) not in self.shapes:
                    self.shapes.append((batch, length))
                logger.info("OpenVINO compiled %s for batch %d x %d tokens (%s)", self.label,
                            batch, length, self.precision)
            return self._requests[key]

    def embed(self, texts: Sequence[str], batch_size: int, **kwargs: Any) -> np.ndarray:
        """:meth:`EmbeddingModel.embed`, every batch padded to ``batch_size`` rows (one shape)."""
        self.batch = batch_size
        return super().embed(texts, batch_size, **kwargs)

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """The torch model's token counts (the same tokenizer)."""
        return self.base.token_counts(texts)

    def token_states(self, features: dict[str, Any]) -> Any:
        """The fp32 token states of one tokenized batch (a torch tensor, its own length)."""
        import numpy as np
        import torch

        rows, length = (int(x) for x in features["input_ids"].shape)
        size = bucket_length(length, max(length, self.base.token_limit))
        batch = max(rows, self.batch)
        feed = {}
        for name in self.inputs:
            array = np.full((batch, size), self.pad_id if name == "input_ids" else 0,
                            dtype=np.int64)
            array[:rows, :length] = features[name].cpu().numpy()
            feed[name] = array
        out = self._request(batch, size).infer(feed)[0]
        return torch.from_numpy(np.ascontiguousarray(out[:rows, :length], dtype=np.float32))

    def forward(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors of one batch: OpenVINO's token states, the torch model's pooling."""
        features = self.base.tokenize(texts)
        return self.base.pool(self.token_states(features), features)


_LOAD_LOCK = threading.Lock()
_CORE: list[Any] = []
_CORE_LOCK = threading.Lock()


def _process_core(ov: Any) -> Any:
    """The process's one ``openvino.Core``, made on first use and never released.

    OpenVINO's CPU plugin gives the thread that creates it an alternate signal stack and frees
    that stack when the plugin is destroyed, leaving the thread pointing at freed memory: the next
    signal handled there (Python's handlers run on the alternate stack; ``call_timeout``'s
    ``SIGALRM``, Ctrl-C) then kills the process with a segmentation fault. One core kept for
    the process's life never destroys its plugin.
    """
    with _CORE_LOCK:
        if not _CORE:
            _CORE.append(ov.Core())
        return _CORE[0]


#: where an OpenVINO model is kept: on the torch model it was converted from, so that it lives
#: as long as that model (a table keyed by ``id`` could hand a later model at the same address
#: another model's graph)
_KEPT_AS = "_prbench_openvino"


def load_openvino(base: EmbeddingModel, precision: str, threads: int, cache_root: Path,
                  fingerprint: str) -> OpenVINOModel:
    """The OpenVINO model over ``base``, made once per process and precision (on ``threads`` now).

    Raises:
        OpenVINOMissingError: the ``openvino`` package is not installed.
        OpenVINOBackendError: a precision OpenVINO does not run here.
    """
    if openvino_version() is None:
        raise OpenVINOMissingError(
            f"embed_backend=openvino needs the openvino package; install it with {INSTALL_HINT}, "
            "or pass embed_backend=torch"
        )
    key = (precision, str(cache_root))
    with _LOAD_LOCK:
        kept: dict[tuple[str, str], OpenVINOModel] = base.__dict__.setdefault(_KEPT_AS, {})
        if key not in kept:
            kept[key] = OpenVINOModel(base, precision, threads, cache_root, fingerprint)
        kept[key].use_threads(threads)
        return kept[key]


def probe_seconds(model: OpenVINOModel, rounds: int = 3) -> tuple[float, float]:
    """Seconds of one fp32 batch (16 texts x 128 tokens) in torch and in OpenVINO on this CPU.

    The two run in turns, ``rounds`` times, with ``model``'s thread count, and each keeps its
    fastest round.

    Args:
        model: the fp32 OpenVINO model over the torch model it is measured against.
        rounds: timed rounds of each.

    Returns:
        ``(torch_seconds, openvino_seconds)``.
    """
    import torch

    base, threads = model.base, model.threads
    batch, length = 16, min(128, base.token_limit)
    generator = torch.Generator().manual_seed(0)
    features: dict[str, Any] = {
        "input_ids": torch.randint(1000, 2000, (batch, length), generator=generator),
        "attention_mask": torch.ones(batch, length, dtype=torch.long),
    }
    if "token_type_ids" in model.inputs:
        features["token_type_ids"] = torch.zeros(batch, length, dtype=torch.long)
    model.batch = batch
    model.token_states(features)  # compiles the shape: not timed
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    best = [math.inf, math.inf]
    try:
        with torch.inference_mode():
            base.transformer(**features)  # warm-up
            for _ in range(rounds):
                started = time.perf_counter()
                base.transformer(**features)
                best[0] = min(best[0], time.perf_counter() - started)
                started = time.perf_counter()
                model.token_states(features)
                best[1] = min(best[1], time.perf_counter() - started)
    finally:
        torch.set_num_threads(before)
    return best[0], best[1]
