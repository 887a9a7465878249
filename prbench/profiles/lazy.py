"""Profiles built when they are scored, for exactly the records that are scored.

Building a profile can be the dearest step of a run (the ``dense`` builder embeds every post of
every user), and a run often needs few of them: ``--limit`` keeps the first records, and a scorer
registered with ``reads_profile=False`` (``length``, ``constant``, ...) needs none. So the
task rows (:func:`prbench.harness.task_rows.load_docs`) do not hold built profiles: each row of
the profile condition carries a *profile key* (the builder, its options and the record) and the
status ``pending``, and its record is registered here. Whoever consumes the rows asks for the
keys it needs:

- the ``prbench`` lm-eval model (:class:`prbench.harness.lm.PRBenchLM`) builds the profiles of the
  documents of the requests it receives, all at once, one ``build()`` call per builder (so the
  embedding model sees large batches), or marks them :data:`STATUS_SKIPPED` when its scorer does
  not read profiles. It registers itself with :func:`defer_to` while it is open, which tells
  ``doc_to_text`` not to build anything itself.
- any other lm-eval model reads the profile through ``doc_to_text``, which builds the one
  document's profile on first use (:meth:`ProfileStore.view_for`).

Views are kept in a :class:`ProfileStore`, keyed by the profile key, so two tasks over the same
records share one build and logged samples can be filled in afterwards
(:func:`prbench.harness.profile_rows.process_docs`). ``prbench eval`` gives each run a store of
its own (:func:`run_store`); elsewhere (plain ``lm_eval``) the process's :data:`STORE` serves.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from prbench.profiles.base import ProfileView, build_views

if TYPE_CHECKING:
    from prbench.records import Record

#: the profile of a row is built and stored in the row
STATUS_BUILT = "built"
#: the profile is to be built when the row is scored (or its text first read)
STATUS_PENDING = "pending"
#: the scorer declared it does not read profiles, so none was built
STATUS_SKIPPED = "not built: scorer does not read profiles"


def spec_of(builder: str, options: Mapping[str, Any]) -> str:
    """The canonical JSON of a profile builder id and its options (the builder's cache key)."""
    return json.dumps({"builder": builder, "options": dict(options)}, sort_keys=True, default=str)


def record_digest(record: Record) -> str:
    """The sha256 of what a profile builder reads of a record.

    Covers the id, question, category and domain and every post's id, category and text, in
    order; not the answers or the hidden fields.
    """
    digest = hashlib.sha256()
    for part in (record.id, record.question, record.category, record.domain):
        digest.update(part.encode("utf-8") + b"\0")
    for post in record.profile:
        for part in (post.id, post.category, post.text):
            digest.update(part.encode("utf-8") + b"\0")
        digest.update(b"\1")
    return digest.hexdigest()


def profile_key(spec: str, record: Record) -> str:
    """The key of one record's profile under one builder spec (where it was read, its content)."""
    return key_of(spec, record.source, record.id, record_digest(record))


def key_of(spec: str, source: str, record_id: str, digest: str) -> str:
    """:func:`profile_key` from its parts: the record's source, id and :func:`record_digest`."""
    text = f"{spec}\0{source}\0{record_id}\0{digest}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def defer_to(consumer: Any) -> None:
    """Register an object that builds the profiles of the rows it scores (see :func:`deferred`)."""
    store().consumers.add(consumer)


def release(consumer: Any) -> None:
    """Undo :func:`defer_to` (the consumer is closed)."""
    store().consumers.discard(consumer)


def release_all() -> None:
    """Forget every consumer registered with :func:`defer_to` (tests)."""
    store().consumers.clear()


def deferred() -> bool:
    """Whether a consumer that builds profiles itself is open (``doc_to_text`` then builds none)."""
    return len(store().consumers) > 0


class ProfileStore:
    """Records waiting for a profile, the builders, and the views built so far (one per process).

    Args:
        make_builder: ``make_builder(builder_id, options) -> builder``; default: build the
            component from the plugin registry.
    """

    def __init__(self, make_builder: Any = None) -> None:
        self._make_builder = make_builder
        self._lock = threading.RLock()
        self._pending: dict[str, tuple[str, Record | Callable[[], Record]]] = {}
        self._views: dict[str, ProfileView] = {}
        self._skipped: set[str] = set()
        self._builders: dict[str, Any] = {}
        self._what: dict[str, str] = {}
        #: bumped whenever a view is built or a key skipped (callers cache on it)
        self.generation = 0
        #: records passed to builders, per builder spec (tests and provenance)
        self.n_built: dict[str, int] = {}
        #: the open objects that build the profiles of the rows they score (:func:`defer_to`)
        self.consumers: weakref.WeakSet[Any] = weakref.WeakSet()

    def register(
        self, spec: str, records: Sequence[Record], *, what: str | None = None
    ) -> list[str]:
        """Remember records whose profile under ``spec`` may be asked for; their keys, in order.

        Args:
            spec: :func:`spec_of` the builder and its options.
            records: the records.
            what: names the builder in errors (e.g. with its plugin); default its id.
        """
        keys = [profile_key(spec, record) for record in records]
        self.register_keys(spec, keys, records, what=what)
        return keys

    def register_keys(
        self,
        spec: str,
        keys: Sequence[str],
        records: Sequence[Record | Callable[[], Record]],
        *,
        what: str | None = None,
    ) -> None:
        """Remember records under keys computed by the caller (:func:`key_of`).

        Args:
            spec: :func:`spec_of` the builder and its options.
            keys: each record's :func:`profile_key`.
            records: the records, or callables that give each record when its profile is built
                (so a caller that keeps records in another form need not hold them all).
            what: names the builder in errors (e.g. with its plugin); default its id.
        """
        with self._lock:
            if what is not None:
                self._what[spec] = what
            for key, record in zip(keys, records, strict=True):
                if key not in self._views:
                    self._pending[key] = (spec, record)

    def builder(self, spec: str) -> Any:
        """The builder of a spec, built once per process.

        Raises:
            prbench.options.OptionsError: the builder cannot be built from its options (its
                model cannot be found, say); the builder is named.
        """
        from prbench.model_ref import ModelUnavailableError
        from prbench.options import OptionsError

        with self._lock:
            if spec not in self._builders:
                parsed = json.loads(spec)
                make = self._make_builder or _registry_builder
                try:
                    self._builders[spec] = make(parsed["builder"], parsed["options"])
                except ModelUnavailableError as exc:
                    raise OptionsError(f"profile builder {parsed['builder']!r}: {exc}") from exc
            return self._builders[spec]

    def build(self, keys: Iterable[str]) -> None:
        """Build the views of ``keys`` not built yet: one ``build()`` call per builder spec.

        Raises:
            KeyError: a key that was never registered.
            prbench.profiles.base.ProfileBuilderFaultError: the builder failed or returned views
                that are not one valid view per record (see :func:`build_views`).
        """
        with self._lock:
            todo: dict[str, dict[str, Record]] = {}
            for key in keys:
                if key in self._views:
                    continue
                if key not in self._pending:
                    raise KeyError(f"profile key {key!r} was never registered")
                spec, record = self._pending[key]
                todo.setdefault(spec, {})[key] = record() if callable(record) else record
            for spec, group in todo.items():
                name = json.loads(spec)["builder"]
                what = self._what.get(spec, f"profile builder {name!r}")
                views = build_views(self.builder(spec), list(group.values()), what)
                for key, view in zip(group, views, strict=True):
                    self._views[key] = view
                    self._pending.pop(key, None)
                    self._skipped.discard(key)
                self.n_built[spec] = self.n_built.get(spec, 0) + len(group)
                self.generation += 1

    def skip(self, keys: Iterable[str]) -> None:
        """Mark keys not built because the scorer does not read profiles."""
        with self._lock:
            new = {k for k in keys if k not in self._views and k not in self._skipped}
            if new:
                self._skipped |= new
                self.generation += 1

    def view(self, key: str) -> ProfileView | None:
        """The built view of a key, or ``None``."""
        return self._views.get(key)

    def status(self, key: str) -> str:
        """:data:`STATUS_BUILT`, :data:`STATUS_SKIPPED` or :data:`STATUS_PENDING`."""
        if key in self._views:
            return STATUS_BUILT
        return STATUS_SKIPPED if key in self._skipped else STATUS_PENDING

    def statuses(self) -> dict[str, str]:
        """The status of every key built or skipped in this process (pending ones left out)."""
        with self._lock:
            out = dict.fromkeys(self._views, STATUS_BUILT)
            out.update(dict.fromkeys(self._skipped - set(self._views), STATUS_SKIPPED))
            return out

    def view_for(self, key: str) -> ProfileView:
        """The view of a key, built now if it is not yet (``doc_to_text`` of other models)."""
        if key not in self._views:
            self.build([key])
        return self._views[key]

    def known(self, key: str) -> bool:
        """Whether the key was registered (pending or built)."""
        return key in self._views or key in self._pending

    def reset(self) -> None:
        """Forget everything (tests; a new run in the same process)."""
        with self._lock:
            self._pending.clear()
            self._views.clear()
            self._skipped.clear()
            self._builders.clear()
            self._what.clear()
            self.n_built.clear()
            self.generation += 1


def _registry_builder(name: str, options: Mapping[str, Any]) -> Any:
    from prbench.plugins import get_registry

    return get_registry().get("profile-builder", name).build(options)


#: the store of a process with no run of its own (plain ``lm_eval``, other programs)
STORE = ProfileStore()
_RUN_STORE: contextvars.ContextVar[ProfileStore | None] = contextvars.ContextVar(
    "prbench_profile_store", default=None)


def store() -> ProfileStore:
    """The profile store of the current run (:func:`run_store`), else the process's."""
    return _RUN_STORE.get() or STORE


@contextlib.contextmanager
def run_store() -> Iterator[ProfileStore]:
    """A profile store owned by one run, current until the block ends (``prbench eval``).

    The task rows register their records in it, the run's model builds and reads the views in
    it: two runs in one process (one after the other, or in two threads) share nothing.
    """
    own = ProfileStore()
    token = _RUN_STORE.set(own)
    try:
        yield own
    finally:
        _RUN_STORE.reset(token)


__all__ = [
    "STATUS_BUILT",
    "STATUS_PENDING",
    "STATUS_SKIPPED",
    "STORE",
    "ProfileStore",
    "defer_to",
    "deferred",
    "key_of",
    "profile_key",
    "record_digest",
    "release",
    "run_store",
    "spec_of",
    "store",
]
