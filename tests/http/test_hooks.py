"""The HTTP hooks of ``rpcwire.http``: ``current_request().http`` (the request a call came in) and the apps'
``authenticate`` (a caller refused with 401/403 before the body is read), under real servers (gunicorn, uvicorn,
``wsgiref``) and real clients (``requests``, raw sockets)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import sys
import threading
import wsgiref.simple_server
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rpcwire import HTTPHeaders, HTTPRequestInfo, current_request, methods
from rpcwire._http_info import request_info
from rpcwire.http import ASGIApp, Forbidden, Refusal, Unauthorized, WSGIApp
from support import ROOT
from support.messages import compact
from support.servers import real_server

requests = pytest.importorskip("requests")

JSON = {"Content-Type": "application/json"}
INFO = compact({"jsonrpc": "2.0", "method": "info", "id": 1})

# The server both real-server tests run: the same handler and authenticate under WSGI (gunicorn) and ASGI
# (uvicorn), routed by path. Its logger writes to a file (a logged traceback on stderr fails real_server).
SERVER_MODULE = """
import asyncio
import logging

from rpcwire import current_request, methods
from rpcwire.http import ASGIApp, Refusal, Unauthorized, WSGIApp

handler = logging.FileHandler({log!r})
logger = logging.getLogger("rpcwire")
logger.addHandler(handler)
logger.propagate = False


def info():
    http = current_request().http
    return {{
        "method": http.method, "path": http.path, "query": http.query, "scheme": http.scheme,
        "client": [http.client[0], type(http.client[1]).__name__], "test": http.headers.get("X-Test"),
        "user": http.user, "id": current_request().id,
    }}


def streamed():
    current_request().notify("note", {{}})  # a notification first: the answer goes out as the last event
    return info()


async def info_async():
    await asyncio.sleep(0)
    return info()


def authenticate(http):
    token = http.headers.get("authorization")
    if token is None:
        raise Unauthorized("no token", challenge='Bearer realm="rpc"')
    if token == "Bearer boom":
        raise RuntimeError("secret detail")
    if token == "Bearer slow-down":
        raise Refusal(429, "too many", {{"Retry-After": "7"}})
    if token == "Bearer alice":
        return {{"name": "alice"}}
    return False


async def authenticate_async(http):
    await asyncio.sleep(0)
    return authenticate(http)


LIMIT = 1 << 30  # above any body the tests announce: only authenticate refuses them
sync = methods({{"info": info, "streamed": streamed}})
wsgi = WSGIApp(sync, authenticate=authenticate, max_body_bytes=LIMIT)
asgi_sync = ASGIApp(sync, authenticate=authenticate, max_body_bytes=LIMIT)
asgi_async = ASGIApp(
    methods({{"info": info_async, "streamed": streamed}}), authenticate=authenticate_async, max_body_bytes=LIMIT
)


async def asgi(scope, receive, send):
    app = asgi_async if scope.get("path", "").startswith("/async") else asgi_sync
    await app(scope, receive, send)
