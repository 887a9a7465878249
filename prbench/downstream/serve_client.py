"""A small client of the reward server, for verl/OpenRLHF workers and Python callers.

It retries what the shared policy of :mod:`prbench.backends.http_retry` retries -- the server is
busy (HTTP 503 with ``Retry-After``, in seconds or as a date), 408/409/429, a 5xx from a proxy in
front of it, or the server cannot be reached -- with its capped, jittered exponential backoff, and
fails with a clear error after ``retries`` tries. Other HTTP errors (a bad payload: 400, 413; a
wrong token: 401; and 500, which this server answers for a scorer failure that would fail again)
are raised at once with the server's message. A server started with ``--api_key_env`` gets the
token from ``$PRBENCH_REWARD_API_KEY`` (or the variable named by ``api_key_env``) as
``Authorization: Bearer ...``; the token is read at each request and never stored or shown.

The transport is the backends' (:class:`prbench.backends.http_exchange.HttpSession`, on httpx):
the connections to the server are kept open between requests (a verl worker posts one request
per response it scores), ``HTTPS_PROXY``/``NO_PROXY`` and the CA bundle of ``SSL_CERT_FILE``/
``REQUESTS_CA_BUNDLE`` are honoured, and ``timeout`` bounds each whole exchange. No standard-
library-only path is kept: verl and OpenRLHF workers import this module from the installed
prbench (``pkg://prbench.downstream.verl_reward``, ``examples/openrlhf_reward_func.py``), whose
core dependencies httpx is one of; ``tests/test_peers.py`` runs both peers' loaders on it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from prbench.backends.http_exchange import (
    Dropped,
    ExchangeTimeout,
    HttpSession,
    NotConnected,
)
from prbench.backends.http_retry import RETRY_STATUSES, backoff_delay, retry_after_seconds
from prbench.backends.urls import check_server_url

#: environment variable with the server's base URL (default ``http://127.0.0.1:8000``)
URL_ENV = "PRBENCH_REWARD_URL"
DEFAULT_URL = "http://127.0.0.1:8000"
#: environment variable with the server's bearer token (when it was started with --api_key_env)
KEY_ENV = "PRBENCH_REWARD_API_KEY"
#: The longest wait between two tries, in seconds.
MAX_BACKOFF = 10.0
#: Statuses retried: the shared policy's, less 500 (this server's answer for a scorer failure).
RETRIED = RETRY_STATUSES - {500}
#: Connections kept open to the server per client (requests beyond wait for one).
MAX_CONNECTIONS = 32


class RewardServerError(RuntimeError):
    """The reward server refused a request or could not be reached.

    Its message quotes the server's reply with every secret prbench holds masked (the token a
    server echoes, in any of its encoded forms: :mod:`prbench.redaction`).
    """

    def __init__(self, message: str) -> None:
        from prbench.redaction import redact_text

        super().__init__(redact_text(message))


class RewardClient:
    """Posts scoring requests to a prbench reward server.

    Args:
        url: the server's base URL (``http://host:port``); ``$PRBENCH_REWARD_URL`` when empty.
        timeout: seconds for each whole exchange (connect, send, the full reply).
        retries: tries before giving up while the server answers a retried status (503 busy,
            see the module docstring) or cannot be reached.
        backoff: the first wait in seconds; doubled per try, capped at 10 s, jittered (times 0.5
            to 1), and never shorter than the server's ``Retry-After`` (capped too).
        api_key_env: the environment variable holding the server's token (unset or empty: no
            ``Authorization`` header).

    Raises:
        prbench.backends.urls.ServerURLError: the URL carries a user name, password, query or
            fragment (a token belongs in ``api_key_env``), or is not an http(s) URL.
    """

    _sleep = staticmethod(time.sleep)

    def __init__(self, url: str = "", *, timeout: float = 300.0, retries: int = 20,
                 backoff: float = 0.05, api_key_env: str = KEY_ENV) -> None:
        self.url = (url or os.environ.get(URL_ENV) or DEFAULT_URL).rstrip("/")
        check_server_url(self.url, "the reward server's URL" if url else f"${URL_ENV}",
                         key_hint=f"${api_key_env}" if api_key_env else "")
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.retries = max(1, retries)
        self.backoff = backoff
        self.busy_retries = 0
        self._session = HttpSession(max_connections=MAX_CONNECTIONS)
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the connections kept open to the server (a later request opens new ones)."""
        self._session.close()

    def _send(self, method: str, path: str, data: bytes) -> tuple[int, Any, bytes]:
        headers = {"Content-Type": "application/json", **self._headers()} if data else \
            self._headers()
        try:
            return self._session.exchange(method, self.url + path, data, headers,
                                          timeout=self.timeout)
        except NotConnected as exc:
            raise ConnectionError(f"{type(exc.error).__name__}: {exc.error}") from None
        except Dropped as exc:
            raise ConnectionError(
                f"connection dropped ({type(exc.error).__name__}: {exc.error})") from None
        except ExchangeTimeout:
            raise TimeoutError(f"no complete reply within {self.timeout:g} s") from None

    def _headers(self) -> dict[str, str]:
        from prbench.redaction import secret_from_env

        token = secret_from_env(self.api_key_env).strip()  # known, so never written
        return {"Authorization": f"Bearer {token}"} if token else {}

    def _post(self, path: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        data = json.dumps(payload).encode()
        last = ""
        for attempt in range(self.retries):
            retry_after: float | None = None
            try:
                status, headers, body = self._send("POST", path, data)
            except (ConnectionError, TimeoutError, OSError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                text = body.decode(errors="replace")
                if 200 <= status < 300:
                    out: dict[str, Any] = json.loads(text)
                    return out
                if status not in RETRIED:
                    raise RewardServerError(f"{self.url}{path}: HTTP {status}: {text}")
                with self._lock:
                    self.busy_retries += 1
                last = f"HTTP {status}: {text}"
                retry_after = retry_after_seconds(headers.get("Retry-After"))
            if attempt + 1 < self.retries:
                pause = backoff_delay(attempt, base=self.backoff, cap=MAX_BACKOFF,
                                      retry_after=retry_after)
                self._sleep(pause)
        raise RewardServerError(f"{self.url}{path}: gave up after {self.retries} tries ({last})")

    def score(self, items: Sequence[Mapping[str, Any]]) -> list[float | None]:
        """Scores of native items (``question``, ``response``, optional ``profile``, ...)."""
        scores: list[float | None] = self._post("/score", {"items": list(items)})["scores"]
        return scores

    def reward_answer(
        self,
        queries: Sequence[str],
        prompts: Sequence[str] | None = None,
        labels: Sequence[Any] | None = None,
        **context: Sequence[Any],
    ) -> dict[str, Any]:
        """The whole ``/get_reward`` answer: ``rewards``, ``scores`` and ``extra_logs``.

        This is what an OpenRLHF ``reward_func`` returns (see ``examples/openrlhf_reward_func.py``).

        Args:
            queries: prompt + response texts.
            prompts: the prompt of each query.
            labels: OpenRLHF's labels (a JSON object string carries the user's context).
            **context: per-query lists ``questions=``, ``profiles=``, ``record_ids=``, ...
        """
        payload: dict[str, Any] = {"query": list(queries)}
        if prompts is not None:
            payload["prompts"] = list(prompts)
        if labels is not None:
            payload["labels"] = list(labels)
        payload.update({k: list(v) for k, v in context.items()})
        return self._post("/get_reward", payload)

    def get_reward(
        self,
        queries: Sequence[str],
        prompts: Sequence[str] | None = None,
        labels: Sequence[Any] | None = None,
        **context: Sequence[Any],
    ) -> list[float | None]:
        """Rewards from the OpenRLHF-schema endpoint (arguments as :meth:`reward_answer`)."""
        rewards: list[float | None] = self.reward_answer(queries, prompts, labels,
                                                         **context)["rewards"]
        return rewards

    def _get(self, path: str) -> dict[str, Any]:
        status, _, body = self._send("GET", path, b"")
        text = body.decode(errors="replace")
        if status != 200:
            raise RewardServerError(f"{self.url}{path}: HTTP {status}: {text}")
        out: dict[str, Any] = json.loads(text)
        return out

    def health(self) -> dict[str, Any]:
        """The server's ``/health`` document."""
        return self._get("/health")

    def metrics(self) -> dict[str, Any]:
        """The server's ``/metrics`` document."""
        return self._get("/metrics")
