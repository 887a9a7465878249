"""``embedder=causal-lm-mean``: option embeddings from a causal LM, as the GPO paper makes them.

Each text is tokenised (the tokenizer's own special tokens, right padding), run through the
causal LM, and its **last hidden state** (the output of the final layer, after the model's final
norm) is averaged over the text's non-padding tokens. With right padding and causal attention the
real tokens never see the padding, and the mean skips it, so a text's vector does not depend on
what it is batched with.

The model is named like any prbench embedding model (hub id with ``revision``, local folder) and
found by :func:`prbench.model_ref.resolve_model`; ``trust_remote_code`` is passed
explicitly (``False`` unless asked). Vectors go through prbench's on-disk embedding cache, keyed
by the model's fingerprint, the dtype and the truncation length, so training and scoring embed
each text once.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    import numpy as np

_LOADED: dict[tuple[Any, ...], tuple[Any, Any]] = {}
_LOCK = threading.Lock()
_CACHE_FORMAT = "gpo-causal-lm-mean/2"


def _load(src: str, revision: str | None, dtype: str, device: str,
          trust_remote_code: bool) -> tuple[Any, Any]:
    """(tokenizer, model) of a causal LM, shared per process."""
    key = (src, revision, dtype, device, trust_remote_code)
    with _LOCK:
        if key not in _LOADED:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            from prbench.api import ModelUnavailableError, remote_code_error

            try:
                tok = AutoTokenizer.from_pretrained(src, revision=revision,
                                                    trust_remote_code=trust_remote_code)
                model = AutoModelForCausalLM.from_pretrained(
                    src, revision=revision, dtype=getattr(torch, dtype),
                    trust_remote_code=trust_remote_code,
                )
            except (OSError, ValueError) as exc:
                raise remote_code_error(src, exc) or ModelUnavailableError(
                    f"gpo: cannot load the causal LM {src!r}: {exc}") from exc
            if tok.pad_token is None:
                if tok.eos_token is None:
                    raise ModelUnavailableError(f"gpo: the tokenizer of {src!r} has no pad or "
                                                "eos token to pad batches with")
                tok.pad_token = tok.eos_token
            tok.padding_side = "right"
            _LOADED[key] = (tok, model.to(device).eval())
        return _LOADED[key]


def mean_pool(hidden: Any, attention_mask: Any) -> Any:
    """Mean of ``hidden`` (batch, tokens, dim) over the tokens where ``attention_mask`` is 1."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)


