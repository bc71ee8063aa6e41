"""The payload workloads (issue 11) against the plain orjson loop, in instructions and in CPU time.

Two figures that this shared, noisy machine repeats, for every payload and mode of `workloads.PAYLOADS`:

- ``counts``: instructions a message, counted by callgrind over the whole serve loop (Python's own work
  included): one process serves N messages, then 2N, and the difference of the two serves over N is the
  figure (the first message's warm-up cancels out), the median of ``--repeats`` processes. The
  orjson loop is the issue's reference (`implementations.serve_orjson_loop`, written again here so that
  this script needs only orjson).
- ``cpu``: CPU time (`time.process_time`) a message, rpcwire and the orjson loop interleaved in one process,
  the order alternating, medians of ``--repeats`` serves each, and their ratio: ≤ 1.00 is at least as fast.

    .venv/bin/python bench/payload_counts.py counts --json /tmp/counts.json
    .venv/bin/python bench/payload_counts.py cpu --repeats 15
    .venv/bin/python bench/payload_counts.py counts --cells ints/decode,floats/decode

``PYTHONPATH`` chooses the build of rpcwire (a copy of another build's ``python/`` measures it the same way).
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workloads  # noqa: E402

IMPLS = ("rpcwire", "orjson-loop")
# Messages of the shorter of the two counted runs (the longer has twice as many): enough that a message is
# well above callgrind's noise, few enough for a run of a few seconds.
COUNT_LINES = {"items": 100, "mcp-result": 100, "lsp-completion": 4, "floats": 4, "ints": 6, "did-open": 6}
# Messages of one timed serve (`cpu`): a few milliseconds at least.
CPU_LINES = {"items": 400, "mcp-result": 400, "lsp-completion": 10, "floats": 20, "ints": 30, "did-open": 40}

CHILD = r"""
import io, logging, os, sys
sys.path.insert(0, sys.argv[1])
logging.disable(logging.CRITICAL)
from payload_counts import serve, workload_data
impl, cell, lines = sys.argv[2], sys.argv[3], int(sys.argv[4])
short, handler = workload_data(cell, lines)
long, _ = workload_data(cell, 2 * lines)
if impl == "rpcwire":
    import rpcwire  # imported before the counts
