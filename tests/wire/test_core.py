"""The core an engine above the transport builds on: ``_read_message``, ``_answer_*``, ``_write_line``.

An engine that reads with ``_read_message``, calls the handler itself, builds each answer with
``_answer_result``/``_answer_error`` and writes with ``_write_line`` must write exactly the bytes
``serve`` writes. ``CORES`` lists the modules under test (each gives ``StdioTransport`` and
``parse_request``); only the native module for now.
"""

from __future__ import annotations

import io
import sys
from enum import IntEnum
from types import ModuleType
from typing import Any

import pytest
import rpcwire
from rpcwire import InvalidParams, JsonRpcError, MethodNotFound, Request
from support.messages import compact
from support.serving import served
from support.streams import RecordingOutput

CORES = {"native": rpcwire, "pure": rpcwire.pure}

PARSE_ERROR = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}'
INVALID_REQUEST = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}'


@pytest.fixture(params=list(CORES.values()), ids=list(CORES))
def core(request: pytest.FixtureRequest) -> ModuleType:
    """The module whose ``StdioTransport`` is under test."""
    return request.param


class AppError(JsonRpcError):
    code = -32001
    default_message = "Application error"


class UnreadableError(JsonRpcError):
    @property  # type: ignore[misc]
    def code(self) -> int:  # type: ignore[override]
        raise RuntimeError("no code")


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")


class Interrupting(list):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        raise KeyboardInterrupt


def handler(method: str, params: Any) -> Any:
    """Echoes; other methods raise or return what cannot be encoded."""
    if method == "missing":
        raise MethodNotFound()
    if method == "boom":
        raise ValueError("boom")
    if method == "app":
        raise AppError("nope", data={"why": params})
    if method == "bad-params":
        raise InvalidParams(data=object())
    if method == "unreadable":
        raise UnreadableError()
    if method == "unprintable":
        raise Unprintable()
    if method == "set":
        return {1, 2}
    if method == "nan":
        return float("nan")
    return params


def engine(core: ModuleType, data: bytes, **limits: Any) -> bytes:
    """Serve ``data`` as an engine above the core would, one answer per message, and return what was written."""
    out = io.BytesIO()
    transport = core.StdioTransport(io.BytesIO(data), out, **limits)

    def answer(request: Request) -> bytes | None:
        try:
            result = handler(request.method, request.params)
        except Exception as exc:
            return None if request.is_notification else transport._answer_error(request.id_json, exc)
        return None if request.is_notification else transport._answer_result(request.id_json, result)

    while (message := transport._read_message()) is not None:
        if isinstance(message, bytes):
            transport._write_line(message)
        elif isinstance(message, Request):
            if (line := answer(message)) is not None:
                transport._write_line(line)
        else:
            answers = [item if isinstance(item, bytes) else answer(item) for item in message]
            answers = [item for item in answers if item is not None]
            if answers:
                transport._write_line(b"[" + b",".join(answers) + b"]")
    return out.getvalue()


def req(id_text: str, method: str = "echo", params: str = "[1]") -> bytes:
    return b'{"jsonrpc":"2.0","method":"%s","params":%s,"id":%s}' % (method.encode(), params.encode(), id_text.encode())


def note(method: str = "echo", params: str = '{"a":1}') -> bytes:
    return b'{"jsonrpc":"2.0","method":"%s","params":%s}' % (method.encode(), params.encode())


IDS = [
    "1",
    "1e3",
    "-0",
    "1.50",
    "1E+03",
    "123456789012345678901234567890",
    "null",
    '"plain"',
    r'"a\"b\\c\u00e9\n\ud800"',
]
METHODS = ["echo", "missing", "boom", "app", "bad-params", "unreadable", "unprintable", "set", "nan"]

