"""The core's contract: what the engine, the clients and the HTTP apps call on a core, named once.

A *core* is the native module ``rpcwire._rpcwire`` or the pure-Python :mod:`rpcwire._pure`; both implement
every member below with the same behaviour and bytes (``docs/semantics.md``), so nothing above a core
branches on which one it has. ``tests/wire/test_contract.py`` checks both against these protocols and mypy
checks the modules' types against :class:`Core`.

Members with a leading underscore are rpcwire's own seam, not public API; the public ones are the
teaching implementation's names (``StdioTransport``, ``dispatch``, ``parse_request``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any, BinaryIO, Protocol, final

from rpcwire._types import Framing, Handler, Refused, Request, Response

Message = bytes | Request | list[Request | bytes]
"""A message as a server reads it (``_read_message``): the core's own answer bytes for a message it refused
(-32700, -32600, ...), a request, or a batch's entries in order (a request, or an invalid entry's answer)."""

Incoming = Response | Request | str | list[Response | Request | str]
"""A message as a client reads it (``_parse_incoming``): a response, the server's own request or
notification, a batch of these, or a ``str`` saying why a message is neither."""


# --- what a lone call comes back with: typed outcomes, the same classes from either core -------------------


class LoneOutcome:
    """What ``ClientPipe._call`` (a lone caller's whole call in one call into the core) returns when it is not
    the result of the call's answer: one of the four classes below, never anything else. A result is a decoded
    JSON value, never one of them, so ``isinstance(outcome, LoneOutcome)`` tells the two apart. Defined once,
    here: the pure core makes them, and the native one is handed them by ``_bind`` (``src/bound.rs``). Each holds
    one value, read-only, and compares by its class and value (plain slotted classes, not dataclasses: the
    package's import makes no code for them)."""

    __slots__ = ()

    def __init__(self, value: Any) -> None:
        object.__setattr__(self, self.__slots__[0], value)  # type: ignore[misc]

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def _value(self) -> Any:
        return getattr(self, self.__slots__[0])  # type: ignore[misc]

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._value() == self._value()

    __hash__ = None  # type: ignore[assignment]  # (compared by value; never a key)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._value()!r})"


@final
class Unsent(LoneOutcome):
    """Nothing was written (another thread reads or writes, the line is long or deep, the pipe is full): the
    call goes on as any call with ``line``, its request. The reading is not held."""

    __slots__ = ("line",)
    line: bytes


@final
class ErrorAnswer(LoneOutcome):
    """The call's own answer came, and it is an error (``response``). The reading is released."""

    __slots__ = ("response",)
    response: Response


@final
class ReadOn(LoneOutcome):
    """The call was written, and something other than its answer came first (``message``, as
    ``_read_incoming`` hands it out), or nothing yet (``None``: the deadline passed, the client halts, or the
    input ended). The reading is held: the caller goes on reading, as any call that reads."""

    __slots__ = ("message",)
    message: Incoming | tuple[str, bytes] | None


@final
class ReadFailed(LoneOutcome):
    """The call was written, and reading failed (``error``: an ``OSError``, an interrupt's exception). The
    reading is held."""

    __slots__ = ("error",)
    error: BaseException


class AnswerBuilder(Protocol):
    """Answer bytes for a handler's outcome (a transport or its class: both methods are static)."""

    @staticmethod
    def _answer_result(id_json: bytes, result: Any, *, expose_errors: bool = True) -> bytes:
        """The success answer to the request whose id is ``id_json`` (-32603 when ``result`` cannot be encoded)."""
        ...

    @staticmethod
    def _answer_error(id_json: bytes, exception: BaseException, *, expose_errors: bool = True) -> bytes:
        """The error answer for a handler that raised ``exception``."""
        ...


class FrameDecoder(Protocol):
    """Framing without I/O (in the style of h11): bytes in with :meth:`feed`, messages out with :meth:`next`.

    One decoder holds the rules of both framings (``"newline"``: a message per line ending at ``\\n``, a
    ``\\r`` before it dropped, blank lines skipped unless ``skip_blank=False``; ``"content-length"``: LSP's
    header block and body), the ``max_message_bytes`` limit (an over-long message is dropped as it arrives,
    never held whole) and the resynchronisation after a bad frame. Every reader of a stream uses it: the
    transports (and through them ``rpcwire.lsp`` and ``--listen``), the asyncio client, the MCP reader.
    """

    def __init__(self, framing: Framing = "newline", *, max_message_bytes: int = ..., skip_blank: bool = True) -> None:
        """A decoder of ``framing``'s messages, dropping those over ``max_message_bytes`` (both checked as
        ``StdioTransport`` checks them). ``skip_blank=False`` hands blank lines out instead of skipping them,
        as ``read_line`` does (the MCP reader: the SDK turns each into a validation error); it changes nothing
        for ``"content-length"``, whose bodies are never skipped (an empty one is ``b""``)."""
        ...

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add bytes read from the stream (``b""`` is not the end of input: see :meth:`close`)."""
        ...

    def close(self) -> None:
        """The end of input: :meth:`next` then hands out what is left (a last line without ``\\n`` is a
        message; an unfinished frame is a :class:`~rpcwire._types.Refused`) and ``None`` after it."""
        ...

    def next(self) -> bytes | Refused | None:
        """The next message's bytes, a :class:`~rpcwire._types.Refused` for one that was dropped, or ``None``
        when more input is needed (or, after :meth:`close`, when nothing is left). A blank line is skipped, or
        handed out with ``skip_blank=False``."""
        ...


class Transport(AnswerBuilder, Protocol):
    """A ``StdioTransport``: JSON-RPC over a pair of binary streams, as the engine and the clients drive it."""

    def __init__(
        self,
        stdin: IO[bytes] | None = None,
        stdout: IO[bytes] | None = None,
        *,
        max_message_bytes: int = ...,
        max_depth: int = ...,
        max_batch: int | None = ...,
        framing: Framing = "newline",
    ) -> None:
        """Over ``stdin``/``stdout`` (the process's own when ``None``), with the limits and framing checked
        (``ValueError``/``TypeError`` for a bad one); the clients build one with a spawned server's pipes."""
        ...

    @property
    def framing(self) -> Framing:
        """``"newline"`` or ``"content-length"``."""
        ...

    @property
    def _limits(self) -> tuple[int, int, int | None]:
        """``(max_message_bytes, max_depth, max_batch)`` as given."""
        ...

    def read_line(self) -> bytes | None:
        """The next message's bytes; ``None`` at end of input."""
        ...

    def write_response(self, id: Any, result: Any) -> None:
        """Write a success answer."""
        ...

    def write_error(self, id: Any, code: int, message: str, data: Any = None) -> None:
        """Write an error answer."""
        ...

    def write_notification(self, method: str, params: Any = None) -> None:
        """Write a notification."""
        ...

    def _read_message(self) -> Message | None:
        """The next message as a server reads it; ``None`` at end of input."""
        ...

    def _read_incoming(self) -> Incoming | tuple[str, bytes] | None:
        """The next message as a client reads it; ``(why, its bytes)`` for one that cannot be decoded."""
        ...

    def _read_available(self) -> None:
        """Read once from the stream unless a whole message is already buffered. Over an ``io.BufferedReader``
        the read leaves nothing in the reader's own buffer (it asks for more than that buffer holds, which
        ``readinto1``/``read1`` read past it), so that what the core has not buffered is still behind the
        descriptor: ``Client`` waits on it with ``poll`` between reads."""
        ...

    def _has_buffered_message(self) -> bool:
        """Whether the next ``_read_incoming``/``_read_message`` returns without reading the stream (a message, or
        the end, is buffered); the blank lines before it are dropped (a blank line alone is no message)."""
        ...

    def _read_value(self) -> Any:
        """The next message decoded as JSON (any value; ``rpcwire.lsp``'s reader); ``None`` at end of input.
        ``ValueError`` for one that cannot be read or is not JSON; the next call reads on after it."""
        ...

    def _write_message(self, message: Any) -> None:
        """Write ``message`` (any JSON value; ``rpcwire.lsp``'s writer) encoded, framed, in one write, and flush;
        ``TypeError``/``ValueError`` before anything is written when it cannot be encoded."""
        ...

    def _write_line(self, line: bytes) -> None:
        """Write one message (framed as this transport frames) in one write, and flush."""
        ...

    def _write_lines(self, lines: Sequence[bytes]) -> None:
        """Write several messages, each framed, in one write, and flush."""
        ...

    def _swap_output(self, stdout: BinaryIO) -> BinaryIO:
        """Write to ``stdout`` from now on; the stream written to until now."""
        ...

    def _serve_sequential(self, handler: Handler) -> None:
        """The sequential loop: one message at a time, in order, on the calling thread, until end of input."""
        ...

    def _start_serving(self) -> None:
        """Mark this transport as served (``RuntimeError`` if it already is)."""
        ...

    def _stop_serving(self) -> None:
        """The end of what ``_start_serving`` began."""
        ...

    def serve(self, handler: Handler, *, max_concurrency: int = 1) -> None:
        """``rpcwire.serve(handler, self, max_concurrency=...)``."""
        ...


_Decoder = FrameDecoder  # in Core's body the name FrameDecoder is Core's own member


class ClientPipe(Protocol):
    """A spawned server's pipes as ``rpcwire.Client`` reads and writes them (``_ClientPipe(fd, out_fd, halt_fd, *,
    framing, max_message_bytes, max_depth)``): the reading of ``Transport`` (``_read_available``,
    ``_has_buffered_message``, ``_read_incoming``) straight from the stdout pipe, and a lone caller's call in one
    step. Read by one thread at a time (``RuntimeError`` for a second); only where there is ``select.poll``."""

    def __init__(
        self,
        fd: int,
        out_fd: int,
        halt_fd: int,
        *,
        framing: Framing = "newline",
        max_message_bytes: int,
        max_depth: int,
    ) -> None: ...

    def _has_buffered_message(self) -> bool: ...
    def _read_available(self) -> None: ...
    def _read_incoming(self) -> Incoming | tuple[str, bytes] | None: ...

    def _take_reading(self) -> bool:
        """Take the client's reading lock if nobody holds it (``True``: taken; only ever tried, never waited for)."""
        ...

    def _leave_reading(self) -> None:
        """Release the client's reading lock (held by the caller)."""
        ...

    def _reading_taken(self) -> bool:
        """Whether a thread holds the client's reading lock."""
        ...

    def _since_read(self) -> float:
        """Seconds since ``_call`` last read its answer (``inf``: never)."""
        ...

    def _call(  # noqa: PLR0917 (the native method's positional arguments: one call, no keywords to parse)
        self, method: str, params: Any, id: int, quick_bytes: int, quick_depth: int, timeout: float | None, output: Any
    ) -> Any | LoneOutcome:
        """A lone caller's whole call (``id``: its id; ``output``: the client's ``_Output``, whose ``_lock`` guards
        every write, and ``_locked`` is that lock's ``locked``). With the reading lock free, it takes it, encodes
        the request and writes it to the stdin pipe in one write that a pipe never splits (the line within
        ``quick_bytes`` and ``quick_depth``, at most ``PIPE_BUF`` bytes framed, the output's lock free, the pipe
        with room), then reads as the client does until a whole message is here (within ``timeout`` seconds,
        waiting on the stdout and halt pipes). The result of its answer (the reading released), or a
        :class:`LoneOutcome`: :class:`Unsent`, :class:`ErrorAnswer`, :class:`ReadOn` or :class:`ReadFailed`
        (each says what was written and who holds the reading). An exception (nothing written, the
        reading released) when the line cannot be made, or the pipe is gone (``OSError``)."""
        ...


class Core(Protocol):
    """A core module: ``rpcwire._rpcwire`` or ``rpcwire._pure``."""

    @property
    def StdioTransport(self) -> type[Transport]:  # read-only: mypy matches a module against it
        """The transport class."""
        ...

    @property
    def FrameDecoder(self) -> type[_Decoder]:
        """The framing decoder class."""
        ...

    def dispatch(
        self,
        body: str | bytes,
        handler: Handler,
        *,
        max_message_bytes: int = ...,
        max_depth: int = ...,
        max_batch: int | None = ...,
        expose_errors: bool = True,
    ) -> bytes | None:
        """Answer one whole JSON text (an HTTP body); ``None``: nothing to answer."""
        ...

    def _read_text(self, body: bytes, max_message_bytes: int, max_depth: int, max_batch: int | None) -> Message:
        """One whole JSON text (an HTTP body) read and classified as ``_read_message`` reads a line (an empty
        or blank body is -32600, a body over ``max_message_bytes`` is refused unread)."""
        ...

    def parse_request(self, raw: str | bytes) -> tuple[Request | None, dict[str, Any] | None]:
        """Parse one message: ``(request, None)`` or ``(None, error_response)``."""
        ...

    def _encode_request(self, method: str, params: Any = None, id: Any = None) -> bytes:
        """A request's (or, ``id`` ``None``, a notification's) line, without ``\\n``."""
        ...

    def _parse_incoming(self, data: bytes, max_depth: int = ...) -> Incoming:
        """One message a client read."""
        ...

    def _encode_frame(self, body: bytes) -> bytes:
        """One ``Content-Length`` frame of ``body`` (header and body), as the transport writes it."""
        ...

    @property
    def _ClientPipe(self) -> type[ClientPipe]:
        """The threaded client's pipes (``select.poll`` platforms)."""
        ...

    def _nests_deeper(self, line: bytes, max_depth: int) -> bool:
        """Whether arrays and objects nest deeper than ``max_depth`` in the JSON text ``line``, as a server
        counts them (strings' brackets not counted): what a client checks before it sends."""
        ...


if TYPE_CHECKING:  # `make lint` runs mypy over this module: the native core must type-check as a Core.
    import rpcwire._rpcwire

    # The pure core's check is in rpcwire/pure/__init__.py, above it (an import of it here, even for the type
    # checker alone, would draw an arrow up from the contract to the core that imports the contract).
    _native_core: Core = rpcwire._rpcwire
