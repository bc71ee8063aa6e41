"""Command line: ``python -m rpcwire demo [--pure]`` and ``python -m rpcwire serve MODULE:HANDLER``.

``serve`` answers JSON-RPC with a handler found as uvicorn finds an app (``module:attribute``, the current
directory first on ``sys.path``): over stdin/stdout (``--stdio``, the default), over HTTP (``--http
HOST:PORT``, under uvicorn when it is installed, else the standard library's ``wsgiref``), or on one socket that
tells each connection's framing from its first bytes (``--listen HOST:PORT``). Only the wire goes to stdout;
everything this command says goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import itertools
import logging
import os
import re
import select
import signal
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import rpcwire
import rpcwire.pure
from rpcwire import _demo
from rpcwire._engine import is_async_handler
from rpcwire.http import ASGIApp, WSGIApp

SERVE_DESCRIPTION = """\
Serve JSON-RPC 2.0 with HANDLER, a callable handler(method, params) (e.g. rpcwire.methods({...})), found as
MODULE:HANDLER like uvicorn's module:attr (the current directory, or --app-dir, first on sys.path).

--stdio (the default): newline-delimited JSON-RPC on stdin/stdout, rpcwire.serve(handler, StdioTransport(),
max_concurrency=N); --framing content-length for LSP's Content-Length frames. While serving, fd 1 and
sys.stdout go to stderr (the wire keeps a descriptor of its own), so a stray print cannot corrupt the wire;
--no-stdout-guard leaves them alone.

--http HOST:PORT: rpcwire.http over HTTP (POST a JSON-RPC body to any path). With uvicorn installed, and
--server auto (the default), rpcwire.http.ASGIApp(handler) under uvicorn: a production server, keep-alive,
an async handler awaited on its event loop. Without uvicorn (it stays optional), rpcwire.http.WSGIApp(handler)
under the standard library's wsgiref with a thread per connection: no dependency, good for trying things out,
not for production (HTTP/1.0, no keep-alive; a sync handler only). Port 0 picks a free port. Once listening,
the line "listening on http://HOST:PORT" goes to stderr. To scale past one process, run the apps under
gunicorn, uvicorn --workers or granian (docs/guides/http.md, "Scaling"). --run-sync-inline: a sync handler
that never blocks runs on uvicorn's event loop (ASGIApp(handler, run_sync_inline=True)) instead of a worker
thread.

