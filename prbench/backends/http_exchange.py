"""prbench's HTTP transport: one pooled httpx client per server, one exchange under a deadline.

The transport is **httpx** (pinned exactly in pyproject), which gives what the hand-written
``http.client`` code it replaced did not:

* **connection pooling** -- an :class:`HttpSession` keeps its connections open between requests
  (keep-alive), so a run's requests to one server share a few connections instead of opening a
  TCP (and TLS) connection each; :meth:`HttpSession.close` closes them at the end of the run;
* **proxies from the environment** -- ``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY`` and
  ``NO_PROXY`` (either case), read as httpx reads them (its ``get_environment_proxies``). A
  loopback server (``127.0.0.0/8``, ``localhost``, ``::1``) is always reached directly, whatever
  the variables hold: a proxy cannot reach this machine's loopback on a client's behalf, and a
  local vLLM/SGLang server or ``prbench serve`` is the common case. A variable that is no proxy
  URL (``HTTP_PROXY=::garbage::``, an unknown scheme, no host) is one error naming it
  (:class:`ProxySettingError`) when a request to another host would go through it; it does not
  stop a loopback server from being reached;
* **a CA bundle** -- certificates are checked against the file named by ``SSL_CERT_FILE``, else
  ``REQUESTS_CA_BUNDLE`` (and the folder ``SSL_CERT_DIR``), else the system's store (as before);
  :func:`ssl_context`;
* **HTTP/2** when the optional ``h2`` package is installed (negotiated over TLS; HTTP/1.1
  otherwise). Requests then share one connection, so a deadline passed or a call abandoned
  ends that connection for every request on it; the others are retried as dropped connections.

What stays prbench's, on top of httpx:

* :meth:`HttpSession.exchange` has a **deadline for the whole exchange** (connect, send, the
  full response), not only for each socket read as httpx's timeouts are: every read and write
  of the connection is given what is left of the deadline;
* it tells a connection that could not be opened (:class:`NotConnected`: nothing was sent, e.g.
  refused, unknown host, a proxy that refused the tunnel) from a TLS failure (the
  :class:`ssl.SSLError` is raised), from one dropped mid-way (:class:`Dropped`) and from a
  deadline passed (:class:`ExchangeTimeout`): the retry policy built on it
  (:class:`prbench.backends.http.OpenAIBackend`) treats each differently;
* :class:`InFlight` **abandons a batch**: the sockets of its exchanges are shut down, which wakes
  a thread blocked reading one at once (closing a socket would not).

The last two need the sockets themselves, which httpx does not hand out: the connection pool of
each transport gets a network backend (:class:`_Backend`, httpcore's documented extension point)
that wraps every connection it opens. httpx's ``HTTPTransport`` takes no network backend, so
:func:`_with_deadline` sets it on the pool of each transport prbench builds -- the direct one
and each proxy's (``transport._pool._network_backend``). The transports are built here, not by
the client from the environment (``trust_env=False``), so that a proxy variable is checked and
named, and a loopback host never routed through a proxy (:class:`_Routed`); the proxy settings
are read by httpx's own ``httpx._utils.get_environment_proxies``. Those two are the only
httpx/httpcore internals prbench touches (both are pinned exactly);
``tests/test_http_transport.py`` fails if they move.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import ipaddress
import os
import socket
import ssl
import threading
import time
from typing import Any

import httpcore
import httpx

from prbench.errors import PrbenchUserError


class ExchangeTimeout(Exception):
    """No complete response within the deadline."""


class Abandoned(Exception):
    """The caller stopped waiting for this exchange (its call timed out or was interrupted)."""


class NotConnected(Exception):
    """The connection could not be opened (refused, unknown host, no route): nothing was sent.

    Attributes:
        error: the underlying error (an :class:`OSError`, or httpx's error for a proxy that
            refused the tunnel).
    """

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class Dropped(Exception):
    """The server accepted the connection, then dropped it before a complete reply.

    Attributes:
        error: the underlying error (the :class:`OSError` where there is one, such as a reset).
    """

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


#: Environment variables naming a CA bundle file, in the order they are read.
CA_FILE_ENVS = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
#: Environment variable naming a folder of CA certificates (OpenSSL's hashed layout).
CA_DIR_ENV = "SSL_CERT_DIR"
#: The schemes a proxy URL may have (``socks5``/``socks5h`` need the optional ``socksio``).
PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")


class CABundleError(PrbenchUserError, ValueError):
    """A CA bundle named in the environment cannot be read."""


class ProxySettingError(PrbenchUserError, ValueError):
    """A proxy variable of the environment holds no proxy URL a request could go through."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine's loopback (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    name = host.strip().strip("[]").rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _proxy_variable(scheme: str) -> str:
    """The variable the proxy of ``scheme`` (``http``, ``https``, ``all``) was read from.

    Python's reading (which httpx uses) prefers the lower-case name, then any other case.
    """
    lower = f"{scheme}_proxy"
    if os.environ.get(lower):
        return lower
    return next((n for n, v in os.environ.items() if n.lower() == lower and v), lower.upper())


