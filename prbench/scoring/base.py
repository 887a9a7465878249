"""What a scorer receives and returns.

A *pointwise* scorer (a reward model) maps each :class:`ScoreRequest` to one float; a *pairwise*
judge maps each :class:`PairRequest` to P(first answer is better). Both see the question, the
profile view built for the task condition, and the answer(s) -- never the hidden ``narrative`` or
``rubric_aspects``, except a component registered with ``diagnostic=True``, which gets them in
``hidden`` and is flagged as a diagnostic in every report.
"""

from __future__ import annotations

import copy
import dataclasses
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from prbench.plugins import PluginError
from prbench.profiles.base import ProfileView

EMPTY_PROFILE = ProfileView(text="")


@dataclasses.dataclass(frozen=True)
class ScoreRequest:
    """One (user, question, response) to score.

    Attributes:
        record_id: the record's id.
        question: the user's question.
        response: the answer to score.
        profile: the profile view for this task condition (empty for question-only).
        category: the record's category.
        domain: the record's domain (config) name.
        hidden: ``narrative`` and ``rubric_aspects``; only filled for diagnostic scorers.
    """

    record_id: str
    question: str
    response: str
    profile: ProfileView = EMPTY_PROFILE
    category: str = ""
    domain: str = ""
    hidden: Mapping[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class PairRequest:
    """Two answers to one question, for a pairwise judge (P(first ≻ second) is asked)."""

    record_id: str
    question: str
    first: str
    second: str
    profile: ProfileView = EMPTY_PROFILE
    category: str = ""
    domain: str = ""
    hidden: Mapping[str, Any] | None = None
    #: the pair's 0-based place among its domain's records in the data's order (the prbench tasks
    #: set it; a judge's ``coin=script`` draws its order from it); ``None`` when unknown
    domain_position: int | None = None


_IMMUTABLE = (str, int, float, bool, bytes, type(None))
#: exact types copied as they are without a call (the common case, checked first)
_PLAIN = frozenset(_IMMUTABLE)
#: the field names of each dataclass :func:`_fresh` has copied
_FIELDS: dict[type, tuple[str, ...]] = {}


def _fresh(value: Any) -> Any:
    """A copy of ``value`` that shares no mutable object with it (strings and numbers are kept).

    Dataclass instances (frozen or not) are rebuilt field by field without ``__init__``; tuples,
    lists and mappings element by element (a mapping becomes a ``dict``); anything else goes
    through :func:`copy.deepcopy`. Several times faster than ``deepcopy`` on a request
    (``benchmarks/bench_request_copies.py``).
    """
    cls = type(value)
    if cls in _PLAIN or isinstance(value, _IMMUTABLE):
        return value
    if isinstance(value, tuple):
        return tuple(v if type(v) in _PLAIN else _fresh(v) for v in value)
    if isinstance(value, list):
        return [v if type(v) in _PLAIN else _fresh(v) for v in value]
    if isinstance(value, Mapping):
        return {k: v if type(v) in _PLAIN else _fresh(v) for k, v in value.items()}
    names = _FIELDS.get(cls)
    if names is None and dataclasses.is_dataclass(cls):
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    if names is not None:
        new = object.__new__(cls)
        for name in names:
            v = getattr(value, name)
            object.__setattr__(new, name, v if type(v) in _PLAIN else _fresh(v))
        return new
    return copy.deepcopy(value)


def isolated(requests: Sequence[Any]) -> list[Any]:
    """Copies of ``requests`` to hand to a plugin, one independent copy each.

    Requests are frozen dataclasses, but ``object.__setattr__`` (or a mutable ``extra`` mapping)
    still changes them, and requests of one record share their profile view, which the task also
    keeps for every later scorer. A plugin gets copies that share nothing with the originals or
    with each other, so what it changes stays in its own call: later requests and later scorers
    see the profile as it was built.
    """
    return [_fresh(r) for r in requests]


@runtime_checkable
class Scorer(Protocol):
    """A pointwise reward model: one float per request, same order, higher is better.

    ``score()`` is all a scorer must have. The harness never calls it directly: every scorer runs
    inside a :class:`prbench.scoring.runtime.ScorerRuntime` (dedup, score cache, chunks,
    out-of-memory back-off, stats). A scorer may also have the optional methods of
    :class:`ScorerExtras` (``fingerprint()``, ``describe()``, ``close()``, ``request_extras()``);
    the same holds for a :class:`PairwiseJudge`.
    """

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """Score every request; the result has one float per request, in request order."""
        ...


@runtime_checkable
class PairwiseJudge(Protocol):
    """A pairwise judge: P(first ≻ second) per pair, ``nan`` where the verdict was unreadable."""

    def compare(self, pairs: Sequence[PairRequest]) -> list[float]:
        """Judge every pair; one probability per pair, in order."""
        ...


@runtime_checkable
class ScorerExtras(Protocol):
    """The OPTIONAL parts of the scorer protocol; the runtime uses each one a scorer has.

    A scorer may define any subset of these methods (the runtime looks each one up by name).
    """

    def fingerprint(self) -> str:
        """A hex hash of everything that changes this scorer's outputs (the score-cache key).

        Cover the model identity (hub id with revision and resolved commit, or the local files),
        dtype, templates and every option that changes scores; leave out what does not (batch
        size, device, progress). Build it with :func:`prbench.scoring.cache.fingerprint_of`. A
        scorer WITHOUT ``fingerprint()`` is never cached on disk, only deduplicated.
        """
        ...

    def describe(self) -> dict[str, Any]:
        """JSON-ready settings recorded in the results manifest.

        E.g. checkpoint, revision and resolved commit, resolved dtype and device, pooling; the
        runtime records it under ``scorer`` in its own ``describe()``.
        """
        ...

    def close(self) -> None:
        """Release what the scorer holds (models, connections, worker pools).

        Called once, by :meth:`prbench.scoring.runtime.ScorerRuntime.close`, when the run ends.
        """
        ...

    def request_extras(self, requests: Sequence[Any]) -> list[Any]:
        """One JSON-ready value (or ``None``) per request of the ``score``/``compare`` call just
        made, kept with the score in the cache and read back with
        :meth:`prbench.scoring.runtime.ScorerRuntime.extras`.

        A pairwise judge returns each pair's per-order verdicts
        (:func:`prbench.judges.order_metrics.order_outcome`), from which the tasks compute the
        both-order metrics; :class:`prbench.judges.common.LLMJudgeBase` provides it for judges
        that keep an :class:`~prbench.judges.order_tally.OrderTally`.
        """  # noqa: D205
        ...


class UnscoredInputs:
    """A mixin for pointwise scorers that leave some inputs unscored (``nan``) with a reason.

    The scorer keeps ``self._failures`` (one dict per unscored input: ``item``, ``stage``,
    ``reason``, ``detail``) and ``self._last_invalid`` (``id(request) -> reason`` for the
    requests of its last ``score`` call) and gets :meth:`request_extras` (the runtime keeps each
    reason with the score; the samples file shows it as the pair's ``invalid_reason``) and
    :meth:`failures` (the manifest's list). Call :meth:`_start_unscored` in ``__init__``.
    """

    _failures: list[dict[str, Any]]
    _last_invalid: dict[int, str]

    def _start_unscored(self) -> None:
        self._failures = []
        self._last_invalid = {}  # id(request) -> reason, for request_extras

    def request_extras(self, requests: Sequence[Any]) -> list[dict[str, str] | None]:
        """Per request of the last ``score`` call: ``{"invalid": reason}`` if it was not scored."""
        return [
            {"invalid": self._last_invalid[id(r)]} if id(r) in self._last_invalid else None
            for r in requests
        ]

    def failures(self) -> list[dict[str, Any]]:
        """Every input not scored so far: record id, stage, reason code and detail."""
        return [dict(f) for f in self._failures]


class ScorerFaultError(PluginError):
    """A scorer raised, or returned something other than one real number per request.

    The message names the scorer's qualified id and its plugin; the runtime raises it after the
    chunks already scored were committed to the score cache, so a rerun keeps them.
    """


def scorer_label(component: Any, fallback: str = "") -> str:
    """``scorer 'ns/id' (plugin 'p')`` for errors; ``scorer 'fallback'`` without a component."""
    if component is None:
        return f"scorer {fallback!r}"
    return f"{component.kind} {component.qualified_id!r} (plugin {component.plugin!r})"


def scorer_fault(
    exc: BaseException, label: str, batch: Sequence[Any], kept: int = 0
) -> Exception:
    """The error to raise for an exception a scorer raised on ``batch``.

    prbench's own user errors (bad options, a judge server that refuses the key, a damaged
    cache, ...) already say what to do and are returned unchanged; anything else becomes one
    :class:`ScorerFaultError` naming the scorer (``label``, see :func:`scorer_label`), the
    records of the batch and the original error on one line.

    Args:
        exc: what the scorer raised.
        label: names the scorer and its plugin.
        batch: the requests of the failed call.
        kept: scores committed to the score cache before it (said in the message when > 0).
    """
    from prbench.errors import PrbenchUserError

    if isinstance(exc, PrbenchUserError):
        return exc
    ids = list(dict.fromkeys(str(getattr(r, "record_id", "?")) for r in batch))
    more = f" and {len(ids) - 3} more" if len(ids) > 3 else ""
    shown = ", ".join(repr(i) for i in ids[:3])
    message = " ".join(str(exc).split()) or "(no message)"
    plain = type(exc).__name__ == "CallTimedOut"  # its message says it all
    if isinstance(exc, SystemExit | KeyboardInterrupt):  # never the run's end: the plugin's fault
        message = (f"{type(exc).__name__}({exc.args[0] if exc.args else ''!r}) raised inside the "
                   "scorer; a plugin must raise an error, never exit or interrupt the run")
        plain = True
    note = (
        f"; the {kept} scores computed before it are kept in the score cache (a rerun reuses "
        "them)" if kept > 0 else ""
    )
    return ScorerFaultError(
        f"{label} failed on {len(batch)} request(s) (records {shown}{more}): "
        f"{'' if plain else type(exc).__name__ + ': '}{message}{note}"
    )


def _real(value: Any) -> float | None:
    """``value`` as a float if it is a real number (not a bool), else ``None``.

    Python and numpy ints and floats pass; so does a 0-d array or tensor holding one (read with
    ``item()``). A bool, a string, ``None`` or a bigger array does not.
    """
    if getattr(value, "ndim", None) == 0 and callable(getattr(value, "item", None)):
        value = value.item()  # numpy 0-d array, torch 0-d tensor
    if isinstance(value, bool) or type(value).__name__ in ("bool_", "bool"):
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    return None


def check_scores(
    scores: Sequence[float], n: int, scorer: str, *, label: str | None = None
) -> list[float]:
    """Check a scorer returned exactly ``n`` real numbers; return them as floats.

    Real numbers are ints and floats (Python or numpy) and 0-d arrays or tensors holding one;
    ``nan`` is allowed (it marks a request without a verdict, e.g. an unreadable judge reply).
    A bool, a string such as ``"1.5"``, ``None`` or a list is not a score and is never coerced.

    Args:
        scores: what the scorer returned.
        n: the number of requests it was given.
        scorer: the scorer's id (named in the error when ``label`` is not given).
        label: how to name the scorer in errors, e.g. from :func:`scorer_label`.

    Raises:
        ScorerFaultError: not a sequence, a wrong count or a value that is not a real number,
            naming the scorer (and its plugin when ``label`` says so).
    """
    who = label or f"scorer {scorer!r}"
    if scores is None or isinstance(scores, str | bytes | Mapping) or not hasattr(
        scores, "__len__"
    ):
        raise ScorerFaultError(
            f"{who} returned {_short(scores)} ({type(scores).__name__}), not a list of {n} "
            "numbers (one per request)"
        )
    if len(scores) != n:
        raise ScorerFaultError(f"{who} returned {len(scores)} scores for {n} requests")
    out = []
    for i, s in enumerate(scores):
        value = _real(s)
        if value is None:
            raise ScorerFaultError(
                f"{who} returned {_short(s)} ({type(s).__name__}) for request {i}: a score must "
                "be a real number (int or float; nan marks a missing verdict), never a bool or "
                "a string"
            )
        out.append(value)
    return out


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
