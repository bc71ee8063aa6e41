"""An MCP tool server in a line: plain functions in a ``methods()`` registry, served by ``rpcwire.mcp_tools``.

    python examples/mcp_tools_server.py          # over stdin/stdout (an MCP client starts it)
    python examples/mcp_tools_server.py --http   # MCP's streamable HTTP on 127.0.0.1:8000 (needs uvicorn)

An MCP client (the SDK's ``Client``, Claude Desktop, an IDE) starts it with command ``python`` and arguments
``["examples/mcp_tools_server.py"]``, and speaks any MCP revision to it: the ``initialize`` handshake's, or
2026-07-28's (no handshake; the SDK's ``Client`` probes ``server/discover`` and takes it). ``tools/list`` describes
the functions from their annotations and docstrings; ``divide(1, 0)`` answers ``isError: true`` with its message,
which the model reads; ``slow_count`` reports progress, logs to the client (at 2026-07-28, to a client that asks for
a log level), and stops when the client cancels it. The MCP SDK is not needed (``rpcwire.mcp_tools`` does not
import it).
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Annotated

from rpcwire import current_request, methods
from rpcwire.mcp_tools import ToolError, log, serve_tools, tools_handler

tools = methods()


@tools.method
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@tools.method
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    if b == 0:
        raise ToolError("cannot divide by zero")  # the model reads this message (isError: true)
    return a / b


@tools.method
def slow_count(n: Annotated[int, {"minimum": 1}] = 3) -> str:
    """Count to n, reporting progress."""
    request = current_request()
    tick = threading.Event()
    for i in range(1, n + 1):
        request.raise_if_cancelled()  # a sync tool checks between steps
        tick.wait(0.05)
        request.progress(i, n, f"counted to {i}")  # written only if the call sent a progressToken
    log("info", f"counted to {n}")
    return f"counted to {n}"


def main() -> None:
    logging.basicConfig(level=logging.INFO)  # logs go to stderr; stdout is the wire
    if "--http" in sys.argv:
        import uvicorn  # noqa: PLC0415  (only for --http)
        from rpcwire.http import ASGIApp  # noqa: PLC0415

        uvicorn.run(ASGIApp(tools_handler(tools, name="calc")), host="127.0.0.1", port=8000)
    else:
        serve_tools(tools, name="calc")


if __name__ == "__main__":
    main()
