"""The profile fields of the task rows, built lazily (see :mod:`prbench.profiles.lazy`).

:func:`prbench.harness.task_rows.build_rows` gives each row of the profile condition a
``profile_key`` and ``profile_status`` ``pending``. This module turns rows into built views:
:func:`prepare_profiles` for the rows about to be scored (the ``prbench`` model, one builder call
for all of them), :func:`row_view` for one row, and :func:`process_docs` fills the views built so
far into the rows lm-eval logs. :func:`refresh_provenance` records in each data provenance entry
how many of its profiles were built.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

#: what each data load built, for results manifests (filled by
#: :func:`prbench.harness.task_rows.load_docs`; kept here, below the tasks, so that
#: :func:`refresh_provenance` can update it)
PROVENANCE: list[dict[str, Any]] = []


def profile_fields(view: Any, status: str) -> dict[str, Any]:
    """The row fields of a profile view (see :data:`PROFILE_FIELDS`)."""
    return {
        "profile_text": view.text,
        "profile_builder": view.builder,
        "profile_post_ids": [item.id for item in view.items],
        "profile_tokens": int(view.n_tokens),
        "profile_status": status,
    }


#: the row fields that hold the profile view (filled in when it is built)
PROFILE_FIELDS = (
    "profile_text", "profile_builder", "profile_post_ids", "profile_tokens", "profile_status",
)
#: provenance entries and the profile keys of their rows (see :func:`refresh_provenance`)
_ENTRY_KEYS: list[tuple[dict[str, Any], list[str]]] = []
#: statuses of the profiles other processes of a data parallel run built or skipped
_PEER_STATUS: dict[str, str] = {}


def track(entry: dict[str, Any], keys: list[str]) -> None:
    """Keep a provenance entry's ``profile_builder`` up to date with its rows' profiles."""
    _ENTRY_KEYS.append((entry, keys))
    refresh_provenance()


def note_peer_profiles(statuses: Mapping[str, str]) -> None:
    """Record the profiles another process of a data parallel run built or skipped.

    Rank 0 writes the provenance; with these, its ``n_built`` and ``status`` count the rows every
    process scored (see :mod:`prbench.harness.data_parallel`).

    Args:
        statuses: profile key to :data:`prbench.profiles.lazy.STATUS_BUILT` or ``STATUS_SKIPPED``.
    """
    from prbench.profiles import lazy

    for key, status in statuses.items():
        if _PEER_STATUS.get(key) != lazy.STATUS_BUILT:
            _PEER_STATUS[key] = str(status)
    refresh_provenance()


def _status(key: str) -> str:
    from prbench.profiles import lazy

    status = lazy.store().status(key)
    if status == lazy.STATUS_BUILT:
        return status
    return _PEER_STATUS.get(key, status)


def refresh_provenance() -> None:
    """Record in each :data:`PROVENANCE` entry how many of its profiles were built.

    ``profile_builder`` gets ``status`` (``built``, ``not built: scorer does not read profiles``
    or ``pending``: no record of it was scored), ``n_built`` (records whose profile was built:
    the ones scored, under ``--limit`` fewer than ``n_records``; in a data parallel run, by any
    process), ``description`` (the builder's own id with its options, once one view is built
    here) and, for a builder that embeds (``dense``, ``ranked``: the ranking's encoder),
    ``encoder``: the encoder as it ran, its resolved ``embed_dtype`` included.
    """
    from prbench.profiles import lazy

    live = {id(e) for e in PROVENANCE}
    _ENTRY_KEYS[:] = [(e, k) for e, k in _ENTRY_KEYS if id(e) in live]
    for entry, keys in _ENTRY_KEYS:
        statuses = [_status(k) for k in keys]
        built = [k for k, s in zip(keys, statuses, strict=True) if s == lazy.STATUS_BUILT]
        info = entry["profile_builder"]
        info["n_built"] = len(built)
        if built:
            info["status"] = lazy.STATUS_BUILT
            view = next((v for v in map(lazy.store().view, built) if v is not None), None)
            if view is not None:
                info["description"] = view.builder
                encoder = view.extra.get("encoder") or (
                    view.extra.get("retrieval") or {}).get("encoder")  # the planner's retriever
                if isinstance(encoder, dict):  # the precision it ran in, not the option's auto
                    info["encoder"] = encoder
        elif lazy.STATUS_SKIPPED in statuses:
            info["status"] = lazy.STATUS_SKIPPED
        else:
            info["status"] = lazy.STATUS_PENDING


def _ensure_registered(doc: Mapping[str, Any]) -> str:
    """The row's profile key, its record registered again if this process has not seen it."""
    from prbench.harness import record_store
    from prbench.profiles import lazy

    key = str(doc["profile_key"])
    if lazy.store().known(key):
        return key
    record = record_store.record(str(doc["record_ref"]), str(doc.get("source") or ""))
    (registered,) = lazy.store().register(str(doc["profile_spec"]), [record])
    if registered != key:
        raise ValueError(f"row {doc.get('id')!r}: its profile_key does not match its record")
    return key


def prepare_profiles(docs: Sequence[Mapping[str, Any]], *, build: bool) -> None:
    """Build the pending profiles of ``docs`` (one call per builder), or mark them not built.

    Args:
        docs: task rows about to be scored.
        build: False when the scorer does not read profiles (they are marked
            :data:`prbench.profiles.lazy.STATUS_SKIPPED` instead).
    """
    from prbench.profiles import lazy

    keys = list(dict.fromkeys(
        _ensure_registered(d) for d in docs if d.get("profile_status") == lazy.STATUS_PENDING
    ))
    if build:
        lazy.store().build(keys)
    else:
        lazy.store().skip(keys)
    refresh_provenance()


def row_view(doc: Mapping[str, Any], *, build: bool = True) -> Any:
    """The :class:`~prbench.profiles.base.ProfileView` of a row.

    A pending profile is built now (``build=True``) or stands as an empty view whose builder says
    why it was not built.
    """
    from prbench.profiles import lazy
    from prbench.profiles.base import ProfileView
    from prbench.records import ProfileItem

    if doc.get("profile_status") == lazy.STATUS_PENDING:
        key = _ensure_registered(doc)
        if build:
            return lazy.store().view_for(key)
        return ProfileView(text="", builder=lazy.STATUS_SKIPPED)
    items = []
    post_ids = doc.get("profile_post_ids") or []
    posts: dict[str, Any] = {}
    if post_ids:  # the posts as the record holds them (a builder's items may differ)
        from prbench.harness.record_store import record_json

        record = json.loads(record_json(str(doc["record_ref"])))
        posts = {str(p.get("id")): p for p in record.get("profile", []) if isinstance(p, dict)}
    for pid in post_ids:
        post = posts.get(str(pid))
        if post is not None:
            extra = {k: v for k, v in post.items() if k not in ("id", "category", "text")}
            items.append(
                ProfileItem(
                    id=str(post["id"]), category=str(post.get("category", "")),
                    text=str(post.get("text", "")), extra=extra,
                )
            )
    return ProfileView(
        text=doc["profile_text"],
        items=tuple(items),
        n_tokens=int(doc.get("profile_tokens", 0)),
        builder=str(doc.get("profile_builder", "none")),
    )


def process_docs(dataset: Any) -> Any:
    """``process_docs`` of the prbench tasks: the rows with the profiles built so far filled in.

    lm-eval calls it each time it reads the task's documents: before scoring nothing is built and
    the rows come back as they are; after scoring, the rows whose profile was built (or skipped
    because the scorer does not read profiles) carry it, so logged samples show what the reward
    model saw.
    """
    from prbench.profiles import lazy

    if "profile_key" not in getattr(dataset, "column_names", ()):
        return dataset
    cache_key = (getattr(dataset, "_fingerprint", id(dataset)), lazy.store().generation)
    if cache_key in _FILLED:
        return _FILLED[cache_key]
    keys = dataset["profile_key"]
    statuses = dataset["profile_status"]
    changed = [
        i for i, (k, s) in enumerate(zip(keys, statuses, strict=True))
        if s == lazy.STATUS_PENDING and lazy.store().status(k) != lazy.STATUS_PENDING
    ]
    if not changed:
        return dataset
    columns = {name: list(dataset[name]) for name in PROFILE_FIELDS}
    for i in changed:
        view = lazy.store().view(keys[i])
        if view is None:
            columns["profile_status"][i] = lazy.STATUS_SKIPPED
            continue
        for name, value in profile_fields(view, lazy.STATUS_BUILT).items():
            columns[name][i] = value
    filled = dataset.remove_columns(list(PROFILE_FIELDS))
    for name in PROFILE_FIELDS:
        filled = filled.add_column(name, columns[name])
    if len(_FILLED) > 32:
        _FILLED.clear()
    _FILLED[cache_key] = filled
    return filled


_FILLED: dict[tuple[Any, int], Any] = {}


def reset() -> None:
    """Forget tracked provenance, filled datasets, built profiles and consumers (tests)."""
    from prbench.profiles import lazy

    _ENTRY_KEYS.clear()
    _PEER_STATUS.clear()
    _FILLED.clear()
    lazy.store().reset()
    lazy.release_all()


__all__ = [
    "PROFILE_FIELDS",
    "PROVENANCE",
    "note_peer_profiles",
    "prepare_profiles",
    "process_docs",
    "profile_fields",
    "refresh_provenance",
    "reset",
    "row_view",
    "track",
]
