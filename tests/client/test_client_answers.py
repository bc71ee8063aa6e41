"""The clients answer the server's own requests through the one answer routine (``rpcwire._answer``).

The test plays the server over a socket pair: it writes requests to the client and reads the client's
answers. Each answer must be byte for byte what ``dispatch`` (the server's own routine) writes for the same
request and handler: results, JSON-RPC errors, failures (-32603 with the exception), results that cannot be
encoded, notifications (nothing), the "client is busy" refusal, and ``AsyncClient``'s ``async def`` handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest
import rpcwire
from support.messages import request

pytestmark = pytest.mark.timeout(60)

BOUND = 20.0  # seconds any one read of the test's server end may wait


class Teapot(rpcwire.JsonRpcError):
    code = -32001
    default_message = "I'm a teapot"


def outcome(method: str, params: Any) -> Any:
    """What every handler of these tests does, sync or async."""
    if method == "add":
        return params[0] + params[1]
    if method == "teapot":
        raise Teapot(data={"short": True})
    if method == "boom":
        raise ValueError("boom")
    if method == "unencodable":
        return {"x": object()}
    if method == "nan":
        return float("nan")
    raise rpcwire.MethodNotFound()


def sync_handler(method: str, params: Any) -> Any:
    return outcome(method, params)


async def async_handler(method: str, params: Any) -> Any:
    await asyncio.sleep(0)
    return outcome(method, params)


CASES = [
    request("add", [1, 2], id="s1"),
    request("teapot", None, id=2),
    request("boom", [], id="s3"),
    request("unencodable", None, id=4.5),
    request("nan", None, id=None),
    request("missing", {"a": 1}, id="s6"),
]


class ServerEnd:
    """The server's side of a socket pair: lines written to the client, lines read from it (each read bounded)."""

    def __init__(self, sock: socket.socket) -> None:
        sock.settimeout(BOUND)
        self._sock = sock
        self._reader = sock.makefile("rb")

    def send(self, data: bytes) -> None:
        self._sock.sendall(data)

    def line(self) -> bytes:
        line = self._reader.readline()
        assert line.endswith(b"\n"), f"the client wrote no whole line: {line!r}"
        return line[:-1]

    def close(self) -> None:
        self._reader.close()
        self._sock.close()


@pytest.fixture
def pair() -> Iterator[tuple[ServerEnd, socket.socket]]:
    server_side, client_side = socket.socketpair()
    server = ServerEnd(server_side)
    try:
        yield server, client_side
    finally:
        server.close()
        client_side.close()


def expected(impl: ModuleType, line: bytes) -> bytes | None:
    """What the server's own routine answers to ``line`` with the same handler."""
    return impl.dispatch(line, sync_handler)


@contextlib.contextmanager
def sync_client(impl: ModuleType, sock: socket.socket, handler: Callable[[str, Any], Any]) -> Iterator[Any]:
    """A ``Client`` over the client's end of the pair (its stream files closed after it)."""
    streams = sock.makefile("rb"), sock.makefile("wb")
    client = impl.Client(impl.StdioTransport(*streams), handler=handler, timeout=BOUND)
    try:
        yield client
    finally:
        client.close()
        sock.shutdown(socket.SHUT_RDWR)
        for stream in streams:
            stream.close()


def test_the_client_answers_the_servers_requests_as_dispatch_does(
    impl: ModuleType, pair: tuple[ServerEnd, socket.socket]
) -> None:
    server, sock = pair
    with sync_client(impl, sock, sync_handler):
        for line in CASES:
            server.send(line)
            assert server.line() == expected(impl, line)
        server.send(request("boom", [], id=...))  # a notification: for the callbacks, never answered
        server.send(request("add", [2, 3], id=7))
        assert server.line() == expected(impl, request("add", [2, 3], id=7))


@pytest.mark.parametrize("handler", [async_handler, sync_handler], ids=["async-handler", "sync-handler"])
def test_async_client_answers_the_servers_requests_as_dispatch_does(
    impl: ModuleType, pair: tuple[ServerEnd, socket.socket], handler: Callable[[str, Any], Any]
) -> None:
    server, sock = pair

    async def main() -> list[bytes]:
        reader, writer = await asyncio.open_connection(sock=sock)
        client = impl.AsyncClient(reader, writer, handler=handler, timeout=BOUND)
        try:
            lines = []
            for line in [*CASES, request("boom", [], id=...), request("add", [2, 3], id=7)]:
                server.send(line)
                if b'"id"' in line:
                    lines.append(await asyncio.to_thread(server.line))
            return lines
        finally:
            await client.close()

    answers = asyncio.run(asyncio.wait_for(main(), 2 * BOUND))
    assert answers == [expected(impl, line) for line in [*CASES, request("add", [2, 3], id=7)]]


def refusal_expected(impl: ModuleType, line: bytes) -> bytes | None:
    """The server's own routine answering ``line`` with the busy client's ``RuntimeError``."""
    detail = "the client is busy: 8 requests of the server's are being handled and 64 wait; 'work' was refused"

    def busy(method: str, params: Any) -> Any:
        raise RuntimeError(detail)

    return impl.dispatch(line, busy)


def flood(server: ServerEnd, running: threading.Event) -> tuple[bytes, list[Any]]:
    """72 requests (8 run, 64 wait), then, once 8 run, a 73rd: its refusal comes first; then the release
    and the 72 answers."""
    for index in range(72):
        server.send(request("work", [index], id=f"s{index}"))
    assert running.wait(BOUND), "the client's handlers did not start"
    server.send(request("work", [72], id="s72"))
    refused = server.line()
    server.send(request("release", None, id=...))
    return refused, sorted(json.loads(server.line())["id"] for _ in range(72))


def test_a_busy_client_refuses_through_the_answer_routine(
    impl: ModuleType, pair: tuple[ServerEnd, socket.socket], caplog: pytest.LogCaptureFixture
) -> None:
    server, sock = pair
    release, running = threading.Event(), threading.Event()
    count = [0]
    lock = threading.Lock()

    def handler(method: str, params: Any) -> Any:
        with lock:
            count[0] += 1
            if count[0] == 8:
                running.set()
        assert release.wait(BOUND)
        return params

    with sync_client(impl, sock, handler) as client:
        client.on_notification("release", lambda params: release.set())
        try:
            refused, answered = flood(server, running)
        finally:
            release.set()
    assert refused == refusal_expected(impl, request("work", [72], id="s72"))
    assert answered == sorted(f"s{index}" for index in range(72))
    assert "the client is busy" in caplog.text


def test_a_busy_async_client_refuses_through_the_answer_routine(
    impl: ModuleType, pair: tuple[ServerEnd, socket.socket]
) -> None:
    server, sock = pair
    running = threading.Event()

    async def main() -> tuple[bytes, list[Any]]:
        release = asyncio.Event()
        count = [0]

        async def handler(method: str, params: Any) -> Any:
            count[0] += 1
            if count[0] == 8:
                running.set()
            await asyncio.wait_for(release.wait(), BOUND)
            return params

        reader, writer = await asyncio.open_connection(sock=sock)
        client = impl.AsyncClient(reader, writer, handler=handler, timeout=BOUND)
        client.on_notification("release", lambda params: release.set())
        try:
            return await asyncio.to_thread(flood, server, running)
        finally:
            release.set()
            await client.close()

    refused, answered = asyncio.run(asyncio.wait_for(main(), 3 * BOUND))
    assert refused == refusal_expected(impl, request("work", [72], id="s72"))
    assert answered == sorted(f"s{index}" for index in range(72))
