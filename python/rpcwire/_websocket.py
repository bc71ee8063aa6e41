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
- **Concurrency** is the serving session's (:mod:`rpcwire._session`, whose rules the engine's concurrent servers
  follow too); this connection is one of its drivers. Each request the session starts runs as a task: an
  ``async def`` handler awaited on the loop, a sync one on a worker thread (``asyncio.to_thread``; on the loop with
  ``run_sync_inline``), at most ``max_concurrency`` at once, each answered as it finishes (so in any order); up to
  ``max_concurrency`` more wait for their turn, and reading goes on past them, the requests read then held (up to
  1,024 of them or 1 MiB), so that a cancellation behind them is still read and acted on. A request has a context
  (``current_request()``) whose ``notify()`` and ``progress()`` are sent on the socket while it runs, before its
  answer. A notification from the client is run (awaited) before the next frame is read, once every answer
  finished before it is sent. ``$/cancelRequest`` (LSP) and ``notifications/cancelled`` (MCP) cancel a request in
  flight: an async handler's task is cancelled, a sync handler sees ``current_request().cancelled``; one still
  held never runs; answered -32800 (LSP) or not at all (MCP).
- **The end.** When the client goes away (or sends its close frame), the requests in flight are cancelled (their
  answers go nowhere), and the app returns once their tasks ended (``EXIT_GRACE`` at most). While reading is
  paused (below), one ``receive`` stays pending so that this is still seen; a frame it gets is held, the next to
  be served, and a client that leaves after sending it is seen once reading goes on. A handler's ``SystemExit``
  (another ``BaseException`` that is not an ``Exception``) stops the connection as it stops the engine: what is in
  flight gets ``EXIT_GRACE`` to finish and be sent, then the app raises it.
- **Backpressure.** A client that sends without reading is read no further (beyond that one held frame,
  ``receive`` is not called, so the server stops reading its socket) while the session's read-ahead is full, or
  while more than ``_PAUSE_BYTES`` wait to be sent (answers and handlers' notifications); the held requests do not
  start meanwhile. The messages waiting to be sent are held in one queue; the ASGI server's ``send`` waits while
  its transport's buffer is full. Beyond ``max_queued_bytes`` waiting (a handler that keeps notifying a client that
  does not read), the session drops the peer (its ``Drop``): the connection is closed with 1008, logged at WARNING
  on the ``rpcwire`` logger, and what is in flight is cancelled. The close frame waits ``_CLOSE_WAIT`` (1 s) at
  most for room; at that deadline a client that has not answered it is dropped (:func:`_drop`: a reset, where the
  server's transport can be reached, uvicorn's), since the server's own close would wait for a drain that a client
  that does not read never allows.
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
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from rpcwire import StdioTransport, _core
from rpcwire._answer import call, call_async, failure_answer
from rpcwire._async_server import Turns
from rpcwire._context import RequestContext
from rpcwire._in_flight import EXIT_GRACE
from rpcwire._session import Action, Cancel, Drop, Grace, RunNotification, Session, Settled, Start, Stop, Write
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
_PAUSE_BYTES = 256 * 1024  # more than this waiting to be sent: the client's next frames are not read (the session's)
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


class _Notifications:
    """Where a request context writes its notifications: encoded at once (by the core, on the handler's thread,
    so that one the encoder refuses raises in the handler), then queued to be sent, from any thread."""

    __slots__ = ("_connection",)

    def __init__(self, connection: _Connection) -> None:
        self._connection = connection

    def write_notification(self, method: str, params: Any = None) -> None:
        self._connection.queue_from_any_thread(_core._encode_request(method, params))


