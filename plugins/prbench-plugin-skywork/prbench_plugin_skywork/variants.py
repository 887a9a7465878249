"""The recommended settings of every supported Skywork reward-model checkpoint.

Each entry is what the model card asks for: the hub id, the dtype the weights were trained and
released in (bf16), the attention kernel (the cards load ``flash_attention_2``; where the
``flash_attn`` package is not installed or there is no GPU, Gemma-2 falls back to ``eager``,
because SDPA does not apply its logit soft-capping, and the others to ``sdpa``), the longest input
and whether a system turn may be used. Revisions are ``main``: a hub commit cannot be looked up
offline, so no sha is invented here; the results manifest records the commit actually read from
the local hub cache (``describe()["resolved"]`` / ``model.commit``) — pass ``revision=<sha>`` to
pin one.

BOS: every Llama/Gemma checkpoint must see exactly one BOS. v0.1's chat template writes one, so
tokenising the rendered text with the tokenizer's special tokens doubled it; v0.2's card says its
template no longer writes the BOS and the tokenizer adds it, so there is one. V2's card strips
the BOS the rendered template starts with before tokenising, so the tokenizer's own BOS is the
only one (Llama) or there is none (Qwen3). prbench's chat encoder gives that one BOS for every
generation with ``bos=auto`` — strip every leading BOS of the rendered template, then add one back
only when the tokenizer or template uses one.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class SkyworkVariant:
    """One checkpoint and its recommended settings.

    Attributes:
        name: the ``variant=`` value.
        hub_id: the Hugging Face hub repository.
        generation: ``v0.1``, ``v0.2`` or ``v2``.
        base: the base model family (``llama``, ``gemma2``, ``qwen3``).
        dtype: the recommended weights/compute dtype.
        attn_implementation: the attention kernel without ``flash_attn`` (or without a GPU):
            ``sdpa``, or ``eager`` for Gemma-2; ``flash_attention_2`` is used where it works.
        max_length: the longest input, in tokens.
        system_prompt: whether a system turn may be used (V2 was trained without one).
        revision: the hub revision (``main``; the manifest records the commit read).
        bos: how the BOS token is handled, in words (recorded in results).
    """

    name: str
    hub_id: str
    generation: str
    base: str
    dtype: str = "bfloat16"
    attn_implementation: str = "sdpa"
    max_length: int = 16384
    system_prompt: bool = False
    revision: str = "main"
    bos: str = "strip the template's leading BOS; the tokenizer's own BOS (if any) is the only one"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form for manifests."""
        return dataclasses.asdict(self)


_V01_BOS = "exactly one BOS (the template writes one; a second one from the tokenizer is dropped)"
_V02_BOS = "exactly one BOS (the template no longer writes one; the tokenizer adds it)"
_V2_QWEN_BOS = "none (Qwen3 has no BOS; a leading one in the rendered template would be stripped)"


def _v2(name: str, repo: str, base: str, **kw: Any) -> SkyworkVariant:
    return SkyworkVariant(name, f"Skywork/{repo}", "v2", base, **kw)


VARIANTS: dict[str, SkyworkVariant] = {
    v.name: v
    for v in (
        SkyworkVariant(
            "v0.1-llama-3.1-8b", "Skywork/Skywork-Reward-Llama-3.1-8B", "v0.1", "llama",
            max_length=8192, system_prompt=True, bos=_V01_BOS,
        ),
        SkyworkVariant(
            "v0.1-gemma-2-27b", "Skywork/Skywork-Reward-Gemma-2-27B", "v0.1", "gemma2",
            attn_implementation="eager", max_length=8192, system_prompt=True, bos=_V01_BOS,
        ),
        SkyworkVariant(
            "v0.2-llama-3.1-8b", "Skywork/Skywork-Reward-Llama-3.1-8B-v0.2", "v0.2", "llama",
            max_length=8192, system_prompt=True, bos=_V02_BOS,
        ),
        SkyworkVariant(
            "v0.2-gemma-2-27b", "Skywork/Skywork-Reward-Gemma-2-27B-v0.2", "v0.2", "gemma2",
            attn_implementation="eager", max_length=8192, system_prompt=True, bos=_V02_BOS,
        ),
        _v2("v2-qwen3-0.6b", "Skywork-Reward-V2-Qwen3-0.6B", "qwen3", bos=_V2_QWEN_BOS),
        _v2("v2-qwen3-1.7b", "Skywork-Reward-V2-Qwen3-1.7B", "qwen3", bos=_V2_QWEN_BOS),
        _v2("v2-qwen3-4b", "Skywork-Reward-V2-Qwen3-4B", "qwen3", bos=_V2_QWEN_BOS),
        _v2("v2-qwen3-8b", "Skywork-Reward-V2-Qwen3-8B", "qwen3", bos=_V2_QWEN_BOS),
        _v2("v2-llama-3.2-1b", "Skywork-Reward-V2-Llama-3.2-1B", "llama"),
        _v2("v2-llama-3.2-3b", "Skywork-Reward-V2-Llama-3.2-3B", "llama"),
        _v2("v2-llama-3.1-8b", "Skywork-Reward-V2-Llama-3.1-8B", "llama"),
        _v2("v2-llama-3.1-8b-40m", "Skywork-Reward-V2-Llama-3.1-8B-40M", "llama"),
    )
}


def flash_attention_available(device: Any) -> bool:
    """Whether ``flash_attention_2`` can run: the ``flash_attn`` package and a CUDA device."""
    import importlib.util

    return getattr(device, "type", str(device)) == "cuda" and (
        importlib.util.find_spec("flash_attn") is not None
    )
