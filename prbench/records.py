"""The record schema of Personalized RewardBench, and loading with validation.

A record is one (user, question) with the user's past posts (``profile``), the hidden ``narrative``
and ``rubric_aspects``, and the ``chosen``/``rejected`` pair. Sources: one ``.jsonl``/``.ndjson``/
``.json``/``.parquet`` file, a directory of per-domain files (the domain is the file name), the
bundled sample (``sample``), or a hub dataset id at a revision (:data:`HUB_REVISION` unless given).

Validation names the file, line (or row), record id and field of every problem, and nothing is
dropped silently: a row that cannot become a record is reported as an error, a path of a folder
that is not read is listed in :attr:`LoadReport.skipped` with the reason, and an unknown field is
a warning (an error when it looks like a misspelt schema field whose value would be lost).
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from prbench.jsonio import (
    SUFFIXES,
    Issue,
    Row,
    read_rows,
    scan_folder,
    summarize,
    text_problems,
)
from prbench.options import suggest

log = logging.getLogger(__name__)

DOMAINS = (
    "Art_and_Entertainment",
    "Lifestyle_and_Personal_Development",
    "Society_and_Culture",
)
HUB_DATASET = "QiyaoMa/Personalized-RewardBench"
#: The hub revision read when none is given. It is the ``main`` branch, not pinned to a commit yet;
#: every results manifest records the revision read. Change it together with the task README.
HUB_REVISION = "main"
SAMPLE_DIR = Path(__file__).parent / "data" / "sample" / "pairs"
SAMPLE_POOLS = Path(__file__).parent / "data" / "sample" / "pools.jsonl"
#: the bundled, hand-written per-user preference sample (records with ``user_id`` and
#: ``preferences``; see :mod:`prbench.preference_data`), read as the source ``preferences_sample``
PREFERENCES_SAMPLE_DIR = Path(__file__).parent / "data" / "preferences_sample" / "pairs"
#: local sources read by name
NAMED_SOURCES = {"sample": SAMPLE_DIR, "preferences_sample": PREFERENCES_SAMPLE_DIR}

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


class RecordValidationError(ValueError):
    """The input has problems; ``issues`` lists every one."""

    def __init__(self, issues: Sequence[Issue], *, limit: int = 25) -> None:
        self.issues = list(issues)
        shown = "\n".join(f"  {i}" for i in self.issues[:limit])
        more = len(self.issues) - limit
        tail = f"\n  ... and {more} more" if more > 0 else ""
        super().__init__(f"{len(self.issues)} problem(s) in the input:\n{shown}{tail}")


class DataSourceError(ValueError):
    """The data source cannot be found or reached."""


@dataclasses.dataclass
class LoadReport:
    """Everything a load produced: the valid records and every issue.

    Attributes:
        records: the records that passed validation.
        issues: every problem found (a row with an issue is not in ``records``, except for
            file-level issues such as a BOM, which do not invalidate the rows).
        rows: rows read, including invalid ones.
        files: the files read.
        warnings: things that do not stop a load (an unknown field, kept as an extra field).
        skipped: every path of a source folder that was not read, with the reason (``line`` is
            ``None``, ``code`` starts with ``skipped-``).
    """

    records: list[Record]
    issues: list[Issue]
    rows: int
    files: list[str]
    warnings: list[Issue] = dataclasses.field(default_factory=list)
    skipped: list[Issue] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when there is no issue."""
        return not self.issues


