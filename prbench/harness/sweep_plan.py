"""``prbench sweep --dry_run``: the cells, their pairs, scored tokens and GPU-hours, offline.

Pairs come from the data's statistics: for the published benchmark from the statistics bundled
with its tasks (``tasks/personalized_rewardbench/published/statistics.json``: records per domain,
question, answer and profile sizes as published), for local data (the bundled sample, a file or
a folder) from the records themselves. No data is downloaded and no model is loaded.

Scored tokens are an approximation: **tokens = words x** ``tokens_per_word`` (default 1.3, a
usual ratio of English text to subword tokens; chat-template and instruction tokens are not
counted). Per pair, a pointwise scorer reads two requests (question + the condition's profile
view + one answer); a pairwise judge (tag ``pairwise``) reads two prompts, one per order, each
with both answers, and writes ``estimate.generated_tokens`` per prompt (default 0: not counted).
The profile view is k posts of ``post_words`` words for builders with a ``k`` (``dense``,
``bm25``, ``ranked``, ...), ``max_aspects`` x :data:`PLAN_ASPECT_WORDS` words for ``planner``
(plus its posts with ``show=plan+posts``; the planner LLM's own tokens are once per record and
condition, cached and shared by every scorer, and not counted), else the whole profile; none
for a scorer registered with ``reads_profile=False`` (its profiles are never built).

Profile embedding (builders that embed posts: ``dense``, and ``planner`` with a ``dense``
retriever): every post of every evaluated record's profile and each question, through the
encoder named by the builder's ``model`` option; FLOPs per text from the encoder's config
(:func:`prbench.flops.embedding_flop_model`, ``2 N T + 4 L d T^2`` at the mean post length in
tokens). Cells that share an encoder and data share these embeddings through the embedding
cache, so the total counts each (encoder, data, domain) once.

GPU-hours = tokens / throughput. The throughput is ``--tokens_per_s`` if given, else the
scorer's ``estimate.tokens_per_s`` in the sweep file, else a compute-bound estimate from the
scorer's ``estimate.params_b``: ``H100_BF16_TFLOPS`` x ``ASSUMED_MFU`` / (2 x parameters) —
the H100 SXM's dense bf16 peak from NVIDIA's datasheet and an assumed 30% utilisation; a forward
pass costs about 2 FLOPs per parameter and token. Prefill (scoring) is close to compute-bound;
generated tokens are much slower, so give a measured ``tokens_per_s`` for generative judges.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from prbench.harness.sweep_file import Cell, Sweep, SweepFileError

DEFAULT_TOKENS_PER_WORD = 1.3
#: words per profile post when the data's statistics have none (the published ones do not): the
#: bundled sample's mean is 40.6 words per post, rounded
DEFAULT_POST_WORDS = 41.0
#: words per inferred aspect of a planner's plan (an assumption; plans are bulleted short lines)
PLAN_ASPECT_WORDS = 12.0
#: NVIDIA H100 SXM dense bf16 tensor throughput (datasheet, without sparsity), TFLOP/s
H100_BF16_TFLOPS = 989.0
#: share of that peak an RM forward pass is assumed to reach
ASSUMED_MFU = 0.3


@dataclasses.dataclass(frozen=True)
class DomainStats:
    """What the estimate needs of one domain."""

    records: int
    question_words: float
    answer_words: float
    profile_posts: float
    post_words: float | None
    source: str


@dataclasses.dataclass
class CellEstimate:
    """The dry-run line of one cell."""

    cell: Cell
    tasks: list[str]
    pairs: int
    tokens: float
    tokens_per_s: float | None
    throughput_source: str
    notes: list[str]
    data_sources: list[str]
    embed_texts: float = 0.0
    embed_flops: float | None = 0.0
    embed_keys: tuple[tuple[str, str, str, float], ...] = ()

    @property
    def gpu_hours(self) -> float | None:
        """Tokens over throughput, in hours."""
        if not self.tokens_per_s:
            return None
        return self.tokens / self.tokens_per_s / 3600.0


def published_statistics() -> dict[str, Any]:
    """The published benchmark's statistics bundled with its tasks."""
    from prbench.harness.tasks import builtin_task_dir

    path = builtin_task_dir() / "personalized_rewardbench" / "published" / "statistics.json"
    return json.loads(path.read_text(encoding="utf-8"))


