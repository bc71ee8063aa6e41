"""``rpcwire.http``: the WSGI and ASGI applications, in process (a hand-built WSGI environ, a hand-built ASGI
scope with ``receive``/``send``), each row of the behaviour table against both."""

from __future__ import annotations

import asyncio
import functools
import http.client
import io
import json
import logging
import threading
import wsgiref.simple_server
from collections.abc import Callable
from typing import Any

import pytest
import rpcwire
from rpcwire.http import DEFAULT_MAX_BODY_BYTES, ASGIApp, WSGIApp
from support.messages import INVALID_REQUEST, PARSE_ERROR, compact, err, ok

JSON = {"content-type": "application/json"}
ADD = compact({"jsonrpc": "2.0", "method": "add", "params": [10, 15], "id": 1})


def add(a: int, b: int) -> int:
    return a + b


def subtract(a: int, b: int) -> int:
    return a - b


HANDLER = rpcwire.methods({"add": add, "subtract": subtract})


class Reply:
    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes, read: int | None = None) -> None:
        self.status = status
        self.headers = {name.lower(): value for name, value in headers}
        assert len(self.headers) == len(headers), headers
        self.body = body
        self.read = read  # how many body bytes the application read

    def json(self) -> Any:
        assert self.headers["content-type"] == "application/json"
        assert self.headers["content-length"] == str(len(self.body))
        return json.loads(self.body)


