"""Every rule of docs/semantics.md, checked against both implementations (the ``impl`` fixture)."""

from __future__ import annotations

import enum
import io
import json
import logging
import subprocess
import sys
from collections import OrderedDict, namedtuple
from types import ModuleType
from typing import Any

import pytest
import rpcwire
import rpcwire.pure
from support.messages import (
    INVALID_REQUEST,
    PARSE_ERROR,
    answers,
    compact,
    echo,
    err,
    needs_int_digit_limit,
    needs_native,
    ok,
    request,
)
from support.serving import served, transport_for
from support.streams import ReadlineOnly, RecordingOutput, Trickle


def serve_lines(impl: ModuleType, data: bytes, handler: Any = echo) -> list[Any]:
    return answers(served(impl, data, handler))


def envelope(params: str = "[]", id: str = "1", method: str = '"m"') -> bytes:
    """A request line built from raw JSON texts for its members."""
    return b'{"jsonrpc":"2.0","method":%s,"params":%s,"id":%s}\n' % (method.encode(), params.encode(), id.encode())


# --- Framing ------------------------------------------------------------------------------------


def test_one_answer_per_line(impl: ModuleType) -> None:
    data = request("m", [1], id=1) + request("m", [2], id=2) + request("m", [3], id=3)
    assert serve_lines(impl, data) == [ok(1, [1]), ok(2, [2]), ok(3, [3])]


def test_crlf_is_accepted(impl: ModuleType) -> None:
    data = request("m", [1], id=1).replace(b"\n", b"\r\n") + request("m", [2], id=2).replace(b"\n", b"\r\n")
    assert serve_lines(impl, data) == [ok(1, [1]), ok(2, [2])]


def test_last_line_without_newline_is_served(impl: ModuleType) -> None:
    data = request("m", [1], id=1) + request("m", [2], id=2).rstrip(b"\n")
    assert serve_lines(impl, data) == [ok(1, [1]), ok(2, [2])]


def test_last_line_ending_in_cr_is_served(impl: ModuleType) -> None:
    assert serve_lines(impl, request("m", id=7).replace(b"\n", b"\r")) == [ok(7, None)]


def test_lone_cr_does_not_split_lines(impl: ModuleType) -> None:
    """Lines end at ``\\n`` only: two messages joined by a bare ``\\r`` are one line with trailing data."""
    data = request("m", id=1).rstrip(b"\n") + b"\r" + request("m", id=2)
    assert serve_lines(impl, data) == [PARSE_ERROR]


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085"], ids=["U+2028", "U+2029", "U+0085"])
def test_unicode_line_breaks_inside_strings_do_not_split(impl: ModuleType, separator: str) -> None:
    """Raw (unescaped) Unicode line breaks inside a string are ordinary characters, also in the answer."""
    text = f"a{separator}b"
    data = b'{"jsonrpc":"2.0","method":"m","params":["' + text.encode() + b'"],"id":1}\n'
    out = served(impl, data, echo)
    assert out == b'{"jsonrpc":"2.0","id":1,"result":["' + text.encode() + b'"]}\n'
    assert answers(out) == [ok(1, [text])]


def test_blank_and_whitespace_only_lines_are_skipped(impl: ModuleType) -> None:
    data = b"\n\r\n   \n\t\t\n \t\r \n" + request("m", id=1) + b"\n  \n" + request("m", id=2) + b"   "
    assert serve_lines(impl, data) == [ok(1, None), ok(2, None)]


@pytest.mark.parametrize("line", [b"\x0c", b"\x0b", b"\xc2\xa0", b"\xe2\x80\xa8", b"\x00", b"\xef\xbb\xbf"])
def test_non_json_whitespace_line_is_a_parse_error(impl: ModuleType, line: bytes) -> None:
    """Only space, tab and CR count as blank; form feed, NBSP, U+2028, NUL and a lone BOM do not."""
    assert serve_lines(impl, line + b"\n") == [PARSE_ERROR]


def test_read_line(impl: ModuleType) -> None:
    transport, _ = transport_for(impl, b"first\nsecond\r\n\n\r\n  \nlast")
    lines = [transport.read_line() for _ in range(7)]
    assert lines == [b"first", b"second", b"", b"", b"  ", b"last", None]


def test_read_line_keeps_inner_cr_and_unicode_breaks(impl: ModuleType) -> None:
    transport, _ = transport_for(impl, b"a\rb\r\r\n\xe2\x80\xa8x\n")
    assert [transport.read_line(), transport.read_line(), transport.read_line()] == [
        b"a\rb\r",
        "\u2028x".encode(),
        None,
    ]


def test_read_line_empty_input(impl: ModuleType) -> None:
    transport, _ = transport_for(impl, b"")
    assert transport.read_line() is None
    assert transport.read_line() is None


def test_read_line_long_line(impl: ModuleType) -> None:
    big = b"x" * 300_000
    transport, _ = transport_for(impl, big + b"\n" + big)
    assert transport.read_line() == big
    assert transport.read_line() == big
    assert transport.read_line() is None


def test_transport_serve_method_equals_module_serve(impl: ModuleType) -> None:
    data = request("m", [1]) + b"nonsense\n" + request("missing", id=2)
    transport, out = transport_for(impl, data)
    transport.serve(echo)
    assert out.getvalue() == served(impl, data, echo)


def test_every_write_is_whole_lines_then_flush(impl: ModuleType) -> None:
    out = RecordingOutput()
    transport = impl.StdioTransport(io.BytesIO(request("m", ["é" * 5000], id=1) + b"[1,2]\n"), out)
    transport.write_notification("n", {"x": 1})
    transport.serve(echo)
    writes = [e for e in out.events if e != "flush"]
    assert writes[0] == b'{"jsonrpc":"2.0","method":"n","params":{"x":1}}\n'
    assert b"".join(writes).count(b"\n") == 3
    for write in writes:
        assert isinstance(write, bytes)
        assert write.endswith(b"\n")
    # every write is followed by a flush before the next write
    for i, event in enumerate(out.events):
        if event != "flush":
            assert "flush" in out.events[i + 1 : i + 2], out.events
    assert b"".join(writes) == out.getvalue()


def test_every_finished_answer_is_written_before_the_next_handler_runs(impl: ModuleType) -> None:
    """Lines read together: each handler finds every earlier answer written and flushed."""
    out = RecordingOutput()
    lines = b"".join(request("m", [i], id=i) for i in range(20)) + request("note", ["n"], id=...)
    lines += b"[" + request("m", [20], id=20).strip() + b"]\n"
    written_at_call: list[int] = []

    def handler(method: str, params: Any) -> Any:
        assert out.events[-1:] in ([], ["flush"]), "an answer was written but not flushed"
        written_at_call.append(out.getvalue().count(b"\n"))
        return params

    impl.StdioTransport(io.BytesIO(lines), out).serve(handler)
    assert written_at_call == [*range(21), 20]
    assert out.getvalue().count(b"\n") == 21


@needs_native("how the native transport gathers answers into writes")
def test_native_coalesces_answers_no_handler_stands_between() -> None:
    """A run of answers that need no handler (-32700, -32600) goes out in one write, before the next handler."""
    out = RecordingOutput()
    lines = b"not json\n" * 30 + b"[]\n" * 20 + request("m", [1], id=1) + b"{bad\n" * 5
    rpcwire.StdioTransport(io.BytesIO(lines), out).serve(echo)
    writes = [event for event in out.events if event != "flush"]
    # the handler's answer and the -32700s after it share the last write: no handler stands between
    assert [write.count(b"\n") for write in writes] == [50, 6]
    assert out.events == [writes[0], "flush", writes[1], "flush"]


def test_native_writes_gathered_answers_before_they_grow_past_64_kib() -> None:
    out = RecordingOutput()
    lines = b"".join(
        b'{"jsonrpc":"2.0","method":"' + b"x" * 1000 + b'","id":' + b"%d" % i + b"}}\n" for i in range(300)
    )
    rpcwire.StdioTransport(io.BytesIO(lines), out).serve(echo)
    writes = [e for e in out.events if e != "flush"]
    assert len(writes) > 1
    assert all(len(write) < 64 * 1024 + 1100 for write in writes)
    assert out.getvalue().count(b"\n") == 300


