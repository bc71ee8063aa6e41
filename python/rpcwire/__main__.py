"""Command line: ``python -m rpcwire demo [--pure]`` and ``python -m rpcwire serve MODULE[:HANDLER]``.

``serve`` answers JSON-RPC with a handler found as uvicorn finds an app (``module:attribute``, the current
directory first on ``sys.path``; ``MODULE`` alone: its ``handler``, else its ``app``): over stdin/stdout
(``--stdio``, the default), over HTTP (``--http [HOST]:PORT``, under uvicorn when it is installed, with
``--workers N`` processes, else the standard library's ``wsgiref``), or on one socket that tells each
connection's framing from its first bytes (``--listen [HOST]:PORT``, served by ``rpcwire._listen``). A port
alone is on 127.0.0.1. Only the wire goes to stdout; everything this command says, and logs
(``--log-level``, ``--access-log``), goes to stderr. Ctrl-C and SIGTERM end every mode with status 0 and no
traceback. The options are explained in docs/guides/cli.md; ``--help`` lists them on one screen.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import copy
import importlib
import json
import logging
import os
import signal
import socket
import sys
import threading
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.handlers import SimpleHandler
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer, make_server

import rpcwire
import rpcwire.pure
from rpcwire import _demo, _listen
from rpcwire._engine import BY_HANDLER, is_async_handler
from rpcwire._listen import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_CONNECTIONS
from rpcwire._types import FRAMINGS
from rpcwire.http import ASGIApp, WSGIApp

SERVE_DESCRIPTION = """\
Serve JSON-RPC 2.0 with handler(method, params). The guide: docs/guides/cli.md."""

SERVE_EXAMPLES = """\
examples:
  %(prog)s myapp                 # myapp:handler (else myapp:app) on stdio
  %(prog)s myapp:rpc --http 8000 # HTTP on 127.0.0.1:8000
  %(prog)s myapp --listen :8000  # NDJSON, LSP frames and HTTP on one port
"""

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
WORKER_ENV = "RPCWIRE_SERVE_WORKER"
"""How ``serve --http --workers N`` tells uvicorn's worker processes what to serve (JSON: the handler's spec,
the app directory, the app's options); read by :func:`worker_app`."""
NO_UVICORN = (
    "rpcwire: uvicorn is not installed: serving with the standard library's wsgiref, for trying things out only "
    "(HTTP/1.0, one process, no keep-alive). For production: pip install uvicorn\n"
)


