"""The pure-Python twin of the native transport: same API, same bytes out for the same bytes in.

It is the fallback where the native module cannot be built, the reference of the differential
tests and the baseline of every benchmark. It is written the way a careful Python developer would
write it with the standard library (``json``, one ``readline`` per message), not tuned beyond that.

The rules both implementations follow are in ``docs/semantics.md``.
"""

from __future__ import annotations

import io
import itertools
import json
import logging
import operator
import re
import sys
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from rpcwire import _answer as _answering
from rpcwire import _async_client, _client, _engine, _http_client
from rpcwire._engine import RequestContext, current_request, serve, serve_async
from rpcwire._http_client import HttpError
from rpcwire._methods import methods
from rpcwire._types import (
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_MESSAGE_BYTES,
    ERR_INTERNAL,
    ERR_INVALID_PARAMS,
    ERR_INVALID_REQUEST,
    ERR_METHOD_NOT_FOUND,
    ERR_PARSE,
    ERR_REQUEST_CANCELLED,
    MAX_MAX_DEPTH,
    ConnectionClosed,
    Framing,
    InvalidParams,
    JsonRpcError,
    MethodNotFound,
    Request,
    RequestCancelled,
    Response,
)

__all__ = [
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "ERR_INTERNAL",
    "ERR_INVALID_PARAMS",
    "ERR_INVALID_REQUEST",
    "ERR_METHOD_NOT_FOUND",
    "ERR_PARSE",
    "ERR_REQUEST_CANCELLED",
    "AsyncClient",
    "AsyncHttpClient",
    "Client",
    "ConnectionClosed",
    "HttpClient",
    "HttpError",
    "InvalidParams",
    "JsonRpcError",
    "MethodNotFound",
    "Request",
    "RequestCancelled",
    "RequestContext",
    "Response",
    "StdioTransport",
    "current_request",
    "dispatch",
    "methods",
    "parse_request",
    "serve",
    "serve_async",
]

logger: logging.Logger = logging.getLogger("rpcwire")

Handler = Callable[[str, Any], Any]

_JSON_WHITESPACE = b" \t\r\n"
_WHITESPACE = re.compile(r"[ \t\r\n]*")
_I64_MAX = 2**63 - 1
_READ_CHUNK = 64 * 1024  # how much of an over-long line is read (and dropped) at a time
_OUT_OF_RANGE_FLOAT = "Out of range float values are not JSON compliant"

# Compact, UTF-8 (not \u-escaped), strict: NaN and Infinity are refused, as RFC 8259 requires.
_encode_text = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


_MAX_ENCODE_DEPTH = 2_000
_TOO_DEEP = "maximum recursion depth exceeded while encoding a JSON object"
_END = object()

# What bounds the nesting of json's C encoder (its recursion check): up to Python 3.11 the recursion
# limit; from 3.12 a C recursion limit of the interpreter's own, whatever sys.setrecursionlimit() says
# (measured: 1,497 levels of lists on 3.12, 9,998 on 3.13).
_C_RECURSION_LIMIT = sys.version_info >= (3, 12)
_JSON_PASSES_CAP = sys.version_info >= (3, 13)  # json encodes past the 2,000 levels of the cap


def _copy_first() -> bool:
    """Whether ``json`` must encode a copy cut at 2,000 levels (``_json_view``): when the recursion limit
    is raised past 2,000 on a Python whose json would follow it, or (3.13) could recurse that deep."""
    if _C_RECURSION_LIMIT and not _JSON_PASSES_CAP:
        return False  # 3.12: json stops near 1,500 levels at any limit
    return sys.getrecursionlimit() > _MAX_ENCODE_DEPTH


def _encode(value: Any, payload: Any = None) -> bytes:
    """Python value -> one compact JSON line's bytes (without the newline).

    A ``str`` may hold lone surrogates (JSON's ``"\\ud800"`` decodes to one); they cannot be UTF-8,
    so they go out as the ``\\udxxx`` escape they came in as (they only ever occur inside strings).
    ``payload`` is the part of ``value`` that came from the caller (a result, params or data): ``value``
    itself, or one of its members.

    With the recursion limit raised past 2,000, ``json``'s C encoder would recurse until the C stack
    overflows, so ``payload`` is first copied as ``json`` reads it, at most 2,000 containers deep
    (see ``_json_view``), and the copy is what is encoded. On 3.13, where ``json`` goes on past 2,000
    levels at any limit, see ``_encode_capped``.
    """
    if not isinstance(payload, (list, tuple, dict)):
        text = _encode_text(value)
    elif _copy_first():
        text = _encode_copy(value, payload)
    elif _JSON_PASSES_CAP:
        text = _encode_capped(value, payload)
    else:
        text = _encode_text(value)
    return text.encode("utf-8", "backslashreplace")


def _encode_value(value: Any) -> bytes:
    """A result (or any payload) alone, as ``_encode`` writes it inside a message."""
    return _encode(value, value)


def _encode_copy(value: Any, payload: Any) -> str:
    """``value``'s text, ``json`` encoding a copy of ``payload`` cut at 2,000 levels (``_json_view``)."""
    view = _json_view(payload)
    return _encode_view_text(view if value is payload else _with_member(value, payload, view))


