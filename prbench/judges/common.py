"""Options and helpers shared by every LLM-backed component (judges, the planner, pair generators).

Each component's options dataclass inherits :class:`BackendOptions`, so the backend is chosen with
the same flat options everywhere (``backend=hf,model=...,gguf_file=...`` or
``backend=openai,model=...,base_url=...``) and the decoding settings sit next to them. The judges
also share :class:`LLMJudgeBase` (options, backend, failure counts and the per-item failure list).

Invalid items: a reply the backend could not produce (a
:class:`~prbench.backends.base.GenerationFailure`: 5xx/timeouts/malformed replies on every
attempt, a prompt too long for the model), a reply cut at ``max_new_tokens`` (reason
``truncated``, see :func:`generate_in_batches`) and a reply that does not parse are all failures
of that item. The judge scores it ``nan`` (counted as ``invalid`` by the metrics), never a verdict,
counts it by reason in ``stats()`` and lists it (item, stage, reason, detail) in ``stats()`` and
``describe()``, which the results manifest records. Errors that concern the whole run
(:class:`~prbench.backends.base.BackendFatalError`) are not caught: the run stops.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from prbench.backends.base import (
    BackendSpec,
    Chat,
    GenerationBackend,
    GenerationConfig,
    GenerationFailedError,
    GenerationFailure,
    Reply,
    is_truncated,
    truncation_failure,
)
from prbench.backends.factory import build_backend
from prbench.judges import prompts
from prbench.judges.order_tally import OrderTally
from prbench.judges.parsing import ParseFailure, generation_failed

#: the bounds of the options that count tokens, items or calls: beyond them a value is a typo
#: (a million tokens is more than any model's context, a thousand parallel calls more than a
#: server takes)
MOST_TOKENS = 1_048_576
MOST_ITEMS = 1_048_576
MOST_CALLS = 1024
#: the largest seed every backend takes (an HTTP server's 64-bit integer)
MOST_SEED = 2**63 - 1


def _help(text: str, **bounds: float) -> dict[str, Any]:
    """An option's metadata: its help and its bounds (``ge``, ``gt``, ``le``, ``lt``).

    :func:`prbench.options.parse_options` refuses a value outside the bounds when the options
    are read, and ``prbench scorers --options`` shows them.
    """
    return {"help": text, **bounds}


@dataclasses.dataclass(frozen=True)
class BackendOptions:
    """The backend and decoding options of an LLM-backed component.

    Attributes mirror :class:`prbench.backends.base.BackendSpec` (see there), plus the decoding
    settings ``max_new_tokens``, ``temperature``, ``top_p`` and ``seed``.
    """

    backend: Literal["hf", "openai"] = dataclasses.field(
        default="hf", metadata=_help("'hf' (in-process causal LM) or 'openai' (HTTP server)")
    )
    model: str = dataclasses.field(
        default="", metadata=_help("hub id or local folder (hf), or the served model name (openai)")
    )
    revision: str = dataclasses.field(default="main", metadata=_help("hub revision (hf)"))
    gguf_file: str = dataclasses.field(default="", metadata=_help("GGUF file inside model (hf)"))
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = dataclasses.field(
        default="auto", metadata=_help("weights dtype (hf)")
    )
    device: str = dataclasses.field(default="auto", metadata=_help("cpu, cuda, cuda:0, auto (hf)"))
    chat_template: str = dataclasses.field(
        default="", metadata=_help("Jinja chat template overriding the tokenizer's (hf)")
    )
    trust_remote_code: bool = dataclasses.field(
        default=False, metadata=_help("run the model's own code (hf); only when you trust it")
    )
    base_url: str = dataclasses.field(
        default="", metadata=_help("server base URL, e.g. http://127.0.0.1:8000/v1 (openai)")
    )
    api_key_env: str = dataclasses.field(
        default="OPENAI_API_KEY", metadata=_help("env var holding the API key (openai)")
    )
    max_concurrency: int = dataclasses.field(
        default=8, metadata=_help("parallel calls (openai)", ge=1, le=MOST_CALLS))
    timeout: float = dataclasses.field(
        default=120.0, metadata=_help("request timeout, s (openai)", gt=0, le=86_400))
    max_retries: int = dataclasses.field(
        default=5, metadata=_help("retries with backoff (openai)", ge=0, le=100))
    cache_dir: str = dataclasses.field(
        default="auto",
        metadata=_help("backend response cache: 'auto' (prbench cache), a folder, or '' (off)"),
    )
    batch_size: int = dataclasses.field(
        default=8, metadata=_help("chats per generate call (hf)", ge=1, le=MOST_ITEMS))
    max_new_tokens: int = dataclasses.field(
        default=512, metadata=_help("tokens per reply", ge=1, le=MOST_TOKENS))
    temperature: float = dataclasses.field(
        default=0.0,
        metadata=_help("0 = greedy (as the released judges); >0 = seeded sampling", ge=0, le=100),
    )
    top_p: float = dataclasses.field(
        default=1.0, metadata=_help("nucleus mass when sampling", gt=0, le=1))
    seed: int = dataclasses.field(
        default=0, metadata=_help("seed of sampling and order shuffles", ge=0, le=MOST_SEED))

    def __post_init__(self) -> None:
        from prbench.backends.urls import check_server_url

        # a URL with a password or a token is refused here, before any model or task is built
        check_server_url(self.base_url, "base_url", key_hint=(
            f"the environment variable named by api_key_env (now {self.api_key_env or 'unset'})"))
        if self.backend == "hf":  # a path or hub id (a served model's name may be any text)
            from prbench.model_ref import check_model_name

            check_model_name(self.model, "option 'model'", ValueError)
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")

    def backend_spec(self) -> BackendSpec:
        """The :class:`BackendSpec` these options name."""
        names = {f.name for f in dataclasses.fields(BackendSpec)}
        return BackendSpec(**{n: getattr(self, n) for n in names if hasattr(self, n)})

    def generation_config(self, **overrides: Any) -> GenerationConfig:
        """The decoding settings (``overrides`` replace single fields, e.g. ``seed``)."""
        config = GenerationConfig(
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            seed=self.seed,
        )
        return dataclasses.replace(config, **overrides) if overrides else config


def resolve_backend(
    options: BackendOptions, backend: GenerationBackend | None, component: str
) -> GenerationBackend:
    """Use the given backend, or build the one the options name.

    Raises:
        OptionsError: no backend was given and the options name no model (a user error: one
            ``error:`` line on the command line).
    """
    from prbench.options import OptionsError

    if backend is not None:
        return backend
    if not options.model:
        raise OptionsError(
            f"{component}: set the option `model` (a hub id, local folder or served model name, "
            "e.g. model=HuggingFaceTB/SmolLM2-135M-Instruct; with backend=hf a GGUF file also "
            "needs `gguf_file`)"
        )
    return build_backend(options.backend_spec())


def generate_in_batches(
    backend: GenerationBackend,
    chats: Sequence[Chat],
    config: GenerationConfig,
    batch_size: int,
    *,
    desc: str | None = None,
    unit: str = "reply",
    keep_failures: bool = False,
    truncated_is_failure: bool = True,
) -> list[Reply]:
    """Call ``backend.generate`` on chunks of ``batch_size`` chats; check the reply count.

    Args:
        backend: the generation backend.
        chats: the chats, in order.
        config: the decoding settings.
        batch_size: chats per ``generate`` call.
        desc: the label of a progress bar (:func:`prbench.progress.progress_bar`, counts and
            rate, off with ``--no_progress`` or off a terminal); ``None`` for no bar (a caller
            that shows its own).
        unit: the unit the bar counts.
        keep_failures: return a chat's
            :class:`~prbench.backends.base.GenerationFailure` in its place (callers that record
            the item as invalid: judges, the planner, pair generators); ``False`` raises instead,
            for callers that need every reply. With ``keep_failures`` a reply cut at
            ``max_new_tokens`` (a :class:`~prbench.backends.base.Completion` whose
            ``finish_reason`` is ``"length"``) is a failure too, reason ``truncated``: it is
            never read for a verdict. Without it a cut reply is returned as text (a policy's
            samples are capped by design).
        truncated_is_failure: ``False`` returns a cut reply as text even with
            ``keep_failures`` (callers with their own rule for cut text, such as the pair
            generator's ``drop_unfinished`` filter).

    Returns:
        One reply per chat: its text (a :class:`~prbench.backends.base.Completion` where the
        backend made one), or (with ``keep_failures``) the backend's failure.

    Raises:
        RuntimeError: the backend returned a different number of replies than chats.
        GenerationFailedError: a chat got no reply and ``keep_failures`` is false.
    """
    from prbench.progress import NullBar, progress_bar

    out: list[Reply] = []
    step = max(1, batch_size)
    bar = progress_bar(len(chats), desc=desc, unit=unit) if desc and chats else NullBar()
    with bar:
        for start in range(0, len(chats), step):
            chunk = list(chats[start : start + step])
            replies = backend.generate(chunk, config)
            if len(replies) != len(chunk):
                raise RuntimeError(
                    f"backend {backend.fingerprint!r} returned {len(replies)} replies for "
                    f"{len(chunk)} chats"
                )
            for k, reply in enumerate(replies):
                if isinstance(reply, GenerationFailure):
                    if not keep_failures:
                        raise GenerationFailedError(start + k, reply, backend.fingerprint)
                    out.append(reply)
                elif keep_failures and truncated_is_failure and is_truncated(reply):
                    out.append(truncation_failure(reply, config.max_new_tokens))
                else:
                    out.append(reply if isinstance(reply, str) else str(reply))
            bar.update(len(chunk))
    return out


def build_component(kind: str, component_id: str, options: Mapping[str, Any], owner: str) -> Any:
    """Build a registered component another component depends on, with a clear error.

    Raises:
        ValueError: the id is unknown or its options are invalid (naming ``owner``).
    """
    from prbench.options import OptionsError
    from prbench.plugins import UnknownComponentError, get_registry

    try:
        return get_registry().build(kind, component_id, dict(options))
    except UnknownComponentError as exc:
        raise ValueError(
            f"{owner}: the {kind} {component_id!r} is not available ({exc}); "
            "`prbench plugins` lists the registered components"
        ) from exc
    except OptionsError as exc:
        raise ValueError(f"{owner}: bad options for the {kind} {component_id!r}: {exc}") from exc


@dataclasses.dataclass
class FailureCounter:
    """Counts replies, generation failures and parse failures by reason.

    Attributes:
        replies: chats answered or failed (every call of :meth:`add` / :meth:`add_generation`).
        failures: replies that came back but did not parse.
        reasons: parse failures by reason.
        generation_failures: chats the backend produced no reply for.
        generation_reasons: generation failures by the backend's reason (``http-503``, ...).
    """

    replies: int = 0
    failures: int = 0
    reasons: Counter[str] = dataclasses.field(default_factory=Counter)
    generation_failures: int = 0
    generation_reasons: Counter[str] = dataclasses.field(default_factory=Counter)

    def add(self, failure_reason: str | None) -> None:
        """Count one reply; ``failure_reason`` is ``None`` when it parsed."""
        self.replies += 1
        if failure_reason is not None:
            self.failures += 1
            self.reasons[failure_reason] += 1

    def add_generation(self, reason: str) -> None:
        """Count one chat the backend produced no reply for."""
        self.replies += 1
        self.generation_failures += 1
        self.generation_reasons[reason] += 1

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready counts (the parse-failure rate is over the replies that came back)."""
        received = self.replies - self.generation_failures
        return {
            "n_replies": self.replies,
            "n_generation_failures": self.generation_failures,
            "generation_failure_reasons": dict(sorted(self.generation_reasons.items())),
            "n_parse_failures": self.failures,
            "parse_failure_rate": self.failures / received if received else 0.0,
            "parse_failure_reasons": dict(sorted(self.reasons.items())),
        }


def asked_order(shown_first: str, chat: Chat, reply: Any) -> dict[str, Any]:
    """One chat as asked, for the input as scored (:mod:`prbench.scoring.inputs`): its
    messages, the reply (``None`` when none came back) and the prompt tokens the server counted.
    """  # noqa: D205
    if isinstance(reply, GenerationFailure):
        text: str | None = reply.text or None
    else:
        text = None if reply is None else str(reply)
    tokens = getattr(reply, "prompt_tokens", None)
    return {"shown_first": shown_first,
            "messages": [{"role": m["role"], "content": m["content"]} for m in chat],
            "tokens": tokens if isinstance(tokens, int) else None, "reply": text}


class LLMJudgeBase:
    """What the LLM judges share: options, backend, failure counts and the per-item failure list.

    A subclass sets :attr:`name`, extends :meth:`reset_stats` with its own counters, reads every
    reply through :meth:`_read`, starts its ``stats()`` with :meth:`_stats_head` and ends it with
    :meth:`_stats_tail`.

    Args:
        options: the judge's options.
        backend: a ready backend (tests, sharing one model); built from ``options`` otherwise.

    Raises:
        ValueError: no backend was given and the options name no model.
    """

    name = ""

    def __init__(self, options: BackendOptions, backend: GenerationBackend | None = None) -> None:
        self.options = options
        self._owns_backend = backend is None
        self.backend = resolve_backend(options, backend, self.name)
        self.reset_stats()

    def close(self) -> None:
        """Release the backend this judge built (e.g. an HTTP backend's open connections).

        A backend handed in by the caller is the caller's to close.
        """
        closer = getattr(self.backend, "close", None)
        if self._owns_backend and callable(closer):
            closer()

    def reset_stats(self) -> None:
        """Forget the counts and failures gathered so far."""
        self._counter = FailureCounter()
        self._failures: list[dict[str, Any]] = []

    def _generate(self, chats: Sequence[Chat], unit: str) -> list[Reply]:
        """Generate one reply per chat with the judge's settings, under a progress bar."""
        o = self.options
        return generate_in_batches(
            self.backend, chats, o.generation_config(), o.batch_size, desc=self.name, unit=unit,
            keep_failures=True,
        )

    def _read(self, reply: Reply, parse: Callable[[str], Any], item: str, **where: Any) -> Any:
        """Parse one reply with ``parse(text)``; count it, and list it when it failed.

        Args:
            reply: the backend's reply (text or a generation failure).
            parse: the parser (returns a value or a :class:`ParseFailure`).
            item: the item's id for the failure list (record id, key, ...).
            **where: more JSON-ready context for the failure list (order, aspect, ...).

        Returns:
            The parsed value, or a :class:`ParseFailure` (``generation-failed`` when the backend
            produced no reply).
        """
        if isinstance(reply, GenerationFailure):
            self._counter.add_generation(reply.reason)
            self._failures.append(
                {"item": item, **where, "stage": "generation", "reason": reply.reason,
                 "detail": reply.detail}
            )
            return generation_failed(reply)
        parsed = parse(reply)
        if isinstance(parsed, ParseFailure):
            self._counter.add(parsed.reason)
            self._failures.append(
                {"item": item, **where, "stage": "parse", "reason": parsed.reason,
                 "detail": parsed.detail}
            )
        else:
            self._counter.add(None)
        return parsed

    def request_extras(self, requests: Sequence[Any]) -> list[dict[str, Any] | None]:
        """Per-request extras for the scorer runtime, right after a ``compare``/``score`` call.

        A judge that keeps an :class:`OrderTally` in ``self._tally`` returns the order outcome
        of each pair of that call (the harness computes the both-order metrics from them);
        other judges return ``None`` per request.
        """
        tally = getattr(self, "_tally", None)
        if not isinstance(tally, OrderTally):
            return [None] * len(requests)
        return list(tally.recent_outcomes(len(requests)))

    def failures(self) -> list[dict[str, Any]]:
        """Every failed reply since the last reset: item, context, stage, reason, detail."""
        return [dict(f) for f in self._failures]

    def _stats_head(self) -> dict[str, Any]:
        """The first entries of ``stats()``: the judge, its backend and the prompt version."""
        return {
            "judge": self.name,
            "backend": self.backend.fingerprint,
            "prompt_version": prompts.PROMPT_VERSION,
        }

    def _stats_tail(self) -> dict[str, Any]:
        """The last entries of ``stats()``: failure counts by reason and the failure list."""
        return {**self._counter.as_dict(), "failures": self.failures()}

    def describe(self) -> dict[str, Any]:
        """Settings and counts for the results manifest (the failure list included)."""
        from prbench.options import options_to_dict

        stats = getattr(self, "stats", None)
        return {
            "component": self.name,
            "backend": self.backend.fingerprint,
            "prompt_version": prompts.PROMPT_VERSION,
            "options": options_to_dict(self.options),
            "stats": stats() if callable(stats) else self._stats_tail(),
        }
