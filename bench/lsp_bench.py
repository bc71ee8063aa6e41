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

Then the readers alone, in this process (`--readers` prints only this table): one large `didOpen` frame's
reading (headers, body, JSON) by rpcwire.lsp's `JsonRpcStreamReader`, python-lsp-jsonrpc's (ujson) and pygls's
(`pygls.io_.run`: its header loop and `json.loads` with an identity `object_hook`), each listening to a
`BytesIO` of frames; and the body's decoding alone by rpcwire's codec (`_parse_incoming`: the body decoded
into a `Request`), ujson, orjson and json. Bodies: the source document of 64 KiB and 1 MiB escaped as
`json.dumps` writes it by default (`\\uXXXX` for non-ASCII) and as raw UTF-8, and a 1 MiB text of CJK and
emoji, escaped (every character a `\\u` escape, the emoji surrogate pairs). Figures: process CPU time per
frame (`time.process_time_ns()`), the median of the repeats, every contender run once per repeat in a rotating
order; "x" columns are the peer's figure over rpcwire.lsp's (above 1: rpcwire.lsp takes less CPU).
`--callgrind CASE[:READER]` reads 20 frames (`--frames N`) of one case with one reader and nothing else, for
`valgrind --tool=callgrind` (bench/README.md): toggled on the native entry, or a whole process's N and 2N frames,
the difference over N, for the peers' Python readers.
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


# --- the readers alone ---------------------------------------------------------------------------

CJK_EMOJI = "".join(
    f"\u6f22\u5b57\u306e\u30c6\u30ad\u30b9\u30c8 {chr(0x1F600 + k % 64)} r\u00e9sum\u00e9 {k}\n" for k in range(1000)
)


