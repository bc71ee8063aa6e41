"""The client: calls to a JSON-RPC server over a stream pair (a subprocess's pipes) or HTTP, sync and async.

Written once for both implementations: a *core* (the native module or :mod:`rpcwire.pure`) encodes each
request (``_encode_request``) and reads and classifies what comes back (``_read_incoming`` on a
transport, ``_parse_incoming`` on a body); everything above that is here. ``rpcwire.Client`` and
``rpcwire.pure.Client`` are the same class bound to either core.

The client generates integer ids and matches answers to them exactly (an answer whose id is not an
``int`` it is waiting for is logged and dropped, so is a line that is no message). An error with
``id: null`` (the server could not read a message's id) goes to the call or batch it can only belong to
(:class:`_Ledger`). Before it is sent, a message is checked against the limits the client reads with
(``max_message_bytes``, ``max_depth``, ``max_batch``: a server's defaults), so that a call the server
would refuse fails at once. Server-initiated traffic: notifications go to the callbacks of
:meth:`on_notification` (progress to the ``on_progress`` of the call it belongs to), one at a time, in
arrival order, on a dispatcher of the client's own (a thread, or a task) where they may call the client;
the server's own requests are answered by the ``handler`` given to the client (-32601 without one), on a
bounded pool of threads (tasks), so that a handler may itself call the server.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import io
import itertools
import logging
import math
import os
import re
import secrets
import select
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import ModuleType, TracebackType
from typing import Any

from rpcwire import _answer, _context, _engine
from rpcwire._types import (
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_MESSAGE_BYTES,
    ERR_INTERNAL,
    ConnectionClosed,
    Framing,
    MethodNotFound,
    Request,
    Response,
    error_from_object,
)

__all__ = ["AsyncClient", "Client", "ProgressCallback"]

logger: logging.Logger = logging.getLogger("rpcwire.client")

ProgressCallback = Callable[[float, "float | None", "str | None"], Any]
"""``on_progress(progress, total, message)``, as the MCP SDK's progress callbacks are called."""

DIALECTS = ("mcp", "lsp")
_MCP_CANCEL = "notifications/cancelled"
_LSP_CANCEL = "$/cancelRequest"
_MCP_PROGRESS = "notifications/progress"
_LSP_PROGRESS = "$/progress"
_STDERR_TAIL = 20  # lines of a spawned server's stderr kept for ConnectionClosed
_STDERR_LINE = 64 * 1024  # a longer stderr line is kept cut to this
_IDLE_S = 0.005  # how long nobody reads, after a read, before the client's own reader does
# A spawned server's pipes' buffer: smaller than the native reader's 64 KiB reads, so that each read goes
# past it and leaves nothing in it (what lets a reader wait on the descriptor; see _pollable_fd).
_PIPE_BUFFER = 8192
_NATIVE_READ = 64 * 1024  # the most one read of the native core takes
_CALLBACKS_QUEUED = 1024  # notifications waiting for the dispatcher; beyond, one is dropped (and logged)
_HANDLERS = 8  # the server's own requests handled at once...
_HANDLERS_WAITING = 64  # ...and waiting for a handler; beyond, one is answered -32603 at once
_LEDGER = 4096  # calls and batches written and unanswered that an id-null error is matched against
_HELD = 64  # id-null errors waiting until they can belong to one call only
_REMAINS_S = 1.0  # once the server exited: how long what it left in its pipes is still read
_REMAINS_BYTES = 1 << 20  # ...and how much of it
_SCAN_BYTES = 1 << 20  # how far into a message that cannot be decoded the client looks for its ids
_JOBS = 1024  # Client: messages sent without waiting (cancellations) queued while the server reads nothing
_CLOSE_JOIN_S = 2.0  # close: how long each of the client's threads is waited for once told to end
_WRITE_BUFFER = 64 * 1024  # AsyncClient: a call waits (within its deadline) for the buffer to drain below this


def _check_dialect(dialect: str) -> str:
    if dialect not in DIALECTS:
        raise ValueError(f"dialect must be 'mcp' or 'lsp', not {dialect!r}")
    return dialect


def _new_traceparent() -> str:
    """A fresh W3C ``traceparent`` (version 00, sampled)."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def _outgoing_traceparent() -> str | None:
    """Inside a handler rpcwire runs: the request's ``traceparent``, made (and kept on the request) when it
    had none, so that every call the handler makes carries one trace. Outside one: ``None``."""
    context = _context._request_context()
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
    if method == _MCP_PROGRESS:
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
        return _LSP_CANCEL, {"id": id_}
    return _MCP_CANCEL, {"requestId": id_, "reason": reason}


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


def _left(deadline: float | None) -> float | None:
    """Seconds until ``deadline`` (never below 0); ``None`` without one."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _poll_ms(deadline: float | None) -> int | None:
    """``poll``'s timeout until ``deadline`` (rounded up, so that it never wakes just before it)."""
    return None if deadline is None else math.ceil(max(0.0, deadline - time.monotonic()) * 1000)


# --- what is sent: checked against the limits the client reads with ---------------------------------


def _nests_deeper(line: bytes, max_depth: int) -> bool:
    """Whether arrays and objects nest deeper than ``max_depth`` in ``line``, counted as a server counts them
    (the envelope and a batch's array included); quick on a big shallow text (see ``rpcwire.pure``)."""
    from rpcwire import pure  # noqa: PLC0415  # pure imports this module

    return pure._text_nests_deeper(line, max_depth)


def _check_outgoing(line: bytes, limits: tuple[int, int, int | None], entries: int | None = None) -> None:
    """``ValueError`` (nothing is sent) for a message that a server with the client's limits refuses: longer
    than ``max_message_bytes``, a batch of more than ``max_batch`` calls (``entries``), or nested deeper than
    ``max_depth``. rpcwire's server would answer it with an error whose id is ``null``."""
    max_message_bytes, max_depth, max_batch = limits
    if len(line) > max_message_bytes:
        raise ValueError(f"not sent: the message is {len(line)} bytes, over max_message_bytes ({max_message_bytes})")
    if entries is not None and max_batch is not None and entries > max_batch:
        raise ValueError(f"not sent: a batch of {entries} calls, over max_batch ({max_batch})")
    if line.count(b"[") + line.count(b"{") > max_depth and _nests_deeper(line, max_depth):
        raise ValueError(f"not sent: the message nests deeper than max_depth ({max_depth})")


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
            key = _KEY.match(data, token.end()) if depth == target and members is not None else None
            if key is not None:
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


# --- errors with id null: the call they can only belong to ----------------------------------------


# A message this small and shallow is read by any server (none refuses it unread); a batch may not be.
_READABLE_BYTES = 64 * 1024
_READABLE_DEPTH = 32


def _refusable(line: bytes, batch: bool) -> bool:
    """Whether a server with sane limits could refuse ``line`` unread: a batch, a message over
    ``_READABLE_BYTES``, or one nested deeper than ``_READABLE_DEPTH``."""
    if batch or len(line) > _READABLE_BYTES:
        return True
    return line.count(b"[") + line.count(b"{") > _READABLE_DEPTH and _nests_deeper(line, _READABLE_DEPTH)


class _Sent:
    """One message written (a call or a batch until it is answered; a notification or an answer of the
    client's until later ones are): its ids, its place in the order of writing, whether a server could
    refuse it unread."""

    __slots__ = ("abandoned", "ids", "seq", "suspect")

    def __init__(self, seq: int, ids: tuple[int, ...], suspect: bool) -> None:
        self.seq = seq
        self.ids = ids
        self.suspect = suspect
        self.abandoned = False


