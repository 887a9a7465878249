"""The scorer runtime: what every scorer gets from the harness, built in or from a plugin.

A scorer only computes (``score(requests)``, or ``compare(pairs)`` for a pairwise judge). The
:class:`ScorerRuntime` wrapped around it does the rest, the same way for every scorer:

- **request keys**: each request is hashed with everything in it (question, response or both
  answers, profile text and items, category, domain, record id, hidden fields) — see
  :func:`prbench.scoring.request_key.request_key`;
- **dedup**: a key asked for twice in one call is computed once;
- **persistent score cache**: for scorers that have ``fingerprint()`` (see
  :class:`prbench.scoring.base.Fingerprinted`), scores are stored under (fingerprint, request key)
  in the shared score cache (:mod:`prbench.scoring.cache`), so a rerun computes only what is
  missing. A scorer without ``fingerprint()`` is never cached on disk, only deduplicated;
- **chunks**: missing requests are sent to the scorer in chunks of ``chunk_size``, keeping requests
  that share a (question, profile) together so a scorer's prompt sharing still sees them side by
  side; each chunk is committed to the cache before the next starts, so a run killed with
  ``kill -9`` loses at most one chunk;
- **decisions**: a scorer that makes run-time choices changing the last bits of its scores (e.g.
  ``hf-classifier`` checking prefix sharing on the first group it sees) reports them with
  ``decisions()`` and takes earlier ones with ``adopt_decisions(mapping)``; they are stored with
  the score cache under the fingerprint before the scores that follow them, and a later or
  resumed run adopts them first. With chunks that never change, a run killed at any point and
  run again stores exactly the scores of an uninterrupted run (:mod:`prbench.scoring.resume`);
- **out-of-memory back-off**: a chunk that runs out of accelerator memory is retried at half the
  size, down to one request, then a clear error; after a streak of chunks that fit, the size
  doubles again up to ``chunk_size`` (:class:`prbench.oom.AdaptiveLimit`). A failed chunk
  counts only in ``oom_retries`` and ``wasted_requests``;
- a **progress bar** (:func:`prbench.progress.progress_bar`), **run stats** (:meth:`stats`) and a
  JSON-ready :meth:`describe` for the results manifest; :meth:`close` closes the cache and the
  scorer (the runtime is also a context manager).

Non-finite results (NaN, inf) are returned to the caller but never cached. A scorer that raises
or returns anything but one real number per request ends the call with one
:class:`prbench.scoring.base.ScorerFaultError` naming it and its plugin; earlier chunks stay cached.

The scorer gets copies of the requests (:func:`prbench.scoring.base.isolated`), one per request,
sharing nothing: a scorer that changes a request, even a frozen one through
``object.__setattr__``, changes its own copy, never what later requests or later scorers see.

A scorer's per-request extras (``request_extras``, :mod:`prbench.scoring.extras`) are kept with
its scores and read back with :meth:`ScorerRuntime.extras`; the input each request was scored
from (``request_inputs``, :mod:`prbench.scoring.inputs`; rebuilt for score-cache hits), with its
share of its call's wall time, with :meth:`ScorerRuntime.inputs`.

Example::

    from prbench.scoring.spec import build_runtime

    with build_runtime("length", {"cache": False}) as rt:
        scores = rt.score(requests)
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from prbench.interrupts import plugin_escape
from prbench.oom import AdaptiveLimit, one_request_too_big
from prbench.options import options_to_dict
from prbench.scoring.base import (
    PairRequest,
    ScoreRequest,
    ScorerFaultError,
    check_scores,
    isolated,
    scorer_fault,
    scorer_label,
)
from prbench.scoring.extras import RequestExtras
from prbench.scoring.inputs import DEFAULT_INPUT_CHARS, InputRecorder
from prbench.scoring.request_key import KEY_VERSION, request_key
from prbench.scoring.resume import DecisionKeeper, group_key, plan_chunks
from prbench.scoring.runtime_options import DEFAULT_CHUNK_SIZE, DEFAULT_TIMEOUT
from prbench.scoring.timeout import CallTimedOut, call_with_timeout

logger = logging.getLogger(__name__)

class ScorerRuntime:
    """Dedup, cache, chunks, OOM back-off, progress and stats around one scorer.

    One runtime may be shared by threads (a reward server): its calls run one at a time, so the
    scorer itself need not be thread-safe.

    Args:
        scorer: the built scorer (``score()``; ``compare()`` for a pairwise judge).
        component: the registered component it was built from (names it in stats and errors;
            its ``tags`` decide pairwise); ``None`` for an unregistered scorer.
        cache: use the persistent score cache (only if the scorer has ``fingerprint()``).
        cache_path: the score-cache file (default :func:`prbench.scoring.cache.default_cache_path`).
        chunk_size: requests per scorer call (each chunk is cached before the next); 0: the
            scorer's ``default_chunk_size()`` when it has one (e.g. per device), else
            :data:`~prbench.scoring.runtime_options.DEFAULT_CHUNK_SIZE`.
        progress: show a progress bar.
        options: the scorer's validated options (recorded by :meth:`describe`).
        timeout: seconds one scorer call may take; a longer one ends the run with one
            :class:`~prbench.scoring.base.ScorerFaultError` (chunks before it stay cached). 0: no
            limit.
        pairwise: override the pairwise flag (default: the component's ``pairwise`` tag, else
            whether the scorer has ``compare()`` and no ``score()``).
        record_input: keep the input each request was scored from (the scorer's
            ``request_inputs``, :mod:`prbench.scoring.inputs`), read back with :meth:`inputs`.
        record_input_chars: characters kept of each recorded text.

    Raises:
        TypeError: the scorer lacks the method its kind needs, or has a ``fingerprint`` that is
            not a method.
        ScorerFaultError: ``fingerprint()`` raised (``SystemExit`` included) or returned
            something other than a non-empty string or ``None``; names the scorer's plugin.
    """

    def __init__(
        self,
        scorer: Any,
        *,
        component: Any = None,
        cache: bool = True,
        cache_path: str | None = None,
        chunk_size: int = 0,
        progress: bool = True,
        options: Any = None,
        pairwise: bool | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        record_input: bool = True,
        record_input_chars: int = DEFAULT_INPUT_CHARS,
    ) -> None:
        if chunk_size < 0:
            raise ValueError(f"chunk_size must be at least 1 (or 0: the scorer's default), got "
                             f"{chunk_size}")
        if not timeout >= 0:  # NaN too
            from prbench.options import OptionsError

            raise OptionsError(f"timeout must be 0 (no limit) or a number of seconds, got "
                               f"{timeout!r}")
        #: seconds one scorer call may take (0: no limit)
        self.timeout = float(timeout)
        self.scorer = scorer
        self.component = component
        self.name = component.name if component is not None else type(scorer).__name__
        #: how errors name the scorer: qualified id and plugin
        self.label = scorer_label(component, self.name)
        if pairwise is None:
            if component is not None:
                pairwise = "pairwise" in component.tags
            else:
                pairwise = callable(getattr(scorer, "compare", None)) and not callable(
                    getattr(scorer, "score", None)
                )
        self.pairwise = bool(pairwise)
        method = "compare" if self.pairwise else "score"
        if not callable(getattr(scorer, method, None)):
            raise TypeError(
                f"scorer {self.name!r} built a {type(scorer).__name__} without a {method}() method"
            )
        self.options = options
        #: requests per scorer call: the option, or the scorer's default when it was 0
        self.chunk_size = int(chunk_size) or self._default_chunk_size()
        self.progress = bool(progress)
        self.cache_path = cache_path or None
        self.fingerprint = self._fingerprint()
        self._cache: Any = None
        self.cache_enabled = bool(cache) and self.fingerprint is not None
        if self.cache_enabled:
            from prbench.scoring.cache import ScoreCache

            self._cache = ScoreCache(
                self.fingerprint,  # type: ignore[arg-type]
                self.cache_path,
                description=self._cache_description(),
            )
        self._stats = dict.fromkeys(
            ("calls", "requests", "unique", "cache_hits", "computed", "chunks", "oom_retries",
             "wasted_requests", "nonfinite"),
            0,
        )
        #: the chunk size in force: halved by an out-of-memory back-off, grown back after a streak
        self._chunk_limit = AdaptiveLimit(self.chunk_size)
        self._extras = RequestExtras(scorer, self.name, required=self.pairwise)
        self._inputs = InputRecorder(scorer, self.name, enabled=record_input,
                                     limit=record_input_chars)
        self._decisions = DecisionKeeper(scorer, self._cache, self.name)
        self._closed = False
        self._lock = threading.RLock()  # one call at a time: scorers need not be thread-safe

    # -- set-up ----------------------------------------------------------------------------------

    def _fingerprint(self) -> str | None:
        attr = getattr(self.scorer, "fingerprint", None)
        if attr is None:
            return None
        if not callable(attr):
            raise TypeError(
                f"scorer {self.name!r}: fingerprint must be a method returning a string "
                f"(got a {type(attr).__name__} attribute)"
            )
        try:
            value = attr()
        except (Exception, SystemExit, KeyboardInterrupt) as exc:
            if not isinstance(exc, Exception) and not plugin_escape(exc):
                raise
            message = " ".join(str(exc).split()) or "(no message)"
            raise ScorerFaultError(
                f"{self.label}: fingerprint() failed: {type(exc).__name__}: {message}"
            ) from exc
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:59] + "…"
            raise ScorerFaultError(
                f"{self.label}: fingerprint() must return a non-empty string (or None: no "
                f"score cache), got {shown} ({type(value).__name__})"
            )
        return value

    def _default_chunk_size(self) -> int:
        """The scorer's ``default_chunk_size()`` (a positive int), else the runtime's default.

        Raises:
            ScorerFaultError: the scorer's method raised or returned something else.
        """
        attr = getattr(self.scorer, "default_chunk_size", None)
        if not callable(attr):
            return DEFAULT_CHUNK_SIZE
        try:
            value = attr()
        except Exception as exc:
            message = " ".join(str(exc).split()) or "(no message)"
            raise ScorerFaultError(
                f"{self.label}: default_chunk_size() failed: {type(exc).__name__}: {message}"
            ) from exc
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ScorerFaultError(
                f"{self.label}: default_chunk_size() must return a positive int, got {value!r}"
            )
        return value

    def _cache_description(self) -> dict[str, Any]:
        return {
            "component": self.component.qualified_id if self.component is not None else self.name,
            "options": options_to_dict(self.options) if self.options is not None else None,
            "key_version": KEY_VERSION,
        }

    @property
    def cache(self) -> Any:
        """The :class:`prbench.scoring.cache.ScoreCache` in use, or ``None``."""
        return self._cache

    # -- scoring ---------------------------------------------------------------------------------

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """One score per request, in request order (see the module docstring).

        Raises:
            TypeError: this runtime wraps a pairwise judge (use :meth:`compare`).
        """
        if self.pairwise:
            raise TypeError(f"scorer {self.name!r} is a pairwise judge: call compare(pairs)")
        return self._run(list(requests), self.scorer.score, unit="req")

    def compare(self, pairs: Sequence[PairRequest]) -> list[float]:
        """P(first answer better) per pair, in order; ``nan`` where the verdict was unusable.

        Raises:
            TypeError: this runtime wraps a pointwise scorer (use :meth:`score`).
        """
        if not self.pairwise:
            raise TypeError(f"scorer {self.name!r} is pointwise: call score(requests)")
        return self._run(list(pairs), self.scorer.compare, unit="pair")

    def _run(
        self, requests: list[Any], fn: Callable[[list[Any]], Sequence[float]], unit: str
    ) -> list[float]:
        with self._lock:
            return self._run_locked(requests, fn, unit)

    def _run_locked(
        self, requests: list[Any], fn: Callable[[list[Any]], Sequence[float]], unit: str
    ) -> list[float]:
        if self._closed:
            raise RuntimeError(f"the runtime of scorer {self.name!r} is closed")
        self._stats["calls"] += 1
        self._stats["requests"] += len(requests)
        if not requests:
            return []
        self._extras.new_call()
        self._inputs.new_call()
        keys = [request_key(r) for r in requests]
        first: dict[str, int] = {}
        for i, k in enumerate(keys):
            first.setdefault(k, i)
        self._stats["unique"] += len(first)
        known: dict[str, float] = {}
        if self._cache is not None:
            known = self._extras.from_cache(self._cache, self._cache.get_many(list(first)))
        self._stats["cache_hits"] += len(known)
        if known and self._inputs.active:  # rebuilt, never re-sent
            hits = list(known)
            self._inputs.rebuilt(isolated([requests[first[k]] for k in hits]), hits,
                                 self._extras.get(hits))
        if len(known) < len(first):
            known.update(self._compute(requests, keys, list(first.values()), known, fn, unit))
        return [known[k] for k in keys]

    def _compute(
        self,
        requests: list[Any],
        keys: list[str],
        unique: list[int],
        known: Mapping[str, float],
        fn: Callable[[list[Any]], Sequence[float]],
        unit: str,
    ) -> dict[str, float]:
        """Score the requests of ``unique`` missing from ``known``, chunk by chunk.

        Chunks are cut by :func:`prbench.scoring.resume.plan_chunks` (a (question, profile)
        group kept whole), and each is cached before the next, after the scorer's decisions. A
        run resumed after ``kill -9`` therefore starts at a chunk boundary of the interrupted
        run, cuts the rest into exactly the chunks the uninterrupted run used and adopts its
        decisions: scorers whose last bits depend on the batch (padded forward passes, shared
        prompts) store the same scores either way.
        """
        from prbench import oom
        from prbench.progress import progress_bar

        self._decisions.adopt_stored()
        missing = [i for i in unique if keys[i] not in known]
        limit = self._chunk_limit

        def replan(rest: list[int]) -> list[list[int]]:
            return plan_chunks(rest, [group_key(requests[i]) for i in rest], limit.current)

        pending = replan(missing)
        out: dict[str, float] = {}
        total = sum(len(c) for c in pending)
        bar = progress_bar(total, desc=f"scoring: {self.name}", unit=unit, enabled=self.progress)
        try:
            while pending:
                chunk = pending.pop(0)
                batch = [requests[i] for i in chunk]
                given = isolated(batch)  # the plugin's own copies: its changes stay there
                failed = False
                started = time.perf_counter()
                try:
                    raw = call_with_timeout(fn, given, self.timeout)
                except (Exception, SystemExit, KeyboardInterrupt, CallTimedOut) as exc:
                    if isinstance(exc, KeyboardInterrupt) and not plugin_escape(exc):
                        raise  # the user's Ctrl-C
                    if not oom.is_oom_error(exc):  # one error naming the plugin, chunks kept
                        stored = self._stats["computed"] - self._stats["nonfinite"]
                        kept = stored if self._cache is not None else 0
                        raise scorer_fault(exc, self.label, batch, kept) from exc
                    if len(chunk) == 1:
                        raise one_request_too_big(
                            self.name, batch[0], self._stats["oom_retries"]
                        ) from exc
                    failed = True
                if failed:  # out of the except block: the failed call's frames are released now
                    oom.free_accelerator_memory()
                    limit.shrink(len(chunk))
                    self._stats["oom_retries"] += 1
                    self._stats["wasted_requests"] += len(chunk)
                    logger.warning(
                        "scorer %r ran out of memory on a chunk of %d requests; retrying with "
                        "chunks of %d", self.name, len(chunk), limit.current,
                    )
                    pending = replan(chunk + [i for c in pending for i in c])
                    continue
                scores = check_scores(raw, len(batch), self.name, label=self.label)
                if not self._decisions.store_new():
                    pending.insert(0, chunk)  # another process decided first: redo it their way
                    continue
                fresh = {keys[i]: s for i, s in zip(chunk, scores, strict=True)}
                finite = {k: s for k, s in fresh.items() if math.isfinite(s)}
                self._stats["nonfinite"] += len(fresh) - len(finite)
                wall_s = time.perf_counter() - started
                extras = self._extras.collect(given, [keys[i] for i in chunk])
                self._inputs.sent(given, [keys[i] for i in chunk], wall_s)
                if self._cache is not None and finite:
                    self._cache.put_extras({k: v for k, v in extras.items() if k in finite})
                    self._cache.put_many(finite)
                out.update(fresh)
                self._stats["computed"] += len(chunk)
                self._stats["chunks"] += 1
                bar.update(len(chunk))
                if limit.success() and pending:  # memory to spare again: bigger chunks
                    pending = replan([i for c in pending for i in c])
        finally:
            bar.close()
        return out

    def extras(self, requests: Sequence[ScoreRequest | PairRequest]) -> list[Any]:
        """The scorer's extras of the latest call's requests (``None`` where none)."""
        return self._extras.get([request_key(r) for r in requests])

    def inputs(self, requests: Sequence[ScoreRequest | PairRequest]) -> list[Any]:
        """The input each of the latest call's requests was scored from (``None`` where none).

        Samples-file records (:mod:`prbench.scoring.inputs`); all ``None`` when the option
        ``record_input`` is off or the scorer has no ``request_inputs``.
        """
        if not self._inputs.active:
            return [None] * len(requests)
        return self._inputs.get([request_key(r) for r in requests])

    # -- reporting -------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Run counts of this runtime.

        Returns:
            ``calls``, ``requests``, ``unique`` (distinct keys), ``cache_hits``, ``computed``,
            ``chunks``, ``oom_retries`` (chunks that ran out of memory and were cut again),
            ``wasted_requests`` (the requests of those chunks; they count nowhere else),
            ``nonfinite`` (results not cached), ``cache_hit_rate`` and ``chunk_size`` (the size in
            force: lower after an out-of-memory back-off until enough chunks fit again).
        """
        counts: dict[str, Any] = dict(self._stats)
        counts["cache_hit_rate"] = (
            counts["cache_hits"] / counts["unique"] if counts["unique"] else 0.0
        )
        counts["chunk_size"] = self._chunk_limit.current
        return counts

    def describe(self) -> dict[str, Any]:
        """JSON-ready settings and counts for the results manifest.

        Returns:
            ``component`` (id, qualified id, plugin, tags, diagnostic), ``options``,
            ``fingerprint``, ``runtime`` (cache on/off and file, chunk size, progress, the
            decisions stored with the cache),
            ``stats``, and the scorer's own ``describe()`` under ``scorer`` (or ``None``) and its
            ``stats()`` under ``scorer_stats`` when it has them.
        """
        comp = self.component
        info: dict[str, Any] = {
            "component": {
                "id": self.name,
                "qualified_id": comp.qualified_id if comp is not None else None,
                "plugin": comp.plugin if comp is not None else None,
                "tags": list(comp.tags) if comp is not None else [],
                "diagnostic": bool(comp.diagnostic) if comp is not None else False,
                "pairwise": self.pairwise,
            },
            "options": options_to_dict(self.options) if self.options is not None else {},
            "fingerprint": self.fingerprint,
            "runtime": {
                "cache": self.cache_enabled,
                "cache_path": str(self._cache.path) if self._cache is not None else None,
                "chunk_size": self.chunk_size,
                "progress": self.progress,
                "decisions": dict(self._decisions.stored or {}),
            },
            "stats": self.stats(),
            "scorer": self._scorer_call("describe"),
        }
        scorer_stats = self._scorer_call("stats")
        if scorer_stats is not None:
            info["scorer_stats"] = scorer_stats
        return json.loads(json.dumps(info, default=str))

    def _scorer_call(self, method: str) -> Any:
        fn = getattr(self.scorer, method, None)
        if not callable(fn):
            return None
        try:
            return fn()
        except Exception as exc:  # informative only: never lose results over it
            logger.warning("scorer %r: %s() failed: %r", self.name, method, exc)
            return {"error": repr(exc)}

    # -- life cycle ------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran."""
        return self._closed

    def close(self) -> None:
        """Close the score cache and call the scorer's ``close()`` if it has one (idempotent)."""
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._cache is not None:
                self._cache.close()
        finally:
            closer = getattr(self.scorer, "close", None)
            if callable(closer):
                closer()

    def __enter__(self) -> ScorerRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        fp = f"{self.fingerprint[:12]}…" if self.fingerprint else "no fingerprint"
        return f"ScorerRuntime({self.name!r}, {fp}, cache={self.cache_enabled})"


def runtime_of(component: Any, parsed: Any, runtime: Any, **runtime_overrides: Any
               ) -> ScorerRuntime:
    """The scorer of ``component`` built with its validated options, in its runtime.

    Args:
        component: the registry's component.
        parsed: its validated options object (``None`` for a scorer without options).
        runtime: the runtime's options (:class:`~prbench.scoring.runtime_options.RuntimeOptions`).
        **runtime_overrides: runtime settings fixed by the caller, over ``runtime``.
    """
    settings = {**dataclasses.asdict(runtime), **runtime_overrides}
    factory = component.resolve_factory()
    scorer = factory(parsed) if component.options is not None else factory()
    return ScorerRuntime(
        scorer,
        component=component,
        cache=bool(settings["cache"]),
        cache_path=settings["cache_path"] or None,
        chunk_size=int(settings["chunk_size"]),
        progress=bool(settings["progress"]),
        options=parsed,
        timeout=float(settings["call_timeout"]),
        record_input=bool(settings["record_input"]),
        record_input_chars=int(settings["record_input_chars"]),
    )


__all__ = ["ScorerRuntime", "runtime_of"]
