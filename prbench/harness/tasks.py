"""prbench's lm-eval task folders and the data behind the ``personalized_rewardbench`` tasks.

:func:`task_dirs` is the ``lm_eval.tasks`` entry point: prbench's own folder plus the folders that
plugins register. :func:`load_docs` is what the task YAMLs call through ``custom_dataset``: it
loads and validates records (any source :func:`prbench.records.load_records` reads), keeps one
domain and returns the rows lm-eval iterates over. Profiles are built lazily
(:mod:`prbench.profiles.lazy`): a row of the profile condition carries the key of its profile
view, built only when the row is scored (:func:`prepare_profiles`, called by the ``prbench``
model for exactly the rows of its requests, one builder call for all of them) or its prompt is
rendered for another model (:func:`doc_to_text`); none is built for a scorer registered with
``reads_profile=False``. :func:`process_docs` fills the built views into the rows afterwards, so
logged samples show exactly what the reward model saw.

lm-eval passes ``--model_args`` and ``--metadata`` merged as keyword arguments; the keys read here
all start with ``prbench_`` (an unknown ``prbench_`` key is an error, anything else is ignored):

- ``prbench_data``: a file, a folder of per-domain files, ``sample`` or a hub dataset id.
- ``prbench_revision``, ``prbench_split``: hub revision (default
  :data:`prbench.records.HUB_REVISION`, ``main``, not pinned to a commit yet) and split.
- ``prbench_profile``: the profile builder of the profile condition (default ``dense``).
- ``prbench_profile_k``: its ``k`` (posts kept), for builders that have that option.
- ``prbench_profile_options``: further builder options, a JSON object.

The task YAML fixes ``prbench_domain``, ``prbench_condition`` and ``prbench_default_data`` through
``dataset_kwargs``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prbench.options import OptionsError, as_mapping, suggest

log = logging.getLogger(__name__)

#: the condition without a profile, and the one with the retrieved posts
CONDITIONS = ("noprofile", "profile")
DEFAULT_PROFILE_BUILDER = "dense"
DEFAULT_PROFILE_K = 5
#: the ``prbench_domain`` value of the task that keeps every record, whatever its domain
ALL_DOMAINS = "*"

USER_KEYS = (
    "prbench_data",
    "prbench_revision",
    "prbench_split",
    "prbench_profile",
    "prbench_profile_k",
    "prbench_profile_options",
)
TASK_KEYS = ("prbench_domain", "prbench_condition", "prbench_default_data")
#: optional task defaults for the default builder (the published tasks retrieve with contriever,
#: top-10, as the paper does); user keys override them
TASK_DEFAULT_KEYS = ("prbench_default_profile_options", "prbench_default_profile_k")

#: what each data load built, for results manifests (filled by :func:`load_docs`)
PROVENANCE: list[dict[str, Any]] = []
#: (data, domain, condition) -> (chosen words, rejected words) per row, for the length baseline
LENGTHS: dict[tuple[str, str, str], list[tuple[int, int]]] = {}
_RECORDS: dict[tuple[str, str | None, str, str | None], list[Any]] = {}


def builtin_task_dir() -> Path:
    """The folder of prbench's own tasks: ``prbench/_tasks`` (wheel) or ``<repo>/tasks`` (checkout).

    Raises:
        FileNotFoundError: neither exists (a broken install).
    """
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "_tasks", package.parent / "tasks"):
        if (candidate / "personalized_rewardbench").is_dir():
            return candidate
    raise FileNotFoundError(
        f"prbench's task folder is missing: looked for {package / '_tasks'} (installed wheel) and "
        f"{package.parent / 'tasks'} (source checkout); reinstall prbench"
    )


def task_dirs() -> list[str]:
    """The task folders to index, prbench's own and the plugins' (``lm_eval.tasks`` entry point).

    The folders come from the ``register_task_dirs`` hook of every loaded plugin, prbench's own
    through its built-in ``prbench.tasks`` plugin. If the plugin registry cannot load, only
    prbench's own folder is returned.
    """
    try:
        from prbench.plugins import get_registry

        dirs = [path for path, _desc, _plugin in get_registry().task_dirs]
    except Exception as exc:  # a broken plugin set must not hide the benchmark
        log.warning("prbench: plugin task folders unavailable (%s); using prbench's own", exc)
        dirs = [str(builtin_task_dir())]
    seen: set[str] = set()
    out = []
    for d in dirs:
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


def task_names(dirs: Sequence[str] | None = None) -> set[str]:
    """Every task, group and tag name defined in ``dirs`` (default :func:`task_dirs`)."""
    from lm_eval.tasks._index import TaskIndex

    return set(TaskIndex.build([Path(d) for d in (task_dirs() if dirs is None else dirs)]))


@dataclasses.dataclass(frozen=True)
class DataRequest:
    """What one task asks :func:`load_docs` for (validated keyword arguments).

    Attributes:
        source: the data source.
        revision: the hub revision (hub ids only).
        split: the hub split.
        domain: the domain to keep, or :data:`ALL_DOMAINS`.
        condition: ``noprofile`` or ``profile``.
        builder: the profile builder id (``none`` for ``noprofile``).
        builder_options: its options.
    """

    source: str
    revision: str | None
    split: str
    domain: str
    condition: str
    builder: str
    builder_options: dict[str, Any]


def parse_request(kwargs: Mapping[str, Any]) -> DataRequest:
    """Validate the keyword arguments lm-eval passes to ``custom_dataset``.

    Raises:
        OptionsError: an unknown ``prbench_`` key, a missing task key or a bad value.
    """
    known = set(USER_KEYS) | set(TASK_KEYS) | set(TASK_DEFAULT_KEYS)
    for key in kwargs:
        if key.startswith("prbench_") and key not in known:
            raise OptionsError(
                f"unknown --metadata key {key!r}{suggest(key, known)}; prbench reads: "
                + ", ".join(USER_KEYS)
            )
    missing = [k for k in TASK_KEYS if k not in kwargs]
    if missing:
        raise OptionsError(f"the task YAML must set dataset_kwargs {missing}")
    condition = str(kwargs["prbench_condition"])
    if condition not in CONDITIONS:
        raise OptionsError(f"prbench_condition must be one of {CONDITIONS}, got {condition!r}")
    source = kwargs.get("prbench_data") or kwargs["prbench_default_data"]
    revision = kwargs.get("prbench_revision")
    if condition == "noprofile":
        builder, options = "none", {}
    else:
        builder = str(kwargs.get("prbench_profile") or DEFAULT_PROFILE_BUILDER)
        options = {}
        k = DEFAULT_PROFILE_K
        if builder == DEFAULT_PROFILE_BUILDER:  # the task's own retrieval defaults
            key = "prbench_default_profile_options"
            options.update(as_mapping(kwargs.get(key) or {}, key))
            k = kwargs.get("prbench_default_profile_k", k)
        key = "prbench_profile_options"
        options.update(as_mapping(kwargs.get(key) or {}, key))
        k = kwargs.get("prbench_profile_k", k)
        if k is not None and "k" not in options:
            options["k"] = k
    return DataRequest(
        source=str(source),
        revision=None if revision in (None, "") else str(revision),
        split=str(kwargs.get("prbench_split") or "test"),
        domain=str(kwargs["prbench_domain"]),
        condition=condition,
        builder=builder,
        builder_options=options,
    )


def task_profile(config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The profile builder and options a task config (from lm-eval's results) asks for.

    Reads the task's ``dataset_kwargs`` and ``metadata`` as :func:`load_docs` does; for
    summaries and manifests. ``("none", {})`` for the question-only condition.
    """
    kwargs = {**(config.get("metadata") or {}), **(config.get("dataset_kwargs") or {})}
    try:
        req = parse_request(kwargs)
    except OptionsError:
        return str(kwargs.get("prbench_profile") or "?"), {}
    return req.builder, dict(req.builder_options)


