"""A small MCP-style tool server over stdin/stdout.

Run it and type (or pipe) one JSON-RPC request per line:

    echo '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}' \
        | python examples/tool_server.py

Swap ``rpcwire`` for ``rpcwire.pure`` in the import to run the pure-Python twin instead.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from rpcwire import InvalidParams, MethodNotFound, StdioTransport, serve

TOOLS = {
    "add": {"description": "Add two numbers", "inputSchema": {"type": "object", "required": ["a", "b"]}},
    "slow_count": {"description": "Count to n, reporting progress", "inputSchema": {"type": "object"}},
}


def main() -> None:
    """Serve the tools until stdin closes."""
    logging.basicConfig(level=logging.INFO)  # logs go to stderr; stdout is the wire
    transport = StdioTransport()

    def handler(method: str, params: Any) -> Any:
        if method == "tools/list":
            return {"tools": [{"name": name, **spec} for name, spec in TOOLS.items()]}
        if method != "tools/call":
            raise MethodNotFound()
        if not isinstance(params, dict) or params.get("name") not in TOOLS:
            raise InvalidParams("unknown tool", data={"tools": list(TOOLS)})
        arguments = params.get("arguments") or {}
        if params["name"] == "add":
            try:
                total = arguments["a"] + arguments["b"]
            except (KeyError, TypeError) as exc:
                raise InvalidParams(f"add needs numbers a and b: {exc}") from None
            return {"content": [{"type": "text", "text": str(total)}]}
        n = int(arguments.get("n", 3))
        for i in range(1, n + 1):
            time.sleep(0.05)
            transport.write_notification("notifications/progress", {"progress": i, "total": n})
        return {"content": [{"type": "text", "text": f"counted to {n}"}]}

    serve(handler, transport)


if __name__ == "__main__":
    main()
