"""``dispatch(body, handler)``: one whole JSON text in, the answer's bytes out, against both implementations.

A body is answered exactly as ``serve`` answers the same text on one line (the reference here is ``serve``
itself, not a copy of its rules); what differs is framing only: newlines inside a body are JSON whitespace,
and an empty body is a -32600 where ``serve`` skips a blank line.
"""

from __future__ import annotations

import io
import json
import logging
import traceback
from types import ModuleType
from typing import Any

import pytest
import rpcwire
import rpcwire.pure
from support.messages import INVALID_REQUEST, PARSE_ERROR, compact, echo, ok, request

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


# --- errors: what the server logs, what the client sees (expose_errors) ----------------------------

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class Secret(Exception):
    """An exception whose text must not reach a remote client."""


class AppError(rpcwire.JsonRpcError):
    code = -32001
    default_message = "Application error"


def failing(method: str, params: Any) -> Any:
    if method == "secret":
        raise Secret("password=hunter2")
    if method == "app":
        raise AppError("meant for the client", data={"retry": True})
    if method == "bad-params":
        raise rpcwire.InvalidParams("x is missing")
    if method == "unencodable":
        return {1j}
    return echo(method, params)


def answered_by(impl: ModuleType, how: str, body: bytes) -> bytes:
    """The answer to ``body`` (one message) by ``dispatch`` or by ``serve`` in one of its modes."""
    if how == "dispatch":
        return dispatched_with(impl, body, failing)
    out = io.BytesIO()
    transport = impl.StdioTransport(io.BytesIO(body + b"\n"), out)
    if how == "async":

        async def handler(method: str, params: Any) -> Any:
            return failing(method, params)

        impl.serve(handler, transport)
    else:
        impl.serve(failing, transport, max_concurrency={"sequential": 1, "threads": 2}[how])
    return out.getvalue().rstrip(b"\n")


def dispatched_with(impl: ModuleType, body: bytes, handler: Any, **options: Any) -> bytes:
    answer = impl.dispatch(body, handler, **options)
    return b"" if answer is None else answer


def error_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "rpcwire" and r.levelno >= logging.ERROR]


MODES = ["dispatch", "sequential", "threads", "async"]


@pytest.mark.parametrize("how", MODES)
@pytest.mark.parametrize(
    ("params", "traceparent"),
    [
        ({"_meta": {"traceparent": TRACEPARENT}}, TRACEPARENT),
        ({"_meta": {"traceparent": "00-" + "0" * 32 + "-b7ad6b7169203331-01"}}, None),  # invalid: all-zero trace id
        ([1], None),
    ],
    ids=["traceparent", "invalid-traceparent", "no-meta"],
)
def test_an_unexpected_exception_is_logged_at_error_with_its_traceback(
    impl: ModuleType, how: str, params: Any, traceparent: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="rpcwire")
    body = request("secret", params, id="req-7").rstrip(b"\n")
    answer = json.loads(answered_by(impl, how, body))
    assert answer["error"]["data"] == {"exception": "Secret", "detail": "password=hunter2"}  # stdio: as before
    [record] = error_records(caplog)
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], Secret)
    assert record.exc_info[2] is not None, "the traceback is logged"
    assert "failing" in "".join(traceback.format_tb(record.exc_info[2])), "the traceback reaches the handler"
    assert (record.request_id, record.method, record.traceparent) == ("req-7", "secret", traceparent)  # type: ignore[attr-defined]
    message = record.getMessage()
    assert "secret" in message and "'req-7'" in message and str(traceparent) in message


@pytest.mark.parametrize("how", MODES)
@pytest.mark.parametrize("method", ["app", "bad-params", "missing"])
def test_a_json_rpc_error_is_for_the_client_and_not_logged_at_error(
    impl: ModuleType, how: str, method: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="rpcwire")
    answered_by(impl, how, request(method).rstrip(b"\n"))
    assert error_records(caplog) == []


@pytest.mark.parametrize("how", MODES)
def test_a_result_that_cannot_be_encoded_is_logged(
    impl: ModuleType, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="rpcwire")
    answer = json.loads(answered_by(impl, how, request("unencodable", id=3).rstrip(b"\n")))
    assert answer["error"]["code"] == -32603
    [record] = error_records(caplog)
    assert record.exc_info is not None and isinstance(record.exc_info[1], TypeError)
    assert record.getMessage() == "the result could not be encoded (id 3); answered -32603 Internal error"


EXPOSE_BODIES = [
    request("secret", id=1),
    request("unencodable", id="u"),
    request("app", id=2),
    request("bad-params", id=3),
    request("missing", id=4),
    request("echo", [1], id=5),
    b"["
    + b",".join(request(m, id=i).rstrip(b"\n") for i, m in enumerate(["secret", "app", "echo", "unencodable"]))
    + b"]",
]


@pytest.mark.parametrize("body", EXPOSE_BODIES)
def test_expose_errors_false_hides_the_exception_and_keeps_json_rpc_errors(
    body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.CRITICAL, logger="rpcwire")
    hidden = dispatched_with(rpcwire, body, failing, expose_errors=False)
    assert hidden == dispatched_with(rpcwire.pure, body, failing, expose_errors=False), "both cores, the same bytes"
    shown = dispatched_with(rpcwire, body, failing)
    assert shown == dispatched_with(rpcwire.pure, body, failing, expose_errors=True)
    assert b"hunter2" not in hidden and b"Secret" not in hidden and b"TypeError" not in hidden
    as_list = [json.loads(hidden), json.loads(shown)]
    hidden_answers, shown_answers = ([a] if isinstance(a, dict) else a for a in as_list)
    assert len(hidden_answers) == len(shown_answers)
    for hidden_answer, shown_answer in zip(hidden_answers, shown_answers, strict=True):
        if shown_answer.get("error", {}).get("code") == -32603:
            assert hidden_answer == {**shown_answer, "error": {"code": -32603, "message": "Internal error"}}
        else:  # MethodNotFound, InvalidParams, an application's JsonRpcError, a result: as raised or returned
            assert hidden_answer == shown_answer


def test_expose_errors_false_still_logs(impl: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="rpcwire")
    answer = impl.dispatch(request("secret", id=1), failing, expose_errors=False)
    assert answer == b'{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error"}}'
    [record] = error_records(caplog)
    assert record.exc_info is not None and str(record.exc_info[1]) == "password=hunter2"


def test_the_core_builds_the_hidden_answer(impl: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    """What the engine (and the HTTP apps) call: ``_answer_error``/``_answer_result`` with ``expose_errors``."""
    caplog.set_level(logging.CRITICAL, logger="rpcwire")
    generic = b'{"jsonrpc":"2.0","id":"x","error":{"code":-32603,"message":"Internal error"}}'
    core = impl.StdioTransport
    assert core._answer_error(b'"x"', Secret("no"), expose_errors=False) == generic
    assert core._answer_result(b'"x"', {1j}, expose_errors=False) == generic
    assert b"Secret" in core._answer_error(b'"x"', Secret("no"))
    assert core._answer_error(b'"x"', AppError(), expose_errors=False) == core._answer_error(b'"x"', AppError())