class RecordChecker:
    """Validates decoded rows into records, collecting every issue in ``issues``.

    One checker per load: it remembers the ids it has seen to report duplicates. Subclass it to
    validate variants of the schema (``prbench build`` checks records that have no answers yet).
    """

    def __init__(self) -> None:
        self.issues: list[Issue] = []
        self.warnings: list[Issue] = []
        self.seen_ids: dict[str, str] = {}

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
                f"expected a string, got {type(value).__name__} {_short(value)}",
                code,
            )
            return None
        if required and not value.strip():
            code = "empty-answer" if field in ("chosen", "rejected") else "empty-field"
            self.problem(row, rid, name, "is empty", code)
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
                f"expected a JSON object, got {type(data).__name__} {_short(data)}",
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
        results file); see :func:`prbench.jsonio.text_problems`.
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
                f"expected a string, got {type(value).__name__} {_short(value)}",
                "wrong-type",
            )
            return None
        rid = str(value)
        if not rid.strip():
            self.problem(row, None, "id", "is empty", "empty-field")
            return None
        where = f"{row.file}:{row.line}"
        if rid in self.seen_ids:
            self.problem(
                row,
                rid,
                "id",
                f"duplicate id (first seen at {self.seen_ids[rid]})",
                "duplicate-id",
            )
            return None
        self.seen_ids[rid] = where
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
                f"expected a list, got {type(value).__name__} {_short(value)}",
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
        got = f"{type(item).__name__} {_short(item)}"
        return field, f"expected an object {{id, category, text}}, got {got}", "bad-profile-item"
    text = item.get("text")
    if not isinstance(text, str) or not text.strip():
        what = "missing" if "text" not in item else f"not a non-empty string ({_short(text)})"
        return f"{field}.text", f"is {what}", "bad-profile-item"
    pid = item.get("id", i)
    if isinstance(pid, bool) or not isinstance(pid, str | int):
        return f"{field}.id", f"expected a string, got {_short(pid)}", "bad-profile-item"
    cat = item.get("category", "")
    if not isinstance(cat, str):
        return f"{field}.category", f"expected a string, got {_short(cat)}", "bad-profile-item"
    if str(pid) in seen:
        also = f"also profile[{seen[str(pid)]}]"
        return f"{field}.id", f"duplicate post id {str(pid)!r} ({also})", "duplicate-post-id"
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


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def domain_from_path(path: Path) -> str:
    """The domain a file belongs to: its stem (``Art_and_Entertainment.jsonl`` -> that name)."""
    return path.stem


def resolve_files(source: str | os.PathLike[str]) -> list[Path]:
    """The record files a local source names (one file, or the data files of a directory).

    Raises:
        DataSourceError: the path does not exist or a directory holds no data files.
    """
    return scan_source(source)[0]


def scan_source(source: str | os.PathLike[str]) -> tuple[list[Path], list[Issue]]:
    """The files of a local source to read, and every path of a folder that is not read.

    A single path that exists in any form (a FIFO, a device, a broken link) is returned as is:
    reading it reports what it is. A folder is listed by :func:`prbench.jsonio.scan_folder`
    (a file named after one of :data:`DOMAINS` is read, so that an unreadable one is an error).

    Raises:
        DataSourceError: the path does not exist, or a directory holds no data files.
    """
    path = NAMED_SOURCES.get(str(source), Path(source))
    try:
        path.lstat()
    except FileNotFoundError:
        raise DataSourceError(f"{source}: no such file or directory") from None
    except OSError as exc:
        raise DataSourceError(f"{source}: cannot be read: {exc.strerror or exc}") from None
    if not path.is_dir():
        return [path], []
    try:
        files, skipped = scan_folder(path, DOMAINS)
    except OSError as exc:
        raise DataSourceError(f"{path}: cannot list the folder: {exc.strerror or exc}") from None
    if not files:
        listed = "".join(f"\n  {i}" for i in skipped)
        raise DataSourceError(f"{path}: no {', '.join(SUFFIXES)} files in this directory{listed}")
    return files, skipped


def is_hub_id(source: str) -> bool:
    """True for ``owner/name`` strings that are not local paths."""
    text = str(source)
    return (
        text.count("/") == 1
        and not os.path.lexists(text)
        and not text.startswith((".", "/", "~"))
        and not text.endswith(SUFFIXES)
    )


def validate(
    source: str | os.PathLike[str],
    *,
    revision: str | None = None,
    split: str = "test",
    domains: Iterable[str] | None = None,
) -> LoadReport:
    """Read and validate a source, collecting every issue (never raises on bad records).

    Args:
        source: a file, a directory of per-domain files, ``"sample"``, or a hub dataset id.
        revision: the hub revision (hub ids only); defaults to :data:`HUB_REVISION`.
        split: the hub split (hub ids only).
        domains: only these domains (file stems / hub configs); ``None`` for all.

    Raises:
        DataSourceError: the source does not exist, or a hub id cannot be reached.
    """
    wanted = set(domains) if domains is not None else None
    if is_hub_id(str(source)):
        return _validate_rows(_hub_rows(str(source), revision, split, wanted))
    files, skipped = scan_source(source)
    if wanted is not None:
        files = [f for f in files if domain_from_path(f) in wanted]
        if not files:
            raise DataSourceError(f"{source}: no file for the domains {sorted(wanted)}")
    return _validate_rows(((f, domain_from_path(f)) for f in files), skipped)


