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

A secret is masked in the forms a server or a library writes it in, not only as it is
(:func:`secret_forms`): URL-encoded (``%2F`` or ``%2f``, ``+`` for a space, ``/`` kept or not),
escaped inside a JSON string, HTML-escaped, and base64-encoded (standard and URL-safe alphabets,
padded or not), also where it is the tail of a longer encoded value such as an HTTP Basic
``user:key``. What cannot be caught is a secret no longer written whole: split across fields
or lines, hashed, encrypted, or encoded twice.

Values shorter than :data:`MIN_SECRET` characters are not treated as secrets (placeholders such
as ``EMPTY`` would otherwise mangle ordinary text).

Ground floor: imports nothing from prbench.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import os
import re
import threading
import urllib.parse
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
    "secret_forms",
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


def _base64_cores(raw: bytes) -> list[str]:
    """The base64 text of ``raw`` wherever it sits in a longer value.

    base64 writes 3 bytes as 4 characters, so what ``raw`` becomes depends on how many bytes
    come before it (0, 1 or 2 modulo 3). For each of the three, the characters made of ``raw``'s
    bits alone are the same whatever surrounds it: those are returned (the characters shared
    with a neighbour are left out), so ``base64("user:" + key)`` holds one of them.
    """
    cores = []
    for before in range(3):
        encoded = base64.b64encode(b"\0" * before + raw).decode("ascii")
        first = (before * 8 + 5) // 6  # the first character with no bit of the bytes before
        last = (before + len(raw)) * 8 // 6  # past the last character with no bit of the after
        cores.append(encoded[first:last])
    return cores


@functools.lru_cache(maxsize=256)
def secret_forms(secret: str) -> tuple[str, ...]:
    r"""Every form ``secret`` is masked in: as it is, and as servers and libraries encode it.

    URL-encoded (every reserved character, or all but ``/``; ``+`` for a space; upper- and
    lower-case hex digits), inside a JSON string (with and without ``\u`` escapes of
    non-ASCII, ``/`` escaped or not), HTML-escaped, and base64 in the standard and URL-safe
    alphabets at each of the three alignments (:func:`_base64_cores`; padded or not, inside a
    longer value or alone).
    Longest first, so that a form holding another is masked whole.
    """
    forms = {secret}
    for encoded in (urllib.parse.quote(secret, safe=""), urllib.parse.quote(secret),
                    urllib.parse.quote_plus(secret), urllib.parse.quote_plus(secret, safe="/")):
        forms.add(encoded)
        forms.add(re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), encoded))
    forms.add(json.dumps(secret)[1:-1])
    forms.add(json.dumps(secret)[1:-1].replace("/", "\\/"))  # the escaped slash some write
    forms.add(json.dumps(secret, ensure_ascii=False)[1:-1])
    forms.add(html.escape(secret))
    for core in _base64_cores(secret.encode("utf-8")):
        forms.add(core)
        forms.add(core.replace("+", "-").replace("/", "_"))
    return tuple(sorted((f for f in forms if len(f) >= MIN_SECRET), key=lambda f: (-len(f), f)))


@functools.lru_cache(maxsize=64)
def _every_form(secrets: tuple[str, ...]) -> tuple[str, ...]:
    """The forms of every one of ``secrets``, longest first."""
    forms = {f for secret in secrets for f in secret_forms(secret)}
    return tuple(sorted(forms, key=lambda f: (-len(f), f)))


def redact_text(text: str, secrets: list[str] | None = None) -> str:
    """``text`` with every known secret (or each of ``secrets``) replaced by :data:`MASK`, in
    each of its forms (:func:`secret_forms`).
    """  # noqa: D205
    for form in _every_form(tuple(known_secrets() if secrets is None else secrets)):
        if form in text:
            text = text.replace(form, MASK)
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
