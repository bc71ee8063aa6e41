"""``--listen``: one TCP socket for every kind of client, each connection served in the framing its first
bytes say (``python -m rpcwire serve MODULE:HANDLER --listen HOST:PORT``; the command line is in
``__main__.py``, the rules in docs/semantics.md, "One socket for every client").

- The sniffer (:func:`framing_of`, peeked at, never read): ``{``, ``[``, whitespace or anything else is
  newline-delimited JSON-RPC; a ``Content-Length:`` or ``Content-Type:`` header is LSP's frames; an HTTP method
  is HTTP/1.1.
- A stream connection is served as by ``rpcwire.serve(handler, StdioTransport(socket streams, framing=...),
  max_concurrency=N)``, its input ending after ``idle_timeout`` with nothing in flight (what the engine's serving
  session says: :class:`_IdleReader`).
- An HTTP connection is HTTP/1.1 with keep-alive (:class:`_HttpConnection`, over the standard library's
  ``BaseHTTPRequestHandler``), each request answered by a ``WSGIApp``; a request whose framing is ambiguous
  gets 400 and the connection closes.
- Each connection runs on a thread of its own, at most ``max_connections`` at once (the rest wait in the
  listening socket's backlog).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import logging
import math
import os
import re
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Literal

import rpcwire
from rpcwire._engine import serve_watched
from rpcwire._session import Session
from rpcwire._types import Framing, Handler
from rpcwire._workers import leave_signals_to_the_main_thread
from rpcwire.http import WSGIApp

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_MAX_CONNECTIONS",
    "SERVER_HEADER",
    "Limits",
    "access_logger",
    "framing_of",
    "log_access",
    "serve",
]

DEFAULT_MAX_CONCURRENCY = 8
"""Requests run at once on one stream connection."""
DEFAULT_MAX_CONNECTIONS = 64
"""Connections served at once; more wait in the listening socket's backlog."""
DEFAULT_IDLE_TIMEOUT = 300.0
"""Seconds a connection with nothing in flight may send nothing (or read nothing) before it is closed."""

_HTTP_METHODS = (b"GET ", b"POST ", b"PUT ", b"HEAD ", b"DELETE ", b"OPTIONS ", b"PATCH ")
_FRAME_HEADERS = (b"content-length:", b"content-type:")
_SNIFF_BYTES = 16
_SNIFF_SECONDS = 2.0
_DRAIN_MOST = 1024 * 1024

logger: logging.Logger = logging.getLogger("rpcwire")
access_logger: logging.Logger = logging.getLogger("rpcwire.access")
"""One INFO line per HTTP request served by ``--listen`` or ``--http`` under wsgiref (``--access-log`` sets
its level to INFO; by default it inherits ``rpcwire``'s, WARNING, and says nothing)."""

SERVER_HEADER = "rpcwire"
"""The ``Server`` header of the standard library's HTTP servers as the command line runs them: no version of
Python nor of the server (the standard library's says both, ``BaseHTTP/0.6 Python/3.12.3``)."""


def log_access(client: Any, request_line: str, status: Any) -> None:
    """An access-log line, as uvicorn's: ``127.0.0.1:53210 - "POST / HTTP/1.1" 200``."""
    if access_logger.isEnabledFor(logging.INFO):
        address = f"{client[0]}:{client[1]}" if isinstance(client, tuple) and len(client) >= 2 else str(client)
        access_logger.info('%s - "%s" %s', address, request_line, status)


Sniffed = Framing | Literal["http"]
"""What a connection's first bytes say: one of the transport's framings, or HTTP."""


@dataclass(frozen=True)
class Limits:
    """What bounds the server: requests at once per connection, connections at once, and the idle timeout in
    seconds (``None``: none)."""

    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT


# --- the sniffer: a connection's framing told from its first bytes ------------------------------------------


def framing_of(first: bytes) -> Sniffed | None:
    """``"newline"``, ``"content-length"`` or ``"http"`` for a connection that began with ``first``; ``None``
    while ``first`` could still begin more than one (``b"Con"``, ``b"PO"``)."""
    if not first or first[:1] in (b" ", b"\t", b"\r", b"\n", b"{", b"["):
        return "newline"
    undecided = False
    lower = first.lower()
    for name in _FRAME_HEADERS:
        if lower.startswith(name):
            return "content-length"
        undecided = undecided or name.startswith(lower)
    for method in _HTTP_METHODS:
        if first.startswith(method):
            return "http"
        undecided = undecided or method.startswith(first)
    return None if undecided else "newline"


