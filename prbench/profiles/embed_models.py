"""Loaded embedding models and how each pools a text into one vector (shared per process).

Two kinds (see :mod:`prbench.profiles.embed`): ``sentence-transformers`` (pooling and
normalisation from the model's own modules) and ``transformers-mean`` (any ``AutoModel`` encoder,
mean-pooled over non-padding tokens, not normalised: the released retrieval with contriever).
:func:`load_model` loads each (model, kind, device, length, trust, precision) once per process, so
a profile builder and a scorer that use the same model in the same precision share one copy.
torch, transformers and sentence-transformers are imported only when a model is loaded.

Precision (:data:`PRECISIONS`): ``float32``; ``bfloat16``, fp32 weights under bf16 autocast; and
``bfloat16-weights``, the transformer's weights cast to bf16 (no casts at every matrix product:
autocast's conversions ate most of the bf16 gain on a CPU), its token states turned back to fp32
before pooling, so pooling, any dense layer after it and normalisation run in fp32.

Batches (:meth:`EmbeddingModel.embed`): the texts are tokenized first, sorted by token count
(longest first), cut into batches of at most ``batch_size`` and put back in the caller's order,
so a batch pads to its own longest text. A batch that runs out of memory is split: the batch
size is an :class:`prbench.oom.AdaptiveLimit` (the scorer runtime's back-off, reused),
halved on an out-of-memory error and grown back after a streak of batches that fit; on a device
that never runs out of memory the batches are exactly those of ``batch_size``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from prbench.errors import PrbenchUserError
from prbench.model_ref import (
    ModelRef,
    ModelUnavailableError,
    hub_offline,
    load_error,
    remote_code_error,
)

if TYPE_CHECKING:
    import numpy as np

    from prbench.oom import AdaptiveLimit

logger = logging.getLogger(__name__)

#: How an encoder's matrix products run: fp32; fp32 weights under bf16 autocast; bf16 weights.
PRECISIONS: tuple[str, ...] = ("float32", "bfloat16", "bfloat16-weights")


class EncoderOutOfMemoryError(PrbenchUserError, RuntimeError):
    """One text does not fit in memory even in a batch of its own."""


class EmbeddingModel:
    """A loaded model: ``embed(texts, batch_size) -> float32 array`` in its precision.

    Subclasses implement :meth:`token_counts` and :meth:`forward` (one padded batch); the
    batching, ordering and out-of-memory back-off are shared (:meth:`embed`).

    Attributes:
        dim: the vector size.
        precision: one of :data:`PRECISIONS`.
        label: the model's name, for messages.
        oom_retries: batches that ran out of memory and were split (cumulative).
    """

    dim: int
    precision: str = "float32"
    label: str = "the encoder"
    oom_retries: int = 0

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """The number of tokens of each text after truncation (what its batch pads to)."""
        raise NotImplementedError

    def forward(self, texts: Sequence[str]) -> np.ndarray:
        """The float32 vectors of ``texts``, run as one padded batch."""
        raise NotImplementedError

    def use_threads(self, count: int) -> None:
        """Run the next batches on ``count`` CPU threads where the runtime does not follow torch's.

        torch's count is set by the caller (:class:`prbench.profiles.embed.Encoder`); a runtime
        with its own thread pool (OpenVINO) overrides this.
        """

    # -- the parts another runtime reuses (:mod:`prbench.profiles.embed_openvino`) -------------

    @property
    def transformer(self) -> Any:
        """The torch transformer whose token states are pooled (what another runtime converts)."""
        raise NotImplementedError

    @property
    def token_limit(self) -> int:
        """The truncation length in tokens (the longest batch :meth:`tokenize` makes)."""
        raise NotImplementedError

    def tokenize(self, texts: Sequence[str]) -> dict[str, Any]:
        """The transformer's inputs for ``texts`` (torch tensors padded to the longest text)."""
        raise NotImplementedError

    def pool(self, token_states: Any, features: dict[str, Any]) -> np.ndarray:
        """The float32 vectors from the transformer's fp32 ``token_states`` (this model's pooling).

        Args:
            token_states: ``(batch, tokens, hidden)`` torch tensor, in fp32.
            features: what :meth:`tokenize` returned for the batch (its ``attention_mask``).
        """
        raise NotImplementedError

    def embed(
        self,
        texts: Sequence[str],
        batch_size: int,
        *,
        lengths: Sequence[int] | None = None,
        limit: AdaptiveLimit | None = None,
    ) -> np.ndarray:
        """Embed ``texts`` (float32 rows in the given order), longest first, backing off on OOM.

        Args:
            texts: the texts.
            batch_size: the most texts per forward pass.
            lengths: each text's token count, when the caller already has them.
            limit: the learned batch size to use and update (kept by the caller across calls);
                a fresh one capped at ``batch_size`` when ``None``.

        Raises:
            EncoderOutOfMemoryError: one text runs out of memory on its own.
        """
        import numpy as np

        from prbench.oom import AdaptiveLimit, free_accelerator_memory, is_oom_error

        texts = list(texts)
        counts = list(lengths) if lengths is not None else self.token_counts(texts)
        order = sorted(range(len(texts)), key=lambda i: (-counts[i], i))
        limit = limit if limit is not None else AdaptiveLimit(batch_size)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        start = 0
        while start < len(order):
            idx = order[start : start + max(1, min(batch_size, limit.current))]
            try:
                out[idx] = self.forward([texts[i] for i in idx])
            except Exception as exc:
                if not is_oom_error(exc):
                    raise
                if len(idx) == 1:
                    raise EncoderOutOfMemoryError(
                        f"embedding model {self.label} ran out of memory on one text of "
                        f"{counts[idx[0]]} tokens alone; lower the encoder option max_length, "
                        "use embed_dtype=bfloat16-weights, or a device with more memory"
                    ) from None
            else:
                start += len(idx)
                limit.success()
                continue
            # outside the except block, so the failed batch's tensors can be freed
            free_accelerator_memory()
            self.oom_retries += 1
            now = limit.shrink(len(idx))
            logger.warning("%s ran out of memory on a batch of %d texts; retrying in batches "
                           "of %d", self.label, len(idx), now)
        return out


