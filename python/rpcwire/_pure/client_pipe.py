"""The threaded client's pipes, in Python: the twin of the native ``_ClientPipe`` (``src/client.rs``), with the same
behaviour: ``rpcwire.Client`` reads a spawned server's stdout through it, and a lone caller makes its whole call with
``_call``."""

from __future__ import annotations

import math
import os
import select
import stat
import threading
import time
from typing import Any

from rpcwire._contract import ErrorAnswer, Incoming, LoneOutcome, ReadFailed, ReadOn, Unsent
from rpcwire._pure.envelope import check_limits, encode_request
from rpcwire._pure.framing import FrameDecoder, check_framing, encode_frame
from rpcwire._pure.transport import incoming
from rpcwire._types import Framing, Response

__all__ = ["ClientPipe"]

_READ_CHUNK = 64 * 1024  # the most one read takes
_FRAMING_BYTES = len("Content-Length: \r\n\r\n") + 20  # the most a framing adds to a line
_CONCURRENT_READ = "the client's pipe is read by one thread at a time"


class ClientPipe:
    """A spawned server's pipes as ``rpcwire.Client`` reads and writes them: ``fd`` (its stdout, blocking),
    ``out_fd`` (its stdin, non-blocking), ``halt_fd`` (the client's halt pipe: readable once readers must stop)."""

    def __init__(
        self,
        fd: int,
        out_fd: int,
        halt_fd: int,
        *,
        framing: Framing = "newline",
        max_message_bytes: int,
        max_depth: int,
    ) -> None:
        check_framing(framing)
        self._max_message_bytes, self._max_depth, _ = check_limits(max_message_bytes, max_depth, None)
        self._fd, self._out_fd = fd, out_fd
        self._frames = framing == "content-length"
        self._decoder = FrameDecoder(framing, max_message_bytes=self._max_message_bytes)
        self._closed = False
        self._lock = threading.Lock()  # taken, never waited for: one reader at a time
        self._poller = select.poll()
        self._poller.register(fd, select.POLLIN)
        self._poller.register(halt_fd, select.POLLIN)
        self._halt_fd = halt_fd
        self._out_is_pipe = stat.S_ISFIFO(os.fstat(out_fd).st_mode)
        self._reading = threading.Lock()  # the client's reading lock (only ever tried)
        self._last_read: float | None = None  # when _call last read its answer

    def _take_reading(self) -> bool:
        """Take the client's reading lock if nobody holds it (``True``: taken)."""
        return self._reading.acquire(False)

    def _leave_reading(self) -> None:
        """Release the client's reading lock (held by the caller)."""
        self._reading.release()

    def _reading_taken(self) -> bool:
        """Whether a thread holds the client's reading lock."""
        return self._reading.locked()

    def _since_read(self) -> float:
        """Seconds since ``_call`` last read its answer (``inf``: never)."""
        return math.inf if self._last_read is None else time.monotonic() - self._last_read

    def _take(self) -> None:
        if not self._lock.acquire(blocking=False):
            raise RuntimeError(_CONCURRENT_READ)

    def _buffered(self) -> bool:
        return self._closed or self._decoder._buffered(skip_blank=True)

    def _feed(self, chunk: bytes) -> None:
        if chunk:
            self._decoder.feed(chunk)
        else:
            self._decoder.close()
            self._closed = True

    def _has_buffered_message(self) -> bool:
        """As ``StdioTransport._has_buffered_message``."""
        self._take()
        try:
            return self._buffered()
        finally:
            self._lock.release()

    def _read_available(self) -> None:
        """As ``StdioTransport._read_available``: one read of the pipe unless a whole message is buffered."""
        self._take()
        try:
            if not self._buffered():
                self._feed(os.read(self._fd, _READ_CHUNK))
        finally:
            self._lock.release()

    def _read_incoming(self) -> Incoming | tuple[str, bytes] | None:
        """As ``StdioTransport._read_incoming``."""
        self._take()
        try:
            return self._incoming()
        finally:
            self._lock.release()

    def _incoming(self) -> Incoming | tuple[str, bytes] | None:
        while (line := self._decoder._next_message(True)) is None and not self._closed:
            self._feed(os.read(self._fd, _READ_CHUNK))
        return incoming(line, self._max_depth)

    def _call(  # noqa: PLR0917 (the native method's positional arguments: one call, no keywords to parse)
        self, method: str, params: Any, id: int, quick_bytes: int, quick_depth: int, timeout: float | None, output: Any
    ) -> Any | LoneOutcome:
        """A lone caller's whole call (as the native ``_ClientPipe._call``): the result of its answer, or a
        ``LoneOutcome``: ``Unsent`` (nothing written), ``ErrorAnswer`` (its answer, an error), ``ReadOn`` (written,
        the reading held, something else or nothing read), ``ReadFailed`` (written, the reading held, reading
        failed)."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        taken = self._take_reading()
        try:
            line = encode_request(method, params, id)
            if (
                not taken
                or not self._out_is_pipe
                or len(line) > quick_bytes
                or line.count(b"[") + line.count(b"{") > quick_depth
                or len(line) + _FRAMING_BYTES > select.PIPE_BUF
                or not output._lock.acquire(False)  # (taken here: os.write lets other threads run)
            ):
                if taken:
                    self._leave_reading()
                return Unsent(line)
            try:
                output._locked()  # asked last before the write, as the native core asks it: the output notes its place
                written = os.write(self._out_fd, encode_frame(line) if self._frames else line + b"\n")
            except (BlockingIOError, InterruptedError):
                written = 0
            finally:
                output._release_quick()
        except BaseException:
            if taken:
                self._leave_reading()
            raise
        if written == 0:  # a write of at most PIPE_BUF bytes to a pipe is all or nothing
            self._leave_reading()
            return Unsent(line)
        try:
            message = self._read_own(deadline)
        except BaseException as exc:  # (an interrupt too: the call was written, the caller says so)
            return ReadFailed(exc)
        if type(message) is Response and type(message.id) is int and message.id == id:
            self._read_done()
            return message.result if message.error is None else ErrorAnswer(message)
        return ReadOn(message)

    def _read_done(self) -> None:
        self._last_read = time.monotonic()
        self._leave_reading()

    def _read_own(self, deadline: float | None) -> Incoming | tuple[str, bytes] | None:
        self._take()
        try:
            while not self._buffered():
                wait = None if deadline is None else math.ceil(max(0.0, deadline - time.monotonic()) * 1000)
                if wait == 0:
                    return None
                events = self._poller.poll(wait)
                if not events or any(fd == self._halt_fd for fd, _ in events):
                    return None
                self._feed(os.read(self._fd, _READ_CHUNK))
            return self._incoming()
        finally:
            self._lock.release()
