"""MCP's ``Accept`` header against a plain one:
`.venv/bin/python bench/accept_bench.py [--repeats R] [--calls N] [--only in-process,uvicorn]`.

MCP's streamable HTTP clients send ``Accept: application/json, text/event-stream`` with every POST. A call whose
handler writes no notification should cost what the same call costs with ``Accept: application/json`` (issue 33,
target 5: within 10%). Each app (``ASGIApp`` with a sync handler on a worker thread, the same inline, an async
handler; ``WSGIApp``) answers the same ``add`` with either header:

- **in process**: the app called with a uvicorn-like scope (a gunicorn-like environ), no server, no socket; µs of
  this process's CPU per call (all its threads), and wall µs;
- **under uvicorn** (ASGI only): one uvicorn process on 127.0.0.1 (a socket this script binds, an ephemeral port,
  handed over as a descriptor), a keep-alive ``http.client`` connection POSTing back to back; the server
  process's CPU per call, summed over its threads from ``/proc/<pid>/task/*/schedstat`` (ns).

The two headers run interleaved (json, MCP, MCP, json, ...) in blocks of N calls, R blocks each, so that the
load of a shared machine falls on both alike; the table gives medians and the MCP/json ratio. Prints markdown
(progress to stderr) and writes bench/accept_results.json. No assertion on time anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import io
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rpcwire import methods
from rpcwire.http import ASGIApp, WSGIApp

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BODY = b'{"jsonrpc":"2.0","method":"add","params":[10,15],"id":1}'
ANSWER = b'{"jsonrpc":"2.0","id":1,"result":25}'
ACCEPTS = {"json": "application/json", "MCP": "application/json, text/event-stream"}


def add(a: int, b: int) -> int:
    return a + b


async def add_async(a: int, b: int) -> int:
    return a + b


# The apps, also what uvicorn serves (``accept_bench:asgi_threaded``...).
asgi_threaded = ASGIApp(methods({"add": add}))
asgi_inline = ASGIApp(methods({"add": add}), run_sync_inline=True)
asgi_async = ASGIApp(methods({"add": add_async}))
wsgi = WSGIApp(methods({"add": add}))

ASGI_APPS = {
    "ASGIApp, sync handler (worker thread)": "asgi_threaded",
    "ASGIApp, sync handler, run_sync_inline": "asgi_inline",
    "ASGIApp, async handler": "asgi_async",
}


def _scope(accept: str) -> dict[str, Any]:
    return {
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
            (b"accept", accept.encode()),
            (b"accept-encoding", b"identity"),
            (b"content-length", str(len(BODY)).encode()),
            (b"content-type", b"application/json"),
        ],
        "state": {},
    }


def _environ(accept: str) -> dict[str, Any]:
    return {
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.input_terminated": True,
        "SERVER_SOFTWARE": "gunicorn/27.0.1",
        "wsgi.input": io.BytesIO(BODY),
        "REQUEST_METHOD": "POST",
        "HTTP_HOST": "127.0.0.1:8000",
        "HTTP_ACCEPT": accept,
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(BODY)),
        "wsgi.url_scheme": "http",
        "REMOTE_ADDR": "127.0.0.1",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "PATH_INFO": "/rpc",
    }


def _asgi_runner(app: Any, accept: str, calls: int) -> Callable[[asyncio.AbstractEventLoop], None]:
    scope = _scope(accept)
    message = {"type": "http.request", "body": BODY, "more_body": False}
    sent: list[Any] = []
    never = asyncio.Event()

    def receiver() -> Callable[[], Awaitable[dict[str, Any]]]:
        """The body, then nothing until the client goes away (it does not), as a server's ``receive``."""
        given = False

        async def receive() -> dict[str, Any]:
            nonlocal given
            if given:
                await never.wait()
            given = True
            return message

        return receive

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def many() -> None:
        for _ in range(calls):
            await app(scope, receiver(), send)
            start, body = sent
            assert body["body"] == ANSWER and (b"content-type", b"application/json") in start["headers"], sent
            sent.clear()

    return lambda loop: loop.run_until_complete(many())


def _wsgi_runner(app: Any, accept: str, calls: int) -> Callable[[asyncio.AbstractEventLoop], None]:
    def run(_: asyncio.AbstractEventLoop) -> None:
        started: list[Any] = []
        for _ in range(calls):
            assert b"".join(app(_environ(accept), lambda status, headers, exc_info=None: started.append(headers)))
            assert ("Content-Type", "application/json") in started.pop()

    return run


def _orders(repeats: int) -> list[tuple[str, str]]:
    """json, MCP, MCP, json, ...: each header first in half the rounds."""
    return [("json", "MCP") if round_ % 2 == 0 else ("MCP", "json") for round_ in range(repeats)]


