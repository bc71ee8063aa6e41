"""Command line: ``python -m rpcwire demo [--pure]`` and ``python -m rpcwire serve MODULE:HANDLER``.

``serve`` answers JSON-RPC with a handler found as uvicorn finds an app (``module:attribute``, the current
directory first on ``sys.path``): over stdin/stdout (``--stdio``, the default), over HTTP (``--http
HOST:PORT``, under uvicorn when it is installed, else the standard library's ``wsgiref``), or on one socket that
tells each connection's framing from its first bytes (``--listen HOST:PORT``, served by ``rpcwire._listen``).
Only the wire goes to stdout; everything this command says goes to stderr. This module parses the command
line, loads the handler and starts the server asked for.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import os
import signal
import socket
import sys
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import rpcwire
import rpcwire.pure
from rpcwire import _demo, _listen
from rpcwire._engine import BY_HANDLER, is_async_handler
from rpcwire._listen import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_CONNECTIONS
from rpcwire.http import ASGIApp, WSGIApp
from rpcwire.pure.framing import FRAMINGS

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
        choices=FRAMINGS,
        default="newline",
        help="--stdio: one message per line (default) or Content-Length frames (LSP)",
    )
    serve.add_argument(
        "--max-concurrency",
        type=int,
        default=None,
        metavar="N",
        help="requests run at once: --stdio default 1 (one at a time, in order; 64 for an async handler), "
        f"--listen {DEFAULT_MAX_CONCURRENCY} per connection",
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
        limits = _listen.Limits(
            max_concurrency=args.max_concurrency or DEFAULT_MAX_CONCURRENCY,
            max_connections=args.max_connections or DEFAULT_MAX_CONNECTIONS,
            idle_timeout=idle_timeout or None,
        )
        host, port = _address(serve, args.listen)
        signal.signal(signal.SIGTERM, _stop)
        return _listen.serve(handler, WSGIApp(handler, **app_options), host, port, limits)
    if args.http is None:
        transport = rpcwire.StdioTransport(framing=args.framing)
        rpcwire.serve(
            handler,
            transport,
            max_concurrency=args.max_concurrency or BY_HANDLER,
            guard_stdout=not args.no_stdout_guard,
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


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(0)


if __name__ == "__main__":
    sys.exit(main())
