"""``python -m rpcwire serve MODULE:HANDLER --listen 127.0.0.1:0``: one server process, one port, and a
connection of each kind against it at once (newline-delimited JSON, Content-Length frames, HTTP/1.1 with
keep-alive and server-sent events, and garbage), each told apart by its first bytes."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import io
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rpcwire
import rpcwire._listen
import rpcwire._session
import rpcwire.pure
from rpcwire._listen import framing_of
from support.processes import announced_server, rpcwire_command, run_rpcwire

HANDLERS = """
import os
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


def nap(seconds):
    time.sleep(seconds)
    return "rested"


handler = methods({"add": add, "meet": meet, "steps": steps, "nap": nap, "pid": os.getpid})


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
    command = rpcwire_command("serve", "handlers:handler", "--listen", "127.0.0.1:0")
    with announced_server(command, app_dir, "listening on tcp://127.0.0.1:", 100) as listening:
        yield listening


@contextlib.contextmanager
def listen_server(app_dir: Path, *options: str) -> Iterator[int]:
    """A ``--listen`` server of its own, with ``options``; yields its port."""
    command = rpcwire_command("serve", "handlers:handler", "--listen", "127.0.0.1:0", *options)
    with announced_server(command, app_dir, "listening on tcp://127.0.0.1:", 100) as listening:
        yield listening


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30)


def call_ndjson(sock: socket.socket, method: str, params: Any = None, id: Any = 1) -> Any:
    """One NDJSON call on ``sock``; its result."""
    request: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": id}
    if params is not None:
        request["params"] = params
    sock.sendall(json.dumps(request).encode() + b"\n")
    line = b""
    while not line.endswith(b"\n"):
        chunk = sock.recv(1)
        assert chunk, f"closed before the answer to {method}: {line!r}"
        line += chunk
    answer = json.loads(line)
    assert answer["id"] == id, answer
    return answer["result"]


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``sock`` within ``seconds`` (what it sends before is read and dropped)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([sock], [], [], left)[0]:
            return False
        try:
            if not sock.recv(65536):
                return True
        except ConnectionResetError:
            return True
    return False


