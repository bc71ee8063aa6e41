"""Messages for :mod:`rpcwire.pure`: what a decoded text is (a request, a batch, a response) and the bytes of
every answer, as the native envelope (``crates/rpcwire-protocol/src/envelope.rs``, ``src/answer.rs``,
``src/reply.rs``) gives them.

A server's side: :func:`classify_text` turns one text into what ``_read_message`` hands out (a
``Request``, the answer to a refused message, or a batch's entries), with each id kept as it was written
(``1e3``, ``-0``); ``Answers`` builds the answer to a handler's outcome;
:func:`dispatch` answers a whole text (an HTTP body). A client's side: :func:`encode_request` and
:func:`parse_incoming`. A message the framing dropped gets its answer here too (:func:`refused`).
"""

from __future__ import annotations

import json
import logging
import operator
from typing import Any

from rpcwire import _answer as _answering
from rpcwire._contract import Message
from rpcwire._pure.codec import (
    BATCH_OVER_LIMIT,
    JSON_WHITESPACE,
    OUT_OF_RANGE_FLOAT,
    ParseError,
    decode,
    encode,
    encode_value,
)
from rpcwire._types import (
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_MESSAGE_BYTES,
    ERR_INTERNAL,
    ERR_INVALID_REQUEST,
    ERR_PARSE,
    MAX_MAX_DEPTH,
    Handler,
    Refused,
    Request,
    Response,
    application_error,
)

__all__ = [
    "PARSE_ERROR",
    "Answers",
    "Unreadable",
    "answer_refused",
    "check_limit",
    "check_limits",
    "classify_text",
    "decode_incoming",
    "dispatch",
    "encode_request",
    "error_answer",
    "invalid_request",
    "parse_incoming",
    "parse_request",
    "read_text",
    "refused",
    "success_answer",
    "too_long",
]

logger: logging.Logger = logging.getLogger("rpcwire")

_I64_MAX = 2**63 - 1


def check_limit(name: str, value: int, most: int | None = None) -> int:
    """A limit as given (``max_message_bytes``, ``max_depth``, ``max_batch``), checked as the native module checks
    it: an ``int`` (or ``bool``) from 1 to ``most`` that fits 64 bits; else the native module's error."""
    value = operator.index(value)  # as the native module: an int (or bool), not a float
    if value > _I64_MAX:
        raise OverflowError(f"{name} does not fit a 64-bit integer")
    if most is None and value < 1:
        raise ValueError(f"{name} must be at least 1, not {value}")
    if most is not None and not 1 <= value <= most:
        raise ValueError(f"{name} must be between 1 and {most}, not {value}")
    return value


# --- a server's side: ids, answers, requests ---------------------------------------------------------------


class _NumberText:
    """A number as it was written (``json.loads``'s ``parse_int``/``parse_float`` hook)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _needs_id_text(id_: Any) -> bool:
    """Whether an id's own text may differ from what ``json.dumps`` writes for it (``1e3``, ``1.50``, ``-0``)."""
    return type(id_) is float or (type(id_) is int and id_ == 0)


_UNREAD = object()


class _IdTexts:
    """The ids of a line's message, or of each of its batch entries, exactly as they were written.

    ``json`` gives a number's value, not its text, so the line is read again with the numbers kept as
    text, once, when the first id that needs its text is asked for, and kept for the rest of the line:
    reading the line again for each such id made a batch quadratic (1,000 entries with float ids read
    1,000 times the whole batch).
    """

    __slots__ = ("_line", "_message")

    def __init__(self, line: bytes) -> None:
        self._line = line
        self._message: Any = _UNREAD

    def text(self, index: int | None) -> bytes:
        """The id of the message (of batch entry ``index``) as it was written."""
        if self._message is _UNREAD:
            self._message = json.loads(self._line, parse_int=_NumberText, parse_float=_NumberText)
        number: _NumberText = (self._message if index is None else self._message[index])["id"]
        return number.text.encode("ascii")


