"""Type stubs of the native module (hand-written; checked by ``mypy.stubtest`` in ``make lint``)."""

from collections.abc import Callable, Iterable
from typing import Any, BinaryIO, final

from rpcwire._contract import ErrorAnswer, LoneOutcome, ReadFailed, ReadOn, Unsent
from rpcwire._types import Framing, JsonRpcError, Refused, Request, Response

__all__ = [
    "FrameDecoder",
    "StdioTransport",
    "_ClientPipe",
    "_bind",
    "_current_call",
    "_current_context",
    "_encode_frame",
    "_encode_request",
    "_nests_deeper",
    "_parse_incoming",
    "_read_text",
    "_set_current_context",
    "dispatch",
    "parse_request",
]

@final
class StdioTransport:
    """JSON-RPC 2.0 over a pair of binary streams, one message per line or per ``Content-Length`` frame.

    ``stdin`` and ``stdout`` default to ``sys.stdin.buffer`` and ``sys.stdout.buffer``; a text stream is replaced by
    its ``.buffer``. Writes from several threads never interleave.
    """

    def __new__(
        cls,
        stdin: BinaryIO | None = None,
        stdout: BinaryIO | None = None,
        *,
        max_message_bytes: int = 67108864,
        max_depth: int = 128,
        max_batch: int | None = 1000,
        framing: Framing = "newline",
    ) -> StdioTransport: ...
    @property
    def framing(self) -> Framing:
        """``"newline"`` or ``"content-length"``."""
    def read_line(self) -> bytes | None:
        """The next line without its ``\\n`` (or ``\\r\\n``); ``None`` at end of input.

        A line longer than ``max_message_bytes`` is discarded and raises ``ValueError``. With
        ``framing="content-length"``: the next frame's body; a bad or over-long frame raises ``ValueError``.
        """
    def _read_value(self) -> Any:
        """The next message decoded as JSON (any value); ``None`` at end of input; ``ValueError`` for a
        message that cannot be read or is not JSON (the next call reads on after it)."""
    def _write_message(self, message: Any) -> None:
        """Encode ``message`` (any JSON value) as compact JSON and write it as one message."""
    def write_response(self, id: Any, result: Any) -> None:
        """Write a success answer."""
    def write_error(self, id: Any, code: int, message: str, data: Any = None) -> None:
        """Write an error answer; no ``data`` member when ``data`` is ``None``."""
    def write_notification(self, method: str, params: Any = None) -> None:
        """Write a notification (no ``id``); no ``params`` member when ``params`` is ``None``."""
    def _read_message(self) -> bytes | Request | list[Request | bytes] | None:
        """The next message, read and classified as ``serve`` reads it (blank lines skipped).

        ``None`` at end of input; ``bytes``: the whole answer line (without ``\\n``) the transport
        gives itself (-32700 for a parse error, -32600 for an invalid message, an empty batch, a
        batch over ``max_batch`` or a line over ``max_message_bytes``); a ``Request``; for a batch,
        a ``list`` of a ``Request`` per valid entry and the answer's ``bytes`` per invalid one, in
        order (notifications included: they are not answered).
        """
    def _has_buffered_message(self) -> bool:
        """Whether the next ``_read_incoming`` (or ``_read_message``) returns without reading the stream: a whole
        message, or the end of input, is already buffered (blank lines before it are dropped)."""
    def _read_available(self) -> None:
        """Read once from the stream unless a whole message is already buffered (a timed client's read)."""
    def _read_incoming(self) -> Response | Request | str | list[Response | Request | str] | tuple[str, bytes] | None:
        """The next message as a client reads it (blank lines skipped), nested at most ``max_depth`` deep:
        ``None`` at end of input; a ``Response``; a ``Request`` (the server's own request or notification); a
        ``list`` of these for a batch; a ``str`` saying why a message (a line over ``max_message_bytes``
        included) is neither; or, for a message that cannot be decoded, ``(why, its bytes)``.
        """
    @property
    def _limits(self) -> tuple[int, int, int | None]:
        """``(max_message_bytes, max_depth, max_batch)``, as given (``max_batch`` ``None`` when unlimited)."""
    @staticmethod
    def _answer_result(id_json: bytes, result: Any, *, expose_errors: bool = True) -> bytes:
        """The answer line (without ``\\n``) ``serve`` writes when the handler returned ``result``.

        A success answer for the id ``id_json`` (a ``Request``'s), or -32603 when ``result``
        cannot be encoded (logged at ERROR; no ``data`` when ``expose_errors`` is false); a
        ``BaseException`` that is not an ``Exception`` propagates.
        """
    @staticmethod
    def _answer_error(id_json: bytes, exception: BaseException, *, expose_errors: bool = True) -> bytes:
        """The answer line (without ``\\n``) ``serve`` writes when the handler raised ``exception``.

        A ``JsonRpcError``'s code, message and data; -32603 with ``data: {"exception", "detail"}``
        for anything else or a ``JsonRpcError`` that cannot be read; -32603 when ``data`` cannot
        be encoded (these two logged at ERROR). ``expose_errors=False``: a -32603 has no ``data``.
        """
    def _write_line(self, line: bytes) -> None:
        """Write ``line`` as one message (``line + b"\\n"``, or one ``Content-Length`` frame, whatever it holds)
        in one ``write`` and flush, under the writer lock."""
    def _write_lines(self, lines: Iterable[bytes | bytearray | memoryview]) -> None:
        """Write each of ``lines`` as one message, all in one ``write``, and flush, under the writer lock
        (nothing for no lines)."""
    def _swap_output(self, stdout: BinaryIO) -> BinaryIO:
        """Write to ``stdout`` from now on; the stream written to until now (swapped under the writer's lock)."""
    def serve(self, handler: Callable[[str, Any], Any], *, max_concurrency: int = 1) -> None:
        """Answer every request with ``handler(method, params)`` until end of input: ``rpcwire.serve(handler,
        self, max_concurrency=...)``, which chooses the mode, without its guard of the process's fd 1."""
    def _serve_sequential(self, handler: Callable[[str, Any], Any]) -> None:
        """The sequential loop: one message at a time, in order, on the calling thread, until end of input."""
    def _start_serving(self) -> None:
        """Mark this transport as served: ``RuntimeError`` if a ``serve`` already runs over it."""
    def _stop_serving(self) -> None:
        """The end of what ``_start_serving`` began."""

