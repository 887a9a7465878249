"""Turn public per-user preference data into prbench records with ``user_id`` + ``preferences``.

Two published sources (``prbench prefs convert --source ...``):

- ``prism``: PRISM (``HannahRoseKirk/prism-alignment``, config ``conversations``). One row per
  conversation: ``user_id``, ``conversation_id``, optional ``conversation_type`` and
  ``generated_datetime``, and ``conversation_history``, a list of utterances with ``turn``,
  ``role`` (``user`` or ``model``), ``content``, and for model utterances ``within_turn_id``,
  ``model_name``, ``score`` (the participant's 1-100 rating) and ``if_chosen`` (the response the
  conversation went on with). Each turn rated by the user gives one pair: its **highest-rated vs
  lowest-rated** response. A turn whose best score is shared by two responses, or whose responses
  all have the same score, is skipped (no single preferred answer) and counted as ``tie``; a turn
  with fewer than two rated responses is counted as ``single_response``. The question is the
  user's message of that turn, after the earlier turns of the conversation (user messages and the
  response the conversation went on with).
- ``arena``: the personalised Chatbot Arena release SynthesizeMe uses
  (``MichaelR207/chatbot_arena_personalized_0125``). One row per labelled pair: ``user_id``,
  ``context`` (the conversation before the answers, a list of ``{role, content}``), ``chosen`` and
  ``rejected`` (the winning and losing answer, ``{role, content}``), and the release's own
  ``split`` (``train``, ``val``, ``test``); other columns are ignored.

Per user, the pairs are ordered (PRISM: by ``generated_datetime`` when present, then file
order and turn; arena: file order) and split: the held-out pairs become evaluation records, the
others that user's ``preferences``. ``holdout_order=temporal`` (default) holds out the user's last
``holdout`` pairs; ``shuffled`` a seeded choice; ``source`` the release's own ``test`` rows (arena
only). A user left with fewer than ``min_fit`` fitting pairs, or with no held-out pair, is skipped
and counted; nothing is dropped without a count.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from prbench.errors import PrbenchUserError
from prbench.issues import short
from prbench.jsonio import Issue, Row

#: source -> (hub dataset id, hub config or None, hub splits to read)
HUB_SOURCES: dict[str, tuple[str, str | None, tuple[str, ...]]] = {
    "prism": ("HannahRoseKirk/prism-alignment", "conversations", ("train",)),
    "arena": ("MichaelR207/chatbot_arena_personalized_0125", None, ("train", "validation",
                                                                     "test")),
}
#: the revision read when none is given: the ``main`` branch (a commit cannot be looked up
#: offline); every conversion report records the revision it read
HUB_REVISION = "main"
HOLDOUT_ORDERS = ("temporal", "shuffled", "source")
DOMAINS = {"prism": "PRISM", "arena": "Chatbot_Arena"}


@dataclasses.dataclass(frozen=True)
class UserPair:
    """One labelled pair of a user, as read from a source row."""

    user: str
    question: str
    chosen: str
    rejected: str
    order: tuple[Any, ...]
    where: str
    category: str = ""
    split: str = ""


@dataclasses.dataclass
class ConvertReport:
    """What a conversion read, wrote and skipped (printed by ``prbench prefs convert``)."""

    source: str
    input: str
    revision: str | None
    files: list[str]
    rows: int = 0
    pairs: int = 0
    skipped_pairs: Counter[str] = dataclasses.field(default_factory=Counter)
    users: int = 0
    users_kept: int = 0
    skipped_users: dict[str, str] = dataclasses.field(default_factory=dict)
    records: int = 0
    fitting_pairs: int = 0
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready report."""
        out = dataclasses.asdict(self)
        out["skipped_pairs"] = dict(sorted(self.skipped_pairs.items()))
        out["n_skipped_users"] = len(self.skipped_users)
        return out


class ConvertError(PrbenchUserError, ValueError):
    """The input cannot be converted (every problem listed, one a line)."""


