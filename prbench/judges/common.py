"""Options and helpers shared by every LLM-backed component (judges, the planner, pair generators).

Each component's options dataclass inherits :class:`BackendOptions`, so the backend is chosen with
the same flat options everywhere (``backend=hf,model=...,gguf_file=...`` or
``backend=openai,model=...,base_url=...``) and the decoding settings sit next to them. The judges
also share :class:`LLMJudgeBase` (options, backend and parse-failure counts).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from prbench.backends.base import (
    BackendSpec,
    Chat,
    GenerationBackend,
    GenerationConfig,
    build_backend,
)
from prbench.judges import prompts


def _help(text: str) -> dict[str, str]:
    return {"help": text}


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
    max_concurrency: int = dataclasses.field(default=8, metadata=_help("parallel calls (openai)"))
    timeout: float = dataclasses.field(default=120.0, metadata=_help("request timeout, s (openai)"))
    max_retries: int = dataclasses.field(default=5, metadata=_help("retries with backoff (openai)"))
    cache_dir: str = dataclasses.field(
        default="auto",
        metadata=_help("backend response cache: 'auto' (prbench cache), a folder, or '' (off)"),
    )
    batch_size: int = dataclasses.field(default=8, metadata=_help("chats per generate call (hf)"))
    max_new_tokens: int = dataclasses.field(default=512, metadata=_help("tokens per reply"))
    temperature: float = dataclasses.field(
        default=0.0, metadata=_help("0 = greedy (as the released judges); >0 = seeded sampling")
    )
    top_p: float = dataclasses.field(default=1.0, metadata=_help("nucleus mass when sampling"))
    seed: int = dataclasses.field(default=0, metadata=_help("seed of sampling and order shuffles"))

    def __post_init__(self) -> None:
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
        ValueError: no backend was given and the options name no model.
    """
    if backend is not None:
        return backend
    if not options.model:
        raise ValueError(
            f"{component}: set the option `model` (a hub id, local folder or served model name; "
            "with backend=hf a GGUF file also needs `gguf_file`)"
        )
    return build_backend(options.backend_spec())


def generate_in_batches(
    backend: GenerationBackend,
    chats: Sequence[Chat],
    config: GenerationConfig,
    batch_size: int,
) -> list[str]:
    """Call ``backend.generate`` on chunks of ``batch_size`` chats; check the reply count.

    Raises:
        RuntimeError: the backend returned a different number of replies than chats.
    """
    out: list[str] = []
    step = max(1, batch_size)
    for start in range(0, len(chats), step):
        chunk = list(chats[start : start + step])
        replies = backend.generate(chunk, config)
        if len(replies) != len(chunk):
            raise RuntimeError(
                f"backend {backend.fingerprint!r} returned {len(replies)} replies for "
                f"{len(chunk)} chats"
            )
        out.extend(str(r) for r in replies)
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


def stable_hash(*parts: object) -> str:
    """SHA-256 hex of the JSON form of ``parts`` (for cache keys and seeded choices)."""
    data = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def seeded_unit(*parts: object) -> float:
    """A number in [0, 1) that depends only on ``parts`` (batch- and order-independent)."""
    return int(stable_hash(*parts)[:16], 16) / 16**16


@dataclasses.dataclass
class FailureCounter:
    """Counts replies and parse failures by reason."""

    replies: int = 0
    failures: int = 0
    reasons: Counter[str] = dataclasses.field(default_factory=Counter)

    def add(self, failure_reason: str | None) -> None:
        """Count one reply; ``failure_reason`` is ``None`` when it parsed."""
        self.replies += 1
        if failure_reason is not None:
            self.failures += 1
            self.reasons[failure_reason] += 1

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready counts."""
        return {
            "n_replies": self.replies,
            "n_parse_failures": self.failures,
            "parse_failure_rate": self.failures / self.replies if self.replies else 0.0,
            "parse_failure_reasons": dict(sorted(self.reasons.items())),
        }


class LLMJudgeBase:
    """What the LLM judges share: their options, their backend and their parse-failure counts.

    A subclass sets :attr:`name`, extends :meth:`reset_stats` with its own counters and starts its
    ``stats()`` with :meth:`_stats_head`.

    Args:
        options: the judge's options.
        backend: a ready backend (tests, sharing one model); built from ``options`` otherwise.

    Raises:
        ValueError: no backend was given and the options name no model.
    """

    name = ""

    def __init__(self, options: BackendOptions, backend: GenerationBackend | None = None) -> None:
        self.options = options
        self.backend = resolve_backend(options, backend, self.name)
        self.reset_stats()

    def reset_stats(self) -> None:
        """Forget the counts gathered so far."""
        self._counter = FailureCounter()

    def _stats_head(self) -> dict[str, Any]:
        """The first entries of ``stats()``: the judge, its backend and the prompt version."""
        return {
            "judge": self.name,
            "backend": self.backend.fingerprint,
            "prompt_version": prompts.PROMPT_VERSION,
        }