def _sniff(connection: socket.socket, idle_timeout: float | None) -> Sniffed | None:
    """The framing of ``connection``, from bytes peeked at (not read: each server reads them itself); ``None``
    for a peer that closed, or sent nothing for ``idle_timeout`` seconds. A prefix that stays undecided for 2 s
    (or until the peer closes) is served as newline-delimited."""
    if not _readable(connection, idle_timeout):
        return None
    deadline = time.monotonic() + _SNIFF_SECONDS
    connection.settimeout(_SNIFF_SECONDS)
    try:
        while True:
            try:
                first = connection.recv(_SNIFF_BYTES, socket.MSG_PEEK)
            except TimeoutError:
                return "newline"
            if not first:
                return None
            framing = framing_of(first)
            if framing is not None:
                return framing
            if time.monotonic() > deadline:
                return "newline"
            time.sleep(0.005)
    finally:
        connection.settimeout(None)


_HAS_POLL = hasattr(select, "poll")


def _readable(connection: socket.socket, timeout: float | None) -> bool:
    """Whether ``connection`` has something to read (bytes, or its end) within ``timeout`` seconds."""
    if _HAS_POLL:  # not select.select: a descriptor above FD_SETSIZE (a busy server's) is out of its range
        poller = select.poll()
        poller.register(connection, select.POLLIN)
        return bool(poller.poll(None if timeout is None else max(0, math.ceil(timeout * 1000))))
    # Windows: no poll, but its select waits on sockets, with no limit on a descriptor's value.
    return bool(select.select([connection], [], [], None if timeout is None else max(0.0, timeout))[0])


# --- a stream connection: served by the engine over the socket ------------------------------------------------


class _IdleReader(io.RawIOBase):
    """A stream connection's input that ends (reads ``b""``, so that ``serve`` finishes what is in flight and
    returns) once nothing was in flight and nothing came for ``timeout`` seconds.

    What is in flight is the serving session's to say (:attr:`Session.busy`: a request admitted or held, a
    notification waiting or running), once the connection's driver hands it over (:meth:`watch`); without one (the
    sequential loop) nothing is in flight while a read waits. A read asked is activity (the server took what came
    before: for the sequential loop, its request was answered), and so is the end of what was in flight: at the
    deadline with something in flight, the session is looked at every tenth of the timeout, and the wait starts
    again once it is idle."""

    def __init__(self, connection: socket.socket, timeout: float) -> None:
        super().__init__()
        self._connection = connection
        self._timeout = timeout
        self._step = timeout / 10
        self._session: Session | None = None

    def watch(self, session: Session) -> None:
        """The session whose requests in flight keep the connection open."""
        self._session = session

    def readable(self) -> bool:
        return True

    def _in_flight(self) -> bool:
        session = self._session
        return session is not None and session.busy  # (read without its lock: a hint, looked at again)

    def readinto(self, buffer: Any) -> int:
        last = time.monotonic()
        busy = False  # something was in flight at the deadline: the session is looked at every step
        while True:
            now = time.monotonic()
            if busy and not self._in_flight():
                busy, last = False, now  # its end is activity: the wait starts again
            left = last + self._timeout - now
            if left <= 0 and not busy:
                if not self._in_flight():
                    logger.debug("--listen: a connection idle for %g s closed", self._timeout)
                    return 0
                busy = True
            if _readable(self._connection, self._step if busy else left):
                break
        return self._connection.recv_into(buffer)


# --- an HTTP connection: HTTP/1.1 with keep-alive, each request answered by the WSGI app --------------------

_DIGITS = re.compile(r"[0-9]+")


class _Body:
    """A request's body on a kept-alive connection: read no further than its ``Content-Length``."""

    def __init__(self, rfile: Any, length: int) -> None:
        self._rfile = rfile
        self.left = length

    def read(self, size: int | None = -1) -> bytes:
        size = self.left if size is None or size < 0 else min(size, self.left)
        data = self._rfile.read(size) if size else b""
        self.left -= len(data)
        if size and not data:
            self.left = 0  # the peer closed early
        return bytes(data)