def test_a_notification_from_a_handler_follows_the_answers_before_it(impl: ModuleType) -> None:
    out = io.BytesIO()
    transport = impl.StdioTransport(io.BytesIO(request("m", [1], id=1) + request("progress", [2], id=2)), out)

    def handler(method: str, params: Any) -> Any:
        if method == "progress":
            transport.write_notification("step", params)
        return params

    transport.serve(handler)
    assert out.getvalue().splitlines() == [
        b'{"jsonrpc":"2.0","id":1,"result":[1]}',
        b'{"jsonrpc":"2.0","method":"step","params":[2]}',
        b'{"jsonrpc":"2.0","id":2,"result":[2]}',
    ]


class TrickleWriter(io.RawIOBase):
    """A raw stream that accepts at most 5 bytes per ``write``."""

    def __init__(self) -> None:
        super().__init__()
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        chunk = bytes(b[:5])
        self.data += chunk
        return len(chunk)


def test_partial_writes_to_a_raw_stream_are_completed(impl: ModuleType) -> None:
    data = request("m", ["x" * 100], id=1) + b"[]\n" + request("m", {"é": "😀"}, id=2)
    out = TrickleWriter()
    impl.StdioTransport(io.BytesIO(data), out).serve(echo)
    assert answers(bytes(out.data)) == [ok(1, ["x" * 100]), INVALID_REQUEST, ok(2, {"é": "😀"})]


@pytest.mark.parametrize("kind", ["bytesio", "raw-trickle", "buffered-trickle", "readline-only"])
def test_input_stream_kinds(impl: ModuleType, kind: str) -> None:
    data = request("m", [1], id=1) + b"\r\n" + request("m", ["é" * 10], id=2).replace(b"\n", b"\r\n") + b"x"
    stdin = {
        "bytesio": lambda: io.BytesIO(data),
        "raw-trickle": lambda: Trickle(data, 3),
        "buffered-trickle": lambda: io.BufferedReader(Trickle(data, 3), buffer_size=16),
        "readline-only": lambda: ReadlineOnly(data),
    }[kind]()
    out = io.BytesIO()
    impl.serve(echo, impl.StdioTransport(stdin, out))
    assert answers(out.getvalue()) == [ok(1, [1]), ok(2, ["é" * 10]), PARSE_ERROR]


def test_text_streams_use_their_buffer(impl: ModuleType) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(request("m", ["é"], id=1)), encoding="utf-8")
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    impl.StdioTransport(stdin, stdout).serve(echo)
    stdout.flush()
    assert answers(stdout.buffer.getvalue()) == [ok(1, ["é"])]


@pytest.mark.parametrize("which", ["stdin", "stdout"])
def test_text_stream_without_buffer_is_a_type_error(impl: ModuleType, which: str) -> None:
    streams = {"stdin": io.BytesIO(), "stdout": io.BytesIO()}
    streams[which] = io.StringIO()
    with pytest.raises(TypeError):
        impl.StdioTransport(**streams)


def test_defaults_are_sys_stdin_and_stdout_buffers(impl: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(request("m", [1], id=1)), encoding="utf-8")
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stdout", stdout)
    transport = impl.StdioTransport()
    impl.serve(echo, transport)
    monkeypatch.undo()
    assert answers(stdout.buffer.getvalue()) == [ok(1, [1])]


# --- Decoding -----------------------------------------------------------------------------------


def test_parse_error_has_null_id_and_no_data(impl: ModuleType) -> None:
    out = served(impl, b'{"jsonrpc":"2.0","method":"m","id":1\n', echo)
    assert out == b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n'


def test_parse_error_does_not_poison_the_stream(impl: ModuleType) -> None:
    data = b'{"jsonrpc": "2.0", "method": "m", "id": 1, \n' + request("m", [2], id=2) + b"][\n" + request("m", id=3)
    assert serve_lines(impl, data) == [PARSE_ERROR, ok(2, [2]), PARSE_ERROR, ok(3, None)]


NOT_JSON = {
    "truncated": b'{"jsonrpc":"2.0","method":"m","id":1',
    "invalid utf-8": b'{"jsonrpc":"2.0","method":"m\xff","id":1}',
    "invalid utf-8 continuation": b'{"jsonrpc":"2.0","method":"m\xc3(","id":1}',
    "overlong utf-8": b'{"jsonrpc":"2.0","method":"\xc0\xaf","id":1}',
    "utf-8 encoded surrogate": b'{"jsonrpc":"2.0","method":"\xed\xa0\x80","id":1}',
    "latin-1": '{"jsonrpc":"2.0","method":"é","id":1}'.encode("latin-1"),
    "utf-16": '{"jsonrpc":"2.0","method":"m","id":1}'.encode("utf-16"),
    "NaN": b'{"jsonrpc":"2.0","method":"m","params":[NaN],"id":1}',
    "Infinity": b'{"jsonrpc":"2.0","method":"m","params":[Infinity],"id":1}',
    "-Infinity": b'{"jsonrpc":"2.0","method":"m","params":[-Infinity],"id":1}',
    "NaN id": b'{"jsonrpc":"2.0","method":"m","id":NaN}',
    "bare NaN": b"NaN",
    "BOM": b'\xef\xbb\xbf{"jsonrpc":"2.0","method":"m","id":1}',
    "raw control char in string": b'{"jsonrpc":"2.0","method":"m\x01","id":1}',
    "raw tab in string": b'{"jsonrpc":"2.0","method":"m\t","id":1}',
    "raw NUL in string": b'{"jsonrpc":"2.0","method":"m\x00","id":1}',
    "trailing comma in object": b'{"jsonrpc":"2.0","method":"m","id":1,}',
    "trailing comma in array": b'{"jsonrpc":"2.0","method":"m","params":[1,],"id":1}',
    "line comment": b'{"jsonrpc":"2.0","method":"m","id":1} // hi',
    "block comment": b'{"jsonrpc":"2.0",/* c */"method":"m","id":1}',
    "single quotes": b"{'jsonrpc':'2.0','method':'m','id':1}",
    "unquoted key": b'{jsonrpc:"2.0","method":"m","id":1}',
    "leading zero": b'{"jsonrpc":"2.0","method":"m","id":01}',
    "negative leading zero": b'{"jsonrpc":"2.0","method":"m","id":-01}',
    "plus sign": b'{"jsonrpc":"2.0","method":"m","id":+1}',
    "bare fraction": b'{"jsonrpc":"2.0","method":"m","params":[.5],"id":1}',
    "dangling point": b'{"jsonrpc":"2.0","method":"m","params":[1.],"id":1}',
    "dangling exponent": b'{"jsonrpc":"2.0","method":"m","params":[1e],"id":1}',
    "hex": b'{"jsonrpc":"2.0","method":"m","id":0x10}',
    "non-ascii digit": '{"jsonrpc":"2.0","method":"m","id":1\u0663}'.encode(),
    "trailing data": b'{"jsonrpc":"2.0","method":"m","id":1}x',
    "two texts": b'{"jsonrpc":"2.0","method":"m","id":1} {"jsonrpc":"2.0","method":"m","id":2}',
    "two texts no space": b'{"jsonrpc":"2.0","method":"m","id":1}{"jsonrpc":"2.0","method":"m","id":2}',
    "bad escape": b'{"jsonrpc":"2.0","method":"\\x41","id":1}',
    "short unicode escape": b'{"jsonrpc":"2.0","method":"\\u12","id":1}',
    "unterminated string": b'{"jsonrpc":"2.0","method":"m',
    "python literals": b'{"jsonrpc":"2.0","method":"m","params":[None, True],"id":1}',
    "capitalised true": b'{"jsonrpc":"2.0","method":"m","params":[True],"id":1}',
    "nbsp as whitespace": '{"jsonrpc":"2.0",\u00a0"method":"m","id":1}'.encode(),
    "form feed as whitespace": b'{"jsonrpc":"2.0",\x0c"method":"m","id":1}',
    "vertical tab as whitespace": b'\x0b{"jsonrpc":"2.0","method":"m","id":1}',
    "only a comma": b",",
    "garbage": b"hello",
    "batch truncated": b'[{"jsonrpc":"2.0","method":"m","id":1},',
}