def _encode_capped(value: Any, payload: Any) -> str:
    """``value``'s text on Python 3.13+, where ``json`` encodes up to ~10,000 levels: the 2,000-level cap
    applied without a walk before (which every message would pay for).

    ``json`` encodes first. A text that nests ``payload`` deeper than 2,000 (only a text with at least
    that many opening brackets is measured) is the native encoder's ``RecursionError``; nothing failed
    before that level, since ``json`` encoded all of it. When ``json`` fails and the failure could lie
    past 2,000 levels (the payload's plain lists, tuples and dicts nest that deep, or a ``RecursionError``
    from within a subclass's ``items()``/``__iter__``), the copy cut at 2,000 levels is encoded
    instead, which fails where the native encoder does (calling those methods again).
    """
    try:
        text = _encode_text(value)
    except Exception as exc:
        deep, opaque = _plain_nesting_reaches(payload, _MAX_ENCODE_DEPTH)
        if deep or (opaque and isinstance(exc, RecursionError)):
            return _encode_copy(value, payload)
        raise
    # The payload is ``value`` or one of its members (a level below it).
    depth = _MAX_ENCODE_DEPTH + (value is not payload)
    if text.count("[") + text.count("{") > depth and _text_nests_deeper(text.encode("utf-8", "surrogatepass"), depth):
        raise RecursionError(_TOO_DEEP)
    return text


def _plain_nesting_reaches(value: Any, depth: int) -> tuple[bool, bool]:
    """Whether the lists, tuples and dicts of ``value`` (not their subclasses, which are not looked
    into) nest ``depth`` levels or deeper below it, and whether it holds such a subclass. A container
    met again inside itself is where ``json`` and the native encoder stop ("Circular reference")."""
    opaque = False
    on_path: set[int] = set()
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if item is _END:  # the walk leaves the container whose id is ``level``
            on_path.discard(level)
            continue
        kind = type(item)
        if kind is list or kind is tuple:
            children: Any = item
        elif kind is dict:
            children = item.values()
        else:
            opaque = opaque or isinstance(item, (list, tuple, dict))
            continue
        if id(item) in on_path:
            continue
        if level >= depth:
            return True, opaque
        on_path.add(id(item))
        stack.append((_END, id(item)))
        stack.extend((child, level + 1) for child in children)
    return False, opaque


class _Fail:
    """Where ``json`` must fail while encoding a ``_json_view``: its ``default`` raises ``error``."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Items(dict):  # type: ignore[type-arg]
    """A dict subclass's ``items()``, taken once: ``json`` encodes this through ``items()`` as well.

    It holds one placeholder member so that ``json`` does not take it for an empty dict.
    """

    __slots__ = ("pairs",)

    def __init__(self, pairs: list[Any]) -> None:
        super().__init__({None: None})
        self.pairs = pairs

    def items(self) -> Any:  # type: ignore[override]
        return self.pairs


def _default_in_view(value: Any) -> Any:
    if type(value) is _Fail:
        raise value.error
    # json.JSONEncoder.default's own error
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


_encode_view_text = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_default_in_view
).encode


def _with_member(envelope: dict[str, Any], payload: Any, view: Any) -> dict[str, Any]:
    """``envelope`` (a message, or an answer whose ``error`` holds ``data``) with ``payload`` replaced by ``view``."""
    copy = dict(envelope)
    for key, member in envelope.items():
        if member is payload:
            copy[key] = view
        elif key == "error" and type(member) is dict:
            copy[key] = _with_member(member, payload, view)
    return copy


def _type_name(cls: type) -> str:
    """``tp_name`` as CPython's C code formats it with ``%.200s``: a static type's has its module."""
    name = (
        cls.__name__
        if cls.__flags__ & (1 << 9) or cls.__module__ == "builtins"
        else cls.__module__ + "." + cls.__name__
    )
    return name.encode("utf-8", "surrogatepass")[:200].decode("utf-8", "replace")


def _sequence_items(value: Any) -> Any:
    """A list or tuple subclass's items, as ``json`` takes them (``PySequence_Fast``)."""
    try:
        iterator = iter(value)
    except TypeError:
        raise TypeError("_iterencode_list needs a sequence") from None
    return list(iterator)


def _mapping_items(value: Any) -> Any:
    """A dict subclass's ``items()``, as ``json`` takes them (``PyMapping_Items``)."""
    items = value.items()
    if type(items) is list:
        return items
    try:
        iterator = iter(items)
    except TypeError:
        raise TypeError(
            f"{_type_name(type(value))}.items() returned a non-iterable (type {_type_name(type(items))})"
        ) from None
    return list(iterator)


def _is_valid_key(key: Any) -> bool:
    """Whether ``json`` writes ``key`` as a member name (a huge ``int`` aside: that it refuses)."""
    if isinstance(key, float):
        return key - key == 0.0  # not NaN or an infinity
    return key is None or isinstance(key, (str, int))


_BAD_ITEM = object()


def _pairs(items: list[Any]) -> Any:
    """``(key, value)`` for each of ``items()``'s items; ``(_BAD_ITEM, item)`` for one ``json`` refuses."""
    for item in items:
        if isinstance(item, tuple) and tuple.__len__(item) == 2:
            yield tuple.__getitem__(item, 0), tuple.__getitem__(item, 1)
        else:
            yield _BAD_ITEM, item