def _prog() -> str:
    """``rpcwire`` when run as the console script, ``python -m rpcwire`` otherwise."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "python -m rpcwire" if name in ("", "__main__.py", "-c") else name


def _version() -> str:
    """The version and the core in use, e.g. ``rpcwire 0.1.0 (native)``."""
    return f"rpcwire {rpcwire.__version__} ({'native' if rpcwire.NATIVE else 'pure'})"


def main(argv: list[str] | None = None) -> int:
    """Run the command named in ``argv``; returns the exit status (0 after Ctrl-C or SIGTERM, as uvicorn's)."""
    try:
        status = _main(argv)
    except KeyboardInterrupt:  # Ctrl-C before the server took over SIGINT (importing the handler, say)
        status = 0
    _leave_if_still_reading(status)
    return status


def _leave_if_still_reading(status: int) -> None:
    """A server stopped (Ctrl-C, ``SystemExit``) while its input is open leaves its reader thread blocked in
    the native core's read. Should that read return while the interpreter finalizes (the peer closing the pipe
    as it sees the exit), CPython 3.10-3.13 ends the thread by unwinding it through the native module's frames,
    which aborts the process (SIGABRT, "exception not rethrown"). So, with such a thread left, the command
    ends as the interpreter would, without finalizing: streams flushed, ``atexit`` functions run, then exit."""
    if not any(thread.name == "rpcwire-reader" and thread.is_alive() for thread in threading.enumerate()):
        return
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def _parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The command line's parser and its ``serve`` subparser (whose usage errors name it)."""
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
        help="serve MODULE[:HANDLER] over stdio, HTTP or one socket",
        description=SERVE_DESCRIPTION,
        epilog=SERVE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument(
        "handler", metavar="MODULE[:HANDLER]", help="e.g. myapp:rpc; MODULE alone: its handler, else its app"
    )
    where = serve.add_argument_group("where (one of)").add_mutually_exclusive_group()
    where.add_argument("--stdio", action="store_true", help="JSON-RPC lines on stdin/stdout (default)")
    where.add_argument("--http", metavar="[HOST]:PORT", help="HTTP; PORT alone: on 127.0.0.1 (port 0: any free one)")
    where.add_argument("--listen", metavar="[HOST]:PORT", help="NDJSON, LSP frames and HTTP on one socket")
    serve.add_argument(
        "--framing", choices=FRAMINGS, default="newline", help="--stdio: lines (default) or LSP's frames"
    )
    serve.add_argument(
        "--max-concurrency",
        type=int,
        metavar="N",
        help=f"requests at once (--stdio 1, 64 for an async handler; --listen {DEFAULT_MAX_CONCURRENCY} a connection)",
    )
    serve.add_argument("--no-stdout-guard", action="store_true", help="--stdio: let a stray print reach fd 1")
    serve.add_argument("--log-level", choices=LOG_LEVELS, default="warning", help="what is logged (default warning)")
    serve.add_argument("--access-log", action="store_true", help="a line on stderr per HTTP request")
    http = serve.add_argument_group("--http (--allowed-hosts, --expose-errors: --listen too)")
    http.add_argument(
        "--server", choices=("auto", "uvicorn", "wsgiref"), default="auto", help="uvicorn if installed (default)"
    )
    http.add_argument("--workers", type=int, metavar="N", help="uvicorn's worker processes (default 1)")
    http.add_argument("--run-sync-inline", action="store_true", help="uvicorn: a sync handler on the event loop")
    http.add_argument(
        "--allowed-hosts",
        metavar="LIST",
        help="Host names answered (a.com,*.b.com; '*': any)",
    )
    http.add_argument("--expose-errors", action="store_true", help="an exception's class and text in the -32603")
    listen = serve.add_argument_group("--listen")
    listen.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help=f"connections served at once (default {DEFAULT_MAX_CONNECTIONS})",
    )
    listen.add_argument(
        "--idle-timeout",
        type=float,
        metavar="SECONDS",
        help=f"close an idle connection (default {DEFAULT_IDLE_TIMEOUT:g}; 0: never)",
    )
    serve.add_argument("--app-dir", default=".", metavar="DIR", help="put first on sys.path (default: .)")
    return parser, serve


def _main(argv: list[str] | None) -> int:
    parser, serve = _parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        _demo.run(sys.stdout, rpcwire.pure.StdioTransport if args.pure else rpcwire.StdioTransport)
        return 0
    _check_options(serve, args)
    try:
        handler = load_handler(args.handler, args.app_dir)
    except LookupError as exc:
        serve.error(str(exc))
    _configure_logging(args.log_level, args.access_log)  # after the import: a module's own configuration wins
    app_options: dict[str, Any] = {"expose_errors": args.expose_errors}
    if args.allowed_hosts is not None:
        app_options["allowed_hosts"] = _allowed_hosts(serve, args.allowed_hosts)
    # SIGTERM stops every mode as Ctrl-C does: quietly, exit status 0 (uvicorn replaces it with its own).
    signal.signal(signal.SIGTERM, _stop)
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
        app = WSGIApp(handler, **app_options)
        return _listen.serve(handler, app, host, port, limits)
    if args.http is None:
        transport = rpcwire.StdioTransport(framing=args.framing)
        with contextlib.suppress(KeyboardInterrupt):
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
        server = "uvicorn" if _has_uvicorn() else "wsgiref"
        if server == "wsgiref":
            sys.stderr.write(NO_UVICORN)
    if server == "uvicorn":
        options = {"run_sync_inline": args.run_sync_inline, **app_options}
        if (args.workers or 1) > 1:
            spec = {"handler": args.handler, "app_dir": args.app_dir, "options": options}
            return _serve_uvicorn_workers(
                spec, host, port, workers=args.workers, log_level=args.log_level, access_log=args.access_log
            )
        return _serve_uvicorn(ASGIApp(handler, **options), host, port, args.log_level, args.access_log)
    if args.workers is not None and args.workers > 1:
        serve.error(
            "--workers N runs uvicorn's worker processes; the standard library's wsgiref is one process "
            "(pip install uvicorn)"
        )
    if args.run_sync_inline:
        serve.error("--run-sync-inline is for ASGIApp under uvicorn (wsgiref calls the handler on its own thread)")
    if is_async_handler(handler):
        serve.error("wsgiref calls the handler synchronously: install uvicorn to serve an async handler")
    return _serve_wsgiref(WSGIApp(handler, **app_options), host, port)


