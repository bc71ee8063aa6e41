"""The framing decoder and the transport members of issue 19, on both cores: ``FrameDecoder`` (sans-IO),
``_write_lines``, ``_write_line`` (one message), ``_has_buffered_message``, ``_read_text``, ``encode_frame``.

Where the native core lacks a member (built on its own branch), its case is skipped, naming the member.
"""

from __future__ import annotations

import io
import json
from types import ModuleType
from typing import Any

import pytest
import rpcwire
import rpcwire.pure
from conftest import echo, request
from rpcwire._types import Refused
from rpcwire.pure.framing import check_framing, encode_frame

CORES = {"native": rpcwire._core, "pure": rpcwire.pure}
PARSE_ERROR = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}'
INVALID_REQUEST = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}'


@pytest.fixture(params=list(CORES.values()), ids=list(CORES))
def core(request: pytest.FixtureRequest) -> ModuleType:
    """The core module under test: ``rpcwire._core`` (native) or ``rpcwire.pure``."""
    return request.param


def needs(core: ModuleType, member: str, owner: Any = None) -> None:
    if not hasattr(core if owner is None else owner, member):
        pytest.skip(f"{core.__name__} has no {member} yet")


def drain(decoder: Any) -> list[Any]:
    out = []
    while (message := decoder.next()) is not None:
        out.append(message if isinstance(message, bytes) else (message.reason, message.answer))
    return out


def decode(core: ModuleType, data: bytes, piece: int, **options: Any) -> list[Any]:
    """What a decoder hands out for ``data`` fed ``piece`` bytes at a time, then closed."""
    needs(core, "FrameDecoder")
    decoder = core.FrameDecoder(**options)
    out = []
    for start in range(0, len(data), piece):
        decoder.feed(data[start : start + piece])
        out += drain(decoder)
    decoder.close()
    return out + drain(decoder)


# --- newline framing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("piece", [1, 2, 5, 1000])
def test_lines_are_cut_at_newline_with_blank_lines_skipped(core: ModuleType, piece: int) -> None:
    data = b'{"a":1}\r\n\n  \t\r\n[2]\nlast\r'
    assert decode(core, data, piece) == [b'{"a":1}', b"[2]", b"last"]


@pytest.mark.parametrize("piece", [1, 3, 64])
def test_an_over_long_line_is_refused_by_its_first_significant_byte(core: ModuleType, piece: int) -> None:
    reason = "a line longer than max_message_bytes (8)"
    data = b"  {0123456789}\n" + b"x" * 20 + b"\n" + b"\t" * 30 + b"\n[1]\n" + b"[" * 9
    assert decode(core, data, piece, max_message_bytes=8) == [
        (reason, INVALID_REQUEST),
        (reason, PARSE_ERROR),
        (reason, PARSE_ERROR),  # blank, but over the limit: refused, not skipped
        b"[1]",
        (reason, INVALID_REQUEST),  # the last line, over the limit, cut by the end of input
    ]


def test_the_limit_leaves_room_for_a_carriage_return(core: ModuleType) -> None:
    assert decode(core, b"12345678\r\n123456789\r\n", 1, max_message_bytes=8) == [
        b"12345678",
        ("a line longer than max_message_bytes (8)", PARSE_ERROR),
    ]


def test_an_over_long_line_is_never_held_whole() -> None:
    decoder = rpcwire.pure.FrameDecoder(max_message_bytes=10)
    for _ in range(1000):
        decoder.feed(b"y" * 100)
        assert decoder.next() is None
        assert len(decoder._data) <= 100
    decoder.feed(b"\n{}\n")
    assert drain(decoder) == [("a line longer than max_message_bytes (10)", PARSE_ERROR), b"{}"]


def test_nothing_comes_out_before_the_newline_or_the_end(core: ModuleType) -> None:
    needs(core, "FrameDecoder")
    decoder = core.FrameDecoder()
    decoder.feed(b'{"a":')
    assert decoder.next() is None
    decoder.feed(b"1}")
    assert decoder.next() is None
    decoder.close()
    assert decoder.next() == b'{"a":1}'
    assert decoder.next() is None


# --- Content-Length framing ----------------------------------------------------------------------------


@pytest.mark.parametrize("piece", [1, 4, 1000])
def test_frames_with_resync_and_an_oversized_one(core: ModuleType, piece: int) -> None:
    data = (
        b"content-length: 2\r\n\r\n{}"
        + b"\r\ngarbage\r\n"
        + b"Content-Length: 20\r\nContent-Type: x\r\n\r\n"
        + b"0123456789" * 2
        + b"Content-Length:3\n\n[1]"
        + b"Content-Length: 9\r\n\r\n[1"
    )
    assert decode(core, data, piece, framing="content-length", max_message_bytes=10) == [
        b"{}",
        ("a header line that is not 'Name: value' or a bad Content-Length", PARSE_ERROR),
        ("a Content-Length (20) over max_message_bytes (10)", INVALID_REQUEST),
        b"[1]",
        ("a frame cut short by the end of input", PARSE_ERROR),
    ]