class _Ledger:
    """Which message an error with ``id: null`` answers (``-32700``/``-32600`` for a message the server
    could not read an id in: too deep, too long, a batch over its limit).

    A server reads a stream's messages in the order they were written and answers one it cannot read at
    once, before it reads the next, so that error comes before any answer to a later message. So it can
    only answer a message written after the last one answered (the *frontier*) and not answered itself:
    a call, a batch, a notification or an answer of the client's. Of those, the ones a server could
    refuse unread (*suspects*: a batch, over 64 KiB, nested deeper than 32) are the candidates, or all of
    them when none is. One candidate: the error is its answer (a call or every entry of a batch fails
    with it; for a notification it is logged). Several: the error is held until answers to the others
    leave one (with several errors held: once as many candidates are left as errors, in order), so that
    it never fails a call the server read; a call it may belong to ends at its deadline meanwhile."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seq = 0
        self._frontier = 0
        self._by_id: dict[int, _Sent] = {}
        self._calls: dict[int, _Sent] = {}  # calls and batches unanswered, by seq, in the order written
        self._others: collections.deque[_Sent] = collections.deque()  # notifications and answers, in order
        self._held: list[tuple[Response, set[_Sent]]] = []

    def written(self, ids: Sequence[int], suspect: bool) -> _Sent:
        """A message is being written, after every one before it (``ids``: the calls it makes, if any)."""
        with self._lock:
            self._seq += 1
            sent = _Sent(self._seq, tuple(ids), suspect)
            if not ids:
                self._others.append(sent)
                if len(self._others) > _LEDGER:  # a bound: the oldest is no longer a candidate
                    self._others.popleft()
                return sent
            for id_ in ids:
                self._by_id[id_] = sent
            self._calls[sent.seq] = sent
            while len(self._calls) > _LEDGER:
                self._forget(next(iter(self._calls.values())))
            return sent

    def withdrawn(self, sent: _Sent) -> None:
        """Nothing of it was written after all (its deadline passed first)."""
        with self._lock:
            self._forget(sent)
            with contextlib.suppress(ValueError):
                self._others.remove(sent)
            for _, candidates in self._held:
                candidates.discard(sent)

    def abandoned(self, ids: Iterable[int]) -> None:
        """Its caller stopped waiting (a timeout, an interrupt): it stays a candidate until it is answered
        or the frontier passes it, as the server may have refused it."""
        with self._lock:
            for id_ in ids:
                sent = self._by_id.get(id_)
                if sent is not None:
                    sent.abandoned = True
                    if sent.seq <= self._frontier:
                        self._forget(sent)

    def answered(self, id_: int) -> list[tuple[_Sent, Response]]:
        """An answer naming ``id_`` arrived; the held errors that it leaves with one message to go to."""
        with self._lock:
            sent = self._by_id.pop(id_, None)
            if sent is None:
                return []
            if self._calls.pop(sent.seq, None) is not None:
                for other in sent.ids:  # a batch is answered by one array: the rest of it with this entry
                    self._by_id.pop(other, None)
                self._advance(sent.seq)
            if not self._held:
                return []
            for _, candidates in self._held:
                candidates.discard(sent)
            return self._matched()

    def refused(self, error: Response) -> list[tuple[_Sent, Response]]:
        """An error with ``id: null`` arrived: the message it answers, if it can be told yet."""
        with self._lock:
            frontier = self._frontier
            candidates = [sent for seq, sent in self._calls.items() if seq > frontier]
            candidates += [sent for sent in self._others if sent.seq > frontier]
            suspects = {sent for sent in candidates if sent.suspect}
            if not candidates:
                logger.warning("dropped an error with id null that answers no message of the client's: %s", error.error)
                return []
            self._held.append((error, suspects or set(candidates)))
            if len(self._held) > _HELD:
                dropped, _ = self._held.pop(0)
                logger.warning("dropped an error with id null that could not be matched to a call: %s", dropped.error)
            return self._matched()

    def _advance(self, seq: int) -> None:
        """The frontier moves to ``seq``: what it passes is no candidate any more."""
        self._frontier = max(self._frontier, seq)
        while self._others and self._others[0].seq <= self._frontier:
            self._others.popleft()
        while self._calls:  # callers gone, passed by the frontier: forgotten
            first = next(iter(self._calls.values()))
            if first.seq > self._frontier or not first.abandoned:
                break
            self._forget(first)

    def _matched(self) -> list[tuple[_Sent, Response]]:
        """Held errors that now have one message to go to (taken out, with their messages)."""
        matched: list[tuple[_Sent, Response]] = []
        while self._held:
            left = set().union(*(candidates for _, candidates in self._held))
            if len(left) == len(self._held):  # as many messages left as errors: each its own, in order
                pairs = list(zip(sorted(left, key=lambda sent: sent.seq), [e for e, _ in self._held], strict=True))
                self._held.clear()
            else:
                single = next(((e, c) for e, c in self._held if len(c) <= 1), None)
                if single is None:
                    break
                self._held.remove(single)
                if not single[1]:
                    logger.warning("dropped an error with id null that answers no message left: %s", single[0].error)
                    continue
                pairs = [(next(iter(single[1])), single[0])]
            for sent, error in pairs:
                self._forget(sent)
                with contextlib.suppress(ValueError):
                    self._others.remove(sent)
                self._advance(sent.seq)
                for _, candidates in self._held:
                    candidates.discard(sent)
                if sent.ids:
                    matched.append((sent, error))
                else:
                    logger.warning("the server refused a notification (or an answer) of the client's: %s", error.error)
        return matched

    def _forget(self, sent: _Sent) -> None:
        self._calls.pop(sent.seq, None)
        for id_ in sent.ids:
            if self._by_id.get(id_) is sent:
                del self._by_id[id_]


# --- what every client shares ----------------------------------------------------------------------


class _Peer:
    """What every client shares: ids, the calls waiting for an answer, and the server's own traffic."""

    _core: ModuleType  # the native module or rpcwire.pure

    def __init__(self, handler: Callable[[str, Any], Any] | None, dialect: str, timeout: float | None) -> None:
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

    def _request_line(self, method: str, params: Any, on_progress: ProgressCallback | None) -> tuple[int, bytes]:
        id_ = next(self._ids)
        params = _with_meta(params, self._dialect, None if on_progress is None else id_, _outgoing_traceparent())
        line = self._core._encode_request(method, params, id_)
        if on_progress is not None:
            self._progress[id_] = on_progress
        return id_, line

    def _on_start(self, line: bytes, ids: Sequence[int], sent: list[_Sent]) -> Callable[[], None]:
        """What to do just before a message's first byte is written: take its place in the ledger (into
        ``sent``; ``ids``: the calls it makes, if any)."""
        suspect = _refusable(line, bool(ids) and line[:1] == b"[")
        ledger = self._ledger
        return lambda: sent.append(ledger.written(ids, suspect))

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

    def _deliver(self, message: Any) -> None:
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
        if request.method in (_MCP_PROGRESS, _LSP_PROGRESS):
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

    def _answer(self, transport: Any, request: Request) -> bytes | None:
        """The answer's bytes to the server's own request, built by the core as ``serve`` builds them."""
        handler = self._handler or _no_handler
        return _answer.call(transport, request, handler, None)

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
                self._resolve(self._pending.popitem()[1], self._closed)
        self._progress.clear()

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


# --- the sync client ----------------------------------------------------------------------------


class _Dispatcher:
    """The sync client's callbacks, run one at a time in arrival order on a thread of the client's own
    (started with the first), where a callback may call the client: a caller's thread never runs one."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._callbacks = _Callbacks()
        self._thread: threading.Thread | None = None
        self._busy = False
        self._stopping = False

    def on_thread(self) -> bool:
        """Whether the calling thread is the dispatcher (a callback calling the client)."""
        return self._thread is not None and threading.current_thread() is self._thread

    def add(self, callback: Callable[..., Any], args: tuple[Any, ...], call: int | None) -> None:
        with self._cond:
            if self._stopping or not self._callbacks.add(callback, args, call):
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rpcwire-client-callbacks", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._callbacks.items:
                    self._busy = False
                    self._cond.notify_all()  # for wait_idle and wait_for_progress
                    if self._stopping:
                        return
                    self._cond.wait()
                callback, args, call = self._callbacks.items.popleft()
                self._busy = True
            try:
                _run_callback(callback, args)
            finally:
                with self._cond:
                    self._callbacks.done(call)
                    self._cond.notify_all()

    def wait_for_progress(self, call: int, deadline: float | None) -> None:
        """Until the progress callbacks of ``call`` queued before its answer have run (or ``deadline``)."""
        if call not in self._callbacks.progress or self.on_thread():
            return
        with self._cond:
            while call in self._callbacks.progress and (left := _left(deadline)) != 0:
                self._cond.wait(left)

    def stop(self, timeout: float) -> None:
        """Run what is queued (for at most ``timeout`` seconds), then end the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            if self.on_thread():
                return
            deadline = time.monotonic() + timeout
            while (self._callbacks.items or self._busy) and (left := _left(deadline)) != 0:
                self._cond.wait(left)


class _HandlerPool:
    """The sync client's threads for the server's own requests: at most ``_HANDLERS`` at once, started as
    requests come and ended when none waits; up to ``_HANDLERS_WAITING`` more wait, in order."""

    def __init__(self, run: Callable[[Request], None]) -> None:
        self._run = run
        self._lock = threading.Lock()
        self._waiting: collections.deque[Request] = collections.deque()
        self._workers = 0

    def submit(self, request: Request) -> bool:
        """``False``: no room (every thread busy and the queue full)."""
        with self._lock:
            if self._workers >= _HANDLERS and len(self._waiting) >= _HANDLERS_WAITING:
                return False
            self._waiting.append(request)
            if self._workers >= _HANDLERS:
                return True
            self._workers += 1
        threading.Thread(target=self._work, name="rpcwire-client-handler", daemon=True).start()
        return True

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._waiting:
                    self._workers -= 1
                    return
                request = self._waiting.popleft()
            try:
                self._run(request)
            except Exception:
                logger.exception("answering the server's request %r failed", request.method)


