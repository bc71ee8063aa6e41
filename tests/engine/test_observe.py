"""``rpcwire.observe``: the hooks see every handler call, with its id, duration and error code, in every serving
mode (the sequential loop of each core, threads, asyncio with sync and async handlers, ``dispatch``, the WSGI
and ASGI apps), and nothing the handler is not called for (a -32700, a -32600)."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from types import ModuleType
from typing import Any

import pytest
import rpcwire
from rpcwire import ERR_INTERNAL, ERR_INVALID_PARAMS, ERR_METHOD_NOT_FOUND, CallInfo, current_request
from rpcwire.http import ASGIApp, WSGIApp
from support.messages import answers, request
from support.serving import MODES, serve_in_mode, transport_for

# One of each outcome, a notification, and two messages no handler is called for (not JSON, not a request).
INPUT = b"".join(
    [
        request("add", [1, 2], id=1),
        request("missing", id=2),
        request("add", ["x"], id="three"),
        request("fail", id=4),
        request("add", [5, 5], id=...),
        b"{not json\n",
        b'{"jsonrpc":"2.0","id":6}\n',
    ]
)
EXPECTED = [  # (method, id, error code) of each call, as on_response sees it
    ("add", 1, None),
    ("missing", 2, ERR_METHOD_NOT_FOUND),
    ("add", "three", ERR_INVALID_PARAMS),
    ("fail", 4, ERR_INTERNAL),
    ("add", None, None),
]


def add(a: int, b: int = 0) -> int:
    if not isinstance(a, int):
        from rpcwire import InvalidParams

        raise InvalidParams("a is not an int")
    return a + b


def fail() -> None:
    raise ValueError("broken")


async def add_async(a: int, b: int = 0) -> int:
    await asyncio.sleep(0)
    return add(a, b)


class Recorder:
    def __init__(self) -> None:
        self.started: list[CallInfo] = []
        self.finished: list[CallInfo] = []

    def on_request(self, info: CallInfo) -> None:
        assert info.duration is None and info.error_code is None
        assert info.context is current_request()  # the hook runs inside the call
        self.started.append(info)

    def on_response(self, info: CallInfo) -> None:
        assert info.context is current_request()
        self.finished.append(info)

    def check(self, expected: list[tuple[str, Any, int | None]] = EXPECTED) -> None:
        finished = sorted(self.finished, key=lambda info: str(info.id))  # concurrent modes answer in any order
        want = sorted(expected, key=lambda row: str(row[1]))
        assert [(info.method, info.id, info.error_code) for info in finished] == want
        assert sorted(str(info.id) for info in self.started) == sorted(str(row[1]) for row in expected)
        for info in self.finished:
            assert isinstance(info.duration, float) and info.duration >= 0
            assert (info.exception is None) == (info.error_code is None)
            assert info.context is not None and info.context.id == info.id


def _handler(impl: ModuleType, recorder: Recorder, *, is_async: bool = False) -> Any:
    functions = {"add": add_async if is_async else add, "fail": fail}
    return impl.observe(impl.methods(functions), on_request=recorder.on_request, on_response=recorder.on_response)


def test_the_sequential_loop_of_each_core(impl: ModuleType) -> None:
    recorder = Recorder()
    transport, out = transport_for(impl, INPUT)
    impl.serve(_handler(impl, recorder), transport)
    recorder.check()
    written = answers(out.getvalue())
    assert [answer.get("error", {}).get("code") for answer in written] == [None, -32601, -32602, -32603, -32700, -32600]


@pytest.mark.parametrize("mode", MODES)
def test_the_concurrent_engines(impl: ModuleType, mode: str) -> None:
    recorder = Recorder()
    transport, out = transport_for(impl, INPUT)
    serve_in_mode(
        mode, impl, _handler(impl, recorder), transport, async_handler=_handler(impl, recorder, is_async=True)
    )
    recorder.check()
    assert len(answers(out.getvalue())) == 6


def test_serve_with_an_async_handler_and_serve_async(impl: ModuleType) -> None:
    recorder = Recorder()
    handler = _handler(impl, recorder, is_async=True)
    assert handler.rpcwire_async is True  # the engine runs it on an event loop, as the registry itself
    transport, _ = transport_for(impl, INPUT)
    impl.serve(handler, transport)
    recorder.check()


def test_a_registry_that_becomes_async_is_followed(impl: ModuleType) -> None:
    registry = impl.methods({"add": add})
    handler = impl.observe(registry)
    assert handler.rpcwire_async is False
    registry.add(add_async, "later")
    assert handler.rpcwire_async is True


def test_dispatch_has_no_context_but_is_observed(impl: ModuleType) -> None:
    recorder: list[CallInfo] = []
    impl.dispatch(request("add", [1, 2], id=1), impl.observe(impl.methods({"add": add}), on_response=recorder.append))
    ((info,),) = [recorder]
    assert (info.method, info.error_code) == ("add", None)


BATCH = b"[" + b",".join(INPUT.splitlines()[:5]) + b"]"  # the calls alone: a body is one JSON text


def _asgi(handler: Any) -> list[dict[str, Any]]:
    """What ``ASGIApp(handler)`` sends for a POST of ``BATCH``."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": BATCH}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "method": "POST",
        "path": "/",
        "headers": [(b"content-type", b"application/json"), (b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    asyncio.run(ASGIApp(handler)(scope, receive, send))
    return sent


def test_the_wsgi_app() -> None:
    recorder = Recorder()
    environ = {
        "REQUEST_METHOD": "POST",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(BATCH)),
        "HTTP_HOST": "127.0.0.1",
        "REMOTE_ADDR": "127.0.0.1",
        "wsgi.input": io.BytesIO(BATCH),
    }
    body = b"".join(WSGIApp(_handler(rpcwire, recorder))(environ, lambda status, headers: None))
    assert len(answers(body + b"\n")[0]) == 4
    recorder.check()
    assert all(info.context is not None and info.context.http is not None for info in recorder.finished)


@pytest.mark.parametrize("is_async", [False, True])
def test_the_asgi_app(is_async: bool) -> None:
    recorder = Recorder()
    sent = _asgi(_handler(rpcwire, recorder, is_async=is_async))
    assert sent[0]["status"] == 200
    assert len(json.loads(sent[1]["body"])) == 4
    recorder.check()


def test_a_hook_that_raises_is_logged_and_the_call_goes_on(impl: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    def broken(info: CallInfo) -> None:
        raise RuntimeError("hook bug")

    handler = impl.observe(impl.methods({"add": add}), on_request=broken, on_response=broken)
    transport, out = transport_for(impl, request("add", [1, 2], id=1))
    with caplog.at_level(logging.ERROR, logger="rpcwire"):
        impl.serve(handler, transport)
    assert answers(out.getvalue()) == [{"jsonrpc": "2.0", "id": 1, "result": 3}]
    assert [record.getMessage() for record in caplog.records] == ["a hook before add failed", "a hook after add failed"]
    caplog.clear()
    handler = impl.observe(impl.methods({"add": add}), on_response=broken)
    transport, out = transport_for(impl, request("add", [1, 2], id=1))
    with caplog.at_level(logging.ERROR, logger="rpcwire"):
        impl.serve(handler, transport)
    assert answers(out.getvalue()) == [{"jsonrpc": "2.0", "id": 1, "result": 3}]
    assert [record.getMessage() for record in caplog.records] == ["a hook after add failed"]


def test_a_cancelled_async_call_is_reported_as_cancelled(impl: ModuleType) -> None:
    seen: list[CallInfo] = []
    started = asyncio.Event()

    async def slow() -> None:
        started.set()
        await asyncio.sleep(30)

    async def main() -> None:
        handler = impl.observe(impl.methods({"slow": slow}), on_response=seen.append)
        task = asyncio.ensure_future(handler("slow", None))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert [(info.method, info.error_code) for info in seen] == [("slow", -32800)]


def test_observe_refuses_what_is_not_a_handler(impl: ModuleType) -> None:
    with pytest.raises(TypeError, match="callable"):
        impl.observe("handler")


class _Unreadable(rpcwire.JsonRpcError):
    """A ``JsonRpcError`` whose ``code``, ``message`` or ``data`` (``broken``) raises when read, or is of a type an
    answer cannot carry (``code`` a ``bool`` or a ``str``, ``message`` not a ``str``): answered -32603."""

    code = -32001
    broken = ""  # nothing broken while JsonRpcError.__init__ runs

    def __init__(self, broken: str) -> None:
        super().__init__("readable", data=1)
        self.broken = broken

    def __getattribute__(self, name: str) -> Any:
        broken = object.__getattribute__(self, "broken")
        if name == broken:
            raise RuntimeError(f"no {name}")
        if (name, broken) in {("code", "bool"), ("code", "str"), ("message", "bytes")}:
            return {"bool": True, "str": "-32001", "bytes": b"readable"}[broken]
        return object.__getattribute__(self, name)

    def __str__(self) -> str:
        return "unreadable"


UNREADABLE = ["code", "message", "data", "bool", "str", "bytes"]


def _raising(broken: str) -> Any:
    def handler(method: str, params: Any) -> Any:
        raise _Unreadable(broken)

    return handler


@pytest.mark.parametrize("broken", UNREADABLE)
def test_an_error_that_cannot_be_read_is_answered_as_without_hooks(impl: ModuleType, broken: str) -> None:
    """A hook never changes what is answered, and on_response still sees the call with the answer's code."""
    line = request("m", id=1)
    plain = impl.dispatch(line, _raising(broken))
    assert json.loads(plain)["error"]["code"] == ERR_INTERNAL
    assert json.loads(plain)["error"]["data"] == {"exception": "_Unreadable", "detail": "unreadable"}
    seen: list[CallInfo] = []
    observed = impl.observe(_raising(broken), on_response=seen.append)
    assert impl.dispatch(line, observed) == plain
    for mode in ["sequential", *MODES]:
        transport, out = transport_for(impl, line)
        if mode == "sequential":
            impl.serve(observed, transport)
        else:
            serve_in_mode(mode, impl, observed, transport)
        assert out.getvalue() == plain + b"\n", mode

    async def async_handler(method: str, params: Any) -> Any:
        await asyncio.sleep(0)
        raise _Unreadable(broken)

    transport, out = transport_for(impl, line)
    impl.serve(impl.observe(async_handler, on_response=seen.append), transport)  # awaited inside the hooks
    assert out.getvalue() == plain + b"\n"
    assert [(info.method, info.error_code, type(info.exception)) for info in seen] == [
        ("m", ERR_INTERNAL, _Unreadable)
    ] * 6


def test_on_response_runs_when_on_request_raised(impl: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    def broken(info: CallInfo) -> None:
        raise RuntimeError("hook bug")

    seen: list[CallInfo] = []
    handler = impl.observe(impl.methods({"add": add}), on_request=broken, on_response=seen.append)
    with caplog.at_level(logging.ERROR, logger="rpcwire"):
        assert json.loads(impl.dispatch(request("add", [1, 2], id=1), handler))["result"] == 3
    assert [record.getMessage() for record in caplog.records] == ["a hook before add failed"]
    assert [(info.method, info.error_code) for info in seen] == [("add", None)]
