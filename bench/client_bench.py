"""The clients against one server, side by side in one run: `make bench-client` (or `.venv/bin/python
bench/client_bench.py [--calls N] [--repeats R] [--only pipes,http]`).

Pipes: every client talks to the same server process (bench/pipe_server.py rpcwire: the native sequential
`serve`, an echo handler) on real OS pipes; ping-pong runs client and server on one CPU (as bench/run.py's
ping-pong does, so that the figure is the transports' cost, not the VM's wake-up of an idle vCPU).
- floor: `os.write` one request and `os.read` its answer, no JSON on the client (the raw pipe floor);
- orjson: a hand-written sync client (`orjson.dumps`, one `write` + `flush`, `readline`, `orjson.loads`,
  id checked); pipelined with a reader thread and a dict of `threading.Event`s, as one would write it;
- pylsp: python-lsp-jsonrpc's `Endpoint` (its futures, its reader thread) over newline framing;
- rpcwire / rpcwire.pure: `Client.spawn` and `AsyncClient.spawn`.
Pipelined: 16 threads (or 64 tasks) calling at once. HTTP: the server is rpcwire's ASGI app under uvicorn
(one worker); the clients are rpcwire's `HttpClient` and `AsyncHttpClient`, a hand-written `http.client` +
orjson client, and `requests.Session`. MCP: the SDK's own `MCPServer` with one `echo` tool over stdio,
called with `tools/call` by the SDK's `ClientSession` and by `rpcwire.AsyncClient`. Every figure is a
median over the repeats; CPU is the client process's CPU time per call.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import requests
import rpcwire
import rpcwire.pure
from async_orjson_client import AsyncOrjsonClient
from implementations import _LineReader, _LineWriter
from mcp import types as mcp_types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from pylsp_jsonrpc.endpoint import Endpoint

HERE = Path(__file__).resolve().parent
SERVER = [sys.executable, str(HERE / "pipe_server.py"), "rpcwire"]
PARAMS = {"text": "hello", "n": 1}
THREADS = 16
TASKS = 64


def request_line(i: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"method":"echo","params":{"text":"hello","n":%d}}\n' % (i, i)


# --- the clients: each offers call(params) -> result, and close() -------------------------------


class FloorClient:
    """Raw pipe I/O, no JSON: the floor every pipe client is compared with."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.wfd, self.rfd = self.process.stdin.fileno(), self.process.stdout.fileno()
        self.next_id = 0

    def call(self, params: Any) -> Any:
        self.next_id += 1
        os.write(self.wfd, request_line(self.next_id))
        data = os.read(self.rfd, 65536)
        while not data.endswith(b"\n"):
            data += os.read(self.rfd, 65536)
        return data

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


class OrjsonClient:
    """A hand-written client: sync calls read their own answer; with `threaded`, a reader thread matches ids."""

    def __init__(self, threaded: bool = False) -> None:
        self.process = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        self.lock = threading.Lock()
        self.ids = iter(range(1, 1 << 62))
        self.pending: dict[int, list[Any]] = {}
        if threaded:
            threading.Thread(target=self.read_all, daemon=True).start()
            self.call = self.call_threaded  # type: ignore[method-assign]

    def call(self, params: Any) -> Any:
        id_ = next(self.ids)
        self.stdin.write(orjson.dumps({"jsonrpc": "2.0", "id": id_, "method": "echo", "params": params}) + b"\n")
        self.stdin.flush()
        answer = orjson.loads(self.stdout.readline())
        assert answer["id"] == id_
        return answer["result"]

    def call_threaded(self, params: Any) -> Any:
        event = threading.Event()
        slot: list[Any] = [event]
        with self.lock:
            id_ = next(self.ids)
            self.pending[id_] = slot
            self.stdin.write(orjson.dumps({"jsonrpc": "2.0", "id": id_, "method": "echo", "params": params}) + b"\n")
            self.stdin.flush()
        event.wait()
        return slot[1]["result"]

    def read_all(self) -> None:
        for line in self.stdout:
            answer = orjson.loads(line)
            slot = self.pending.pop(answer["id"])
            slot.append(answer)
            slot[0].set()

    def close(self) -> None:
        self.stdin.close()
        self.process.wait()