class _UserIds:
    """Checks each row's ``user_id``: a printable, non-empty id, one type per id text.

    Ids become text in the records (``user_id``, record ids), so ``1`` and ``"1"`` would merge
    two users into one, and an id with a newline or another control character is refused by
    ``prbench validate``; both are refused here, naming the row.
    """

    def __init__(self) -> None:
        self.seen: dict[str, tuple[Any, str]] = {}
        #: each id's NFC form -> the first text written in that form, and where
        self.forms: dict[str, tuple[str, str]] = {}

    def issue(self, row: Row, value: Any) -> Issue | None:
        """The issue of this row's ``user_id`` (None: fine)."""
        from prbench.unicode_text import id_character_problem, invisible_only

        text = str(value)
        if not text.strip() or invisible_only(text):
            return row.issue(None, "user_id", "is empty", "empty-field")
        problem = id_character_problem(text)
        if problem:
            return row.issue(None, "user_id", problem[0], problem[1])
        where = f"{row.file}:{row.line}"
        first = self.seen.setdefault(text, (value, where))
        if type(first[0]) is not type(value):
            return row.issue(
                None, "user_id",
                f"{value!r} ({type(value).__name__}) and {first[0]!r} ({type(first[0]).__name__},"
                f" at {first[1]}) would become the same user {text!r}; write every user_id the "
                "same way (as strings)", "user-id-types-merge")
        other, at = self.forms.setdefault(unicodedata.normalize("NFC", text), (text, where))
        if other != text:
            return row.issue(
                None, "user_id",
                f"{text!r} ({_form(text)}) and {other!r} ({_form(other)}, at {at}) are one name "
                "in two Unicode forms, which would be two users that look the same; write every "
                "user_id in one form (NFC)", "user-id-unicode-forms")
        return None


def _form(text: str) -> str:
    """``NFC``, ``NFD`` or ``mixed``: the Unicode normalisation form ``text`` is written in."""
    if unicodedata.is_normalized("NFC", text):
        return "NFC"
    return "NFD" if unicodedata.is_normalized("NFD", text) else "mixed forms"


def _same_answers(chosen: str, rejected: str) -> bool:
    """Whether the two answers cannot be told apart, by the rule ``prbench validate`` uses.

    That rule (:func:`prbench.unicode_text.comparable`: equal up to NFKC, invisible characters
    and kinds of space, e.g. one NBSP) refuses such a record, so such a pair is skipped and
    counted here, never written.
    """
    from prbench.unicode_text import comparable

    return comparable(chosen) == comparable(rejected)


def _blank(text: str) -> bool:
    from prbench.unicode_text import invisible_only

    return not text.strip() or invisible_only(text)


# -- reading ---------------------------------------------------------------------------------------


def read_source_rows(source: str, input_: str, revision: str | None = None
                     ) -> tuple[list[Row], list[str]]:
    """The rows of a local file or folder, or of the source's hub dataset at ``revision``.

    Raises:
        prbench.records.DataSourceError: the path does not exist, or the hub cannot be reached.
        prbench.records.RecordValidationError: a file has unreadable lines (each one named).
    """
    from prbench.jsonio import read_rows, scan_folder
    from prbench.records import DataSourceError, RecordValidationError, is_hub_id

    if is_hub_id(input_):
        return _hub_rows(source, input_, revision)
    path = Path(input_)
    if not path.exists():
        raise DataSourceError(f"{input_}: no such file or directory")
    files = scan_folder(path)[0] if path.is_dir() else [path]
    if not files:
        raise DataSourceError(f"{input_}: no .jsonl/.json/.parquet files in this folder")
    rows: list[Row] = []
    issues: list[Issue] = []
    for f in files:
        for item in read_rows(f):
            (issues if isinstance(item, Issue) else rows).append(item)
    if issues:
        raise RecordValidationError(issues)
    return rows, [str(f) for f in files]


