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
the import to run the pure-Python twin instead. For a server built on the MCP SDK itself, see ``rpcwire.mcp``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from rpcwire import InvalidParams, MethodNotFound, RequestCancelled, StdioTransport, current_request, serve

# The MCP revisions whose initialize handshake this server speaks, oldest first.
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
SERVER_INFO = {"name": "rpcwire-example-tools", "version": "1.0.0"}

TOOLS = {
    "add": {
        "description": "Add two numbers",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
    "slow_count": {
        "description": "Count to n, reporting progress",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}},
    },
}


def initialize(params: Any) -> Any:
    """MCP's handshake: the client's protocol version when this server speaks it, else the newest it does."""
    requested = params.get("protocolVersion") if isinstance(params, dict) else None
    version = requested if requested in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1]
    return {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": SERVER_INFO}


def add(arguments: dict[str, Any]) -> Any:
    try:
        total = arguments["a"] + arguments["b"]
    except (KeyError, TypeError) as exc:
        raise InvalidParams(f"add needs numbers a and b: {exc}") from None
    return {"content": [{"type": "text", "text": str(total)}]}


def slow_count(arguments: dict[str, Any]) -> Any:
    request = current_request()
    n = int(arguments.get("n", 3))
    tick = threading.Event()
    for i in range(1, n + 1):
        if request.cancelled:  # cooperative: a sync handler checks between steps
            raise RequestCancelled()
        tick.wait(0.05)
        request.progress(i, n, f"counted to {i}")  # only written if the call sent a progressToken
    return {"content": [{"type": "text", "text": f"counted to {n}"}]}


def handler(method: str, params: Any) -> Any:
    if method == "initialize":
        return initialize(params)
    if method == "ping":
        return {}
    if method.startswith("notifications/"):
        return None  # notifications/initialized and the like: nothing to do (cancellation is rpcwire's)
    if method == "tools/list":
        return {"tools": [{"name": name, **spec} for name, spec in TOOLS.items()]}
    if method != "tools/call":
        raise MethodNotFound()
    if not isinstance(params, dict) or params.get("name") not in TOOLS:
        raise InvalidParams("unknown tool", data={"tools": list(TOOLS)})
    arguments = params.get("arguments") or {}
    return add(arguments) if params["name"] == "add" else slow_count(arguments)


def main() -> None:
    """Serve the tools until stdin closes, up to 8 calls at once."""
    logging.basicConfig(level=logging.INFO)  # logs go to stderr; stdout is the wire
    serve(handler, StdioTransport(), max_concurrency=8)


if __name__ == "__main__":
    main()
