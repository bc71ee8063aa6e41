"""A thread-free stdio transport for servers built on the MCP Python SDK (``pip install 'rpcwire[mcp]'``).

A tool server without the SDK is :mod:`rpcwire.mcp_tools` (``serve_tools``, ``tools_handler``, re-exported
here; import them from ``rpcwire.mcp_tools`` where the SDK is not installed).

``stdio_server()`` is a drop-in for ``mcp.server.stdio.stdio_server()``: the same ``(read_stream,
write_stream)`` pair (``SessionMessage`` objects holding real ``mcp_types`` models, the parse or
validation ``Exception`` itself for a bad line), the same claim of file descriptors 0 and 1 (the SDK's
own code does it: fd 0 reads the null device and fd 1 goes to stderr while serving, both restored on
exit, and a second transport in the process is refused; before fd 1 is restored, ``sys.stdout`` is flushed
into the diversion, so a ``print`` still buffered then cannot reach the wire), and the same bytes on the wire.
``run_stdio(server)`` serves an ``MCPServer`` (or a low-level ``Server``) over it, where ``server.run("stdio")``
would use the SDK's transport.

I/O model. The SDK's transport makes three thread hops per message (anyio ``to_thread`` for each line read,
each write and each flush); here the event loop does the I/O itself:

- Reading: the core's ``FrameDecoder`` (either core; ``skip_blank=False``, as the SDK sees every blank line)
  splits lines out of 64 KiB reads. The descriptor is read once each time the loop has seen it readable
  (``anyio.wait_readable``) and the read is fed to the decoder, so every line already read is taken
  without a system call and without blocking, and a read never waits: one wake-up per burst of lines.
  A descriptor the loop cannot watch (a regular file, ``/dev/null``: reading those never waits) is
  read whenever the decoder runs dry.
- Writing: each message is written as soon as the session sends it, without a thread. A pipe is
  reopened through ``/proc/self/fd`` as a new, non-blocking open file description (the inherited one
  keeps its flags, so nothing that shares it, a parent's terminal or stderr, turns non-blocking); a
  socket is written with ``MSG_DONTWAIT``. Either waits with ``anyio.wait_writable`` when full, so a
  client that stops reading holds back the writer task, never the loop. Anything else (a regular
  file, a terminal, a descriptor that cannot be reopened) is written with blocking writes.
  Messages already waiting when the writer takes one go out in the same write.
- Streams given explicitly: an anyio ``AsyncFile`` (what the SDK's ``stdio_server`` takes) is served
  as the SDK serves it; a binary file-like object (or a text one's ``.buffer``) is read by one thread
  in bursts of lines (one hop per burst, through the same decoder) and written with blocking writes.
- On Windows, stdin is read by that thread too.

Measured end to end by ``make bench-mcp`` (the SDK's client calling an ``MCPServer``'s ``echo`` tool, both
transports interleaved; docs/performance.md, "MCP", has the table): the server's CPU per call and its event
loop's rounds per call fall, for ``async def`` and ``def`` tools, and concurrent ``async def`` calls run
faster; the client's share (the SDK's) is the same on both sides.

What differs from the SDK's transport, on purpose: a line longer than 64 MiB is discarded and a
``ValueError`` put on the read stream (the SDK would hold it whole), a read stream whose receiving
end the session closed ends the reader quietly, and a client gone mid-call ends the server quietly: a write
that finds the client's end of stdout closed (``BrokenPipeError``, ``ConnectionResetError``) ends the writing
(logged at DEBUG, logger ``rpcwire``), what the session sends after is taken and dropped until it closes its
end, and a stdin reset by the client reads as its end. The SDK's transport exits with status 1 and a traceback
(an ``ExceptionGroup`` holding the ``BrokenPipeError``); ``run_stdio`` exits 0, nothing on stderr.
"""

from __future__ import annotations

import contextvars
import io
import logging
import os
import socket
import stat
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from typing import Any, BinaryIO

