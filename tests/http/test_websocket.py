"""``ASGIApp``'s websocket scopes under real servers (uvicorn with each of its WebSocket implementations, granian),
driven by the ``websockets`` library itself and by ``rpcwire.AsyncWebSocketClient``.

One server per kind serves every test of this module (its state is per name, so that tests never share it); each
test opens its own connections. Every wait is bounded (``wait_for``, polling with a deadline); nothing is timed.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import json
import os
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import rpcwire
from support.servers import real_server

pytest.importorskip("uvicorn")
websockets = pytest.importorskip("websockets")
from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402

pytestmark = pytest.mark.slow  # a real server process per module and kind

WAIT = 30.0  # every wait for a message or a state is bounded by this

SERVER_MODULE = """
import asyncio
import threading
import time

from rpcwire import current_request, methods
from rpcwire.http import ASGIApp

seen = {}  # name -> what happened to the request of that name
events = {}  # name -> asyncio.Event (async handlers, on the loop)
flags = {}  # name -> threading.Event (sync handlers, on worker threads)
started = [0]


def note(name, what):
    seen.setdefault(name, []).append(what)


async def waits(name):
    context = current_request()
    context.progress(1)
    context.notify("started", {"name": name})
    try:
        await asyncio.wait_for(events.setdefault(name, asyncio.Event()).wait(), 60)
    except asyncio.CancelledError:
        note(name, "cancelled")
        raise
    context.progress(2)
    return name


async def release(name):
    events.setdefault(name, asyncio.Event()).set()


async def report(name):
    return seen.get(name, [])


async def fast():
    return "fast"


async def add(a, b):
    return a + b


async def echo(text):
    return text


async def text(size):
    return "x" * size


async def flood(name):
    context = current_request()
    data = "x" * 8192
    try:
        while True:
            context.notify("flood", {"data": data})
            await asyncio.sleep(0)
    except asyncio.CancelledError:
        note(name, "cancelled")
        raise


async def hangs(name):
    note(name, "started")
    try:
        await asyncio.sleep(3600)  # never ends: only a cancellation ends it
    except asyncio.CancelledError:
        note(name, "cancelled")
        raise


def sync_waits(name):
    context = current_request()
    context.notify("started", {"name": name})
    deadline = time.monotonic() + 60
    while not context.cancelled and not flags.setdefault(name, threading.Event()).wait(0.01):
        if time.monotonic() > deadline:
            break
    note(name, "cancelled" if context.cancelled else "released")
    context.raise_if_cancelled()
    return name


def sync_release(name):
    flags.setdefault(name, threading.Event()).set()


def sync_report(name):
    return seen.get(name, [])


def big(size):
    started[0] += 1
    return "x" * size


def count():
    return started[0]


app = ASGIApp(
    methods(
        {"waits": waits, "release": release, "report": report, "fast": fast, "add": add, "echo": echo, "text": text}
    ),
    max_body_bytes=1000,
    max_batch=3,
    websocket=True,
)
sync_app = ASGIApp(methods({"waits": sync_waits, "release": sync_release, "report": sync_report}), websocket=True)
bounded_app = ASGIApp(methods({"big": big, "count": count}), max_concurrency=2, websocket=True)
paused_app = ASGIApp(methods({"hangs": hangs, "report": report}), max_concurrency=1, websocket=True)
flood_app = ASGIApp(methods({"flood": flood, "report": report}), max_queued_bytes=256 * 1024, websocket=True)
closed_app = ASGIApp(methods({"add": add}))  # websocket off: the default


async def who():
    http = current_request().http
    return {"user": http.user, "method": http.method, "path": http.path, "scheme": http.scheme,
            "token": http.headers.get("x-token"), "client": list(http.client)}


def token_user(info):
    from rpcwire.http import Unauthorized

    if info.headers.get("x-token") != "sesame":
        raise Unauthorized("a token is needed", challenge="Token")
    return "alice"


authenticated_app = ASGIApp(methods({"who": who}), authenticate=token_user, websocket=True)
APPS = {
    "/": app,
    "/sync": sync_app,
    "/bounded": bounded_app,
    "/paused": paused_app,
    "/flood": flood_app,
    "/closed": closed_app,
    "/authenticated": authenticated_app,
}


async def routes(scope, receive, send):
    if scope["type"] == "lifespan":
        await app(scope, receive, send)
    else:
        await APPS.get(scope["path"], app)(scope, receive, send)
