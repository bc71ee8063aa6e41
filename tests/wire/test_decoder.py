"""The core's ``FrameDecoder`` (framing without I/O), ``_write_line``/``_write_lines`` and ``_read_text``.

Every case runs on both cores (``rpcwire._rpcwire`` and ``rpcwire.pure``): the decoder must hand out, fed in
pieces of any size, exactly what a ``StdioTransport`` reading the same bytes sees (the same messages, the
same reasons, the same answers and log records for what it drops).
"""

from __future__ import annotations

import io
import itertools
import logging
import random
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
import rpcwire
import rpcwire.pure
from rpcwire._types import Refused
from support.messages import INVALID_REQUEST, PARSE_ERROR, compact

CORES = {"native": rpcwire._core, "pure": rpcwire.pure}


@pytest.fixture(params=list(CORES.values()), ids=list(CORES))
def core(request: pytest.FixtureRequest) -> ModuleType:
    """A core module; one without ``FrameDecoder`` yet (``rpcwire.pure`` before its twin lands) is skipped."""
    module: ModuleType = request.param
    if not hasattr(module, "FrameDecoder"):
        pytest.skip(f"{module.__name__} has no FrameDecoder yet")
    return module


def answer_of(error: dict[str, Any]) -> bytes:
    return compact(error)


REQUEST_1 = b'{"jsonrpc":"2.0","method":"a","id":1}'
NOTIFY_B = b'{"jsonrpc":"2.0","method":"b","params":[1,2]}'

# (stream, max_message_bytes, what the decoder hands out: bytes, or ("refused", reason, answer))
LINE_CASES: dict[str, tuple[bytes, int, list[Any]]] = {
    "plain": (REQUEST_1 + b"\n" + NOTIFY_B + b"\n", 100, [REQUEST_1, NOTIFY_B]),
    "crlf and a last line without newline": (REQUEST_1 + b"\r\n" + NOTIFY_B + b"\r", 100, [REQUEST_1, NOTIFY_B]),
    "blank lines skipped": (b"\n \t\r\n\r\n" + REQUEST_1 + b"\n  \n\n", 100, [REQUEST_1]),
    "only a carriage return before newline is dropped": (b"a\r\r\nb\rc\n", 100, [b"a\r", b"b\rc"]),
    "unicode line separators are not breaks": ("x\u2028y\u0085z\n".encode(), 100, ["x\u2028y\u0085z".encode()]),
    "not json is handed out as it is": (b"garbage\n[1,\n", 100, [b"garbage", b"[1,"]),
    "a line at the limit": (b"x" * 10 + b"\r\n" + b"y" * 10, 10, [b"x" * 10, b"y" * 10]),
    "over-long lines": (
        b"x" * 11 + b"\n  {" + b"1" * 30 + b"\n [" + b"2" * 9 + b"\n" + b" " * 40 + b"\nok\n" + b"\t{" + b"3" * 20,
        10,
        [
            ("refused", "a line longer than max_message_bytes (10)", answer_of(PARSE_ERROR)),
            ("refused", "a line longer than max_message_bytes (10)", answer_of(INVALID_REQUEST)),
            ("refused", "a line longer than max_message_bytes (10)", answer_of(INVALID_REQUEST)),
            ("refused", "a line longer than max_message_bytes (10)", answer_of(PARSE_ERROR)),
            b"ok",
            ("refused", "a line longer than max_message_bytes (10)", answer_of(INVALID_REQUEST)),
        ],
    ),
    "an over-long line whose json starts after the limit": (
        b" " * 30 + b"[1]\n",
        10,
        [
            ("refused", "a line longer than max_message_bytes (10)", answer_of(INVALID_REQUEST)),
        ],
    ),
    "empty": (b"", 10, []),
}

