"""The profile-builder protocol and the profile view it produces."""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from prbench.plugins import PluginError
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


class ProfileBuilderFaultError(PluginError, ValueError):
    """A profile builder raised, or returned something that is not one valid view per record.

    The message names the builder (with its plugin, where the caller knows it) and the record.
    """


def _view_problem(view: Any) -> str | None:
    """What is wrong with one returned view, or ``None`` for a valid :class:`ProfileView`."""
    from prbench.records import ProfileItem

    if not isinstance(view, ProfileView):
        return f"returned {_short(view)} ({type(view).__name__}), not a ProfileView"
    if not isinstance(view.text, str):
        return f"view.text must be a string, got {_short(view.text)} ({type(view.text).__name__})"
    if not isinstance(view.items, tuple | list):
        return (
            f"view.items must be a tuple of ProfileItem, got {_short(view.items)} "
            f"({type(view.items).__name__})"
        )
    for i, item in enumerate(view.items):
        if not isinstance(item, ProfileItem):
            return (
                f"view.items[{i}] must be a ProfileItem (the post used), got {_short(item)} "
                f"({type(item).__name__})"
            )
    n_tokens = view.n_tokens
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, numbers.Integral) or n_tokens < 0:
        return (
            f"view.n_tokens must be a whole number of at least 0, got {_short(n_tokens)} "
            f"({type(n_tokens).__name__})"
        )
    if not isinstance(view.builder, str):
        return f"view.builder must be a string, got {type(view.builder).__name__}"
    if not isinstance(view.extra, Mapping):
        return f"view.extra must be a mapping, got {type(view.extra).__name__}"
    return None


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def build_views(
    builder: ProfileBuilder, records: Sequence[Record], what: str
) -> list[ProfileView]:
    """``builder.build(records)``, checked to hold one valid :class:`ProfileView` per record.

    Every caller (the tasks, Best-of-N, RL, the planner, pair generation) builds views through
    this function, so a faulty builder fails the same way everywhere: one
    :class:`ProfileBuilderFaultError` naming ``what`` and the record. prbench's own user errors
    raised by the builder (bad options, data, a damaged cache) pass through unchanged.

    Args:
        builder: the profile builder.
        records: the records to build views for.
        what: names the builder in the error, e.g. ``"profile builder 'prbench/dense' (plugin
            'prbench.profiles')"``.

    Raises:
        ProfileBuilderFaultError: the builder raised, returned no list, another number of views
            than records, or a view that is not a valid :class:`ProfileView` (wrong type, text
            not a string, items not posts, a token count that is not a whole number, ...).
    """
    from prbench.errors import PrbenchUserError

    try:
        views = builder.build(records)
    except Exception as exc:
        if isinstance(exc, PrbenchUserError):
            raise
        message = " ".join(str(exc).split()) or "(no message)"
        raise ProfileBuilderFaultError(
            f"{what} failed on {len(records)} record(s): {type(exc).__name__}: {message}"
        ) from exc
    if views is None or isinstance(views, str | bytes | Mapping) or not hasattr(views, "__len__"):
        raise ProfileBuilderFaultError(
            f"{what} returned {_short(views)} ({type(views).__name__}), not a list of "
            f"{len(records)} ProfileView (one per record)"
        )
    if len(views) != len(records):
        raise ProfileBuilderFaultError(
            f"{what} returned {len(views)} views for {len(records)} records"
        )
    views = list(views)
    for record, view in zip(records, views, strict=True):
        problem = _view_problem(view)
        if problem:
            raise ProfileBuilderFaultError(
                f"{what}, record {getattr(record, 'id', '?')!r}: {problem}"
            )
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


def render_posts(
    items: Sequence[ProfileItem], fmt: str = POST_FORMAT, separator: str = "\n\n"
) -> str:
    """Render posts with ``fmt`` (fields: index from 1, category, text, id).

    Posts are joined by ``separator`` (one post per paragraph by default).
    """
    return separator.join(
        fmt.format(index=i, category=item.category, text=item.text, id=item.id)
        for i, item in enumerate(items, start=1)
    )