"""

UVICORN = [sys.executable, "-m", "uvicorn", "--fd", "{fd}", "--app-dir", "{dir}", "--log-level", "warning"]
GRANIAN = [sys.executable, "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1", "--port", "{port}"]
GRANIAN += ["--working-dir", "{dir}", "--workers", "1", "--log-level", "warning", "--workers-kill-timeout", "10"]


def _servers() -> list[Any]:
    needs_wsproto = pytest.mark.skipif(importlib.util.find_spec("wsproto") is None, reason="wsproto not installed")
    needs_granian = pytest.mark.skipif(importlib.util.find_spec("granian") is None, reason="granian not installed")
    return [
        pytest.param(("uvicorn-websockets", [*UVICORN, "--ws", "websockets-sansio"]), id="uvicorn-websockets"),
        pytest.param(("uvicorn-wsproto", [*UVICORN, "--ws", "wsproto"]), id="uvicorn-wsproto", marks=needs_wsproto),
        pytest.param(("granian", GRANIAN), id="granian", marks=needs_granian),
    ]


@pytest.fixture(scope="module", params=_servers())
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """``(ws://127.0.0.1:PORT, the server's name)``, serving ``SERVER_MODULE``'s ``routes``."""
    directory: Path = tmp_path_factory.mktemp("websocket")
    (directory / "server.py").write_text(SERVER_MODULE)
    kind, command = request.param
    with real_server([*(part.replace("{dir}", str(directory)) for part in command), "server:routes"]) as url:
        yield "ws" + url.removeprefix("http"), kind


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 4 * WAIT))


def message(method: str, params: Any = None, id_: Any = None) -> str:
    sent: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        sent["params"] = params
    if id_ is not None:
        sent["id"] = id_
    return json.dumps(sent)


async def receive(ws: Any) -> Any:
    return json.loads(await asyncio.wait_for(ws.recv(), WAIT))


async def until(check: Callable[[], Any]) -> Any:
    """``await check()`` again until it returns something true (``WAIT`` seconds at most)."""
    deadline = time.monotonic() + WAIT
    while not (value := await check()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return value


async def call(url: str, method: str, params: Any = None) -> Any:
    """One call on a connection of its own (the websockets library), its result."""
    async with connect(url) as ws:
        await ws.send(message(method, params, "c"))
        answer = await receive(ws)
        assert answer["id"] == "c", answer
        return answer["result"]


# --- the websockets library, frame by frame ---------------------------------------------------------------


def test_calls_batches_notifications_and_frames_that_cannot_be_read(server: tuple[str, str]) -> None:
    url, _ = server

    async def main() -> None:
        async with connect(url + "/", subprotocols=["jsonrpc"]) as ws:  # type: ignore[list-item]
            assert ws.subprotocol == "jsonrpc"
            await ws.send(message("add", [1, 2], 1))
            assert await receive(ws) == {"jsonrpc": "2.0", "id": 1, "result": 3}
            batch = [json.loads(message("add", [1, 1], "a")), json.loads(message("add", [2, 2])), 5]
            await ws.send(json.dumps(batch))
            assert await receive(ws) == [
                {"jsonrpc": "2.0", "id": "a", "result": 2},
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}},
            ]
            await ws.send(message("add", [1, 2]))  # a notification: no answer, the next frame answers the next call
            await ws.send("{bad")
            assert await receive(ws) == {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32700, "message": "Parse error"},
            }
            await ws.send("[]")
            assert (await receive(ws))["error"]["code"] == -32600
            await ws.send(json.dumps([json.loads(message("add", [1, 1], n)) for n in range(4)]))  # over max_batch
            assert (await receive(ws))["error"]["code"] == -32600
            too_long = message("echo", ["x" * 2000], 2)  # over max_body_bytes (1000): answered as dispatch answers it
            await ws.send(too_long)
            refused = rpcwire.dispatch(too_long, lambda method, params: None, max_message_bytes=1000)
            assert refused is not None and await receive(ws) == json.loads(refused)
            assert json.loads(refused)["id"] is None
            await ws.send(message("add", [2, 3], 3).encode())  # a binary frame: read as UTF-8 JSON, answered in text
            answer = await asyncio.wait_for(ws.recv(), WAIT)
            assert isinstance(answer, str) and json.loads(answer) == {"jsonrpc": "2.0", "id": 3, "result": 5}
            await ws.send(b"\xff\xfe")
            assert (await receive(ws))["error"]["code"] == -32700
            await ws.send(message("nope", None, 4))
            assert (await receive(ws))["error"]["code"] == -32601
        async with connect(url + "/") as ws:  # no subprotocol offered: served all the same
            assert ws.subprotocol is None
            await ws.send(message("fast", None, 1))
            assert (await receive(ws))["result"] == "fast"

    run(main())


