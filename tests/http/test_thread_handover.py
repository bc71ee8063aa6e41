"""Notifications a sync handler writes on a worker thread go out before its answer, also when the worker ends
before the loop chained its future (issue 32: on free-threaded CPython a short handler's thread often does, and
the answer overtook its notifications: plain JSON without the progress, or a WebSocket's answer before them).

The loop's default executor here runs each function to its end on a thread of its own before ``submit`` returns,
which is that timing every time; the handler still writes from a thread that is not the loop's. (Before CPython
3.14 asyncio handed such a result back through the loop's queue all the same, after the notifications: there these
pass with or without the fix; on 3.14 and 3.14t they fail without it.) Both cores (the
apps' core swapped for ``rpcwire.pure``'s in the ``pure`` case, as tests/http/test_http_accept.py does)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest
import rpcwire
import rpcwire.pure
from rpcwire import _websocket, current_request
from rpcwire.http import ASGIApp, _endpoint
from support.messages import compact, ok

WAIT = 30.0


@pytest.fixture(autouse=True)
def core(impl: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The apps answer with ``impl``'s core."""
    if impl is rpcwire.pure:
        monkeypatch.setattr(_endpoint, "_core", rpcwire.pure)
        monkeypatch.setattr(_endpoint, "dispatch", rpcwire.pure.dispatch)
        monkeypatch.setattr(_endpoint, "StdioTransport", rpcwire.pure.StdioTransport)
        monkeypatch.setattr(_websocket, "_core", rpcwire.pure)
        monkeypatch.setattr(_websocket, "StdioTransport", rpcwire.pure.StdioTransport)
    yield impl


class FinishedFirst(concurrent.futures.ThreadPoolExecutor):
    """Runs each function on a new thread and waits for it to end before ``submit`` returns its future."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # handed to the awaiting task, as the pool's worker does
                future.set_exception(exc)

        thread = threading.Thread(target=run, name="finished-first")
        thread.start()
        thread.join(WAIT)
        return future


def counting() -> int:
    current_request().progress(1)
    current_request().progress(2)
    return 2


async def async_add(a: int, b: int) -> int:
    return a + b


def run_finished_first(main: Callable[[], Any]) -> Any:
    async def with_executor() -> Any:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(FinishedFirst())
        return await asyncio.wait_for(main(), WAIT)

    return asyncio.run(with_executor())


def progress(value: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": value}}


@pytest.mark.parametrize(
    ("functions", "inline"),
    [
        ({"count": counting}, False),  # on a worker thread (asyncio's executor)
        ({"count": counting}, True),  # run_sync_inline: a body that asks for progress still goes to a worker
        ({"count": counting, "add": async_add}, False),  # a sync function of a registry with async ones
    ],
    ids=["thread", "inline", "mixed"],
)
def test_progress_from_a_worker_that_ended_first_is_streamed_before_the_answer(
    functions: dict[str, Callable[..., Any]], inline: bool
) -> None:
    app = ASGIApp(rpcwire.methods(functions), run_sync_inline=inline)
    body = compact({"jsonrpc": "2.0", "method": "count", "params": {"_meta": {"progressToken": "t"}}, "id": 1})
    sent: list[dict[str, Any]] = []
    delivered = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if not delivered.is_set():
            delivered.set()
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(WAIT)  # the client stays
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "scheme": "http",
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"accept", b"application/json, text/event-stream"),
        ],
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 5000),
    }
    run_finished_first(lambda: app(scope, receive, send))
    start, *bodies = sent
    assert dict(start["headers"])[b"content-type"] == b"text/event-stream"
    events = b"".join(message["body"] for message in bodies).split(b"\n\n")
    assert [json.loads(event.partition(b"data: ")[2]) for event in events if event] == [
        progress(1),
        progress(2),
        ok(1, 2),
    ]


def test_a_websocket_answer_comes_after_the_notifications_of_a_worker_that_ended_first() -> None:
    def hello(n: int) -> int:
        current_request().notify("hello", {"n": n})
        return n

    app = ASGIApp(rpcwire.methods({"hello": hello}), websocket=True)
    calls = 5

    async def main() -> list[Any]:
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        texts: list[Any] = []
        answered = asyncio.Event()

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "websocket.send":
                texts.append(json.loads(message["text"]))
                if "id" in texts[-1] and texts[-1]["id"] == calls - 1:
                    answered.set()

        scope = {
            "type": "websocket",
            "path": "/",
            "scheme": "ws",
            "headers": [(b"host", b"127.0.0.1:8000")],
            "server": ("127.0.0.1", 8000),
            "client": ("127.0.0.1", 5000),
            "subprotocols": [],
        }
        await inbox.put({"type": "websocket.connect"})
        for n in range(calls):  # one at a time (max_concurrency's default lets them overlap otherwise)
            await inbox.put({"type": "websocket.receive", "text": json.dumps(rpc(n))})
        served = asyncio.ensure_future(app(scope, inbox.get, send))
        await answered.wait()
        await inbox.put({"type": "websocket.disconnect", "code": 1000})
        await served
        return texts

    def rpc(n: int) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "method": "hello", "params": {"n": n}, "id": n}

    texts = run_finished_first(main)
    for n in range(calls):  # the executor runs one call at a time: each notification, then its answer
        notification = {"jsonrpc": "2.0", "method": "hello", "params": {"n": n}}
        assert texts.index(notification) < texts.index(ok(n, n)), texts
