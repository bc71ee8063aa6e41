"""MCP's ``Accept: application/json, text/event-stream`` (issue 33): a call that writes no notification is answered
where and as the plain path answers it (``application/json``, the handler inline, on the request's task or on the
one worker thread, no task or thread more); the first notification written before the answer switches the
response to ``text/event-stream``. Each app and handler mode, on both cores (the apps' core swapped for
``rpcwire.pure``'s in the ``pure`` case). The costs side by side: ``bench/accept_bench.py``."""

from __future__ import annotations

import asyncio
import functools
import io
import json
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest
import rpcwire
import rpcwire.pure
from rpcwire import current_request
from rpcwire.http import ASGIApp, WSGIApp, _endpoint
from support.messages import compact, ok

MCP_ACCEPT = "application/json, text/event-stream"
MODES = ["wsgi", "asgi-thread", "asgi-inline", "asgi-async"]


@pytest.fixture(autouse=True)
def core(impl: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The apps answer with ``impl``'s core: its reader of a body, its ``dispatch``, its encoder."""
    if impl is rpcwire.pure:
        monkeypatch.setattr(_endpoint, "_core", rpcwire.pure)
        monkeypatch.setattr(_endpoint, "dispatch", rpcwire.pure.dispatch)
        monkeypatch.setattr(_endpoint, "StdioTransport", rpcwire.pure.StdioTransport)
    yield impl


class Reply:
    def __init__(self, status: int, headers: dict[str, str], chunks: list[bytes]) -> None:
        self.status, self.headers, self.chunks = status, headers, chunks
        self.body = b"".join(chunks)

    def events(self) -> list[Any]:
        assert self.headers["content-type"] == "text/event-stream" and "content-length" not in self.headers
        assert self.body.endswith(b"\n\n"), self.body
        decoded = []
        for event in self.body[:-2].split(b"\n\n"):
            kind, data = event.split(b"\n")
            assert kind == b"event: message" and data.startswith(b"data: "), event
            decoded.append(json.loads(data[6:]))
        return decoded


def call_wsgi(app: WSGIApp, body: bytes, accept: str) -> Reply:
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "POST",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": "127.0.0.1:8000",
        "HTTP_ACCEPT": accept,
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http",
    }
    started: list[tuple[str, list[tuple[str, str]]]] = []
    chunks = list(app(environ, lambda status, headers, exc_info=None: started.append((status, headers))))
    (status, headers), *_ = started
    return Reply(int(status.split()[0]), {name.lower(): value for name, value in headers}, chunks)


def scope(body: bytes, accept: str) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "scheme": "http",
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"accept", accept.encode()),
        ],
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 5000),
    }


async def call_asgi_async(app: ASGIApp, body: bytes, accept: str) -> Reply:
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(30)  # the client stays
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await asyncio.wait_for(app(scope(body, accept), receive, send), 30)
    start, *bodies = sent
    headers = {name.decode(): value.decode() for name, value in start["headers"]}
    assert [message.get("more_body", False) for message in bodies][-1] is False
    return Reply(start["status"], headers, [message["body"] for message in bodies if message["body"]])


def call(mode: str, handler: Any, body: bytes, accept: str = MCP_ACCEPT) -> Reply:
    if mode == "wsgi":
        return call_wsgi(WSGIApp(handler), body, accept)
    app = ASGIApp(handler, run_sync_inline=mode == "asgi-inline")
    return asyncio.run(call_asgi_async(app, body, accept))


def registry(mode: str, functions: dict[str, Callable[..., Any]]) -> Any:
    """``functions`` as the mode's handler: async functions for ``asgi-async``."""
    if mode != "asgi-async":
        return rpcwire.methods(functions)

    def as_async(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)  # its signature, which methods reads
        async def run(*args: Any, **kwargs: Any) -> Any:
            return function(*args, **kwargs)

        return run

    return rpcwire.methods({name: as_async(function) for name, function in functions.items()})


def add(a: int, b: int) -> int:
    return a + b


ADD = compact({"jsonrpc": "2.0", "method": "add", "params": [10, 15], "id": 1})


def progress_call(method: str, id: Any = 1) -> bytes:
    return compact({"jsonrpc": "2.0", "method": method, "params": {"_meta": {"progressToken": "t"}}, "id": id})