class CountingInput(io.BytesIO):
    """``wsgi.input`` that counts what is read."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.count = 0

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        self.count += len(chunk)
        return chunk


# Where a request came to and from, as a server on 127.0.0.1:8000 gives it: the ASGI scope's "server" and
# "client", WSGI's SERVER_NAME and REMOTE_ADDR. A header given as None is left out.
LOOPBACK = ("127.0.0.1", "127.0.0.1")


def call_wsgi(
    app: Any,
    method: str,
    headers: dict[str, str | None],
    body: bytes,
    *,
    chunked: bool = False,
    scheme: str = "http",
    addresses: tuple[str, str] = LOOPBACK,
) -> Reply:
    stream = CountingInput(body)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": "/rpc",
        "SERVER_NAME": addresses[0],
        "SERVER_PORT": "8000",
        "REMOTE_ADDR": addresses[1],
        "wsgi.input": stream,
        "wsgi.url_scheme": scheme,
    }
    headers = {name: value for name, value in {"host": "127.0.0.1:8000", **headers}.items() if value is not None}
    if not chunked and "content-length" not in headers:
        headers["content-length"] = str(len(body))
    if chunked:
        environ["wsgi.input_terminated"] = True
    for name, value in headers.items():
        if name == "content-type":
            environ["CONTENT_TYPE"] = value
        elif name == "content-length":
            environ["CONTENT_LENGTH"] = value
        else:
            environ["HTTP_" + name.upper().replace("-", "_")] = value
    started: list[tuple[str, list[tuple[str, str]]]] = []
    chunks = app(environ, lambda status, headers, exc_info=None: started.append((status, headers)))
    ((status, response_headers),) = started
    code, reason = status.split(" ", 1)
    assert reason
    return Reply(int(code), response_headers, b"".join(chunks), stream.count)


def call_asgi(
    app: Any,
    method: str,
    headers: dict[str, str | None],
    body: bytes,
    *,
    chunked: bool = False,
    scheme: str = "http",
    addresses: tuple[str, str] = LOOPBACK,
) -> Reply:
    headers = {name: value for name, value in {"host": "127.0.0.1:8000", **headers}.items() if value is not None}
    if not chunked and "content-length" not in headers:
        headers["content-length"] = str(len(body))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": scheme,
        "path": "/rpc",
        "headers": [(name.encode(), value.encode()) for name, value in headers.items()],
        "server": (addresses[0], 8000),
        "client": (addresses[1], 50000),
    }
    pieces = [body[i : i + 1000] for i in range(0, len(body), 1000)] or [b""]
    received: list[int] = []
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if len(received) == len(pieces):  # as servers do: the disconnect once the response is complete
            await complete.wait()
            return {"type": "http.disconnect"}
        received.append(len(pieces[len(received)]))
        return {"type": "http.request", "body": pieces[len(received) - 1], "more_body": len(received) < len(pieces)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            complete.set()

    async def main() -> None:
        nonlocal complete
        complete = asyncio.Event()
        await app(scope, receive, send)

    complete: asyncio.Event
    asyncio.run(main())
    start, *bodies = sent
    assert start["type"] == "http.response.start"
    assert all(message["type"] == "http.response.body" for message in bodies)
    assert [message.get("more_body", False) for message in bodies] == [True] * (len(bodies) - 1) + [False]
    response_headers = [(name.decode(), value.decode()) for name, value in start["headers"]]
    return Reply(start["status"], response_headers, b"".join(m["body"] for m in bodies), sum(received))


def assert_drained(reply: Reply, body: bytes) -> None:
    """A refusal whose body (at most 1 MiB) was read and dropped: no ``Connection: close``."""
    assert reply.read == len(body), (reply.read, len(body))
    assert "connection" not in reply.headers


SERVERS: dict[str, tuple[type[Any], Callable[..., Reply]]] = {
    "wsgi": (WSGIApp, call_wsgi),
    "asgi": (ASGIApp, call_asgi),
}


@pytest.fixture(params=list(SERVERS))
def server(request: pytest.FixtureRequest) -> Callable[..., Reply]:
    """``server(method, headers, body, **app_options)``: one request to a fresh WSGIApp or ASGIApp."""
    app_class, call = SERVERS[request.param]

    def one(method: str, headers: dict[str, str], body: bytes, handler: Any = HANDLER, **options: Any) -> Reply:
        call_options = {key: options.pop(key) for key in ("chunked", "scheme", "addresses") if key in options}
        return call(app_class(handler, **options), method, headers, body, **call_options)

    return one


# --- the table -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json-rpc",
        "application/jsonrequest",
        "application/json; charset=utf-8",
        'Application/JSON ; Charset="UTF-8"',
    ],
)
def test_a_post_is_answered_200(server: Callable[..., Reply], content_type: str) -> None:
    reply = server("POST", {"content-type": content_type}, ADD)
    assert reply.status == 200
    assert reply.body == compact(ok(1, 25))
    assert reply.json() == {"jsonrpc": "2.0", "id": 1, "result": 25}


def test_json_rpc_errors_are_200(server: Callable[..., Reply]) -> None:
    cases = [
        (
            compact({"jsonrpc": "2.0", "method": "multiply", "params": [1, 2], "id": 2}),
            err(2, -32601, "Method not found"),
        ),
        (b"{not json", PARSE_ERROR),
        (b"", INVALID_REQUEST),
        (b" \r\n\t", INVALID_REQUEST),
        (b"[]", INVALID_REQUEST),
    ]
    for body, expected in cases:
        reply = server("POST", JSON, body)
        assert (reply.status, reply.json()) == (200, expected), body


def test_a_pretty_printed_batch(server: Callable[..., Reply]) -> None:
    batch = [
        {"jsonrpc": "2.0", "method": "add", "params": {"a": 1, "b": 2}, "id": "x"},
        {"jsonrpc": "2.0", "method": "subtract", "params": [5, 3]},
        {"jsonrpc": "2.0", "method": "subtract", "params": [5, 3], "id": 9},
    ]
    reply = server("POST", JSON, json.dumps(batch, indent=2).encode())
    assert reply.status == 200 and reply.json() == [ok("x", 3), ok(9, 2)]


def test_only_notifications_are_204(server: Callable[..., Reply]) -> None:
    note = {"jsonrpc": "2.0", "method": "add", "params": [1, 2]}
    for body in (compact(note), compact([note, note])):
        reply = server("POST", JSON, body)
        assert (reply.status, reply.body) == (204, b"")
        assert "content-type" not in reply.headers and "content-length" not in reply.headers


@pytest.mark.parametrize("method", ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH"])
def test_other_methods_are_405(server: Callable[..., Reply], method: str) -> None:
    reply = server(method, JSON, ADD)
    assert reply.status == 405
    assert reply.headers["allow"] == "POST"
    assert_drained(reply, ADD)


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/json; charset=latin-1",
        "application/jsonx",
        "multipart/form-data",
    ],
)
def test_other_content_types_are_415(server: Callable[..., Reply], content_type: str | None) -> None:
    reply = server("POST", {} if content_type is None else {"content-type": content_type}, ADD)
    assert reply.status == 415
    assert_drained(reply, ADD)


def test_a_body_over_max_body_bytes_is_413_unread(server: Callable[..., Reply]) -> None:
    assert DEFAULT_MAX_BODY_BYTES == 16 * 1024 * 1024
    body = b"[" + b" " * 100_000 + ADD + b"]"
    reply = server("POST", JSON, body, max_body_bytes=len(body))
    assert (reply.status, reply.json()) == (200, [ok(1, 25)])
    reply = server("POST", JSON, body, max_body_bytes=len(body) - 1)
    assert reply.status == 413  # Content-Length said so: refused before the body is read...
    assert_drained(reply, body)  # ...which is then read and dropped (100 KB): the connection stays in step
    reply = server("POST", JSON, body, max_body_bytes=len(body) - 1, chunked=True)
    assert reply.status == 413
    assert_drained(reply, body)  # counted as it came, then the rest dropped
    reply = server("POST", JSON, body, max_body_bytes=len(body), chunked=True)
    assert (reply.status, reply.json()) == (200, [ok(1, 25)])


def test_a_refused_body_too_long_to_drain_is_left_unread_with_connection_close(server: Callable[..., Reply]) -> None:
    """More than 1 MiB of a refused body left: nothing more is read, and the refusal says ``Connection: close``
    (a server that kept the connection would read the rest as the next request, or drop it under the client)."""
    body = b"[" + b" " * (3 * 1024 * 1024) + ADD + b"]"
    reply = server("POST", JSON, body, max_body_bytes=1000)
    assert (reply.status, reply.read, reply.headers.get("connection")) == (413, 0, "close")
    reply = server("POST", {"content-type": "text/plain"}, body)
    assert (reply.status, reply.read, reply.headers.get("connection")) == (415, 0, "close")
    reply = server("POST", JSON, body, max_body_bytes=1000, chunked=True)  # read up to the limit and 1 MiB past it
    assert (reply.status, reply.headers.get("connection")) == (413, "close")
    assert reply.read is not None and reply.read < len(body)
    reply = server("POST", {**JSON, "content-length": "ten"}, ADD)  # where the body ends cannot be told
    assert (reply.status, reply.read, reply.headers.get("connection")) == (400, 0, "close")
    reply = server("POST", JSON, ADD, max_body_bytes=10)  # a small body: drained, no Connection header
    assert reply.status == 413
    assert_drained(reply, ADD)


def test_wsgiref_gets_no_connection_header() -> None:
    """wsgiref refuses a hop-by-hop header from an app (PEP 3333), and closes every connection anyway."""
    body = b"x" * (2 * 1024 * 1024)
    server = wsgiref.simple_server.make_server("127.0.0.1", 0, WSGIApp(HANDLER, max_body_bytes=1000))
    with server:
        threading.Thread(target=server.handle_request, daemon=True).start()
        connection = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=30)
        try:
            connection.putrequest("POST", "/rpc")
            connection.putheader("Content-Type", "application/json")
            connection.putheader("Content-Length", str(len(body)))
            connection.endheaders()
            response = connection.getresponse()
            assert response.status == 413
            assert response.read().startswith(b"413 Content Too Large")
        finally:
            connection.close()


def test_an_invalid_content_length_is_400(server: Callable[..., Reply]) -> None:
    for length in ("-1", "1e3", "ten"):
        assert server("POST", {**JSON, "content-length": length}, ADD).status == 400


def test_the_wsgi_app_needs_a_length_or_a_terminated_input() -> None:
    environ = {"REQUEST_METHOD": "POST", "CONTENT_TYPE": "application/json", "wsgi.input": io.BytesIO(ADD)}
    statuses: list[str] = []
    WSGIApp(HANDLER)(environ, lambda status, headers: statuses.append(status))
    assert statuses == ["411 Length Required"]


@pytest.mark.parametrize(
    ("origin", "allowed_origins", "status"),
    [
        ("http://127.0.0.1:8000", None, 200),  # same host and port as the Host header
        ("https://127.0.0.1:8000", None, 200),
        ("http://127.0.0.1:8001", None, 403),
        ("http://localhost:8000", None, 403),
        ("http://evil.example", None, 403),
        ("null", None, 403),
        ("", None, 403),
        ("http://evil.example", "*", 200),
        ("null", "*", 200),
        ("https://app.example", ["https://app.example", "http://other.example:8080"], 200),
        ("http://other.example:8080", ["https://app.example", "http://other.example:8080"], 200),
        ("http://127.0.0.1:8000", ["https://app.example"], 403),  # a list replaces the same-host default
        ("https://app.example:443", ["https://app.example"], 403),  # exact strings
    ],
)
def test_origins(server: Callable[..., Reply], origin: str, allowed_origins: Any, status: int) -> None:
    reply = server("POST", {**JSON, "origin": origin}, ADD, allowed_origins=allowed_origins)
    assert reply.status == status
    if status == 403:
        assert_drained(reply, ADD)


def test_same_host_leaves_default_ports_out(server: Callable[..., Reply]) -> None:
    hosts = {"allowed_hosts": ["rpc.example"]}
    assert server("POST", {**JSON, "host": "rpc.example", "origin": "https://rpc.example"}, ADD, **hosts).status == 200
    assert (
        server("POST", {**JSON, "host": "rpc.example:443", "origin": "https://rpc.example"}, ADD, **hosts).status == 200
    )
    assert (
        server("POST", {**JSON, "host": "rpc.example:80", "origin": "https://rpc.example"}, ADD, **hosts).status == 403
    )
    assert (
        server("POST", {**JSON, "host": "RPC.example", "origin": "http://rpc.EXAMPLE:80"}, ADD, **hosts).status == 200
    )


def test_no_origin_header_is_allowed(server: Callable[..., Reply]) -> None:
    """Non-browser clients send no Origin; the check is against browsers' cross-site requests."""
    assert server("POST", {**JSON, "host": "elsewhere.example"}, ADD, allowed_hosts="*").status == 200


