"""The record schema of Personalized RewardBench, and loading with validation.

A record is one (user, question) with the user's past posts (``profile``), the hidden ``narrative``
and ``rubric_aspects``, and the ``chosen``/``rejected`` pair. Sources: one ``.jsonl``/``.json``/
``.parquet`` file, a directory of per-domain files (the domain is the file name), the bundled
sample (``sample``), or a hub dataset id with a pinned revision.

Validation names the file, line (or row), record id and field of every problem, and nothing is
dropped silently: a row that cannot become a record is reported as an error.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from prbench.jsonio import SUFFIXES, Issue, Row, read_rows

DOMAINS = (
    "Art_and_Entertainment",
    "Lifestyle_and_Personal_Development",
    "Society_and_Culture",
)
HUB_DATASET = "QiyaoMa/Personalized-RewardBench"
#: The hub revision the tasks pin. Change it together with the task README's version log.
HUB_REVISION = "main"
SAMPLE_DIR = Path(__file__).parent / "data" / "sample" / "pairs"
SAMPLE_POOLS = Path(__file__).parent / "data" / "sample" / "pools.jsonl"

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
    """

    records: list[Record]
    issues: list[Issue]
    rows: int
    files: list[str]

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
        ok = True
        for i, item in enumerate(value):
            field = f"profile[{i}]"
            if not isinstance(item, dict):
                self.problem(
                    row,
                    rid,
                    field,
                    f"expected an object {{id, category, text}}, got "
                    f"{type(item).__name__} {_short(item)}",
                    "bad-profile-item",
                )
                ok = False
                continue
            text = item.get("text")
            if not isinstance(text, str) or not text.strip():
                what = (
                    "missing" if "text" not in item else f"not a non-empty string ({_short(text)})"
                )
                self.problem(row, rid, f"{field}.text", f"is {what}", "bad-profile-item")
                ok = False
                continue
            pid = item.get("id", i)
            if isinstance(pid, bool) or not isinstance(pid, str | int):
                self.problem(
                    row,
                    rid,
                    f"{field}.id",
                    f"expected a string, got {_short(pid)}",
                    "bad-profile-item",
                )
                ok = False
                continue
            cat = item.get("category", "")
            if not isinstance(cat, str):
                self.problem(
                    row,
                    rid,
                    f"{field}.category",
                    f"expected a string, got {_short(cat)}",
                    "bad-profile-item",
                )
                ok = False
                continue
            if str(pid) in seen:
                self.problem(
                    row,
                    rid,
                    f"{field}.id",
                    f"duplicate post id {str(pid)!r} (also profile[{seen[str(pid)]}])",
                    "duplicate-post-id",
                )
                ok = False
                continue
            seen[str(pid)] = i
            extra = {k: v for k, v in item.items() if k not in ("id", "category", "text")}
            items.append(ProfileItem(id=str(pid), category=cat, text=text, extra=extra))
        return tuple(items) if ok else None

    def _rubric(
        self, row: Row, rid: str | None, data: Mapping[str, Any]
    ) -> tuple[RubricAspect, ...] | None:
        value = data.get("rubric_aspects", [])
        if value is None:
            value = []
        if not isinstance(value, list):
            self.problem(
                row,
                rid,
                "rubric_aspects",
                f"expected a list, got {type(value).__name__}",
                "wrong-type",
            )
            return None
        out: list[RubricAspect] = []
        ok = True
        for i, item in enumerate(value):
            field = f"rubric_aspects[{i}]"
            if (
                not isinstance(item, dict)
                or not isinstance(item.get("aspect"), str)
                or not str(item.get("aspect", "")).strip()
            ):
                self.problem(
                    row,
                    rid,
                    f"{field}.aspect" if isinstance(item, dict) else field,
                    "every rubric aspect needs a non-empty string 'aspect'",
                    "bad-rubric-aspect",
                )
                ok = False
                continue
            bad = [k for k in ("evidence", "reason") if k in item and not isinstance(item[k], str)]
            if bad:
                self.problem(
                    row,
                    rid,
                    f"{field}.{bad[0]}",
                    "expected a string",
                    "bad-rubric-aspect",
                )
                ok = False
                continue
            extra = {k: v for k, v in item.items() if k not in ("aspect", "evidence", "reason")}
            out.append(
                RubricAspect(
                    aspect=item["aspect"],
                    evidence=item.get("evidence", ""),
                    reason=item.get("reason", ""),
                    extra=extra,
                )
            )
        return tuple(out) if ok else None


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def domain_from_path(path: Path) -> str:
    """The domain a file belongs to: its stem (``Art_and_Entertainment.jsonl`` -> that name)."""
    return path.stem


def resolve_files(source: str | os.PathLike[str]) -> list[Path]:
    """The record files a local source names (one file, or every data file in a directory).

    Raises:
        DataSourceError: the path does not exist or a directory holds no data files.
    """
    path = Path(source)
    if str(source) == "sample":
        path = SAMPLE_DIR
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in SUFFIXES and p.is_file())
        if not files:
            raise DataSourceError(f"{path}: no {', '.join(SUFFIXES)} files in this directory")
        return files
    raise DataSourceError(f"{source}: no such file or directory")


def is_hub_id(source: str) -> bool:
    """True for ``owner/name`` strings that are not local paths."""
    text = str(source)
    return (
        text.count("/") == 1
        and not Path(text).exists()
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
    files = resolve_files(source)
    if wanted is not None:
        files = [f for f in files if domain_from_path(f) in wanted]
        if not files:
            raise DataSourceError(f"{source}: no file for the domains {sorted(wanted)}")
    return _validate_rows((f, domain_from_path(f)) for f in files)


def _validate_rows(parts: Iterable[tuple[Path | str, str | list[Row]]]) -> LoadReport:
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
    return LoadReport(records=records, issues=checker.issues, rows=rows, files=files)


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
    return report.records


def file_hashes(source: str | os.PathLike[str]) -> dict[str, str]:
    """SHA-256 of every local file of a source (for results manifests); ``{}`` for hub ids."""
    import hashlib

    if is_hub_id(str(source)):
        return {}
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in resolve_files(source)}
