"""The plugin module named by the entry point: hook implementations only, nothing heavy.

It shows the three things a plugin usually registers: a scorer, a profile builder and a folder of
lm-eval task YAMLs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from prbench.api import ComponentRegister, TaskDirRegister, hookimpl
from prbench_plugin_template.profile import LastPostsOptions


@dataclasses.dataclass(frozen=True)
class QuestionOverlapOptions:
    """Options of ``question-overlap`` (every field is a validated option)."""

    min_word_length: int = dataclasses.field(
        default=4, metadata={"help": "ignore words shorter than this", "ge": 1, "le": 1000}
    )
    use_profile: bool = dataclasses.field(
        default=False, metadata={"help": "also count words of the profile shown to the RM"}
    )


@hookimpl
def register_scorers(register: ComponentRegister) -> None:
    """Register this plugin's scorer; the factory is imported only when it is used."""
    register(
        "question-overlap",
        "prbench_plugin_template.scorer:QuestionOverlapScorer",
        options=QuestionOverlapOptions,
        description="share of the question's words the answer repeats (template plugin)",
    )


@hookimpl
def register_profile_builders(register: ComponentRegister) -> None:
    """Register the worked-example profile builder (see ``profile.py``)."""
    register(
        "last-posts",
        "prbench_plugin_template.profile:LastPostsBuilder",
        options=LastPostsOptions,
        description="the user's last k posts (template plugin's example builder)",
    )


@hookimpl
def register_task_dirs(register: TaskDirRegister) -> None:
    """Register the plugin's task folder (shipped inside the package, so it is in the wheel)."""
    register(
        str(Path(__file__).resolve().parent / "tasks"),
        description="template_sample_last_posts: the sample with the last-posts profile",
    )