BAD_HEADER = "a header line that is not 'Name: value' or a bad Content-Length"
FRAME_CASES: dict[str, tuple[bytes, int, list[Any]]] = {
    "frames in any case and order": (
        b"Content-Length: 2\r\n\r\n{}content-type: x\r\nCONTENT-LENGTH:3\r\n\r\n[1]\r\n\n"
        b"Content-Length:  1 \n\n7Content-Length: 0\r\nX-Other: y\r\n\r\n",
        100,
        [b"{}", b"[1]", b"7", b""],
    ),
    "a body with newlines is one message": (b"Content-Length: 6\r\n\r\n[1,\n2]", 100, [b"[1,\n2]"]),
    "bad headers resync": (
        b'{"jsonrpc":"2.0"}\nContent-Length: 2\r\n\r\n{}Content-Length: x1\r\n\r\n{}'
        b"content-length: 2\r\nContent-Length: 3\r\n\r\n{}!Content-Length: 1\r\n\r\n1",
        100,
        [
            ("refused", BAD_HEADER, answer_of(PARSE_ERROR)),
            b"{}",
            ("refused", BAD_HEADER, answer_of(PARSE_ERROR)),
            ("refused", BAD_HEADER, answer_of(PARSE_ERROR)),
            b"1",
        ],
    ),
    "missing and over-long lengths": (
        b'Content-Type: a\r\n\r\n{"x":1}Content-Length: 12\r\n\r\n{"a":123456}Content-Length: 2\r\n\r\n{}',
        10,
        [
            ("refused", "a header block without Content-Length", answer_of(PARSE_ERROR)),
            ("refused", "a Content-Length (12) over max_message_bytes (10)", answer_of(INVALID_REQUEST)),
            b"{}",
        ],
    ),
    "headers too long": (
        b"X-Long: " + b"a" * 9000 + b"\r\n\r\nContent-Length: 1\r\n\r\n1",
        10,
        [("refused", "a header block longer than 8192 bytes", answer_of(PARSE_ERROR)), b"1"],
    ),
    "a body cut by the end of input": (
        b"Content-Length: 1\r\n\r\n1Content-Length: 5\r\n\r\n{}",
        10,
        [b"1", ("refused", "a frame cut short by the end of input", answer_of(PARSE_ERROR))],
    ),
    "headers cut by the end of input": (
        b"Content-Len",
        10,
        [("refused", "a frame cut short by the end of input", answer_of(PARSE_ERROR))],
    ),
    "blank lines only": (b"\r\n \r\n", 10, []),
}


def pieces(data: bytes, sizes: Iterator[int]) -> Iterator[bytes]:
    at = 0
    while at < len(data):
        size = next(sizes)
        yield data[at : at + size]
        at += size


def splittings(data: bytes) -> Iterator[tuple[str, list[bytes]]]:
    """The stream whole, in pieces of 1, 2, 3 and 7 bytes, and split at random (seeded) places."""
    yield "whole", [data]
    for size in (1, 2, 3, 7):
        yield f"{size} bytes", list(pieces(data, itertools.repeat(size)))
    rng = random.Random(len(data))
    for attempt in range(12):
        yield f"random {attempt}", list(pieces(data, iter(lambda: rng.randint(1, 64), None)))


def decode(core: ModuleType, framing: str, max_message_bytes: int, chunks: list[bytes]) -> list[Any]:
    """Feed ``chunks`` (taking what is ready after each, and an empty feed between), then close."""
    decoder = core.FrameDecoder(framing, max_message_bytes=max_message_bytes)
    got: list[Any] = []

    def take() -> None:
        for _ in range(10_000):
            item = decoder.next()
            if item is None:
                return
            got.append(item)
        raise AssertionError("the decoder never said it needs more input")

    for chunk in chunks:
        decoder.feed(chunk)
        take()
        decoder.feed(b"")
        take()
    decoder.close()
    take()
    assert decoder.next() is None
    return got


