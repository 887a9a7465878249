"""Whose posts a profile is built from: the profile-source control conditions.

A gain from the profile alone cannot tell a reward model that reads *this* user from one that
merely likes more context. The control scores the same pairs with a profile from elsewhere:

- ``own``: the record's own posts (the benchmark as published).
- ``swapped``: the posts of another user of the same domain, by a seeded derangement of the
  domain's users (never the record's own user). The profile builder then retrieves from the other
  user's posts for the record's own question.
- ``shuffled``: the record's own posts, but ``k`` of them drawn at random (seeded per record)
  instead of the ``k`` the builder would retrieve for the question.
- ``none``: no profile (the question-only condition).

The condition is applied to the records *before* they reach a profile builder
(:func:`apply_source`), so it works with every builder, lazily built profiles and the ``ranked``
builder (``prbench rank --profile_source`` ranks the same transformed records).

The derangement depends only on the domain's full list of users and the seed, never on which
records a run scores (``--limit``): the users of a domain are sorted by their key, shuffled with
a generator seeded by the seed and the domain, and each user receives the profile of the next
user in that order (a single cycle, so nobody keeps their own). A user is the record's
``user_id`` where the data has one, else the record's posts (records with the same posts are the
same user). A domain with a single user cannot be swapped: :class:`ProfileSourceError` names it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from prbench.options import OptionsError

if TYPE_CHECKING:
    from prbench.records import Record

#: the profile sources, in the order reports show them
PROFILE_SOURCES = ("own", "swapped", "shuffled", "none")
DEFAULT_PROFILE_SOURCE = "own"
#: the fixed default seed of the swap derangement and of the shuffled draws
DEFAULT_SWAP_SEED = 1234


class ProfileSourceError(OptionsError):
    """A profile source that cannot be applied to the data (a domain with a single user)."""


def check_source(value: Any, what: str = "profile_source") -> str:
    """A valid profile source name.

    Raises:
        OptionsError: not one of :data:`PROFILE_SOURCES` (with a suggestion).
    """
    from prbench.options import suggest

    source = str(value).strip()
    if source not in PROFILE_SOURCES:
        raise OptionsError(
            f"{what} must be one of {', '.join(PROFILE_SOURCES)}, got {value!r}"
            f"{suggest(source, PROFILE_SOURCES)}"
        )
    return source


def resolve_source(kwargs: Mapping[str, Any]) -> str:
    """The profile source of a task from its merged ``dataset_kwargs`` and ``--metadata``.

    ``prbench_profile_source`` (the user's) wins over ``prbench_default_profile_source`` (the
    task variant's); the default is ``own``. A question-only task (``prbench_condition:
    noprofile``) is ``none`` whatever is asked, so one ``--metadata`` can cover both conditions.

    Raises:
        OptionsError: an unknown source.
    """
    if str(kwargs.get("prbench_condition")) == "noprofile":
        return "none"
    value = kwargs.get("prbench_profile_source") or kwargs.get("prbench_default_profile_source")
    return check_source(value or DEFAULT_PROFILE_SOURCE, "prbench_profile_source")


def resolve_seed(kwargs: Mapping[str, Any]) -> int:
    """``prbench_profile_swap_seed`` (default :data:`DEFAULT_SWAP_SEED`).

    Raises:
        OptionsError: not an integer.
    """
    value = kwargs.get("prbench_profile_swap_seed")
    if value in (None, ""):
        return DEFAULT_SWAP_SEED
    try:
        if isinstance(value, bool) or float(value) != int(value):
            raise ValueError(value)
        return int(value)
    except (TypeError, ValueError):
        raise OptionsError(f"prbench_profile_swap_seed must be an integer, got {value!r}") from None


def user_key(record: Record) -> str:
    """Who a record's profile belongs to: its ``user_id``, else a digest of its posts."""
    user = record.extra.get("user_id") if isinstance(record.extra, Mapping) else None
    if user not in (None, ""):
        return f"user:{user}"
    digest = hashlib.sha256()
    for post in record.profile:
        for part in (post.id, post.category, post.text):
            digest.update(part.encode("utf-8") + b"\0")
        digest.update(b"\1")
    return f"posts:{digest.hexdigest()[:16]}"