def _validate_rows(
    parts: Iterable[tuple[Path | str, str | list[Row]]], skipped: Sequence[Issue] = ()
) -> LoadReport:
    checker = RecordChecker()
    records: list[Record] = []
    rows = 0
    files: list[str] = []
    for part in parts:
        origin, domain_or_rows = part
        if isinstance(domain_or_rows, str):
            path = Path(origin)
            files.append(str(path))
            domain = domain_or_rows
            stream: Iterable[Row | Issue] = read_rows(path)
        else:  # hub rows, already decoded
            files.append(str(origin))
            domain = str(origin).rsplit(":", 1)[-1]
            stream = domain_or_rows
        for item in stream:
            if isinstance(item, Issue):
                checker.issues.append(item)
                if item.line is not None and item.code not in ("bom",):
                    rows += 1
                continue
            rows += 1
            record = checker.record(item, domain)
            if record is not None:
                records.append(record)
    return LoadReport(
        records=records,
        issues=checker.issues,
        rows=rows,
        files=files,
        warnings=checker.warnings,
        skipped=list(skipped),
    )


def _hub_rows(
    dataset: str, revision: str | None, split: str, wanted: set[str] | None
) -> Iterable[tuple[str, list[Row]]]:
    revision = revision or HUB_REVISION
    if os.environ.get("HF_DATASETS_OFFLINE") == "1" or os.environ.get("HF_HUB_OFFLINE") == "1":
        raise DataSourceError(
            f"cannot load the hub dataset {dataset!r} (revision {revision}) while offline "
            "(HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set). Download it on a machine with internet "
            "(e.g. `huggingface-cli download --repo-type dataset "
            f"{dataset} --revision {revision} --local-dir DIR`) and point prbench at the local "
            "files instead: `prbench validate DIR` or "
            '`--metadata \'{"prbench_data": "DIR"}\'`; or try the bundled sample (`sample`).'
        )
    try:
        import datasets
    except ImportError as exc:  # pragma: no cover - datasets is a core dependency
        raise DataSourceError("loading a hub dataset needs the `datasets` package") from exc
    configs = sorted(wanted) if wanted is not None else list(DOMAINS)
    for config in configs:
        try:
            ds = datasets.load_dataset(dataset, name=config, split=split, revision=revision)
        except Exception as exc:
            raise DataSourceError(
                f"cannot load {dataset!r} config {config!r} split {split!r} at revision "
                f"{revision}: {exc}. Without internet, download the files elsewhere and pass the "
                "local folder instead."
            ) from exc
        origin = f"hf://{dataset}@{revision}/{split}:{config}"
        yield origin, [Row(origin, i, dict(r), unit="row") for i, r in enumerate(ds, start=1)]


def load_records(
    source: str | os.PathLike[str],
    *,
    revision: str | None = None,
    split: str = "test",
    domains: Iterable[str] | None = None,
) -> list[Record]:
    """Load and validate records; any issue stops the load.

    Warnings and skipped folder paths do not stop it; they are logged, one line per kind.

    Raises:
        RecordValidationError: one or more problems, every one listed with file, line, id, field.
        DataSourceError: the source does not exist or cannot be reached.
    """
    report = validate(source, revision=revision, split=split, domains=domains)
    if report.issues:
        raise RecordValidationError(report.issues)
    if not report.records:
        raise RecordValidationError(
            [Issue(", ".join(report.files), None, None, None, "no records", "empty-file")]
        )
    for line in summarize(report.warnings) + [str(i) for i in report.skipped]:
        log.warning("prbench data: %s", line)
    return report.records


def file_hashes(source: str | os.PathLike[str]) -> dict[str, str]:
    """SHA-256 of every local file of a source (for results manifests); ``{}`` for hub ids."""
    import hashlib

    if is_hub_id(str(source)):
        return {}
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in resolve_files(source)}