# --- Host: the names the server is known by (DNS rebinding) ---------------------------------------------


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1:8000", 200),
        ("127.0.0.1", 200),
        ("localhost:8000", 200),
        ("LocalHost:9999", 200),  # any port: a tunnel or a port mapping may change it
        ("[::1]:8000", 200),
        ("127.0.0.2:8000", 200),  # the whole of 127/8 is loopback
        (None, 200),  # no Host at all: not a browser
        ("evil.example:8000", 421),
        ("evil.example", 421),
        ("localhost.evil.example:8000", 421),
        ("127.0.0.1.nip.io:8000", 421),
        ("[::1", 421),
        ("localhost:80a", 421),
        ("", 421),
    ],
)
def test_over_loopback_only_loopback_hosts_are_answered(
    server: Callable[..., Reply], host: str | None, status: int
) -> None:
    reply = server("POST", {**JSON, "host": host}, ADD)
    assert reply.status == status
    if status == 421:
        assert_drained(reply, ADD)
        assert reply.body == b"421 Misdirected Request: this server is not known by that Host (allowed_hosts)\n"


def test_a_rebound_page_is_refused(server: Callable[..., Reply]) -> None:
    """DNS rebinding: a page of evil.example, its name now resolving to 127.0.0.1, posts to the local server.
    Its Origin and Host are both evil.example's, so the same-host Origin check alone lets it through."""
    rebound = {**JSON, "host": "evil.example:8000", "origin": "http://evil.example:8000"}
    assert server("POST", rebound, ADD).status == 421
    assert server("POST", rebound, ADD, allowed_hosts="*").status == 200  # what the Origin check alone gives
    assert server("POST", {**rebound, "host": "localhost:8000"}, ADD).status == 403  # the Origin check still runs


@pytest.mark.parametrize(
    ("addresses", "status"),
    [
        (("127.0.0.1", "127.0.0.1"), 421),
        (("localhost", "127.0.0.1"), 421),  # wsgiref's SERVER_NAME on 127.0.0.1
        (("0.0.0.0", "127.0.0.1"), 421),  # WSGI on every interface, reached over loopback
        (("::1", "::1"), 421),
        (("::", "::ffff:127.0.0.1"), 421),  # an IPv4 client of a dual-stack socket
        (("192.0.2.1", "192.0.2.7"), 200),  # not over loopback: any Host (set allowed_hosts there)
        (("0.0.0.0", "192.0.2.7"), 200),
        # Unreadable addresses fail closed: PyPy's sockets made from an inherited fd report undecoded bytes
        # (uvicorn --fd: both; gunicorn -b fd://: REMOTE_ADDR, its SERVER_NAME taken from the Host).
        (("\udcdf\udcff\x7f", "\udcb3<\x7f"), 421),
        (("evil.example", "\udcb3<\x7f"), 421),
        (("192.0.2.1", "\x00"), 421),
        # A Unix socket behind a proxy: its path, and "" for its peer (gunicorn), are not loopback addresses.
        (("/run/rpc.sock", ""), 200),
        (("rpc.example.com", ""), 200),
    ],
)
def test_the_default_looks_at_where_the_request_came(
    server: Callable[..., Reply], addresses: tuple[str, str], status: int
) -> None:
    assert server("POST", {**JSON, "host": "evil.example"}, ADD, addresses=addresses).status == status
    assert server("POST", {**JSON, "host": "localhost"}, ADD, addresses=addresses).status == 200


@pytest.mark.parametrize(
    ("allowed_hosts", "host", "status"),
    [
        (["rpc.example.com"], "rpc.example.com", 200),
        (["rpc.example.com"], "RPC.Example.COM:443", 200),  # any port
        (["rpc.example.com"], "localhost:8000", 421),  # a list replaces the default
        (["rpc.example.com"], "api.rpc.example.com", 421),
        (["rpc.example.com"], "rpc.example.com.evil.example", 421),
        (["rpc.example.com"], None, 421),  # a list needs a Host
        (["rpc.example.com:8443"], "rpc.example.com:8443", 200),
        (["rpc.example.com:8443"], "rpc.example.com", 421),
        (["*.example.com"], "api.example.com:8000", 200),
        (["*.example.com"], "example.com", 421),
        (["*.example.com"], "evilexample.com", 421),
        (["[::1]:8000", "localhost"], "[::1]:8000", 200),
        (["[::1]:8000", "localhost"], "[::1]:8001", 421),
        ([], "localhost", 421),
        (None, "evil.example", 200),
        ("*", "evil.example", 200),
    ],
)
def test_allowed_hosts(server: Callable[..., Reply], allowed_hosts: Any, host: str | None, status: int) -> None:
    assert server("POST", {**JSON, "host": host}, ADD, allowed_hosts=allowed_hosts).status == status


