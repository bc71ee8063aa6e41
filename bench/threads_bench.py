"""CPU-bound handlers in the threads engine at max_concurrency 1, 2 and N: `make bench-threads` runs it on
free-threaded CPython 3.14t and on the GIL build of the same source, side by side
(packaging/free-threaded.sh bench); on any one interpreter: `python bench/threads_bench.py [--quick]
[--repeats R] [--json PATH]`, and `--compare A.json B.json [--out PATH]` prints the two runs' table.

Each run serves CALLS requests from memory (a `StdioTransport` over a `BytesIO`, answers into another) with
`serve(handler, transport, max_concurrency=k)`, k in 1, 2 and the CPU count (more when asked), for two handlers:
- python: pure-Python arithmetic (a loop of integer operations, a fixed count of them per call), which only
  runs in parallel where there is no GIL;
- hashlib: sha256 of a 2 MiB buffer (hashlib releases the GIL for buffers over 2 KiB), which runs in parallel
  on either build.
Both cores (`rpcwire`: the native one, or rpcwire.pure where it could not load; `rpcwire.pure`), and the ceiling
beside them: `plain threads`, the same handler called CALLS times by k plain threads of a `ThreadPoolExecutor`
(no rpcwire, no JSON), what the interpreter and the machine allow two threads at that moment. Figures: the
wall time of the run (median over the repeats, runs interleaved), calls per second, the speedup against k=1 on
the same interpreter, core and handler, and the CPUs busy (the process's CPU time over the wall time: on a
machine others share, what the run got, whatever the wall time lost to them); every answer is checked. The
interpreter (version, whether it is free-threaded, whether the GIL was on after importing rpcwire) goes into the
JSON and the table's heading.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import io
import json
import os
import platform
import statistics
import sys
import sysconfig
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import rpcwire
import rpcwire.pure

CORES = {"rpcwire": rpcwire, "rpcwire.pure": rpcwire.pure}
PLAIN = "plain threads"  # the ceiling: the handler on k threads, without rpcwire
LOOPS = 400_000  # python: ~20 ms a call on a 2020s x86 core (a non-PGO build)
BUFFER = bytes(range(256)) * (8 * 1024)  # hashlib: 2 MiB
HASHES = 6
EXPECTED = {"python": sum((i * i) % 7 for i in range(LOOPS)), "hashlib": hashlib.sha256(BUFFER).hexdigest()}


def python_work(params: Any) -> Any:
    total = 0
    for i in range(LOOPS):
        total += (i * i) % 7
    return total


def hashlib_work(params: Any) -> Any:
    digest = ""
    for _ in range(HASHES):
        digest = hashlib.sha256(BUFFER).hexdigest()
    return digest


HANDLERS = {"python": python_work, "hashlib": hashlib_work}


def interpreter() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
        "gil_enabled": getattr(sys, "_is_gil_enabled", lambda: True)(),
        "native": rpcwire.NATIVE,
        "cpus": os.cpu_count(),
        "executable": sys.executable,
    }


def label(info: dict[str, Any]) -> str:
    build = "free-threaded" if info["free_threaded"] else "GIL build"
    gil = "GIL on" if info["gil_enabled"] else "GIL off"
    return f"CPython {info['python']} {build} ({gil} after import; native core: {info['native']})"


def run_plain(work: str, concurrency: int, calls: int) -> tuple[float, float]:
    """The ceiling: ``calls`` calls of the handler on ``concurrency`` plain threads; wall and CPU time."""
    handler = HANDLERS[work]
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(handler, range(concurrency)))  # the threads started before the clock
        start, cpu = time.perf_counter(), time.process_time()
        results = list(pool.map(handler, range(calls)))
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert results == [EXPECTED[work]] * calls, results[:2]
    return elapsed, cpu


def run_once(core: ModuleType | None, work: str, concurrency: int, calls: int) -> tuple[float, float]:
    """One run's wall time and the process's CPU time in it; every answer checked (``None``: the ceiling)."""
    if core is None:
        return run_plain(work, concurrency, calls)
    requests = b"".join(json.dumps({"jsonrpc": "2.0", "method": work, "id": i}).encode() + b"\n" for i in range(calls))
    handler = HANDLERS[work]
    out = io.BytesIO()
    transport = core.StdioTransport(io.BytesIO(requests), out)
    start, cpu = time.perf_counter(), time.process_time()
    core.serve(lambda method, params: handler(params), transport, max_concurrency=concurrency)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert sorted(answer["id"] for answer in answers) == list(range(calls)), "answers missing"
    assert all(answer.get("result") == EXPECTED[work] for answer in answers), answers[:2]
    return elapsed, cpu


def measure(args: argparse.Namespace) -> dict[str, Any]:
    cpus = os.cpu_count() or 1
    levels = sorted({1, 2, cpus, *args.concurrency})
    runs: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    keys = [(core, work, k) for core in args.cores for work in args.work for k in levels]
    for repeat in range(args.repeats):
        for core, work, k in keys:  # interleaved: a slow moment of the machine spreads over every cell
            wall, used = run_once(CORES.get(core), work, k, args.calls)
            runs.setdefault(f"{core}|{work}|{k}", []).append(wall)
            cpu.setdefault(f"{core}|{work}|{k}", []).append(used / wall)
        print(f"repeat {repeat + 1}/{args.repeats} done", file=sys.stderr)
    cells = []
    for core, work, k in keys:
        median = statistics.median(runs[f"{core}|{work}|{k}"])
        base = statistics.median(runs[f"{core}|{work}|1"])
        cells.append(
            {
                "core": core,
                "work": work,
                "concurrency": k,
                "median_s": median,
                "calls_per_s": args.calls / median,
                "speedup": base / median,
                "cores_busy": statistics.median(cpu[f"{core}|{work}|{k}"]),
                "runs_s": runs[f"{core}|{work}|{k}"],
            }
        )
    return {"interpreter": interpreter(), "calls": args.calls, "repeats": args.repeats, "cells": cells}


def render(results: list[dict[str, Any]]) -> str:
    """A markdown table: a row per core, handler and max_concurrency; per interpreter calls/s and speedup."""
    lines = [f"- **{chr(65 + n)}**: {label(result['interpreter'])}" for n, result in enumerate(results)]
    lines.append(f"- {results[0]['calls']} calls a run, median of {results[0]['repeats']} runs")
    lines.append("")
    header = "| core | handler | max_concurrency |"
    rule = "| --- | --- | ---: |"
    for n in range(len(results)):
        header += f" {chr(65 + n)} calls/s | {chr(65 + n)} speedup | {chr(65 + n)} CPUs busy |"
        rule += " ---: | ---: | ---: |"
    lines += [header, rule]
    cells = [{(c["core"], c["work"], c["concurrency"]): c for c in result["cells"]} for result in results]
    for key in [(c["core"], c["work"], c["concurrency"]) for c in results[0]["cells"]]:
        row = f"| {key[0]} | {key[1]} | {key[2]} |"
        for table in cells:
            cell = table.get(key)
            row += (
                f" {cell['calls_per_s']:.1f} | {cell['speedup']:.2f}x | {cell['cores_busy']:.2f} |"
                if cell
                else " - | - | - |"
            )
        lines.append(row)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 8 calls, one repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=32, help="calls per run")
    parser.add_argument("--concurrency", type=int, nargs="*", default=[], help="more levels besides 1, 2, N")
    parser.add_argument("--cores", nargs="*", default=[*CORES, PLAIN], choices=[*CORES, PLAIN])
    parser.add_argument("--work", nargs="*", default=list(HANDLERS), choices=list(HANDLERS))
    parser.add_argument("--json", type=Path, help="write the results there")
    parser.add_argument("--compare", type=Path, nargs="+", help="print the table of these results (no run)")
    parser.add_argument("--out", type=Path, help="with --compare: the results together, as one JSON")
    args = parser.parse_args()
    if args.compare:
        results = [json.loads(path.read_text()) for path in args.compare]
        if args.out:
            args.out.write_text(json.dumps(results, indent=1) + "\n")
        print(render(results))
        return
    if args.quick:
        args.calls, args.repeats = 8, 1
    result = measure(args)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(render([result]))


if __name__ == "__main__":
    main()
