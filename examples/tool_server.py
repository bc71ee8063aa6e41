"""A small MCP tool server over stdin/stdout written with rpcwire alone: it answers an MCP client's
``initialize`` and ``tools/list``, and runs ``tools/call`` concurrently: a long call reports progress and
stops when the client cancels it, while other calls are answered.

    python examples/tool_server.py

An MCP client starts it as a subprocess (command ``python``, arguments ``["examples/tool_server.py"]``); the
MCP Python SDK's ``stdio_client`` and ``ClientSession`` talk to it as to any MCP server (``initialize``,
``list_tools``, ``call_tool``). By hand, type (or pipe) one JSON-RPC message per line:

    {"jsonrpc":"2.0","id":0,"method":"initialize",
     "params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"me","version":"1"}}}
    {"jsonrpc":"2.0","method":"notifications/initialized"}
    {"jsonrpc":"2.0","id":1,"method":"tools/call",
     "params":{"name":"slow_count","arguments":{"n":50},"_meta":{"progressToken":"p1"}}}
    {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}
    {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"user"}}

(those split here, each on one line). ``initialize`` is answered with this server's capabilities; ``add`` is
answered at once while ``slow_count`` runs; ``slow_count`` writes ``notifications/progress`` until the
cancellation arrives, then stops, and (MCP's rule) gets no answer. Swap ``rpcwire`` for ``rpcwire.pure`` in
the import to run the pure-Python twin instead. The tools are plain functions in a ``methods()`` registry:
``tools/list`` lists ``TOOLS.mcp_tools()``, their ``inputSchema`` and ``outputSchema`` made from the annotations.
For a server built on the MCP SDK itself, see ``rpcwire.mcp``.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Annotated, Any

from rpcwire import InvalidParams, MethodNotFound, RequestCancelled, StdioTransport, current_request, methods, serve

# The MCP revisions whose initialize handshake this server speaks, oldest first.
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
SERVER_INFO = {"name": "rpcwire-example-tools", "version": "1.0.0"}

# The tools: plain functions. tools/list describes them from their annotations and docstrings.
TOOLS = methods()


@TOOLS.method
def add(a: float, b: float) -> float:
    """Add two numbers"""
    return a + b


@TOOLS.method
def slow_count(n: Annotated[int, {"minimum": 1}] = 3) -> str:
    """Count to n, reporting progress"""
    request = current_request()
    tick = threading.Event()
    for i in range(1, n + 1):
        if request.cancelled:  # cooperative: a sync handler checks between steps
            raise RequestCancelled()
        tick.wait(0.05)
        request.progress(i, n, f"counted to {i}")  # only written if the call sent a progressToken
    return f"counted to {n}"


def initialize(params: Any) -> Any:
    """MCP's handshake: the client's protocol version when this server speaks it, else the newest it does."""
    requested = params.get("protocolVersion") if isinstance(params, dict) else None
    version = requested if requested in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1]
    return {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": SERVER_INFO}


def call_tool(params: Any) -> Any:
    """tools/call: the tool's value as text, and as structured content (under "result": it is no object)."""
    if not isinstance(params, dict) or params.get("name") not in TOOLS:
        raise InvalidParams("unknown tool", data={"tools": [tool["name"] for tool in TOOLS.mcp_tools()]})
    # Arguments that do not fit the tool, or break what its inputSchema says (n below 1): -32602, each error listed.
    value = TOOLS(params["name"], params.get("arguments") or {})
    text = value if isinstance(value, str) else json.dumps(value)
    return {"content": [{"type": "text", "text": text}], "structuredContent": {"result": value}}


def handler(method: str, params: Any) -> Any:
    if method == "initialize":
        return initialize(params)
    if method == "ping":
        return {}
    if method.startswith("notifications/"):
        return None  # notifications/initialized and the like: nothing to do (cancellation is rpcwire's)
    if method == "tools/list":
        return {"tools": TOOLS.mcp_tools()}  # inputSchema and outputSchema from the annotations
    if method == "tools/call":
        return call_tool(params)
    raise MethodNotFound()


def main() -> None:
    """Serve the tools until stdin closes, up to 8 calls at once."""
    logging.basicConfig(level=logging.INFO)  # logs go to stderr; stdout is the wire
    serve(handler, StdioTransport(), max_concurrency=8)


if __name__ == "__main__":
    main()
