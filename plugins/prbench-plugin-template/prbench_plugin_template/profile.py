"""A worked example of a profile builder: the user's last ``k`` posts, newest last.

A profile builder turns each record's ``profile`` into what the reward model is shown. Its
contract (see :mod:`prbench.profiles.base`):

- the factory is called as ``factory(options)`` with the options dataclass it registered;
- ``build(records)`` takes a sequence of :class:`prbench.records.Record` and returns one
  :class:`prbench.profiles.base.ProfileView` per record, in the same order, deterministically;
- ``Record.profile`` is a ``tuple[ProfileItem, ...]``; each ``ProfileItem`` has ``id``,
  ``category`` and ``text`` (one past post of the user, in the order the data gives them).

A task asks for a builder by id (``metadata: prbench_profile: last-posts``, or the user's
``--metadata '{"prbench_profile": "last-posts", "prbench_profile_k": 2}'``); prbench passes the
task's ``k`` as the option ``k``, so a builder that selects posts takes a ``k`` option.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from prbench.api import POST_FORMAT, ProfileView, render_posts

if TYPE_CHECKING:
    from prbench.api import Record


@dataclasses.dataclass(frozen=True)
class LastPostsOptions:
    """Options of ``last-posts``."""

    k: int = dataclasses.field(
        default=5, metadata={"help": "how many of the last posts to show", "ge": 1,
                             "le": 1_048_576})

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be at least 1, got {self.k}")


class LastPostsBuilder:
    """Shows the last ``k`` posts of each user's profile, rendered as ``Post i (Category: c)``."""

    def __init__(self, options: LastPostsOptions) -> None:
        self.options = options
        self.id = f"last-posts(k={options.k})"

    def build(self, records: Sequence[Record]) -> list[ProfileView]:
        """One view per record, in order: its last ``k`` posts (fewer if it has fewer)."""
        views = []
        for record in records:
            items = tuple(record.profile[-self.options.k:])
            text = render_posts(items, POST_FORMAT)
            views.append(
                ProfileView(
                    text=text,
                    items=items,
                    n_tokens=len(text.split()),
                    builder=self.id,
                    extra={"n_posts": len(record.profile)},
                )
            )
        return views
