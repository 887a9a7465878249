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
- ``prbench_ranked``: a ranking file written by ``prbench rank``: the ``dense`` condition reads
  its top-k from it instead of embedding (the ``ranked`` builder, which checks that the file was
  ranked from these records with the encoder the condition's options name).
- ``prbench_profile_source``: whose posts the profile is built from, ``own`` (default),
  ``swapped`` (another user's of the same domain), ``shuffled`` (k random own posts) or ``none``
  (:mod:`prbench.profiles.sources`); the ``_swapped`` / ``_shuffled`` task variants set it.
- ``prbench_profile_swap_seed``: the seed of the swap derangement and the shuffled draws
  (default :data:`prbench.profiles.sources.DEFAULT_SWAP_SEED`).

The task YAML fixes ``prbench_domain``, ``prbench_condition`` and ``prbench_default_data`` through
``dataset_kwargs``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prbench.harness import profile_rows
from prbench.harness.profile_rows import (
    PROVENANCE,
    prepare_profiles,
    process_docs,
    profile_fields,
    refresh_provenance,
    row_view,
)
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
    "prbench_ranked",
    "prbench_profile_source",
    "prbench_profile_swap_seed",
)
TASK_KEYS = ("prbench_domain", "prbench_condition", "prbench_default_data")
#: optional task defaults for the default builder (the published tasks retrieve with contriever,
#: top-10, as the paper does); user keys override them
TASK_DEFAULT_KEYS = (
    "prbench_default_profile_options", "prbench_default_profile_k",
    "prbench_default_profile_source",
)

#: (data, domain, condition) -> (chosen words, rejected words) per row, for the length baseline
LENGTHS: dict[tuple[str, str, str], list[tuple[int, int]]] = {}


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
        profile_source: whose posts the profile is built from
            (:data:`prbench.profiles.sources.PROFILE_SOURCES`; ``none`` for ``noprofile``).
        swap_seed: the seed of the swap derangement and the shuffled draws.
    """

    source: str
    revision: str | None
    split: str
    domain: str
    condition: str
    builder: str
    builder_options: dict[str, Any]
    profile_source: str = "own"
    swap_seed: int = 0


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
    source = kwargs["prbench_default_data"]
    if "prbench_data" in kwargs:
        given = kwargs["prbench_data"]
        if not isinstance(given, str):
            raise OptionsError(
                f"prbench_data must be a path string (a file, a folder, `sample` or a hub "
                f"dataset id), got {type(given).__name__} {json.dumps(given, default=str)}; "
                'e.g. --metadata \'{"prbench_data": "data/my.jsonl"}\''
            )
        if not given.strip():
            raise OptionsError(
                "prbench_data is empty: give a file, a folder, `sample` or a hub dataset id, or "
                "leave the key out for the task's own data"
            )
        source = given
    revision = kwargs.get("prbench_revision")
    from prbench.profiles.sources import resolve_seed, resolve_source

    profile_source = resolve_source(kwargs)
    swap_seed = resolve_seed(kwargs)
    if profile_source == "none":
        builder, options = "none", {}
    else:
        builder = str(kwargs.get("prbench_profile") or DEFAULT_PROFILE_BUILDER)
        options = {}
        k = DEFAULT_PROFILE_K
        # the task's own retrieval defaults, whether the built-in is named bare or qualified
        if builder in (DEFAULT_PROFILE_BUILDER, f"prbench/{DEFAULT_PROFILE_BUILDER}"):
            key = "prbench_default_profile_options"
            options.update(as_mapping(kwargs.get(key) or {}, key))
            k = kwargs.get("prbench_default_profile_k", k)
        key = "prbench_profile_options"
        options.update(as_mapping(kwargs.get(key) or {}, key))
        k = kwargs.get("prbench_profile_k", k)
        if k is not None and "k" not in options:
            options["k"] = k
        if kwargs.get("prbench_ranked"):
            if profile_source == "shuffled":
                raise OptionsError(
                    "prbench_ranked cannot serve profile_source=shuffled: shuffled draws k "
                    "random posts instead of the retrieved ones, so no ranking is read; drop "
                    "prbench_ranked for the shuffled tasks"
                )
            builder, options = _ranked_instead(builder, options, str(kwargs["prbench_ranked"]))
    return DataRequest(
        source=str(source),
        revision=None if revision in (None, "") else str(revision),
        split=str(kwargs.get("prbench_split") or "test"),
        domain=str(kwargs["prbench_domain"]),
        condition=condition,
        builder=builder,
        builder_options=options,
        profile_source=profile_source,
        swap_seed=swap_seed,
    )


def _ranked_instead(
    builder: str, options: dict[str, Any], path: str
) -> tuple[str, dict[str, Any]]:
    """The ``ranked`` builder reading ``path`` in place of the ``dense`` condition's builder."""
    if builder != DEFAULT_PROFILE_BUILDER:
        raise OptionsError(
            f"prbench_ranked stands in for the {DEFAULT_PROFILE_BUILDER!r} profile builder; it "
            f"cannot be combined with prbench_profile={builder!r}"
        )
    from prbench.plugins import get_registry
    from prbench.profiles.ranked import ranked_options_from_dense

    dense = get_registry().get("profile-builder", builder).parse_options(options)
    return "ranked", ranked_options_from_dense(dense, path)


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


def task_profile_source(config: Mapping[str, Any]) -> tuple[str, int]:
    """The profile source and swap seed a task config asks for (``("?", 0)`` if invalid)."""
    from prbench.profiles.sources import resolve_seed, resolve_source

    kwargs = {**(config.get("metadata") or {}), **(config.get("dataset_kwargs") or {})}
    try:
        return resolve_source(kwargs), resolve_seed(kwargs)
    except OptionsError:
        return "?", 0


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
    ``profile_user`` and ``profile_donor`` say whose posts they are.
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
    lazy.STORE.register_keys(
        spec, keys, [record_store.loader(r, s) for r, s in zip(refs, sources, strict=True)],
        what=what,
    )
    del sources
    if req.builder == "none":  # the question-only condition: nothing to compute
        for start in range(0, n, record_store.CHUNK):  # a chunk of records decoded at a time
            lazy.STORE.build(keys[start:start + record_store.CHUNK])
    pending = {
        "profile_text": "", "profile_builder": req.builder, "profile_post_ids": [],
        "profile_tokens": 0, "profile_status": lazy.STATUS_PENDING,
    }
    profile: dict[str, list[Any]] = {name: [] for name in pending}
    for key in keys:
        view = lazy.STORE.view(key)
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
    from prbench.harness.lm_eval_args import restore_option_text

    # under plain lm_eval: the text typed in --metadata/--model_args (prbench_revision=00123456)
    kwargs = restore_option_text(kwargs, flags=("metadata", "model_args"))
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
            # the key names the builder, its options and the record's content, so lm-eval's
            # response cache (keyed on this prompt) never mixes two profile conditions
            profile = (
                f"[profile {doc['profile_builder']} {doc['profile_key']}: built when scored]"
            )
        else:
            profile = row_view(doc).text
    parts = []
    if profile:
        parts.append("Earlier posts by the user:\n" + profile)
    parts.append("Question: " + doc["question"])
    return "\n\n".join(parts) + "\nAnswer: "


def doc_to_choice(doc: Mapping[str, Any]) -> list[str]:
    """``[chosen, rejected]``: the gold answer is always the first."""
    return [doc["chosen"], doc["rejected"]]


def process_results(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, Any]:
    """Strict pair metrics from the two scores (chosen first).

    ``acc`` and ``acc_macro`` are the same number for one task; a group averages ``acc`` over
    pairs (micro) and ``acc_macro`` over domains (macro). A task over every domain (``*``, e.g.
    ``personalized_rewardbench_custom``) has no ``acc_macro`` (it would only repeat ``acc``);
    it reports ``domains`` instead, ``[domain, correct, tie, invalid, longer_chosen]`` per pair,
    which :func:`domain_counts` sums per domain, so the summary shows one row per domain and a
    true macro average, as for the published groups.

    For a pairwise judge that reported the pair's per-order verdicts, ``acc`` is the strict
    order-based win (every order judged picked the chosen answer; an unreadable order is never
    a win) and the judge metrics of :func:`prbench.judges.order_metrics.pair_metrics` are
    added; the judge's probability still gives ``tie``, ``margin`` and ``invalid``.
    """
    from prbench.analysis.metrics import pair_outcome
    from prbench.judges.order_metrics import doc_metrics as judge_metrics

    if len(results) != 2:
        raise ValueError(
            f"expected 2 results (chosen, rejected) for {doc.get('id')}, got {results}"
        )
    chosen, rejected = (r[0] if isinstance(r, tuple | list) else r for r in results)
    out = pair_outcome(chosen, rejected)
    metrics: dict[str, Any] = {
        "acc": out.correct,
        "acc_macro": out.correct,
        "tie": out.tie,
        "margin": out.margin,
        "invalid": out.invalid,
    }
    judged = judge_metrics(doc)
    if judged:  # a pairwise judge's strict acc comes from its orders (unreadable: never a win)
        metrics["acc"] = metrics["acc_macro"] = judged["acc"]
        metrics.update(judged)
    if doc.get("task_domain") == ALL_DOMAINS:
        del metrics["acc_macro"]
        longer = pair_outcome(len(str(doc["chosen"]).split()), len(str(doc["rejected"]).split()))
        metrics["domains"] = [
            str(doc.get("domain", "")), metrics["acc"], out.tie, out.invalid, longer.correct
        ]
    return metrics


#: the counts :func:`domain_counts` gives per domain
DOMAIN_COUNT_KEYS = ("n", "correct", "ties", "invalid", "length_correct")


def domain_counts(items: Sequence[Sequence[Any]]) -> dict[str, dict[str, int]]:
    """Aggregation of the ``domains`` metric: per-domain pair counts (domains sorted).

    Args:
        items: ``[domain, correct, tie, invalid, longer_chosen]`` per pair (see
            :func:`process_results`); lm-eval gathers them from every process first.

    Returns:
        ``{domain: {"n", "correct", "ties", "invalid", "length_correct"}}``.
    """
    counts: dict[str, dict[str, int]] = {}
    for domain, correct, tie, invalid, longer in items:
        row = counts.setdefault(str(domain), dict.fromkeys(DOMAIN_COUNT_KEYS, 0))
        row["n"] += 1
        row["correct"] += int(correct)
        row["ties"] += int(tie)
        row["invalid"] += int(invalid)
        row["length_correct"] += int(longer)
    return {d: counts[d] for d in sorted(counts)}


def reset() -> None:
    """Forget loaded records, built profiles and provenance (tests)."""
    from prbench.harness import record_store, unscored

    PROVENANCE.clear()
    LENGTHS.clear()
    record_store.reset()
    profile_rows.reset()
    unscored.reset()


__all__ = [
    "ALL_DOMAINS",
    "CONDITIONS",
    "PROVENANCE",
    "DataRequest",
    "build_rows",
    "builtin_task_dir",
    "doc_to_choice",
    "doc_to_text",
    "domain_counts",
    "load_docs",
    "parse_request",
    "prepare_profiles",
    "process_docs",
    "process_results",
    "refresh_provenance",
    "row_view",
    "task_dirs",
    "task_names",
    "task_profile_source",
]
