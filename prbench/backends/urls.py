"""What a server URL given as an option may hold: a scheme, a host, a port and a path, no secret.

A password in a URL (``http://user:PASS@host/v1``) or a token in its query (``?token=...``,
``?api_key=...``) would be written wherever the URL goes: the options of the manifest, the
``model_args`` of lm-eval's results, log lines, error lines. So the components that take a
server's URL (the ``openai`` backend's ``base_url``, hence every judge, generator and profile
builder on it; ``served-rm``'s ``base_url``; the reward server's client) check it when their
options are read, before any model or task is built: a URL with a user name or password, a
query or a fragment is refused in one line that shows the URL with those parts masked, never
the secret, and says where a key belongs (the environment variable named by ``api_key_env``).
Whatever was found is also remembered as a secret (:func:`prbench.redaction.remember`), so that
no later line or file shows it either.

A secret in the URL's path (``/v1/<token>/``) cannot be told from a path, and is not refused.
"""

from __future__ import annotations

import urllib.parse

from prbench.redaction import MASK, remember

__all__ = ["CREDENTIAL_PARAMETERS", "ServerURLError", "check_server_url", "shown_url"]

#: query parameter names that carry a credential (compared lower-case, ``-`` read as ``_``)
CREDENTIAL_PARAMETERS = frozenset({
    "token", "key", "api_key", "apikey", "access_token", "auth_token", "id_token",
    "refresh_token", "bearer", "auth", "authorization", "password", "passwd", "pwd", "pass",
    "secret", "client_secret", "api_secret", "credential", "credentials", "signature", "sig",
    "session", "x_api_key", "hf_token", "openai_api_key",
})


class ServerURLError(ValueError):
    """A server URL given as an option is not one prbench can use (or would show a secret)."""


def _is_credential(name: str) -> bool:
    """Whether a query parameter's name says that its value is a credential."""
    norm = name.strip().lower().replace("-", "_")
    return norm in CREDENTIAL_PARAMETERS or norm.endswith(("_token", "_key", "_secret",
                                                           "_password"))


def shown_url(url: str) -> str:
    """``url`` as it may be shown: any user name, password, query value and fragment masked."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "(a URL that cannot be read)"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = "&".join(
        f"{pair.partition('=')[0]}={MASK}" if pair.partition("=")[2] else pair
        for pair in parts.query.split("&")) if parts.query else ""
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query,
                                    MASK if parts.fragment else ""))


def _remember_secrets(parts: urllib.parse.SplitResult) -> None:
    """Take every part of ``parts`` that can hold a secret for one (:mod:`prbench.redaction`)."""
    remember(parts.password)
    remember(parts.username)
    for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        remember(value)
        if not value:
            remember(name)
    remember(parts.fragment)


def check_server_url(url: str, option: str = "base_url", *, key_hint: str = "") -> None:
    """Refuse a server URL that is not ``http(s)://host[:port][/path]``, secrets shown masked.

    Args:
        url: the URL given (empty: nothing to check).
        option: the option's name, shown in the message.
        key_hint: where a key belongs instead, e.g. ``"the variable named by api_key_env
            (OPENAI_API_KEY)"``; shown when the URL carries credentials.

    Raises:
        ServerURLError: the URL has a user name or password, a query or a fragment (one line
            with those parts masked and the fix), or it is not an http(s) URL with a host and a
            valid port.
    """
    if not url:
        return
    where = key_hint or "an environment variable (the option api_key_env names it)"
    try:
        parts: urllib.parse.SplitResult | None = urllib.parse.urlsplit(url)
    except ValueError:  # e.g. an unclosed [ of an IPv6 address
        parts = None
    if parts is not None and ("@" in parts.netloc or parts.query or parts.fragment):
        _remember_secrets(parts)
        if "@" in parts.netloc:
            what = "a user name or password"
        elif any(_is_credential(name) for name, _ in
                 urllib.parse.parse_qsl(parts.query, keep_blank_values=True)):
            what = "a credential in its query"
        else:
            what = "a query or fragment"
        raise ServerURLError(
            f"{option} carries {what} ({shown_url(url)}); a URL is written into the manifest, "
            f"the results and log lines, so it must hold no secret: give the server's root URL "
            f"(scheme, host, port and path only) and put a key in {where}"
        )
    try:
        port_ok = parts is not None and (parts.port is None or parts.port > 0)
    except ValueError:  # not a number, or out of range
        port_ok = False
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname \
            or not port_ok:
        raise ServerURLError(
            f"{option} must be an http(s) URL with a host, such as http://127.0.0.1:8000/v1, "
            f"got {shown_url(url)!r}"
        )
