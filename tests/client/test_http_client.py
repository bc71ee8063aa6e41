"""The HTTP clients' rules against real servers on loopback: a bounded pool of connections, a timeout that
is a deadline for the whole call, an event stream read only up to its answer, a POST never sent twice,
the IPv6 ``Host`` header, errors with ``id: null``, answers read no further than ``max_message_bytes``, TLS
with ``verify=`` (the WebSocket client's too) and proxies (a forwarding proxy on loopback, ``Proxy``).

Most servers here are scripted HTTP/1.1 servers on a socket (``RawServer``), each written to misbehave in
one way; the errors with ``id: null`` come from rpcwire's own ASGI app under uvicorn. Each test runs both
clients (``kind``: ``HttpClient``, and ``AsyncHttpClient`` driven on a loop of its own) on both cores.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import io
import json
import re
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO

import pytest
import rpcwire
from support.messages import compact
from support.servers import client_server_url

BOUND = 30.0  # how long any scripted server goes on at most


# --- a scripted server -----------------------------------------------------------------------------------

Respond = Callable[["RawServer", socket.socket, bytes, BinaryIO], bool]


class RawServer:
    """An HTTP/1.1 server on a loopback socket. Each request's head goes to ``respond(server, conn, head,
    reader)``, which reads the body itself (``read_body``), writes what it likes and returns whether to
    read another request on the connection. Counts connections (``accepted``, ``open``, ``peak``), keeps
    each request's head, and ``executed[n]`` for the requests a ``respond`` counts as run."""

    def __init__(self, respond: Respond, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None) -> None:
        self.respond = respond
        self.tls = tls
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.listener = socket.socket(family, socket.SOCK_STREAM)
        self.listener.bind((host, 0))
        self.listener.listen(64)
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.accepted = self.open = self.peak = 0
        self.heads: list[bytes] = []
        self.executed: collections.Counter[Any] = collections.Counter()
        self.plan: collections.deque[str] = collections.deque()  # for a respond that follows a script
        self.stopping = False
        self.sockets: list[socket.socket] = []
        self.threads: list[threading.Thread] = []
        self.acceptor = threading.Thread(target=self._accept, daemon=True)

    def url(self, host: str = "127.0.0.1") -> str:
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.port}/rpc"

    def __enter__(self) -> RawServer:
        self.acceptor.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stopping = True
        self.acceptor.join(10)
        with self.lock:
            sockets = list(self.sockets)
        for conn in sockets:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in list(self.threads):
            thread.join(10)
        self.listener.close()

    def wait(self, predicate: Callable[[], bool], bound: float = 10.0) -> bool:
        """Wait (at most ``bound`` s) until ``predicate()`` holds, checked under the server's lock."""
        with self.changed:
            return self.changed.wait_for(predicate, bound)

    def _accept(self) -> None:
        while not self.stopping:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self.changed:
                self.accepted += 1
                self.open += 1
                self.peak = max(self.peak, self.open)
                self.sockets.append(conn)
                self.changed.notify_all()
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(BOUND)
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            reader = conn.makefile("rb")
        except OSError:
            conn.close()
            with self.changed:
                self.open -= 1
                self.changed.notify_all()
            return
        try:
            while not self.stopping:
                head = b""
                while (line := reader.readline(65536)) not in (b"\r\n", b"\n", b""):
                    head += line
                if not head or not line:
                    break
                with self.changed:
                    self.heads.append(head)
                    self.changed.notify_all()
                if not self.respond(self, conn, head, reader):
                    break
        except OSError:
            pass
        finally:
            reader.close()
            conn.close()
            with self.changed:
                self.open -= 1
                self.changed.notify_all()


def read_body(head: bytes, reader: BinaryIO) -> Any:
    match = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    assert match is not None, head
    return json.loads(reader.read(int(match.group(1))))


def response_bytes(value: Any) -> bytes:
    body = compact(value)
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def send_json(conn: socket.socket, value: Any) -> None:
    conn.sendall(response_bytes(value))


def start_events(conn: socket.socket) -> None:
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )


def send_event(conn: socket.socket, value: Any) -> None:
    data = b"event: message\ndata: " + compact(value) + b"\n\n"
    conn.sendall(b"%x\r\n%s\r\n" % (len(data), data))


def progress(message: dict[str, Any], step: int) -> dict[str, Any]:
    token = message["params"]["_meta"]["progressToken"]
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": step}}


def answer(message: Any) -> Any:
    """What an echo server answers: each call's ``params["n"]`` as its result."""
    if isinstance(message, list):
        return [answer(entry) for entry in message]
    return {"jsonrpc": "2.0", "id": message["id"], "result": message["params"]["n"]}


def client_gone(conn: socket.socket, bound: float = BOUND) -> bool:
    """Wait (at most ``bound`` s) for the client to close the connection."""
    conn.settimeout(bound)
    try:
        while conn.recv(4096):
            pass
    except TimeoutError:
        return False
    except OSError:
        pass
    return True


# --- both clients from sync code -------------------------------------------------------------------------


