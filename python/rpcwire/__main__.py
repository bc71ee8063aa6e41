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
import itertools
import logging
import signal
import socket
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
gunicorn, uvicorn --workers or granian (README, "Scaling").

--listen HOST:PORT: one TCP socket for every kind of client. Each connection's first bytes say how it is
served: `{`, `[` or whitespace (or anything not below) newline-delimited JSON-RPC; a `Content-Length:` or
`Content-Type:` header (any case) Content-Length frames (LSP); an HTTP method (`POST `, `GET `...) HTTP/1.1
with keep-alive, answered by rpcwire.http.WSGIApp (server-sent events included). The streams are served by
rpcwire.serve(handler, StdioTransport(...), max_concurrency=N) (default 8), on a thread per connection. Once
listening, the line "listening on tcp://HOST:PORT" goes to stderr. A sync handler only (HTTP calls it
through WSGIApp).
"""


def main(argv: list[str] | None = None) -> int:
    """Run the command named in ``argv``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m rpcwire", description="rpcwire, JSON-RPC 2.0 over stdio.")
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
    serve.add_argument("--app-dir", default=".", help="the directory put first on sys.path (default: current)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        _demo.run(sys.stdout, rpcwire.pure.StdioTransport if args.pure else rpcwire.StdioTransport)
        return 0
    if args.max_concurrency is not None and args.max_concurrency < 1:
        serve.error("--max-concurrency must be at least 1")
    handler = _load(serve, args.handler, args.app_dir)
    if args.listen is not None:
        if is_async_handler(handler):
            serve.error("--listen answers HTTP through WSGIApp, which calls the handler synchronously")
        return _serve_listen(handler, *_address(serve, args.listen), args.max_concurrency or 8)
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
        return _serve_uvicorn(handler, host, port)
    if is_async_handler(handler):
        serve.error("wsgiref calls the handler synchronously: install uvicorn to serve an async handler")
    return _serve_wsgiref(handler, host, port)


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


def _serve_uvicorn(handler: Any, host: str, port: int) -> int:
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
    server = uvicorn.Server(uvicorn.Config(ASGIApp(handler), log_level="warning"))
    # uvicorn stops on SIGINT or SIGTERM, then raises the signal again for the handler it found: ours, so
    # that a stop is exit status 0, not death by the signal.
    signal.signal(signal.SIGTERM, _stop)
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[listener])
    return 0


def _serve_wsgiref(handler: Any, host: str, port: int) -> int:
    class Server(ThreadingMixIn, WSGIServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        daemon_threads = True

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    with make_server(host, port, WSGIApp(handler), server_class=Server, handler_class=Quiet) as server:
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


def _sniff(connection: socket.socket) -> str:
    """The framing of ``connection``, from bytes peeked at (not read: each server reads them itself). A
    prefix that stays undecided for 2 s (or until the peer closes) is served as newline-delimited."""
    deadline = time.monotonic() + _SNIFF_SECONDS
    connection.settimeout(_SNIFF_SECONDS)  # a peer that sends nothing at all is not waited for forever
    try:
        while True:
            try:
                first = connection.recv(_SNIFF_BYTES, socket.MSG_PEEK)
            except TimeoutError:
                return "newline"
            framing = _framing_of(first)
            if framing is not None:
                return framing
            if time.monotonic() > deadline:
                return "newline"
            time.sleep(0.005)
    finally:
        connection.settimeout(None)


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
    event by event, and the connection closed after it."""

    protocol_version = "HTTP/1.1"
    app: Any = None

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _run_app(self) -> None:
        length = self.headers.get("Content-Length")
        if (length is None and self.headers.get("Transfer-Encoding")) or not (length or "0").strip().isdigit():
            self.send_error(411, "Length Required")  # chunked request bodies are not read here
            self.close_connection = True
            return
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


def _serve_connection(connection: socket.socket, handler: Any, app: Any, address: Any, max_concurrency: int) -> None:
    try:
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        framing = _sniff(connection)
        if framing == "http":
            server = type("Server", (), {"server_address": address})()
            http = type("Http", (_HttpConnection,), {"app": app})
            http(connection, connection.getpeername(), server)  # handles requests until the connection closes
            return
        with connection.makefile("rb") as rfile, connection.makefile("wb") as wfile:
            transport = rpcwire.StdioTransport(rfile, wfile, framing=framing)
            rpcwire.serve(handler, transport, max_concurrency=max_concurrency)
    except OSError:  # the peer went away (reset, broken pipe)
        pass
    finally:
        with contextlib.suppress(OSError):
            connection.shutdown(socket.SHUT_RDWR)
        connection.close()


def _serve_listen(handler: Any, host: str, port: int, max_concurrency: int) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    app = WSGIApp(handler)
    with socket.create_server((host, port), family=family, backlog=128) as listener:
        address = listener.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        sys.stderr.write(f"listening on tcp://{shown}:{address[1]}\n")
        sys.stderr.flush()
        signal.signal(signal.SIGTERM, _stop)
        with contextlib.suppress(KeyboardInterrupt, SystemExit):
            while True:
                try:
                    connection, _ = listener.accept()
                except OSError as exc:  # out of descriptors, or a connection reset before it was taken: go on
                    logging.getLogger("rpcwire").warning("accept failed: %s", exc)
                    time.sleep(0.1)
                    continue
                threading.Thread(
                    target=_serve_connection,
                    args=(connection, handler, app, address, max_concurrency),
                    name="rpcwire-connection",
                    daemon=True,
                ).start()
    return 0


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(0)


if __name__ == "__main__":
    sys.exit(main())
