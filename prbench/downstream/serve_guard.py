"""What the reward server checks before a request reaches an endpoint: the token and the body size.

:class:`RequestGuard` is a plain ASGI layer in front of the FastAPI app of
:func:`prbench.downstream.serve.create_app`:

- **bearer token** (when the server has one): every path except ``/health`` needs
  ``Authorization: Bearer <token>``; a missing or wrong token is answered 401 before the body is
  read. The token is compared through SHA-256 digests with :func:`hmac.compare_digest`, so the
  time taken does not depend on how much of it a client guessed; only its digest is kept, and it is
  never logged or written anywhere;
- **body limit**: a ``Content-Length`` over ``max_body_bytes`` is answered 413 without reading the
  body, and a body sent without a length (chunked) is read chunk by chunk and answered 413 as
  soon as it passes the limit. At most ``max_body_bytes`` (plus the chunk that crossed it) is ever
  held, and nothing is parsed before the whole body is known to fit.

Every refusal is a JSON body ``{"error": "..."}``.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

#: The default request-body limit of ``prbench serve`` (bytes).
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024

#: Paths answered without a token (liveness probes of orchestrators).
OPEN_PATHS = frozenset({"/health"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def token_digest(token: str) -> bytes:
    """The SHA-256 digest a token is kept and compared as."""
    return hashlib.sha256(token.encode("utf-8")).digest()


def is_loopback(host: str) -> bool:
    """Whether ``host`` (what ``--host`` names) only listens on this machine.

    ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``) are; ``0.0.0.0``, ``::``, any
    other address and any other name are not.
    """
    name = host.strip().strip("[]")
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def bearer_token(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The credentials of an ``Authorization: Bearer ...`` header (``None`` when there is none)."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, credentials = value.strip().partition(b" ")
            if scheme.lower() == b"bearer":
                return credentials.strip()
            return None
    return None


async def reply_json(send: Send, status: int, message: str,
                     headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    """Send ``{"error": message}`` with ``status`` (a complete response)."""
    data = json.dumps({"error": message}).encode("utf-8")
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"),
                    (b"content-length", str(len(data)).encode("ascii")), *headers],
    })
    await send({"type": "http.response.body", "body": data})


class RequestGuard:
    """The ASGI layer that checks the token and the body size (see the module docstring).

    Args:
        app: the ASGI app behind it.
        max_body_bytes: the largest request body accepted.
        api_key_digest: :func:`token_digest` of the token; ``None`` serves without one.
        count: called with ``"unauthorized"`` or ``"too_large"`` for each refusal (metrics).
        open_paths: paths answered without a token.
    """

    def __init__(
        self,
        app: Callable[[Scope, Receive, Send], Awaitable[None]],
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        api_key_digest: bytes | None = None,
        count: Callable[[str], None] | None = None,
        open_paths: frozenset[str] = OPEN_PATHS,
    ) -> None:
        if max_body_bytes < 1:
            raise ValueError("max_body_bytes must be at least 1")
        self.app = app
        self.max_body_bytes = max_body_bytes
        self._digest = api_key_digest
        self._count = count or (lambda kind: None)
        self.open_paths = open_paths

    def authorized(self, headers: list[tuple[bytes, bytes]]) -> bool:
        """Whether the request carries the server's token (always, when it has none)."""
        if self._digest is None:
            return True
        given = bearer_token(headers)
        # compare digests of equal length: the time does not depend on the token given
        seen = hashlib.sha256(given if given is not None else b"").digest()
        return hmac.compare_digest(seen, self._digest) and given is not None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 401/413/400 here, or pass the request (its body read in full) to the app."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers", []))
        if scope.get("path") not in self.open_paths and not self.authorized(headers):
            self._count("unauthorized")
            await reply_json(send, 401, "missing or wrong bearer token (send the header "
                             "'Authorization: Bearer <token>' with the token in the server's "
                             "--api_key_env variable; OpenRLHF's own HTTP client sends none: "
                             "give OpenRLHF prbench's examples/openrlhf_reward_func.py with "
                             "PRBENCH_REWARD_API_KEY set to the token)",
                             ((b"www-authenticate", b'Bearer realm="prbench"'),))
            return
        declared = next((v for k, v in headers if k.lower() == b"content-length"), None)
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                await reply_json(send, 400, "Content-Length is not a number")
                return
            if length > self.max_body_bytes:
                await self._too_large(send, f"Content-Length {length}")
                return
        chunked = any(k.lower() == b"transfer-encoding" for k, _ in headers)
        if declared is None and not chunked:
            await self.app(scope, receive, send)  # no body (GET /health, /metrics)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client went away; nothing to answer
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_body_bytes:
                await self._too_large(send, f"more than {self.max_body_bytes} bytes")
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        whole = b"".join(chunks)
        chunks.clear()
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": whole, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, send: Send, what: str) -> None:
        self._count("too_large")
        await reply_json(send, 413, f"request body too large ({what}); the limit is "
                         f"{self.max_body_bytes} bytes (--max_body_bytes); split the request")