def _proxy_error(variable: str, value: str, why: str) -> ProxySettingError:
    """The error for a proxy variable that holds no usable proxy URL (credentials not shown)."""
    shown = f" ({why})" if why and "@" not in value else ""
    return ProxySettingError(
        f"${variable} is not a proxy URL prbench can use{shown}; set it to "
        f"http://HOST:PORT (or {'/'.join(PROXY_SCHEMES[2:])}://HOST:PORT with the socksio "
        f"package), or unset it; a server on this machine (localhost, 127.0.0.1, ::1) is "
        f"reached directly whatever it holds, and NO_PROXY names other hosts to reach directly"
    )


def ssl_context() -> ssl.SSLContext:
    """The TLS settings of every connection: certificates checked against the CA bundle.

    The bundle is the file named by ``SSL_CERT_FILE``, else by ``REQUESTS_CA_BUNDLE`` (the
    variable requests and pip read), plus the folder ``SSL_CERT_DIR``; with none of them set,
    the system's store (:func:`ssl.create_default_context`).

    Raises:
        CABundleError: a variable names a file or folder that cannot be read as certificates.
    """
    cafile = next((os.environ[e] for e in CA_FILE_ENVS if os.environ.get(e, "").strip()), None)
    capath = os.environ.get(CA_DIR_ENV, "").strip() or None
    if cafile is None and capath is None:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cafile=cafile, capath=capath)
    except (OSError, ssl.SSLError) as exc:
        names = "/".join(e for e in (*CA_FILE_ENVS, CA_DIR_ENV) if os.environ.get(e, "").strip())
        raise CABundleError(
            f"the CA bundle named by ${names} cannot be read ({type(exc).__name__}: {exc}); "
            "point it at a PEM file of CA certificates, or unset it to use the system's store"
        ) from None


def http2_available() -> bool:
    """Whether the optional ``h2`` package is installed (then HTTP/2 is offered over TLS)."""
    return importlib.util.find_spec("h2") is not None


