"""FLOP counts of transformer forward passes: one model shared by the benchmarks and the dry run.

A forward pass over ``T`` new tokens costs ``2 N T`` FLOPs in the matrix products of the ``N``
non-embedding parameters, plus the attention scores and their weighted sums: ``4 L d_attn`` per
(query, key) pair, over ``L`` layers of ``d_attn`` = heads x head_dim. A decoder's token sees
the tokens before it (:meth:`FlopModel.forward`); an encoder's sees all ``T``
(:meth:`FlopModel.bidirectional`). Embedding lookups cost nothing here, and a BERT pooler (one
token per text) is left out.

:func:`flop_model` counts a loaded model; :func:`encoder_flop_model_from_config` reads the same
figures from a BERT-style encoder's ``config.json`` without loading weights, and
:func:`embedding_flop_model` finds that config for an embedding model named as the encoders'
``model`` option names it (``minilm``, ``contriever``, a local folder or a cached hub id).

Importing this module is cheap (torch only inside :func:`non_embedding_params`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: ``config.json`` values of hub encoders the dry run may meet before they are downloaded
#: (``facebook/contriever-msmarco`` is a BERT-base encoder)
KNOWN_ENCODER_CONFIGS: dict[str, dict[str, int]] = {
    "facebook/contriever-msmarco": {"hidden_size": 768, "num_hidden_layers": 12,
                                    "num_attention_heads": 12, "intermediate_size": 3072,
                                    "max_position_embeddings": 512},
    "facebook/contriever": {"hidden_size": 768, "num_hidden_layers": 12,
                            "num_attention_heads": 12, "intermediate_size": 3072,
                            "max_position_embeddings": 512},
}


@dataclasses.dataclass(frozen=True)
class FlopModel:
    """What the FLOP count needs from a model.

    Attributes:
        params: non-embedding parameters.
        layers: transformer layers.
        attn_dim: heads x head_dim.
        max_tokens: the longest input the model reads (``0``: unknown).
    """

    params: int
    layers: int
    attn_dim: int
    max_tokens: int = 0

    def forward(self, new: int, context: int = 0) -> int:
        """FLOPs of ``new`` tokens after ``context`` cached tokens (a decoder)."""
        attention = 4 * self.layers * self.attn_dim * (new * context + new * (new + 1) // 2)
        return 2 * self.params * new + attention

    def bidirectional(self, tokens: int) -> int:
        """FLOPs of one ``tokens``-long sequence through an encoder, every token seeing all.

        ``2 * N * T + 4 * L * d_attn * T * T``: each of the ``T`` tokens attends to ``T`` keys.
        """
        return 2 * self.params * tokens + 4 * self.layers * self.attn_dim * tokens * tokens


def non_embedding_params(model: Any) -> int:
    """Parameters of ``model`` outside its ``nn.Embedding`` modules (counted once each)."""
    import torch

    embedded = {id(p) for m in model.modules() if isinstance(m, torch.nn.Embedding)
                for p in m.parameters()}
    seen: set[int] = set()
    total = 0
    for p in model.parameters():
        if id(p) not in embedded and id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


def flop_model(model: Any) -> FlopModel:
    """The :class:`FlopModel` of a loaded transformers model."""
    cfg = model.config
    heads = int(cfg.num_attention_heads)
    head_dim = int(getattr(cfg, "head_dim", 0) or cfg.hidden_size // heads)
    return FlopModel(non_embedding_params(model), int(cfg.num_hidden_layers), heads * head_dim,
                     int(getattr(cfg, "max_position_embeddings", 0) or 0))


def encoder_flop_model_from_config(config: Mapping[str, Any]) -> FlopModel:
    """The :class:`FlopModel` of a BERT-style encoder from its ``config.json`` values.

    Per layer: the query, key, value and output projections (``4 (h^2 + h)``), the feed-forward
    pair (``2 h i + i + h``) and two LayerNorms (``4 h``); plus the embeddings' LayerNorm
    (``2 h``). The pooler is left out (it reads one token per text).

    Args:
        config: ``hidden_size``, ``num_hidden_layers``, ``intermediate_size`` and
            ``num_attention_heads`` (``max_position_embeddings`` if known).
    """
    h = int(config["hidden_size"])
    layers = int(config["num_hidden_layers"])
    inner = int(config["intermediate_size"])
    per_layer = 4 * (h * h + h) + 2 * h * inner + inner + h + 4 * h
    return FlopModel(layers * per_layer + 2 * h, layers, h,
                     int(config.get("max_position_embeddings", 0) or 0))


def embedding_flop_model(model: str, revision: str | None = None) -> FlopModel | None:
    """The :class:`FlopModel` of an embedding model, from its config, without loading it.

    Args:
        model: as the encoders' ``model`` option names it.
        revision: its hub revision.

    Returns:
        The model's FLOP figures, or ``None`` when its config cannot be read here (a hub model
        not in the local cache and not in :data:`KNOWN_ENCODER_CONFIGS`).
    """
    from prbench.model_ref import HUB_ALIASES, ModelUnavailableError, resolve_model

    name = HUB_ALIASES.get(model.strip().lower(), model.strip())
    try:
        ref = resolve_model(model, revision)
    except ModelUnavailableError:
        ref = None
    if ref is not None and ref.local_dir is not None:
        path = Path(ref.local_dir) / "config.json"
        if path.is_file():
            config = json.loads(path.read_text(encoding="utf-8"))
            if {"hidden_size", "num_hidden_layers", "intermediate_size"} <= set(config):
                return encoder_flop_model_from_config(config)
    known = KNOWN_ENCODER_CONFIGS.get(name)
    return encoder_flop_model_from_config(known) if known else None


__all__ = [
    "KNOWN_ENCODER_CONFIGS",
    "FlopModel",
    "embedding_flop_model",
    "encoder_flop_model_from_config",
    "flop_model",
    "non_embedding_params",
]
