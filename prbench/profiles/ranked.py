"""Rankings computed once (``prbench rank``) and the ``ranked`` profile builder that reads them.

Embedding every post of every user is the dear part of the ``dense`` profile; its result, each
record's posts in retrieval order with their scores, does not depend on the reward model. So
``prbench rank DATA -o OUT`` computes it once (on a GPU, say) and the ``ranked`` builder reads it
on any machine, keeping the top ``k`` exactly as ``dense`` would have: the same scores, the same
tie order, the same budget and rendering.

A ranking file is JSON lines. The first line is the header::

    {"format": "prbench-ranking", "version": 1, "builder": "dense", "identity": {...},
     "encoder": {...}, "data": "<the data source ranked>"}

``identity`` is what must match for the ranking to stand for ``dense`` with given options
(:func:`dense_identity`): the model (hub id, ``minilm`` or ``local``), its weights (hub commit,
the MiniLM package version, or a local folder's fingerprint), the encoder kind and pooling, the
truncation, the similarity and the query and post templates. ``encoder`` is the encoder's own
description (for people). Every further line is one record::

    {"domain": "...", "id": "...", "data_hash": "<sha256>", "post_ids": [...], "scores": [...]}

with the posts best first. ``data_hash`` is :func:`prbench.profiles.lazy.record_digest` (the id,
question, category, domain and every post's id, category and text): a record whose question or
posts changed since it was ranked is refused, naming it.

Every line, the header included, ends with ``"check"``: a hash of its own content chained to the
line before it (:func:`seal`). A line edited by hand (scores reversed, a post dropped), moved,
copied or removed from the middle breaks the chain and the file is refused at that line, saying
so; a record that appears twice is refused naming both lines. The chain only grows at the end, so
``prbench rank`` still appends to a file it resumes (a last line cut short by a kill is dropped).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prbench.devices import EMBED_DTYPES
from prbench.profiles.base import ProfileView
from prbench.profiles.budget import (
    DOC_FIELDS,
    POST_FIELDS,
    QUERY_FIELDS,
    TABLE_BOUNDS,
    TokenCounter,
    builder_id,
    check_format,
    check_positive,
    ranked_option,
    ranked_view,
)
from prbench.profiles.embed_backend import EMBED_BACKENDS
from prbench.profiles.lazy import record_digest
from prbench.records import DataSourceError

if TYPE_CHECKING:
    from prbench.records import Record

FORMAT = "prbench-ranking"
#: 2: every line carries its chained ``check`` (version 1 files had none)
VERSION = 2
#: the ``dense`` options a ranking's identity covers (copied from the task's dense condition)
IDENTITY_OPTIONS = (
    "model", "encoder", "revision", "max_length", "similarity", "query_format", "doc_format",
)
#: the ``dense`` options that shape the view, not the ranking (kept by ``ranked``)
VIEW_OPTIONS = ("k", "format", "max_tokens", "tokenizer", "trust_remote_code")


class RankingError(DataSourceError):
    """A ranking file is missing, unreadable, or does not match the data or the encoder."""


# -- identity ---------------------------------------------------------------------------------


def dense_identity(options: Any, *, encoder: Any = None) -> dict[str, Any]:
    """What a ranking made with ``dense`` ``options`` must record, as far as it is known here.

    Args:
        options: :class:`prbench.profiles.dense.DenseOptions` (or an object with its fields).
        encoder: the :class:`prbench.profiles.embed.Encoder` that ranked (when ranking); without
            it the model is looked up without loading it, and what cannot be known on this
            machine (a hub model that is not in the local cache) is ``None``: not checked.
    """
    from prbench.model_ref import (
        HUB_ALIASES,
        MINILM_ALIASES,
        ModelUnavailableError,
        resolve_model,
    )
    from prbench.profiles.embed import KNOWN_KINDS

    name = str(options.model).strip()
    kind = None if options.encoder == "auto" else str(options.encoder)
    weights = None
    if name.lower() in MINILM_ALIASES:
        model = "minilm"
    elif Path(name).expanduser().is_dir():
        model = "local"
    else:
        model = HUB_ALIASES.get(name.lower(), name)
    if encoder is not None:
        encoder.key  # noqa: B018 (resolves a hub model's commit, downloading it if needed)
        ref, kind = encoder.ref, encoder.kind
    else:
        try:
            ref = resolve_model(name, options.revision)
        except ModelUnavailableError:
            ref = None
        if kind is None and model in KNOWN_KINDS:
            kind = KNOWN_KINDS[model]
        if kind is None and ref is not None and ref.local_dir is not None:
            has_modules = (ref.local_dir / "modules.json").is_file()
            kind = "sentence-transformers" if has_modules else "transformers-mean"
    if ref is not None:
        # the MiniLM folder's fingerprint includes file times; its package version names it
        weights = ref.label if model == "minilm" else ref.fingerprint
    identity = {
        "model": model,
        "revision": options.revision,
        "weights": weights,
        "encoder": kind,
        "max_length": options.max_length,
        "similarity": options.similarity,
        "query_format": options.query_format,
        "doc_format": options.doc_format,
    }
    if encoder is not None:  # resuming a ranking in another precision would mix bf16 and fp32
        identity["embed_dtype"] = encoder.dtype
        identity["embed_backend"] = encoder.backend.backend  # and so would another runtime
    return identity


#: What a ranking that does not record a field was computed with.
_RECORDED_DEFAULTS = {"embed_dtype": "float32", "embed_backend": "torch"}


def identity_problems(recorded: Mapping[str, Any], expected: Mapping[str, Any]) -> list[str]:
    """``field: ranked with X, asked for Y`` for each field that differs (unknowns are skipped)."""
    problems = []
    for key, want in expected.items():
        if want is None and key != "max_length":
            continue
        # rankings written before embed_dtype / embed_backend existed were float32, on torch
        have = recorded.get(key, _RECORDED_DEFAULTS.get(key))
        if key == "revision":
            weights = str(recorded.get("weights") or "")
            if have == want or weights.rsplit("@", 1)[-1].startswith(str(want)):
                continue
        if have != want:
            problems.append(f"{key}: ranked with {have!r}, asked for {want!r}")
    return problems


# -- the file -------------------------------------------------------------------------------------


def line_check(previous: str, obj: Mapping[str, Any]) -> str:
    """The ``check`` of a ranking line: its content (``check`` left out) chained to the last.

    Args:
        previous: the ``check`` of the line before (``""`` for the header).
        obj: the line's object.
    """
    body = json.dumps({k: v for k, v in obj.items() if k != "check"}, sort_keys=True,
                      ensure_ascii=False)
    return hashlib.sha256(f"{previous}\n{body}".encode()).hexdigest()[:32]


def seal(obj: Mapping[str, Any], previous: str) -> dict[str, Any]:
    """``obj`` with its ``check`` (see :func:`line_check`), ready to write after ``previous``."""
    return {**{k: v for k, v in obj.items() if k != "check"}, "check": line_check(previous, obj)}


def record_key(domain: str, rid: str) -> str:
    """The key of a record in a ranking file (ids are unique within a domain)."""
    return f"{domain}\0{rid}"


@dataclasses.dataclass
class Ranking:
    """A ranking file read into memory.

    Attributes:
        path: the file.
        header: its first line.
        entries: record key -> its line.
        last_check: the ``check`` of the last line kept (the next line chains to it).
    """

    path: Path
    header: dict[str, Any]
    entries: dict[str, dict[str, Any]]
    last_check: str = ""


def _lines(path: Path) -> Iterator[tuple[int, str, bool]]:
    """(line number, text, complete) of each non-empty line."""
    with path.open("r", encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if line.strip():
                yield number, line, line.endswith("\n")


def read_ranking(path: str | os.PathLike[str], *, allow_torn_tail: bool = False) -> Ranking:
    """Read a ranking file.

    Args:
        path: the file written by ``prbench rank``.
        allow_torn_tail: drop a last line cut short (a ``prbench rank`` that was stopped) instead
            of failing; the rank command resumes after it.

    Raises:
        RankingError: the file is missing, not a ranking, or has a bad line (file and line named).
    """
    file = Path(path)
    if not file.is_file():
        raise RankingError(
            f"ranking file {file} does not exist; write it with `prbench rank DATA -o {file}`"
        )
    header: dict[str, Any] | None = None
    entries: dict[str, dict[str, Any]] = {}
    lines: dict[str, int] = {}
    previous = ""
    for number, line, complete in _lines(file):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            if allow_torn_tail and not complete:
                break
            raise RankingError(f"{file}:{number}: not JSON ({exc.msg})") from None
        if header is None:
            if not isinstance(obj, dict) or obj.get("format") != FORMAT:
                raise RankingError(
                    f"{file}:{number}: not a prbench ranking (its first line has no "
                    f"\"format\": \"{FORMAT}\"); write one with `prbench rank`"
                )
            if obj.get("version") != VERSION:
                raise RankingError(
                    f"{file}:{number}: ranking format version {obj.get('version')!r}; this "
                    f"prbench reads version {VERSION}: rank the data again"
                )
            _check_line(file, number, obj, previous, "the header")
            header, previous = obj, obj["check"]
            continue
        problem = _entry_problem(obj)
        if problem:
            if allow_torn_tail and not complete:
                break
            raise RankingError(f"{file}:{number}: {problem}")
        key = record_key(obj["domain"], obj["id"])
        if key in lines:
            raise RankingError(
                f"{file}:{number}: record {obj['id']!r} (domain {obj['domain']!r}) is already on "
                f"line {lines[key]}; a record is ranked once (was the file edited by hand?): "
                "rank the data again into a new file"
            )
        _check_line(file, number, obj, previous, f"record {obj['id']!r}")
        entries[key], lines[key], previous = obj, number, obj["check"]
    if header is None:
        raise RankingError(f"{file}: empty ranking file (no header line)")
    return Ranking(path=file, header=header, entries=entries, last_check=previous)


def _check_line(file: Path, number: int, obj: dict[str, Any], previous: str, what: str) -> None:
    """Refuse a line whose ``check`` does not match its content and the line before it."""
    if obj.get("check") != line_check(previous, obj):
        raise RankingError(
            f"{file}:{number}: {what} does not match the checksum `prbench rank` wrote for it: "
            "the file was edited by hand or damaged (this line or the one before it changed, "
            "moved or was removed); rank the data again into a new file"
        )


def _entry_problem(obj: Any) -> str | None:
    if not isinstance(obj, dict):
        return f"expected a JSON object, got {type(obj).__name__}"
    for field, kind in (("id", str), ("domain", str), ("data_hash", str), ("post_ids", list),
                        ("scores", list)):
        if not isinstance(obj.get(field), kind):
            return f"field {field!r} is missing or not a {kind.__name__}"
    if len(obj["post_ids"]) != len(obj["scores"]):
        return f"record {obj['id']!r}: {len(obj['post_ids'])} post ids but " \
               f"{len(obj['scores'])} scores"
    if not all(isinstance(s, int | float) for s in obj["scores"]):
        return f"record {obj['id']!r}: a score is not a number"
    return None


def entry_for(record: Record, post_ids: Sequence[str], scores: Sequence[float]) -> dict[str, Any]:
    """One record's line: its posts best first (ties in post order), with their scores."""
    from prbench.profiles.budget import top_k

    order = top_k(scores, len(scores))
    return {
        "domain": record.domain,
        "id": record.id,
        "data_hash": record_digest(record),
        "post_ids": [post_ids[i] for i in order],
        "scores": [float(scores[i]) for i in order],
    }


