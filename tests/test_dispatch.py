"""``dispatch(body, handler)``: one whole JSON text in, the answer's bytes out, against both implementations.

A body is answered exactly as ``serve`` answers the same text on one line (the reference here is ``serve``
itself, not a copy of its rules); what differs is framing only: newlines inside a body are JSON whitespace,
and an empty body is a -32600 where ``serve`` skips a blank line.
"""

from __future__ import annotations

import io
import json
from types import ModuleType
from typing import Any

import pytest
import rpcwire
import rpcwire.pure
from conftest import INVALID_REQUEST, PARSE_ERROR, compact, echo, ok, request

LINES = [
    request("echo", [1, "two", {"three": 3.0}]),
    request("echo", {"a": [True, None]}, id="s-1"),
    request("echo", None, id=None),
    request("echo", [1], id=12345678901234567890123),
    b'{"jsonrpc":"2.0","method":"echo","params":[1],"id":1e3}\n',
    b'{"jsonrpc":"2.0","method":"echo","params":["\\u00e9\\ud800"],"id":"\\u00e9"}\n',
    request("missing"),
    request("boom", id=7),
    request("unencodable", id=8),
    b'{"jsonrpc":"2.0","method":"echo","params":[1],"id":1}   \r\n',
    b"not json\n",
    b'{"jsonrpc":"2.0","method":"echo",}\n',
    b"\xff\xfe\n",
    b"[]\n",
    b"[1,2]\n",
    b'{"jsonrpc":"1.0","method":"echo","id":3}\n',
    b'{"jsonrpc":"2.0","method":"echo","params":null,"id":4}\n',
    b"["
    + b",".join(line.rstrip(b"\n") for line in (request("echo", [1]), request("echo", [2], id=...), b"5"))
    + b"]\n",
    b'{"jsonrpc":"2.0","method":"echo","params":' + b"[" * 200 + b"]" * 200 + b',"id":1}\n',
]


def handler(method: str, params: Any) -> Any:
    if method == "unencodable":
        return {1j}
    return echo(method, params)


def served(impl: ModuleType, body: bytes, **limits: Any) -> bytes:
    """What ``serve`` writes for ``body`` as one line (without its ``\\n``), ``b""`` for nothing."""
    out = io.BytesIO()
    impl.serve(handler, impl.StdioTransport(io.BytesIO(body.rstrip(b"\n") + b"\n"), out, **limits))
    assert out.getvalue().count(b"\n") <= 1
    return out.getvalue().rstrip(b"\n")


def dispatched(impl: ModuleType, body: bytes | str, **limits: Any) -> bytes:
    answer = impl.dispatch(body, handler, **limits)
    assert answer is None or (type(answer) is bytes and answer and not answer.endswith(b"\n")), answer
    return b"" if answer is None else answer


@pytest.mark.parametrize("line", LINES)
def test_a_line_is_answered_as_serve_answers_it(impl: ModuleType, line: bytes) -> None:
    assert dispatched(impl, line) == served(impl, line)
    assert dispatched(impl, line.rstrip(b"\n")) == served(impl, line)


@pytest.mark.parametrize("line", LINES)
def test_both_implementations_give_the_same_bytes(line: bytes) -> None:
    assert dispatched(rpcwire, line) == dispatched(rpcwire.pure, line)


def test_a_str_body_is_its_utf8(impl: ModuleType) -> None:
    line = request("echo", ["é", "𝄞"])
    assert dispatched(impl, line.decode()) == dispatched(impl, line) == compact(ok(1, ["é", "𝄞"]))
    assert impl.dispatch(bytearray(line), handler) == dispatched(impl, line)


def test_a_str_with_a_lone_surrogate_is_a_parse_error(impl: ModuleType) -> None:
    assert dispatched(impl, '{"jsonrpc":"2.0","method":"echo","params":["\ud800"],"id":1}') == compact(PARSE_ERROR)


def test_other_bodies_are_a_type_error(impl: ModuleType) -> None:
    with pytest.raises(TypeError, match="str or bytes"):
        impl.dispatch(memoryview(b"{}"), handler)
    with pytest.raises(TypeError, match="str or bytes"):
        impl.dispatch(None, handler)


