"""Server-sent events: a body answered while its notifications go out as ``message`` events, bridged from the
worker that answers it (a thread for a sync handler, a task for an async one) to the server's stream.

The worker puts ``(kind, value)`` items on a queue: each notification the handler writes (``_EVENT``, its line),
then the answer (``_ANSWERED``, its bytes or ``None``) or an exception not answered (``_FAILED``, raised again on
the server's side). If the answer comes before any notification, the plain response goes out instead (no events).
A client that goes away mid-stream cancels the requests still running (:class:`~rpcwire.http._endpoint.Running`).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

from rpcwire.http._endpoint import Endpoint, Notifications, Running
from rpcwire.http._responses import Headers, HTTPResponse, answered, status_line

__all__ = ["asgi_events", "wants_events", "wsgi_events"]

_EVENT, _ANSWERED, _FAILED = "event", "answered", "failed"
_EVENT_HEADERS: Headers = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]
_ASGI_EVENT_HEADERS = [(name.lower().encode(), value.encode()) for name, value in _EVENT_HEADERS]


def wants_events(accept: str | None) -> bool:
    """Whether an ``Accept`` header names ``text/event-stream``."""
    if not accept or "event-stream" not in accept.lower():  # the common case, without splitting
        return False
    return "text/event-stream" in (media_range.partition(";")[0].strip().lower() for media_range in accept.split(","))


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


async def _run_async(
    endpoint: Endpoint,
    body: bytes,
    put: Callable[[tuple[str, Any]], None],
    running: Running,
    traceparent: str | None,
    *,
    scope: dict[str, Any] | None = None,
) -> None:
    """:func:`_run_sync` for an async handler, as a task on the loop."""
    try:
        notifications = Notifications(lambda line: put((_EVENT, line)))
        answer = await endpoint.answer_async(body, notifications, traceparent, running, source=scope)
    except BaseException as exc:  # raised again by asgi_events, if it still listens
        put((_FAILED, exc))
    else:
        put((_ANSWERED, answer))


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


async def asgi_events(  # noqa: PLR0917  (internal: ASGIApp passes what it read on)
    endpoint: Endpoint,
    body: bytes,
    send: Callable[[dict[str, Any]], Awaitable[None]],
    receive: Callable[[], Awaitable[dict[str, Any]]],
    is_async: bool,
    traceparent: str | None,
    scope: dict[str, Any] | None = None,
) -> HTTPResponse | None:
    """If a notification comes before the answer, send the events as they come (``None``: done); else the plain
    response to send. A client that goes away (``http.disconnect``, or a ``send`` that fails) cancels the
    requests still running (``current_request().cancelled``; an async handler's task is cancelled), which are
    then awaited."""
    loop = asyncio.get_running_loop()
    items: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    running = Running()
    worker: asyncio.Future[Any]
    if is_async:
        worker = loop.create_task(_run_async(endpoint, body, items.put_nowait, running, traceparent, scope=scope))
    else:

        def emit(kind: str, value: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone
                loop.call_soon_threadsafe(items.put_nowait, (kind, value))

        # On a thread even with run_sync_inline: the events go out while the handler runs.
        worker = asyncio.ensure_future(asyncio.to_thread(_run_sync, endpoint, body, emit, running, traceparent, scope))
    gone = loop.create_task(_disconnected(receive))
    started = False
    try:
        while True:
            item = loop.create_task(items.get())
            await asyncio.wait((item, gone), return_when=asyncio.FIRST_COMPLETED)
            if not item.done():  # the client went away
                item.cancel()
                return None
            kind, value = item.result()
            if kind == _FAILED:
                raise value
            if kind == _ANSWERED and not started:
                return answered(value)
            if not started:
                await send({"type": "http.response.start", "status": 200, "headers": _ASGI_EVENT_HEADERS})
                started = True
            last = kind == _ANSWERED
            chunk = b"" if value is None else _event(value)
            try:
                await send({"type": "http.response.body", "body": chunk, "more_body": not last})
            except OSError:  # a server that raises once the client is gone (ASGI 2.4)
                return None
            if last:
                return None
    finally:
        gone.cancel()
        if not worker.done():  # the client went away (or this task was cancelled): stop what still runs
            running.stop()
        await asyncio.gather(worker, return_exceptions=True)


async def _disconnected(receive: Callable[[], Awaitable[dict[str, Any]]]) -> None:
    """Returns once the server reports the client gone (after the body, ``receive`` waits for nothing else), or
    ``receive`` fails (the connection is no longer usable either way)."""
    with contextlib.suppress(Exception):
        while (await receive())["type"] != "http.disconnect":
            pass