@pytest.mark.parametrize("path", ["/", "/sync"])
def test_answers_in_the_order_they_finish_with_progress_while_a_call_runs(server: tuple[str, str], path: str) -> None:
    """A call that waits is overtaken by a later one; its progress and notification arrive while it still runs
    (they come before the call that releases it is even sent)."""
    url, kind = server
    name = f"order-{kind}-{path}"

    async def main() -> None:
        async with connect(url + path) as ws:
            await ws.send(message("waits", {"name": name, "_meta": {"progressToken": "p"}}, 1))
            if path == "/":
                progress = await receive(ws)
                assert progress["params"] == {"progressToken": "p", "progress": 1}
            assert await receive(ws) == {"jsonrpc": "2.0", "method": "started", "params": {"name": name}}
            async with connect(url + path) as other:  # released by another connection: no order between the two
                if path == "/":
                    await ws.send(message("fast", None, 2))
                    assert (await receive(ws))["id"] == 2  # answered while 1 still waits
                await other.send(message("release", {"name": name}, 1))
                await receive(other)
            rest = [await receive(ws) for _ in range(2 if path == "/" else 1)]
            assert rest[-1] == {"jsonrpc": "2.0", "id": 1, "result": name}
            if path == "/":
                assert rest[0]["params"] == {"progressToken": "p", "progress": 2}

    run(main())


@pytest.mark.parametrize("path", ["/", "/sync"])
def test_cancellation_in_both_dialects(server: tuple[str, str], path: str) -> None:
    """LSP's ``$/cancelRequest`` is answered -32800; MCP's ``notifications/cancelled`` gets no answer at all. An
    async handler's task is cancelled, a sync handler sees ``current_request().cancelled``."""
    url, kind = server
    lsp, mcp = f"lsp-{kind}-{path}", f"mcp-{kind}-{path}"

    async def main() -> None:
        async with connect(url + path) as ws:
            await ws.send(message("waits", {"name": lsp}, 1))
            await ws.send(message("waits", {"name": mcp}, 2))
            names = set()
            while len(names) < 2:
                received = await receive(ws)
                if received.get("method") == "started":
                    names.add(received["params"]["name"])
            await ws.send(message("$/cancelRequest", {"id": 1}))
            answer = await receive(ws)
            assert answer == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32800, "message": "Request cancelled"}}
            await ws.send(message("notifications/cancelled", {"requestId": 2, "reason": "no longer needed"}))
            assert await until(lambda: call(url + path, "report", {"name": mcp})) == ["cancelled"]
            await ws.send(message("report", {"name": lsp}, 3))
            assert await receive(ws) == {"jsonrpc": "2.0", "id": 3, "result": ["cancelled"]}  # nothing for id 2

    run(main())


def test_a_connection_that_closes_cancels_what_is_in_flight(server: tuple[str, str]) -> None:
    url, kind = server
    names = {"/": f"gone-{kind}", "/sync": f"gone-sync-{kind}"}

    async def main() -> None:
        for path, name in names.items():
            async with connect(url + path) as ws:
                await ws.send(message("waits", {"name": name}, 1))
                while (await receive(ws)).get("method") != "started":
                    pass
            # closed (by the client's close frame) while the call still ran
        for path, name in names.items():
            assert await until(lambda path=path, name=name: call(url + path, "report", {"name": name})) == ["cancelled"]

    run(main())


def test_a_connection_that_closes_while_reading_is_paused_cancels_what_is_in_flight(server: tuple[str, str]) -> None:
    """``max_concurrency=1``: two calls that never end fill the connection (``2 * max_concurrency`` unanswered), so
    its frames are read no further; the client's close is still seen, and both are cancelled: the running one, and
    the one waiting for its turn, which never runs (not even once the first is gone)."""
    url, kind = server
    running, waiting = f"paused-running-{kind}", f"paused-waiting-{kind}"

    async def report(name: str) -> Any:
        return await call(url + "/paused", "report", {"name": name})

    async def main() -> None:
        async with connect(url + "/paused") as ws:
            await ws.send(message("hangs", {"name": running}, 1))
            await ws.send(message("hangs", {"name": waiting}, 2))
            assert await until(lambda: report(running)) == ["started"]
        # closed (by the client's close frame) while reading was paused
        assert await until(lambda: _cancelled(report(running))) == ["started", "cancelled"]
        assert await report(waiting) == []  # cancelled while it waited for its turn: never ran

    run(main())


