"""The same calls over WebSocket and over HTTP POST, against one ``ASGIApp`` under uvicorn: ``make bench-websocket``,
or ``.venv/bin/python bench/websocket_bench.py [--calls N] [--repeats R] [--window W]``.

uvicorn runs one worker on 127.0.0.1 (a socket this script binds, an ephemeral port, with ``TCP_NODELAY``,
handed over as a file descriptor: uvicorn takes a descriptor for a Unix socket and sets no ``TCP_NODELAY`` itself,
which would cost each POST a delayed ACK of about 40 ms; its default WebSocket implementation, the ``websockets``
library's sans-I/O one). The load generator is
this process, one asyncio loop:

- **ping-pong**: one connection, one call at a time (send, await the answer, send the next): the latency of a call.
  HTTP: one keep-alive connection, a POST per call. WebSocket: one connection, a frame per call.
- **W in flight**: W calls outstanding at once, a new one sent as each answer arrives. HTTP: W keep-alive
  connections (a POST waits for its response). WebSocket: W calls on the one connection (answers in any order).

Each with a bare client (HTTP/1.1 bytes on an asyncio stream; the ``websockets`` library) and with rpcwire's own
(``AsyncHttpClient``, ``AsyncWebSocketClient``), for an ``async def`` handler (on the loop) and a sync one (a worker
thread per call, ``ASGIApp``'s default). The cells are run in turn, R times, interleaved, so that the machine's
noise falls on all alike; the table gives each cell's median µs per call (the time taken, and the server process's
CPU time from /proc, which a loaded machine disturbs less) and the WebSocket/HTTP ratios of the same client and
handler. Every answer is checked.

First (``--part in-process``) the same cells with the app alone in this process, no server and no socket: a POST
as uvicorn hands one over (a ``receive`` that gives the body whole), or frames on one connection whose ``receive``
waits on a queue; the process's CPU and the time per call, and the loop's turns and ``call_soon`` callbacks per
call, counted on a loop that counts them (the difference of N and 2N calls: a count, which the machine's load does
not move). ``--count HANDLER/TRANSPORT --calls N`` runs N in-process ping-pong calls and nothing else, for
callgrind. Writes bench/websocket_results.json. No assertion on time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import rpcwire
from http_clients import tree_cpu_ns

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
APP = """
from rpcwire import methods
from rpcwire.http import ASGIApp


async def add(a, b):
    return a + b


def add_sync(a, b):
    return a + b


