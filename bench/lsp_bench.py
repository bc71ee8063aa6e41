"""python-lsp-jsonrpc's `Endpoint` over its own reader and writer against the same `Endpoint` over
rpcwire.lsp's drop-ins, side by side in one run: `make bench-lsp` (or `.venv/bin/python bench/lsp_bench.py
[--quick] [--repeats R] [--json PATH]`).

The server is a process of its own (`lsp_bench.py --serve STACK`): `Endpoint(dispatcher, Writer(stdout).write)`
and `Reader(stdin).listen(endpoint.consume)`, STACK `pylsp` (pylsp_jsonrpc.streams) or `rpcwire`
(rpcwire.lsp); everything else is the same. The driver (this process) writes frames and reads them back
with rpcwire's own transport (`framing="content-length"`, no JSON decoding of the answers), the same for
both. Workloads (every answer is counted; the first and last are checked):
- ping-pong: one small request (`echo`), wait for its answer; client and server pinned to one CPU;
- pipelined: a thread writes N requests while the main thread reads the N answers;
- completion: ping-pong with an answer of 200 completion items (~26 KB), the writer's work;
- did-open: ping-pong with a 64 KiB document in the params, the reader's work;
- did-open-source-64k, did-open-source-1m: the same with a source file's text (`workloads.source_document`:
  escapes on every line, quotes, backslashes, tabs, some non-ASCII) of 64 KiB and 1 MiB, its body written as
  editors write it (UTF-8, not escaped to ASCII).
Figures: wall time per call, the median round trip (p50), and the server process's CPU time per call
(`time.process_time()` asked of the server before and after: what the streams cost, apart from waiting for
a shared CPU). Each is a median over the repeats, runs of the two stacks interleaved.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import rpcwire
from workloads import source_document

STACKS = ("pylsp", "rpcwire")
ITEMS = [
    {"label": f"item_{i}", "kind": 3, "detail": f"def item_{i}(x: int) -> str", "sortText": f"{i:04d}"}
    for i in range(200)
]
DOCUMENT = ("def f(x):\n    return x * 2  # é\n" * 2048)[: 64 * 1024]
SOURCE_64K = source_document(64 * 1024)
SOURCE_1M = source_document(1024 * 1024)


# --- the server ----------------------------------------------------------------------------------


def serve(stack: str) -> None:
    from pylsp_jsonrpc.endpoint import Endpoint  # noqa: PLC0415

    if stack == "pylsp":
        from pylsp_jsonrpc.streams import JsonRpcStreamReader, JsonRpcStreamWriter  # noqa: PLC0415
    else:
        from rpcwire.lsp import JsonRpcStreamReader, JsonRpcStreamWriter  # noqa: PLC0415
    dispatcher = {
        "echo": lambda params: params,
        "completion": lambda params: {"isIncomplete": False, "items": ITEMS},
        "didOpen": lambda params: len(params["textDocument"]["text"]),
        "cpu": lambda params: time.process_time(),
    }
    endpoint = Endpoint(dispatcher, JsonRpcStreamWriter(sys.stdout.buffer).write)
    JsonRpcStreamReader(sys.stdin.buffer).listen(endpoint.consume)
    endpoint.shutdown()


# --- the driver ----------------------------------------------------------------------------------


def frame_body(id_: int, method: str, params: Any, *, ensure_ascii: bool = True) -> bytes:
    message = {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}
    return json.dumps(message, separators=(",", ":"), ensure_ascii=ensure_ascii).encode()


class Server:
    def __init__(self, stack: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", stack], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.transport = rpcwire.StdioTransport(self.process.stdout, self.process.stdin, framing="content-length")

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


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


def check(answer: bytes | None, id_: int, expected: Any) -> None:
    assert answer is not None, "the server stopped"
    decoded = json.loads(answer)
    assert decoded.get("id") == id_ and decoded.get("result") == expected, answer[:200]


def server_cpu(server: Server) -> float:
    """The server process's CPU time so far (it answers ``cpu`` with ``time.process_time()``)."""
    server.transport._write_line(frame_body(-2, "cpu", None))
    answer = server.transport.read_line()
    assert answer is not None
    return float(json.loads(answer)["result"])