def _json_view(value: Any) -> Any:
    """A copy of the container ``value`` as ``json`` reads it, for ``json`` to encode instead.

    Lists and tuples (their subclasses through ``__iter__``) become lists, a dict a dict, a dict
    subclass an ``_Items`` holding what its ``items()`` gave; everything else is kept as is. Each of
    those methods is called once, in the order ``json`` would call it. Where ``json`` (or the native
    encoder) must fail, at a container 2,000 deep, a circular one or an exception from ``items()``
    or ``__iter__``, the copy holds a ``_Fail`` that raises that error when the encoding reaches it,
    after what comes before it. The walk stops at the first place where ``json`` will fail (also a
    value or key it cannot encode), since ``json`` calls nothing after it.
    """
    root: list[Any] = []
    path: list[int] = []  # ids of the containers being copied, outermost first
    on_path: set[int] = set()
    # For each container being copied: its remaining (key, member) pairs, and its copy.
    frames: list[tuple[Any, Any]] = [(iter([(None, value)]), root)]
    while frames:
        members, copy = frames[-1]
        key, child = next(members, (_END, None))
        if key is _END:
            frames.pop()
            if path:
                on_path.discard(path.pop())
            continue
        if key is _BAD_ITEM:  # json raises "items must return 2-tuples" at it
            copy.pairs.append(child)
            break
        bad_key = type(copy) is not list and not _is_valid_key(key)
        # json fails at a bad key before it looks at the value
        view, children, stop = (child, None, True) if bad_key else _view_of(child, len(path), on_path)
        if type(copy) is list:
            copy.append(view)
        elif type(copy) is dict:
            copy[key] = view
        else:
            copy.pairs.append((key, view))
        if stop:
            break
        if children is not None:
            path.append(id(child))
            on_path.add(id(child))
            frames.append((children, view))
    return root[0]


def _view_of(value: Any, depth: int, on_path: set[int]) -> tuple[Any, Any, bool]:
    """What stands for ``value`` in its container's copy, its (key, member) pairs if it is a
    container to walk, and whether ``json`` fails at it (so that the walk stops)."""
    if value is None or isinstance(value, (str, int)):
        return value, None, False
    if isinstance(value, float):
        return value, None, value - value != 0.0  # NaN and the infinities are a ValueError
    is_sequence = isinstance(value, (list, tuple))
    if not is_sequence and not isinstance(value, dict):
        return value, None, True  # json's default() raises TypeError
    if depth >= _MAX_ENCODE_DEPTH:
        return _Fail(RecursionError(_TOO_DEEP)), None, True
    try:
        if is_sequence:
            items = value if type(value) in (list, tuple) else _sequence_items(value)
            if not items:
                return [], None, False
            if id(value) in on_path:
                raise ValueError("Circular reference detected")
            return [], ((None, item) for item in items), False
        if not dict.__len__(value):
            return {}, None, False
        if id(value) in on_path:
            raise ValueError("Circular reference detected")
        if type(value) is dict:
            return {}, iter(list(dict.items(value))), False
        view = _Items([])
        return view, _pairs(_mapping_items(value)), False
    except BaseException as exc:  # raised where json raises it, after what comes before
        return _Fail(exc), None, True


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class _ParseError(Exception):
    """The line is not one strict RFC 8259 JSON text within the limits."""


def _nesting(value: Any) -> tuple[int, int]:
    """How deeply lists and dicts nest in ``value`` (a scalar is 0), and how many there are."""
    deepest = containers = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if type(item) is list:
            children = item
        elif type(item) is dict:
            children = item.values()
        else:
            continue
        containers += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest, containers


# The bytes of a JSON text that are not brackets or quotes; "{" and "}" read as "[" and "]".
_NOT_STRUCTURE = bytes(byte for byte in range(256) if byte not in b'[]{}"')
_TO_BRACKETS = bytes.maketrans(b"{}", b"[]")
_BRACKET_STEPS = bytes.maketrans(b"[]", b"\x02\x00")


def _text_nests_deeper(line: bytes, max_depth: int) -> bool:
    """Whether arrays and objects nest deeper than ``max_depth`` in the text of ``line``.

    Needed where the decoded value can hide it: a member replaced by a later duplicate is gone from
    the value, but it was read, and the native parser counts it. The encoder measures its text with it
    too (``_encode_capped``), so it must be quick on a big shallow text and on a deep one: it keeps
    only brackets and quotes, in C (a regular expression for the strings took longer than ``json``).
    """
    # Escapes go first (an escaped backslash, then an escaped quote), so that every quote left opens or
    # closes a string; a string without brackets is then an empty pair of quotes.
    kept = line.replace(b"\\\\", b"").replace(b'\\"', b"").translate(_TO_BRACKETS, _NOT_STRUCTURE)
    brackets = kept.replace(b'""', b"")
    if b'"' in brackets:
        brackets = b"".join(brackets.split(b'"')[::2])
    # A few rounds that each remove the innermost level leave nothing of a shallow text...
    for _ in range(min(max_depth, 4)):
        if not brackets:
            return False
        brackets = brackets.replace(b"[]", b"")
        max_depth -= 1
    # ... and what a deep one has left nests deeper than the limit if it opens that many in a row (a chain);
    # else one pass: with each bracket as 2 (opening) or 0 (closing), after the first k brackets the
    # nesting is their sum minus k. (3,000 levels: 0.02 ms for a chain, 1.5 ms for the pass.)
    if not brackets or b"[" * (max_depth + 1) in brackets:
        return bool(brackets)
    steps = brackets.translate(_BRACKET_STEPS)
    return max(map(operator.sub, itertools.accumulate(steps), itertools.count(1)), default=0) > max_depth


class _BatchOverLimit:
    """What a line decodes to when it is a batch of more than ``max_batch`` entries."""


_BATCH_OVER_LIMIT = _BatchOverLimit()
_decoder = json.JSONDecoder(parse_constant=_reject_constant)


def _check_nesting(value: Any, text: bytes, max_depth: int) -> None:
    """Refuse ``value`` (decoded from ``text``) if arrays and objects nest deeper than ``max_depth`` in it."""
    # Each level of nesting needs its own bracket, so only a text with many of them needs the walk,
    # and only one with more brackets than the value has containers (brackets in strings, or a
    # container dropped with a replaced duplicate member) needs to be read as well.
    opening = text.count(b"[") + text.count(b"{")
    if opening > max_depth:
        deepest, containers = _nesting(value)
        if deepest > max_depth or (containers < opening and _text_nests_deeper(text, max_depth)):
            raise _ParseError(f"nesting deeper than {max_depth}")


