"""Streams that behave as pipes and sockets do (or as broken ones do), for transports to read and write.

A transport reads with ``readinto1``/``readinto``/``readline`` and writes with ``write``/``flush``; these
stand-ins hand out a few bytes per read, offer nothing but ``readline``, record every write and flush, or
fail every write.
"""

from __future__ import annotations

import errno
import io
from collections.abc import Sequence
from typing import Any


class Trickle(io.RawIOBase):
    """A raw stream whose reads return a few bytes at a time, as a pipe or socket may: ``sizes`` bytes per
    read, or the sizes of a sequence in turn (cycled), never more than the buffer offered."""

    def __init__(self, data: bytes, sizes: int | Sequence[int] = 7) -> None:
        super().__init__()
        self._data = io.BytesIO(data)
        self._sizes = [sizes] if isinstance(sizes, int) else list(sizes) or [1]
        self._reads = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        size = self._sizes[self._reads % len(self._sizes)]
        self._reads += 1
        chunk = self._data.read(min(size, len(buffer)))
        buffer[: len(chunk)] = chunk
        return len(chunk)


class ReadlineOnly:
    """Not an ``io`` object: nothing but ``readline(size)`` (the fallback reader of both cores), which returns at
    most ``size`` bytes of ``source`` (bytes, or a stream with ``readline``). ``sizes`` records each size asked."""

    def __init__(self, source: bytes | Any) -> None:
        self._source = io.BytesIO(source) if isinstance(source, bytes) else source
        self.sizes: list[int] = []

    def readline(self, size: int = -1) -> bytes:
        self.sizes.append(size)
        line: bytes = self._source.readline(size)
        return line


class RecordingOutput(io.BytesIO):
    """An output that records each ``write`` (as bytes) and each ``flush`` (as ``"flush"``) in ``events``."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[bytes | str] = []

    def write(self, data: Any) -> int:
        self.events.append(bytes(data))
        return super().write(data)

    def flush(self) -> None:
        self.events.append("flush")
        super().flush()

    @property
    def writes(self) -> list[bytes]:
        """What each ``write`` was given, in order."""
        return [event for event in self.events if isinstance(event, bytes)]

    @property
    def unflushed(self) -> int:
        """How many writes came after the last flush."""
        flushed = max((i for i, event in enumerate(self.events) if event == "flush"), default=-1)
        return len(self.events) - 1 - flushed


class BrokenOutput(io.RawIOBase):
    """An output whose reader is gone: every ``write`` raises ``BrokenPipeError`` (EPIPE)."""

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")