def _has_uvicorn() -> bool:
    """Whether uvicorn can be imported (an import, not a look on the path: a broken install counts as none)."""
    try:
        import uvicorn  # noqa: F401, PLC0415 (optional)
    except ImportError:
        return False
    return True


def _configure_logging(level: str, access_log: bool) -> None:
    """Log records at ``level`` and above on stderr (unless the handler's module configured logging itself);
    with ``access_log``, the ``rpcwire.access`` lines too."""
    logging.basicConfig(stream=sys.stderr, level=level.upper(), format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("rpcwire").setLevel(level.upper())
    if access_log:
        _listen.access_logger.setLevel(logging.INFO)


def _check_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The options that do not fit together, or that are out of range: a usage error each."""
    if args.max_concurrency is not None and args.max_concurrency < 1:
        parser.error("--max-concurrency must be at least 1")
    if args.max_connections is not None and args.max_connections < 1:
        parser.error("--max-connections must be at least 1")
    if args.workers is not None and args.workers < 1:
        parser.error("--workers must be at least 1")
    if args.http is None and args.workers is not None:
        parser.error("--workers is --http's (uvicorn's worker processes)")
    if args.http is None and args.listen is None and args.access_log:
        parser.error("--access-log is --http's and --listen's")
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


def load_handler(spec: str, app_dir: str) -> Any:
    """The handler ``MODULE:ATTRIBUTE`` names (``ATTRIBUTE`` may be dotted), imported with ``app_dir`` first on
    ``sys.path``; ``MODULE`` alone: its ``handler``, else its ``app``. A ``LookupError`` says what is missing."""
    module_name, colon, attribute = spec.partition(":")
    if not module_name or (colon and not attribute):
        raise LookupError(f"{spec!r}: expected MODULE or MODULE:HANDLER, e.g. myapp or myapp:handler")
    if app_dir not in sys.path[:1]:
        sys.path.insert(0, app_dir)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not module_name.startswith(exc.name):
            raise  # the module itself imports something missing: its traceback says what
        raise LookupError(f"could not import module {module_name!r}") from None
    if not colon:
        attribute = next((name for name in ("handler", "app") if hasattr(module, name)), "")
        if not attribute:
            raise LookupError(f"module {module_name!r} has no 'handler' nor 'app': name one, {module_name}:NAME")
        spec = f"{module_name}:{attribute}"
    found: Any = module
    for name in attribute.split("."):
        try:
            found = getattr(found, name)
        except AttributeError:
            raise LookupError(f"module {module_name!r} has no attribute {attribute!r}") from None
    if not callable(found):
        raise LookupError(f"{spec} is not callable: the handler is called as handler(method, params)")
    return found


def _address(parser: argparse.ArgumentParser, text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[::1]:PORT``, or ``PORT`` / ``:PORT`` alone on 127.0.0.1 (uvicorn's and flask's default)."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"  # [::1]:8000
    if not port.isdigit() or int(port) > 65535:
        parser.error(f"{text!r}: expected [HOST]:PORT, e.g. 127.0.0.1:8000 or 8000")
    return host, int(port)


def _listening(host: str, port: int) -> None:
    shown = f"[{host}]" if ":" in host else host
    sys.stderr.write(f"listening on http://{shown}:{port}\n")
    sys.stderr.flush()


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that port 0's actual port is known and said before serving."""
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    # uvicorn takes the socket for a Unix one and leaves Nagle on: its two writes (head, body) would then wait
    # for the client's delayed ACK, ~40 ms a request on keep-alive. Accepted sockets inherit TCP_NODELAY (Linux).
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    listener.listen(2048)
    _listening(host, listener.getsockname()[1])
    return listener


def _uvicorn_logging(level: str, access_log: bool) -> dict[str, Any]:
    """uvicorn's options for ``--log-level`` and ``--access-log``: its logging, on stderr (stdout too is kept
    empty), the access lines at INFO whatever the level."""
    from uvicorn.config import LOGGING_CONFIG  # noqa: PLC0415 (optional: imported only here)

    config = copy.deepcopy(LOGGING_CONFIG)
    config["handlers"]["access"]["stream"] = "ext://sys.stderr"
    config["loggers"]["uvicorn"]["level"] = level.upper()
    config["loggers"]["uvicorn.error"]["level"] = level.upper()
    config["loggers"]["uvicorn.access"]["level"] = "INFO" if access_log else "WARNING"
    # log_level None: uvicorn would otherwise set the access logger to it too.
    return {"log_config": config, "log_level": None, "access_log": access_log}


def _serve_uvicorn(app: ASGIApp, host: str, port: int, log_level: str, access_log: bool) -> int:
    import uvicorn  # noqa: PLC0415 (optional: imported only here)

    listener = _bind(host, port)
    server = uvicorn.Server(uvicorn.Config(app, **_uvicorn_logging(log_level, access_log)))
    # uvicorn stops on SIGINT or SIGTERM, then raises the signal again for the handler it found: ours, so
    # that a stop is exit status 0, not death by the signal.
    with contextlib.suppress(KeyboardInterrupt, SystemExit):
        server.run(sockets=[listener])
    return 0


def _serve_uvicorn_workers(
    spec: dict[str, Any], host: str, port: int, *, workers: int, log_level: str, access_log: bool
) -> int:
    """``--workers N``: uvicorn's supervisor and N worker processes, each importing the handler anew
    (:func:`worker_app`) and accepting on the one listening socket."""
    import uvicorn  # noqa: PLC0415 (optional: imported only here)
    from uvicorn.supervisors import Multiprocess  # noqa: PLC0415

    os.environ[WORKER_ENV] = json.dumps(spec)  # the workers are spawned: they inherit the environment
    listener = _bind(host, port)
    config = uvicorn.Config(
        f"{__name__ if __name__ != '__main__' else 'rpcwire.__main__'}:worker_app",
        factory=True,
        workers=workers,
        **_uvicorn_logging(log_level, access_log),
    )
    with contextlib.suppress(KeyboardInterrupt, SystemExit):
        Multiprocess(config, sockets=[listener]).run()
    return 0


def worker_app() -> ASGIApp:
    """The app of one of uvicorn's worker processes under ``--workers N`` (what ``WORKER_ENV`` says)."""
    spec = json.loads(os.environ[WORKER_ENV])
    return ASGIApp(load_handler(spec["handler"], spec["app_dir"]), **spec["options"])


class _WsgirefHandler(WSGIRequestHandler):
    """wsgiref's request handler saying ``Server: rpcwire`` (not wsgiref's and Python's versions), and with
    ``--access-log`` one line per request on the ``rpcwire.access`` logger (silent otherwise)."""

    server_version = _listen.SERVER_HEADER
    sys_version = ""

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        _listen.log_access(self.client_address, self.requestline, code)

    def handle(self) -> None:
        # WSGIRequestHandler.handle, with a ServerHandler whose Server header is ours.
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:
            self.requestline = self.request_version = self.command = ""
            self.send_error(414)
            return
        if not self.parse_request():
            return
        handler = _ServerHandler(self.rfile, self.wfile, self.get_stderr(), self.get_environ(), multithread=False)
        handler.request_handler = self  # type: ignore[attr-defined] (wsgiref's back-pointer, for log_request)
        handler.run(self.server.get_app())  # type: ignore[attr-defined]


class _ServerHandler(ServerHandler):
    """wsgiref's per-request handler: ``Server: rpcwire``; the access line logged as the head is sent (wsgiref
    logs it after the body, when a stop may already have ended the daemon thread writing it)."""

    server_software = _listen.SERVER_HEADER

    def send_headers(self) -> None:
        if self.status is not None:
            self.request_handler.log_request(self.status.split(" ", 1)[0])  # type: ignore[attr-defined]
        super().send_headers()

    def close(self) -> None:
        SimpleHandler.close(self)  # not ServerHandler.close: the access line is written already


def _serve_wsgiref(app: WSGIApp, host: str, port: int) -> int:
    class Server(ThreadingMixIn, WSGIServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        daemon_threads = True

    with make_server(host, port, app, server_class=Server, handler_class=_WsgirefHandler) as server:
        _listening(host, server.server_address[1])
        with contextlib.suppress(KeyboardInterrupt, SystemExit):
            server.serve_forever()
    return 0


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(0)


if __name__ == "__main__":
    sys.exit(main())