def _decode(line: bytes, max_depth: int, max_batch: int | None = None) -> Any:
    """Strictly decode one line: UTF-8, RFC 8259 JSON, at most ``max_depth`` levels of nesting.

    A batch of more than ``max_batch`` entries decodes to ``_BATCH_OVER_LIMIT``, read no further
    than where the entry past the limit begins.
    """
    try:
        text = line.decode("utf-8")
        start = _WHITESPACE.match(text).end()  # type: ignore[union-attr]  # it matches the empty string
        if max_batch is not None and text.startswith("[", start):
            return _decode_batch(text, start, max_depth, max_batch)
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise _ParseError(str(exc)) from None
    _check_nesting(value, line, max_depth)
    return value


def _decode_batch(text: str, start: int, max_depth: int, max_batch: int) -> list[Any] | _BatchOverLimit:
    """The batch that opens at ``text[start]``, decoded entry by entry (``json.loads`` would build it whole)."""
    entries: list[Any] = []
    position = _WHITESPACE.match(text, start + 1).end()  # type: ignore[union-attr]
    if text.startswith("]", position):
        position += 1
    else:
        while True:
            if len(entries) == max_batch:
                return _BATCH_OVER_LIMIT
            entry, end = _decoder.raw_decode(text, position)
            # The batch's array is a level of its own (a str slice is only made for a deep entry).
            if text.count("[", position, end) + text.count("{", position, end) >= max_depth:
                _check_nesting(entry, text[position:end].encode("utf-8"), max_depth - 1)
            entries.append(entry)
            position = _WHITESPACE.match(text, end).end()  # type: ignore[union-attr]
            if text.startswith(",", position):
                position = _WHITESPACE.match(text, position + 1).end()  # type: ignore[union-attr]
            elif text.startswith("]", position):
                position += 1
                break
            else:
                raise ValueError(f"expected ',' or ']' at {position}")
    if _WHITESPACE.match(text, position).end() != len(text):  # type: ignore[union-attr]
        raise ValueError(f"extra data at {position}")
    return entries


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
    return {"jsonrpc": "2.0", "id": id_, "error": _error_object(code, message, data)}


