"""rpcwire over HTTP: `make bench-http`, or `.venv/bin/python bench/http_bench.py [--seconds S] [--concurrency 1,16]`.

Each server runs one worker process on 127.0.0.1 (a socket this script binds, an ephemeral port, handed over
as a file descriptor) and is stopped at the end of its cells. The load generator is this process: C threads,
each with its own keep-alive ``http.client`` connection, POSTing the same ``add`` request back to back for S
seconds (at most MAX_REQUESTS a cell) after an untimed warm-up; every answer's status and bytes are checked.
The floor rows are a constant reply of the same bytes under the same server (bench/http_apps.py): rpcwire's
dispatch cost is its µs per request over the floor's at concurrency 1. Prints a markdown table (progress to
stderr) and writes bench/http_results.json. No assertion on time anywhere.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BODY = b'{"jsonrpc":"2.0","method":"add","params":[10,15],"id":1}'
ANSWER = b'{"jsonrpc":"2.0","id":1,"result":25}'
HEADERS = {"Content-Type": "application/json"}
WARM_UP = 200  # requests per connection, untimed
MAX_REQUESTS = 500_000  # per cell, whatever the time

GUNICORN = [sys.executable, "-m", "gunicorn", "--bind", "fd://{fd}", "-w", "1", "--worker-class", "gthread"]
GUNICORN += ["--threads", "16", "--keep-alive", "30", "--log-level", "warning"]
UVICORN = [sys.executable, "-m", "uvicorn", "--fd", "{fd}", "--workers", "1", "--no-access-log"]
UVICORN += ["--log-level", "warning", "--lifespan", "off"]


@dataclass(frozen=True)
class Target:
    name: str  # the row's label
    server: str  # uvicorn, gunicorn gthread
    app: str  # what is served: rpcwire, floor, flask
    command: list[str]
    cwd: Path


TARGETS = [
    Target("rpcwire ASGIApp", "uvicorn", "rpcwire", [*UVICORN, "http_apps:rpcwire_asgi"], HERE),
    Target("floor (constant reply)", "uvicorn", "floor", [*UVICORN, "http_apps:floor_asgi"], HERE),
    Target("rpcwire WSGIApp", "gunicorn gthread", "rpcwire", [*GUNICORN, "http_apps:rpcwire_wsgi"], HERE),
    Target(
        "Flask example (flask_view)", "gunicorn gthread", "flask", [*GUNICORN, "flask_server:app"], ROOT / "examples"
    ),
    Target("floor (constant reply)", "gunicorn gthread", "floor", [*GUNICORN, "http_apps:floor_wsgi"], HERE),
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
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    process = subprocess.Popen(
        [part.replace("{fd}", str(fd)) for part in target.command],
        pass_fds=(fd,),
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
            post(http.client.HTTPConnection("127.0.0.1", port, timeout=5))
            return process, port
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


def post(connection: http.client.HTTPConnection) -> bool:
    connection.request("POST", "/rpc", body=BODY, headers=HEADERS)
    response = connection.getresponse()
    return response.status == 200 and response.read() == ANSWER


def cell(port: int, concurrency: int, seconds: float) -> dict[str, float]:
    """``concurrency`` keep-alive connections, each POSTing back to back for ``seconds``."""
    latencies: list[list[int]] = [[] for _ in range(concurrency)]
    wrong = [0] * concurrency
    ready = threading.Barrier(concurrency + 1)
    budget = MAX_REQUESTS // concurrency

    def client(n: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for _ in range(WARM_UP):
            post(connection)
        ready.wait()
        mine, clock = latencies[n], time.perf_counter_ns
        deadline = clock() + int(seconds * 1e9)
        while len(mine) < budget:
            begun = clock()
            if not post(connection):
                wrong[n] += 1
            mine.append(clock() - begun)
            if begun > deadline:
                break
        connection.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(concurrency)]
    for thread in threads:
        thread.start()
    ready.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    every = sorted(latency for mine in latencies for latency in mine)
    return {
        "requests": len(every),
        "wrong": sum(wrong),
        "seconds": elapsed,
        "rps": len(every) / elapsed,
        "p50_us": every[len(every) // 2] / 1e3,
        "p99_us": every[min(len(every) - 1, len(every) * 99 // 100)] / 1e3,
        "mean_us": statistics.fmean(every) / 1e3,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per cell (default 3)")
    parser.add_argument("--concurrency", default="1,16", help="connections per cell, comma-separated (default 1,16)")
    parser.add_argument("--out", default=str(HERE / "http_results.json"))
    args = parser.parse_args()
    levels = [int(level) for level in args.concurrency.split(",")]
    rows = []
    for target in TARGETS:
        process, port = start(target)
        try:
            for concurrency in levels:
                sys.stderr.write(f"{target.name} under {target.server}, concurrency {concurrency}\n")
                row = {"name": target.name, "server": target.server, "app": target.app, "concurrency": concurrency}
                rows.append(row | cell(port, concurrency, args.seconds))
        finally:
            stop(process)
    sys.stdout.write(report(rows) + "\n")
    machine = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}
    peers = {name: version(name) for name in ("uvicorn", "gunicorn", "flask")}
    Path(args.out).write_text(json.dumps({"machine": machine, "versions": peers, "rows": rows}, indent=1))
    return 0


def report(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| app | server | concurrency | req/s | p50 µs | p99 µs | answers (wrong) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        lines.append(
            f"| {row['name']} | {row['server']} | {row['concurrency']} | {row['rps']:,.0f} | {row['p50_us']:,.0f} |"
            f" {row['p99_us']:,.0f} | {row['requests']:,} ({row['wrong']}) |"
        )
    lines += ["", "rpcwire's cost over the floor under the same server (µs per request = 1e6 / req/s):", ""]
    lines += [
        "| app | server | concurrency | µs/request | floor µs/request | over the floor |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    floors = {(row["server"], row["concurrency"]): row for row in rows if row["app"] == "floor"}
    for row in rows:
        floor = floors.get((row["server"], row["concurrency"]))
        if row["app"] == "floor" or floor is None:
            continue
        cost, floor_cost = 1e6 / row["rps"], 1e6 / floor["rps"]
        lines.append(
            f"| {row['name']} | {row['server']} | {row['concurrency']} | {cost:,.1f} | {floor_cost:,.1f} |"
            f" {cost - floor_cost:+,.1f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