def _fp32_token_states(module: Any, inputs: Any, output: Any) -> Any:
    """Forward hook: a bf16 transformer's token states handed on in fp32 (pooling runs in fp32)."""
    from collections.abc import MutableMapping

    if isinstance(output, MutableMapping) and "token_embeddings" in output:
        output["token_embeddings"] = output["token_embeddings"].float()
    return output


class _SentenceTransformerModel(EmbeddingModel):
    def __init__(self, ref: ModelRef, device: str, max_length: int | None,
                 trust_remote_code: bool, precision: str) -> None:
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
        self.label = ref.label
        self.precision = precision
        if precision == "bfloat16-weights":
            import torch

            first = self.model[0]  # the transformer; pooling and the rest stay fp32
            first.to(torch.bfloat16)
            first.register_forward_hook(_fp32_token_states)
        dim_fn = getattr(self.model, "get_embedding_dimension", None)
        if dim_fn is None:  # sentence-transformers < 6
            dim_fn = self.model.get_sentence_embedding_dimension
        self.dim = int(dim_fn())

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        limit = self.model.max_seq_length
        ids = self.model.tokenizer(list(texts), truncation=limit is not None,
                                   max_length=limit, verbose=False)["input_ids"]
        return [len(x) for x in ids]

    def forward(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        # one batch: the model's own encode keeps its preprocessing (prompts, modules)
        with _autocast(self.model.device.type, self.precision):
            out = self.model.encode(
                list(texts), batch_size=max(1, len(texts)), show_progress_bar=False,
                convert_to_tensor=True,
            )
        return np.asarray(out.float().cpu().numpy(), dtype=np.float32)

    @property
    def transformer(self) -> Any:
        return self.model[0].auto_model

    @property
    def token_limit(self) -> int:
        limit = self.model.max_seq_length
        if limit is None:
            limit = getattr(self.transformer.config, "max_position_embeddings", 512)
        return int(limit)

    def tokenize(self, texts: Sequence[str]) -> dict[str, Any]:
        # sentence-transformers >= 6 names it preprocess (tokenize is its deprecated alias)
        prepare = getattr(self.model, "preprocess", None) or self.model.tokenize
        return dict(prepare(list(texts)))

    def pool(self, token_states: Any, features: dict[str, Any]) -> np.ndarray:
        import numpy as np
        import torch

        # the model's own modules after the transformer (pooling, dense, normalisation)
        feats = {**features, "token_embeddings": token_states}
        with torch.inference_mode():
            for module in list(self.model)[1:]:
                feats = module(feats)
        return np.asarray(feats["sentence_embedding"].float().cpu().numpy(), dtype=np.float32)


class _MeanPooledModel(EmbeddingModel):
    def __init__(self, ref: ModelRef, device: str, max_length: int | None,
                 trust_remote_code: bool, precision: str) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        src = str(ref.local_dir) if ref.local_dir is not None else ref.source
        rev = None if ref.local_dir else ref.revision
        weights = torch.bfloat16 if precision == "bfloat16-weights" else torch.float32
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(
                src, revision=rev, trust_remote_code=trust_remote_code
            )
            self.model = AutoModel.from_pretrained(
                src, revision=rev, dtype=weights, trust_remote_code=trust_remote_code
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
        self.label = ref.label
        self.precision = precision
        limits = [getattr(self.model.config, "max_position_embeddings", None)]
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(tok_max, int) and tok_max < 1_000_000:
            limits.append(tok_max)
        known = [n for n in limits if isinstance(n, int) and n > 0]
        self.max_length = max_length or (min(known) if known else 512)
        self.dim = int(self.model.config.hidden_size)

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        ids = self.tokenizer(list(texts), truncation=True, max_length=self.max_length,
                             verbose=False)["input_ids"]
        return [len(x) for x in ids]

    def forward(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        batch = self.tokenize(texts)
        with torch.inference_mode(), _autocast(self.model.device.type, self.precision):
            hidden = self.model(**batch).last_hidden_state.float()
        return self.pool(hidden, batch)

    @property
    def transformer(self) -> Any:
        return self.model

    @property
    def token_limit(self) -> int:
        return int(self.max_length)

    def tokenize(self, texts: Sequence[str]) -> dict[str, Any]:
        return dict(self.tokenizer(
            list(texts), padding=True, truncation=True, max_length=self.max_length,
            return_tensors="pt",
        ).to(self.device))

    def pool(self, token_states: Any, features: dict[str, Any]) -> np.ndarray:
        import torch

        with torch.inference_mode():  # the mean over non-padding tokens, not normalised
            mask = features["attention_mask"].unsqueeze(-1).to(token_states.dtype)
            pooled = (token_states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        return pooled.float().cpu().numpy()


def _autocast(device_type: str, precision: str) -> Any:
    """bf16 autocast on ``device_type`` for the ``bfloat16`` precision, else a no-op context."""
    import contextlib

    if precision != "bfloat16":
        return contextlib.nullcontext()
    import torch

    return torch.autocast(device_type=device_type, dtype=torch.bfloat16)


_LOADED: dict[tuple[str, str | None, str, str, int | None, bool, str], EmbeddingModel] = {}
_LOAD_LOCK = threading.Lock()


def load_model(
    ref: ModelRef, kind: str, device: str, max_length: int | None, trust_remote_code: bool,
    precision: str = "float32",
) -> EmbeddingModel:
    """The loaded model for these settings, loaded once per process and shared.

    Args:
        ref: where the model's files are (:func:`prbench.model_ref.resolve_model`).
        kind: ``sentence-transformers`` (the model's own modules pool) or ``transformers-mean``.
        device: the resolved device.
        max_length: truncation in tokens (``None``: the model's own limit).
        trust_remote_code: run code shipped with the model.
        precision: one of :data:`PRECISIONS` (bf16 weights are a copy of their own).

    Raises:
        ModelUnavailableError: the model does not load (named, with what to do).
    """
    where = ref.source if ref.local_dir is None else str(ref.local_dir)
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    key = (where, ref.fingerprint, kind, device, max_length, trust_remote_code, precision)
    with _LOAD_LOCK:
        if key not in _LOADED:
            cls = _SentenceTransformerModel if kind == "sentence-transformers" else _MeanPooledModel
            logger.info("loading embedding model %s (%s) on %s in %s", ref.label, kind, device,
                        precision)
            _LOADED[key] = cls(ref, device, max_length, trust_remote_code, precision)
        return _LOADED[key]