def in_process(repeats: int, calls: int) -> list[dict[str, Any]]:
    apps: dict[str, tuple[Any, Callable[..., Any]]] = {
        **{name: (globals()[attr], _asgi_runner) for name, attr in ASGI_APPS.items()},
        "WSGIApp": (wsgi, _wsgi_runner),
    }
    rows = []
    loop = asyncio.new_event_loop()
    try:
        for name, (app, runner) in apps.items():
            runs = {accept: runner(app, value, calls) for accept, value in ACCEPTS.items()}
            for run in runs.values():  # warm up: the executor's thread, the caches
                run(loop)
            cpu: dict[str, list[float]] = {accept: [] for accept in ACCEPTS}
            wall: dict[str, list[float]] = {accept: [] for accept in ACCEPTS}
            for order in _orders(repeats):
                for accept in order:
                    begun, begun_cpu = time.perf_counter(), time.process_time()
                    runs[accept](loop)
                    cpu[accept].append((time.process_time() - begun_cpu) / calls * 1e6)
                    wall[accept].append((time.perf_counter() - begun) / calls * 1e6)
            rows.append(_row(name, "in process", cpu, wall))
            print(f"in process: {name} done", file=sys.stderr)
    finally:
        loop.close()
    return rows


def _row(name: str, where: str, cpu: dict[str, list[float]], wall: dict[str, list[float]]) -> dict[str, Any]:
    json_cpu, mcp_cpu = statistics.median(cpu["json"]), statistics.median(cpu["MCP"])
    json_wall, mcp_wall = statistics.median(wall["json"]), statistics.median(wall["MCP"])
    return {
        "name": name,
        "where": where,
        "json_cpu_us": json_cpu,
        "mcp_cpu_us": mcp_cpu,
        "cpu_ratio": mcp_cpu / json_cpu,
        "json_us": json_wall,
        "mcp_us": mcp_wall,
        "wall_ratio": mcp_wall / json_wall,
    }


def _server_cpu_ns(pid: int) -> int:
    """The CPU time of every thread of ``pid`` so far (ns): schedstat's first field, summed."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # a thread that just ended
            continue
    return total


def _start_uvicorn(attr: str) -> tuple[subprocess.Popen[bytes], int]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted sockets (http_bench)
    listener.listen(16)
    listener.set_inheritable(True)
    port, fd = listener.getsockname()[1], listener.fileno()
    command = [sys.executable, "-m", "uvicorn", "--fd", str(fd), "--no-access-log", "--log-level", "warning"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "python"), str(HERE)])}
    process = subprocess.Popen([*command, f"accept_bench:{attr}"], pass_fds=(fd,), env=env, stdout=subprocess.DEVNULL)
    listener.close()
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"uvicorn accept_bench:{attr} exited with {process.returncode}")
        try:
            _post(http.client.HTTPConnection("127.0.0.1", port, timeout=5), "json")
            return process, port
        except OSError:
            if time.monotonic() > deadline:
                _stop(process)
                raise
            time.sleep(0.2)


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _post(connection: http.client.HTTPConnection, accept: str) -> None:
    headers = {"Content-Type": "application/json", "Accept": ACCEPTS[accept]}
    connection.request("POST", "/rpc", body=BODY, headers=headers)
    response = connection.getresponse()
    body = response.read()
    if response.status != 200 or body != ANSWER or response.getheader("Content-Type") != "application/json":
        raise RuntimeError(f"a wrong answer: {response.status} {response.getheaders()} {body!r}")


def under_uvicorn(repeats: int, calls: int) -> list[dict[str, Any]]:
    rows = []
    for name, attr in ASGI_APPS.items():
        process, port = _start_uvicorn(attr)
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            for accept in ACCEPTS:  # warm up
                for _ in range(min(calls, 200)):
                    _post(connection, accept)
            cpu: dict[str, list[float]] = {accept: [] for accept in ACCEPTS}
            wall: dict[str, list[float]] = {accept: [] for accept in ACCEPTS}
            for order in _orders(repeats):
                for accept in order:
                    begun, begun_cpu = time.perf_counter(), _server_cpu_ns(process.pid)
                    for _ in range(calls):
                        _post(connection, accept)
                    cpu[accept].append((_server_cpu_ns(process.pid) - begun_cpu) / calls / 1e3)
                    wall[accept].append((time.perf_counter() - begun) / calls * 1e6)
            connection.close()
        finally:
            _stop(process)
        rows.append(_row(name, "uvicorn", cpu, wall))
        print(f"uvicorn: {name} done", file=sys.stderr)
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| app | where | CPU µs/call, Accept json | CPU µs/call, MCP's Accept | MCP/json (CPU) | wall µs, json | "
        "wall µs, MCP | MCP/json (wall) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        lines.append(
            f"| {row['name']} | {row['where']} ({'server' if row['where'] == 'uvicorn' else 'process'} CPU) "
            f"| {row['json_cpu_us']:.1f} | {row['mcp_cpu_us']:.1f} | {row['cpu_ratio']:.2f} "
            f"| {row['json_us']:.1f} | {row['mcp_us']:.1f} | {row['wall_ratio']:.2f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9, help="blocks per header and app (default 9)")
    parser.add_argument("--calls", type=int, default=2000, help="calls per block (default 2000)")
    parser.add_argument("--only", default="in-process,uvicorn", help="in-process, uvicorn or both (default)")
    options = parser.parse_args()
    parts = set(options.only.split(","))
    rows: list[dict[str, Any]] = []
    if "in-process" in parts:
        rows += in_process(options.repeats, options.calls)
    if "uvicorn" in parts:
        rows += under_uvicorn(options.repeats, options.calls)
    print(
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs; medians of {options.repeats} blocks of "
        f"{options.calls} calls per header, interleaved\n"
    )
    print(report(rows))
    (HERE / "accept_results.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