# --- framing: what differs from a line -----------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "method": "echo", "params": {"nested": [1, {"deep": [None, "x\ny"]}]}, "id": 9},
        [
            {"jsonrpc": "2.0", "method": "echo", "params": [1], "id": 1},
            {"jsonrpc": "2.0", "method": "missing", "id": 2},
        ],
    ],
)
@pytest.mark.parametrize("separators", [(",", ": "), ("\r\n,\t", " :\n")])
def test_a_pretty_printed_body_is_answered_as_its_compact_line(
    impl: ModuleType, message: Any, separators: tuple[str, str]
) -> None:
    body = "\n\t " + json.dumps(message, indent=4, separators=separators) + "\r\n\n"
    assert "\n" in body.strip()
    assert dispatched(impl, body.encode()) == served(impl, compact(message))


@pytest.mark.parametrize("body", [b"", b" ", b"\n", b"\r\n\t \n", ""])
def test_an_empty_body_is_an_invalid_request(impl: ModuleType, body: bytes | str) -> None:
    """(choice) ``serve`` skips a blank line; a body that holds nothing is an invalid request."""
    assert dispatched(impl, body) == compact(INVALID_REQUEST)


@pytest.mark.parametrize(
    "body",
    [
        request("echo", [1], id=...),
        b"[" + request("echo", [1], id=...).strip() + b",\n" + request("boom", id=...).strip() + b"]",
    ],
)
def test_notifications_only_answer_none(impl: ModuleType, body: bytes) -> None:
    assert impl.dispatch(body, handler) is None


def test_the_handler_is_called_in_order_once_per_request(impl: ModuleType) -> None:
    calls: list[Any] = []
    body = b"[" + b",".join(request("m", [i], id=i if i % 2 else ...).strip() for i in range(5)) + b"]"
    assert impl.dispatch(body, lambda method, params: calls.append(params)) == compact([ok(1, None), ok(3, None)])
    assert calls == [[0], [1], [2], [3], [4]]


def test_a_base_exception_propagates(impl: ModuleType) -> None:
    def interrupted(method: str, params: Any) -> Any:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        impl.dispatch(request("m"), interrupted)


# --- limits --------------------------------------------------------------------------------------


@pytest.mark.parametrize("first", [b"{", b"[", b"x", b"\n {"])
def test_a_body_over_max_message_bytes_is_answered_as_an_over_long_line(impl: ModuleType, first: bytes) -> None:
    body = first + b"1" * 100
    expected = compact(INVALID_REQUEST if first.strip() in (b"{", b"[") else PARSE_ERROR)
    assert dispatched(impl, body, max_message_bytes=100) == expected == served(impl, body, max_message_bytes=100)
    fits = request("echo", [1]).strip()
    assert dispatched(impl, fits, max_message_bytes=len(fits)) == compact(ok(1, [1]))
    assert dispatched(impl, fits + b"\n", max_message_bytes=len(fits)) == compact(INVALID_REQUEST)


def test_max_depth_and_max_batch(impl: ModuleType) -> None:
    deep = b'{"jsonrpc":"2.0","method":"echo","params":' + b"[" * 9 + b"]" * 9 + b',"id":1}'
    assert dispatched(impl, deep, max_depth=10) == compact(ok(1, json.loads(b"[" * 9 + b"]" * 9)))
    assert dispatched(impl, deep, max_depth=9) == compact(PARSE_ERROR) == served(impl, deep, max_depth=9)
    batch = b"[" + b",".join([request("echo", [1]).strip()] * 3) + b"]"
    assert dispatched(impl, batch, max_batch=3) == compact([ok(1, [1])] * 3)
    assert dispatched(impl, batch, max_batch=2) == compact(INVALID_REQUEST) == served(impl, batch, max_batch=2)
    many = b"[" + b",".join([request("echo", [1]).strip()] * 1001) + b"]"
    assert dispatched(impl, many) == compact(INVALID_REQUEST)
    assert len(json.loads(dispatched(impl, many, max_batch=None))) == 1001


@pytest.mark.parametrize(
    ("limits", "error"),
    [
        ({"max_message_bytes": 0}, ValueError),
        ({"max_depth": 513}, ValueError),
        ({"max_batch": 0}, ValueError),
        ({"max_message_bytes": 2**63}, OverflowError),
    ],
)
def test_limits_out_of_range(impl: ModuleType, limits: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        impl.dispatch(request("echo"), handler, **limits)
    with pytest.raises(error):
        impl.StdioTransport(**limits)