def test_bad_allowed_hosts() -> None:
    for app_class in (WSGIApp, ASGIApp):
        for bad in ("rpc.example.com", ["rpc example.com"], ["rpc.example.com:x"], ["*"], ["a.*.com"], ["[zz]"]):
            with pytest.raises(ValueError, match="allowed_hosts"):
                app_class(HANDLER, allowed_hosts=bad)
        with pytest.raises(TypeError, match="allowed_hosts"):
            app_class(HANDLER, allowed_hosts=[8000])


def test_checks_run_in_order(server: Callable[..., Reply]) -> None:
    """421, then 405, then 403, then 415, then 413."""
    assert server("GET", {"host": "evil.example", "origin": "http://evil.example"}, ADD).status == 421
    assert server("GET", {"origin": "http://evil.example"}, ADD).status == 405
    assert server("POST", {"origin": "http://evil.example", "content-type": "text/plain"}, ADD).status == 403
    assert server("POST", {"content-type": "text/plain"}, ADD, max_body_bytes=1).status == 415


def test_limits_go_to_dispatch(server: Callable[..., Reply]) -> None:
    deep = compact({"jsonrpc": "2.0", "method": "add", "params": [[[1]], 2], "id": 1})
    assert server("POST", JSON, deep, max_depth=3).json() == PARSE_ERROR
    batch = compact([{"jsonrpc": "2.0", "method": "add", "params": [1, 2], "id": 1}] * 3)
    assert server("POST", JSON, batch, max_batch=2).json() == INVALID_REQUEST


def test_bad_options() -> None:
    for app_class in (WSGIApp, ASGIApp):
        with pytest.raises(ValueError):
            app_class(HANDLER, max_body_bytes=0)
        with pytest.raises(ValueError):
            app_class(HANDLER, max_depth=0)
        with pytest.raises(ValueError):
            app_class(HANDLER, allowed_origins="https://app.example")  # a str that is not "*"
        with pytest.raises(TypeError):
            app_class(None)


# --- handlers ------------------------------------------------------------------------------------------


def test_the_asgi_app_runs_a_sync_handler_off_the_loop() -> None:
    threads: list[threading.Thread] = []

    def where(method: str, params: Any) -> str:
        threads.append(threading.current_thread())
        return method

    reply = call_asgi(ASGIApp(where), "POST", JSON, ADD)
    assert reply.json() == ok(1, "add")
    assert threads and threads[0] is not threading.main_thread()


def test_the_asgi_app_awaits_async_handlers_on_the_loop() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def slow_add(a: int, b: int) -> int:
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0)
        return a + b

    async def plain(method: str, params: Any) -> Any:
        return [method, params]

    registry = rpcwire.methods({"add": slow_add, "subtract": subtract})
    body = compact(
        [
            {"jsonrpc": "2.0", "method": "add", "params": [1, 2], "id": 1},
            {"jsonrpc": "2.0", "method": "subtract", "params": [1, 2], "id": 2},
            {"jsonrpc": "2.0", "method": "add", "params": [1], "id": 3},
        ]
    )
    assert call_asgi(ASGIApp(registry), "POST", JSON, body).json() == [
        ok(1, 3),
        ok(2, -1),
        err(3, -32602, "Invalid params", [{"path": ["b"], "expected": "int", "got": "missing"}]),
    ]
    assert len(loops) == 1
    assert call_asgi(ASGIApp(plain), "POST", JSON, ADD).json() == ok(1, ["add", [10, 15]])


def test_the_wsgi_app_refuses_async_handlers() -> None:
    async def plain(method: str, params: Any) -> Any:
        return None

    with pytest.raises(TypeError, match="ASGIApp"):
        WSGIApp(plain)


def test_asgi_lifespan_and_other_scopes() -> None:
    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return next(messages)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    app = ASGIApp(HANDLER)
    asyncio.run(app({"type": "lifespan"}, receive, send))
    assert sent == [{"type": "lifespan.startup.complete"}, {"type": "lifespan.shutdown.complete"}]
    with pytest.raises(ValueError, match="webtransport"):  # websocket scopes: tests/http/test_websocket.py
        asyncio.run(app({"type": "webtransport"}, receive, send))


def test_a_disconnect_before_the_body_sends_nothing() -> None:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "headers": [(b"content-type", b"application/json")]}
    asyncio.run(ASGIApp(HANDLER)(scope, receive, send))
    assert sent == []


def test_flask_view() -> None:
    flask = pytest.importorskip("flask")
    from rpcwire.http import flask_view

    app = flask.Flask(__name__)
    app.add_url_rule("/rpc", view_func=flask_view(HANDLER), methods=["POST"])
    client = app.test_client()
    response = client.post("/rpc", data=ADD, content_type="application/json")
    assert (response.status_code, response.data) == (200, compact(ok(1, 25)))
    assert response.headers["Content-Type"] == "application/json"
    assert client.post("/rpc", data=ADD, content_type="text/plain").status_code == 415
    assert client.get("/rpc").status_code == 405


# --- server-sent events ----------------------------------------------------------------------------------

EVENTS = {**JSON, "accept": "application/json, text/event-stream"}


def progress_request(method: str, params: Any = None, id: Any = 1, token: Any = "t") -> bytes:
    params = {} if params is None else params
    params["_meta"] = {"progressToken": token}
    return compact({"jsonrpc": "2.0", "method": method, "params": params, "id": id})


def events(body: bytes) -> list[Any]:
    """The JSON of each SSE ``message`` event, checking the framing."""
    assert body.endswith(b"\n\n"), body
    decoded = []
    for event in body[:-2].split(b"\n\n"):
        kind, data = event.split(b"\n")
        assert kind == b"event: message" and data.startswith(b"data: "), event
        decoded.append(json.loads(data[6:]))
    return decoded