class _Connection:
    """One accepted connection, a driver of the serving session (:mod:`rpcwire._session`), all on the loop's thread:
    a reader coroutine feeds the session the client's frames and runs the notifications it hands back, a task runs
    each request it starts, and a sender task sends what waits (a request's task sends its answer itself when
    nothing waits). Sync handlers' notifications reach the loop with ``call_soon_threadsafe``, in their order."""

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
        self.max_queued_bytes = server.max_queued_bytes
        self.session = Session(
            StdioTransport,
            server.max_concurrency,
            make_context=self.context,
            unwritten_bytes=min(_PAUSE_BYTES, server.max_queued_bytes),
            drop_bytes=server.max_queued_bytes,
        )
        self.tasks: set[asyncio.Task[None]] = set()
        self.turns = Turns(server.max_concurrency, self.loop)  # handlers running (the session starts up to 2N)
        self.outbox: collections.deque[tuple[bytes, bool]] = collections.deque()  # (message, an answer?), in order
        self.sending = False  # a message is in the server's send: by the sender task, or by a request's own
        self.wake_sender = asyncio.Event()
        self.changed = asyncio.Event()  # for the reader and the end: reading resumed, a notification, a stop...
        self.held: asyncio.Task[dict[str, Any]] | None = None  # the one receive() pending while reading is paused
        self.notification: RunNotification | None = None  # the notification the reader is to run
        self.stop: Stop | None = None
        self.stopped: asyncio.Future[None] = self.loop.create_future()  # done at the first Stop
        self.settled = False
        self.dropped = False  # the session said Drop: the connection is closed with 1008
        self.abandoned = False  # what is in flight is cancelled: nothing is answered any more
        self.start_task: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]] = self.loop.create_task
        if sys.version_info >= (3, 12) and self.loop.get_task_factory() is None:
            # The handler runs up to its first wait when its task is made: a handler that never waits is answered
            # (and its answer sent) in the turn of the loop that read its frame, as the engine's asyncio mode does.
            self.start_task = functools.partial(asyncio.Task, loop=self.loop, eager_start=True)

    async def serve(self) -> None:
        reader = self.loop.create_task(self.read())
        sender = self.loop.create_task(self.write())
        try:
            await asyncio.wait((reader, self.stopped), return_when=asyncio.FIRST_COMPLETED)
            if self.stop is None:  # the reader failed
                self.carry(self.session.stop(reader.exception() or RuntimeError("the reader ended")))
        except BaseException as exc:  # this task cancelled: the server shuts down
            self.carry(self.session.stop(exc))
        await self.end(reader, sender)

    async def end(self, reader: asyncio.Task[None], sender: asyncio.Task[None]) -> None:
        """The stop: what is in flight gets its grace, then is cancelled (its tasks get ``EXIT_GRACE`` to end);
        what finished gets the write grace to be sent; a dropped connection is closed (1008); the reason raised."""
        grace = Grace()
        while not self.settled:
            assert self.stop is not None
            left = grace.left(self.stop, self.loop.time())
            if left is not None and left <= 0:
                break
            await self.until_changed(left)
        self.abandoned = True
        reader.cancel()
        self.carry(self.session.abandon())  # a sync handler sees it; nothing is answered any more
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        if self.held is not None:  # a receive() made while reading was paused, never awaited by the reader
            self.held.cancel()
            await asyncio.gather(self.held, return_exceptions=True)
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=EXIT_GRACE)
        stop = self.stop
        assert stop is not None
        deadline = None if stop.write_grace is None else self.loop.time() + stop.write_grace
        while stop.write_grace != 0 and (self.outbox or self.sending) and not sender.done():
            remaining = None if deadline is None else deadline - self.loop.time()
            if remaining is not None and remaining <= 0:
                break
            await self.until_changed(remaining)
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)
        if self.dropped:
            await self.close(_POLICY_VIOLATION)
        if stop.reason is not None:
            raise stop.reason

    async def until_changed(self, timeout: float | None) -> None:
        """Until :attr:`changed` is set (``timeout`` seconds at most)."""
        self.changed.clear()
        waiter = self.loop.create_task(self.changed.wait())
        try:
            await asyncio.wait((waiter,), timeout=timeout)
        finally:
            waiter.cancel()

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

    # --- the session's actions ------------------------------------------------------------------------------

    def carry(self, actions: list[Action], *, nested: bool = False) -> None:
        """Carry out the session's actions (``nested``: in a request's task, whose requests started are started
        on the loop after it, not inside it: an eager start would nest)."""
        for action in actions:
            kind = type(action)
            if kind is Write:
                for line in action.lines:  # type: ignore[union-attr]
                    self.put(line, True)
            elif kind is Start:
                if nested:  # in a request's task: started after it, on the loop (an eager start would nest in it)
                    self.loop.call_soon(self.start, action)  # type: ignore[arg-type]
                else:
                    self.start(action)  # type: ignore[arg-type]
            elif kind is Cancel:
                action.context._cancel(action.dialect)  # type: ignore[union-attr]
            elif kind is Drop:
                self.drop(action)  # type: ignore[arg-type]
            else:
                if kind is RunNotification:
                    self.notification = action  # type: ignore[assignment]
                elif kind is Stop:
                    self.stop = action  # type: ignore[assignment]
                    if not self.stopped.done():
                        self.stopped.set_result(None)
                elif kind is Settled:
                    self.settled = True
                self.changed.set()  # (reading paused or resumed too)

    def drop(self, drop: Drop) -> None:
        """Rule 8: too much waits for a client that does not read: nothing more is sent, the connection is closed
        (1008) once what is in flight is cancelled."""
        logger.warning(
            "closing a WebSocket connection (1008): %d messages (%d bytes) wait to be sent to a client that "
            "does not read, over max_queued_bytes (%d); its requests in flight are cancelled",
            drop.unwritten,
            drop.size,
            self.max_queued_bytes,
        )
        self.outbox.clear()
        self.dropped = True

    # --- reading ------------------------------------------------------------------------------------------

    async def read(self) -> None:
        """The client's frames, each fed to the session while it says ``reading``; the notifications it hands back
        run here, before the next frame is read."""
        receive, endpoint, session = self.receive, self.endpoint, self.session
        while self.stop is None:
            notification = self.notification
            if notification is not None:
                self.notification = None
                await self.run_notification(notification)
                continue
            if not session.reading:
                await self.until_reading()
                continue
            if self.held is not None:
                event = await self.held
                self.held = None
            else:
                event = await receive()
            kind = event["type"]
            if kind == "websocket.disconnect":
                self.carry(session.peer_gone())
                return
            if kind != "websocket.receive":
                continue
            text = event.get("text")
            body = text.encode() if text is not None else event.get("bytes") or b""
            actions = session.received(endpoint.read(body))
            if len(actions) == 1 and type(actions[0]) is Start:  # a request admitted (the common case)
                self.start(actions[0])
            elif actions:
                self.carry(actions)

    async def until_reading(self) -> None:
        """While the session says no reading (and has nothing else for the reader), with one ``receive`` pending
        (:attr:`held`), so that a client that goes away meanwhile is seen to (the session hears it: what is in
        flight is cancelled). A frame it gets is held, the next to be served: one frame at most, so backpressure
        holds (a client gone after that frame is seen once reading goes on, or when a ``send`` fails)."""
        while not self.session.reading and self.notification is None and self.stop is None:
            self.changed.clear()
            if self.held is None:
                self.held = self.loop.create_task(_received(self.receive))
            if self.held.done():  # a frame is held: only the session is waited for
                await self.changed.wait()
                continue
            changed = self.loop.create_task(self.changed.wait())
            try:
                await asyncio.wait((changed, self.held), return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()
            if self.held.done() and self.held.result()["type"] == "websocket.disconnect":
                self.held = None
                self.carry(self.session.peer_gone())

    async def run_notification(self, notification: RunNotification) -> None:
        request, context = notification.request, notification.context
        try:
            try:
                await self.call(request, context)
            except asyncio.CancelledError as exc:
                if self.abandoned:
                    raise
                failure_answer(StdioTransport, request, context, exc)  # logged, as every mode logs it
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # SystemExit and the like: the connection ends, the app raises it
            self.carry(self.session.stop(exc))
        self.carry(self.session.notified(notification))

    # --- requests -----------------------------------------------------------------------------------------

    def context(self, request: Request) -> RequestContext:
        """The context of a request of this connection (``current_request()``): the one place that makes it.
        Its ``http`` is the handshake's (with the ``user`` that ``authenticate`` gave)."""
        context = RequestContext(request, self.notifications)
        context._http = self.scope
        return context

    def start(self, start: Start) -> None:
        task = self.start_task(self.run(start))
        if not task.done():  # an eager task may be done already: nothing is left to cancel or wait for
            if self.is_async:
                start.context._task = task  # a cancellation cancels it
            self.tasks.add(task)

    async def run(self, start: Start) -> None:
        request, context = start.request, start.context
        try:
            try:
                turns = self.turns
                if turns.running < turns.limit and not turns.waiting:  # (a counter, no semaphore's coroutine)
                    turns.running += 1
                else:
                    await turns.wait()  # cancelled while it waits: never run
                try:
                    answer = await self.call(request, context)
                finally:
                    turns.done()
            except asyncio.CancelledError as exc:
                if self.abandoned:  # the connection is closing: nothing is answered
                    raise
                answer = failure_answer(StdioTransport, request, context, exc, expose_errors=self.expose_errors)
        except asyncio.CancelledError:
            self.ended(self.session.finished(start, None))
            raise
        except BaseException as exc:  # a handler's SystemExit and the like: the connection ends, the app raises it
            self.ended(self.session.failed(start, exc))
            return
        context._task = None  # answered: a cancellation that comes now must not cancel the sending of it
        actions = self.session.finished(start, answer)
        if len(actions) == 1 and not self.sending and not self.outbox and type(actions[0]) is Write and not self.stop:
            lines = actions[0].lines
            if len(lines) == 1:  # nothing before it to wait for: no hop to the sender task
                self.tasks.discard(asyncio.current_task())
                await self.send_now(lines[0])
                return
        self.ended(actions)

    def ended(self, actions: list[Action]) -> None:
        self.tasks.discard(asyncio.current_task())
        self.carry(actions, nested=True)

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

    # --- sending ------------------------------------------------------------------------------------------

    def put(self, line: bytes, answer: bool) -> None:
        """On the loop: a message to send, after those queued before it (nothing once nothing can be sent)."""
        stop = self.stop
        if stop is not None and stop.write_grace == 0:
            return
        self.outbox.append((line, answer))
        self.wake_sender.set()

    def queue(self, line: bytes) -> None:
        """On the loop: a handler's notification to send; the session counts it as waiting (its bounds)."""
        self.put(line, False)
        self.carry(self.session.queued(len(line)))

    def queue_from_any_thread(self, line: bytes) -> None:
        if threading.get_ident() == self.loop_thread:
            self.queue(line)
        else:
            self.from_threads = True  # before the hand-over: call() looks at it once the worker returned
            with contextlib.suppress(RuntimeError):  # the loop is closed: the connection is long gone
                self.loop.call_soon_threadsafe(self.queue, line)

    async def write(self) -> None:
        """The sender: each queued message in turn, as a text frame (the server's ``send`` waits while its
        transport's buffer is full), never while a request's task sends its answer itself (:meth:`send_now`)."""
        outbox, send, session = self.outbox, self.send, self.session
        while True:
            while not outbox or self.sending:
                if self.stop is not None:
                    self.changed.set()  # the end may wait for what is left to be sent
                self.wake_sender.clear()
                await self.wake_sender.wait()
            line, answer = outbox.popleft()
            self.sending = True
            try:
                await send({"type": "websocket.send", "text": line.decode()})
            except Exception:
                self.carry(session.peer_gone())  # the client is gone (a server may say so with any error)
                return
            finally:
                self.sending = False
            actions = session.written(1, len(line)) if answer else session.written(0, len(line), 1)
            if actions:
                self.carry(actions)

    async def send_now(self, line: bytes) -> None:
        """A request's task sends its answer itself, when nothing waits to be sent and nothing is being sent: the
        common case of a client that reads, one hop of the loop fewer than through the sender task. A ``send``
        that fails (the client is gone) ends the connection, as the sender's would."""
        self.sending = True
        try:
            await self.send({"type": "websocket.send", "text": line.decode()})
        except Exception:
            self.carry(self.session.peer_gone())
            return
        finally:
            self.sending = False
            if self.outbox:
                self.wake_sender.set()
        actions = self.session.written(1, len(line))
        if actions:
            self.carry(actions, nested=True)


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
