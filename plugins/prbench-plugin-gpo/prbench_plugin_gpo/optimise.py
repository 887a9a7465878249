"""Building, optimising and scoring the loss of a GPO network (shared by both training modes).

The loss depends on the architecture:

- ``small``: Bradley-Terry on each (chosen, rejected) target pair,
  ``-log sigmoid(s(chosen) - s(rejected))``, averaged over the pairs;
- ``tnp`` (``config=paper``): GPO's objective. The two means of a pair are softmax-normalised into
  preference values, and the loss is minus the Gaussian log-likelihood of the pair's labels
  (chosen 1, rejected 0) under ``Normal(value, std)``, summed over an episode's targets and
  averaged over the episodes -- as GPO's ``forward`` does over a question's options.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from prbench_plugin_gpo.config import TrainConfig
from prbench_plugin_gpo.context import rng_for
from prbench_plugin_gpo.network import NetConfig, build_network

if TYPE_CHECKING:
    import numpy as np

Embed = Callable[[Sequence[str]], "np.ndarray"]


def net_config(config: TrainConfig, dim: int) -> NetConfig:
    """The network shape a training config names, for inputs of ``dim`` values."""
    return NetConfig(dim, config.d_model, config.layers, config.heads, config.mask,
                     arch=config.arch, dim_feedforward=config.dim_feedforward)


def optimiser(net: Any, config: TrainConfig) -> tuple[Any, Any]:
    """The config's optimiser and learning-rate schedule (``None`` for a constant rate)."""
    import torch

    if config.optimizer == "adam":
        opt = torch.optim.Adam(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    else:
        opt = torch.optim.AdamW(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    schedule = (torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=config.steps)
                if config.schedule == "cosine" else None)
    return opt, schedule


def new_network(config: TrainConfig, dim: int, fold: int, device: str) -> Any:
    """A freshly initialised network for one fold (seeded by the config's seed and the fold)."""
    import torch

    torch.manual_seed(int(rng_for(config.seed, "init", fold).integers(2**31)))
    net = build_network(net_config(config, dim))
    return net.to(device).train()


def fit(
    net: Any, config: TrainConfig, step_loss: Callable[[], Any], *, desc: str, progress: bool
) -> tuple[dict[str, Any], list[float]]:
    """Run ``config.steps`` optimiser steps on the loss ``step_loss()`` draws each step.

    Args:
        net: the network being trained.
        config: the training settings (optimiser, schedule, steps).
        step_loss: samples one batch of episodes and returns its loss tensor.
        desc: the progress bar's label.
        progress: show the progress bar.

    Returns:
        The trained weights (on the CPU) and the loss of every step.
    """
    from prbench.api import progress_bar

    opt, schedule = optimiser(net, config)
    losses: list[float] = []
    bar = progress_bar(config.steps, desc=desc, unit="step", enabled=progress)
    try:
        for _ in range(config.steps):
            loss = step_loss()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if schedule is not None:
                schedule.step()
            losses.append(float(loss.detach()))
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
    finally:
        bar.close()
    return {k: v.detach().cpu().clone() for k, v in net.state_dict().items()}, losses


def pair_loss(net: Any, batch: Sequence[Any], n_pairs: Any, config: TrainConfig) -> Any:
    """The training loss of one batch whose targets are (chosen, rejected) pairs, in that order.

    Args:
        net: the network.
        batch: ``collate(...)``'s tensors.
        n_pairs: per episode, how many of its target pairs are real (the rest is padding).
        config: the training settings (the architecture picks the objective).
    """
    import torch

    if config.arch == "tnp":
        mean, std = net.mean_std(*batch)
    else:
        mean = net(*batch)
    chosen, rejected = mean[:, 0::2], mean[:, 1::2]
    valid = torch.arange(chosen.shape[1], device=chosen.device)[None, :] < n_pairs[:, None]
    if config.arch != "tnp":
        return torch.nn.functional.softplus(rejected - chosen)[valid].mean()
    value = torch.softmax(torch.stack([chosen, rejected], dim=-1), dim=-1)
    labels = torch.tensor([1.0, 0.0], device=mean.device).expand_as(value)
    spread = torch.stack([std[:, 0::2], std[:, 1::2]], dim=-1)
    log_prob = torch.distributions.Normal(value, spread).log_prob(labels).sum(-1)
    return -(log_prob * valid).sum(1).mean()