class PylspClient:
    """python-lsp-jsonrpc's `Endpoint` as a client (its requests return futures), newline-framed."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.endpoint = Endpoint({}, _LineWriter(self.process.stdin).write)
        reader = _LineReader(self.process.stdout)
        threading.Thread(target=reader.listen, args=(self.endpoint.consume,), daemon=True).start()

    def call(self, params: Any) -> Any:
        return self.endpoint.request("echo", params).result()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


class RpcwireClient:
    def __init__(self, impl: Any) -> None:
        self.client = impl.Client.spawn(SERVER)
        self.process = self.client._process

    def call(self, params: Any) -> Any:
        return self.client.call("echo", params)

    def close(self) -> None:
        self.client.close()


PIPE_CLIENTS: dict[str, Callable[[], Any]] = {
    "floor (os.read/os.write)": FloorClient,
    "orjson, hand-written": OrjsonClient,
    "pylsp-jsonrpc Endpoint": PylspClient,
    "rpcwire.Client": lambda: RpcwireClient(rpcwire),
    "rpcwire.pure.Client": lambda: RpcwireClient(rpcwire.pure),
}
PIPELINED_CLIENTS: dict[str, Callable[[], Any]] = {
    "orjson, hand-written": lambda: OrjsonClient(threaded=True),
    "pylsp-jsonrpc Endpoint": PylspClient,
    "rpcwire.Client": lambda: RpcwireClient(rpcwire),
    "rpcwire.pure.Client": lambda: RpcwireClient(rpcwire.pure),
}
try:
    import uvloop
except ImportError:  # (no Windows build; an interpreter it has no wheel for)
    uvloop = None
# The event loops the async clients run on, each client on each, side by side: asyncio's own, and uvloop's.
LOOPS: dict[str, Callable[[Any], Any]] = {"asyncio": asyncio.run}
if uvloop is not None:
    LOOPS["uvloop"] = uvloop.run
HAND_ASYNC = "asyncio + orjson, hand-written"
ASYNC_CLIENTS = {
    HAND_ASYNC: AsyncOrjsonClient,
    "rpcwire.AsyncClient": rpcwire.AsyncClient,
    "rpcwire.pure.AsyncClient": rpcwire.pure.AsyncClient,
}


# --- measuring -----------------------------------------------------------------------------------


@contextlib.contextmanager
def one_cpu(pid: int) -> Iterator[None]:
    mask = os.sched_getaffinity(0)
    cpu = {max(mask)}
    os.sched_setaffinity(pid, cpu)
    os.sched_setaffinity(0, cpu)
    try:
        yield
    finally:
        os.sched_setaffinity(0, mask)


def latency_figures(latencies_ns: list[int], cpu_seconds: float) -> dict[str, float]:
    """p50 and p99 in µs of one call after the other, and the client's CPU µs per call."""
    latencies_ns.sort()
    count = len(latencies_ns)
    return {
        "p50": latencies_ns[count // 2] / 1e3,
        "p99": latencies_ns[int(count * 0.99)] / 1e3,
        "cpu": cpu_seconds / count * 1e6,
    }


def ping_pong(client: Any, calls: int) -> dict[str, float]:
    client.call(PARAMS)  # warm up: the server has started
    latencies = []
    clock = time.perf_counter_ns
    cpu = time.process_time()
    for _ in range(calls):
        start = clock()
        client.call(PARAMS)
        latencies.append(clock() - start)
    return latency_figures(latencies, time.process_time() - cpu)


def pipelined(call: Callable[[Any], Any], calls: int) -> dict[str, float]:
    call(PARAMS)
    per_thread = calls // THREADS

    def run(_: int) -> None:
        for _ in range(per_thread):
            call(PARAMS)

    cpu = time.process_time()
    start = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(run, range(THREADS)))
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    done = per_thread * THREADS
    return {"calls/s": done / seconds, "cpu": cpu / done * 1e6}