def _source_hint(ranking: Ranking) -> str:
    """Which profile source a ranking serves (a ranking of own posts cannot serve swapped)."""
    source = ranking.header.get("profile_source") or "own"
    return (
        f". This file ranks the {source!r} profile source; the _swapped tasks (and "
        "prbench_profile_source=swapped) need `prbench rank --profile_source swapped`, the "
        "others a ranking of the users' own posts"
    )


def scores_for(ranking: Ranking, record: Record) -> list[float]:
    """A record's scores in its own post order, from the ranking.

    Raises:
        RankingError: the record is not in the ranking, or its question or posts differ from the
            ones ranked (the record and the file are named).
    """
    where = f"record {record.id!r} (domain {record.domain!r}, {record.source or 'no source'})"
    entry = ranking.entries.get(record_key(record.domain, record.id))
    if entry is None:
        raise RankingError(
            f"{ranking.path}: no ranking for {where}; it was ranked from "
            f"{ranking.header.get('data')!r}. Rank this data into it (`prbench rank` resumes, "
            "ranking only the records missing)"
        )
    if entry["data_hash"] != record_digest(record):
        raise RankingError(
            f"{ranking.path}: {where} differs from the record that was ranked (its question, "
            f"category, domain or posts changed; ranked from {ranking.header.get('data')!r}); "
            "rank the data again into a new file" + _source_hint(ranking)
        )
    by_id = dict(zip(entry["post_ids"], entry["scores"], strict=True))
    unranked = [p.id for p in record.profile if p.id not in by_id]
    if unranked:
        shown = ", ".join(repr(p) for p in unranked[:5]) + (" ..." if len(unranked) > 5 else "")
        raise RankingError(
            f"{ranking.path}: {where}: the ranking has no score for {len(unranked)} of its "
            f"posts ({shown}); rank the data again into a new file"
        )
    return [float(by_id[p.id]) for p in record.profile]