def _records(req: DataRequest) -> list[Any]:
    from prbench.records import is_hub_id, load_records

    hub = is_hub_id(req.source)
    domains_key = req.domain if hub and req.domain != ALL_DOMAINS else None
    key = (req.source, req.revision, req.split, domains_key)
    if key not in _RECORDS:
        domains = [domains_key] if domains_key is not None else None
        _RECORDS[key] = load_records(
            req.source, revision=req.revision, split=req.split, domains=domains
        )
    records = _RECORDS[key]
    if req.domain == ALL_DOMAINS:
        return records
    kept = [r for r in records if r.domain == req.domain]
    if not kept:
        found = sorted({r.domain for r in records})
        raise OptionsError(
            f"{req.source}: no record of domain {req.domain!r} (its domains: {', '.join(found)}). "
            "A record's domain is its 'domain' field, else its file name. Run the tasks of the "
            "domains it has, or the task personalized_rewardbench_custom, which evaluates every "
            "record whatever its domain."
        )
    return kept


def _builder_options(req: DataRequest) -> tuple[Any, dict[str, Any]]:
    """The builder component and its options (checked now; the builder is built when used)."""
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
    return component, options


def _profile_fields(view: Any, status: str) -> dict[str, Any]:
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


def build_rows(req: DataRequest) -> list[dict[str, Any]]:
    """The task rows for a request: records of one domain, their profiles not built yet.

    The rows of the question-only condition hold their (empty) view; the others carry a
    ``profile_key`` and ``profile_status`` ``pending``: the profile is built when the row is
    scored (:func:`prepare_profiles`) or its prompt is first rendered (:func:`doc_to_text`), see
    :mod:`prbench.profiles.lazy`. The builder's options are checked here, before any work.
    """
    from prbench.options import options_to_dict
    from prbench.profiles import lazy
    from prbench.records import HUB_REVISION, file_hashes, is_hub_id

    records = _records(req)
    component, options = _builder_options(req)
    parsed = component.parse_options(options) if component.options is not None else None
    spec = lazy.spec_of(req.builder, options)
    keys = lazy.STORE.register(spec, records)
    if req.builder == "none":  # the question-only condition: nothing to compute
        lazy.STORE.build(keys)
    rows = []
    for record, key in zip(records, keys, strict=True):
        view = lazy.STORE.view(key)
        if view is not None:
            fields = _profile_fields(view, lazy.STATUS_BUILT)
        else:
            fields = {
                "profile_text": "", "profile_builder": req.builder, "profile_post_ids": [],
                "profile_tokens": 0, "profile_status": lazy.STATUS_PENDING,
            }
        rows.append(
            {
                "id": record.id,
                "domain": record.domain,
                "category": record.category,
                "question": record.question,
                "chosen": record.chosen,
                "rejected": record.rejected,
                "condition": req.condition,
                **fields,
                "profile_key": key,
                "profile_spec": spec,
                "n_posts": len(record.profile),
                "source": record.source,
                "record_json": json.dumps(record.to_dict(), ensure_ascii=False),
            }
        )
    hub = is_hub_id(req.source)
    LENGTHS[(req.source, req.domain, req.condition)] = [
        (len(r["chosen"].split()), len(r["rejected"].split())) for r in rows
    ]
    entry = {
        "data": req.source,
        "revision": (req.revision or HUB_REVISION) if hub else None,
        "split": req.split if hub else None,
        "domain": req.domain,
        "condition": req.condition,
        "n_records": len(rows),
        "file_hashes": {} if hub else file_hashes(req.source),
        "profile_builder": {
            "id": req.builder,
            "options": options_to_dict(parsed) or options,
            "description": req.builder,
        },
    }
    PROVENANCE.append(entry)
    _ENTRY_KEYS.append((entry, keys))
    refresh_provenance()
    return rows


