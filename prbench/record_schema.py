r"""The record schema, and the checks that turn one decoded row into a :class:`Record`.

:class:`RecordChecker` reports every problem of a row with its field and a stable code: missing
or mistyped fields, misspelt schema fields, duplicate ids, text that later steps cannot take (a
lone surrogate, a NUL character, nesting too deep), ids with control or bidi characters, answers
or questions made only of invisible characters, and chosen/rejected answers that are the same
text once Unicode normalisation, invisible characters and kinds of space are ignored (compared
so, never stored so: a record keeps its text exactly; the Unicode rules are
:mod:`prbench.unicode_text`). :mod:`prbench.records` loads sources with it and re-exports every
name here.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from prbench.issues import Issue, Row, short, shown, shown_path
from prbench.options import suggest
from prbench.preference_data import user_of
from prbench.unicode_text import (
    comparable,
    id_character_problem,
    invisible_message,
    invisible_only,
    text_problems,
)

KNOWN_FIELDS = (
    "id",
    "question",
    "profile",
    "narrative",
    "rubric_aspects",
    "category",
    "chosen",
    "rejected",
    "domain",
)
#: optional fields with a schema of their own (per-user labelled pairs, see
#: :mod:`prbench.preference_data`): validated, then kept as extra fields
OPTIONAL_FIELDS = ("user_id", "preferences")
#: an unknown top-level key at least this close (difflib ratio, case-insensitive) to a schema
#: field that the record lacks is taken for a misspelling of it: an error, not a warning
TYPO_CUTOFF = 0.85
#: deepest nesting of lists/objects a record may have (deeper input breaks later JSON/Arrow steps)
MAX_DEPTH = 64


@dataclasses.dataclass(frozen=True)
class ProfileItem:
    """One past post of the user: ``{id, category, text}`` (title + body)."""

    id: str
    category: str
    text: str
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class RubricAspect:
    """One thing the user expects: ``{aspect, evidence, reason}``."""

    aspect: str
    evidence: str = ""
    reason: str = ""
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Record:
    """One benchmark record.

    Attributes:
        id: unique id.
        question: the user's question (RM input).
        profile: the user's past posts (RM input through a profile builder).
        chosen: the answer that covers the user's rubric.
        rejected: the equally good answer that does not.
        category: the record's category.
        domain: the domain (config / file name), e.g. ``Art_and_Entertainment``.
        narrative: the user's own elaboration; never RM input.
        rubric_aspects: what the user expects; never RM input.
        extra: unknown fields, kept and passed through.
        source: ``file:line`` it was read from.
    """

    id: str
    question: str
    profile: tuple[ProfileItem, ...]
    chosen: str
    rejected: str
    category: str = ""
    domain: str = ""
    narrative: str = ""
    rubric_aspects: tuple[RubricAspect, ...] = ()
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    source: str = ""

    @property
    def user(self) -> str:
        """The user this record belongs to: its ``user_id`` field, else its own id.

        One rule for every reader (``prbench validate`` checks the field; per-user preferences are
        grouped by it).
        """
        return user_of(self)

    def hidden(self) -> dict[str, Any]:
        """The fields no real RM may see (for diagnostic scorers and judges)."""
        return {
            "narrative": self.narrative,
            "rubric_aspects": [dataclasses.asdict(a) for a in self.rubric_aspects],
        }

    def to_dict(self) -> dict[str, Any]:
        """The record in the published schema, extra fields included."""
        out: dict[str, Any] = {
            "id": self.id,
            "question": self.question,
            "profile": [
                {"id": p.id, "category": p.category, "text": p.text, **p.extra}
                for p in self.profile
            ],
            "narrative": self.narrative,
            "rubric_aspects": [
                {"aspect": a.aspect, "evidence": a.evidence, "reason": a.reason, **a.extra}
                for a in self.rubric_aspects
            ],
            "category": self.category,
            "chosen": self.chosen,
            "rejected": self.rejected,
        }
        if self.domain:
            out["domain"] = self.domain
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "") -> Record:
        """The record :meth:`to_dict` wrote, read back without checking it again.

        Only for data that :meth:`to_dict` produced from a validated record (prbench's own
        stores); anything read from a user goes through :class:`RecordChecker`.

        Args:
            data: the output of :meth:`to_dict` (or its JSON, decoded).
            source: ``file:line`` the record was first read from.
        """
        posts = tuple(
            ProfileItem(
                id=p["id"], category=p["category"], text=p["text"],
                extra={k: v for k, v in p.items() if k not in _POST_KEYS},
            )
            for p in data["profile"]
        )
        aspects = tuple(
            RubricAspect(
                aspect=a["aspect"], evidence=a["evidence"], reason=a["reason"],
                extra={k: v for k, v in a.items() if k not in _ASPECT_KEYS},
            )
            for a in data["rubric_aspects"]
        )
        return cls(
            id=data["id"], question=data["question"], profile=posts, chosen=data["chosen"],
            rejected=data["rejected"], category=data["category"],
            domain=data.get("domain", ""), narrative=data["narrative"], rubric_aspects=aspects,
            extra={k: v for k, v in data.items() if k not in _RECORD_KEYS}, source=source,
        )


#: the keys :meth:`Record.to_dict` writes for a record's own fields (the rest are its extras)
_RECORD_KEYS = frozenset({"id", "question", "profile", "narrative", "rubric_aspects", "category",
                          "chosen", "rejected", "domain"})
_POST_KEYS = frozenset({"id", "category", "text"})
_ASPECT_KEYS = frozenset({"aspect", "evidence", "reason"})


class RecordChecker:
    """Validates decoded rows into records, collecting every issue in ``issues``.

    One checker per load: it remembers the ids it has seen to report duplicates. Subclass it to
    validate variants of the schema (``prbench build`` checks records that have no answers yet).
    """

    def __init__(self) -> None:
        self.issues: list[Issue] = []
        self.warnings: list[Issue] = []
        #: id (a digest for a long one) -> (file, line) where it was first seen
        self.seen_ids: dict[str | bytes, tuple[str, int]] = {}

    def problem(self, row: Row, rid: str | None, field: str | None, msg: str, code: str) -> None:
        """Record one issue at ``row``."""
        self.issues.append(row.issue(rid, field, msg, code))

    def _text(
        self,
        row: Row,
        rid: str | None,
        data: Mapping[str, Any],
        field: str,
        *,
        required: bool,
        label: str = "",
    ) -> str | None:
        name = label or field
        if field not in data:
            if required:
                self.problem(row, rid, name, "required field is missing", "missing-field")
            return None if required else ""
        value = data[field]
        if not isinstance(value, str):
            code = "non-string-answer" if field in ("chosen", "rejected") else "wrong-type"
            self.problem(
                row,
                rid,
                name,
                f"expected a string, got {type(value).__name__} {short(value)}",
                code,
            )
            return None
        if required and not value.strip():
            code = "empty-answer" if field in ("chosen", "rejected") else "empty-field"
            self.problem(row, rid, name, "is empty", code)
            return None
        if required and invisible_only(value):
            self.problem(row, rid, name, invisible_message(value), "invisible-text")
            return None
        return value

    def record(self, row: Row, domain: str) -> Record | None:
        """Validate one row; the record, or ``None`` after adding its issues."""
        data = row.data
        n_before = len(self.issues)
        if not isinstance(data, dict):
            self.problem(
                row,
                None,
                None,
                f"expected a JSON object, got {type(data).__name__} {short(data)}",
                "not-object",
            )
            return None
        rid = self._id(row, data)
        self.check_strings(row, rid, data)
        self.check_keys(row, rid, data, KNOWN_FIELDS + OPTIONAL_FIELDS)
        self._preferences(row, rid, data)
        question = self._text(row, rid, data, "question", required=True)
        chosen = self._text(row, rid, data, "chosen", required=True)
        rejected = self._text(row, rid, data, "rejected", required=True)
        narrative = self._text(row, rid, data, "narrative", required=False)
        category = self._text(row, rid, data, "category", required=False)
        own_domain = self._text(row, rid, data, "domain", required=False)
        profile = self._profile(row, rid, data)
        rubric = self._rubric(row, rid, data)
        if chosen and rejected and chosen.strip() == rejected.strip():
            self.problem(
                row,
                rid,
                "rejected",
                "is identical to 'chosen' (the pair cannot be told apart)",
                "identical-answers",
            )
        elif chosen and rejected and comparable(chosen) == comparable(rejected):
            self.problem(
                row,
                rid,
                "rejected",
                "is the same text as 'chosen' once Unicode normalisation (NFKC), invisible "
                "characters (zero-width, bidi) and kinds of space are ignored: the pair cannot be "
                "told apart on screen",
                "identical-after-normalisation",
            )
        if len(self.issues) > n_before or rid is None:
            return None
        assert question is not None and chosen is not None and rejected is not None
        assert profile is not None and rubric is not None
        extra = {k: v for k, v in data.items() if k not in KNOWN_FIELDS}
        return Record(
            id=rid,
            question=question,
            profile=profile,
            chosen=chosen,
            rejected=rejected,
            category=category or "",
            domain=own_domain or domain,
            narrative=narrative or "",
            rubric_aspects=rubric,
            extra=extra,
            source=f"{row.file}:{row.line}",
        )

    def check_strings(self, row: Row, rid: str | None, data: Mapping[str, Any]) -> None:
        """Report a lone surrogate in any text and nesting deeper than :data:`MAX_DEPTH`.

        Such a record would pass the type checks and crash later (in Arrow, a tokenizer, a
        results file); see :func:`prbench.unicode_text.text_problems`.
        """
        for field, message, code in text_problems(data, MAX_DEPTH):
            self.problem(row, rid, field, message, code)

    def check_keys(
        self, row: Row, rid: str | None, data: Mapping[str, Any], known: Sequence[str]
    ) -> None:
        """Warn about each unknown top-level key; an error when it is a misspelt schema field.

        A key within :data:`TYPO_CUTOFF` of a field in ``known`` that the record lacks (e.g.
        ``choosen``, ``rubric_aspect``) is an error naming the key and the field it resembles;
        any other unknown key is kept as an extra field and gets a warning (with the closest
        schema fields, if any).
        """
        for key in data:
            if key in known:
                continue
            close = difflib.get_close_matches(str(key).lower(), known, n=1, cutoff=TYPO_CUTOFF)
            if close and close[0] not in data:
                msg = (
                    f"unknown field; did you mean {close[0]!r}? It looks like a misspelling of "
                    "that schema field, whose value would otherwise be lost; rename it"
                )
                self.problem(row, rid, key, msg, "misspelt-field")
            else:
                msg = f"unknown field, kept as an extra field{suggest(str(key), known)}"
                self.warnings.append(row.issue(rid, key, msg, "unknown-field"))

    def _preferences(self, row: Row, rid: str | None, data: Mapping[str, Any]) -> None:
        """Check the optional ``user_id`` and ``preferences`` (:mod:`prbench.preference_data`).

        A record's own pair among its preferences is an error: a method would be fitted on the
        pair it is evaluated on.
        """
        from prbench.preference_data import preference_problems, user_id_problem

        if "user_id" in data and (msg := user_id_problem(data["user_id"])):
            self.problem(row, rid, "user_id", msg, "wrong-type")
        if "preferences" not in data:
            return
        problems = preference_problems(data["preferences"])
        for field, msg in problems:
            self.problem(row, rid, field, msg, "bad-preference")
        if problems:
            return
        own = {str(data.get("chosen", "")).strip(), str(data.get("rejected", "")).strip()}
        question = str(data.get("question", "")).strip()
        for i, item in enumerate(data["preferences"]):
            pair = {item["chosen"].strip(), item["rejected"].strip()}
            if pair == own and str(item.get("question", item.get("prompt"))).strip() == question:
                msg = "is the record's own pair (a method would fit on the pair it is tested on)"
                self.problem(row, rid, f"preferences[{i}]", msg, "leaked-preference")

    def _id(self, row: Row, data: Mapping[str, Any]) -> str | None:
        if "id" not in data:
            self.problem(row, None, "id", "required field is missing", "missing-field")
            return None
        value = data["id"]
        if isinstance(value, bool) or not isinstance(value, str | int):
            self.problem(
                row,
                None,
                "id",
                f"expected a string, got {type(value).__name__} {short(value)}",
                "wrong-type",
            )
            return None
        rid = str(value)
        if not rid.strip():
            self.problem(row, None, "id", "is empty", "empty-field")
            return None
        bad = id_character_problem(rid)
        if bad is not None:
            self.problem(row, rid, "id", *bad)
            return None
        key: str | bytes = rid
        if len(rid) > 64:  # keep a digest, not the text, of a long id
            key = hashlib.blake2b(rid.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        if key in self.seen_ids:
            file, line = self.seen_ids[key]
            self.problem(
                row,
                rid,
                "id",
                f"duplicate id (first seen at {shown_path(file)}:{line})",
                "duplicate-id",
            )
            return None
        self.seen_ids[key] = (row.file, row.line)
        return rid

    def _profile(
        self, row: Row, rid: str | None, data: Mapping[str, Any]
    ) -> tuple[ProfileItem, ...] | None:
        if "profile" not in data:
            self.problem(row, rid, "profile", "required field is missing", "missing-field")
            return None
        value = data["profile"]
        if not isinstance(value, list):
            self.problem(
                row,
                rid,
                "profile",
                f"expected a list of posts, got {type(value).__name__}",
                "wrong-type",
            )
            return None
        items: list[ProfileItem] = []
        seen: dict[str, int] = {}
        for i, item in enumerate(value):
            post = _post(item, i, seen)
            if isinstance(post, ProfileItem):
                items.append(post)
            else:
                self.problem(row, rid, *post)
        return tuple(items) if len(items) == len(value) else None

    def _rubric(
        self, row: Row, rid: str | None, data: Mapping[str, Any]
    ) -> tuple[RubricAspect, ...] | None:
        value = data.get("rubric_aspects", [])
        if not isinstance(value, list):
            self.problem(
                row,
                rid,
                "rubric_aspects",
                f"expected a list, got {type(value).__name__} {short(value)}",
                "wrong-type",
            )
            return None
        out: list[RubricAspect] = []
        for i, item in enumerate(value):
            aspect = _aspect(item, i)
            if isinstance(aspect, RubricAspect):
                out.append(aspect)
            else:
                self.problem(row, rid, *aspect)
        return tuple(out) if len(out) == len(value) else None


def _post(item: Any, i: int, seen: dict[str, int]) -> ProfileItem | tuple[str, str, str]:
    """Profile item ``i`` as a :class:`ProfileItem`, or ``(field, message, code)`` of its fault.

    ``seen`` maps the post ids met so far to their index (updated here).
    """
    field = f"profile[{i}]"
    if not isinstance(item, dict):
        got = f"{type(item).__name__} {short(item)}"
        return field, f"expected an object {{id, category, text}}, got {got}", "bad-profile-item"
    text = item.get("text")
    if not isinstance(text, str) or not text.strip():
        what = "missing" if "text" not in item else f"not a non-empty string ({short(text)})"
        return f"{field}.text", f"is {what}", "bad-profile-item"
    if invisible_only(text):
        return f"{field}.text", invisible_message(text), "invisible-text"
    pid = item.get("id", i)
    if isinstance(pid, bool) or not isinstance(pid, str | int):
        return f"{field}.id", f"expected a string, got {short(pid)}", "bad-profile-item"
    bad = id_character_problem(str(pid))
    if bad is not None:
        return f"{field}.id", *bad
    cat = item.get("category", "")
    if not isinstance(cat, str):
        return f"{field}.category", f"expected a string, got {short(cat)}", "bad-profile-item"
    if str(pid) in seen:
        also = f"also profile[{seen[str(pid)]}]"
        return f"{field}.id", f"duplicate post id {shown(pid)} ({also})", "duplicate-post-id"
    seen[str(pid)] = i
    extra = {k: v for k, v in item.items() if k not in ("id", "category", "text")}
    return ProfileItem(id=str(pid), category=cat, text=text, extra=extra)


def _aspect(item: Any, i: int) -> RubricAspect | tuple[str, str, str]:
    """Rubric aspect ``i`` as a :class:`RubricAspect`, or ``(field, message, code)``."""
    field = f"rubric_aspects[{i}]"
    if not isinstance(item, dict) or not str(item.get("aspect") or "").strip():
        where = f"{field}.aspect" if isinstance(item, dict) else field
        return where, "every rubric aspect needs a non-empty string 'aspect'", "bad-rubric-aspect"
    if not isinstance(item["aspect"], str):
        return f"{field}.aspect", "expected a string", "bad-rubric-aspect"
    bad = [k for k in ("evidence", "reason") if k in item and not isinstance(item[k], str)]
    if bad:
        return f"{field}.{bad[0]}", "expected a string", "bad-rubric-aspect"
    extra = {k: v for k, v in item.items() if k not in ("aspect", "evidence", "reason")}
    return RubricAspect(
        aspect=item["aspect"],
        evidence=item.get("evidence", ""),
        reason=item.get("reason", ""),
        extra=extra,
    )