"""

SERVERS = {
    "gunicorn": [sys.executable, "-m", "gunicorn", "--bind", "fd://{fd}", "--workers", "1", "hooks_server:wsgi"],
    "uvicorn": [sys.executable, "-m", "uvicorn", "--fd", "{fd}", "--log-level", "warning", "hooks_server:asgi"],
}


@pytest.fixture(params=["gunicorn", "uvicorn"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """``(name, url, log file)`` of the hooks server under gunicorn or uvicorn."""
    pytest.importorskip(request.param)
    log = tmp_path / "rpcwire.log"
    (tmp_path / "hooks_server.py").write_text(SERVER_MODULE.format(log=str(log)))
    with real_server(SERVERS[request.param], cwd=tmp_path) as url:
        yield request.param, url, log


def _post(url: str, body: bytes, token: str | None = None, **headers: str) -> Any:
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return requests.post(url, data=body, headers={**JSON, **headers}, timeout=30)


def _events(response: Any) -> list[Any]:
    assert response.headers["Content-Type"] == "text/event-stream"
    return [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]


@pytest.mark.slow
def test_the_handler_sees_the_http_request_and_the_user(server: tuple[str, str, Path]) -> None:
    name, url, _ = server
    paths = ["/rpc", "/async/rpc"] if name == "uvicorn" else ["/rpc"]
    for path in paths:
        response = _post(f"{url}{path}?v=1", INFO, "alice", **{"X-Test": "yes"})
        assert response.status_code == 200, response.text
        assert response.json()["result"] == {
            "method": "POST",
            "path": path,
            "query": "v=1",
            "scheme": "http",
            "client": ["127.0.0.1", "int"],
            "test": "yes",
            "user": {"name": "alice"},
            "id": 1,
        }
        # A batch: each call sees the same request; server-sent events: so does the streamed call.
        batch = b"[" + INFO + b"," + compact({"jsonrpc": "2.0", "method": "info", "id": 2}) + b"]"
        answers = _post(f"{url}{path}", batch, "alice").json()
        assert [answer["result"]["id"] for answer in answers] == [1, 2]
        assert {answer["result"]["path"] for answer in answers} == {path}
        streamed = compact({"jsonrpc": "2.0", "method": "streamed", "id": 3})
        events = _events(_post(f"{url}{path}", streamed, "alice", Accept="text/event-stream"))
        assert events[0] == {"jsonrpc": "2.0", "method": "note", "params": {}}
        assert events[-1]["result"]["user"] == {"name": "alice"}
        assert events[-1]["result"]["path"] == path


@pytest.mark.slow
def test_authenticate_refuses_with_401_403_429_and_500(server: tuple[str, str, Path]) -> None:
    name, url, log = server
    for path in ["/rpc", "/async/rpc"] if name == "uvicorn" else ["/rpc"]:
        missing = _post(url + path, INFO)
        assert missing.status_code == 401
        assert missing.headers["WWW-Authenticate"] == 'Bearer realm="rpc"'
        assert missing.headers["Content-Type"] == "text/plain; charset=utf-8"
        assert missing.text == "401 Unauthorized: no token\n"
        wrong = _post(url + path, INFO, "mallory")
        assert (wrong.status_code, wrong.text) == (403, "403 Forbidden\n")
        limited = _post(url + path, INFO, "slow-down")
        assert (limited.status_code, limited.headers["Retry-After"]) == (429, "7")
        assert limited.text == "429 Too Many Requests: too many\n"
        failed = _post(url + path, INFO, "boom")
        assert (failed.status_code, failed.text) == (500, "500 Internal Server Error\n")
    logged = log.read_text()
    assert "authenticate failed" in logged
    assert "RuntimeError: secret detail" in logged  # logged with its traceback, never sent


@pytest.mark.slow
def test_a_refused_request_is_answered_before_its_body_is_sent(server: tuple[str, str, Path]) -> None:
    """A client announces a 512 MiB body and sends 10 bytes of it: the 401 comes back all the same, so
    authenticate ran before the body was read (a server reading it would wait for the rest)."""
    _, url, _ = server
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(
            b"POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 536870912\r\n\r\n" + b'{"jsonrpc"'
        )
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = connection.recv(65536)
            assert chunk, received
            received += chunk
    assert received.startswith(b"HTTP/1.1 401 "), received


# --- in process: the pieces, and the paths the real servers above do not take -----------------------------


def _wsgi_server(app: Any) -> tuple[str, wsgiref.simple_server.WSGIServer]:
    server = wsgiref.simple_server.make_server("127.0.0.1", 0, app, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}", server


class _QuietHandler(wsgiref.simple_server.WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_http_info_under_wsgiref_with_no_authenticate() -> None:
    seen: list[HTTPRequestInfo | None] = []

    def handler(method: str, params: Any) -> Any:
        seen.append(current_request().http)
        return "ok"

    url, server = _wsgi_server(WSGIApp(handler))
    try:
        response = _post(f"{url}/a%20b/rpc", INFO, **{"X-Multi": "1"})
        assert response.json()["result"] == "ok"
    finally:
        server.shutdown()
        server.server_close()
    (info,) = seen
    assert info is not None
    assert (info.method, info.path, info.query, info.scheme, info.user) == ("POST", "/a b/rpc", "", "http", None)
    assert info.client is not None and info.client[0] == "127.0.0.1"
    assert info.headers["x-multi"] == info.headers["X-MULTI"] == "1"
    assert info.headers["content-type"] == "application/json"
    assert "Content-Length" in info.headers


def test_no_http_info_over_stdio(impl: Any) -> None:
    import io

    seen: list[Any] = []

    def handler(method: str, params: Any) -> Any:
        seen.append(current_request().http)
        return None

    impl.serve(handler, impl.StdioTransport(io.BytesIO(INFO + b"\n"), io.BytesIO()))
    assert seen == [None]


def test_headers_are_read_only_and_case_insensitive() -> None:
    headers = HTTPHeaders([("X-A", "1"), ("x-a", "2"), ("Accept", "*/*")])
    assert headers["x-A"] == "1, 2"
    assert headers.getlist("X-a") == ["1", "2"]
    assert list(headers) == ["x-a", "accept"]
    assert len(headers) == 2
    assert "ACCEPT" in headers and "nope" not in headers and 3 not in headers
    assert headers.raw() == (("x-a", "1"), ("x-a", "2"), ("accept", "*/*"))
    with pytest.raises(TypeError):
        headers["x-b"] = "3"  # type: ignore[index]
    info = request_info({"type": "http", "asgi": {}, "headers": [], "method": "POST", "path": "/"})
    with pytest.raises(AttributeError):
        info.user = "me"  # type: ignore[misc]


def test_the_info_of_a_websocket_scope_and_authenticate_on_it() -> None:
    """What the WebSocket handshake gives authenticate: its scope's info (a GET of scheme ws/wss)."""
    scope: dict[str, Any] = {
        "type": "websocket",
        "asgi": {"version": "3.0"},
        "scheme": "wss",
        "path": "/ws",
        "query_string": b"t=1",
        "headers": [(b"authorization", b"Bearer alice")],
        "client": ("10.0.0.1", 5000),
    }

    async def authenticate(info: HTTPRequestInfo) -> Any:
        return info.headers["authorization"].removeprefix("Bearer ")

    app = ASGIApp(lambda method, params: None, authenticate=authenticate)
    assert asyncio.run(app._endpoint.authenticated_async(scope)) is None
    info = request_info(scope)
    assert (info.method, info.scheme, info.path, info.query, info.client) == (
        "GET",
        "wss",
        "/ws",
        "t=1",
        ("10.0.0.1", 5000),
    )
    assert info.user == "alice"