def refresh_provenance() -> None:
    """Record in each :data:`PROVENANCE` entry how many of its profiles were built.

    ``profile_builder`` gets ``status`` (``built``, ``not built: scorer does not read profiles``
    or ``pending``: no record of it was scored), ``n_built`` (records whose profile was built:
    the ones scored, under ``--limit`` fewer than ``n_records``) and ``description`` (the
    builder's own id with its options, once one view is built).
    """
    from prbench.profiles import lazy

    live = {id(e) for e in PROVENANCE}
    _ENTRY_KEYS[:] = [(e, k) for e, k in _ENTRY_KEYS if id(e) in live]
    for entry, keys in _ENTRY_KEYS:
        statuses = [lazy.STORE.status(k) for k in keys]
        built = [k for k, s in zip(keys, statuses, strict=True) if s == lazy.STATUS_BUILT]
        info = entry["profile_builder"]
        info["n_built"] = len(built)
        if built:
            info["status"] = lazy.STATUS_BUILT
            view = lazy.STORE.view(built[0])
            if view is not None:
                info["description"] = view.builder
        elif lazy.STATUS_SKIPPED in statuses:
            info["status"] = lazy.STATUS_SKIPPED
        else:
            info["status"] = lazy.STATUS_PENDING


def _ensure_registered(doc: Mapping[str, Any]) -> str:
    """The row's profile key, its record registered again if this process has not seen it."""
    from prbench.profiles import lazy

    key = str(doc["profile_key"])
    if lazy.STORE.known(key):
        return key
    from prbench.jsonio import Row
    from prbench.records import RecordChecker

    checker = RecordChecker()
    record = checker.record(Row(str(doc.get("source") or "row"), 0, json.loads(doc["record_json"])),
                            str(doc.get("domain") or ""))
    if record is None:
        raise ValueError(f"row {doc.get('id')!r}: its record_json is not a valid record: "
                         + "; ".join(str(i) for i in checker.issues))
    record = dataclasses.replace(record, source=str(doc.get("source") or record.source))
    (registered,) = lazy.STORE.register(str(doc["profile_spec"]), [record])
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
        lazy.STORE.build(keys)
    else:
        lazy.STORE.skip(keys)
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
            return lazy.STORE.view_for(key)
        return ProfileView(text="", builder=lazy.STATUS_SKIPPED)
    record = json.loads(doc["record_json"])
    posts = {str(p.get("id")): p for p in record.get("profile", []) if isinstance(p, dict)}
    items = []
    for pid in doc.get("profile_post_ids") or []:
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


