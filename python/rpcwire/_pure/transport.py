"""The pure transport: :class:`StdioTransport`, JSON-RPC over a pair of binary streams, in Python.

It reads its input stream in chunks (what one ``read1`` gives, up to 64 KiB) into a
:class:`~rpcwire._pure.framing.FrameDecoder` and classifies each message with
:mod:`rpcwire._pure.envelope`; it writes each message whole, framed, in one ``write`` and one ``flush``,
under a lock. Serving is :mod:`rpcwire._engine`'s: this class is the *core* it schedules over
(:class:`rpcwire._contract.Transport`), as the native ``StdioTransport`` is.
"""

from __future__ import annotations

import io
import operator
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

from rpcwire._contract import Incoming, Message
from rpcwire._pure import bound
from rpcwire._pure.codec import ParseError, decode, encode
from rpcwire._pure.envelope import (
    Answers,
    Unreadable,
    answer_refused,
    check_limits,
    classify_text,
    decode_incoming,
    encode_request,
    error_answer,
    sized,
    success_answer,
)
from rpcwire._pure.framing import FrameDecoder, check_framing, encode_frame
from rpcwire._types import (
    BY_HANDLER,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_MESSAGE_BYTES,
    Framing,
    Handler,
    Refused,
)

__all__ = ["StdioTransport"]

_READ_CHUNK = 64 * 1024  # the most one read asks for (and so the most read ahead)
_NON_BLOCKING = "stdin is non-blocking and had no data; pass a blocking stream"


def _binary_stream(stream: Any, name: str, needs: str) -> Any:
    if isinstance(stream, io.TextIOBase):
        buffer = getattr(stream, "buffer", None)
        if buffer is None:
            raise TypeError(f"{name} is a text stream without a binary .buffer; pass a binary file-like object")
        stream = buffer
    if not callable(getattr(stream, needs, None)):
        raise TypeError(f"{name} must be a binary file-like object with a {needs}() method")
    return stream


def _read_method(stream: Any) -> Callable[[int], Any]:
    """How ``stream`` is read: ``read1`` (what is there, waiting only when nothing is), a raw stream's ``read``
    (one system call), else ``readline``, bounded (it waits for a ``\\n``, which a frame's body may lack)."""
    read1 = getattr(stream, "read1", None)
    if callable(read1):
        return read1  # type: ignore[no-any-return]
    if isinstance(stream, io.RawIOBase):
        return stream.read
    return stream.readline  # type: ignore[no-any-return]


_ABSENT = object()
_ALREADY_SERVING = "this transport is already serving: serve() was called on it again before the first call returned"


def _output(stdout: Any) -> tuple[Any, Callable[[], Any] | None]:
    """The binary stream to write to and its ``flush`` (``None`` when it has none; one not callable is refused)."""
    stream = _binary_stream(stdout, "stdout", "write")
    flush: Any = getattr(stream, "flush", _ABSENT)
    if flush is not _ABSENT and not callable(flush):
        raise TypeError("stdout.flush must be callable (or absent)")
    return stream, None if flush is _ABSENT else flush


_REENTRANT_READ = "reentrant read: the input stream called back into the transport it belongs to"
_REENTRANT_WRITE = "reentrant write: the output stream called back into the transport it belongs to"


class _StreamLock:
    """The lock around one stream; a stream that calls back into its transport from the same
    thread gets ``RuntimeError`` instead of waiting for itself forever (as ``io.BufferedWriter``)."""

    def __init__(self, reentrant_message: str) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._reentrant_message = reentrant_message

    def __enter__(self) -> None:
        me = threading.get_ident()
        if self._owner == me:
            raise RuntimeError(self._reentrant_message)
        self._lock.acquire()  # interruptible: SIGINT's KeyboardInterrupt is raised while waiting
        self._owner = me

    def __exit__(self, *exc_info: object) -> None:
        self._owner = None
        self._lock.release()


def incoming(line: bytes | Refused | None, max_depth: int) -> Incoming | tuple[str, bytes] | None:
    """A message a client read (``None``: the end of input) as ``_read_incoming`` gives it."""
    if line is None:
        return None
    if isinstance(line, Refused):
        return line.reason
    message = decode_incoming(line, max_depth)
    return (message.reason, line) if isinstance(message, Unreadable) else message


