"""The secrets prbench holds, and their removal from everything it writes.

prbench holds secrets it never means to write: the API key of an OpenAI-compatible server (read
from the variable named by ``api_key_env``), the bearer token of ``prbench serve`` and of its
clients (``--api_key_env``, ``$PRBENCH_REWARD_API_KEY``), the Hugging Face token. A server that
echoes its request (the ``Authorization`` header in an error or even in a reply) would put such a
value into a judge's reply, and from there into a samples file, a cache, a manifest or an error
line. So there is one place that knows the secret values (:func:`remember`, plus the variables
of :data:`SECRET_VARIABLES` read afresh at each use) and one redaction (:func:`redact_text`,
:func:`redact`), applied where files are written: :mod:`prbench.outputs` (every file prbench
writes itself), :mod:`prbench.store` (every cache), lm-eval's results and samples files
(:mod:`prbench.harness.manifest`) and the CLI's ``error:`` line. Each occurrence of a secret
becomes :data:`MASK`.

Values shorter than :data:`MIN_SECRET` characters are not treated as secrets (placeholders such
as ``EMPTY`` would otherwise mangle ordinary text).

Ground floor: imports nothing from prbench.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MASK",
    "MIN_SECRET",
    "SECRET_VARIABLES",
    "known_secrets",
    "redact",
    "redact_text",
    "remember",
    "secret_from_env",
    "warn_masked",
]

#: what a secret is replaced with
MASK = "***"
#: the shortest value taken for a secret
MIN_SECRET = 8
#: environment variables whose values are secrets wherever prbench runs (read at each use): the
#: default ``api_key_env`` of the HTTP backend, the reward server's token, Hugging Face's token
SECRET_VARIABLES = ("OPENAI_API_KEY", "PRBENCH_REWARD_API_KEY", "HF_TOKEN",
                    "HUGGING_FACE_HUB_TOKEN")

_lock = threading.Lock()
_remembered: set[str] = set()


def remember(value: str | None) -> None:
    """Take ``value`` for a secret from now on (this process); short or empty values are not."""
    text = (value or "").strip()
    if len(text) >= MIN_SECRET:
        with _lock:
            _remembered.add(text)


def secret_from_env(name: str | None) -> str:
    """The value of the environment variable ``name`` (``""`` if unset), remembered as a secret.

    Every place that reads a key or token from the environment reads it through here, so that
    the value is known to :func:`redact` before any reply that might echo it arrives.
    """
    if not name:
        return ""
    value = os.environ.get(name, "")
    remember(value)
    return value


def known_secrets() -> list[str]:
    """Every secret known now, longest first (a secret inside another is masked with it)."""
    found = {os.environ.get(name, "").strip() for name in SECRET_VARIABLES}
    with _lock:
        found |= _remembered
    return sorted((s for s in found if len(s) >= MIN_SECRET), key=lambda s: (-len(s), s))


def redact_text(text: str, secrets: list[str] | None = None) -> str:
    """``text`` with every known secret (or each of ``secrets``) replaced by :data:`MASK`."""
    for secret in known_secrets() if secrets is None else secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def warn_masked(where: str, before: Any, after: Any) -> None:
    """Say on stderr that a secret was masked in what is written to ``where`` (it changed).

    A secret in output means something echoed it (a server, a plugin): worth a word, once per
    file written.
    """
    if before != after:
        import sys

        sys.stderr.write(
            f"prbench: warning: {where}: a secret prbench holds (an API key or token) was in "
            f"what is written there (a server or plugin echoed it); it is written as {MASK}\n"
        )


def redact(value: Any, secrets: list[str] | None = None) -> Any:
    """``value`` with every string in it (mapping keys included) redacted; other values as they
    are. Containers are copied only where something changed; with no secret known, ``value`` is
    returned as it is.
    """  # noqa: D205
    secrets = known_secrets() if secrets is None else secrets
    if not secrets:
        return value
    return _redact(value, secrets)


def _redact(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, Mapping):
        return {(_redact(k, secrets) if isinstance(k, str) else k): _redact(v, secrets)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [_redact(v, secrets) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value