_QUEUED, _STARTED, _DONE = range(3)


class _Job:
    """A message (or the rest of one) for the output's thread to write."""

    __slots__ = ("data", "error", "locked", "on_start", "state", "withdrawn")

    def __init__(self, data: Any, on_start: Callable[[], Any] | None, locked: bool) -> None:
        self.data = data
        self.on_start = on_start
        self.locked = locked  # the output's lock is already held for it
        self.state = _QUEUED
        self.withdrawn = False
        self.error: BaseException | None = None


class _Output:
    """How a ``Client`` writes: one message at a time, each whole, in the order they start, each within
    its caller's deadline wherever the stream allows it.

    Over a spawned server's stdin (``fd``, made non-blocking) the caller writes itself and waits for room
    with ``poll`` until its deadline. What a caller leaves half-written when its deadline passes (or an
    interrupt comes) is finished by a thread of the client's, as are the cancellations of timed-out calls,
    so that a message is never cut short (the stream would be broken) and a caller never waits past its
    deadline. Over a transport's own stream (which cannot be waited on), a write with a deadline is made by
    that thread, its caller waiting for it until the deadline. ``stop`` ends every write at once (``fd``'s
    waits watch ``stop_fd``), so that ``close`` can close the pipe."""

    def __init__(self, transport: Any, fd: int | None, stop_fd: int | None) -> None:
        self._transport = transport
        self._fd = fd
        self._stop_fd = stop_fd
        self._frames = getattr(transport, "framing", "newline") == "content-length"
        self._lock = threading.Lock()  # held while one message is written
        self._cond = threading.Condition()  # the jobs; notified at each release of _lock
        self._jobs: collections.deque[_Job] = collections.deque()
        self._handed: _Job | None = None  # a job _lock is held for
        self._thread: threading.Thread | None = None
        self.stopped = False

    def _framed(self, line: bytes) -> bytes:
        return _frame(line) if self._frames else line + b"\n"

    def send(self, line: bytes, deadline: float | None, on_start: Callable[[], Any]) -> bool:
        """Write ``line`` as one message; ``on_start()`` just before its first byte. ``True`` once it is written
        whole; ``False`` when ``deadline`` passed with part of it written (the rest goes out in the
        background: it was sent); ``TimeoutError`` when it passed before any of it was (nothing was sent)."""
        if not self._lock.acquire(timeout=-1 if deadline is None else _left(deadline)):
            raise TimeoutError("not sent: the output stayed busy until the deadline")
        if self.stopped:
            self._release()
            raise BrokenPipeError("the client stopped writing")
        if self._fd is None:
            if deadline is None:
                try:
                    on_start()
                    self._transport._write_line(line)
                    return True
                finally:
                    self._release()
            job = _Job(line, on_start, locked=True)
            self._hand(job)  # the lock goes with it
            return self._wait(job, deadline)
        data = memoryview(self._framed(line))
        done = [0]
        try:
            on_start()
            self._write_fd(data, deadline, done)
        finally:
            self._leave(data, done[0])
        if done[0] == 0:
            raise TimeoutError("not sent: the server read nothing until the deadline")
        return done[0] == len(data)

    def send_soon(self, line: bytes, on_start: Callable[[], Any]) -> None:
        """Write ``line`` without waiting: now if the output is free and has room, else in the background."""
        if self.stopped:
            return
        if self._fd is None or not self._lock.acquire(blocking=False):
            self._queue(_Job(line if self._fd is None else self._framed(line), on_start, locked=False))
            return
        data = memoryview(self._framed(line))
        done = [0]
        try:
            on_start()
            self._write_fd(data, time.monotonic(), done)
        except OSError as exc:
            logger.debug("writing to the server failed: %r", exc)
            self._release()
            return
        except BaseException:
            self._leave(data, done[0])
            raise
        if done[0] == 0 and not self.stopped:  # its place in the ledger is taken: it goes out next
            self._hand(_Job(data, None, locked=True))
        else:
            self._leave(data, done[0])

    def _leave(self, data: memoryview, done: int) -> None:
        """Release the output after ``done`` bytes of ``data`` were written: a message cut short is finished
        by the output's thread first (the lock goes with it)."""
        if 0 < done < len(data) and not self.stopped:
            self._hand(_Job(data[done:], None, locked=True))
        else:
            self._release()

    def _write_fd(self, data: memoryview, deadline: float | None, done: list[int]) -> None:
        """Write ``data`` to ``fd`` until it is all written or ``deadline`` passed (``done[0]``: how much was)."""
        assert self._fd is not None
        poller = None
        while done[0] < len(data):
            if self.stopped:
                raise BrokenPipeError("the client stopped writing")
            try:
                done[0] += os.write(self._fd, data[done[0] :])
                continue
            except BlockingIOError:
                pass
            timeout = _poll_ms(deadline)
            if timeout == 0:
                return
            if poller is None:
                poller = select.poll()
                poller.register(self._fd, select.POLLOUT)
                if self._stop_fd is not None:
                    poller.register(self._stop_fd, select.POLLIN)
            poller.poll(timeout)

    def _release(self) -> None:
        self._lock.release()
        with self._cond:
            self._cond.notify_all()

    def _hand(self, job: _Job) -> None:
        """Give ``job`` (and the lock held for it) to the output's thread."""
        with self._cond:
            self._handed = job
            self._start()
            self._cond.notify_all()

    def _queue(self, job: _Job) -> None:
        with self._cond:
            if self.stopped:
                return
            if len(self._jobs) >= _JOBS:  # a server that reads nothing while it keeps asking: a bound
                logger.warning("dropped a message to the server: %d wait for it to read", len(self._jobs))
                return
            self._jobs.append(job)
            self._start()
            self._cond.notify_all()

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():  # (it ends once stopped with nothing handed)
            self._thread = threading.Thread(target=self._finish, name="rpcwire-client-writer", daemon=True)
            self._thread.start()

    def _wait(self, job: _Job, deadline: float) -> bool:
        """As ``send`` for a job given to the output's thread."""
        with self._cond:
            try:
                while job.state != _DONE:
                    left = _left(deadline)
                    if left == 0:
                        if job.state == _QUEUED:
                            job.withdrawn = True
                            raise TimeoutError("not sent: the output stayed busy until the deadline")
                        return False
                    self._cond.wait(left)
            except BaseException:
                if job.state == _QUEUED:
                    job.withdrawn = True
                raise
        if job.error is not None:
            raise job.error
        return True

    def _finish(self) -> None:
        """The output's thread: the jobs handed to it, then the queued ones, each under the lock."""
        while True:
            with self._cond:
                while True:
                    if self._handed is not None:
                        job, self._handed = self._handed, None
                        break
                    if self.stopped:
                        return
                    if self._jobs and self._lock.acquire(blocking=False):
                        job = self._jobs.popleft()
                        break
                    self._cond.wait()
                if job.withdrawn:
                    self._release()
                    continue
                job.state = _STARTED
            try:
                if self.stopped:
                    raise BrokenPipeError("the client stopped writing")
                if job.on_start is not None:
                    job.on_start()
                if self._fd is not None:
                    self._write_fd(memoryview(job.data), None, [0])
                else:
                    self._transport._write_line(job.data)
            except Exception as exc:
                job.error = exc
                logger.debug("writing to the server failed: %r", exc)
            finally:
                with self._cond:
                    job.state = _DONE
                self._release()

    def stop(self) -> None:
        """End every write now (what is queued is dropped); the caller then signals ``stop_fd``."""
        with self._cond:
            self.stopped = True
            self._jobs.clear()
            self._cond.notify_all()

    def join(self, timeout: float) -> bool:
        """Whether the output's thread (if any) ended within ``timeout``."""
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    @contextlib.contextmanager
    def exclusive(self, timeout: float) -> Iterator[bool]:
        """Hold the output (once stopped: no write is under way, and none will start after), so that ``close``
        can close the pipe; ``False`` if it stayed busy for ``timeout`` seconds."""
        taken = self._lock.acquire(timeout=timeout)
        try:
            yield taken
        finally:
            if taken:
                self._release()


