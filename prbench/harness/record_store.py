"""The records behind the task rows: each data source held once, as Arrow columns.

lm-eval turns every row it requests into a Python dict and keeps it until the run ends, and its
logged samples hold another. A row that carried its whole record as JSON (``record_json``, about
the record's size in the file) therefore kept a second, Python copy of the data set in memory.
A row carries ``record_ref`` instead, a short reference into this store:

- :func:`load` reads and validates a source one record at a time
  (:func:`prbench.records.stream_records`) into Arrow columns, in chunks of :data:`CHUNK` records:
  the fields the rows show (id, domain, category, question, answers, where it was read), the
  record's JSON (zlib-compressed: it is read back only for the few uses below), and what
  profiles and the profile sources need (:func:`record_digest
  <prbench.profiles.lazy.record_digest>`, :func:`user_key <prbench.profiles.sources.user_key>`,
  the answers' word counts). No source is ever held as Python records; the tables of one source
  are shared by every task over it, and a task's row columns are slices of them where the
  domain's records are contiguous.
- :func:`sourced` gives the records of a profile source other than the record's own
  (``swapped``, ``shuffled``): the record as the builder reads it, with the donor's or the drawn
  posts, encoded chunk by chunk.
- :func:`record_json` / :func:`record` read one record back by reference (a diagnostic scorer's
  hidden fields, a profile built when its row is scored), and :func:`restore` puts
  ``record_json`` back in a logged sample's ``doc`` in place of ``record_ref``, so samples files
  carry the record as the readers (``prbench report``, ``explore``, ``aspects``) expect.

A reference is ``<store id>:<index>``; the store id is a digest of what was loaded (source,
revision, split, domains, profile source), so every process of a data parallel run names the
same record alike.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: records per Arrow chunk: a column is never held whole as Python objects
CHUNK = 1024
#: zlib level of the stored record JSON (1: the fastest; text shrinks 2-4x)
ZLIB_LEVEL = 1
#: the columns of a :class:`RecordTable`, and their Arrow types (by name: pyarrow loads lazily)
COLUMNS = {
    "id": "string", "domain": "string", "category": "string", "question": "string",
    "chosen": "string", "rejected": "string", "n_posts": "int64", "source": "string",
    "record_zjson": "binary", "digest": "string", "user": "string", "donor": "string",
    "chosen_words": "int64", "rejected_words": "int64",
}


class UnknownRecordError(LookupError):
    """A ``record_ref`` into a store this process has not loaded."""


@dataclasses.dataclass(frozen=True)
class RecordTable:
    """The records of one load (or one profile source of it), one Arrow column per field.

    Attributes:
        store_id: what :func:`ref` names the records by.
        table: a ``pyarrow.Table`` with the :data:`COLUMNS`.
    """

    store_id: str
    table: Any

    def __len__(self) -> int:
        """The number of records."""
        return int(self.table.num_rows)

    def column(self, name: str) -> list[Any]:
        """One column as Python values (for the small columns: ids, digests, users)."""
        return self.table.column(name).to_pylist()


_TABLES: dict[tuple[Any, ...], RecordTable] = {}
_JSON: dict[str, Any] = {}


def _store_id(key: tuple[Any, ...]) -> str:
    return hashlib.sha256(json.dumps(key, default=str).encode("utf-8")).hexdigest()[:16]


class _Columns:
    """Arrow columns filled one record at a time, converted every :data:`CHUNK` records."""

    def __init__(self) -> None:
        self._rows: dict[str, list[Any]] = {name: [] for name in COLUMNS}
        self._chunks: dict[str, list[Any]] = {name: [] for name in COLUMNS}

    def add(self, record: Any, *, user: str, donor: str = "") -> None:
        from prbench.profiles.lazy import record_digest

        values = {
            "id": record.id, "domain": record.domain, "category": record.category,
            "question": record.question, "chosen": record.chosen, "rejected": record.rejected,
            "n_posts": len(record.profile), "source": record.source,
            "record_zjson": _pack(json.dumps(record.to_dict(), ensure_ascii=False)),
            "digest": record_digest(record), "user": user, "donor": donor,
            "chosen_words": len(record.chosen.split()),
            "rejected_words": len(record.rejected.split()),
        }
        for name, value in values.items():
            self._rows[name].append(value)
        if len(self._rows["id"]) >= CHUNK:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        for name, kind in COLUMNS.items():
            self._chunks[name].append(pa.array(self._rows[name], type=getattr(pa, kind)()))
            self._rows[name] = []

    def table(self) -> Any:
        import pyarrow as pa

        if self._rows["id"] or not self._chunks["id"]:
            self._flush()
        names = list(COLUMNS)
        return pa.Table.from_arrays(
            [pa.chunked_array(self._chunks[n]) for n in names], names=names
        )


def _keep(key: tuple[Any, ...], table: Any) -> RecordTable:
    store = RecordTable(_store_id(key), table)
    _TABLES[key] = store
    _JSON[store.store_id] = table.column("record_zjson")
    return store


def load(
    source: str, *, revision: str | None, split: str, domains: Sequence[str] | None
) -> RecordTable:
    """The validated records of a source (loaded once per process).

    Raises:
        prbench.records.RecordValidationError: the data has problems.
        prbench.records.DataSourceError: the source cannot be found or reached.
    """
    from prbench.profiles.sources import user_key
    from prbench.records import stream_records

    key = ("load", source, revision, split, None if domains is None else tuple(sorted(domains)))
    if key not in _TABLES:
        columns = _Columns()
        stream_records(source, lambda r: columns.add(r, user=user_key(r)), revision=revision,
                       split=split, domains=domains)
        _keep(key, columns.table())
    return _TABLES[key]


def select(
    store: RecordTable, domain: str | None, columns: Sequence[str]
) -> tuple[Any, list[int] | None]:
    """``columns`` of the records of one domain (all for ``None``), and their indexes in ``store``.

    The indexes are ``None`` when every record is kept. The columns are the store's own (no
    copy) for every record or a domain whose records are contiguous, as in a file per domain;
    otherwise a copy of just these columns.
    """
    table = store.table.select(list(columns))
    if domain is None:
        return table, None
    picks = [i for i, d in enumerate(store.column("domain")) if d == domain]
    if picks and picks[-1] - picks[0] + 1 == len(picks):
        return table.slice(picks[0], len(picks)), picks
    import pyarrow as pa

    return table.take(pa.array(picks, pa.int64())), picks


def domain_positions(store: RecordTable, picks: Sequence[int] | None) -> list[int]:
    """Each picked record's 0-based place among the records of its domain, in ``store``'s order.

    That is the place a script that walks one domain's records in the data's order gives it
    (the released pairwise script draws each pair's order from it); ``picks`` as :func:`select`
    returns them (``None``: every record).
    """
    seen: dict[str, int] = {}
    places = []
    for domain in store.column("domain"):
        places.append(seen.get(domain, 0))
        seen[domain] = places[-1] + 1
    return places if picks is None else [places[i] for i in picks]


def sourced(
    store: RecordTable,
    picks: Sequence[int] | None,
    profile_source: str,
    *,
    seed: int,
    k: int,
) -> RecordTable:
    """The records ``picks`` of ``store`` with the posts of a profile source (not ``own``).

    Each record is what the profile builder reads: for ``swapped`` the posts of another user of
    its domain (``donor`` names the record they came from; ``user`` is that user), for
    ``shuffled`` ``k`` of its own posts drawn at random; see :mod:`prbench.profiles.sources`.
    Decoded and encoded :data:`CHUNK` records at a time.

    Raises:
        prbench.profiles.sources.ProfileSourceError: ``swapped`` on a domain with one user.
    """
    from prbench.profiles.sources import donor_indices, shuffled_posts, user_key

    key = (store.store_id, tuple(picks) if picks is not None else None, profile_source, seed,
           k if profile_source == "shuffled" else None)
    if key in _TABLES:
        return _TABLES[key]
    index = list(range(len(store))) if picks is None else list(picks)
    donors: list[int] | None = None
    if profile_source == "swapped":
        ids, domains, users = (store.column(n) for n in ("id", "domain", "user"))
        donors = donor_indices([ids[i] for i in index], [domains[i] for i in index],
                               [users[i] for i in index], seed)
    sources = store.column("source")
    columns = _Columns()
    for pos, i in enumerate(index):
        record = _decode(store, i, sources[i])
        if donors is not None:
            donor = _decode(store, index[donors[pos]], sources[index[donors[pos]]])
            columns.add(dataclasses.replace(record, profile=donor.profile),
                        user=user_key(donor), donor=donor.id)
        else:
            columns.add(dataclasses.replace(record, profile=shuffled_posts(record, k, seed)),
                        user=user_key(record))
    return _keep(key, columns.table())


def _decode(store: RecordTable, index: int, source: str) -> Any:
    return _record(_unpack(store.table.column("record_zjson")[index].as_py()), source)


def _record(text: str, source: str) -> Any:
    """The :class:`~prbench.records.Record` of stored JSON (``source`` is its ``file:line``)."""
    from prbench.records import Record

    return Record.from_dict(json.loads(text), source=source)


def _pack(text: str) -> bytes:
    return zlib.compress(text.encode("utf-8"), ZLIB_LEVEL)


def _unpack(packed: bytes) -> str:
    return zlib.decompress(packed).decode("utf-8")


def ref(store_id: str, index: int) -> str:
    """The reference of record ``index`` of a store."""
    return f"{store_id}:{index}"


def record_json(reference: str) -> str:
    """The JSON of a referenced record (the record as the profile builder reads it).

    Raises:
        UnknownRecordError: the reference names a store this process has not loaded.
    """
    store_id, _, index = str(reference).rpartition(":")
    column = _JSON.get(store_id)
    if column is None or not index.isdigit() or int(index) >= len(column):
        raise UnknownRecordError(
            f"record {reference!r} is not in the data this process loaded (the task's data "
            "was loaded by another process, or the run was reset)"
        )
    return _unpack(column[int(index)].as_py())


def record(reference: str, source: str) -> Any:
    """The :class:`~prbench.records.Record` of a reference.

    Args:
        reference: the row's ``record_ref``.
        source: the row's ``source`` (``file:line``), kept in the record.
    """
    return _record(record_json(reference), source)


def loader(reference: str, source: str) -> Callable[[], Any]:
    """A callable that gives the record of a reference when a profile is built from it."""
    return lambda: record(reference, source)


def restore(sample: Mapping[str, Any]) -> Mapping[str, Any]:
    """A logged sample whose ``doc`` has ``record_json`` in place of ``record_ref``.

    Samples of other tasks come back unchanged; the key keeps its place in the ``doc``.
    """
    doc = sample.get("doc") if isinstance(sample, Mapping) else None
    if not isinstance(doc, Mapping) or "record_ref" not in doc:
        return sample
    restored = {
        ("record_json" if name == "record_ref" else name):
            (record_json(value) if name == "record_ref" else value)
        for name, value in doc.items()
    }
    return {**sample, "doc": restored}


def reset() -> None:
    """Forget every loaded source (tests; a new run in the same process)."""
    _TABLES.clear()
    _JSON.clear()


__all__ = [
    "CHUNK",
    "COLUMNS",
    "RecordTable",
    "UnknownRecordError",
    "load",
    "loader",
    "record",
    "record_json",
    "ref",
    "reset",
    "restore",
    "select",
    "sourced",
]