def _mid(value: Any) -> float:
    return (float(value[0]) + float(value[1])) / 2 if isinstance(value, list) else float(value)


def _local_stats(source: str, cache: dict[str, dict[str, DomainStats]]) -> dict[str, DomainStats]:
    from prbench.records import load_records

    if source not in cache:
        loaded = load_records(source)
        records = loaded[0] if isinstance(loaded, tuple) else loaded
        by_domain: dict[str, list[Any]] = {}
        for r in records:
            by_domain.setdefault(r.domain or "*", []).append(r)
        by_domain["*"] = list(records)

        def mean(xs: Sequence[float]) -> float:
            return sum(xs) / len(xs) if xs else 0.0

        cache[source] = {
            d: DomainStats(
                records=len(rs),
                question_words=mean([len(r.question.split()) for r in rs]),
                answer_words=mean([(len(r.chosen.split()) + len(r.rejected.split())) / 2
                                   for r in rs]),
                profile_posts=mean([len(r.profile) for r in rs]),
                post_words=mean([len(p.text.split()) for r in rs for p in r.profile]) or None,
                source=f"the records of {source}",
            )
            for d, rs in by_domain.items()
        }
    return cache[source]


def domain_stats(source: str, domain: str, cache: dict[str, dict[str, DomainStats]]
                 ) -> DomainStats:
    """Statistics of one domain of a data source (published: bundled; local: computed).

    Raises:
        SweepFileError: a hub dataset other than the published one (no statistics offline).
    """
    from prbench.records import HUB_DATASET, is_hub_id

    if source == HUB_DATASET:
        stats = published_statistics()
        names = list(stats["domains"]) if domain == "*" else [domain]
        return DomainStats(
            records=sum(int(stats["domains"][d]["records"]) for d in names),
            question_words=_mid(stats["question_words"]),
            answer_words=float(stats["answer_words"]),
            profile_posts=_mid(stats["profile_posts"]),
            post_words=stats.get("post_words"),
            source="published statistics bundled with the task",
        )
    if is_hub_id(source):
        raise SweepFileError(f"{source}: a hub dataset without bundled statistics; --dry_run "
                             "counts pairs offline only for the published benchmark and local "
                             "data")
    found = _local_stats(source, cache)
    if domain not in found:
        return DomainStats(0, 0.0, 0.0, 0.0, None, f"the records of {source}")
    return found[domain]


def _leaf_entries(names: Sequence[str], index: Mapping[str, Any]) -> list[Any]:
    from prbench.options import suggest

    out: list[Any] = []
    for name in names:
        entry = index.get(name)
        if entry is None:
            raise SweepFileError(f"unknown task {name!r}{suggest(name, index)}")
        members = (entry.cfg or {}).get("task")
        if entry.kind.name == "GROUP" and isinstance(members, list):
            out += _leaf_entries([m if isinstance(m, str) else m.get("task") for m in members],
                                 index)
        else:
            out.append(entry)
    return out


def _profile_words(builder: str, options: Mapping[str, Any], stats: DomainStats,
                   post_words: float) -> tuple[float, str | None]:
    posts = stats.profile_posts
    words = stats.post_words or post_words
    name = builder.rpartition("/")[2]
    if name == "none":
        return 0.0, None
    if name == "planner":
        plan = float(options.get("max_aspects", 8)) * PLAN_ASPECT_WORDS
        note = ("planner: the plan's words assumed (max_aspects x "
                f"{PLAN_ASPECT_WORDS:g}); the planner LLM's tokens are not counted")
        if options.get("show") == "plan+posts":
            inner = options.get("retriever_options") or {}
            plan += min(float(inner.get("k", 5)), posts) * words
        return plan, note
    if "k" in options and options["k"] is not None:
        return min(float(options["k"]), posts) * words, None
    return posts * words, f"{builder}: the whole profile counted (an upper bound)"