def test_a_cancellation_behind_the_requests_waiting_is_acted_on(server: tuple[str, str]) -> None:
    """``max_concurrency=1``: two calls that never end fill the connection (``2 * max_concurrency`` admitted), yet
    its frames are still read (the session's read-ahead): a third call is held, and LSP's cancellation of it, read
    behind it, answers it -32800 at once; it never runs. (The connection used to read nothing more: the
    cancellation waited behind calls that never end.)"""
    url, kind = server
    names = [f"ahead-{kind}-{n}" for n in range(3)]

    async def report(name: str) -> Any:
        return await call(url + "/paused", "report", {"name": name})

    async def main() -> None:
        async with connect(url + "/paused") as ws:
            for id_, name in enumerate(names, 1):
                await ws.send(message("hangs", {"name": name}, id_))
            assert await until(lambda: report(names[0])) == ["started"]
            await ws.send(message("$/cancelRequest", {"id": 3}))
            assert await receive(ws) == {
                "jsonrpc": "2.0",
                "id": 3,
                "error": {"code": -32800, "message": "Request cancelled"},
            }
        assert await until(lambda: _cancelled(report(names[0]))) == ["started", "cancelled"]
        assert await report(names[2]) == []  # held, then cancelled: never ran

    run(main())


async def _cancelled(reported: Any) -> Any:
    """What ``reported`` (a ``report`` call) gives once it says ``"cancelled"``, else ``None``."""
    value = await reported
    return value if "cancelled" in value else None


def test_host_and_origin_are_checked_before_the_handshake(server: tuple[str, str]) -> None:
    url, _ = server
    port = int(url.rpartition(":")[2])
    # Each server takes the refusal as an HTTP response (the websocket.http.response extension): 421 as for a POST.

    def handshake(headers: str, path: str = "/") -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as raw:
            raw.sendall(
                f"GET {path} HTTP/1.1\r\n{headers}Upgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
            )
            return raw.recv(65536).split(b"\r\n")[0]

    assert handshake("Host: evil.example\r\n").split()[1] == b"421"
    assert handshake(f"Host: 127.0.0.1:{port}\r\n").split()[1] == b"101"
    assert handshake(f"Host: 127.0.0.1:{port}\r\n", "/closed").split()[1] == b"403"  # websocket off (the default)

    async def main() -> None:
        with pytest.raises(InvalidStatus) as refused:
            async with connect(url + "/", origin="http://evil.example"):  # type: ignore[arg-type]
                pass
        assert refused.value.response.status_code == 403
        async with connect(url + "/", origin=f"http://127.0.0.1:{port}") as ws:  # type: ignore[arg-type]
            await ws.send(message("fast", None, 1))
            assert (await receive(ws))["result"] == "fast"
        with pytest.raises(rpcwire.HttpError) as ours:
            await rpcwire.AsyncWebSocketClient.connect(url + "/", origin="http://evil.example")
        assert ours.value.status == 403

    run(main())


def test_authenticate_refuses_the_handshake_and_its_user_is_the_calls_http(server: tuple[str, str]) -> None:
    """``authenticate`` runs on the handshake (after the Host and Origin checks), as on a POST before its body;
    every call of the connection sees the handshake's request and the user it gave."""
    url, _ = server

    async def main() -> None:
        with pytest.raises(InvalidStatus) as refused:
            async with connect(url + "/authenticated"):
                pass
        assert refused.value.response.status_code == 401
        assert refused.value.response.headers["www-authenticate"] == "Token"
        async with connect(url + "/authenticated", additional_headers={"X-Token": "sesame"}) as ws:
            for id_ in (1, 2):  # every call of the connection, not only the first
                await ws.send(message("who", None, id_))
                answer = await receive(ws)
                assert answer["id"] == id_
                result = answer["result"]
                assert result["client"][0] == "127.0.0.1"
                del result["client"]
                assert result == {
                    "user": "alice",
                    "method": "GET",
                    "path": "/authenticated",
                    "scheme": "ws",
                    "token": "sesame",
                }

    run(main())


