"""``python -m rpcwire serve MODULE:HANDLER --listen 127.0.0.1:0``: one server process, one port, and a
connection of each kind against it at once (newline-delimited JSON, Content-Length frames, HTTP/1.1 with
keep-alive and server-sent events, and garbage), each told apart by its first bytes."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rpcwire
import rpcwire.pure
from child import announced_server, child_env
from rpcwire.__main__ import _framing_of

HANDLERS = """
import threading
import time

from rpcwire import current_request, methods

both_in = threading.Barrier(2, timeout=20)


def add(a, b):
    return a + b


def meet():
    both_in.wait()  # answers only once two calls run at once: the connection is served concurrently
    return "met"


def steps(n):
    for i in range(n):
        current_request().progress(i + 1, n)
    return "done"


handler = methods({"add": add, "meet": meet, "steps": steps})


async def async_add(a, b):
    return a + b


async_handler = methods({"add": async_add})
"""


@pytest.fixture(scope="module")
def app_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    app_dir: Path = tmp_path_factory.mktemp("listen")
    (app_dir / "handlers.py").write_text(HANDLERS)
    return app_dir


@pytest.fixture(scope="module")
def port(app_dir: Path) -> Iterator[int]:
    command = [sys.executable, "-m", "rpcwire", "serve", "handlers:handler", "--listen", "127.0.0.1:0"]
    with announced_server(command, app_dir, "listening on tcp://127.0.0.1:", 100) as listening:
        yield listening


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30)


def read_lines(sock: socket.socket, count: int) -> list[Any]:
    with sock.makefile("rb") as stream:
        return [json.loads(stream.readline()) for _ in range(count)]


def add(a: int, b: int, id: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": "add", "params": [a, b], "id": id}).encode()


def post(connection: http.client.HTTPConnection, body: bytes, **headers: str) -> http.client.HTTPResponse:
    connection.request("POST", "/rpc", body=body, headers={"Content-Type": "application/json", **headers})
    return connection.getresponse()


def test_one_port_serves_every_kind_at_once(port: int) -> None:
    # All four open before any is answered: none is served at the others' expense.
    ndjson, framed, garbage = connect(port), connect(port), connect(port)
    web = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    web.connect()
    client = rpcwire.Client(
        rpcwire.StdioTransport(framed.makefile("rb"), framed.makefile("wb"), framing="content-length"), timeout=30
    )
    try:
        garbage.sendall(b"hello, this is not JSON-RPC\n")
        ndjson.sendall(add(1, 2, 1) + b"\n" + add(3, 4, "b") + b"\n")
        assert client.call("add", [5, 6]) == 11
        assert sorted(map(json.dumps, read_lines(ndjson, 2))) == sorted(
            json.dumps({"jsonrpc": "2.0", "id": id, "result": result}) for id, result in [(1, 3), ("b", 7)]
        )
        response = post(web, add(7, 8, 9))
        assert (response.status, response.read()) == (200, b'{"jsonrpc":"2.0","id":9,"result":15}')
        assert not response.will_close
        first_socket = web.sock
        response = post(web, add(1, 1, 10))  # kept alive: the same connection answers again
        assert (response.status, response.read()) == (200, b'{"jsonrpc":"2.0","id":10,"result":2}')
        assert web.sock is first_socket
        assert read_lines(garbage, 1) == [
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
        ]
        # The garbage connection is still served as NDJSON after its -32700; the others are undisturbed.
        garbage.sendall(add(2, 2, 4) + b"\n")
        assert read_lines(garbage, 1) == [{"jsonrpc": "2.0", "id": 4, "result": 4}]
        assert client.call("add", [1, 2]) == 3
    finally:
        client.close()
        for sock in (ndjson, framed, garbage):
            sock.close()
        web.close()


def test_each_stream_connection_runs_requests_concurrently(port: int) -> None:
    with connect(port) as sock:
        meet = b'{"jsonrpc":"2.0","method":"meet","id":%d}\n'
        sock.sendall(meet % 1 + meet % 2)
        assert sorted(answer["id"] for answer in read_lines(sock, 2)) == [1, 2]


def test_content_length_frames_are_told_apart_in_any_case(port: int) -> None:
    with connect(port) as sock:
        body = add(20, 22, 1)
        sock.sendall(b"content-type: application/vscode-jsonrpc\r\nCONTENT-LENGTH: %d\r\n\r\n%b" % (len(body), body))
        answer = b'{"jsonrpc":"2.0","id":1,"result":42}'
        with sock.makefile("rb") as stream:
            assert stream.readline() == b"Content-Length: %d\r\n" % len(answer)
            assert stream.readline() == b"\r\n"
            assert stream.read(len(answer)) == answer


def test_http_streams_progress_as_server_sent_events(port: int) -> None:
    web = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        body = b'{"jsonrpc":"2.0","method":"steps","params":{"n":2,"_meta":{"progressToken":"t"}},"id":1}'
        response = post(web, body, Accept="application/json, text/event-stream")
        assert response.status == 200
        assert response.getheader("Content-Type", "").startswith("text/event-stream")
        events = [
            json.loads(line[len(b"data: ") :]) for line in response.read().splitlines() if line.startswith(b"data: ")
        ]
        assert [event.get("method") for event in events] == ["notifications/progress"] * 2 + [None]
        assert events[-1] == {"jsonrpc": "2.0", "id": 1, "result": "done"}
        # A request the app refuses without reading its body leaves the connection usable.
        web.request("POST", "/rpc", body=b"{}", headers={"Content-Type": "text/plain"})
        refused = web.getresponse()
        assert (refused.status, refused.read()[:0]) == (415, b"")
        response = post(web, add(1, 2, 3))
        assert (response.status, response.read()) == (200, b'{"jsonrpc":"2.0","id":3,"result":3}')
    finally:
        web.close()


@pytest.mark.parametrize(
    ("first", "framing"),
    [
        (b'{"jsonrpc"', "newline"),
        (b"[", "newline"),
        (b" \r\n", "newline"),
        (b"Content-Length: 5", "content-length"),
        (b"content-type:", "content-length"),
        (b"POST /rpc HTTP/1.1", "http"),
        (b"GET / HTTP/1.1", "http"),
        (b"hello", "newline"),
        (b"post /", "newline"),  # methods are case-sensitive
        (b"Con", None),  # not yet decided: more bytes are awaited
        (b"PO", None),
        (b"", "newline"),  # closed before a byte: nothing to wait for
    ],
)
def test_framing_is_told_from_the_first_bytes(first: bytes, framing: str | None) -> None:
    assert _framing_of(first) == framing


def test_the_pure_core_reads_content_length_over_a_socket_too() -> None:
    """Both cores read Content-Length frames from a real socket, where reads return what has arrived."""
    left, right = socket.socketpair()
    with left, right, contextlib.ExitStack() as stack:
        transport = rpcwire.pure.StdioTransport(
            stack.enter_context(right.makefile("rb")),
            stack.enter_context(right.makefile("wb")),
            framing="content-length",
        )
        server = threading.Thread(target=rpcwire.pure.serve, args=(lambda method, params: params, transport))
        server.start()
        body = add(1, 2, 1)
        left.sendall(b"Content-Length: %d\r\n\r\n%b" % (len(body), body))  # no newline after the body
        answer = b'{"jsonrpc":"2.0","id":1,"result":[1,2]}'
        with left.makefile("rb") as stream:
            assert stream.readline() == b"Content-Length: %d\r\n" % len(answer)
            assert stream.readline() == b"\r\n"
            assert stream.read(len(answer)) == answer
        left.shutdown(socket.SHUT_WR)
        server.join(timeout=30)
        assert not server.is_alive()


def test_listen_refuses_an_async_handler(app_dir: Path) -> None:
    served = subprocess.run(
        [sys.executable, "-m", "rpcwire", "serve", "handlers:async_handler", "--listen", "127.0.0.1:0"],
        capture_output=True,
        cwd=app_dir,
        timeout=60,
        env=child_env(),
        check=False,
    )
    assert served.returncode == 2
    assert b"calls the handler synchronously" in served.stderr
