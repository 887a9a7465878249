"""Hook implementations and options of ``synthesizeme`` and ``synthesizeme-rating``."""

from __future__ import annotations

import dataclasses
from typing import Literal

from prbench.api import BackendOptions, ComponentRegister, hookimpl

#: What ``protocol=authors`` sets: the reference implementation's settings (its dspy LM calls use
#: temperature 0 and max_tokens 8192, so its retries are greedy too; seed 42; an unshuffled 70/30
#: split; 4 labelled demos; 10 shuffled candidates; both orders at evaluation).
AUTHORS = {
    "fit": "preferences", "split": "temporal", "val_fraction": 0.3, "demos": 4,
    "demo_candidates": 10, "max_new_tokens": 8192, "persona_max_new_tokens": 8192,
    "temperature": 0.0, "retry_temperature": 0.0, "parse_retries": 3, "seed": 42,
    "orders": "both",
}

#: The version of ``protocol=authors``'s fitting procedure (in persona-cache keys and
#: fingerprints): 2 = labelled-only demos carried but not shown, 12-candidate persona search,
#: persona from every carried demo, as the reference's code does.
AUTHORS_FIT_VERSION = 2


@dataclasses.dataclass(frozen=True)
class SynthesizeMeOptions(BackendOptions):
    """Options of ``synthesizeme``: the backend (``BackendOptions``) plus the method's own.

    ``protocol=authors`` sets every option of :data:`AUTHORS` left at its default; an option given
    another value beside it is refused (the run would not be the authors' protocol).
    """

    fit: Literal["auto", "profile", "preferences"] = dataclasses.field(
        default="auto",
        metadata={"help": "persona source: 'profile' (the posts the task shows), 'preferences' "
                          "(the user's labelled pairs, required for every record), 'auto' "
                          "(pairs where the record has them, else the profile)"},
    )
    preferences_data: str = dataclasses.field(
        default="",
        metadata={"help": "records carrying `user_id` + `preferences` (file, folder, "
                          "'preferences_sample'; the task's own data); needed for fit=preferences"},
    )
    orders: Literal["both", "one"] = dataclasses.field(
        default="both",
        metadata={"help": "'both' judges each pair in both orders; 'one' a seeded single order"},
    )
    persona_max_new_tokens: int = dataclasses.field(
        default=512, metadata={"help": "tokens for a persona (and for a bootstrap reasoning)",
                               "ge": 1, "le": 1_048_576}
    )
    demos: int = dataclasses.field(
        default=4,
        metadata={"help": "most demonstrations per candidate set (the user's labelled training "
                          "pairs, with their verified reasoning where there is one)",
                  "ge": 0, "le": 1024},
    )
    demo_candidates: int = dataclasses.field(
        default=8,
        metadata={"help": "seeded candidate demo sets tried on the validation pairs (the empty "
                          "set is tried as well)", "ge": 1, "le": 1024},
    )
    val_fraction: float = dataclasses.field(
        default=0.3, metadata={"help": "share of a user's pairs held out to select the demos",
                               "ge": 0, "lt": 1}
    )
    split: Literal["shuffled", "temporal"] = dataclasses.field(
        default="shuffled",
        metadata={"help": "train/validation split of a user's pairs: 'shuffled' (seeded) or "
                          "'temporal' (kept in order: the oldest pairs train, as the original)"},
    )
    parse_retries: int = dataclasses.field(
        default=3,
        metadata={"help": "times an unparsable reply (persona, reasoning, verdict, grade) is "
                          "asked again, each at a higher temperature", "ge": 0, "le": 100},
    )
    retry_temperature: float = dataclasses.field(
        default=0.75,
        metadata={"help": "temperature of the last retry; retry k of n samples at temperature + "
                          "(retry_temperature - temperature) * k / n", "ge": 0, "le": 100},
    )
    protocol: Literal["prbench", "authors"] = dataclasses.field(
        default="prbench",
        metadata={"help": "'authors': the SynthesizeMe reference's fitting as its code runs "
                          "(a 12-candidate persona search: labelled-only, unshuffled and 10 "
                          "shuffled bootstraps; a 13-candidate demo search with zero-shot first; "
                          "labelled-only demos carried but not shown; single-order validation; "
                          "persona from every demo of the winner), 8192 tokens, greedy retries, "
                          "seed 42; headline acc_single_order"},
    )
    persona_cache: bool = dataclasses.field(
        default=True, metadata={"help": "keep induced personas on disk (per user, prompt, model)"}
    )
    persona_cache_dir: str = dataclasses.field(
        default="", metadata={"help": "persona cache folder; '' = the prbench cache"}
    )

    def __post_init__(self) -> None:
        if self.protocol == "authors":
            defaults = {f.name: f.default for f in dataclasses.fields(SynthesizeMeOptions)}
            clash = [f"{k}={getattr(self, k)!r} (authors: {v!r})" for k, v in AUTHORS.items()
                     if getattr(self, k) not in (defaults[k], v)]
            if clash:
                raise ValueError("protocol=authors sets the reference's settings; drop "
                                 + ", ".join(clash) + " or use protocol=prbench")
            for k, v in AUTHORS.items():
                object.__setattr__(self, k, v)
        super().__post_init__()
        if self.fit == "preferences" and not self.preferences_data:
            raise ValueError("fit=preferences needs preferences_data=<records with a "
                             "`preferences` field>")
        if self.persona_max_new_tokens < 1 or self.demos < 0 or self.demo_candidates < 1:
            raise ValueError("persona_max_new_tokens and demo_candidates must be >= 1, demos >= 0")
        if self.parse_retries < 0:
            raise ValueError("parse_retries must be >= 0")
        if self.parse_retries and self.retry_temperature < self.temperature:
            raise ValueError(f"retry_temperature ({self.retry_temperature}) is below temperature "
                             f"({self.temperature}): retries rise in temperature; set "
                             f"retry_temperature={self.temperature} or higher, or parse_retries=0")
        if not 0 <= self.val_fraction < 1:
            raise ValueError("val_fraction must be in [0, 1)")


@dataclasses.dataclass(frozen=True)
class SynthesizeMeRatingOptions(SynthesizeMeOptions):
    """Options of ``synthesizeme-rating``: ``synthesizeme`` plus the grading scale."""

    low: int = dataclasses.field(default=1, metadata={"help": "lowest grade"})
    high: int = dataclasses.field(default=10, metadata={"help": "highest grade"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.low >= self.high:
            raise ValueError("low must be below high")


@hookimpl
def register_scorers(register: ComponentRegister) -> None:
    """Register the pairwise judge and its pointwise rating mode."""
    register(
        "synthesizeme",
        "prbench_plugin_synthesizeme.judge:SynthesizeMeJudge",
        options=SynthesizeMeOptions,
        tags=("pairwise", "llm"),
        description="SynthesizeMe: induced persona per user, persona-conditioned pairwise judge "
                    "(both orders; a split verdict is a tie, counted wrong)",
    )
    register(
        "synthesizeme-rating",
        "prbench_plugin_synthesizeme.judge:SynthesizeMeRating",
        options=SynthesizeMeRatingOptions,
        tags=("pointwise", "llm"),
        description="SynthesizeMe persona-conditioned rating of one answer (for Best-of-N)",
    )
