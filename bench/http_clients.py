"""The HTTP clients against their peers, on one server: ``make bench-http`` prints this table (``http_bench.py
--part clients``), or ``.venv/bin/python bench/http_clients.py [--calls N] [--repeats R]``.

One uvicorn process on 127.0.0.1 (a socket this script binds, an ephemeral port, ``TCP_NODELAY``, handed over as
a descriptor) serves ``http_apps:echo_asgi``: a request's params answered as its result, the least a server does,
the same for every client. Each client makes one call at a time on one keep-alive connection, the way its users
write a JSON-RPC call: rpcwire's ``HttpClient.call`` and ``AsyncHttpClient.call``; for the peers, the request
encoded with ``json`` (its id counted), POSTed, the status checked, the answer decoded and its id and result
checked (``requests.Session``, ``httpx.Client``, ``httpx.AsyncClient``, ``aiohttp.ClientSession``, and
``http.client`` by hand: the least a sync Python client does). Blocks of N calls, every client once per repeat
in an order that rotates, after an untimed warm-up; the table gives the medians per call of the client's CPU
time (this process's, all threads: the server runs in another), the time taken, and the server's CPU (its
threads' ``schedstat``), with each client's ratio to rpcwire's of its kind (sync or async).

``--count CLIENT --calls N --port P`` makes N calls of one client against a server already running on port P and
nothing else, for instruction counts: ``valgrind --tool=callgrind`` of N and of 2N calls, the difference over N
is the client's instructions per call, free of the machine's load (bench/README.md, "HTTP clients").
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PARAMS = [10, 15]
HEADERS = {"Content-Type": "application/json"}
UVICORN = [sys.executable, "-m", "uvicorn", "--fd", "{fd}", "--workers", "1", "--no-access-log"]
UVICORN += ["--log-level", "warning", "--timeout-keep-alive", "60", "http_apps:echo_asgi"]

Sync = Callable[[], Any]  # one call, returns its result
Async = Callable[[], Awaitable[Any]]


def tree_cpu_ns(pid: int) -> int:
    """CPU time (ns) of a process and its descendants, every thread's ``schedstat`` summed (finer than /proc's
    clock ticks)."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                total += int((task / "schedstat").read_text().split()[0])
                pending += [int(child) for child in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


class Server:
    """``echo_asgi`` under uvicorn on an ephemeral port, stopped by :meth:`stop`."""

    def __init__(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by the accepted sockets
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        listener.set_inheritable(True)
        self.port = listener.getsockname()[1]
        paths = [str(ROOT / "python"), str(HERE), os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        command = [part.replace("{fd}", str(listener.fileno())) for part in UVICORN]
        self.process = subprocess.Popen(command, pass_fds=(listener.fileno(),), env=env, cwd=HERE)
        listener.close()
        deadline = time.monotonic() + 60
        while True:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                connection.request("POST", "/", body=b'{"jsonrpc":"2.0","method":"echo","id":0}', headers=HEADERS)
                connection.getresponse().read()
                connection.close()
                return
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop()
                    raise RuntimeError("uvicorn did not start") from None
                time.sleep(0.1)

    def cpu_ns(self) -> int:
        return tree_cpu_ns(self.process.pid)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _answer(raw: bytes | str, id_: int) -> Any:
    answer = json.loads(raw)
    if answer.get("id") != id_ or "result" not in answer:
        raise AssertionError(f"unexpected answer {answer!r}")
    return answer["result"]


def _body(id_: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": "echo", "params": PARAMS, "id": id_}).encode()


# --- the clients: each a factory of (one call, close) ------------------------------------------------------


def rpcwire_sync(url: str) -> tuple[Sync, Callable[[], Any]]:
    import rpcwire  # noqa: PLC0415

    client = rpcwire.HttpClient(url)
    return lambda: client.call("echo", PARAMS), client.close


def http_client_by_hand(url: str) -> tuple[Sync, Callable[[], Any]]:
    parts = url.split("/")[2].split(":")
    connection = http.client.HTTPConnection(parts[0], int(parts[1]), timeout=30)
    ids = iter(range(1, 1 << 62))

    def call() -> Any:
        id_ = next(ids)
        connection.request("POST", "/", body=_body(id_), headers=HEADERS)
        response = connection.getresponse()
        raw = response.read()
        if response.status != 200:
            raise AssertionError(response.status)
        return _answer(raw, id_)

    return call, connection.close


def requests_session(url: str) -> tuple[Sync, Callable[[], Any]]:
    import requests  # noqa: PLC0415

    session = requests.Session()
    ids = iter(range(1, 1 << 62))

    def call() -> Any:
        id_ = next(ids)
        response = session.post(url, data=_body(id_), headers=HEADERS)
        response.raise_for_status()
        return _answer(response.content, id_)

    return call, session.close


def httpx_sync(url: str) -> tuple[Sync, Callable[[], Any]]:
    import httpx  # noqa: PLC0415

    client = httpx.Client()
    ids = iter(range(1, 1 << 62))

    def call() -> Any:
        id_ = next(ids)
        response = client.post(url, content=_body(id_), headers=HEADERS)
        response.raise_for_status()
        return _answer(response.content, id_)

    return call, client.close


async def rpcwire_async(url: str) -> tuple[Async, Callable[[], Awaitable[Any]]]:
    import rpcwire  # noqa: PLC0415

    client = rpcwire.AsyncHttpClient(url)
    return lambda: client.call("echo", PARAMS), client.close


async def httpx_async(url: str) -> tuple[Async, Callable[[], Awaitable[Any]]]:
    import httpx  # noqa: PLC0415

    client = httpx.AsyncClient()
    ids = iter(range(1, 1 << 62))

    async def call() -> Any:
        id_ = next(ids)
        response = await client.post(url, content=_body(id_), headers=HEADERS)
        response.raise_for_status()
        return _answer(response.content, id_)

    return call, client.aclose


async def aiohttp_session(url: str) -> tuple[Async, Callable[[], Awaitable[Any]]]:
    import aiohttp  # noqa: PLC0415

    session = aiohttp.ClientSession()
    ids = iter(range(1, 1 << 62))

    async def call() -> Any:
        id_ = next(ids)
        async with session.post(url, data=_body(id_), headers=HEADERS) as response:
            response.raise_for_status()
            return _answer(await response.read(), id_)

    return call, session.close


# name: (kind, factory); an async factory is a coroutine function, run on the loop that runs the client
CLIENTS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "rpcwire.HttpClient": ("sync", rpcwire_sync),
    "http.client by hand": ("sync", http_client_by_hand),
    "requests.Session": ("sync", requests_session),
    "httpx.Client": ("sync", httpx_sync),
    "rpcwire.AsyncHttpClient": ("async", rpcwire_async),
    "httpx.AsyncClient": ("async", httpx_async),
    "aiohttp.ClientSession": ("async", aiohttp_session),
}
REFERENCE = {"sync": "rpcwire.HttpClient", "async": "rpcwire.AsyncHttpClient"}


def available() -> dict[str, tuple[str, Callable[[str], Any]]]:
    """The clients whose library imports (a missing peer is left out, and said so on stderr)."""
    chosen = {}
    for name, entry in CLIENTS.items():
        library = name.split(".")[0]
        if library not in ("rpcwire", "http"):
            try:
                __import__(library)
            except ImportError:
                sys.stderr.write(f"{name}: {library} is not installed, left out\n")
                continue
        chosen[name] = entry
    return chosen


def run(calls: int, repeats: int) -> dict[str, Any]:
    """Every available client, ``repeats`` blocks of ``calls`` each, interleaved; medians per call."""
    clients = available()
    server = Server()
    loop = asyncio.new_event_loop()
    url = f"http://127.0.0.1:{server.port}/"
    made: dict[str, tuple[Any, Any]] = {}
    samples: dict[str, dict[str, list[float]]] = {name: {"cpu": [], "wall": [], "server": []} for name in clients}
    try:
        for name, (kind, factory) in clients.items():  # an async client is made on the loop that runs it
            made[name] = factory(url) if kind == "sync" else loop.run_until_complete(factory(url))
        names = list(clients)

        def block(name: str, count: int) -> None:
            call = made[name][0]
            if clients[name][0] == "sync":
                for _ in range(count):
                    if call() != PARAMS:
                        raise AssertionError(name)
            else:

                async def many() -> None:
                    for _ in range(count):
                        if await call() != PARAMS:
                            raise AssertionError(name)

                loop.run_until_complete(many())

        for name in names:
            block(name, max(50, calls // 5))  # warm-up: connections open, code paths taken
        for repeat in range(repeats):
            for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
                cpu, server_cpu, wall = time.process_time(), server.cpu_ns(), time.perf_counter()
                block(name, calls)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                samples[name]["server"].append((server.cpu_ns() - server_cpu) / calls / 1e3)
                samples[name]["cpu"].append(cpu / calls * 1e6)
                samples[name]["wall"].append(wall / calls * 1e6)
            sys.stderr.write(f"clients: repeat {repeat + 1}/{repeats}\n")
    finally:
        for _, close in made.values():
            closed = close()
            if asyncio.iscoroutine(closed):
                loop.run_until_complete(closed)
        loop.close()
        server.stop()
    medians = {
        name: {kind: statistics.median(values) for kind, values in sample.items()} for name, sample in samples.items()
    }
    return {
        "calls": calls,
        "repeats": repeats,
        "kinds": {name: clients[name][0] for name in clients},
        "medians": medians,
        "samples": samples,
        "versions": versions(),
    }


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in ("uvicorn", "httpx", "requests", "aiohttp"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def report(result: dict[str, Any]) -> str:
    medians, kinds = result["medians"], result["kinds"]
    v = result["versions"]
    lines = [
        f"HTTP clients, one call at a time on one keep-alive connection, against one uvicorn {v['uvicorn']}"
        f" (`echo_asgi`); medians of {result['repeats']} blocks of {result['calls']:,} calls, interleaved;"
        f" Python {v['python']}, httpx {v['httpx']}, requests {v['requests']}, aiohttp {v['aiohttp']}."
        " Ratios: the client's figure over rpcwire's of its kind (> 1: rpcwire is ahead).",
        "",
        "| client | client CPU µs/call | ratio | µs/call (wall) | ratio | server CPU µs/call |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, figures in medians.items():
        reference = medians.get(REFERENCE[kinds[name]])
        cpu_ratio = "" if reference is None else f"{figures['cpu'] / reference['cpu']:.2f}"
        wall_ratio = "" if reference is None else f"{figures['wall'] / reference['wall']:.2f}"
        label = f"**{name}**" if name.startswith("rpcwire") else name
        lines.append(
            f"| {label} | {figures['cpu']:,.1f} | {cpu_ratio} | {figures['wall']:,.1f} | {wall_ratio} |"
            f" {figures['server']:,.1f} |"
        )
    return "\n".join(lines)


def count(name: str, calls: int, port: int) -> None:
    """``calls`` calls of one client against a server on ``port``, nothing else (for callgrind)."""
    kind, factory = CLIENTS[name]
    if kind == "sync":
        call, close = factory(f"http://127.0.0.1:{port}/")
        for _ in range(calls):
            call()
        close()
        return

    async def many() -> None:
        call, close = await factory(f"http://127.0.0.1:{port}/")
        for _ in range(calls):
            await call()
        await close()

    asyncio.run(many())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per block (default 1000)")
    parser.add_argument("--repeats", type=int, default=7, help="blocks per client, interleaved (default 7)")
    parser.add_argument("--count", choices=list(CLIENTS), help="only make --calls calls of this client (callgrind)")
    parser.add_argument("--port", type=int, help="with --count: the port of a server already running")
    parser.add_argument("--out", default=str(HERE / "http_clients_results.json"))
    args = parser.parse_args()
    if args.count:
        count(args.count, args.calls, args.port)
        return 0
    load = os.getloadavg()
    result = run(args.calls, args.repeats)
    result["load"] = [load, os.getloadavg()]
    sys.stdout.write(report(result) + "\n")
    sys.stdout.write(f"\nLoad average before and after: {load[0]:.2f} / {os.getloadavg()[0]:.2f}\n")
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