@final
class FrameDecoder:
    """Framing without I/O: ``feed`` the bytes read, ``next`` the messages (the transport's own rules). Threads
    may share one: its calls take turns on a lock, and each message is handed out once."""

    def __new__(
        cls, framing: Framing = "newline", *, max_message_bytes: int = 67108864, skip_blank: bool = True
    ) -> FrameDecoder: ...
    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add bytes read from the stream (``b""`` is not the end of input); ``ValueError`` after ``close()``."""
    def close(self) -> None:
        """The end of input: ``next`` then hands out what is left, and ``None`` after it."""
    def next(self) -> bytes | Refused | None:
        """The next message's bytes, a ``Refused`` for one that was dropped, or ``None`` when more input is
        needed (after ``close()``: when nothing is left). Blank lines are skipped (newline framing), or handed
        out with ``skip_blank=False``."""

@final
class _ClientPipe:
    """A spawned server's pipes as ``rpcwire.Client`` reads and writes them (``src/client.rs``; unix only)."""

    def __new__(
        cls,
        fd: int,
        out_fd: int,
        halt_fd: int,
        *,
        framing: Framing = "newline",
        max_message_bytes: int,
        max_depth: int,
    ) -> _ClientPipe: ...
    def _has_buffered_message(self) -> bool:
        """As ``StdioTransport._has_buffered_message``."""
    def _read_available(self) -> None:
        """As ``StdioTransport._read_available``: one read of the pipe unless a whole message is buffered."""
    def _read_incoming(self) -> Response | Request | str | list[Response | Request | str] | tuple[str, bytes] | None:
        """As ``StdioTransport._read_incoming``."""
    def _take_reading(self) -> bool:
        """Take the client's reading lock if nobody holds it (``True``: taken)."""
    def _leave_reading(self) -> None:
        """Release the client's reading lock (held by the caller)."""
    def _reading_taken(self) -> bool:
        """Whether a thread holds the client's reading lock."""
    def _since_read(self) -> float:
        """Seconds since ``_call`` last read its answer (``inf``: never)."""
    def _call(
        self, method: str, params: Any, id: int, quick_bytes: int, quick_depth: int, timeout: float | None, output: Any
    ) -> Any | LoneOutcome:
        """A lone caller's whole call: the result of its answer, or a ``LoneOutcome`` (``rpcwire._contract``):
        ``Unsent`` nothing written, ``ErrorAnswer`` its answer an error, ``ReadOn`` written and something else (or
        nothing) read, the reading held, ``ReadFailed`` written and reading failed, the reading held."""