class _HttpConnection(BaseHTTPRequestHandler):
    """HTTP/1.1 on one accepted connection, keep-alive, each request answered by a WSGI app: a response
    with a ``Content-Length`` keeps the connection; one without (server-sent events) is streamed, flushed
    event by event, and the connection closed after it. A request whose framing is ambiguous (RFC 9112 §6.3)
    gets 400 and the connection is closed: what follows it could be read as a request of its own."""

    protocol_version = "HTTP/1.1"
    server_version = SERVER_HEADER
    app: Any = None

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        log_access(self.client_address, self.requestline, code)

    def _ambiguity(self) -> str | None:
        """Why the end of this request's body, or its Host, cannot be told for sure; ``None`` when it can."""
        headers = self.headers
        if headers.defects:  # a line that is not a field ("Content-Length : 5"): the rest were not parsed
            return "a header line that is not a field"
        if any("\r" in value or "\n" in value for value in headers.values()):
            return "a header folded over lines (obs-fold)"
        lengths = headers.get_all("Content-Length") or []
        if lengths and headers.get_all("Transfer-Encoding"):
            return "Transfer-Encoding with Content-Length"
        if len(lengths) > 1:
            return "more than one Content-Length"
        if lengths and not _DIGITS.fullmatch(lengths[0].strip(" \t")):
            return "a Content-Length that is not a number"
        if len(headers.get_all("Host") or []) > 1:
            return "more than one Host"
        return None

    def _run_app(self) -> None:
        ambiguity = self._ambiguity()
        if ambiguity is not None:
            self.send_error(400, "Bad Request", ambiguity)  # with Connection: close, and it closes
            self.close_connection = True
            return
        length = self.headers.get("Content-Length")
        if length is None and self.headers.get("Transfer-Encoding"):
            self.send_error(411, "Length Required")  # chunked request bodies are not read here
            self.close_connection = True
            return
        length = None if length is None else length.strip(" \t")
        body = _Body(self.rfile, int(length or 0))
        path, _, query = self.path.partition("?")
        environ: dict[str, Any] = {
            "REQUEST_METHOD": self.command,
            "SCRIPT_NAME": "",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": length or "",
            "SERVER_NAME": self.server.server_address[0],  # type: ignore[index]
            "SERVER_PORT": str(self.server.server_address[1]),  # type: ignore[index]
            "REMOTE_ADDR": self.client_address[0],
            "SERVER_PROTOCOL": self.request_version,
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": body,
            "wsgi.input_terminated": True,
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        for name, value in self.headers.items():
            key = "HTTP_" + name.upper().replace("-", "_")
            if key not in ("HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"):
                environ[key] = f"{environ[key]},{value}" if key in environ else value
        started: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            started[:] = [status, headers]
            return self.wfile.write

        result = self.app(environ, start_response)
        try:
            chunks = iter(result)
            first = next(chunks, b"")  # an app may call start_response on its first step
            status, headers = started
            code, _, reason = status.partition(" ")
            self.send_response(int(code), reason)
            streamed = not any(name.lower() == "content-length" for name, _ in headers)
            for name, value in headers:
                self.send_header(name, value)  # an app's "Connection: close" closes the connection too
            # A body left unread, too long to drain (a refusal, 413): the connection ends, and the response says so.
            if streamed or body.left > _DRAIN_MOST:
                if not any(name.lower() == "connection" for name, _ in headers):
                    self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if self.command != "HEAD":
                for chunk in itertools.chain([first], chunks):
                    self.wfile.write(chunk)
                    self.wfile.flush()
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        if body.left > _DRAIN_MOST:  # a refused large body (413): not read, so the connection ends
            self.close_connection = True
        else:
            while body.left and body.read(_DRAIN_MOST):
                pass

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = do_OPTIONS = do_PATCH = _run_app


# --- the listening socket and its connections ---------------------------------------------------------------


def _serve_connection(connection: socket.socket, handler: Any, app: Any, address: Any, limits: Limits) -> None:
    try:
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        framing = _sniff(connection, limits.idle_timeout)
        if framing is None:  # closed, or said nothing
            return
        if framing == "http":
            server = type("Server", (), {"server_address": address})()
            # The idle timeout as the socket's: a keep-alive connection waiting for its next request, a body
            # that stops coming, a peer that reads nothing (a handler running reads nothing: not counted).
            http = type("Http", (_HttpConnection,), {"app": app, "timeout": limits.idle_timeout})
            http(connection, connection.getpeername(), server)  # handles requests until the connection closes
            return
        if limits.idle_timeout is None:
            rfile: Any = connection.makefile("rb")
            watch: Callable[[Session], None] = _unwatched
        else:
            idle = _IdleReader(connection, limits.idle_timeout)
            rfile, watch = io.BufferedReader(idle), idle.watch
            # A peer that reads nothing for as long: the write fails (EAGAIN) and serve stops, instead of a
            # writer blocked for ever, holding the connection's slot.
            seconds, fraction = divmod(limits.idle_timeout, 1)
            timeval = struct.pack("ll", int(seconds), int(fraction * 1_000_000))
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
        with rfile, connection.makefile("wb") as wfile:
            transport = rpcwire.StdioTransport(rfile, wfile, framing=framing)
            # a socket is never fd 1: no stdout guard to claim per connection
            serve_watched(handler, transport, limits.max_concurrency, guard_stdout=False, watch=watch)
    except OSError:  # the peer went away (reset, broken pipe), or read nothing for the idle timeout
        pass
    finally:
        with contextlib.suppress(OSError):
            connection.shutdown(socket.SHUT_RDWR)
        connection.close()


def _unwatched(session: Session) -> None:
    """No idle timeout: nothing looks at the session."""


_STOP_GRACE = 5.0


class _Connections:
    """The connections served, a thread each: at most ``limit`` at once (with none free, the next connection
    waits in the listening socket's backlog, not accepted), and each one ended when the server stops."""

    def __init__(self, limit: int) -> None:
        self._slots = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self._live: dict[socket.socket, threading.Thread] = {}

    def wait_for_a_slot(self) -> None:
        self._slots.acquire()

    def unused_slot(self) -> None:
        self._slots.release()

    def serve(self, connection: socket.socket, args: tuple[Any, ...]) -> None:
        thread = threading.Thread(target=self._run, args=(connection, args), name="rpcwire-connection", daemon=True)
        with self._lock:
            self._live[connection] = thread
        thread.start()

    def _run(self, connection: socket.socket, args: tuple[Any, ...]) -> None:
        leave_signals_to_the_main_thread()  # SIGTERM and SIGINT stop the server: they must wake its accept
        try:
            _serve_connection(connection, *args)
        finally:
            with self._lock:
                self._live.pop(connection, None)
            self._slots.release()

    def stop(self, grace: float) -> bool:
        """End every connection: no more input (the calls in flight still answered), then wait up to ``grace``
        seconds for their threads; whether they all ended."""
        with self._lock:
            live = dict(self._live)
        for connection in live:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RD)
        deadline = time.monotonic() + grace
        for thread in live.values():
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in live.values())