async def one_after_another(call: Callable[[], Any], calls: int) -> dict[str, float]:
    """``calls`` awaited one after the other: p50, p99, CPU (see ``latency_figures``)."""
    latencies = []
    cpu = time.process_time()
    for _ in range(calls):
        start = time.perf_counter_ns()
        await call()
        latencies.append(time.perf_counter_ns() - start)
    return latency_figures(latencies, time.process_time() - cpu)


async def in_flight(call: Callable[[], Any], calls: int, at_once: int) -> dict[str, float]:
    """``calls`` with up to ``at_once`` in flight: calls/s, and the client's CPU µs per call."""
    slots = asyncio.Semaphore(at_once)

    async def one() -> None:
        async with slots:
            await call()

    cpu = time.process_time()
    start = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(calls)))
    seconds = time.perf_counter() - start
    return {"calls/s": calls / seconds, "cpu": (time.process_time() - cpu) / calls * 1e6}


async def async_run(cls: Any, calls: int, concurrent: bool) -> dict[str, float]:
    client = await cls.spawn(SERVER)
    try:
        await client.call("echo", PARAMS)
        echo = functools.partial(client.call, "echo", PARAMS)
        if concurrent:
            return await in_flight(echo, calls, TASKS)
        with one_cpu(client._process.pid):
            return await one_after_another(echo, calls)
    finally:
        await client.close()


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def print_tables(
    title: str,
    rows: dict[str, list[dict[str, float]]],
    concurrent_title: str,
    concurrent: dict[str, list[dict[str, float]]],
    floor: float | None = None,
) -> None:
    """The ping-pong table (with the ratio to ``floor`` when given) and the concurrent one, as markdown."""
    ratio = "" if floor is None else " x floor (p50) |"
    print(f"\n### {title}\n\n| client | p50 µs | p99 µs |{ratio} client CPU µs/call |")
    print("| --- | ---: | ---: |" + (" ---: |" if floor else "") + " ---: |")
    for name, runs in rows.items():
        m = median_of(runs)
        times = f"| {name} | {m['p50']:.1f} | {m['p99']:.1f} |"
        print(times + ("" if floor is None else f" {m['p50'] / floor:.2f} |") + f" {m['cpu']:.1f} |")
    print(f"\n### {concurrent_title}\n\n| client | calls/s | client CPU µs/call |\n| --- | ---: | ---: |")
    for name, runs in concurrent.items():
        m = median_of(runs)
        print(f"| {name} | {m['calls/s']:,.0f} | {m['cpu']:.1f} |")


# --- the baseline build (--baseline DIR): its clients in a process of their own -------------------------

BASELINE_RUNS = ("sync-ping-pong", "async-ping-pong", "sync-pipelined", "async-concurrent")
_SERVER_PYTHONPATH = "CLIENT_BENCH_SERVER_PYTHONPATH"  # the worker's servers import this checkout's rpcwire


def worker_run(kind: str, calls: int) -> dict[str, float]:
    """One measurement of ``kind`` (``BASELINE_RUNS``) with the ``rpcwire`` this process imported."""
    if kind == "sync-ping-pong":
        client = RpcwireClient(rpcwire)
        try:
            with one_cpu(client.process.pid):
                return ping_pong(client, calls)
        finally:
            client.close()
    if kind == "sync-pipelined":
        client = RpcwireClient(rpcwire)
        try:
            return pipelined(client.call, calls)
        finally:
            client.close()
    return asyncio.run(async_run(rpcwire.AsyncClient, calls, concurrent=kind == "async-concurrent"))


def baseline_run(baseline: str, kind: str, calls: int) -> dict[str, float]:
    """``worker_run`` in a process that imports the baseline build (two native modules cannot share one); its
    server is this checkout's, as every other client's."""
    pythonpath = os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([baseline, pythonpath]), _SERVER_PYTHONPATH: pythonpath}
    command = [sys.executable, __file__, "--worker", kind, "--calls", str(calls)]
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, check=True, timeout=600)
    figures: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return figures