def plain(items: list[Any]) -> list[Any]:
    """Refused as a comparable tuple; bytes as they are (checked to be ``bytes``, not a ``bytearray``)."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, Refused):
            out.append(("refused", item.reason, item.answer))
        else:
            assert type(item) is bytes, type(item)
            out.append(item)
    return out


@pytest.mark.parametrize("case", list(LINE_CASES), ids=list(LINE_CASES))
def test_newline_framing_in_pieces_of_every_size(core: ModuleType, case: str) -> None:
    stream, limit, expected = LINE_CASES[case]
    for how, chunks in splittings(stream):
        assert plain(decode(core, "newline", limit, chunks)) == expected, how


@pytest.mark.parametrize("case", list(FRAME_CASES), ids=list(FRAME_CASES))
def test_content_length_framing_in_pieces_of_every_size(core: ModuleType, case: str) -> None:
    stream, limit, expected = FRAME_CASES[case]
    for how, chunks in splittings(stream):
        assert plain(decode(core, "content-length", limit, chunks)) == expected, how


def test_the_default_is_newline_framing_and_a_line_waits_for_its_newline(core: ModuleType) -> None:
    decoder = core.FrameDecoder()
    decoder.feed(b'{"a":')
    assert decoder.next() is None
    decoder.feed(bytearray(b"1}\r"))
    assert decoder.next() is None  # the \r may be followed by \n: not yet a line
    decoder.feed(memoryview(b"\n[2]"))
    assert decoder.next() == b'{"a":1}'
    assert decoder.next() is None
    decoder.close()
    assert decoder.next() == b"[2]"
    assert decoder.next() is None
    decoder.close()  # twice: nothing changes
    assert decoder.next() is None


def test_close_with_a_partial_line_or_frame(core: ModuleType) -> None:
    decoder = core.FrameDecoder("newline", max_message_bytes=4)
    decoder.feed(b"ab\ncd")
    assert decoder.next() == b"ab"
    assert decoder.next() is None
    decoder.close()
    assert decoder.next() == b"cd"
    assert decoder.next() is None

    decoder = core.FrameDecoder("newline", max_message_bytes=4)
    decoder.feed(b"  [123456")  # over the limit, cut by the end: refused once
    assert decoder.next() is None
    decoder.close()
    assert plain([decoder.next()]) == [
        ("refused", "a line longer than max_message_bytes (4)", answer_of(INVALID_REQUEST))
    ]
    assert decoder.next() is None

    decoder = core.FrameDecoder("content-length")
    decoder.feed(b"Content-Length: 9\r\n\r\n{}")
    assert decoder.next() is None
    decoder.close()
    assert plain([decoder.next()]) == [("refused", "a frame cut short by the end of input", answer_of(PARSE_ERROR))]
    assert decoder.next() is None


def test_an_over_long_message_is_refused_before_its_end_and_never_held(core: ModuleType) -> None:
    decoder = core.FrameDecoder("content-length", max_message_bytes=10)
    decoder.feed(b"Content-Length: 999999999999\r\n\r\n")
    refused = decoder.next()
    assert isinstance(refused, Refused)
    assert refused.answer == answer_of(INVALID_REQUEST)
    for _ in range(200):
        decoder.feed(b"x" * 1000)
        assert decoder.next() is None
    decoder = core.FrameDecoder("newline", max_message_bytes=10)
    for _ in range(200):
        decoder.feed(b"[" * 1000)
        assert decoder.next() is None
    decoder.feed(b"\nok\n")
    assert plain([decoder.next(), decoder.next()]) == [
        ("refused", "a line longer than max_message_bytes (10)", answer_of(INVALID_REQUEST)),
        b"ok",
    ]
    assert decoder.next() is None


def test_arguments_are_checked(core: ModuleType) -> None:
    with pytest.raises(ValueError, match="framing must be 'newline' or 'content-length'"):
        core.FrameDecoder("lines")
    with pytest.raises(ValueError, match="max_message_bytes must be at least 1, not 0"):
        core.FrameDecoder(max_message_bytes=0)
    decoder = core.FrameDecoder()
    with pytest.raises(TypeError):
        decoder.feed("text")  # type: ignore[arg-type]
    decoder.close()
    with pytest.raises(ValueError, match="after close"):
        decoder.feed(b"more")


def transport_reads(core: ModuleType, data: bytes, framing: str, limit: int) -> list[tuple[Any, Any]]:
    """What a transport reading ``data`` gives, message by message: ``(_read_incoming(), _read_message())``
    from two transports over the same bytes."""
    client = core.StdioTransport(io.BytesIO(data), io.BytesIO(), framing=framing, max_message_bytes=limit)
    server = core.StdioTransport(io.BytesIO(data), io.BytesIO(), framing=framing, max_message_bytes=limit)
    reads = []
    for _ in range(10_000):
        incoming = client._read_incoming()
        message = server._read_message()
        if incoming is None:
            assert message is None
            return reads
        reads.append((incoming, message))
    raise AssertionError("the transport never reached the end of input")


ALL_CASES = {f"newline: {name}": ("newline", *case) for name, case in LINE_CASES.items()} | {
    f"content-length: {name}": ("content-length", *case) for name, case in FRAME_CASES.items()
}


@pytest.mark.parametrize("case", list(ALL_CASES), ids=list(ALL_CASES))
def test_the_decoder_hands_out_what_the_transport_reads(
    core: ModuleType, caplog: pytest.LogCaptureFixture, case: str
) -> None:
    framing, stream, limit, _ = ALL_CASES[case]
    with caplog.at_level(logging.DEBUG, logger="rpcwire"):
        reads = transport_reads(core, stream, framing, limit)
        transport_log = [(record.levelno, record.getMessage()) for record in caplog.records]
        caplog.clear()
        decoded = decode(core, framing, limit, list(pieces(stream, itertools.repeat(5))))
        decoder_log = [(record.levelno, record.getMessage()) for record in caplog.records]
    assert len(decoded) == len(reads)
    for item, (incoming, message) in zip(decoded, reads, strict=True):
        if isinstance(item, Refused):
            assert incoming == item.reason
            assert message == item.answer
            continue
        if isinstance(incoming, tuple):  # not decodable: the client gets the bytes themselves
            assert incoming == (incoming[0], item)
        else:
            assert incoming == core._parse_incoming(item)
        if item.strip(b" \t\r\n"):
            assert message == core._read_text(item, limit, 128, 1000)
        else:  # an empty frame body: its header said a message was there
            assert message == answer_of(PARSE_ERROR)
    # Each refusal is logged as the transport's reader logs it; the rest of the transport's records are
    # its classification of the messages (what _read_text logs for a body).
    refusals = [
        entry for entry in transport_log if any(word in entry[1] for word in ("max_message", "frame", "header"))
    ]
    assert decoder_log == refusals
    assert len(refusals) == sum(isinstance(item, Refused) for item in decoded)


# --- _write_line and _write_lines ---


class Recording(io.BytesIO):
    """A binary stream that counts its writes and flushes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.flushes = 0

    def write(self, data: Any) -> int:
        self.writes += 1
        return super().write(data)

    def flush(self) -> None:
        self.flushes += 1