@pytest.mark.parametrize("line", list(NOT_JSON.values()), ids=list(NOT_JSON))
def test_not_strict_json_is_a_parse_error(impl: ModuleType, line: bytes) -> None:
    calls = []
    out = served(impl, line + b"\n" + request("m", ["after"], id="next"), lambda m, p: calls.append(p) or p)
    assert answers(out) == [PARSE_ERROR, ok("next", ["after"])]
    assert calls == [["after"]]


def test_json_whitespace_everywhere_is_accepted(impl: ModuleType) -> None:
    data = b' \t{ "jsonrpc" :\t"2.0" ,\r"method"\r: "m" , "params" : [ 1 , { "a" : [ ] } ] , "id" : 1 }\t \r\n'
    assert serve_lines(impl, data) == [ok(1, [1, {"a": []}])]


def test_nan_and_infinity_as_strings_are_fine(impl: ModuleType) -> None:
    out = serve_lines(impl, request("m", ["NaN", "Infinity", "-Infinity"], id=1))
    assert out == [ok(1, ["NaN", "Infinity", "-Infinity"])]


def nested_params(depth: int) -> str:
    """A ``params`` text that is ``depth`` arrays deep."""
    return "[" * depth + "]" * depth


def test_depth_128_is_accepted(impl: ModuleType) -> None:
    """The envelope object is level 1, so params 127 arrays deep make 128 levels."""
    seen = []
    out = serve_lines(impl, envelope(nested_params(127)), lambda m, p: seen.append(p) or "ok")
    assert out == [ok(1, "ok")]
    assert seen == [json.loads(nested_params(127))]


def test_depth_129_is_a_parse_error(impl: ModuleType) -> None:
    calls = []
    out = serve_lines(impl, envelope(nested_params(128)), lambda m, p: calls.append(p))
    assert out == [PARSE_ERROR]
    assert calls == []


def test_depth_with_objects_counts_too(impl: ModuleType) -> None:
    deep_ok = '{"a":' * 127 + "1" + "}" * 127
    deep_bad = '{"a":' * 128 + "1" + "}" * 128
    assert serve_lines(impl, envelope(deep_ok) + envelope(deep_bad, id="2")) == [
        ok(1, json.loads(deep_ok)),
        PARSE_ERROR,
    ]


def test_depth_in_a_batch_counts_the_batch_array(impl: ModuleType) -> None:
    """Batch array (1) + envelope (1) + 126 arrays = 128 levels; one more is 129."""
    good = b"[" + envelope(nested_params(126)).rstrip(b"\n") + b"]\n"
    bad = b"[" + envelope(nested_params(127)).rstrip(b"\n") + b"]\n"
    assert serve_lines(impl, good + bad) == [[ok(1, json.loads(nested_params(126)))], PARSE_ERROR]


def test_depth_counts_levels_not_brackets(impl: ModuleType) -> None:
    """Many sibling arrays, and brackets inside strings, are not nesting."""
    siblings = "[" + ",".join(["[]"] * 1000) + "]"
    text = "[{[" * 200
    data = envelope(siblings, id="1") + request("m", [text], id=2)
    assert serve_lines(impl, data) == [ok(1, json.loads(siblings)), ok(2, [text])]


@pytest.mark.parametrize("opening", ["[", '{"a":', '{"jsonrpc":"2.0","method":"m","params":[', "[{"])
def test_very_deep_nesting_is_a_parse_error_not_an_exception(impl: ModuleType, opening: str) -> None:
    line = (opening * 100_000).encode()
    assert serve_lines(impl, line + b"\n" + request("m", id=1)) == [PARSE_ERROR, ok(1, None)]


@needs_int_digit_limit
def test_big_integers_up_to_the_int_digit_limit(impl: ModuleType) -> None:
    limit = sys.get_int_max_str_digits()
    biggest = "9" * limit
    too_big = "9" * (limit + 1)
    data = envelope(f"[{biggest}]") + envelope(f"[-{biggest}]", id="2") + envelope(f"[{too_big}]", id="3")
    out = served(impl, data, echo)
    lines = out.splitlines()
    assert lines[0] == b'{"jsonrpc":"2.0","id":1,"result":[' + biggest.encode() + b"]}"
    assert lines[1] == b'{"jsonrpc":"2.0","id":2,"result":[-' + biggest.encode() + b"]}"
    assert json.loads(lines[2]) == PARSE_ERROR
    assert len(lines) == 3


def test_fractions_and_exponents_become_floats(impl: ModuleType) -> None:
    seen = []
    out = serve_lines(impl, envelope("[1.0, 1e3, 1E-2, -0.0, 0e0, 2.5e+1, 1]"), lambda m, p: seen.append(p) or p)
    assert [type(v) for v in seen[0]] == [float] * 6 + [int]
    assert seen == [[1.0, 1000.0, 0.01, -0.0, 0.0, 25.0, 1]]
    assert out == [ok(1, [1.0, 1000.0, 0.01, -0.0, 0.0, 25.0, 1])]
    assert b"-0.0" in served(impl, envelope("[-0.0]"), echo)


def test_float_overflow_becomes_inf_which_cannot_be_answered(impl: ModuleType) -> None:
    seen = []
    out = serve_lines(impl, envelope("[1e400, -1e400]"), lambda m, p: seen.append(p) or p)
    assert seen == [[float("inf"), float("-inf")]]
    data = {"exception": "ValueError", "detail": "Out of range float values are not JSON compliant"}
    assert out == [err(1, -32603, "Internal error", data)]


def test_lone_surrogate_escape_is_accepted_and_echoed_as_escape(impl: ModuleType) -> None:
    seen = []
    out = served(impl, envelope(r'["\ud800", "a\udfffb", "\uDBFF"]'), lambda m, p: seen.append(p) or p)
    assert seen == [["\ud800", "a\udfffb", "\udbff"]]
    assert out == b'{"jsonrpc":"2.0","id":1,"result":["\\ud800","a\\udfffb","\\udbff"]}\n'


def test_surrogate_pair_escape_is_one_character(impl: ModuleType) -> None:
    seen = []
    out = served(impl, envelope(r'["\ud83d\ude00"]'), lambda m, p: seen.append(p) or p)
    assert seen == [["\U0001f600"]]
    assert out == '{"jsonrpc":"2.0","id":1,"result":["😀"]}\n'.encode()


def test_duplicate_keys_last_wins_everywhere(impl: ModuleType) -> None:
    calls = []
    line = (
        b'{"jsonrpc":"1.0","jsonrpc":"2.0","method":"a","method":"b","params":[0],'
        b'"params":{"x":1,"x":2},"id":true,"id":5}\n'
    )
    out = serve_lines(impl, line, lambda m, p: calls.append((m, p)) or p)
    assert calls == [("b", {"x": 2})]
    assert out == [ok(5, {"x": 2})]


def test_duplicate_keys_last_wins_making_it_invalid(impl: ModuleType) -> None:
    line = b'{"jsonrpc":"2.0","jsonrpc":"1.0","method":"m","id":1,"id":2}\n'
    assert serve_lines(impl, line) == [err(2, -32600, "Invalid Request")]


def test_transport_errors_carry_no_data_and_are_logged_at_debug(
    impl: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="rpcwire")
    out = serve_lines(impl, b"{oops\n")
    assert out == [PARSE_ERROR]
    debug = [r for r in caplog.records if r.name == "rpcwire" and r.levelno == logging.DEBUG]
    assert debug, "the parse error's detail must be logged at DEBUG on 'rpcwire'"