def test_refusals_are_checked() -> None:
    assert Unauthorized(challenge="Basic").headers == [("WWW-Authenticate", "Basic")]
    assert Forbidden("no").status == 403
    assert Refusal(429, headers=[("Retry-After", "1")]).response().body == b"429 Too Many Requests\n"
    for status in (200, 399, 600, True, "401"):
        with pytest.raises(ValueError, match="status"):
            Refusal(status)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="header"):
        Unauthorized(challenge="Bearer\r\nSet-Cookie: x=1")
    for value in ("a\x01b", "a\x7fb", "a\x1bb"):  # control characters and DEL: refused when made, not at send time
        with pytest.raises(ValueError, match="header"):
            Refusal(429, headers=[("Retry-After", value)])
    assert Refusal(429, headers=[("X-Why", "tab\tis fine")]).headers == [("X-Why", "tab\tis fine")]
    with pytest.raises(ValueError, match="the app's"):
        Refusal(401, headers={"Content-Length": "0"})


def test_wsgi_refuses_an_async_authenticate_and_a_non_callable() -> None:
    async def authenticate(info: HTTPRequestInfo) -> bool:
        return True

    with pytest.raises(TypeError, match="ASGIApp"):
        WSGIApp(lambda method, params: None, authenticate=authenticate)
    with pytest.raises(TypeError, match="callable"):
        ASGIApp(lambda method, params: None, authenticate="yes")  # type: ignore[arg-type]