def _error_response(id_: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """An error answer as a dict (``parse_request`` returns these)."""
    return {"jsonrpc": "2.0", "id": id_, "error": error_object(code, message, data)}


def error_object(code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error


# The bytes of every answer, built in one place: the id as its JSON text, then the result or the error.
_ANSWER_START = b'{"jsonrpc":"2.0","id":'
_RESULT_MEMBER = b',"result":'
_ERROR_MEMBER = b',"error":'
_ANSWER_END = b"}"


def success_answer(id_json: bytes, result: Any) -> bytes:
    """The success answer to the request whose id is ``id_json`` (an error if ``result`` cannot be encoded)."""
    return _ANSWER_START + id_json + _RESULT_MEMBER + encode_value(result) + _ANSWER_END


def error_answer(id_json: bytes, code: int, message: str, data: Any = None) -> bytes:
    """An error answer; no ``data`` member when ``data`` is ``None`` (an error if ``data`` cannot be encoded)."""
    return _ANSWER_START + id_json + _ERROR_MEMBER + encode(error_object(code, message, data), data) + _ANSWER_END


def _standard_error(id_json: bytes, code: int, message: str) -> bytes:
    """An error the transport itself answers with (no ``data``)."""
    return error_answer(id_json, code, message)


PARSE_ERROR = _standard_error(b"null", ERR_PARSE, "Parse error")


def invalid_request(id_json: bytes, reason: str) -> bytes:
    logger.debug("invalid request: %s", reason)
    return _standard_error(id_json, ERR_INVALID_REQUEST, "Invalid Request")


def _exception_data(exc: BaseException) -> dict[str, str]:
    try:
        detail = str(exc)
    except Exception:
        detail = f"<unprintable {type(exc).__name__} object>"
    return {"exception": type(exc).__name__, "detail": detail}


def _application_error(exc: BaseException, id_json: bytes) -> tuple[int, str, Any] | None:
    """``application_error(exc)``; ``None`` (logged) for an error whose attributes cannot be read."""
    try:
        return application_error(exc)
    except Exception as error:  # a property that raises: the request still gets its -32603
        _log_answer_failure("an error's code, message or data could not be read", id_json, error)
        return None


def _log_answer_failure(what: str, id_json: bytes, error: BaseException) -> None:
    """Log at ERROR, with ``error`` and its traceback, why the answer to ``id_json`` is a -32603."""
    logger.error("%s (id %s); answered -32603 Internal error", what, id_json.decode("utf-8", "replace"), exc_info=error)


def _internal_error(id_json: bytes, exc: BaseException, expose_errors: bool = True) -> bytes:
    """-32603 with ``data`` naming the exception (a handler's, or why its answer could not be encoded); without
    ``data`` when ``expose_errors`` is false."""
    if not expose_errors:
        return _standard_error(id_json, ERR_INTERNAL, "Internal error")
    data = _exception_data(exc)
    if isinstance(exc, ValueError) and data["detail"].startswith(OUT_OF_RANGE_FLOAT):
        data["detail"] = OUT_OF_RANGE_FLOAT  # the wording differs between Python versions
    return error_answer(id_json, ERR_INTERNAL, "Internal error", data)


def _id_json(id_: Any, ids: _IdTexts, index: int | None) -> bytes:
    """The id as its answer carries it: a number as written, a string as the encoder writes it."""
    if _needs_id_text(id_):
        return ids.text(index)
    if type(id_) is int:
        return b"%d" % id_
    return encode(id_)


_BAD_ID = "id is not a string, a number or null"
_NOT_2_0 = 'jsonrpc is not "2.0"'


def _is_id(id_: Any) -> bool:
    """Whether a message's ``id`` member (``None`` when absent) is one JSON-RPC allows: a string, a number, null."""
    return id_ is None or type(id_) in (str, int, float)


def _is_2_0(message: dict[str, Any]) -> bool:
    """Whether a message says ``"jsonrpc": "2.0"`` (a ``str`` subclass does not: JSON has none)."""
    version = message.get("jsonrpc")
    return type(version) is str and version == "2.0"


def _check_envelope(message: Any, ids: _IdTexts, index: int | None) -> Request | tuple[Any, str]:
    """The request in a decoded message (batch entry ``index`` of the line ``ids`` reads), or the id to answer
    -32600 with and the reason."""
    if type(message) is not dict:
        return None, "not an object"
    id_ = message.get("id")
    if not _is_id(id_):
        return None, _BAD_ID
    if not _is_2_0(message):
        return id_, _NOT_2_0
    method = message.get("method")
    if type(method) is not str:
        return id_, "method is not a string"
    params = message.get("params")
    if "params" in message and type(params) not in (list, dict):
        return id_, "params is not an array or an object"
    if "id" not in message:
        return Request(method, params, None, True)
    return Request(method, params, id_, False, _id_json(id_, ids, index))


def _classify(message: Any, ids: _IdTexts, index: int | None) -> Request | bytes:
    """A decoded message (batch entry ``index`` of the line ``ids`` reads): a ``Request``, or its -32600
    answer's bytes."""
    checked = _check_envelope(message, ids, index)
    if isinstance(checked, Request):
        return checked
    id_, reason = checked
    return invalid_request(b"null" if id_ is None else _id_json(id_, ids, index), reason)


def parse_request(raw: str | bytes) -> tuple[Request | None, dict[str, Any] | None]:
    """Parse one JSON-RPC message (not a batch).

    Returns ``(request, None)``, or ``(None, error_response)`` where the error response is the
    JSON-RPC answer (a dict) ready to write: -32700 for bad JSON, -32600 for a bad envelope.
    """
    if not isinstance(raw, (str, bytes, bytearray)):
        raise TypeError("parse_request takes str or bytes")
    try:
        # A ``str`` holding lone surrogates has no UTF-8 form: it is not a JSON text on any wire.
        line = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
        message = decode(line, DEFAULT_MAX_DEPTH, max_batch=None)
    except (UnicodeEncodeError, ParseError):
        return None, _error_response(None, ERR_PARSE, "Parse error")
    checked = _check_envelope(message, _IdTexts(line), None)
    if isinstance(checked, Request):
        return checked, None
    id_, reason = checked
    logger.debug("invalid request: %s", reason)
    return None, _error_response(id_, ERR_INVALID_REQUEST, "Invalid Request")


def classify_text(line: bytes, max_depth: int, max_batch: int | None) -> bytes | Request | list[Request | bytes]:
    """One JSON text (a line, or ``dispatch``'s body) read and classified as ``_read_message`` gives it."""
    try:
        message = decode(line, max_depth, max_batch)
    except ParseError as exc:
        logger.debug("parse error: %s", exc)
        return PARSE_ERROR
    if message is BATCH_OVER_LIMIT:
        return invalid_request(b"null", f"a batch of more than max_batch ({max_batch}) entries")
    ids = _IdTexts(line)
    if type(message) is not list:
        return _classify(message, ids, None)
    if not message:
        return invalid_request(b"null", "empty batch")
    return [_classify(entry, ids, index) for index, entry in enumerate(message)]


def sized(message: Message, size: int) -> Message:
    """``message`` as read from ``size`` bytes, its requests given their ``_wire_size``: those bytes (a batch
    entry: its share of the batch's), what the serving session counts a held request as (rpcwire._session).
    Stored as the frozen dataclass stores its own fields, past its ``__setattr__``; not a field (no part in
    comparisons, the ``repr`` or ``__init__``)."""
    if type(message) is Request:
        _set_attribute(message, "_wire_size", size)
    elif type(message) is list:
        share = max(size // len(message), 1)
        for entry in message:
            if type(entry) is Request:
                _set_attribute(entry, "_wire_size", share)
    return message


_set_attribute = object.__setattr__


def encode_request(method: str, params: Any = None, id: Any = None) -> bytes:  # the member's name
    """The line of a request (``id`` given) or a notification (``id`` is ``None``), without ``\\n``; no
    ``params`` member when ``params`` is ``None``."""
    message: dict[str, Any] = {"jsonrpc": "2.0"} if id is None else {"jsonrpc": "2.0", "id": id}
    message["method"] = method
    if params is not None:
        message["params"] = params
    return encode(message, params)


def parse_incoming(
    data: bytes, max_depth: int = DEFAULT_MAX_DEPTH
) -> Response | Request | str | list[Response | Request | str]:
    """One message a client read (a line, or an HTTP body): a ``Response``, a ``Request`` (the server's own
    request or notification), a ``list`` of these for a batch, or a ``str`` saying why the message (or a
    batch entry) is neither, for the client to log and drop. Nesting deeper than ``max_depth`` (a
    transport's limit, checked as ``StdioTransport`` checks it) is a parse error."""
    message = decode_incoming(data, check_limit("max_depth", max_depth, MAX_MAX_DEPTH))
    if isinstance(message, Unreadable):
        return message.reason
    return message


class Unreadable:
    """A text a client read that is not JSON (or nests deeper than its limit): why."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def decode_incoming(
    data: bytes, max_depth: int
) -> Response | Request | str | list[Response | Request | str] | Unreadable:
    try:
        message = decode(data, max_depth)
    except ParseError as exc:
        return Unreadable(f"parse error: {exc}")
    ids = _IdTexts(data)
    if type(message) is not list:
        return _incoming_entry(message, ids, None)
    if not message:
        return "an empty batch"
    return [_incoming_entry(entry, ids, index) for index, entry in enumerate(message)]


def _incoming_entry(message: Any, ids: _IdTexts, index: int | None) -> Response | Request | str:
    if type(message) is dict and "method" not in message and ("result" in message or "error" in message):
        return _response(message)
    checked = _check_envelope(message, ids, index)
    return checked if isinstance(checked, Request) else checked[1]


def _response(message: dict[str, Any]) -> Response | str:
    """A decoded message with ``result`` or ``error`` and no ``method``: a ``Response``; for one that names a
    valid id but is invalid, a ``Response`` with -32603 "Invalid response" and the reason as ``data`` (the
    call it names fails rather than waits); else why it is none. The native reader's order of checks."""
    id_ = message.get("id")
    if not _is_id(id_):
        return _BAD_ID
    if "id" not in message:
        return "a response without an id"
    if not _is_2_0(message):
        return _invalid_response(id_, _NOT_2_0)
    if "error" not in message:
        return Response(id_, message["result"])
    error = message["error"]
    if type(error) is not dict:
        return _invalid_response(id_, "error is not an object")
    if "result" in message:
        return _invalid_response(id_, "a response with both result and error")
    if type(error.get("code")) is not int or not isinstance(error.get("message"), str):
        return _invalid_response(id_, "error has no integer code or no string message")
    return Response(id_, None, error)


def _invalid_response(id_: Any, reason: str) -> Response:
    return Response(id_, None, {"code": ERR_INTERNAL, "message": "Invalid response", "data": reason})


# --- messages the framing dropped ---------------------------------------------------------------------------

_INVALID_REQUEST = _standard_error(b"null", ERR_INVALID_REQUEST, "Invalid Request")


def refused(reason: str, a_message: bool) -> Refused:
    """A message dropped unread, with the answer a server writes for it: -32600 when it was a message, too
    large to accept (its text opened an object or an array, or its header said how long it was), else -32700."""
    return Refused(reason, _INVALID_REQUEST if a_message else PARSE_ERROR)


def too_long(first: bytes, max_message_bytes: int) -> Refused:
    """A line (or a body) longer than ``max_message_bytes``, whose first significant byte was ``first``."""
    return refused(f"a line longer than max_message_bytes ({max_message_bytes})", first in (b"{", b"["))


def answer_refused(dropped: Refused) -> bytes:
    """The answer a server writes for a dropped message, logged (at DEBUG) as the answer to one it read is."""
    logger.debug("parse error: %s" if dropped.answer == PARSE_ERROR else "invalid request: %s", dropped.reason)
    return dropped.answer


# --- a whole text: an HTTP body ------------------------------------------------------------------------------


class Answers:
    """The pure core's answer builder (:class:`rpcwire._contract.AnswerBuilder`), for :mod:`rpcwire._answer`:
    ``StdioTransport`` is one, and :func:`dispatch` passes this class itself."""

    @staticmethod
    def _answer_result(id_json: bytes, result: Any, *, expose_errors: bool = True) -> bytes:
        """The success answer's bytes; a -32603 for the same id when ``result`` cannot be encoded (logged; without
        the exception's name and text in ``data`` when ``expose_errors`` is false)."""
        try:
            return success_answer(id_json, result)
        except Exception as exc:
            _log_answer_failure("the result could not be encoded", id_json, exc)
            return _internal_error(id_json, exc, expose_errors)

    @staticmethod
    def _answer_error(id_json: bytes, exception: BaseException, *, expose_errors: bool = True) -> bytes:
        """The answer to a handler that raised ``exception``: its own error if it is a readable ``JsonRpcError``, else a
        -32603 (without the exception's name and text in ``data`` when ``expose_errors`` is false). The exception
        itself is not logged here."""
        error = _application_error(exception, id_json)
        if error is None:
            return _internal_error(id_json, exception, expose_errors)
        code, message, data = error
        try:
            return error_answer(id_json, code, message, data)
        except Exception as failure:
            _log_answer_failure("the error's data could not be encoded", id_json, failure)
            return _internal_error(id_json, failure, expose_errors)


def read_text(body: bytes, max_message_bytes: int, max_depth: int, max_batch: int | None) -> Message:
    """One whole JSON text (an HTTP body: newlines are whitespace, not frames) read and classified as
    ``_read_message`` reads a line: an empty or whitespace-only body is -32600 ``id: null``, a body over
    ``max_message_bytes`` is refused unread as an over-long line is. The limits are checked as
    ``StdioTransport`` checks them."""
    max_message_bytes, max_depth, max_batch = check_limits(max_message_bytes, max_depth, max_batch)
    return _read_text(body, max_message_bytes, max_depth, max_batch)


def check_limits(max_message_bytes: int, max_depth: int, max_batch: int | None) -> tuple[int, int, int | None]:
    """``(max_message_bytes, max_depth, max_batch)`` checked (:func:`check_limit`); ``max_batch`` may be ``None``."""
    return (
        check_limit("max_message_bytes", max_message_bytes),
        check_limit("max_depth", max_depth, MAX_MAX_DEPTH),
        None if max_batch is None else check_limit("max_batch", max_batch),
    )


def _read_text(body: bytes, max_message_bytes: int, max_depth: int, max_batch: int | None) -> Message:
    if len(body) > max_message_bytes:
        return answer_refused(too_long(body.lstrip(JSON_WHITESPACE)[:1], max_message_bytes))
    if not body.strip(JSON_WHITESPACE):
        return invalid_request(b"null", "an empty body")
    return sized(classify_text(body, max_depth, max_batch), len(body))


def dispatch(
    body: str | bytes,
    handler: Handler,
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_batch: int | None = DEFAULT_MAX_BATCH,
    expose_errors: bool = True,
) -> bytes | None:
    """Answer one whole JSON text (an HTTP body: newlines are whitespace, not frames) as ``serve``
    answers a line: the answer's bytes without ``\\n``, or ``None`` when nothing is answered
    (notifications only). An empty or whitespace-only body is -32600 ``id: null``; a body over
    ``max_message_bytes`` is answered as an over-long line is. ``expose_errors=False``: a -32603 is
    "Internal error" alone, without the exception's name and text (HTTP's default)."""
    max_message_bytes, max_depth, max_batch = check_limits(max_message_bytes, max_depth, max_batch)
    if isinstance(body, str):
        try:
            line = body.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: no UTF-8 form, not a JSON text on any wire
            logger.debug("parse error: a str with lone surrogates (no UTF-8 form)")
            return PARSE_ERROR
    elif isinstance(body, (bytes, bytearray)):
        line = bytes(body)
    else:
        raise TypeError(f"dispatch takes str or bytes, not {type(body).__name__}")
    return _answering.answer_message(
        _read_text(line, max_message_bytes, max_depth, max_batch),
        lambda request: _answering.call(Answers, request, handler, None, expose_errors=expose_errors),
    )