def _hub_rows(source: str, dataset: str, revision: str | None) -> tuple[list[Row], list[str]]:
    from prbench.records import DataSourceError

    revision = revision or HUB_REVISION
    if os.environ.get("HF_DATASETS_OFFLINE") == "1" or os.environ.get("HF_HUB_OFFLINE") == "1":
        raise DataSourceError(
            f"cannot load the hub dataset {dataset!r} (revision {revision}) while offline; "
            f"download it elsewhere (`huggingface-cli download --repo-type dataset {dataset} "
            f"--revision {revision} --local-dir DIR`) and pass --input DIR (or the data file)"
        )
    import datasets

    _, config, splits = HUB_SOURCES[source]
    rows: list[Row] = []
    origins = []
    for split in splits:
        try:
            ds = datasets.load_dataset(dataset, name=config, split=split, revision=revision)
        except Exception as exc:
            raise DataSourceError(f"cannot load {dataset!r} config {config} split {split!r} at "
                                  f"revision {revision}: {exc}") from exc
        origin = f"hf://{dataset}@{revision}/{config or 'default'}:{split}"
        origins.append(origin)
        rows += [Row(origin, i, dict(r), unit="row") for i, r in enumerate(ds, start=1)]
    return rows, origins


# -- parsing the two schemas ---------------------------------------------------------------------


