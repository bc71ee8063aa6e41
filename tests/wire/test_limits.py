"""The limits of issue 4 (``max_message_bytes``, ``max_depth``, ``max_batch``) and the encoder's guards against
deep and self-referencing results, against both implementations (the ``impl`` fixture).

Each boundary is checked on both sides (exactly the limit, one past it), on several kinds of input stream
(a ``BytesIO``; raw and buffered streams that hand out a few bytes per read, so that an over-long line
arrives in many pieces; an object with nothing but ``readline(size)``), and always followed by a normal
line, which must still be served. Memory bounds are measured in child processes (native memory is not
visible to ``tracemalloc``, and a crash must fail the test, not pytest).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
import rpcwire
import rpcwire.pure
from support.messages import INVALID_REQUEST, PARSE_ERROR, answers, echo, err, needs_native, ok, request
from support.messages import nested_list as deep_list
from support.processes import child_env, run_script
from support.serving import served as serve_bytes
from support.streams import ReadlineOnly, Trickle

MIB = 1024 * 1024
TOO_LONG_MESSAGE = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}\n'
TOO_LONG_OTHER = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n'
NEXT = request("next", ["served"], id="next")
NEXT_ANSWER = ok("next", ["served"])


# --- streams ------------------------------------------------------------------------------------


STREAMS: dict[str, Callable[[bytes], Any]] = {
    "bytesio": io.BytesIO,
    "raw-trickle": Trickle,
    "buffered-trickle": lambda data: io.BufferedReader(Trickle(data), buffer_size=16),
    "readline-only": ReadlineOnly,
}


@pytest.fixture(params=list(STREAMS))
def stream(request: pytest.FixtureRequest) -> Callable[[bytes], Any]:
    """Makes the input stream of a test from its bytes."""
    return STREAMS[request.param]


def message_of_length(length: int, id: Any = 1) -> bytes:
    """A request line of exactly ``length`` bytes (without its newline), padded inside a string param."""
    bare = request("m", [""], id=id).rstrip(b"\n")
    assert length >= len(bare)
    return request("m", ["x" * (length - len(bare))], id=id).rstrip(b"\n")


def nested(depth: int) -> bytes:
    """Arrays nested ``depth`` levels deep (``[]`` is one level)."""
    return b"[" * depth + b"]" * depth


def with_params(params: bytes, id: int = 1) -> bytes:
    return b'{"jsonrpc":"2.0","method":"m","params":%s,"id":%d}\n' % (params, id)


# --- max_message_bytes: boundaries ---------------------------------------------------------------

LIMIT = 100


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"], ids=["lf", "crlf"])
def test_a_line_of_exactly_max_message_bytes_is_served(impl: ModuleType, stream: Any, newline: bytes) -> None:
    line = message_of_length(LIMIT)
    out = serve_bytes(impl, line + newline + NEXT, stream=stream, max_message_bytes=LIMIT)
    assert answers(out) == [ok(1, json.loads(line)["params"]), NEXT_ANSWER]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"], ids=["lf", "crlf"])
def test_a_line_one_byte_too_long_is_one_error_and_the_next_line_is_served(
    impl: ModuleType, stream: Any, newline: bytes
) -> None:
    line = message_of_length(LIMIT + 1)
    calls: list[str] = []
    out = serve_bytes(impl, line + newline + NEXT, lambda m, p: calls.append(m) or p, stream, max_message_bytes=LIMIT)
    assert out == TOO_LONG_MESSAGE + b'{"jsonrpc":"2.0","id":"next","result":["served"]}\n'
    assert calls == ["next"]


def test_the_limit_counts_neither_lf_nor_crlf(impl: ModuleType, stream: Any) -> None:
    # LIMIT bytes + "\r\n" is LIMIT + 2 bytes on the wire: still within the limit.
    data = message_of_length(LIMIT, id=1) + b"\r\n" + message_of_length(LIMIT, id=2) + b"\n"
    assert [a["id"] for a in answers(serve_bytes(impl, data, stream=stream, max_message_bytes=LIMIT))] == [1, 2]


def test_a_trailing_cr_is_not_counted_but_a_cr_inside_is(impl: ModuleType, stream: Any) -> None:
    # Only the last "\r" goes with the "\n"; one more before it is part of the line (JSON whitespace).
    fits = message_of_length(LIMIT - 1, id=1) + b"\r\r\n"
    too_long = message_of_length(LIMIT, id=2) + b"\r\r\n"
    out = serve_bytes(impl, fits + too_long + NEXT, stream=stream, max_message_bytes=LIMIT)
    assert answers(out) == [ok(1, json.loads(fits)["params"]), INVALID_REQUEST, NEXT_ANSWER]


@pytest.mark.parametrize(
    ("tail", "served"),
    [(b"", True), (b"\r", True), (b" ", False), (b" \r", False)],
    ids=["exact", "exact-cr", "plus-1", "plus-1-cr"],
)
def test_last_line_without_newline_at_eof(impl: ModuleType, stream: Any, tail: bytes, served: bool) -> None:
    line = message_of_length(LIMIT, id=2)
    out = serve_bytes(impl, NEXT + line + tail, stream=stream, max_message_bytes=LIMIT)
    assert answers(out) == [NEXT_ANSWER, ok(2, json.loads(line)["params"]) if served else INVALID_REQUEST]


def test_max_message_bytes_of_one(impl: ModuleType, stream: Any) -> None:
    data = b"1\n" + b"12\n" + b"{}\n" + b"\n" + b" \n" + b"[\n"
    out = serve_bytes(impl, data, stream=stream, max_message_bytes=1)
    # "1" parses (not an object: -32600); "12" and "{}" are too long; "" and " " are blank; "[" is cut JSON.
    assert answers(out) == [INVALID_REQUEST, PARSE_ERROR, INVALID_REQUEST, PARSE_ERROR]


@pytest.mark.parametrize("step", [1, 7, 4096])
def test_over_long_line_arriving_in_many_reads(impl: ModuleType, step: int) -> None:
    """A 50,000-byte line against a limit of 100, in reads of ``step`` bytes, raw and buffered."""
    data = message_of_length(50_000) + b"\n" + NEXT + message_of_length(50_000, id=3) + b"\r\n" + NEXT
    for make in (lambda: Trickle(data, step), lambda: io.BufferedReader(Trickle(data, step), buffer_size=64)):
        out = io.BytesIO()
        impl.StdioTransport(make(), out, max_message_bytes=LIMIT).serve(echo)
        assert answers(out.getvalue()) == [INVALID_REQUEST, NEXT_ANSWER, INVALID_REQUEST, NEXT_ANSWER]


def test_many_over_long_lines_in_a_row(impl: ModuleType, stream: Any) -> None:
    lines = [b"{" * 300, b"x" * 101, b" " * 200 + b"[", message_of_length(101), b"\t" * 500]
    data = b"\n".join(lines) + b"\n" + NEXT + b"y" * 1000  # the last one at EOF, without newline
    out = serve_bytes(impl, data, stream=stream, max_message_bytes=LIMIT)
    expected = [INVALID_REQUEST, PARSE_ERROR, INVALID_REQUEST, INVALID_REQUEST, PARSE_ERROR, NEXT_ANSWER, PARSE_ERROR]
    assert answers(out) == expected


# --- max_message_bytes: -32600 or -32700 ---------------------------------------------------------

CLASSIFIED = {
    "object": (b"{", TOO_LONG_MESSAGE),
    "array": (b"[", TOO_LONG_MESSAGE),
    "space-object": (b"   {", TOO_LONG_MESSAGE),
    "tab-cr-array": (b"\t\r [", TOO_LONG_MESSAGE),
    "long-whitespace-then-object": (b" " * 250 + b"{", TOO_LONG_MESSAGE),
    "long-whitespace-then-letter": (b" \t" * 125 + b"x", TOO_LONG_OTHER),
    # The first significant byte in a later read than the first one past the limit (reads are <= 64 KiB).
    "whitespace-then-object-in-a-later-read": (b" " * 70_000 + b"{" + b"a" * 70_000, TOO_LONG_MESSAGE),
    "whitespace-then-letter-in-a-later-read": (b"\t" * 70_000 + b"x" + b"a" * 70_000, TOO_LONG_OTHER),
    "letter": (b"x", TOO_LONG_OTHER),
    "string": (b'"', TOO_LONG_OTHER),
    "number": (b"1", TOO_LONG_OTHER),
    "close-bracket": (b"]", TOO_LONG_OTHER),
    "bom-object": (b"\xef\xbb\xbf{", TOO_LONG_OTHER),
    "nbsp-object": (b"\xc2\xa0{", TOO_LONG_OTHER),
    "form-feed-object": (b"\x0c{", TOO_LONG_OTHER),
    "nul": (b"\x00", TOO_LONG_OTHER),
    "whitespace-only": (b" ", TOO_LONG_OTHER),
}


@pytest.mark.parametrize(("start", "expected"), list(CLASSIFIED.values()), ids=list(CLASSIFIED))
def test_too_long_answer_depends_on_first_significant_byte(
    impl: ModuleType, stream: Any, start: bytes, expected: bytes
) -> None:
    filler = b" " if start == b" " else b"a"
    line = start + filler * (3 * LIMIT)
    out = serve_bytes(impl, line + b"\n" + NEXT, stream=stream, max_message_bytes=LIMIT)
    assert out == expected + b'{"jsonrpc":"2.0","id":"next","result":["served"]}\n'


def test_whitespace_only_line_within_the_limit_is_skipped(impl: ModuleType, stream: Any) -> None:
    data = b" " * LIMIT + b"\n" + b" \t" * (LIMIT // 2) + b"\r\n" + NEXT
    assert answers(serve_bytes(impl, data, stream=stream, max_message_bytes=LIMIT)) == [NEXT_ANSWER]


# --- read_line -----------------------------------------------------------------------------------


def test_read_line_raises_for_an_over_long_line_and_reads_on(impl: ModuleType, stream: Any) -> None:
    data = b"a" * LIMIT + b"\n" + b"b" * (LIMIT + 1) + b"\r\n" + b"c" * 5000 + b"\n" + b"d\r\n" + b"e" * (LIMIT + 1)
    transport = impl.StdioTransport(stream(data), io.BytesIO(), max_message_bytes=LIMIT)
    assert transport.read_line() == b"a" * LIMIT
    with pytest.raises(ValueError, match="max_message_bytes"):
        transport.read_line()
    with pytest.raises(ValueError, match="max_message_bytes"):
        transport.read_line()
    assert transport.read_line() == b"d"
    with pytest.raises(ValueError, match="max_message_bytes"):
        transport.read_line()
    assert transport.read_line() is None


def test_read_line_keeps_lines_of_exactly_the_limit_with_crlf(impl: ModuleType, stream: Any) -> None:
    data = b"a" * LIMIT + b"\r\n" + b"b" * (LIMIT - 1) + b"\r" + b"\n" + b"c" * LIMIT + b"\r"
    transport = impl.StdioTransport(stream(data), io.BytesIO(), max_message_bytes=LIMIT)
    assert [transport.read_line() for _ in range(4)] == [b"a" * LIMIT, b"b" * (LIMIT - 1), b"c" * LIMIT, None]


# --- arguments and defaults ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "limits",
    [
        {"max_message_bytes": 0},
        {"max_message_bytes": -1},
        {"max_depth": 0},
        {"max_depth": -128},
        {"max_depth": 513},
        {"max_batch": 0},
        {"max_batch": -1},
    ],
    ids=str,
)
def test_invalid_limits_are_value_errors(impl: ModuleType, limits: dict[str, int]) -> None:
    with pytest.raises(ValueError, match=next(iter(limits))):
        impl.StdioTransport(io.BytesIO(), io.BytesIO(), **limits)


def test_extreme_valid_limits_are_accepted(impl: ModuleType) -> None:
    data = request("m", [1], id=1) + b"[" + request("m", id=2).rstrip(b"\n") + b"]\n"
    out = serve_bytes(impl, data, max_message_bytes=2**40, max_depth=512, max_batch=1)
    assert answers(out) == [ok(1, [1]), [ok(2, None)]]
    out = serve_bytes(impl, b"[1]\n" + request("m", id=3), max_message_bytes=1000, max_depth=1, max_batch=2**40)
    assert answers(out) == [[INVALID_REQUEST], ok(3, None)]
    # The largest accepted limits work on every kind of stream (pure once overflowed its readline size).
    for stream in (io.BytesIO, lambda data: io.BufferedReader(io.BytesIO(data)), ReadlineOnly):
        out = serve_bytes(impl, data, stream=stream, max_message_bytes=2**63 - 1, max_batch=2**63 - 1)
        assert answers(out) == [ok(1, [1]), [ok(2, None)]]


def test_limits_are_keyword_only(impl: ModuleType) -> None:
    with pytest.raises(TypeError):
        impl.StdioTransport(io.BytesIO(), io.BytesIO(), 100)


def test_default_constants() -> None:
    assert rpcwire.DEFAULT_MAX_MESSAGE_BYTES == 64 * MIB
    assert rpcwire.DEFAULT_MAX_DEPTH == 128
    assert rpcwire.DEFAULT_MAX_BATCH == 1000


def test_signature_defaults_are_the_constants(impl: ModuleType) -> None:
    import inspect

    parameters = inspect.signature(impl.StdioTransport).parameters
    assert parameters["max_message_bytes"].default == rpcwire.DEFAULT_MAX_MESSAGE_BYTES
    assert parameters["max_depth"].default == rpcwire.DEFAULT_MAX_DEPTH
    assert parameters["max_batch"].default == rpcwire.DEFAULT_MAX_BATCH
    for name in ("max_message_bytes", "max_depth", "max_batch"):
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_default_max_message_bytes_is_enforced(impl: ModuleType) -> None:
    """A 64 MiB line is served, 64 MiB + 1 is not (padded with trailing JSON whitespace, cheap to parse)."""
    body = request("m", [1], id=1).rstrip(b"\n")
    exact = body + b" " * (rpcwire.DEFAULT_MAX_MESSAGE_BYTES - len(body))
    data = exact + b"\r\n" + exact + b" \n" + NEXT
    del exact
    assert answers(serve_bytes(impl, data)) == [ok(1, [1]), INVALID_REQUEST, NEXT_ANSWER]


def test_default_max_depth_is_enforced(impl: ModuleType) -> None:
    depth = rpcwire.DEFAULT_MAX_DEPTH
    data = with_params(nested(depth - 1), 1) + with_params(nested(depth), 2) + NEXT
    assert answers(serve_bytes(impl, data)) == [ok(1, json.loads(nested(depth - 1))), PARSE_ERROR, NEXT_ANSWER]


def test_default_max_batch_is_enforced(impl: ModuleType) -> None:
    data = batch_of(rpcwire.DEFAULT_MAX_BATCH) + batch_of(rpcwire.DEFAULT_MAX_BATCH + 1) + NEXT
    served, refused, after = answers(serve_bytes(impl, data))
    assert served == [ok(i, [i]) for i in range(rpcwire.DEFAULT_MAX_BATCH)]
    assert [refused, after] == [INVALID_REQUEST, NEXT_ANSWER]


@pytest.mark.slow
def test_max_batch_none_lifts_the_limit(impl: ModuleType) -> None:
    entries = 20_000
    [batch] = answers(serve_bytes(impl, batch_of(entries), max_batch=None))
    assert batch == [ok(i, [i]) for i in range(entries)]


# --- max_depth ------------------------------------------------------------------------------------


@pytest.mark.parametrize("max_depth", [2, 3, 17, 128, 512])
def test_max_depth_boundary_in_params(impl: ModuleType, max_depth: int) -> None:
    # The envelope is one level, so params may nest max_depth - 1 deep.
    data = with_params(nested(max_depth - 1), 1) + with_params(nested(max_depth), 2) + NEXT
    out = serve_bytes(impl, data, max_depth=max_depth)
    assert answers(out) == [ok(1, json.loads(nested(max_depth - 1))), PARSE_ERROR, NEXT_ANSWER]


@pytest.mark.parametrize("max_depth", [3, 17, 128, 512])
def test_max_depth_boundary_in_a_batch(impl: ModuleType, max_depth: int) -> None:
    # The batch array and the envelope are two levels.
    inner = nested(max_depth - 2)
    data = b"[" + with_params(inner).rstrip(b"\n") + b"]\n" + b"[" + with_params(b"[%s]" % inner).rstrip(b"\n") + b"]\n"
    out = serve_bytes(impl, data + NEXT, max_depth=max_depth)
    assert answers(out) == [[ok(1, json.loads(inner))], PARSE_ERROR, NEXT_ANSWER]


def test_max_depth_counts_objects_and_ignored_members(impl: ModuleType) -> None:
    deep_object = b'{"a":' * 4 + b"1" + b"}" * 4  # 4 levels
    data = (
        with_params(deep_object, 1)  # 5 levels with the envelope
        + b'{"jsonrpc":"2.0","method":"m","id":2,"extra":%s}\n' % deep_object
        + b'{"jsonrpc":"2.0","method":"m","id":3,"extra":[%s]}\n' % deep_object
        + with_params(b"[%s]" % deep_object, 4)
    )
    out = serve_bytes(impl, data, max_depth=5)
    assert answers(out) == [ok(1, json.loads(deep_object)), ok(2, None), PARSE_ERROR, PARSE_ERROR]


def test_max_depth_one_allows_only_the_envelope(impl: ModuleType) -> None:
    data = request("m", id=1) + with_params(b"[]", 2) + b"[]\n" + b"[" + request("m", id=3).rstrip(b"\n") + b"]\n"
    out = serve_bytes(impl, data, max_depth=1)
    assert answers(out) == [ok(1, None), PARSE_ERROR, INVALID_REQUEST, PARSE_ERROR]


def test_brackets_inside_strings_are_not_nesting(impl: ModuleType) -> None:
    text = "[{" * 5000
    assert answers(serve_bytes(impl, request("m", [text], id=1), max_depth=2)) == [ok(1, [text])]


@pytest.mark.parametrize("opener", [b"[", b'{"a":', b'[{"a":'], ids=["arrays", "objects", "mixed"])
@pytest.mark.parametrize("max_depth", [None, 512])
def test_very_deep_input_is_a_parse_error_not_a_crash(impl: ModuleType, opener: bytes, max_depth: int | None) -> None:
    deep = opener * 200_000
    limits = {} if max_depth is None else {"max_depth": max_depth}
    data = deep + b"\n" + with_params(deep) + NEXT
    assert answers(serve_bytes(impl, data, **limits)) == [PARSE_ERROR, PARSE_ERROR, NEXT_ANSWER]


# --- max_batch ------------------------------------------------------------------------------------


def batch_of(count: int, notification_every: int = 0) -> bytes:
    entries = [
        request("m", [i], id=... if notification_every and i % notification_every == 0 else i).rstrip(b"\n")
        for i in range(count)
    ]
    return b"[" + b",".join(entries) + b"]\n"


@pytest.mark.parametrize("max_batch", [1, 2, 10, 1000])
def test_max_batch_boundary(impl: ModuleType, stream: Any, max_batch: int) -> None:
    calls: list[Any] = []

    def handler(method: str, params: Any) -> Any:
        calls.append(params[0])
        return params

    data = batch_of(max_batch) + batch_of(max_batch + 1) + request("m", ["served"], id="next") + batch_of(max_batch + 5)
    out = serve_bytes(impl, data, handler, stream, max_batch=max_batch)
    assert answers(out) == [[ok(i, [i]) for i in range(max_batch)], INVALID_REQUEST, NEXT_ANSWER, INVALID_REQUEST]
    # Nothing of the refused batches reached the handler.
    assert calls == [*range(max_batch), "served"]


def test_an_over_long_batch_is_not_read_past_the_entry_past_the_limit(impl: ModuleType) -> None:
    """Whatever follows the start of entry max_batch + 1 is not read: -32600 even if it is not JSON, but
    bad JSON (or nesting too deep) in the entries before it is still -32700."""
    two = b'{"jsonrpc":"2.0","method":"m","id":1},{"jsonrpc":"2.0","method":"m","id":2}'
    data = b"[" + two + b",{not json at all\n" + b"[" + two + b", " + b"[" * 300 + b"\n"
    data += b"[" + two + b"]] trailing\n" + b"[" + two + b"x]\n" + b'[{"a":[[1]]}, 1, 2]\n' + NEXT
    calls: list[Any] = []
    out = serve_bytes(impl, data, lambda m, p: calls.append(m), max_batch=2, max_depth=3)
    assert answers(out) == [INVALID_REQUEST, INVALID_REQUEST, PARSE_ERROR, PARSE_ERROR, PARSE_ERROR, ok("next", None)]
    assert calls == ["next"]


def test_over_long_batch_is_refused_even_if_all_notifications_or_invalid(impl: ModuleType) -> None:
    calls: list[Any] = []
    notifications = b"[" + b",".join([request("m", id=...).rstrip(b"\n")] * 4) + b"]\n"
    invalid = b"[1,2,3,4]\n"
    out = serve_bytes(impl, notifications + invalid + NEXT, lambda m, p: calls.append(m), max_batch=3)
    assert answers(out) == [INVALID_REQUEST, INVALID_REQUEST, ok("next", None)]
    assert calls == ["next"]


def test_max_batch_does_not_apply_to_params_arrays(impl: ModuleType) -> None:
    params = list(range(50))
    assert answers(serve_bytes(impl, request("m", params, id=1), max_batch=2)) == [ok(1, params)]


def test_max_batch_with_notifications_counts_every_entry(impl: ModuleType) -> None:
    # 3 entries, of which 2 are notifications: the batch is 3 long whatever will be answered.
    data = batch_of(3, notification_every=2)
    assert answers(serve_bytes(impl, data, max_batch=2)) == [INVALID_REQUEST]
    assert answers(serve_bytes(impl, data, max_batch=3)) == [[ok(1, [1])]]


def test_empty_batch_is_still_invalid_with_max_batch(impl: ModuleType) -> None:
    assert answers(serve_bytes(impl, b"[]\n" + NEXT, max_batch=1)) == [INVALID_REQUEST, NEXT_ANSWER]


# --- deep and self-referencing results -----------------------------------------------------------

RECURSION = {"exception": "RecursionError", "detail": "maximum recursion depth exceeded while encoding a JSON object"}
CIRCULAR = {"exception": "ValueError", "detail": "Circular reference detected"}


def test_deep_result_is_internal_error_not_a_crash(impl: ModuleType) -> None:
    deep = deep_list(100_000)
    deep_dict: dict[str, Any] = {}
    for _ in range(100_000):
        deep_dict = {"a": deep_dict}
    results = {"list": deep, "dict": deep_dict, "mixed": [{"k": deep}]}
    data = request("list", id=1) + request("dict", id=2) + request("mixed", id=3) + NEXT
    out = serve_bytes(impl, data, results.get)
    assert answers(out) == [
        err(1, -32603, "Internal error", RECURSION),
        err(2, -32603, "Internal error", RECURSION),
        err(3, -32603, "Internal error", RECURSION),
        NEXT_ANSWER,
    ]


def test_moderately_deep_result_is_encoded(impl: ModuleType) -> None:
    # Far past max_depth (which is about input) but well inside the recursion limit.
    deep = deep_list(300)
    assert answers(serve_bytes(impl, request("m", id=1), lambda m, p: deep)) == [ok(1, deep)]


def test_deep_error_data_is_internal_error(impl: ModuleType) -> None:
    deep = deep_list(100_000)

    def handler(method: str, params: Any) -> Any:
        raise impl.JsonRpcError("deep", data=deep)

    out = serve_bytes(impl, request("m", id=1) + b"[" + request("m", id=2).rstrip(b"\n") + b"]\n", handler)
    assert answers(out) == [err(1, -32603, "Internal error", RECURSION), [err(2, -32603, "Internal error", RECURSION)]]


def self_referencing() -> dict[str, Any]:
    loop: list[Any] = [1]
    loop.append(loop)
    cyclic: dict[str, Any] = {"x": 1}
    cyclic["me"] = cyclic
    indirect: list[Any] = [{"a": [1, 2]}]
    indirect[0]["a"].append(indirect)
    tuple_loop: list[Any] = []
    tuple_loop.append((1, tuple_loop))
    return {"list": loop, "dict": cyclic, "indirect": indirect, "tuple": tuple_loop, "in-batch": loop}


@pytest.mark.parametrize("case", list(self_referencing()))
def test_self_referencing_result_is_internal_error(impl: ModuleType, case: str) -> None:
    result = self_referencing()[case]
    data = request("m", id=1) + NEXT
    if case == "in-batch":
        data = b"[" + request("m", id=1).rstrip(b"\n") + b"," + request("next", ["served"], id="next").rstrip(b"\n")
        data += b"]\n"
    out = serve_bytes(impl, data, lambda m, p: result if m == "m" else p)
    expected = [err(1, -32603, "Internal error", CIRCULAR), NEXT_ANSWER]
    assert answers(out) == ([expected] if case == "in-batch" else expected)


@pytest.mark.parametrize("what", ["list", "dict"])
def test_write_response_with_a_self_referencing_result_raises(impl: ModuleType, what: str) -> None:
    result = self_referencing()[what]
    out = io.BytesIO()
    transport = impl.StdioTransport(io.BytesIO(), out)
    with pytest.raises(ValueError, match="Circular reference detected"):
        transport.write_response(1, result)
    with pytest.raises(RecursionError):
        transport.write_response(1, deep_list(100_000))
    transport.write_response(2, "after")
    assert answers(out.getvalue()) == [ok(2, "after")]


DEEP_RESULT_CHILD = """
import io, importlib, sys
impl = importlib.import_module(sys.argv[1])
sys.setrecursionlimit(10**7)
deep = []
for _ in range(200_000):
    deep = [deep]