def bench_pipes(calls: int, repeats: int, baseline: str | None) -> None:
    rows: dict[str, list[dict[str, float]]] = {}
    concurrent: dict[str, list[dict[str, float]]] = {}
    for _ in range(repeats):  # interleaved: each repeat runs every client once
        for name, make in PIPE_CLIENTS.items():
            client = make()
            try:
                with one_cpu(client.process.pid):
                    rows.setdefault(name, []).append(ping_pong(client, calls))
            finally:
                client.close()
            if baseline and name == "rpcwire.Client":
                rows.setdefault(f"{name}@baseline", []).append(baseline_run(baseline, "sync-ping-pong", calls))
        for loop, run in LOOPS.items():
            for name, cls in ASYNC_CLIENTS.items():
                rows.setdefault(f"{name} ({loop})", []).append(run(async_run(cls, calls, concurrent=False)))
        for name in ASYNC_CLIENTS:
            if baseline and name == "rpcwire.AsyncClient":
                rows.setdefault(f"{name}@baseline", []).append(baseline_run(baseline, "async-ping-pong", calls))
        for name, make in PIPELINED_CLIENTS.items():
            client = make()
            try:
                concurrent.setdefault(name, []).append(pipelined(client.call, calls * 2))
            finally:
                client.close()
            if baseline and name == "rpcwire.Client":
                concurrent.setdefault(f"{name}@baseline", []).append(
                    baseline_run(baseline, "sync-pipelined", calls * 2)
                )
        for loop, run in LOOPS.items():
            for name, cls in ASYNC_CLIENTS.items():
                together = run(async_run(cls, calls * 2, concurrent=True))
                concurrent.setdefault(f"{name} ({loop})", []).append(together)
        for name in ASYNC_CLIENTS:
            if baseline and name == "rpcwire.AsyncClient":
                concurrent.setdefault(f"{name}@baseline", []).append(
                    baseline_run(baseline, "async-concurrent", calls * 2)
                )
    print_tables(
        f"Pipes: ping-pong ({calls} calls, one CPU), median of {repeats}",
        rows,
        f"Pipes: {THREADS} threads (async: {TASKS} tasks) calling at once ({calls * 2} calls)",
        concurrent,
        floor=median_of(rows["floor (os.read/os.write)"])["p50"],
    )
    print_async_ratios(rows, concurrent)


