"""What every client shares: ids, the calls waiting for an answer, and what the server sends on its own.

A client above a *core* (the native module or :mod:`rpcwire._pure`: it encodes each request with
``_encode_request`` and classifies what comes back, ``_read_incoming`` on a transport, ``_parse_incoming`` on
a body) is a :class:`_Peer` plus its own way of writing and reading: :class:`rpcwire.Client` (threads,
``_client.py``), :class:`rpcwire.AsyncClient` (asyncio, ``_async_client.py``) and the HTTP clients
(``_http_client.py``). What they share is here, written once:

- **Ids and matching.** The client generates integer ids and matches answers to them exactly (an answer whose
  id is not an ``int`` it is waiting for is logged and dropped, so is a line that is no message). An error
  with ``id: null`` (the server could not read a message's id) goes to the call or batch it can only belong
  to (:class:`_Ledger`); a message the client cannot decode fails the calls it names (:func:`_named_calls`).
- **What is sent** is checked against the limits the client reads with (``max_message_bytes``,
  ``max_depth``, ``max_batch``: a server's defaults) before it goes, so that a call the server would refuse
  fails at once (:func:`_check_outgoing`).
- **The dialects** (MCP's or LSP's) of cancellation and progress on the client's side: the progress token
  and trace context a call carries (:func:`_with_meta`), a progress notification's arguments, the
  cancellation sent for a call given up.
- **The server's own traffic.** Notifications go to the callbacks of :meth:`_Peer.on_notification` (progress
  to the ``on_progress`` of the call it belongs to), queued in arrival order (:class:`_Callbacks`) for a
  dispatcher of the client's own (a thread, or a task) where they may call the client; the server's own
  requests are answered by the ``handler`` given to the client (-32601 without one), on a bounded pool of
  threads (tasks), so that a handler may itself call the server.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import re
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, get_args, overload

from rpcwire import _answer, _context
from rpcwire._contract import Core, Incoming
from rpcwire._dialects import LSP_CANCEL, LSP_PROGRESS, MCP_CANCEL, MCP_PROGRESS, Dialect
from rpcwire._id_null_ledger import _READABLE_BYTES, _READABLE_DEPTH, _Ledger, _refusable, _Sent
from rpcwire._types import (
    DEFAULT_MAX_DEPTH,
    ERR_INTERNAL,
    ConnectionClosed,
    Handler,
    MethodNotFound,
    NotSent,
    Request,
    Response,
    error_from_object,
)

try:  # the native core's, so that importing rpcwire imports no module of the pure core (the same bytes)
    from rpcwire._rpcwire import _encode_frame
except ImportError:  # pragma: no cover - a build without the native module
    from rpcwire._pure import _encode_frame

try:  # whether the native sequential serve is calling a handler on this thread (see _context.request_context)
    from rpcwire._rpcwire import _current_call as _native_current_call
except ImportError:  # pragma: no cover - a build without the native module
    _native_current_call = None  # type: ignore[assignment]
_current_call = _native_current_call  # what a lone caller's path asks (with _context.running_request)

encode_frame = _encode_frame  # a message's Content-Length frame, for rpcwire.lsp (a client frames with its own core)

logger: logging.Logger = logging.getLogger("rpcwire.client")

ProgressCallback = Callable[[float, "float | None", "str | None"], Any]
"""``on_progress(progress, total, message)``, as the MCP SDK's progress callbacks are called."""

_CALLBACKS_QUEUED = 1024  # notifications waiting for the dispatcher; beyond, one is dropped (and logged)
_HANDLERS = 8  # the server's own requests handled at once...
_HANDLERS_WAITING = 64  # ...and waiting for a handler; beyond, one is answered -32603 at once
_REMAINS_S = 1.0  # once the server exited: how long what it left in its pipes is still read
_SCAN_BYTES = 1 << 20  # how far into a message that cannot be decoded the client looks for its ids
_CLOSE_JOIN_S = 2.0  # close: how long each of the client's threads is waited for once told to end


def _check_dialect(dialect: str) -> str:
    if dialect not in get_args(Dialect):
        raise ValueError(f"dialect must be 'mcp' or 'lsp', not {dialect!r}")
    return dialect


