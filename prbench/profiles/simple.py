"""The ``none`` and ``all`` profile builders.

- ``none``: the question-only condition; the reward model sees no profile.
- ``all``: every post in the order the data gives them (the data has no dates), rendered with
  ``Post i (Category: c): text``, until a token budget is reached; the posts cut are counted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from prbench.profiles.base import POST_FORMAT, ProfileView, with_progress
from prbench.profiles.budget import (
    POST_FIELDS,
    RANKED_OPTIONS,
    TokenCounter,
    builder_id,
    check_format,
    check_positive,
    fit_budget,
    table_option,
)

if TYPE_CHECKING:
    from prbench.records import Record


class NoneBuilder:
    """The question-only condition: an empty profile view for every record."""

    id = "none"

    def build(self, records: Sequence[Record]) -> list[ProfileView]:
        """One empty view (builder ``"none"``) per record; the number of posts it had in extra."""
        return [
            ProfileView(text="", builder=self.id, extra={"n_posts": len(r.profile)})
            for r in records
        ]


@dataclasses.dataclass(frozen=True)
class AllPostsOptions:
    """Options of the ``all`` profile builder."""

    max_tokens: int | None = dataclasses.field(
        default=4096,
        metadata={"help": "token budget of the rendered profile; none = every post", "ge": 1,
                  "le": 1_048_576},
    )
    tokenizer: str | None = dataclasses.field(
        default=None,
        metadata={"help": "count tokens with this tokenizer (minilm, hub id, folder); "
                          "none = whitespace words"},
    )
    revision: str | None = dataclasses.field(
        default=None, metadata={"help": "hub revision of the tokenizer"}
    )
    trust_remote_code: bool = table_option(RANKED_OPTIONS, "trust_remote_code")
    format: str = dataclasses.field(
        default=POST_FORMAT,
        metadata={"help": "rendering of one post; fields {index} {category} {text} {id}"},
    )

    def __post_init__(self) -> None:
        check_positive(self.max_tokens, "max_tokens")
        check_format(self.format, POST_FIELDS, "format")


class AllPostsBuilder:
    """Every post, in the given order, until the token budget; a post is never split."""

    def __init__(self, options: AllPostsOptions | None = None) -> None:
        self.options = options or AllPostsOptions()
        self.counter = TokenCounter(
            self.options.tokenizer, self.options.revision,
            trust_remote_code=self.options.trust_remote_code,
        )
        self.id = builder_id("all", self.options, ["max_tokens"])

    def build(self, records: Sequence[Record]) -> list[ProfileView]:
        """One view per record: the longest prefix of the posts that fits the budget."""
        views = []
        for r in with_progress(records, desc="profiles: all"):
            fitted = fit_budget(r.profile, self.counter, self.options.max_tokens,
                                self.options.format)
            views.append(
                ProfileView(
                    text=fitted.text,
                    items=fitted.items,
                    n_tokens=fitted.n_tokens,
                    builder=self.id,
                    extra={
                        "n_posts": len(r.profile),
                        "n_cut": fitted.n_cut,
                        "token_unit": self.counter.name,
                        "format": self.options.format,
                    },
                )
            )
        return views
