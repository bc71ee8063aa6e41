"""AsyncClient against the hand-written asyncio + orjson client, in figures that do not move with the machine's
load: `.venv/bin/python bench/client_instructions.py count` (callgrind: the client process's instructions for N
and 2N calls, their difference over N) and `... cpu` (client CPU per call, every client once per repeat,
interleaved; medians of each repeat's ratio to the hand-written client on the same loop).

Each client spawns `pipe_server.py rpcwire`'s server (valgrind does not follow the child) and makes its calls one after
the other (`sequential`) or 64 at once behind an `asyncio.Semaphore` (`in-flight`), after one warm-up call, on
asyncio's loop and on uvloop's. `run` makes one measurement (what `count` runs under valgrind). `--baseline DIR`
adds `rpcwire.AsyncClient@baseline`: the package of another build (DIR holds its `rpcwire/`), in processes that
import it from there.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# pipe_server.py rpcwire's server (the native sequential `serve`, an echo handler), without its peers' imports
SERVER = [
    sys.executable,
    "-c",
    "import sys, rpcwire; rpcwire.serve(lambda method, params: params, "
    "rpcwire.StdioTransport(sys.stdin.buffer, sys.stdout.buffer))",
]
PARAMS = {"text": "hello", "n": 1}
TASKS = 64
CLIENTS = ("hand-written", "rpcwire.AsyncClient", "rpcwire.pure.AsyncClient")
MODES = ("sequential", "in-flight")


def client_class(name: str) -> Any:
    if name == "hand-written":
        from async_orjson_client import AsyncOrjsonClient  # noqa: PLC0415  (imports orjson)

        return AsyncOrjsonClient
    import rpcwire  # noqa: PLC0415
    import rpcwire.pure  # noqa: PLC0415

    return rpcwire.pure.AsyncClient if "pure" in name else rpcwire.AsyncClient


async def measure(name: str, mode: str, calls: int) -> float:
    """``calls`` calls after a warm-up one; the client's CPU seconds for them."""
    client = await client_class(name).spawn(SERVER)
    try:
        await client.call("echo", PARAMS)
        cpu = time.process_time()
        if mode == "sequential":
            for _ in range(calls):
                await client.call("echo", PARAMS)
        else:
            slots = asyncio.Semaphore(TASKS)

            async def one() -> None:
                async with slots:
                    await client.call("echo", PARAMS)

            await asyncio.gather(*(one() for _ in range(calls)))
        return time.process_time() - cpu
    finally:
        await client.close()


def loop_runner(loop: str) -> Callable[[Any], Any]:
    if loop == "uvloop":
        import uvloop  # noqa: PLC0415

        return uvloop.run
    return asyncio.run


def child(name: str, loop: str, mode: str, calls: int, baseline: str | None, *, valgrind: list[str]) -> float:
    """One measurement in a process of its own (under ``valgrind`` when given): its CPU seconds."""
    env = dict(os.environ)
    client = name.removesuffix("@baseline")
    if name.endswith("@baseline") and baseline:
        env["PYTHONPATH"] = os.pathsep.join([baseline, *filter(None, [env.get("PYTHONPATH")])])
    argv = [*valgrind, sys.executable, __file__, "run", client, loop, mode, str(calls)]
    out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True).stdout
    return float(out.split()[-1])


def instructions(name: str, loop: str, mode: str, calls: int, baseline: str | None) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        child(
            name, loop, mode, calls, baseline, valgrind=["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        )
        return int(re.search(rb"^summary: (\d+)", out.read_bytes(), re.M).group(1))  # type: ignore[union-attr]


def names(baseline: str | None) -> list[str]:
    return [*CLIENTS[:2], *(["rpcwire.AsyncClient@baseline"] if baseline else [])]


def count(calls: int, baseline: str | None, loops: list[str]) -> None:
    print(f"instructions a call in the client process: (I(2N) - I(N)) / N, N={calls:,}; load {os.getloadavg()}")
    for loop in loops:
        for mode in MODES:
            figures = {}
            for name in names(baseline):
                one = instructions(name, loop, mode, calls, baseline)
                two = instructions(name, loop, mode, 2 * calls, baseline)
                figures[name] = (two - one) / calls
            hand = figures["hand-written"]
            row = ", ".join(f"{name} {value / 1e3:.1f}k ({value / hand:.3f}x)" for name, value in figures.items())
            print(f"{loop:8} {mode:10} {row}", flush=True)


def cpu(calls: int, repeats: int, baseline: str | None, loops: list[str]) -> None:
    print(f"client CPU µs a call, {calls:,} calls, {repeats} repeats interleaved; load {os.getloadavg()}")
    for loop in loops:
        for mode in MODES:
            runs: dict[str, list[float]] = {name: [] for name in names(baseline)}
            for _ in range(repeats):
                for name, values in runs.items():
                    values.append(child(name, loop, mode, calls, baseline, valgrind=[]) / calls * 1e6)
            hand = runs["hand-written"]
            row = ", ".join(
                f"{name} {statistics.median(values):.1f} µs "
                f"({statistics.median(v / h for v, h in zip(values, hand, strict=True)):.3f}x)"
                for name, values in runs.items()
            )
            print(f"{loop:8} {mode:10} {row}", flush=True)
    print(f"load {os.getloadavg()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["count", "cpu", "run"])
    parser.add_argument("args", nargs="*", help="run: CLIENT LOOP MODE CALLS")
    parser.add_argument("--calls", type=int, default=None, help="count: N (1,000); cpu: calls a repeat (2,000)")
    parser.add_argument("--repeats", type=int, default=7, help="cpu: repeats (7)")
    parser.add_argument("--loops", default="asyncio,uvloop")
    parser.add_argument("--baseline", help="a directory holding another build's rpcwire/ package")
    options = parser.parse_args()
    loops = options.loops.split(",")
    if options.what == "run":
        name, loop, mode, calls = options.args
        print(loop_runner(loop)(measure(name, mode, int(calls))))
    elif options.what == "count":
        count(options.calls or 1_000, options.baseline, loops)
    else:
        cpu(options.calls or 2_000, options.repeats, options.baseline, loops)


if __name__ == "__main__":
    main()
