"""Training settings of GPO: the ``small`` default and the published ``paper`` configuration.

``config=small`` (the default) is prbench's own small network (``arch=small``): d_model 64, 2
layers, 4 heads, feed-forward 128, a learned label embedding added to each option's projection,
targets that attend to the context and to themselves, one logit per target, AdamW at a constant
1e-3, texts embedded up to 256 tokens.

``config=paper`` is the network of the authors' ``configs/gpo.yaml`` (``arch=tnp``): d_model 128,
6 layers, 4 heads, feed-forward 128, dropout 0, an input MLP of 4 linear layers (ReLU between)
over ``[x; y]``, targets that attend to the context only, an MLP head with a mean and a standard
deviation per target, trained with GPO's objective (the Gaussian log-likelihood of each pair's
softmax-normalised means against its preference values); Adam at 3e-4 with a cosine decay over
the training steps; options embedded without a token limit of prbench's (``max_length=None``: the
embedding model's own position limit). It fixes those settings: asking for another value of one
of them with ``config=paper`` is an error, so a checkpoint that says ``paper`` is that network and
optimiser.

The embedder is chosen beside the config: ``embedder=sentence`` (prbench's text encoder, MiniLM by
default) or ``embedder=causal-lm-mean`` (the mean of a causal LM's last hidden state over its
non-padding tokens, as the paper embeds options; :mod:`prbench_plugin_gpo.embedder`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

#: The settings each named configuration fixes.
PRESETS: dict[str, dict[str, Any]] = {
    "small": {"arch": "small", "d_model": 64, "layers": 2, "heads": 4, "dim_feedforward": 128,
              "mask": "target-self", "optimizer": "adamw", "lr": 1e-3, "weight_decay": 0.01,
              "schedule": "constant", "max_length": 256},
    "paper": {"arch": "tnp", "d_model": 128, "layers": 6, "heads": 4, "dim_feedforward": 128,
              "mask": "context-only", "optimizer": "adam", "lr": 3e-4, "weight_decay": 0.0,
              "schedule": "cosine", "max_length": None},
}
#: The fields a configuration fixes (``--d-model`` ... on the command line).
PRESET_FIELDS: tuple[str, ...] = tuple(PRESETS["small"])

EMBEDDERS = ("sentence", "causal-lm-mean")
EMBED_DTYPES = ("float32", "bfloat16", "float16")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything that decides the trained weights (stored in the checkpoint).

    Build one with :func:`make_config` to get a named configuration's settings; the constructor
    checks that a ``paper`` config carries exactly the paper's settings.

    Attributes:
        config: ``small`` (prbench's default) or ``paper`` (the published network and optimiser).
        folds: k of the k-fold over users (``--data`` mode only).
        steps: optimisation steps per network.
        batch_users: users (episodes) per step.
        context_posts: most preferred posts in a context (``--data`` mode).
        negatives: dispreferred posts of other users in a context (``--data`` mode).
        context_pairs: most labelled pairs in a context (``--train`` mode).
        arch: ``small`` (prbench's network) or ``tnp`` (GPO's, see
            :mod:`prbench_plugin_gpo.network`).
        d_model, layers, heads, dim_feedforward: network shape.
        mask: ``target-self`` or ``context-only`` (how targets attend).
        optimizer: ``adamw`` or ``adam``.
        lr, weight_decay: optimiser settings.
        schedule: ``constant`` or ``cosine`` (decay to 0 over ``steps``).
        seed: seeds folds, initial weights and every draw.
        embedder: ``sentence`` or ``causal-lm-mean``.
        model: the embedding model (alias, hub id or local folder).
        encoder: the ``sentence`` embedder's kind (``transformers-mean``, ``sentence-transformers``,
            ``auto``).
        revision: hub revision of the embedding model.
        max_length: truncation in tokens (``None``: the model's limit).
        trust_remote_code: run code shipped with the embedding model.
        embed_dtype: weights dtype of the ``causal-lm-mean`` embedder.
    """

    config: Literal["small", "paper"] = "small"
    folds: int = 5
    steps: int = 300
    batch_users: int = 8
    context_posts: int = 10
    negatives: int = 10
    context_pairs: int = 10
    arch: Literal["small", "tnp"] = "small"
    d_model: int = 64
    layers: int = 2
    heads: int = 4
    dim_feedforward: int = 128
    mask: Literal["target-self", "context-only"] = "target-self"
    optimizer: Literal["adamw", "adam"] = "adamw"
    lr: float = 1e-3
    weight_decay: float = 0.01
    schedule: Literal["constant", "cosine"] = "constant"
    seed: int = 0
    embedder: Literal["sentence", "causal-lm-mean"] = "sentence"
    model: str = "minilm"
    encoder: str = "transformers-mean"
    revision: str | None = None
    max_length: int | None = 256
    trust_remote_code: bool = False
    embed_dtype: Literal["float32", "bfloat16", "float16"] = "float32"

    def __post_init__(self) -> None:
        if self.config not in PRESETS:
            raise ValueError(f"config must be one of {tuple(PRESETS)}, got {self.config!r}")
        if self.config == "paper":
            wrong = [f"{k}={getattr(self, k)!r} (paper: {v!r})"
                     for k, v in PRESETS["paper"].items() if getattr(self, k) != v]
            if wrong:
                raise ValueError("config=paper fixes the published settings; drop "
                                 + ", ".join(wrong) + " or use config=small")
        for name in ("steps", "batch_users", "d_model", "layers", "heads", "dim_feedforward"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.context_posts < 0 or self.negatives < 0 or self.context_pairs < 1:
            raise ValueError("context_posts and negatives must be >= 0, context_pairs >= 1")
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of heads ({self.heads})")
        choices = {"arch": ("small", "tnp"), "mask": ("target-self", "context-only"),
                   "optimizer": ("adamw", "adam"),
                   "schedule": ("constant", "cosine"), "embedder": EMBEDDERS,
                   "embed_dtype": EMBED_DTYPES}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.lr <= 0 or self.weight_decay < 0:
            raise ValueError("lr must be > 0 and weight_decay >= 0")


def make_config(config: str = "small", **given: Any) -> TrainConfig:
    """A :class:`TrainConfig` with the named configuration's settings and the ``given`` ones.

    ``given`` values of ``None`` are ignored (flags left unset), so ``max_length`` keeps the
    config's value unless a number is given. With ``config=paper`` a given
    value that differs from the paper's is refused (``ValueError``).
    """
    if config not in PRESETS:
        raise ValueError(f"config must be one of {tuple(PRESETS)}, got {config!r}")
    values = {**PRESETS[config], **{k: v for k, v in given.items() if v is not None}}
    return TrainConfig(config=config, **values)  # type: ignore[arg-type]


def make_encoder(config: TrainConfig, *, device: str = "auto", batch_size: int = 32,
                 cache: bool = True, cache_dir: str | None = None) -> Any:
    """The embedder a config names: ``encode(texts) -> float32 array`` and ``describe()``.

    ``sentence`` is prbench's :class:`~prbench.profiles.embed.Encoder`; ``causal-lm-mean`` is
    :class:`~prbench_plugin_gpo.embedder.CausalLMMeanEncoder`. Both go through prbench's on-disk
    embedding cache.
    """
    if config.embedder == "causal-lm-mean":
        from prbench_plugin_gpo.embedder import CausalLMMeanEncoder

        return CausalLMMeanEncoder(
            config.model, revision=config.revision, max_length=config.max_length,
            trust_remote_code=config.trust_remote_code, dtype=config.embed_dtype,
            device=device, batch_size=batch_size, cache=cache, cache_dir=cache_dir,
        )
    from prbench.api import Encoder, EncoderSpec

    spec = EncoderSpec(model=config.model, encoder=config.encoder,  # type: ignore[arg-type]
                       revision=config.revision, max_length=config.max_length,
                       trust_remote_code=config.trust_remote_code)
    return Encoder(spec, device=device, batch_size=batch_size, cache=cache, cache_dir=cache_dir)