try:
    import anyio
    import anyio.lowlevel
    import anyio.to_thread
    import mcp_types
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.server.stdio import _claim_fd, _open_stdin_diversion, _open_stdout_diversion
    from mcp.shared._context_streams import ContextReceiveStream, ContextSendStream
    from mcp.shared.message import SessionMessage
except ImportError as _missing:  # pragma: no cover - the extra is not installed
    _message = f"rpcwire.mcp needs the MCP Python SDK 2.x: pip install 'rpcwire[mcp]' ({_missing})"
    raise ImportError(_message) from _missing

import rpcwire
from rpcwire._methods import Methods
from rpcwire._types import Refused
from rpcwire.mcp_tools import ToolError, ToolServer, log, serve_tools, tools_handler

__all__ = [
    "ToolError",
    "ToolServer",
    "log",
    "run_stdio",
    "serve_stdio",
    "serve_tools",
    "stdio_server",
    "tools",
    "tools_handler",
]

_validate_json = mcp_types.jsonrpc_message_adapter.validate_json

logger: logging.Logger = logging.getLogger("rpcwire")

# What a write raises once the client closed its end of stdout (a pipe's reader gone, a socket reset), and a
# read once the client reset its end of stdin: the client is gone, which ends the server quietly.
_PEER_GONE = (BrokenPipeError, ConnectionResetError)

# The decoder that splits the lines: the core rpcwire serves with (rpcwire.pure's when the native module
# could not be imported), fed one read at a time by _Lines below.
_FrameDecoder = rpcwire.FrameDecoder
_READ_SIZE = 64 * 1024
# Whether the event loop can watch stdin's descriptor (not Windows pipes: they go to the thread).
_WATCHABLE_FDS = sys.platform != "win32"

ReadItem = SessionMessage | Exception


class _Sender:
    """The read stream's sending end, as ``ContextSendStream`` (the sender's context goes with each item).

    A message for a receiver already waiting is handed over without the checkpoint that ``send``
    starts with: one trip around the event loop (and its ``epoll_wait``) fewer per message.
    """

    __slots__ = ("_raw",)

    def __init__(self, raw: MemoryObjectSendStream[tuple[contextvars.Context, ReadItem]]) -> None:
        self._raw = raw

    async def send(self, item: ReadItem) -> None:
        envelope = (contextvars.copy_context(), item)
        try:
            self._raw.send_nowait(envelope)
        except anyio.WouldBlock:
            await self._raw.send(envelope)

    async def __aenter__(self) -> _Sender:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._raw.close()


async def _receive(receive: MemoryObjectReceiveStream[tuple[Any, SessionMessage]]) -> SessionMessage | None:
    """The next message to write (``None`` once the session closed its end), without a checkpoint if one waits."""
    try:
        return receive.receive_nowait()[1]
    except anyio.WouldBlock:
        pass
    except anyio.EndOfStream:
        return None
    try:
        return (await receive.receive())[1]
    except anyio.EndOfStream:
        return None


def _parse(text: bytes) -> ReadItem:
    """One line as the SDK's reader makes it: a ``SessionMessage``, or the exception validating it raised."""
    decoded = text.decode("utf-8", "replace")  # the SDK reads through a UTF-8 text layer, errors="replace"
    try:
        return SessionMessage(_validate_json(decoded, by_name=False))
    except Exception:
        pass
    # The SDK validated the line with its "\n": the same exception, word for word (input_value included).
    try:
        return SessionMessage(_validate_json(decoded + "\n", by_name=False))
    except Exception as exc:
        return exc


async def _deliver(line: bytes, send: _Sender) -> None:
    if b"\r" in line:
        # The SDK's text layer reads with universal newlines: a lone "\r" ends a line too.
        for part in line.split(b"\r"):
            await send.send(_parse(part))
    else:
        await send.send(_parse(line))


def _encode(session_message: SessionMessage) -> bytes:
    """The bytes the SDK's writer writes for one message."""
    json = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
    return (json + "\n").encode("utf-8")