def _error_object(code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error


# The bytes of every answer, built in one place: the id as its JSON text, then the result or the error.
_ANSWER_START = b'{"jsonrpc":"2.0","id":'
_RESULT_MEMBER = b',"result":'
_ERROR_MEMBER = b',"error":'
_ANSWER_END = b"}"


def _answer(id_json: bytes, member: bytes, value: bytes) -> bytes:
    return _ANSWER_START + id_json + member + value + _ANSWER_END


def _standard_error(id_json: bytes, code: int, message: str) -> bytes:
    """An error the transport itself answers with (no ``data``)."""
    return _answer(id_json, _ERROR_MEMBER, _encode(_error_object(code, message)))


_PARSE_ERROR = _standard_error(b"null", ERR_PARSE, "Parse error")


def _invalid_request(id_json: bytes, reason: str) -> bytes:
    logger.debug("invalid request: %s", reason)
    return _standard_error(id_json, ERR_INVALID_REQUEST, "Invalid Request")


def _exception_data(exc: BaseException) -> dict[str, str]:
    try:
        detail = str(exc)
    except Exception:
        detail = f"<unprintable {type(exc).__name__} object>"
    return {"exception": type(exc).__name__, "detail": detail}


def _application_error(exc: BaseException, id_json: bytes) -> tuple[int, str, Any] | None:
    """The ``code``, ``message`` and ``data`` of a ``JsonRpcError`` with an ``int`` code and a ``str``
    message; ``None`` for any other exception, and for one whose attributes cannot be read (logged)."""
    if not isinstance(exc, JsonRpcError):
        return None
    try:
        code = getattr(exc, "code", None)
        message = getattr(exc, "message", None)
        if isinstance(code, int) and not isinstance(code, bool) and isinstance(message, str):
            return code, message, getattr(exc, "data", None)
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
    if isinstance(exc, ValueError) and data["detail"].startswith(_OUT_OF_RANGE_FLOAT):
        data["detail"] = _OUT_OF_RANGE_FLOAT  # the wording differs between Python versions
    return _answer(id_json, _ERROR_MEMBER, _encode(_error_object(ERR_INTERNAL, "Internal error", data)))


def _answer_result(id_json: bytes, result: Any, expose_errors: bool = True) -> bytes:
    """A success answer; one whose result cannot be encoded is a -32603 for the same id (logged)."""
    try:
        return _answer(id_json, _RESULT_MEMBER, _encode_value(result))
    except Exception as exc:
        _log_answer_failure("the result could not be encoded", id_json, exc)
        return _internal_error(id_json, exc, expose_errors)


def _answer_error(id_json: bytes, exc: BaseException, expose_errors: bool = True) -> bytes:
    """The answer to a handler that raised ``exc``: its own error if it is a readable ``JsonRpcError``."""
    error = _application_error(exc, id_json)
    if error is None:
        return _internal_error(id_json, exc, expose_errors)
    code, message, data = error
    try:
        return _answer(id_json, _ERROR_MEMBER, _encode(_error_object(code, message, data), data))
    except Exception as failure:
        _log_answer_failure("the error's data could not be encoded", id_json, failure)
        return _internal_error(id_json, failure, expose_errors)


def _id_json(id_: Any, ids: _IdTexts, index: int | None) -> bytes:
    """The id as its answer carries it: a number as written, a string as the encoder writes it."""
    if _needs_id_text(id_):
        return ids.text(index)
    if type(id_) is int:
        return b"%d" % id_
    return _encode(id_)


def _check_envelope(message: Any, ids: _IdTexts, index: int | None) -> Request | tuple[Any, str]:
    """The request in a decoded message (batch entry ``index`` of the line ``ids`` reads), or the id to answer
    -32600 with and the reason."""
    if type(message) is not dict:
        return None, "not an object"
    id_ = message.get("id")
    if id_ is not None and type(id_) not in (str, int, float):
        return None, "id is not a string, a number or null"
    version = message.get("jsonrpc")
    if type(version) is not str or version != "2.0":
        return id_, 'jsonrpc is not "2.0"'
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
    return _invalid_request(b"null" if id_ is None else _id_json(id_, ids, index), reason)


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
        message = _decode(line, DEFAULT_MAX_DEPTH, max_batch=None)
    except (UnicodeEncodeError, _ParseError):
        return None, _error_response(None, ERR_PARSE, "Parse error")
    checked = _check_envelope(message, _IdTexts(line), None)
    if isinstance(checked, Request):
        return checked, None
    id_, reason = checked
    logger.debug("invalid request: %s", reason)
    return None, _error_response(id_, ERR_INVALID_REQUEST, "Invalid Request")


def _classify_text(line: bytes, max_depth: int, max_batch: int | None) -> bytes | Request | list[Request | bytes]:
    """One JSON text (a line, or ``dispatch``'s body) read and classified as ``_read_message`` gives it."""
    try:
        message = _decode(line, max_depth, max_batch)
    except _ParseError as exc:
        logger.debug("parse error: %s", exc)
        return _PARSE_ERROR
    if message is _BATCH_OVER_LIMIT:
        return _invalid_request(b"null", f"a batch of more than max_batch ({max_batch}) entries")
    ids = _IdTexts(line)
    if type(message) is not list:
        return _classify(message, ids, None)
    if not message:
        return _invalid_request(b"null", "empty batch")
    return [_classify(entry, ids, index) for index, entry in enumerate(message)]


def _encode_request(method: str, params: Any = None, id: Any = None) -> bytes:  # the member's name
    """The line of a request (``id`` given) or a notification (``id`` is ``None``), without ``\\n``; no
    ``params`` member when ``params`` is ``None``."""
    message: dict[str, Any] = {"jsonrpc": "2.0"} if id is None else {"jsonrpc": "2.0", "id": id}
    message["method"] = method
    if params is not None:
        message["params"] = params
    return _encode(message, params)


def _parse_incoming(
    data: bytes, max_depth: int = DEFAULT_MAX_DEPTH
) -> Response | Request | str | list[Response | Request | str]:
    """One message a client read (a line, or an HTTP body): a ``Response``, a ``Request`` (the server's own
    request or notification), a ``list`` of these for a batch, or a ``str`` saying why the message (or a
    batch entry) is neither, for the client to log and drop. Nesting deeper than ``max_depth`` (a
    transport's limit, checked as ``StdioTransport`` checks it) is a parse error."""
    message = _decode_incoming(data, _positive("max_depth", max_depth, MAX_MAX_DEPTH))
    if isinstance(message, _Unreadable):
        return message.reason
    return message


class _Unreadable:
    """A text a client read that is not JSON (or nests deeper than its limit): why."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _decode_incoming(
    data: bytes, max_depth: int
) -> Response | Request | str | list[Response | Request | str] | _Unreadable:
    try:
        message = _decode(data, max_depth)
    except _ParseError as exc:
        return _Unreadable(f"parse error: {exc}")
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
    if id_ is not None and type(id_) not in (str, int, float):
        return "id is not a string, a number or null"
    if "id" not in message:
        return "a response without an id"
    version = message.get("jsonrpc")
    if type(version) is not str or version != "2.0":
        return _invalid_response(id_, 'jsonrpc is not "2.0"')
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
    max_message_bytes = _positive("max_message_bytes", max_message_bytes)
    max_depth = _positive("max_depth", max_depth, MAX_MAX_DEPTH)
    max_batch = None if max_batch is None else _positive("max_batch", max_batch)
    if isinstance(body, str):
        try:
            line = body.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: no UTF-8 form, not a JSON text on any wire
            logger.debug("parse error: a str with lone surrogates (no UTF-8 form)")
            return _PARSE_ERROR
    elif isinstance(body, (bytes, bytearray)):
        line = bytes(body)
    else:
        raise TypeError(f"dispatch takes str or bytes, not {type(body).__name__}")
    if len(line) > max_message_bytes:
        return _TooLong(line.lstrip(_JSON_WHITESPACE)[:1]).answer(max_message_bytes)
    if not line.strip(_JSON_WHITESPACE):
        return _invalid_request(b"null", "an empty body")
    # The answers' bytes come from StdioTransport's static core methods: the class is the answer builder.
    return _answering.answer_message(
        _classify_text(line, max_depth, max_batch),
        lambda request: _answering.call(StdioTransport, request, handler, None, expose_errors=expose_errors),
    )


def _positive(name: str, value: int, most: int | None = None) -> int:
    value = operator.index(value)  # as the native module: an int (or bool), not a float
    if value > _I64_MAX:
        raise OverflowError(f"{name} does not fit a 64-bit integer")
    if most is None and value < 1:
        raise ValueError(f"{name} must be at least 1, not {value}")
    if most is not None and not 1 <= value <= most:
        raise ValueError(f"{name} must be between 1 and {most}, not {value}")
    return value


class _Dropped:
    """A message read and dropped: a line over the limit, or a frame that cannot be read or is over it."""

    def reason(self, max_message_bytes: int) -> str:
        raise NotImplementedError

    def answer(self, max_message_bytes: int) -> bytes:
        raise NotImplementedError


class _TooLong(_Dropped):
    """A line longer than ``max_message_bytes``, already discarded; ``first`` is its first significant byte."""

    def __init__(self, first: bytes) -> None:
        self.first = first

    def reason(self, max_message_bytes: int) -> str:
        return f"a line longer than max_message_bytes ({max_message_bytes})"

    def answer(self, max_message_bytes: int) -> bytes:
        """-32600 if it opened an object or an array (a message, too large), else -32700."""
        reason = f"a line longer than max_message_bytes ({max_message_bytes})"
        if self.first in (b"{", b"["):
            return _invalid_request(b"null", reason)
        logger.debug("parse error: %s", reason)
        return _PARSE_ERROR


# --- Content-Length framing: the rules of the native FrameBuffer (src/framing.rs), docs/semantics.md ---

_HEADER_LIMIT = 8 * 1024
_RESYNC_NAME = re.compile(rb"content-length", re.IGNORECASE)
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_LENGTH = re.compile(rb"[0-9]{1,18}")
_HEADER_SPACE = b" \t\n\x0c\r"  # what Rust's trim_ascii trims
_BAD_HEADER = "a header line that is not 'Name: value' or a bad Content-Length"
_HEADERS_TOO_LONG = "a header block longer than 8192 bytes"
_MISSING_LENGTH = "a header block without Content-Length"
_TRUNCATED = "a frame cut short by the end of input"
_HEADERS, _BODY, _SKIP, _RESYNC = range(4)


class _DroppedFrame(_Dropped):
    """A frame that cannot be read (-32700), or whose ``Content-Length`` is over the limit (-32600)."""

    def __init__(self, reason: str, length: int | None = None) -> None:
        self._reason = reason
        self._length = length

    def reason(self, max_message_bytes: int) -> str:
        if self._length is None:
            return self._reason
        return f"a Content-Length ({self._length}) over max_message_bytes ({max_message_bytes})"

    def answer(self, max_message_bytes: int) -> bytes:
        if self._length is not None:
            return _invalid_request(b"null", self.reason(max_message_bytes))
        logger.debug("parse error: %s", self._reason)
        return _PARSE_ERROR


def _is_blank(data: bytes | bytearray) -> bool:
    return not data.strip(b" \t\r")


def _header_length(line: bytes) -> int | _DroppedFrame | None:
    """``Content-Length``'s value, ``None`` for another header, or why the line is not a header."""
    name, colon, value = line.partition(b":")
    if not colon or not _TOKEN.fullmatch(name):
        return _DroppedFrame(_BAD_HEADER)
    if name.lower() != b"content-length":
        return None
    value = value.strip(_HEADER_SPACE)
    if not _LENGTH.fullmatch(value):
        return _DroppedFrame(_BAD_HEADER)
    return int(value)


class _Frames:
    """The frames read from ``stream`` and not yet handed out (``framing="content-length"``). With ``stream``
    ``None`` it is fed instead (``feed``, ``pop``: sans-IO, for the asyncio client)."""

    def __init__(self, stream: Any, max_body: int) -> None:
        read1 = getattr(stream, "read1", None)
        if stream is None:
            pass
        elif callable(read1):
            self._read: Callable[[int], bytes] = read1
        elif isinstance(stream, io.RawIOBase):
            self._read = stream.read
        else:
            self._read = stream.readline
        self._max_body = max_body
        self._data = bytearray()
        self._pos = 0
        self._eof = False
        self._new_block()

    def _new_block(self) -> None:
        self._state = _HEADERS
        self._length: int | None = None
        self._started = False
        self._used = 0

    def next(self) -> bytes | _DroppedFrame | None:
        """The next body, or a dropped frame; ``None`` at end of input."""
        while (frame := self._advance()) is None:
            if self._eof:
                return None
            self.feed(self._read(_READ_CHUNK))
        return frame

    def feed(self, chunk: bytes) -> None:
        """Add what was read (``b""``: the end of input)."""
        del self._data[: self._pos]
        self._pos = 0
        self._data += chunk
        self._eof = not chunk

    def pop(self) -> bytes | _DroppedFrame | None:
        """The next body, or a dropped frame, in what was fed; ``None`` until more is fed (or at the end)."""
        return self._advance()

    def _fail(self, position: int, reason: str) -> _DroppedFrame:
        self._pos = position
        self._state = _RESYNC
        return _DroppedFrame(reason)

    def _advance(self) -> bytes | _DroppedFrame | None:
        data = self._data
        while True:
            if self._state == _HEADERS:
                newline = data.find(b"\n", self._pos)
                if newline < 0:
                    if self._used + len(data) - self._pos > _HEADER_LIMIT:
                        return self._fail(self._pos + _HEADER_LIMIT - self._used, _HEADERS_TOO_LONG)
                    if not self._eof:
                        return None
                    clean = not self._started and _is_blank(data[self._pos :])
                    self._pos = len(data)
                    self._state = _RESYNC
                    return None if clean else _DroppedFrame(_TRUNCATED)
                size = newline + 1 - self._pos
                if self._used + size > _HEADER_LIMIT:
                    return self._fail(self._pos + _HEADER_LIMIT - self._used, _HEADERS_TOO_LONG)
                line = bytes(data[self._pos : newline])
                if _is_blank(line):
                    self._pos = newline + 1
                    if not self._started:
                        self._new_block()
                    elif self._length is None:
                        return self._fail(self._pos, _MISSING_LENGTH)
                    elif self._length <= self._max_body:
                        self._state, self._left = _BODY, self._length
                    else:
                        self._state, self._left = _SKIP, self._length
                        return _DroppedFrame("", self._length)
                    continue
                found = _header_length(line)
                if isinstance(found, _DroppedFrame) or (found is not None and self._length not in (None, found)):
                    return self._fail(newline + 1, _BAD_HEADER)
                if found is not None:
                    self._length = found
                self._started = True
                self._used += size
                self._pos = newline + 1
            elif self._state == _BODY:
                if len(data) - self._pos >= self._left:
                    body = bytes(data[self._pos : self._pos + self._left])
                    self._pos += self._left
                    self._new_block()
                    return body
                if not self._eof:
                    return None
                return self._fail(len(data), _TRUNCATED)
            elif self._state == _SKIP:
                dropped = min(len(data) - self._pos, self._left)
                self._pos += dropped
                self._left -= dropped
                if self._left:
                    return None
                self._new_block()
            else:
                found_name = _RESYNC_NAME.search(data, self._pos)
                if found_name is not None:
                    self._pos = found_name.start()
                    self._new_block()
                    continue
                keep = 0 if self._eof else len(b"content-length") - 1
                self._pos = max(self._pos, len(data) - keep)
                return None


def _binary_stream(stream: Any, name: str, needs: str) -> Any:
    if isinstance(stream, io.TextIOBase):
        buffer = getattr(stream, "buffer", None)
        if buffer is None:
            raise TypeError(f"{name} is a text stream without a binary .buffer; pass a binary file-like object")
        stream = buffer
    if not callable(getattr(stream, needs, None)):
        raise TypeError(f"{name} must be a binary file-like object with a {needs}() method")
    return stream


_ABSENT = object()
_ALREADY_SERVING = "this transport is already serving: serve() was called on it again before the first call returned"


def _output(stdout: Any) -> tuple[Any, Callable[[], Any] | None]:
    """The binary stream to write to and its ``flush`` (``None`` when it has none; one not callable is refused)."""
    stream = _binary_stream(stdout, "stdout", "write")
    flush = getattr(stream, "flush", _ABSENT)
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


class StdioTransport:
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
        if framing not in ("newline", "content-length"):
            raise ValueError(f"framing must be 'newline' or 'content-length', not {framing!r}")
        self._max_message_bytes = _positive("max_message_bytes", max_message_bytes)
        self._max_depth = _positive("max_depth", max_depth, MAX_MAX_DEPTH)
        self._max_batch = None if max_batch is None else _positive("max_batch", max_batch)
        self._stdin = _binary_stream(sys.stdin if stdin is None else stdin, "stdin", "readline")
        self._stdout, self._flush = _output(sys.stdout if stdout is None else stdout)
        self._reader = _StreamLock(_REENTRANT_READ)
        self._writer = _StreamLock(_REENTRANT_WRITE)
        self._serving = threading.Lock()  # held while a serve runs over this transport
        self._frames = None if framing == "newline" else _Frames(self._stdin, self._max_message_bytes)

    @property
    def framing(self) -> Framing:
        """``"newline"`` or ``"content-length"``."""
        return "newline" if self._frames is None else "content-length"

    def read_line(self) -> bytes | None:
        """The next line without its ``\\n`` (or ``\\r\\n``); ``None`` at end of input.

        A line longer than ``max_message_bytes`` is discarded and raises ``ValueError``; the next
        call reads on after it. With ``framing="content-length"``: the next frame's body; a frame
        that cannot be read (or is over the limit) raises ``ValueError`` and is dropped.
        """
        line = self._next_line()
        if isinstance(line, _Dropped):
            raise ValueError(f"{line.reason(self._max_message_bytes)} was discarded")
        return line

    def _next_line(self) -> bytes | _TooLong | _DroppedFrame | None:
        if self._frames is not None:
            with self._reader:
                return self._frames.next()
        limit = min(self._max_message_bytes + 2, sys.maxsize)  # room for the line's own "\r\n"
        with self._reader:
            line: bytes = self._stdin.readline(limit)
            if len(line) == limit and not line.endswith(b"\n"):
                first = line.lstrip(_JSON_WHITESPACE)[:1]
                while (rest := self._stdin.readline(_READ_CHUNK)) and not rest.endswith(b"\n"):
                    first = first or rest.lstrip(_JSON_WHITESPACE)[:1]
                return _TooLong(first or rest.lstrip(_JSON_WHITESPACE)[:1])
        if not line:
            return None
        if line.endswith(b"\n"):
            line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > self._max_message_bytes:
            return _TooLong(line.lstrip(_JSON_WHITESPACE)[:1])
        return line

    def _write_line(self, payload: bytes) -> None:
        if self._frames is None:
            data = memoryview(payload + b"\n")
        else:  # each line (the engine joins answers with "\n") is one frame; empty ones are left out
            data = memoryview(
                b"".join(b"Content-Length: %d\r\n\r\n%b" % (len(m), m) for m in payload.split(b"\n") if m)
            )
            if not data:
                return
        with self._writer:
            while data:  # a raw (unbuffered) stream may take only part of it
                written = self._stdout.write(data)
                count = len(data) if written is None else operator.index(written)
                if not 0 <= count <= len(data):
                    raise OSError(
                        f"write() returned invalid length {count} (should have been between 0 and {len(data)})"
                    )
                data = data[count:]
            if self._flush is not None:
                self._flush()

    def _swap_output(self, stdout: BinaryIO) -> Any:
        """Write to ``stdout`` from now on; the stream written to until now (swapped under the writer's lock)."""
        output = _output(stdout)
        with self._writer:
            previous = self._stdout
            self._stdout, self._flush = output
        return previous

    def write_response(self, id: Any, result: Any) -> None:
        """Write a success answer ``{"jsonrpc":"2.0","id":id,"result":result}``."""
        self._write_line(_answer(_encode(id), _RESULT_MEMBER, _encode_value(result)))

    def write_error(self, id: Any, code: int, message: str, data: Any = None) -> None:
        """Write an error answer; the ``data`` member is left out when ``data`` is ``None``."""
        self._write_line(_answer(_encode(id), _ERROR_MEMBER, _encode(_error_object(code, message, data), data)))

    def write_notification(self, method: str, params: Any = None) -> None:
        """Write a notification (no ``id``), e.g. a progress event while a request is in flight."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._write_line(_encode(message, params))

    def _write_message(self, message: Any) -> None:
        """Encode ``message`` (any JSON value) as compact JSON and write it as one message."""
        self._write_line(_encode(message))

    def _read_value(self) -> Any:
        """The next message decoded as JSON (any value); ``None`` at end of input. A message that
        cannot be read or is not JSON raises ``ValueError``; the next call reads on after it."""
        while (line := self._next_line()) is not None:
            if isinstance(line, _Dropped):
                raise ValueError(f"{line.reason(self._max_message_bytes)} was discarded")
            if line.strip(_JSON_WHITESPACE) or self._frames is not None:
                try:
                    return _decode(line, self._max_depth)
                except _ParseError as exc:
                    raise ValueError(str(exc)) from None
        return None

    # --- the core the engine (rpcwire._engine) schedules over ------------------------------------

    def _read_message(self) -> bytes | Request | list[Request | bytes] | None:
        """The next message, read and classified: ``None`` at end of input; the bytes of the answer the
        transport itself gives (-32700, -32600, an over-long line); a ``Request``; or a batch's entries,
        each a ``Request`` or its -32600 answer's bytes."""
        while (line := self._next_line()) is not None:
            if isinstance(line, _Dropped):
                return line.answer(self._max_message_bytes)
            if line.strip(_JSON_WHITESPACE) or self._frames is not None:  # a blank line is skipped, a frame never
                return self._classify_line(line)
        return None

    def _read_incoming(
        self,
    ) -> Response | Request | str | list[Response | Request | str] | tuple[str, bytes] | None:
        """The next message as a client reads it (blank lines skipped), nested at most ``max_depth`` deep:
        ``None`` at end of input; a ``Response``; a ``Request`` (the server's own request or notification); a
        ``list`` of these for a batch; a ``str`` saying why a message (a line over ``max_message_bytes``
        included) is neither; or, for a message that cannot be decoded, ``(why, its bytes)``, so that the
        client can look for the call it names."""
        while (line := self._next_line()) is not None:
            if isinstance(line, _Dropped):
                return line.reason(self._max_message_bytes)
            if line.strip(_JSON_WHITESPACE) or self._frames is not None:
                message = _decode_incoming(line, self._max_depth)
                return (message.reason, line) if isinstance(message, _Unreadable) else message
        return None

    @property
    def _limits(self) -> tuple[int, int, int | None]:
        """``(max_message_bytes, max_depth, max_batch)``, as given (``max_batch`` ``None`` when unlimited):
        the limits a client checks its own messages against before it sends them."""
        return self._max_message_bytes, self._max_depth, self._max_batch

    def _classify_line(self, line: bytes) -> bytes | Request | list[Request | bytes]:
        return _classify_text(line, self._max_depth, self._max_batch)

    @staticmethod
    def _answer_result(id_json: bytes, result: Any, *, expose_errors: bool = True) -> bytes:
        """The success answer's bytes; a -32603 for the same id when ``result`` cannot be encoded (logged;
        without the exception's name and text in ``data`` when ``expose_errors`` is false)."""
        return _answer_result(id_json, result, expose_errors)

    @staticmethod
    def _answer_error(id_json: bytes, exception: BaseException, *, expose_errors: bool = True) -> bytes:
        """The bytes of the answer to a handler that raised ``exception`` (a -32603 without the exception's name
        and text in ``data`` when ``expose_errors`` is false). The exception itself is not logged here."""
        return _answer_error(id_json, exception, expose_errors)

    def serve(self, handler: Handler, *, max_concurrency: int = 1) -> None:
        """Answer every request with ``handler(method, params)`` until end of input: ``rpcwire.serve(handler,
        self, max_concurrency=...)``, which chooses the mode, without its guard of the process's fd 1."""
        _engine.serve(handler, self, max_concurrency=max_concurrency, guard_stdout=False)

    def _serve_sequential(self, handler: Handler) -> None:
        """The sequential loop: one message at a time, in order, on the calling thread, until end of input.

        Stops with the exception if reading or writing fails (a ``BrokenPipeError`` once the peer
        is gone) or if the handler raises a ``BaseException`` that is not an ``Exception``.
        ``RuntimeError`` if a ``serve`` already runs over this transport.
        """
        self._start_serving()
        try:
            _engine.serve_sequential(handler, self)
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


class Client(_client.Client):
    __doc__ = _client.Client.__doc__
    _core = sys.modules[__name__]


class AsyncClient(_async_client.AsyncClient):
    __doc__ = _async_client.AsyncClient.__doc__
    _core = sys.modules[__name__]


class HttpClient(_http_client.HttpClient):
    __doc__ = _http_client.HttpClient.__doc__
    _core = sys.modules[__name__]


class AsyncHttpClient(_http_client.AsyncHttpClient):
    __doc__ = _http_client.AsyncHttpClient.__doc__
    _core = sys.modules[__name__]