def _text(value: Any) -> str | None:
    """A message's text: a string, ``{content: ...}``, or the last message of a list."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return value["content"]
    if isinstance(value, list) and value:
        return _text(value[-1])
    return None


def render_context(messages: Sequence[tuple[str, str]]) -> str:
    """The question shown for a pair: the last user message, after any earlier turns."""
    if len(messages) == 1:
        return messages[0][1].strip()
    names = {"user": "User", "assistant": "Assistant", "model": "Assistant",
             "system": "System"}
    earlier = "\n\n".join(f"{names.get(r, r.title())}: {c.strip()}" for r, c in messages[:-1])
    return f"Earlier in the conversation:\n{earlier}\n\nUser: {messages[-1][1].strip()}"


def prism_pairs(rows: Iterable[Row], skipped: Counter[str]) -> Iterator[UserPair]:
    """The pairs of PRISM ``conversations`` rows (see the module docstring).

    Raises:
        ConvertError: rows that do not have the published fields (all of them listed).
    """
    issues: list[Issue] = []
    users = _UserIds()
    for n, row in enumerate(rows):
        data = row.data
        bad = _missing(row, data, {"user_id": (str, int), "conversation_history": (list,)})
        bad = bad or [i for i in (users.issue(row, data["user_id"]),) if i is not None]
        if bad:
            issues += bad
            continue
        turns: dict[int, dict[str, Any]] = {}
        for i, u in enumerate(data["conversation_history"]):
            field = f"conversation_history[{i}]"
            if not isinstance(u, Mapping) or not isinstance(u.get("content"), str) \
                    or u.get("role") not in ("user", "model") \
                    or isinstance(u.get("turn"), bool) or not isinstance(u.get("turn"), int):
                issues.append(row.issue(None, field, "expected {turn (int), role ('user' or "
                                        "'model'), content (str), ...}", "bad-prism-utterance"))
                continue
            if _blank(u["content"]):
                issues.append(row.issue(None, f"{field}.content", f"is empty (a {u['role']} "
                                        "message)", "empty-answer" if u["role"] == "model"
                                        else "empty-field"))
                continue
            t = turns.setdefault(u["turn"], {"user": None, "models": []})
            if u["role"] == "user":
                t["user"] = u["content"]
                continue
            score = u.get("score")
            if isinstance(score, bool) or not isinstance(score, int | float) \
                    or not math.isfinite(score):
                issues.append(row.issue(None, f"{field}.score", "a model response needs a numeric "
                                        "score", "bad-prism-score"))
                continue
            t["models"].append((float(score), u.get("within_turn_id", 0), u["content"],
                                bool(u.get("if_chosen"))))
        history: list[tuple[str, str]] = []
        for turn in sorted(turns):
            t = turns[turn]
            if t["user"] is None:
                skipped["no_user_message"] += 1
                continue
            messages = [*history, ("user", t["user"])]
            models = sorted(t["models"], key=lambda m: (-m[0], str(m[1])))
            if len(models) < 2:
                skipped["single_response"] += 1
            elif models[0][0] == models[-1][0] or models[0][0] == models[1][0]:
                skipped["tie"] += 1
            elif _same_answers(models[0][2], models[-1][2]):
                skipped["identical_answers"] += 1
            else:
                yield UserPair(
                    user=str(data["user_id"]), question=render_context(messages),
                    chosen=models[0][2], rejected=models[-1][2],
                    order=(str(data.get("generated_datetime") or ""), n, turn),
                    where=f"{row.file}:{row.line} turn {turn}",
                    category=str(data.get("conversation_type") or ""),
                )
            kept = [m for m in t["models"] if m[3]] or models[:1]
            history = [*messages, ("assistant", kept[0][2])] if kept else messages
    if issues:
        raise ConvertError("\n".join(str(i) for i in issues))


def arena_pairs(rows: Iterable[Row], skipped: Counter[str]) -> Iterator[UserPair]:
    """The pairs of the personalised Chatbot Arena release (see the module docstring).

    Raises:
        ConvertError: rows that do not have the published fields (all of them listed).
    """
    issues: list[Issue] = []
    users = _UserIds()
    for n, row in enumerate(rows):
        data = row.data
        bad = _missing(row, data, {"user_id": (str, int), "context": (list, str)})
        bad = bad or [i for i in (users.issue(row, data["user_id"]),) if i is not None]
        chosen, rejected = (_text(data.get(k)) if isinstance(data, Mapping) else None
                            for k in ("chosen", "rejected"))
        for name, value in (("chosen", chosen), ("rejected", rejected)):
            if not bad and value is None:
                bad.append(row.issue(None, name, "expected an answer {role, content}",
                                     "bad-arena-answer"))
            elif not bad and _blank(value):
                bad.append(row.issue(None, name, "is empty", "empty-answer"))
        if bad:
            issues += bad
            continue
        context = data["context"]
        if isinstance(context, str):
            try:
                decoded = json.loads(context)
            except json.JSONDecodeError:
                decoded = context
            context = decoded
            if isinstance(context, str):  # plain text, or a JSON string: one user message
                context = [{"role": "user", "content": context}]
            elif not isinstance(context, list):
                issues.append(row.issue(None, "context", "expected a list of {role, content} "
                                        f"messages, got a string holding JSON "
                                        f"{type(context).__name__} {short(context)}",
                                        "bad-arena-context"))
                continue
        messages = [(str(m.get("role", "user")), m["content"]) for m in context
                    if isinstance(m, Mapping) and isinstance(m.get("content"), str)]
        if not messages or len(messages) != len(context):
            issues.append(row.issue(None, "context", "expected a list of {role, content} "
                                    "messages", "bad-arena-context"))
            continue
        if _blank(messages[-1][1]):
            issues.append(row.issue(None, f"context[{len(messages) - 1}].content",
                                    "is empty (the question)", "empty-field"))
            continue
        assert chosen is not None and rejected is not None
        if _same_answers(chosen, rejected):
            skipped["identical_answers"] += 1
            continue
        yield UserPair(user=str(data["user_id"]), question=render_context(messages),
                       chosen=chosen, rejected=rejected, order=(n,),
                       where=f"{row.file}:{row.line}", split=str(data.get("split") or ""))
    if issues:
        raise ConvertError("\n".join(str(i) for i in issues))


def _missing(row: Row, data: Any, wanted: Mapping[str, tuple[type, ...]]) -> list[Issue]:
    """An issue per field of ``wanted`` that ``data`` lacks or holds with another type."""
    if not isinstance(data, Mapping):
        return [row.issue(None, None, f"expected a JSON object, got {type(data).__name__}",
                          "not-object")]
    out = []
    for key, types in wanted.items():
        if key not in data:
            out.append(row.issue(None, key, "required field is missing", "missing-field"))
        elif isinstance(data[key], bool) or not isinstance(data[key], types):
            names = " or ".join(t.__name__ for t in types)
            out.append(row.issue(None, key, f"expected {names}, got {type(data[key]).__name__}",
                                 "wrong-type"))
    return out


# -- per-user split into records -----------------------------------------------------------------


def build_records(pairs: Iterable[UserPair], report: ConvertReport, *, holdout: int,
                  min_fit: int, holdout_order: str, seed: int) -> list[dict[str, Any]]:
    """One record per held-out pair; each carries the user's other pairs as ``preferences``."""
    from prbench.hashing import seeded_unit

    by_user: dict[str, list[UserPair]] = {}
    for p in pairs:
        by_user.setdefault(p.user, []).append(p)
        report.pairs += 1
    report.users = len(by_user)
    records = []
    for user in sorted(by_user):
        ordered = sorted(by_user[user], key=lambda p: p.order)
        if holdout_order == "source":
            held = [p for p in ordered if p.split == "test"]
        elif holdout_order == "shuffled":
            held = sorted(ordered, key=lambda p: seeded_unit("prefs-holdout", seed, user,
                                                             p.where))[:holdout]
        else:
            held = ordered[-holdout:] if holdout else []
        held_ids = {id(p) for p in held}
        fit = [p for p in ordered if id(p) not in held_ids]
        if not held:
            report.skipped_users[user] = f"no held-out pair ({len(ordered)} pairs)"
            continue
        if len(fit) < min_fit:
            report.skipped_users[user] = (f"{len(fit)} fitting pair(s) < min_fit={min_fit} "
                                          f"({len(ordered)} pairs)")
            continue
        seen = {(p.question.strip(), p.chosen.strip(), p.rejected.strip()) for p in fit}
        prefs = [{"question": p.question, "chosen": p.chosen, "rejected": p.rejected}
                 for p in fit]
        report.users_kept += 1
        report.fitting_pairs += len(prefs)
        for k, p in enumerate(sorted(held, key=lambda p: p.order), start=1):
            if (p.question.strip(), p.chosen.strip(), p.rejected.strip()) in seen:
                report.skipped_pairs["held_out_duplicates_a_fitting_pair"] += 1
                continue
            records.append({
                "id": f"{report.source}-{user}-{k}", "user_id": user,
                "domain": DOMAINS[report.source], "category": p.category,
                "question": p.question, "chosen": p.chosen, "rejected": p.rejected,
                "profile": [], "preferences": prefs,
            })
    report.records = len(records)
    return records