# --- reading ---------------------------------------------------------------------------------------


class _Lines:
    """The lines of a stream: each read of it (``read``) fed to the core's ``FrameDecoder``, the lines taken out
    (``next``) without a system call. Blank lines are handed out: the SDK's reader turns each into a
    validation error."""

    __slots__ = ("_buffer", "_decoder", "_fill", "ended")

    def __init__(self, fill: Callable[[bytearray], int | None]) -> None:
        self._fill = fill
        self._buffer = bytearray(_READ_SIZE)
        self._decoder = _FrameDecoder(skip_blank=False)
        self.ended = False  # the end of input was read

    def read(self) -> None:
        """One read of the stream into the decoder (``None``, a non-blocking stream's "no data": nothing); the
        end of input closes the decoder, which then hands out a last line without ``\\n``."""
        count = self._fill(self._buffer)
        if count is None:
            return
        if count:
            self._decoder.feed(memoryview(self._buffer)[:count])
        else:
            self._decoder.close()
            self.ended = True

    def next(self) -> bytes | ValueError | None:
        """The next line; for one over ``max_message_bytes`` (dropped as it arrived, never held whole) the
        ``ValueError`` ``StdioTransport.read_line`` raises; ``None`` when no whole line is left (``ended``: none
        ever will be; else the next needs a ``read``)."""
        line = self._decoder.next()
        if isinstance(line, Refused):
            return ValueError(f"{line.reason} was discarded")
        return line


def _fd_filler(fd: int) -> Callable[[bytearray], int | None]:
    """One read of ``fd`` into a buffer; ``None`` when a non-blocking descriptor has nothing after all (a
    spurious wake-up: the loop waits for it again)."""

    def fill(buffer: bytearray) -> int | None:
        try:
            return os.readv(fd, [buffer])
        except BlockingIOError:
            return None
        except _PEER_GONE:  # a socket the client reset: its end
            return 0

    return fill


async def _read_fd(fd: int, send: _Sender) -> None:
    """Serve the lines of ``fd`` to ``send``, reading it only when the loop saw it readable."""
    lines = _Lines(_fd_filler(fd))
    watchable = True
    async with send:
        while True:
            line = lines.next()
            if line is None:
                if lines.ended:
                    return
                if watchable:
                    try:
                        await anyio.wait_readable(fd)
                    except OSError:
                        # epoll refuses regular files and /dev/null (EPERM); reading them never waits.
                        watchable = False
                lines.read()
            elif isinstance(line, ValueError):  # a line over max_message_bytes, discarded
                await send.send(line)
            else:
                await _deliver(line, send)


def _filler(stream: Any) -> Callable[[bytearray], int | None]:
    """One read of ``stream`` into a buffer, with the best method it has (a stream the client reset: its end)."""
    if callable(getattr(stream, "readinto1", None)):
        readinto = stream.readinto1
    elif callable(getattr(stream, "readinto", None)):
        readinto = stream.readinto
    else:
        read = stream.read1 if callable(getattr(stream, "read1", None)) else stream.readline

        def readinto(buffer: bytearray) -> int:
            data = read(len(buffer))
            buffer[: len(data)] = data
            return len(data)

    def fill(buffer: bytearray) -> int | None:
        try:
            return readinto(buffer)  # type: ignore[no-any-return]
        except _PEER_GONE:
            return 0

    return fill


def _burst_reader(stream: Any) -> Callable[[], list[bytes | Exception | None]]:
    """A blocking function returning the next lines of ``stream``: all that one read brought (``None`` last at EOF)."""
    lines = _Lines(_filler(stream))

    def burst() -> list[bytes | Exception | None]:
        taken: list[bytes | Exception | None] = []
        while True:
            line = lines.next()
            if line is not None:
                taken.append(line)
            elif lines.ended:
                taken.append(None)
                return taken
            elif taken:
                return taken
            else:
                lines.read()  # nothing buffered: read (and maybe block: we are the thread)

    return burst