def derangement(users: Sequence[str], seed: int, domain: str) -> dict[str, str]:
    """Each user -> the user whose profile it receives; nobody receives their own.

    Depends only on the set of users, the seed and the domain.

    Raises:
        ProfileSourceError: fewer than two users.
    """
    order = sorted(set(users))
    if len(order) < 2:
        raise ProfileSourceError(
            f"profile_source=swapped: domain {domain!r} has {len(order)} user(s); swapping needs "
            "at least two users in a domain (use another source, or data with more users)"
        )
    random.Random(f"prbench-swap:{seed}:{domain}").shuffle(order)
    return {user: order[(i + 1) % len(order)] for i, user in enumerate(order)}


@dataclasses.dataclass(frozen=True)
class SourcedRecord:
    """A record with the posts a profile source gives it.

    Attributes:
        record: the record whose ``profile`` is the posts the builder is to read (the rest of it,
            question, answers and hidden fields, is the record's own).
        profile_user: the user the posts belong to (:func:`user_key`).
        donor_id: for ``swapped``, the id of the record whose posts were taken; else ``None``.
    """

    record: Record
    profile_user: str
    donor_id: str | None = None


def donor_indices(
    ids: Sequence[str], domains: Sequence[str], users: Sequence[str], seed: int
) -> list[int]:
    """For each record, the index of the record whose posts it receives under ``swapped``.

    The records are given column by column (id, domain and :func:`user_key` of each), so a
    caller holding them in another form need not build them. A user's profile is that of its
    record with the smallest id; users are deranged per domain (:func:`derangement`).

    Raises:
        ProfileSourceError: a domain with a single user.
    """
    by_domain: dict[str, dict[str, int]] = {}
    for i in sorted(range(len(ids)), key=ids.__getitem__):
        by_domain.setdefault(domains[i], {}).setdefault(users[i], i)
    plans = {domain: derangement(list(u), seed, domain) for domain, u in by_domain.items()}
    return [by_domain[d][plans[d][u]] for d, u in zip(domains, users, strict=True)]


def _donors(records: Sequence[Record], seed: int) -> dict[str, Record]:
    """Map each record id to the record whose posts it receives under ``swapped`` (per domain)."""
    picks = donor_indices([r.id for r in records], [r.domain for r in records],
                          [user_key(r) for r in records], seed)
    return {r.id: records[j] for r, j in zip(records, picks, strict=True)}


def shuffled_posts(record: Record, k: int, seed: int) -> tuple[Any, ...]:
    """``k`` of the record's posts drawn at random (seeded by the seed and the record's id)."""
    posts = list(record.profile)
    rng = random.Random(f"prbench-shuffle:{seed}:{record.domain}:{record.id}")
    rng.shuffle(posts)
    return tuple(posts[: max(0, k)])


def apply_source(
    records: Sequence[Record], source: str, *, seed: int = DEFAULT_SWAP_SEED, k: int
) -> list[SourcedRecord]:
    """The records with the posts of a profile source (see the module docstring).

    Args:
        records: every record of the data (or of the requested domain): the swap is drawn from
            all of them, whichever a run then scores.
        source: one of :data:`PROFILE_SOURCES`.
        seed: the seed of the derangement and of the shuffled draws.
        k: the posts kept by ``shuffled`` (the builder's ``k``).

    Raises:
        ProfileSourceError: ``swapped`` on a domain with a single user.
        OptionsError: an unknown source.
    """
    source = check_source(source)
    if source == "swapped":
        donors = _donors(records, seed)
        return [
            SourcedRecord(
                dataclasses.replace(r, profile=donors[r.id].profile),
                user_key(donors[r.id]), donors[r.id].id,
            )
            for r in records
        ]
    if source == "shuffled":
        return [
            SourcedRecord(dataclasses.replace(r, profile=shuffled_posts(r, k, seed)), user_key(r))
            for r in records
        ]
    # own, and none (no builder reads the posts: the rows stay as in the question-only tasks)
    return [SourcedRecord(r, user_key(r)) for r in records]


__all__ = [
    "DEFAULT_PROFILE_SOURCE",
    "DEFAULT_SWAP_SEED",
    "PROFILE_SOURCES",
    "ProfileSourceError",
    "SourcedRecord",
    "apply_source",
    "check_source",
    "derangement",
    "donor_indices",
    "resolve_seed",
    "resolve_source",
    "shuffled_posts",
    "user_key",
]