HTTP (--http, and --listen's HTTP connections) answers only requests whose Host header names the server
(421 otherwise), against DNS rebinding: by default, a request that came over loopback must name a loopback
host (localhost, 127.0.0.1, [::1], any port); --allowed-hosts rpc.example.com,*.example.com lists the names
instead (behind a proxy, or on a domain name); --allowed-hosts '*' checks nothing. A handler's unexpected
exception is answered -32603 "Internal error" alone over HTTP, and logged with its traceback (stderr, unless
logging is configured); --expose-errors puts its class and text in the answer's data, as --stdio does.

--listen HOST:PORT: one TCP socket for every kind of client. Each connection's first bytes say how it is
served: `{`, `[` or whitespace (or anything not below) newline-delimited JSON-RPC; a `Content-Length:` or
`Content-Type:` header (any case) Content-Length frames (LSP); an HTTP method (`POST `, `GET `...) HTTP/1.1
with keep-alive, answered by rpcwire.http.WSGIApp (server-sent events included). The streams are served by
rpcwire.serve(handler, StdioTransport(...), max_concurrency=N) (default 8), on a thread per connection, its
worker threads started as requests come (an idle connection holds one thread). At most --max-connections
(default 64) are served at once; more wait in the listening socket's backlog until one ends. A connection
with nothing in flight that sends nothing for --idle-timeout seconds (default 300; 0: never) is closed, as is
one whose peer reads nothing for that long. Once listening, the line "listening on tcp://HOST:PORT" goes to
stderr. A sync handler only (HTTP calls it through WSGIApp).
"""

DEFAULT_MAX_CONNECTIONS = 64
DEFAULT_IDLE_TIMEOUT = 300.0


def _prog() -> str:
    """``rpcwire`` when run as the console script, ``python -m rpcwire`` otherwise."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "python -m rpcwire" if name in ("", "__main__.py", "-c") else name


def _version() -> str:
    """The version and the core in use, e.g. ``rpcwire 0.1.0 (native)``."""
    return f"rpcwire {rpcwire.__version__} ({'native' if rpcwire.NATIVE else 'pure'})"


def main(argv: list[str] | None = None) -> int:
    """Run the command named in ``argv``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog=_prog(),
        description="rpcwire: JSON-RPC 2.0 over stdio, HTTP (--http) and one negotiated socket (--listen).",
    )
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="serve a few requests over in-memory streams and show the transcript")
    demo.add_argument("--pure", action="store_true", help="use the pure-Python twin instead of the native transport")
    serve = commands.add_parser(
        "serve",
        help="serve MODULE:HANDLER over stdio or HTTP",
        description=SERVE_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("handler", metavar="MODULE:HANDLER", help="the handler, e.g. myapp:handler or pkg.mod:obj.attr")
    where = serve.add_mutually_exclusive_group()
    where.add_argument("--stdio", action="store_true", help="newline-delimited JSON-RPC on stdin/stdout (default)")
    where.add_argument("--http", metavar="HOST:PORT", help="JSON-RPC over HTTP on HOST:PORT (e.g. 127.0.0.1:8000)")
    where.add_argument(
        "--listen", metavar="HOST:PORT", help="NDJSON, Content-Length frames and HTTP on one socket, told apart"
    )
    serve.add_argument(
        "--framing",
        choices=("newline", "content-length"),
        default="newline",
        help="--stdio: one message per line (default) or Content-Length frames (LSP)",
    )
    serve.add_argument(
        "--max-concurrency",
        type=int,
        default=None,
        metavar="N",
        help="requests run at once: --stdio default 1 (one at a time, in order), --listen 8 per connection",
    )
    serve.add_argument(
        "--no-stdout-guard",
        action="store_true",
        help="--stdio: leave fd 1 and sys.stdout alone while serving (by default they go to stderr, so that "
        "a stray print cannot corrupt the wire)",
    )
    serve.add_argument(
        "--server",
        choices=("auto", "uvicorn", "wsgiref"),
        default="auto",
        help="--http: uvicorn if installed, else wsgiref (default auto)",
    )
    serve.add_argument(
        "--run-sync-inline",
        action="store_true",
        help="--http under uvicorn: call a sync handler on the event loop, not on a worker thread (never blocks)",
    )
    serve.add_argument(
        "--allowed-hosts",
        metavar="LIST",
        default=None,
        help="--http, --listen: the Host names answered, comma-separated (rpc.example.com,*.example.com,"
        "name:port), or '*' for any; default: loopback names for a request that came over loopback",
    )
    serve.add_argument(
        "--expose-errors",
        action="store_true",
        help="--http, --listen's HTTP: a handler's unexpected exception answered with its class and text in the "
        "-32603's data (default: none; it is logged on stderr either way)",
    )
    serve.add_argument(
        "--max-connections",
        type=int,
        default=None,
        metavar="N",
        help=f"--listen: connections served at once, more wait in the backlog (default {DEFAULT_MAX_CONNECTIONS})",
    )
    serve.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"--listen: close a connection idle this long (default {DEFAULT_IDLE_TIMEOUT:g}; 0: never)",
    )
    serve.add_argument("--app-dir", default=".", help="the directory put first on sys.path (default: current)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        _demo.run(sys.stdout, rpcwire.pure.StdioTransport if args.pure else rpcwire.StdioTransport)
        return 0
    _check_options(serve, args)
    handler = _load(serve, args.handler, args.app_dir)
    app_options: dict[str, Any] = {"expose_errors": args.expose_errors}
    if args.allowed_hosts is not None:
        app_options["allowed_hosts"] = _allowed_hosts(serve, args.allowed_hosts)
    if args.listen is not None:
        if is_async_handler(handler):
            serve.error("--listen answers HTTP through WSGIApp, which calls the handler synchronously")
        idle_timeout = DEFAULT_IDLE_TIMEOUT if args.idle_timeout is None else args.idle_timeout
        limits = _Limits(
            max_concurrency=args.max_concurrency or 8,
            max_connections=args.max_connections or DEFAULT_MAX_CONNECTIONS,
            idle_timeout=idle_timeout or None,
        )
        return _serve_listen(handler, *_address(serve, args.listen), limits, WSGIApp(handler, **app_options))
    if args.http is None:
        transport = rpcwire.StdioTransport(framing=args.framing)
        rpcwire.serve(
            handler, transport, max_concurrency=args.max_concurrency or 1, guard_stdout=not args.no_stdout_guard
        )
        return 0
    host, port = _address(serve, args.http)
    server = args.server
    if server == "auto":
        server = "uvicorn" if importlib.util.find_spec("uvicorn") is not None else "wsgiref"
    if server == "uvicorn":
        return _serve_uvicorn(ASGIApp(handler, run_sync_inline=args.run_sync_inline, **app_options), host, port)
    if args.run_sync_inline:
        serve.error("--run-sync-inline is for ASGIApp under uvicorn (wsgiref calls the handler on its own thread)")
    if is_async_handler(handler):
        serve.error("wsgiref calls the handler synchronously: install uvicorn to serve an async handler")
    return _serve_wsgiref(WSGIApp(handler, **app_options), host, port)


def _check_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The options that do not fit together, or that are out of range: a usage error each."""
    if args.max_concurrency is not None and args.max_concurrency < 1:
        parser.error("--max-concurrency must be at least 1")
    if args.max_connections is not None and args.max_connections < 1:
        parser.error("--max-connections must be at least 1")
    if args.idle_timeout is not None and not args.idle_timeout >= 0:  # not NaN either
        parser.error("--idle-timeout must be a number of seconds, 0 or more")
    if args.listen is None and (args.max_connections is not None or args.idle_timeout is not None):
        parser.error("--max-connections and --idle-timeout are --listen's")
    if args.http is None and args.run_sync_inline:
        parser.error("--run-sync-inline is --http's (ASGIApp under uvicorn)")
    if args.http is None and args.listen is None and (args.allowed_hosts is not None or args.expose_errors):
        parser.error("--allowed-hosts and --expose-errors are --http's and --listen's")


def _allowed_hosts(parser: argparse.ArgumentParser, text: str) -> Any:
    """``--allowed-hosts``: ``"*"``, or the list of names, each checked as ``WSGIApp`` checks it."""
    if text.strip() == "*":
        return "*"
    names = [name.strip() for name in text.split(",") if name.strip()]
    try:
        WSGIApp(lambda method, params: None, allowed_hosts=names)
    except (TypeError, ValueError) as exc:
        parser.error(f"--allowed-hosts: {exc}")
    return names


def _load(parser: argparse.ArgumentParser, spec: str, app_dir: str) -> Any:
    """The object named ``module:attribute`` (``attribute`` may be dotted), imported with ``app_dir`` first."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        parser.error(f"{spec!r}: expected MODULE:HANDLER, e.g. myapp:handler")
    sys.path.insert(0, app_dir)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not module_name.startswith(exc.name):
            raise  # the module itself imports something missing: its traceback says what
        parser.error(f"could not import module {module_name!r}")
    found: Any = module
    for name in attribute.split("."):
        try:
            found = getattr(found, name)
        except AttributeError:
            parser.error(f"module {module_name!r} has no attribute {attribute!r}")
    if not callable(found):
        parser.error(f"{spec} is not callable: the handler is called as handler(method, params)")
    return found


def _address(parser: argparse.ArgumentParser, text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    host = host.strip("[]")  # [::1]:8000
    if not host or not port.isdigit() or int(port) > 65535:
        parser.error(f"{text!r}: expected HOST:PORT, e.g. 127.0.0.1:8000")
    return host, int(port)


def _listening(host: str, port: int) -> None:
    shown = f"[{host}]" if ":" in host else host
    sys.stderr.write(f"listening on http://{shown}:{port}\n")
    sys.stderr.flush()


def _serve_uvicorn(app: ASGIApp, host: str, port: int) -> int:
    import uvicorn  # noqa: PLC0415 (optional: imported only here)

    # The socket is bound here so that port 0's actual port is known and said before serving.
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    # uvicorn takes the socket for a Unix one and leaves Nagle on: its two writes (head, body) would then wait
    # for the client's delayed ACK, ~40 ms a request on keep-alive. Accepted sockets inherit TCP_NODELAY (Linux).
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    listener.listen(2048)
    _listening(host, listener.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    # uvicorn stops on SIGINT or SIGTERM, then raises the signal again for the handler it found: ours, so
    # that a stop is exit status 0, not death by the signal.
    signal.signal(signal.SIGTERM, _stop)
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[listener])
    return 0


def _serve_wsgiref(app: WSGIApp, host: str, port: int) -> int:
    class Server(ThreadingMixIn, WSGIServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        daemon_threads = True

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    with make_server(host, port, app, server_class=Server, handler_class=Quiet) as server:
        _listening(host, server.server_address[1])
        signal.signal(signal.SIGTERM, _stop)
        with contextlib.suppress(KeyboardInterrupt, SystemExit):
            server.serve_forever()
    return 0


# --- --listen: one socket, each connection's framing told from its first bytes ---------------------------

_HTTP_METHODS = (b"GET ", b"POST ", b"PUT ", b"HEAD ", b"DELETE ", b"OPTIONS ", b"PATCH ")
_FRAME_HEADERS = (b"content-length:", b"content-type:")
_SNIFF_BYTES = 16
_SNIFF_SECONDS = 2.0
_DRAIN_MOST = 1024 * 1024

logger: logging.Logger = logging.getLogger("rpcwire")


class _Limits:
    """What bounds ``--listen``: requests at once per connection, connections at once, and the idle timeout
    (``None``: none)."""

    def __init__(self, *, max_concurrency: int, max_connections: int, idle_timeout: float | None) -> None:
        self.max_concurrency = max_concurrency
        self.max_connections = max_connections
        self.idle_timeout = idle_timeout


def _framing_of(first: bytes) -> str | None:
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


def _sniff(connection: socket.socket, idle_timeout: float | None) -> str | None:
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
            framing = _framing_of(first)
            if framing is not None:
                return framing
            if time.monotonic() > deadline:
                return "newline"
            time.sleep(0.005)
    finally:
        connection.settimeout(None)


def _readable(connection: socket.socket, timeout: float | None) -> bool:
    """Whether ``connection`` has something to read (bytes, or its end) within ``timeout`` seconds."""
    poller = select.poll()
    poller.register(connection, select.POLLIN)
    return bool(poller.poll(None if timeout is None else max(0, int(timeout * 1000))))


class _Activity:
    """The handler of a stream connection, counting the calls in flight and noting when the connection last did
    something (a call ended, bytes came): what its idle timeout looks at."""

    def __init__(self, handler: Any) -> None:
        self._handler = handler
        self._lock = threading.Lock()
        self.running = 0
        self.last = time.monotonic()

    @property
    def rpcwire_async(self) -> bool:  # as the handler says (a registry may gain an async function)
        return getattr(self._handler, "rpcwire_async", False) is True

    def __call__(self, method: str, params: Any) -> Any:
        with self._lock:
            self.running += 1
        try:
            return self._handler(method, params)
        finally:
            with self._lock:
                self.running -= 1
                self.last = time.monotonic()


class _IdleReader(io.RawIOBase):
    """A stream connection's input that ends (reads ``b""``, so that ``serve`` finishes what is in flight and
    returns) once nothing was in flight and nothing came for ``timeout`` seconds."""

    def __init__(self, connection: socket.socket, activity: _Activity, timeout: float) -> None:
        super().__init__()
        self._connection = connection
        self._activity = activity
        self._timeout = timeout
        self._poller = select.poll()
        self._poller.register(connection, select.POLLIN)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        activity = self._activity
        while True:
            left = activity.last + self._timeout - time.monotonic()
            if left <= 0:
                if not activity.running:
                    logger.debug("--listen: a connection idle for %g s closed", self._timeout)
                    return 0
                left = self._timeout  # a call in flight: its end is activity, and the wait starts again then
            if self._poller.poll(int(left * 1000) + 1):
                break
        count = self._connection.recv_into(buffer)
        activity.last = time.monotonic()
        return count


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
    app: Any = None

    def log_message(self, format: str, *args: Any) -> None:
        pass

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
                self.send_header(name, value)
            if streamed:
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


def _serve_connection(connection: socket.socket, handler: Any, app: Any, address: Any, limits: _Limits) -> None:
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
        activity = _Activity(handler)
        if limits.idle_timeout is None:
            rfile: Any = connection.makefile("rb")
        else:
            rfile = io.BufferedReader(_IdleReader(connection, activity, limits.idle_timeout))
            # A peer that reads nothing for as long: the write fails (EAGAIN) and serve stops, instead of a
            # writer blocked for ever, holding the connection's slot.
            seconds, fraction = divmod(limits.idle_timeout, 1)
            timeval = struct.pack("ll", int(seconds), int(fraction * 1_000_000))
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
        with rfile, connection.makefile("wb") as wfile:
            transport = rpcwire.StdioTransport(rfile, wfile, framing=framing)
            # A socket is never fd 1: no stdout guard to claim (and release) per connection.
            rpcwire.serve(activity, transport, max_concurrency=limits.max_concurrency, guard_stdout=False)
    except OSError:  # the peer went away (reset, broken pipe), or read nothing for the idle timeout
        pass
    finally:
        with contextlib.suppress(OSError):
            connection.shutdown(socket.SHUT_RDWR)
        connection.close()


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


def _serve_listen(handler: Any, host: str, port: int, limits: _Limits, app: WSGIApp) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    connections = _Connections(limits.max_connections)
    with socket.create_server((host, port), family=family, backlog=128) as listener:
        address = listener.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        sys.stderr.write(f"listening on tcp://{shown}:{address[1]}\n")
        sys.stderr.flush()
        signal.signal(signal.SIGTERM, _stop)
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


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(0)


if __name__ == "__main__":
    sys.exit(main())