# -- the builder ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RankedOptions:
    """Options of the ``ranked`` profile builder.

    The identity options (``model`` ... ``doc_format``) say which ``dense`` ranking is wanted;
    ``model`` unset checks none of them (the data is always checked).
    """

    path: str = dataclasses.field(
        default="", metadata={"help": "the ranking file written by `prbench rank`"}
    )
    k: int = ranked_option("k")
    format: str = ranked_option("format")
    max_tokens: int | None = ranked_option("max_tokens")
    tokenizer: str | None = ranked_option("tokenizer")
    trust_remote_code: bool = ranked_option("trust_remote_code")
    model: str | None = dataclasses.field(
        default=None,
        metadata={"help": "check: the encoder model the ranking must come from; none = no check"},
    )
    encoder: str = dataclasses.field(
        default="auto", metadata={"help": "check: the encoder kind (auto = not checked)"}
    )
    revision: str | None = dataclasses.field(
        default=None, metadata={"help": "check: the model's hub revision"}
    )
    max_length: int | None = dataclasses.field(
        default=None, metadata={"help": "check: the encoder's truncation",
                                 **TABLE_BOUNDS["max_length"]}
    )
    similarity: str = dataclasses.field(default="dot", metadata={"help": "check: dot or cosine"})
    query_format: str = ranked_option("query_format", help="check: the query template")
    doc_format: str = ranked_option("doc_format", help="check: the post template")
    embed_dtype: str | None = dataclasses.field(
        default=None, metadata={"help": (
            "check: the precision the ranking must be computed in (float32, bfloat16, "
            "bfloat16-weights; auto = what auto gives on this machine, a difference warned); "
            "none = not checked")},
    )
    embed_backend: str | None = dataclasses.field(
        default=None, metadata={"help": (
            "check: the runtime the ranking must be computed on (torch, openvino; auto = what "
            "auto gives on this machine, a difference warned); none = not checked")},
    )

    def __post_init__(self) -> None:
        if self.embed_dtype is not None and self.embed_dtype not in EMBED_DTYPES:
            raise ValueError(f"option 'embed_dtype' must be one of {EMBED_DTYPES} or none")
        if self.embed_backend is not None and self.embed_backend not in EMBED_BACKENDS:
            raise ValueError(f"option 'embed_backend' must be one of {EMBED_BACKENDS} or none")
        if not self.path:
            raise ValueError("option 'path' is required: the file written by `prbench rank`")
        check_positive(self.k, "k", allow_none=False)
        check_positive(self.max_tokens, "max_tokens")
        check_format(self.format, POST_FIELDS, "format")
        check_format(self.query_format, QUERY_FIELDS, "query_format")
        check_format(self.doc_format, DOC_FIELDS, "doc_format")