app = ASGIApp(methods({"add": add, "add_sync": add_sync}), websocket=True)
"""
UVICORN = [sys.executable, "-m", "uvicorn", "--fd", "{fd}", "--no-access-log"]
UVICORN += ["--log-level", "warning", "--timeout-keep-alive", "60"]

Runner = Callable[[str, int, int], Awaitable[None]]  # (method, calls, window)


def request(method: str, id_: int) -> bytes:
    return b'{"jsonrpc":"2.0","method":"%s","params":[10,15],"id":%d}' % (method.encode(), id_)


def check(answer: Any, id_: Any) -> None:
    if answer != {"jsonrpc": "2.0", "id": id_, "result": 25}:
        raise AssertionError(f"unexpected answer {answer!r}")


class Server:
    def __init__(self, directory: Path) -> None:
        (directory / "ws_app.py").write_text(APP)
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by the accepted sockets
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        listener.set_inheritable(True)
        self.port = listener.getsockname()[1]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "python"), os.environ.get("PYTHONPATH", "")])}
        command = [part.replace("{fd}", str(listener.fileno())) for part in UVICORN]
        self.process = subprocess.Popen(
            [*command, "--app-dir", str(directory), "ws_app:app"], pass_fds=(listener.fileno(),), env=env
        )
        listener.close()
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("uvicorn did not start") from None
                time.sleep(0.1)

    def cpu(self) -> float:
        """The server process's CPU time so far (all its threads' ``schedstat``), in seconds."""
        return tree_cpu_ns(self.process.pid) / 1e9

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


# --- bare clients ---------------------------------------------------------------------------------------


async def _post(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes, body: bytes) -> bytes:
    writer.write(head + body)
    header = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in header.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    return await reader.readexactly(length)


def bare_http(port: int) -> Runner:
    async def run(method: str, calls: int, window: int) -> None:
        streams = [await asyncio.open_connection("127.0.0.1", port) for _ in range(window)]
        counter = iter(range(calls))

        async def worker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            for id_ in counter:
                body = request(method, id_)
                head = b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                head += b"Content-Length: %d\r\n\r\n" % len(body)
                check(json.loads(await _post(reader, writer, head, body)), id_)

        try:
            await asyncio.gather(*(worker(*stream) for stream in streams))
        finally:
            for _, writer in streams:
                writer.close()

    return run


def bare_websocket(port: int) -> Runner:
    from websockets.asyncio.client import connect  # noqa: PLC0415 - the end-to-end part only

    async def run(method: str, calls: int, window: int) -> None:
        async with connect(f"ws://127.0.0.1:{port}/", compression=None) as ws:
            sent = 0
            for _ in range(min(window, calls)):
                await ws.send(request(method, sent), text=True)
                sent += 1
            for _ in range(calls):
                answer = json.loads(await ws.recv(decode=False))
                if not 0 <= answer["id"] < calls:
                    raise AssertionError(answer)
                check(answer, answer["id"])
                if sent < calls:
                    await ws.send(request(method, sent), text=True)
                    sent += 1

    return run


# --- rpcwire's clients ----------------------------------------------------------------------------------


def rpcwire_client(make: Callable[[], Awaitable[Any]]) -> Runner:
    async def run(method: str, calls: int, window: int) -> None:
        client = await make()
        counter = iter(range(calls))

        async def worker() -> None:
            for _ in counter:
                if await client.call(method, [10, 15]) != 25:
                    raise AssertionError("unexpected result")

        try:
            await asyncio.gather(*(worker() for _ in range(window)))
        finally:
            await client.close()

    return run


def rpcwire_http(port: int) -> Runner:
    async def make() -> Any:
        return rpcwire.AsyncHttpClient(f"http://127.0.0.1:{port}/")

    return rpcwire_client(make)


def rpcwire_websocket(port: int) -> Runner:
    async def make() -> Any:
        return await rpcwire.AsyncWebSocketClient.connect(f"ws://127.0.0.1:{port}/", compression=None)

    return rpcwire_client(make)


# --- in process: the app alone, no server, no socket ------------------------------------------------------

_HTTP_SCOPE = {
    "type": "http",
    "asgi": {"version": "3.0", "spec_version": "2.4"},
    "http_version": "1.1",
    "server": ("127.0.0.1", 8000),
    "client": ("127.0.0.1", 40000),
    "scheme": "http",
    "method": "POST",
    "root_path": "",
    "path": "/",
    "raw_path": b"/",
    "query_string": b"",
    "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"), (b"content-length", b"55")],
    "state": {},
}
_WS_SCOPE = {
    **_HTTP_SCOPE,
    "type": "websocket",
    "scheme": "ws",
    "headers": [(b"host", b"127.0.0.1:8000"), (b"sec-websocket-version", b"13")],
    "subprotocols": [],
}


def in_process_app(inline: bool = False) -> Any:
    """The app the server runs (``APP``), built here: ``add`` async, ``add_sync`` sync."""
    from rpcwire.http import ASGIApp  # noqa: PLC0415

    async def add(a: int, b: int) -> int:
        return a + b

    def add_sync(a: int, b: int) -> int:
        return a + b

    return ASGIApp(rpcwire.methods({"add": add, "add_sync": add_sync}), websocket=True, run_sync_inline=inline)


async def floor_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The floor of both transports: each message's id read with ``json`` and a constant result answered, no
    JSON-RPC (a POST's body, or each frame on one connection): what the harness and the ASGI calls cost alone."""
    if scope["type"] == "http":
        body = json.loads((await receive())["body"])
        answer = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": 25}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(answer))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})
        return
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    while (event := await receive())["type"] == "websocket.receive":
        frame = json.loads(event["text"])
        await send({"type": "websocket.send", "text": json.dumps({"jsonrpc": "2.0", "id": frame["id"], "result": 25})})