async def _read_stream_in_thread(stream: Any, send: _Sender) -> None:
    """Serve the lines of a blocking binary stream: one thread reads them, one hop to the loop per burst."""
    burst = _burst_reader(stream)

    async def deliver(lines: list[bytes | Exception | None]) -> bool:
        for line in lines:
            if line is None:
                return False
            if isinstance(line, Exception):
                await send.send(line)
            else:
                await _deliver(line, send)
        return True

    def run() -> None:
        while anyio.from_thread.run(deliver, burst()):
            pass

    async with send:
        # Abandoned when cancelled: the thread may be blocked in a read that nothing can interrupt.
        await anyio.to_thread.run_sync(run, abandon_on_cancel=True)


async def _read_async_text(stdin: Any, send: _Sender) -> None:
    """An ``AsyncFile[str]`` given as ``stdin``: read as the SDK reads it."""
    async with send:
        async for line in stdin:
            try:
                message = _validate_json(line, by_name=False)
            except Exception as exc:
                await send.send(exc)
                continue
            await send.send(SessionMessage(message))


# --- writing ---------------------------------------------------------------------------------------


async def _write_nonblocking(
    write: Callable[[memoryview], int], fd: int, receive: MemoryObjectReceiveStream[tuple[Any, SessionMessage]]
) -> None:
    """Write each message with ``write`` (non-blocking), waiting for ``fd`` to be writable when it is full.

    Messages already waiting when one is taken go out in the same ``write``. That is rare: under concurrent
    calls the session's tasks still send their answers one loop iteration apart, and waiting a loop
    iteration to gather more did not change that.
    """
    with receive:
        while session_message := await _receive(receive):
            view = memoryview(_with_waiting(_encode(session_message), receive))
            try:
                while view:
                    try:
                        view = view[write(view) :]
                    except BlockingIOError:
                        await anyio.wait_writable(fd)
            except _PEER_GONE as exc:
                await _client_gone(exc, receive)
                return


async def _write_blocking(stream: Any, receive: MemoryObjectReceiveStream[tuple[Any, SessionMessage]]) -> None:
    """Write each message to a binary stream and flush it, as the SDK does (without its two thread hops)."""
    with receive:
        while session_message := await _receive(receive):
            try:
                stream.write(_with_waiting(_encode(session_message), receive))
                stream.flush()
            except _PEER_GONE as exc:
                _to_null(stream)
                await _client_gone(exc, receive)
                return


async def _client_gone(exc: BaseException, receive: MemoryObjectReceiveStream[tuple[Any, SessionMessage]]) -> None:
    """The client closed its end of stdout: nothing more can reach it. What the session sends from now on is
    taken and dropped (never a sender left waiting, never an error in the session) until it closes its end."""
    logger.debug("the MCP client closed its end of stdout (%r): the messages sent from now on are dropped", exc)
    dropped = 0
    while await _receive(receive) is not None:
        dropped += 1
    if dropped:
        logger.debug("dropped %d messages for the MCP client gone", dropped)


def _to_null(stream: Any) -> None:
    """Point the descriptor of a buffered stream whose client is gone at the null device (what Python's own docs
    advise for a stdout whose reader left): what its buffer still holds then goes nowhere when it is flushed
    again (closed, or at the interpreter's exit), instead of raising the broken pipe where nobody catches it."""
    with suppress(Exception):
        fd = int(getattr(stream, "wrapped", stream).fileno())  # (an anyio AsyncFile wraps the file object)
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, fd)
        finally:
            os.close(null)


def _with_waiting(data: bytes, receive: MemoryObjectReceiveStream[tuple[Any, SessionMessage]]) -> bytes:
    """``data`` followed by the encoding of every message already waiting to be written."""
    with suppress(anyio.WouldBlock, anyio.EndOfStream):
        while True:
            data += _encode(receive.receive_nowait()[1])
    return data


