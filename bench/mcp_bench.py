"""MCP end to end: the SDK's own client calling a real MCPServer's ``echo`` tool over stdio, SDK transport vs rpcwire's.

    python bench/mcp_bench.py                    # ~1 min: 3 repeats, table on stdout, bench/mcp_results.json
    python bench/mcp_bench.py --calls 500 --rounds 10 --repeats 1   # a smoke run
    python bench/mcp_bench.py --serve rpcwire    # the server alone (what the client spawns)

The server (this file with ``--serve``) is one ``MCPServer`` with an ``echo`` tool and a ``cpu`` tool
(its own ``time.process_time()``), served by ``app.run("stdio")`` (``sdk``) or
``rpcwire.mcp.run_stdio(app)`` (``rpcwire``). The client is ``mcp.client.stdio.stdio_client`` +
``ClientSession`` in this process. Per repeat and transport (the order rotates between repeats): a
new server, ``initialize``, a warm-up, then

- sequential: ``--calls`` awaited ``call_tool("echo")`` one after another; the median µs of a call;
- concurrent: ``--rounds`` rounds of ``--concurrency`` calls started together; wall µs per call and calls/s;

and for both the server's and the client's CPU µs per call. The table gives the medians over repeats and
the ratio SDK / rpcwire (so > 1 means rpcwire is better; for calls/s it is rpcwire / SDK).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.mcpserver import MCPServer
from rpcwire.mcp import run_stdio

TRANSPORTS = ("sdk", "rpcwire")
HERE = Path(__file__).resolve()


def serve(transport: str) -> None:
    app = MCPServer("bench")

    @app.tool()
    def echo(text: str) -> str:
        return text

    @app.tool()
    def cpu() -> float:
        return time.process_time()

    if transport == "sdk":
        app.run("stdio")
    else:
        run_stdio(app)


async def measure(transport: str, calls: int, rounds: int, concurrency: int, warmup: int) -> dict[str, float]:
    params = StdioServerParameters(command=sys.executable, args=[str(HERE), "--serve", transport])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def echo() -> None:
            result = await session.call_tool("echo", {"text": "hello"})
            assert not result.is_error and result.structured_content == {"result": "hello"}, result

        async def server_cpu() -> float:
            result = await session.call_tool("cpu", {})
            return float(result.structured_content["result"])

        for _ in range(warmup):
            await echo()

        figures: dict[str, float] = {}
        times = []
        server_before, client_before = await server_cpu(), time.process_time()
        for _ in range(calls):
            start = time.perf_counter()
            await echo()
            times.append(time.perf_counter() - start)
        figures["seq_us"] = statistics.median(times) * 1e6
        figures["seq_server_cpu_us"] = (await server_cpu() - server_before) / calls * 1e6
        figures["seq_client_cpu_us"] = (time.process_time() - client_before) / calls * 1e6

        server_before, client_before = await server_cpu(), time.process_time()
        start = time.perf_counter()
        for _ in range(rounds):
            async with anyio.create_task_group() as group:
                for _ in range(concurrency):
                    group.start_soon(echo)
        wall = time.perf_counter() - start
        total = rounds * concurrency
        figures["conc_us"] = wall / total * 1e6
        figures["conc_calls_per_s"] = total / wall
        figures["conc_server_cpu_us"] = (await server_cpu() - server_before) / total * 1e6
        figures["conc_client_cpu_us"] = (time.process_time() - client_before) / total * 1e6
        return figures


ROWS = (
    ("sequential: median µs per call", "seq_us", False),
    ("sequential: server CPU µs per call", "seq_server_cpu_us", False),
    ("sequential: client CPU µs per call", "seq_client_cpu_us", False),
    ("concurrent: µs per call (wall / calls)", "conc_us", False),
    ("concurrent: calls per second", "conc_calls_per_s", True),
    ("concurrent: server CPU µs per call", "conc_server_cpu_us", False),
    ("concurrent: client CPU µs per call", "conc_client_cpu_us", False),
)


def report(runs: dict[str, list[dict[str, float]]], args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    medians = {t: {key: statistics.median(run[key] for run in runs[t]) for _, key, _ in ROWS} for t in TRANSPORTS}
    lines = [
        f"MCP stdio, SDK client -> MCPServer `echo` tool: {args.calls} sequential calls, {args.rounds} x "
        f"{args.concurrency} concurrent; median of {args.repeats} repeats",
        "",
        "| figure | SDK transport | rpcwire.mcp | ratio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for label, key, higher_is_better in ROWS:
        sdk, ours = medians["sdk"][key], medians["rpcwire"][key]
        ratio = ours / sdk if higher_is_better else sdk / ours
        lines.append(f"| {label} | {sdk:,.0f} | {ours:,.0f} | {ratio:.2f}x |")
    seq_ratio = medians["sdk"]["seq_us"] / medians["rpcwire"]["seq_us"]
    conc_ratio = medians["rpcwire"]["conc_calls_per_s"] / medians["sdk"]["conc_calls_per_s"]
    lines += [
        "",
        f"targets: >= 1.5x fewer µs per sequential call: {seq_ratio:.2f}x {'met' if seq_ratio >= 1.5 else 'MISSED'}; "
        f">= 2.5x concurrent throughput: {conc_ratio:.2f}x {'met' if conc_ratio >= 2.5 else 'MISSED'}",
    ]
    return "\n".join(lines), medians


def machine() -> dict[str, Any]:
    try:
        described = subprocess.run(
            ["git", "describe", "--always", "--dirty"], cwd=HERE.parent, capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        described = ""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "mcp": version("mcp"),
        "anyio": version("anyio"),
        "rpcwire": described,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", choices=TRANSPORTS, help="run the server (what the client spawns)")
    parser.add_argument("--calls", type=int, default=2000, help="sequential calls per run")
    parser.add_argument("--rounds", type=int, default=40, help="rounds of concurrent calls per run")
    parser.add_argument("--concurrency", type=int, default=50, help="calls started together in a round")
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls first")
    parser.add_argument("--repeats", type=int, default=3, help="runs per transport (order rotates)")
    parser.add_argument("--json", default=str(HERE.parent / "mcp_results.json"), help="where the raw figures go")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return

    runs: dict[str, list[dict[str, float]]] = {t: [] for t in TRANSPORTS}
    for repeat in range(args.repeats):
        order = TRANSPORTS if repeat % 2 == 0 else TRANSPORTS[::-1]
        for transport in order:
            figures = anyio.run(measure, transport, args.calls, args.rounds, args.concurrency, args.warmup)
            runs[transport].append(figures)
            summary = ", ".join(f"{key} {value:,.0f}" for key, value in figures.items())
            print(f"repeat {repeat + 1} {transport}: {summary}", file=sys.stderr)
    table, medians = report(runs, args)
    print(table)
    Path(args.json).write_text(
        json.dumps({"machine": machine(), "args": vars(args), "runs": runs, "medians": medians}, indent=2) + "\n"
    )
    print(f"raw figures: {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
