"""A small MCP-style tool server over stdin/stdout: several tool calls in flight at once, a long one that
reports progress and stops when the client cancels it.

Run it and type (or pipe) one JSON-RPC request per line, e.g. a long call with a progress token, a
short one, then the cancellation of the long one:

    {"jsonrpc":"2.0","id":1,"method":"tools/call",
     "params":{"name":"slow_count","arguments":{"n":50},"_meta":{"progressToken":"p1"}}}
    {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}
    {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"user"}}

(the first on one line). ``add`` is answered at once while ``slow_count`` runs; ``slow_count`` writes
``notifications/progress`` until the cancellation arrives, then stops, and (MCP's rule) gets no answer.
Swap ``rpcwire`` for ``rpcwire.pure`` in the import to run the pure-Python twin instead.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from rpcwire import InvalidParams, MethodNotFound, RequestCancelled, StdioTransport, current_request, serve

TOOLS = {
    "add": {"description": "Add two numbers", "inputSchema": {"type": "object", "required": ["a", "b"]}},
    "slow_count": {"description": "Count to n, reporting progress", "inputSchema": {"type": "object"}},
}


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