async def post_in_process(app: Any, method: str, calls: int, window: int) -> None:
    """``calls`` POSTs to ``app`` as uvicorn makes them (a ``receive`` giving the body whole), ``window`` at once."""
    counter = iter(range(calls))

    async def worker() -> None:
        for id_ in counter:
            body = request(method, id_)
            sent: list[dict[str, Any]] = []

            async def receive(body: bytes = body) -> dict[str, Any]:
                return {"type": "http.request", "body": body, "more_body": False}

            async def send(message: dict[str, Any], sent: list[dict[str, Any]] = sent) -> None:
                sent.append(message)

            await app(_HTTP_SCOPE, receive, send)
            check(json.loads(sent[-1]["body"]), id_)

    await asyncio.gather(*(worker() for _ in range(window)))


async def websocket_in_process(app: Any, method: str, calls: int, window: int) -> None:
    """``calls`` frames on one connection to ``app`` (a ``receive`` that waits on a queue, as a server's does),
    ``window`` in flight; the connection opened and closed around them."""
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    answers: asyncio.Queue[str] = asyncio.Queue()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "websocket.send":
            answers.put_nowait(message["text"])

    inbox.put_nowait({"type": "websocket.connect"})
    served = asyncio.ensure_future(app(_WS_SCOPE, inbox.get, send))
    sent = 0
    for _ in range(min(window, calls)):
        inbox.put_nowait({"type": "websocket.receive", "text": request(method, sent).decode()})
        sent += 1
    for _ in range(calls):
        answer = json.loads(await answers.get())
        check(answer, answer["id"])
        if sent < calls:
            inbox.put_nowait({"type": "websocket.receive", "text": request(method, sent).decode()})
            sent += 1
    inbox.put_nowait({"type": "websocket.disconnect", "code": 1000})
    await served


IN_PROCESS: dict[str, Callable[[Any, str, int, int], Awaitable[None]]] = {
    "HTTP": post_in_process,
    "WebSocket": websocket_in_process,
}


class _CountingLoop(asyncio.SelectorEventLoop):
    """A loop that counts its turns (``_run_once``) and the callbacks it runs (its ready queue at each turn)."""

    turns = 0
    callbacks = 0

    def _run_once(self) -> None:
        self.turns += 1
        super()._run_once()  # type: ignore[misc]

    def call_soon(self, *args: Any, **kwargs: Any) -> Any:
        self.callbacks += 1
        return super().call_soon(*args, **kwargs)


def loop_turns(app: Any, transport: str, method: str, calls: int, window: int) -> tuple[float, float]:
    """Loop turns and callbacks scheduled per call (untimed: a count, the same on a loaded machine), the warm-up
    and the connection's opening left out by taking the difference of ``calls`` and ``2 * calls``."""

    def count(n: int) -> tuple[int, int]:
        loop = _CountingLoop()
        try:
            loop.run_until_complete(IN_PROCESS[transport](app, method, n, window))
            return loop.turns, loop.callbacks
        finally:
            loop.close()

    one, two = count(calls), count(2 * calls)
    return (two[0] - one[0]) / calls, (two[1] - one[1]) / calls


