"""Hook implementation and options of the ``gpo`` scorer (nothing heavy is imported here)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from prbench import hookimpl
from prbench.hookspecs import ComponentRegister


@dataclasses.dataclass(frozen=True)
class GPOOptions:
    """Options of ``gpo``: which trained checkpoint to use and how to run it.

    The embedder and the model's shape come from the checkpoint (``prbench-gpo train``); only
    run-time settings are options here.
    """

    checkpoint: str = dataclasses.field(
        default="", metadata={"help": "the .pt file written by `prbench-gpo train` (required)"}
    )
    unseen: Literal["ensemble", "error"] = dataclasses.field(
        default="ensemble",
        metadata={"help": "a record the checkpoint never saw: average the fold models "
                          "('ensemble', none trained on it) or raise ('error')"},
    )
    device: str = dataclasses.field(
        default="auto", metadata={"help": "auto | cpu | cuda | cuda:N (embedder and network)"}
    )
    batch_size: int = dataclasses.field(
        default=64, metadata={"help": "requests per forward pass of the network"}
    )
    embed_batch_size: int = dataclasses.field(
        default=32, metadata={"help": "texts per forward pass of the embedder"}
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
        if self.batch_size < 1 or self.embed_batch_size < 1:
            raise ValueError("batch_size and embed_batch_size must be at least 1")


@hookimpl
def register_scorers(register: ComponentRegister) -> None:
    """Register the GPO scorer; torch and the embedder load only when it is built."""
    register(
        "gpo",
        "prbench_plugin_gpo.scorer:GPOScorer",
        options=GPOOptions,
        tags=("pointwise", "trained"),
        description="Group Preference Optimization: a neural process over embeddings of the "
                    "user's posts, meta-trained with k-fold over users (prbench-gpo train)",
    )
