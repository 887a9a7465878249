"""A generation backend for any OpenAI-compatible chat-completions server (vLLM, SGLang, OpenAI).

The transport is httpx (:mod:`prbench.backends.http_exchange`: pooled connections, proxies and a CA
bundle from the environment); this module keeps prbench's policy on top of it. What it does:

* ``POST {base_url}/chat/completions`` with the model, the messages and the decoding settings
  (``max_tokens``, ``temperature``, ``top_p``, ``seed``, ``stop``);
* the API key is read from the environment variable named by ``api_key_env`` at every request and
  sent as ``Authorization: Bearer ...``; it is never stored on the backend, in the cache, in a
  fingerprint, in a log line or in an error message (any text that echoes it, a reply included,
  is masked: :mod:`prbench.redaction`);
* at most ``max_concurrency`` requests in flight per backend, across threads and calls;
* retries on HTTP 408/409/429, HTTP 5xx, timeouts, connections that could not be opened,
  connections dropped before the reply was complete (reset, closed without an answer) and
  malformed 200 replies (not JSON, no ``choices``, ``content: null``), with exponential backoff
  (jittered, at least the server's ``Retry-After`` in seconds or as a date), up to
  ``max_retries`` times -- the policy of :mod:`prbench.backends.http_retry`, which the reward
  server's client shares;
* the connections to the server are kept open between requests and shared by the run's threads
  (at most ``max_concurrency``); :meth:`OpenAIBackend.close` closes them (the judges and scorers
  that built the backend call it when their run ends). ``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY``
  and the CA bundle of ``SSL_CERT_FILE``/``REQUESTS_CA_BUNDLE`` are honoured (see
  :mod:`prbench.backends.http_exchange`);
* what failures mean (see :mod:`prbench.backends.base`):

  - **per item** -- a 408/409/429/5xx, a timeout, a dropped connection or a malformed reply on
    every attempt, or a client error that concerns this request only (400, 413, 422, ... e.g. a
    prompt longer than the served context): ``generate`` returns a
    :class:`~prbench.backends.base.GenerationFailure` for that chat (reason ``http-<status>``,
    ``timeout``, ``connection``, ``bad-response``) and the other chats go on; the caller records
    the item as invalid. A server that accepted the connection was reached, so a connection it
    dropped says nothing about the other requests;
  - **fatal** -- 401/403 (the API key), 404 (``base_url`` or ``model``), a TLS failure, or a
    connection that could not be opened on every attempt of a request (refused: no server on that
    port; the host name does not resolve; no route): no request can succeed, so
    :class:`BackendRequestError` (a :class:`~prbench.backends.base.BackendFatalError`) stops the
    run with one line naming the server and the fix, and saying that re-running the same command
    resumes. Requests already in flight finish and are cached;
* ``timeout`` is a deadline for the whole exchange (connect, send, the full response), not only
  for each socket read;
* every reply is a :class:`~prbench.backends.base.Completion` carrying the server's
  ``finish_reason`` (``"length"``: cut at ``max_tokens``, which judges count as ``truncated``)
  and, where a reasoning parser moved the model's thinking out of ``content``, that text as
  ``reasoning`` (``reasoning_content``, or ``reasoning`` in newer vLLM); a reply whose
  ``content`` is ``null`` beside a reasoning text (thinking that never ended) is the empty text
  with its reasoning, not a malformed reply;
* :meth:`OpenAIBackend.fit_budgets` fits each chat's ``max_tokens`` into the served context:
  ``min(wanted, max_model_len - prompt tokens)``, with ``max_model_len`` from the model's
  ``/v1/models`` card and the prompt counted by the server's ``/tokenize`` (vLLM), so no request
  is refused for its length;
* an on-disk response cache keyed by the endpoint URL plus the whole request body (see
  :mod:`prbench.backends.cache`), **on by default**: ``cache_dir="auto"`` keeps it under
  ``prbench.paths.cache_dir("responses")``, a path puts it there, ``""`` turns it off. A cached
  request is never sent again, so a crashed run resumes where it stopped and re-running a judge
  costs nothing; with ``temperature > 0`` the same seed gives back the same stored sample, which
  is the backend's contract (outputs are a function of model, chat and config). Only usable
  replies are stored: a failed item is asked again by the next run.

A caller that stops waiting (a scorer call past ``call_timeout``, a Ctrl-C) abandons the
requests in flight: their connections are shut down (:class:`~prbench.backends.http_exchange.
InFlight`), no retry starts, and no thread is left waiting for the server's answer.

Identical requests within one call are sent once. The chat API returns log-probabilities only
for tokens the server generates, so :meth:`OpenAIBackend.logprobs` is not available here.

This module owns the backend's request policy (concurrency, retries, what is fatal, the cache's
use); one exchange under a deadline is :mod:`prbench.backends.http_exchange`, reading a reply is
:mod:`prbench.backends.chat_completion`.
"""

