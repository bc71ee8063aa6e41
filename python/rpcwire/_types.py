"""Types shared by the native transport and :mod:`rpcwire.pure`.

Defined once, in Python, so that ``rpcwire.MethodNotFound is rpcwire.pure.MethodNotFound`` and a
handler written against one implementation behaves the same under the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

__all__ = [
    "ASYNC_MAX_CONCURRENCY",
    "BY_HANDLER",
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "ERR_INTERNAL",
    "ERR_INVALID_PARAMS",
    "ERR_INVALID_REQUEST",
    "ERR_METHOD_NOT_FOUND",
    "ERR_PARSE",
    "ERR_REQUEST_CANCELLED",
    "FRAMINGS",
    "ByHandler",
    "CallTimeout",
    "ConnectionClosed",
    "ConnectionFailed",
    "InvalidParams",
    "JsonRpcError",
    "MethodNotFound",
    "NotSent",
    "Request",
    "RequestCancelled",
    "Response",
    "TransportError",
    "error_from_object",
]

ERR_PARSE = -32700
"""Invalid JSON was received (also: invalid UTF-8, NaN/Infinity, nesting deeper than the limit)."""
ERR_INVALID_REQUEST = -32600
"""The JSON sent is not a valid Request object."""
ERR_METHOD_NOT_FOUND = -32601
"""The method does not exist or is not available."""
ERR_INVALID_PARAMS = -32602
"""Invalid method parameters."""
ERR_INTERNAL = -32603
"""Internal JSON-RPC error (a handler failed, or its result could not be encoded)."""
ERR_REQUEST_CANCELLED = -32800
"""The request was cancelled (LSP's ``RequestCancelled``, answered to a ``$/cancelRequest``)."""

DEFAULT_MAX_DEPTH = 128
"""How deeply arrays and objects may nest in one incoming line, the envelope and a batch's array included."""
MAX_MAX_DEPTH = 512
"""The largest ``max_depth`` accepted (``json`` recurses on the interpreter's stack)."""
DEFAULT_MAX_BATCH = 1_000
"""The most entries one batch may have (geth's limit); ``max_batch=None`` lifts it. A longer batch is
answered with one -32600, read no further than the entry past the limit."""
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""The longest line accepted, not counting its ``\\n`` or ``\\r\\n``; a longer one is discarded unread."""


class ByHandler(int):
    """The default ``max_concurrency`` of ``serve``: an ``int`` equal to 1 (code that reads the default as
    a number reads 1), which ``serve`` reads as 1 for a sync handler and ``ASYNC_MAX_CONCURRENCY`` for an
    async one. Defined here, below both cores, so that ``StdioTransport.serve`` of either core has it as its
    default without importing the engine."""

    def __repr__(self) -> str:
        return f"1 (for an async handler, {ASYNC_MAX_CONCURRENCY})"


ASYNC_MAX_CONCURRENCY = 64
"""``max_concurrency`` when none is given to ``serve_async``, or to ``serve`` with an async handler."""

BY_HANDLER: int = ByHandler(1)
"""``max_concurrency``'s default in ``serve`` (and ``StdioTransport.serve``): 1 for a sync handler, one
request at a time in order; ``ASYNC_MAX_CONCURRENCY`` for an ``async def`` handler, whose requests are tasks."""

Framing = Literal["newline", "content-length"]
"""How messages are delimited on a stream: one JSON text per line, or LSP's ``Content-Length`` frames."""
FRAMINGS: tuple[Framing, ...] = ("newline", "content-length")
"""The framings a stream may have: one JSON text per line, or LSP's ``Content-Length`` frames."""

Handler = Callable[[str, Any], Any]
"""What serves requests: ``handler(method, params)`` returns the result (or, ``async def``, an awaitable of it)."""


class JsonRpcError(Exception):
    """An error a handler raises to answer with a specific JSON-RPC error object.

    The answer carries the class's ``code``, the instance's ``message`` and, when not ``None``,
    its ``data``. Subclass it with another ``code`` (e.g. ``-32001``) for application errors.
    """

    code: ClassVar[int] = ERR_INTERNAL
    default_message: ClassVar[str] = "Internal error"

    def __init__(self, message: str | None = None, data: Any = None) -> None:
        self.message: str = self.default_message if message is None else message
        self.data: Any = data
        super().__init__(self.message)


def application_error(exc: BaseException) -> tuple[int, str, Any] | None:
    """The ``code``, ``message`` and ``data`` an answer carries for ``exc``, read as both cores read them: a
    ``JsonRpcError`` whose ``code`` is an ``int`` (not a ``bool``) and whose ``message`` is a ``str``; ``None`` for
    any other exception (answered -32603). Raises what a property of ``exc`` raises (the answer is then a -32603
    too): the core logs it, a hook only looks."""
    if not isinstance(exc, JsonRpcError):
        return None
    code = getattr(exc, "code", None)
    message = getattr(exc, "message", None)
    if isinstance(code, int) and not isinstance(code, bool) and isinstance(message, str):
        return code, message, getattr(exc, "data", None)
    return None


class MethodNotFound(JsonRpcError):
    """Raised by a handler that does not know the method: answered with -32601."""

    code = ERR_METHOD_NOT_FOUND
    default_message = "Method not found"


class InvalidParams(JsonRpcError):
    """Raised by a handler whose params are wrong: answered with -32602."""

    code = ERR_INVALID_PARAMS
    default_message = "Invalid params"


class RequestCancelled(JsonRpcError):
    """Raised by a handler that stops because its request was cancelled: answered with -32800."""

    code = ERR_REQUEST_CANCELLED
    default_message = "Request cancelled"


@dataclass(frozen=True)
class Request:
    """One parsed JSON-RPC request or notification.

    ``params`` is ``None`` when the member is absent. ``is_notification`` is true exactly when the
    ``id`` member is absent (an explicit ``"id": null`` is a request, answered with ``id: null``).

    ``id_json`` is the id exactly as an answer writes it: a number's text as the request wrote it
    (``b"1e3"``, ``b"-0"``, ``b"1.50"``, where ``id`` is ``1000.0``, ``-0`` and ``1.5``), a string
    as the encoder writes it (``"\\u00e9"`` becomes ``b'"\\xc3\\xa9"'``), ``b"null"`` for
    ``"id": null``; ``None`` for a notification. The transports fill it; it takes no part in
    comparisons and is not shown in the ``repr``.
    """

    method: str
    params: Any = None
    id: Any = None
    is_notification: bool = False
    id_json: bytes | None = field(default=None, compare=False, repr=False)
    """The id as an answer writes it (a number's text as written, a string as the encoder writes it,
    ``b"null"``); ``None`` for a notification."""


@dataclass(slots=True)
class Response:
    """One JSON-RPC response, as a client reads it (read-only by convention).

    ``id`` is the id as ``json.loads`` gives it; a success has its ``result`` and ``error`` ``None``;
    an error has ``error``, the error object as sent (a dict with an ``int`` ``code`` and a ``str``
    ``message``, maybe ``data``), and ``result`` ``None``. Not frozen: a frozen dataclass's ``__init__``
    costs about three times as much, a large share of a whole call on a pipe (bench/README.md).
    """

    id: Any
    result: Any = None
    error: dict[str, Any] | None = None


_ERRORS_BY_CODE: dict[int, type[JsonRpcError]] = {
    ERR_METHOD_NOT_FOUND: MethodNotFound,
    ERR_INVALID_PARAMS: InvalidParams,
    ERR_REQUEST_CANCELLED: RequestCancelled,
}


def error_from_object(error: dict[str, Any]) -> JsonRpcError:
    """The exception a client raises for a response's error object: -32601 ``MethodNotFound``, -32602
    ``InvalidParams``, -32800 ``RequestCancelled``, any other code a ``JsonRpcError`` carrying it (so a
    handler that lets it propagate answers with the server's own code)."""
    code = error["code"]
    exception = _ERRORS_BY_CODE.get(code, JsonRpcError)(error["message"], error.get("data"))
    if exception.code != code:
        exception.code = code  # type: ignore[misc]  # an instance's own code, shadowing the class's
    return exception


@dataclass(frozen=True, slots=True)
class Refused:
    """A message the framing dropped (``FrameDecoder.next``): over ``max_message_bytes``, or a frame that
    cannot be read. ``reason`` is for the log and a client's error; ``answer`` is the answer line (without
    ``\\n``) a server writes for it (-32700, or -32600 when the dropped text began as JSON would)."""

    reason: str
    answer: bytes


class TransportError(OSError):
    """The base of the clients' transport failures: what went wrong moving a message, not in the answer
    (a JSON-RPC error is a :class:`JsonRpcError`, apart). ``except rpcwire.TransportError`` catches each of
    :class:`ConnectionClosed`, :class:`ConnectionFailed`, :class:`CallTimeout`, :class:`NotSent` and
    :class:`HttpError`; each keeps the built-in type it had before as a base too (``ConnectionError``,
    ``TimeoutError``, ``ValueError``), so that ``except TimeoutError`` and the like catch what they did. An
    ``OSError``, as httpx's ``TransportError`` family is to its users: an error of I/O."""


class ConnectionClosed(TransportError, ConnectionError):
    """The server closed its output (or exited, or the connection dropped): every call still waiting for
    an answer fails with this, and so does every later call. ``returncode`` and ``stderr_tail`` (the last
    lines the server wrote to stderr) are set for a server the client spawned."""

    def __init__(self, message: str, returncode: int | None = None, stderr_tail: list[str] | None = None) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr_tail: list[str] = stderr_tail or []


class ConnectionFailed(TransportError, ConnectionError):
    """An HTTP client's connection failed in the middle of an exchange: the server's answer was malformed, or
    longer than ``max_message_bytes``, or the connection was lost after the request was sent (so the request
    may have run: it is not sent again), or a proxy refused its tunnel."""


class CallTimeout(TransportError, TimeoutError):
    """A client's deadline passed: no answer came within the call's (or batch's) ``timeout``, or a
    notification could not be written by then. Also a ``TimeoutError``."""


class NotSent(TransportError, ValueError):
    """A message the client refuses to send, nothing of it written: longer than its ``max_message_bytes``, a
    batch of more than ``max_batch`` calls, nested deeper than ``max_depth`` (a server with those limits would
    refuse it). Also a ``ValueError``, as it was."""