def serve(handler: Handler, app: WSGIApp, host: str, port: int, limits: Limits) -> int:
    """Serve every connection to ``host:port`` until a ``KeyboardInterrupt`` or ``SystemExit`` on this thread
    (the command line makes SIGTERM one): a stream connection with ``handler``, an HTTP one with ``app``
    (``WSGIApp(handler, ...)``). Once listening, says ``listening on tcp://HOST:PORT`` on stderr. The exit
    status (0)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    connections = _Connections(limits.max_connections)
    with socket.create_server((host, port), family=family, backlog=128) as listener:
        address = listener.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        sys.stderr.write(f"listening on tcp://{shown}:{address[1]}\n")
        sys.stderr.flush()
        with contextlib.suppress(KeyboardInterrupt, SystemExit):
            while True:
                connections.wait_for_a_slot()
                try:
                    connection, _ = listener.accept()
                except OSError as exc:  # out of descriptors, or a connection reset before it was taken: go on
                    connections.unused_slot()
                    logger.warning("accept failed: %s", exc)
                    time.sleep(0.1)
                    continue
                connections.serve(connection, (handler, app, address, limits))
    # The interpreter must not be finalized while a connection's thread may still wake in the native core: a
    # thread that finds the interpreter gone ends by unwinding through its Rust frames, and the process aborts
    # ("FATAL: exception not rethrown"). So every connection ends first; one that does not within the grace (a
    # handler still running) is left, and the process exits without finalizing.
    if not connections.stop(_STOP_GRACE):
        logger.warning("--listen: calls still running %g s after the stop; exiting without them", _STOP_GRACE)
        logging.shutdown()
        sys.stderr.flush()
        os._exit(0)
    return 0