def progress(done: float) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": done}}


# --- no notification: the plain answer, where the plain path answers ----------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_no_notification_is_answered_as_with_accept_json(mode: str) -> None:
    handler = registry(mode, {"add": add})
    for accept in (MCP_ACCEPT, "text/event-stream", "application/json"):
        reply = call(mode, handler, ADD, accept)
        assert (reply.status, reply.headers["content-type"]) == (200, "application/json"), accept
        assert reply.headers["content-length"] == str(len(reply.body)) and json.loads(reply.body) == ok(1, 25)
        assert len(reply.chunks) == 1  # one body, not a stream ended by an empty message
    notification = compact({"jsonrpc": "2.0", "method": "add", "params": [1, 2]})
    assert (call(mode, handler, notification).status, call(mode, handler, notification).body) == (204, b"")


@pytest.mark.parametrize("mode", MODES)
def test_a_call_that_writes_no_notification_runs_where_the_plain_path_runs_it(mode: str) -> None:
    """Inline on the caller's thread (WSGI, run_sync_inline), on the request's own task (async), on a worker
    thread with no other task (sync): never a thread or task of its own for a stream that may not come. The
    count of tasks on the loop while the handler runs bounds the work: the request's own only."""
    seen: list[tuple[int, int | None]] = []
    loop_of: list[asyncio.AbstractEventLoop] = []

    def where() -> str:
        loop: asyncio.AbstractEventLoop | None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a worker thread
            loop = loop_of[0] if loop_of else None
        seen.append((threading.get_ident(), None if loop is None else len(asyncio.all_tasks(loop))))
        return "here"

    handler = registry(mode, {"where": where})
    body = compact({"jsonrpc": "2.0", "method": "where", "id": 1})
    if mode == "wsgi":
        reply = call_wsgi(WSGIApp(handler), body, MCP_ACCEPT)
        assert seen == [(threading.get_ident(), None)]
    else:

        async def main() -> Reply:
            loop_of.append(asyncio.get_running_loop())
            return await call_asgi_async(ASGIApp(handler, run_sync_inline=mode == "asgi-inline"), body, MCP_ACCEPT)

        reply = asyncio.run(main())
        ((thread, tasks),) = seen
        # This test's main and, before 3.12, wait_for's task, which runs the app: nothing else.
        assert tasks <= 2
        assert (thread == threading.get_ident()) is (mode != "asgi-thread")
    assert (reply.headers["content-type"], json.loads(reply.body)) == ("application/json", ok(1, "here"))


# --- a notification first: the stream starts there --------------------------------------------------------------


def counting() -> int:
    current_request().progress(1)
    current_request().progress(2)
    return 2


@pytest.mark.parametrize("mode", MODES)
def test_progress_switches_to_events_then_the_answer(mode: str) -> None:
    reply = call(mode, registry(mode, {"count": counting, "add": add}), progress_call("count"))
    assert reply.status == 200 and reply.headers["cache-control"] == "no-cache"
    assert reply.events() == [progress(1), progress(2), ok(1, 2)]
    batch = b"[" + ADD + b"," + progress_call("count", id=2) + b"]"
    reply = call(mode, registry(mode, {"count": counting, "add": add}), batch)
    assert reply.events() == [progress(1), progress(2), [ok(1, 25), ok(2, 2)]]


def announcing() -> str:
    current_request().notify("hi", {"n": 1})
    return "said"


@pytest.mark.parametrize("mode", MODES)
def test_a_notification_without_a_progress_token_switches_too(mode: str) -> None:
    """A body that asks for no progress runs where the plain path runs it; its notify() still switches to events
    (sent when the handler returns, on the caller's thread, where nothing could go out while it ran)."""
    threads: list[int] = []

    def announce() -> str:
        threads.append(threading.get_ident())
        return announcing()

    reply = call(
        mode, registry(mode, {"announce": announce}), compact({"jsonrpc": "2.0", "method": "announce", "id": 1})
    )
    assert reply.events() == [{"jsonrpc": "2.0", "method": "hi", "params": {"n": 1}}, ok(1, "said")]
    if mode in {"wsgi", "asgi-inline", "asgi-async"}:
        assert threads == [threading.get_ident()]
    notification_only = compact({"jsonrpc": "2.0", "method": "announce"})
    reply = call(mode, registry(mode, {"announce": announce}), notification_only)
    assert (reply.status, reply.events()) == (200, [{"jsonrpc": "2.0", "method": "hi", "params": {"n": 1}}])