def _new_traceparent() -> str:
    """A fresh W3C ``traceparent`` (version 00, sampled)."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def _outgoing_traceparent() -> str | None:
    """Inside a handler rpcwire runs: the request's ``traceparent``, made (and kept on the request) when it
    had none, so that every call the handler makes carries one trace. Outside one: ``None``."""
    context = _context.request_context()
    if context is None:
        return None
    if context.traceparent is None:
        context._traceparent = _new_traceparent()
    return context.traceparent


def _with_meta(params: Any, dialect: str, token: int | None, traceparent: str | None) -> Any:
    """``params`` (never changed in place) with the progress token and the trace context added: MCP's in
    ``_meta`` (``progressToken``, ``traceparent``), LSP's progress token as ``workDoneToken``."""
    if token is None and traceparent is None:
        return params
    if params is None:
        params = {}
    elif type(params) is not dict:
        if token is not None:
            raise TypeError("on_progress needs params that are an object (a dict) or None, to carry the token")
        return params  # an array has no room for _meta: the trace context is not forwarded
    params = dict(params)
    meta: dict[str, Any] = {}
    if token is not None and dialect == "lsp":
        params["workDoneToken"] = token
    elif token is not None:
        meta["progressToken"] = token
    if traceparent is not None:
        meta["traceparent"] = traceparent
    if meta:
        existing = params.get("_meta")
        params["_meta"] = {**existing, **meta} if type(existing) is dict else meta
    return params


def _progress_arguments(method: str, params: Any) -> tuple[Any, tuple[float, float | None, str | None]] | None:
    """A progress notification's token and ``on_progress`` arguments; ``None`` if it is not one, or LSP's ``end``."""
    if type(params) is not dict:
        return None
    if method == MCP_PROGRESS:
        return params.get("progressToken"), (params.get("progress", 0), params.get("total"), params.get("message"))
    value = params.get("value")
    if type(value) is not dict or value.get("kind") not in ("begin", "report"):
        return None
    percentage = value.get("percentage")
    return params.get("token"), (
        0 if percentage is None else percentage,
        None if percentage is None else 100,
        value.get("message", value.get("title")),
    )


def _cancel_notification(dialect: str, id_: int, reason: str) -> tuple[str, dict[str, Any]]:
    if dialect == "lsp":
        return LSP_CANCEL, {"id": id_}
    return MCP_CANCEL, {"requestId": id_, "reason": reason}


def _outcome(response: Response) -> Any:
    if response.error is not None:
        raise error_from_object(response.error)
    return response.result


def _batch_outcome(response: Response | ConnectionClosed) -> Any:
    """A batch entry's result, or the exception it would raise."""
    if isinstance(response, ConnectionClosed):
        return response
    return response.result if response.error is None else error_from_object(response.error)


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout


