"""WebSocket frames through ``ASGIApp`` in process: the connection's own cost, without a server or a socket.
``python bench/websocket_frames_bench.py [--calls N] [--repeats R] [--tree NAME=PYTHONPATH ...]``.

An ``ASGIApp(methods({"add": ...}), websocket=True)`` is called with a ``receive`` and a ``send`` of this script's
(an ``asyncio.Queue`` of frames; ``send`` puts the next frame as each answer comes), so every figure is the app's
work: reading the frame, the session, the task, the answer. Cells: an ``async def`` handler and a sync one
(``run_sync_inline``, so that no worker thread's hand-off drowns the connection's cost), one call at a time
(``ping-pong``) and 64 in flight (``window 64``).

Each ``--tree`` (a ``PYTHONPATH`` holding an ``rpcwire``: the one checked out, a snapshot of another commit) is
measured in a process of its own, the trees in turn, ``R`` times, so that the machine's noise falls on all alike.
The table gives each cell's median frames per CPU second of the process (``time.process_time``, which a loaded
machine disturbs less than the wall clock) and each tree's ratio to the first. Every answer is checked. No
assertion on time. ``--child`` runs one process's cells and prints them as JSON (what the parent reads);
``--child --cell CELL --calls N`` under ``valgrind --tool=callgrind``, for N and 2N, gives a cell's instructions per
frame (the difference of the two runs over N; bench/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rpcwire import methods
from rpcwire.http import ASGIApp

CELLS = [("async", 1), ("async", 64), ("sync", 1), ("sync", 64)]
ROOT = Path(__file__).resolve().parent.parent


async def _one_cell(kind: str, window: int, calls: int) -> float:
    async def add(a: int, b: int) -> int:
        return a + b

    def add_sync(a: int, b: int) -> int:
        return a + b

    handler = methods({"add": add}) if kind == "async" else methods({"add": add_sync})
    app = ASGIApp(handler, websocket=True, run_sync_inline=kind == "sync", max_concurrency=64)
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    sent = 0
    answered = 0
    done = asyncio.get_running_loop().create_future()

    def frame() -> dict[str, Any]:
        nonlocal sent
        sent += 1
        text = f'{{"jsonrpc":"2.0","method":"add","params":[{sent},1],"id":{sent}}}'
        return {"type": "websocket.receive", "text": text}

    async def receive() -> dict[str, Any]:
        return await inbox.get()

    async def send(event: dict[str, Any]) -> None:
        nonlocal answered
        if event["type"] != "websocket.send":
            return
        answer = json.loads(event["text"])
        if answer["result"] != answer["id"] + 1:
            raise AssertionError(f"unexpected answer {answer!r}")
        answered += 1
        if sent < calls:
            inbox.put_nowait(frame())
        elif answered == calls:
            inbox.put_nowait({"type": "websocket.disconnect", "code": 1000})
            done.set_result(None)

    inbox.put_nowait({"type": "websocket.connect"})
    for _ in range(min(window, calls)):
        inbox.put_nowait(frame())
    scope = {"type": "websocket", "path": "/", "headers": [(b"host", b"127.0.0.1")], "subprotocols": []}
    scope |= {"server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 50000), "scheme": "ws"}
    started = time.process_time()
    await app(scope, receive, send)
    seconds = time.process_time() - started
    if answered != calls:
        raise AssertionError(f"{answered} of {calls} answered")
    return calls / seconds


def child(calls: int, cells: list[str] | None) -> None:
    figures = {
        f"{kind}/{window}": asyncio.run(_one_cell(kind, window, calls))
        for kind, window in CELLS
        if cells is None or f"{kind}/{window}" in cells
    }
    sys.stdout.write(json.dumps(figures) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tree", action="append", default=[], help="NAME=PYTHONPATH (default: this checkout)")
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--cell", action="append", help="with --child: only this cell (async/1, sync/64...)")
    args = parser.parse_args()
    if args.child:
        child(args.calls, args.cell)
        return
    trees = [tree.split("=", 1) for tree in args.tree] or [["here", str(ROOT / "python")]]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
    for repeat in range(args.repeats):
        for name, path in trees[repeat % len(trees) :] + trees[: repeat % len(trees)]:  # the order rotates
            env = {**os.environ, "PYTHONPATH": path}
            command = [sys.executable, __file__, "--child", "--calls", str(args.calls)]
            output = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
            runs[name].append(json.loads(output))
    first = trees[0][0]
    medians = {
        name: {cell: statistics.median(run[cell] for run in runs[name]) for cell in runs[name][0]} for name in runs
    }
    sys.stdout.write(f"load average {os.getloadavg()[0]:.2f}; {args.calls} calls a cell, {args.repeats} repeats\n")
    sys.stdout.write(f"{'cell':<10}" + "".join(f"{name + ' frames/CPU s':>24}" for name in runs) + "   ratios\n")
    for cell in medians[first]:
        row = f"{cell:<10}" + "".join(f"{medians[name][cell]:>24,.0f}" for name in runs)
        row += "   " + " ".join(f"{name} {medians[name][cell] / medians[first][cell]:.3f}" for name in runs)
        sys.stdout.write(row + "\n")
    (ROOT / "bench" / "websocket_frames_results.json").write_text(json.dumps({"runs": runs, "medians": medians}))


if __name__ == "__main__":
    main()
