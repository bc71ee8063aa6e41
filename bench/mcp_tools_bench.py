"""MCP tool servers: the SDK's ``MCPServer`` against ``rpcwire.mcp_tools`` on the same tools, over stdio and HTTP.

    python bench/mcp_tools_bench.py                                  # ~2 min: 3 repeats, stdio and HTTP
    python bench/mcp_tools_bench.py --calls 300 --repeats 1          # a smoke run
    python bench/mcp_tools_bench.py --serve rpcwire --via stdio      # one server alone (what the bench spawns)

The same three tools on both sides, plain functions: ``add(a: int, b: int) -> int``, ``echo(text: str) -> str``
and ``cpu() -> float`` (the server process's own ``time.process_time()``: every thread's CPU, read by the tool
itself, so the figure is the server's alone whatever else the machine runs). ``sdk`` is an ``MCPServer`` with
``@app.tool()`` (over stdio ``app.run("stdio")``; over HTTP its streamable HTTP app, stateless with JSON
responses, its cheapest setting); ``rpcwire`` is a ``methods()`` registry, ``serve_tools(tools)`` over stdio
(its defaults: up to 8 calls at once on threads) and ``ASGIApp(tools_handler(tools))`` over HTTP. Both HTTP
servers run under the same uvicorn, in-process, on 127.0.0.1 port 0. The client is the SDK's own
(``stdio_client`` or ``streamable_http_client``, and ``ClientSession``) in this process.

Per repeat and transport both servers run at once (new processes), ``initialize``, a warm-up, then ``--calls``
calls (``add`` and ``echo`` in turn), one server then the other (the order alternating), so both meet the
machine's other work alike. Figures: the server's CPU µs per call (``cpu`` before and after), and the median
wall µs per call seen by the client. The table gives the medians over repeats and the ratio SDK / rpcwire
(> 1: rpcwire spends less); bench/mcp_tools_results.json keeps every run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
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
from mcp.client.streamable_http import streamable_http_client

SERVERS = ("sdk", "rpcwire")
VIAS = ("stdio", "http")
HERE = Path(__file__).resolve()


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def echo(text: str) -> str:
    """The text, as it came."""
    return text


def cpu() -> float:
    """This process's CPU seconds, every thread's."""
    return time.process_time()


FUNCTIONS = (add, echo, cpu)


def app_of(server: str, via: str) -> Any:
    """The server: over stdio, something to run; over HTTP, an ASGI app."""
    if server == "sdk":
        from mcp.server.mcpserver import MCPServer  # noqa: PLC0415

        app = MCPServer("bench", log_level="WARNING")
        for function in FUNCTIONS:
            app.tool()(function)
        if via == "http":
            return app.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True)
        return app
    from rpcwire import methods  # noqa: PLC0415
    from rpcwire.mcp_tools import tools_handler  # noqa: PLC0415

    tools = methods({function.__name__: function for function in FUNCTIONS})
    if via == "http":
        from rpcwire.http import ASGIApp  # noqa: PLC0415

        return ASGIApp(tools_handler(tools, name="bench"))
    return tools


def serve(server: str, via: str) -> None:
    app = app_of(server, via)
    if via == "stdio":
        if server == "sdk":
            app.run("stdio")
        else:
            from rpcwire.mcp_tools import serve_tools  # noqa: PLC0415

            serve_tools(app, name="bench")
        return
    import uvicorn  # noqa: PLC0415

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"listening on {sock.getsockname()[1]}", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False)).run(sockets=[sock])


def start_http(server: str, stack: AsyncExitStack) -> str:
    process = subprocess.Popen(
        [sys.executable, str(HERE), "--serve", server, "--via", "http"], stderr=subprocess.PIPE, text=True
    )

    def stop() -> None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    stack.callback(stop)
    assert process.stderr is not None
    for _ in range(20):
        line = process.stderr.readline()
        if line.startswith("listening on "):
            return f"http://127.0.0.1:{int(line.split()[-1])}/mcp"
    raise RuntimeError(f"the {server} HTTP server did not start")


async def session_of(server: str, via: str, stack: AsyncExitStack) -> ClientSession:
    if via == "stdio":
        # This environment whole (the SDK's default keeps a few variables: PYTHONPATH would be lost).
        arguments = [str(HERE), "--serve", server, "--via", "stdio"]
        params = StdioServerParameters(command=sys.executable, args=arguments, env=dict(os.environ))
        read, write = await stack.enter_async_context(stdio_client(params))
    else:
        url = start_http(server, stack)
        for _ in range(100):  # uvicorn starts listening a moment after the announcement
            try:
                socket.create_connection(("127.0.0.1", int(url.split(":")[-1].split("/")[0])), 1).close()
                break
            except OSError:
                await anyio.sleep(0.05)
        read, write, *_ = await stack.enter_async_context(streamable_http_client(url))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


async def call(session: ClientSession, index: int) -> None:
    if index % 2:
        result = await session.call_tool("echo", {"text": "hello"})
        assert not result.is_error and result.structured_content == {"result": "hello"}, result
    else:
        result = await session.call_tool("add", {"a": index, "b": 1})
        assert not result.is_error and result.structured_content == {"result": index + 1}, result


async def server_cpu(session: ClientSession) -> float:
    result = await session.call_tool("cpu", {})
    assert result.structured_content is not None, result
    return float(result.structured_content["result"])


async def measure(via: str, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    async with AsyncExitStack() as stack:
        sessions = {server: await session_of(server, via, stack) for server in SERVERS}
        for server in SERVERS:
            for index in range(args.warmup):
                await call(sessions[server], index)
        times: dict[str, list[float]] = {server: [] for server in SERVERS}
        before = {server: await server_cpu(sessions[server]) for server in SERVERS}
        for index in range(args.calls):
            for server in SERVERS if index % 2 == 0 else SERVERS[::-1]:
                start = time.perf_counter()
                await call(sessions[server], index)
                times[server].append(time.perf_counter() - start)
        figures: dict[str, dict[str, float]] = {}
        for server in SERVERS:
            spent = await server_cpu(sessions[server]) - before[server]
            figures[server] = {
                "server_cpu_us": spent / args.calls * 1e6,
                "wall_us": statistics.median(times[server]) * 1e6,
            }
        return figures


ROWS = (("server CPU µs per call", "server_cpu_us"), ("median µs per call (client's wall)", "wall_us"))


def report(runs: dict[str, dict[str, list[dict[str, float]]]], args: argparse.Namespace) -> tuple[str, Any]:
    medians = {
        via: {server: {key: statistics.median(run[key] for run in by[server]) for _, key in ROWS} for server in SERVERS}
        for via, by in runs.items()
    }
    lines = [
        f"MCP tool servers: the SDK's client calling `add` and `echo`, {args.calls} calls per server; median of "
        f"{args.repeats} repeats; load average {args.load_before:.1f} before, {os.getloadavg()[0]:.1f} after "
        f"({os.cpu_count()} CPUs)",
        "",
        "| via | figure | SDK MCPServer | rpcwire.mcp_tools | SDK / rpcwire |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for via, by in medians.items():
        for label, key in ROWS:
            sdk, ours = by["sdk"][key], by["rpcwire"][key]
            lines.append(f"| {via} | {label} | {sdk:,.0f} | {ours:,.0f} | {sdk / ours:.2f}x |")
    targets = {"stdio": "target 5x", "http": "target ~1.8x: 45-50% less"}
    lines.append("")
    for via, by in medians.items():
        ratio = by["sdk"]["server_cpu_us"] / by["rpcwire"]["server_cpu_us"]
        lines.append(f"{via}: {ratio:.2f}x less server CPU per call ({targets[via]})")
    return "\n".join(lines), medians


def machine() -> dict[str, Any]:
    described = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=HERE.parent, capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "mcp": version("mcp"),
        "uvicorn": version("uvicorn"),
        "rpcwire": described,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", choices=SERVERS, help="run one server (what the bench spawns)")
    parser.add_argument("--via", default="stdio,http", help="stdio, http or both (with --serve: one)")
    parser.add_argument("--calls", type=int, default=2000, help="measured calls per server and run")
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls first")
    parser.add_argument("--repeats", type=int, default=3, help="runs (each: new servers, interleaved)")
    parser.add_argument("--json", default=str(HERE.parent / "mcp_tools_results.json"), help="where the figures go")
    args = parser.parse_args()
    vias = args.via.split(",")
    if not set(vias) <= set(VIAS):
        parser.error(f"--via takes {', '.join(VIAS)}")
    if args.serve:
        serve(args.serve, vias[0])
        return
    args.load_before = os.getloadavg()[0]
    runs: dict[str, dict[str, list[dict[str, float]]]] = {via: {server: [] for server in SERVERS} for via in vias}
    for repeat in range(args.repeats):
        for via in vias:
            for server, figures in anyio.run(measure, via, args).items():
                runs[via][server].append(figures)
                summary = ", ".join(f"{key} {value:,.0f}" for key, value in figures.items())
                print(f"repeat {repeat + 1} {via} {server}: {summary}", file=sys.stderr)
    table, medians = report(runs, args)
    print(table)
    Path(args.json).write_text(
        json.dumps({"machine": machine(), "args": vars(args), "runs": runs, "medians": medians}, indent=2) + "\n"
    )
    print(f"raw figures: {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