out = io.BytesIO()
data = b'{"jsonrpc":"2.0","id":1,"method":"m"}\\n{"jsonrpc":"2.0","id":2,"method":"next"}\\n'
impl.StdioTransport(io.BytesIO(data), out).serve(lambda m, p: deep if m == "m" else "served")
sys.stdout.buffer.write(out.getvalue())
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "module",
    ["rpcwire", "rpcwire.pure"],
)
def test_deep_result_with_a_raised_recursion_limit_is_not_a_crash(module: str) -> None:
    child = subprocess.run(
        [sys.executable, "-c", DEEP_RESULT_CHILD, module],
        capture_output=True,
        timeout=100,
        env=child_env(),
        check=False,
    )
    assert child.returncode == 0, f"child died with {child.returncode}: {child.stderr.decode(errors='replace')[-2000:]}"
    first, second = answers(child.stdout)
    assert first["error"]["code"] == -32603
    assert first["error"]["data"]["exception"] == "RecursionError"
    assert second == ok(2, "served")


# --- native and pure write the same bytes --------------------------------------------------------


def differential_cases() -> dict[str, tuple[bytes, dict[str, Any], Callable[[str, Any], Any]]]:
    loop: list[Any] = []
    loop.append(loop)
    deep = deep_list(100_000)
    results = {"loop": loop, "deep": deep}

    def handler(method: str, params: Any) -> Any:
        return results.get(method, params)

    small = {"max_message_bytes": LIMIT}
    return {
        "exact": (message_of_length(LIMIT) + b"\n" + NEXT, small, echo),
        "plus-1": (message_of_length(LIMIT + 1) + b"\n" + NEXT, small, echo),
        "plus-1-crlf": (message_of_length(LIMIT + 1) + b"\r\n" + NEXT, small, echo),
        "eof-plus-1": (NEXT + message_of_length(LIMIT + 1), small, echo),
        "classify": (b"\n".join(s + b"a" * 300 for s, _ in CLASSIFIED.values()) + b"\n" + NEXT, small, echo),
        "read-pieces": (b"x" * 10_000 + b"\n" + b"[" * 10_000 + b"\r\n" + NEXT, small, echo),
        "depth": (with_params(nested(4)) + with_params(nested(5)) + b"[" * 100_000 + b"\n", {"max_depth": 5}, echo),
        "batch": (batch_of(3) + batch_of(4) + batch_of(4, notification_every=1), {"max_batch": 3}, echo),
        "results": (request("loop", id=1) + request("deep", id=2) + NEXT, {}, handler),
    }