def _embedding_model(builder: str, options: Mapping[str, Any]) -> str | None:
    """The encoder model a profile builder embeds posts with, or ``None`` when it embeds none."""
    name = builder.rpartition("/")[2]
    if name == "planner":
        inner = str(options.get("retriever", "dense"))
        return _embedding_model(inner, options.get("retriever_options") or {})
    if name != "dense":
        return None
    from prbench.profiles.encoder_options import ENCODER_OPTIONS

    return str(options.get("model") or ENCODER_OPTIONS["model"][0])


def _embedding_work(model: str, options: Mapping[str, Any], texts: float, words: float,
                    tokens_per_word: float) -> float | None:
    """FLOPs to embed ``texts`` texts of ``words`` words with ``model`` (``None``: unknown)."""
    from prbench.flops import embedding_flop_model

    fm = embedding_flop_model(model, options.get("revision"))
    if fm is None:
        return None
    tokens = words * tokens_per_word + 2  # the encoder's start and end tokens
    cap = options.get("max_length") or fm.max_tokens or 512
    return texts * fm.bidirectional(max(1, round(min(tokens, float(cap)))))


def _scorer_info(model_args: str) -> tuple[str, tuple[str, ...] | None, bool, int]:
    """The scorer id, its tags (``None``: not installed here), whether it reads profiles, and
    how many orders a pairwise scorer judges each pair in (1 where its resolved options say
    ``orders=one``, as ``protocol=released`` and the authors' RM-R1 protocol set; else 2).
    """  # noqa: D205
    from prbench.harness.sweep_file import resolved_scorer
    from prbench.options import OptionsError, parse_kv_string
    from prbench.plugins import UnknownComponentError, get_registry

    try:
        args = parse_kv_string(model_args)
        resolved = resolved_scorer(model_args)
    except OptionsError:
        args, resolved = {}, {}
    scorer = args.get("scorer", "")
    options = resolved.get("options", resolved.get("written")) or {}
    orders = 1 if options.get("orders") == "one" else 2
    try:
        comp = get_registry().get("scorer", scorer)
    except UnknownComponentError:
        return scorer, None, True, orders
    return scorer, tuple(getattr(comp, "tags", ()) or ()), bool(comp.reads_profile), orders


