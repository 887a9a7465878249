"""The ``skywork`` scorer: ``hf-classifier`` with a checkpoint's recommended settings."""

from __future__ import annotations

from typing import Any

from prbench.api import HFClassifierScorer, torch_device
from prbench_plugin_skywork.plugin import FROM_VARIANT, SkyworkOptions
from prbench_plugin_skywork.variants import flash_attention_available


class SkyworkScorer(HFClassifierScorer):
    """A Skywork reward model: ``logits[0]`` at the last token of the chat, one BOS at most.

    All the scoring machinery (chat template, BOS policy, truncation, batching, prefix sharing)
    is ``hf-classifier``'s; this class only resolves the variant into its options and records the
    variant in :meth:`describe`.

    Args:
        options: the validated ``skywork`` options.
    """

    component = "skywork"

    def __init__(self, options: SkyworkOptions) -> None:
        self.skywork_options = options
        self.variant = options.spec
        flash = flash_attention_available(torch_device(options.device))
        super().__init__(options.resolved(flash_attention=flash))

    def describe(self) -> dict[str, Any]:
        """``hf-classifier``'s description plus the variant and which settings it supplied."""
        out = super().describe()
        given = self.skywork_options
        defaults = SkyworkOptions.__dataclass_fields__
        out["variant"] = {
            **self.variant.as_dict(),
            "from_variant": [n for n in FROM_VARIANT if getattr(given, n) == defaults[n].default],
        }
        return out
