"""Hook implementations and options of ``internlm2-reward`` (no heavy imports here)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from prbench.api import ComponentRegister, ProfileRenderOptions, hookimpl

#: The public checkpoints (README); any folder exposing the same remote API works too.
CHECKPOINTS = (
    "internlm/internlm2-1_8b-reward",
    "internlm/internlm2-7b-reward",
    "internlm/internlm2-20b-reward",
)

REMOTE_CODE_REFUSAL = (
    "InternLM2-Reward computes its score in Python code shipped with the checkpoint "
    "(modeling_internlm2.py: the reward token, the value head and get_score), which transformers "
    "can only run with trust_remote_code. prbench never runs downloaded code on its own: read that "
    "file, then pass trust_remote_code=true (pin revision=<commit> so the code cannot change)"
)


def _opt(default: object, text: str, **bounds: int) -> object:
    """An option's field: its default, its help and its range (``ge``, ``le``), if numeric."""
    return dataclasses.field(default=default, metadata={"help": text, **bounds})


@dataclasses.dataclass(frozen=True)
class InternLM2RewardOptions(ProfileRenderOptions):
    """Options of ``internlm2-reward``.

    The profile placement (``profile_position``, ``user_format``, ``system_format``,
    ``input_format``) is shared with ``hf-classifier`` (``ProfileRenderOptions``); the template
    and BOS are the checkpoint's own.
    """

    pretrained: str = _opt(CHECKPOINTS[0], "hub id (" + ", ".join(CHECKPOINTS) + ") or folder")
    revision: str = _opt("main", "hub revision (branch, tag or commit); ignored for folders")
    trust_remote_code: bool = _opt(
        False, "REQUIRED true: the score comes from the model's own code (read it first)"
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = _opt(
        "auto", "weights dtype; auto = float16 on GPU (the model card's), float32 on CPU"
    )
    call: Literal["forward", "get_score"] = _opt(
        "forward", "forward: batched, each chat scored as get_score would; get_score: the "
        "checkpoint's own method, one chat per call (the authors' exact path)"
    )
    device: str = _opt("auto", "cpu, cuda, cuda:N or auto")
    max_length: int = _opt(
        8192, "most tokens per chat (reward token included); the profile is cut first", ge=8,
        le=1_048_576,
    )
    batch_size: int = _opt(16, "most chats per forward call (call=forward)", ge=1, le=1_048_576)
    batch_tokens: int = _opt(32768, "most padded tokens per forward call (halved on OOM)", ge=1,
                             le=2**31 - 1)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.trust_remote_code:
            raise ValueError(REMOTE_CODE_REFUSAL)
        if self.batch_size < 1 or self.batch_tokens < 1:
            raise ValueError("batch_size and batch_tokens must be at least 1")
        if self.max_length < 8:
            raise ValueError(f"max_length must be at least 8, got {self.max_length}")


@hookimpl
def register_scorers(register: ComponentRegister) -> None:
    """Register ``internlm2-reward``; torch and transformers load only when it is built."""
    register(
        "internlm2-reward",
        "prbench_plugin_internlm2.scorer:InternLM2RewardScorer",
        options=InternLM2RewardOptions,
        description="InternLM2-Reward through its remote code (needs trust_remote_code=true)",
        tags=("pointwise", "hf", "remote-code"),
    )
