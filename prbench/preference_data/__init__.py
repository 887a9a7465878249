"""Per-user labelled preferences: the optional ``user_id`` and ``preferences`` record fields.

Personalised methods that learn from a user's own choices (SynthesizeMe, GPO, ...) need labelled
pairs per user, which Personalized RewardBench does not have. Records may therefore carry two
optional fields, validated by :mod:`prbench.records` and kept as extra fields:

- ``user_id`` (str): who asked; several records (held-out pairs) may share a user.
- ``preferences`` (list of ``{question, chosen, rejected}``; ``prompt`` is accepted for
  ``question``): that user's labelled pairs a method may fit on, oldest first. A record's own
  pair must never be among them.

This module reads those fields (:func:`parse_preferences`, :func:`user_preferences`); the
converters of public per-user preference data (PRISM, the personalised Chatbot Arena release)
live in :mod:`prbench.preference_data.convert`. The bundled, hand-written
``preferences_sample`` (``prbench/data/preferences_sample/``) uses the same layout.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

#: the optional record fields this module defines
FIELDS = ("user_id", "preferences")


@dataclasses.dataclass(frozen=True)
class Pref:
    """One labelled pair of a user: the question, the answer they chose and the one they did not."""

    question: str
    chosen: str
    rejected: str


def preference_problems(raw: Any) -> list[tuple[str, str]]:
    """Every problem of a ``preferences`` value, as ``(field, message)``; ``[]`` when valid.

    The field is ``preferences`` or ``preferences[i].<name>``, for one-line error messages.
    """
    if not isinstance(raw, list):
        return [("preferences", "expected a list of {question, chosen, rejected}, got "
                 f"{type(raw).__name__}")]
    out: list[tuple[str, str]] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            out.append((f"preferences[{i}]", "expected an object {question, chosen, rejected}, "
                        f"got {type(item).__name__}"))
            continue
        name = "question" if "question" in item or "prompt" not in item else "prompt"
        values = {name: item.get(name), "chosen": item.get("chosen"),
                  "rejected": item.get("rejected")}
        bad = False
        for field, value in values.items():
            if not isinstance(value, str) or not value.strip():
                what = "is missing" if field not in item else "must be a non-empty string"
                hint = " (or 'prompt')" if field == "question" else ""
                out.append((f"preferences[{i}].{field}", what + hint))
                bad = True
        if not bad and values["chosen"].strip() == values["rejected"].strip():
            out.append((f"preferences[{i}].rejected", "is identical to 'chosen'"))
    return out


def user_id_problem(raw: Any) -> str | None:
    """The problem of a ``user_id`` value, or ``None`` when it is a non-empty string (or int)."""
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        return f"expected a string, got {type(raw).__name__}"
    if not str(raw).strip():
        return "is empty"
    return None


def parse_preferences(raw: Any, where: str) -> list[Pref]:
    """A record's ``preferences`` as :class:`Pref` items, in order.

    Args:
        raw: the field's value.
        where: what to name in an error (file, line, record).

    Raises:
        ValueError: the first problem, naming ``where`` and the item's field.
    """
    problems = preference_problems(raw)
    if problems:
        field, message = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ValueError(f"{where}: {field} {message}{more}")
    return [Pref(question=item.get("question", item.get("prompt")), chosen=item["chosen"],
                 rejected=item["rejected"]) for item in raw]


def user_of(record: Any) -> str:
    """The user of a record: its ``user_id`` field, else its own id (one record, one user)."""
    extra: Mapping[str, Any] = getattr(record, "extra", {}) or {}
    user = extra.get("user_id")
    return str(user) if user is not None and str(user).strip() else str(record.id)


@dataclasses.dataclass
class UserPreferences:
    """The preferences of a set of records, by user.

    Attributes:
        by_user: each user's labelled pairs (one list per user, in the records' order).
        user_of_record: record id -> user, for every record that has preferences.
    """

    by_user: dict[str, list[Pref]]
    user_of_record: dict[str, str]

    def for_record(self, record_id: str) -> tuple[str, list[Pref]] | None:
        """``(user, pairs)`` of a record, or ``None`` when it carries no preferences."""
        user = self.user_of_record.get(record_id)
        return None if user is None else (user, self.by_user[user])


def user_preferences(records: Iterable[Any]) -> UserPreferences:
    """Collect the ``preferences`` of records (see the module docstring), grouped by user.

    Records of one user must carry the same preferences (a converter writes them so); records
    without the field are left out.

    Raises:
        ValueError: a malformed field, or two records of one user with different preferences
            (file, line and record named).
    """
    by_user: dict[str, list[Pref]] = {}
    first: dict[str, str] = {}
    of_record: dict[str, str] = {}
    for record in records:
        extra = getattr(record, "extra", {}) or {}
        if "preferences" not in extra:
            continue
        where = f"{record.source or '?'} record {record.id!r}"
        prefs = parse_preferences(extra["preferences"], where)
        if not prefs:
            continue
        user = user_of(record)
        if user in by_user and by_user[user] != prefs:
            raise ValueError(f"{where}: preferences differ from those of another record of user "
                             f"{user!r} ({first[user]}); all records of a user carry the same "
                             "preferences")
        by_user.setdefault(user, prefs)
        first.setdefault(user, where)
        of_record[str(record.id)] = user
    return UserPreferences(by_user=by_user, user_of_record=of_record)


__all__ = ["FIELDS", "Pref", "UserPreferences", "parse_preferences", "preference_problems",
           "user_id_problem", "user_of", "user_preferences"]
