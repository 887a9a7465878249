"""One HTTP exchange under a deadline, standard library only (``http.client``).

:func:`exchange` sends one request and reads the full response with a deadline for all of it
(connect, send, every read), not only for each socket read; it tells a connection that could not
be opened (:class:`NotConnected`: nothing was sent) from one dropped mid-way (``OSError`` or
``http.client.HTTPException``) and from a deadline passed (:class:`ExchangeTimeout`). The retry
policy built on it is :class:`prbench.backends.http.OpenAIBackend`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import socket
import ssl
import sys
import threading
import time


class ExchangeTimeout(Exception):
    """No complete response within the deadline."""


class Abandoned(Exception):
    """The caller stopped waiting for this exchange (its call timed out or was interrupted)."""


class InFlight:
    """The connections of one batch of exchanges, so that the batch can be abandoned at once.

    A caller that stops waiting (a scorer call past its ``call_timeout``, a Ctrl-C) calls
    :meth:`abandon`: every open connection's socket is shut down, which wakes a thread blocked
    reading it at once (instead of when the server answers), and no exchange of the batch starts
    after that (:class:`Abandoned`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[http.client.HTTPConnection] = set()
        self._stop = threading.Event()

    @property
    def abandoned(self) -> bool:
        """Whether :meth:`abandon` was called."""
        return self._stop.is_set()

    def add(self, conn: http.client.HTTPConnection) -> None:
        """Track ``conn`` until :meth:`discard`.

        Raises:
            Abandoned: the batch was abandoned: nothing more is sent.
        """
        with self._lock:
            if self._stop.is_set():
                raise Abandoned()
            self._open.add(conn)

    def discard(self, conn: http.client.HTTPConnection) -> None:
        """Stop tracking ``conn`` (it is closed)."""
        with self._lock:
            self._open.discard(conn)

    def pause(self, seconds: float) -> None:
        """Wait ``seconds`` (a retry's backoff), or less if the batch is abandoned meanwhile.

        Raises:
            Abandoned: the batch was abandoned.
        """
        if self._stop.wait(seconds):
            raise Abandoned()

    def abandon(self) -> int:
        """Stop the batch: shut down every open connection; returns how many there were."""
        with self._lock:
            self._stop.set()
            conns = list(self._open)
        for conn in conns:
            sock = conn.sock
            if sock is None:
                continue
            with contextlib.suppress(OSError):  # already closed by its own thread
                sock.shutdown(socket.SHUT_RDWR)
        return len(conns)


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
    path: str, timeout: float, in_flight: InFlight | None = None,
) -> tuple[int, http.client.HTTPMessage, bytes]:
    """One HTTP exchange with ``target`` under a deadline of ``timeout`` seconds for all of it.

    Args:
        target: the server.
        payload: the request body (``b""``: none).
        headers: the request headers.
        method: the HTTP method.
        path: the request path on the server.
        timeout: seconds for the whole exchange (connect, send, the full response).
        in_flight: the batch this exchange belongs to (:meth:`InFlight.abandon` ends it early).

    Returns:
        ``(status, headers, body)`` of the response.

    Raises:
        ExchangeTimeout: no complete response within ``timeout`` (a connect timeout included).
        Abandoned: ``in_flight`` was abandoned before or during the exchange.
        NotConnected: the connection could not be opened (refused, unknown host, no route).
        ssl.SSLError: TLS failed.
        OSError, http.client.HTTPException: the server dropped the connection mid-exchange.
    """
    deadline = time.monotonic() + timeout
    conn_type = http.client.HTTPSConnection if target.https else http.client.HTTPConnection
    conn = conn_type(target.host, target.port, timeout=timeout)
    if in_flight is not None:
        in_flight.add(conn)
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
        if in_flight is not None and in_flight.abandoned:
            raise Abandoned()  # a reply cut short by the shutdown is no reply
        return response.status, response.headers, b"".join(chunks)
    except (OSError, http.client.HTTPException, NotConnected):
        if in_flight is not None and in_flight.abandoned:
            raise Abandoned() from None
        if isinstance(sys.exc_info()[1], TimeoutError):
            raise ExchangeTimeout() from None
        raise
    finally:
        if in_flight is not None:
            in_flight.discard(conn)
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
