"""The options of the ``hf-classifier`` scorer (also the base of the plugins built on it).

:class:`HFClassifierOptions` adds the model, precision, pooling, batching and prefix-sharing
settings to the chat-rendering options every chat-template scorer shares
(:class:`~prbench.backends.chat_options.ChatRenderOptions`); :func:`check_released_options`
refuses the combinations ``input_format=released`` cannot honour.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal

from prbench.backends.chat_options import ChatRenderOptions, check_max_length


def _opt(default: Any, help_text: str, **bounds: int) -> Any:
    return dataclasses.field(default=default, metadata={"help": help_text, **bounds})


@dataclasses.dataclass(frozen=True)
class HFClassifierOptions(ChatRenderOptions):
    """Options of the ``hf-classifier`` scorer (also the base of plugins built on it).

    The chat-rendering options (profile placement, template, BOS, truncation, ``input_format``)
    are :class:`~prbench.backends.chat_options.ChatRenderOptions`, shared with ``served-rm``.
    """

    pretrained: str = dataclasses.field(
        metadata={"help": "hub id or local folder of an AutoModelForSequenceClassification RM"}
    )
    revision: str = _opt("main", "hub revision (branch, tag or commit); ignored for folders")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = _opt(
        "auto", "weights/compute dtype; auto = float32 on CPU, bfloat16 (or float16) on GPU"
    )
    device: str = _opt("auto", "cpu, cuda, cuda:N or auto (auto: the GPU when there is one, "
                               "else the CPU; cuda without CUDA is an error)")
    attn_implementation: Literal["auto", "eager", "sdpa", "flash_attention_2"] = _opt(
        "auto", "attention kernel (auto = transformers' default, usually sdpa)"
    )
    max_length: int = _opt(
        8192, "most tokens per input; the profile is cut first, never the answer", le=1_048_576
    )
    input_format: Literal["prbench", "released", "released_profile", "released_bon"] = (
        dataclasses.field(default="prbench", kw_only=True, metadata={"help": (
            "prbench (one BOS, profile placement, profile-first truncation), released (the "
            "paper's pointwise script exactly; no profile), released_profile (the released "
            "Best-of-N/PPO user turn: question then 'Post i (Category: c):' posts, with "
            "prbench's tokens and reward) or released_bon (the released BoN/score.py and "
            "PPO reward server exactly: that user turn, their tokens, cut and reward rule)"
        )})
    )
    pooling: Literal["model", "last_token"] = _opt(
        "model", "which token's state is the reward: model (the model's own rule: the last "
        "token that is not the pad token) or last_token (the last token, even a pad token)"
    )
    label_index: int = _opt(0, "which logit is the reward", ge=0, le=1_048_576)
    batch_tokens: int = _opt(0, "padded tokens per batch; 0 = auto (CPU 16384; GPU from memory)",
                             ge=0, le=2**31 - 1)
    max_batch_size: int = _opt(0, "cap on sequences per batch (with packing: per packed row, "
                                  "one row per forward pass); 0 = none", ge=0, le=1_048_576)
    prefix_sharing: Literal["auto", "on", "off"] = _opt(
        "auto", "run a prompt shared by several answers once (auto: where supported and verified)"
    )
    prefix_min_tokens: int = _opt(16, "shortest shared prefix worth sharing", ge=1,
                                  le=1_048_576)
    packing: Literal["auto", "on", "off"] = _opt(
        "auto", "pack the sequences of a forward pass end to end in rows, without padding "
        "(auto: on a GPU where the model supports it; padded batches on a CPU, measured faster "
        "there; on: an error where the model cannot pack)"
    )
    trust_remote_code: bool = _opt(False, "run code shipped with the model (only if you trust it)")
    #: a subclass whose ``max_length=0`` stands for its own default (``skywork``: the variant's)
    max_length_zero_is_default: ClassVar[bool] = False

    def __post_init__(self) -> None:
        """Refuse values and combinations no input can honour, before any model is loaded."""
        super().__post_init__()
        from prbench.model_ref import check_model_name

        check_model_name(self.pretrained, "option 'pretrained'", ValueError)
        if not (self.max_length == 0 and self.max_length_zero_is_default):
            check_max_length(self.max_length)
        if self.label_index < 0:
            raise ValueError(f"label_index must be >= 0, got {self.label_index}")
        if self.batch_tokens < 0 or self.max_batch_size < 0:
            raise ValueError("batch_tokens and max_batch_size must be >= 0")
        check_released_options(self)  # input_format=released or released_bon


#: The ``input_format`` values that run a released script's own encoding and reward rule.
RELEASED_SCRIPT_FORMATS = ("released", "released_bon")


def check_released_options(options: HFClassifierOptions) -> None:
    """Refuse options a released script's format cannot honour (it fixes BOS, label, pooling).

    ``input_format=released`` (``pointwise.py``) and ``released_bon`` (``BoN/score.py``, the PPO
    reward server) tokenise, cut, pool and read the reward the same way.

    Other formats pass unchecked.

    Raises:
        ValueError: ``bos``, ``label_index``, ``truncation``, ``pooling``, ``prefix_sharing=on``
            or ``packing=on`` set with a released script's format.
    """
    if options.input_format not in RELEASED_SCRIPT_FORMATS:
        return
    clashes = []
    if options.truncation != "profile_first":
        clashes.append(f"truncation={options.truncation} (released: the first max_length tokens)")
    if options.pooling != "model":
        clashes.append(f"pooling={options.pooling} (released: the model's own forward)")
    if options.bos != "auto":
        clashes.append(f"bos={options.bos} (released: the template's and tokenizer's BOS as is)")
    if options.label_index != 0:
        clashes.append(
            f"label_index={options.label_index} (released: the logit for one label, "
            "softmax[-1] for more)"
        )
    if options.prefix_sharing == "on":
        clashes.append("prefix_sharing=on (released: the model's own forward)")
    if options.packing == "on":
        clashes.append("packing=on (released: the model's own forward, padded)")
    if clashes:
        raise ValueError(
            f"input_format={options.input_format} cannot be combined with " + "; ".join(clashes)
        )