from __future__ import annotations

import json
import logging
import ssl
import sys
import threading
import time
import urllib.parse
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from prbench import __version__
from prbench.backends.base import (
    BackendFatalError,
    BackendSpec,
    Chat,
    Completion,
    GenerationConfig,
    GenerationFailure,
    Reply,
)
from prbench.backends.cache import ResponseCache, resolve_cache_dir
from prbench.backends.chat_completion import (
    finish_reason,
    message_text,
    prompt_tokens,
    reasoning_text,
    reply_problem,
)
from prbench.backends.checks import check_chats, check_config, cut_at_stop
from prbench.backends.http_exchange import (
    Abandoned,
    Dropped,
    ExchangeTimeout,
    HttpSession,
    InFlight,
    NotConnected,
)
from prbench.backends.http_retry import RETRY_STATUSES, backoff_delay, retry_after_seconds
from prbench.backends.urls import check_server_url
from prbench.errors import PrbenchUserError
from prbench.redaction import MASK, MIN_SECRET, redact, redact_text, secret_from_env

logger = logging.getLogger(__name__)

#: Statuses no request of the run can get past: the key, or the URL/model name, is wrong.
FATAL_STATUSES = frozenset({401, 403, 404})
_EXCERPT = 300
#: bytes of a reply read past the excerpt before it is cut, so that a secret the cut would split
#: is masked whole first (a cut secret's first half is no longer a secret prbench can find)
_EXCERPT_SLACK = 4096
#: seconds between two looks at the requests in flight (see :meth:`OpenAIBackend._send_all`)
_POLL_S = 0.2


class BackendRequestError(BackendFatalError):
    """A failure that concerns the whole run (bad key, unknown model or route, TLS, no server)."""


