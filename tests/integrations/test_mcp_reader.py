"""``rpcwire.mcp`` reads through either core the same way: the gate hands the core one read per opening, so a
burst of lines is taken without a system call and the next read waits for the loop (no branch on which core)."""

from __future__ import annotations

import io
from types import ModuleType

import pytest

pytest.importorskip("mcp")

import rpcwire.mcp

DATA = b'{"a":1}\n\n   \n{"b":2}\r\n' + b"x" * 100 + b"\n" + b'{"c":3}\n' + b"tail"


@pytest.fixture
def gated(impl: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rpcwire.mcp, "_StdioTransport", impl.StdioTransport)


def test_the_gate_gives_the_core_one_read_per_opening(gated: None) -> None:
    source = io.BytesIO(DATA)
    reads: list[int] = []

    def fill(buffer: bytearray) -> int:
        data = source.read(7)  # lines arrive in pieces
        buffer[: len(data)] = data
        reads.append(len(data))
        return len(data)

    gate, read_line = rpcwire.mcp._gated_lines(fill)
    lines: list[bytes | str | None] = []
    for _ in range(200):
        try:
            line = read_line()
        except BlockingIOError:
            assert not gate.open  # nothing was read without an opening
            gate.open = True
            continue
        except ValueError as exc:
            lines.append(str(exc))
            continue
        lines.append(line)
        if line is None:
            break
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