def test_run_sync_inline_and_a_progress_token_still_stream_while_the_handler_runs() -> None:
    """A body that asks for progress is answered on a worker thread even with run_sync_inline (the loop could not
    send its events while the handler held it): the first event reaches the client before the handler goes on."""
    first_sent = threading.Event()

    def waits() -> str:
        current_request().progress(1)
        assert first_sent.wait(30)  # inline on the loop, this would wait for ever
        current_request().progress(2)
        return "done"

    sent: list[dict[str, Any]] = []

    async def main() -> None:
        body = progress_call("waits")
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body}
            await asyncio.sleep(30)
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)
            if message["type"] == "http.response.body":
                first_sent.set()

        app = ASGIApp(rpcwire.methods({"waits": waits}), run_sync_inline=True)
        await asyncio.wait_for(app(scope(body, MCP_ACCEPT), receive, send), 30)

    asyncio.run(main())
    start, *bodies = sent
    assert (b"content-type", b"text/event-stream") in start["headers"]
    assert [message.get("more_body") for message in bodies] == [True, True, False]


@pytest.mark.parametrize("mode", ["asgi-thread", "asgi-async"])
def test_a_client_gone_mid_stream_cancels_the_call_and_the_rest_of_its_batch(mode: str) -> None:
    seen: list[str] = []

    def ticks() -> str:
        context = current_request()
        for tick in range(3000):  # 30 s at most
            context.progress(tick)
            if context.cancelled:
                seen.append("cancelled")
                return "cancelled"
            threading.Event().wait(0.01)
        return "never cancelled"

    async def ticks_async() -> str:
        context = current_request()
        try:
            for tick in range(3000):
                context.progress(tick)
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            seen.append(f"cancelled, context.cancelled={context.cancelled}")
            raise
        return "never cancelled"

    def after() -> None:
        seen.append("after ran")

    handler = rpcwire.methods({"ticks": ticks_async if mode == "asgi-async" else ticks, "after": after})
    body = b"[" + progress_call("ticks") + b"," + compact({"jsonrpc": "2.0", "method": "after", "id": 2}) + b"]"
    sent: list[dict[str, Any]] = []
    cancelling: list[int] = []

    async def main() -> None:
        two_events = asyncio.Event()
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body}
            await two_events.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)
            if len(sent) == 3:  # the head and two events
                two_events.set()

        await ASGIApp(handler)(scope(body, MCP_ACCEPT), receive, send)
        task = asyncio.current_task()
        assert task is not None
        cancelling.append(task.cancelling() if hasattr(task, "cancelling") else 0)  # 3.11+
        await asyncio.sleep(0)  # and no cancellation left pending on this task

    asyncio.run(asyncio.wait_for(main(), 30))
    expected = "cancelled, context.cancelled=True" if mode == "asgi-async" else "cancelled"
    assert seen == [expected]  # and "after" never ran
    assert cancelling == [0]
    assert sent[0]["status"] == 200 and all(message.get("more_body") for message in sent[1:])


@pytest.mark.parametrize("mode", ["wsgi", "asgi-inline"])
def test_a_body_that_asks_for_log_messages_is_answered_on_a_thread_that_streams(mode: str) -> None:
    """MCP's log messages go to a request that names a level (``_meta``'s ``io.modelcontextprotocol/logLevel``):
    such a body is answered as one with a progress token is, on a worker thread, its events sent as they come."""
    threads: list[int] = []

    def logs() -> str:
        threads.append(threading.get_ident())
        return announcing()

    meta = {"io.modelcontextprotocol/logLevel": "info"}
    body = compact({"jsonrpc": "2.0", "method": "logs", "params": {"_meta": meta}, "id": 1})
    reply = call(mode, rpcwire.methods({"logs": lambda _meta: logs()}), body)
    assert reply.events() == [{"jsonrpc": "2.0", "method": "hi", "params": {"n": 1}}, ok(1, "said")]
    assert len(threads) == 1 and threads[0] != threading.get_ident()
