"""The demo of ``python -m rpcwire demo``: a short JSON-RPC session over in-memory streams.

Each request line is served by ``rpcwire.serve`` on a fresh transport over ``io.BytesIO``, so the transcript
can show which lines each request produced: its progress notifications first, then its answer. A long call
reports progress with ``current_request().progress()``, in the shape its request asked for: LSP's
``$/progress`` (``params.workDoneToken``) or MCP's ``notifications/progress`` (``params._meta.progressToken``).
What the server logs (a handler's exception) is shown in the transcript where it happens, not on stderr,
so that the transcript reads in order wherever its output goes.
"""

from __future__ import annotations

import io
import logging
from typing import Any, TextIO

from rpcwire import InvalidParams, JsonRpcError, MethodNotFound, StdioTransport, current_request, serve

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
    (
        "a long call with progress (LSP: workDoneToken)",
        b'{"jsonrpc":"2.0","id":9,"method":"index","params":{"files":3,"workDoneToken":"index-9"}}',
    ),
    (
        "a long call with progress (MCP: _meta.progressToken)",
        b'{"jsonrpc":"2.0","id":10,"method":"index","params":{"files":2,"_meta":{"progressToken":"p10"}}}',
    ),
]


class QuotaExceeded(JsonRpcError):
    """An application error with its own code."""

    code = -32001
    default_message = "Quota exceeded"


def handle(method: str, params: Any) -> Any:
    """The demo's handler: ``add``, ``divide``, ``quota``, ``log`` and ``index`` (which reports progress)."""
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
        for done in range(1, total + 1):
            # Written before the answer, in the dialect the request's token asked for (none: nothing written).
            current_request().progress(done, total, f"file {done} of {total}")
        return {"indexed": total}
    raise MethodNotFound(f"no method {method!r}")


class _Logged(logging.Handler):
    """The ``rpcwire`` logger's records during the demo, as transcript lines (the first line of each)."""

    def __init__(self, out: TextIO) -> None:
        super().__init__(logging.INFO)
        self.out = out

    def emit(self, record: logging.LogRecord) -> None:
        self.out.write(f"    (logged {record.levelname}: {record.getMessage().splitlines()[0]})\n")


def run(out: TextIO, transport_class: type[Any] = StdioTransport) -> None:
    """Serve each demo request and write the transcript to ``out``, in order."""
    out.write(f"rpcwire demo: {transport_class.__module__}.{transport_class.__name__}\n")
    logger = logging.getLogger("rpcwire")
    logged, propagate = _Logged(out), logger.propagate
    logger.addHandler(logged)
    logger.propagate = False
    try:
        for label, line in REQUESTS:
            out.write(f"\n# {label}\n--> {line.decode()}\n")
            stdout = io.BytesIO()
            serve(handle, transport_class(io.BytesIO(line + b"\n"), stdout), guard_stdout=False)
            answers = stdout.getvalue().decode().splitlines()
            for answer in answers:
                out.write(f"<-- {answer}\n")
            if not answers:
                out.write("    (no answer: notifications are never answered)\n")
            out.flush()
    finally:
        logger.removeHandler(logged)
        logger.propagate = propagate