async def _write_async_text(stdout: Any, receive: MemoryObjectReceiveStream[tuple[Any, SessionMessage]]) -> None:
    """An ``AsyncFile[str]`` given as ``stdout``: written as the SDK writes it."""
    with receive:
        async for _, session_message in receive:
            json = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
            try:
                await stdout.write(json + "\n")
                await stdout.flush()
            except _PEER_GONE as exc:
                _to_null(stdout)
                await _client_gone(exc, receive)
                return


def _nonblocking_writer(fd: int, stack: AsyncExitStack) -> Callable[[memoryview], int] | None:
    """A non-blocking ``write`` to what ``fd`` points at that leaves ``fd``'s own flags alone, if there is one."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISFIFO(mode) and sys.platform == "linux":
        try:
            # A new open file description of the same pipe (O_NONBLOCK: fails rather than waits for a reader).
            own = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        stack.callback(os.close, own)
        return lambda view: os.write(own, view)
    if stat.S_ISSOCK(mode) and hasattr(socket, "MSG_DONTWAIT"):
        sock = socket.socket(fileno=os.dup(fd))
        stack.callback(sock.close)
        return lambda view: sock.send(view, socket.MSG_DONTWAIT)
    return None


def _is_async_stream(stream: Any) -> bool:
    return isinstance(stream, anyio.AsyncFile) or hasattr(stream, "__aiter__")


def _binary(stream: Any) -> Any:
    return getattr(stream, "buffer", stream) if isinstance(stream, io.TextIOBase) else stream


def _private_fd(stream: Any, std_stream: Any) -> int | None:
    """The descriptor the SDK's claim serves the wire from, or ``None`` when it served ``std_stream`` in place."""
    if stream is getattr(std_stream, "buffer", None):
        return None  # sys.stdin/stdout not backed by fd 0/1 (replaced, or a claim that could not divert)
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return None


@asynccontextmanager
async def stdio_server(
    stdin: anyio.AsyncFile[str] | BinaryIO | None = None, stdout: anyio.AsyncFile[str] | BinaryIO | None = None
) -> AsyncIterator[tuple[ContextReceiveStream[ReadItem], ContextSendStream[SessionMessage]]]:
    """Serve MCP over the process's stdin and stdout, as ``mcp.server.stdio.stdio_server`` does, without threads.

    Yields ``(read_stream, write_stream)`` for ``Server.run``. While serving, fd 0 points at the null
    device and fd 1 at stderr (the SDK's claim), both restored on exit, after ``sys.stdout`` is flushed into
    the diversion (a ``print`` still buffered then goes to stderr, not to the wire); a second concurrent
    ``stdio_server()`` (this one or the SDK's) raises ``RuntimeError``. Explicit streams skip the
    claim: an anyio ``AsyncFile[str]`` (as the SDK takes) or a binary file-like object.
    """
    restore_stdin: Callable[[], None] | None = None
    restore_stdout: Callable[[], None] | None = None
    try:
        async with AsyncExitStack() as stack:
            raw_read_stream_writer, raw_read_stream = anyio.create_memory_object_stream[tuple[Any, ReadItem]](0)
            read_stream = ContextReceiveStream[ReadItem](raw_read_stream)
            read_stream_writer = _Sender(raw_read_stream_writer)
            # The write side's receiving end is the raw stream, so the writer can take every message waiting.
            raw_write_stream, write_stream_reader = anyio.create_memory_object_stream[tuple[Any, SessionMessage]](0)
            write_stream = ContextSendStream[SessionMessage](raw_write_stream)

            reader: Any
            if stdin is None:
                stdin_buffer, restore_stdin = _claim_fd(0, sys.stdin, "rb", _open_stdin_diversion)
                fd = _private_fd(stdin_buffer, sys.stdin)
                if fd is not None and _WATCHABLE_FDS:
                    reader = _read_fd(fd, read_stream_writer)
                else:
                    reader = _read_stream_in_thread(stdin_buffer, read_stream_writer)
            elif _is_async_stream(stdin):
                reader = _read_async_text(stdin, read_stream_writer)
            else:
                reader = _read_stream_in_thread(_binary(stdin), read_stream_writer)

            writer: Any
            if stdout is None:
                stdout_buffer, restore_stdout = _claim_fd(1, sys.stdout, "wb", _open_stdout_diversion)
                fd = _private_fd(stdout_buffer, sys.stdout)
                write = None if fd is None else _nonblocking_writer(fd, stack)
                if fd is not None and write is not None:
                    writer = _write_nonblocking(write, fd, write_stream_reader)
                else:
                    writer = _write_blocking(stdout_buffer, write_stream_reader)
            elif _is_async_stream(stdout):
                writer = _write_async_text(stdout, write_stream_reader)
            else:
                writer = _write_blocking(_binary(stdout), write_stream_reader)

            async with anyio.create_task_group() as tg:
                tg.start_soon(_guarded, reader)
                tg.start_soon(_guarded, writer)
                yield read_stream, write_stream
    finally:
        if restore_stdout is not None:
            _flush_python_stdout()
            restore_stdout()
        if restore_stdin is not None:
            restore_stdin()