class BackendCapabilityError(PrbenchUserError, NotImplementedError):
    """The backend cannot do what was asked (e.g. score a given continuation)."""


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
        failed: requests given up as per-item failures so far.

    Raises:
        ValueError: a missing or malformed setting.
    """

    backoff_base: float = 1.0
    backoff_max: float = 60.0
    _sleep = staticmethod(time.sleep)
    #: The path under ``base_url`` every request is posted to (a subclass may post elsewhere).
    route: str = "chat/completions"

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
        check_server_url(spec.base_url, "base_url", key_hint=(
            f"the environment variable named by api_key_env ({spec.api_key_env or 'unset'})"))
        parts = urllib.parse.urlsplit(spec.base_url)
        assert parts.hostname is not None  # checked above
        self.spec = spec
        prefix = parts.path.rstrip("/")
        self._prefix = prefix
        self._path = f"{prefix}/{self.route}"
        netloc = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
        if ":" in parts.hostname:  # IPv6 literal
            netloc = f"[{parts.hostname}]" + ("" if parts.port is None else f":{parts.port}")
        self._root = f"{parts.scheme}://{netloc}"
        self.base_url = f"{self._root}{prefix}"
        self.endpoint = f"{self.base_url}/{self.route}"
        self.fingerprint = f"openai:{spec.model}@{self.base_url}"
        root = resolve_cache_dir(spec.cache_dir)
        self.cache: ResponseCache | None = ResponseCache(root) if root else None
        self._api_key()  # the key is a known secret from the start (prbench.redaction)
        self._echoed = False  # a reply that echoed a secret was said (once)
        self._slots = threading.BoundedSemaphore(spec.max_concurrency)
        # every exchange holds a slot, so it never waits for a connection of the pool
        self._session = HttpSession(max_connections=spec.max_concurrency)
        self._lock = threading.Lock()
        self.requests_sent = 0
        self.retries = 0
        self.failed = 0

    def __repr__(self) -> str:
        cache = self.cache.root if self.cache else None
        return (
            f"OpenAIBackend(model={self.spec.model!r}, base_url={self.base_url!r}, cache={cache})"
        )

    # -- the protocol ---------------------------------------------------------------------------

    def generate(self, chats: Sequence[Chat], config: GenerationConfig,
                 budgets: Sequence[int] | None = None) -> list[Reply]:
        """One completion per chat, in order (cached responses are not requested again).

        A chat whose request failed for good gets a
        :class:`~prbench.backends.base.GenerationFailure` in its place (see the module docstring).

        Args:
            chats: the chats.
            config: the decoding settings.
            budgets: each chat's ``max_tokens`` in place of ``config.max_new_tokens`` (from
                :meth:`fit_budgets`), sent in one concurrent call.

        Raises:
            BackendRequestError: a failure no request can get past (the key, the URL or model,
                TLS, or no server answering); one line naming the server and the fix.
            ValueError: ``budgets`` of another length than ``chats``, or a budget below 1.
        """
        check_chats(chats)
        check_config(config)
        bodies = [self.request_body(chat, config) for chat in chats]
        if budgets is not None:
            if len(budgets) != len(chats) or any(b < 1 for b in budgets):
                raise ValueError(f"budgets must give each of the {len(chats)} chats at least 1 "
                                 f"token, got {list(budgets)[:10]}")
            for body, budget in zip(bodies, budgets, strict=True):
                body["max_tokens"] = int(budget)
        responses = self._fetch_all(bodies)
        return [
            r if isinstance(r, GenerationFailure)
            else Completion(cut_at_stop(message_text(r), config.stop), finish_reason(r),
                            reasoning_text(r), prompt_tokens(r))
            for r in responses
        ]

    # -- the served context ---------------------------------------------------------------------

    def model_card(self) -> dict[str, Any] | None:
        """The served model's entry of ``GET {base_url}/models`` (``None``: no such entry).

        Raises:
            BackendRequestError: the server cannot be reached or refuses the API key.
        """
        status, data = self.get_json(f"{self._prefix}/models")
        entries = data.get("data") if isinstance(data, dict) and status == 200 else None
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and entry.get("id") == self.spec.model:
                return entry
        return None

    def prompt_tokens(self, chat: Chat) -> int | None:
        """The tokens of a chat's prompt as the server counts them (vLLM's ``POST /tokenize``
        with the chat template and the generation prompt); ``None`` where the server has no
        such route or gives no count.
        """  # noqa: D205
        body = {"model": self.spec.model, "add_generation_prompt": True,
                "messages": [{"role": m["role"], "content": m["content"]} for m in chat]}
        status, data = self.post_json("/tokenize", body)
        count = data.get("count") if isinstance(data, dict) and status == 200 else None
        return count if isinstance(count, int) and not isinstance(count, bool) else None

    def fit_budgets(self, chats: Sequence[Chat], wanted: int) -> tuple[list[int], dict[str, Any]]:
        """Each chat's ``max_tokens``: ``min(wanted, max_model_len - prompt tokens)``.

        ``max_model_len`` is read from the model's card; the prompt is counted by the server.
        A budget below 1 means the prompt alone fills the context (the caller records the item as
        invalid instead of sending it). Where the card has no ``max_model_len`` or the server
        cannot count tokens, every budget is ``wanted`` and the returned description says why.

        Returns:
            The budgets, and a description: ``max_model_len``, ``source`` (``"served context"``
            or why the budgets were not fitted), ``n_fitted`` (budgets below ``wanted``) and
            ``n_no_room``.
        """
        card = self.model_card()
        limit = card.get("max_model_len") if card else None
        info: dict[str, Any] = {"wanted": wanted, "max_model_len": limit, "n_fitted": 0,
                                "n_no_room": 0}
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            info["source"] = "option (the model's /v1/models card has no max_model_len)"
            return [wanted] * len(chats), info
        budgets: list[int] = []
        for chat in chats:
            n = self.prompt_tokens(chat)
            if n is None:
                info["source"] = ("option (the server has no /tokenize to count prompt tokens: "
                                  "requests longer than its context will be refused)")
                return [wanted] * len(chats), info
            budgets.append(min(wanted, limit - n))
        info.update(source="served context", n_fitted=sum(b < wanted for b in budgets),
                    n_no_room=sum(b < 1 for b in budgets))
        return budgets, info

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

    def _fetch_all(self, bodies: list[dict[str, Any]]) -> list[dict[str, Any] | GenerationFailure]:
        """Return the response (or the failure) for every body: from the cache, else the server."""
        keyed = [{"url": self.endpoint, "body": body} for body in bodies]
        first_of: dict[str, int] = {}
        duplicate_of: list[int] = []
        for i, request in enumerate(keyed):
            text = json.dumps(request, sort_keys=True, ensure_ascii=False)
            duplicate_of.append(first_of.setdefault(text, i))
        results: dict[int, dict[str, Any] | GenerationFailure] = {}
        missing: list[int] = []
        for i in sorted(set(duplicate_of)):
            cached = self.cache.get(keyed[i]) if self.cache is not None else None
            if cached is not None and not self._reply_problem(cached):
                results[i] = cached
            else:
                missing.append(i)
        if missing:
            self._send_all(missing, bodies, keyed, results)
        failed = sum(isinstance(r, GenerationFailure) for r in results.values())
        logger.info(
            "%s: %d chats, %d unique, %d from cache, %d requested, %d failed",
            self.fingerprint,
            len(bodies),
            len(set(duplicate_of)),
            len(set(duplicate_of)) - len(missing),
            len(missing),
            failed,
        )
        return [results[duplicate_of[i]] for i in range(len(bodies))]

    def _send_all(
        self,
        indices: list[int],
        bodies: list[dict[str, Any]],
        keyed: list[dict[str, Any]],
        results: dict[int, dict[str, Any] | GenerationFailure],
    ) -> None:
        """Send the requests at ``indices`` concurrently; cache each usable response.

        A per-item failure is stored in ``results``; a fatal error (or any other exception) stops
        new requests from starting, lets those in flight finish (and be cached), then is raised.
        """
        first_error: BaseException | None = None
        workers = min(self.spec.max_concurrency, len(indices))
        flight = InFlight()
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="prbench-http")
        try:
            futures: dict[Future[dict[str, Any] | GenerationFailure], int] = {
                pool.submit(self._post, i, bodies[i], flight): i for i in indices
            }
            pending = set(futures)
            while pending:
                # short waits, so that a call_timeout raised in this thread (a signal, or the
                # watchdog's exception in a worker thread) gets in while nothing completes
                done, pending = wait(pending, timeout=_POLL_S, return_when=FIRST_COMPLETED)
                for future in done:
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
                    results[i] = response
                    if self.cache is not None and not isinstance(response, GenerationFailure):
                        self.cache.put(keyed[i], response, redact=self._secret())
        except BaseException:
            # the caller stops waiting (call_timeout, Ctrl-C): the requests in flight are
            # abandoned (their sockets shut down) instead of waited for until the server answers
            abandoned = flight.abandon()
            pool.shutdown(wait=False, cancel_futures=True)
            if abandoned:
                logger.warning("%s: %d request(s) in flight abandoned", self.endpoint, abandoned)
            raise
        pool.shutdown(wait=True)
        if first_error is not None:
            raise first_error

    def _api_key(self) -> str:
        """The key, read now (and known from then on as a secret, :mod:`prbench.redaction`)."""
        return secret_from_env(self.spec.api_key_env)

    def _secret(self) -> str:
        """The key, when it is long enough to be a secret.

        Placeholders such as ``EMPTY`` are not redacted, so that stored answers are not mangled.
        """
        key = self._api_key()
        return key if len(key) >= MIN_SECRET else ""

    def _echo_warning(self) -> None:
        """Say once per backend that the server echoed a secret in a reply (kept masked)."""
        with self._lock:
            if self._echoed:
                return
            self._echoed = True
        sys.stderr.write(
            f"prbench: warning: the server at {self.endpoint} echoed a secret prbench holds (an "
            f"API key or token) in a reply; the reply is read, cached and written with it as "
            f"{MASK}\n"
        )

    def _redact(self, text: str) -> str:
        """``text`` with every secret prbench holds (this key included) masked."""
        self._api_key()
        return redact_text(text)

    def _post(self, index: int, body: dict[str, Any], flight: InFlight | None = None,
              ) -> dict[str, Any] | GenerationFailure:
        """Send one request with retries: the decoded, usable response, or why there is none.

        Args:
            index: the request's position (in messages).
            body: the JSON body.
            flight: the batch it belongs to; once abandoned, nothing more is sent.

        Raises:
            BackendRequestError: a fatal failure (see the module docstring).
            Abandoned: the batch was abandoned (the caller no longer waits for it).
        """
        payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
        attempts = self.spec.max_retries + 1
        code = ""
        reason = ""
        unreachable = True  # every attempt so far failed to connect
        for attempt in range(attempts):
            retry_after: float | None = None
            try:
                with self._slots:
                    with self._lock:
                        self.requests_sent += 1
                    status, headers, data = self._exchange(payload, in_flight=flight)
            except Abandoned:
                raise
            except ExchangeTimeout:
                unreachable = False
                code, reason = "timeout", f"no complete response within {self.spec.timeout:g} s"
            except ssl.SSLError as exc:
                raise BackendRequestError(
                    f"TLS with {self.base_url} failed: {_one_line(self._redact(str(exc)))} "
                    f"(check base_url's scheme and the server's certificate){self._resume()}"
                ) from None
            except NotConnected as exc:  # `unreachable` stays as it was
                code = "connection"
                reason = (f"connection failed ({type(exc.error).__name__}: "
                          f"{self._redact(str(exc.error))})")
            except Dropped as exc:
                # the server accepted the connection, then dropped it: retried like a 5xx
                unreachable = False
                code = "connection"
                reason = (f"connection dropped before a complete reply "
                          f"({type(exc.error).__name__}: "
                          f"{self._redact(str(exc.error)) or 'no detail'})")
            else:
                unreachable = False
                excerpt = _one_line(self._redact(
                    data[:_EXCERPT + _EXCERPT_SLACK].decode("utf-8", "replace"))[:_EXCERPT])
                if status == 200:
                    decoded, problem = self._decode_reply(data)
                    if not problem:
                        assert decoded is not None
                        # a reply that echoes the key is read, cached and written masked
                        masked = redact(decoded)
                        if masked != decoded:
                            self._echo_warning()
                        return masked
                    code = "bad-response"
                    reason = f"malformed reply: {problem}; it begins {excerpt!r}"
                elif status in FATAL_STATUSES:
                    raise BackendRequestError(
                        f"{self.endpoint} answered HTTP {status}: {excerpt}{self._hint(status)}"
                        f"{self._resume()}"
                    )
                elif status not in RETRY_STATUSES:
                    return self._give_up(index, f"http-{status}", f"HTTP {status}: {excerpt}", 1)
                else:
                    code, reason = f"http-{status}", f"HTTP {status}: {excerpt}"
                    retry_after = retry_after_seconds(headers.get("Retry-After"))
            if attempt + 1 == attempts:
                break
            delay = backoff_delay(attempt, base=self.backoff_base, cap=self.backoff_max,
                                  retry_after=retry_after)
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
            if flight is not None and self._sleep is time.sleep:
                flight.pause(delay)  # ends early, with Abandoned, if the batch is abandoned
            else:
                self._sleep(delay)
            if flight is not None and flight.abandoned:
                raise Abandoned()
        if unreachable:
            raise BackendRequestError(
                f"cannot reach the server at {self.base_url}: {_one_line(reason)} on all "
                f"{attempts} attempt{'s' if attempts != 1 else ''}; start the server or fix "
                f"`base_url`{self._resume()}"
            )
        if code == "timeout":
            reason += " (raise `timeout` or `max_retries` if the server is slow or overloaded)"
        return self._give_up(index, code, reason, attempts)

    def get_json(self, path: str) -> tuple[int, Any]:
        """``GET path`` on the server once, without retries: ``(status, decoded JSON or None)``.

        Raises:
            BackendRequestError: no connection could be opened, TLS failed, no complete reply
                came within ``timeout``, or the server refused the API key (401/403).
        """
        return self._once("GET", path, b"")

    def post_json(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        """``POST path`` with a JSON body once, without retries: ``(status, decoded JSON or
        None)``; the same failures as :meth:`get_json`.
        """  # noqa: D205
        return self._once("POST", path, json.dumps(body, ensure_ascii=False).encode("utf-8"))

    def _once(self, method: str, path: str, payload: bytes) -> tuple[int, Any]:
        """One request without retries (:meth:`get_json`, :meth:`post_json`)."""
        try:
            with self._slots:
                status, _, data = self._exchange(payload, method=method, path=path)
        except NotConnected as exc:
            raise BackendRequestError(
                f"cannot reach the server at {self.base_url}: connection failed "
                f"({type(exc.error).__name__}: {self._redact(str(exc.error))}); start the server "
                "or fix `base_url`"
            ) from None
        except (ExchangeTimeout, ssl.SSLError, Dropped) as exc:
            error = exc.error if isinstance(exc, Dropped) else exc
            what = ("no reply" if isinstance(exc, ExchangeTimeout)
                    else f"{type(error).__name__}: {error}")
            raise BackendRequestError(
                f"{method} {self.base_url}{path} failed ({_one_line(self._redact(what))}); check "
                "`base_url` and that the server is up"
            ) from None
        if status in (401, 403):
            raise BackendRequestError(
                f"{self.base_url}{path} answered HTTP {status}{self._hint(status)}"
            )
        try:
            return status, json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return status, None

    def _reply_problem(self, response: Any) -> str:
        """Why a decoded reply is unusable (``""`` when usable): here, a chat completion."""
        return reply_problem(response)

    def _decode_reply(self, data: bytes) -> tuple[Any, str]:
        """A 200 reply's body as a usable response, or ``(None, why not)`` (then retried)."""
        try:
            decoded = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return None, f"not JSON ({exc})"
        problem = self._reply_problem(decoded)
        return (None, problem) if problem else (decoded, "")

    def _give_up(self, index: int, code: str, reason: str, attempts: int) -> GenerationFailure:
        """Record a request that failed for good as a per-item failure."""
        detail = (
            f"request {index} to {self.endpoint} failed after {attempts} attempt"
            f"{'s' if attempts != 1 else ''}: {_one_line(reason)}"
        )
        with self._lock:
            self.failed += 1
        logger.warning("%s; the item is recorded as invalid", detail)
        return GenerationFailure(reason=code, detail=detail)

    def _resume(self) -> str:
        """How to go on after a fatal error (replies so far are in the response cache)."""
        if self.cache is None:
            return "; then re-run the same command"
        return ("; replies received so far are cached, so re-running the same command resumes "
                "where this run stopped")

    def _hint(self, status: int) -> str:
        if status in (401, 403):
            env = self.spec.api_key_env
            where = f"${env}" if env else "the variable named by api_key_env (unset)"
            present = "is set" if self._api_key() else "is not set"
            return f" (check the API key: {where} {present})"
        if status == 404:
            return f" (check base_url {self.base_url!r} and model {self.spec.model!r})"
        return ""

    def _exchange(
        self, payload: bytes, *, method: str = "POST", path: str | None = None,
        in_flight: InFlight | None = None,
    ) -> tuple[int, Any, bytes]:
        """One HTTP exchange with this server through its pooled session.

        Returns ``(status, headers, body)`` (see
        :meth:`prbench.backends.http_exchange.HttpSession.exchange`). ``path`` (default: the
        backend's route) is the request path on the server; ``in_flight`` the batch it belongs to.
        """
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"prbench/{__version__}",
        }
        key = self._api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return self._session.exchange(method, self._root + (path or self._path), payload, headers,
                                      timeout=self.spec.timeout, in_flight=in_flight)

    def close(self) -> None:
        """Close the connections kept open to the server (a later request opens new ones)."""
        self._session.close()


def _one_line(text: str) -> str:
    """``text`` with runs of whitespace (newlines included) folded to one space."""
    return " ".join(text.split())
