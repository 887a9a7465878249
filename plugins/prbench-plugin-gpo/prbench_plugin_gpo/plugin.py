"""Hook implementation and options of the ``gpo`` scorer (nothing heavy is imported here)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from prbench.api import ComponentRegister, hookimpl


@dataclasses.dataclass(frozen=True)
class GPOOptions:
    """Options of ``gpo``: the trained checkpoint, the evaluated users' context, how to run.

    The embedder, the model's shape and its training (``config``) come from the checkpoint
    (``prbench-gpo train``).
    """

    checkpoint: str = dataclasses.field(
        default="", metadata={"help": "the .pt file written by `prbench-gpo train` (required)"}
    )
    unseen: Literal["ensemble", "error"] = dataclasses.field(
        default="ensemble",
        metadata={"help": "a record the checkpoint never saw: average the fold models "
                          "('ensemble', none trained on it) or raise ('error')"},
    )
    config: Literal["any", "small", "paper"] = dataclasses.field(
        default="any",
        metadata={"help": "the training config the checkpoint must have (`paper`: refuse a "
                          "checkpoint not trained with the published settings); any = no check"},
    )
    preferences_data: str | None = dataclasses.field(
        default=None,
        metadata={"help": "the evaluated records with their users' labelled `preferences` (file "
                          "or folder): each user's context, for a checkpoint trained with --train"},
    )
    allow_user_overlap: bool = dataclasses.field(
        default=False,
        metadata={"help": "score users that were among the checkpoint's training users (refused "
                          "by default; results say so)"},
    )
    trust_remote_code: bool = dataclasses.field(
        default=False,
        metadata={"help": "allow a checkpoint whose embedder runs code shipped with its model"},
    )
    context_swap: bool = dataclasses.field(
        default=True,
        metadata={"help": "report the context-swap diagnostic (each pair rescored with another "
                          "user's context) in stats and the summary"},
    )
    swap_seed: int = dataclasses.field(
        default=0, metadata={"help": "seed of the context-swap derangement and its bootstrap",
                             "ge": 0, "le": 2**63 - 1}
    )
    swap_resamples: int = dataclasses.field(
        default=2000, metadata={"help": "bootstrap resamples of the context-swap interval",
                                "ge": 1, "le": 10_000_000}
    )
    device: str = dataclasses.field(
        default="auto", metadata={"help": "auto | cpu | cuda | cuda:N (embedder and network)"}
    )
    batch_size: int = dataclasses.field(
        default=64, metadata={"help": "requests per forward pass of the network", "ge": 1,
                              "le": 1_048_576}
    )
    embed_batch_size: int = dataclasses.field(
        default=32, metadata={"help": "texts per forward pass of the embedder", "ge": 1,
                              "le": 1_048_576}
    )
    embed_cache: bool = dataclasses.field(
        default=True, metadata={"help": "read/write the on-disk embedding cache"}
    )
    embed_cache_dir: str | None = dataclasses.field(
        default=None, metadata={"help": "embedding cache folder; none = the prbench cache"}
    )

    def __post_init__(self) -> None:
        if not self.checkpoint:
            raise ValueError(
                "gpo needs checkpoint=<file.pt> (train one with `prbench-gpo train --data ... "
                "--out file.pt`)"
            )
        if not Path(self.checkpoint).expanduser().is_file():
            raise ValueError(f"gpo: checkpoint {self.checkpoint!r} does not exist")
        if self.batch_size < 1 or self.embed_batch_size < 1 or self.swap_resamples < 1:
            raise ValueError("batch_size, embed_batch_size and swap_resamples must be at least 1")


@hookimpl
def register_scorers(register: ComponentRegister) -> None:
    """Register the GPO scorer; torch and the embedder load only when it is built."""
    register(
        "gpo",
        "prbench_plugin_gpo.scorer:GPOScorer",
        options=GPOOptions,
        tags=("pointwise", "trained"),
        description="Group Preference Optimization: a neural process over embeddings of a "
                    "user's labelled pairs (trained on other users' preferences) or posts "
                    "(k-fold over users); prbench-gpo train",
    )