def test_invalid_request_detail_is_logged_at_debug(impl: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    """'Errors the transport raises carry only code and message: the detail is logged at DEBUG'."""
    caplog.set_level(logging.DEBUG, logger="rpcwire")
    out = serve_lines(impl, b'{"jsonrpc":"2.0","method":42,"id":1}\n')
    assert out == [err(1, -32600, "Invalid Request")]
    debug = [r for r in caplog.records if r.name == "rpcwire" and r.levelno == logging.DEBUG]
    assert debug, "the invalid request's detail must be logged at DEBUG on 'rpcwire'"


# --- The envelope -------------------------------------------------------------------------------

INVALID_KEEPING_ID = {
    "wrong version": b'{"jsonrpc":"1.0","method":"m","id":7}',
    "version 2 as number": b'{"jsonrpc":2.0,"method":"m","id":7}',
    "version with space": b'{"jsonrpc":"2.0 ","method":"m","id":7}',
    "version 2": b'{"jsonrpc":"2","method":"m","id":7}',
    "version null": b'{"jsonrpc":null,"method":"m","id":7}',
    "missing version": b'{"method":"m","id":7}',
    "missing method": b'{"jsonrpc":"2.0","id":7}',
    "method number": b'{"jsonrpc":"2.0","method":1,"id":7}',
    "method null": b'{"jsonrpc":"2.0","method":null,"id":7}',
    "method array": b'{"jsonrpc":"2.0","method":["m"],"id":7}',
    "method object": b'{"jsonrpc":"2.0","method":{},"id":7}',
    "params null": b'{"jsonrpc":"2.0","method":"m","params":null,"id":7}',
    "params string": b'{"jsonrpc":"2.0","method":"m","params":"x","id":7}',
    "params number": b'{"jsonrpc":"2.0","method":"m","params":3,"id":7}',
    "params float": b'{"jsonrpc":"2.0","method":"m","params":1.5,"id":7}',
    "params bool": b'{"jsonrpc":"2.0","method":"m","params":true,"id":7}',
}


@pytest.mark.parametrize("line", list(INVALID_KEEPING_ID.values()), ids=list(INVALID_KEEPING_ID))
def test_invalid_request_keeps_a_valid_id(impl: ModuleType, line: bytes) -> None:
    calls = []
    out = serve_lines(impl, line + b"\n", lambda m, p: calls.append(m))
    assert out == [err(7, -32600, "Invalid Request")]
    assert calls == []


@pytest.mark.parametrize("line", list(INVALID_KEEPING_ID.values()), ids=list(INVALID_KEEPING_ID))
def test_invalid_request_without_id_is_answered_with_null(impl: ModuleType, line: bytes) -> None:
    line = line.replace(b',"id":7', b"").replace(b'"id":7', b"")
    assert b"id" not in line
    assert serve_lines(impl, line + b"\n") == [INVALID_REQUEST]


INVALID_IDS = ["true", "false", "{}", '{"a":1}', "[]", "[1]"]


@pytest.mark.parametrize("id_text", INVALID_IDS)
def test_invalid_id_types_are_rejected_with_null_id(impl: ModuleType, id_text: str) -> None:
    calls = []
    out = serve_lines(impl, envelope(id=id_text), lambda m, p: calls.append(m))
    assert out == [INVALID_REQUEST]
    assert calls == []


@pytest.mark.parametrize("line", [b"1", b'"x"', b"null", b"true", b"false", b"-3.5", b'"{}"'])
def test_non_object_message_is_invalid_request(impl: ModuleType, line: bytes) -> None:
    assert serve_lines(impl, line + b"\n") == [INVALID_REQUEST]


def test_other_members_are_ignored(impl: ModuleType) -> None:
    line = b'{"jsonrpc":"2.0","method":"m","id":1,"result":5,"error":{},"extra":[1,2],"ID":"x"}\n'
    assert serve_lines(impl, line) == [ok(1, None)]


def test_member_order_does_not_matter(impl: ModuleType) -> None:
    line = b'{"id":"a","params":{"k":"v"},"method":"m","jsonrpc":"2.0"}\n'
    assert serve_lines(impl, line) == [ok("a", {"k": "v"})]


def test_params_absent_means_none(impl: ModuleType) -> None:
    calls = []
    serve_lines(impl, request("m", id=1) + request("m", [], id=2) + request("m", {}, id=3), lambda *a: calls.append(a))
    assert calls == [("m", None), ("m", []), ("m", {})]


def test_null_id_is_a_request_answered_with_null(impl: ModuleType) -> None:
    calls = []
    out = serve_lines(impl, b'{"jsonrpc":"2.0","method":"m","params":[1],"id":null}\n', lambda *a: calls.append(a) or 9)
    assert out == [ok(None, 9)]
    assert calls == [("m", [1])]


def test_rpc_prefixed_methods_reach_the_handler(impl: ModuleType) -> None:
    calls = []
    out = serve_lines(impl, request("rpc.discover", id=1), lambda m, p: calls.append(m) or "schema")
    assert out == [ok(1, "schema")]
    assert calls == ["rpc.discover"]


def test_method_names_are_passed_verbatim(impl: ModuleType) -> None:
    names = ["", "a b", "é😀", "\u0000x", "\ud800", "a.b/c"]
    data = b"".join(json.dumps({"jsonrpc": "2.0", "method": n, "id": i}).encode() + b"\n" for i, n in enumerate(names))
    calls: list[str] = []
    served(impl, data, lambda m, p: calls.append(m))
    assert calls == names


# --- Ids ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("id_value", [0, 1, -1, 2**63, 2**64 + 1, 2**100, -(2**70), 10**300])
def test_integer_ids_keep_all_digits(impl: ModuleType, id_value: int) -> None:
    out = served(impl, envelope(id=str(id_value)), lambda m, p: "r")
    assert out == b'{"jsonrpc":"2.0","id":%d,"result":"r"}\n' % id_value


NUMBER_IDS = ["0", "-0", "1.5", "1e3", "1E+03", "1.0", "-0.0", "1.50", "0e0", "2.5e-7", "1e400", "-1e-400", "7"]


@pytest.mark.parametrize("id_text", NUMBER_IDS)
def test_number_ids_are_echoed_as_written(impl: ModuleType, id_text: str) -> None:
    """JSON-RPC 2.0: an id is a String, Number or Null, and the answer carries the same value."""
    id_json = id_text.encode()
    lines = envelope(id=id_text) + envelope(id=id_text, method='"missing"')
    lines += b'{"jsonrpc":"1.0","method":"m","id":%s}\n' % id_json
    lines += b"[" + envelope(id="1").strip() + b"," + envelope(id=id_text).strip() + b"]\n"
    out = served(impl, lines, echo).splitlines()
    assert out == [
        b'{"jsonrpc":"2.0","id":%s,"result":[]}' % id_json,
        b'{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}' % id_json,
        b'{"jsonrpc":"2.0","id":%s,"error":{"code":-32600,"message":"Invalid Request"}}' % id_json,
        b'[{"jsonrpc":"2.0","id":1,"result":[]},{"jsonrpc":"2.0","id":%s,"result":[]}]' % id_json,
    ]


def test_parse_request_gives_a_number_id_as_json_loads_does(impl: ModuleType) -> None:
    for id_text in NUMBER_IDS:
        parsed, error = impl.parse_request(envelope(id=id_text))
        assert error is None
        assert repr(parsed.id) == repr(json.loads(id_text))


STRING_IDS = {
    r'"\u00e9"': '"é"',
    r'"\u00E9"': '"é"',
    r'"\/"': '"/"',
    r'"a\"b\\c"': r'"a\"b\\c"',
    r'"\u0041\u0001\n\t\b\f\r"': r'"A\u0001\n\t\b\f\r"',
    r'"\ud83d\ude00"': '"😀"',
    r'"\ud800"': r'"\ud800"',
    '"\u2028"': '"\u2028"',
    '"\x7f"': '"\x7f"',
    '""': '""',
    '"1"': '"1"',
}


@pytest.mark.parametrize(("given", "written"), list(STRING_IDS.items()), ids=list(STRING_IDS))
def test_string_ids_are_written_canonically(impl: ModuleType, given: str, written: str) -> None:
    out = served(impl, envelope(id=given), lambda m, p: None)
    assert out == b'{"jsonrpc":"2.0","id":' + written.encode() + b',"result":null}\n'


def test_unknown_method_keeps_the_id(impl: ModuleType) -> None:
    out = serve_lines(impl, request("missing", id="abc") + request("missing", id=0) + request("missing", id=None))
    assert out == [
        err("abc", -32601, "Method not found"),
        err(0, -32601, "Method not found"),
        err(None, -32601, "Method not found"),
    ]


# --- Calling the handler ------------------------------------------------------------------------


class AppError(rpcwire.JsonRpcError):
    code = -32001
    default_message = "Application error"


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


class BadCodeError(rpcwire.JsonRpcError):
    code = "oops"  # type: ignore[assignment]


class BoolCodeError(rpcwire.JsonRpcError):
    code = True  # type: ignore[assignment]


class FloatCodeError(rpcwire.JsonRpcError):
    code = -32001.0  # type: ignore[assignment]


class IntCode(enum.IntEnum):
    APP = -32050


class EnumCodeError(rpcwire.JsonRpcError):
    code = IntCode.APP  # type: ignore[assignment]


def _instance_code() -> rpcwire.JsonRpcError:
    exc = rpcwire.JsonRpcError("custom", data=[1])
    exc.code = -32099  # type: ignore[misc]
    return exc


def _bad_message() -> rpcwire.JsonRpcError:
    exc = rpcwire.InvalidParams()
    exc.message = 42  # type: ignore[assignment]
    return exc


RAISED: dict[str, tuple[Any, dict[str, Any]]] = {
    "MethodNotFound()": (rpcwire.MethodNotFound(), {"code": -32601, "message": "Method not found"}),
    "MethodNotFound(msg, data)": (
        rpcwire.MethodNotFound("no such thing", data={"tried": ["a"]}),
        {"code": -32601, "message": "no such thing", "data": {"tried": ["a"]}},
    ),
    "InvalidParams()": (rpcwire.InvalidParams(), {"code": -32602, "message": "Invalid params"}),
    "InvalidParams(msg, data)": (
        rpcwire.InvalidParams("need 2", data=[0, "é"]),
        {"code": -32602, "message": "need 2", "data": [0, "é"]},
    ),
    "InvalidParams(data=False)": (
        rpcwire.InvalidParams(data=False),
        {"code": -32602, "message": "Invalid params", "data": False},
    ),
    "JsonRpcError()": (rpcwire.JsonRpcError(), {"code": -32603, "message": "Internal error"}),
    "custom -32001": (
        AppError("quota exceeded", data={"limit": 10}),
        {"code": -32001, "message": "quota exceeded", "data": {"limit": 10}},
    ),
    "custom default message": (AppError(), {"code": -32001, "message": "Application error"}),
    "instance code": (_instance_code(), {"code": -32099, "message": "custom", "data": [1]}),
    "IntEnum code": (EnumCodeError("e"), {"code": -32050, "message": "e"}),
    "code not int": (
        BadCodeError("bad"),
        {"code": -32603, "message": "Internal error", "data": {"exception": "BadCodeError", "detail": "bad"}},
    ),
    "code bool": (
        BoolCodeError("b"),
        {"code": -32603, "message": "Internal error", "data": {"exception": "BoolCodeError", "detail": "b"}},
    ),
    "code float": (
        FloatCodeError("f"),
        {"code": -32603, "message": "Internal error", "data": {"exception": "FloatCodeError", "detail": "f"}},
    ),
    "message not str": (
        _bad_message(),
        {
            "code": -32603,
            "message": "Internal error",
            "data": {"exception": "InvalidParams", "detail": "Invalid params"},
        },
    ),
    "ValueError": (
        ValueError("bad value"),
        {"code": -32603, "message": "Internal error", "data": {"exception": "ValueError", "detail": "bad value"}},
    ),
    "KeyError": (
        KeyError("k"),
        {"code": -32603, "message": "Internal error", "data": {"exception": "KeyError", "detail": "'k'"}},
    ),
    "empty message": (
        RuntimeError(),
        {"code": -32603, "message": "Internal error", "data": {"exception": "RuntimeError", "detail": ""}},
    ),
    "unprintable": (
        Unprintable(),
        {
            "code": -32603,
            "message": "Internal error",
            "data": {"exception": "Unprintable", "detail": "<unprintable Unprintable object>"},
        },
    ),
}


@pytest.mark.parametrize(("exc", "error"), list(RAISED.values()), ids=list(RAISED))
def test_handler_exceptions_become_error_answers(impl: ModuleType, exc: Exception, error: dict[str, Any]) -> None:
    def handler(method: str, params: Any) -> Any:
        raise exc

    out = served(impl, request("m", [1], id=3) + request("m", id=4), handler)
    assert answers(out) == [{"jsonrpc": "2.0", "id": 3, "error": error}, {"jsonrpc": "2.0", "id": 4, "error": error}]


def test_internal_error_detail_is_str_of_exception(impl: ModuleType) -> None:
    def handler(method: str, params: Any) -> Any:
        return 1 / 0

    [answer] = serve_lines(impl, request("div", id=1), handler)
    assert answer["error"]["data"] == {"exception": "ZeroDivisionError", "detail": "division by zero"}


def test_handler_returning_none_gives_result_null(impl: ModuleType) -> None:
    out = served(impl, request("m", id=1), lambda m, p: None)
    assert out == b'{"jsonrpc":"2.0","id":1,"result":null}\n'


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit, GeneratorExit])
def test_base_exceptions_propagate_and_write_nothing(impl: ModuleType, exc_type: type[BaseException]) -> None:
    def handler(method: str, params: Any) -> Any:
        if method == "stop":
            raise exc_type()
        return params

    transport, out = transport_for(impl, request("m", [1], id=1) + request("stop", id=2) + request("m", [3], id=3))
    with pytest.raises(exc_type):
        impl.serve(handler, transport)
    assert answers(out.getvalue()) == [ok(1, [1])]