def estimate_cell(
    cell: Cell,
    index: Mapping[str, Any],
    *,
    tokens_per_s: float | None,
    tokens_per_word: float,
    post_words: float,
    cache: dict[str, dict[str, DomainStats]],
) -> CellEstimate:
    """Pairs, tokens and GPU-hours of one cell.

    Raises:
        SweepFileError: an unknown task, or data without statistics.
        prbench.options.OptionsError: metadata the tasks refuse.
    """
    from prbench.harness.task_options import parse_request

    scorer_id, tags, reads_profile, orders = _scorer_info(cell.scorer.model_args)
    pairwise = "pairwise" in (tags or ())
    generated = cell.scorer.estimate.get("generated_tokens", 0.0)
    notes: list[str] = []
    if tags is None:
        notes.append(f"scorer {scorer_id!r} is not installed here: counted as a pointwise "
                     "scorer")
    pairs = 0
    words = 0.0
    embed_texts = 0.0
    embed_flops: float | None = 0.0
    embed_keys: list[tuple[str, str, str, float]] = []
    sources: list[str] = []
    leaves = _leaf_entries(cell.condition.tasks, index)
    for entry in leaves:
        kwargs = {**cell.condition.metadata, **((entry.cfg or {}).get("dataset_kwargs") or {})}
        req = parse_request(kwargs)
        stats = domain_stats(req.source, req.domain, cache)
        if stats.source not in sources:
            sources.append(stats.source)
        n = stats.records
        if cell.limit is not None:
            n = min(n, int(cell.limit) if cell.limit >= 1 else math.ceil(cell.limit * n))
        if reads_profile:
            profile, note = _profile_words(req.builder, req.builder_options, stats, post_words)
        else:
            profile, note = 0.0, f"{scorer_id}: reads no profile (none counted)"
        if note and note not in notes:
            notes.append(note)
        if stats.post_words is None and profile and req.builder.rpartition("/")[2] != "planner":
            text = f"post length not in the statistics: {post_words:g} words per post assumed"
            if text not in notes:
                notes.append(text)
        if pairwise:  # one prompt per order, each with both answers
            per_pair = orders * (stats.question_words + profile + 2 * stats.answer_words)
        else:
            per_pair = 2 * (stats.question_words + profile + stats.answer_words)
        pairs += n
        words += n * per_pair
        model = _embedding_model(req.builder, req.builder_options) if reads_profile else None
        if model is not None:
            texts = n * (stats.profile_posts + 1)  # every post and the question
            inner = (req.builder_options.get("retriever_options") or {}
                     if req.builder.rpartition("/")[2] == "planner" else req.builder_options)
            work = _embedding_work(model, inner, texts, stats.post_words or post_words,
                                   tokens_per_word)
            embed_texts += texts
            if work is None or embed_flops is None:
                embed_flops = None
                text = f"encoder {model!r}: its config is not here, embedding FLOPs not counted"
                if text not in notes:
                    notes.append(text)
            else:
                embed_flops += work
                embed_keys.append((model, req.source, req.domain, work))
    tokens = words * tokens_per_word
    if pairwise:
        tokens += pairs * orders * generated
        notes.append(f"{scorer_id}: pairwise judge, "
                     + ("both orders; " if orders == 2 else "one order per pair; ")
                     + (f"{generated:g} generated tokens per prompt counted" if generated
                        else "generated tokens not counted (set estimate.generated_tokens)"))
    if tokens_per_s:
        rate, source = tokens_per_s, "--tokens_per_s"
    elif cell.scorer.estimate.get("tokens_per_s"):
        rate, source = cell.scorer.estimate["tokens_per_s"], "sweep file"
    elif cell.scorer.estimate.get("params_b"):
        params = cell.scorer.estimate["params_b"] * 1e9
        rate = H100_BF16_TFLOPS * 1e12 * ASSUMED_MFU / (2 * params)
        source = f"H100 compute bound, {cell.scorer.estimate['params_b']:g}B params"
    else:
        rate, source = None, "none (give --tokens_per_s)"
    return CellEstimate(cell, [e.name for e in leaves], pairs, tokens, rate, source, notes,
                        sources, embed_texts, embed_flops, tuple(embed_keys))


def estimate_sweep(
    sweep: Sweep,
    *,
    limit: float | None = None,
    tokens_per_s: float | None = None,
    tokens_per_word: float = DEFAULT_TOKENS_PER_WORD,
    post_words: float = DEFAULT_POST_WORDS,
) -> list[CellEstimate]:
    """The estimate of every cell (task names resolved from prbench's and the plugins' tasks)."""
    from prbench.harness.lm_eval_compat import task_index
    from prbench.harness.task_dirs import task_dirs

    index = task_index(task_dirs())
    cache: dict[str, dict[str, DomainStats]] = {}
    return [
        estimate_cell(c, index, tokens_per_s=tokens_per_s, tokens_per_word=tokens_per_word,
                      post_words=post_words, cache=cache)
        for c in sweep.cells(limit)
    ]


