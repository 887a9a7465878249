"""A generation backend for any OpenAI-compatible chat-completions server (vLLM, SGLang, OpenAI).

Standard library only (``http.client`` and threads). What it does:

* ``POST {base_url}/chat/completions`` with the model, the messages and the decoding settings
  (``max_tokens``, ``temperature``, ``top_p``, ``seed``, ``stop``);
* the API key is read from the environment variable named by ``api_key_env`` at every request and
  sent as ``Authorization: Bearer ...``; it is never stored on the backend, in the cache, in a
  fingerprint, in a log line or in an error message (any text that echoes it is redacted);
* at most ``max_concurrency`` requests in flight per backend, across threads and calls;
* retries on HTTP 429, HTTP 5xx, timeouts and dropped connections, with exponential backoff
  (jittered, at least the server's ``Retry-After``), up to ``max_retries`` times;
* ``timeout`` is a deadline for the whole exchange (connect, send, the full response), not only
  for each socket read;
* an on-disk response cache keyed by the endpoint URL plus the whole request body (see
  :mod:`prbench.backends.cache`), **on by default**: ``cache_dir="auto"`` keeps it under
  ``prbench.paths.cache_dir("responses")``, a path puts it there, ``""`` turns it off. A cached
  request is never sent again, so a crashed run resumes where it stopped and re-running a judge
  costs nothing; with ``temperature > 0`` the same seed gives back the same stored sample, which
  is the backend's contract (outputs are a function of model, chat and config).

Identical requests within one call are sent once. The chat API returns log-probabilities only
for tokens the server generates, so :meth:`OpenAIBackend.logprobs` is not available here.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import random
import ssl
import threading
import time
import urllib.parse
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any

from prbench import __version__
from prbench.backends.base import BackendSpec, Chat, GenerationConfig
from prbench.backends.cache import ResponseCache
from prbench.backends.checks import check_chats, check_config, cut_at_stop

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
_EXCERPT = 300
_MIN_SECRET = 8


class BackendRequestError(RuntimeError):
    """A request failed for good (a non-retryable status, or retries exhausted)."""


class BackendTimeoutError(BackendRequestError, TimeoutError):
    """A request ran past ``timeout`` on every attempt."""


class BackendResponseError(BackendRequestError):
    """The server answered 200 but the body is not a usable chat completion."""


class BackendCapabilityError(NotImplementedError):
    """The backend cannot do what was asked (e.g. score a given continuation)."""


class _Timeout(Exception):
    pass


def resolve_cache_dir(setting: str, area: str = "responses") -> str:
    """Map a ``cache_dir`` setting to a folder (``"auto"`` -> the prbench cache) or ``""`` (off)."""
    if setting == "":
        return ""
    if setting == "auto":
        from prbench.paths import cache_dir

        return str(cache_dir(area))
    return os.path.expanduser(setting)


class OpenAIBackend:
    """Chat completions from an OpenAI-compatible server.

    Args:
        spec: ``backend="openai"``; ``model`` (the served model name) and ``base_url`` (e.g.
            ``http://127.0.0.1:8000/v1``) are required; ``api_key_env``, ``max_concurrency``,
            ``timeout``, ``max_retries`` and ``cache_dir`` as documented on
            :class:`~prbench.backends.base.BackendSpec`.

    Attributes:
        fingerprint: ``openai:<model>@<base_url>``; no credentials.
        backoff_base: seconds before the first retry; doubles with every retry.
        backoff_max: the longest wait between two attempts.
        requests_sent: HTTP requests sent so far (attempts, retries included).
        retries: retries made so far.

    Raises:
        ValueError: a missing or malformed setting.
    """

    backoff_base: float = 1.0
    backoff_max: float = 60.0
    _sleep = staticmethod(time.sleep)

    def __init__(self, spec: BackendSpec) -> None:
        if spec.backend != "openai":
            raise ValueError(f"OpenAIBackend needs backend='openai', got {spec.backend!r}")
        if not spec.model:
            raise ValueError("the openai backend needs `model` (the served model name)")
        if not spec.base_url:
            raise ValueError(
                "the openai backend needs `base_url`, e.g. http://127.0.0.1:8000/v1 for a local "
                "vLLM/SGLang server or https://api.openai.com/v1"
            )
        if spec.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {spec.max_concurrency}")
        if not spec.timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {spec.timeout}")
        if spec.max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {spec.max_retries}")
        parts = urllib.parse.urlsplit(spec.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, "
                f"got {spec.base_url!r}"
            )
        if parts.username or parts.password:
            raise ValueError(
                "base_url must not carry credentials; put the key in the environment variable "
                f"named by api_key_env ({spec.api_key_env or 'unset'})"
            )
        if parts.query or parts.fragment:
            raise ValueError(f"base_url must not have a query or fragment: {spec.base_url!r}")
        self.spec = spec
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        prefix = parts.path.rstrip("/")
        self._path = f"{prefix}/chat/completions"
        netloc = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
        if ":" in parts.hostname:  # IPv6 literal
            netloc = f"[{parts.hostname}]" + ("" if parts.port is None else f":{parts.port}")
        self.base_url = f"{parts.scheme}://{netloc}{prefix}"
        self.endpoint = f"{self.base_url}/chat/completions"
        self.fingerprint = f"openai:{spec.model}@{self.base_url}"
        root = resolve_cache_dir(spec.cache_dir)
        self.cache: ResponseCache | None = ResponseCache(root) if root else None
        self._slots = threading.BoundedSemaphore(spec.max_concurrency)
        self._lock = threading.Lock()
        self.requests_sent = 0
        self.retries = 0

    def __repr__(self) -> str:
        cache = self.cache.root if self.cache else None
        return (
            f"OpenAIBackend(model={self.spec.model!r}, base_url={self.base_url!r}, cache={cache})"
        )

    # -- the protocol ---------------------------------------------------------------------------

    def generate(self, chats: Sequence[Chat], config: GenerationConfig) -> list[str]:
        """One completion per chat, in order (cached responses are not requested again).

        Raises:
            BackendRequestError: a request failed (its position in ``chats`` is named).
            BackendTimeoutError: a request timed out on every attempt.
            BackendResponseError: a response has no message text.
        """
        check_chats(chats)
        check_config(config)
        bodies = [self.request_body(chat, config) for chat in chats]
        responses = self._fetch_all(bodies)
        return [
            cut_at_stop(self._message_text(i, response), config.stop)
            for i, response in enumerate(responses)
        ]

    def logprobs(self, chats: Sequence[Chat], continuations: Sequence[str]) -> list[float]:
        """Not available: chat completions only give log-probabilities of generated tokens.

        Raises:
            BackendCapabilityError: always; use ``backend="hf"`` to score given continuations.
        """
        raise BackendCapabilityError(
            "the openai backend cannot score given continuations: the chat-completions API "
            "returns log-probabilities only for tokens the server generates. Use backend='hf' "
            "(the same model run in-process) for log-probabilities."
        )

    # -- requests -------------------------------------------------------------------------------

    def request_body(self, chat: Chat, config: GenerationConfig) -> dict[str, Any]:
        """The JSON body sent for one chat (also the heart of its cache key)."""
        body: dict[str, Any] = {
            "model": self.spec.model,
            "messages": [{"role": m["role"], "content": m["content"]} for m in chat],
            "max_tokens": config.max_new_tokens,
            "temperature": config.temperature,
            "top_p": config.top_p,
            "seed": config.seed,
        }
        if config.stop:
            body["stop"] = list(config.stop)
        return body

    def _fetch_all(self, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Return the response for every body: from the cache, else from the server."""
        keyed = [{"url": self.endpoint, "body": body} for body in bodies]
        first_of: dict[str, int] = {}
        duplicate_of: list[int] = []
        for i, request in enumerate(keyed):
            text = json.dumps(request, sort_keys=True, ensure_ascii=False)
            duplicate_of.append(first_of.setdefault(text, i))
        results: dict[int, dict[str, Any]] = {}
        missing: list[int] = []
        for i in sorted(set(duplicate_of)):
            cached = self.cache.get(keyed[i]) if self.cache is not None else None
            if cached is not None:
                results[i] = cached
            else:
                missing.append(i)
        if missing:
            self._send_all(missing, bodies, keyed, results)
        logger.info(
            "%s: %d chats, %d unique, %d from cache, %d requested",
            self.fingerprint,
            len(bodies),
            len(set(duplicate_of)),
            len(set(duplicate_of)) - len(missing),
            len(missing),
        )
        return [results[duplicate_of[i]] for i in range(len(bodies))]

    def _send_all(
        self,
        indices: list[int],
        bodies: list[dict[str, Any]],
        keyed: list[dict[str, Any]],
        results: dict[int, dict[str, Any]],
    ) -> None:
        """Send the requests at ``indices`` concurrently, cache each success, raise the first error.

        After an error no new request starts; requests already in flight finish and are cached.
        """
        first_error: BaseException | None = None
        workers = min(self.spec.max_concurrency, len(indices))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="prbench-http") as pool:
            futures: dict[Future[dict[str, Any]], int] = {
                pool.submit(self._post, i, bodies[i]): i for i in indices
            }
            for future in as_completed(futures):
                i = futures[future]
                if future.cancelled():
                    continue
                error = future.exception()
                if error is not None:
                    if first_error is None:
                        first_error = error
                        for other in futures:
                            other.cancel()
                    continue
                response = future.result()
                try:
                    self._message_text(i, response)  # never cache an unusable answer
                except BackendResponseError as exc:
                    if first_error is None:
                        first_error = exc
                        for other in futures:
                            other.cancel()
                    continue
                results[i] = response
                if self.cache is not None:
                    self.cache.put(keyed[i], response, redact=self._secret())
        if first_error is not None:
            raise first_error

    def _api_key(self) -> str:
        name = self.spec.api_key_env
        return os.environ.get(name, "") if name else ""

    def _secret(self) -> str:
        """The key, when it is long enough to be a secret.

        Placeholders such as ``EMPTY`` are not redacted, so that stored answers are not mangled.
        """
        key = self._api_key()
        return key if len(key) >= _MIN_SECRET else ""

    def _redact(self, text: str) -> str:
        secret = self._secret()
        return text.replace(secret, "***") if secret else text

    def _post(self, index: int, body: dict[str, Any]) -> dict[str, Any]:
        """Send one request with retries; return the decoded JSON response."""
        payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
        attempts = self.spec.max_retries + 1
        reason = ""
        timed_out = False
        for attempt in range(attempts):
            retry_after: float | None = None
            try:
                with self._slots:
                    with self._lock:
                        self.requests_sent += 1
                    status, headers, data = self._exchange(payload)
            except _Timeout:
                timed_out = True
                reason = f"no complete response within {self.spec.timeout:g} s"
            except ssl.SSLError as exc:
                raise BackendRequestError(
                    f"request {index} to {self.endpoint}: TLS failed: {self._redact(str(exc))}"
                ) from None
            except (OSError, http.client.HTTPException) as exc:
                timed_out = False
                reason = f"connection failed ({type(exc).__name__}: {self._redact(str(exc))})"
            else:
                timed_out = False
                excerpt = self._redact(data[:_EXCERPT].decode("utf-8", "replace"))
                if status == 200:
                    try:
                        decoded = json.loads(data)
                    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                        raise BackendResponseError(
                            f"request {index} to {self.endpoint}: the response is not JSON "
                            f"({exc}); it begins {excerpt!r}"
                        ) from None
                    if not isinstance(decoded, dict):
                        raise BackendResponseError(
                            f"request {index} to {self.endpoint}: expected a JSON object, "
                            f"got {type(decoded).__name__}"
                        )
                    return decoded
                if status not in RETRY_STATUSES:
                    raise BackendRequestError(
                        f"request {index} to {self.endpoint} failed: HTTP {status}: "
                        f"{excerpt}{self._hint(status)}"
                    )
                reason = f"HTTP {status}: {excerpt}"
                retry_after = _retry_after(headers.get("Retry-After"))
            if attempt + 1 == attempts:
                break
            delay = min(self.backoff_max, self.backoff_base * 2**attempt)
            delay *= random.uniform(0.5, 1.0)
            if retry_after is not None:
                delay = max(delay, min(retry_after, self.backoff_max))
            with self._lock:
                self.retries += 1
            logger.warning(
                "request %d to %s: %s; retry %d of %d in %.2f s",
                index,
                self.endpoint,
                reason,
                attempt + 1,
                self.spec.max_retries,
                delay,
            )
            self._sleep(delay)
        message = (
            f"request {index} to {self.endpoint} failed after {attempts} attempt"
            f"{'s' if attempts != 1 else ''}: {reason}"
        )
        if timed_out:
            raise BackendTimeoutError(
                message + " (raise `timeout` or `max_retries`, or check that the server is up "
                "and not overloaded)"
            )
        raise BackendRequestError(message)

    def _hint(self, status: int) -> str:
        if status in (401, 403):
            env = self.spec.api_key_env
            where = f"${env}" if env else "the variable named by api_key_env (unset)"
            present = "is set" if self._api_key() else "is not set"
            return f" (check the API key: {where} {present})"
        if status == 404:
            return f" (check base_url {self.base_url!r} and model {self.spec.model!r})"
        return ""

    def _exchange(self, payload: bytes) -> tuple[int, http.client.HTTPMessage, bytes]:
        """One HTTP exchange under a deadline of ``timeout`` seconds for all of it."""
        timeout = self.spec.timeout
        deadline = time.monotonic() + timeout
        conn_type = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = conn_type(self._host, self._port, timeout=timeout)
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"prbench/{__version__}",
        }
        key = self._api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        try:
            conn.request("POST", self._path, body=payload, headers=headers)
            _tighten(conn, deadline)
            response = conn.getresponse()
            chunks = []
            while True:
                _tighten(conn, deadline)
                chunk = response.read1(65536)
                if not chunk:
                    break
                chunks.append(chunk)
            return response.status, response.headers, b"".join(chunks)
        except TimeoutError:
            raise _Timeout() from None
        finally:
            conn.close()

    def _message_text(self, index: int, response: dict[str, Any]) -> str:
        """The assistant message of a chat-completion response."""
        try:
            choice = response["choices"][0]
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            excerpt = self._redact(json.dumps(response)[:_EXCERPT])
            raise BackendResponseError(
                f"request {index} to {self.endpoint}: no choices[0].message.content in the "
                f"response: {excerpt}"
            ) from None
        if not isinstance(content, str):
            raise BackendResponseError(
                f"request {index} to {self.endpoint}: the message content is "
                f"{type(content).__name__}, not text (finish_reason="
                f"{choice.get('finish_reason')!r}); the model gave no answer"
            )
        return content


def _tighten(conn: http.client.HTTPConnection, deadline: float) -> None:
    """Shrink the socket timeout to what is left before ``deadline`` (or time out now)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    if conn.sock is not None:
        conn.sock.settimeout(left)


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds; None for absent or a date."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None
