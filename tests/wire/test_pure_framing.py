"""Issue 19's reading members beyond ``tests/wire/test_decoder.py`` (the decoder's rules, ``_write_line``,
``_write_lines`` and ``_read_text`` on both cores): ``_has_buffered_message``/``_read_available`` on both cores,
``read_line``'s blank lines, ``_read_text`` native against pure, and ``rpcwire._pure.framing``'s own helpers
(the one ``Content-Length`` writer and framing check of the Python side, and a decoder that never holds an
over-long line)."""

from __future__ import annotations

import io
import tracemalloc
from types import ModuleType

import pytest
import rpcwire
import rpcwire.pure
from rpcwire._pure.framing import FrameDecoder, check_framing, encode_frame
from support.messages import request

CORES = {"native": rpcwire._core, "pure": rpcwire.pure}


@pytest.fixture(params=list(CORES.values()), ids=list(CORES))
def core(request: pytest.FixtureRequest) -> ModuleType:
    """The core module under test: ``rpcwire._core`` (native) or ``rpcwire.pure``."""
    return request.param


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


BODIES = [
    b"",
    b" \n\t ",
    request("m", [1]),
    b"[" + request("m", [1]).rstrip(b"\n") + b",1]",
    b'[{"jsonrpc":"2.0","method":"m","id":1e3},{"jsonrpc":"2.0","method":"n","id":-0}]',
    b"[]",
    b"{bad",
    b'  {"jsonrpc":"2.0","method":"m","params":[' + b"1," * 20 + b"1]}",
    b'{"jsonrpc":"2.0","method":"m","params":[[[[1]]]]}',
    b"  xyz" + b" " * 80,
    b"\xff",
]


@pytest.mark.parametrize("body", BODIES)
def test_read_text_agrees_between_the_cores(body: bytes) -> None:
    native, pure = (core._read_text(body, 64, 4, 1) for core in CORES.values())
    assert native == pure
    assert id_texts(native) == id_texts(pure)  # not compared by Request's ==


def id_texts(message: object) -> list[bytes | None]:
    entries = message if isinstance(message, list) else [message]
    return [getattr(entry, "id_json", None) for entry in entries]


def test_one_frame_writer_and_one_framing_check() -> None:
    assert encode_frame(b'{"a":"\xc3\xa9"}') == b'Content-Length: 10\r\n\r\n{"a":"\xc3\xa9"}'
    assert check_framing("content-length") == "content-length"
    with pytest.raises(ValueError, match=r"framing must be 'newline' or 'content-length', not 'x'"):
        check_framing("x")


@pytest.mark.parametrize("framing", ["newline", "content-length"])
def test_the_pure_decoder_never_holds_an_over_long_message(framing: str) -> None:
    decoder = FrameDecoder(framing, max_message_bytes=10)  # type: ignore[arg-type]
    if framing == "content-length":
        decoder.feed(b"Content-Length: 100000\r\n\r\n")
        assert decoder.next() is not None  # refused as soon as the header block ends
    decoder.feed(b"y" * 100)
    assert decoder.next() is None
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(1000):
            decoder.feed(b"y" * 100)
            assert decoder.next() is None
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 10_000  # what it was fed is 100,000 bytes: none of it kept


@pytest.mark.parametrize("framing", ["newline", "content-length"])
@pytest.mark.parametrize("data", [5, [49, 10], "1\n"], ids=["int", "list", "str"])
def test_the_decoder_takes_only_bytes_like_objects(core: ModuleType, framing: str, data: object) -> None:
    decoder = core.FrameDecoder(framing)
    with pytest.raises(TypeError):
        decoder.feed(data)
    decoder.close()
    assert decoder.next() is None  # nothing of it was taken