def reader_cases() -> dict[str, bytes]:
    """The bodies of the reader table: each a `didOpen` notification, as a client's `json.dumps` writes it."""

    def body(text: str, *, ensure_ascii: bool) -> bytes:
        params = {"textDocument": {"uri": "file:///src/config.py", "languageId": "python", "version": 1, "text": text}}
        message = {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": params}
        return json.dumps(message, ensure_ascii=ensure_ascii).encode()

    return {
        "escaped 64 KiB": body(SOURCE_64K, ensure_ascii=True),
        "escaped 1 MiB": body(SOURCE_1M, ensure_ascii=True),
        "raw UTF-8 64 KiB": body(SOURCE_64K, ensure_ascii=False),
        "raw UTF-8 1 MiB": body(SOURCE_1M, ensure_ascii=False),
        "CJK+emoji escaped 1 MiB": body(
            (CJK_EMOJI * (1024 * 1024 // len(CJK_EMOJI) + 1))[: 1024 * 1024], ensure_ascii=True
        ),
    }


def frames_of(body: bytes, count: int) -> bytes:
    return b"".join([f"Content-Length: {len(body)}\r\n\r\n".encode() + body] * count)


def make_readers() -> dict[str, Callable[[bytes, Callable[[Any], Any]], None]]:
    """Each reader: `read(stream_bytes, consume)` hands every message of the stream to `consume`."""
    import io  # noqa: PLC0415

    import pylsp_jsonrpc.streams  # noqa: PLC0415
    import rpcwire.lsp  # noqa: PLC0415
    from pygls.io_ import run  # noqa: PLC0415

    def ours(data: bytes, consume: Callable[[Any], Any]) -> None:
        rpcwire.lsp.JsonRpcStreamReader(io.BytesIO(data)).listen(consume)

    def pylsp(data: bytes, consume: Callable[[Any], Any]) -> None:
        pylsp_jsonrpc.streams.JsonRpcStreamReader(io.BytesIO(data)).listen(consume)

    class Protocol:
        """What `pygls.io_.run` asks of a protocol: an `object_hook` and a handler."""

        def __init__(self, consume: Callable[[Any], Any]) -> None:
            self.handle_message = consume

        @staticmethod
        def structure_message(value: Any) -> Any:
            return value

    def pygls(data: bytes, consume: Callable[[Any], Any]) -> None:
        run(threading.Event(), io.BytesIO(data), Protocol(consume))  # type: ignore[arg-type]

    return {"rpcwire.lsp": ours, "python-lsp-jsonrpc (ujson)": pylsp, "pygls": pygls}


def make_decoders() -> dict[str, Callable[[bytes], Any]]:
    import orjson  # noqa: PLC0415
    import ujson  # noqa: PLC0415
    from rpcwire._rpcwire import _parse_incoming  # noqa: PLC0415

    return {"rpcwire codec": _parse_incoming, "ujson": ujson.loads, "orjson": orjson.loads, "json": json.loads}


def text_of(message: Any) -> str:
    params = message["params"] if isinstance(message, dict) else message.params
    return params["textDocument"]["text"]


def readers_table(repeats: int, quick: bool) -> dict[str, Any]:
    """The readers' and decoders' CPU time per frame on each case (see the module's doc)."""
    cases, readers, decoders = reader_cases(), make_readers(), make_decoders()
    # Each case's frames add up to about 8 MiB (4 MiB with --quick): enough CPU time for the clock.
    total = (4 if quick else 8) * 1024 * 1024
    runs: dict[str, dict[str, list[float]]] = {case: {} for case in cases}
    for name, body in cases.items():
        count = max(2, total // len(body))
        data = frames_of(body, count)
        expected = text_of(json.loads(body))
        contenders: dict[str, Callable[[], None]] = {}
        for reader_name, read in readers.items():
            got: list[Any] = []
            read(data, got.append)  # a warm-up, and every message checked
            assert len(got) == count and all(text_of(message) == expected for message in got), (reader_name, name)
            contenders[reader_name] = lambda read=read, data=data: read(data, lambda message: None)
        for decoder_name, decode in decoders.items():
            assert text_of(decode(body)) == expected, (decoder_name, name)
            contenders[decoder_name] = lambda decode=decode, body=body, count=count: (
                [decode(body) for _ in range(count)] and None
            )
        order = list(contenders)
        for repeat in range(repeats):
            for contender in order[repeat % len(order) :] + order[: repeat % len(order)]:
                start = time.process_time_ns()
                contenders[contender]()
                runs[name].setdefault(contender, []).append((time.process_time_ns() - start) / count / 1000)
        print(f"readers: {name} done", file=sys.stderr)
    medians = {case: {who: statistics.median(figures) for who, figures in by.items()} for case, by in runs.items()}
    versions = ", ".join(
        f"{package} {version(package)}" for package in ("python-lsp-jsonrpc", "ujson", "pygls", "orjson")
    )
    print(
        f"\n### The readers alone: CPU µs per frame, median of {repeats} ({versions}, rpcwire native={rpcwire.NATIVE})"
    )
    print(f"load average {' '.join(f'{load:.2f}' for load in os.getloadavg())}\n")
    names = list(next(iter(medians.values())))
    print("| frame | " + " | ".join(names) + " | pylsp / ours | pygls / ours | ujson / codec | orjson / codec |")
    print("| --- |" + " ---: |" * (len(names) + 4))
    for case, by in medians.items():
        ours, codec = by["rpcwire.lsp"], by["rpcwire codec"]
        cells = " | ".join(f"{by[who]:,.1f}" for who in names)
        ratios = (
            by["python-lsp-jsonrpc (ujson)"] / ours,
            by["pygls"] / ours,
            by["ujson"] / codec,
            by["orjson"] / codec,
        )
        print(f"| {case} | {cells} | " + " | ".join(f"{ratio:.2f}x" for ratio in ratios) + " |")
    return {"runs": runs, "medians": medians, "load": os.getloadavg()}


def callgrind_run(spec: str, frames: int = 20) -> None:
    """Read `frames` frames of one case (`CASE[:READER]`, default reader rpcwire.lsp) and nothing else."""
    case, _, reader = spec.partition(":")
    body = reader_cases()[case]
    data = frames_of(body, frames)
    if reader in decoders_names():
        decode = make_decoders()[reader]
        for _ in range(frames):
            decode(body)
        return
    make_readers()[reader or "rpcwire.lsp"](data, lambda message: None)


def decoders_names() -> tuple[str, ...]:
    return ("rpcwire codec", "ujson", "orjson", "json")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", choices=STACKS, help=argparse.SUPPRESS)
    parser.add_argument(
        "--calls",
        type=int,
        default=5000,
        help="ping-pong calls (pipelined: 5x; completion, did-open, did-open-source-64k: 1/10; "
        "did-open-source-1m: 1/100, at least 5)",
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a tenth of the calls, one repeat")
    parser.add_argument("--json", type=Path, help="also write every run and the medians to this file")
    parser.add_argument("--only", help=f"workloads, comma-separated, of: {','.join(WORKLOADS)}")
    parser.add_argument("--readers", action="store_true", help="only the table of the readers alone")
    parser.add_argument("--callgrind", metavar="CASE[:READER]", help="read 20 frames of one case, for valgrind")
    parser.add_argument(
        "--frames",
        type=int,
        default=20,
        help="with --callgrind: frames to read (a whole process's N and 2N, for a peer)",
    )
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return 0
    if args.callgrind:
        callgrind_run(args.callgrind, args.frames)
        return 0
    if args.readers:
        readers = readers_table(3 if args.quick else max(args.repeats, 7), args.quick)
        if args.json is not None:
            args.json.write_text(json.dumps({"readers": readers}, indent=1))
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
    readers = readers_table(3 if args.quick else max(repeats, 7), args.quick) if not args.only else None
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {"calls": calls, "repeats": repeats, "runs": runs, "medians": medians, "readers": readers}, indent=1
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
