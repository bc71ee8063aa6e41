"""The applications `make bench-http` serves: rpcwire's WSGI and ASGI apps with the Flask example's ``add``, and
the floor: a constant reply of the same bytes with no JSON-RPC at all (what the server alone costs per request).
"""

from __future__ import annotations

from typing import Any

from rpcwire import methods
from rpcwire.http import ASGIApp, WSGIApp

ANSWER = b'{"jsonrpc":"2.0","id":1,"result":25}'
_HEADERS = [("Content-Type", "application/json"), ("Content-Length", str(len(ANSWER)))]


def add(a: float, b: float) -> float:
    return a + b


handler = methods({"add": add})
rpcwire_wsgi = WSGIApp(handler)
rpcwire_asgi = ASGIApp(handler)
rpcwire_asgi_inline = ASGIApp(handler, run_sync_inline=True)


def floor_wsgi(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    start_response("200 OK", _HEADERS)
    return [ANSWER]


async def floor_asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    headers = [(name.lower().encode(), value.encode()) for name, value in _HEADERS]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": ANSWER})
