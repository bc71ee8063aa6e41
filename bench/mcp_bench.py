"""MCP end to end: the SDK's own client calling a real MCPServer's ``echo`` tool over stdio, SDK transport vs rpcwire's.

    python bench/mcp_bench.py                    # ~2 min: 3 repeats, table on stdout, bench/mcp_results.json
    python bench/mcp_bench.py --calls 500 --rounds 10 --repeats 1 --tools sync   # a smoke run
    python bench/mcp_bench.py --serve rpcwire --tool sync   # the server alone (what the client spawns)

The server (this file with ``--serve``) is one ``MCPServer`` with an ``echo`` tool (``def``, which the
SDK runs on a worker thread, or ``async def``: ``--tools`` measures each in turn) and a ``cpu`` tool
(its own ``time.process_time()``), served by ``app.run("stdio")`` (``sdk``) or
``rpcwire.mcp.run_stdio(app)`` (``rpcwire``). The client is ``mcp.client.stdio.stdio_client`` +
``ClientSession`` in this process. Per repeat and tool, both servers run at once (new processes each
time), ``initialize``, a warm-up, then their calls are interleaved, one transport then the other (the
order alternating), so that both meet the machine's other work alike:

- sequential: ``--calls`` awaited ``call_tool("echo")`` each; the median µs of a call;
- concurrent: ``--rounds`` rounds of ``--concurrency`` calls started together each; wall µs per call and calls/s;

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
from contextlib import AsyncExitStack
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.mcpserver import MCPServer
from rpcwire.mcp import run_stdio

TRANSPORTS = ("sdk", "rpcwire")
TOOLS = {"sync": "`def echo`", "async": "`async def echo`"}
HERE = Path(__file__).resolve()


def serve(transport: str, tool: str) -> None:
    app = MCPServer("bench")

    if tool == "sync":

        @app.tool()
        def echo(text: str) -> str:  # the SDK runs a sync tool on a worker thread (one hop per call)
            return text

    else:

        @app.tool(name="echo")
        async def echo_async(text: str) -> str:
            return text

    @app.tool()
    def cpu() -> float:
        return time.process_time()

    if transport == "sdk":
        app.run("stdio")
    else:
        run_stdio(app)


async def echo(session: ClientSession) -> None:
    result = await session.call_tool("echo", {"text": "hello"})
    assert not result.is_error and result.structured_content == {"result": "hello"}, result


async def server_cpu(session: ClientSession) -> float:
    result = await session.call_tool("cpu", {})
    assert result.structured_content is not None, result
    return float(result.structured_content["result"])


async def measure(tool: str, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Both servers at once, their calls interleaved: each transport meets the machine's other work alike."""
    async with AsyncExitStack() as stack:
        sessions: dict[str, ClientSession] = {}
        for transport in TRANSPORTS:
            params = StdioServerParameters(
                command=sys.executable, args=[str(HERE), "--serve", transport, "--tool", tool]
            )
            read, write = await stack.enter_async_context(stdio_client(params))
            sessions[transport] = await stack.enter_async_context(ClientSession(read, write))
            await sessions[transport].initialize()
            for _ in range(args.warmup):
                await echo(sessions[transport])

        def in_turn(index: int) -> tuple[str, ...]:
            return TRANSPORTS if index % 2 == 0 else TRANSPORTS[::-1]

        figures: dict[str, dict[str, float]] = {t: {} for t in TRANSPORTS}
        times: dict[str, list[float]] = {t: [] for t in TRANSPORTS}
        client_cpu = dict.fromkeys(TRANSPORTS, 0.0)
        server_before = {t: await server_cpu(sessions[t]) for t in TRANSPORTS}
        for index in range(args.calls):
            for transport in in_turn(index):
                cpu_start, start = time.process_time(), time.perf_counter()
                await echo(sessions[transport])
                times[transport].append(time.perf_counter() - start)
                client_cpu[transport] += time.process_time() - cpu_start
        for transport in TRANSPORTS:
            figures[transport]["seq_us"] = statistics.median(times[transport]) * 1e6
            server = await server_cpu(sessions[transport]) - server_before[transport]
            figures[transport]["seq_server_cpu_us"] = server / args.calls * 1e6
            figures[transport]["seq_client_cpu_us"] = client_cpu[transport] / args.calls * 1e6

        wall = dict.fromkeys(TRANSPORTS, 0.0)
        client_cpu = dict.fromkeys(TRANSPORTS, 0.0)
        server_before = {t: await server_cpu(sessions[t]) for t in TRANSPORTS}
        for index in range(args.rounds):
            for transport in in_turn(index):
                cpu_start, start = time.process_time(), time.perf_counter()
                async with anyio.create_task_group() as group:
                    for _ in range(args.concurrency):
                        group.start_soon(echo, sessions[transport])
                wall[transport] += time.perf_counter() - start
                client_cpu[transport] += time.process_time() - cpu_start
        total = args.rounds * args.concurrency
        for transport in TRANSPORTS:
            figures[transport]["conc_us"] = wall[transport] / total * 1e6
            figures[transport]["conc_calls_per_s"] = total / wall[transport]
            server = await server_cpu(sessions[transport]) - server_before[transport]
            figures[transport]["conc_server_cpu_us"] = server / total * 1e6
            figures[transport]["conc_client_cpu_us"] = client_cpu[transport] / total * 1e6
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