def test_a_client_that_does_not_read_is_read_no_further(server: tuple[str, str]) -> None:
    """300 calls of 256 KiB answers from a client that reads nothing: the server stops reading it (its requests
    are not run, nothing piles up) and serves other connections meanwhile; once the client reads, all are
    answered."""
    url, _ = server
    calls, size = 300, 256 * 1024

    async def main() -> None:
        async with connect(url + "/bounded", max_queue=4, max_size=None, compression=None) as ws:
            before = await call(url + "/bounded", "count")
            for id_ in range(calls):
                await asyncio.wait_for(ws.send(message("big", [size], id_)), WAIT)
            last, deadline = -1, time.monotonic() + WAIT
            while time.monotonic() < deadline:  # until the count stops moving (other connections are served)
                count = await call(url + "/bounded", "count") - before
                if count == last:
                    break
                last = count
                await asyncio.sleep(0.5)
            assert count < calls / 2, f"{count} of {calls} calls ran for a client that reads nothing"
            answers = {(await receive(ws))["id"] for _ in range(calls)}
            assert answers == set(range(calls))

    run(main())


def test_a_client_that_does_not_read_while_a_handler_keeps_notifying_is_closed(server: tuple[str, str]) -> None:
    """Past ``max_queued_bytes`` waiting to be sent, the connection is closed (1008, or dropped when even the close
    frame finds no room) and the handler is cancelled."""
    url, kind = server
    name = f"flood-{kind}"

    async def main() -> None:
        async with connect(url + "/flood", max_queue=4, max_size=None, compression=None) as ws:
            await ws.send(message("flood", {"name": name}, 1))
            assert await until(lambda: call(url + "/flood", "report", {"name": name})) == ["cancelled"]
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    await asyncio.wait_for(ws.recv(), WAIT)
            received = closed.value.rcvd
            assert received is None or received.code == 1008, received

    run(main())


@pytest.mark.skipif(not hasattr(socket, "TCP_INFO"), reason="the peer's TCP state is read from Linux's TCP_INFO")
def test_a_client_that_never_reads_is_dropped_once_closed(server: tuple[str, str]) -> None:
    """The 1008 of a client that never reads (a raw socket with a tiny receive buffer, read no further than the
    handshake) ends its connection within the second the close frame may wait: the peer's socket is reset within a
    few seconds (it sees the server's end; the answers queued for it are dropped). The server's transport used to
    keep the socket, and what it held, until the client read it all (seconds to never)."""
    url, kind = server
    if kind == "granian":
        pytest.skip("granian gives an ASGI app no transport to drop: its socket waits for the client to read")
    name = f"never-reads-{kind}"
    port = int(url.rpartition(":")[2])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: the window stays small
        sock.settimeout(WAIT)
        sock.connect(("127.0.0.1", port))
        key = base64.b64encode(os.urandom(16))
        sock.sendall(
            b"GET /flood HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (port, key)
        )
        head = b""
        while not head.endswith(b"\r\n\r\n"):  # byte by byte: nothing past the handshake is read
            byte = sock.recv(1)
            assert byte, head
            head += byte
        assert head.startswith(b"HTTP/1.1 101 "), head
        sock.sendall(_masked_text_frame(message("flood", {"name": name}, 1).encode()))
        # From here on the client reads nothing. The handler's notifications pile up past max_queued_bytes: 1008.
        assert run(until(lambda: call(url + "/flood", "report", {"name": name}))) == ["cancelled"]
        deadline = time.monotonic() + 5  # the drop is due within 1 s of the close: 5 s is generous
        while _tcp_state(sock) == _TCP_ESTABLISHED and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _tcp_state(sock) != _TCP_ESTABLISHED, "the server still holds the connection of a client it closed"
    finally:
        sock.close()


_TCP_ESTABLISHED = 1


