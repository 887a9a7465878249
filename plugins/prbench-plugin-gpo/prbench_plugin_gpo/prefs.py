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
from collections.abc import Sequence
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
    from prbench.api import user_of, user_preferences

    out = {u: list(ps) for u, ps in user_preferences(records).by_user.items()}
    if held_out:
        for r in records:
            mine = out.setdefault(user_of(r), [])
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


def overlap_error(eval_users: Sequence[str], train_users: Sequence[str], where: str) -> str | None:
    """The refusal message when evaluated users were training users (``None`` if disjoint)."""
    both = sorted(set(eval_users) & set(train_users))
    if not both:
        return None
    shown = ", ".join(repr(u) for u in both[:20]) + (" ..." if len(both) > 20 else "")
    return (f"gpo: {len(both)} user(s) of {where} are among the checkpoint's training users: "
            f"{shown}; GPO must be evaluated on users it never trained on (pass "
            "allow_user_overlap=true to score them anyway; results then say so)")


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
