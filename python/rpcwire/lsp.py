"""Language servers: LSP's base protocol (``Content-Length`` frames) through rpcwire's transport.

- :class:`JsonRpcStreamReader` and :class:`JsonRpcStreamWriter`: drop-in replacements for
  python-lsp-jsonrpc's classes of the same names (``pylsp_jsonrpc.streams``, 1.1.2): the same
  constructors and methods, for its ``Endpoint`` (``reader.listen(endpoint.consume)``,
  ``Endpoint(dispatcher, writer.write)``). Frames are read and JSON decoded and encoded by the native
  transport, with its tolerant reader (docs/semantics.md, "Content-Length framing").
- :class:`AsyncReader` and :class:`Writer`: the reader pygls's ``run_async`` accepts and the writer
  its protocol's ``set_writer(writer, include_headers=False)`` does; :func:`start_io` wires both into
  a pygls ``LanguageServer`` (``rpcwire.lsp.start_io(server)`` in place of ``server.start_io()``).

To serve LSP with rpcwire's own engine instead, pass ``framing="content-length"`` to
``StdioTransport`` (``rpcwire.serve(handler, StdioTransport(framing="content-length"))``).
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, BinaryIO

import rpcwire
from rpcwire._peer import encode_frame
from rpcwire._types import DEFAULT_MAX_MESSAGE_BYTES, MAX_MAX_DEPTH

__all__ = ["AsyncReader", "JsonRpcStreamReader", "JsonRpcStreamWriter", "Writer", "start_io"]

log: logging.Logger = logging.getLogger(__name__)


class JsonRpcStreamReader:
    """Reads ``Content-Length`` frames from ``rfile`` (a binary stream) and hands each decoded message to
    the consumer given to :meth:`listen`, as ``pylsp_jsonrpc.streams.JsonRpcStreamReader`` does.

    Where that reader needs ``Content-Length: N`` as the first header, exactly so spelled, and reads to the
    end of input when it is not, this one takes headers in any order and case and ``\\n`` line ends, and
    logs a bad frame (or a body that is not JSON) and reads on after it.
    """

    def __init__(self, rfile: BinaryIO, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self._rfile = rfile
        # Nesting as deep as the transport allows (512; json.loads stops near 1,000): LSP's messages are shallow.
        self._transport = rpcwire.StdioTransport(
            rfile, io.BytesIO(), framing="content-length", max_message_bytes=max_message_bytes, max_depth=MAX_MAX_DEPTH
        )

    def close(self) -> None:
        self._rfile.close()

    def listen(self, message_consumer: Callable[[Any], Any]) -> None:
        """Blocking: pass each message read to ``message_consumer`` until end of input or :meth:`close`."""
        read = self._transport._read_value
        while not self._rfile.closed:
            try:
                message = read()
            except ValueError:
                if self._rfile.closed:
                    return
                log.exception("Failed to read from rfile")
                continue
            if message is None:
                break
            try:
                message_consumer(message)
            except ValueError:
                log.exception("Failed to handle message %s", message)


class JsonRpcStreamWriter:
    """Writes each message as one ``Content-Length`` frame to ``wfile`` (a binary stream), as
    ``pylsp_jsonrpc.streams.JsonRpcStreamWriter`` does: thread-safe, nothing written once ``wfile`` is
    closed, a failure logged rather than raised.

    The body is compact UTF-8 JSON written by the native encoder, and the header ``Content-Length`` only
    (LSP's ``Content-Type`` is optional). With ``json_dumps_args`` (``indent``, ``cls``...), or a message the
    strict encoder refuses (NaN), the body is ``json.dumps(message, **json_dumps_args)``, as there.
    """

    def __init__(self, wfile: BinaryIO, **json_dumps_args: Any) -> None:
        self._wfile = wfile
        self._wfile_lock = threading.Lock()
        self._json_dumps_args = json_dumps_args
        self._transport = rpcwire.StdioTransport(io.BytesIO(), wfile, framing="content-length")

    def close(self) -> None:
        with self._wfile_lock:
            self._wfile.close()

    def write(self, message: Any) -> None:
        with self._wfile_lock:
            if self._wfile.closed:
                return
            try:
                if not self._json_dumps_args:
                    try:
                        self._transport._write_message(message)
                        return
                    except (TypeError, ValueError):  # refused before anything was written: json.dumps may take it
                        pass
                body = json.dumps(message, **self._json_dumps_args)
                self._wfile.write(encode_frame(body.encode("utf-8") if isinstance(body, str) else body))
                self._wfile.flush()
            except Exception:
                log.exception("Failed to write message to output file %s", message)


class AsyncReader:
    """The reader pygls's ``run_async`` takes (``readline``, ``readexactly``), over a binary stream.

    Each frame is read whole by the native transport on ``executor`` (a thread: the event loop never
    blocks), with its tolerant reader, and handed to ``run_async`` as the one form its parser takes, the
    frame as rpcwire writes it (``encode_frame``: ``Content-Length: N\\r\\n``, ``\\r\\n``, the body), its
    header a line at a time and its body whole. A frame that cannot be read, and an empty body, are logged
    and skipped.
    """

    def __init__(
        self,
        stdin: BinaryIO | None = None,
        executor: Executor | None = None,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self._transport = rpcwire.StdioTransport(
            stdin, io.BytesIO(), framing="content-length", max_message_bytes=max_message_bytes
        )
        self._executor = executor
        self._frame = b""  # the frame being handed out, from ``_offset`` on
        self._offset = 0

    def _next_body(self) -> bytes | None:
        while True:
            try:
                body = self._transport.read_line()
            except ValueError:
                log.exception("Failed to read a frame")
                continue
            if body is None or body:
                return body

    async def readline(self) -> bytes:
        if self._offset == len(self._frame):  # the last frame handed out whole: the next one
            body = await asyncio.get_running_loop().run_in_executor(self._executor, self._next_body)
            if body is None:
                return b""
            self._frame, self._offset = encode_frame(body), 0
        start = self._offset
        self._offset = self._frame.find(b"\n", start) + 1 or len(self._frame)
        return self._frame[start : self._offset]

    async def readexactly(self, n: int) -> bytes:
        data = self._frame[self._offset : self._offset + n]
        self._frame, self._offset = b"", 0  # a frame's body is read whole, after its header
        if len(data) != n:
            raise asyncio.IncompleteReadError(data, n)
        return data


class Writer:
    """The writer a pygls protocol takes with ``set_writer(writer, include_headers=False)``: each
    ``write(body)`` goes out as one ``Content-Length`` frame (counted in bytes), flushed."""

    def __init__(self, stdout: BinaryIO | None = None) -> None:
        self._stdout = sys.stdout.buffer if stdout is None else stdout
        self._transport = rpcwire.StdioTransport(io.BytesIO(), self._stdout, framing="content-length")

    def close(self) -> None:
        self._stdout.close()

    def write(self, data: bytes) -> None:
        self._transport._write_line(data)


def start_io(server: Any, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """Run a pygls ``LanguageServer`` (2.x) over stdin/stdout with :class:`AsyncReader` and :class:`Writer`,
    as its own ``start_io`` does with its reader and writer."""
    from pygls.io_ import run_async  # noqa: PLC0415 (pygls stays optional)

    server._stop_event = threading.Event()
    server.protocol.set_writer(Writer(stdout), include_headers=False)
    reader = AsyncReader(stdin, server.thread_pool)
    try:
        asyncio.run(
            run_async(
                stop_event=server._stop_event,
                reader=reader,
                protocol=server.protocol,
                logger=log,
                error_handler=server.report_server_error,
            )
        )
    except BrokenPipeError:
        log.error("Connection to the client is lost! Shutting down the server.")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
