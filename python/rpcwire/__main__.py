"""Command line: ``python -m rpcwire demo [--pure]`` and ``python -m rpcwire serve MODULE:HANDLER``.

``serve`` answers JSON-RPC with a handler found as uvicorn finds an app (``module:attribute``, the current
directory first on ``sys.path``): over stdin/stdout (``--stdio``, the default) or over HTTP (``--http
HOST:PORT``, under uvicorn when it is installed, else the standard library's ``wsgiref``). Only the wire goes
to stdout; everything this command says goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import signal
import socket
import sys
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
max_concurrency=N).

--http HOST:PORT: rpcwire.http over HTTP (POST a JSON-RPC body to any path). With uvicorn installed, and
--server auto (the default), rpcwire.http.ASGIApp(handler) under uvicorn: a production server, keep-alive,
an async handler awaited on its event loop. Without uvicorn (it stays optional), rpcwire.http.WSGIApp(handler)
under the standard library's wsgiref with a thread per connection: no dependency, good for trying things out,
not for production (HTTP/1.0, no keep-alive; a sync handler only). Port 0 picks a free port. Once listening,
the line "listening on http://HOST:PORT" goes to stderr. To scale past one process, run the apps under
gunicorn, uvicorn --workers or granian (README, "Scaling").
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
    serve.add_argument(
        "--max-concurrency",
        type=int,
        default=1,
        metavar="N",
        help="--stdio: requests run at once (default 1: one at a time, in order)",
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
    if args.max_concurrency < 1:
        serve.error("--max-concurrency must be at least 1")
    handler = _load(serve, args.handler, args.app_dir)
    if args.http is None:
        rpcwire.serve(handler, rpcwire.StdioTransport(), max_concurrency=args.max_concurrency)
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
        parser.error(f"--http {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8000")
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


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(0)


if __name__ == "__main__":
    sys.exit(main())
