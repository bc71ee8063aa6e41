"""Server-sent events: the body of a client that accepts them (MCP's clients always do) answered as on the plain
path, the response's head chosen at the first notification the handler writes before its answer: none, the plain
response (``application/json`` or 204); one, ``text/event-stream``, each notification a ``message`` event and the
answer the last one. Nothing is sent before that point, so the head can still be either.

- ASGI (:func:`asgi_async`, :func:`asgi_threaded`): the handler runs where the plain path runs it (an async one in
  the request's task, a sync one on a worker thread); its first notification starts an :class:`_AsgiStream` that
  sends the events as they come. With ``run_sync_inline``, a body that asks for notifications
  (:func:`asks_for_notifications`: progress, MCP's log messages) runs on a worker thread instead (the loop could
  not send them while the handler held it); another inline, its ``notify()`` events kept until it returns
  (:func:`send_buffered`).
- WSGI: a body that asks for notifications is answered on a thread of its own (:func:`wsgi_events`: the worker
  puts ``(kind, value)`` items on a queue, each notification, then the answer or an exception not answered, and
  the response's iterable yields them as they come); another on the server's thread as on the plain path, its
  ``notify()`` events kept until it returns (:func:`wsgi_buffered`).

A client that goes away mid-stream cancels the requests still running (:class:`~rpcwire.http._endpoint.Running`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import enum
import queue
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

from rpcwire.http._endpoint import Endpoint, Notifications, Running, encode_notification
from rpcwire.http._responses import Headers, answered, status_line

__all__ = [
    "STREAMED",
    "asgi_async",
    "asgi_threaded",
    "asks_for_notifications",
    "send_buffered",
    "wants_events",
    "wsgi_buffered",
    "wsgi_events",
]

_EVENT, _ANSWERED, _FAILED = "event", "answered", "failed"
_EVENT_HEADERS: Headers = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]
_ASGI_EVENT_HEADERS = [(name.lower().encode(), value.encode()) for name, value in _EVENT_HEADERS]


def wants_events(accept: str | None) -> bool:
    """Whether an ``Accept`` header names ``text/event-stream``."""
    if not accept:
        return False
    wanted = _WANTS_EVENTS.get(accept)
    if wanted is None:
        media_ranges = accept.split(",") if "event-stream" in accept.lower() else ()  # most, without splitting
        wanted = "text/event-stream" in (media_range.partition(";")[0].strip().lower() for media_range in media_ranges)
        if len(_WANTS_EVENTS) < _WANTS_EVENTS_KEPT:
            _WANTS_EVENTS[accept] = wanted
    return wanted


# A client sends the same Accept with every request (MCP's: "application/json, text/event-stream"): its answer is
# kept, up to a bound (a header a client makes up each time fills it, then is parsed each time).
_WANTS_EVENTS: dict[str, bool] = {}
_WANTS_EVENTS_KEPT = 64


def _event(line: bytes) -> bytes:
    """One SSE ``message`` event; compact JSON never holds a raw newline, so one ``data`` line is enough."""
    return b"event: message\ndata: " + line + b"\n\n"


def _run_sync(  # noqa: PLR0917  (a thread's target: its arguments passed positionally)
    endpoint: Endpoint,
    body: bytes,
    emit: Callable[[str, Any], None],
    running: Running,
    traceparent: str | None,
    source: dict[str, Any] | None = None,
) -> None:
    """On a worker thread: :meth:`Endpoint.answer_sync`, ``emit(_EVENT, line)`` for each notification the handler
    writes (progress), then ``emit(_ANSWERED, answer or None)``, or ``emit(_FAILED, exception)`` for a
    ``BaseException`` that is not answered."""
    notifications = Notifications(lambda line: emit(_EVENT, line))
    try:
        answer = endpoint.answer_sync(body, notifications, running, traceparent, source)
    except BaseException as exc:  # raised again on the server's side
        emit(_FAILED, exc)
    else:
        emit(_ANSWERED, answer)


# --- WSGI ----------------------------------------------------------------------------------------------


def wsgi_events(
    endpoint: Endpoint,
    body: bytes,
    start_response: Callable[..., Any],
    traceparent: str | None,
    environ: dict[str, Any],
) -> Iterable[bytes]:
    """``body`` answered on a thread of its own: the events as they come once a notification came first, else
    the plain response."""
    items: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
    running = Running()
    thread = threading.Thread(
        target=_run_sync,
        args=(endpoint, body, lambda kind, value: items.put((kind, value)), running, traceparent, environ),
        name="rpcwire-http-events",
        daemon=True,
    )
    thread.start()
    kind, value = items.get()
    if kind == _FAILED:
        raise value
    if kind == _ANSWERED:
        response = answered(value)
        start_response(status_line(response.status), response.headers)
        return [response.body] if response.body else []
    start_response("200 OK", _EVENT_HEADERS)  # progress came first: the answer is streamed
    return _event_stream(value, items, running)


def wsgi_buffered(start_response: Callable[..., Any], lines: list[bytes], answer: bytes | None) -> list[bytes]:
    """The events of a handler that ran on the server's thread (``notify()``'s, of a body that asks for no
    notifications), then its answer."""
    start_response("200 OK", _EVENT_HEADERS)
    return [_event(line) for line in lines] + ([] if answer is None else [_event(answer)])


def _event_stream(first: bytes, items: queue.SimpleQueue[tuple[str, Any]], running: Running) -> Iterator[bytes]:
    """The events of :func:`wsgi_events` after the first. Closed early (the server could not write: the client
    went away), the requests still running are cancelled (``current_request().cancelled``) and left to end
    on their thread, their events unread."""
    try:
        yield _event(first)
        while True:
            kind, value = items.get()
            if kind == _FAILED:
                raise value
            if value is not None:  # the answer comes last; notifications only have none
                yield _event(value)
            if kind == _ANSWERED:
                return
    finally:
        running.stop()


# --- ASGI ----------------------------------------------------------------------------------------------


class Streamed(enum.Enum):
    """What :func:`asgi_async` and :func:`asgi_threaded` return for a body whose answer went out as events (else they
    return the answer's bytes, or ``None``, for the caller to send as on the plain path)."""

    STREAMED = "streamed"


STREAMED = Streamed.STREAMED


async def asgi_async(  # noqa: PLR0917  (internal: ASGIApp passes what it read on)
    endpoint: Endpoint,
    body: bytes,
    send: Callable[[dict[str, Any]], Awaitable[None]],
    receive: Callable[[], Awaitable[dict[str, Any]]],
    traceparent: str | None,
    scope: dict[str, Any] | None = None,
) -> bytes | Streamed | None:
    """An async handler's answer, awaited in this task as on the plain path; its first notification starts an
    :class:`_AsgiStream` (a task) that sends the events as they come while the handler goes on."""
    stream = _AsgiStream(send, receive)
    try:
        answer = await endpoint.answer_async(body, stream, traceparent, stream, source=scope)
    except BaseException:
        stream.abandon()
        raise
    return await stream.finish(answer)


async def asgi_threaded(  # noqa: PLR0917  (internal: ASGIApp passes what it read on)
    endpoint: Endpoint,
    body: bytes,
    send: Callable[[dict[str, Any]], Awaitable[None]],
    receive: Callable[[], Awaitable[dict[str, Any]]],
    traceparent: str | None,
    scope: dict[str, Any] | None = None,
) -> bytes | Streamed | None:
    """A sync handler's answer from a worker thread, as on the plain path (``asyncio.to_thread``); its
    notifications are handed to the loop, the first of them starting the stream."""
    stream = _AsgiStream(send, receive)

    def answer() -> bytes | None:
        return endpoint.dispatch(body, traceparent, endpoint.handler, scope, notifications=stream, running=stream)

    work = asyncio.get_running_loop().run_in_executor(None, contextvars.copy_context().run, answer)  # to_thread's
    try:
        done = await work
    except BaseException:
        stream.abandon()
        if not work.done():  # this task was cancelled: stop what still runs (the thread ends on its own)
            stream.stop()
        raise
    return await stream.finish(done)


async def send_buffered(
    send: Callable[[dict[str, Any]], Awaitable[None]], lines: list[bytes], answer: bytes | None
) -> None:
    """The events of a handler that ran inline on the loop (nothing could be sent while it ran), then its answer,
    as one body."""
    await send({"type": "http.response.start", "status": 200, "headers": _ASGI_EVENT_HEADERS})
    chunks = [_event(line) for line in lines]
    if answer is not None:
        chunks.append(_event(answer))
    await send({"type": "http.response.body", "body": b"".join(chunks), "more_body": False})


def asks_for_notifications(body: bytes) -> bool:
    """Whether a body may ask for notifications: progress (MCP's ``progressToken``, LSP's ``workDoneToken``) or
    MCP's log messages (``io.modelcontextprotocol/logLevel``) somewhere in it. A byte search, well under a µs: a
    false positive only takes the streamed path where it was not needed; a key written with ``\\u`` escapes is
    not seen, and its notifications wait for the answer, as those of a body that asks for none do."""
    # find, not ``in``: a third of the time on a small body (CPython 3.11).
    if body.find(b"Token") >= 0 and (body.find(b"progressToken") >= 0 or body.find(b"workDoneToken") >= 0):
        return True
    return body.find(b"logLevel") >= 0


class _AsgiStream(Running):
    """The requests of a body (:class:`Running`, for a client that goes away to cancel), where they write their
    notifications, and its response once the handler writes one before its answer: nothing until the first
    notification (:meth:`event`, on the loop), which starts a task that sends the head, then each event as it
    comes; the answer (:meth:`finish`) is the last event. Without one, nothing more is made (no queue, no task)
    and the caller sends the answer as on the plain path. One object for the three: it is made for every call."""

    __slots__ = ("_from_threads", "_items", "_loop", "_receive", "_send", "_task")

    def __init__(
        self, send: Callable[[dict[str, Any]], Awaitable[None]], receive: Callable[[], Awaitable[dict[str, Any]]]
    ) -> None:
        self._contexts = []
        self.stopped = False
        self._send = send
        self._receive = receive
        self._items: asyncio.Queue[bytes | tuple[bytes | None]] | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop = asyncio.get_running_loop()
        self._from_threads = False

    def write_notification(self, method: str, params: Any = None) -> None:
        self.write(encode_notification(method, params))

    def write(self, line: bytes) -> None:
        """A notification, from the loop's thread or another (a sync handler's worker: a sync function of a
        registry that also holds async ones runs on one), handed to the loop in order: before the answer, which
        comes back to the loop after it."""
        try:
            here = asyncio.get_running_loop() is self._loop
        except RuntimeError:  # no loop running in this thread
            here = False
        if here:
            self.event(line)
            return
        self._from_threads = True  # before the hand-over: the worker's return is seen after it (handed_over)
        with contextlib.suppress(RuntimeError):  # the loop is gone
            self._loop.call_soon_threadsafe(self.event, line)

    async def handed_over(self) -> None:
        """On the loop, once the handler returned: the notifications a worker thread handed to the loop have
        reached :meth:`event`. Each was queued on the loop (``call_soon_threadsafe``) before the thread returned,
        but the answer may come back without a turn of the loop: a worker that ends before its future is chained
        (free-threaded CPython, or a thread just started under the GIL) completes it at once, and the answer would
        overtake them (sent as plain JSON, the notifications after it dropped). One turn runs them, in order."""
        if self._from_threads:
            await asyncio.sleep(0)

    def event(self, line: bytes) -> None:
        """On the loop: the first notification starts the stream."""
        if self._task is not None and self._task.done():  # the client went away: nobody reads it
            return
        if self._items is None:
            self._items = asyncio.Queue()
            self._task = self._loop.create_task(self._stream(self._items))
        self._items.put_nowait(line)

    async def finish(self, answer: bytes | None) -> bytes | Streamed | None:
        """Once the handler returned: ``answer``, to send as on the plain path, when nothing was streamed; else
        :data:`STREAMED` once it was sent as the last event (or the client went away). The notifications a worker
        handed over go first (:meth:`handed_over`)."""
        await self.handed_over()
        if self._task is None or self._items is None:
            self._contexts.clear()  # they refer to this stream: no cycle left for the collector
            return answer
        self._items.put_nowait((answer,))
        try:
            await self._task
        finally:
            self._contexts.clear()
        return STREAMED

    def abandon(self) -> None:
        """The answer will not come (the handler raised what is not answered): the stream stops."""
        if self._task is not None:
            self._task.cancel()

    async def _stream(self, items: asyncio.Queue[bytes | tuple[bytes | None]]) -> None:
        loop = asyncio.get_running_loop()
        gone = loop.create_task(_disconnected(self._receive))
        send = self._send
        try:
            await send({"type": "http.response.start", "status": 200, "headers": _ASGI_EVENT_HEADERS})
            while True:
                if items.empty():
                    item = loop.create_task(items.get())
                    await asyncio.wait((item, gone), return_when=asyncio.FIRST_COMPLETED)
                    if not item.done():  # the client went away
                        item.cancel()
                        self.stop()
                        return
                    value = item.result()
                else:
                    value = items.get_nowait()
                if isinstance(value, tuple):  # the answer, the last event (none: a body of notifications only)
                    chunk = b"" if value[0] is None else _event(value[0])
                    await send({"type": "http.response.body", "body": chunk, "more_body": False})
                    return
                await send({"type": "http.response.body", "body": _event(value), "more_body": True})
        except OSError:  # a server that raises once the client is gone (ASGI 2.4)
            self.stop()
        finally:
            gone.cancel()


async def _disconnected(receive: Callable[[], Awaitable[dict[str, Any]]]) -> None:
    """Returns once the server reports the client gone (after the body, ``receive`` waits for nothing else), or
    ``receive`` fails (the connection is no longer usable either way)."""
    with contextlib.suppress(Exception):
        while (await receive())["type"] != "http.disconnect":
            pass