def test_base_exception_in_a_batch_writes_nothing(impl: ModuleType) -> None:
    def handler(method: str, params: Any) -> Any:
        if method == "stop":
            raise KeyboardInterrupt
        return params

    batch = b"[" + request("m", [1], id=1).rstrip() + b"," + request("stop", id=2).rstrip() + b"]\n"
    transport, out = transport_for(impl, batch)
    with pytest.raises(KeyboardInterrupt):
        transport.serve(handler)
    assert out.getvalue() == b""


# --- Notifications ------------------------------------------------------------------------------


def test_notification_gets_no_reply(impl: ModuleType) -> None:
    calls = []
    out = served(impl, request("n", [1], id=...) + request("n", id=...), lambda *a: calls.append(a) or "ignored")
    assert out == b""
    assert calls == [("n", [1]), ("n", None)]


def test_failing_notification_is_silent_and_logged_at_error(impl: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="rpcwire")
    out = served(impl, request("boom", id=...) + request("m", [2], id=2), echo)
    assert answers(out) == [ok(2, [2])]
    errors = [r for r in caplog.records if r.name == "rpcwire" and r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert errors[0].exc_info is not None
    assert isinstance(errors[0].exc_info[1], ValueError)
    assert str(errors[0].exc_info[1]) == "boom"


def test_failing_notification_with_json_rpc_error_is_logged_at_debug(
    impl: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="rpcwire")
    out = served(impl, request("missing", id=...), echo)
    assert out == b""
    records = [r for r in caplog.records if r.name == "rpcwire" and r.levelno > logging.NOTSET]
    assert [r.levelno for r in records] == [logging.DEBUG]


def test_notification_with_unencodable_result_is_silent(impl: ModuleType) -> None:
    assert served(impl, request("n", id=...), lambda m, p: {1, 2}) == b""


# --- Encoding -----------------------------------------------------------------------------------


def test_non_ascii_is_written_as_utf8(impl: ModuleType) -> None:
    out = served(impl, request("m", ["é", "😀", "中文", "\u2028"], id=1), echo)
    assert out == '{"jsonrpc":"2.0","id":1,"result":["é","😀","中文","\u2028"]}\n'.encode()


@pytest.mark.parametrize(
    ("result", "exception", "detail"),
    [
        ({1, 2}, "TypeError", "Object of type set is not JSON serializable"),
        (object(), "TypeError", "Object of type object is not JSON serializable"),
        (b"bytes", "TypeError", "Object of type bytes is not JSON serializable"),
        ([1, complex(1, 2)], "TypeError", "Object of type complex is not JSON serializable"),
        (float("nan"), "ValueError", "Out of range float values are not JSON compliant"),
        ({"a": [float("inf")]}, "ValueError", "Out of range float values are not JSON compliant"),
        (-float("inf"), "ValueError", "Out of range float values are not JSON compliant"),
    ],
    ids=["set", "object", "bytes", "complex", "nan", "inf", "-inf"],
)
def test_unencodable_result_is_internal_error_for_same_id(
    impl: ModuleType, result: Any, exception: str, detail: str
) -> None:
    def handler(method: str, params: Any) -> Any:
        return result if method == "bad" else params

    out = serve_lines(impl, request("bad", id="x") + request("m", [2], id=2), handler)
    data = {"exception": exception, "detail": detail}
    assert out == [err("x", -32603, "Internal error", data), ok(2, [2])]


def test_unencodable_dict_key_is_type_error(impl: ModuleType) -> None:
    [answer] = serve_lines(impl, request("m", id=1), lambda m, p: {(1, 2): "tuple key"})
    assert answer["id"] == 1
    assert answer["error"]["code"] == -32603
    assert answer["error"]["data"]["exception"] == "TypeError"


def test_self_referencing_result_is_circular_reference_error(impl: ModuleType) -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    cyclic: dict[str, Any] = {}
    cyclic["me"] = cyclic
    results = {"list": loop, "dict": cyclic}
    out = serve_lines(impl, request("list", id=1) + request("dict", id=2), lambda m, p: results[m])
    data = {"exception": "ValueError", "detail": "Circular reference detected"}
    assert out == [err(1, -32603, "Internal error", data), err(2, -32603, "Internal error", data)]


def test_shared_but_not_circular_structures_are_fine(impl: ModuleType) -> None:
    shared = [1, 2]
    assert serve_lines(impl, request("m", id=1), lambda m, p: [shared, shared, {"a": shared}]) == [
        ok(1, [[1, 2], [1, 2], {"a": [1, 2]}])
    ]


def test_unencodable_error_data_is_internal_error(impl: ModuleType) -> None:
    def handler(method: str, params: Any) -> Any:
        raise rpcwire.InvalidParams(data={1, 2})

    out = serve_lines(impl, request("m", id=1), handler)
    data = {"exception": "TypeError", "detail": "Object of type set is not JSON serializable"}
    assert out == [err(1, -32603, "Internal error", data)]


def test_dict_keys_become_strings_like_json_dumps(impl: ModuleType) -> None:
    result = [{7: "a"}, {2.5: "b"}, {True: "c"}, {False: "d"}, {None: "e"}, {1e16: "f"}, {-0.0: "g"}, {"s": "h"}]
    result.append({1: "one", "1": "string one", 2: "two"})
    out = served(impl, request("m", id=1), lambda m, p: result)
    assert out == compact({"jsonrpc": "2.0", "id": 1, "result": result}) + b"\n"
    assert out == (
        b'{"jsonrpc":"2.0","id":1,"result":[{"7":"a"},{"2.5":"b"},{"true":"c"},{"false":"d"},{"null":"e"},'
        b'{"1e+16":"f"},{"-0.0":"g"},{"s":"h"},{"1":"one","1":"string one","2":"two"}]}\n'
    )


def test_tuples_and_subclasses_become_arrays_and_objects(impl: ModuleType) -> None:
    point = namedtuple("point", "x y")

    class MyList(list):  # type: ignore[type-arg]
        pass

    class MyDict(dict):  # type: ignore[type-arg]
        pass

    result = [(1, 2), point(3, 4), MyList([5]), MyDict(a=6), OrderedDict([("z", 1), ("a", 2)]), ()]
    out = served(impl, request("m", id=1), lambda m, p: result)
    assert out == b'{"jsonrpc":"2.0","id":1,"result":[[1,2],[3,4],[5],{"a":6},{"z":1,"a":2},[]]}\n'


def test_dict_subclass_is_encoded_through_items(impl: ModuleType) -> None:
    class Sorted(dict):  # type: ignore[type-arg]
        def items(self) -> Any:
            return sorted(super().items())

    out = served(impl, request("m", id=1), lambda m, p: Sorted(b=1, a=2))
    assert out == b'{"jsonrpc":"2.0","id":1,"result":{"a":2,"b":1}}\n'


def test_scalar_subclasses(impl: ModuleType) -> None:
    class Color(enum.IntEnum):
        RED = 1

    class Name(str, enum.Enum):
        ADA = "ada"

    class Loud(str):
        def __str__(self) -> str:
            return "LOUD"

    class Weird(float):
        def __repr__(self) -> str:
            return "weird"

    result = [Color.RED, Name.ADA, Loud("quiet"), Weird(2.5), True, False]
    out = served(impl, request("m", id=1), lambda m, p: result)
    assert out == b'{"jsonrpc":"2.0","id":1,"result":[1,"ada","quiet",2.5,true,false]}\n'


def test_dict_results_keep_iteration_order(impl: ModuleType) -> None:
    result = {"b": 1, "a": 2, "c": {"z": 0, "y": 1}}
    assert (
        served(impl, request("m", id=1), lambda m, p: result)
        == b'{"jsonrpc":"2.0","id":1,"result":{"b":1,"a":2,"c":{"z":0,"y":1}}}\n'
    )


@needs_int_digit_limit
def test_int_result_up_to_the_digit_limit_is_written_in_decimal(impl: ModuleType) -> None:
    """'int ... in decimal, up to sys.get_int_max_str_digits()'; longer is json.dumps's ValueError."""
    limit = sys.get_int_max_str_digits()
    out = served(impl, request("m", id=1), lambda m, p: -(10 ** (limit - 1)))
    assert out == b'{"jsonrpc":"2.0","id":1,"result":-1' + b"0" * (limit - 1) + b"}\n"
    out = served(impl, request("m", id=2), lambda m, p: 10 ** (limit + 10))
    (answer,) = answers(out)
    assert answer["id"] == 2
    assert answer["error"]["code"] == -32603
    assert answer["error"]["data"]["exception"] == "ValueError"
    assert str(limit) in answer["error"]["data"]["detail"]


def test_lone_surrogate_result_is_escaped(impl: ModuleType) -> None:
    out = served(impl, request("m", id=1), lambda m, p: {"\udc80k": ["x\ud800y", "\udfff"]})
    assert out == b'{"jsonrpc":"2.0","id":1,"result":{"\\udc80k":["x\\ud800y","\\udfff"]}}\n'


def test_control_characters_are_escaped(impl: ModuleType) -> None:
    text = "".join(chr(c) for c in range(0x20)) + '"\\/\x7f'
    out = served(impl, request("m", id=1), lambda m, p: text)
    expected = (
        r'"\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f'
        r"\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f\"\\/"
        '\x7f"'
    )
    assert out == b'{"jsonrpc":"2.0","id":1,"result":' + expected.encode() + b"}\n"


# --- Progress from inside a handler -------------------------------------------------------------


def test_notifications_written_by_the_handler_come_first(impl: ModuleType) -> None:
    transport, out = transport_for(impl, request("long", id=1) + request("m", [2], id=2))

    def handler(method: str, params: Any) -> Any:
        if method == "long":
            transport.write_notification("progress", {"done": 0.5})
            transport.write_notification("progress", {"done": 1.0})
            return "finished"
        return params

    impl.serve(handler, transport)
    assert answers(out.getvalue()) == [
        {"jsonrpc": "2.0", "method": "progress", "params": {"done": 0.5}},
        {"jsonrpc": "2.0", "method": "progress", "params": {"done": 1.0}},
        ok(1, "finished"),
        ok(2, [2]),
    ]


def test_progress_inside_a_batch_comes_before_the_batch_line(impl: ModuleType) -> None:
    batch = b"[" + b",".join(request("step", [i], id=i).rstrip() for i in range(3)) + b"]\n"
    transport, out = transport_for(impl, batch)

    def handler(method: str, params: Any) -> Any:
        transport.write_notification("progress", params)
        return params[0] * 10

    impl.serve(handler, transport)
    assert answers(out.getvalue()) == [
        {"jsonrpc": "2.0", "method": "progress", "params": [0]},
        {"jsonrpc": "2.0", "method": "progress", "params": [1]},
        {"jsonrpc": "2.0", "method": "progress", "params": [2]},
        [ok(0, 0), ok(1, 10), ok(2, 20)],
    ]


# --- Batches ------------------------------------------------------------------------------------


def test_mixed_batch_answers_only_requests_in_order(impl: ModuleType) -> None:
    entries = [
        request("m", [1], id=1),
        request("n", [2], id=...),
        b'{"jsonrpc":"2.0","method":5,"id":"bad"}',
        request("missing", id="mm"),
        request("boom", id=...),
        b"42",
        request("boom", id=None),
        request("m", {"k": 3}, id=3),
    ]
    line = b"[" + b",".join(e.rstrip() for e in entries) + b"]\n"
    assert serve_lines(impl, line) == [
        [
            ok(1, [1]),
            err("bad", -32600, "Invalid Request"),
            err("mm", -32601, "Method not found"),
            INVALID_REQUEST,
            err(None, -32603, "Internal error", {"exception": "ValueError", "detail": "boom"}),
            ok(3, {"k": 3}),
        ]
    ]


def test_all_notification_batch_is_silent(impl: ModuleType) -> None:
    calls = []
    line = b"[" + request("a", [1], id=...).rstrip() + b"," + request("missing", id=...).rstrip() + b"]\n"
    assert served(impl, line, lambda m, p: calls.append(m)) == b""
    assert calls == ["a", "missing"]


@pytest.mark.parametrize("line", [b"[]", b"[ ]", b" [\t] ", b"[\r]"])
def test_empty_batch_is_one_invalid_request_object(impl: ModuleType, line: bytes) -> None:
    out = served(impl, line + b"\n", echo)
    assert out == b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}\n'