class InFlight:
    """The connections of one batch of exchanges, so that the batch can be abandoned at once.

    A caller that stops waiting (a scorer call past its ``call_timeout``, a Ctrl-C) calls
    :meth:`abandon`: the socket of every connection an exchange of the batch is using is shut
    down, which wakes a thread blocked reading it at once (instead of when the server answers),
    and no exchange of the batch starts after that (:class:`Abandoned`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[_Stream] = set()
        self._stop = threading.Event()

    @property
    def abandoned(self) -> bool:
        """Whether :meth:`abandon` was called."""
        return self._stop.is_set()

    def add(self, stream: _Stream) -> None:
        """Track ``stream`` until :meth:`discard`.

        Raises:
            Abandoned: the batch was abandoned: nothing more is sent.
        """
        with self._lock:
            if self._stop.is_set():
                raise Abandoned()
            self._open.add(stream)

    def discard(self, stream: _Stream) -> None:
        """Stop tracking ``stream`` (its exchange is over)."""
        with self._lock:
            self._open.discard(stream)

    def pause(self, seconds: float) -> None:
        """Wait ``seconds`` (a retry's backoff), or less if the batch is abandoned meanwhile.

        Raises:
            Abandoned: the batch was abandoned.
        """
        if self._stop.wait(seconds):
            raise Abandoned()

    def abandon(self) -> int:
        """Stop the batch: shut down every connection in use; returns how many there were."""
        with self._lock:
            self._stop.set()
            streams = list(self._open)
        for stream in streams:
            stream.shut_down()
        return len(streams)


@dataclasses.dataclass
class _Exchange:
    """The exchange the current thread is making: its deadline, its batch, the streams used."""

    deadline: float
    flight: InFlight | None
    streams: set[_Stream] = dataclasses.field(default_factory=set)

    def left(self, timeout: float | None, error: type[Exception]) -> float:
        """What is left of the deadline (at most ``timeout``); ``error`` when nothing is."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise error("the exchange's deadline passed")
        return left if timeout is None else min(timeout, left)

    def use(self, stream: _Stream) -> None:
        """Note that this exchange uses ``stream`` (tracked by its batch until it ends)."""
        if stream not in self.streams:
            if self.flight is not None:
                self.flight.add(stream)
            self.streams.add(stream)


_CURRENT = threading.local()


def _current() -> _Exchange | None:
    return getattr(_CURRENT, "exchange", None)


class _Stream(httpcore.NetworkStream):
    """A connection of the pool: each read and write gets what is left of the deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def _bound(self, timeout: float | None, error: type[Exception]) -> float | None:
        now = _current()
        if now is None:
            return timeout
        now.use(self)
        return now.left(timeout, error)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._bound(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._bound(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> _Stream:
        bound = self._bound(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, bound))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)

    def shut_down(self) -> None:
        """Shut the socket down both ways (wakes a thread blocked on it; the server sees EOF)."""
        sock = self._inner.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed by its own thread
                sock.shutdown(socket.SHUT_RDWR)


class _Backend(httpcore.NetworkBackend):
    """httpcore's network backend, opening connections within the exchange's deadline."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        now = _current()
        if now is not None:
            timeout = now.left(timeout, httpcore.ConnectTimeout)
        stream = _Stream(self._inner.connect_tcp(host, port, timeout, local_address,
                                                 socket_options))
        if now is not None:
            now.use(stream)
        return stream

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _with_deadline(transport: httpx.HTTPTransport) -> httpx.HTTPTransport:
    """``transport`` with its connection pool opening connections through :class:`_Backend`."""
    pool = transport._pool
    pool._network_backend = _Backend(pool._network_backend)
    return transport


class _Refused(httpx.BaseTransport):
    """Where a proxy variable that holds no proxy URL would send a request: its error."""

    def __init__(self, error: ProxySettingError) -> None:
        self.error = error

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        raise self.error


class _Routed(httpx.BaseTransport):
    """A proxy's mount: a request to a loopback host goes direct, any other through the proxy."""

    def __init__(self, direct: httpx.BaseTransport, proxy: httpx.BaseTransport) -> None:
        self.direct = direct
        self.proxy = proxy

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if is_loopback(request.url.host):
            return self.direct.handle_request(request)
        return self.proxy.handle_request(request)

    def close(self) -> None:
        self.proxy.close()  # the direct transport is the client's own, closed with it


class HttpSession:
    """The connections to one server, kept open between exchanges (closed by :meth:`close`).

    Thread-safe: exchanges may run from several threads at once; at most ``max_connections``
    connections are open (a caller bounding its own concurrency to that never waits for one).

    Args:
        max_connections: the most connections open at once (and kept open between exchanges).

    Raises:
        CABundleError: the CA bundle named in the environment cannot be read.
    """

    def __init__(self, max_connections: int) -> None:
        self.max_connections = max(1, int(max_connections))
        self._context = ssl_context()
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None
        #: the connection pools built so far (the direct one and each proxy's)
        self.pools: list[httpx.HTTPTransport] = []

    def client(self) -> httpx.Client:
        """The httpx client (made at the first exchange, again after :meth:`close`)."""
        with self._lock:
            if self._client is None:
                direct = self._transport()
                self._client = httpx.Client(
                    transport=direct,
                    mounts=self._proxy_mounts(direct),
                    trust_env=False,  # the proxies are read (and checked) by _proxy_mounts
                    follow_redirects=False,
                )
            return self._client

    def _transport(self, proxy: httpx.Proxy | None = None) -> httpx.HTTPTransport:
        """A pool of connections (through ``proxy``, if given), each under the deadline."""
        self.pools.append(_with_deadline(httpx.HTTPTransport(
            verify=self._context,
            http2=http2_available(),
            limits=httpx.Limits(max_connections=self.max_connections,
                                max_keepalive_connections=self.max_connections),
            proxy=proxy,
        )))
        return self.pools[-1]

    def _proxy_mounts(self, direct: httpx.HTTPTransport) -> dict[str, httpx.BaseTransport | None]:
        """The client's mounts: the environment's proxies as httpx reads them, each checked.

        ``NO_PROXY`` hosts map to ``None`` (direct). Each proxy is a :class:`_Routed` mount, so a
        loopback host is reached directly; a variable that holds no proxy URL becomes a
        :class:`_Refused` one, raising :class:`ProxySettingError` only for a request to another
        host.
        """
        from httpx._utils import get_environment_proxies

        mounts: dict[str, httpx.BaseTransport | None] = {}
        for pattern, url in get_environment_proxies().items():
            if url is None:
                mounts[pattern] = None
                continue
            scheme = pattern.partition("://")[0]
            variable = _proxy_variable(scheme)
            value = os.environ.get(variable, url)
            proxy: httpx.BaseTransport
            try:
                parsed = httpx.Proxy(url=url)
                if parsed.url.scheme not in PROXY_SCHEMES:
                    raise ValueError(f"the scheme {parsed.url.scheme!r} is not one of "
                                     f"{', '.join(PROXY_SCHEMES)}")
                if not parsed.url.host:
                    raise ValueError("it names no host")
                proxy = self._transport(parsed)
            except (httpx.InvalidURL, ValueError, TypeError, ImportError) as exc:
                proxy = _Refused(_proxy_error(variable, value, str(exc)))
            mounts[pattern] = _Routed(direct, proxy)
        return mounts

    def close(self) -> None:
        """Close the open connections (the next exchange opens new ones)."""
        with self._lock:
            client, self._client = self._client, None
            self.pools = []
        if client is not None:
            client.close()

    def exchange(
        self, method: str, url: str, payload: bytes, headers: dict[str, str], *,
        timeout: float, in_flight: InFlight | None = None,
    ) -> tuple[int, httpx.Headers, bytes]:
        """One HTTP exchange under a deadline of ``timeout`` seconds for all of it.

        Args:
            method: the HTTP method.
            url: the full URL.
            payload: the request body (``b""``: none).
            headers: the request headers.
            timeout: seconds for the whole exchange (connect, send, the full response).
            in_flight: the batch this exchange belongs to (:meth:`InFlight.abandon` ends it early).

        Returns:
            ``(status, headers, body)`` of the response.

        Raises:
            ExchangeTimeout: no complete response within ``timeout`` (a connect timeout included).
            Abandoned: ``in_flight`` was abandoned before or during the exchange.
            NotConnected: the connection could not be opened (refused, unknown host, no route,
                a proxy that refused the tunnel).
            ProxySettingError: the request would go through a proxy variable of the
                environment that holds no proxy URL (one line naming the variable).
            ssl.SSLError: TLS failed.
            Dropped: the server dropped the connection mid-exchange.
        """
        client = self.client()
        if in_flight is not None and in_flight.abandoned:
            raise Abandoned()
        now = _Exchange(time.monotonic() + timeout, in_flight)
        _CURRENT.exchange = now
        try:
            response = client.request(method, url, content=payload or None, headers=headers,
                                      timeout=timeout)
            if in_flight is not None and in_flight.abandoned:
                raise Abandoned()  # a reply cut short by the shutdown is no reply
            return response.status_code, response.headers, response.content
        except httpx.HTTPError as exc:
            if in_flight is not None and in_flight.abandoned:
                raise Abandoned() from None
            raise _classified(exc) from None
        finally:
            _CURRENT.exchange = None
            if in_flight is not None:
                for stream in now.streams:
                    in_flight.discard(stream)


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from, outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _classified(exc: httpx.HTTPError) -> BaseException:
    """The exception :meth:`HttpSession.exchange` raises for an httpx error."""
    chain = _causes(exc)
    if isinstance(exc, httpx.TimeoutException):
        return ExchangeTimeout()
    tls = next((e for e in chain if isinstance(e, ssl.SSLError)), None)
    if tls is not None:
        return tls
    os_error = next((e for e in chain if isinstance(e, OSError)), None)
    if isinstance(exc, httpx.ConnectError):
        return NotConnected(os_error or exc)
    if isinstance(exc, httpx.ProxyError):
        return NotConnected(exc)
    return Dropped(os_error or exc)


__all__ = [
    "Abandoned",
    "CABundleError",
    "Dropped",
    "ExchangeTimeout",
    "HttpSession",
    "InFlight",
    "NotConnected",
    "ProxySettingError",
    "http2_available",
    "is_loopback",
    "ssl_context",
]