def _flush_python_stdout() -> None:
    """Flush what ``print`` left in ``sys.stdout``'s buffer while fd 1 still points at the diversion (stderr):
    flushed later (at exit), it would land on the restored wire after the last message."""
    for stream in {id(stream): stream for stream in (sys.stdout, sys.__stdout__) if stream is not None}.values():
        with suppress(Exception):
            stream.flush()


async def _guarded(coroutine: Any) -> None:
    # As the SDK's tasks: the other side closing its stream ends this one quietly.
    with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        await coroutine


async def serve_stdio(server: Any) -> None:
    """Run ``server`` (an ``MCPServer`` or a low-level ``mcp.server.lowlevel.Server``) over ``stdio_server()``.

    What ``MCPServer.run_stdio_async()`` does, with rpcwire's transport.
    """
    lowlevel = getattr(server, "_lowlevel_server", server)
    if not callable(getattr(lowlevel, "create_initialization_options", None)):
        raise TypeError(f"expected an MCPServer or an mcp.server.lowlevel.Server, got {type(server).__name__}")
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def run_stdio(server: Any) -> None:
    """Serve ``server`` over stdio until its client closes stdin: ``server.run("stdio")`` with rpcwire's transport.

    ``MCPServer.run("stdio")`` uses the transport the SDK imported, so call this instead::

        from mcp.server.mcpserver import MCPServer
        from rpcwire.mcp import run_stdio

        app = MCPServer("demo")

        @app.tool()
        def echo(text: str) -> str:
            return text

        if __name__ == "__main__":
            run_stdio(app)  # was: app.run("stdio")
    """
    anyio.run(serve_stdio, server)


def tools(registry: Methods) -> list[dict[str, Any]]:
    """The functions of a ``methods()`` registry as MCP tools, for ``tools/list``: ``registry.mcp_tools()``.

    Each is ``{"name", "description", "inputSchema", "outputSchema"}``: the description from the docstring;
    ``inputSchema`` an object schema of the parameters (MCP passes arguments by name: a positional-only
    parameter raises ``TypeError``), from their annotations, with ``required`` for those without a default;
    ``outputSchema`` (none without a return annotation) the return annotation's schema when it is an object
    (a ``dict[str, ...]``, TypedDict, dataclass, pydantic model), else an object wrapping it as ``{"result": ...}``,
    as the MCP Python SDK does (MCP 2025-06-18 wants ``outputSchema`` and ``structuredContent`` to be objects):
    a tool with one answers ``tools/call`` with ``structuredContent`` shaped so. The registry needs nothing of
    the SDK, so ``registry.mcp_tools()`` serves a tool server that does not install it (``examples/tool_server.py``).
    """
    return registry.mcp_tools()
