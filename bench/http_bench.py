"""rpcwire over HTTP: `make bench-http`, or `.venv/bin/python bench/http_bench.py [--seconds S] [--concurrency 1,16]`.

Each server runs one worker process on 127.0.0.1 (a socket this script binds, an ephemeral port, handed over
as a file descriptor; granian binds the port itself) and is stopped at the end of its cells. The load generator
is this process: C threads, each with its own keep-alive ``http.client`` connection, POSTing the same ``add``
request back to back for S seconds (at most MAX_REQUESTS a cell) after an untimed warm-up; every answer's
status and value are checked. The floor rows are a constant reply of the same bytes under the same server
(bench/http_apps.py): rpcwire's dispatch cost is its µs per request over the floor's at concurrency 1. The
peers answer the same call in their own terms (by-name params for fastapi-jsonrpc, ``tools/call`` for MCP).
Last, the applications alone, called in this process with no server and no socket (a gunicorn-like environ,
a uvicorn-like scope): what each adds over the floor app, free of the network's noise. Prints markdown tables
(progress to stderr) and writes bench/http_results.json. No assertion on time anywhere.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import io
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from http_clients import tree_cpu_ns

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BODY = b'{"jsonrpc":"2.0","method":"add","params":[10,15],"id":1}'
ANSWER = b'{"jsonrpc":"2.0","id":1,"result":25}'
EXPECTED: Any = json.loads(ANSWER)
HEADERS = {"Content-Type": "application/json"}
WARM_UP = 200  # requests per connection, untimed
MAX_REQUESTS = 500_000  # per cell, whatever the time

GUNICORN = [sys.executable, "-m", "gunicorn", "--bind", "fd://{fd}", "-w", "1", "--worker-class", "gthread"]
GUNICORN += ["--threads", "16", "--keep-alive", "30", "--log-level", "warning"]
UVICORN = [sys.executable, "-m", "uvicorn", "--fd", "{fd}", "--workers", "1", "--no-access-log"]
UVICORN += ["--log-level", "warning", "--timeout-keep-alive", "60"]
# granian takes no descriptor: a port the kernel just gave, freed again for it. 16 blocking threads for WSGI, as
# gunicorn's; one runtime thread (the default); no websockets.
GRANIAN = [sys.executable, "-m", "granian", "--host", "127.0.0.1", "--port", "{port}", "--workers", "1"]
GRANIAN += ["--no-ws", "--log-level", "warning", "--no-access-log"]
GRANIAN_ASGI = [*GRANIAN, "--interface", "asgi"]
GRANIAN_WSGI = [*GRANIAN, "--interface", "wsgi", "--blocking-threads", "16"]


@dataclass(frozen=True)
class Call:
    """What a row POSTs and the answer it expects (decoded; the rpcwire bytes are compared first, as bytes)."""

    body: bytes = BODY
    headers: dict[str, str] = field(default_factory=lambda: HEADERS)
    expected: Any = field(default_factory=lambda: EXPECTED)


ADD = Call()
BY_NAME = Call(body=b'{"jsonrpc":"2.0","method":"add","params":{"a":10,"b":15},"id":1}')
MCP_CALL = Call(
    body=b'{"jsonrpc":"2.0","method":"tools/call","params":{"name":"add","arguments":{"a":10,"b":15}},"id":1}',
    headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
    expected={
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"content": [{"type": "text", "text": "25"}], "structuredContent": {"result": 25}, "isError": False},
    },
)


@dataclass(frozen=True)
class Target:
    name: str  # the row's label
    server: str  # uvicorn, gunicorn gthread, granian asgi, granian wsgi
    app: str  # what is served: rpcwire, floor, peer
    command: list[str]
    cwd: Path = HERE
    call: Call = ADD


TARGETS = [
    Target("rpcwire ASGIApp", "uvicorn", "rpcwire", [*UVICORN, "http_apps:rpcwire_asgi"]),
    Target("rpcwire ASGIApp, run_sync_inline", "uvicorn", "rpcwire", [*UVICORN, "http_apps:rpcwire_asgi_inline"]),
    Target("fastapi-jsonrpc", "uvicorn", "peer", [*UVICORN, "http_apps:peer_fastapi_jsonrpc"], call=BY_NAME),
    Target("MCP SDK streamable HTTP", "uvicorn", "peer", [*UVICORN, "http_apps:peer_mcp"], call=MCP_CALL),
    Target("floor (constant reply)", "uvicorn", "floor", [*UVICORN, "http_apps:floor_asgi"]),
    Target("rpcwire ASGIApp", "granian asgi", "rpcwire", [*GRANIAN_ASGI, "http_apps:rpcwire_asgi"]),
    Target(
        "rpcwire ASGIApp, run_sync_inline", "granian asgi", "rpcwire", [*GRANIAN_ASGI, "http_apps:rpcwire_asgi_inline"]
    ),
    Target("floor (constant reply)", "granian asgi", "floor", [*GRANIAN_ASGI, "http_apps:floor_asgi"]),
    Target("rpcwire WSGIApp", "gunicorn gthread", "rpcwire", [*GUNICORN, "http_apps:rpcwire_wsgi"]),
    Target(
        "Flask example (flask_view)", "gunicorn gthread", "rpcwire", [*GUNICORN, "flask_server:app"], ROOT / "examples"
    ),
    Target("jsonrpcserver on Flask", "gunicorn gthread", "peer", [*GUNICORN, "http_apps:peer_jsonrpcserver_flask"]),
    Target("jsonrpcserver, minimal WSGI", "gunicorn gthread", "peer", [*GUNICORN, "http_apps:peer_jsonrpcserver_wsgi"]),
    Target("json-rpc, minimal WSGI", "gunicorn gthread", "peer", [*GUNICORN, "http_apps:peer_json_rpc_wsgi"]),
    Target("floor (constant reply)", "gunicorn gthread", "floor", [*GUNICORN, "http_apps:floor_wsgi"]),
    Target("rpcwire WSGIApp", "granian wsgi", "rpcwire", [*GRANIAN_WSGI, "http_apps:rpcwire_wsgi"]),
    Target("floor (constant reply)", "granian wsgi", "floor", [*GRANIAN_WSGI, "http_apps:floor_wsgi"]),
]


def start(target: Target) -> tuple[subprocess.Popen[bytes], int]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    # Accepted sockets inherit TCP_NODELAY on Linux. uvicorn --fd takes the descriptor for a Unix socket and so
    # leaves Nagle on: its two writes (head, body) then wait for the client's delayed ACK, 40 ms a request.
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    listener.listen(128)
    listener.set_inheritable(True)
    port, fd = listener.getsockname()[1], listener.fileno()
    binds_itself = any("{port}" in part for part in target.command)
    if binds_itself:
        listener.close()
    paths = [str(ROOT / "python"), str(HERE), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    process = subprocess.Popen(
        [part.replace("{fd}", str(fd)).replace("{port}", str(port)) for part in target.command],
        pass_fds=() if binds_itself else (fd,),
        cwd=target.cwd,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    listener.close()
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{target.name} under {target.server} exited with {process.returncode}")
        try:
            if post(http.client.HTTPConnection("127.0.0.1", port, timeout=5), target.call):
                return process, port
            raise RuntimeError(f"{target.name} under {target.server} answers wrongly")
        except OSError:
            if time.monotonic() > deadline:
                stop(process)
                raise
            time.sleep(0.2)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def post(connection: http.client.HTTPConnection, call: Call) -> bool:
    try:
        connection.request("POST", "/rpc", body=call.body, headers=call.headers)
        response = connection.getresponse()
    except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
        connection.close()  # the server closed a connection left idle: once more, on a new one
        connection.request("POST", "/rpc", body=call.body, headers=call.headers)
        response = connection.getresponse()
    body = response.read()
    return response.status == 200 and (body == ANSWER or json.loads(body) == call.expected)


def cell(connections: list[http.client.HTTPConnection], call: Call, seconds: float) -> tuple[list[int], int, float]:
    """One thread per keep-alive connection, each POSTing back to back for ``seconds``: the latencies (ns),
    the wrong answers and the time taken."""
    concurrency = len(connections)
    latencies: list[list[int]] = [[] for _ in range(concurrency)]
    wrong = [0] * concurrency
    ready = threading.Barrier(concurrency + 1)
    budget = MAX_REQUESTS // concurrency

    def client(n: int) -> None:
        connection = connections[n]
        ready.wait()
        mine, clock = latencies[n], time.perf_counter_ns
        deadline = clock() + int(seconds * 1e9)
        while len(mine) < budget:
            begun = clock()
            if not post(connection, call):
                wrong[n] += 1
            mine.append(clock() - begun)
            if begun > deadline:
                break

    threads = [threading.Thread(target=client, args=(n,)) for n in range(concurrency)]
    for thread in threads:
        thread.start()
    ready.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return [latency for mine in latencies for latency in mine], sum(wrong), time.perf_counter() - started


def connect(port: int, call: Call, concurrency: int) -> list[http.client.HTTPConnection]:
    """``concurrency`` keep-alive connections, each warmed up with ``WARM_UP`` untimed requests."""
    connections = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _ in range(concurrency)]

    def warm(connection: http.client.HTTPConnection) -> None:
        for _ in range(WARM_UP):
            post(connection, call)

    threads = [threading.Thread(target=warm, args=(connection,)) for connection in connections]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return connections


def summary(latencies: list[int], wrong: int, elapsed: float) -> dict[str, float]:
    every = sorted(latencies)
    return {
        "requests": len(every),
        "wrong": wrong,
        "seconds": elapsed,
        "rps": len(every) / elapsed,
        "p50_us": every[len(every) // 2] / 1e3,
        "p99_us": every[min(len(every) - 1, len(every) * 99 // 100)] / 1e3,
        "mean_us": statistics.fmean(every) / 1e3,
    }


def measure(targets: list[Target], levels: list[int], seconds: float, slices: int) -> list[dict[str, Any]]:
    """The targets of one server, all running at once, measured in turn on connections kept open: each level's
    ``seconds`` cut into ``slices`` slices, interleaved, so that the machine's drift falls on every row alike.
    Each row also keeps its µs per request slice by slice (``slice_us``), to pair with the floor's neighbour."""
    running = []
    try:
        for target in targets:
            try:
                running.append((target, *start(target)))
            except RuntimeError as exc:  # a peer not installed fails its row, not the others
                sys.stderr.write(f"{exc}: left out\n")
        if not running:
            return []
        rows = []
        for concurrency in levels:
            sys.stderr.write(f"{targets[0].server}, concurrency {concurrency}: {len(running)} rows\n")
            pools: list[list[http.client.HTTPConnection]] = []
            gathered: list[tuple[list[int], int, float]] = [([], 0, 0.0)] * len(running)
            per_slice: list[list[float]] = [[] for _ in running]
            cpu_slice: list[list[float]] = [[] for _ in running]
            for _ in range(slices):
                for index, (target, process, port) in enumerate(running):
                    if len(pools) == index:  # warmed up just before its first slice
                        pools.append(connect(port, target.call, concurrency))
                    cpu = tree_cpu_ns(process.pid)
                    latencies, wrong, elapsed = cell(pools[index], target.call, seconds / slices)
                    cpu_slice[index].append((tree_cpu_ns(process.pid) - cpu) / len(latencies) / 1e3)
                    before = gathered[index]
                    gathered[index] = (before[0] + latencies, before[1] + wrong, before[2] + elapsed)
                    per_slice[index].append(elapsed / len(latencies) * 1e6)
            for pool in pools:
                for connection in pool:
                    connection.close()
            for index, (target, _, _) in enumerate(running):
                row = {"name": target.name, "server": target.server, "app": target.app, "concurrency": concurrency}
                rows.append(
                    row
                    | summary(*gathered[index])
                    | {"slice_us": per_slice[index], "server_cpu_us": statistics.median(cpu_slice[index])}
                    | {"slice_cpu_us": cpu_slice[index]}
                )
        return rows
    finally:
        for _, process, _ in running:
            stop(process)