def _tcp_state(sock: socket.socket) -> int:
    """The TCP state of ``sock`` (Linux's ``tcp_info.tcpi_state``): 1 while established, another once the peer
    reset it or sent its end."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]


def _masked_text_frame(payload: bytes) -> bytes:
    """One text frame as a client sends it (masked), for a payload under 64 KiB."""
    mask = os.urandom(4)
    size = bytes([0x80 | len(payload)]) if len(payload) < 126 else bytes([0x80 | 126]) + struct.pack("!H", len(payload))
    return b"\x81" + size + mask + bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))


def _handshake(
    app: Any, headers: list[tuple[bytes, bytes]], subprotocols: list[str], extensions: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """In process: what ``app`` sends for a handshake from 127.0.0.1 to 127.0.0.1:8000 that then disconnects."""
    sent: list[dict[str, Any]] = []
    events = iter([{"type": "websocket.connect"}, {"type": "websocket.disconnect", "code": 1000}])

    async def receive() -> dict[str, Any]:
        return next(events)

    async def send(event: dict[str, Any]) -> None:
        sent.append(event)

    scope = {"type": "websocket", "path": "/", "headers": headers, "subprotocols": subprotocols}
    scope |= {"server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 50000), "scheme": "ws"}
    if extensions is not None:
        scope["extensions"] = extensions
    asyncio.run(app(scope, receive, send))
    return sent


def test_without_the_http_response_extension_a_refusal_is_a_close_before_the_accept() -> None:
    """In process: a server that offers no ``websocket.http.response`` gets ``websocket.close``, which it answers
    403; the handshake it accepts offers ``jsonrpc`` only when the client asked for it."""
    from rpcwire.http import ASGIApp

    def sent_for(headers: list[tuple[bytes, bytes]], subprotocols: list[str]) -> list[dict[str, Any]]:
        return _handshake(ASGIApp(rpcwire.methods({}), websocket=True), headers, subprotocols)

    host = (b"host", b"127.0.0.1:8000")
    assert sent_for([host, (b"origin", b"http://evil.example")], []) == [{"type": "websocket.close", "code": 1008}]
    assert sent_for([(b"host", b"evil.example")], []) == [{"type": "websocket.close", "code": 1008}]
    accepted = {"type": "websocket.accept", "subprotocol": "jsonrpc"}
    assert sent_for([host, (b"origin", b"http://127.0.0.1:8000")], ["other", "jsonrpc"]) == [accepted]
    assert sent_for([host], ["other"]) == [{"type": "websocket.accept", "subprotocol": None}]


@pytest.mark.parametrize("extensions", [None, {"websocket.http.response": {}}])
@pytest.mark.parametrize("keywords", [{}, {"websocket": False}], ids=["default", "websocket=False"])
def test_websocket_is_off_by_default(extensions: dict[str, Any] | None, keywords: dict[str, Any]) -> None:
    """Without ``websocket=True`` a handshake is refused as ``websocket=False`` refuses it: a close before the
    accept (403 by the server), even where the server takes an HTTP response; nothing else is read or sent."""
    from rpcwire.http import ASGIApp

    sent = _handshake(ASGIApp(rpcwire.methods({}), **keywords), [(b"host", b"127.0.0.1:8000")], [], extensions)
    assert sent == [{"type": "websocket.close", "code": 1008}]


def test_the_hooks_guides_starlette_recipe_checks_websocket_handshakes_too() -> None:
    """docs/guides/hooks.md's ``RequireApiKey`` middleware, as written: a handshake without the key is refused by
    it (401 where the server takes an HTTP response, else a close before the accept); with the key the handshake
    reaches the app (here one without ``websocket=True``: rpcwire refuses it)."""
    import re

    from support import ROOT

    testclient = pytest.importorskip("starlette.testclient")
    from starlette.websockets import WebSocketDisconnect

    guide = (ROOT / "docs" / "guides" / "hooks.md").read_text(encoding="utf-8")
    recipe = re.search(r"<!-- test: starlette -->\n```python\n(?P<body>.*?)\n```", guide, re.DOTALL)
    assert recipe is not None
    namespace: dict[str, Any] = {"handler": rpcwire.methods({})}
    exec(compile(recipe["body"], "hooks.md:starlette", "exec"), namespace)
    with testclient.TestClient(namespace["app"]) as client:
        with pytest.raises(testclient.WebSocketDenialResponse) as refused, client.websocket_connect("/rpc/"):
            pass
        assert (refused.value.status_code, refused.value.headers["www-authenticate"]) == (401, "ApiKey")
        key = {"X-Api-Key": "k-123"}  # past the middleware: rpcwire's close before the accept
        with pytest.raises(WebSocketDisconnect) as passed, client.websocket_connect("/rpc/", headers=key):
            pass
        assert passed.value.code == 1008

    sent: list[dict[str, Any]] = []
    events = iter([{"type": "websocket.connect"}])

    async def receive() -> dict[str, Any]:
        return next(events)

    async def send(event: dict[str, Any]) -> None:
        sent.append(event)

    scope = {"type": "websocket", "path": "/rpc/", "headers": [(b"host", b"testserver")], "subprotocols": []}
    asyncio.run(namespace["app"](scope, receive, send))  # a server without websocket.http.response
    assert sent == [{"type": "websocket.close"}]


def test_the_websocket_keywords_are_checked() -> None:
    from rpcwire.http import ASGIApp

    handler = rpcwire.methods({})
    with pytest.raises(ValueError, match="max_concurrency"):
        ASGIApp(handler, max_concurrency=0)
    with pytest.raises(TypeError, match="max_queued_bytes"):
        ASGIApp(handler, max_queued_bytes=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="websocket"):
        ASGIApp(handler, websocket="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="connect"):
        rpcwire.AsyncWebSocketClient()


# --- AsyncWebSocketClient -----------------------------------------------------------------------------------


def test_the_client_calls_batches_and_hears_notifications(server: tuple[str, str]) -> None:
    url, kind = server
    name = f"client-{kind}"

    async def main() -> None:
        async with rpcwire.AsyncWebSocketClient.connect(url + "/", timeout=WAIT) as client:
            assert client.subprotocol == "jsonrpc"
            started: list[Any] = []
            client.on_notification("started", started.append)
            progress: list[Any] = []
            waiting = asyncio.ensure_future(
                client.call("waits", {"name": name}, on_progress=lambda *args: progress.append(args))
            )
            assert await client.call("add", [2, 3]) == 5
            two, missing, four = await client.batch([("add", [1, 1]), ("nope", None), ("add", [2, 2])])
            assert (two, type(missing), four) == (2, rpcwire.MethodNotFound, 4)
            await until(lambda: asyncio.sleep(0, started))
            assert started == [{"name": name}]
            await client.notify("release", {"name": name})
            assert await waiting == name
            assert progress == [(1, None, None), (2, None, None)]
            with pytest.raises(rpcwire.MethodNotFound):
                await client.call("nope")
            with pytest.raises(rpcwire.InvalidParams):
                await client.call("add", [1])

    run(main())


@pytest.mark.parametrize("dialect", ["lsp", "mcp"])
def test_the_client_cancels_on_the_server_a_call_it_gives_up(server: tuple[str, str], dialect: str) -> None:
    url, kind = server
    timed_out, dropped = f"timeout-{dialect}-{kind}", f"task-{dialect}-{kind}"

    async def main() -> None:
        async with rpcwire.AsyncWebSocketClient.connect(url + "/", dialect=dialect, timeout=WAIT) as client:
            started: list[Any] = []
            client.on_notification("started", started.append)
            with pytest.raises(TimeoutError):
                await client.call("waits", {"name": timed_out}, timeout=1.5)
            task = asyncio.ensure_future(client.call("waits", {"name": dropped}))
            await until(lambda: asyncio.sleep(0, {"name": dropped} in started))
            task.cancel()
            for name in (timed_out, dropped):
                assert await until(lambda name=name: client.call("report", {"name": name})) == ["cancelled"]
            assert await client.call("add", [1, 2]) == 3  # the connection goes on

    run(main())


def test_the_client_fails_its_calls_when_the_connection_closes(server: tuple[str, str]) -> None:
    """A frame over the client's ``max_message_bytes`` closes the connection (1009): every call waiting fails with
    ``ConnectionClosed``, and so does every later one."""
    url, kind = server
    name = f"closes-{kind}"

    async def main() -> None:
        client = await rpcwire.AsyncWebSocketClient.connect(url + "/", max_message_bytes=200, timeout=WAIT)
        try:
            waiting = asyncio.ensure_future(client.call("waits", {"name": name}))
            with pytest.raises(rpcwire.ConnectionClosed, match="1009"):
                await client.call("text", [300])
            with pytest.raises(rpcwire.ConnectionClosed):
                await waiting
            with pytest.raises(rpcwire.ConnectionClosed):
                await client.call("add", [1, 2])
        finally:
            await client.close()
        assert await until(lambda: call(url + "/", "report", {"name": name})) == ["cancelled"]

    run(main())
