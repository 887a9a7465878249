"""The plugin module named by the entry point: hook implementations only, nothing heavy."""

from __future__ import annotations

import dataclasses

from prbench import hookimpl
from prbench.hookspecs import ComponentRegister


@dataclasses.dataclass(frozen=True)
class QuestionOverlapOptions:
    """Options of ``question-overlap`` (every field is a validated option)."""

    min_word_length: int = dataclasses.field(
        default=4, metadata={"help": "ignore words shorter than this"}
    )
    use_profile: bool = dataclasses.field(
        default=False, metadata={"help": "also count words of the profile shown to the RM"}
    )


@hookimpl
def register_scorers(register: ComponentRegister) -> None:
    """Register the template's scorer; the factory is imported only when it is used."""
    register(
        "question-overlap",
        "prbench_plugin_template.scorer:QuestionOverlapScorer",
        options=QuestionOverlapOptions,
        description="share of the question's words the answer repeats (template plugin)",
    )
