"""The demo of ``python -m rpcwire demo``: a short JSON-RPC session over in-memory streams.

Each request line is served by a fresh transport over ``io.BytesIO``, so the transcript can show
which lines each request produced: its progress notifications first, then its answer.
"""

from __future__ import annotations

import io
import time
from typing import Any, TextIO

from rpcwire import InvalidParams, JsonRpcError, MethodNotFound, StdioTransport
from rpcwire._dialects import LSP_PROGRESS

REQUESTS: list[tuple[str, bytes]] = [
    ("an add", b'{"jsonrpc":"2.0","id":1,"method":"add","params":[2,3]}'),
    ("invalid params", b'{"jsonrpc":"2.0","id":2,"method":"add","params":["two",3]}'),
    ("an unknown method", b'{"jsonrpc":"2.0","id":3,"method":"subtract","params":[5,1]}'),
    ("a failing method", b'{"jsonrpc":"2.0","id":4,"method":"divide","params":[1,0]}'),
    ("an application error", b'{"jsonrpc":"2.0","id":"q","method":"quota","params":{"user":"ada"}}'),
    ("a notification", b'{"jsonrpc":"2.0","method":"log","params":{"text":"hello"}}'),
    (
        "a batch",
        b'[{"jsonrpc":"2.0","id":5,"method":"add","params":[1,1]},'
        b'{"jsonrpc":"2.0","method":"log","params":{"text":"in a batch"}},'
        b'{"jsonrpc":"2.0","id":6,"method":"nope"},'
        b'{"jsonrpc":"1.0","id":7,"method":"add"}]',
    ),
    ("a broken line", b'{"jsonrpc":"2.0","id":8,"method":"add","params":[1,'),
    ("a big id", b'{"jsonrpc":"2.0","id":1267650600228229401496703205376,"method":"add","params":[0.1,0.2]}'),
    ("a long call with progress", b'{"jsonrpc":"2.0","id":9,"method":"index","params":{"files":3}}'),
]


class QuotaExceeded(JsonRpcError):
    """An application error with its own code."""

    code = -32001
    default_message = "Quota exceeded"


def _handler(transport: StdioTransport) -> Any:
    def handle(method: str, params: Any) -> Any:
        if method == "add":
            if not isinstance(params, list) or not all(isinstance(x, (int, float)) for x in params):
                raise InvalidParams("add takes a list of numbers", data={"got": params})
            return sum(params)
        if method == "divide":
            return params[0] / params[1]
        if method == "quota":
            raise QuotaExceeded(data={"user": params["user"], "limit": 100})
        if method == "log":
            return None
        if method == "index":
            total = params["files"]
            for done in (1, 2):
                time.sleep(0.01)
                transport.write_notification(LSP_PROGRESS, {"token": 9, "done": done, "total": total})
            return {"indexed": total}
        raise MethodNotFound(f"no method {method!r}")

    return handle


def run(out: TextIO, transport_class: type[Any] = StdioTransport) -> None:
    """Serve each demo request and write the transcript to ``out``."""
    out.write(f"rpcwire demo: {transport_class.__module__}.{transport_class.__name__}\n")
    for label, line in REQUESTS:
        stdout = io.BytesIO()
        transport = transport_class(io.BytesIO(line + b"\n"), stdout)
        transport.serve(_handler(transport))
        out.write(f"\n# {label}\n--> {line.decode()}\n")
        answers = stdout.getvalue().decode().splitlines()
        for answer in answers:
            out.write(f"<-- {answer}\n")
        if not answers:
            out.write("    (no answer: notifications are never answered)\n")
