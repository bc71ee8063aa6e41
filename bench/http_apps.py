"""The applications `make bench-http` serves: rpcwire's WSGI and ASGI apps with the Flask example's ``add``, the
peers answering the same ``add`` in their own terms, the floor: a constant reply of the same bytes with no
JSON-RPC at all (what the server alone costs per request), and ``echo_asgi``, the one server every HTTP client is
measured against (the clients' table).

The peers are imported only by the rows that serve them (``peer_*`` below), so a missing peer fails its row,
not the others.
"""

from __future__ import annotations

import json
from typing import Any

from rpcwire import methods
from rpcwire.http import ASGIApp, WSGIApp

ANSWER = b'{"jsonrpc":"2.0","id":1,"result":25}'
_HEADERS = [("Content-Type", "application/json"), ("Content-Length", str(len(ANSWER)))]


def add(a: int, b: int) -> int:
    return a + b


handler = methods({"add": add})
rpcwire_wsgi = WSGIApp(handler)
rpcwire_asgi = ASGIApp(handler)
rpcwire_asgi_inline = ASGIApp(handler, run_sync_inline=True)


def floor_wsgi(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    start_response("200 OK", _HEADERS)
    return [ANSWER]


_ASGI_START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(k.lower().encode(), v.encode()) for k, v in _HEADERS],
}


async def floor_asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send(dict(_ASGI_START))
    await send({"type": "http.response.body", "body": ANSWER})


_ECHO_START = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}


async def echo_asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The clients' server: a JSON-RPC request answered with its params as the result (``json``, no envelope
    check), the least any server does, so that the clients' differences are the clients'."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    chunks, more = [], True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    request = json.loads(b"".join(chunks))
    body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": request.get("params")}).encode()
    await send({**_ECHO_START, "headers": [*_ECHO_START["headers"], (b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


def __getattr__(name: str) -> Any:
    """The peers, built on first use: ``peer_jsonrpcserver_flask``, ``peer_fastapi_jsonrpc``, ``peer_mcp``,
    ``peer_jsonrpcserver_wsgi``, ``peer_json_rpc_wsgi``."""
    builders = {
        "peer_jsonrpcserver_flask": _jsonrpcserver_flask,
        "peer_fastapi_jsonrpc": _fastapi_jsonrpc,
        "peer_mcp": _mcp_streamable_http,
        "peer_jsonrpcserver_wsgi": _jsonrpcserver_wsgi,
        "peer_json_rpc_wsgi": _json_rpc_wsgi,
    }
    if name not in builders:
        raise AttributeError(name)
    app = builders[name]()
    globals()[name] = app
    return app


def _jsonrpcserver_flask() -> Any:
    """jsonrpcserver's ``dispatch`` in a Flask view, as its documentation shows it."""
    import jsonrpcserver  # noqa: PLC0415
    from flask import Flask, Response, request  # noqa: PLC0415

    @jsonrpcserver.method(name="add")
    def add_(a: float, b: float) -> jsonrpcserver.Result:
        return jsonrpcserver.Success(a + b)

    app = Flask("jsonrpcserver_flask")

    @app.route("/rpc", methods=["POST"])
    def rpc() -> Response:
        return Response(jsonrpcserver.dispatch(request.get_data().decode()), content_type="application/json")

    return app


def _minimal_wsgi(answer: Any) -> Any:
    """A WSGI app of a few lines around a library's ``answer(text) -> str``: the body read, the answer written
    (an empty answer, a notification's, as 204)."""

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        text = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)).decode()
        body = answer(text).encode()
        if not body:
            start_response("204 No Content", [])
            return []
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    return app


def _jsonrpcserver_wsgi() -> Any:
    """jsonrpcserver's ``dispatch`` behind a minimal WSGI app (no framework)."""
    import jsonrpcserver  # noqa: PLC0415

    def add_(a: float, b: float) -> jsonrpcserver.Result:
        return jsonrpcserver.Success(a + b)

    methods_ = {"add": add_}
    return _minimal_wsgi(lambda text: jsonrpcserver.dispatch(text, methods=methods_))


def _json_rpc_wsgi() -> Any:
    """json-rpc's ``JSONRPCResponseManager`` behind a minimal WSGI app (no framework)."""
    from jsonrpc import Dispatcher, JSONRPCResponseManager  # noqa: PLC0415

    dispatcher = Dispatcher({"add": lambda a, b: a + b})

    def answer(text: str) -> str:
        response = JSONRPCResponseManager.handle(text, dispatcher)
        return "" if response is None else response.json

    return _minimal_wsgi(answer)


def _fastapi_jsonrpc() -> Any:
    """fastapi-jsonrpc: one entrypoint, ``add`` with typed parameters (it takes params by name only)."""
    import fastapi_jsonrpc  # noqa: PLC0415

    app = fastapi_jsonrpc.API()
    entrypoint = fastapi_jsonrpc.Entrypoint("/rpc")

    @entrypoint.method(name="add")
    def add_(a: int, b: int) -> int:
        return a + b

    app.bind_entrypoint(entrypoint)
    return app


def _mcp_streamable_http() -> Any:
    """The MCP SDK's streamable HTTP transport, stateless with JSON responses (its fastest setting): ``add`` as a
    tool, called with ``tools/call`` (no ``initialize`` needed when stateless)."""
    from mcp.server.mcpserver import MCPServer  # noqa: PLC0415

    server = MCPServer("bench", log_level="WARNING")

    @server.tool(name="add")
    def add_(a: int, b: int) -> int:
        return a + b

    return server.streamable_http_app(streamable_http_path="/rpc", stateless_http=True, json_response=True)