@overload
def _left(deadline: float) -> float: ...
@overload
def _left(deadline: None) -> None: ...
def _left(deadline: float | None) -> float | None:
    """Seconds until ``deadline`` (never below 0); ``None`` without one."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


# --- what is sent: checked against the limits the client reads with ---------------------------------


def _check_outgoing(core: Core, line: bytes, limits: tuple[int, int, int | None], entries: int | None = None) -> None:
    """``ValueError`` (nothing is sent) for a message that a server with the client's limits refuses: longer
    than ``max_message_bytes``, a batch of more than ``max_batch`` calls (``entries``), or nested deeper than
    ``max_depth`` (counted by the client's ``core``). rpcwire's server would answer it with an error whose id is
    ``null``."""
    max_message_bytes, max_depth, max_batch = limits
    if len(line) > max_message_bytes:
        raise NotSent(f"not sent: the message is {len(line)} bytes, over max_message_bytes ({max_message_bytes})")
    if entries is not None and max_batch is not None and entries > max_batch:
        raise NotSent(f"not sent: a batch of {entries} calls, over max_batch ({max_batch})")
    if core._nests_deeper(line, max_depth):
        raise NotSent(f"not sent: the message nests deeper than max_depth ({max_depth})")


# --- what cannot be read: the calls it names -------------------------------------------------------

# A string (escapes skipped), a bracket, or a quote that opens no whole string.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[][{}]|"', re.DOTALL)
_KEY = re.compile(rb"[ \t\r\n]*:[ \t\r\n]*")
_INTEGER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?![0-9.eE])")


def _named_calls(data: bytes) -> list[int]:
    """The ids that a message the client cannot decode (bad JSON, nested deeper than its ``max_depth``)
    answers: for its top-level object, or each object of its top-level array, that has an integer ``id``,
    a ``result`` or ``error`` member and no ``method``. Found by following only strings and brackets, in
    the first ``_SCAN_BYTES`` of it; an answer written with escapes in its member names is not found."""
    start = len(data) - len(data.lstrip(b" \t\r\n"))
    if start == len(data) or data[start] not in b"[{":
        return []
    target = 1 if data[start] == ord("{") else 2  # the depth of the objects that are answers
    found: list[int] = []
    members: dict[bytes, Any] | None = None
    depth = 0

    def finish() -> None:
        if (
            members is not None
            and b'"method"' not in members
            and type(members.get(b'"id"')) is int
            and (b'"result"' in members or b'"error"' in members)
        ):
            found.append(members[b'"id"'])

    for token in _TOKEN.finditer(data, start, min(len(data), _SCAN_BYTES)):
        kind = data[token.start()]
        if kind == ord('"'):
            if token.end() - token.start() == 1:
                break  # a string that does not end: nothing after it can be told apart
            if depth == target and members is not None and (key := _KEY.match(data, token.end())) is not None:
                name = token.group()
                number = _INTEGER.match(data, key.end()) if name == b'"id"' else None
                members[name] = int(number.group()) if number is not None else True
        elif kind in b"[{":
            depth += 1
            if depth == target and kind == ord("{"):
                members = {}
        else:
            if depth == target:
                finish()
                members = None
            depth -= 1
            if depth <= 0:
                break
    else:
        if depth >= target:
            finish()  # cut short (by the scan's bound): what was seen of the object still names its call
    return found


# --- what every client shares ----------------------------------------------------------------------


class _Peer:
    """What every client shares: ids, the calls waiting for an answer, and the server's own traffic."""

    _core: Core  # the native module or rpcwire._pure (bound by the public classes)

    def __init__(self, handler: Handler | None, dialect: str, timeout: float | None) -> None:
        self._handler = handler
        self._dialect = _check_dialect(dialect)
        self._timeout = timeout
        self._ids = itertools.count(1)
        self._pending: dict[int, Any] = {}  # id -> the waiter of the call (the subclass's kind)
        self._progress: dict[int, ProgressCallback] = {}  # progress token (the call's id) -> callback
        self._listeners: dict[str, list[Callable[[Any], Any]]] = {}
        self._closed: ConnectionClosed | None = None
        self._ledger = _Ledger()
        self._max_depth = DEFAULT_MAX_DEPTH  # what a message the client reads may nest (its transport's)

    def on_notification(self, method: str, callback: Callable[[Any], Any]) -> None:
        """Call ``callback(params)`` for each notification ``method`` the server sends, in arrival order
        (progress callbacks included); an exception it raises is logged. ``Client`` and ``AsyncClient`` run
        callbacks one at a time on a dispatcher of their own (a thread; a task, where an ``async def``
        callback is awaited), so a callback may call the client itself; the HTTP clients run them as the
        events of a call's response arrive, on the calling thread (or task)."""
        self._listeners.setdefault(method, []).append(callback)

    def _set_limits(self, limits: tuple[int, int, int | None]) -> None:
        """The limits the client reads with and checks its messages against (``_checked``)."""
        self._limits = limits
        self._max_depth = limits[1]
        self._quick_bytes = min(limits[0], _READABLE_BYTES)
        self._quick_depth = min(limits[1], _READABLE_DEPTH)

    def _checked(self, line: bytes) -> bool:
        """``_check_outgoing`` (``ValueError``: not to be sent) and ``_refusable`` (the answer: whether a server
        could refuse it unread) for a call's line. A line shorter than both byte limits with fewer opening
        brackets than both depths passes both without a look at its strings (each level takes a bracket)."""
        if len(line) <= self._quick_bytes and line.count(b"[") + line.count(b"{") <= self._quick_depth:
            return False
        _check_outgoing(self._core, line, self._limits)
        return _refusable(self._core, line, False)

    def _request_line(self, method: str, params: Any, on_progress: ProgressCallback | None) -> tuple[int, bytes]:
        id_ = next(self._ids)
        traceparent = _outgoing_traceparent()
        if on_progress is not None or traceparent is not None:
            params = _with_meta(params, self._dialect, None if on_progress is None else id_, traceparent)
        line = self._core._encode_request(method, params, id_)
        if on_progress is not None:
            self._progress[id_] = on_progress
        return id_, line

    def _on_start(self, line: bytes, ids: Sequence[int], sent: list[_Sent]) -> Callable[[], None]:
        """What to do just before a message's first byte is written: take its place in the ledger (into
        ``sent``; ``ids``: the calls it makes, if any)."""
        suspect = _refusable(self._core, line, bool(ids) and line[:1] == b"[")
        ledger = self._ledger
        return lambda: sent.append(ledger.written(ids, suspect))

    def _written(self, line: bytes, ids: Sequence[int], sent: list[_Sent]) -> None:
        """``_on_start(line, ids, sent)()``, for a client that writes the message at once."""
        sent.append(self._ledger.written(ids, _refusable(self._core, line, bool(ids) and line[:1] == b"[")))

    def _abandon(self, ids: Sequence[int], sent: list[_Sent], reason: str) -> None:
        """Calls whose caller stopped waiting: no longer pending; the server is told to cancel those that
        were sent (:meth:`_send_cancel`, which never waits)."""
        for id_ in ids:
            self._pending.pop(id_, None)
            self._progress.pop(id_, None)
        if sent and self._closed is None:
            self._ledger.abandoned(ids)
            for id_ in ids:
                self._send_cancel(self._cancel_line(id_, reason))

    def _send_cancel(self, line: bytes) -> None:
        """Write a cancellation without waiting (the stream clients say how)."""
        raise NotImplementedError

    def _cancel_line(self, id_: int, reason: str) -> bytes:
        return self._core._encode_request(*_cancel_notification(self._dialect, id_, reason))

    def _deliver(self, message: Incoming | tuple[str, bytes]) -> None:
        """One message the reader classified (``_read_incoming``/``_parse_incoming``)."""
        if isinstance(message, Response):
            self._take_answer(message)
        elif isinstance(message, Request):
            if message.is_notification:
                self._notified(message)
            else:
                self._serve_request(message)
        elif isinstance(message, list):
            for entry in message:
                self._deliver(entry)
        elif isinstance(message, tuple):  # (why, its bytes): a message that cannot be decoded
            self._unreadable(*message)
        else:
            logger.warning("dropped a message from the server: %s", message)

    def _take_answer(self, response: Response) -> None:
        id_ = response.id
        if type(id_) is int:
            matched = self._ledger.answered(id_)
            waiter = self._pending.pop(id_, None)
            if waiter is None:
                logger.warning("dropped an answer to no call waiting for it (id %r)", id_)
            else:
                self._progress.pop(id_, None)
                self._resolve(waiter, response)
        elif id_ is None and response.error is not None:
            matched = self._ledger.refused(response)
        else:
            logger.warning("dropped an answer to no call waiting for it (id %r)", id_)
            return
        for sent, error in matched:
            for entry in sent.ids:
                waiter = self._pending.pop(entry, None)
                if waiter is not None:
                    self._progress.pop(entry, None)
                    self._resolve(waiter, Response(entry, None, error.error))

    def _unreadable(self, reason: str, data: bytes) -> None:
        """A message that cannot be decoded: an answer to the calls it names (found in its bytes) fails them."""
        named = [id_ for id_ in _named_calls(data) if id_ in self._pending]
        if not named:
            logger.warning("dropped a message from the server: %s", reason)
            return
        if "nesting" in reason:
            reason += f" (the client reads at most max_depth={self._max_depth} levels)"
        for id_ in named:
            error = {"code": ERR_INTERNAL, "message": "Invalid response", "data": reason}
            self._take_answer(Response(id_, None, error))

    def _notified(self, request: Request) -> None:
        if request.method in (MCP_PROGRESS, LSP_PROGRESS):
            progress = _progress_arguments(request.method, request.params)
            token = None if progress is None else progress[0]
            callback = self._progress.get(token) if type(token) is int else None
            if callback is not None and progress is not None:
                self._run_later(callback, progress[1], token)
        for listener in self._listeners.get(request.method, ()):
            self._run_later(listener, (request.params,), None)

    def _run_later(self, callback: Callable[..., Any], args: tuple[Any, ...], call: int | None) -> None:
        """Run a notification callback (``call``: the id of the call whose progress it reports). Here: at
        once, on the reading thread (the HTTP clients, whose reader is the caller)."""
        _run_callback(callback, args)

    def _answer_to(self, request: Request) -> bytes | None:
        """The answer's bytes to the server's own request, through the one answer routine (``serve``'s): the
        client's sync ``handler`` called (-32601 without one), the bytes built by the client's core."""
        return _answer.call(self._core.StdioTransport, request, self._handler or _no_handler, None)

    def _refusal(self, request: Request) -> bytes | None:
        """The answer to a request of the server's that finds every handler busy and the queue full: -32603
        (a ``RuntimeError`` "the client is busy"), through the one answer routine; logged."""
        logger.warning("refused a request of the server's (%r): the client is busy", request.method)
        return _answer.failure_answer(self._core.StdioTransport, request, None, _busy(request))

    def _batch_lines(self, calls: Iterable[tuple[str, Any]]) -> tuple[list[int], bytes]:
        """The ids of a batch's calls and its line (empty when there are none)."""
        entries = [self._request_line(method, params, None) for method, params in calls]
        return [id_ for id_, _ in entries], b"[" + b",".join(line for _, line in entries) + b"]" if entries else b""

    def _close_with(self, closed: ConnectionClosed) -> None:
        """Fail every waiting call with ``closed``, and every later one (the first cause wins)."""
        if self._closed is None:
            self._closed = closed
        while self._pending:
            with contextlib.suppress(KeyError):  # another thread took the last one
                self._resolve(self._pending.popitem()[1], self._closed_error())
        self._progress.clear()

    def _closed_error(self) -> ConnectionClosed:
        """A fresh copy of why the client is closed, for one raise: raising the one kept object again and again
        would grow its traceback by each raise's frames (and keep them alive) for as long as calls go on."""
        closed = self._closed
        assert closed is not None
        return ConnectionClosed(str(closed), closed.returncode, list(closed.stderr_tail))

    def _resolve(self, waiter: Any, response: Response | ConnectionClosed) -> None:
        raise NotImplementedError

    def _serve_request(self, request: Request) -> None:
        raise NotImplementedError


def _run_callback(callback: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    try:
        return callback(*args)
    except Exception:
        logger.exception("a notification callback raised")
        return None


def _closed_error(cause: str, returncode: int | None, stderr_tail: Iterable[str] | None) -> ConnectionClosed:
    tail = list(stderr_tail or ())
    message = cause
    if returncode is not None:
        message += f"; it exited with code {returncode}"
    if tail:
        message += "; the last lines of its stderr:\n" + "\n".join(tail)
    return ConnectionClosed(message, returncode, tail)


def _no_handler(method: str, params: Any) -> Any:
    raise MethodNotFound(f"the client has no handler for {method!r}")


def _busy(request: Request) -> RuntimeError:
    return RuntimeError(
        f"the client is busy: {_HANDLERS} requests of the server's are being handled and {_HANDLERS_WAITING} "
        f"wait; {request.method!r} was refused"
    )


class _Callbacks:
    """The notification callbacks waiting for the client's dispatcher, in arrival order, at most
    ``_CALLBACKS_QUEUED`` (beyond, the newest is dropped and logged); and, for each call, how many of its
    progress callbacks are still to run, so that a call returns only after its own progress was reported."""

    def __init__(self) -> None:
        self.items: collections.deque[tuple[Callable[..., Any], tuple[Any, ...], int | None]] = collections.deque()
        self.progress: collections.Counter[int] = collections.Counter()  # call id -> its callbacks not yet done

    def add(self, callback: Callable[..., Any], args: tuple[Any, ...], call: int | None) -> bool:
        if len(self.items) >= _CALLBACKS_QUEUED:
            logger.warning(
                "dropped a notification from the server: %d callbacks already wait for the client's dispatcher",
                len(self.items),
            )
            return False
        if call is not None:
            self.progress[call] += 1
        self.items.append((callback, args, call))
        return True

    def done(self, call: int | None) -> None:
        if call is not None:
            self.progress[call] -= 1
            if self.progress[call] <= 0:
                del self.progress[call]