def in_process(calls: int, repeats: int, window: int) -> list[dict[str, Any]]:
    """Each cell (handler x mode x transport) in process, ``repeats`` runs of ``calls``, interleaved: medians of
    the process's CPU and of the time per call, and the loop's turns and callbacks per call."""
    apps = {"floor": floor_app, "async": in_process_app(), "sync": in_process_app()}
    cells = [
        (handler, mode, transport)
        for handler in apps
        for mode in ("ping-pong", f"{window} in flight")
        for transport in ("HTTP", "WebSocket")
    ]
    wall: dict[tuple[str, str, str], list[float]] = {cell: [] for cell in cells}
    cpu: dict[tuple[str, str, str], list[float]] = {cell: [] for cell in cells}
    for repeat in range(repeats + 1):  # the first, untimed: the warm-up
        for handler, mode, transport in cells:
            method = "add" if handler == "async" else "add_sync"
            width = 1 if mode == "ping-pong" else window
            begun, begun_cpu = time.perf_counter(), time.process_time()
            asyncio.run(IN_PROCESS[transport](apps[handler], method, calls, width))
            if repeat:
                cpu[handler, mode, transport].append((time.process_time() - begun_cpu) / calls * 1e6)
                wall[handler, mode, transport].append((time.perf_counter() - begun) / calls * 1e6)
    rows = []
    for handler, mode, transport in cells:
        method = "add" if handler == "async" else "add_sync"
        turns, callbacks = loop_turns(apps[handler], transport, method, 200, 1 if mode == "ping-pong" else window)
        rows.append(
            {"handler": handler, "mode": mode, "transport": transport}
            | {"us": statistics.median(wall[handler, mode, transport])}
            | {"cpu_us": statistics.median(cpu[handler, mode, transport]), "turns": turns, "callbacks": callbacks}
        )
    return rows