def _bind(
    *,
    serve: Callable[..., None],
    request: type[Request],
    response: type[Response],
    json_rpc_error: type[JsonRpcError],
    refused: type[Refused],
    log_failure: Callable[[Any, str, str | None, BaseException], None],
    meta_traceparent: Callable[[Any], str | None],
    lone_outcomes: tuple[type[Unsent], type[ErrorAnswer], type[ReadOn], type[ReadFailed]],
) -> None:
    """Hand the native module the Python objects it calls back (``rpcwire`` does, once, at import): it imports
    none of the package's modules itself."""

def parse_request(raw: str | bytes) -> tuple[Request | None, dict[str, Any] | None]:
    """Parse one JSON-RPC message: ``(request, None)`` or ``(None, error_response)``."""

def _current_call() -> tuple[Request, StdioTransport] | None:
    """The call the sequential ``serve`` is making on this thread: its ``Request`` and transport."""

def _current_context() -> Any:
    """The ``RequestContext`` already made for the call in progress, if any."""

def _set_current_context(context: Any) -> None:
    """Keep ``context`` for the rest of the call in progress."""

def dispatch(
    body: str | bytes,
    handler: Callable[[str, Any], Any],
    *,
    max_message_bytes: int = 67108864,
    max_depth: int = 128,
    max_batch: int | None = 1000,
    expose_errors: bool = True,
) -> bytes | None:
    """Answer one whole JSON text (e.g. an HTTP body) as ``serve`` answers a line; ``None``: nothing to answer.

    ``expose_errors=False``: a -32603 is "Internal error" alone, without the exception's name and text.
    """

def _read_text(
    body: bytes, max_message_bytes: int, max_depth: int, max_batch: int | None
) -> bytes | Request | list[Request | bytes]:
    """One whole JSON text (an HTTP body) read as ``StdioTransport._read_message`` reads a line; an empty or
    blank body is -32600, a body over ``max_message_bytes`` is answered unread as an over-long line."""

def _encode_request(method: str, params: Any = None, id: Any = None) -> bytes:
    """The line of a request (``id`` given) or a notification (``id`` is ``None``), without ``\\n``."""

def _encode_frame(body: bytes) -> bytes:
    """One ``Content-Length`` frame: the header (``Content-Length: N\\r\\n\\r\\n``, ``N`` counting bytes), then
    ``body``."""

def _nests_deeper(line: bytes, max_depth: int) -> bool:
    """Whether arrays and objects nest deeper than ``max_depth`` in the JSON text ``line`` (its strings'
    brackets not counted), as a server counts them: the envelope and a batch's array included."""

def _parse_incoming(data: bytes, max_depth: int = 128) -> Response | Request | str | list[Response | Request | str]:
    """One message a client read: a ``Response``, a ``Request``, a ``list`` of these, or why it is neither
    (nesting deeper than ``max_depth`` is a parse error)."""