# --- the applications alone, in this process ----------------------------------------------------------------


def _environ() -> dict[str, Any]:
    """What gunicorn's gthread worker puts in a request's environ (the same keys), a fresh input each time."""
    return {
        "wsgi.errors": sys.stderr,
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "wsgi.file_wrapper": None,
        "wsgi.input_terminated": True,
        "SERVER_SOFTWARE": "gunicorn/27.0.1",
        "wsgi.input": io.BytesIO(BODY),
        "gunicorn.socket": None,
        "REQUEST_METHOD": "POST",
        "QUERY_STRING": "",
        "RAW_URI": "/rpc",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "127.0.0.1:8000",
        "HTTP_ACCEPT_ENCODING": "identity",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(BODY)),
        "wsgi.url_scheme": "http",
        "REMOTE_ADDR": "127.0.0.1",
        "REMOTE_PORT": "40000",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "PATH_INFO": "/rpc",
        "SCRIPT_NAME": "",
    }


_SCOPE = {
    "type": "http",
    "asgi": {"version": "3.0", "spec_version": "2.4"},
    "http_version": "1.1",
    "server": ("127.0.0.1", 8000),
    "client": ("127.0.0.1", 40000),
    "scheme": "http",
    "method": "POST",
    "root_path": "",
    "path": "/rpc",
    "raw_path": b"/rpc",
    "query_string": b"",
    "headers": [
        (b"host", b"127.0.0.1:8000"),
        (b"accept-encoding", b"identity"),
        (b"content-length", str(len(BODY)).encode()),
        (b"content-type", b"application/json"),
    ],
    "state": {},
}


