"""The profile-builder protocol and the profile view it produces."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from prbench.progress import progress_bar

if TYPE_CHECKING:
    from prbench.records import ProfileItem, Record

#: The default rendering of one post, as in the released retrieval code: ``Post i (Category: c):``.
POST_FORMAT = "Post {index} (Category: {category}): {text}"


@dataclasses.dataclass(frozen=True)
class ProfileView:
    """The part of a user's profile a reward model is shown.

    Attributes:
        text: the rendered profile ("" for the question-only condition).
        items: the posts used, in the order rendered.
        n_tokens: the size of ``text`` in the builder's tokenizer (whitespace words if it has none).
        builder: the builder id with its options, e.g. ``"dense(k=10,model=...)"`` (provenance).
        extra: builder-specific details (retrieval scores, planner output, ...).
    """

    text: str
    items: tuple[ProfileItem, ...] = ()
    n_tokens: int = 0
    builder: str = "none"
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """True when the model sees no profile."""
        return not self.text


@runtime_checkable
class ProfileBuilder(Protocol):
    """Builds profile views; deterministic for the same records and options."""

    def build(self, records: Sequence[Record]) -> list[ProfileView]:
        """One profile view per record, in the same order."""
        ...


def build_views(
    builder: ProfileBuilder,
    records: Sequence[Record],
    what: str,
    error: type[Exception] = ValueError,
) -> list[ProfileView]:
    """``builder.build(records)``, checked to hold one view per record.

    Args:
        builder: the profile builder.
        records: the records to build views for.
        what: names the builder in the error, e.g. ``"planner: retriever 'dense'"``.
        error: the exception type to raise.

    Raises:
        ValueError: (or ``error``) the builder returned another number of views than records.
    """
    views = builder.build(records)
    if len(views) != len(records):
        raise error(f"{what} returned {len(views)} views for {len(records)} records")
    return views


T = TypeVar("T")


def with_progress(items: Sequence[T], *, desc: str, unit: str = "record") -> Iterator[T]:
    """Iterate over ``items`` behind a progress bar (counts and rate; see :mod:`prbench.progress`).

    Args:
        items: what to iterate over.
        desc: the bar's label, e.g. ``"profiles: bm25"``.
        unit: the unit shown with the rate.
    """
    bar = progress_bar(len(items), desc=desc, unit=unit)
    try:
        for item in items:
            yield item
            bar.update(1)
    finally:
        bar.close()


def render_posts(items: Sequence[ProfileItem], fmt: str = POST_FORMAT) -> str:
    """Render posts one per paragraph with ``fmt`` (fields: index from 1, category, text, id)."""
    return "\n\n".join(
        fmt.format(index=i, category=item.category, text=item.text, id=item.id)
        for i, item in enumerate(items, start=1)
    )