@pytest.mark.parametrize(
    ("framing", "expected"),
    [
        ("newline", b"1\n[2,\n3]\n\n"),
        ("content-length", b"Content-Length: 1\r\n\r\n1Content-Length: 6\r\n\r\n[2,\n3]Content-Length: 0\r\n\r\n"),
    ],
)
def test_write_line_writes_exactly_one_message(core: ModuleType, framing: str, expected: bytes) -> None:
    out = Recording()
    transport = core.StdioTransport(io.BytesIO(), out, framing=framing)
    for line in (b"1", b"[2,\n3]", b""):
        transport._write_line(line)
    assert out.getvalue() == expected
    assert (out.writes, out.flushes) == (3, 3)


@pytest.mark.parametrize(
    ("framing", "expected"),
    [
        ("newline", b"1\n[2,\n3]\n\n"),
        ("content-length", b"Content-Length: 1\r\n\r\n1Content-Length: 6\r\n\r\n[2,\n3]Content-Length: 0\r\n\r\n"),
    ],
)
def test_write_lines_writes_each_message_framed_in_one_write(core: ModuleType, framing: str, expected: bytes) -> None:
    out = Recording()
    transport = core.StdioTransport(io.BytesIO(), out, framing=framing)
    transport._write_lines([b"1", bytearray(b"[2,\n3]"), b""])
    assert out.getvalue() == expected
    assert (out.writes, out.flushes) == (1, 1)
    transport._write_lines([])
    assert (out.writes, out.flushes) == (1, 1)