def _matches(raw: bytes, call: Call) -> bool:
    return raw == ANSWER or json.loads(raw) == call.expected


def in_process(repeats: int, calls: int) -> list[dict[str, Any]]:
    """µs per call of each application with no server, medians of ``repeats`` runs of ``calls``, interleaved: the
    time taken, and the CPU time of the process, all its threads (less disturbed by other processes). The peers
    are called with their own request (``Call``), and left out when they are not installed."""
    import asyncio  # noqa: PLC0415

    import http_apps  # noqa: PLC0415

    loop = asyncio.new_event_loop()  # one loop for every ASGI app's runs, as a server's
    lifespans: dict[Any, contextlib.AsyncExitStack] = {}

    peer_calls = max(100, calls // 8)  # the peers are slower by 10 to 300 times: an eighth as many calls each

    def wsgi(app: Any, call: Call = ADD, calls: int = calls) -> Callable[[], Any]:
        def run() -> None:
            start_response = lambda status, headers, exc_info=None: None  # noqa: E731
            for _ in range(calls):
                environ = _environ()
                environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(call.body), str(len(call.body))
                if not _matches(b"".join(app(environ, start_response)), call):
                    raise AssertionError(app)

        return run

    def asgi(app: Any, call: Call = ADD, calls: int = calls) -> Callable[[], Any]:
        message = {"type": "http.request", "body": call.body, "more_body": False}
        headers = [(b"host", b"127.0.0.1:8000"), (b"content-length", b"%d" % len(call.body))]
        headers += [(name.lower().encode(), value.encode()) for name, value in call.headers.items()]
        scope = _SCOPE | {"headers": headers}
        sent: list[Any] = []

        async def receive() -> dict[str, Any]:
            return message

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        async def many() -> None:
            if app not in lifespans:  # once per app, on the one loop (the MCP SDK's session manager runs once)
                lifespans[app] = contextlib.AsyncExitStack()
                await lifespans[app].enter_async_context(_lifespan(app))
            for _ in range(calls):
                await app(scope | {"state": {}}, receive, send)
                body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
                if not _matches(body, call):
                    raise AssertionError(body)
                sent.clear()

        return lambda: loop.run_until_complete(many())

    apps: dict[str, tuple[str, Callable[[], Any]]] = {
        "WSGI floor": ("floor", wsgi(http_apps.floor_wsgi)),
        "rpcwire WSGIApp": ("WSGI floor", wsgi(http_apps.rpcwire_wsgi)),
        "json-rpc, minimal WSGI": ("WSGI floor", lambda: wsgi(http_apps.peer_json_rpc_wsgi, ADD, peer_calls)),
        "jsonrpcserver, minimal WSGI": (
            "WSGI floor",
            lambda: wsgi(http_apps.peer_jsonrpcserver_wsgi, ADD, peer_calls),
        ),
        "jsonrpcserver on Flask": ("WSGI floor", lambda: wsgi(http_apps.peer_jsonrpcserver_flask, ADD, peer_calls)),
        "ASGI floor": ("floor", asgi(http_apps.floor_asgi)),
        "rpcwire ASGIApp, run_sync_inline": ("ASGI floor", asgi(http_apps.rpcwire_asgi_inline)),
        "rpcwire ASGIApp": ("ASGI floor", asgi(http_apps.rpcwire_asgi)),
        "fastapi-jsonrpc": ("ASGI floor", lambda: asgi(http_apps.peer_fastapi_jsonrpc, BY_NAME, peer_calls)),
        "MCP SDK streamable HTTP": ("ASGI floor", lambda: asgi(http_apps.peer_mcp, MCP_CALL, peer_calls)),
    }
    runners: dict[str, tuple[str, Callable[[], Any], int]] = {}
    for name, (floor, run) in apps.items():
        if name.endswith("floor") or name.startswith("rpcwire"):
            runners[name] = (floor, run, calls)
            continue
        try:
            runners[name] = (floor, run(), peer_calls)  # the peer built (and imported) here
        except ImportError as exc:
            sys.stderr.write(f"{name}: {exc}: left out\n")
    try:
        return _timed(runners, repeats)
    finally:
        for stack in lifespans.values():
            loop.run_until_complete(stack.aclose())
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()


def _timed(runners: dict[str, tuple[str, Callable[[], Any], int]], repeats: int) -> list[dict[str, Any]]:
    """Each runner (its floor, its run of N calls, N) ``repeats`` times, interleaved, after an untimed warm-up:
    medians of µs per call."""
    wall: dict[str, list[float]] = {name: [] for name in runners}
    cpu: dict[str, list[float]] = {name: [] for name in runners}
    for repeat in range(repeats + 1):
        for name, (_, run, calls) in runners.items():
            begun, begun_cpu = time.perf_counter(), time.process_time()
            run()
            if repeat:
                cpu[name].append((time.process_time() - begun_cpu) / calls * 1e6)
                wall[name].append((time.perf_counter() - begun) / calls * 1e6)
    return [
        {"name": name, "floor": floor, "us": statistics.median(wall[name]), "cpu_us": statistics.median(cpu[name])}
        for name, (floor, _, _) in runners.items()
    ]


@contextlib.asynccontextmanager
async def _lifespan(app: Any) -> AsyncIterator[None]:
    """The ASGI lifespan around the calls, as a server runs it."""
    import asyncio  # noqa: PLC0415

    events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    started = asyncio.Event()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set()

    events.put_nowait({"type": "lifespan.startup"})
    task = asyncio.ensure_future(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, events.get, send))
    await asyncio.wait([task, asyncio.ensure_future(started.wait())], return_when=asyncio.FIRST_COMPLETED)
    try:
        yield
    finally:
        events.put_nowait({"type": "lifespan.shutdown"})
        await task


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per cell (default 3)")
    parser.add_argument("--concurrency", default="1,16", help="connections per cell, comma-separated (default 1,16)")
    parser.add_argument("--slices", type=int, default=10, help="interleaved slices of each cell (default 10)")
    parser.add_argument("--only", default="", help="rows whose name or server contains this text (default: all)")
    parser.add_argument(
        "--part",
        default=",".join(PARTS),
        help=f"which tables, comma-separated (default all: {','.join(PARTS)})",
    )
    parser.add_argument("--calls", type=int, default=1000, help="clients and websocket: calls per block (default 1000)")
    parser.add_argument("--repeats", type=int, default=7, help="clients and websocket: blocks, interleaved (default 7)")
    parser.add_argument("--out", default=str(HERE / "http_results.json"))
    args = parser.parse_args()
    parts = args.part.split(",")
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown part {sorted(unknown)}: choose among {', '.join(PARTS)}")
    machine = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}
    names = (
        "uvicorn",
        "gunicorn",
        "granian",
        "flask",
        "jsonrpcserver",
        "json-rpc",
        "fastapi-jsonrpc",
        "fastapi",
        "mcp",
        "httpx",
        "requests",
        "aiohttp",
        "websockets",
    )
    results: dict[str, Any] = {"machine": machine, "versions": {name: _version(name) for name in names}}
    if "clients" in parts:
        results["clients"] = _clients(args.calls, args.repeats)
    if "servers" in parts:
        levels = [int(level) for level in args.concurrency.split(",")]
        chosen = [t for t in TARGETS if not args.only or args.only in t.name or args.only in t.server]
        rows = []
        load = os.getloadavg()[0]
        for server in dict.fromkeys(target.server for target in chosen):
            rows += measure([t for t in chosen if t.server == server], levels, args.seconds, args.slices)
        sys.stdout.write(servers_report(rows) + _load_line(load) + "\n\n")
        sys.stdout.flush()
        results["rows"] = rows
    if "in-process" in parts:
        sys.stderr.write("the applications alone, in process\n")
        load = os.getloadavg()[0]
        alone = in_process(repeats=15, calls=4_000)
        sys.stdout.write(in_process_report(alone) + _load_line(load) + "\n\n")
        sys.stdout.flush()
        results["in_process"] = alone
    if "websocket" in parts:
        results |= _websocket(args.calls, args.repeats)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    return 0