class RankedBuilder:
    """The top-k posts of each record, read from a ``prbench rank`` file.

    Raises:
        RankingError: the file is missing or unreadable, or was ranked with another encoder than
            the one the options name (each differing field named).
    """

    def __init__(self, options: RankedOptions) -> None:
        self.options = o = options
        self.ranking = read_ranking(o.path)
        self.checked = o.model is not None
        if self.checked:
            recorded = self.ranking.header.get("identity") or {}
            problems = identity_problems(recorded, dense_identity(o))
            if problems:
                raise RankingError(
                    f"{o.path} was ranked with another encoder than this task asks for: "
                    + "; ".join(problems)
                    + ". Rank the data with the task's encoder options (`prbench rank ... "
                    "--profile_args builder=dense,model=...`), or drop prbench_ranked"
                )
        if o.embed_dtype is not None:
            check_precision(self.ranking, o.embed_dtype)
        if o.embed_backend is not None:
            check_backend(self.ranking, o.embed_backend, o.embed_dtype)
        self.counter = TokenCounter(o.tokenizer, trust_remote_code=o.trust_remote_code)
        self.id = builder_id(
            "ranked", o, ["k", "path"],
            skip=[*IDENTITY_OPTIONS, "trust_remote_code", "embed_dtype", "embed_backend"],
        )

    def build(self, records: Sequence[Record]) -> list[ProfileView]:
        """One view per record: its top-k posts by the stored scores, as ``dense`` renders them."""
        o = self.options
        extra = {
            "ranking": str(self.ranking.path),
            "encoder": self.ranking.header.get("encoder"),
            "identity_checked": self.checked,
        }
        return [
            ranked_view(
                r, scores_for(self.ranking, r), k=o.k, counter=self.counter,
                max_tokens=o.max_tokens, fmt=o.format, builder=self.id, extra=extra,
            )
            for r in records
        ]