def test_an_empty_frame_is_a_message_and_a_blank_line_between_frames_is_not(core: ModuleType) -> None:
    data = b"\r\nContent-Length: 0\r\n\r\n\r\n\r\nContent-Length: 1\r\n\r\n1"
    assert decode(core, data, 3, framing="content-length") == [b"", b"1"]


def test_the_decoder_checks_its_framing_and_limit(core: ModuleType) -> None:
    needs(core, "FrameDecoder")
    with pytest.raises(ValueError, match="framing must be 'newline' or 'content-length'"):
        core.FrameDecoder("lines")
    with pytest.raises(ValueError, match="max_message_bytes must be at least 1"):
        core.FrameDecoder(max_message_bytes=0)


def test_one_frame_writer_and_one_framing_check() -> None:
    assert encode_frame(b'{"a":"\xc3\xa9"}') == b'Content-Length: 10\r\n\r\n{"a":"\xc3\xa9"}'
    assert check_framing("content-length") == "content-length"
    with pytest.raises(ValueError, match=r"framing must be 'newline' or 'content-length', not 'x'"):
        check_framing("x")


# --- the transport: several messages in one write, one message per _write_line --------------------------------


class Recording(io.BytesIO):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, data: Any) -> int:
        self.calls.append("write")
        return super().write(data)

    def flush(self) -> None:
        self.calls.append("flush")


@pytest.mark.parametrize("framing", ["newline", "content-length"])
def test_write_lines_frames_each_message_in_one_write(core: ModuleType, framing: str) -> None:
    needs(core, "_write_lines", core.StdioTransport)
    out = Recording()
    transport = core.StdioTransport(io.BytesIO(), out, framing=framing)
    transport._write_lines([b"[1]", b'{"a":2}'])
    framed = [b"[1]\n", b'{"a":2}\n'] if framing == "newline" else [encode_frame(b"[1]"), encode_frame(b'{"a":2}')]
    assert out.getvalue() == b"".join(framed)
    assert out.calls == ["write", "flush"]


def test_write_line_writes_one_frame_whatever_its_bytes(core: ModuleType) -> None:
    needs(core, "_write_lines", core.StdioTransport)  # the contract's _write_line: no split on "\n"
    out = io.BytesIO()
    core.StdioTransport(io.BytesIO(), out, framing="content-length")._write_line(b"[1,\n2]")
    assert out.getvalue() == encode_frame(b"[1,\n2]")


# --- the transport: what is buffered --------------------------------------------------------------------------


@pytest.mark.parametrize("framing", ["newline", "content-length"])
def test_has_buffered_message_says_whether_a_read_would_wait(core: ModuleType, framing: str) -> None:
    one, two = request("a", [1]).rstrip(b"\n"), request("b", [2]).rstrip(b"\n")
    frame = (lambda m: m + b"\n") if framing == "newline" else encode_frame
    transport = core.StdioTransport(io.BytesIO(frame(one) + frame(two)), io.BytesIO(), framing=framing)
    assert not transport._has_buffered_message()  # nothing read yet
    transport._read_available()  # one read: both messages
    assert transport._has_buffered_message()
    assert transport.read_line() == one
    assert transport._has_buffered_message()
    assert transport.read_line() == two
    assert not transport._has_buffered_message()
    transport._read_available()  # the end of input
    assert transport._has_buffered_message()
    assert transport.read_line() is None


def test_read_line_keeps_blank_lines_and_read_message_skips_them(core: ModuleType) -> None:
    data = b"\n \r\n" + request("m", [1])
    transport = core.StdioTransport(io.BytesIO(data), io.BytesIO())
    assert [transport.read_line(), transport.read_line()] == [b"", b" "]
    assert isinstance(transport._read_message(), rpcwire.Request)
    transport = core.StdioTransport(io.BytesIO(data), io.BytesIO())
    assert isinstance(transport._read_message(), rpcwire.Request)
    assert transport._read_message() is None


# --- a whole text: _read_text is what dispatch reads -----------------------------------------------------------


BODIES = [
    b"",
    b" \n\t ",
    request("m", [1]),
    b"[" + request("m", [1]).rstrip(b"\n") + b",1]",
    b"[]",
    b"{bad",
    b'  {"jsonrpc":"2.0","method":"m","params":[' + b"1," * 20 + b"1]}",
    b"  xyz" + b" " * 80,
]


@pytest.mark.parametrize("body", BODIES)
def test_read_text_is_what_dispatch_answers(core: ModuleType, body: bytes) -> None:
    needs(core, "_read_text")
    message = core._read_text(body, 64, 4, 1)
    answer = core.dispatch(body, echo, max_message_bytes=64, max_depth=4, max_batch=1)
    if isinstance(message, bytes):
        assert answer == message
    else:
        assert answer is not None and (isinstance(message, list) == answer.startswith(b"["))


def test_read_text_agrees_between_the_cores() -> None:
    needs(rpcwire._core, "_read_text")
    for body in BODIES:
        native, pure = (core._read_text(body, 64, 4, 1) for core in CORES.values())
        assert native == pure, body


def test_refused_is_what_the_transport_answers() -> None:
    refusal = rpcwire.pure.envelope.too_long(b"{", 5)
    assert refusal == Refused("a line longer than max_message_bytes (5)", INVALID_REQUEST)
    assert json.loads(refusal.answer)["error"]["code"] == -32600