def _clients(calls: int, repeats: int) -> dict[str, Any]:
    """The clients' table (bench/http_clients.py), printed; its results."""
    import http_clients  # noqa: PLC0415

    sys.stderr.write("the clients, against one uvicorn\n")
    load = os.getloadavg()[0]
    clients = http_clients.run(calls, repeats)
    clients["load"] = [load, os.getloadavg()[0]]
    sys.stdout.write(http_clients.report(clients) + _load_line(load) + "\n\n")
    sys.stdout.flush()
    return clients


def _websocket(calls: int, repeats: int) -> dict[str, Any]:
    """WebSocket frames against POSTs (bench/websocket_bench.py), in process and under uvicorn, printed."""
    import websocket_bench  # noqa: PLC0415

    sys.stderr.write("WebSocket frames against POSTs, in process\n")
    load = os.getloadavg()[0]
    frames = websocket_bench.in_process(calls, repeats, 16)
    sys.stdout.write(websocket_bench.in_process_report(frames, calls, repeats) + _load_line(load) + "\n\n")
    sys.stdout.flush()
    sys.stderr.write("WebSocket frames against POSTs, under uvicorn\n")
    end_to_end = websocket_bench.end_to_end(calls, max(3, repeats // 2), 16)
    return {"websocket_in_process": frames, "websocket_end_to_end": end_to_end}


PARTS = ("clients", "servers", "in-process", "websocket")


def _version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _load_line(before: float) -> str:
    return f"\n\nLoad average (1 min) before and after: {before:.2f} / {os.getloadavg()[0]:.2f}"


def servers_report(rows: list[dict[str, Any]]) -> str:
    lines = [
        "The servers, one load client (`http.client` threads, keep-alive), every row of a server in interleaved"
        f" slices; Python {platform.python_version()}. Server CPU: the server's processes and threads"
        " (`schedstat`), per request, median of the slices:",
        "",
        "| app | server | concurrency | req/s | p50 µs | p99 µs | server CPU µs/request | answers (wrong) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        name = f"**{row['name']}**" if row["app"] == "rpcwire" else row["name"]
        lines.append(
            f"| {name} | {row['server']} | {row['concurrency']} | {row['rps']:,.0f} | {row['p50_us']:,.0f} |"
            f" {row['p99_us']:,.0f} | {row['server_cpu_us']:,.0f} | {row['requests']:,} ({row['wrong']}) |"
        )
    lines += [
        "",
        "Cost over the floor under the same server (µs per request = 1e6 / req/s), and the median of the"
        " differences slice by slice (each slice beside the floor's of the same turn):",
        "",
    ]
    lines += [
        "| app | server | concurrency | µs/request | floor µs/request | over the floor | median of the slices' |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    floors = {(row["server"], row["concurrency"]): row for row in rows if row["app"] == "floor"}
    for row in rows:
        floor = floors.get((row["server"], row["concurrency"]))
        if row["app"] == "floor" or floor is None:
            continue
        cost, floor_cost = 1e6 / row["rps"], 1e6 / floor["rps"]
        paired = statistics.median(a - b for a, b in zip(row["slice_us"], floor["slice_us"], strict=True))
        lines.append(
            f"| {row['name']} | {row['server']} | {row['concurrency']} | {cost:,.1f} | {floor_cost:,.1f} |"
            f" {cost - floor_cost:+,.1f} | {paired:+,.1f} |"
        )
    return "\n".join(lines)


def in_process_report(alone: list[dict[str, Any]]) -> str:
    lines = [
        "",
        "The applications alone (no server, no socket; µs per call, a fresh WSGI environ included; the peers with"
        " their own request, as above; medians of 15 runs of 4,000, the peers 500, interleaved; CPU: the process's,"
        " all threads):",
        "",
    ]
    lines += [
        "| app | µs/call | over its floor app | CPU µs/call | over its floor app |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    by_name = {entry["name"]: entry for entry in alone}
    for entry in alone:
        floor = by_name.get(entry["floor"])
        over = "" if floor is None else f"{entry['us'] - floor['us']:+,.2f}"
        cpu_over = "" if floor is None else f"{entry['cpu_us'] - floor['cpu_us']:+,.2f}"
        lines.append(f"| {entry['name']} | {entry['us']:,.2f} | {over} | {entry['cpu_us']:,.2f} | {cpu_over} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