def _compare_recorded(ranking: Ranking, option: str, have: str, wanted: str,
                      here: Callable[[], tuple[str | None, str]], *, how: str) -> None:
    """Refuse an explicit ``option=wanted`` the ranking was not made with; warn under ``auto``.

    Args:
        ranking: the ranking read.
        option: the option's name (``embed_dtype``, ``embed_backend``).
        have: what the ranking records.
        wanted: the option's value.
        here: for ``auto``: what this machine would use and why (``None``: nothing can be
            said without measuring, so nothing is said).
        how: ``"in"`` (a precision) or ``"on"`` (a runtime), for the messages.

    Raises:
        RankingError: an explicit value the ranking was not computed with.
    """
    import sys

    if wanted != "auto":
        if have != wanted:
            raise RankingError(
                f"{ranking.path} was ranked {how} {have}, and this task asks for "
                f"{option}={wanted}; rank the data again with {option}={wanted} (`prbench "
                f"rank ... --profile_args builder=dense,{option}={wanted}`), or ask for "
                f"{option}={have}"
            )
        return
    used, why = here()
    if used is not None and have != used:
        sys.stderr.write(
            f"prbench: warning: {ranking.path} was ranked {how} {have}; {option}=auto would "
            f"compute {how} {used} on this machine{f' ({why})' if why else ''}. Its posts are "
            f"used as ranked (pass {option}={have} to say so, or rank again with "
            f"{option}={used})\n"
        )