# os.getppid() marks where callgrind dumps its counts (--dump-before): the serves are counted apart from the rest.
os.getppid()
serve(impl, short, handler)
os.getppid()
serve(impl, long, handler)
os.getppid()
"""


def all_cells() -> list[str]:
    return [f"{name}/{mode}" for name in workloads.PAYLOADS for mode in workloads.PAYLOAD_MODES]


def workload_data(cell: str, lines: int):
    """The input of `lines` messages of one cell (`payload/mode`) and its handler."""
    name, mode = cell.split("/")
    work = workloads.payload_workload(name, mode, quick=False)
    data = b"".join(work.data.splitlines(keepends=True)[:lines])
    payload = work.expected_result
    if mode == "decode":
        handler = lambda method, params: None  # noqa: E731
    elif mode == "encode":
        handler = lambda method, params: payload  # noqa: E731
    else:
        handler = lambda method, params: params  # noqa: E731
    return data, handler


def serve_orjson_loop(inp, out, handler) -> None:
    """`implementations.serve_orjson_loop`: `orjson.loads`, the handler, `orjson.dumps` of the answer."""
    loads, dumps, write, newline = orjson.loads, orjson.dumps, out.write, orjson.OPT_APPEND_NEWLINE
    for line in inp:
        msg = loads(line)
        result = handler(msg["method"], msg.get("params"))
        write(dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}, option=newline))


def serve(impl: str, data: bytes, handler) -> bytes:
    inp, out = io.BytesIO(data), io.BytesIO()
    if impl == "rpcwire":
        import rpcwire  # noqa: PLC0415 (PYTHONPATH chooses the build; the orjson loop's runs never import it)

        rpcwire.serve(handler, rpcwire.StdioTransport(inp, out))
    elif impl == "orjson-loop":
        serve_orjson_loop(inp, out, handler)
    else:
        raise ValueError(impl)
    return out.getvalue()


def per_message(impl: str, cell: str, repeats: int) -> float:
    """Instructions a message: one child process serves N messages of `cell`, then 2N; callgrind dumps its
    counts at each `os.getppid()` around them, and the difference of the two serves, over N, is the figure
    (start-up, imports and the first message's warm-up left out). The median of `repeats` children."""
    lines = COUNT_LINES[cell.split("/", maxsplit=1)[0]]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    figures = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "callgrind.out"
            command = ["valgrind", "--tool=callgrind", "--dump-before=os_getppid", f"--callgrind-out-file={out}"]
            command += [sys.executable, "-c", CHILD, str(HERE), impl, cell, str(lines)]
            subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            totals = []
            for part in (2, 3):
                match = re.search(r"^totals: (\d+)", Path(f"{out}.{part}").read_text(), re.MULTILINE)
                if match is None:
                    raise RuntimeError(f"no totals in {out}.{part}")
                totals.append(int(match.group(1)))
        figures.append((totals[1] - totals[0]) / lines)
    return statistics.median(figures)


def run_counts(cells: list[str], repeats: int, reference: dict | None) -> dict:
    """Each cell's figures; the orjson loop's taken from `reference` (an earlier run's JSON) when given."""
    results = {}
    print(f"{'cell':<24} {'rpcwire':>12} {'orjson loop':>12} {'ratio':>7}")
    for cell in cells:
        figures = {"rpcwire": per_message("rpcwire", cell, repeats)}
        if reference and cell in reference:
            figures["orjson-loop"] = reference[cell]["orjson-loop"]
        else:
            figures["orjson-loop"] = per_message("orjson-loop", cell, repeats)
        ratio = figures["rpcwire"] / figures["orjson-loop"]
        results[cell] = {**figures, "ratio": ratio}
        print(f"{cell:<24} {figures['rpcwire']:>12,.0f} {figures['orjson-loop']:>12,.0f} {ratio:>7.3f}", flush=True)
    return results


def run_cpu(cells: list[str], repeats: int) -> dict:
    logging.disable(logging.CRITICAL)
    results = {}
    print(f"load average before: {os.getloadavg()}")
    print(f"{'cell':<24} {'rpcwire µs':>11} {'orjson loop µs':>15} {'ratio':>7} {'ratio of medians of pairs':>26}")
    for cell in cells:
        lines = CPU_LINES[cell.split("/", maxsplit=1)[0]]
        data, handler = workload_data(cell, lines)
        times: dict[str, list[float]] = {impl: [] for impl in IMPLS}
        pair_ratios = []
        for impl in IMPLS:  # warm-up, and a check that both answer alike
            serve(impl, data, handler)
        for repeat in range(repeats):
            order = IMPLS if repeat % 2 == 0 else IMPLS[::-1]
            this = {}
            for impl in order:
                start = time.process_time()
                serve(impl, data, handler)
                this[impl] = (time.process_time() - start) / lines * 1e6
                times[impl].append(this[impl])
            pair_ratios.append(this["rpcwire"] / this["orjson-loop"])
        medians = {impl: statistics.median(values) for impl, values in times.items()}
        ratio = medians["rpcwire"] / medians["orjson-loop"]
        results[cell] = {**medians, "ratio": ratio, "pair_ratio": statistics.median(pair_ratios)}
        print(
            f"{cell:<24} {medians['rpcwire']:>11.1f} {medians['orjson-loop']:>15.1f} {ratio:>7.3f}"
            f" {statistics.median(pair_ratios):>26.3f}",
            flush=True,
        )
    print(f"load average after: {os.getloadavg()}")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("counts", "cpu"))
    parser.add_argument("--cells", help="payload/mode, comma-separated (default: every cell)")
    parser.add_argument("--repeats", type=int, help="counts: 3 differences; cpu: 15 serves of each")
    parser.add_argument("--json", type=Path, help="write the figures there")
    parser.add_argument("--reference", type=Path, help="counts: the orjson loop's figures from this earlier --json")
    args = parser.parse_args()
    cells = args.cells.split(",") if args.cells else all_cells()
    if args.what == "counts":
        reference = json.loads(args.reference.read_text()) if args.reference else None
        results = run_counts(cells, args.repeats or 3, reference)
    else:
        results = run_cpu(cells, args.repeats or 15)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