class InLoop:
    """An ``AsyncHttpClient`` driven from sync code: an event loop on a thread of its own runs each call
    (so that its pooled connections stay on one loop)."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def made() -> Any:
            return make()

        self.client = self._run(made())

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(2 * BOUND)

    def call(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self.client.call(*args, **kwargs))

    def batch(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self.client.batch(*args, **kwargs))

    def close(self) -> None:
        self._run(self.client.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@contextlib.contextmanager
def http_client(impl: ModuleType, kind: str, url: str, **options: Any) -> Iterator[Any]:
    """``kind``: ``sync`` (``HttpClient``), ``async`` (``AsyncHttpClient``), or either ``+httpx`` (posting
    through a caller's own ``httpx`` client)."""
    session: Any = None
    if kind.endswith("+httpx"):
        httpx = pytest.importorskip("httpx")
        session = httpx.Client() if kind.startswith("sync") else None
    if kind.startswith("sync"):
        client = impl.HttpClient(url, session=session, **options)
        try:
            yield client
        finally:
            client.close()
            if session is not None:
                session.close()
        return

    def make() -> Any:
        own = httpx.AsyncClient() if kind.endswith("+httpx") else None
        return impl.AsyncHttpClient(url, session=own, **options)

    driven = InLoop(make)
    try:
        yield driven
    finally:
        if driven.client._session is not None:
            driven._run(driven.client._session.aclose())
        driven.close()


BOTH = pytest.mark.parametrize("kind", ["sync", "async"])
WITH_HTTPX = pytest.mark.parametrize("kind", ["sync", "async", "sync+httpx", "async+httpx"])


def echo(server: RawServer, conn: socket.socket, head: bytes, reader: BinaryIO) -> bool:
    message = read_body(head, reader)
    with server.lock:
        server.executed[message["params"]["n"]] += 1
    send_json(conn, answer(message))
    return True


# --- HTTP/1.1 as servers write it -----------------------------------------------------------------------


def framed(framing: str, body: bytes) -> tuple[bytes, bool]:
    """An answer in ``framing``, and whether the connection stays open after it."""
    json_head = b"Content-Type: application/json\r\n"
    if framing == "length":
        return b"HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%s" % (json_head, len(body), body), True
    if framing == "chunked":
        half = len(body) // 2
        chunks = b"%x;ext=1\r\n%s\r\n%x\r\n%s\r\n0\r\nX-Trailer: 1\r\n\r\n" % (
            half,
            body[:half],
            len(body) - half,
            body[half:],
        )
        return b"HTTP/1.1 200 OK\r\n%sTransfer-Encoding: chunked\r\n\r\n%s" % (json_head, chunks), True
    if framing == "continue":
        interim = b"HTTP/1.1 100 Continue\r\n\r\n"
        return interim + b"HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%s" % (json_head, len(body), body), True
    if framing == "connection-close":
        head = b"HTTP/1.1 200 OK\r\n%sConnection: close\r\nContent-Length: %d\r\n\r\n" % (json_head, len(body))
        return head + body, False
    if framing == "http/1.0":
        return b"HTTP/1.0 200 OK\r\n%s\r\n%s" % (json_head, body), False
    assert framing == "events-until-close"
    event = b"event: message\r\ndata: " + body + b"\r\n\r\n"
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + event, False


@BOTH
@pytest.mark.parametrize(
    "framing", ["length", "chunked", "continue", "connection-close", "http/1.0", "events-until-close"]
)
def test_every_framing_of_an_answer_in_small_pieces(impl: ModuleType, kind: str, framing: str) -> None:
    def respond(server: RawServer, conn: socket.socket, head: bytes, reader: BinaryIO) -> bool:
        response, keep = framed(framing, compact(answer(read_body(head, reader))))
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for start in range(0, len(response), 7):
            conn.sendall(response[start : start + 7])
            time.sleep(0.001)
        return keep

    with RawServer(respond) as server, http_client(impl, kind, server.url(), timeout=BOUND) as client:
        assert client.call("echo", {"n": 1}) == 1
        if not framing.endswith("close") and framing != "http/1.0":
            assert client.call("echo", {"n": 2}) == 2
            assert server.accepted == 1  # kept alive
        else:
            assert server.wait(lambda: server.open == 0)
            assert client.call("echo", {"n": 2}) == 2
            assert server.accepted == 2


@BOTH
@pytest.mark.parametrize(
    "response",
    [b"HTTP/1.1 2xx OK\r\n\r\n", b"SSH-2.0-OpenSSH\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"],
)
def test_a_malformed_answer_raises(impl: ModuleType, kind: str, response: bytes) -> None:
    def respond(server: RawServer, conn: socket.socket, head: bytes, reader: BinaryIO) -> bool:
        read_body(head, reader)
        conn.sendall(response)
        client_gone(conn, 10)
        return False

    with (
        RawServer(respond) as server,
        http_client(impl, kind, server.url(), timeout=BOUND) as client,
        pytest.raises(ConnectionError, match="malformed") as caught,
    ):
        client.call("echo", {"n": 1})
    assert type(caught.value) is rpcwire.ConnectionFailed  # a TransportError too (the error tree)
    assert isinstance(caught.value, rpcwire.TransportError)


@BOTH
def test_a_refusal_raises_http_error_and_keeps_the_connection(impl: ModuleType, kind: str) -> None:
    def respond(server: RawServer, conn: socket.socket, head: bytes, reader: BinaryIO) -> bool:
        message = read_body(head, reader)
        if message["method"] == "refused":
            conn.sendall(b"HTTP/1.1 415 Unsupported Media Type\r\nContent-Length: 4\r\n\r\nnope")
        else:
            send_json(conn, answer(message))
        return True

    with RawServer(respond) as server, http_client(impl, kind, server.url(), timeout=BOUND) as client:
        with pytest.raises(rpcwire.HttpError) as refused:
            client.call("refused", {"n": 1})
        assert (refused.value.status, refused.value.body) == (415, b"nope")
        assert isinstance(refused.value, rpcwire.TransportError)
        assert str(refused.value) == "HTTP 415 Unsupported Media Type: nope"
        assert client.call("echo", {"n": 2}) == 2
        assert server.accepted == 1


def test_http_error_shows_the_body_decoded() -> None:
    """The text of an ``HttpError`` is the body as text (UTF-8), not a bytes repr; a long body is cut."""
    assert str(rpcwire.HttpError(403, "Forbidden", "déjà refusé\n".encode())) == "HTTP 403 Forbidden: déjà refusé"
    assert str(rpcwire.HttpError(502, "Bad Gateway", b"\xff oops")) == "HTTP 502 Bad Gateway: \ufffd oops"
    assert str(rpcwire.HttpError(404, "Not Found", b"")) == "HTTP 404 Not Found"
    long = str(rpcwire.HttpError(500, "Internal Server Error", "é".encode() * 1000))
    assert long == "HTTP 500 Internal Server Error: " + "é" * 200 + "…"


# --- a bounded pool --------------------------------------------------------------------------------------


@pytest.mark.parametrize("max_connections", [None, 3])
def test_two_hundred_short_threads_share_a_bounded_pool(impl: ModuleType, max_connections: int | None) -> None:
    """Each thread calls once and ends; the client keeps at most ``max_connections`` (16 by default) open."""
    limit = 16 if max_connections is None else max_connections
    options = {} if max_connections is None else {"max_connections": max_connections}
    results: dict[int, Any] = {}
    with RawServer(echo) as server, http_client(impl, "sync", server.url(), timeout=BOUND, **options) as client:

        def one(n: int) -> None:
            results[n] = client.call("echo", {"n": n})

        for wave in range(8):  # 8 waves of 25 threads at once
            threads = [threading.Thread(target=one, args=(wave * 25 + i,)) for i in range(25)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(BOUND)
        assert results == {n: n for n in range(200)}
        assert server.accepted <= limit, f"{server.accepted} connections for {limit}"
        assert server.peak <= limit


@BOTH
def test_a_caller_waits_for_a_free_connection_within_its_deadline(impl: ModuleType, kind: str) -> None:
    release = threading.Event()

    def respond(server: RawServer, conn: socket.socket, head: bytes, reader: BinaryIO) -> bool:
        message = read_body(head, reader)
        if message["method"] == "hold":
            release.wait(BOUND)
        send_json(conn, answer(message))
        return True

    with RawServer(respond) as server, http_client(impl, kind, server.url(), max_connections=1) as client:
        held: list[Any] = []
        holder = threading.Thread(target=lambda: held.append(client.call("hold", {"n": 1}, timeout=BOUND)))
        holder.start()
        try:
            assert server.wait(lambda: len(server.heads) == 1)
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                client.call("echo", {"n": 2}, timeout=0.5)
            assert time.monotonic() - started < 3
            assert len(server.heads) == 1 and server.accepted == 1  # it never got a connection of its own
        finally:
            release.set()
            holder.join(BOUND)
        assert held == [1]
        assert client.call("echo", {"n": 3}, timeout=BOUND) == 3
        assert server.accepted == 1


def test_async_calls_in_flight_share_a_bounded_pool(impl: ModuleType) -> None:
    async def main(url: str) -> list[Any]:
        async with impl.AsyncHttpClient(url, max_connections=3, timeout=BOUND) as client:
            return await asyncio.gather(*(client.call("echo", {"n": n}) for n in range(100)))

    with RawServer(echo) as server:
        assert asyncio.run(main(server.url())) == list(range(100))
        assert server.accepted <= 3 and server.peak <= 3


def test_max_connections_is_a_positive_int(impl: ModuleType) -> None:
    for bad in (0, -1, 1.5, None):
        with pytest.raises(ValueError, match="max_connections"):
            impl.HttpClient("http://127.0.0.1:1/rpc", max_connections=bad)
        with pytest.raises(ValueError, match="max_connections"):
            impl.AsyncHttpClient("http://127.0.0.1:1/rpc", max_connections=bad)


# --- a timeout is a deadline -----------------------------------------------------------------------------


def endless(server: RawServer, conn: socket.socket, head: bytes, reader: BinaryIO) -> bool:
    """``stream``: an event stream of progress every 0.2 s, never an answer; ``drip``: a status line, then
    one byte of a header every 0.2 s (the head never ends). Each until the client goes (or BOUND s)."""
    message = read_body(head, reader)
    deadline = time.monotonic() + BOUND
    with contextlib.suppress(OSError):
        if message["method"] == "stream":
            start_events(conn)
            step = 0
            while time.monotonic() < deadline:
                step += 1
                send_event(conn, progress(message, step))
                time.sleep(0.2)
        else:
            conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            while time.monotonic() < deadline:
                conn.sendall(b"x")
                time.sleep(0.2)
    return False


@pytest.mark.slow
@WITH_HTTPX
def test_a_timeout_bounds_a_steady_event_stream(impl: ModuleType, kind: str) -> None:
    events: list[Any] = []
    with RawServer(endless) as server, http_client(impl, kind, server.url()) as client:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            client.call("stream", {"n": 1}, timeout=1, on_progress=lambda *e: events.append(e))
        assert time.monotonic() - started < 3
        assert events  # the stream was read as it came
        assert server.wait(lambda: server.open == 0)  # the client closed the connection


@pytest.mark.slow
@BOTH
def test_a_timeout_bounds_a_head_that_never_ends(impl: ModuleType, kind: str) -> None:
    with RawServer(endless) as server, http_client(impl, kind, server.url()) as client:
        started = time.monotonic()
        with pytest.raises(TimeoutError) as caught:
            client.call("drip", {"n": 1}, timeout=1)
        assert time.monotonic() - started < 3
    assert type(caught.value) is rpcwire.CallTimeout  # a TransportError too (the error tree)
    assert isinstance(caught.value, rpcwire.TransportError)


@pytest.mark.slow
@BOTH
def test_a_timeout_bounds_the_connect(impl: ModuleType, kind: str) -> None:
    """A listener whose accept queue is full: the kernel drops further connection attempts."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    filler = socket.create_connection(listener.getsockname(), timeout=5)
    try:
        with http_client(impl, kind, f"http://127.0.0.1:{listener.getsockname()[1]}/rpc") as client:
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                client.call("echo", {"n": 1}, timeout=1)
            assert time.monotonic() - started < 3
    finally:
        filler.close()
        listener.close()


# --- an event stream is read up to its answer ------------------------------------------------------------


def answer_then_hold(server: RawServer, conn: socket.socket, head: bytes, reader: BinaryIO) -> bool:
    """An event stream that carries the answer (a batch's: one event per entry) and then stays open, silent,
    until the client goes; ``executed["gone"]`` counts the clients that went."""
    message = read_body(head, reader)
    start_events(conn)
    if not isinstance(message, list):
        if "_meta" in message.get("params", {}):
            send_event(conn, progress(message, 1))
        send_event(conn, answer(message))
    else:
        for entry in message:
            send_event(conn, answer(entry))
    if client_gone(conn, 10):
        with server.lock:
            server.executed["gone"] += 1
    return False


@WITH_HTTPX
# Through an httpx session, a stream left at its answer leaves httpcore's own response generator to the garbage
# collector, which on 3.13 may warn that its aclose() was never awaited: httpcore's, not rpcwire's, to close.
@pytest.mark.filterwarnings("ignore:coroutine method 'aclose':RuntimeWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_event_stream_is_read_up_to_its_answer(impl: ModuleType, kind: str) -> None:
    events: list[Any] = []
    with RawServer(answer_then_hold) as server, http_client(impl, kind, server.url(), timeout=20) as client:
        started = time.monotonic()
        assert client.call("work", {"n": 7}, on_progress=lambda *e: events.append(e)) == 7
        assert client.batch([("work", {"n": 1}), ("work", {"n": 2})]) == [1, 2]
        assert time.monotonic() - started < 5  # the stream stays open 10 s after each answer
        assert events == [(1, None, None)]
        assert server.wait(lambda: server.executed["gone"] == 2)  # each stream's connection closed by the client
        assert server.accepted == 2


# --- a POST is never sent twice --------------------------------------------------------------------------


def scripted(server: RawServer, conn: socket.socket, head: bytes, reader: BinaryIO) -> bool:
    """Does what ``server.plan`` says next for each request: ``ok`` answers; ``drop`` runs it and closes
    without a word; ``head-only`` closes having read only the head (not run); ``half`` runs it and closes
    after half the answer's head; ``ok-close`` answers, then closes the connection while it is idle."""
    with server.lock:
        action = server.plan.popleft() if server.plan else "ok"
    if action == "head-only":
        return False
    message = read_body(head, reader)
    with server.lock:
        for entry in message if isinstance(message, list) else [message]:
            server.executed[entry["params"]["n"]] += 1
    if action == "drop":
        return False
    if action == "half":
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: appl")
        return False
    if action == "ok-te-cl":  # chunked, with a Content-Length too (RFC 9112 §6.3: the mark of response splitting)
        body = compact(answer(message))
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
            b"Content-Length: %d\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), len(body), body)
        )
        return True
    if action == "ok-stray":  # the answer, then (the connection idle) a response nobody asked for; kept open
        send_json(conn, answer(message))
        time.sleep(0.1)
        send_json(conn, {"jsonrpc": "2.0", "id": 999, "result": "stray"})
        return True
    send_json(conn, answer(message))
    return action != "ok-close"


@BOTH
def test_a_post_the_server_may_have_run_is_never_sent_again(impl: ModuleType, kind: str) -> None:
    with RawServer(scripted) as server, http_client(impl, kind, server.url(), timeout=BOUND) as client:
        outcomes: dict[int, Any] = {}
        plan = ["ok", "drop", "ok", "head-only", "ok", "half", "ok", "ok-close", "ok", "ok-close", "ok"]
        server.plan.extend(plan)
        for n, action in enumerate(plan, 1):
            before = server.accepted
            try:
                outcomes[n] = client.call("echo", {"n": n})
            except ConnectionError as exc:
                outcomes[n] = exc
            if n > 1 and plan[n - 2] == "ok":
                assert server.accepted == before  # after an answer, the kept-alive connection is reused
            elif n > 1:
                assert server.accepted == before + 1  # after the server closed it, a new one
            if action == "ok-close":  # the server closes the kept-alive connection while it is idle
                assert server.wait(lambda: server.open == 0)
        # every call the server ran, it ran once; each whose request was written and got no answer raised
        assert server.executed == {n: 1 for n, action in enumerate(plan, 1) if action != "head-only"}
        assert [n for n, outcome in outcomes.items() if isinstance(outcome, ConnectionError)] == [2, 4, 6]
        assert all(outcomes[n] == n for n, action in enumerate(plan, 1) if action in ("ok", "ok-close"))
        assert "may have run" in str(outcomes[2])


@BOTH
def test_a_kept_alive_connection_with_stray_bytes_is_not_reused(impl: ModuleType, kind: str) -> None:
    """The server wrote what no request asked for on an idle kept-alive connection (an event loop reads it into
    its buffer, where the socket shows nothing): the connection is closed and another taken, and the next
    call gets its own answer, never the stray one."""
    with RawServer(scripted) as server, http_client(impl, kind, server.url(), timeout=BOUND) as client:
        server.plan.extend(["ok-stray", "ok"])
        assert client.call("echo", {"n": 1}) == 1
        time.sleep(0.5)  # the stray response arrives while the connection is idle
        assert client.call("echo", {"n": 2}) == 2
        assert server.accepted == 2
        assert server.executed == {1: 1, 2: 1}


@BOTH
def test_a_response_with_both_transfer_encoding_and_content_length_is_not_reused(impl: ModuleType, kind: str) -> None:
    """The coding delimits the body (RFC 9112 §6.3), but the connection is not kept for another request."""
    with RawServer(scripted) as server, http_client(impl, kind, server.url(), timeout=BOUND) as client:
        server.plan.extend(["ok-te-cl", "ok"])
        assert client.call("echo", {"n": 1}) == 1
        assert client.call("echo", {"n": 2}) == 2
        assert server.accepted == 2


@BOTH
def test_a_batch_the_server_may_have_run_is_never_sent_again(impl: ModuleType, kind: str) -> None:
    with RawServer(scripted) as server, http_client(impl, kind, server.url(), timeout=BOUND) as client:
        server.plan.extend(["ok", "drop"])
        assert client.call("echo", {"n": 0}) == 0
        with pytest.raises(ConnectionError):
            client.batch([("echo", {"n": 1}), ("echo", {"n": 2})])
        assert server.executed == {0: 1, 1: 1, 2: 1}


# --- https ----------------------------------------------------------------------------------------------

PROXY_VARIABLES = ["http_proxy", "https_proxy", "all_proxy", "no_proxy"]


@pytest.fixture(autouse=True)
def no_proxy_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clients honour the environment's proxies: none here, unless a test sets its own."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A throwaway self-signed certificate (its key, and itself: its own CA) for localhost and 127.0.0.1."""
    return make_certificate(tmp_path, "DNS:localhost,IP:127.0.0.1")


def make_certificate(tmp_path: Path, names: str) -> tuple[Path, Path]:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    request = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"]
    names = f"subjectAltName={names}"
    try:
        subprocess.run(
            ["openssl", *request, "-addext", names, "-keyout", str(key), "-out", str(cert)],
            check=True,
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        pytest.skip("no openssl command to make a certificate with")
    return key, cert


class TlsServer(RawServer):
    """``RawServer`` over TLS with ``certificate``; ``names`` keeps the name each handshake asked for (SNI)."""

    def __init__(self, respond: Respond, certificate: tuple[Path, Path]) -> None:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(certificate[1], certificate[0])
        self.names: list[str | None] = []
        tls.sni_callback = lambda _sock, name, _context: self.names.append(name)  # type: ignore[func-returns-value]
        super().__init__(respond, tls=tls)

    def url(self, host: str = "localhost") -> str:
        return f"https://{host}:{self.port}/rpc"


def test_https_with_the_default_trust_store(
    impl: ModuleType, certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The certificate trusted through ``SSL_CERT_FILE`` (which the default context reads); the connection is
    kept alive between calls."""
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[1]))
    with TlsServer(echo, certificate) as server:
        url = server.url("127.0.0.1")
        with impl.HttpClient(url, timeout=BOUND) as client:
            assert [client.call("echo", {"n": n}) for n in range(3)] == [0, 1, 2]
        assert server.accepted == 1
        monkeypatch.delenv("SSL_CERT_FILE")
        with impl.HttpClient(url, timeout=BOUND) as untrusting, pytest.raises(ssl.SSLCertVerificationError):
            untrusting.call("echo", {"n": 1})


@BOTH
@pytest.mark.parametrize("verify", ["ca-path", "ca-directory", "context", "off"])
def test_https_with_verify(
    impl: ModuleType, kind: str, verify: str, certificate: tuple[Path, Path], tmp_path: Path
) -> None:
    """``verify=``: a CA bundle's path (a file, or a directory of hashed certificates), an ``ssl.SSLContext``,
    or ``False``; the name of the URL sent as SNI and in ``Host``, the connection kept alive."""
    if verify == "ca-directory":
        directory = tmp_path / "cas"
        directory.mkdir()
        hashed = subprocess.run(
            ["openssl", "x509", "-hash", "-noout", "-in", str(certificate[1])], capture_output=True, check=True
        )
        (directory / f"{hashed.stdout.decode().strip()}.0").write_bytes(certificate[1].read_bytes())
    option: Any = {
        "ca-path": str(certificate[1]),
        "ca-directory": directory if verify == "ca-directory" else None,
        "context": ssl.create_default_context(cafile=certificate[1]),
        "off": False,
    }[verify]
    with TlsServer(echo, certificate) as server:
        with http_client(impl, kind, server.url(), timeout=BOUND, verify=option) as client:
            assert [client.call("echo", {"n": n}) for n in range(3)] == [0, 1, 2]
        assert server.accepted == 1
        assert server.names == ["localhost"]
        assert re.search(rb"(?m)^POST /rpc HTTP/1.1\r\nHost: localhost:%d\r$" % server.port, server.heads[0])


@BOTH
def test_https_refuses_an_untrusted_certificate_by_default(
    impl: ModuleType, kind: str, certificate: tuple[Path, Path]
) -> None:
    """``verify=True`` (the default: the system's trust store) refuses a self-signed certificate, saying how to
    trust it; no request is sent."""
    with TlsServer(echo, certificate) as server:
        with (
            http_client(impl, kind, server.url(), timeout=BOUND) as client,
            pytest.raises(ssl.SSLCertVerificationError, match=r"for localhost: self.signed.*pass verify=") as error,
        ):
            client.call("echo", {"n": 1})
        assert error.value.verify_code == 18  # X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT
        assert server.heads == []


@BOTH
def test_https_checks_the_name_of_the_url(impl: ModuleType, kind: str, tmp_path: Path) -> None:
    """A certificate trusted, but for another name than the URL's, is refused (verify= checks the name too)."""
    certificate = make_certificate(tmp_path, "DNS:localhost")
    with TlsServer(echo, certificate) as server:
        url = server.url("127.0.0.1")
        with (
            http_client(impl, kind, url, timeout=BOUND, verify=str(certificate[1])) as client,
            pytest.raises(ssl.SSLCertVerificationError, match=r"for 127\.0\.0\.1: .*mismatch"),
        ):
            client.call("echo", {"n": 1})


def test_verify_is_checked_when_the_client_is_made(impl: ModuleType, tmp_path: Path) -> None:
    for client in (impl.HttpClient, impl.AsyncHttpClient):
        with pytest.raises(FileNotFoundError):
            client("https://localhost/rpc", verify=str(tmp_path / "missing.pem"))
        with pytest.raises(TypeError, match="verify must be"):
            client("https://localhost/rpc", verify=1)
        with pytest.raises(ValueError, match="session= brings its own TLS"):
            client("https://localhost/rpc", verify=False, session=object())


@pytest.mark.parametrize("verify", ["default", "ca-path", "context", "off"])
def test_the_websocket_client_takes_verify_as_the_http_clients(
    impl: ModuleType, verify: str, certificate: tuple[Path, Path]
) -> None:
    """``AsyncWebSocketClient.connect(wss://..., verify=...)``: the same choices as the HTTP clients', the same
    refusal of an untrusted certificate by default."""
    websockets_server = pytest.importorskip("websockets.asyncio.server")
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(certificate[1], certificate[0])
    option: Any = {
        "default": True,
        "ca-path": certificate[1],
        "context": ssl.create_default_context(cafile=certificate[1]),
        "off": False,
    }[verify]

    async def answer_each(ws: Any) -> None:
        async for frame in ws:
            await ws.send(json.dumps(answer(json.loads(frame))))

    async def main() -> None:
        async with websockets_server.serve(answer_each, "127.0.0.1", 0, ssl=tls) as server:
            url = f"wss://localhost:{server.sockets[0].getsockname()[1]}/"
            connecting = impl.AsyncWebSocketClient.connect(url, verify=option, timeout=BOUND, open_timeout=BOUND)
            if verify == "default":
                with pytest.raises(ssl.SSLCertVerificationError, match=r"for localhost: self.signed.*pass verify="):
                    await connecting
                return
            async with connecting as client:
                assert await client.call("echo", {"n": 7}) == 7

    asyncio.run(main())


# --- proxies --------------------------------------------------------------------------------------------


class Proxy:
    """A forwarding HTTP proxy on loopback: ``CONNECT host:port`` opens a tunnel, a request in absolute form is
    relayed as it is to the host it names (or, with ``refuse``, those bytes are the answer to anything).
    ``heads`` keeps the head of each connection's first request."""

    def __init__(self, refuse: bytes | None = None) -> None:
        self.refuse = refuse
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.heads: list[bytes] = []
        self.sockets: list[socket.socket] = []
        self.threads: list[threading.Thread] = []
        self.stopping = False
        self.acceptor = threading.Thread(target=self._accept, daemon=True)

    def url(self, credentials: str = "") -> str:
        return f"http://{credentials}127.0.0.1:{self.port}"

    def __enter__(self) -> Proxy:
        self.acceptor.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stopping = True
        self.acceptor.join(10)
        for sock in list(self.sockets):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in list(self.threads):
            thread.join(10)
        for sock in self.sockets:
            sock.close()
        self.listener.close()

    def _thread(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self.threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self.stopping:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(BOUND)
            self.sockets.append(conn)
            self._thread(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        head = b""
        with contextlib.suppress(OSError):
            while (line := reader.readline(65536)) not in (b"\r\n", b"\n", b""):
                head += line
        self.heads.append(head)
        if not head or self.refuse is not None:
            with contextlib.suppress(OSError):
                conn.sendall(self.refuse or b"")
                client_gone(conn, 10)
            return
        method, target, _ = head.split(b"\r\n")[0].decode().split(" ")
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
        else:
            parts = urllib.parse.urlsplit(target)
            host, port = parts.hostname or "", str(parts.port)
        upstream = socket.create_connection((host, int(port)), timeout=BOUND)
        self.sockets.append(upstream)
        if method == "CONNECT":
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            upstream.sendall(head + b"\r\n")
        self._thread(self._relay, upstream.recv, conn)
        self._relay(reader.read1, upstream)

    @staticmethod
    def _relay(read: Callable[[int], bytes], to: socket.socket) -> None:
        with contextlib.suppress(OSError, ValueError):
            while data := read(65536):
                to.sendall(data)
        with contextlib.suppress(OSError):
            to.shutdown(socket.SHUT_WR)


@BOTH
def test_http_through_the_environments_proxy(impl: ModuleType, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``HTTP_PROXY`` (as requests and httpx read it): each POST sent to the proxy in absolute form, with
    ``Proxy-Authorization`` from the proxy URL's user and password; ``Host`` is still the server's."""
    with RawServer(echo) as server, Proxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url("me:p%40ss@"))
        with http_client(impl, kind, server.url(), timeout=BOUND) as client:
            assert [client.call("echo", {"n": n}) for n in range(2)] == [0, 1]
        request = b"POST http://127.0.0.1:%d/rpc HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % (server.port, server.port)
        assert proxy.heads[0].startswith(request), proxy.heads[0]
        assert b"\r\nProxy-Authorization: Basic bWU6cEBzcw==\r\n" in proxy.heads[0]  # me:p@ss
        assert len(proxy.heads) == 1  # kept alive through the proxy
        assert server.heads[0].startswith(request)


@BOTH
def test_https_through_a_proxys_tunnel(
    impl: ModuleType, kind: str, certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``HTTPS_PROXY``: ``CONNECT host:port`` (with ``Proxy-Authorization``), then TLS to the server through
    the tunnel, its name sent as SNI and checked; the POST in origin form, no proxy header in it."""
    with TlsServer(echo, certificate) as server, Proxy() as proxy:
        monkeypatch.setenv("https_proxy", proxy.url("me:pw@"))
        with http_client(impl, kind, server.url(), timeout=BOUND, verify=str(certificate[1])) as client:
            assert [client.call("echo", {"n": n}) for n in range(2)] == [0, 1]
        connect = b"CONNECT localhost:%d HTTP/1.1\r\nHost: localhost:%d\r\n" % (server.port, server.port)
        assert proxy.heads == [connect + b"Proxy-Authorization: Basic bWU6cHc=\r\n"]
        assert server.names == ["localhost"]
        assert server.heads[0].startswith(b"POST /rpc HTTP/1.1\r\nHost: localhost:%d\r\n" % server.port)
        assert b"proxy-authorization" not in server.heads[0].lower()


@BOTH
def test_an_explicit_proxy_and_trust_env(impl: ModuleType, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``proxy=`` is used whatever the environment says; ``trust_env=False`` ignores the environment's."""
    with RawServer(echo) as server, Proxy() as proxy, Proxy(refuse=b"HTTP/1.1 502 No\r\n\r\n") as other:
        monkeypatch.setenv("HTTP_PROXY", other.url())
        with http_client(impl, kind, server.url(), timeout=BOUND, proxy=proxy.url()) as client:
            assert client.call("echo", {"n": 1}) == 1
        with http_client(impl, kind, server.url(), timeout=BOUND, trust_env=False) as client:
            assert client.call("echo", {"n": 2}) == 2
        assert (len(proxy.heads), other.heads, server.accepted) == (1, [], 2)


@BOTH
def test_no_proxy_goes_direct(impl: ModuleType, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``NO_PROXY`` naming the host (or ``*``) skips the environment's proxy; without it the proxy is used."""
    with RawServer(echo) as server, Proxy(refuse=b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n") as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url())
        for no_proxy in ["127.0.0.1", "localhost,127.0.0.1", f"127.0.0.1:{server.port}", "*"]:
            monkeypatch.setenv("NO_PROXY", no_proxy)
            with http_client(impl, kind, server.url(), timeout=BOUND) as client:
                assert client.call("echo", {"n": 1}) == 1
        assert proxy.heads == []
        monkeypatch.setenv("NO_PROXY", "example.com")
        with http_client(impl, kind, server.url(), timeout=BOUND) as client, pytest.raises(rpcwire.HttpError):
            client.call("echo", {"n": 1})
        assert len(proxy.heads) == 1


@BOTH
def test_a_proxy_refusing_the_tunnel_fails_naming_its_variable(
    impl: ModuleType, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusal = b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n"
    with Proxy(refuse=refusal) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url())
        with (
            http_client(impl, kind, "https://localhost:9/rpc", timeout=BOUND) as client,
            pytest.raises(ConnectionError, match=r"proxy http://127.0.0.1:\d+ \(from HTTPS_PROXY\) refused .* 407"),
        ):
            client.call("echo", {"n": 1})
        assert proxy.heads == [b"CONNECT localhost:9 HTTP/1.1\r\nHost: localhost:9\r\n"]


@pytest.mark.parametrize("variable", ["ALL_PROXY", "https_proxy"])
def test_a_proxy_the_clients_cannot_use_fails_naming_its_variable(
    impl: ModuleType, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SOCKS proxy or one reached over TLS: refused when the client is made, the variable and the way out
    named (the password not shown)."""
    monkeypatch.setenv(variable, "socks5://me:secret@127.0.0.1:1080")
    for client in (impl.HttpClient, impl.AsyncHttpClient):
        with pytest.raises(ValueError, match=rf"^{variable}='socks5://me:\*\*\*@127.0.0.1:1080': .*http:// proxy only"):
            client("https://localhost/rpc")
        client("https://localhost/rpc", trust_env=False)  # the way out
    monkeypatch.setenv("NO_PROXY", "localhost")
    impl.HttpClient("https://localhost/rpc")


# --- Host for an IPv6 literal ----------------------------------------------------------------------------


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@BOTH
def test_the_host_header_of_an_ipv6_literal_is_bracketed(impl: ModuleType, kind: str) -> None:
    if not ipv6_loopback():
        pytest.skip("no IPv6 loopback (::1) on this machine")
    with RawServer(echo, host="::1") as server, http_client(impl, kind, server.url("::1"), timeout=BOUND) as client:
        assert client.call("echo", {"n": 1}) == 1
        assert re.search(rb"(?m)^Host: \[::1\]:%d\r$" % server.port, server.heads[0]), server.heads[0]


@BOTH
def test_the_host_header_bytes(impl: ModuleType, kind: str) -> None:
    """The ``Host`` line as sent, for a name and for an IPv6 literal (an IPv4-mapped address reaching a
    server on 127.0.0.1: no IPv6 loopback needed, only IPv6 sockets)."""
    try:
        socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close()
    except OSError:
        pytest.skip("no IPv6 sockets on this machine")
    with RawServer(echo) as server:
        urls = {b"127.0.0.1": server.url(), b"[::ffff:127.0.0.1]": server.url("::ffff:127.0.0.1")}
        for host, url in urls.items():
            with http_client(impl, kind, url, timeout=BOUND) as client:
                assert client.call("echo", {"n": 1}) == 1
            lines = [line for line in server.heads[-1].split(b"\r\n") if line.lower().startswith(b"host:")]
            assert lines == [b"Host: %s:%d" % (host, server.port)]


# --- errors with id null ---------------------------------------------------------------------------------


@pytest.fixture
def uvicorn_url(impl: ModuleType, tmp_path: Path) -> Iterator[str]:
    """rpcwire's ASGI app (``max_batch=2``) under uvicorn on a loopback port."""
    with client_server_url(impl, tmp_path, max_batch=2) as url:
        yield url


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


@BOTH
def test_an_error_with_id_null_fails_every_call_of_its_post(impl: ModuleType, kind: str, uvicorn_url: str) -> None:
    with http_client(impl, kind, uvicorn_url, timeout=BOUND) as client:
        outcomes = client.batch([("add", [1, 2]), ("add", [3, 4]), ("add", [5, 6])])  # over max_batch: -32600
        assert [type(outcome) for outcome in outcomes] == [rpcwire.JsonRpcError] * 3
        assert {outcome.code for outcome in outcomes} == {-32600}
        for events in (False, True):  # nested deeper than max_depth: -32700, as JSON or as the stream's answer
            with pytest.raises(rpcwire.JsonRpcError) as refused:
                client.call("echo", {"value": nested(200)}, on_progress=(lambda *e: None) if events else None)
            assert refused.value.code == -32700
        outcomes = client.batch([("add", [1, 2]), ("echo", {"value": nested(200)})])  # the whole body refused
        assert [getattr(outcome, "code", None) for outcome in outcomes] == [-32700, -32700]
        assert client.batch([("add", [1, 2]), ("add", [3, 4])]) == [3, 7]  # and the client goes on


def test_an_error_with_id_null_in_an_array_fails_the_entries_left_unanswered(impl: ModuleType) -> None:
    def respond(server: RawServer, conn: socket.socket, head: bytes, reader: BinaryIO) -> bool:
        first, _ = read_body(head, reader)
        refusal = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}}
        send_json(conn, [answer(first), refusal])
        return True

    with RawServer(respond) as server, impl.HttpClient(server.url(), timeout=BOUND) as client:
        ok, refused = client.batch([("echo", {"n": 1}), ("echo", {"n": 2})])
        assert ok == 1 and isinstance(refused, rpcwire.JsonRpcError) and refused.code == -32600


# --- max_message_bytes: an answer is read no further than the limit ---------------------------------------

LIMIT = 64 * 1024  # the clients' max_message_bytes in these tests
HUGE = 32 * 1024 * 1024  # what the server offers of an over-long answer
STOPPED_EARLY = 8 * 1024 * 1024  # what it may have sent before the client went: socket buffers, not the answer
_EVENTS = b"text/event-stream"


def over_long(framing: str) -> Respond:
    """Echoes ``echo``; answers any other method with ``HUGE`` bytes framed as ``framing`` (``length``,
    ``chunked``, ``until-close``; ``event-line``: one event whose data is one long line; ``event-lines``: one
    event of many short ``data:`` lines), sent in 64 KiB pieces into a small send buffer until the client goes.
    ``executed["sent"]`` counts the bytes it managed to send, ``executed["gone"]`` the answers it stopped."""

    def respond(server: RawServer, conn: socket.socket, head: bytes, reader: BinaryIO) -> bool:
        message = read_body(head, reader)
        if message["method"] == "echo":
            send_json(conn, answer(message))
            return True
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        events = framing.startswith("event")
        start = b'{"jsonrpc":"2.0","id":%d,"result":"' % message["id"]
        piece = b"x\ndata: x" * 8192 if framing == "event-lines" else b"x" * 65536
        body = [b"event: message\ndata: " + start if events else start, *[piece] * (HUGE // len(piece))]
        body.append(b'"}\n\n' if events else b'"}')
        heads = {
            "length": b"Content-Length: %d\r\n" % sum(map(len, body)),
            "chunked": b"Transfer-Encoding: chunked\r\n",
            "until-close": b"Connection: close\r\n",
        }
        content_type = _EVENTS if events else b"application/json"
        head_bytes = b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\n%s\r\n" % (
            content_type,
            heads.get(framing, heads["chunked"]),
        )
        chunked = b"chunked" in head_bytes
        sent = 0
        try:
            conn.sendall(head_bytes)
            for data in body:
                conn.sendall(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                sent += len(data)
            if chunked:
                conn.sendall(b"0\r\n\r\n")
        except OSError:
            pass
        with server.lock:
            server.executed["sent"] += sent
            server.executed["gone"] += sent < HUGE
            server.changed.notify_all()
        client_gone(conn, 10)
        return False

    return respond


@WITH_HTTPX
@pytest.mark.filterwarnings("ignore:coroutine method 'aclose':RuntimeWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("framing", ["length", "chunked", "until-close", "event-line", "event-lines"])
def test_an_answer_over_max_message_bytes_fails_the_call_as_it_arrives(
    impl: ModuleType, kind: str, framing: str
) -> None:
    """The call raises ``ConnectionError`` naming the limit once the answer (or the event) passes it, long
    before the server could send it all; the connection is dropped, and the next call works on a new one."""
    with (
        RawServer(over_long(framing)) as server,
        http_client(impl, kind, server.url(), timeout=BOUND, max_message_bytes=LIMIT) as client,
    ):
        assert client.call("echo", {"n": 1}) == 1
        events = framing.startswith("event")
        with pytest.raises(ConnectionError, match=r"max_message_bytes \(65536\)") as caught:
            client.call("huge", {"n": 2}, on_progress=(lambda *e: None) if events else None)
        assert type(caught.value) is rpcwire.ConnectionFailed
        assert server.wait(lambda: server.executed["gone"] == 1, BOUND)  # the client closed the connection
        assert server.executed["sent"] < STOPPED_EARLY
        assert client.call("echo", {"n": 3}) == 3
        assert server.accepted == 2  # the over-long answer's connection was not reused


def padded(id_: int, size: int) -> bytes:
    """An answer to ``id_`` of exactly ``size`` bytes (its result a string of x's)."""
    empty = compact({"jsonrpc": "2.0", "id": id_, "result": ""})
    return compact({"jsonrpc": "2.0", "id": id_, "result": "x" * (size - len(empty))})


def exact_sizes(server: RawServer, conn: socket.socket, head: bytes, reader: BinaryIO) -> bool:
    """Answers a call whose ``params["n"]`` is a size with an answer of that many bytes: as JSON, or as one
    event (its data on two lines, joined by the one ``\\n`` counted) after 40 progress events of 4 KiB."""
    message = read_body(head, reader)
    size = message["params"]["n"]
    if "_meta" not in message["params"]:
        body = padded(message["id"], size)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % size)
        conn.sendall(body)
        return True
    start_events(conn)
    for step in range(40):
        event = progress(message, step)
        event["params"]["message"] = "p" * 4096
        send_event(conn, event)
    body = padded(message["id"], size - 1)  # the "\n" that joins its two lines makes it size bytes
    split = body.index(b'"result"')
    data = b"event: message\r\ndata: %s\r\ndata:%s\r\n\r\n" % (body[:split], body[split:])
    conn.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
    return True


@WITH_HTTPX
def test_max_message_bytes_is_per_message(impl: ModuleType, kind: str) -> None:
    """An answer (or an event's data) of exactly ``max_message_bytes`` is read, one byte more fails the call;
    an event stream's many events together may be far longer (40 progress events of 4 KiB first)."""
    with (
        RawServer(exact_sizes) as server,
        http_client(impl, kind, server.url(), timeout=BOUND, max_message_bytes=LIMIT) as client,
    ):
        seen: list[Any] = []
        for events in (False, True):
            on_progress = (lambda *e: seen.append(e)) if events else None
            assert len(client.call("sized", {"n": LIMIT}, on_progress=on_progress)) > LIMIT - 64
            with pytest.raises(ConnectionError, match="max_message_bytes"):
                client.call("sized", {"n": LIMIT + 1}, on_progress=on_progress)
            assert len(client.call("sized", {"n": LIMIT}, on_progress=on_progress)) > LIMIT - 64
            assert len(seen) == (120 if events else 0)


def test_max_message_bytes_is_checked_as_the_stream_clients_check_it(impl: ModuleType) -> None:
    for client in (impl.HttpClient, impl.AsyncHttpClient):
        assert inspect.signature(client).parameters["max_message_bytes"].default == rpcwire.DEFAULT_MAX_MESSAGE_BYTES
        for bad, error in ((0, ValueError), (-1, ValueError), (1.5, TypeError), ("1", TypeError)):
            with pytest.raises(error) as raised:
                client("http://127.0.0.1:1/rpc", max_message_bytes=bad)
            with pytest.raises(error) as expected:
                impl.StdioTransport(io.BytesIO(), io.BytesIO(), max_message_bytes=bad)
            assert str(raised.value) == str(expected.value)
