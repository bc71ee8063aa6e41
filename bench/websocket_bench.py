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
handler. Every answer is checked. Writes bench/websocket_results.json. No assertion on time.
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
from websockets.asyncio.client import connect

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
        """The server process's CPU time so far (user and system, all its threads), in seconds."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

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


# --- the run --------------------------------------------------------------------------------------------


async def measure(server: Server, runner: Runner, method: str, calls: int, window: int) -> tuple[float, float]:
    """µs per call of ``calls`` calls, after an untimed warm-up of a tenth as many: the time taken, and the
    server's CPU time (which other processes on the machine disturb less)."""
    await runner(method, max(50, calls // 10), window)
    cpu = server.cpu()
    started = time.perf_counter()
    await runner(method, calls, window)
    return (time.perf_counter() - started) / calls * 1e6, (server.cpu() - cpu) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per cell and repeat (default 2000)")
    parser.add_argument("--repeats", type=int, default=5, help="repeats, interleaved (default 5)")
    parser.add_argument("--window", type=int, default=16, help="calls in flight in the second mode (default 16)")
    parser.add_argument("--json", type=Path, default=HERE / "websocket_results.json")
    options = parser.parse_args()
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
                for mode in ("ping-pong", f"{options.window} in flight")
                for client in ("bare", "rpcwire")
                for transport in ("HTTP", "WebSocket")
            ]
            samples: dict[tuple[str, str, str, str], list[float]] = {cell: [] for cell in cells}
            cpu: dict[tuple[str, str, str, str], list[float]] = {cell: [] for cell in cells}
            for repeat in range(options.repeats):
                for cell in cells:
                    client, transport, handler, mode = cell
                    window = 1 if mode == "ping-pong" else options.window
                    method = "add" if handler == "async" else "add_sync"
                    runner = clients[client, transport]
                    wall, server_cpu = asyncio.run(measure(server, runner, method, options.calls, window))
                    samples[cell].append(wall)
                    cpu[cell].append(server_cpu)
                print(f"repeat {repeat + 1}/{options.repeats} done", file=sys.stderr)
        finally:
            server.stop()
    medians = {cell: statistics.median(values) for cell, values in samples.items()}
    cpu_medians = {cell: statistics.median(values) for cell, values in cpu.items()}
    print(f"\nrpcwire ASGIApp under uvicorn {version('uvicorn')} (websockets {version('websockets')}), ")
    print(f"{options.calls} calls per cell, median of {options.repeats}; Python {platform.python_version()}\n")
    print("| handler | mode | client | HTTP POST µs/call | WebSocket µs/call | WS / HTTP ", end="")
    print("| server CPU µs/call, HTTP | server CPU µs/call, WS | WS / HTTP |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = []
    for handler in ("async", "sync"):
        for mode in ("ping-pong", f"{options.window} in flight"):
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
    options.json.write_text(
        json.dumps({"rows": rows, "samples": {" / ".join(cell): values for cell, values in samples.items()}}, indent=1)
        + "\n"
    )


if __name__ == "__main__":
    main()