def convert(source: str, input_: str, *, revision: str | None = None, holdout: int = 2,
            min_fit: int = 4, holdout_order: str = "temporal", seed: int = 0,
            ) -> tuple[list[dict[str, Any]], ConvertReport]:
    """Read a source and build its records (see the module docstring).

    Raises:
        ValueError: an unknown source or a bad setting.
        ConvertError: rows without the published fields.
        prbench.records.DataSourceError: the input cannot be found or reached.
    """
    if source not in HUB_SOURCES:
        raise ValueError(f"unknown source {source!r}; one of {', '.join(HUB_SOURCES)}")
    if holdout_order not in HOLDOUT_ORDERS:
        raise ValueError(f"holdout_order must be one of {HOLDOUT_ORDERS}")
    if holdout_order == "source" and source != "arena":
        raise ValueError("holdout_order=source needs a release with its own split column (arena)")
    if holdout < 1 or min_fit < 1:
        raise ValueError("holdout and min_fit must be at least 1")
    from prbench.records import is_hub_id

    rows, files = read_source_rows(source, input_, revision)
    report = ConvertReport(
        source=source, input=input_, files=files,
        revision=(revision or HUB_REVISION) if is_hub_id(input_) else None,
        settings={"holdout": holdout, "min_fit": min_fit, "holdout_order": holdout_order,
                  "seed": seed, "hub_dataset": HUB_SOURCES[source][0],
                  "hub_config": HUB_SOURCES[source][1]},
    )
    report.rows = len(rows)
    reader = prism_pairs if source == "prism" else arena_pairs
    pairs = list(reader(rows, report.skipped_pairs))
    records = build_records(pairs, report, holdout=holdout, min_fit=min_fit,
                            holdout_order=holdout_order, seed=seed)
    return records, report


__all__ = ["HOLDOUT_ORDERS", "HUB_REVISION", "HUB_SOURCES", "ConvertError", "ConvertReport",
           "UserPair", "arena_pairs", "build_records", "convert", "prism_pairs",
           "read_source_rows", "render_context"]