STREAM = b"\n".join(
    [
        *(req(id_text) for id_text in IDS),
        *(req("7", method) for method in METHODS),
        *(note(method) for method in METHODS),
        b"",
        b"  \t \r",
        req('"crlf"') + b"\r",
        b"{bad",
        b"\xff\xfe",
        b"[1,2",
        b'{"jsonrpc":"2.0","method":"echo","params":[' + b"1" * 5000 + b"]}",
        b'{"jsonrpc":"2.0","method":"echo","params":[' + b"1" * 5000 + b'],"id":9}',
        b'{"jsonrpc":"1.0","method":"echo","id":1e3}',
        b'{"jsonrpc":"2.0","method":1,"id":"x"}',
        b'{"jsonrpc":"2.0","method":"m","params":null,"id":-0}',
        b'{"jsonrpc":"2.0","method":"m","id":true}',
        b"42",
        b"[]",
        b"[" + b",".join([req("1"), note(), b"1", req('"\\u00e9"', "boom"), b'{"id":1.50}']) + b"]",
        b"[" + b",".join([note(), note("boom")]) + b"]",
        b"[" + b",".join([req(str(i)) for i in range(4)]) + b"]",
        b"[" + b",".join([req(str(i)) for i in range(3)]) + b"]",
        b'{"jsonrpc":"2.0","method":"echo","params":["' + b"x" * 300 + b'"],"id":1}',
        b"   " + b"y" * 300,
        req("8", params=r'{"k\u00e9y":["\ud83d\ude00",1.5e300,-0.0,true,null]}'),
        req("10"),
    ]
)


@pytest.mark.parametrize("cut", [False, True], ids=["newline-at-end", "no-newline-at-end"])
def test_an_engine_above_the_core_writes_what_serve_writes(core: ModuleType, cut: bool) -> None:
    data = STREAM if cut else STREAM + b"\n"
    limits = {"max_batch": 3, "max_message_bytes": 200}
    expected = served(core, data, handler, **limits)
    assert engine(core, data, **limits) == expected
    assert expected.count(b"\n") == 37  # one answer per line that is owed one


@pytest.mark.parametrize("id_text", IDS)
def test_each_id_comes_back_as_written(core: ModuleType, id_text: str) -> None:
    assert engine(core, req(id_text) + b"\n") == served(core, req(id_text) + b"\n", handler)


def test_read_message_classifies_each_line(core: ModuleType) -> None:
    data = b"\n".join(
        [
            b"",
            b" \t",
            req("1e3", params='{"a":[1,"b"]}'),
            note(),
            b"{bad",
            b'{"jsonrpc":"2.0","method":1,"id":"x"}',
            b"[]",
            b"[" + b",".join([req('"\\u00e9"'), b"1", note()]) + b"]",
        ]
    )
    transport = core.StdioTransport(io.BytesIO(data), io.BytesIO())
    first = transport._read_message()
    assert first == Request("echo", {"a": [1, "b"]}, 1000.0, False)
    assert first.id_json == b"1e3"
    second = transport._read_message()
    assert second == Request("echo", {"a": 1}, None, True)
    assert second.id_json is None
    assert transport._read_message() == PARSE_ERROR
    assert (
        transport._read_message() == b'{"jsonrpc":"2.0","id":"x","error":{"code":-32600,"message":"Invalid Request"}}'
    )
    assert transport._read_message() == INVALID_REQUEST
    batch = transport._read_message()
    assert isinstance(batch, list)
    assert batch == [Request("echo", [1], "\u00e9", False), INVALID_REQUEST, Request("echo", {"a": 1}, None, True)]
    assert batch[0].id_json == '"\u00e9"'.encode()
    assert transport._read_message() is None
    assert transport._read_message() is None


def test_over_long_lines_and_over_long_batches_are_answered_by_the_transport(core: ModuleType) -> None:
    data = b'[{"a":"' + b"x" * 100 + b'"}]\n' + b"z" * 100 + b"\n[1,2,3]\n"
    transport = core.StdioTransport(io.BytesIO(data), io.BytesIO(), max_message_bytes=50, max_batch=2)
    assert transport._read_message() == INVALID_REQUEST
    assert transport._read_message() == PARSE_ERROR
    assert transport._read_message() == INVALID_REQUEST
    assert transport._read_message() is None