class _Waiter:
    """One sync call waiting for its answer. ``lock`` is held until the waiter is *signalled* (released
    once, under the client's ``_signals`` lock): when ``response`` is set, or when it is asked to ``lead``
    (to read for every caller; see :class:`Client`)."""

    __slots__ = ("lead", "lock", "response", "signalled")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        self.response: Response | ConnectionClosed | None = None
        self.lead = False
        self.signalled = False


class Client(_Peer):
    """A JSON-RPC client over a transport's stream pair: ``Client(StdioTransport(server_out, server_in))``,
    or :meth:`spawn` for a subprocess. Thread-safe: calls from many threads are pipelined on the one
    connection, each answered as soon as its answer arrives.

    Who reads: over a spawned server's pipe (with the native core), the calling threads themselves, one
    at a time (leader/follower): a caller that finds nobody reading reads for everyone until its own answer
    arrives, then hands the reading to a caller still waiting. A lone caller so reads its own answer, with
    no thread switch. When the last caller leaves, a thread of the client's takes the reading over once
    nobody has read for 5 ms, and blocks on the pipe until something comes or a caller needs it (so that
    notifications and the server's end are seen while nobody calls; an idle client never wakes on a
    timer). Over any other stream (which cannot be waited on with a timeout), a thread of the client's
    reads all the time. A thread of the client's waits for a spawned server's exit: when it ends, what it
    left in its pipe is read and every call fails with :class:`ConnectionClosed`, even while a child of
    the server still holds the pipe open.
    """

    def __init__(
        self,
        transport: Any,
        *,
        handler: Callable[[str, Any], Any] | None = None,
        dialect: str = "mcp",
        timeout: float | None = None,
        _process: subprocess.Popen[bytes] | None = None,
        _stderr_tail: _StderrTail | None = None,
        _halt: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(handler, dialect, timeout)
        self._transport = transport
        self._process = _process
        self._stderr_tail = _stderr_tail
        limits = getattr(transport, "_limits", None)
        self._limits: tuple[int, int, int | None] = (
            limits if limits is not None else (DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_DEPTH, DEFAULT_MAX_BATCH)
        )
        self._max_depth = self._limits[1]
        self._dispatcher = _Dispatcher()
        self._handlers = _HandlerPool(self._answer_request)
        self._exited = False
        # The client's own pipes: _halt (readers stop: the client closed, or the server ended), _stop
        # (writers stop), _wake (the idle reader gives way to a caller). Written under _pipes_lock, closed once.
        self._pipes_lock = threading.Lock()
        self._pipes: dict[str, tuple[int, int]] = {}
        out_fd = None
        if _process is not None:
            assert _process.stdin is not None
            self._pipes["halt"] = _halt or os.pipe()
            self._pipes["stop"] = os.pipe()
            out_fd = _process.stdin.fileno()
            os.set_blocking(out_fd, False)
        self._output = _Output(transport, out_fd, self._pipes["stop"][0] if "stop" in self._pipes else None)
        self._signals = threading.Lock()  # guards each waiter's signalled flag, and _sleepers
        self._sleepers: dict[int, _Waiter] = {}  # followers blocked on their waiter (by id), to hand reading to
        self._start_threads()

    def _start_threads(self) -> None:
        """The reader (the idle reader over a pipe it can wait on, else one that reads all the time), and
        for a spawned server the stderr reader and the exit watcher."""
        _process, _stderr_tail = self._process, self._stderr_tail
        self._fd = _pollable_fd(self._transport, _process.stdout) if _process is not None else None
        if self._fd is None:
            self._reader = threading.Thread(target=self._read_all, name="rpcwire-client-reader", daemon=True)
        else:
            self._read_lock = threading.Lock()  # held by the one thread reading
            self._last_read = time.monotonic()
            self._idle_reading = False
            self._idle = threading.Condition()  # the idle reader's turn (_idle_turn) and its parking
            self._idle_turn = True
            self._idle_parked = False
            self._pipes["wake"] = os.pipe()
            for fd in self._pipes["wake"]:
                os.set_blocking(fd, False)
            self._poller = select.poll()  # a caller's, while it reads (one at a time: _read_lock)
            self._idle_poller = select.poll()  # the idle reader's
            for poller in (self._poller, self._idle_poller):
                poller.register(self._fd, select.POLLIN)
                poller.register(self._pipes["halt"][0], select.POLLIN)
            self._idle_poller.register(self._pipes["wake"][0], select.POLLIN)
            self._reader = threading.Thread(target=self._read_when_idle, name="rpcwire-client-reader", daemon=True)
        self._reader.start()
        self._threads = [self._reader]
        if _process is not None:
            if _stderr_tail is not None and _process.stderr is not None:
                drain = threading.Thread(
                    target=_stderr_tail.drain_fd,
                    args=(_process.stderr.fileno(), self._pipes["halt"][0]),
                    name="rpcwire-client-stderr",
                    daemon=True,
                )
                drain.start()
                self._threads.append(drain)
            watcher = threading.Thread(target=self._watch_exit, name="rpcwire-client-exit", daemon=True)
            watcher.start()
            self._threads.append(watcher)

    @classmethod
    def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
        handler: Callable[[str, Any], Any] | None = None,
        dialect: str = "mcp",
        timeout: float | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_batch: int | None = DEFAULT_MAX_BATCH,
        framing: Framing = "newline",
    ) -> Client:
        """Start ``argv`` and talk to it over its stdin and stdout; its stderr is read by a thread of the
        client's (its last lines go into :class:`ConnectionClosed`, each line to the ``rpcwire.client``
        logger at DEBUG). ``max_message_bytes``, ``max_depth`` and ``max_batch`` are the transport's (what
        the client reads, and what it checks its own messages against before it sends them);
        ``framing="content-length"`` speaks LSP's base protocol."""
        _check_dialect(dialect)
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            bufsize=_PIPE_BUFFER,
        )
        assert process.stdin is not None and process.stdout is not None
        halt = os.pipe()
        try:
            stdout: Any = process.stdout
            if not hasattr(cls._core.StdioTransport, "_has_buffered_message"):
                # A core that reads by blocking in the stream: a pipe reader that ends when the client halts.
                os.set_blocking(process.stdout.fileno(), False)
                stdout = io.BufferedReader(_PipeReader(process.stdout.fileno(), halt[0]), 1 << 16)
            transport = cls._core.StdioTransport(
                stdout,
                process.stdin,
                max_message_bytes=max_message_bytes,
                max_depth=max_depth,
                max_batch=max_batch,
                framing=framing,
            )
            return cls(
                transport,
                handler=handler,
                dialect=dialect,
                timeout=timeout,
                _process=process,
                _stderr_tail=_StderrTail(),
                _halt=halt,
            )
        except BaseException:
            process.kill()
            process.wait()
            for stream in (process.stdin, process.stdout, process.stderr):
                _close_quietly(stream)
            for fd in halt:
                os.close(fd)
            raise

    # --- calls -----------------------------------------------------------------------------------

    def call(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        """Call ``method`` and return its result; a JSON-RPC error is raised (``MethodNotFound``,
        ``InvalidParams``, ``RequestCancelled`` or ``JsonRpcError`` with the server's ``code``, ``message``
        and ``data``). ``timeout`` seconds (default: the client's) bound the whole call, its writing
        included: then ``TimeoutError`` is raised and, if the request was sent (or began to be), the server
        is told to cancel (in the client's ``dialect``); a late answer is dropped. A request that the
        client's own limits refuse raises ``ValueError`` and is not sent."""
        if self._closed is not None:
            raise self._closed
        timeout = self._timeout if timeout is None else timeout
        deadline = _deadline(timeout)
        id_, line = self._request_line(method, params, on_progress)
        waiter = _Waiter()
        self._pending[id_] = waiter
        sent: list[_Sent] = []
        try:
            _check_outgoing(line, self._limits)
            answered = self._send(line, deadline, [id_], sent) and self._wait(waiter, id_, deadline)
        except TimeoutError as exc:  # nothing was sent
            self._abandon([id_], sent, "timeout")
            raise TimeoutError(f"no answer to {method!r} (id {id_}) within {timeout} s ({exc})") from None
        except BaseException:
            self._abandon([id_], sent, "interrupted")
            raise
        if not answered:
            self._abandon([id_], sent, "timeout")
            raise TimeoutError(f"no answer to {method!r} (id {id_}) within {timeout} s")
        if on_progress is not None:
            self._dispatcher.wait_for_progress(id_, deadline)
        response = waiter.response
        if isinstance(response, ConnectionClosed):
            raise response
        assert response is not None
        return _outcome(response)

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no answer); bounded by the client's ``timeout`` (``TimeoutError`` if none of
        it could be written by then); ``ValueError`` (not sent) beyond the client's limits."""
        if self._closed is not None:
            raise self._closed
        line = self._core._encode_request(method, params)
        _check_outgoing(line, self._limits)
        self._send(line, _deadline(self._timeout), [], [])

    def batch(self, calls: Iterable[tuple[str, Any]], *, timeout: float | None = None) -> list[Any]:
        """Send ``(method, params)`` calls as one batch; their results, or the exception each raised, in
        order. ``timeout`` bounds the whole batch (an entry without an answer by then is a ``TimeoutError``);
        a batch over the client's limits (``max_batch`` calls, ``max_message_bytes``, ``max_depth``) raises
        ``ValueError`` and is not sent."""
        if self._closed is not None:
            raise self._closed
        timeout = self._timeout if timeout is None else timeout
        deadline = _deadline(timeout)
        ids, line = self._batch_lines(calls)
        if not ids:
            return []
        waiters = [_Waiter() for _ in ids]
        self._pending.update(zip(ids, waiters, strict=True))
        sent: list[_Sent] = []
        outcomes: list[Any] = []
        late: list[int] = []
        try:
            _check_outgoing(line, self._limits, len(ids))
            whole = self._send(line, deadline, ids, sent)
            for id_, waiter in zip(ids, waiters, strict=True):
                if not whole or not self._wait(waiter, id_, deadline):
                    late.append(id_)
                    outcomes.append(TimeoutError(f"no answer to batch entry {id_} within {timeout} s"))
                    continue
                assert waiter.response is not None
                outcomes.append(_batch_outcome(waiter.response))
        except TimeoutError as exc:  # nothing was sent
            self._abandon(ids, sent, "timeout")
            raise TimeoutError(f"no answer to the batch (ids {ids[0]}-{ids[-1]}) within {timeout} s ({exc})") from None
        except BaseException:  # an interrupt (or a limit, or the server gone): nothing of it stays pending
            self._abandon(ids, sent, "interrupted")
            raise
        if late:
            self._abandon(late, sent, "timeout")
        return outcomes

    def _send(self, line: bytes, deadline: float | None, ids: Sequence[int], sent: list[_Sent]) -> bool:
        """Write one message (as ``_Output.send``); ``sent`` gets its place in the ledger (``ids``: the calls
        it makes) once it begins. When the server is gone, ``ConnectionClosed``."""
        if self._closed is not None:
            raise self._closed
        try:
            return self._output.send(line, deadline, self._on_start(line, ids, sent))
        except TimeoutError:
            if sent:
                self._ledger.withdrawn(sent.pop())
            raise
        except (OSError, ValueError) as exc:  # ValueError: a closed file
            logger.debug("writing to the server failed: %r", exc)
            self._close_with(self._connection_closed(f"the server's input is closed ({exc})"))
            assert self._closed is not None
            raise self._closed from None

    def _send_cancel(self, line: bytes) -> None:
        """Without waiting: in the background if the output is busy."""
        self._output.send_soon(line, self._on_start(line, [], []))

    # --- waiting, and reading ----------------------------------------------------------------------

    def _wait(self, waiter: _Waiter, id_: int, deadline: float | None) -> bool:
        """Until ``waiter`` has its response (``True``) or ``deadline`` passed (``False``: the call is no
        longer pending, and any reading handed to it was handed on). An exception (an interrupt) leaves
        nothing of the waiter behind either."""
        try:
            return self._wait_for(waiter, id_, deadline)
        except BaseException:
            if self._fd is not None:
                with self._signals:
                    self._sleepers.pop(id(waiter), None)
                    handed, waiter.lead = waiter.lead, False
                if handed:
                    self._after_reading()
            raise

    def _wait_for(self, waiter: _Waiter, id_: int, deadline: float | None) -> bool:
        while waiter.response is None:
            if self._fd is not None and self._read_lock.acquire(blocking=False):
                try:
                    self._lead(waiter, deadline)
                finally:
                    self._release_read()
                if waiter.response is None and self._pending.pop(id_, None) is not None:
                    return False
                continue
            if self._fd is not None:
                with self._signals:
                    self._sleepers[id(waiter)] = waiter
                # Registered first, then looked: a reader that stops after this look hands on to a sleeper.
                if not self._read_lock.locked():
                    self._unsleep(waiter)
                    continue
                if self._idle_reading:
                    self._wake_idle_reader()
            left = _left(deadline)
            woken = waiter.lock.acquire(timeout=-1 if left is None else left)
            if self._fd is not None:
                with self._signals:
                    self._sleepers.pop(id(waiter), None)
            if woken:
                with self._signals:
                    waiter.signalled = False  # the lock is held again: the waiter can be signalled again
                waiter.lead = False  # asked to read (or answered): either way, look again
                continue
            if self._pending.pop(id_, None) is not None:  # timed out, and no answer is being delivered
                with self._signals:
                    handed, waiter.lead = waiter.lead, False
                if handed:
                    self._after_reading()
                return False
            waiter.lock.acquire()  # the answer is being delivered: its signal is on the way
            with self._signals:
                waiter.signalled = False
        return True

    def _unsleep(self, waiter: _Waiter) -> None:
        with self._signals:
            self._sleepers.pop(id(waiter), None)
            if waiter.signalled:  # handed the reading meanwhile: re-arm (the lock is free)
                waiter.lock.acquire()
                waiter.signalled = False
                waiter.lead = False

    def _signal(self, waiter: _Waiter) -> None:
        with self._signals:
            if not waiter.signalled:
                waiter.signalled = True
                waiter.lock.release()

    def _lead(self, waiter: _Waiter | None, deadline: float | None) -> None:
        """Read for everyone until ``waiter`` has its response (``None``: until a caller needs the reading,
        the idle reader) or ``deadline`` passed, or the client closed or the server ended. Waits with
        ``poll`` on the pipe and the client's halt pipe, and reads only what has come, a read at a time,
        until a whole message is here: half a message never holds a reader past its time."""
        transport = self._transport
        poller = self._poller if waiter is not None else self._idle_poller
        fd, wake = self._fd, self._pipes.get("wake", (-1, -1))[0]
        while waiter is None or waiter.response is None:
            if self._closed is not None:
                return
            if self._exited:
                self._read_remains()
                return
            try:
                if not transport._has_buffered_message():
                    timeout = _poll_ms(deadline)
                    if timeout == 0:
                        return
                    events = poller.poll(timeout)
                    if not events:
                        return
                    readable = False
                    for ready, _ in events:
                        if ready == wake:
                            _drain_pipe(wake)
                            if waiter is None:
                                return
                        elif ready == fd:
                            readable = True
                    if readable:
                        transport._read_available()
                    continue
                message = transport._read_incoming()
            except Exception as exc:  # a stream that fails: the connection is as good as closed
                self._close_with(self._connection_closed(f"reading from the server failed: {exc!r}"))
                return
            self._last_read = time.monotonic()
            if message is None:
                self._close_with(self._connection_closed("the server closed its output"))
                return
            self._deliver(message)

    def _read_remains(self) -> None:
        """The server ended: deliver what it left in its pipe (for at most ``_REMAINS_S`` and about
        ``_REMAINS_BYTES``: a child of its may hold the pipe open and write on), then fail every call with
        ``ConnectionClosed``."""
        transport = self._transport
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        until = time.monotonic() + _REMAINS_S
        reads_left = _REMAINS_BYTES // _NATIVE_READ  # each read takes at most one of the core's reads
        try:
            while self._closed is None and time.monotonic() < until:
                if not transport._has_buffered_message():
                    if not poller.poll(0) or reads_left == 0:
                        break
                    transport._read_available()
                    reads_left -= 1
                    continue
                message = transport._read_incoming()
                if message is None:
                    break
                self._deliver(message)
        except Exception as exc:
            logger.debug("reading what the server left failed: %r", exc)
        self._close_with(self._connection_closed("the server process ended"))

    def _release_read(self) -> None:
        self._read_lock.release()
        self._after_reading()

    def _after_reading(self) -> None:
        """Nobody reads now: hand the reading to a caller still waiting, else to the idle reader."""
        if self._hand_on():
            return
        with self._idle:
            self._idle_turn = True
            if self._idle_parked:
                self._idle.notify()

    def _hand_on(self) -> bool:
        """Ask one waiting caller to read; ``False`` if none waits."""
        with self._signals:
            for waiter in self._sleepers.values():
                if not waiter.signalled:
                    waiter.lead = True
                    waiter.signalled = True
                    waiter.lock.release()
                    return True
        return False

    def _wake_idle_reader(self) -> None:
        self._poke("wake")

    def _poke(self, name: str) -> None:
        """Write a byte into one of the client's pipes (``halt`` and ``stop`` stay readable for good)."""
        with self._pipes_lock:
            pipe = self._pipes.get(name)
            if pipe is not None:
                with contextlib.suppress(BlockingIOError):
                    os.write(pipe[1], b"!")

    def _read_when_idle(self) -> None:
        """The client's own reader (over a pipe it can wait on). Parked (blocked, no timer) while a caller
        reads; when the last one leaves, it reads once nobody has read for ``_IDLE_S``, blocking on the pipe
        until something comes or a caller needs the reading."""
        idle = self._idle
        while True:
            with idle:
                while self._closed is None and not self._idle_turn:
                    self._idle_parked = True
                    idle.wait()
                self._idle_parked = False
                self._idle_turn = False
                while self._closed is None and (quiet := time.monotonic() - self._last_read) < _IDLE_S:
                    idle.wait(_IDLE_S - quiet)
            if self._closed is not None:
                return
            if not self._read_lock.acquire(blocking=False):
                continue  # a caller reads: it gives the turn back when it leaves
            self._idle_reading = True
            try:
                self._lead(None, None)
            except Exception as exc:  # a delivery that fails: the client cannot go on
                logger.exception("the client's reader stopped")
                self._close_with(self._connection_closed(f"reading from the server failed: {exc!r}"))
            finally:
                self._idle_reading = False
                self._release_read()

    def _watch_exit(self) -> None:
        """A spawned server's exit: writers stop, readers read what it left and fail every call."""
        assert self._process is not None
        with contextlib.suppress(Exception):
            self._process.wait()
        self._exited = True
        self._output.stop()
        self._poke("stop")
        self._poke("halt")
        if self._fd is not None and self._read_lock.acquire(blocking=False):
            try:
                if self._closed is None:
                    self._read_remains()
            finally:
                self._release_read()

    # --- the reading thread ----------------------------------------------------------------------

    def _read_all(self) -> None:
        cause = "the server closed its output"
        try:
            while (message := self._transport._read_incoming()) is not None:
                self._deliver(message)
        except Exception as exc:  # a stream that fails: the connection is as good as closed
            cause = f"reading from the server failed: {exc!r}"
            logger.debug("%s", cause)
        if self._exited:
            cause = "the server process ended"
        self._close_with(self._connection_closed(cause))

    def _resolve(self, waiter: _Waiter, response: Response | ConnectionClosed) -> None:
        waiter.response = response
        self._signal(waiter)

    def _run_later(self, callback: Callable[..., Any], args: tuple[Any, ...], call: int | None) -> None:
        self._dispatcher.add(callback, args, call)

    def _serve_request(self, request: Request) -> None:
        if not self._handlers.submit(request):
            logger.warning("refused a request of the server's (%r): the client is busy", request.method)
            answer = _answer.failure_answer(self._transport, request, None, _busy(request))
            if answer is not None:
                self._output.send_soon(answer, self._on_start(answer, [], []))

    def _answer_request(self, request: Request) -> None:
        answer = self._answer(self._transport, request)
        if answer is not None:
            with contextlib.suppress(ConnectionClosed, TimeoutError):
                self._send(answer, _deadline(self._timeout), [], [])

    def _connection_closed(self, cause: str) -> ConnectionClosed:
        returncode = None
        if self._process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                returncode = self._process.wait(timeout=0.5)
        if returncode is not None and self._stderr_tail is not None:
            self._stderr_tail.drained.wait(0.5)  # its last lines, written as it exited
        return _closed_error(cause, returncode, self._stderr_tail)

    # --- closing ---------------------------------------------------------------------------------

    def close(self, grace: float = 5.0) -> None:
        """Close the connection; for a spawned server: close its stdin, wait up to ``grace`` seconds for it
        to exit, then terminate it (and kill it after ``grace`` more). Calls still waiting fail with
        :class:`ConnectionClosed`; callbacks already queued run first (for at most ``grace`` seconds). Returns
        within that, plus a bounded wait for the client's threads, even while a child of the server holds
        its pipes open."""
        process = self._process
        if process is not None:
            self._output.stop()
            self._poke("stop")
            with self._output.exclusive(_CLOSE_JOIN_S) as idle:
                if idle:  # no write is under way, and none will start: the pipe can go
                    _close_quietly(process.stdin)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                process.terminate()
                try:
                    process.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self._output.stop()
        self._close_with(ConnectionClosed("the client was closed"))
        self._poke("halt")
        if self._fd is not None:
            self._wake_idle_reader()
            with self._idle:
                self._idle.notify_all()
        self._dispatcher.stop(grace)
        if process is None:
            return
        ended = True
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(_CLOSE_JOIN_S)
                ended = ended and not thread.is_alive()
        ended = self._output.join(_CLOSE_JOIN_S) and ended
        if ended:  # nothing of the client's uses its descriptors any more
            _close_quietly(process.stdout)
            _close_quietly(process.stderr)
            with self._pipes_lock:
                pipes, self._pipes = self._pipes, {}
            for pipe in pipes.values():
                for fd in pipe:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._fd = None

    @property
    def returncode(self) -> int | None:
        """A spawned server's exit code, once it exited (else ``None``)."""
        return None if self._process is None else self._process.poll()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


