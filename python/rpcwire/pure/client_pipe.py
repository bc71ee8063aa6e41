"""The threaded client's pipes, in Python: the twin of the native ``_ClientPipe`` (``src/client.rs``), with the same
behaviour: ``rpcwire.Client`` reads a spawned server's stdout through it, and a lone caller makes its call with
``_send_call`` and ``_read_answer``."""

from __future__ import annotations

import math
import os
import select
import threading
import time
from typing import Any

from rpcwire._contract import Incoming
from rpcwire._types import Framing, Response
from rpcwire.pure.envelope import check_limits, encode_request
from rpcwire.pure.framing import FrameDecoder, check_framing, encode_frame
from rpcwire.pure.transport import incoming

__all__ = ["ClientPipe"]

_READ_CHUNK = 64 * 1024  # the most one read takes
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

    def _send_call(
        self, method: str, params: Any, id: int, quick_bytes: int, quick_depth: int
    ) -> bytes | tuple[int, bytes] | None:
        """Encode the call and write it whole without waiting: ``None`` once written; its line (nothing written)
        beyond the quick limits; ``(written, frame)`` when the pipe took only part of it."""
        line = encode_request(method, params, id)
        if len(line) > quick_bytes or line.count(b"[") + line.count(b"{") > quick_depth:
            return line
        frame = encode_frame(line) if self._frames else line + b"\n"
        try:
            written = os.write(self._out_fd, frame)
        except BlockingIOError:
            written = 0
        return None if written == len(frame) else (written, frame)

    def _read_answer(self, id: int, timeout: float | None) -> Response | tuple[Any] | None:
        """Read until a whole message is here, within ``timeout`` seconds: the ``Response`` to the call ``id``;
        ``(message,)`` for any other; ``None`` when nothing was taken (the deadline, the halt, the end of input)."""
        self._take()
        try:
            deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
            while not self._buffered():
                wait = None if deadline is None else math.ceil(max(0.0, deadline - time.monotonic()) * 1000)
                if wait == 0:
                    return None
                events = self._poller.poll(wait)
                if not events or any(fd == self._halt_fd for fd, _ in events):
                    return None
                self._feed(os.read(self._fd, _READ_CHUNK))
            message = self._incoming()
            if message is None:
                return None
            if type(message) is Response and type(message.id) is int and message.id == id:
                return message
            return (message,)
        finally:
            self._lock.release()