def test_batch_of_invalid_entries(impl: ModuleType) -> None:
    assert serve_lines(impl, b'[1, "x", null, [], [1], {}]\n') == [[INVALID_REQUEST] * 6]


def test_single_entry_batch_answers_with_an_array(impl: ModuleType) -> None:
    assert serve_lines(impl, b"[" + request("m", [1], id=1).rstrip() + b"]\n") == [[ok(1, [1])]]


def test_broken_batch_json_is_one_parse_error(impl: ModuleType) -> None:
    line = b'[{"jsonrpc":"2.0","method":"m","id":1},{"jsonrpc":"2.0","method"]\n'
    calls = []
    assert serve_lines(impl, line, lambda m, p: calls.append(m)) == [PARSE_ERROR]
    assert calls == []


def test_unencodable_result_inside_a_batch(impl: ModuleType) -> None:
    line = b"[" + request("bad", id=1).rstrip() + b"," + request("m", [2], id=2).rstrip() + b"]\n"
    out = serve_lines(impl, line, lambda m, p: {1, 2} if m == "bad" else p)
    data = {"exception": "TypeError", "detail": "Object of type set is not JSON serializable"}
    assert out == [[err(1, -32603, "Internal error", data), ok(2, [2])]]


def test_duplicate_ids_in_a_batch_are_each_answered(impl: ModuleType) -> None:
    line = b"[" + request("m", [1], id=1).rstrip() + b"," + request("m", [2], id=1).rstrip() + b"]\n"
    assert serve_lines(impl, line) == [[ok(1, [1]), ok(1, [2])]]


