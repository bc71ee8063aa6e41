"""The HTTP clients: JSON-RPC over HTTP POST (``rpcwire.http``'s apps, or any server of the same convention).

Both speak HTTP/1.1 themselves: one response reader without I/O (:class:`_ResponseReader`: bytes in; the
status, the headers and the body's bytes out) and one reader of what a body says (:class:`_Reply`: the
answers, the notifications of an event stream), under the sync client's blocking sockets and the async
client's asyncio streams alike. Each client keeps a bounded pool of keep-alive connections
(``max_connections``, 16 by default). Each call is one POST; a call with ``on_progress`` also accepts
``text/event-stream`` and reads the events as they arrive. Requests are encoded and answers classified by
the same core as the stream clients (``_encode_request``, ``_parse_incoming``).

The rules both follow (docs/semantics.md, "The HTTP clients"):

- **A timeout is a deadline** for the whole call: waiting for a free connection, connecting, writing, the
  status and headers, the whole body or event stream. Every blocking step waits at most what is left of
  it. On expiry the connection is closed (the server sees the client go; an rpcwire app stops sending)
  and ``CallTimeout`` (a ``TimeoutError``) is raised.
- **A POST is never sent twice**: a kept-alive connection is reused only when nothing is to be read on it
  (the server has not closed it, reset it or written to it while it was idle); once any byte of a
  request is written, a connection that fails raises ``ConnectionFailed`` (a ``ConnectionError``: the server
  may have run the request) rather than send it again. The sync client sends a request again only when its very first
  write failed outright on a reused connection (nothing of it reached the server).
- **An event stream is read up to the answer**: once the events carried the answer to every call of the
  POST, the call returns and the connection is closed (a stream not read to its end cannot serve another
  request; draining it could take forever).
- **An error with ``id: null``** in the answer to a POST can only be the server's refusal of that POST:
  every call of it left without an answer of its own fails with that error.
- **An answer is read no further than ``max_message_bytes``** (the stream clients' limit and default): a
  body, or an event's data, or a line of an event stream, that passes it fails the call with
  ``ConnectionFailed`` as its bytes arrive (a ``Content-Length`` over it, at the head), and the connection is
  closed unread. The limit is per message: an event stream's events together may be longer.

- **TLS and proxies** as requests and httpx: ``verify=`` checks the certificate and the URL's name (sent as
  SNI) against the system's trust store, a CA bundle or a caller's ``ssl.SSLContext``; the environment's
  proxy for the URL's scheme (``NO_PROXY`` aside) carries each POST in absolute form (http://) or a
  ``CONNECT`` tunnel (https://). A proxy that is not http:// fails when the client is made, naming its
  variable.

A status other than 200/202/204 raises :class:`HttpError`. All three are ``TransportError`` subclasses.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import select
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable
from types import TracebackType
from typing import Any

from rpcwire._http_client_tls import Verify, _find_proxy, _tls_context, _tunnel_refused, _untrusted
from rpcwire._http_client_wire import (
    _EVENTS,
    HttpError,
    _Answers,
    _Exchange,
    _Reply,
    _ResponseReader,
    _sent_but_unanswered,
)
from rpcwire._peer import ProgressCallback, _batch_outcome, _outcome, _outgoing_traceparent, _Peer
from rpcwire._types import (
    DEFAULT_MAX_MESSAGE_BYTES,
    CallTimeout,
    ConnectionFailed,
    Request,
    Response,
)

__all__ = ["AsyncHttpClient", "HttpClient", "HttpError"]

logger: logging.Logger = logging.getLogger("rpcwire.client")
_JSON = "application/json"
DEFAULT_MAX_CONNECTIONS = 16
_READ = 65536  # bytes asked of each read
_CLOSE_GRACE = 5.0  # how long AsyncHttpClient.close waits for each idle connection's close (TLS: close_notify)


def _remaining(deadline: float | None) -> float | None:
    """What is left until ``deadline`` (``None``: no deadline); ``TimeoutError`` once it has passed."""
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the deadline passed")
    return left


# --- the two clients -------------------------------------------------------------------------------------


def _results(ids: list[int], answers: _Answers, batch: bool) -> Any:
    """Each call's outcome: its own answer, else the POST's error with ``id: null``, else ``ConnectionError``."""
    refusal = answers.get(None)
    outcomes: list[Any] = []
    for id_ in ids:
        answer = answers.get(id_, refusal)
        if answer is None:
            missing = ConnectionFailed(f"the server's answer holds no answer to id {id_}")
            if not batch:
                raise missing
            outcomes.append(missing)
        elif not batch:
            return _outcome(answer)
        else:
            outcomes.append(_batch_outcome(answer))
    return outcomes


def _check_header(name: str, value: str) -> None:
    if not name or any(c in name for c in ":\r\n \t") or "\r" in value or "\n" in value:
        raise ValueError(f"an invalid HTTP header: {name!r}: {value!r}")


class _HttpPeer(_Peer):
    """What both HTTP clients share: the URL, the request's bytes, and reading an answer."""

    def __init__(
        self,
        url: str,
        headers: dict[str, str] | None,
        timeout: float | None,
        dialect: str,
        *,
        max_connections: int,
        max_message_bytes: int,
        verify: Verify,
        proxy: str | None,
        trust_env: bool,
        session: Any,
    ) -> None:
        super().__init__(None, dialect, timeout)
        # checked by the core's own StdioTransport, so with the stream clients' very errors
        limits = self._core.StdioTransport(io.BytesIO(), io.BytesIO(), max_message_bytes=max_message_bytes)._limits
        self._set_limits(limits)
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"an http:// or https:// URL, not {url!r}")
        if type(max_connections) is not int or max_connections < 1:
            raise ValueError(f"max_connections must be a positive int, not {max_connections!r}")
        self._url = url
        self._https = parts.scheme == "https"
        host = parts.hostname or "127.0.0.1"
        self._host = host if host.isascii() else host.encode("idna").decode("ascii")
        self._port = parts.port or (443 if self._https else 80)
        # RFC 9110 §7.2: an IPv6 literal in brackets; the scheme's default port left out
        authority = f"[{self._host}]" if ":" in self._host else self._host
        self._authority = authority if self._port == (443 if self._https else 80) else f"{authority}:{self._port}"
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._headers = dict(headers or {})
        for name, value in self._headers.items():
            _check_header(name, value)
        self._max_connections = max_connections
        if session is not None and (verify is not True or proxy is not None):
            raise ValueError("session= brings its own TLS and proxies: set verify= and proxy= on it")
        # a CA path that cannot be read, or a proxy that cannot be used, fails here rather than at the first call
        self._tls = _tls_context(verify) if self._https and session is None else None
        self._proxy = (
            None if session is not None else _find_proxy(parts.scheme, self._host, self._port, proxy, trust_env)
        )
        # http:// through a proxy: the request in absolute form to the proxy; https://: a CONNECT tunnel
        self._tunnel = self._proxy is not None and self._https
        self._target = f"{parts.scheme}://{self._authority}{self._path}" if self._proxy and not self._https else None

    def _connect_bytes(self) -> bytes:
        """The CONNECT request that opens a tunnel through the proxy to the URL's host and port."""
        assert self._proxy is not None
        authority = f"[{self._host}]:{self._port}" if ":" in self._host else f"{self._host}:{self._port}"
        lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
        if self._proxy.authorization:
            lines.append(f"Proxy-Authorization: {self._proxy.authorization}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _tunnel_head(self, reader: _ResponseReader, data: bytes) -> bool:
        """Feed the proxy's answer to CONNECT; true once the tunnel is open, ``ConnectionError`` if refused."""
        if not data:
            raise ConnectionFailed(f"the proxy {self._proxy.shown} closed the connection instead of a tunnel")  # type: ignore[union-attr]
        extra = reader.feed(data)
        if not reader.head:
            return False
        if not 200 <= reader.status < 300 or extra:
            raise _tunnel_refused(self._proxy, f"{self._host}:{self._port}", reader)  # type: ignore[arg-type]
        return True

    def _request_headers(self, body: bytes, events: bool) -> dict[str, str]:
        headers = {"Content-Type": _JSON, "Accept": f"{_JSON}, {_EVENTS}" if events else _JSON}
        traceparent = _outgoing_traceparent()
        if traceparent is not None:
            headers["traceparent"] = traceparent
        headers.update(self._headers)
        headers["Content-Length"] = str(len(body))
        return headers

    def _request_bytes(self, body: bytes, events: bool) -> bytes:
        """The whole POST: its head (a caller's header replaces the one of the same name, case ignored) and body."""
        fields = {"host": f"Host: {self._authority}"}
        if self._target is not None and self._proxy is not None and self._proxy.authorization:
            fields["proxy-authorization"] = f"Proxy-Authorization: {self._proxy.authorization}"
        for name, value in self._request_headers(body, events).items():
            fields[name.lower()] = f"{name}: {value}"
        head = "\r\n".join([f"POST {self._target or self._path} HTTP/1.1", *fields.values()]) + "\r\n\r\n"
        return head.encode("latin-1") + body

    def _answers(self, body: bytes) -> tuple[_Answers, bool]:
        """The answers in a body (one, or a batch's) by id, and whether the body is the server's refusal of
        the whole POST (one error with ``id: null``, not in an array); anything else is delivered or logged."""
        answers: _Answers = {}
        message = self._core._parse_incoming(body)
        for entry in message if isinstance(message, list) else [message]:
            if isinstance(entry, Response) and (type(entry.id) is int or (entry.id is None and entry.error)):
                if entry.id is None and None in answers:
                    logger.warning("dropped another error with id null from the server: %s", entry.error)
                    continue
                answers[entry.id] = entry  # None: the server's error to the body (-32700, -32600) or to an entry
            elif isinstance(entry, Request):
                self._deliver(entry)
            else:
                logger.warning("dropped a message from the server: %s", entry if isinstance(entry, str) else entry.id)
        refused = isinstance(message, Response) and message.id is None and message.error is not None
        return answers, refused

    def _resolve(self, waiter: Any, response: Any) -> None:  # HTTP answers come back in their own response
        raise NotImplementedError

    def _serve_request(self, request: Request) -> None:
        logger.warning("dropped a request from the server over HTTP (%r): not supported", request.method)

    def _timed_out(self, timeout: float | None) -> CallTimeout:
        return CallTimeout(f"no answer from {self._url} within {timeout} s")


def _has_input(sock: socket.socket) -> bool:
    """Something to read on ``sock`` right now (bytes, the peer's close or reset), or it cannot be polled."""
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return True
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(sock, select.POLLIN | select.POLLPRI)
            return bool(poller.poll(0))
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class _NothingWritten(Exception):
    """The first write of a request failed outright: no byte of it reached the server."""


class _Connection:
    """One keep-alive connection of :class:`HttpClient` (a blocking socket, TLS or not)."""

    def __init__(self, sock: socket.socket, generation: int) -> None:
        self.sock = sock
        self.generation = generation  # the pool's generation it was opened in (close() starts a new one)
        self.reused = False

    def send(self, data: bytes, deadline: float | None) -> None:
        view = memoryview(data)
        written = False
        while view:
            self.sock.settimeout(_remaining(deadline))
            try:
                sent = self.sock.send(view)
            except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError) as exc:
                if written:
                    raise _sent_but_unanswered(f"writing the request failed ({exc})") from None
                raise _NothingWritten from exc
            written = True
            view = view[sent:]

    def recv(self, deadline: float | None) -> bytes:
        self.sock.settimeout(_remaining(deadline))
        try:
            return self.sock.recv(_READ)
        except ConnectionError as exc:
            raise _sent_but_unanswered(f"reading the answer failed ({exc})") from None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class _Pool:
    """At most ``size`` connections, idle or in use; a caller waits for one within its deadline. An idle
    connection is handed out only if nothing is to be read on it (else it is closed and another taken)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._changed = threading.Condition()
        self._idle: list[_Connection] = []  # the last one returned is reused first
        self._open = 0  # connections idle, in use, or being opened
        self._generation = 0

    def take(self, deadline: float | None) -> _Connection | int:
        """An idle connection, or the generation to open a new one in (a place is then reserved for it)."""
        with self._changed:
            while True:
                while self._idle:
                    connection = self._idle.pop()
                    if not _has_input(connection.sock):
                        connection.reused = True
                        return connection
                    connection.close()  # the server closed it while idle (or wrote what no request asked)
                    self._open -= 1
                if self._open < self._size:
                    self._open += 1
                    return self._generation
                if not self._changed.wait(_remaining(deadline)):
                    raise TimeoutError("no free connection")

    def put(self, connection: _Connection | None, keep: bool) -> None:
        """Give back a connection taken (kept for reuse when ``keep``) or a reserved place never used (None)."""
        with self._changed:
            if connection is not None and keep and connection.generation == self._generation:
                self._idle.append(connection)
            else:
                if connection is not None:
                    connection.close()
                self._open -= 1
            self._changed.notify()

    def close(self) -> None:
        """Close the idle connections; those in use close when they are given back."""
        with self._changed:
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._generation += 1
            self._changed.notify_all()
        for connection in idle:
            connection.close()


class HttpClient(_HttpPeer):
    """A JSON-RPC client over HTTP: ``HttpClient("http://127.0.0.1:8000/rpc")``; ``call``, ``notify`` and
    ``batch`` as :class:`rpcwire.Client`'s. Thread-safe: up to ``max_connections`` keep-alive connections
    serve the calls in flight (a caller waits for a free one within its timeout). ``timeout`` bounds each
    whole call. ``max_message_bytes`` (64 MiB, as the stream clients') bounds each answer read: one longer (a
    body, or one event of a stream) fails its call with ``ConnectionFailed`` (a ``ConnectionError``) as it
    arrives, its connection closed unread. ``headers``: sent with every POST (``Authorization``...). ``verify``
    (https://): ``True`` (the system's trust store), a CA bundle's path, an ``ssl.SSLContext``, or ``False`` (no
    check).
    ``proxy``: an ``http://`` proxy URL; else, with ``trust_env`` (the default), the environment's
    ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` and ``NO_PROXY`` as requests and httpx read them (https://
    through a ``CONNECT`` tunnel). ``session``: a caller's own ``httpx.Client`` to post with instead (its
    pool, proxies, TLS and auth)."""

    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        dialect: str = "mcp",
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        verify: Verify = True,
        proxy: str | None = None,
        trust_env: bool = True,
        session: Any = None,
    ) -> None:
        super().__init__(
            url,
            headers,
            timeout,
            dialect,
            max_connections=max_connections,
            max_message_bytes=max_message_bytes,
            verify=verify,
            proxy=proxy,
            trust_env=trust_env,
            session=session,
        )
        self._session = session
        self._pool = _Pool(max_connections)

    def call(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        """Call ``method`` and return its result (errors raised as :meth:`rpcwire.Client.call` raises them)."""
        id_, body = self._request_line(method, params, on_progress)
        try:
            return _results([id_], self._post(body, [id_], timeout, events=on_progress is not None), batch=False)
        finally:
            self._progress.pop(id_, None)

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (the server answers 202 or 204, no body)."""
        self._post(self._core._encode_request(method, params), [], None, events=False)

    def batch(self, calls: Iterable[tuple[str, Any]], *, timeout: float | None = None) -> list[Any]:
        """Send ``(method, params)`` calls as one batch; their results, or the exception each raised, in order."""
        ids, body = self._batch_lines(calls)
        if not ids:
            return []
        result: list[Any] = _results(ids, self._post(body, ids, timeout, events=False), batch=True)
        return result

    def _post(self, body: bytes, ids: list[int], timeout: float | None, events: bool) -> _Answers:
        timeout = self._timeout if timeout is None else timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            if self._session is not None:
                return self._post_with_session(body, ids, events, deadline)
            return self._exchange(self._request_bytes(body, events), ids, deadline)
        except TimeoutError:
            raise self._timed_out(timeout) from None

    def _exchange(self, request: bytes, ids: list[int], deadline: float | None) -> _Answers:
        for _ in range(self._max_connections + 1):  # each stale connection found is closed: bounded
            connection: _Connection | None = None
            keep = False
            taken = self._pool.take(deadline)  # a place reserved: given back in the finally below
            try:
                connection = _Connection(self._connect(deadline), taken) if isinstance(taken, int) else taken
                try:
                    connection.send(request, deadline)
                except _NothingWritten:
                    if connection.reused:  # it failed between its check and the write: nothing reached the server
                        continue
                    raise
                exchange = _Exchange(self, ids)
                while not exchange.feed(connection.recv(deadline)):
                    pass
                keep = exchange.reusable
                return exchange.answers()
            except _NothingWritten as exc:
                raise exc.__cause__ or ConnectionFailed("writing the request failed") from None
            finally:
                self._pool.put(connection, keep)
        raise ConnectionFailed(f"no usable connection to {self._url}")

    def _connect(self, deadline: float | None) -> socket.socket:
        """A new connection (to the proxy, through its tunnel for https://; TLS for https://), each step within
        the deadline."""
        host, port = (self._proxy.host, self._proxy.port) if self._proxy else (self._host, self._port)
        error: OSError | None = None
        for family, kind, proto, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
            sock = socket.socket(family, kind, proto)
            try:
                sock.settimeout(_remaining(deadline))
                sock.connect(address)
            except TimeoutError:
                sock.close()
                raise
            except OSError as exc:
                sock.close()
                error = exc
                continue
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # one write per request: no Nagle wait
                if self._tunnel:
                    self._open_tunnel(sock, deadline)
                if self._tls is not None:
                    sock.settimeout(_remaining(deadline))
                    try:
                        sock = self._tls.wrap_socket(sock, server_hostname=self._host)
                    except ssl.SSLCertVerificationError as exc:
                        raise _untrusted(exc, self._host) from None
            except BaseException:
                sock.close()
                raise
            return sock
        raise error or OSError(f"no address for {host!r}")

    def _open_tunnel(self, sock: socket.socket, deadline: float | None) -> None:
        """CONNECT through the proxy on ``sock``; returns once the proxy answered 2xx."""
        sock.settimeout(_remaining(deadline))
        sock.sendall(self._connect_bytes())
        reader = _ResponseReader()
        while True:
            sock.settimeout(_remaining(deadline))
            if self._tunnel_head(reader, sock.recv(_READ)):
                return

    def _post_with_session(self, body: bytes, ids: list[int], events: bool, deadline: float | None) -> _Answers:
        """The same exchange through the caller's ``httpx.Client``: each of its reads waits at most what was
        left of the deadline when the POST began, and the deadline is checked as each piece arrives."""
        headers = self._request_headers(body, events)
        try:
            with self._session.stream(
                "POST", self._url, content=body, headers=headers, timeout=_remaining(deadline)
            ) as response:
                reply = _Reply(self, ids, response.status_code, response.reason_phrase, dict(response.headers))
                for chunk in response.iter_bytes():
                    _remaining(deadline)
                    reply.body(chunk)
                    if reply.answered:
                        break  # leaving the stream unread closes its connection
                return reply.answers()
        except Exception as exc:
            if type(exc).__name__.endswith("Timeout") and type(exc).__module__.startswith("httpx"):
                raise TimeoutError from None
            raise

    def close(self) -> None:
        """Close every connection (those in use as their calls end)."""
        self._pool.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


async def _read(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.read(_READ)
    except ConnectionError as exc:
        raise _sent_but_unanswered(f"reading the answer failed ({exc})") from None


class _AsyncConnection:
    """One keep-alive HTTP/1.1 connection of :class:`AsyncHttpClient`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, generation: int) -> None:
        self.reader = reader
        self.writer = writer
        self.generation = generation

    def quiet(self) -> bool:
        """Nothing to read on it: the server has not closed it, reset it or written to it while it was idle."""
        if self.reader.at_eof() or self.reader.exception() is not None or self.writer.is_closing():
            return False
        # asyncio reads an idle socket as bytes arrive: what the server wrote unasked waits in the reader's
        # buffer, not on the socket (the StreamReader has no public way to ask).
        if self.reader._buffer:  # type: ignore[attr-defined]
            return False
        sock = self.writer.get_extra_info("socket")
        return sock is not None and not _has_input(sock)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()

    async def closed(self, grace: float) -> None:
        """Close it and wait for the close (over TLS, the exchange of close_notify), at most ``grace`` seconds:
        then it is cut (a transport left closing when its loop ends is a leak)."""
        self.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), grace)
        except (Exception, asyncio.TimeoutError):
            self.writer.transport.abort()


class AsyncHttpClient(_HttpPeer):
    """The asyncio HTTP client: ``AsyncHttpClient(url)``; ``call``, ``notify`` and ``batch`` awaited. Up to
    ``max_connections`` keep-alive connections serve the calls in flight; ``max_message_bytes``, ``headers``,
    ``verify``, ``proxy`` and ``trust_env`` as :class:`HttpClient`'s. ``session``: a caller's own
    ``httpx.AsyncClient`` to post with instead."""

    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        dialect: str = "mcp",
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        verify: Verify = True,
        proxy: str | None = None,
        trust_env: bool = True,
        session: Any = None,
    ) -> None:
        super().__init__(
            url,
            headers,
            timeout,
            dialect,
            max_connections=max_connections,
            max_message_bytes=max_message_bytes,
            verify=verify,
            proxy=proxy,
            trust_env=trust_env,
            session=session,
        )
        self._session = session
        self._idle: list[_AsyncConnection] = []
        self._slots = asyncio.Semaphore(max_connections)
        self._generation = 0

    async def call(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        """As :meth:`HttpClient.call`, awaited."""
        id_, body = self._request_line(method, params, on_progress)
        try:
            answers = await self._post(body, [id_], timeout, events=on_progress is not None)
            return _results([id_], answers, batch=False)
        finally:
            self._progress.pop(id_, None)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification."""
        await self._post(self._core._encode_request(method, params), [], None, events=False)

    async def batch(self, calls: Iterable[tuple[str, Any]], *, timeout: float | None = None) -> list[Any]:
        """As :meth:`HttpClient.batch`, awaited."""
        ids, body = self._batch_lines(calls)
        if not ids:
            return []
        result: list[Any] = _results(ids, await self._post(body, ids, timeout, events=False), batch=True)
        return result

    async def _post(self, body: bytes, ids: list[int], timeout: float | None, events: bool) -> _Answers:
        timeout = self._timeout if timeout is None else timeout
        try:
            return await asyncio.wait_for(self._exchange(body, ids, events), timeout)  # the whole call
        except asyncio.TimeoutError:
            raise self._timed_out(timeout) from None

    async def _exchange(self, body: bytes, ids: list[int], events: bool) -> _Answers:
        if self._session is not None:
            return await self._exchange_with_session(body, ids, self._request_headers(body, events))
        request = self._request_bytes(body, events)
        async with self._slots:
            connection = await self._connection()
            keep = False
            try:
                # Written once: a connection that fails from here on raises (the server may have run the request).
                connection.writer.write(request)
                try:
                    await connection.writer.drain()
                except ConnectionError as exc:
                    raise _sent_but_unanswered(f"writing the request failed ({exc})") from None
                exchange = _Exchange(self, ids)
                while not exchange.feed(await _read(connection.reader)):
                    pass
                keep = exchange.reusable
                return exchange.answers()
            finally:  # a timeout (cancellation) included: a connection mid-exchange is closed
                if keep and connection.generation == self._generation:
                    self._idle.append(connection)
                else:
                    connection.close()

    async def _connection(self) -> _AsyncConnection:
        """An idle connection with nothing to read on it (the others are closed), or a new one."""
        while self._idle:
            connection = self._idle.pop()
            if connection.quiet():
                return connection
            connection.close()
        generation = self._generation
        tls = self._tls
        try:
            if self._tunnel:
                reader, writer = await asyncio.open_connection(
                    sock=await self._open_tunnel(), ssl=tls, server_hostname=self._host
                )
            elif self._proxy is not None:
                reader, writer = await asyncio.open_connection(self._proxy.host, self._proxy.port)
            else:
                host = self._host if tls is not None else None
                reader, writer = await asyncio.open_connection(self._host, self._port, ssl=tls, server_hostname=host)
        except ssl.SSLCertVerificationError as exc:
            raise _untrusted(exc, self._host) from None
        with contextlib.suppress(OSError):
            writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _AsyncConnection(reader, writer, generation)

    async def _open_tunnel(self) -> socket.socket:
        """A socket to the proxy through which CONNECT opened a tunnel (a plain socket, so that asyncio starts
        TLS on it the same way on every Python version; ``_post`` bounds it in time)."""
        assert self._proxy is not None
        loop = asyncio.get_running_loop()
        error: OSError | None = None
        for family, kind, proto, _, address in await loop.getaddrinfo(
            self._proxy.host, self._proxy.port, type=socket.SOCK_STREAM
        ):
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            try:
                await loop.sock_connect(sock, address)
            except OSError as exc:
                sock.close()
                error = exc
                continue
            except BaseException:
                sock.close()
                raise
            try:
                await loop.sock_sendall(sock, self._connect_bytes())
                reader = _ResponseReader()
                while not self._tunnel_head(reader, await loop.sock_recv(sock, _READ)):
                    pass
            except BaseException:
                sock.close()
                raise
            return sock
        raise error or OSError(f"no address for {self._proxy.host!r}")

    async def _exchange_with_session(self, body: bytes, ids: list[int], headers: dict[str, str]) -> _Answers:
        """The same exchange through the caller's ``httpx.AsyncClient`` (``_post`` bounds it in time)."""
        async with self._session.stream("POST", self._url, content=body, headers=headers, timeout=None) as response:
            reply = _Reply(self, ids, response.status_code, response.reason_phrase, dict(response.headers))
            # Closed here, on the loop: left to the garbage collector, the stream's generators would be
            # closed when the loop may be gone ("coroutine 'aclose' was never awaited" on 3.13).
            async with contextlib.aclosing(response.aiter_bytes()) as chunks:
                async for chunk in chunks:
                    reply.body(chunk)
                    if reply.answered:
                        break  # leaving the stream unread closes its connection
            return reply.answers()

    async def close(self) -> None:
        """Close every connection (those in use as their calls end)."""
        self._generation += 1
        idle, self._idle = self._idle, []
        await asyncio.gather(*(connection.closed(_CLOSE_GRACE) for connection in idle))

    async def __aenter__(self) -> AsyncHttpClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.close()