def test_wsgi_refuses_a_request_when_a_sync_authenticate_returns_an_awaitable(caplog: pytest.LogCaptureFixture) -> None:
    """A lambda around an async function passes the constructor's check; what it returns is never a user: 500."""

    async def check(info: HTTPRequestInfo) -> str:
        raise Forbidden()

    called: list[str] = []

    def handler(method: str, params: Any) -> Any:
        called.append(method)
        return "ran"

    url, server = _wsgi_server(WSGIApp(handler, authenticate=lambda info: check(info)))  # noqa: PLW0108  (the point: a sync wrapper)
    try:
        with caplog.at_level(logging.ERROR, logger="rpcwire"):
            response = _post(f"{url}/rpc", INFO)
    finally:
        server.shutdown()
        server.server_close()
    assert response.status_code == 500
    assert "ran" not in response.text and not called
    assert any("awaitable" in str(record.exc_info and record.exc_info[1]) for record in caplog.records)


# --- the guide's recipes, as written ----------------------------------------------------------------------

GUIDE = ROOT / "docs" / "guides" / "hooks.md"


def _recipe(name: str, **names: Any) -> dict[str, Any]:
    """The guide's fenced block after ``<!-- test: NAME -->``, run with ``names`` defined (what it leaves out)."""
    pattern = re.compile(r"<!-- test: (?P<name>[^>]+?) -->\n```python\n(?P<body>.*?)\n```", re.DOTALL)
    blocks = {match["name"]: match["body"] for match in pattern.finditer(GUIDE.read_text(encoding="utf-8"))}
    namespace = dict(names)
    exec(compile(blocks[name], f"{GUIDE}:{name}", "exec"), namespace)
    return namespace


def _whoami() -> Any:
    return current_request().http.user  # type: ignore[union-attr]


WHOAMI = compact({"jsonrpc": "2.0", "method": "whoami", "id": 1})


def test_the_guides_authenticate_recipe_under_wsgiref() -> None:
    recipe = _recipe("authenticate", handler=methods({"whoami": _whoami}))
    url, server = _wsgi_server(recipe["app"])
    try:
        assert _post(url, WHOAMI, "s3cret-token").json()["result"] == "alice"
        refused = _post(url, WHOAMI, "guess")
        assert refused.status_code == 401
        assert refused.headers["WWW-Authenticate"] == 'Bearer realm="rpc", error="invalid_token"'
        assert _post(url, WHOAMI).text == "401 Unauthorized: a bearer token is required\n"
    finally:
        server.shutdown()
        server.server_close()


def test_the_guides_starlette_recipe() -> None:
    testclient = pytest.importorskip("starlette.testclient")
    recipe = _recipe("starlette", handler=methods({"whoami": _whoami}))
    with testclient.TestClient(recipe["app"]) as client:
        refused = client.post("/rpc/", content=WHOAMI, headers=JSON)
        assert (refused.status_code, refused.headers["www-authenticate"]) == (401, "ApiKey")
        accepted = client.post("/rpc/", content=WHOAMI, headers={**JSON, "X-Api-Key": "k-123"})
        assert accepted.json()["result"] == "alice"


def test_the_guides_flask_recipe() -> None:
    pytest.importorskip("flask")
    recipe = _recipe("flask", TOKENS={"s3cret-token": "alice"}, __name__=__name__)  # Flask finds its root by it
    client = recipe["app"].test_client()
    assert client.post("/rpc", data=WHOAMI, headers=JSON).status_code == 401
    accepted = client.post("/rpc", data=WHOAMI, headers={**JSON, "Authorization": "Bearer s3cret-token"})
    assert accepted.get_json()["result"] == "alice"


def test_flask_view_takes_authenticate() -> None:
    flask = pytest.importorskip("flask")
    from rpcwire.http import flask_view

    app = flask.Flask(__name__)
    view = flask_view(methods({"whoami": _whoami}), authenticate=lambda http: http.headers.get("x-user") or False)
    app.add_url_rule("/rpc", view_func=view, methods=["POST"])
    client = app.test_client()
    assert client.post("/rpc", data=WHOAMI, headers=JSON).status_code == 403
    assert client.post("/rpc", data=WHOAMI, headers={**JSON, "X-User": "bob"}).get_json()["result"] == "bob"