def load_docs(**kwargs: Any) -> dict[str, Any]:
    """``custom_dataset`` of the prbench tasks: ``{"test": datasets.Dataset}``.

    Raises:
        prbench.records.RecordValidationError: the data has problems (each one named with file,
            line, record id and field).
        prbench.records.DataSourceError: the source cannot be found or reached.
        OptionsError: a bad ``prbench_`` key or value.
    """
    import datasets

    req = parse_request(kwargs)
    rows = build_rows(req)
    return {"test": datasets.Dataset.from_list(rows)}


def doc_to_text(doc: Mapping[str, Any]) -> str:
    """The prompt of a row: the profile (if any), then the question; the answer follows it.

    A reward model reads the structured row; this text is what a likelihood baseline
    (``--model hf``) conditions on and what logged samples show. A profile not built yet is
    built here for the one row, unless a ``prbench`` model is open: it builds the profiles of the
    rows it scores itself, all at once, and the prompt then names the builder instead.
    """
    from prbench.profiles import lazy

    profile = doc["profile_text"]
    if doc.get("profile_status") == lazy.STATUS_PENDING:
        if lazy.deferred():
            profile = f"[profile {doc['profile_builder']}: built when the pair is scored]"
        else:
            profile = row_view(doc).text
    parts = []
    if profile:
        parts.append("Earlier posts by the user:\n" + profile)
    parts.append("Question: " + doc["question"])
    return "\n\n".join(parts) + "\nAnswer: "


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
    cache_key = (getattr(dataset, "_fingerprint", id(dataset)), lazy.STORE.generation)
    if cache_key in _FILLED:
        return _FILLED[cache_key]
    keys = dataset["profile_key"]
    statuses = dataset["profile_status"]
    changed = [
        i for i, (k, s) in enumerate(zip(keys, statuses, strict=True))
        if s == lazy.STATUS_PENDING and lazy.STORE.status(k) != lazy.STATUS_PENDING
    ]
    if not changed:
        return dataset
    columns = {name: list(dataset[name]) for name in PROFILE_FIELDS}
    for i in changed:
        view = lazy.STORE.view(keys[i])
        if view is None:
            columns["profile_status"][i] = lazy.STATUS_SKIPPED
            continue
        for name, value in _profile_fields(view, lazy.STATUS_BUILT).items():
            columns[name][i] = value
    filled = dataset.remove_columns(list(PROFILE_FIELDS))
    for name in PROFILE_FIELDS:
        filled = filled.add_column(name, columns[name])
    if len(_FILLED) > 32:
        _FILLED.clear()
    _FILLED[cache_key] = filled
    return filled


_FILLED: dict[tuple[Any, int], Any] = {}


def doc_to_choice(doc: Mapping[str, Any]) -> list[str]:
    """``[chosen, rejected]``: the gold answer is always the first."""
    return [doc["chosen"], doc["rejected"]]


def process_results(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, float]:
    """Strict pair metrics from the two scores (chosen first).

    ``acc`` and ``acc_macro`` are the same number for one task; a group averages ``acc`` over
    pairs (micro) and ``acc_macro`` over domains (macro).
    """
    from prbench.analysis.metrics import pair_outcome

    if len(results) != 2:
        raise ValueError(
            f"expected 2 results (chosen, rejected) for {doc.get('id')}, got {results}"
        )
    chosen, rejected = (r[0] if isinstance(r, tuple | list) else r for r in results)
    out = pair_outcome(chosen, rejected)
    return {
        "acc": out.correct,
        "acc_macro": out.correct,
        "tie": out.tie,
        "margin": out.margin,
        "invalid": out.invalid,
    }


def reset() -> None:
    """Forget loaded records, built profiles and provenance (tests)."""
    from prbench.profiles import lazy

    PROVENANCE.clear()
    LENGTHS.clear()
    _RECORDS.clear()
    _ENTRY_KEYS.clear()
    _FILLED.clear()
    lazy.STORE.reset()
    lazy.release_all()


__all__ = [
    "ALL_DOMAINS",
    "CONDITIONS",
    "PROVENANCE",
    "DataRequest",
    "build_rows",
    "builtin_task_dir",
    "doc_to_choice",
    "doc_to_text",
    "load_docs",
    "parse_request",
    "prepare_profiles",
    "process_docs",
    "process_results",
    "refresh_provenance",
    "row_view",
    "task_dirs",
    "task_names",
]
