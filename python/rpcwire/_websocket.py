"""JSON-RPC over WebSocket: what :class:`rpcwire.http.ASGIApp` does with a ``websocket`` scope.

One connection carries any number of messages, one JSON-RPC message or batch per frame, served by the rules of
the concurrent engine (``docs/semantics.md``, "WebSocket"):

- **The handshake** is checked as a POST's headers are (:func:`handshake_refusal`, the one place to add a check):
  the ``Host`` (``allowed_hosts``, the DNS-rebinding defence) and the ``Origin`` (``allowed_origins``; a browser
  always sends one). A refusal is the HTTP response a POST would get (421, 403) where the server supports the
  ``websocket.http.response`` extension (uvicorn and granian do: tests/http/test_websocket.py), else
  ``websocket.close`` before the accept, which the server answers 403 (its headers, a ``WWW-Authenticate``
  challenge, are lost). The ``jsonrpc`` subprotocol is accepted when the client offers it; a client that offers
  none is served too.
- **Frames.** A text frame (or a binary one: its bytes are read as UTF-8 JSON text) is read by the core as a POST's
  body is, with the same limits (``max_body_bytes`` per frame, ``max_depth``, ``max_batch``); a frame that cannot
  be read is answered in a frame (-32700, -32600, id null), and the connection goes on. Everything the server sends
  is a text frame: an answer (a batch's answers in one array), or a notification.
- **Concurrency.** Each request runs as a task as soon as it is read: an ``async def`` handler awaited on the loop,
  a sync one on a worker thread (``asyncio.to_thread``; on the loop with ``run_sync_inline``), at most
  ``max_concurrency`` at once, each answered as it finishes (so in any order). A request has a context
  (``current_request()``) whose ``notify()`` and ``progress()`` are sent on the socket while it runs, before its
  answer. A notification from the client is run (awaited) before the next message is read, once every answer
  finished before it is sent, as the engine runs them. ``$/cancelRequest`` (LSP) and ``notifications/cancelled``
  (MCP) cancel a request in flight (:class:`~rpcwire._in_flight.InFlight`): an async handler's task is cancelled,
  a sync handler sees ``current_request().cancelled``; answered -32800 (LSP) or not at all (MCP).
- **The end.** When the client goes away (or sends its close frame), the requests in flight are cancelled (their
  answers go nowhere), and the app returns once their tasks ended (``EXIT_GRACE`` at most). While reading is
  paused (below), one ``receive`` stays pending so that this is still seen; a frame it gets is held, the next to
  be served, and a client that leaves after sending it is seen once there is room again.
- **Backpressure.** A client that sends without reading is read no further (beyond that one held frame,
  ``receive`` is not called, so the server stops reading its socket) while ``2 * max_concurrency`` requests are
  read and unanswered, or while more than ``_PAUSE_BYTES`` wait to be sent. The messages waiting to be sent are
  held in one queue; the ASGI server's ``send`` waits while its transport's buffer is full. Beyond
  ``max_queued_bytes`` waiting (a handler that keeps notifying a client that does not read), the connection is
  closed with 1008, logged at WARNING on the ``rpcwire`` logger, and what is in flight is cancelled. The close
  frame waits ``_CLOSE_WAIT`` (1 s) at most for room; at that deadline a client that has not answered it is
  dropped (:func:`_drop`: a reset, where the server's transport can be reached, uvicorn's), since the server's
  own close would wait for a drain that a client that does not read never allows.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import socket
import struct
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, Protocol

from rpcwire import StdioTransport, _core
from rpcwire._answer import Deliver, call, call_async, each_request, failure_answer
from rpcwire._context import RequestContext
from rpcwire._in_flight import EXIT_GRACE, InFlight
from rpcwire._types import Request

__all__ = ["DEFAULT_MAX_CONCURRENCY", "DEFAULT_MAX_QUEUED_BYTES", "SUBPROTOCOL", "WebSocketServer", "handshake_refusal"]

logger: logging.Logger = logging.getLogger("rpcwire")

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

SUBPROTOCOL = "jsonrpc"
"""The subprotocol accepted when the client offers it (``Sec-WebSocket-Protocol: jsonrpc``)."""
DEFAULT_MAX_CONCURRENCY = 64
"""The requests of one connection that run at once (``serve_async``'s default)."""
DEFAULT_MAX_QUEUED_BYTES = 16 * 1024 * 1024
"""What may wait to be sent to one client before the connection is closed (1008): as much as one frame may hold."""
_PAUSE_BYTES = 256 * 1024  # more than this waiting to be sent: the client's next frames are not read
_CLOSE_WAIT = 1.0  # how long the close frame may wait for room in the transport of a client that does not read
_POLICY_VIOLATION = 1008


class _Refusal(Protocol):
    """A refusal as ``rpcwire.http`` builds it (a shared response: status, headers, body)."""

    body: bytes

    def asgi_start(self) -> dict[str, Any]: ...


class _Hosts(Protocol):
    def allowed(self, host: str | None, server: str | None, client: str | None) -> bool: ...


class _Endpoint(Protocol):
    """What the websocket path uses of ``rpcwire.http``'s endpoint: the handler, the checks and the reader."""

    @property
    def handler(self) -> Callable[[str, Any], Any]: ...

    @property
    def hosts(self) -> _Hosts: ...

    @property
    def expose_errors(self) -> bool: ...

    @property
    def is_async(self) -> Callable[[], bool]: ...

    @property
    def authenticate(self) -> Callable[[Any], Any] | None: ...

    def origin_allowed(self, origin: str, host: str | None, scheme: str) -> bool: ...

    async def authenticated_async(self, source: dict[str, Any]) -> _Refusal | None: ...

    def read(self, body: bytes) -> Any: ...


_HANDSHAKE_HEADERS = frozenset({b"host", b"origin"})


def handshake_refusal(
    endpoint: _Endpoint, scope: dict[str, Any], misdirected: _Refusal, forbidden: _Refusal
) -> _Refusal | None:
    """The refusal of a websocket handshake, or ``None`` to accept it: the checks of a POST's headers that apply
    to it (the ``Host``: ``misdirected``, 421; the ``Origin``: ``forbidden``, 403), by the same code. The one place
    where a connection is checked before it is accepted."""
    found: dict[bytes, str] = {}
    for name, value in scope.get("headers", ()):
        lowered = name.lower()
        if lowered in _HANDSHAKE_HEADERS:
            text = value.decode("latin-1")
            found[lowered] = f"{found[lowered]},{text}" if lowered in found else text
    host = found.get(b"host")
    server, client = scope.get("server"), scope.get("client")
    if not endpoint.hosts.allowed(host, None if server is None else server[0], None if client is None else client[0]):
        return misdirected
    origin = found.get(b"origin")
    if origin is not None and not endpoint.origin_allowed(origin, host, scope.get("scheme", "ws")):
        return forbidden
    return None


class WebSocketServer:
    """The websocket scopes of one ``ASGIApp``: checks the handshake, accepts, and serves the connection."""

    def __init__(
        self,
        endpoint: _Endpoint,
        refusals: tuple[_Refusal, _Refusal],
        *,
        max_concurrency: int,
        max_queued_bytes: int,
        run_sync_inline: bool,
    ) -> None:
        for name, value in (("max_concurrency", max_concurrency), ("max_queued_bytes", max_queued_bytes)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
            if value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")
        self.endpoint = endpoint
        self.refusals = refusals
        self.max_concurrency = max_concurrency
        self.max_queued_bytes = max_queued_bytes
        self.inline = run_sync_inline

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if (await receive())["type"] != "websocket.connect":  # the client went away before the handshake
            return
        refusal = handshake_refusal(self.endpoint, scope, *self.refusals)
        if refusal is None and self.endpoint.authenticate is not None:  # as a POST's: before anything is read
            refusal = await self.endpoint.authenticated_async(scope)
        if refusal is not None:
            await refuse(scope, send, refusal)
            return
        subprotocol = SUBPROTOCOL if SUBPROTOCOL in scope.get("subprotocols", ()) else None
        await send({"type": "websocket.accept", "subprotocol": subprotocol})
        await _Connection(self, scope, receive, send).serve()


async def refuse(scope: dict[str, Any], send: Send, refusal: _Refusal | None) -> None:
    """Refuse a handshake: ``refusal``'s status and body where the server takes an HTTP response (the
    ``websocket.http.response`` extension), else (or without a refusal) ``websocket.close``, which it answers 403."""
    if refusal is not None and "websocket.http.response" in (scope.get("extensions") or {}):
        start = refusal.asgi_start()
        await send({"type": "websocket.http.response.start", "status": start["status"], "headers": start["headers"]})
        await send({"type": "websocket.http.response.body", "body": refusal.body})
    else:
        await send({"type": "websocket.close", "code": _POLICY_VIOLATION})


class _ClientGone(Exception):
    """The client went away while reading was paused (seen by the ``receive`` pending meanwhile)."""


class _Notifications:
    """Where a request context writes its notifications: encoded at once (by the core, on the handler's thread,
    so that one the encoder refuses raises in the handler), then queued to be sent, from any thread."""

    __slots__ = ("_connection",)

    def __init__(self, connection: _Connection) -> None:
        self._connection = connection

    def write_notification(self, method: str, params: Any = None) -> None:
        self._connection.put_from_any_thread(_core._encode_request(method, params))


class _Connection:
    """One accepted connection: a reader task, a sender task and a task per request, all on the loop's thread
    (sync handlers' notifications reach it with ``call_soon_threadsafe``, in the order they were written)."""

    def __init__(self, server: WebSocketServer, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        self.scope = scope  # the handshake's (path, headers, client): what a request's context may tell of it
        self.endpoint = server.endpoint
        self.handler = server.endpoint.handler
        self.expose_errors = server.endpoint.expose_errors
        self.is_async = server.endpoint.is_async()
        self.inline = server.inline
        self.receive = receive
        self.send = send
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        self.notifications = _Notifications(self)
        self.from_threads = False  # a worker thread handed a notification to the loop since call() last looked
        self.in_flight = InFlight()  # used on the loop's thread only
        self.tasks: set[asyncio.Task[None]] = set()
        self.slots = asyncio.Semaphore(server.max_concurrency)  # handlers running
        self.admitted = 0  # requests read and not yet answered
        self.max_admitted = 2 * server.max_concurrency
        self.max_queued_bytes = server.max_queued_bytes
        self.pause_bytes = min(_PAUSE_BYTES, server.max_queued_bytes)
        self.outbox: collections.deque[bytes] = collections.deque()  # waiting to be sent, in order
        self.queued_bytes = 0
        self.queued = 0  # messages ever queued...
        self.sent = 0  # ...and ever sent (handed to the server's send)
        self.sending = False  # a message is in the server's send: by the sender task, or by a request's own
        self.wake_sender = asyncio.Event()
        self.room = asyncio.Event()  # the reader waits on it while reading is paused
        self.held: asyncio.Task[dict[str, Any]] | None = None  # the one receive() pending while reading is paused
        self.sent_up_to: list[tuple[int, asyncio.Future[None]]] = []  # notifications waiting for earlier answers
        self.stop: asyncio.Future[int | None] = self.loop.create_future()  # a close code, or None: the client left
        self.failure: BaseException | None = None  # a handler's BaseException: raised once the connection is closed
        self.start_task: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]] = self.loop.create_task
        if sys.version_info >= (3, 12) and self.loop.get_task_factory() is None:
            # The handler runs up to its first wait when its task is made: a handler that never waits is answered
            # (and its answer sent) in the turn of the loop that read its frame, as the engine's asyncio mode does.
            self.start_task = functools.partial(asyncio.Task, loop=self.loop, eager_start=True)

    async def serve(self) -> None:
        reader = self.loop.create_task(self.read())
        sender = self.loop.create_task(self.write())
        try:
            ends: set[asyncio.Future[Any]] = {reader, sender, self.stop}
            await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
        finally:
            code = self.stop.result() if self.stop.done() else None
            if not self.stop.done():
                self.stop.set_result(None)
            reader.cancel()
            self.cancel_in_flight()
            sender.cancel()
            await asyncio.gather(reader, sender, return_exceptions=True)
            if self.held is not None:  # a receive() made while reading was paused, never awaited by the reader
                self.held.cancel()
                await asyncio.gather(self.held, return_exceptions=True)
            if self.tasks:
                await asyncio.wait(self.tasks, timeout=EXIT_GRACE)
            if code is not None:
                await self.close(code)
        for task in (reader, sender):
            error = None if task.cancelled() else task.exception()
            if error is not None and not isinstance(error, OSError):  # not a client gone: a failure of the server
                raise error
        if self.failure is not None:
            raise self.failure

    async def close(self, code: int) -> None:
        """The close frame, sent when there is room for it within ``_CLOSE_WAIT``; at that deadline the connection
        is dropped unless the client completed the closing handshake by then: a client that reads nothing would
        otherwise keep the socket, and what the server's transport holds for it, for as long as it likes (the
        transport's ``close`` waits for its buffer to drain, and the server waits for the client's close frame)."""
        deadline = self.loop.time() + _CLOSE_WAIT
        with contextlib.suppress(Exception, asyncio.TimeoutError):
            await asyncio.wait_for(self.send({"type": "websocket.close", "code": code}), _CLOSE_WAIT)
        transport = _server_transport(self.send)
        if transport is not None:  # after this app returns too: the server closes the transport once it has
            self.loop.call_at(deadline, _drop, transport)

    def cancel_in_flight(self) -> None:
        for context in self.in_flight.contexts():
            context._cancel("lsp")  # a sync handler sees it; nothing is answered any more
        for task in self.tasks:
            task.cancel()

    # --- reading ------------------------------------------------------------------------------------------

    async def read(self) -> None:
        """The client's frames, each served before the next is read; reading pauses while there is no room."""
        receive, endpoint = self.receive, self.endpoint
        try:
            while True:
                if self.reading_paused():
                    await self.until_room(self.reading_paused)
                event = await self.held if self.held is not None else await receive()
                self.held = None
                kind = event["type"]
                if kind == "websocket.disconnect":
                    return
                if kind != "websocket.receive":
                    continue
                text = event.get("text")
                message = endpoint.read(text.encode() if text is not None else event.get("bytes") or b"")
                if type(message) is Request and not message.is_notification:  # the common case: room was waited for
                    self.start(message, self.put)
                    continue
                for request, deliver in each_request(message, self.put):
                    await self.dispatch(request, deliver)
        except _ClientGone:
            return

    def reading_paused(self) -> bool:
        """Too many requests read and unanswered, or too much waiting to be sent: the client is read no further."""
        return self.admitted >= self.max_admitted or self.queued_bytes > self.pause_bytes

    async def until_room(self, full: Callable[[], bool]) -> None:
        """Until ``full()`` is false, with one ``receive`` pending meanwhile (:attr:`held`), so that a client that
        goes away while reading is paused is seen to (:class:`_ClientGone`: the connection ends, and what is in
        flight is cancelled). A frame it gets is held, the next to be served: one frame at most, so backpressure
        holds (a client gone after that frame is seen once there is room again, or when a ``send`` fails)."""
        while full():
            self.room.clear()
            if self.held is None:
                self.held = self.loop.create_task(_received(self.receive))
            if self.held.done():  # a frame is held: only room is waited for
                await self.room.wait()
                continue
            room = self.loop.create_task(self.room.wait())
            try:
                await asyncio.wait((room, self.held), return_when=asyncio.FIRST_COMPLETED)
            finally:
                room.cancel()
            if self.held.done() and self.held.result()["type"] == "websocket.disconnect":
                raise _ClientGone

    async def dispatch(self, request: Request, deliver: Deliver) -> None:
        if request.is_notification:
            if not self.in_flight.cancel(request):  # a cancellation is applied at once, and never run
                await self.until_sent()
                await self.run_notification(request, self.context(request))
            deliver(None)
            return
        if self.admitted >= self.max_admitted:  # a batch's requests, each admitted in turn
            await self.until_room(lambda: self.admitted >= self.max_admitted)
        self.start(request, deliver)

    async def until_sent(self) -> None:
        """Until every message queued so far was handed to the server's ``send``."""
        if self.sent < self.queued:
            done = self.loop.create_future()
            self.sent_up_to.append((self.queued, done))
            await done

    # --- requests -----------------------------------------------------------------------------------------

    def context(self, request: Request) -> RequestContext:
        """The context of a request of this connection (``current_request()``): the one place that makes it.
        Its ``http`` is the handshake's (with the ``user`` that ``authenticate`` gave)."""
        context = RequestContext(request, self.notifications)
        context._http = self.scope
        return context

    def start(self, request: Request, deliver: Deliver) -> None:
        self.admitted += 1
        context = self.context(request)
        self.in_flight.add(context)
        task = self.start_task(self.run(request, context, deliver))
        if not task.done():  # an eager task may be done already: nothing is left to cancel or wait for
            if self.is_async:
                context._task = task  # a cancellation cancels it
            self.tasks.add(task)

    async def run(self, request: Request, context: RequestContext, deliver: Deliver) -> None:
        try:
            try:
                async with self.slots:  # cancelled while it waits: never run
                    answer = await self.call(request, context)
            except asyncio.CancelledError as exc:
                if self.stop.done():  # the connection is closing: nothing is answered
                    raise
                answer = failure_answer(StdioTransport, request, context, exc, expose_errors=self.expose_errors)
            context._task = None  # answered: a cancellation that comes now must not cancel the sending of it
            if deliver == self.put and answer is not None and not self.sending and not self.outbox:
                await self.send_now(answer)  # nothing before it to wait for: no hop to the sender task
            else:
                deliver(answer)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # a handler's SystemExit and the like: the connection ends, the app raises it
            if self.failure is None:
                self.failure = exc
            if not self.stop.done():
                self.stop.set_result(None)
        finally:
            self.in_flight.remove(context)
            self.tasks.discard(asyncio.current_task())
            self.admitted -= 1
            self.room.set()

    async def call(self, request: Request, context: RequestContext) -> bytes | None:
        """The handler's answer: awaited on the loop (async), on a worker thread, or inline (``run_sync_inline``)."""
        if self.inline and not self.is_async:
            return call(StdioTransport, request, self.handler, context, expose_errors=self.expose_errors)
        if self.is_async:  # a sync function of the registry runs on a worker thread
            answer = await call_async(StdioTransport, request, self.handler, context, expose_errors=self.expose_errors)
        else:
            answer = await asyncio.to_thread(
                call, StdioTransport, request, self.handler, context, expose_errors=self.expose_errors
            )
        if self.from_threads:
            # Notifications a worker handed to the loop (put_from_any_thread) were queued before it returned, but
            # the answer may come back without a turn of the loop (a worker that ends before its future is
            # chained: free-threaded CPython, or a thread just started under the GIL): one turn puts them first.
            self.from_threads = False
            await asyncio.sleep(0)
        return answer

    async def run_notification(self, request: Request, context: RequestContext) -> None:
        try:
            await self.call(request, context)
        except asyncio.CancelledError as exc:
            if self.stop.done():
                raise
            failure_answer(StdioTransport, request, context, exc)  # logged, as every mode logs it

    # --- sending ------------------------------------------------------------------------------------------

    def put(self, line: bytes | None) -> None:
        """On the loop: a message to send, after those queued before it."""
        if line is None or self.stop.done():
            return
        self.outbox.append(line)
        self.queued_bytes += len(line)
        self.queued += 1
        self.wake_sender.set()
        if self.queued_bytes > self.max_queued_bytes and len(self.outbox) > 1:
            logger.warning(
                "closing a WebSocket connection (1008): %d messages (%d bytes) wait to be sent to a client that "
                "does not read, over max_queued_bytes (%d); its requests in flight are cancelled",
                len(self.outbox),
                self.queued_bytes,
                self.max_queued_bytes,
            )
            self.outbox.clear()
            self.queued_bytes = 0
            self.stop.set_result(_POLICY_VIOLATION)

    def put_from_any_thread(self, line: bytes) -> None:
        if threading.get_ident() == self.loop_thread:
            self.put(line)
        else:
            self.from_threads = True  # before the hand-over: call() looks at it once the worker returned
            with contextlib.suppress(RuntimeError):  # the loop is closed: the connection is long gone
                self.loop.call_soon_threadsafe(self.put, line)

    async def write(self) -> None:
        """The sender: each queued message in turn, as a text frame (the server's ``send`` waits while its
        transport's buffer is full), never while a request's task sends its answer itself (:meth:`send_now`)."""
        outbox, send = self.outbox, self.send
        while True:
            while not outbox or self.sending:
                self.wake_sender.clear()
                await self.wake_sender.wait()
            line = outbox.popleft()
            self.queued_bytes -= len(line)
            if self.queued_bytes <= self.pause_bytes:
                self.room.set()
            self.sending = True
            try:
                await send({"type": "websocket.send", "text": line.decode()})
            finally:
                self.sending = False
            self.sent_one()

    async def send_now(self, line: bytes) -> None:
        """A request's task sends its answer itself, when nothing waits to be sent and nothing is being sent: the
        common case of a client that reads, one hop of the loop fewer than through the sender task. A ``send``
        that fails (the client is gone) ends the connection, as the sender's would."""
        self.sending = True
        self.queued += 1
        try:
            await self.send({"type": "websocket.send", "text": line.decode()})
        except Exception:
            if not self.stop.done():
                self.stop.set_result(None)
            return
        finally:
            self.sending = False
            if self.outbox:
                self.wake_sender.set()
        self.sent_one()

    def sent_one(self) -> None:
        self.sent += 1
        if self.sent_up_to:
            self.sent_up_to = _release(self.sent_up_to, self.sent)


def _server_transport(send: Send) -> asyncio.Transport | None:
    """The asyncio transport under the ASGI server's ``send``, where the server exposes it (uvicorn: ``send`` is
    a method of its protocol, which holds ``transport``); ``None`` elsewhere. ASGI has no event that drops a
    connection without a drain: this is the one place that reaches under the server for it."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if all(callable(getattr(transport, name, None)) for name in ("abort", "is_closing", "get_write_buffer_size")):
        return transport
    return None


def _drop(transport: asyncio.Transport) -> None:
    """Drop a connection the app closed: at once, with what its transport and the kernel hold for it (a reset,
    ``SO_LINGER`` 0), unless it closed in order already (the client's close frame came: nothing left to send)."""
    if transport.is_closing() and not transport.get_write_buffer_size():
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


async def _received(receive: Receive) -> dict[str, Any]:
    """``receive()`` in a coroutine: a server's ``receive`` may return an awaitable that is not one (granian)."""
    return await receive()


def _release(waiting: Iterable[tuple[int, asyncio.Future[None]]], sent: int) -> list[tuple[int, asyncio.Future[None]]]:
    """The waiters of :meth:`_Connection.until_sent` whose messages are all sent are released; the others kept."""
    kept = []
    for up_to, done in waiting:
        if up_to <= sent:
            if not done.done():
                done.set_result(None)
        else:
            kept.append((up_to, done))
    return kept