# --- The write_* methods ------------------------------------------------------------------------


def test_write_response(impl: ModuleType) -> None:
    transport, out = transport_for(impl, b"")
    transport.write_response(1, {"a": [1, "é"]})
    transport.write_response("s", None)
    transport.write_response(None, False)
    transport.write_response(2**80, (1, 2))
    assert answers(out.getvalue()) == [ok(1, {"a": [1, "é"]}), ok("s", None), ok(None, False), ok(2**80, [1, 2])]


def test_write_error(impl: ModuleType) -> None:
    transport, out = transport_for(impl, b"")
    transport.write_error(1, -32001, "quota")
    transport.write_error(None, -32600, "Invalid Request", None)
    transport.write_error("x", -32602, "bad", data={"field": "a"})
    transport.write_error(2, -32000, "zero", data=0)
    lines = answers(out.getvalue())
    assert lines == [
        err(1, -32001, "quota"),
        INVALID_REQUEST,
        err("x", -32602, "bad", {"field": "a"}),
        {"jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": "zero", "data": 0}},
    ]
    assert "data" not in lines[0]["error"]
    assert "data" not in lines[1]["error"]


def test_write_notification(impl: ModuleType) -> None:
    transport, out = transport_for(impl, b"")
    transport.write_notification("ping")
    transport.write_notification("progress", {"pct": 50})
    transport.write_notification("log", ["a", "é"])
    transport.write_notification("empty", [])
    lines = answers(out.getvalue())
    assert lines == [
        {"jsonrpc": "2.0", "method": "ping"},
        {"jsonrpc": "2.0", "method": "progress", "params": {"pct": 50}},
        {"jsonrpc": "2.0", "method": "log", "params": ["a", "é"]},
        {"jsonrpc": "2.0", "method": "empty", "params": []},
    ]
    assert "id" not in lines[0]
    assert "params" not in lines[0]
    assert all("id" not in line for line in lines)


@pytest.mark.parametrize(
    ("call", "exc_type"),
    [
        (lambda t: t.write_response(1, {1, 2}), TypeError),
        (lambda t: t.write_response(1, float("nan")), ValueError),
        (lambda t: t.write_response(1, [float("inf")]), ValueError),
        (lambda t: t.write_error(1, -32000, "m", data=object()), TypeError),
        (lambda t: t.write_notification("n", {"x": {1}}), TypeError),
        (lambda t: t.write_notification("n", [float("-inf")]), ValueError),
    ],
    ids=["response-set", "response-nan", "response-inf", "error-object", "notification-set", "notification-inf"],
)
def test_write_methods_raise_on_unencodable_and_write_nothing(impl: ModuleType, call: Any, exc_type: type) -> None:
    transport, out = transport_for(impl, b"")
    with pytest.raises(exc_type):
        call(transport)
    assert out.getvalue() == b""
    transport.write_response(1, "still works")
    assert answers(out.getvalue()) == [ok(1, "still works")]


def test_write_methods_raise_on_circular_reference(impl: ModuleType) -> None:
    loop: list[Any] = []
    loop.append(loop)
    transport, out = transport_for(impl, b"")
    with pytest.raises(ValueError, match="Circular reference detected"):
        transport.write_response(1, loop)
    assert out.getvalue() == b""


def test_a_circular_container_deep_in_plain_values_is_refused_without_growing(impl: ModuleType) -> None:
    # Plain lists and dicts around it, 20 levels down (the native encoder looks for circular
    # containers only that deep), and a big plain sibling at each round of the circle.
    inner: dict[str, Any] = {"big": list(range(100_000))}
    inner["self"] = [inner]
    outer: Any = inner
    for _ in range(20):
        outer = {"level": [outer, 1.5, "x"]}
    transport, out = transport_for(impl, b"")
    with pytest.raises(ValueError, match="Circular reference detected"):
        transport.write_response(1, outer)
    assert out.getvalue() == b""


def test_keys_shared_by_many_dicts_are_written_as_json_writes_them(impl: ModuleType) -> None:
    keys = [f"k{i}" for i in range(200)] + ["", 'a"b', "\u00e9", "é", "long " * 10, "\x00"]
    value = [{keys[(i * 7 + j) % len(keys)]: [i, {keys[j]: j}] for j in range(30)} for i in range(60)]
    transport, out = transport_for(impl, b"")
    transport.write_response(1, value)
    expected = json.dumps({"jsonrpc": "2.0", "id": 1, "result": value}, ensure_ascii=False, separators=(",", ":"))
    assert out.getvalue() == expected.encode() + b"\n"


