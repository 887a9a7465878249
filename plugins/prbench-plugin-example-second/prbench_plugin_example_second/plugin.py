"""Hook implementations of the second example plugin (cheap: nothing is built here)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from prbench.api import ComponentRegister, TaskDirRegister, hookimpl


@dataclasses.dataclass(frozen=True)
class ProfileVocabularyOptions:
    """Options of ``profile-vocabulary``."""

    min_word_length: int = dataclasses.field(
        default=5, metadata={"help": "ignore words shorter than this (drops most function words)",
                             "ge": 1, "le": 1000}
    )


@hookimpl
def register_scorers(register: ComponentRegister) -> None:
    """Register ``profile-vocabulary``."""
    register(
        "profile-vocabulary",
        "prbench_plugin_example_second.scorer:ProfileVocabularyScorer",
        options=ProfileVocabularyOptions,
        description="share of the answer's words found in the shown profile (example plugin)",
    )


@hookimpl
def register_task_dirs(register: TaskDirRegister) -> None:
    """Register the plugin's task folder."""
    register(
        str(Path(__file__).resolve().parent / "tasks"),
        description="example_second_sample_all_posts: the sample with every profile post",
    )