class CausalLMMeanEncoder:
    """Embeds texts with a causal LM's mean-pooled last hidden state, through the disk cache.

    Args:
        model: hub id or local folder of an ``AutoModelForCausalLM``.
        revision: hub branch, tag or commit.
        max_length: truncation in tokens (``None``: none of prbench's; only the model's own
            position limit, ``max_position_embeddings``, bounds a text). Texts cut at the limit
            are counted (``n_truncated``) and logged as a warning.
        trust_remote_code: run code shipped with the model (only if you trust it).
        dtype: ``float32``, ``bfloat16`` or ``float16`` weights (vectors are returned as float32).
        device: ``auto``, ``cpu``, ``cuda``, ``cuda:N``.
        batch_size: texts per forward pass.
        cache: read and write prbench's embedding cache.
        cache_dir: the cache folder (default: prbench's cache).

    Raises:
        prbench.model_ref.ModelUnavailableError: the model cannot be found.
    """

    def __init__(self, model: str, *, revision: str | None = None, max_length: int | None = None,
                 trust_remote_code: bool = False, dtype: str = "float32", device: str = "auto",
                 batch_size: int = 32, cache: bool = True, cache_dir: str | None = None) -> None:
        from prbench.api import resolve_model

        if batch_size < 1 or (max_length is not None and max_length < 1):
            raise ValueError("batch_size and max_length must be at least 1")
        self.model = model
        self.revision = revision
        self.max_length = max_length
        self.trust_remote_code = trust_remote_code
        self.dtype = dtype
        self.device_option = device
        self.batch_size = batch_size
        self.use_cache = cache
        self._cache_root = Path(cache_dir) if cache_dir else None
        self.ref = resolve_model(model, revision)
        self._cache: Any = None
        #: texts cut at the token limit so far (embedded, not read from the cache)
        self.n_truncated = 0

    @property
    def _src(self) -> str:
        return str(self.ref.local_dir) if self.ref.local_dir is not None else self.ref.source

    def describe(self) -> dict[str, Any]:
        """What produces the vectors (for checkpoints, manifests and the cache's metadata)."""
        return {
            "model": self.model, "resolved": self.ref.label, "encoder": "causal-lm-mean",
            "pooling": "mean of the last hidden state over non-padding tokens",
            "revision": self.revision, "max_length": self.max_length, "dtype": self.dtype,
            "trust_remote_code": self.trust_remote_code, "fingerprint": self.ref.fingerprint,
        }

    def _model(self) -> tuple[Any, Any]:
        from prbench.api import resolve_device

        rev = None if self.ref.local_dir else self.revision
        return _load(self._src, rev, self.dtype, resolve_device(self.device_option),
                     self.trust_remote_code)

    def _key(self) -> str:
        if self.ref.fingerprint is None:  # a hub model fetched on first use
            from prbench.api import resolve_model

            self._model()
            self.ref = resolve_model(self.model, self.revision)
        parts = [_CACHE_FORMAT, str(self.ref.fingerprint), self.dtype,
                 f"max_length={self.max_length or 'auto'}", f"remote={self.trust_remote_code}"]
        return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Run the model on ``texts`` (no cache): one float32 row per text."""
        import numpy as np
        import torch

        tok, model = self._model()
        limit = self.max_length or int(
            getattr(model.config, "max_position_embeddings", 0) or 10**9)
        dim = int(model.config.hidden_size)
        out = np.zeros((len(texts), dim), dtype=np.float32)
        full = [len(ids) for ids in tok(list(texts), verbose=False)["input_ids"]]
        cut = sum(1 for n in full if n > limit)
        if cut:
            self.n_truncated += cut
            logger.warning("gpo: %d of %d texts are longer than %d tokens (%s) and were cut to "
                           "it before embedding", cut, len(texts), limit,
                           "max_length" if self.max_length else "the model's position limit")
        lengths = [min(n, limit) for n in full]
        order = sorted(range(len(texts)), key=lambda i: (-lengths[i], i))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            batch = tok([texts[i] for i in idx], padding=True, truncation=True, max_length=limit,
                        return_tensors="pt").to(model.device)
            with torch.inference_mode():
                hidden = model(input_ids=batch["input_ids"],
                               attention_mask=batch["attention_mask"],
                               output_hidden_states=True).hidden_states[-1].float()
            out[idx] = mean_pool(hidden, batch["attention_mask"]).cpu().numpy()
        return out

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts through the cache (float32, one row per text, in order)."""
        import numpy as np

        from prbench.api import EmbeddingCache

        texts = list(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        # EmbeddingCache's key: the sha256 of the text's UTF-8 bytes
        hashes = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        unique = dict(zip(hashes, texts, strict=True))
        found: dict[str, Any] = {}
        if self.use_cache:
            if self._cache is None:
                from prbench.api import cache_dir

                root = self._cache_root or cache_dir("embeddings")
                self._cache = EmbeddingCache(root / f"{self._key()}.sqlite", meta=self.describe())
            found = self._cache.get(list(unique))
        missing = [h for h in unique if h not in found]
        if missing:
            vectors = self.embed([unique[h] for h in missing])
            new = {h: vectors[i] for i, h in enumerate(missing)}
            if self.use_cache:
                self._cache.put(new)
            found.update(new)
        return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)
