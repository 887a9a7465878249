"""The record schema of Personalized RewardBench, and loading with validation.

A record is one (user, question) with the user's past posts (``profile``), the hidden ``narrative``
and ``rubric_aspects``, and the ``chosen``/``rejected`` pair. Sources: one ``.jsonl``/``.ndjson``/
``.json``/``.parquet`` file, a directory of per-domain files (the domain is the file name), the
bundled sample (``sample``), or a hub dataset id at a revision (:data:`HUB_REVISION` unless given).

Validation names the file, line (or row), record id and field of every problem, and nothing is
dropped silently: a row that cannot become a record is reported as an error, a path of a folder
that is not read is listed in :attr:`LoadReport.skipped` with the reason, and an unknown field is
a warning (an error when it looks like a misspelt schema field whose value would be lost). The
schema and the per-row checks live in :mod:`prbench.record_schema` (re-exported here). Rows are
read as a stream: :func:`validate` can hand each record to a callback without keeping it, so
that checking a large file takes memory for the ids seen, not for the records.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from prbench.errors import PrbenchUserError
from prbench.jsonio import (
    COMPRESSED,
    SUFFIXES,
    Issue,
    Row,
    data_suffix,
    read_rows,
    scan_folder,
    shown_path,
    summarize,
)
from prbench.record_schema import (
    KNOWN_FIELDS,
    MAX_DEPTH,
    OPTIONAL_FIELDS,
    TYPO_CUTOFF,
    ProfileItem,
    Record,
    RecordChecker,
    RubricAspect,
)

__all__ = [
    "DOMAINS",
    "HUB_DATASET",
    "HUB_REVISION",
    "KNOWN_FIELDS",
    "MAX_DEPTH",
    "NAMED_SOURCES",
    "OPTIONAL_FIELDS",
    "PREFERENCES_SAMPLE_DIR",
    "SAMPLE_DIR",
    "SAMPLE_POOLS",
    "TYPO_CUTOFF",
    "DataSourceError",
    "LoadReport",
    "ProfileItem",
    "Record",
    "RecordChecker",
    "RecordValidationError",
    "RubricAspect",
    "domain_from_path",
    "file_hashes",
    "is_hub_id",
    "load_records",
    "resolve_files",
    "scan_source",
    "stream_records",
    "validate",
]

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


class RecordValidationError(PrbenchUserError, ValueError):
    """The input has problems; ``issues`` lists every one."""

    def __init__(self, issues: Sequence[Issue], *, limit: int = 25) -> None:
        self.issues = list(issues)
        shown = "\n".join(f"  {i}" for i in self.issues[:limit])
        more = len(self.issues) - limit
        tail = f"\n  ... and {more} more" if more > 0 else ""
        super().__init__(f"{len(self.issues)} problem(s) in the input:\n{shown}{tail}")


class DataSourceError(PrbenchUserError, ValueError):
    """The data source cannot be found or reached."""


@dataclasses.dataclass
class LoadReport:
    """Everything a load produced: the valid records and every issue.

    Attributes:
        records: the records that passed validation (empty when :func:`validate` was asked not
            to keep them).
        issues: every problem found (a row with an issue is not in ``records``, except for
            file-level issues such as a BOM, which do not invalidate the rows).
        rows: rows read, including invalid ones.
        files: the files read.
        warnings: things that do not stop a load (an unknown field, kept as an extra field).
        skipped: every path of a source folder that was not read, with the reason (``line`` is
            ``None``, ``code`` starts with ``skipped-``).
        valid: how many records passed validation (kept or not).
    """

    records: list[Record]
    issues: list[Issue]
    rows: int
    files: list[str]
    warnings: list[Issue] = dataclasses.field(default_factory=list)
    skipped: list[Issue] = dataclasses.field(default_factory=list)
    valid: int = 0

    @property
    def ok(self) -> bool:
        """True when there is no issue."""
        return not self.issues


def domain_from_path(path: Path) -> str:
    """The domain a file belongs to: its name without the data and compression suffixes.

    ``Art_and_Entertainment.jsonl`` and ``Art_and_Entertainment.jsonl.gz`` -> that name.
    """
    if data_suffix(path)[1] is not None:
        path = Path(path.stem)
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
        kind = "folder" if str(source).endswith(("/", os.sep)) else "file or folder"
        close = difflib.get_close_matches(str(source), list(NAMED_SOURCES), n=1, cutoff=0.75)
        hint = f" (did you mean {close[0]!r}, the bundled one?)" if close else ""
        raise DataSourceError(f"{shown_path(source)}: no such {kind}{hint}") from None
    except OSError as exc:
        raise DataSourceError(
            f"{shown_path(source)}: cannot be read: {exc.strerror or exc}"
        ) from None
    if not path.is_dir():
        return [path], []
    try:
        files, skipped = scan_folder(path, DOMAINS)
    except OSError as exc:
        raise DataSourceError(
            f"{shown_path(path)}: cannot list the folder: {exc.strerror or exc}"
        ) from None
    if not files:
        listed = "".join(f"\n  {i}" for i in skipped)
        raise DataSourceError(
            f"{shown_path(path)}: no {', '.join(SUFFIXES)} files (JSON also as "
            f"{', '.join(COMPRESSED)}) in this directory{listed}"
        )
    return files, skipped


#: an ``owner/name`` hub id: both parts given, of the characters hub names use
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


def is_hub_id(source: str) -> bool:
    """True for ``owner/name`` strings that are not local paths.

    Both parts must be given: ``no_such_dir/`` (a folder, with its slash) or ``/name`` is a
    local path that does not exist, and is reported as such, not looked up on the hub.
    """
    text = str(source)
    return (
        _HUB_ID.fullmatch(text) is not None
        and not os.path.lexists(text)
        and data_suffix(Path(text)) == (None, None)
    )


def validate(
    source: str | os.PathLike[str],
    *,
    revision: str | None = None,
    split: str = "test",
    domains: Iterable[str] | None = None,
    keep_records: bool = True,
    on_record: Callable[[Record], None] | None = None,
) -> LoadReport:
    """Read and validate a source, collecting every issue (never raises on bad records).

    Rows are read and checked one at a time; only the ids seen (hashed when long) are kept for
    the duplicate check, plus the valid records when ``keep_records`` is true.

    Args:
        source: a file, a directory of per-domain files, ``"sample"``, or a hub dataset id.
        revision: the hub revision (hub ids only); defaults to :data:`HUB_REVISION`.
        split: the hub split (hub ids only).
        domains: only these domains (file stems / hub configs); ``None`` for all.
        keep_records: keep the valid records in :attr:`LoadReport.records`; false to check a
            large source in memory that does not grow with it (count in ``valid``).
        on_record: called with each valid record as it is read (e.g. running statistics).

    Raises:
        DataSourceError: the source does not exist, or a hub id cannot be reached.
    """
    wanted = set(domains) if domains is not None else None
    if is_hub_id(str(source)):
        rows = _hub_rows(str(source), revision, split, wanted)
        return _validate_rows(rows, (), keep_records, on_record)
    files, skipped = scan_source(source)
    if wanted is not None:
        files = [f for f in files if domain_from_path(f) in wanted]
        if not files:
            raise DataSourceError(f"{shown_path(source)}: no file for the domains {sorted(wanted)}")
    parts = ((f, domain_from_path(f)) for f in files)
    return _validate_rows(parts, skipped, keep_records, on_record)


def _validate_rows(
    parts: Iterable[tuple[Path | str, str | Iterable[Row]]],
    skipped: Sequence[Issue],
    keep_records: bool,
    on_record: Callable[[Record], None] | None,
) -> LoadReport:
    checker = RecordChecker()
    records: list[Record] = []
    rows = valid = 0
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
        produced = False
        counted = None  # the last line counted as a row: a line may have several issues
        for item in stream:
            produced = True
            if isinstance(item, Issue):
                checker.issues.append(item)
                if item.line not in (None, counted) and item.code != "bom":
                    rows += 1
                    counted = item.line
                continue
            rows += 1
            record = checker.record(item, domain)
            if record is None:
                continue
            valid += 1
            if keep_records:
                records.append(record)
            if on_record is not None:
                on_record(record)
        if not produced:  # e.g. a hub split without rows
            empty = Issue(files[-1], None, None, None, "holds no records", "no-records")
            checker.issues.append(empty)
    return LoadReport(
        records=records,
        issues=checker.issues,
        rows=rows,
        files=files,
        warnings=checker.warnings,
        skipped=list(skipped),
        valid=valid,
    )


def _hub_rows(
    dataset: str, revision: str | None, split: str, wanted: set[str] | None
) -> Iterable[tuple[str, Iterable[Row]]]:
    revision = revision or HUB_REVISION
    if os.environ.get("HF_DATASETS_OFFLINE") == "1" or os.environ.get("HF_HUB_OFFLINE") == "1":
        raise DataSourceError(
            f"{dataset}: no such local file or folder, and as a hub dataset id it cannot be "
            f"loaded (revision {revision}) while offline "
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
                f"{revision}: {exc}. No local file or folder has that name either; without "
                "internet, download the files elsewhere and pass the local folder instead."
            ) from exc
        origin = f"hf://{dataset}@{revision}/{split}:{config}"
        yield origin, (Row(origin, i, dict(r), unit="row") for i, r in enumerate(ds, start=1))


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
    records: list[Record] = []
    stream_records(source, records.append, revision=revision, split=split, domains=domains)
    return records


def stream_records(
    source: str | os.PathLike[str],
    on_record: Callable[[Record], None],
    *,
    revision: str | None = None,
    split: str = "test",
    domains: Iterable[str] | None = None,
) -> int:
    """Load and validate records one at a time, handing each valid one to ``on_record``.

    The same checks as :func:`load_records`, without keeping the records: a caller that stores
    them in another form (the task rows' Arrow columns) never holds every record as Python
    objects. ``on_record`` may have been called for records read before a problem is found;
    the load still fails as a whole.

    Returns:
        The number of records handed over.

    Raises:
        RecordValidationError: one or more problems, every one listed with file, line, id, field.
        DataSourceError: the source does not exist or cannot be reached.
    """
    report = validate(source, revision=revision, split=split, domains=domains,
                      keep_records=False, on_record=on_record)
    if report.issues:
        raise RecordValidationError(report.issues)
    if not report.valid:
        raise RecordValidationError(
            [Issue(", ".join(report.files), None, None, None, "holds no records", "no-records")]
        )
    for line in summarize(report.warnings) + [str(i) for i in report.skipped]:
        log.warning("prbench data: %s", line)
    return report.valid


def file_hashes(source: str | os.PathLike[str]) -> dict[str, str]:
    """SHA-256 of every local file of a source (for results manifests); ``{}`` for hub ids."""
    import hashlib

    if is_hub_id(str(source)):
        return {}
    out = {}
    for path in resolve_files(source):
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        out[str(path)] = digest.hexdigest()
    return out