class StdioTransport(Answers):
    """JSON-RPC 2.0 over a pair of binary streams, one message per line or per ``Content-Length``
    frame (``framing="content-length"``, LSP's base protocol) (pure Python).

    ``stdin`` and ``stdout`` default to ``sys.stdin.buffer`` and ``sys.stdout.buffer``; a text
    stream is replaced by its ``.buffer``. Writes from several threads never interleave.
    """

    def __init__(
        self,
        stdin: BinaryIO | None = None,
        stdout: BinaryIO | None = None,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_batch: int | None = DEFAULT_MAX_BATCH,
        framing: Framing = "newline",
    ) -> None:
        check_framing(framing)
        self._max_message_bytes, self._max_depth, self._max_batch = check_limits(
            max_message_bytes, max_depth, max_batch
        )
        self._stdin = _binary_stream(sys.stdin if stdin is None else stdin, "stdin", "readline")
        self._stdout, self._flush = _output(sys.stdout if stdout is None else stdout)
        self._reader = _StreamLock(_REENTRANT_READ)
        self._writer = _StreamLock(_REENTRANT_WRITE)
        self._serving = threading.Lock()  # held while a serve runs over this transport
        self._read = _read_method(self._stdin)
        self._decoder = FrameDecoder(framing, max_message_bytes=self._max_message_bytes)
        self._lines = framing == "newline"
        self._at_eof = False

    @property
    def framing(self) -> Framing:
        """``"newline"`` or ``"content-length"``."""
        return "newline" if self._lines else "content-length"

    # --- reading ------------------------------------------------------------------------------------

    def _fill(self) -> None:
        """One read from the stream into the decoder (the end of input closes it). Called under the reader's lock."""
        try:
            chunk = self._read(_READ_CHUNK)
        except io.UnsupportedOperation:
            if self._read == self._stdin.readline:
                raise
            # An ``io.BufferedIOBase`` subclass inherits a ``read1`` that it does not implement.
            self._read = self._stdin.readline
            chunk = self._read(_READ_CHUNK)
        if chunk is None:
            raise BlockingIOError(_NON_BLOCKING)
        if chunk:
            self._decoder.feed(chunk)
        else:
            self._decoder.close()
            self._at_eof = True

    def _next(self, blank: bool = False) -> bytes | Refused | None:
        """The next message's bytes (a blank line only if ``blank``), what was dropped, or ``None`` at end of input."""
        skip_blank = not blank
        with self._reader:
            while (message := self._decoder._next_message(skip_blank)) is None and not self._at_eof:
                self._fill()
            return message

    def _has_buffered_message(self) -> bool:
        """Whether the next ``_read_incoming`` (or ``_read_message``) returns without reading the stream: a whole
        message, or the end of input, is already buffered (blank lines before it are dropped: they are no
        message to those readers, and one alone must not make a timed client block on the stream)."""
        with self._reader:
            return self._at_eof or self._decoder._buffered(skip_blank=True)

    def _read_available(self) -> None:
        """Read once from the stream (what one ``read1`` gives, which waits only when nothing is there) unless a
        whole message is already buffered; then ``_has_buffered_message`` tells whether one is. A client waiting
        with a timeout reads this way once ``select`` says the stream is readable, so that half a message never
        blocks it past its deadline."""
        with self._reader:
            if not (self._at_eof or self._decoder._buffered(skip_blank=True)):
                self._fill()

    def read_line(self) -> bytes | None:
        """The next line without its ``\\n`` (or ``\\r\\n``); ``None`` at end of input.

        A line longer than ``max_message_bytes`` is discarded and raises ``ValueError``; the next
        call reads on after it. With ``framing="content-length"``: the next frame's body; a frame
        that cannot be read (or is over the limit) raises ``ValueError`` and is dropped.
        """
        line = self._next(blank=True)
        if isinstance(line, Refused):
            raise ValueError(f"{line.reason} was discarded")
        return line

    def _read_value(self) -> Any:
        """The next message decoded as JSON (any value); ``None`` at end of input. A message that
        cannot be read or is not JSON raises ``ValueError``; the next call reads on after it."""
        line = self._next()
        if isinstance(line, Refused):
            raise ValueError(f"{line.reason} was discarded")
        if line is None:
            return None
        try:
            return decode(line, self._max_depth)
        except ParseError as exc:
            raise ValueError(str(exc)) from None

    # --- writing ------------------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        """``data`` in one ``write`` (repeated only while a raw stream takes part of it), then ``flush``."""
        view = memoryview(data)
        with self._writer:
            while view:  # a raw (unbuffered) stream may take only part of it
                written = self._stdout.write(view)
                count = len(view) if written is None else operator.index(written)
                if not 0 <= count <= len(view):
                    raise OSError(
                        f"write() returned invalid length {count} (should have been between 0 and {len(view)})"
                    )
                view = view[count:]
            if self._flush is not None:
                self._flush()

    def _write_line(self, line: bytes) -> None:
        """Write one message (a line ending in ``\\n``, or one ``Content-Length`` frame) and flush."""
        self._write(line + b"\n" if self._lines else encode_frame(line))

    def _write_lines(self, lines: Sequence[bytes]) -> None:
        """Write several messages, each framed, in one ``write``, and flush (nothing for no message)."""
        if lines:
            self._write(b"\n".join(lines) + b"\n" if self._lines else b"".join(map(encode_frame, lines)))

    def _swap_output(self, stdout: BinaryIO) -> Any:
        """Write to ``stdout`` from now on; the stream written to until now (swapped under the writer's lock)."""
        output = _output(stdout)
        with self._writer:
            previous = self._stdout
            self._stdout, self._flush = output
        return previous

    def write_response(self, id: Any, result: Any) -> None:
        """Write a success answer ``{"jsonrpc":"2.0","id":id,"result":result}``."""
        self._write_line(success_answer(encode(id), result))

    def write_error(self, id: Any, code: int, message: str, data: Any = None) -> None:
        """Write an error answer; the ``data`` member is left out when ``data`` is ``None``."""
        self._write_line(error_answer(encode(id), code, message, data))

    def write_notification(self, method: str, params: Any = None) -> None:
        """Write a notification (no ``id``), e.g. a progress event while a request is in flight."""
        self._write_line(encode_request(method, params))

    def _write_message(self, message: Any) -> None:
        """Encode ``message`` (any JSON value) as compact JSON and write it as one message."""
        self._write_line(encode(message))

    # --- the core the engine (rpcwire._engine) schedules over ------------------------------------

    def _read_message(self) -> Message | None:
        """The next message, read and classified (blank lines skipped): ``None`` at end of input; the bytes of
        the answer the transport itself gives (-32700, -32600, an over-long line); a ``Request``; or a batch's
        entries, each a ``Request`` or its -32600 answer's bytes."""
        line = self._next()
        if line is None:
            return None
        if isinstance(line, Refused):
            return answer_refused(line)
        return sized(classify_text(line, self._max_depth, self._max_batch), len(line))

    def _read_incoming(self) -> Incoming | tuple[str, bytes] | None:
        """The next message as a client reads it (blank lines skipped), nested at most ``max_depth`` deep:
        ``None`` at end of input; a ``Response``; a ``Request`` (the server's own request or notification); a
        ``list`` of these for a batch; a ``str`` saying why a message (a line over ``max_message_bytes``
        included) is neither; or, for a message that cannot be decoded, ``(why, its bytes)``, so that the
        client can look for the call it names."""
        return incoming(self._next(), self._max_depth)

    @property
    def _limits(self) -> tuple[int, int, int | None]:
        """``(max_message_bytes, max_depth, max_batch)``, as given (``max_batch`` ``None`` when unlimited):
        the limits a client checks its own messages against before it sends them."""
        return self._max_message_bytes, self._max_depth, self._max_batch

    def serve(self, handler: Handler, *, max_concurrency: int = BY_HANDLER) -> None:
        """Answer every request with ``handler(method, params)`` until end of input: ``rpcwire.serve(handler,
        self, max_concurrency=...)``, which chooses the mode, without its guard of the process's fd 1 (its
        default too: 1 for a sync handler, 64 for an async one)."""
        bound.serve(handler, self, max_concurrency=max_concurrency, guard_stdout=False)

    def _serve_sequential(self, handler: Handler) -> None:
        """The sequential loop: one message at a time, in order, on the calling thread, until end of input.

        Stops with the exception if reading or writing fails (a ``BrokenPipeError`` once the peer
        is gone) or if the handler raises a ``BaseException`` that is not an ``Exception``.
        ``RuntimeError`` if a ``serve`` already runs over this transport.
        """
        self._start_serving()
        try:
            bound.serve_sequential(handler, self)
        finally:
            self._stop_serving()

    def _start_serving(self) -> None:
        """Mark this transport as served (every ``serve`` calls it first): ``RuntimeError`` if a ``serve``
        already runs over it, since two readers would share the input and an answer could wait behind
        the other's read. ``_stop_serving`` ends it."""
        if not self._serving.acquire(blocking=False):
            raise RuntimeError(_ALREADY_SERVING)

    def _stop_serving(self) -> None:
        """The end of what ``_start_serving`` began."""
        self._serving.release()
