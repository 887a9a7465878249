"""The rows of a ``personalized_rewardbench`` task: its records as an in-memory Arrow dataset.

:func:`load_docs` is what the task YAMLs call through ``custom_dataset``: it validates the task's
``prbench_*`` keys (:mod:`prbench.harness.task_options`), takes the records of one domain from
the record store (:mod:`prbench.harness.record_store`: any source
:func:`prbench.records.stream_records` reads, loaded once) and returns the rows lm-eval iterates
over. Profiles are built lazily (:mod:`prbench.profiles.lazy`): a row of the profile condition
carries the key of its profile view, built only when the row is scored
(:func:`prbench.harness.profile_rows.prepare_profiles`, called by the ``prbench`` model for
exactly the rows of its requests, one builder call for all of them) or its prompt is rendered for
another model (:func:`prbench.harness.tasks.doc_to_text`); none is built for a scorer registered
with ``reads_profile=False``. :func:`prbench.harness.profile_rows.process_docs` fills the built
views into the rows afterwards, so logged samples show exactly what the reward model saw.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from typing import Any

from prbench.harness import profile_rows
from prbench.harness.profile_rows import PROVENANCE, profile_fields
from prbench.harness.task_options import (
    ALL_DOMAINS,
    DEFAULT_PROFILE_K,
    DataRequest,
    parse_request,
)
from prbench.options import OptionsError

log = logging.getLogger(__name__)

#: (data, domain, condition) -> (chosen words, rejected words) per row, for the length baseline
LENGTHS: dict[tuple[str, str, str], list[tuple[int, int]]] = {}


#: the store columns a task's rows are made from (see :func:`build_rows`)
_ROW_SOURCE = ("id", "domain", "category", "question", "chosen", "rejected", "n_posts", "source",
               "digest", "user", "donor", "chosen_words", "rejected_words")


def _records(req: DataRequest) -> tuple[Any, Any, list[int] | None]:
    """The request's records: their store, their row columns, and their indexes in the store."""
    from prbench.harness import record_store
    from prbench.records import is_hub_id

    hub = is_hub_id(req.source)
    domains_key = req.domain if hub and req.domain != ALL_DOMAINS else None
    store = record_store.load(req.source, revision=req.revision, split=req.split,
                              domains=[domains_key] if domains_key is not None else None)
    domain = None if req.domain == ALL_DOMAINS else req.domain
    table, picks = record_store.select(store, domain, _ROW_SOURCE)
    if not table.num_rows:
        found = sorted(set(store.column("domain")))
        raise OptionsError(
            f"{req.source}: no record of domain {req.domain!r} (its domains: {', '.join(found)}). "
            "A record's domain is its 'domain' field, else its file name. Run the tasks of the "
            "domains it has, or the task personalized_rewardbench_custom, which evaluates every "
            "record whatever its domain."
        )
    return store, table, picks


def _builder_options(req: DataRequest) -> tuple[Any, dict[str, Any], str]:
    """The builder component, its options and its name for errors (built when first used)."""
    from prbench.plugins import get_registry

    component = get_registry().get("profile-builder", req.builder)
    options = dict(req.builder_options)
    fields = (
        {f.name for f in dataclasses.fields(component.options)} if component.options else set()
    )
    if "k" in options and "k" not in fields:
        log.warning(
            "profile builder %r has no option 'k'; prbench_profile_k is not used", req.builder
        )
        options.pop("k")
    what = f"profile builder {component.qualified_id!r} (plugin {component.plugin!r})"
    return component, options, what