def _pollable_fd(transport: Any, stream: Any) -> int | None:
    """The descriptor under ``stream`` (the transport's input) that a reader can wait on with ``poll``,
    when the core can say whether a message is already buffered. The native core's reads leave nothing in
    the stream's own buffer (each asks for more than that buffer holds, which ``readinto1`` reads past
    it), so whatever it has not buffered itself is still behind the descriptor."""
    if not hasattr(transport, "_has_buffered_message") or not isinstance(stream, io.BufferedReader):
        return None
    return stream.fileno()


def _drain_pipe(fd: int) -> None:
    with contextlib.suppress(BlockingIOError, OSError):
        while os.read(fd, 4096):
            pass


def _close_quietly(stream: Any) -> None:
    if stream is not None:
        with contextlib.suppress(OSError, ValueError):
            stream.close()


class _PipeReader(io.RawIOBase):
    """A spawned server's stdout (its descriptor ``fd``, non-blocking) for a core that reads by blocking in
    the stream (``rpcwire.pure``): ``readinto`` waits on the pipe and on the client's halt pipe; once halted
    (the client closed, or the server ended) it reads what is there, at most ``_REMAINS_BYTES``, then
    reports the end of input, even while a child of the server still holds the pipe open."""

    def __init__(self, fd: int, halt_fd: int) -> None:
        super().__init__()
        self._fd = fd
        self._halt_fd = halt_fd
        self._poller = select.poll()
        self._poller.register(fd, select.POLLIN)
        self._poller.register(halt_fd, select.POLLIN)
        self._left: int | None = None  # once halted: how much more may be read

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def readinto(self, buffer: Any) -> int:
        while self._left != 0:
            try:
                data = os.read(self._fd, len(buffer) if self._left is None else min(len(buffer), self._left))
            except BlockingIOError:
                if self._left is not None:
                    return 0
                if any(fd == self._halt_fd for fd, _ in self._poller.poll()):
                    self._left = _REMAINS_BYTES
                continue
            if self._left is not None:
                self._left -= len(data)
            buffer[: len(data)] = data
            return len(data)
        return 0


