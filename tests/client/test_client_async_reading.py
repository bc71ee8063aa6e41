"""``AsyncClient`` reads through the core's own ``FrameDecoder``: the transport's rules, whatever the chunks.

The test plays the server over a socket pair: once the client's calls are waiting, it writes their answers
as a byte stream (whole, or a byte at a time), then closes. What each call gets must be what the rules of
``docs/semantics.md`` ("Framing", "Content-Length framing") say, on both cores, and what the threaded
``Client`` (whose core's transport reads the stream itself) gets from the same bytes.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from types import ModuleType
from typing import Any

import pytest
import rpcwire

pytestmark = pytest.mark.timeout(60)

CALLS = 4
WAIT = 10.0  # a bound: a call without an answer ends when the server closes (ConnectionClosed)


def answer(id_: int, result: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "result": result}, separators=(",", ":")).encode()


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


LONG = "x" * 300  # a result whose answer is over the limit of 200 bytes used below

# (framing, what the server writes, the outcome of calls 1-4: a result, or "unanswered")
STREAMS = {
    "crlf-blank-lines-and-a-last-line-without-newline": (
        "newline",
        answer(1, "a") + b"\r\n" + b"\n \t\r\n\n" + answer(2, "b") + b"\n" + answer(4, "d"),
        ["a", "b", "unanswered", "d"],
    ),
    "an-over-long-line-dropped-as-it-arrives": (
        "newline",
        answer(1, LONG) + b"\n" + answer(2, "b") + b"\r\n" + answer(3, LONG) + b"\r\n" + answer(4, "d") + b"\n",
        ["unanswered", "b", "unanswered", "d"],
    ),
    "a-line-at-the-limit-with-its-cr": (
        "newline",
        answer(1, "y" * (200 - len(answer(1, "")))) + b"\r\n" + answer(2, "b") + b"\n",
        ["y" * (200 - len(answer(1, ""))), "b", "unanswered", "unanswered"],
    ),
    "frames-with-a-bad-header-a-long-body-and-resync": (
        "content-length",
        frame(answer(1, "a"))
        + b"garbage that is no header\r\n\r\n"
        + frame(answer(2, "b"))
        + frame(answer(3, LONG))
        + b"content-LENGTH:  %d\n\n%b" % (len(answer(4, "d")), answer(4, "d")),
        ["a", "b", "unanswered", "d"],
    ),
    "a-frame-cut-short-by-the-end": (
        "content-length",
        frame(answer(1, "a")) + frame(answer(2, "b"))[:-3],
        ["a", "unanswered", "unanswered", "unanswered"],
    ),
}


def write(sock: socket.socket, data: bytes, trickle: bool) -> None:
    """The server's answers: whole, or a byte at a time (each its own read, mostly), then the end."""
    if trickle:
        for index in range(len(data)):
            sock.sendall(data[index : index + 1])
            if index % 16 == 0:
                time.sleep(0.001)
    else:
        sock.sendall(data)
    sock.shutdown(socket.SHUT_WR)


class Requests:
    """The server's side of the socket, read: the requests the client wrote (``rpcwire.FrameDecoder``), so that a
    test waits for the peer to have seen a call (written, hence waiting for its answer), not for a client's
    private state."""

    def __init__(self, sock: socket.socket, framing: str) -> None:
        self.sock = sock
        self.decoder = rpcwire.FrameDecoder(framing)  # type: ignore[arg-type]
        self.seen: list[Any] = []

    def until(self, count: int) -> list[Any]:
        """Read until ``count`` requests in all have come (10 s at most); their ids, in the order written."""
        self.sock.settimeout(10)
        try:
            while len(self.seen) < count:
                message = self.decoder.next()
                if message is None:
                    chunk = self.sock.recv(65536)
                    assert chunk, "the client closed before it wrote its calls"
                    self.decoder.feed(chunk)
                else:
                    self.seen.append(json.loads(message)["id"])  # type: ignore[arg-type]
        finally:
            self.sock.settimeout(None)
        return self.seen


def outcomes(results: list[Any]) -> list[Any]:
    """Each call's result, or "unanswered" (it timed out, or the connection ended before its answer came)."""
    return ["unanswered" if isinstance(r, (TimeoutError, rpcwire.ConnectionClosed)) else r for r in results]


def read_async(impl: ModuleType, framing: str, data: bytes, trickle: bool) -> list[Any]:
    server, client_end = socket.socketpair()

    async def main() -> list[Any]:
        reader, writer = await asyncio.open_connection(sock=client_end)
        client = impl.AsyncClient(reader, writer, framing=framing, max_message_bytes=200)
        try:
            calls = [asyncio.ensure_future(client.call("m", timeout=WAIT)) for _ in range(CALLS)]
            # Every call written (so waiting) before any answer comes.
            assert await asyncio.to_thread(Requests(server, framing).until, CALLS) == list(range(1, CALLS + 1))
            writing = asyncio.ensure_future(asyncio.to_thread(write, server, data, trickle))
            results = await asyncio.gather(*calls, return_exceptions=True)
            await writing
            return results
        finally:
            await client.close()

    try:
        return outcomes(asyncio.run(asyncio.wait_for(main(), 30)))
    finally:
        server.close()
        client_end.close()


def read_threaded(impl: ModuleType, framing: str, data: bytes) -> list[Any]:
    server, client_end = socket.socketpair()
    streams = client_end.makefile("rb"), client_end.makefile("wb")
    transport = impl.StdioTransport(*streams, framing=framing, max_message_bytes=200)
    client = impl.Client(transport)
    results: list[Any] = [None] * CALLS

    def call(index: int) -> None:
        try:
            results[index] = client.call("m", timeout=WAIT)
        except (TimeoutError, rpcwire.ConnectionClosed) as exc:
            results[index] = exc

    threads = []
    requests = Requests(server, framing)
    try:
        for index in range(CALLS):  # one at a time, so that call index+1 has id index+1
            threads.append(threading.Thread(target=call, args=(index,)))
            threads[-1].start()
            assert requests.until(index + 1)[index] == index + 1  # written: it waits for its answer
        write(server, data, trickle=False)
        for thread in threads:
            thread.join(30)
        assert not any(thread.is_alive() for thread in threads)
    finally:
        client.close()
        server.close()
        for stream in streams:
            stream.close()
        client_end.close()
    return outcomes(results)


@pytest.mark.parametrize("trickle", [False, True], ids=["whole", "trickled"])
@pytest.mark.parametrize("name", list(STREAMS))
def test_async_client_reads_as_the_transport_reads(
    impl: ModuleType, name: str, trickle: bool, caplog: pytest.LogCaptureFixture
) -> None:
    framing, data, expected = STREAMS[name]
    assert read_async(impl, framing, data, trickle) == expected
    dropped = [r.getMessage() for r in caplog.records if r.getMessage().startswith("dropped a message from the server")]
    if name == "an-over-long-line-dropped-as-it-arrives":
        assert dropped == ["dropped a message from the server: a line longer than max_message_bytes (200)"] * 2


@pytest.mark.parametrize("name", list(STREAMS))
def test_the_threaded_client_reads_the_same_bytes_alike(impl: ModuleType, name: str) -> None:
    framing, data, expected = STREAMS[name]
    assert read_threaded(impl, framing, data) == expected
