"""The best newline-delimited JSON-RPC transport a Python developer would write by hand, on orjson.

readline, `orjson.loads`, the JSON-RPC 2.0 envelope check, dispatch to `handler(method, params)`,
`orjson.dumps` and `write` + `flush` of each answer. Batches, -32700 for bad JSON and -32600 for bad
envelopes are handled as the specification asks, so it can run every workload. It is the reference
the issue's targets are set against: no framework overhead, just the JSON library and the loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, BinaryIO

import orjson

_dumps = orjson.dumps
_loads = orjson.loads
_NEWLINE = orjson.OPT_APPEND_NEWLINE
_PARSE_ERROR = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n'
_EMPTY_BATCH = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}\n'


def _error(id_: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": id_, "error": error}


class MethodNotFound(Exception):
    pass


def _one(handler: Callable[[str, Any], Any], msg: Any) -> dict[str, Any] | None:
    """The answer to one message, or None for a notification."""
    if type(msg) is not dict:
        return _error(None, -32600, "Invalid Request")
    has_id = "id" in msg
    id_ = msg.get("id")
    if has_id and not (id_ is None or type(id_) is str or type(id_) is int):
        return _error(None, -32600, "Invalid Request")
    method = msg.get("method")
    params = msg.get("params")
    if (
        msg.get("jsonrpc") != "2.0"
        or type(method) is not str
        or ("params" in msg and type(params) is not dict and type(params) is not list)
    ):
        return _error(id_, -32600, "Invalid Request")
    try:
        result = handler(method, params)
    except MethodNotFound:
        return _error(id_, -32601, "Method not found") if has_id else None
    except Exception as exc:
        if not has_id:
            return None
        return _error(id_, -32603, "Internal error", {"exception": type(exc).__name__, "detail": str(exc)})
    if not has_id:
        return None
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def serve(handler: Callable[[str, Any], Any], stdin: BinaryIO, stdout: BinaryIO) -> None:
    readline = stdin.readline
    write = stdout.write
    flush = stdout.flush
    while line := readline():
        if line.isspace():
            continue
        try:
            msg = _loads(line)
        except orjson.JSONDecodeError:
            write(_PARSE_ERROR)
            flush()
            continue
        if type(msg) is list:
            if not msg:
                write(_EMPTY_BATCH)
                flush()
                continue
            answers = [answer for entry in msg if (answer := _one(handler, entry)) is not None]
            if not answers:
                continue
            out = _dumps(answers, option=_NEWLINE)
        else:
            answer = _one(handler, msg)
            if answer is None:
                continue
            try:
                out = _dumps(answer, option=_NEWLINE)
            except TypeError as exc:
                out = _dumps(_error(answer["id"], -32603, "Internal error", str(exc)), option=_NEWLINE)
        write(out)
        flush()