def test_a_plain_result_900_levels_deep_is_written(impl: ModuleType) -> None:
    value: Any = "end"
    for level in range(899):
        value = [value] if level % 2 else {"k": value}
    transport, out = transport_for(impl, b"")
    transport.write_response(1, value)
    assert json.loads(out.getvalue())["result"] == value


# --- parse_request ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [str, bytes])
def test_parse_request_valid(impl: ModuleType, kind: type) -> None:
    raw = '{"jsonrpc":"2.0","method":"sum","params":[1,2],"id":"é"}'
    request_, error = impl.parse_request(raw if kind is str else raw.encode())
    assert error is None
    assert isinstance(request_, rpcwire.Request)
    assert request_ == rpcwire.Request(method="sum", params=[1, 2], id="é", is_notification=False)


def test_parse_request_notification_and_null_id(impl: ModuleType) -> None:
    notification, error = impl.parse_request('{"jsonrpc":"2.0","method":"n","params":{"a":1}}')
    assert error is None
    assert notification == rpcwire.Request(method="n", params={"a": 1}, id=None, is_notification=True)
    null_id, error = impl.parse_request(b'{"jsonrpc":"2.0","method":"n","id":null}')
    assert error is None
    assert null_id == rpcwire.Request(method="n", params=None, id=None, is_notification=False)


def test_parse_request_big_id_and_whitespace(impl: ModuleType) -> None:
    req, error = impl.parse_request(b' {"jsonrpc":"2.0","method":"m","id":%d}\r\n' % 2**100)
    assert error is None
    assert req.id == 2**100
    assert type(req.id) is int


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"jsonrpc":"2.0","method":"m"', PARSE_ERROR),
        (b'{"jsonrpc":"2.0","method":"\xff"}', PARSE_ERROR),
        ("", PARSE_ERROR),
        ("  ", PARSE_ERROR),
        ('{"jsonrpc":"2.0","method":"m","params":[NaN]}', PARSE_ERROR),
        ('{"jsonrpc":"2.0","method":"m","params":' + "[" * 127 + "]" * 127 + "}", None),
        ('{"jsonrpc":"2.0","method":"m","params":' + "[" * 128 + "]" * 128 + "}", PARSE_ERROR),
        ("[" * 100_000, PARSE_ERROR),
        ('{"jsonrpc":"1.0","method":"m","id":5}', err(5, -32600, "Invalid Request")),
        ('{"jsonrpc":"2.0","method":"m","params":null,"id":"a"}', err("a", -32600, "Invalid Request")),
        ('{"jsonrpc":"2.0","method":"m","id":true}', INVALID_REQUEST),
        ('{"jsonrpc":"2.0","method":"m","id":{}}', INVALID_REQUEST),
        ('{"jsonrpc":"2.0","method":7}', INVALID_REQUEST),
        ("42", INVALID_REQUEST),
        ('[{"jsonrpc":"2.0","method":"m","id":1}]', INVALID_REQUEST),
        ("[]", INVALID_REQUEST),
    ],
    ids=[
        "truncated",
        "bad-utf8",
        "empty",
        "blank",
        "nan",
        "depth-128",
        "depth-129",
        "very-deep",
        "version",
        "params-null",
        "id-bool",
        "id-object",
        "method-int",
        "not-object",
        "batch",
        "empty-batch",
    ],
)
def test_parse_request_errors(impl: ModuleType, raw: str | bytes, expected: dict[str, Any] | None) -> None:
    request_, error = impl.parse_request(raw)
    if expected is None:
        assert error is None
        assert request_ is not None
    else:
        assert request_ is None
        assert error == expected


def test_parse_request_str_with_lone_surrogate_is_a_parse_error(impl: ModuleType) -> None:
    """A ``str`` that cannot be UTF-8 is not valid input; the contract is a tuple, not an exception."""
    assert impl.parse_request('{"jsonrpc":"2.0","method":"\ud800","id":1}') == (None, PARSE_ERROR)


def test_parse_request_escaped_surrogate_is_fine(impl: ModuleType) -> None:
    req, error = impl.parse_request(r'{"jsonrpc":"2.0","method":"\ud800","id":1}')
    assert error is None
    assert req.method == "\ud800"


# --- Shared types and the public surface -------------------------------------------------------


PUBLIC = [
    "ERR_PARSE",
    "ERR_INVALID_REQUEST",
    "ERR_METHOD_NOT_FOUND",
    "ERR_INVALID_PARAMS",
    "ERR_INTERNAL",
    "JsonRpcError",
    "MethodNotFound",
    "InvalidParams",
    "Request",
    "parse_request",
    "StdioTransport",
    "serve",
    "dispatch",
    "methods",
]


def test_public_api(impl: ModuleType) -> None:
    for name in PUBLIC:
        assert name in impl.__all__
        assert hasattr(impl, name)


def test_both_modules_share_types_and_constants() -> None:
    for name in ["JsonRpcError", "MethodNotFound", "InvalidParams", "Request"]:
        assert getattr(rpcwire.pure, name) is getattr(rpcwire, name)
    assert (
        rpcwire.ERR_PARSE,
        rpcwire.ERR_INVALID_REQUEST,
        rpcwire.ERR_METHOD_NOT_FOUND,
        rpcwire.ERR_INVALID_PARAMS,
        rpcwire.ERR_INTERNAL,
    ) == (-32700, -32600, -32601, -32602, -32603)
    for name in PUBLIC[:5]:
        assert getattr(rpcwire.pure, name) == getattr(rpcwire, name)
    assert rpcwire.DEFAULT_MAX_DEPTH == 128
    assert issubclass(rpcwire.MethodNotFound, rpcwire.JsonRpcError)
    assert issubclass(rpcwire.InvalidParams, rpcwire.JsonRpcError)
    assert issubclass(rpcwire.JsonRpcError, Exception)


def test_exception_defaults() -> None:
    assert (rpcwire.MethodNotFound().message, rpcwire.MethodNotFound().data) == ("Method not found", None)
    assert rpcwire.InvalidParams().message == "Invalid params"
    assert rpcwire.MethodNotFound.code == -32601
    assert rpcwire.InvalidParams.code == -32602
    assert str(rpcwire.InvalidParams("x")) == "x"


def test_object_keys_and_method_names_are_right_however_many_there_are(impl: ModuleType) -> None:
    # More distinct short keys and method names than the native string cache has slots, so that
    # slots are shared and overwritten, and every key comes back as it was sent.
    keys = [f"k{i}" for i in range(3000)] + ["é", "a" * 48, "a" * 49, ""]
    data = b"".join(request(f"m{i % 1500}", {key: i, "x": key}, id=i) for i, key in enumerate(keys))
    seen = []
    out = served(impl, data, lambda method, params: seen.append(method) or params)
    assert answers(out) == [ok(i, {key: i, "x": key}) for i, key in enumerate(keys)]
    assert seen == [f"m{i % 1500}" for i in range(len(keys))]


@needs_native("the native encoder's own cap on nesting (json's C encoder has none past the recursion limit)")
def test_native_refuses_results_nested_past_its_stack_whatever_the_recursion_limit() -> None:
    # With the recursion limit raised, only the encoder's own depth cap stands between a deep result
    # and a stack overflow; in a child process, so that a crash fails the test instead of pytest.
    code = """
import io, sys, rpcwire
sys.setrecursionlimit(10**7)
nested = []
for _ in range(100_000):
    nested = [nested]
out = io.BytesIO()
rpcwire.StdioTransport(io.BytesIO(b'{"jsonrpc":"2.0","id":1,"method":"m"}\\n'), out).serve(lambda m, p: nested)
sys.stdout.buffer.write(out.getvalue())
"""
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, check=False)
    assert child.returncode == 0, child.stderr.decode(errors="replace")[-2000:]
    [answer] = answers(child.stdout)
    assert answer["error"]["code"] == -32603
    assert answer["error"]["data"]["exception"] == "RecursionError"
