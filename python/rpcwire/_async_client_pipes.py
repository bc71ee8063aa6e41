"""A spawned server's pipes as :class:`rpcwire.AsyncClient` reads and writes them: the process protocol
(:class:`_ServerPipes`: its stdout to the client, its stderr into the tail, the room in its stdin, its exit), the
protocol that hands each chunk of its stdout to the client as the loop reads it (:class:`_Stdout`), and the end of
its pipes once it exited (:func:`_end_pipes`)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from rpcwire._server_stderr import _StderrTail

if TYPE_CHECKING:
    from rpcwire._async_client import AsyncClient

_EOF = "the server closed its output"


class _ServerPipes(asyncio.SubprocessProtocol):
    """A spawned server's process and pipes, as asyncio reports them: its stdout to the client (what comes
    before the client is made, kept for it), its stderr into the tail, the room in its stdin (``drained``),
    and its exit (``exited``: ``Process.wait()`` waits for its pipes to close too, and a child of the server
    may hold them)."""

    stdin = stdout = stderr = None  # what asyncio.subprocess.Process takes from its protocol: no streams

    def __init__(self, loop: asyncio.AbstractEventLoop, tail: _StderrTail) -> None:
        self.exited: asyncio.Future[None] = loop.create_future()
        self.stderr_ended: asyncio.Future[None] = loop.create_future()
        self._loop = loop
        self._tail = tail
        self._partial = b""  # the start of a stderr line
        self._client: AsyncClient | None = None
        self._early: list[bytes] = []  # stdout before the client was made
        self._stdout_ended = False
        self._paused = False
        self._room: list[asyncio.Future[None]] = []  # writers waiting for the stdin pipe's buffer to drain
        self._stdin_lost: str | None = None

    def attach(self, client: AsyncClient, stdout: asyncio.BaseTransport | None) -> None:
        """From now on the server's output goes to ``client``, read by the stdout pipe's own protocol
        (:class:`_Stdout`) where the loop's pipe transport lets it be replaced."""
        self._client = client
        for chunk in self._early:
            client._received(chunk)
        self._early.clear()
        if self._stdout_ended:
            client._output_ended(_EOF)
        elif stdout is not None and not stdout.is_closing():
            with contextlib.suppress(AttributeError, NotImplementedError):
                stdout.set_protocol(_Stdout(client, stdout.get_protocol()))

    def stdout_received(self, chunk: bytes) -> None:
        if self._client is None:
            self._early.append(chunk)
        else:
            self._client._received(chunk)

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            self.stdout_received(data)
        elif fd == 2:
            self._partial = self._tail.feed(self._partial, data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 0:
            self._stdin_lost = f"its stdin closed ({exc})" if exc is not None else "its stdin closed"
            self._wake(ConnectionResetError(self._stdin_lost))
        elif fd == 1:
            self._stdout_ended = True
            if self._client is not None:
                self._client._output_ended(_EOF if exc is None else f"reading from the server failed: {exc!r}")
        elif fd == 2:
            self._tail.end(self._partial)
            if not self.stderr_ended.done():
                self.stderr_ended.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake(None)

    def _wake(self, error: BaseException | None) -> None:
        for waiter in self._room:
            if not waiter.done():
                if error is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(error)
        self._room.clear()

    async def drained(self) -> None:
        """Until the stdin pipe's buffer drained below its high-water mark; ``ConnectionResetError`` once
        the pipe is gone."""
        if self._stdin_lost is not None:
            raise ConnectionResetError(self._stdin_lost)
        if not self._paused:
            return
        waiter = self._loop.create_future()
        self._room.append(waiter)
        await waiter


class _Stdout(asyncio.Protocol):
    """The protocol of a spawned server's stdout pipe: each chunk goes to the client as the loop reads it
    (asyncio's own pipe protocol hands it to the process protocol one loop iteration later); the end goes
    to asyncio's protocol, which keeps the process transport's account of its pipes and tells
    :meth:`_ServerPipes.pipe_connection_lost`."""

    def __init__(self, client: AsyncClient, inner: asyncio.BaseProtocol) -> None:
        self._client = client
        self._inner = inner
        self.data_received = client._received  # type: ignore[method-assign,assignment]  # (one call a chunk, not two)

    def data_received(self, data: bytes) -> None:
        self._client._received(data)

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._inner.connection_lost(exc)


def _end_pipes(process: asyncio.subprocess.Process) -> None:
    """Close the pipes of an ended server (asyncio's subprocess transport, which ``Process`` keeps as
    ``_transport``): its readers get their end of input even while a child of it holds the pipes open."""
    transport = getattr(process, "_transport", None)
    if transport is not None:
        with contextlib.suppress(Exception):
            transport.close()