class _StderrTail(collections.deque[str]):
    """The last lines of a spawned server's stderr, read to its end by a thread (or task) of the client's so
    that the pipe never fills; ``drained`` is set at its end."""

    def __init__(self) -> None:
        super().__init__(maxlen=_STDERR_TAIL)
        self.drained: threading.Event = threading.Event()

    def add(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        self.append(line)
        logger.debug("server stderr: %s", line)

    def feed(self, partial: bytes, chunk: bytes) -> bytes:
        """Add the lines ``partial + chunk`` ends; what is left of a line (kept at most ``_STDERR_LINE``)."""
        *lines, rest = (partial + chunk).split(b"\n")
        for line in lines:
            self.add(line)
        if len(rest) > _STDERR_LINE:
            self.add(rest[:_STDERR_LINE])
            return b""
        return rest

    def drain_fd(self, fd: int, halt_fd: int) -> None:
        """Read stderr (``fd``) to its end, or, once the client halts, what is there (a child of the server
        may hold the pipe open)."""
        partial = b""
        left: int | None = None
        try:
            os.set_blocking(fd, False)
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            poller.register(halt_fd, select.POLLIN)
            while left is None or left > 0:
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:
                    if left is not None:
                        break
                    if any(ready == halt_fd for ready, _ in poller.poll()):
                        left = _REMAINS_BYTES
                    continue
                if not chunk:
                    break
                if left is not None:
                    left -= len(chunk)
                partial = self.feed(partial, chunk)
        except (OSError, ValueError):
            pass
        finally:
            if partial:
                self.add(partial)
            self.drained.set()

    async def drain_async(self, stderr: asyncio.StreamReader) -> None:
        partial = b""
        try:
            with contextlib.suppress(Exception):
                while chunk := await stderr.read(1 << 16):
                    partial = self.feed(partial, chunk)
        finally:
            if partial:
                self.add(partial)
            self.drained.set()


# --- asyncio ------------------------------------------------------------------------------------


def _frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


def _checked_limits(
    core: ModuleType, max_message_bytes: int, max_depth: int, max_batch: int | None, framing: Framing
) -> tuple[int, int, int | None]:
    """The limits (and framing) checked by the core's own ``StdioTransport``, so with its very errors."""
    return core.StdioTransport(
        io.BytesIO(),
        io.BytesIO(),
        max_message_bytes=max_message_bytes,
        max_depth=max_depth,
        max_batch=max_batch,
        framing=framing,
    )._limits


class AsyncClient(_Peer):
    """The asyncio client: ``AsyncClient(reader, writer)`` over asyncio streams, or :meth:`spawn`. Calls
    are coroutines; any number may be in flight at once. ``max_message_bytes``, ``max_depth``, ``max_batch``
    and ``framing`` are those of ``StdioTransport`` (checked alike, with the same errors): what the client
    reads (lines as the core reads them; frames through the core's own tolerant frame decoder), and what it
    checks its messages against before it sends them."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        handler: Callable[[str, Any], Any] | None = None,
        dialect: str = "mcp",
        timeout: float | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_batch: int | None = DEFAULT_MAX_BATCH,
        framing: Framing = "newline",
        _process: asyncio.subprocess.Process | None = None,
        _exited: asyncio.Future[None] | None = None,
        _stderr_tail: _StderrTail | None = None,
    ) -> None:
        super().__init__(handler, dialect, timeout)
        self._exited = _exited
        self._limits = _checked_limits(self._core, max_message_bytes, max_depth, max_batch, framing)
        self._max_depth = self._limits[1]
        self._content_length = framing == "content-length"
        self._stream_reader = reader
        self._writer = writer
        self._process = _process
        self._stderr_tail = _stderr_tail
        self._stderr_task: asyncio.Task[None] | None = None
        self._loop = asyncio.get_running_loop()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._callbacks = _Callbacks()
        self._dispatching: asyncio.Task[None] | None = None
        self._callback_done = asyncio.Event()  # set (and replaced) as each callback ends
        self._handler_slots = asyncio.Semaphore(_HANDLERS)
        self._serving = 0  # the server's requests handled or waiting for a slot
        self._draining: asyncio.Task[None] | None = None
        self._reading = self._loop.create_task(self._read_all())
        if _exited is not None:
            self._keep(self._loop.create_task(self._watch_exit()))

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
        handler: Callable[[str, Any], Any] | None = None,
        dialect: str = "mcp",
        timeout: float | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_batch: int | None = DEFAULT_MAX_BATCH,
        framing: Framing = "newline",
    ) -> AsyncClient:
        """Start ``argv`` and talk to it over its stdin and stdout (see :meth:`Client.spawn`)."""
        _check_dialect(dialect)
        _checked_limits(cls._core, max_message_bytes, max_depth, max_batch, framing)
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.subprocess_exec(
            lambda: _ProcessProtocol(loop),
            *argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
        )
        process = asyncio.subprocess.Process(transport, protocol, loop)  # what create_subprocess_exec makes
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        tail = _StderrTail()
        client = cls(
            process.stdout,
            process.stdin,
            handler=handler,
            dialect=dialect,
            timeout=timeout,
            max_message_bytes=max_message_bytes,
            max_depth=max_depth,
            max_batch=max_batch,
            framing=framing,
            _process=process,
            _exited=protocol.exited,
            _stderr_tail=tail,
        )
        client._stderr_task = loop.create_task(tail.drain_async(process.stderr))
        client._keep(client._stderr_task)
        return client

    def _keep(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def call(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        """As :meth:`Client.call`, awaited: ``timeout`` bounds the whole call, waiting to write included.
        Cancelling the awaiting task cancels the call on the server too."""
        if self._closed is not None:
            raise self._closed
        timeout = self._timeout if timeout is None else timeout
        deadline = _deadline(timeout)
        id_, line = self._request_line(method, params, on_progress)
        future: asyncio.Future[Response | ConnectionClosed] = self._loop.create_future()
        self._pending[id_] = future
        sent: list[_Sent] = []
        try:
            _check_outgoing(line, self._limits)
            await self._send(line, deadline, [id_], sent)
            response = await asyncio.wait_for(future, _left(deadline))
        except BaseException as exc:
            timed_out = isinstance(exc, (asyncio.TimeoutError, TimeoutError))
            self._abandon([id_], sent, "timeout" if timed_out else "cancelled")
            if timed_out:
                detail = f" ({exc})" if str(exc) else ""
                raise TimeoutError(f"no answer to {method!r} (id {id_}) within {timeout} s{detail}") from None
            raise
        if on_progress is not None:
            await self._progress_reported(id_, deadline)
        if isinstance(response, ConnectionClosed):
            raise response
        return _outcome(response)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no answer); as :meth:`Client.notify`."""
        if self._closed is not None:
            raise self._closed
        line = self._core._encode_request(method, params)
        _check_outgoing(line, self._limits)
        await self._send(line, _deadline(self._timeout), [], [])

    async def batch(self, calls: Iterable[tuple[str, Any]], *, timeout: float | None = None) -> list[Any]:
        """As :meth:`Client.batch`, awaited."""
        if self._closed is not None:
            raise self._closed
        timeout = self._timeout if timeout is None else timeout
        deadline = _deadline(timeout)
        ids, line = self._batch_lines(calls)
        if not ids:
            return []
        futures = [self._loop.create_future() for _ in ids]
        self._pending.update(zip(ids, futures, strict=True))
        sent: list[_Sent] = []
        try:
            _check_outgoing(line, self._limits, len(ids))
            await self._send(line, deadline, ids, sent)
            await asyncio.wait(futures, timeout=_left(deadline))
        except BaseException as exc:  # cancelled (or not sent): so are the entries still running
            timed_out = isinstance(exc, (asyncio.TimeoutError, TimeoutError))
            self._abandon(ids, sent, "timeout" if timed_out else "cancelled")
            if timed_out:
                raise TimeoutError(f"no answer to the batch within {timeout} s ({exc})") from None
            raise
        outcomes: list[Any] = []
        late: list[int] = []
        for id_, future in zip(ids, futures, strict=True):
            if not future.done():
                late.append(id_)
                outcomes.append(TimeoutError(f"no answer to batch entry {id_} within {timeout} s"))
                continue
            outcomes.append(_batch_outcome(future.result()))
        if late:
            self._abandon(late, sent, "timeout")
        return outcomes

    async def _send(self, line: bytes, deadline: float | None, ids: Sequence[int], sent: list[_Sent]) -> None:
        """Hand one message to the stream, once its buffer holds less than ``_WRITE_BUFFER`` (waiting for
        that until ``deadline``: ``TimeoutError``, nothing sent); ``ids``: the calls it makes."""
        if self._closed is not None:
            raise self._closed
        try:
            if self._writer.transport.get_write_buffer_size() > _WRITE_BUFFER:
                await self._drained(deadline)
            self._put(line, ids, sent)
        except (ConnectionError, RuntimeError) as exc:  # RuntimeError: a closed transport
            self._close_with(await self._connection_closed(f"the server's input is closed ({exc})"))
            assert self._closed is not None
            raise self._closed from None

    async def _drained(self, deadline: float | None) -> None:
        """Until the stream's buffer drained (one ``drain`` shared by every waiter), or ``TimeoutError``."""
        if self._draining is None or self._draining.done():
            self._draining = self._loop.create_task(self._writer.drain())
            self._draining.add_done_callback(lambda task: task.cancelled() or task.exception())
        try:
            await asyncio.wait_for(asyncio.shield(self._draining), _left(deadline))
        except asyncio.TimeoutError:
            raise TimeoutError("not sent: the server read nothing until the deadline") from None

    def _send_cancel(self, line: bytes) -> None:
        """Into the stream's buffer: it never waits."""
        with contextlib.suppress(Exception):
            self._put(line, [], [])

    def _put(self, line: bytes, ids: Sequence[int], sent: list[_Sent]) -> None:
        """Hand one message to the stream's buffer (never waits), after its place in the ledger."""
        self._on_start(line, ids, sent)()
        self._writer.write(_frame(line) if self._content_length else line + b"\n")

    # --- reading ---------------------------------------------------------------------------------

    async def _read_all(self) -> None:
        cause = "the server closed its output"
        try:
            await (self._read_frames() if self._content_length else self._read_lines())
        except Exception as exc:  # a stream that fails, or a delivery that does: the client cannot go on
            cause = f"reading from the server failed: {exc!r}"
            logger.exception("the client's reader stopped")
        self._close_with(await self._connection_closed(cause))

    def _deliver_text(self, data: bytes) -> None:
        message = self._core._parse_incoming(data, self._max_depth)
        self._deliver((message, data) if isinstance(message, str) else message)

    async def _read_lines(self) -> None:
        """Read chunks as they come and deliver every whole line in them: one wake-up of this task per
        chunk, not per line (``readline``), which is what many answers in flight at once cost. The core's
        rules: a line ends at ``\\n``, a ``\\r`` before it is not counted, blank lines are skipped, and a
        line over ``max_message_bytes`` is dropped as it arrives (logged)."""
        limit = self._limits[0]
        parts: list[bytes] = []  # the line begun and not ended yet
        size = 0
        skipping = False  # inside a line over max_message_bytes: dropped up to its end
        while chunk := await self._stream_reader.read(1 << 16):
            if b"\n" not in chunk:
                size += len(chunk)
                if size > limit + 1 and not skipping:  # + 1: room for a "\r" before its "\n"
                    skipping, parts = True, []
                if not skipping:
                    parts.append(chunk)
                continue
            lines = chunk.split(b"\n")
            if skipping:
                logger.warning("dropped a message from the server: a line longer than max_message_bytes (%d)", limit)
                lines[0], skipping = b"", False
            elif parts:
                lines[0] = b"".join([*parts, lines[0]])
            tail = lines.pop()
            parts, size = ([tail], len(tail)) if tail else ([], 0)
            for whole in lines:
                line = whole.removesuffix(b"\r")
                if len(line) > limit:
                    logger.warning(
                        "dropped a message from the server: a line longer than max_message_bytes (%d)", limit
                    )
                elif line.strip(b" \t\r"):
                    self._deliver_text(line)
        if parts and not skipping:  # the last line, without its "\n"
            line = b"".join(parts)
            if line.strip(b" \t\r") and len(line.removesuffix(b"\r")) <= limit:
                self._deliver_text(line.removesuffix(b"\r"))

    async def _read_frames(self) -> None:
        """``framing="content-length"``: the frames of the stream through the core's tolerant frame decoder
        (``rpcwire.pure``'s, fed as chunks come: the rules of "Content-Length framing", resync included)."""
        from rpcwire import pure  # noqa: PLC0415  # pure imports this module

        limit = self._limits[0]
        frames = pure._Frames(None, limit)
        while True:
            chunk = await self._stream_reader.read(1 << 16)
            frames.feed(chunk)
            while (frame := frames.pop()) is not None:
                if isinstance(frame, (bytes, bytearray)):
                    self._deliver_text(bytes(frame))
                else:
                    logger.warning("dropped a message from the server: %s", frame.reason(limit))
            if not chunk:
                return

    async def _watch_exit(self) -> None:
        """A spawned server's exit: what it left in its pipes is read (for at most ``_REMAINS_S``), then its
        pipes are closed, so that the reader ends even while a child of the server still holds them."""
        assert self._process is not None and self._exited is not None
        await asyncio.shield(self._exited)
        await asyncio.wait({self._reading}, timeout=_REMAINS_S)
        if not self._reading.done():
            _end_pipes(self._process)

    async def _exit(self, timeout: float | None) -> bool:
        """Whether the spawned server exited within ``timeout`` seconds."""
        assert self._exited is not None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._exited), timeout)
        return self._exited.done()

    def _resolve(
        self, waiter: asyncio.Future[Response | ConnectionClosed], response: Response | ConnectionClosed
    ) -> None:
        if not waiter.done():
            waiter.set_result(response)

    # --- callbacks, and the server's requests ----------------------------------------------------

    def _run_later(self, callback: Callable[..., Any], args: tuple[Any, ...], call: int | None) -> None:
        if self._callbacks.add(callback, args, call) and (self._dispatching is None or self._dispatching.done()):
            self._dispatching = self._loop.create_task(self._dispatch())

    async def _dispatch(self) -> None:
        """The client's dispatcher: the queued callbacks, one at a time, in order (an ``async def`` one awaited)."""
        callbacks = self._callbacks
        while callbacks.items:
            callback, args, call = callbacks.items.popleft()
            try:
                result = _run_callback(callback, args)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.exception("a notification callback raised")
            finally:
                callbacks.done(call)
                self._callback_done.set()
                self._callback_done = asyncio.Event()

    async def _progress_reported(self, call: int, deadline: float | None) -> None:
        """Until the progress callbacks of ``call`` queued before its answer have run (or ``deadline``)."""
        if self._dispatching is not None and asyncio.current_task() is self._dispatching:
            return
        while call in self._callbacks.progress and (left := _left(deadline)) != 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._callback_done.wait(), left)

    def _serve_request(self, request: Request) -> None:
        if self._serving >= _HANDLERS + _HANDLERS_WAITING:
            logger.warning("refused a request of the server's (%r): the client is busy", request.method)
            answer = _answer.failure_answer(self._core.StdioTransport, request, None, _busy(request))
            if answer is not None:
                with contextlib.suppress(Exception):
                    self._put(answer, [], [])
            return
        self._serving += 1
        task = self._loop.create_task(self._answer_request(request))
        self._keep(task)
        task.add_done_callback(self._served)

    def _served(self, task: asyncio.Task[None]) -> None:
        self._serving -= 1

    async def _answer_request(self, request: Request) -> None:
        handler = self._handler or _no_handler
        core = self._core.StdioTransport  # builds the answer's bytes (static methods)
        async with self._handler_slots:
            if _engine.is_async_handler(handler):
                try:
                    result = await handler(request.method, request.params)
                except Exception as exc:
                    answer = _answer.failure_answer(core, request, None, exc)
                else:
                    answer = _answer.result_answer(core, request, None, result)
            else:
                answer = await asyncio.to_thread(self._answer, core, request)
        if answer is not None:
            with contextlib.suppress(Exception):
                await self._send(answer, _deadline(self._timeout), [], [])

    async def _connection_closed(self, cause: str) -> ConnectionClosed:
        returncode = None
        if self._process is not None:
            if self._exited is None:
                with contextlib.suppress(asyncio.TimeoutError):
                    returncode = await asyncio.wait_for(self._process.wait(), 0.5)
            elif await self._exit(0.5):
                returncode = self._process.returncode
        if returncode is not None and self._stderr_task is not None:
            await asyncio.wait({self._stderr_task}, timeout=0.5)  # its last lines, written as it exited
        return _closed_error(cause, returncode, self._stderr_tail)

    async def close(self, grace: float = 5.0) -> None:
        """As :meth:`Client.close`, awaited."""
        with contextlib.suppress(Exception):
            self._writer.close()
        process = self._process
        if process is not None and not await self._ended(process, grace):
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            if not await self._ended(process, grace):
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await self._ended(process, None)
        self._close_with(ConnectionClosed("the client was closed"))
        dispatching = self._dispatching
        if dispatching is not None and dispatching is not asyncio.current_task():
            await asyncio.wait({dispatching}, timeout=grace)  # the callbacks already queued
            dispatching.cancel()  # one still running after that
        if process is not None:
            _end_pipes(process)
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(self._reading, _CLOSE_JOIN_S)
        for task in list(self._tasks):
            if task is not asyncio.current_task():
                task.cancel()

    async def _ended(self, process: asyncio.subprocess.Process, timeout: float | None) -> bool:
        """Whether ``process`` exited within ``timeout`` seconds (its exit, not the end of its pipes)."""
        if self._exited is not None:
            return await self._exit(timeout)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(process.wait(), timeout)
        return process.returncode is not None

    @property
    def returncode(self) -> int | None:
        """A spawned server's exit code, once it exited (else ``None``)."""
        return None if self._process is None else self._process.returncode

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.close()


class _ProcessProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's protocol for a spawned server (what ``create_subprocess_exec`` uses), which also tells when
    the process exited (``exited``): ``Process.wait()`` waits for its pipes to close too, and a child of
    the server may hold them open."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=1 << 16, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


def _end_pipes(process: asyncio.subprocess.Process) -> None:
    """Close the pipes of an ended server (asyncio's subprocess transport, which ``Process`` keeps as
    ``_transport``): its readers get their end of input even while a child of it holds the pipes open."""
    transport = getattr(process, "_transport", None)
    if transport is not None:
        with contextlib.suppress(Exception):
            transport.close()
