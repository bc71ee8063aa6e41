"""``rpcwire.mcp`` reads through either core's ``FrameDecoder`` the same way: one read is fed at a time, so a
burst of lines is taken without a system call and the next read waits for the loop (no branch on which core)."""

from __future__ import annotations

import functools
import io
import os
from types import ModuleType

import pytest

pytest.importorskip("mcp")

import rpcwire.mcp

DATA = b'{"a":1}\n\n   \n{"b":2}\r\n' + b"x" * 100 + b"\n" + b'{"c":3}\n' + b"tail"


@pytest.fixture
def gated(impl: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rpcwire.mcp, "_FrameDecoder", impl.FrameDecoder)


def test_the_decoder_is_fed_one_read_at_a_time(gated: None) -> None:
    source = io.BytesIO(DATA)
    reads: list[int] = []

    def fill(buffer: bytearray) -> int:
        data = source.read(7)  # lines arrive in pieces
        buffer[: len(data)] = data
        reads.append(len(data))
        return len(data)

    reader = rpcwire.mcp._Lines(fill)
    lines: list[bytes | str | None] = []
    for _ in range(200):
        count = len(reads)
        line = reader.next()
        assert len(reads) == count  # taking lines out reads nothing
        if line is None:
            if reader.ended:
                lines.append(None)
                break
            reader.read()
            assert len(reads) == count + 1  # one read each time
            continue
        lines.append(str(line) if isinstance(line, ValueError) else line)
    assert reads[-1] == 0 and len(reads) == len(DATA) // 7 + 2
    # Blank lines are handed out (the SDK's reader turns each into a validation error), "\r\n" ends a line.
    assert lines == [b'{"a":1}', b"", b"   ", b'{"b":2}', b"x" * 100, b'{"c":3}', b"tail", None]


def test_a_burst_reader_returns_what_one_read_brought(gated: None) -> None:
    burst = rpcwire.mcp._burst_reader(io.BytesIO(DATA))
    got: list[bytes | Exception | None] = []
    for _ in range(10):
        lines = burst()
        got.extend(lines)
        if lines[-1] is None:
            break
    assert got == [b'{"a":1}', b"", b"   ", b'{"b":2}', b"x" * 100, b'{"c":3}', b"tail", None]


def test_an_over_long_line_is_the_value_error_read_line_raises(
    impl: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = b'{"a":1}\n' + b"y" * 60 + b"\n\n" + b"z" * 60
    expected: list[bytes | str | None] = []
    transport = impl.StdioTransport(io.BytesIO(data), io.BytesIO(), max_message_bytes=50)
    for _ in range(10):
        try:
            expected.append(transport.read_line())
        except ValueError as exc:
            expected.append(str(exc))
        if expected[-1] is None:
            break
    assert expected[1] == "a line longer than max_message_bytes (50) was discarded"

    monkeypatch.setattr(rpcwire.mcp, "_FrameDecoder", functools.partial(impl.FrameDecoder, max_message_bytes=50))
    burst = rpcwire.mcp._burst_reader(io.BytesIO(data))
    got: list[bytes | Exception | None] = []
    for _ in range(10):
        got.extend(burst())
        if got[-1] is None:
            break
    assert [str(line) if isinstance(line, ValueError) else line for line in got] == expected


def test_a_spurious_wake_up_on_a_non_blocking_descriptor_reads_nothing() -> None:
    """``os.readv`` on a non-blocking descriptor with nothing in it raises ``BlockingIOError``: the reader takes
    it as "no data" (and waits again), not as the end of its task."""
    read_end, write_end = os.pipe()
    try:
        os.set_blocking(read_end, False)
        fill = rpcwire.mcp._fd_filler(read_end)
        assert fill(bytearray(16)) is None
        os.write(write_end, b"ab")
        assert fill(bytearray(16)) == 2
    finally:
        os.close(read_end)
        os.close(write_end)