def ping_pong(
    server: Server, calls: int, method: str, params: Any, expected: Any, *, ensure_ascii: bool = True
) -> dict[str, float]:
    write, read = server.transport._write_line, server.transport.read_line
    bodies = [frame_body(i, method, params, ensure_ascii=ensure_ascii) for i in range(calls + 1)]
    write(bodies[0])  # warm up
    check(read(), 0, expected)
    latencies = []
    clock = time.perf_counter_ns
    cpu = server_cpu(server)
    with one_cpu(server.process.pid):
        start_all = clock()
        for i in range(1, calls + 1):
            start = clock()
            write(bodies[i])
            answer = read()
            latencies.append(clock() - start)
            if i == calls:
                check(answer, i, expected)
        total = clock() - start_all
    cpu = server_cpu(server) - cpu
    latencies.sort()
    return {
        "us_per_call": total / calls / 1000,
        "p50_us": latencies[len(latencies) // 2] / 1000,
        "server_cpu_us": cpu / calls * 1e6,
    }


def pipelined(server: Server, calls: int) -> dict[str, float]:
    write, read = server.transport._write_line, server.transport.read_line
    write(frame_body(-1, "echo", {"n": -1}))  # warm up: the server has started
    check(read(), -1, {"n": -1})
    bodies = [frame_body(i, "echo", {"n": i}) for i in range(calls)]
    cpu = server_cpu(server)
    start = time.perf_counter_ns()

    def writer() -> None:
        for body in bodies:
            write(body)

    thread = threading.Thread(target=writer)
    thread.start()
    last = None
    for _ in range(calls):
        last = read()
    elapsed = time.perf_counter_ns() - start
    thread.join()
    check(last, calls - 1, {"n": calls - 1})
    return {"us_per_call": elapsed / calls / 1000, "server_cpu_us": (server_cpu(server) - cpu) / calls * 1e6}


WORKLOADS: dict[str, Callable[[Server, int], dict[str, float]]] = {
    "ping-pong": lambda server, n: ping_pong(server, n, "echo", {"text": "hello", "n": 1}, {"text": "hello", "n": 1}),
    "pipelined": lambda server, n: pipelined(server, n * 5),
    "completion": lambda server, n: ping_pong(
        server, n // 10, "completion", {"position": {"line": 1}}, {"isIncomplete": False, "items": ITEMS}
    ),
    "did-open": lambda server, n: ping_pong(
        server, n // 10, "didOpen", {"textDocument": {"uri": "file:///x.py", "text": DOCUMENT}}, len(DOCUMENT)
    ),
    "did-open-source-64k": lambda server, n: did_open_source(server, n // 10, SOURCE_64K),
    "did-open-source-1m": lambda server, n: did_open_source(server, max(5, n // 100), SOURCE_1M),
}


def did_open_source(server: Server, calls: int, text: str) -> dict[str, float]:
    params = {"textDocument": {"uri": "file:///src/config.py", "languageId": "python", "version": 1, "text": text}}
    return ping_pong(server, calls, "didOpen", params, len(text), ensure_ascii=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", choices=STACKS, help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=5000, help="ping-pong calls (pipelined: 5x; the large: 1/10)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a tenth of the calls, one repeat")
    parser.add_argument("--json", type=Path, help="also write every run and the medians to this file")
    parser.add_argument("--only", help=f"workloads, comma-separated, of: {','.join(WORKLOADS)}")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return 0
    calls, repeats = (args.calls // 10, 1) if args.quick else (args.calls, args.repeats)
    chosen = {name: WORKLOADS[name] for name in (args.only.split(",") if args.only else WORKLOADS)}
    runs: dict[str, dict[str, list[dict[str, float]]]] = {w: {s: [] for s in STACKS} for w in chosen}
    for repeat in range(repeats):
        for name, workload in chosen.items():
            for stack in STACKS if repeat % 2 == 0 else reversed(STACKS):
                server = Server(stack)
                try:
                    runs[name][stack].append(workload(server, calls))
                finally:
                    server.close()
        print(f"repeat {repeat + 1}/{repeats} done", file=sys.stderr)
    medians = {
        name: {stack: {key: statistics.median(run[key] for run in runs[name][stack]) for key in runs[name][stack][0]}
               for stack in STACKS}
        for name in chosen
    }  # fmt: skip
    versions = f"python-lsp-jsonrpc {version('python-lsp-jsonrpc')}, rpcwire native={rpcwire.NATIVE}"
    print(f"\n### python-lsp-jsonrpc's Endpoint: its reader/writer vs rpcwire.lsp's ({versions})")
    print(
        f"median of {repeats}; ping-pong {calls} calls, pipelined {calls * 5}, completion and did-open {calls // 10}\n"
    )
    print("| workload | figure | pylsp_jsonrpc.streams | rpcwire.lsp | speed-up |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name, by_stack in medians.items():
        for key in by_stack["pylsp"]:
            theirs, ours = by_stack["pylsp"][key], by_stack["rpcwire"][key]
            print(f"| {name} | {key.replace('_', ' ')} | {theirs:.1f} | {ours:.1f} | {theirs / ours:.2f}x |")
    if args.json is not None:
        args.json.write_text(
            json.dumps({"calls": calls, "repeats": repeats, "runs": runs, "medians": medians}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
