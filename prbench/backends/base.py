"""The generation-backend protocol and the options that choose a backend.

A chat is a list of ``{"role": ..., "content": ...}`` messages (OpenAI style). Every backend
generates text for a batch of chats and, where it can, returns the log-probability of given
continuations. Judges, planners and pair generators embed :class:`BackendSpec` fields in their
options and call :func:`prbench.backends.factory.build_backend`.

Failures come in two kinds, and every backend keeps them apart:

* **per item** -- a generation that failed for one chat (an HTTP server answering 5xx, a timeout,
  or a malformed reply on every attempt; a prompt longer than the model's context): ``generate``
  returns a :class:`GenerationFailure` in that chat's place and carries on with the others.
  Callers turn it into an ``invalid`` item (``nan``), never into a verdict, and keep its reason.
* **for the whole run** -- a setting every request shares is wrong (a rejected API key, an unknown
  model or route, a server nobody answers at): ``generate`` raises :class:`BackendFatalError`,
  whose message is one line naming the server and the fix.

Every generated reply is a :class:`Completion` (a ``str`` with ``finish_reason``), so a reply cut
at ``max_new_tokens`` is known as such on every backend (``finish_reason == "length"``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

from prbench.errors import PrbenchUserError

Chat = list[dict[str, str]]


@dataclasses.dataclass(frozen=True)
class GenerationFailure:
    """The place-holder ``generate`` returns for a chat whose generation failed.

    It is not text: callers must check for it (``isinstance(reply, GenerationFailure)``), count
    the item as invalid and keep :attr:`reason`. Backends never cache it.

    Attributes:
        reason: a stable code: ``http-<status>`` (a 5xx/429 on every attempt, or a 4xx that
            concerns this request only), ``timeout``, ``bad-response`` (a 200 whose body is not a
            chat completion with text), ``prompt-too-long``, ``truncated`` (a reply cut at
            ``max_new_tokens``; made by :func:`truncation_failure` for callers that record
            invalid items).
        detail: a one-line explanation (the endpoint, the attempts, an excerpt of the reply).
        text: the text that did come back, for a cut reply (``truncated``): never read for a
            verdict, kept so that a report can show it; ``""`` otherwise.
    """

    reason: str
    detail: str
    text: str = ""

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}"


class Completion(str):
    """Generated text that also says why generation stopped.

    It is a ``str`` (every caller that treats replies as text keeps working) with two more
    attributes: :attr:`finish_reason`: ``"stop"`` (an end-of-sequence token or a stop string),
    ``"length"`` (the ``max_new_tokens`` budget was used up before the reply ended) or whatever
    else a server reports; and :attr:`reasoning`: the reasoning a server's reasoning parser moved
    out of the reply (vLLM's and SGLang's ``reasoning_content``; ``""`` when there is none, or when
    the reasoning stayed in the text). Backends return it for every reply they generate; a plain
    ``str`` (a scripted test backend) counts as finished.

    Args:
        text: the reply.
        finish_reason: why generation stopped.
        reasoning: the reasoning sent beside the reply, if any.
        prompt_tokens: the prompt's tokens as the server counted them (``usage``), if it said.
    """

    finish_reason: str
    reasoning: str
    prompt_tokens: int | None

    def __new__(cls, text: str, finish_reason: str = "stop",  # noqa: D102
                reasoning: str = "", prompt_tokens: int | None = None) -> Completion:
        obj = super().__new__(cls, text)
        obj.finish_reason = finish_reason
        obj.reasoning = reasoning
        obj.prompt_tokens = prompt_tokens
        return obj

    def __reduce__(self) -> tuple[type[Completion], tuple[str, str, str, int | None]]:
        return (Completion, (str(self), self.finish_reason, self.reasoning, self.prompt_tokens))

    @property
    def truncated(self) -> bool:
        """Whether the reply was cut at ``max_new_tokens`` (``finish_reason == "length"``)."""
        return self.finish_reason == "length"


#: What ``generate`` returns per chat: the completion, or why there is none.
Reply = str | GenerationFailure

#: The failure reason of a reply cut at ``max_new_tokens`` (see :func:`truncation_failure`).
TRUNCATED = "truncated"


def is_truncated(reply: object) -> bool:
    """Whether ``reply`` is a :class:`Completion` cut at the token budget."""
    return isinstance(reply, Completion) and reply.truncated


def truncation_failure(reply: str, max_new_tokens: int | None = None) -> GenerationFailure:
    """The :class:`GenerationFailure` standing for a reply cut at ``max_new_tokens``.

    A cut reply is never read for a verdict, a rating or a plan: whatever it holds was written
    before the model finished (an RM-R1 trace cut inside its reasoning may already name a
    reply). Callers that record invalid items get this failure in the reply's place (see
    :func:`prbench.judges.common.generate_in_batches`).
    """
    tail = " ".join(str(reply).split())[-120:]
    budget = "max_new_tokens" if max_new_tokens is None else f"max_new_tokens={max_new_tokens}"
    return GenerationFailure(
        reason=TRUNCATED,
        detail=f"the reply used all {budget} tokens before it ended (raise max_new_tokens); "
        f"it ended with: {tail!r}",
        text=str(reply),
    )


class BackendFatalError(PrbenchUserError, RuntimeError):
    """An error that concerns every request of the run, so the run stops (one-line message).

    Raised for a rejected API key (401/403), an unknown model or route (404), a TLS failure, or a
    server that cannot be reached on any attempt. Responses received before it stay cached.
    """


class GenerationFailedError(BackendFatalError):
    """A caller that needs every reply got a :class:`GenerationFailure` (it names the chat).

    Attributes:
        failure: the backend's failure.
        index: the chat's position in the caller's batch.
    """

    def __init__(self, index: int, failure: GenerationFailure, backend: str) -> None:
        self.failure = failure
        self.index = index
        super().__init__(f"backend {backend}: chat {index} got no reply ({failure})")


@dataclasses.dataclass(frozen=True)
class GenerationConfig:
    """How to decode.

    Attributes:
        max_new_tokens: the most tokens to generate per chat.
        temperature: 0 means greedy decoding; above 0, seeded sampling.
        top_p: nucleus sampling mass (sampling only).
        seed: the sampling seed (the same seed and inputs give the same outputs).
        stop: strings that end a generation (the stop string is not returned).
    """

    max_new_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    stop: tuple[str, ...] = ()


@runtime_checkable
class GenerationBackend(Protocol):
    """A text generator. ``fingerprint`` identifies model + settings for caches and manifests."""

    fingerprint: str

    def generate(self, chats: Sequence[Chat], config: GenerationConfig) -> list[Reply]:
        """One completion per chat, in order; a :class:`GenerationFailure` where one failed.

        Raises:
            BackendFatalError: an error no request of the run can get past.
        """
        ...

    def logprobs(self, chats: Sequence[Chat], continuations: Sequence[str]) -> list[float]:
        """Sum of token log-probabilities of each continuation after its chat's prompt."""
        ...