def build_rows(req: DataRequest) -> Any:
    """The task rows for a request, as a ``pyarrow.Table``: records of one domain, no profile yet.

    The records come from :mod:`prbench.harness.record_store` (read once per source, held as
    Arrow columns); with a profile source other than the record's own, the records with that
    source's posts (:func:`prbench.harness.record_store.sourced`: another user's for
    ``swapped``, drawn from every record of the domain whatever a run scores; ``k`` random own
    posts for ``shuffled``). A row's ``record_ref`` names the record as the builder reads it
    (its JSON goes back into logged samples as ``record_json``); ``profile_source``,
    ``profile_user`` and ``profile_donor`` say whose posts they are; ``domain_position`` is the
    record's place among its domain's records in the data's order (a judge's ``coin=script``).
    The rows of the question-only condition hold their (empty) view; the others carry a
    ``profile_key`` and ``profile_status`` ``pending``: the profile is built when the row is
    scored (:func:`prepare_profiles`) or its prompt is first rendered (:func:`doc_to_text`), see
    :mod:`prbench.profiles.lazy`. The builder's options are checked here, before any work.
    """
    import pyarrow as pa

    from prbench.harness import record_store
    from prbench.options import options_to_dict
    from prbench.profiles import lazy
    from prbench.records import HUB_REVISION, file_hashes, is_hub_id

    component, options, what = _builder_options(req)
    try:  # the posts `shuffled` keeps: the builder's k
        k = int(req.builder_options.get("k", DEFAULT_PROFILE_K))
    except (TypeError, ValueError):
        k = DEFAULT_PROFILE_K
    store, table, picks = _records(req)
    positions = record_store.domain_positions(store, picks)  # before another source's records
    if req.profile_source in ("swapped", "shuffled"):
        store = record_store.sourced(store, picks, req.profile_source, seed=req.swap_seed, k=k)
        table, picks = record_store.select(store, None, _ROW_SOURCE)
    parsed = component.parse_options(options) if component.options is not None else None
    spec = lazy.spec_of(req.builder, options)
    n = table.num_rows
    sources = table.column("source").to_pylist()
    refs = [record_store.ref(store.store_id, i) for i in (range(n) if picks is None else picks)]
    keys = [
        lazy.key_of(spec, src, rid, digest)
        for src, rid, digest in zip(sources, table.column("id").to_pylist(),
                                    table.column("digest").to_pylist(), strict=True)
    ]
    lazy.store().register_keys(
        spec, keys, [record_store.loader(r, s) for r, s in zip(refs, sources, strict=True)],
        what=what,
    )
    del sources
    if req.builder == "none":  # the question-only condition: nothing to compute
        for start in range(0, n, record_store.CHUNK):  # a chunk of records decoded at a time
            lazy.store().build(keys[start:start + record_store.CHUNK])
    pending = {
        "profile_text": "", "profile_builder": req.builder, "profile_post_ids": [],
        "profile_tokens": 0, "profile_status": lazy.STATUS_PENDING,
    }
    profile: dict[str, list[Any]] = {name: [] for name in pending}
    for key in keys:
        view = lazy.store().view(key)
        fields = profile_fields(view, lazy.STATUS_BUILT) if view is not None else pending
        for name, value in fields.items():
            profile[name].append(value)
    types = {"profile_post_ids": pa.list_(pa.string()), "profile_tokens": pa.int64()}
    columns = {
        **{name: table.column(name)
           for name in ("id", "domain", "category", "question", "chosen", "rejected")},
        "condition": pa.array([req.condition] * n, pa.string()),
        "task_domain": pa.array([req.domain] * n, pa.string()),  # "*": per-domain counts
        **{name: pa.array(values, types.get(name, pa.string()))
           for name, values in profile.items()},
        "profile_key": pa.array(keys, pa.string()),
        "profile_spec": pa.array([spec] * n, pa.string()),
        "profile_source": pa.array([req.profile_source] * n, pa.string()),
        "profile_user": table.column("user"),
        "profile_donor": table.column("donor"),
        "n_posts": table.column("n_posts"),
        "source": table.column("source"),
        "domain_position": pa.array(positions, pa.int64()),
        "record_ref": pa.array(refs, pa.string()),
    }
    rows = pa.Table.from_arrays(list(columns.values()), names=list(columns))
    hub = is_hub_id(req.source)
    LENGTHS[(req.source, req.domain, req.condition)] = list(zip(
        table.column("chosen_words").to_pylist(), table.column("rejected_words").to_pylist(),
        strict=True,
    ))
    entry = {
        "data": req.source,
        "revision": (req.revision or HUB_REVISION) if hub else None,
        "split": req.split if hub else None,
        "domain": req.domain,
        "condition": req.condition,
        "profile_source": req.profile_source,
        "profile_swap_seed": req.swap_seed if req.profile_source in ("swapped", "shuffled")
        else None,
        "n_records": n,
        "file_hashes": {} if hub else file_hashes(req.source),
        "profile_builder": {
            "id": req.builder,
            "options": options_to_dict(parsed) or options,
            "requested_options": dict(req.builder_options),
            "description": req.builder,
        },
    }
    PROVENANCE.append(entry)
    profile_rows.track(entry, keys)
    return rows


def load_docs(**kwargs: Any) -> dict[str, Any]:
    """``custom_dataset`` of the prbench tasks: ``{"test": datasets.Dataset}``.

    Raises:
        prbench.records.RecordValidationError: the data has problems (each one named with file,
            line, record id and field).
        prbench.records.DataSourceError: the source cannot be found or reached.
        OptionsError: a bad ``prbench_`` key or value.
    """
    req = parse_request(kwargs)
    return {"test": rows_to_dataset(build_rows(req))}


def rows_to_dataset(rows: Any) -> Any:
    """An in-memory ``datasets.Dataset`` over a ``pyarrow.Table`` of rows, without a copy.

    The fingerprint is a digest of the table's bytes, read in place (with each chunk's offset
    and length: a row column may be a slice of a shared store column): ``datasets`` would
    otherwise pickle the whole table to hash it.
    """
    import datasets

    digest = hashlib.sha256(repr(rows.schema).encode())
    for column in rows.columns:
        for chunk in column.chunks:
            digest.update(f"{chunk.offset}:{len(chunk)}".encode())
            for buffer in chunk.buffers():
                if buffer is not None:
                    digest.update(memoryview(buffer))
    return datasets.Dataset(datasets.table.InMemoryTable(rows),
                            fingerprint=digest.hexdigest()[:32])


__all__ = [
    "LENGTHS",
    "build_rows",
    "load_docs",
    "rows_to_dataset",
]