def progress(token: Any, done: float, total: float | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"progressToken": token, "progress": done}
    if total is not None:
        params["total"] = total
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}


def counting(steps: int) -> int:
    context = rpcwire.current_request()
    for step in range(1, steps + 1):
        context.progress(step, steps)
    return steps


STREAMING = rpcwire.methods({"count": counting, "add": add, "announce": lambda: rpcwire.current_request().notify("hi")})


def test_progress_is_streamed_as_events_then_the_answer(server: Callable[..., Reply]) -> None:
    reply = server("POST", EVENTS, progress_request("count", {"steps": 2}), STREAMING)
    assert reply.status == 200
    assert reply.headers["content-type"] == "text/event-stream" and "content-length" not in reply.headers
    assert events(reply.body) == [progress("t", 1, 2), progress("t", 2, 2), ok(1, 2)]


def test_without_progress_the_answer_is_plain_json(server: Callable[..., Reply]) -> None:
    """The stream starts only when a notification comes before the answer."""
    reply = server("POST", EVENTS, ADD, STREAMING)
    assert (reply.status, reply.json()) == (200, ok(1, 25))
    reply = server(
        "POST", EVENTS, compact({"jsonrpc": "2.0", "method": "count", "params": {"steps": 2}, "id": 1}), STREAMING
    )
    assert (reply.status, reply.json()) == (200, ok(1, 2))  # no progress token: no progress
    reply = server("POST", EVENTS, compact({"jsonrpc": "2.0", "method": "add", "params": [1, 2]}), STREAMING)
    assert (reply.status, reply.body) == (204, b"")
    for body, expected in ((b"", INVALID_REQUEST), (b"{", PARSE_ERROR), (b" [ ] ", INVALID_REQUEST)):
        assert server("POST", EVENTS, body, STREAMING).json() == expected
    assert server("POST", EVENTS, b" " * 10, STREAMING, max_body_bytes=9).status == 413


def test_events_of_a_batch_and_of_notifications(server: Callable[..., Reply]) -> None:
    batch = b"[" + progress_request("count", {"steps": 1}, id="a", token=1) + b",\n" + ADD + b",\n"
    batch += compact({"jsonrpc": "2.0", "method": "announce"}) + b"]"
    reply = server("POST", EVENTS, batch, STREAMING)
    hello = {"jsonrpc": "2.0", "method": "hi"}
    assert events(reply.body) == [progress(1, 1, 1), hello, [ok("a", 1), ok(1, 25)]]
    reply = server("POST", EVENTS, compact({"jsonrpc": "2.0", "method": "announce"}), STREAMING)
    assert (reply.status, events(reply.body)) == (200, [hello])  # a notification's events, then no answer


def test_lsp_progress_ends_before_the_answer(server: Callable[..., Reply]) -> None:
    body = compact({"jsonrpc": "2.0", "method": "count", "params": {"steps": 1, "workDoneToken": "w"}, "id": 3})
    registry = rpcwire.methods({"count": lambda steps, workDoneToken: counting(steps)})
    assert [
        event.get("params", {}).get("value", {}).get("kind")
        for event in events(server("POST", EVENTS, body, registry).body)
    ] == ["begin", "end", None]


