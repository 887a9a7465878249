"""Loaded embedding models and how each pools a text into one vector (shared per process).

Two kinds (see :mod:`prbench.profiles.embed`): ``sentence-transformers`` (pooling and
normalisation from the model's own modules) and ``transformers-mean`` (any ``AutoModel`` encoder,
mean-pooled over non-padding tokens, not normalised: the released retrieval with contriever).
:func:`load_model` loads each (model, kind, device, length, trust) once per process, so a profile
builder and a scorer that use the same model share one copy. torch, transformers and
sentence-transformers are imported only when a model is loaded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from prbench.profiles.model_ref import (
    ModelRef,
    ModelUnavailableError,
    hub_offline,
    load_error,
    remote_code_error,
)

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)


class EmbeddingModel:
    """A loaded model with ``embed(texts, batch_size) -> float32 array``."""

    dim: int

    def embed(self, texts: Sequence[str], batch_size: int, dtype: str = "float32") -> np.ndarray:
        """Embed ``texts`` in ``dtype`` (``float32``, or ``bfloat16`` autocast); float32 rows."""
        raise NotImplementedError


class _SentenceTransformerModel(EmbeddingModel):
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
            raise remote_code_error(src, exc) or load_error(src, ref, exc) from exc
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


class _MeanPooledModel(EmbeddingModel):
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
            raise remote_code_error(src, exc) or load_error(src, ref, exc) from exc
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


_LOADED: dict[tuple[str, str | None, str, str, int | None, bool], EmbeddingModel] = {}
_LOAD_LOCK = threading.Lock()


def load_model(
    ref: ModelRef, kind: str, device: str, max_length: int | None, trust_remote_code: bool
) -> EmbeddingModel:
    """The loaded model for these settings, loaded once per process and shared.

    Args:
        ref: where the model's files are (:func:`prbench.profiles.model_ref.resolve_model`).
        kind: ``sentence-transformers`` (the model's own modules pool) or ``transformers-mean``.
        device: the resolved device.
        max_length: truncation in tokens (``None``: the model's own limit).
        trust_remote_code: run code shipped with the model.

    Raises:
        ModelUnavailableError: the model does not load (named, with what to do).
    """
    where = ref.source if ref.local_dir is None else str(ref.local_dir)
    key = (where, ref.fingerprint, kind, device, max_length, trust_remote_code)
    with _LOAD_LOCK:
        if key not in _LOADED:
            cls = _SentenceTransformerModel if kind == "sentence-transformers" else _MeanPooledModel
            logger.info("loading embedding model %s (%s) on %s", ref.label, kind, device)
            _LOADED[key] = cls(ref, device, max_length, trust_remote_code)
        return _LOADED[key]
