"""The GPO network: a transformer neural process over frozen embeddings (torch imported lazily).

Input tokens are the context points (embedding + label embedding: preferred / dispreferred) and
the target options (embedding + the "target" label). Context tokens attend to the valid context
only. Targets never attend to each other, so a target's score never depends on the other targets in
the batch (scores are batch-independent, as in GPO). Two masks for the targets:

- ``context-only`` (GPO's published mask, ``config=paper``): a target attends to the context and
  nothing else; its own embedding reaches its output through the residual stream only. A target
  of an episode with no context at all (a case the paper never meets) attends to itself, so the
  softmax is defined;
- ``target-self`` (prbench's small default): a target attends to the context and to itself.

Two architectures (``NetConfig.arch``):

- ``small`` (prbench's default): each token is a projection of its embedding (linear, GELU,
  linear) plus a learned label embedding (preferred / dispreferred / target); a linear head reads
  one logit per target: the user's predicted preference for that option.
- ``tnp`` (``config=paper``, the network of GPO's ``configs/gpo.yaml`` and its transformer neural
  process): each token is an MLP of ``emb_depth`` (4) linear layers with ReLU between them over
  the concatenation ``[x; y]`` of the embedding and the preference value (1 preferred, 0
  dispreferred; 0 for a target, as GPO feeds targets), a transformer encoder with feed-forward
  width ``dim_feedforward`` (128), and an MLP head (linear, ReLU, linear) that outputs a mean and
  a standard deviation per target (``std = exp``). The score of a target is its mean.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np
    import torch


@dataclasses.dataclass(frozen=True)
class NetConfig:
    """Shape of the network (stored in the checkpoint).

    Attributes:
        dim_in: embedding size of the inputs.
        d_model: width of the transformer.
        layers: transformer encoder layers.
        heads: attention heads.
        mask: ``target-self`` or ``context-only`` (see the module docstring).
        arch: ``small`` or ``tnp`` (see the module docstring).
        dim_feedforward: the transformer's feed-forward width.
        emb_depth: linear layers of the ``tnp`` input MLP.
    """

    dim_in: int
    d_model: int = 64
    layers: int = 2
    heads: int = 4
    mask: Literal["target-self", "context-only"] = "target-self"
    arch: Literal["small", "tnp"] = "small"
    dim_feedforward: int = 128
    emb_depth: int = 4


#: The target masks the network knows.
MASKS = ("target-self", "context-only")
#: The architectures the network knows.
ARCHS = ("small", "tnp")


def attention_allowed(ctx_valid: torch.Tensor, targets: int, mask: str) -> torch.Tensor:
    """``allowed[b, i, j]``: whether token ``i`` may attend key ``j`` (context first, then targets).

    Context tokens see the valid context (and themselves, so a padded row stays defined); a
    target sees the valid context, plus itself under ``target-self`` or when its episode has no
    valid context. No token ever sees a target other than itself.
    """
    import torch

    b, c = ctx_valid.shape
    n = c + targets
    device = ctx_valid.device
    key_ok = torch.cat([ctx_valid, torch.zeros(b, targets, dtype=torch.bool, device=device)], 1)
    allowed = key_ok[:, None, :].expand(b, n, n).clone()
    eye = torch.eye(n, dtype=torch.bool, device=device)[None].expand(b, n, n)
    if mask == "target-self":
        return allowed | eye
    self_ok = torch.zeros(b, n, dtype=torch.bool, device=device)
    self_ok[:, :c] = True  # context rows (padding included) keep themselves
    self_ok[:, c:] = ~ctx_valid.any(dim=1, keepdim=True)  # targets only without any context
    return allowed | (eye & self_ok[:, :, None])


def parameter_count(net: torch.nn.Module) -> int:
    """Trainable parameters of a network."""
    return sum(p.numel() for p in net.parameters() if p.requires_grad)


def build_network(config: NetConfig) -> torch.nn.Module:
    """A fresh network of the given shape (parameters from the current torch seed).

    ``forward(ctx_x, ctx_y, ctx_valid, tgt_x)`` returns one score per target; the ``tnp``
    network also has ``mean_std(...)`` (the mean and the standard deviation per target).

    Raises:
        ValueError: an unknown mask or architecture.
    """
    import torch
    from torch import nn

    if config.mask not in MASKS:
        raise ValueError(f"mask must be one of {MASKS}, got {config.mask!r}")
    if config.arch not in ARCHS:
        raise ValueError(f"arch must be one of {ARCHS}, got {config.arch!r}")

    def encoder() -> nn.Module:
        layer = nn.TransformerEncoderLayer(
            config.d_model, config.heads, config.dim_feedforward, dropout=0.0, batch_first=True
        )
        return nn.TransformerEncoder(layer, config.layers, enable_nested_tensor=False)

    def attend(tokens: torch.Tensor, ctx_valid: torch.Tensor, t: int,
               net: nn.Module) -> torch.Tensor:
        b, n = tokens.shape[0], tokens.shape[1]
        allowed = attention_allowed(ctx_valid, t, config.mask)
        mask = torch.zeros(b, n, n, device=tokens.device).masked_fill(~allowed, float("-inf"))
        mask = mask.repeat_interleave(config.heads, dim=0)
        return net.encoder(tokens, mask=mask)[:, n - t:]

    class GPONetwork(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Sequential(
                nn.Linear(config.dim_in, config.d_model), nn.GELU(),
                nn.Linear(config.d_model, config.d_model),
            )
            self.label = nn.Embedding(3, config.d_model)
            self.encoder = encoder()
            self.head = nn.Linear(config.d_model, 1)

        def forward(
            self, ctx_x: torch.Tensor, ctx_y: torch.Tensor, ctx_valid: torch.Tensor,
            tgt_x: torch.Tensor,
        ) -> torch.Tensor:
            b, t = tgt_x.shape[0], tgt_x.shape[1]
            tokens = torch.cat([
                self.proj(ctx_x) + self.label(ctx_y),
                self.proj(tgt_x) + self.label.weight[2].expand(b, t, -1),
            ], dim=1)
            return self.head(attend(tokens, ctx_valid, t, self)).squeeze(-1)

    class TNPNetwork(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            width = config.d_model
            layers: list[nn.Module] = [nn.Linear(config.dim_in + 1, width), nn.ReLU()]
            for _ in range(max(0, config.emb_depth - 2)):
                layers += [nn.Linear(width, width), nn.ReLU()]
            layers.append(nn.Linear(width, width))
            self.embedder = nn.Sequential(*layers)
            self.encoder = encoder()
            self.predictor = nn.Sequential(
                nn.Linear(width, config.dim_feedforward), nn.ReLU(),
                nn.Linear(config.dim_feedforward, 2),
            )

        def mean_std(
            self, ctx_x: torch.Tensor, ctx_y: torch.Tensor, ctx_valid: torch.Tensor,
            tgt_x: torch.Tensor,
        ) -> tuple[torch.Tensor, torch.Tensor]:
            t = tgt_x.shape[1]
            ctx_value = (ctx_y == 1).to(ctx_x.dtype)[..., None]  # preferred 1, dispreferred 0
            tokens = self.embedder(torch.cat([
                torch.cat([ctx_x, ctx_value], dim=-1),
                torch.cat([tgt_x, torch.zeros_like(tgt_x[..., :1])], dim=-1),
            ], dim=1))
            out = self.predictor(attend(tokens, ctx_valid, t, self))
            return out[..., 0], torch.exp(out[..., 1])

        def forward(
            self, ctx_x: torch.Tensor, ctx_y: torch.Tensor, ctx_valid: torch.Tensor,
            tgt_x: torch.Tensor,
        ) -> torch.Tensor:
            return self.mean_std(ctx_x, ctx_y, ctx_valid, tgt_x)[0]

    return TNPNetwork() if config.arch == "tnp" else GPONetwork()


@dataclasses.dataclass
class Episode:
    """One user's context and targets, as rows of an embedding matrix.

    Attributes:
        ctx: row indices of the context points.
        ctx_labels: their labels (1 preferred, 0 dispreferred).
        targets: row indices of the target options.
    """

    ctx: list[int]
    ctx_labels: list[int]
    targets: list[int]


def collate(
    episodes: Sequence[Episode], vectors: np.ndarray, device: Any
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pad episodes into ``(ctx_x, ctx_y, ctx_valid, tgt_x)`` tensors (targets all same count)."""
    import numpy as np
    import torch

    dim = vectors.shape[1]
    c = max(1, max(len(e.ctx) for e in episodes))
    t = max(len(e.targets) for e in episodes)
    ctx_x = np.zeros((len(episodes), c, dim), dtype=np.float32)
    ctx_y = np.zeros((len(episodes), c), dtype=np.int64)
    valid = np.zeros((len(episodes), c), dtype=bool)
    tgt_x = np.zeros((len(episodes), t, dim), dtype=np.float32)
    for i, e in enumerate(episodes):
        if e.ctx:
            ctx_x[i, : len(e.ctx)] = vectors[e.ctx]
            ctx_y[i, : len(e.ctx)] = e.ctx_labels
            valid[i, : len(e.ctx)] = True
        tgt_x[i, : len(e.targets)] = vectors[e.targets]
    return (torch.from_numpy(ctx_x).to(device), torch.from_numpy(ctx_y).to(device),
            torch.from_numpy(valid).to(device), torch.from_numpy(tgt_x).to(device))