def report(runs: dict[str, dict[str, list[dict[str, float]]]], args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The markdown table (a section per tool) and the medians."""
    medians = {
        tool: {
            t: {key: statistics.median(run[key] for run in by_transport[t]) for _, key, _ in ROWS} for t in TRANSPORTS
        }
        for tool, by_transport in runs.items()
    }
    lines = [
        f"MCP over stdio: the SDK's client calling an MCPServer's `echo` tool; {args.calls} sequential calls, "
        f"{args.rounds} rounds of {args.concurrency} concurrent; median of {args.repeats} repeats; "
        f"load average {args.load_before:.1f} before, {os.getloadavg()[0]:.1f} after ({os.cpu_count()} CPUs)",
        "",
        "| tool | figure | SDK transport | rpcwire.mcp | ratio |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    targets = []
    for tool, by_transport in medians.items():
        sdk, ours = by_transport["sdk"], by_transport["rpcwire"]
        for label, key, higher_is_better in ROWS:
            ratio = ours[key] / sdk[key] if higher_is_better else sdk[key] / ours[key]
            lines.append(f"| {TOOLS[tool]} | {label} | {sdk[key]:,.0f} | {ours[key]:,.0f} | {ratio:.2f}x |")
        seq_ratio = sdk["seq_us"] / ours["seq_us"]
        conc_ratio = ours["conc_calls_per_s"] / sdk["conc_calls_per_s"]
        targets.append(
            f"{TOOLS[tool]}: {seq_ratio:.2f}x fewer µs per sequential call (target 1.5x), "
            f"{conc_ratio:.2f}x concurrent throughput (target 2.5x)"
        )
    return "\n".join([*lines, "", *targets]), medians


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
    parser.add_argument("--tool", choices=list(TOOLS), default="sync", help="with --serve: the echo tool's kind")
    parser.add_argument("--tools", default="sync,async", help="the echo tools to measure, in turn")
    parser.add_argument("--calls", type=int, default=2000, help="sequential calls per run")
    parser.add_argument("--rounds", type=int, default=40, help="rounds of concurrent calls per run")
    parser.add_argument("--concurrency", type=int, default=50, help="calls started together in a round")
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls first")
    parser.add_argument("--repeats", type=int, default=3, help="runs (each: new servers, both transports interleaved)")
    parser.add_argument("--json", default=str(HERE.parent / "mcp_results.json"), help="where the raw figures go")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.tool)
        return

    tools = args.tools.split(",")
    args.load_before = os.getloadavg()[0]  # the machine's other work: a loaded one penalizes thread hops most
    runs: dict[str, dict[str, list[dict[str, float]]]] = {tool: {t: [] for t in TRANSPORTS} for tool in tools}
    for repeat in range(args.repeats):
        for tool in tools:
            for transport, figures in anyio.run(measure, tool, args).items():
                runs[tool][transport].append(figures)
                summary = ", ".join(f"{key} {value:,.0f}" for key, value in figures.items())
                print(f"repeat {repeat + 1} {tool} {transport}: {summary}", file=sys.stderr)
    table, medians = report(runs, args)
    print(table)
    Path(args.json).write_text(
        json.dumps({"machine": machine(), "args": vars(args), "runs": runs, "medians": medians}, indent=2) + "\n"
    )
    print(f"raw figures: {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
