"""The one walk of a message (``rpcwire._answer.each_request``) and the drivers over it.

Every serving path answers a message through ``each_request``: the sequential drivers (``answer_message``,
``answer_message_async``) and the engine's concurrent servers, whose answers arrive later and in any order.
These tests hold the walk to the rules the paths rely on, with messages as each core reads them.
"""

from __future__ import annotations

import asyncio
import io
import json
import random
import threading
from types import ModuleType
from typing import Any

from rpcwire import _answer
from rpcwire._types import Request
from support.messages import request as request_line


def request(method: str, id: Any = 1) -> bytes:
    return request_line(method, id=id).rstrip(b"\n")


BATCH = b"[" + b",".join([request("a", id=1), b"1", request("b", id=...), request("c", id=3), b"{}"]) + b"]"


def message_of(impl: ModuleType, line: bytes) -> Any:
    """``line`` as the core's server side reads it."""
    return impl.StdioTransport(io.BytesIO(line + b"\n"), io.BytesIO())._read_message()


def answer_of(request_: Request) -> bytes | None:
    return None if request_.is_notification else b'{"id":%b}' % request_.id_json


def test_a_refusal_is_written_at_once_and_holds_no_request(impl: ModuleType) -> None:
    written: list[bytes | None] = []
    assert list(_answer.each_request(message_of(impl, b"{bad"), written.append)) == []
    assert len(written) == 1
    assert json.loads(written[0] or b"")["error"]["code"] == -32700


def test_a_lone_request_is_written_as_it_is_delivered(impl: ModuleType) -> None:
    written: list[bytes | None] = []
    [(request_, deliver)] = list(_answer.each_request(message_of(impl, request("a", id=7)), written.append))
    assert request_.method == "a"
    assert written == []
    deliver(b"answer")
    assert written == [b"answer"]


def test_a_batch_is_one_line_in_the_entries_order_whatever_order_its_answers_come_in(impl: ModuleType) -> None:
    expected = _answer.answer_message(message_of(impl, BATCH), answer_of)
    assert expected is not None
    assert [entry.get("id") for entry in json.loads(expected)] == [1, None, 3, None]
    for seed in range(6):
        written: list[bytes | None] = []
        pairs = list(_answer.each_request(message_of(impl, BATCH), written.append))
        assert [request_.method for request_, _ in pairs] == ["a", "b", "c"]
        random.Random(seed).shuffle(pairs)
        for request_, deliver in pairs:
            assert written == []  # nothing before the last answer is in
            deliver(answer_of(request_))
        assert written == [expected]


def test_a_batch_with_no_answer_writes_nothing(impl: ModuleType) -> None:
    written: list[bytes | None] = []
    line = b"[" + request("a", id=...) + b"," + request("b", id=...) + b"]"
    for request_, deliver in _answer.each_request(message_of(impl, line), written.append):
        deliver(answer_of(request_))
    assert written == [None]
    assert _answer.answer_message(message_of(impl, line), answer_of) is None


def test_answers_delivered_from_many_threads_write_the_batch_once(impl: ModuleType) -> None:
    count = 200
    line = b"[" + b",".join(request("m", id=index) for index in range(count)) + b"]"
    for _ in range(5):
        written: list[bytes | None] = []
        pairs = list(_answer.each_request(message_of(impl, line), written.append))
        start = threading.Barrier(8)

        def deliver_some(share: list[tuple[Request, Any]], start: threading.Barrier = start) -> None:
            start.wait(timeout=10)
            for request_, deliver in share:
                deliver(answer_of(request_))

        threads = [threading.Thread(target=deliver_some, args=(pairs[index::8],)) for index in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10)
        assert len(written) == 1
        assert [entry["id"] for entry in json.loads(written[0] or b"")] == list(range(count))


def test_the_async_driver_answers_as_the_sequential_one(impl: ModuleType) -> None:
    lines = [b"{bad", request("a", id=1), request("a", id=...), BATCH, b"[1]", b"[]"]
    called: list[str] = []

    async def call_one(request_: Request) -> bytes | None:
        await asyncio.sleep(0)
        called.append(request_.method)
        return answer_of(request_)

    for line in lines:
        called.clear()
        got = asyncio.run(_answer.answer_message_async(message_of(impl, line), call_one))
        in_turn = called[:]
        assert got == _answer.answer_message(message_of(impl, line), answer_of), line
        assert in_turn == [m.method for m, _ in _answer.each_request(message_of(impl, line), lambda _: None)]


def test_call_async_awaits_what_is_awaitable_and_lets_a_cancellation_through(impl: ModuleType) -> None:
    request_ = message_of(impl, request("m", id=4))

    async def awaited(method: str, params: Any) -> Any:
        await asyncio.sleep(0)
        return "awaited"

    def plain(method: str, params: Any) -> Any:
        return "plain"

    async def cancelled(method: str, params: Any) -> Any:
        raise asyncio.CancelledError

    core = impl.StdioTransport
    assert (
        asyncio.run(_answer.call_async(core, request_, awaited, None)) == b'{"jsonrpc":"2.0","id":4,"result":"awaited"}'
    )
    assert asyncio.run(_answer.call_async(core, request_, plain, None)) == b'{"jsonrpc":"2.0","id":4,"result":"plain"}'
    try:
        asyncio.run(_answer.call_async(core, request_, cancelled, None))
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("a cancellation is not an answer")