def check_precision(ranking: Ranking, wanted: str) -> None:
    """Compare the precision a ranking was computed in with ``embed_dtype=wanted``.

    A ranking records the precision its encoder ran in (``identity.embed_dtype``; a ranking
    written before the option existed was computed in float32). An explicit ``float32`` or
    ``bfloat16`` that differs is an error; ``auto`` is resolved as this machine would resolve it
    for the encoder, and a difference is a warning naming both (``auto`` differs between machines,
    and a ranking is made once to be read anywhere).

    Raises:
        RankingError: an explicit precision the ranking was not computed in.
    """
    def here() -> tuple[str | None, str]:
        from prbench.devices import resolve_device, resolve_embed_dtype

        return resolve_embed_dtype("auto", resolve_device("auto", explicit=False))[0], ""

    recorded = ranking.header.get("identity") or {}
    _compare_recorded(ranking, "embed_dtype", str(recorded.get("embed_dtype") or "float32"),
                      wanted, here, how="in")


def check_backend(ranking: Ranking, wanted: str, precision: str | None) -> None:
    """Compare the runtime a ranking was computed on with ``embed_backend=wanted``.

    As :func:`check_precision` does for the precision: a ranking records its runtime
    (``identity.embed_backend``; one written before the option existed ran on torch). An explicit
    ``torch`` or ``openvino`` that differs is an error; ``auto`` is resolved as this machine
    would resolve it without measuring, and a difference is a warning naming both (nothing is
    said where only a measurement could tell).

    Args:
        ranking: the ranking read.
        wanted: the ``embed_backend`` option.
        precision: the ``embed_dtype`` option (``None``: ``auto``).

    Raises:
        RankingError: an explicit runtime the ranking was not computed on.
    """
    def here() -> tuple[str | None, str]:
        from prbench.devices import resolve_device, resolve_embed_dtype
        from prbench.profiles.embed_backend import resolve_embed_backend
        from prbench.profiles.embed_openvino import openvino_version

        device = resolve_device("auto", explicit=False)
        dtype, _why = resolve_embed_dtype(precision or "auto", device)
        choice = resolve_embed_backend("auto", device, dtype, ov_version=openvino_version())
        return (choice.backend if choice.settled else None), choice.reason

    recorded = ranking.header.get("identity") or {}
    _compare_recorded(ranking, "embed_backend", str(recorded.get("embed_backend") or "torch"),
                      wanted, here, how="on")


def ranked_options_from_dense(dense: Any, path: str) -> dict[str, Any]:
    """The ``ranked`` options standing for ``dense`` options whose ranking is in ``path``.

    Options at ``ranked``'s own default are left out (its defaults are ``dense``'s, except
    ``model`` and ``embed_dtype``, which are always set so that the encoder and its precision
    are checked).
    """
    defaults = {f.name: f.default for f in dataclasses.fields(RankedOptions)}
    out: dict[str, Any] = {"path": path, "embed_dtype": dense.embed_dtype,
                           "embed_backend": dense.embed_backend}
    for name in (*IDENTITY_OPTIONS, *VIEW_OPTIONS):
        value = getattr(dense, name)
        if name == "model" or value != defaults[name]:
            out[name] = value
    return out


__all__ = [
    "FORMAT",
    "IDENTITY_OPTIONS",
    "VERSION",
    "RankedBuilder",
    "RankedOptions",
    "Ranking",
    "RankingError",
    "check_backend",
    "check_precision",
    "dense_identity",
    "entry_for",
    "identity_problems",
    "line_check",
    "ranked_options_from_dense",
    "read_ranking",
    "record_key",
    "scores_for",
    "seal",
]