@dataclasses.dataclass(frozen=True)
class BackendSpec:
    """Options that choose and configure a backend (embedded in judge/generator options).

    Attributes:
        backend: ``"hf"`` (a causal LM run in-process) or ``"openai"`` (any OpenAI-compatible
            server: vLLM, SGLang, OpenAI).
        model: hub id or local folder (hf), or the served model name (openai).
        revision: hub revision (hf).
        gguf_file: a GGUF file inside ``model`` (hf).
        dtype: ``auto``, ``float32``, ``bfloat16`` or ``float16`` (hf).
        device: ``cpu``, ``cuda``, ``cuda:0``, ... or ``auto`` (hf).
        chat_template: a Jinja template overriding the tokenizer's (hf).
        trust_remote_code: allow the model's own code (hf); only when asked for.
        base_url: the server's base URL, e.g. ``http://127.0.0.1:8000/v1`` (openai).
        api_key_env: the environment variable holding the API key (openai); the key itself is
            never an option, so it never lands in results or logs.
        max_concurrency: parallel requests (openai).
        timeout: per-request timeout in seconds (openai).
        max_retries: retries on 429/5xx/timeouts/malformed replies, with exponential backoff
            (openai).
        cache_dir: on-disk response cache (openai): ``"auto"`` (the default) keeps it under
            ``prbench.paths.cache_dir("responses")``, a path puts it there, ``""`` disables it.
        batch_size: chats per generate call (hf).
    """

    backend: Literal["hf", "openai"] = "hf"
    model: str = ""
    revision: str = "main"
    gguf_file: str = ""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    device: str = "auto"
    chat_template: str = ""
    trust_remote_code: bool = False
    base_url: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    max_concurrency: int = 8
    timeout: float = 120.0
    max_retries: int = 5
    cache_dir: str = "auto"
    batch_size: int = 8
