"""``planner``: the reward model sees what the user is likely to expect, inferred by an LLM.

The condition the Personalized RewardBench paper found most useful: instead of (or next to) raw
posts, the RM is shown a short list of aspects the user will probably expect from an answer,
inferred by a "planner" LLM from the question and the user's retrieved posts (a LaMP-QA-style
plan). The planner never sees the hidden narrative or rubric.

Steps per record: an inner profile builder (``retriever``, default ``dense``) picks the posts; the
planner LLM reads them with the question and writes a bulleted list; the list (at most
``max_aspects`` items) becomes the profile text, alone (``show=plan``) or followed by the posts
(``show=plan+posts``).

Plans are cached on disk, keyed by the backend's fingerprint, the exact chat sent and the decoding
settings, so a second run (or another RM evaluated under the same condition) calls no LLM. The raw
reply is cached and parsed on every load, so a parser fix takes effect without regenerating.

A reply with no readable list (:func:`prbench.judges.parsing.parse_plan`) gives an empty plan,
counted in :meth:`PlannerProfileBuilder.stats` and marked in the view's ``extra["plan_failure"]``;
with ``on_failure=raise`` the build stops instead.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from prbench.hashing import stable_hash
from prbench.judges import prompts
from prbench.judges.common import (
    BackendOptions,
    FailureCounter,
    build_component,
    generate_in_batches,
    resolve_backend,
)
from prbench.judges.parsing import ParseFailure, parse_plan
from prbench.paths import cache_dir
from prbench.profiles.base import ProfileView, build_views, render_posts

if TYPE_CHECKING:
    from prbench.backends.base import GenerationBackend
    from prbench.profiles.base import ProfileBuilder
    from prbench.records import Record


@dataclasses.dataclass(frozen=True)
class PlannerOptions(BackendOptions):
    """Options of the ``planner`` profile builder (plus backend/decoding options)."""

    retriever: str = dataclasses.field(
        default="dense",
        metadata={"help": "profile-builder id that picks the posts the planner reads"},
    )
    retriever_options: dict[str, Any] = dataclasses.field(
        default_factory=dict,
        metadata={"help": 'options of the retriever as JSON, e.g. {"k": 10, "model": "minilm"}'},
    )
    max_aspects: int = dataclasses.field(
        default=8, metadata={"help": "the most inferred aspects kept per record", "ge": 1,
                             "le": 1000}
    )
    show: Literal["plan", "plan+posts"] = dataclasses.field(
        default="plan", metadata={"help": "what the RM sees: the plan, or the plan then the posts"}
    )
    max_new_tokens: int = dataclasses.field(
        default=256, metadata={"help": "tokens per plan", "ge": 1, "le": 1_048_576})
    plan_cache_dir: str = dataclasses.field(
        default="", metadata={"help": "plan cache folder ('' = the prbench cache 'planner')"}
    )
    use_plan_cache: bool = dataclasses.field(
        default=True, metadata={"help": "read and write the plan cache"}
    )
    on_failure: Literal["empty", "raise"] = dataclasses.field(
        default="empty",
        metadata={"help": "unreadable plan: an empty plan (counted, flagged) or stop"},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_aspects < 1:
            raise ValueError("max_aspects must be at least 1")
        if self.retriever.rpartition("/")[2] == "planner":
            raise ValueError("the planner's retriever cannot be the planner itself")


class PlanCache:
    """Raw planner replies in ``<folder>/plans.sqlite`` (a :class:`prbench.store.SQLiteStore`).

    A damaged file raises :class:`prbench.store.StoreError` naming it and the ways out; a stored
    reply that is not text counts as missing and is rewritten.
    """

    def __init__(self, folder: Path) -> None:
        from prbench.store import SQLiteStore

        self.folder = folder
        self.store = SQLiteStore(
            folder / "plans.sqlite", namespace="plans", schema_version=1,
            tables=("CREATE TABLE IF NOT EXISTS plans (key TEXT PRIMARY KEY, reply TEXT NOT NULL, "
                    "meta TEXT NOT NULL, created REAL NOT NULL)",),
            label="planner cache", off_hint="the planner option use_plan_cache=false",
        )

    def get(self, key: str) -> str | None:
        """The cached reply, or ``None``."""
        rows = self.store.query("SELECT reply FROM plans WHERE key = ?", (key,))
        reply = rows[0][0] if rows else None
        return reply if isinstance(reply, str) else None

    def put(self, key: str, reply: str, meta: Mapping[str, Any]) -> None:
        """Store one reply."""
        import time

        self.store.write(
            "INSERT OR REPLACE INTO plans (key, reply, meta, created) VALUES (?, ?, ?, ?)",
            [(key, reply, json.dumps(dict(meta), ensure_ascii=False, default=str), time.time())],
        )


class PlannerProfileBuilder:
    """Builds planner profile views; implements :class:`prbench.profiles.base.ProfileBuilder`.

    Args:
        options: the builder's options.
        backend: a ready generation backend (tests, sharing one model); built from ``options``
            on first use otherwise.
        retriever: a ready inner profile builder; resolved through the plugin registry from
            ``options.retriever`` on first use otherwise.
    """

    name = "planner"

    def __init__(
        self,
        options: PlannerOptions,
        backend: GenerationBackend | None = None,
        retriever: ProfileBuilder | None = None,
    ) -> None:
        self.options = options
        self._backend = backend
        self._retriever = retriever
        self._counter = FailureCounter()
        self._records = 0
        self._cache_hits = 0
        self._generated = 0

    @property
    def backend(self) -> GenerationBackend:
        """The planner LLM (built on first use)."""
        if self._backend is None:
            self._backend = resolve_backend(self.options, None, self.name)
        return self._backend

    @property
    def retriever(self) -> ProfileBuilder:
        """The inner profile builder (resolved on first use).

        Raises:
            ValueError: ``options.retriever`` names no registered profile builder.
        """
        if self._retriever is None:
            self._retriever = build_component(
                "profile-builder",
                self.options.retriever,
                self.options.retriever_options,
                "planner (option `retriever`)",
            )
        return self._retriever

    def describe(self) -> str:
        """The builder id with its main options (recorded in each view)."""
        o = self.options
        return f"planner(retriever={o.retriever},model={o.model or '?'},show={o.show})"

    def _cache(self) -> PlanCache | None:
        if not self.options.use_plan_cache:
            return None
        folder = Path(self.options.plan_cache_dir) if self.options.plan_cache_dir else (
            cache_dir("planner")
        )
        return PlanCache(folder)

    def build(self, records: Sequence[Record]) -> list[ProfileView]:
        """One planner view per record, in order.

        Raises:
            ValueError: the retriever is unavailable, or it returned the wrong number of views.
            JudgeParseError: with ``on_failure="raise"``, when a plan could not be read.
        """
        o = self.options
        inner = build_views(self.retriever, records, f"planner: retriever {o.retriever!r}")
        config = o.generation_config()
        chats = [
            prompts.planner_chat(r.question, view.text, o.max_aspects)
            for r, view in zip(records, inner, strict=True)
        ]
        cache = self._cache()
        backend = self.backend
        keys = [
            stable_hash("planner", backend.fingerprint, chat, dataclasses.asdict(config))
            for chat in chats
        ]
        replies: list[str | None] = [cache.get(k) if cache else None for k in keys]
        missing = [i for i, r in enumerate(replies) if r is None]
        self._cache_hits += len(records) - len(missing)
        if missing:
            fresh = generate_in_batches(
                backend, [chats[i] for i in missing], config, o.batch_size,
                desc=self.name, unit="plan", keep_failures=True,
            )
            self._generated += len(missing)
            for i, reply in zip(missing, fresh, strict=True):
                replies[i] = reply
                if cache is not None and isinstance(reply, str):  # failures are never cached
                    cache.put(
                        keys[i],
                        reply,
                        {"backend": backend.fingerprint, "prompt_version": prompts.PROMPT_VERSION},
                    )
        views: list[ProfileView] = []
        failures: list[tuple[str, ParseFailure]] = []
        for record, view, reply in zip(records, inner, replies, strict=True):
            self._records += 1
            parsed = parse_plan(reply or "", o.max_aspects)
            failure: ParseFailure | None = None
            if isinstance(parsed, ParseFailure):
                self._counter.add(parsed.reason)
                failures.append((record.id, parsed))
                failure, plan = parsed, []
            else:
                self._counter.add(None)
                plan = parsed
            views.append(self._view(view, plan, failure))
        if failures and o.on_failure == "raise":
            from prbench.judges.rating import JudgeParseError

            raise JudgeParseError(self.name, failures)
        return views

    def _view(
        self, inner: ProfileView, plan: list[str], failure: ParseFailure | None
    ) -> ProfileView:
        parts = []
        if plan:
            parts.append(prompts.PLAN_HEADER + "\n" + "\n".join(f"- {p}" for p in plan))
        if self.options.show == "plan+posts" and inner.items:
            parts.append("Their earlier posts:\n" + render_posts(inner.items))
        elif self.options.show == "plan+posts" and inner.text:
            parts.append("Their earlier posts:\n" + inner.text)
        text = "\n\n".join(parts)
        return ProfileView(
            text=text,
            items=inner.items,
            n_tokens=len(text.split()),
            builder=self.describe(),
            extra={
                "plan": plan,
                "plan_failure": None if failure is None else failure.reason,
                "retriever": inner.builder,
                "retrieval": inner.extra,
            },
        )

    def stats(self) -> dict[str, Any]:
        """Counts since construction, JSON-ready (for results files)."""
        return {
            "builder": self.name,
            "backend": self._backend.fingerprint if self._backend is not None else None,
            "prompt_version": prompts.PROMPT_VERSION,
            "n_records": self._records,
            "n_cache_hits": self._cache_hits,
            "n_generated": self._generated,
            **self._counter.as_dict(),
        }