def in_process_report(rows: list[dict[str, Any]], calls: int, repeats: int) -> str:
    by = {(row["handler"], row["mode"], row["transport"]): row for row in rows}
    lines = [
        f"In process (no server, no socket): one ASGIApp (floor: an app that answers each message's id with a"
        f" constant, no JSON-RPC), {calls:,} calls per cell, medians of {repeats} interleaved"
        f" runs; CPU: the process's (all threads); loop turns and callbacks per call counted; Python"
        f" {platform.python_version()}, load average {os.getloadavg()[0]:.2f}.",
        "",
        "| handler | mode | HTTP POST CPU µs/call | WebSocket CPU µs/call | WS / HTTP | HTTP µs/call | WS µs/call"
        " | loop turns HTTP / WS | callbacks HTTP / WS |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for handler, mode in dict.fromkeys((row["handler"], row["mode"]) for row in rows):
        http, ws = by[handler, mode, "HTTP"], by[handler, mode, "WebSocket"]
        lines.append(
            f"| {handler} | {mode} | {http['cpu_us']:.1f} | {ws['cpu_us']:.1f} | {ws['cpu_us'] / http['cpu_us']:.2f}"
            f" | {http['us']:.1f} | {ws['us']:.1f} | {http['turns']:.1f} / {ws['turns']:.1f}"
            f" | {http['callbacks']:.1f} / {ws['callbacks']:.1f} |"
        )
    return "\n".join(lines)


# --- the run --------------------------------------------------------------------------------------------


async def measure(server: Server, runner: Runner, method: str, calls: int, window: int) -> tuple[float, float]:
    """µs per call of ``calls`` calls, after an untimed warm-up of a tenth as many: the time taken, and the
    server's CPU time (which other processes on the machine disturb less)."""
    await runner(method, max(50, calls // 10), window)
    cpu = server.cpu()
    started = time.perf_counter()
    await runner(method, calls, window)
    return (time.perf_counter() - started) / calls * 1e6, (server.cpu() - cpu) / calls * 1e6


def count(cell: str, calls: int) -> None:
    """``calls`` calls of one in-process cell (``HANDLER/TRANSPORT``: async, sync or floor; HTTP or WebSocket;
    ping-pong), nothing else: for callgrind, whose counts of N and 2N calls differ by the cell's instructions for N
    calls, whatever the machine's load."""
    handler, transport = cell.split("/")
    app = floor_app if handler == "floor" else in_process_app()
    asyncio.run(IN_PROCESS[transport](app, "add" if handler == "async" else "add_sync", calls, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per cell and repeat (default 2000)")
    parser.add_argument("--repeats", type=int, default=5, help="repeats, interleaved (default 5)")
    parser.add_argument("--window", type=int, default=16, help="calls in flight in the second mode (default 16)")
    parser.add_argument(
        "--part", default="in-process,end-to-end", help="in-process, end-to-end or both (default: both)"
    )
    parser.add_argument("--count", help="HANDLER/TRANSPORT (async/HTTP, sync/WebSocket...): only --calls calls of it")
    parser.add_argument("--json", type=Path, default=HERE / "websocket_results.json")
    options = parser.parse_args()
    if options.count:
        count(options.count, options.calls)
        return
    parts = options.part.split(",")
    results: dict[str, Any] = {}
    if "in-process" in parts:
        rows = in_process(options.calls, options.repeats, options.window)
        print(in_process_report(rows, options.calls, options.repeats) + "\n", flush=True)
        results["in_process"] = rows
    if "end-to-end" in parts:
        results |= end_to_end(options.calls, options.repeats, options.window)
    options.json.write_text(json.dumps(results, indent=1) + "\n")


def end_to_end(calls: int, repeats: int, window: int) -> dict[str, Any]:
    """The cells under uvicorn, printed as a table; the rows and every sample."""
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as directory:
        server = Server(Path(directory))
        try:
            clients = {
                ("bare", "HTTP"): bare_http(server.port),
                ("bare", "WebSocket"): bare_websocket(server.port),
                ("rpcwire", "HTTP"): rpcwire_http(server.port),
                ("rpcwire", "WebSocket"): rpcwire_websocket(server.port),
            }
            cells = [
                (client, transport, handler, mode)
                for handler in ("async", "sync")
                for mode in ("ping-pong", f"{window} in flight")
                for client in ("bare", "rpcwire")
                for transport in ("HTTP", "WebSocket")
            ]
            samples: dict[tuple[str, str, str, str], list[float]] = {cell: [] for cell in cells}
            cpu: dict[tuple[str, str, str, str], list[float]] = {cell: [] for cell in cells}
            for repeat in range(repeats):
                for cell in cells:
                    client, transport, handler, mode = cell
                    width = 1 if mode == "ping-pong" else window
                    method = "add" if handler == "async" else "add_sync"
                    runner = clients[client, transport]
                    wall, server_cpu = asyncio.run(measure(server, runner, method, calls, width))
                    samples[cell].append(wall)
                    cpu[cell].append(server_cpu)
                print(f"repeat {repeat + 1}/{repeats} done", file=sys.stderr)
        finally:
            server.stop()
    medians = {cell: statistics.median(values) for cell, values in samples.items()}
    cpu_medians = {cell: statistics.median(values) for cell, values in cpu.items()}
    print(f"\nrpcwire ASGIApp under uvicorn {version('uvicorn')} (websockets {version('websockets')}), ")
    print(f"{calls} calls per cell, median of {repeats}; Python {platform.python_version()}\n")
    print("| handler | mode | client | HTTP POST µs/call | WebSocket µs/call | WS / HTTP ", end="")
    print("| server CPU µs/call, HTTP | server CPU µs/call, WS | WS / HTTP |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = []
    for handler in ("async", "sync"):
        for mode in ("ping-pong", f"{window} in flight"):
            for client in ("bare", "rpcwire"):
                http = medians[client, "HTTP", handler, mode]
                ws = medians[client, "WebSocket", handler, mode]
                http_cpu = cpu_medians[client, "HTTP", handler, mode]
                ws_cpu = cpu_medians[client, "WebSocket", handler, mode]
                print(f"| {handler} | {mode} | {client} | {http:.1f} | {ws:.1f} | {ws / http:.2f} ", end="")
                print(f"| {http_cpu:.1f} | {ws_cpu:.1f} | {ws_cpu / http_cpu if http_cpu else float('nan'):.2f} |")
                rows.append(
                    {"handler": handler, "mode": mode, "client": client, "http_us": http, "websocket_us": ws}
                    | {"http_server_cpu_us": http_cpu, "websocket_server_cpu_us": ws_cpu}
                )
    print(f"\nLoad average before and after: {load:.2f} / {os.getloadavg()[0]:.2f}", flush=True)
    return {"rows": rows, "samples": {" / ".join(cell): values for cell, values in samples.items()}}


if __name__ == "__main__":
    main()
