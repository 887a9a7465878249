"""One HTTP exchange under a deadline, standard library only (``http.client``).

:func:`exchange` sends one request and reads the full response with a deadline for all of it
(connect, send, every read), not only for each socket read; it tells a connection that could not
be opened (:class:`NotConnected`: nothing was sent) from one dropped mid-way (``OSError`` or
``http.client.HTTPException``) and from a deadline passed (:class:`ExchangeTimeout`). The retry
policy built on it is :class:`prbench.backends.http.OpenAIBackend`'s.
"""

from __future__ import annotations

import dataclasses
import http.client
import ssl
import time


class ExchangeTimeout(Exception):
    """No complete response within the deadline."""


class NotConnected(Exception):
    """The connection could not be opened (refused, unknown host, no route): nothing was sent."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclasses.dataclass(frozen=True)
class Target:
    """The server an exchange goes to.

    Attributes:
        https: TLS or plain HTTP.
        host: the host name or address.
        port: the port (``None``: the scheme's default).
    """

    https: bool
    host: str
    port: int | None


def exchange(
    target: Target, payload: bytes, headers: dict[str, str], *, method: str = "POST",
    path: str, timeout: float,
) -> tuple[int, http.client.HTTPMessage, bytes]:
    """One HTTP exchange with ``target`` under a deadline of ``timeout`` seconds for all of it.

    Args:
        target: the server.
        payload: the request body (``b""``: none).
        headers: the request headers.
        method: the HTTP method.
        path: the request path on the server.
        timeout: seconds for the whole exchange (connect, send, the full response).

    Returns:
        ``(status, headers, body)`` of the response.

    Raises:
        ExchangeTimeout: no complete response within ``timeout`` (a connect timeout included).
        NotConnected: the connection could not be opened (refused, unknown host, no route).
        ssl.SSLError: TLS failed.
        OSError, http.client.HTTPException: the server dropped the connection mid-exchange.
    """
    deadline = time.monotonic() + timeout
    conn_type = http.client.HTTPSConnection if target.https else http.client.HTTPConnection
    conn = conn_type(target.host, target.port, timeout=timeout)
    try:
        try:
            conn.connect()
        except (ssl.SSLError, TimeoutError):
            raise  # TLS: fatal; a connect timeout: like any timeout
        except OSError as exc:  # refused, name not resolved, no route to the host
            raise NotConnected(exc) from None
        _tighten(conn, deadline)
        conn.request(method, path, body=payload or None, headers=headers)
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
        raise ExchangeTimeout() from None
    finally:
        conn.close()


def _tighten(conn: http.client.HTTPConnection, deadline: float) -> None:
    """Shrink the socket timeout to what is left before ``deadline`` (or time out now)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    if conn.sock is not None:
        conn.sock.settimeout(left)


def retry_after_seconds(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds; None for absent or a date."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None