def format_estimates(estimates: Sequence[CellEstimate], *, tokens_per_word: float) -> str:
    """The dry-run table, totals and the notes."""
    head = ["cell", "tasks", "pairs", "tokens", "tokens/s", "GPU-h", "throughput from",
            "embed texts", "embed TFLOP"]
    rows = []
    for e in estimates:
        hours = e.gpu_hours
        marked = e.cell.scorer.stand_in or e.cell.condition.stand_in
        rows.append([
            e.cell.key + (" (STAND-IN)" if marked else ""), str(len(e.tasks)), str(e.pairs),
            f"{e.tokens / 1e6:.2f}M",
            "-" if not e.tokens_per_s else f"{e.tokens_per_s:,.0f}",
            "-" if hours is None else f"{hours:.3f}", e.throughput_source,
            f"{e.embed_texts:,.0f}" if e.embed_texts else "-",
            _tflop(e.embed_flops) if e.embed_texts else "-",
        ])
    known = [e.gpu_hours for e in estimates if e.gpu_hours is not None]
    shared = {key[:3]: key[3] for e in estimates for key in e.embed_keys}
    unknown = any(e.embed_flops is None for e in estimates)
    rows.append(["total", "", str(sum(e.pairs for e in estimates)),
                 f"{sum(e.tokens for e in estimates) / 1e6:.2f}M", "",
                 "-" if not known else f"{sum(known):.3f}"
                 + ("" if len(known) == len(estimates) else " (partial)"),
                 "", "", (_tflop(sum(shared.values())) if shared else "-")
                 + (" (partial)" if unknown and shared else "")])
    from prbench.tables import text_table

    lines = text_table(head, rows, rule=True).split("\n")
    notes = list(dict.fromkeys(n for e in estimates for n in e.notes))
    asks = {e.cell.scorer.name: e.cell.scorer.resources for e in estimates
            if e.cell.scorer.resources}
    for name, ask in asks.items():  # what --executor ray asks of a node for each of its cells
        notes.append(f"--executor ray: each cell of {name} asks for "
                     + ", ".join(f"{k}={v:g}" + (" GiB" if k == "memory" else "")
                                 for k, v in ask.items()))
    lines += ["", f"tokens = words x {tokens_per_word:g} (approximation; chat-template tokens not "
              "counted); pairs and words from: "
              + "; ".join(dict.fromkeys(s for e in estimates for s in e.data_sources))]
    if any("H100 compute bound" in e.throughput_source for e in estimates):
        lines.append(f"compute-bound throughput: {H100_BF16_TFLOPS:g} TFLOP/s (H100 SXM dense "
                     f"bf16, NVIDIA datasheet) x {ASSUMED_MFU:g} assumed utilisation / "
                     "(2 FLOPs x parameters) per token; measure yours and pass --tokens_per_s")
    if any(e.embed_texts for e in estimates):
        lines.append("embed: profile posts and questions the condition's builder embeds; FLOPs "
                     "from the encoder's config at the mean post length; the total counts each "
                     "encoder x data x domain once (cells share them through the embedding "
                     "cache); not in tokens or GPU-h")
    lines += [f"note: {n}" for n in notes]
    stand_ins: dict[str, str] = {}
    for e in estimates:
        for part in (e.cell.scorer, e.cell.condition):
            if part.stand_in:
                stand_ins.setdefault(part.name, part.stand_in)
    lines += [f"STAND-IN {name}: {text}" for name, text in stand_ins.items()]
    return "\n".join(lines)


def _tflop(flops: float | None) -> str:
    return "?" if flops is None else f"{flops / 1e12:.2f}"


__all__ = [
    "ASSUMED_MFU",
    "DEFAULT_POST_WORDS",
    "DEFAULT_TOKENS_PER_WORD",
    "H100_BF16_TFLOPS",
    "CellEstimate",
    "DomainStats",
    "domain_stats",
    "estimate_cell",
    "estimate_sweep",
    "format_estimates",
    "published_statistics",
]