def test_written_frames_read_back_through_the_decoder(core: ModuleType) -> None:
    out = io.BytesIO()
    transport = core.StdioTransport(io.BytesIO(), out, framing="content-length")
    messages = [b'{"a":\n1}', b"[]", b'"\xc3\xa9"']
    transport._write_lines(messages[:2])
    transport._write_line(messages[2])
    assert decode(core, "content-length", 100, list(pieces(out.getvalue(), itertools.repeat(3)))) == messages


# --- _read_text: a whole body read as a line ---


def test_read_text_classifies_a_body_as_read_message_classifies_a_line(core: ModuleType) -> None:
    body = b'[{"jsonrpc":"2.0","method":"a","id":1},\n{"jsonrpc":"2.0","method":"b"}, 3]'
    message = core._read_text(body, 1000, 128, 1000)
    line_reader = core.StdioTransport(io.BytesIO(body.replace(b"\n", b" ") + b"\n"), io.BytesIO())
    assert message == line_reader._read_message()
    assert [type(entry).__name__ for entry in message] == ["Request", "Request", "bytes"]
    assert message[0] == rpcwire.Request("a", None, 1, False)
    assert message[1].is_notification
    assert core._read_text(b"{", 100, 128, None) == answer_of(PARSE_ERROR)


def test_read_text_answers_empty_and_over_long_bodies(core: ModuleType) -> None:
    assert core._read_text(b"", 10, 128, 1000) == answer_of(INVALID_REQUEST)
    assert core._read_text(b" \n\t\r ", 10, 128, 1000) == answer_of(INVALID_REQUEST)
    assert core._read_text(b"  [" + b"1" * 20, 10, 128, 1000) == answer_of(INVALID_REQUEST)
    assert core._read_text(b"  x" + b"1" * 20, 10, 128, 1000) == answer_of(PARSE_ERROR)
    assert core._read_text(b"[]", 10, 128, 1000) == answer_of(INVALID_REQUEST)  # an empty batch
    assert core._read_text(b"[1,2,3]", 100, 128, 2) == answer_of(INVALID_REQUEST)  # over max_batch
    assert core._read_text(b"[[[1]]]", 100, 2, None) == answer_of(PARSE_ERROR)  # too deep
    with pytest.raises(ValueError, match="max_depth"):
        core._read_text(b"[]", 10, 0, 1000)


def test_dispatch_answers_what_read_text_reads(core: ModuleType) -> None:
    def handler(method: str, params: Any) -> Any:
        return [method, params]

    assert core.dispatch(b" ", handler) == answer_of(INVALID_REQUEST)
    assert core.dispatch(b"[" * 30, handler, max_message_bytes=10) == answer_of(INVALID_REQUEST)
    assert core.dispatch(b'{"jsonrpc":"2.0","method":"m","params":[1],"id":7}', handler) == compact(
        {"jsonrpc": "2.0", "id": 7, "result": ["m", [1]]}
    )
