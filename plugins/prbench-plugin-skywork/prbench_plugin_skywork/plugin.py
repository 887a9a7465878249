"""Hook implementations and options of the ``skywork`` scorer (no heavy imports here)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal

from prbench.api import ComponentRegister, HFClassifierOptions, hookimpl
from prbench_plugin_skywork.variants import VARIANTS, SkyworkVariant

VariantName = Literal[tuple(VARIANTS)]  # type: ignore[valid-type]

#: Options whose default means "the variant's recommended value".
FROM_VARIANT = ("pretrained", "revision", "dtype", "attn_implementation", "max_length")


@dataclasses.dataclass(frozen=True)
class SkyworkOptions(HFClassifierOptions):
    """Options of ``skywork``: a variant plus every ``hf-classifier`` option.

    The variant fills in the hub id, revision, dtype, attention kernel and maximum length; an
    option given explicitly (``pretrained=<local folder>``, ``dtype=float32``, ...) wins.
    """

    variant: VariantName = dataclasses.field(  # type: ignore[valid-type]
        default="", metadata={"help": "checkpoint: " + ", ".join(VARIANTS) + " (required)"}
    )
    pretrained: str = dataclasses.field(
        default="", metadata={"help": "hub id or local folder; default: the variant's hub id"}
    )
    revision: str = dataclasses.field(
        default="", metadata={"help": "hub revision; default: the variant's ('main')"}
    )
    dtype: Literal["variant", "auto", "float32", "bfloat16", "float16"] = dataclasses.field(
        default="variant", metadata={"help": "weights/compute dtype; variant = bfloat16"}
    )
    attn_implementation: Literal["variant", "auto", "eager", "sdpa", "flash_attention_2"] = (
        dataclasses.field(
            default="variant",
            metadata={"help": "attention kernel; variant = flash_attention_2 when flash_attn is "
                      "installed on a GPU, else eager for Gemma-2 and sdpa for the others"},
        )
    )
    max_length: int = dataclasses.field(
        default=0,
        metadata={"help": "most tokens per input; 0 = the variant's (V2 16384, v0.2 8192)",
                  "ge": 0, "le": 1_048_576},
    )
    max_length_zero_is_default: ClassVar[bool] = True

    def __post_init__(self) -> None:
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:
            parent()
        if not self.variant:
            raise ValueError(
                "choose a checkpoint with variant=<one of " + ", ".join(VARIANTS) + ">"
            )
        if self.max_length < 0:
            raise ValueError(f"max_length must be >= 0, got {self.max_length}")
        if self.profile_position == "system" and not VARIANTS[self.variant].system_prompt:
            raise ValueError(
                f"variant {self.variant!r} was trained without a system prompt; "
                "use profile_position=user (the default) or none"
            )

    @property
    def spec(self) -> SkyworkVariant:
        """The chosen variant's recommended settings."""
        return VARIANTS[self.variant]

    def resolved(self, *, flash_attention: bool = False) -> HFClassifierOptions:
        """The ``hf-classifier`` options these resolve to (explicit values over the variant's).

        Args:
            flash_attention: whether ``flash_attention_2`` can run here (the cards' kernel); the
                variant's fallback kernel is used otherwise.
        """
        spec = self.spec
        variant_attn = "flash_attention_2" if flash_attention else spec.attn_implementation
        defaults: dict[str, Any] = {
            "pretrained": self.pretrained or spec.hub_id,
            "revision": self.revision or spec.revision,
            "dtype": spec.dtype if self.dtype == "variant" else self.dtype,
            "attn_implementation": (
                variant_attn
                if self.attn_implementation == "variant"
                else self.attn_implementation
            ),
            "max_length": self.max_length or spec.max_length,
        }
        names = [f.name for f in dataclasses.fields(HFClassifierOptions) if f.init]
        values = {n: defaults[n] if n in defaults else getattr(self, n) for n in names}
        return HFClassifierOptions(**values)


@hookimpl
def register_scorers(register: ComponentRegister) -> None:
    """Register ``skywork``; torch and transformers load only when it is built."""
    register(
        "skywork",
        "prbench_plugin_skywork.scorer:SkyworkScorer",
        options=SkyworkOptions,
        description="Skywork-Reward v0.1/v0.2/V2 (variant=...) with each card's settings",
        tags=("pointwise", "hf"),
    )