def test_read_message_logs_as_serve_does(core: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    data = b'{bad\n[]\n{"jsonrpc":"2.0","method":1}\n[1]\n' + b"x" * 20 + b"\n[1,2,3]\n"
    limits = {"max_message_bytes": 10, "max_batch": 2}
    with caplog.at_level("DEBUG", logger="rpcwire"):
        served(core, data, handler, **limits)
        by_serve = [record.getMessage() for record in caplog.records]
        caplog.clear()
        engine(core, data, **limits)
        by_engine = [record.getMessage() for record in caplog.records]
    assert by_engine == by_serve
    assert len(by_serve) == 6


def test_end_of_input(core: ModuleType) -> None:
    assert core.StdioTransport(io.BytesIO(b""), io.BytesIO())._read_message() is None
    assert core.StdioTransport(io.BytesIO(b"\n  \n\r\n\t"), io.BytesIO())._read_message() is None


ID = b'"\xc3\xa9"'


@pytest.mark.parametrize(
    ("exception", "error"),
    [
        (MethodNotFound(), b'{"code":-32601,"message":"Method not found"}'),
        (InvalidParams("bad", data=[1, None]), b'{"code":-32602,"message":"bad","data":[1,null]}'),
        (AppError(data="d"), b'{"code":-32001,"message":"Application error","data":"d"}'),
        (JsonRpcError("plain"), b'{"code":-32603,"message":"plain"}'),
        (
            ValueError("v\n"),
            b'{"code":-32603,"message":"Internal error","data":{"exception":"ValueError","detail":"v\\n"}}',
        ),
        (
            UnreadableError(),
            b'{"code":-32603,"message":"Internal error",'
            b'"data":{"exception":"UnreadableError","detail":"Internal error"}}',
        ),
        (
            Unprintable(),
            b'{"code":-32603,"message":"Internal error",'
            b'"data":{"exception":"Unprintable","detail":"<unprintable Unprintable object>"}}',
        ),
        (
            InvalidParams(data={1j}),
            b'{"code":-32603,"message":"Internal error",'
            b'"data":{"exception":"TypeError","detail":"Object of type set is not JSON serializable"}}',
        ),
    ],
    ids=["method-not-found", "invalid-params", "subclass", "base", "plain", "unreadable", "unprintable", "bad-data"],
)
def test_answer_error(core: ModuleType, exception: BaseException, error: bytes) -> None:
    transport = core.StdioTransport(io.BytesIO(), io.BytesIO())
    assert transport._answer_error(ID, exception) == b'{"jsonrpc":"2.0","id":' + ID + b',"error":' + error + b"}"


def test_answer_result(core: ModuleType) -> None:
    transport = core.StdioTransport(io.BytesIO(), io.BytesIO())
    result = {"\u00e9": [1.5, None, True, "\n"]}
    assert transport._answer_result(b"1.50", result) == b'{"jsonrpc":"2.0","id":1.50,"result":' + compact(result) + b"}"
    assert transport._answer_result(b"null", None) == b'{"jsonrpc":"2.0","id":null,"result":null}'
    internal = b'{"jsonrpc":"2.0","id":-0,"error":{"code":-32603,"message":"Internal error","data":'
    assert transport._answer_result(b"-0", [object]) == (
        internal + b'{"exception":"TypeError","detail":"Object of type type is not JSON serializable"}}}'
    )
    assert transport._answer_result(b"-0", float("inf")) == (
        internal + b'{"exception":"ValueError","detail":"Out of range float values are not JSON compliant"}}}'
    )
    with pytest.raises(KeyboardInterrupt):
        transport._answer_result(b"1", Interrupting([1]))


def test_write_line_is_one_write_and_a_flush(core: ModuleType) -> None:
    out = RecordingOutput()
    transport = core.StdioTransport(io.BytesIO(), out)
    transport._write_line(b'{"jsonrpc":"2.0","id":1,"result":[]}')
    transport._write_line(b"")
    assert out.events == [b'{"jsonrpc":"2.0","id":1,"result":[]}\n', "flush", b"\n", "flush"]


@pytest.mark.parametrize(
    ("id_text", "id_value"),
    [
        ("1", 1),
        ("1e3", 1000.0),
        ("-0", 0),
        ("1.50", 1.5),
        ("null", None),
        (r'"a\u00e9\/"', "a\u00e9/"),
        ("123456789012345678901234567890", 123456789012345678901234567890),
    ],
)
def test_parse_request_fills_id_json(core: ModuleType, id_text: str, id_value: Any) -> None:
    parsed, error = core.parse_request(req(id_text))
    assert error is None
    assert parsed.id == id_value
    assert type(parsed.id) is type(id_value)
    expected = compact(id_value) if id_text.startswith('"') else id_text.encode()
    assert parsed.id_json == expected
    # Not part of the comparison, nor of the repr.
    assert parsed == Request("echo", [1], id_value, False)
    assert "id_json" not in repr(parsed)


def test_parse_request_gives_no_id_json_for_a_notification(core: ModuleType) -> None:
    parsed, error = core.parse_request(note())
    assert error is None
    assert parsed.is_notification
    assert parsed.id_json is None


def test_the_digit_limit_is_a_parse_error(core: ModuleType) -> None:
    limit = getattr(sys, "get_int_max_str_digits", lambda: 0)()
    if not limit:
        pytest.skip("no limit on the digits of an int")
    line = b'{"jsonrpc":"2.0","method":"m","params":[' + b"9" * (limit + 1) + b'],"id":1}\n'
    transport = core.StdioTransport(io.BytesIO(line), io.BytesIO())
    assert transport._read_message() == PARSE_ERROR


# --- StdioTransport.serve(max_concurrency=...): the rule of rpcwire.serve ----------------------------


class One(IntEnum):
    ONE = 1
    TWO = 2


@pytest.mark.parametrize(
    ("value", "error"),
    [
        *((value, TypeError) for value in (None, True, False, 1.0, 2.0, "1")),
        *((value, ValueError) for value in (0, -1)),
    ],
)
def test_transport_serve_refuses_what_serve_refuses(core: ModuleType, value: Any, error: type[Exception]) -> None:
    """One rule for ``max_concurrency`` (an int of at least 1; a bool or a float is a TypeError), in both cores and
    through either entry point: ``StdioTransport.serve`` used to run True and 1.0 sequentially in the pure core and
    hand None to the engine, and the native one the other way round."""
    messages = []
    for serve in (
        lambda transport: transport.serve(handler, max_concurrency=value),
        lambda transport: core.serve(handler, transport, max_concurrency=value),
    ):
        out = io.BytesIO()
        transport = core.StdioTransport(io.BytesIO(req("1") + b"\n"), out)
        with pytest.raises(error) as raised:
            serve(transport)
        assert out.getvalue() == b""  # refused before anything is read
        messages.append(str(raised.value))
    assert messages[0] == messages[1]


@pytest.mark.parametrize("value", [1, 2, One.ONE, One.TWO], ids=["1", "2", "IntEnum-1", "IntEnum-2"])
def test_transport_serve_takes_what_serve_takes(core: ModuleType, value: int) -> None:
    data = b"".join(req(str(i)) + b"\n" for i in range(4))
    out = io.BytesIO()
    core.StdioTransport(io.BytesIO(data), out).serve(handler, max_concurrency=value)
    assert sorted(out.getvalue().splitlines()) == sorted(served(core, data, handler).splitlines())


def test_transport_serve_has_one_default(core: ModuleType) -> None:
    data = b"".join(req(str(i)) + b"\n" for i in range(4))
    out = io.BytesIO()
    core.StdioTransport(io.BytesIO(data), out).serve(handler)
    assert out.getvalue() == served(core, data, handler)
    with pytest.raises(TypeError):
        core.StdioTransport(io.BytesIO(), io.BytesIO()).serve(handler, concurrency=2)  # type: ignore[call-arg]


# --- the public API: one import switches between the two -------------------------------------------

NATIVE_ONLY = {"NATIVE"}  # whether rpcwire runs the native module: a question for rpcwire itself only


def test_both_modules_export_the_same_public_api() -> None:
    # The cores' own contract members (underscored) are listed by rpcwire.pure, as by the native stub.
    assert set(rpcwire.__all__) - NATIVE_ONLY == {name for name in rpcwire.pure.__all__ if name[0] != "_"}
    for module in (rpcwire, rpcwire.pure):
        assert len(set(module.__all__)) == len(module.__all__)
        assert all(hasattr(module, name) for name in module.__all__), module.__name__
    for name in rpcwire.pure.__all__:  # the shared names are the same objects, but for the cores' own
        if name.isupper() or name in ("Request", "Response", "JsonRpcError", "methods", "current_request"):
            assert getattr(rpcwire, name) is getattr(rpcwire.pure, name), name
    assert {name for name in rpcwire.pure.__all__ if name.startswith("DEFAULT_")} == {
        "DEFAULT_MAX_BATCH",
        "DEFAULT_MAX_DEPTH",
        "DEFAULT_MAX_MESSAGE_BYTES",
    }
