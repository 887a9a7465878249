"""Labelled per-user preferences (``--train`` mode): users, their pairs, and label digests.

The ``user_id`` and ``preferences`` fields are prbench's (:mod:`prbench.preference_data`, which
parses and validates them); this module adds what GPO needs on top.

A record of a preference file is a held-out pair (``question``, ``chosen``, ``rejected``) of one
user (``user_id``, else the record id) with the user's labelled pairs in its ``preferences`` field
(a list of ``{question, chosen, rejected}``). A user's **labelled pairs** are the union of the
``preferences`` of the user's records, in file order, without repeats.

- At training time (``prbench-gpo train --train FILE``) every pair of a training user -- its
  ``preferences`` and its held-out records alike -- is labelled data: each episode splits a user's
  pairs into a context and targets.
- At scoring time (``preferences_data=FILE``) a user's context is that user's ``preferences``;
  the targets are the answers of the held-out records.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from prbench.api import Pref

if TYPE_CHECKING:
    from prbench.api import Record


def digest(text: str) -> str:
    """A short sha256 of a text (identifies an answer without storing it)."""
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:16]


def user_pairs(records: Sequence[Record], *, held_out: bool) -> dict[str, list[Pref]]:
    """Each user's labelled pairs (:func:`prbench.preference_data.user_preferences`).

    Args:
        records: records of a preference file.
        held_out: also add each record's own (question, chosen, rejected), after the user's
            ``preferences`` and without repeats -- training data only.
    """
    from prbench.api import user_preferences

    out = {u: list(ps) for u, ps in user_preferences(records).by_user.items()}
    if held_out:
        for r in records:
            mine = out.setdefault(r.user, [])
            pair = Pref(r.question, r.chosen, r.rejected)
            if pair not in mine:
                mine.append(pair)
    return out


def require_preferences(records: Sequence[Record], source: str) -> None:
    """Refuse a preference file in which some record carries no ``preferences``.

    Raises:
        ValueError: naming the file and the first records without the field.
    """
    missing = [r for r in records if not r.extra.get("preferences")]
    if missing:
        shown = ", ".join(f"{r.id!r} ({r.source})" for r in missing[:5])
        raise ValueError(f"{source}: {len(missing)} record(s) have no labelled `preferences` "
                         f"(a list of {{question, chosen, rejected}}): {shown}")


def normalise_id(user: str) -> str:
    """A user id as the overlap check compares it: NFKC-normalised, case-folded, with runs of
    whitespace folded to one space and the ends stripped (``" Alice "`` = ``"ALICE"``).
    """  # noqa: D205
    return " ".join(unicodedata.normalize("NFKC", str(user)).casefold().split())


def _norm_text(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).split())


def pair_hash(pair: Pref) -> str:
    """The content hash of a labelled pair (question, chosen, rejected), normalised the same way
    for unicode and whitespace, so a copy of a training pair under another user is recognised.
    """  # noqa: D205
    parts = [_norm_text(pair.question), _norm_text(pair.chosen), _norm_text(pair.rejected)]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


def pair_hashes(pairs: Iterable[Pref]) -> set[str]:
    """The content hashes of ``pairs`` (:func:`pair_hash`)."""
    return {pair_hash(p) for p in pairs}


def overlap_error(eval_users: Sequence[str], train_users: Sequence[str], where: str,
                  shared_pairs: int = 0) -> str | None:
    """The refusal message when evaluated users or pairs were training ones (``None`` if not).

    Users are compared by :func:`normalise_id`, so ``"T0"`` or ``" t0 "`` is training user
    ``"t0"``; ``shared_pairs`` is how many evaluated pairs are training pairs by content.
    """
    train = {normalise_id(u) for u in train_users}
    both = sorted(u for u in set(eval_users) if normalise_id(u) in train)
    if not both and not shared_pairs:
        return None
    found = []
    if both:
        shown = ", ".join(repr(u) for u in both[:20]) + (" ..." if len(both) > 20 else "")
        found.append(f"{len(both)} user(s) of {where} are among the checkpoint's training users "
                     f"(ids compared case-, space- and unicode-insensitively): {shown}")
    if shared_pairs:
        found.append(f"{shared_pairs} pair(s) of {where} are training pairs (same question and "
                     "answers)")
    return (f"gpo: {'; '.join(found)}; GPO must be evaluated on users and pairs it never trained "
            "on (pass allow_user_overlap=true to score them anyway; results then say so)")


def content_sha256(hashes: dict[str, str]) -> str:
    """The data's content hash: the file's sha256, or one over the sorted per-file hashes.

    Args:
        hashes: ``prbench.records.file_hashes`` of the source (path -> sha256); paths are left
            out, so the hash names the content wherever it lies.
    """
    values = sorted(hashes.values())
    if len(values) == 1:
        return values[0]
    return hashlib.sha256("\n".join(values).encode()).hexdigest()