def test_wsgi_events_are_not_held_back() -> None:
    release = threading.Event()

    def waits() -> str:
        rpcwire.current_request().progress(1)
        assert release.wait(30)
        rpcwire.current_request().progress(2)
        return "done"

    app = WSGIApp(rpcwire.methods({"waits": waits}))
    body = progress_request("waits")
    started: list[tuple[str, Any]] = []
    environ = {
        "REQUEST_METHOD": "POST",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_ACCEPT": "text/event-stream",
        "wsgi.input": io.BytesIO(body),
    }
    chunks = iter(app(environ, lambda status, headers: started.append((status, headers))))
    assert started == [("200 OK", [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")])]
    assert events(next(chunks)) == [progress("t", 1)]  # while the handler waits
    release.set()
    assert [events(chunk)[0] for chunk in chunks] == [progress("t", 2), ok(1, "done")]


def test_asgi_events_are_not_held_back() -> None:
    """An async handler, on the loop, waits until its first event has been sent."""
    sent: list[dict[str, Any]] = []
    first_sent = asyncio.Event()

    async def waits() -> str:
        rpcwire.current_request().progress(1)
        await asyncio.wait_for(first_sent.wait(), 30)
        rpcwire.current_request().progress(2)
        return "done"

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body":
            first_sent.set()

    body = progress_request("waits")
    scope = {
        "type": "http",
        "method": "POST",
        "headers": [(b"content-type", b"application/json"), (b"accept", b"text/event-stream")],
    }
    received = iter([{"type": "http.request", "body": body}])

    async def receive() -> dict[str, Any]:
        for message in received:
            return message
        await asyncio.Event().wait()  # the client stays: no disconnect (the app stops waiting when it is done)
        raise AssertionError("unreachable")

    asyncio.run(ASGIApp(rpcwire.methods({"waits": waits}))(scope, receive, send))
    start, *bodies = sent
    assert start["status"] == 200 and (b"content-type", b"text/event-stream") in start["headers"]
    assert [m.get("more_body") for m in bodies] == [True, True, False]
    assert [events(m["body"])[0] for m in bodies] == [progress("t", 1), progress("t", 2), ok(1, "done")]


# --- the same bytes over stdio, dispatch and HTTP ---------------------------------------------------------


class Teapot(rpcwire.JsonRpcError):
    code = -32001
    default_message = "I'm a teapot"


def teapot(**fields: Any) -> None:
    raise Teapot(data=fields)


def broken() -> None:
    raise ValueError("broken")


def echo(*args: Any) -> list[Any]:
    return list(args)


SAME_FUNCTIONS = {"add": add, "subtract": subtract, "echo": echo, "teapot": teapot, "broken": broken}


def _async(function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)  # the function's signature, for methods() to bind
    async def call(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return function(*args, **kwargs)

    return call


SAME_BODIES = [
    ADD,
    b'{"jsonrpc":"2.0","method":"add","params":{"a":1,"b":2},"id":"x"}',
    b'{"jsonrpc":"2.0","method":"echo","params":["\\u00e9\xc3\xa9\\ud83d\\ude00",1.5e300,null,{"k":[]}],"id":1.0}',
    b'{"jsonrpc":"2.0","method":"add","params":[1,2],"id":null}',
    b'{"jsonrpc":"2.0","method":"add","params":[1,2]}',  # a notification
    b'{"jsonrpc":"2.0","method":"broken"}',  # a notification that fails: logged, not answered
    b'[{"jsonrpc":"2.0","method":"add","params":[1,2]},{"jsonrpc":"2.0","method":"subtract","params":[1,2]}]',
    b'[{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1},{"jsonrpc":"2.0","method":"add","params":[1]},'
    b'{"jsonrpc":"2.0","method":"teapot","params":{"tea":"green"},"id":2},1,{"jsonrpc":"2.0","id":3},'
    b'{"jsonrpc":"2.0","method":"nope","id":4},{"jsonrpc":"2.0","method":"broken","id":5}]',
    b'{"jsonrpc":"2.0","method":"add","params":[1],"id":6}',
    b'{"jsonrpc":"2.0","method":"add","params":[1,"a"],"id":7}',  # a TypeError inside the function: -32603
    b'{"jsonrpc":"2.0","method":"nope","id":8}',
    b'{"jsonrpc":"2.0","method":"teapot","id":9}',
    b"[]",
    b"[1,2]",
    b"{",
    b'{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1',
    b'{"jsonrpc":"1.0","method":"add","params":[1,2],"id":1}',
    b'{"jsonrpc":"2.0","method":1,"id":1}',
    b'{"jsonrpc":"2.0","method":"add","params":7,"id":1}',
    b'{"jsonrpc":"2.0","method":"add","params":[1,2],"id":[1]}',
    b"\xff\xfe",
    b"nan",
    b'"just a string"',
    b'  {"jsonrpc":"2.0","method":"add","params":[1,2],"id":"padded"}\t ',
]


def over_stdio(impl: Any, body: bytes, handler: Any) -> bytes | None:
    """What ``serve`` writes for ``body`` as one line, without its newline (``None``: nothing written)."""
    out = io.BytesIO()
    impl.serve(handler, impl.StdioTransport(io.BytesIO(body + b"\n"), out))
    written = out.getvalue()
    assert written == b"" or (written.endswith(b"\n") and written.count(b"\n") == 1), written
    return written[:-1] if written else None


def over_http(reply: Reply) -> bytes | None:
    if reply.status == 204:
        assert reply.body == b""
        return None
    assert reply.status == 200 and reply.headers["content-type"] == "application/json"
    return reply.body


@pytest.mark.parametrize("body", SAME_BODIES, ids=range(len(SAME_BODIES)))
def test_the_same_bytes_over_stdio_dispatch_and_http(body: bytes) -> None:
    """One handler, one body: ``serve`` (a line), ``dispatch`` and HTTP (WSGI; ASGI on a thread, inline, and an
    async handler awaited on the loop), each in rpcwire and rpcwire.pure where it has one, give the same bytes:
    those of ``dispatch(expose_errors=False)`` by default over HTTP, of ``serve`` with ``expose_errors=True``."""
    handler = rpcwire.methods(SAME_FUNCTIONS)
    async_handler = rpcwire.methods({name: _async(function) for name, function in SAME_FUNCTIONS.items()})

    def over_each_app(**options: Any) -> dict[str, bytes | None]:
        def wsgi(headers: dict[str, str | None]) -> bytes | None:
            return over_http(call_wsgi(WSGIApp(handler, **options), "POST", headers, body))

        def asgi(app_handler: Any, headers: dict[str, str | None], **more: Any) -> bytes | None:
            return over_http(call_asgi(ASGIApp(app_handler, **options, **more), "POST", headers, body))

        return {
            "WSGIApp": wsgi(JSON),
            "ASGIApp": asgi(handler, JSON),
            "ASGIApp inline": asgi(handler, JSON, run_sync_inline=True),
            "ASGIApp async": asgi(async_handler, JSON),
            "WSGIApp, events accepted": wsgi(EVENTS),
            "ASGIApp async, events accepted": asgi(async_handler, EVENTS),
        }

    expected = rpcwire.dispatch(body, handler)
    answers = {
        "native serve": over_stdio(rpcwire, body, handler),
        "pure serve": over_stdio(rpcwire.pure, body, handler),
        "pure dispatch": rpcwire.pure.dispatch(body, handler),
        **over_each_app(expose_errors=True),
    }
    assert answers == dict.fromkeys(answers, expected)
    hidden = rpcwire.dispatch(body, handler, expose_errors=False)
    answers = {"pure dispatch": rpcwire.pure.dispatch(body, handler, expose_errors=False), **over_each_app()}
    assert answers == dict.fromkeys(answers, hidden)


def test_a_pretty_printed_body_gives_the_same_bytes_as_its_line() -> None:
    """A body's newlines are JSON whitespace: the answer is the compact line's (stdio would split it)."""
    handler = rpcwire.methods(SAME_FUNCTIONS)
    async_handler = rpcwire.methods({name: _async(function) for name, function in SAME_FUNCTIONS.items()})
    line = SAME_BODIES[7]
    pretty = json.dumps(json.loads(line), indent=2).encode()
    assert b"\n" in pretty
    expected = over_stdio(rpcwire, line, handler)
    assert expected is not None
    for impl in (rpcwire, rpcwire.pure):
        assert impl.dispatch(pretty, handler) == expected
    shown = {"expose_errors": True}
    assert over_http(call_wsgi(WSGIApp(handler, **shown), "POST", JSON, pretty)) == expected
    assert over_http(call_asgi(ASGIApp(handler, run_sync_inline=True, **shown), "POST", JSON, pretty)) == expected
    assert over_http(call_asgi(ASGIApp(async_handler, **shown), "POST", EVENTS, pretty)) == expected


def test_a_registry_that_gains_an_async_function_after_the_app_is_made() -> None:
    registry = rpcwire.methods({"add": add})
    app = ASGIApp(registry, run_sync_inline=True)
    assert call_asgi(app, "POST", JSON, ADD).json() == ok(1, 25)

    @registry.method
    async def later(x: int) -> int:
        await asyncio.sleep(0)
        return x

    body = compact({"jsonrpc": "2.0", "method": "later", "params": [7], "id": 2})
    assert call_asgi(app, "POST", JSON, body).json() == ok(2, 7)
    assert call_asgi(app, "POST", JSON, ADD).json() == ok(1, 25)  # its plain functions now on a thread


def test_a_wsgi_registry_that_gains_an_async_function_is_refused_clearly(caplog: pytest.LogCaptureFixture) -> None:
    """WSGI calls the handler synchronously: once the registry is async (every call returns an awaitable), each
    request is answered -32603 and the cause is logged, on the plain path and with events accepted alike."""
    registry = rpcwire.methods({"add": add})
    app = WSGIApp(registry)
    assert call_wsgi(app, "POST", JSON, ADD).json() == ok(1, 25)

    @registry.method
    async def later(x: int) -> int:
        return x

    caplog.set_level("ERROR", logger="rpcwire")
    batch = compact([{"jsonrpc": "2.0", "method": "later", "params": [7], "id": 2}, json.loads(ADD)])
    for headers in (JSON, EVENTS):
        caplog.clear()
        answers = call_wsgi(app, "POST", headers, batch).json()
        assert [(a["id"], a["error"]["code"], a["error"]["message"]) for a in answers] == [
            (2, -32603, "Internal error"),
            (1, -32603, "Internal error"),
        ]
        refusals = [r for r in caplog.records if r.exc_info and "serve it with ASGIApp" in str(r.exc_info[1])]
        assert [(r.levelname, r.method) for r in refusals] == [("ERROR", "later"), ("ERROR", "add")], caplog.text
    assert call_wsgi(app, "POST", JSON, compact({"jsonrpc": "2.0", "method": "add", "params": [1, 2]})).status == 204


# --- errors: no exception text over HTTP by default, every -32603 logged --------------------------------------


def failing_paths() -> list[Any]:
    """(app class, call, headers, options, async handler?) for each way a body reaches a handler over HTTP."""
    return [
        pytest.param((WSGIApp, call_wsgi, JSON, {}, False), id="WSGIApp"),
        pytest.param((ASGIApp, call_asgi, JSON, {}, False), id="ASGIApp"),
        pytest.param((ASGIApp, call_asgi, JSON, {"run_sync_inline": True}, False), id="ASGIApp inline"),
        pytest.param((ASGIApp, call_asgi, JSON, {}, True), id="ASGIApp async"),
        pytest.param((WSGIApp, call_wsgi, EVENTS, {}, False), id="WSGIApp events"),
        pytest.param((ASGIApp, call_asgi, EVENTS, {}, False), id="ASGIApp events"),
        pytest.param((ASGIApp, call_asgi, EVENTS, {}, True), id="ASGIApp async events"),
    ]


@pytest.mark.parametrize("path", failing_paths())
def test_errors_over_http_carry_no_exception_text_and_are_logged(path: Any, caplog: pytest.LogCaptureFixture) -> None:
    app_class, call, headers, options, is_async = path

    def leaks() -> None:
        raise ValueError("the database password is hunter2")

    functions: dict[str, Callable[..., Any]] = {"leaks": leaks, "teapot": teapot}
    if is_async:
        functions = {name: _async(function) for name, function in functions.items()}
    handler = rpcwire.methods(functions)
    body = compact(
        [
            {"jsonrpc": "2.0", "method": "leaks", "id": 1},
            {"jsonrpc": "2.0", "method": "teapot", "params": {"tea": "green"}, "id": 2},  # meant for the client
        ]
    )
    caplog.set_level("ERROR", logger="rpcwire")
    reply = call(app_class(handler, **options), "POST", {**headers, "traceparent": TRACE_HEADER}, body)
    assert reply.json() == [
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "Internal error"}},
        err(2, -32001, "I'm a teapot", {"tea": "green"}),
    ]
    assert b"hunter2" not in reply.body
    (record,) = [r for r in caplog.records if r.exc_info is not None]
    assert record.levelname == "ERROR" and isinstance(record.exc_info[1], ValueError)  # type: ignore[index]
    assert (record.method, record.request_id, record.traceparent) == ("leaks", 1, TRACE_HEADER)  # type: ignore[attr-defined]
    assert TRACE_HEADER in record.getMessage()
    assert "hunter2" in caplog.text  # the traceback, on the server
    shown = call(app_class(handler, expose_errors=True, **options), "POST", headers, body).json()
    assert shown[0]["error"]["data"] == {"exception": "ValueError", "detail": "the database password is hunter2"}


def test_expose_errors_is_a_bool() -> None:
    for app_class in (WSGIApp, ASGIApp):
        with pytest.raises(TypeError, match="expose_errors"):
            app_class(HANDLER, expose_errors=1)


# --- the request context on every path ----------------------------------------------------------------------

TRACE_HEADER = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
TRACE_META = "00-" + "c" * 32 + "-" + "d" * 16 + "-01"


def context_paths() -> list[Any]:
    """Every way a body reaches a handler over HTTP: (name, call(body, headers)) for a handler recording what
    ``current_request()`` says (sync, or async for the async paths)."""

    def seen_by(record: list[Any], is_async: bool) -> Any:
        def who(**params: Any) -> None:
            context = rpcwire.current_request()
            assert rpcwire.current_request() is context  # one context for the whole call
            context.progress(1)  # no server-sent events asked for, or no token: nowhere, and no failure
            record.append((context.id, context.method, context.is_notification, context.cancelled, context.traceparent))

        if not is_async:
            return rpcwire.methods({"who": who, "who2": who})

        async def who_async(**params: Any) -> None:
            await asyncio.sleep(0)
            who(**params)

        return rpcwire.methods({"who": who_async, "who2": who_async})

    def path(name: str, make: Callable[[Any], Any], call: Callable[..., Reply], is_async: bool, events: bool) -> Any:
        def run(body: bytes, headers: dict[str, str]) -> tuple[Reply, list[Any]]:
            record: list[Any] = []
            reply = call(make(seen_by(record, is_async)), "POST", {**(EVENTS if events else JSON), **headers}, body)
            return reply, record

        return pytest.param(run, id=name)

    return [
        path("WSGIApp", WSGIApp, call_wsgi, False, False),
        path("ASGIApp", ASGIApp, call_asgi, False, False),
        path("ASGIApp inline", functools.partial(ASGIApp, run_sync_inline=True), call_asgi, False, False),
        path("ASGIApp async", ASGIApp, call_asgi, True, False),
        path("WSGIApp events", WSGIApp, call_wsgi, False, True),
        path("ASGIApp events", ASGIApp, call_asgi, False, True),
        path("ASGIApp async events", ASGIApp, call_asgi, True, True),
    ]


@pytest.mark.parametrize("run", context_paths())
def test_current_request_on_every_http_path(run: Callable[..., Any]) -> None:
    """The same handler works over HTTP as over stdio: a context per call of a batch, the invalid entries
    skipped, a notification's too."""
    body = compact(
        [
            {"jsonrpc": "2.0", "method": "who", "id": 1},
            1,
            {"jsonrpc": "2.0", "method": "who"},
            {"jsonrpc": "2.0", "method": "who2", "params": {"_meta": {"traceparent": TRACE_META}}, "id": "x"},
        ]
    )
    reply, record = run(body, {})
    assert reply.status == 200
    assert reply.json() == [ok(1, None), INVALID_REQUEST, ok("x", None)]
    assert record == [
        (1, "who", False, False, None),
        (None, "who", True, False, None),
        ("x", "who2", False, False, TRACE_META),
    ]


@pytest.mark.parametrize("run", context_paths())
@pytest.mark.parametrize(
    ("header", "meta", "expected"),
    [
        (TRACE_HEADER, None, TRACE_HEADER),
        (TRACE_HEADER, TRACE_META, TRACE_HEADER),  # the header wins: set closest to the server
        ("00-" + "0" * 32 + "-" + "b" * 16 + "-01", TRACE_META, TRACE_META),  # invalid (an all-zero trace id)
        ("ff-" + "a" * 32 + "-" + "b" * 16 + "-01", None, None),  # invalid (version ff)
        (f"{TRACE_HEADER},{TRACE_HEADER}", None, None),  # two headers, joined: invalid
        (f" {TRACE_HEADER} ", None, TRACE_HEADER),  # optional whitespace around the value
        (None, TRACE_META, TRACE_META),
    ],
    ids=["header", "header-wins", "invalid-header", "version-ff", "two-headers", "whitespace", "meta-only"],
)
def test_the_traceparent_header(run: Callable[..., Any], header: str | None, meta: str | None, expected: Any) -> None:
    params = {} if meta is None else {"_meta": {"traceparent": meta}}
    reply, record = run(
        compact({"jsonrpc": "2.0", "method": "who", "params": params, "id": 1}), {"traceparent": header}
    )
    assert reply.json() == ok(1, None)
    assert [seen[-1] for seen in record] == [expected]


@pytest.mark.parametrize("app_class", [WSGIApp, ASGIApp])
def test_the_traceparent_header_reaches_the_log_records(app_class: Any, caplog: pytest.LogCaptureFixture) -> None:
    def logs() -> None:
        logging.getLogger("rpcwire").warning("inside the handler")

    caplog.set_level("WARNING", logger="rpcwire")
    call = call_wsgi if app_class is WSGIApp else call_asgi
    body = compact({"jsonrpc": "2.0", "method": "logs", "id": 5})
    assert call(
        app_class(rpcwire.methods({"logs": logs})), "POST", {**JSON, "traceparent": TRACE_HEADER}, body
    ).json() == (ok(5, None))
    (record,) = [r for r in caplog.records if r.getMessage() == "inside the handler"]
    assert (record.traceparent, record.request_id) == (TRACE_HEADER, 5)  # type: ignore[attr-defined]


def test_a_wsgi_stream_closed_early_cancels_the_request() -> None:
    """A WSGI server closes the response iterable when it cannot write (the client went away): the request
    running is cancelled, and the rest of its batch never runs."""
    cancelled = threading.Event()
    ran: list[str] = []

    def ticks() -> str:
        context = rpcwire.current_request()
        for tick in range(3000):  # 30 s at most
            context.progress(tick)
            if context.cancelled:
                cancelled.set()
                return "cancelled"
            threading.Event().wait(0.01)
        return "never cancelled"

    body = b"[" + progress_request("ticks") + b"," + compact({"jsonrpc": "2.0", "method": "after", "id": 2}) + b"]"
    environ = {
        "REQUEST_METHOD": "POST",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_ACCEPT": "text/event-stream",
        "wsgi.input": io.BytesIO(body),
    }
    registry = rpcwire.methods({"ticks": ticks, "after": lambda: ran.append("after")})
    app_iter = WSGIApp(registry)(environ, lambda status, headers: None)
    chunks = iter(app_iter)
    assert events(next(chunks)) == [progress("t", 0)]
    assert events(next(chunks)) == [progress("t", 1)]
    assert not cancelled.is_set()
    app_iter.close()  # type: ignore[attr-defined]
    assert cancelled.wait(30)
    threading.Event().wait(0.2)  # time for the batch's next entry to start, were it to
    assert ran == []


def test_an_asgi_client_gone_mid_stream_cancels_the_task_and_the_rest_of_the_batch() -> None:
    seen: list[str] = []

    async def ticks() -> str:
        context = rpcwire.current_request()
        try:
            for tick in range(3000):  # 30 s at most
                context.progress(tick)
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            seen.append(f"cancelled, context.cancelled={context.cancelled}")
            raise
        return "never cancelled"

    async def after() -> None:
        seen.append("after ran")

    body = b"[" + progress_request("ticks") + b"," + compact({"jsonrpc": "2.0", "method": "after", "id": 2}) + b"]"
    scope = {
        "type": "http",
        "method": "POST",
        "headers": [(b"content-type", b"application/json"), (b"accept", b"text/event-stream")],
    }
    sent: list[dict[str, Any]] = []

    async def main() -> None:
        two_events = asyncio.Event()
        messages = iter([{"type": "http.request", "body": body}])

        async def receive() -> dict[str, Any]:
            for message in messages:
                return message
            await two_events.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)
            if len(sent) == 3:  # the start and two events
                two_events.set()

        await asyncio.wait_for(ASGIApp(rpcwire.methods({"ticks": ticks, "after": after}))(scope, receive, send), 30)

    asyncio.run(main())
    assert seen == ["cancelled, context.cancelled=True"]  # and "after" never ran
    assert sent[0]["status"] == 200 and all(m.get("more_body") for m in sent[1:])
