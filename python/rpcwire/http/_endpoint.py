"""The body answered: an app's handler and limits, and the three ways a body that passed the policy is answered.

- **Plain** (:meth:`Endpoint.dispatch`, the hot path): :func:`rpcwire.dispatch` with a request context per call
  made only if it is asked for (:class:`_PlainCalls`); its notifications written where the caller says
  (:class:`Notifications`: nowhere, a buffer, or a stream that starts at the first one).
- **Sync, a context per request** (:meth:`Endpoint.answer_sync`, on a worker thread): for WSGI's server-sent
  events of a request that asks for progress, each context's notifications written where the caller says.
- **Async** (:meth:`Endpoint.answer_async`, on the loop): an ``async def`` handler awaited, no thread.

The three give the same bytes: the same core reads the body and builds the answers. :class:`Running` holds the
contexts of one body, for a client that goes away to cancel them.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from rpcwire import (
    Request,
    StdioTransport,
    _core,  # the core rpcwire serves with: its reader of a whole body, its encoder
    dispatch,
)
from rpcwire._answer import (
    answer_message,
    answer_message_async,
    call,
    call_async,
    cancelled_answer,
    failure_answer,
)
from rpcwire._context import RequestContext, running_request, valid_traceparent
from rpcwire._contract import Message
from rpcwire._engine import async_asker
from rpcwire._http_info import HTTPRequestInfo, request_info
from rpcwire._types import RequestCancelled
from rpcwire.http._auth import Authenticate
from rpcwire.http._policy import Policy

__all__ = [
    "DISCARD",
    "Buffered",
    "Endpoint",
    "Notifications",
    "Running",
    "Sink",
    "encode_notification",
    "header_traceparent",
]


class Running:
    """The request contexts of one streamed body, for a client that goes away to cancel: those running, and
    those not yet started (cancelled as they start, so that they never run)."""

    __slots__ = ("_contexts", "stopped")

    def __init__(self) -> None:
        self._contexts: list[RequestContext] = []
        self.stopped = False

    def add(self, context: RequestContext) -> None:
        self._contexts.append(context)
        if self.stopped:
            context._cancel("lsp")

    def stop(self) -> None:
        """Cancel what runs and what is still to start. An async handler's task is cancelled at once (this runs on
        its loop, where the task waits inside the handler while its context is not done), not at the loop's next
        turn, by when the task may have left the handler (the request's own task, on the streamed path)."""
        self.stopped = True
        for context in list(self._contexts):
            if type(context) is _LazyContext and context._index >= 0:
                continue  # not made: its ``cancelled`` reads ``stopped`` (made later, it starts cancelled)
            if not context._done:
                task = context._task
                context._task = None
                context._cancel("lsp")
                if task is not None:
                    task.cancel()


class Sink(Protocol):
    """Where a request context writes its notifications (a context's transport, as far as it goes over HTTP)."""

    def write_notification(self, method: str, params: Any = None) -> None: ...


def encode_notification(method: str, params: Any = None) -> bytes:
    """A notification's line, as the core writes it over a stream."""
    line: bytes = _core._encode_request(method, params)
    return line


class Notifications:
    """Where a request context writes its notifications (progress) over HTTP: each one encoded by the core
    (the bytes a transport writes) and handed to ``write`` (a server-sent event), or dropped without one.
    Encoded either way, so that a notification the encoder refuses raises in the handler whether anyone
    listens. Subclasses write the line their own way (:meth:`write`)."""

    __slots__ = ("_write",)

    def __init__(self, write: Callable[[bytes], None] | None) -> None:
        self._write = write

    def write_notification(self, method: str, params: Any = None) -> None:
        self.write(encode_notification(method, params))

    def write(self, line: bytes) -> None:
        if self._write is not None:
            self._write(line)


class Buffered(Notifications):
    """Notifications kept, in order, for a caller that sends them once the handler returns (``lines``: ``None``
    until the first; no list made for a call that writes none)."""

    __slots__ = ("lines",)

    def __init__(self) -> None:
        self._write = None
        self.lines: list[bytes] | None = None

    def write(self, line: bytes) -> None:
        if self.lines is None:
            self.lines = [line]
        else:
            self.lines.append(line)


DISCARD = Notifications(None)
"""The notifications of a call without server-sent events: encoded, then dropped."""


class Endpoint(Policy):
    """What both applications (and the WebSocket path) hold: the policy (what is refused before the body is
    read) and the handler and limits that answer the bodies it lets through."""

    def __init__(  # noqa: PLR0917  (internal: the two applications pass their keywords on)
        self,
        handler: Callable[[str, Any], Any],
        max_body_bytes: int,
        allowed_origins: Iterable[str] | str | None,
        max_depth: int,
        max_batch: int | None,
        allowed_hosts: Iterable[str] | str | None,
        expose_errors: bool,
        authenticate: Authenticate | None = None,
    ) -> None:
        if not callable(handler):
            raise TypeError("handler must be callable")
        super().__init__(max_body_bytes, allowed_origins, allowed_hosts, authenticate)
        self.handler = handler
        if not isinstance(expose_errors, bool):
            raise TypeError(f"expose_errors must be a bool, not {type(expose_errors).__name__}")
        self.expose_errors = expose_errors
        self.max_depth = max_depth
        self.max_batch = max_batch
        # The limits checked now, not at the first request.
        dispatch(b"[]", handler, max_message_bytes=max_body_bytes, max_depth=max_depth, max_batch=max_batch)
        # Asked at each request: a registry made before its functions may gain an async one later.
        self.is_async: Callable[[], bool] = async_asker(handler)

    def dispatch(
        self,
        body: bytes,
        traceparent: str | None,
        handler: Callable[[str, Any], Any],
        source: dict[str, Any] | None = None,
        *,
        notifications: Sink | None = None,
        running: Running | None = None,
    ) -> bytes | None:
        """``body`` answered by :func:`rpcwire.dispatch` with ``handler`` (``self.handler``, or one that refuses),
        each call with a request context made only if it is asked for (:class:`_PlainCalls`). ``source``: the
        WSGI ``environ`` or ASGI ``scope``, for ``current_request().http``; ``notifications``: where the contexts
        write theirs (``DISCARD`` by default); ``running``: for a client that goes away to cancel (the calls not
        yet started are then answered -32800 without running)."""
        calls = _PlainCalls(self, body, handler, traceparent, source, notifications, running)
        try:
            # The limits as keywords, not a dict unpacked on every call.
            return dispatch(
                body,
                calls,
                max_message_bytes=self.max_body_bytes,
                max_depth=self.max_depth,
                max_batch=self.max_batch,
                expose_errors=self.expose_errors,
            )
        finally:
            if calls.token is not None:
                running_request.reset(calls.token)

    # --- with a request context per request (server-sent events, async handlers) ---

    def read(self, body: bytes) -> Message:
        """``body`` read and classified by the core, as ``dispatch`` reads it (a refusal's answer, a request, or
        a batch's entries)."""
        message: Message = _core._read_text(body, self.max_body_bytes, self.max_depth, self.max_batch)
        return message

    def answer_sync(
        self,
        body: bytes,
        notifications: Sink,
        running: Running,
        traceparent: str | None,
        source: dict[str, Any] | None = None,
    ) -> bytes | None:
        """On a worker thread: answer ``body`` with a request context per request (each added to ``running``
        as it starts, for a client that goes away to cancel), each notification the handler writes (progress)
        written into ``notifications``. ``traceparent``: the header's, valid, or ``None``."""

        def call_one(request: Request) -> bytes | None:
            context = _context(request, notifications, traceparent, source)
            running.add(context)
            return call(StdioTransport, request, self.handler, context, expose_errors=self.expose_errors)

        return answer_message(self.read(body), call_one)

    async def answer_async(
        self,
        body: bytes,
        notifications: Sink,
        traceparent: str | None,
        running: Running | None = None,
        *,
        source: dict[str, Any] | None = None,
    ) -> bytes | None:
        """On the loop: answer ``body`` with an async handler, awaited here (no thread), a request context per
        request (added to ``running``, its ``_task`` this task, which a cancellation cancels), each notification
        written into ``notifications``. The same bytes as ``dispatch``: the same core reads the body and builds
        them."""
        return await answer_message_async(
            self.read(body), lambda request: self._call_async(notifications, request, running, traceparent, source)
        )

    async def _call_async(
        self,
        notifications: Sink,
        request: Request,
        running: Running | None,
        traceparent: str | None,
        source: dict[str, Any] | None,
    ) -> bytes | None:
        context = _context(request, notifications, traceparent, source)
        if running is not None:
            running.add(context)
        if context.cancelled:  # the client went away before this request of its batch started
            return cancelled_answer(StdioTransport, request, context)
        task = context._task = asyncio.current_task()  # cancelled when the client goes away
        try:
            return await call_async(StdioTransport, request, self.handler, context, expose_errors=self.expose_errors)
        except asyncio.CancelledError as exc:  # answered -32800 (MCP: not at all), as the engine answers it
            if context.cancelled and task is not None and hasattr(task, "uncancel"):
                # Our cancellation, answered here: the task (the request's own, on the streamed path) goes on
                # as not cancelled (Python 3.11+ counts the requests: asyncio.timeout reads them).
                task.uncancel()
            return failure_answer(StdioTransport, request, context, exc, expose_errors=self.expose_errors)


def _context(
    request: Request, notifications: Sink, traceparent: str | None, source: dict[str, Any] | None = None
) -> RequestContext:
    """A request's context; the ``traceparent`` header, when valid, wins over ``params._meta.traceparent``.
    ``source``: the WSGI ``environ`` or ASGI ``scope`` (``current_request().http``)."""
    context = RequestContext(request, notifications)
    if traceparent is not None:
        context._traceparent = traceparent
    context._http = source
    return context


def header_traceparent(value: str | None) -> str | None:
    """A ``traceparent`` header's value when it is valid, else ``None`` (none sent, or not one)."""
    return None if value is None else valid_traceparent(value.strip(" \t"))


class _PlainCalls:
    """The handler ``dispatch`` calls for one body on the plain path: each call runs with a request context
    (``current_request()``) that is made only if it is asked for. Making one costs the body read again by the
    core, several times the rest of a small request, so a call only sets a :class:`_LazyContext` that knows
    which call it is (``dispatch`` calls the handler for each valid request of the body, in order) and reads
    the body on the first look inside."""

    __slots__ = (
        "_body",
        "_calls",
        "_endpoint",
        "_handler",
        "_requests",
        "notifications",
        "running",
        "source",
        "token",
        "traceparent",
    )

    def __init__(  # noqa: PLR0917  (internal: made once per body by Endpoint.dispatch, positionally)
        self,
        endpoint: Endpoint,
        body: bytes,
        handler: Callable[[str, Any], Any],
        traceparent: str | None,
        source: dict[str, Any] | None,
        notifications: Sink | None = None,
        running: Running | None = None,
    ) -> None:
        self._endpoint = endpoint
        self.source = source
        self._body = body
        self._handler = handler
        self.traceparent = traceparent
        self._calls = 0
        self._requests: list[Request] | None = None
        self.token: contextvars.Token[RequestContext] | None = None  # reset by Endpoint.dispatch at the end
        self.notifications = DISCARD if notifications is None else notifications
        self.running = running

    def __call__(self, method: str, params: Any) -> Any:
        context = _LazyContext.__new__(_LazyContext)
        context._plain = self
        context._index = self._calls
        self._calls += 1
        running = self.running
        if running is not None:  # a streamed body: a client that went away cancels
            if running.stopped:  # before this call started: it never runs (answered -32800)
                raise RequestCancelled()
            running._contexts.append(context)
        # Left set after the call, until the next one (or the end of the body): the core logs a call's failure
        # once it has returned, and the log record takes its trace context from the context (_TraceFilter).
        token = running_request.set(context)
        if self.token is None:
            self.token = token
        try:
            return self._handler(method, params)
        finally:
            if context._index < 0:  # made: LSP's progress "end" (written nowhere) and nothing after it
                context._finish()

    def request(self, index: int) -> Request:
        if self._requests is None:
            message = self._endpoint.read(self._body)
            self._requests = (
                [message] if isinstance(message, Request) else [e for e in message if isinstance(e, Request)]
            )
        return self._requests[index]


class _LazyContext(RequestContext):
    """A :class:`RequestContext` whose slots are filled on the first read of one (``__getattr__`` runs only for
    an attribute not found, here an unset slot of the base class): from the request the ``_index``-th call
    is serving. ``_index`` is then ``-1``. Its notifications go where the body's do (nowhere, unless streamed)."""

    __slots__ = ("_index", "_plain")

    _plain: _PlainCalls
    _index: int

    def __getattr__(self, name: str) -> Any:
        if name not in _CONTEXT_SLOTS or self._index < 0:
            raise AttributeError(name)
        calls = self._plain
        RequestContext.__init__(self, calls.request(self._index), calls.notifications)
        if calls.traceparent is not None:
            self._traceparent = calls.traceparent
        self._http = calls.source
        if calls.running is not None and calls.running.stopped:
            self._cancel_dialect = "lsp"
        self._index = -1
        return object.__getattribute__(self, name)

    @property
    def cancelled(self) -> bool:
        """As :attr:`RequestContext.cancelled`, without making the context (a client gone from the stream)."""
        if self._index >= 0:
            running = self._plain.running
            return running is not None and running.stopped
        return self._cancel_dialect is not None

    @property
    def http(self) -> HTTPRequestInfo | None:
        """As :attr:`RequestContext.http`, without making the context (the request is the body's, not a call's)."""
        source = self._plain.source if self._index >= 0 else self._http
        return None if source is None else request_info(source)


_CONTEXT_SLOTS = frozenset(RequestContext.__slots__)