def print_async_ratios(rows: dict[str, list[dict[str, float]]], concurrent: dict[str, list[dict[str, float]]]) -> None:
    """Each async client against the hand-written asyncio + orjson client on the same loop: the median over the
    repeats of each repeat's ratio (the two measured one after the other in that repeat), client CPU per call and
    ping-pong p50."""
    print("\n### Async clients against the hand-written asyncio + orjson client on the same loop (median of ratios)\n")
    print("| client | loop | ping-pong CPU | ping-pong p50 | at once: CPU | at once: calls/s |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for loop in LOOPS:
        hand, hand_together = rows[f"{HAND_ASYNC} ({loop})"], concurrent[f"{HAND_ASYNC} ({loop})"]
        for name in ASYNC_CLIENTS:
            if name == HAND_ASYNC:
                continue
            ours, together = rows[f"{name} ({loop})"], concurrent[f"{name} ({loop})"]

            def ratio(mine: list[dict[str, float]], theirs: list[dict[str, float]], key: str) -> float:
                return statistics.median(m[key] / t[key] for m, t in zip(mine, theirs, strict=True))

            figures = [ratio(ours, hand, "cpu"), ratio(ours, hand, "p50"), ratio(together, hand_together, "cpu")]
            figures.append(ratio(together, hand_together, "calls/s"))
            print(f"| {name} | {loop} | " + " | ".join(f"{figure:.3f}" for figure in figures) + " |")


# --- HTTP ----------------------------------------------------------------------------------------

APP = """
import rpcwire
from rpcwire.http import ASGIApp
app = ASGIApp(lambda method, params: params)
"""


@contextlib.contextmanager
def uvicorn_server(tmp: Path) -> Iterator[str]:
    (tmp / "client_bench_app.py").write_text(APP)
    listener = socket.socket()
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted connections
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    port = listener.getsockname()[1]
    command = [sys.executable, "-m", "uvicorn", "--fd", str(listener.fileno()), "--app-dir", str(tmp)]
    command += ["--log-level", "warning", "--no-access-log", "client_bench_app:app"]
    process = subprocess.Popen(command, pass_fds=(listener.fileno(),))
    listener.close()
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                rpcwire.HttpClient(f"http://127.0.0.1:{port}/rpc", timeout=2).call("echo", [1])
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/rpc"
    finally:
        process.terminate()
        process.wait(30)


class HandHttpClient:
    """http.client + orjson, one keep-alive connection per thread."""

    def __init__(self, url: str) -> None:
        self.host, self.port = urllib.parse.urlsplit(url).hostname, urllib.parse.urlsplit(url).port
        self.local = threading.local()
        self.ids = iter(range(1, 1 << 62))

    def call(self, params: Any) -> Any:
        connection = getattr(self.local, "connection", None)
        if connection is None:
            connection = self.local.connection = http.client.HTTPConnection(self.host, self.port)
        id_ = next(self.ids)
        body = orjson.dumps({"jsonrpc": "2.0", "id": id_, "method": "echo", "params": params})
        connection.request("POST", "/rpc", body, {"Content-Type": "application/json"})
        answer = orjson.loads(connection.getresponse().read())
        assert answer["id"] == id_
        return answer["result"]


class RequestsClient:
    def __init__(self, url: str) -> None:
        self.url = url
        self.local = threading.local()
        self.requests = requests
        self.ids = iter(range(1, 1 << 62))

    def call(self, params: Any) -> Any:
        session = getattr(self.local, "session", None)
        if session is None:
            session = self.local.session = self.requests.Session()
        id_ = next(self.ids)
        answer = session.post(self.url, json={"jsonrpc": "2.0", "id": id_, "method": "echo", "params": params}).json()
        assert answer["id"] == id_
        return answer["result"]


def bench_http(calls: int, repeats: int, tmp: Path) -> None:
    rows: dict[str, list[dict[str, float]]] = {}
    concurrent: dict[str, list[dict[str, float]]] = {}
    with uvicorn_server(tmp) as url:
        clients: dict[str, Callable[[], Any]] = {
            "http.client + orjson, hand-written": lambda: HandHttpClient(url),
            "requests.Session": lambda: RequestsClient(url),
            "rpcwire.HttpClient": lambda: rpcwire.HttpClient(url),
        }
        for _ in range(repeats):
            for name, make in clients.items():
                client = make()
                call = (lambda p, c=client: c.call("echo", p)) if name.startswith("rpcwire") else client.call
                rows.setdefault(name, []).append(ping_pong(type("C", (), {"call": staticmethod(call)})(), calls))
                concurrent.setdefault(name, []).append(pipelined(call, calls))

            async def async_rows() -> tuple[dict[str, float], dict[str, float]]:
                async with rpcwire.AsyncHttpClient(url) as client:
                    echo = functools.partial(client.call, "echo", PARAMS)
                    await echo()
                    return await one_after_another(echo, calls), await in_flight(echo, calls, calls)

            sequential, together = asyncio.run(async_rows())
            rows.setdefault("rpcwire.AsyncHttpClient", []).append(sequential)
            concurrent.setdefault("rpcwire.AsyncHttpClient (16 connections)", []).append(together)
    print_tables(
        f"HTTP: ping-pong against rpcwire's ASGI app under uvicorn ({calls} calls), median of {repeats}",
        rows,
        f"HTTP: {THREADS} threads (async: one task a call, 16 connections) at once ({calls} calls)",
        concurrent,
    )


# --- MCP: the SDK's own server, called by the SDK's client session and by rpcwire's clients -----------

MCP_SERVER = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("echo")


@server.tool()
def echo(text: str, n: int) -> dict:
    return {"text": text, "n": n}


server.run("stdio")
"""


def mcp_initialize() -> dict[str, Any]:
    client = {"name": "client_bench", "version": "0"}
    return {"protocolVersion": mcp_types.LATEST_PROTOCOL_VERSION, "capabilities": {}, "clientInfo": client}


async def mcp_sdk_run(script: Path, calls: int) -> tuple[dict[str, float], dict[str, float]]:
    parameters = StdioServerParameters(command=sys.executable, args=[str(script)])
    async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await mcp_measure(lambda: session.call_tool("echo", {"text": "hello", "n": 1}), calls)


async def mcp_rpcwire_run(script: Path, calls: int) -> tuple[dict[str, float], dict[str, float]]:
    async with await rpcwire.AsyncClient.spawn([sys.executable, str(script)], timeout=60) as client:
        await client.call("initialize", mcp_initialize())
        await client.notify("notifications/initialized")
        arguments = {"name": "echo", "arguments": {"text": "hello", "n": 1}}
        return await mcp_measure(lambda: client.call("tools/call", arguments), calls)


async def mcp_measure(call: Callable[[], Any], calls: int) -> tuple[dict[str, float], dict[str, float]]:
    """Sequential calls (p50, p99, CPU), then ``calls`` with 16 in flight at once (calls/s, CPU)."""
    await call()
    return await one_after_another(call, calls), await in_flight(call, calls, THREADS)


def bench_mcp(calls: int, repeats: int, tmp: Path) -> None:
    script = tmp / "mcp_echo_server.py"
    script.write_text(MCP_SERVER)
    rows: dict[str, list[dict[str, float]]] = {}
    concurrent: dict[str, list[dict[str, float]]] = {}
    for _ in range(repeats):
        for name, run in (("mcp ClientSession", mcp_sdk_run), ("rpcwire.AsyncClient", mcp_rpcwire_run)):
            sequential, together = asyncio.run(run(script, calls))
            rows.setdefault(name, []).append(sequential)
            concurrent.setdefault(name, []).append(together)
    print_tables(
        f"MCP: tools/call against the SDK's own MCPServer over stdio ({calls} calls), median of {repeats}",
        rows,
        f"MCP: {THREADS} tools/call in flight at once ({calls} calls)",
        concurrent,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5_000, help="calls per measurement (default 5,000)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats, interleaved (default 3)")
    parser.add_argument("--only", default="pipes,http,mcp", help="any of pipes, http, mcp (default: all)")
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        help="another build (DIR holds its rpcwire package with its native module): its Client and AsyncClient "
        "measured beside the others over pipes, as rpcwire.Client@baseline and rpcwire.AsyncClient@baseline",
    )
    parser.add_argument("--worker", choices=BASELINE_RUNS, help=argparse.SUPPRESS)  # baseline_run's process
    args = parser.parse_args()
    if args.worker:
        os.environ["PYTHONPATH"] = os.environ.pop(_SERVER_PYTHONPATH, "")
        print(json.dumps(worker_run(args.worker, args.calls)))
        return
    print(f"rpcwire {rpcwire.__file__} native={rpcwire.NATIVE}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    if args.baseline:
        print(f"baseline: {Path(args.baseline).resolve()}")
    if "pipes" in args.only:
        bench_pipes(args.calls, args.repeats, args.baseline and str(Path(args.baseline).resolve()))
    if "http" in args.only:
        with tempfile.TemporaryDirectory() as tmp:
            bench_http(max(500, args.calls // 5), args.repeats, Path(tmp))
    if "mcp" in args.only:
        with tempfile.TemporaryDirectory() as tmp:
            bench_mcp(max(200, args.calls // 25), args.repeats, Path(tmp))


if __name__ == "__main__":
    main()
