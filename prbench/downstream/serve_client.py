"""A small client of the reward server (standard library only: usable inside verl/OpenRLHF workers).

It retries when the server says it is busy (HTTP 503, honouring ``Retry-After``) or cannot be
reached, with capped exponential backoff, and fails with a clear error after ``retries`` tries.
Other HTTP errors (a bad payload: 400, 413; a wrong token: 401; a scorer failure: 500) are raised
at once with the server's message. A server started with ``--api_key_env`` gets the token from
``$PRBENCH_REWARD_API_KEY`` (or the variable named by ``api_key_env``) as
``Authorization: Bearer ...``; the token is read at each request and never stored or shown.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

#: environment variable with the server's base URL (default ``http://127.0.0.1:8000``)
URL_ENV = "PRBENCH_REWARD_URL"
DEFAULT_URL = "http://127.0.0.1:8000"
#: environment variable with the server's bearer token (when it was started with --api_key_env)
KEY_ENV = "PRBENCH_REWARD_API_KEY"


class RewardServerError(RuntimeError):
    """The reward server refused a request or could not be reached."""


class RewardClient:
    """Posts scoring requests to a prbench reward server.

    Args:
        url: the server's base URL (``http://host:port``); ``$PRBENCH_REWARD_URL`` when empty.
        timeout: seconds per HTTP request.
        retries: tries for busy (503) or unreachable servers before giving up.
        backoff: first wait in seconds when the server sends no ``Retry-After``; doubled per try,
            capped at 10 s.
        api_key_env: the environment variable holding the server's token (unset or empty: no
            ``Authorization`` header).
    """

    def __init__(self, url: str = "", *, timeout: float = 300.0, retries: int = 20,
                 backoff: float = 0.05, api_key_env: str = KEY_ENV) -> None:
        self.url = (url or os.environ.get(URL_ENV) or DEFAULT_URL).rstrip("/")
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.retries = max(1, retries)
        self.backoff = backoff
        self.busy_retries = 0

    def _headers(self) -> dict[str, str]:
        from prbench.redaction import secret_from_env

        token = secret_from_env(self.api_key_env).strip()  # known, so never written
        return {"Authorization": f"Bearer {token}"} if token else {}

    def _post(self, path: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        data = json.dumps(payload).encode()
        wait = self.backoff
        last = ""
        for _ in range(self.retries):
            req = urllib.request.Request(
                self.url + path, data=data,
                headers={"Content-Type": "application/json", **self._headers()},
            )
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    out: dict[str, Any] = json.loads(resp.read().decode())
                    return out
            except urllib.error.HTTPError as exc:
                body = exc.read().decode(errors="replace")
                if exc.code != 503:
                    raise RewardServerError(f"{self.url}{path}: HTTP {exc.code}: {body}") from exc
                self.busy_retries += 1
                last = f"HTTP 503: {body}"
                retry_after = exc.headers.get("Retry-After")
                pause = float(retry_after) if retry_after else wait
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                last = f"{type(exc).__name__}: {exc}"
                pause = wait
            time.sleep(min(pause, 10.0))
            wait = min(wait * 2, 10.0)
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
        req = urllib.request.Request(self.url + path, headers=self._headers())
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            out: dict[str, Any] = json.loads(resp.read().decode())
            return out

    def health(self) -> dict[str, Any]:
        """The server's ``/health`` document."""
        return self._get("/health")

    def metrics(self) -> dict[str, Any]:
        """The server's ``/metrics`` document."""
        return self._get("/metrics")