def thread_count(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


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
    # The client's streams are this test's to close (closing the socket alone leaves them holding its fd).
    framed_in, framed_out = framed.makefile("rb"), framed.makefile("wb")
    client = rpcwire.Client(rpcwire.StdioTransport(framed_in, framed_out, framing="content-length"), timeout=30)
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
        # The client's reading thread is in a read of framed_in, whose close would wait for that read (up to the
        # socket's 30 s timeout): the socket shut down first ends the read.
        framed.shutdown(socket.SHUT_RDWR)
        for stream in (framed_in, framed_out, ndjson, framed, garbage):
            stream.close()
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
    assert framing_of(first) == framing


@pytest.mark.parametrize("poll", [True, False], ids=["poll", "select"])
def test_a_connection_is_watched_with_or_without_poll(monkeypatch: pytest.MonkeyPatch, poll: bool) -> None:
    """Where there is no ``select.poll`` (Windows) ``--listen`` waits with ``select``, on sockets: the same
    answers, nothing to read, bytes, the end; and an idle stream connection ends after its timeout."""
    if poll and not hasattr(select, "poll"):
        pytest.skip("no select.poll here")
    monkeypatch.setattr(rpcwire._listen, "_HAS_POLL", poll)
    left, right = socket.socketpair()
    with left, right:
        assert not rpcwire._listen._readable(right, 0.01)
        left.sendall(b"x")
        assert rpcwire._listen._readable(right, None)
        assert right.recv(1) == b"x"
        idle = rpcwire._listen._IdleReader(right, timeout=0.05)
        left.sendall(b"abc")
        buffer = bytearray(8)
        assert idle.readinto(buffer) == 3
        assert bytes(buffer[:3]) == b"abc"
        started = time.monotonic()
        assert idle.readinto(buffer) == 0  # nothing came for the timeout: the input ends
        assert time.monotonic() - started >= 0.04
        left.shutdown(socket.SHUT_WR)
        assert rpcwire._listen._readable(right, 0)  # the end is readable too


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
    served = run_rpcwire("serve", "handlers:async_handler", "--listen", "127.0.0.1:0", cwd=app_dir)
    assert served.returncode == 2
    assert b"calls the handler synchronously" in served.stderr


# --- request smuggling: a request whose end cannot be told for sure is refused, and the connection closed ------

SMUGGLED = (
    b"POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%b"
    % (
        len(add(1, 1, "smuggled")),
        add(1, 1, "smuggled"),
    )
)
HEAD = b"POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


@pytest.mark.parametrize(
    "request_bytes",
    [
        # Content-Length (5) and chunked (ends at "0"): the bytes after are a request for one reading, not the other.
        HEAD + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + SMUGGLED,
        HEAD + b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n0\r\n\r\n%b" % (len(SMUGGLED), SMUGGLED),
        HEAD + b"Content-Length: 0\r\nContent-Length: %d\r\n\r\n%b" % (len(SMUGGLED), SMUGGLED),  # two different
        HEAD + b"Content-Length: 0, %d\r\n\r\n%b" % (len(SMUGGLED), SMUGGLED),  # a list
        HEAD + b"Content-Length: 0\r\nContent-Length: 0\r\n\r\n" + SMUGGLED,  # two, even equal
        HEAD + b"Content-Length : %d\r\n\r\n%b" % (len(SMUGGLED), SMUGGLED),  # not a field: no length seen
        HEAD + b"X-Folded: a\r\n Content-Length: %d\r\n\r\n%b" % (len(SMUGGLED), SMUGGLED),  # obs-fold
        HEAD + b"Content-Length: +%d\r\n\r\n%b" % (len(SMUGGLED), SMUGGLED),
        HEAD + b"Content-Length: \xb2\r\n\r\n" + SMUGGLED,  # a digit to str.isdigit, not to HTTP
        HEAD + b"Host: evil.example\r\nContent-Length: 0\r\n\r\n",  # two Hosts
    ],
    ids=[
        "cl-then-te",
        "te-then-cl",
        "two-cl",
        "cl-list",
        "two-equal-cl",
        "space-before-colon",
        "obs-fold",
        "plus-sign",
        "superscript-digit",
        "two-hosts",
    ],
)
def test_ambiguous_framing_is_400_and_the_connection_closed(port: int, request_bytes: bytes) -> None:
    """RFC 9112 §6.3: a message whose length cannot be told for sure is an unrecoverable error (400, close); else
    what follows its body could be taken as a request of its own (smuggled past a proxy that reads it otherwise)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request_bytes)
        received = b""
        while chunk := sock.recv(65536):  # until the server closes (a kept-alive connection: TimeoutError)
            received += chunk
    assert received.startswith(b"HTTP/1.1 400 "), received
    assert received.count(b"HTTP/1.") == 1, received  # one response: nothing after the first request served
    assert b"connection: close" in received.lower()


def test_a_body_with_one_content_length_keeps_the_connection(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        body = add(2, 3, 1)
        sock.sendall(HEAD + b"Content-Length:  %d \r\n\r\n%b" % (len(body), body) + SMUGGLED)  # spaces around: fine
        received = b""
        while received.count(b'"result"') < 2:
            chunk = sock.recv(65536)
            assert chunk, received
            received += chunk
    assert received.count(b"HTTP/1.1 200 ") == 2, received


# --- connections: threads on demand, a limit, an idle timeout ------------------------------------------------


@pytest.mark.slow
def test_idle_connections_hold_few_threads(app_dir: Path) -> None:
    """100 idle sockets used to cost 1,000 threads (N workers and a writer each). Now a connection that said
    nothing holds one thread, a stream connection one more per worker it needed, its writer and its reader (a
    read that may wait while requests run), an HTTP one none more (counted in the server process,
    /proc/PID/task)."""
    silent, streams, webs = 24, 8, 8
    with listen_server(app_dir, "--max-connections", "100", "--idle-timeout", "60") as port:
        sockets: list[socket.socket] = []
        webs_open: list[http.client.HTTPConnection] = []
        try:
            first = connect(port)
            sockets.append(first)
            pid = call_ndjson(first, "pid")
            sockets += [connect(port) for _ in range(silent)]
            for index in range(streams):
                sock = connect(port)
                sockets.append(sock)
                assert call_ndjson(sock, "add", [index, 1]) == index + 1
            for index in range(webs):
                web = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                webs_open.append(web)
                response = post(web, add(index, 1, 1))
                assert (response.status, response.read()) == (
                    200,
                    b'{"jsonrpc":"2.0","id":1,"result":%d}' % (index + 1),
                )
            time.sleep(2.5)  # past the 2 s a connection that says nothing once waited before being served
            threads = thread_count(pid)
            # The main thread; per stream connection (the first one too) its own thread, its reader, its writer,
            # one worker.
            assert threads <= 1 + silent + 4 * (streams + 1) + webs + 2, threads
        finally:
            for sock in sockets:
                sock.close()
            for web in webs_open:
                web.close()


@pytest.mark.slow
def test_an_idle_connection_is_closed(app_dir: Path) -> None:
    """With --idle-timeout 2: a connection that says nothing, a stream connection and a kept-alive HTTP one that
    go quiet are closed; one that keeps talking, and one waiting for a call longer than the timeout, are not."""
    with listen_server(app_dir, "--idle-timeout", "2") as port:
        silent, quiet, busy, napping = connect(port), connect(port), connect(port), connect(port)
        web = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            assert call_ndjson(quiet, "add", [1, 2]) == 3
            response = post(web, add(1, 2, 1))
            assert (response.status, response.read()) == (200, b'{"jsonrpc":"2.0","id":1,"result":3}')
            napping.sendall(b'{"jsonrpc":"2.0","method":"nap","params":[4],"id":"n"}\n')
            assert call_ndjson(napping, "add", [0, 0], id=0) == 0  # served while the nap runs (4 s > 2 s)
            for index in range(20):  # 4 s of a call every 0.2 s: never 2 s quiet
                assert call_ndjson(busy, "add", [index, 1], id=index) == index + 1
                time.sleep(0.2)
            for sock in (silent, quiet):
                assert closed_within(sock, 20)
            assert web.sock is not None and closed_within(web.sock, 20)
            with napping.makefile("rb") as stream:  # the nap's answer comes; then the quiet connection ends
                assert json.loads(stream.readline()) == {"jsonrpc": "2.0", "id": "n", "result": "rested"}
            assert closed_within(napping, 20)
        finally:
            for sock in (silent, quiet, busy, napping):
                sock.close()
            web.close()


@pytest.mark.slow
def test_connections_past_the_limit_wait_in_the_backlog(app_dir: Path) -> None:
    with listen_server(app_dir, "--max-connections", "2") as port:
        first, second = connect(port), connect(port)
        try:
            assert call_ndjson(first, "add", [1, 1]) == 2
            assert call_ndjson(second, "add", [2, 2]) == 4
            with connect(port) as third:  # the kernel accepts it; the server does not take it yet
                third.sendall(add(3, 3, 3) + b"\n")
                assert not select.select([third], [], [], 1.0)[0]  # not served while two are
                first.close()
                assert read_lines(third, 1) == [{"jsonrpc": "2.0", "id": 3, "result": 6}]
        finally:
            first.close()
            second.close()


# --- HTTP: the Host -------------------------------------------------------------------------------------------


def test_http_on_listen_checks_the_host(app_dir: Path, port: int) -> None:
    def status(listening: int, host: str) -> int:
        web = http.client.HTTPConnection("127.0.0.1", listening, timeout=30)
        try:
            return post(web, add(1, 2, 1), Host=host, Origin=f"http://{host}").status
        finally:
            web.close()

    assert status(port, f"127.0.0.1:{port}") == 200
    assert status(port, f"localhost:{port}") == 200
    assert status(port, f"evil.example:{port}") == 421  # a rebound name, over loopback
    with listen_server(app_dir, "--allowed-hosts", "rpc.example.com") as listed:
        assert status(listed, "rpc.example.com") == 200
        assert status(listed, f"127.0.0.1:{listed}") == 421


@pytest.mark.slow
def test_a_stop_as_connections_close_exits_cleanly(app_dir: Path) -> None:
    """SIGTERM just as stream connections close: their threads, waking in the native core, once met an
    interpreter being finalized and the process aborted ("FATAL: exception not rethrown", status -6). Every
    connection now ends before the server exits (announced_server checks status 0 and no traceback)."""
    for _ in range(3):
        with listen_server(app_dir) as port:
            sockets = [connect(port) for _ in range(8)]
            for index, sock in enumerate(sockets):
                assert call_ndjson(sock, "add", [index, 1]) == index + 1
            for sock in sockets:
                sock.close()


# --- the idle timeout and an async handler ---------------------------------------------------------------------


@pytest.mark.slow
def test_an_async_call_in_flight_is_activity(impl: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``async def`` call that runs past the idle timeout (0.5 s; the call 2 s) keeps the stream connection
    open: a request sent while it runs is answered, then the call's own answer comes, and only then, quiet, the
    connection is closed. The count of calls in flight once dropped as the coroutine was made, before it ran: the
    connection's input ended under the running call, and the request sent meanwhile was never read."""
    monkeypatch.setattr(rpcwire._listen, "rpcwire", impl)  # the stream connection served by the core under test

    async def handler(method: str, params: Any) -> Any:
        if method == "nap":
            await asyncio.sleep(params[0])
            return "rested"
        return params[0] + params[1]

    assert _answers_past_the_idle_timeout(handler, 4) == [
        {"jsonrpc": "2.0", "id": "a", "result": 3},
        {"jsonrpc": "2.0", "id": "n", "result": "rested"},
    ]


def _answers_past_the_idle_timeout(handler: Any, max_concurrency: int) -> list[Any]:
    """A stream connection (idle timeout 0.5 s) served by ``handler``: a ``nap`` of 2 s sent, then 1 s later (past
    the timeout, the nap running) an ``add``; their two answers as they came, once the connection is seen to close,
    quiet, after them."""
    limits = rpcwire._listen.Limits(max_concurrency=max_concurrency, idle_timeout=0.5)
    with socket.create_server(("127.0.0.1", 0)) as listener, connect(listener.getsockname()[1]) as sock:
        accepted, _ = listener.accept()
        address = listener.getsockname()[:2]
        server = threading.Thread(
            target=rpcwire._listen._serve_connection, args=(accepted, handler, None, address, limits), daemon=True
        )
        server.start()
        try:
            sock.sendall(b'{"jsonrpc":"2.0","method":"nap","params":[2],"id":"n"}\n')
            time.sleep(1.0)  # past the idle timeout, the nap running
            sock.sendall(add(1, 2, "a") + b"\n")
            with sock.makefile("rb") as stream:
                lines = [stream.readline() for _ in range(2)]
            assert all(lines), f"the connection closed under the call in flight: {lines}"
            assert closed_within(sock, 20)  # quiet now: closed after the timeout
        finally:
            sock.close()
            server.join(30)
        assert not server.is_alive()
    return [json.loads(line) for line in lines]


@pytest.mark.slow
@pytest.mark.parametrize("max_concurrency", [1, 2], ids=["sequential", "threads"])
def test_a_sync_call_in_flight_is_activity(impl: Any, monkeypatch: pytest.MonkeyPatch, max_concurrency: int) -> None:
    """As for an ``async def`` call: a sync call that runs past the idle timeout (0.5 s; the call 2 s) keeps the
    stream connection open, whichever driver serves it. Threads: what is in flight is the serving session's to say
    (the reader's deadline comes while the call runs). Sequential: the request sent while the call runs is read
    once it is answered (its read asked then is activity, not the bytes' arrival 1 s before)."""
    monkeypatch.setattr(rpcwire._listen, "rpcwire", impl)

    def handler(method: str, params: Any) -> Any:
        if method == "nap":
            time.sleep(params[0])
            return "rested"
        return params[0] + params[1]

    answers = _answers_past_the_idle_timeout(handler, max_concurrency)
    assert sorted(answers, key=json.dumps) == [
        {"jsonrpc": "2.0", "id": "a", "result": 3},
        {"jsonrpc": "2.0", "id": "n", "result": "rested"},
    ]


def test_the_idle_timeout_waits_for_what_the_session_has_in_flight(impl: Any) -> None:
    """In process: a stream connection's input asks the serving session whether anything is in flight. With a
    request admitted, the deadline passes without the input ending; once the session's request is answered, the
    wait starts again, and only then, quiet, the input ends."""
    session = rpcwire._session.Session(impl.StdioTransport(io.BytesIO(), io.BytesIO()), 1)
    request = impl.StdioTransport(
        io.BytesIO(b'{"jsonrpc":"2.0","method":"nap","id":1}\n'), io.BytesIO()
    )._read_message()
    (start,) = session.received(request)
    answered: list[float] = []

    def answer() -> None:
        answered.append(time.monotonic())
        session.finished(start, b"{}")

    left, right = socket.socketpair()
    timer = threading.Timer(0.3, answer)  # the request in flight for 3 timeouts
    with left, right:
        idle = rpcwire._listen._IdleReader(right, timeout=0.1)
        idle.watch(session)
        timer.start()
        try:
            assert idle.readinto(bytearray(8)) == 0
            ended = time.monotonic()
        finally:
            timer.cancel()
    assert answered, "the input ended while the session had a request in flight"
    assert ended - answered[0] >= 0.09  # a whole timeout after the request's end


# --- HTTP: a body left unread ---------------------------------------------------------------------------------


def test_a_refused_body_too_large_to_read_says_connection_close(port: int) -> None:
    """A POST of 8 MiB refused before its body is read (415, the shared server's limit being 16 MiB): too long to
    drain, the body is left unread, so the response says ``Connection: close`` and the connection ends (it used
    to end all the same, with no word of it: a client would send its next request on it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        head = b"POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
        sock.sendall(head + b"Content-Length: %d\r\n\r\n" % (8 * 1024 * 1024) + b"x" * 65536)
        received = b""
        while chunk := sock.recv(65536):  # until the server closes
            received += chunk
    status, _, headers = received.partition(b"\r\n\r\n")[0].partition(b"\r\n")
    assert status.startswith(b"HTTP/1.1 415 "), received
    assert b"connection: close" in headers.lower().split(b"\r\n"), received


def test_a_refused_small_body_is_drained_and_the_connection_kept(port: int) -> None:
    """A refused body of 512 KiB is read and dropped: the next request on the connection is answered."""
    web = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        web.request("POST", "/rpc", body=b"x" * 512 * 1024, headers={"Content-Type": "text/plain"})
        response = web.getresponse()
        assert response.status == 415
        assert response.getheader("Connection") is None
        response.read()
        response = post(web, add(1, 2, 1))
        assert (response.status, response.read()) == (200, b'{"jsonrpc":"2.0","id":1,"result":3}')
    finally:
        web.close()