DIFFERENTIAL = differential_cases()


@pytest.mark.parametrize("case", list(DIFFERENTIAL))
@pytest.mark.parametrize("kind", list(STREAMS))
def test_native_and_pure_write_the_same_bytes(case: str, kind: str) -> None:
    data, limits, handler = DIFFERENTIAL[case]
    native = serve_bytes(rpcwire, data, handler, STREAMS[kind], **limits)
    pure = serve_bytes(rpcwire.pure, data, handler, STREAMS[kind], **limits)
    assert native == pure
    assert answers(native)  # something was answered, every line whole


# --- an over-long line is never held whole (child process, peak RSS) -----------------------------

HUGE_LINE_CHILD = """
import io, importlib, json, sys

from support.measure import peak_rss

impl = importlib.import_module(sys.argv[1])
line_bytes, limit = int(sys.argv[2]), int(sys.argv[3])


class Generated(io.RawIOBase):
    '''A ``{`` then line_bytes - 1 bytes of "a", a newline, then one request; never held in memory.'''

    def __init__(self):
        super().__init__()
        self.left = line_bytes
        self.block = b"a" * 65536
        self.tail = b'\\n{"jsonrpc":"2.0","method":"next","id":2}\\n'
        self.head = True

    def readable(self):
        return True

    def readinto(self, b):
        if self.head:
            self.head = False
            b[:1] = b"{"
            self.left -= 1
            return 1
        if self.left:
            n = min(len(b), self.left, len(self.block))
            b[:n] = self.block[:n]
            self.left -= n
            return n
        n = min(len(b), len(self.tail))
        b[:n] = self.tail[:n]
        self.tail = self.tail[n:]
        return n


kinds = {
    "raw": lambda: Generated(),
    "buffered": lambda: io.BufferedReader(Generated(), buffer_size=65536),
}
out = io.BytesIO()
transport = impl.StdioTransport(kinds[sys.argv[4]](), out, max_message_bytes=limit)
before = peak_rss()
transport.serve(lambda method, params: method)
after = peak_rss()
print(json.dumps({"growth": after - before, "out": out.getvalue().decode()}))
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("module", "kind"),
    # rpcwire.pure reads a raw stream through IOBase.readline, one byte per read(): 256 MiB of that is
    # too slow, so pure is measured on the buffered stream only.
    [
        pytest.param("rpcwire", "raw", marks=needs_native("256 MiB through IOBase.readline is too slow for pure")),
        ("rpcwire", "buffered"),
        ("rpcwire.pure", "buffered"),
    ],
)
def test_over_long_line_is_dropped_as_it_arrives(module: str, kind: str) -> None:
    """A 256 MiB line against max_message_bytes = 1 MiB: the peak RSS of the child grows by far less
    than the line (held whole, it would grow by at least 256 MiB; the bound is 1 MiB plus 64 KiB of
    read-ahead plus the allocator's slack and the answer)."""
    line_bytes, limit = 256 * MIB, MIB
    report = run_script(HUGE_LINE_CHILD, module, str(line_bytes), str(limit), kind)
    assert answers(report["out"].encode()) == [INVALID_REQUEST, ok(2, "next")]
    assert report["growth"] < 16 * MIB, f"peak RSS grew by {report['growth'] / MIB:.1f} MiB"


def test_no_int_digit_limit_before_python_3_10_7(impl: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """CPython 3.10.0 to 3.10.6 have no ``sys.get_int_max_str_digits`` (and ``int()`` no limit there): an
    integer longer than 640 digits, in params or as the id, is served, not stopped by an AttributeError."""
    monkeypatch.delattr(sys, "get_int_max_str_digits", raising=False)  # absent there already
    big = 10**699
    data = request("echo", [big], id=big) + request("echo", {"n": -big}) + NEXT
    assert answers(serve_bytes(impl, data)) == [ok(big, [big]), ok(1, {"n": -big}), NEXT_ANSWER]
    parsed, error = impl.parse_request(request("echo", [big], id=-big))
    assert error is None
    assert (parsed.params, parsed.id) == ([big], -big)
