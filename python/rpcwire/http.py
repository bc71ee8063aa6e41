"""JSON-RPC over HTTP: a WSGI and an ASGI application, plain callables with no framework dependency.

One POST carries one JSON text (a request, a notification or a batch) answered by :func:`rpcwire.dispatch`:

- POST with ``application/json`` (or ``application/json-rpc``, ``application/jsonrequest``; parameters such
  as ``; charset=utf-8`` allowed): 200 ``application/json`` with the answer (JSON-RPC errors too);
- only notifications: 204, no body;
- another method: 405 with ``Allow: POST``;
- an ``Origin`` header that is not allowed: 403 (default: only the server's own host and port);
- another content type, or a ``charset`` other than UTF-8: 415;
- a body over ``max_body_bytes``: 413, the body not read whole (``Content-Length`` first, else counted);
- WSGI, no ``Content-Length`` and a server that does not end the input (``wsgi.input_terminated``): 411.
- ``Accept: text/event-stream`` and the handler writes a notification (``current_request().progress()``,
  ``.notify()``) before its answer: 200 ``text/event-stream``, each notification a ``message`` event sent as it
  is written, the answer the last event. Without a notification first, the plain answer as above.

- A client that goes away mid-stream: the requests still running are cancelled (``current_request().cancelled``).

The checks run in that order (405, 403, 415, 413/411). Mounting: ``WSGIApp`` is a WSGI application (gunicorn,
granian, ``wsgiref``; in Flask, :func:`flask_view`), ``ASGIApp`` an ASGI one (uvicorn, granian; Starlette and
FastAPI ``app.mount("/rpc", ASGIApp(handler))``); where a sync handler runs under ASGI: ``run_sync_inline``.
See README, "HTTP".

The hot path (a small request, a sync handler, no events) costs a few µs over a constant reply, measured in
process by ``make bench-http``: only the headers used are read, the refusals are made once, the answer goes
out with no response object in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import queue
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

from rpcwire import DEFAULT_MAX_BATCH, DEFAULT_MAX_DEPTH, Request, StdioTransport, dispatch
from rpcwire._engine import (
    RequestContext,
    _batch_line,
    _call,
    _cancelled_answer,
    _current,
    _failure_answer,
    _result_answer,
    is_async_handler,
)

__all__ = ["DEFAULT_MAX_BODY_BYTES", "JSON_CONTENT_TYPES", "ASGIApp", "WSGIApp", "flask_view"]

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
"""16 MiB: a body is held whole before it is decoded (a line is not: ``serve`` drops an over-long one as
it arrives), once per request in flight, so the transport's 64 MiB times a server's concurrent requests
would be too much to accept by default; 16 MiB is still far above any JSON-RPC call in practice."""

JSON_CONTENT_TYPES = frozenset({"application/json", "application/json-rpc", "application/jsonrequest"})

_READ_CHUNK = 64 * 1024
_DEFAULT_PORTS = {"http": "80", "https": "443", "ws": "80", "wss": "443"}

Headers = list[tuple[str, str]]


class _Response:
    __slots__ = ("_asgi_headers", "body", "headers", "status")

    def __init__(self, status: int, body: bytes = b"", headers: Headers | None = None) -> None:
        self.status = status
        self.body = body
        self.headers = headers or []
        self._asgi_headers: list[tuple[bytes, bytes]] | None = None

    def asgi_start(self) -> dict[str, Any]:
        """The ``http.response.start`` message (its headers encoded once for the refusals, which are shared)."""
        if self._asgi_headers is None:
            self._asgi_headers = [
                (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in self.headers
            ]
        return {"type": "http.response.start", "status": self.status, "headers": list(self._asgi_headers)}


_REASONS = {
    200: "OK",
    204: "No Content",
    400: "Bad Request",
    403: "Forbidden",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Content Too Large",
    415: "Unsupported Media Type",
}
_STATUS_LINES = {status: f"{status} {reason}" for status, reason in _REASONS.items()}


def _refusal(status: int, text: str, headers: Headers | None = None) -> _Response:
    body = text.encode() + b"\n"
    return _Response(
        status,
        body,
        [("Content-Type", "text/plain; charset=utf-8"), *(headers or []), ("Content-Length", str(len(body)))],
    )


_METHOD_NOT_ALLOWED = _refusal(405, "405 Method Not Allowed: JSON-RPC takes POST", [("Allow", "POST")])
_FORBIDDEN = _refusal(403, "403 Forbidden: origin not allowed")
_UNSUPPORTED = _refusal(415, "415 Unsupported Media Type: send application/json (UTF-8)")
_BAD_LENGTH = _refusal(400, "400 Bad Request: invalid Content-Length")
_LENGTH_REQUIRED = _refusal(411, "411 Length Required")
_NO_CONTENT = _Response(204)


def _strip_default_port(netloc: str, scheme: str) -> str:
    default = _DEFAULT_PORTS.get(scheme)
    return netloc[: -len(default) - 1] if default and netloc.endswith(":" + default) else netloc


class _Running:
    """The request contexts of one streamed body, for a client that goes away to cancel: those running, and
    those not yet started (cancelled as they start, so that they never run)."""

    def __init__(self) -> None:
        self._contexts: list[RequestContext] = []
        self._stopped = False

    def add(self, context: RequestContext) -> None:
        self._contexts.append(context)
        if self._stopped:
            context._cancel("lsp")

    def stop(self) -> None:
        self._stopped = True
        for context in list(self._contexts):
            if not context._done:
                context._cancel("lsp")


class _Endpoint:
    """What both applications do with a request's method and headers, and with its body."""

    def __init__(
        self,
        handler: Callable[[str, Any], Any],
        max_body_bytes: int,
        allowed_origins: Iterable[str] | str | None,
        max_depth: int,
        max_batch: int | None,
    ) -> None:
        if not callable(handler):
            raise TypeError("handler must be callable")
        if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
            raise ValueError(f"max_body_bytes must be a positive int, not {max_body_bytes!r}")
        self.handler = handler
        self.max_body_bytes = max_body_bytes
        if allowed_origins is None or allowed_origins == "*":
            self.allowed_origins: frozenset[str] | str | None = allowed_origins
        elif isinstance(allowed_origins, str):
            raise ValueError('allowed_origins is a list of origins, "*" or None')
        else:
            self.allowed_origins = frozenset(allowed_origins)
        self.max_depth = max_depth
        self.max_batch = max_batch
        self.limits = {"max_message_bytes": max_body_bytes, "max_depth": max_depth, "max_batch": max_batch}
        dispatch(b"[]", handler, **self.limits)  # the limits checked now, not at the first request
        # Whether the handler is async, asked once unless it can change: a registry made before its functions
        # may gain an async one later (its rpcwire_async is read at each request; is_async_handler is 0.7 µs).
        tagged = hasattr(handler, "rpcwire_async") and not inspect.iscoroutinefunction(handler)
        self.fixed_async: bool | None = None if tagged else is_async_handler(handler)
        self._too_large = _refusal(413, f"413 Content Too Large: the body is limited to {max_body_bytes} bytes")

    def refuse(  # noqa: PLR0917  (on every request: positional, no keyword parsing)
        self, method: str, scheme: str, content_type: str, length: str | None, origin: str | None, host: str | None
    ) -> _Response | None:
        """The response that refuses the request before its body is read, or ``None`` to go on. Only the headers
        used are read, each ``None`` when absent: gathering every header into a dict cost 2 µs a request."""
        if method != "POST":
            return _METHOD_NOT_ALLOWED
        if origin is not None and not self.origin_allowed(origin, host, scheme):
            return _FORBIDDEN
        if not _is_json(content_type):
            return _UNSUPPORTED
        if length is not None:
            if not length.isdigit() or not length.isascii():
                return _BAD_LENGTH
            if int(length) > self.max_body_bytes:
                return self._too_large
        return None

    def origin_allowed(self, origin: str, host: str | None, scheme: str) -> bool:
        if self.allowed_origins == "*":
            return True
        if self.allowed_origins is not None:
            return origin in self.allowed_origins
        # Same host: the Origin's host[:port] is the Host header's (default ports left out of both).
        try:
            parts = urlsplit(origin)
        except ValueError:
            return False
        if not parts.scheme or not parts.netloc or host is None:
            return False
        scheme = parts.scheme.lower()
        return _strip_default_port(parts.netloc.lower(), scheme) == _strip_default_port(host.lower(), scheme)

    def too_large(self) -> _Response:
        return self._too_large

    def is_async(self) -> bool:
        fixed = self.fixed_async
        return getattr(self.handler, "rpcwire_async", False) is True if fixed is None else fixed

    def dispatch(self, body: bytes) -> bytes | None:
        # The limits as keywords, not **self.limits: 0.35 µs less a call (measured).
        return dispatch(
            body,
            self.handler,
            max_message_bytes=self.max_body_bytes,
            max_depth=self.max_depth,
            max_batch=self.max_batch,
        )

    # --- with a request context per request (server-sent events, async handlers) ---

    def _open(self, body: bytes, sink: Any) -> tuple[Any, Any]:
        # The core classifies the body and encodes the notifications: a transport reading the body as one
        # line (a newline is JSON whitespace outside strings and invalid inside them, as "\r" is, and "\r"
        # does not end a line) and writing each notification into ``sink`` (an event, or nowhere).
        transport = StdioTransport(io.BytesIO(body.replace(b"\n", b"\r")), sink, **self.limits)
        return transport, transport._read_message()

    def run_streamed(self, body: bytes, emit: Callable[[str, Any], None], running: _Running) -> None:
        """On a worker thread: answer ``body`` with a request context per request (each added to ``running``
        as it starts, for a client that goes away to cancel), ``emit(_EVENT, line)`` for each notification
        the handler writes (progress), then ``emit(_ANSWERED, answer or None)``, or ``emit(_FAILED, exception)``
        for a ``BaseException`` that is not answered."""
        try:
            transport, message = self._open(body, _EventSink(emit))
            if message is None:  # a blank body: dispatch's -32600
                answer = dispatch(body, self.handler, **self.limits)
            elif isinstance(message, bytes):
                answer = message
            else:

                def call(request: Request) -> bytes | None:
                    context = RequestContext(request, transport)
                    running.add(context)
                    return _call(transport, request, self.handler, context)

                if isinstance(message, Request):
                    answer = call(message)
                else:
                    answer = _batch_line([e if isinstance(e, bytes) else call(e) for e in message])
        except BaseException as exc:  # raised again on the server's side
            emit(_FAILED, exc)
        else:
            emit(_ANSWERED, answer)

    async def answer_async(self, body: bytes, sink: Any, running: _Running | None = None) -> bytes | None:
        """On the loop: answer ``body`` with an async handler, awaited here (no thread), a request context per
        request (added to ``running``, its ``_task`` this task, which a cancellation cancels), each notification
        written into ``sink``. The same bytes as ``dispatch``: the same core reads the body and builds them."""
        transport, message = self._open(body, sink)
        if message is None:
            return dispatch(body, self.handler, **self.limits)
        if isinstance(message, bytes):
            return message
        if isinstance(message, Request):
            return await self._call_async(transport, message, running)
        return _batch_line(
            [e if isinstance(e, bytes) else await self._call_async(transport, e, running) for e in message]
        )

    async def _call_async(self, transport: Any, request: Request, running: _Running | None) -> bytes | None:
        context = RequestContext(request, transport)
        if running is not None:
            running.add(context)
        if context.cancelled:  # the client went away before this request of its batch started
            return _cancelled_answer(transport, request, context)
        context._task = asyncio.current_task()
        token = _current.set(context)
        try:
            result = self.handler(request.method, request.params)
            if inspect.isawaitable(result):
                result = await result
        except (Exception, asyncio.CancelledError) as exc:
            return _failure_answer(transport, request, context, exc)
        finally:
            _current.reset(token)
        return _result_answer(transport, request, context, result)


def _answered(answer: bytes | None) -> _Response:
    if answer is None:
        return _NO_CONTENT
    return _Response(200, answer, [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))])


# --- server-sent events ---------------------------------------------------------------------------------

_EVENT, _ANSWERED, _FAILED = "event", "answered", "failed"
_EVENT_HEADERS: Headers = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]


class _EventSink:
    """The output stream of the transport ``run_streamed`` uses: each line written is one notification."""

    def __init__(self, emit: Callable[[str, Any], None]) -> None:
        self._emit = emit

    def write(self, data: bytes) -> int:
        self._emit(_EVENT, bytes(data).rstrip(b"\n"))
        return len(data)


class _Discard:
    """The output of an async handler's transport without server-sent events: notifications go nowhere."""

    def write(self, data: bytes) -> int:
        return len(data)


def _event(line: bytes) -> bytes:
    """One SSE ``message`` event; compact JSON never holds a raw newline, so one ``data`` line is enough."""
    return b"event: message\ndata: " + line + b"\n\n"


def _wants_events(accept: str | None) -> bool:
    if not accept or "event-stream" not in accept.lower():  # the common case, without splitting
        return False
    return "text/event-stream" in (media_range.partition(";")[0].strip().lower() for media_range in accept.split(","))


def _is_json(content_type: str) -> bool:
    if content_type in JSON_CONTENT_TYPES:  # the common case: no parameters
        return True
    media_type, _, parameters = content_type.partition(";")
    if media_type.strip().lower() not in JSON_CONTENT_TYPES:
        return False
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() not in ("utf-8", "utf8"):
            return False  # JSON is UTF-8 (RFC 8259)
    return True


# --- WSGI ----------------------------------------------------------------------------------------------


class WSGIApp:
    """A WSGI application answering JSON-RPC POSTs with ``handler(method, params)`` (see the module doc).

    ``max_body_bytes`` (default 16 MiB) bounds a body, and is passed to ``dispatch`` as ``max_message_bytes``;
    ``allowed_origins``: ``None`` (same host only), ``"*"``, or a list of exact origins
    (``"https://app.example"``). ``max_depth`` and ``max_batch`` as for ``dispatch``. The handler is called on
    the server's thread, as ``dispatch`` calls it (no request context).
    """

    def __init__(
        self,
        handler: Callable[[str, Any], Any],
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        allowed_origins: Iterable[str] | str | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_batch: int | None = DEFAULT_MAX_BATCH,
    ) -> None:
        if is_async_handler(handler):
            raise TypeError("WSGIApp calls its handler synchronously: use ASGIApp for an async handler")
        self._endpoint = _Endpoint(handler, max_body_bytes, allowed_origins, max_depth, max_batch)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        read = self._read(environ)
        if isinstance(read, _Response):
            response = read
        elif _wants_events(read[1]):
            return self._events(read[0], start_response)
        else:
            endpoint = self._endpoint
            answer = dispatch(
                read[0],
                endpoint.handler,
                max_message_bytes=endpoint.max_body_bytes,
                max_depth=endpoint.max_depth,
                max_batch=endpoint.max_batch,
            )
            if answer is None:
                start_response("204 No Content", [])
                return []
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))])
            return [answer]
        start_response(_STATUS_LINES[response.status], list(response.headers))  # a refusal's are shared
        return [response.body] if response.body else []

    def _events(self, body: bytes, start_response: Callable[..., Any]) -> Iterable[bytes]:
        """``run_streamed`` on a thread of its own: the events as they come once a notification came first,
        else the plain response."""
        items: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        running = _Running()
        thread = threading.Thread(
            target=self._endpoint.run_streamed,
            args=(body, lambda kind, value: items.put((kind, value)), running),
            name="rpcwire-http-events",
            daemon=True,
        )
        thread.start()
        kind, value = items.get()
        if kind == _FAILED:
            raise value
        if kind == _ANSWERED:
            response = _answered(value)
            start_response(_STATUS_LINES[response.status], response.headers)
            return [response.body] if response.body else []
        start_response("200 OK", _EVENT_HEADERS)  # progress came first: the answer is streamed
        return _event_stream(value, items, running)

    def _read(self, environ: dict[str, Any]) -> _Response | tuple[bytes, str | None]:
        get = environ.get
        length = get("CONTENT_LENGTH") or None  # wsgiref gives "" for none
        host = get("HTTP_HOST")
        if host is None and "SERVER_NAME" in environ:
            host = f"{environ['SERVER_NAME']}:{get('SERVER_PORT', '')}".rstrip(":")
        if length is not None:
            length = length.strip()
        endpoint = self._endpoint
        refusal = endpoint.refuse(
            get("REQUEST_METHOD", "GET"),
            get("wsgi.url_scheme", "http"),
            get("CONTENT_TYPE", ""),
            length,
            get("HTTP_ORIGIN"),
            host,
        )
        if refusal is not None:
            return refusal
        stream = environ["wsgi.input"]
        if length is not None:
            body = _read_exactly(stream, int(length))
        elif get("wsgi.input_terminated"):  # chunked, the server ends the input: count while reading
            chunks: list[bytes] = []
            size = 0
            while chunk := stream.read(_READ_CHUNK):
                size += len(chunk)
                if size > endpoint.max_body_bytes:
                    return endpoint.too_large()
                chunks.append(chunk)
            body = b"".join(chunks)
        else:  # PEP 3333: without a length the input may not be read
            return _LENGTH_REQUIRED
        return body, get("HTTP_ACCEPT")


def _event_stream(first: bytes, items: queue.SimpleQueue[tuple[str, Any]], running: _Running) -> Iterator[bytes]:
    """The events of ``WSGIApp._events`` after the first. Closed early (the server could not write: the client
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


def _read_exactly(stream: Any, length: int) -> bytes:
    """Up to ``length`` bytes (fewer if the client stopped sending): one read for a small body."""
    body = stream.read(length) if length <= _READ_CHUNK else b""
    if len(body) == length:
        return body
    chunks: list[bytes] = [body]
    length -= len(body)
    while length > 0 and (chunk := stream.read(min(length, _READ_CHUNK))):
        chunks.append(chunk)
        length -= len(chunk)
    return b"".join(chunks)


def flask_view(handler: Callable[[str, Any], Any], **options: Any) -> Callable[[], Any]:
    """A Flask view answering JSON-RPC with a :class:`WSGIApp` (``options`` are its keywords)::

    app.add_url_rule("/rpc", view_func=flask_view(handler), methods=["POST"])
    """
    wsgi_app = WSGIApp(handler, **options)

    def rpcwire_view() -> Any:
        from flask import Response, request  # noqa: PLC0415  (Flask only when the view is used)

        started: list[tuple[str, Headers]] = []
        chunks = wsgi_app(request.environ, lambda status, headers, exc_info=None: started.append((status, headers)))
        status, headers = started[0]
        return Response(chunks, status=int(status.split()[0]), headers=headers)  # events go out as they come

    return rpcwire_view


# --- ASGI ----------------------------------------------------------------------------------------------


class ASGIApp:
    """An ASGI application answering JSON-RPC POSTs with ``handler(method, params)`` (see the module doc).

    Keywords as :class:`WSGIApp`'s, and ``run_sync_inline``. A sync handler is called on a worker thread
    (``asyncio.to_thread``) by default, so a handler that blocks never stalls the event loop, at the price of a
    thread hop per request (tens to hundreds of µs on a busy machine: ``make bench-http``);
    ``run_sync_inline=True`` calls it on the loop itself, for handlers that never block (pure computation,
    in-memory look-ups): the loop serves nothing else while one runs. An ``async def`` handler (or
    ``rpcwire.methods`` holding one) is awaited on the loop, with no thread, and has a request context
    (``current_request()``; its notifications go nowhere without server-sent events). Lifespan events are
    acknowledged; other scope types are refused.
    """

    def __init__(
        self,
        handler: Callable[[str, Any], Any],
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        allowed_origins: Iterable[str] | str | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_batch: int | None = DEFAULT_MAX_BATCH,
        run_sync_inline: bool = False,
    ) -> None:
        self._endpoint = _Endpoint(handler, max_body_bytes, allowed_origins, max_depth, max_batch)
        if not isinstance(run_sync_inline, bool):
            raise TypeError(f"run_sync_inline must be a bool, not {type(run_sync_inline).__name__}")
        self._inline = run_sync_inline
        self._max = max_body_bytes

    async def __call__(
        self,
        scope: dict[str, Any],
        receive: Callable[[], Awaitable[dict[str, Any]]],
        send: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                while (await receive())["type"] != "lifespan.shutdown":
                    await send({"type": "lifespan.startup.complete"})
                await send({"type": "lifespan.shutdown.complete"})
                return
            raise ValueError(f"rpcwire.http.ASGIApp serves HTTP, not {scope['type']!r}")
        refusal, accept = self._check(scope)
        if refusal is None:
            message = await receive()  # most bodies come whole, in one message (no coroutine in between)
            if message["type"] == "http.request" and not message.get("more_body", False):
                body = message.get("body", b"")
                if len(body) > self._max:
                    refusal = self._endpoint.too_large()
            else:
                read = await self._read_more(message, receive)
                if read is None:  # the client went away
                    return
                if isinstance(read, _Response):
                    refusal = read
                else:
                    body = read
        if refusal is not None:
            await _send(refusal, send)
            return
        endpoint = self._endpoint
        is_async = endpoint.is_async()
        if _wants_events(accept):
            streamed = await self._stream(body, send, receive, is_async)
            if streamed is not None:
                await _send(streamed, send)
            return
        if is_async:
            answer = await endpoint.answer_async(body, _Discard())
        elif self._inline:
            answer = endpoint.dispatch(body)
        else:
            answer = await asyncio.to_thread(endpoint.dispatch, body)
        if answer is None:
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        length = (b"content-length", str(len(answer)).encode())
        await send({"type": "http.response.start", "status": 200, "headers": [_ASGI_JSON, length]})
        await send({"type": "http.response.body", "body": answer})

    async def _stream(
        self,
        body: bytes,
        send: Callable[[dict[str, Any]], Awaitable[None]],
        receive: Callable[[], Awaitable[dict[str, Any]]],
        is_async: bool,
    ) -> _Response | None:
        """With ``Accept: text/event-stream``: if a notification comes before the answer, send the events as
        they come (``None``: done); else the plain response to send. A client that goes away (``http.disconnect``,
        or a ``send`` that fails) cancels the requests still running (``current_request().cancelled``; an async
        handler's task is cancelled), which are then awaited."""
        loop = asyncio.get_running_loop()
        items: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        running = _Running()
        endpoint = self._endpoint
        worker: asyncio.Future[Any]
        if is_async:
            worker = loop.create_task(_run_async(endpoint, body, items.put_nowait, running))
        else:

            def emit(kind: str, value: Any) -> None:
                with contextlib.suppress(RuntimeError):  # the loop is gone
                    loop.call_soon_threadsafe(items.put_nowait, (kind, value))

            # On a thread even with run_sync_inline: the events go out while the handler runs.
            worker = asyncio.ensure_future(asyncio.to_thread(endpoint.run_streamed, body, emit, running))
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
                    return _answered(value)
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

    def _check(self, scope: dict[str, Any]) -> tuple[_Response | None, str | None]:
        """The refusal before the body is read (or ``None``), and the ``Accept`` header."""
        found: dict[bytes, str] = {}
        for name, value in scope["headers"]:
            if name not in _ASGI_WANTED:  # servers lowercase the names (ASGI: "should"); else look again
                if name.islower():
                    continue
                name = name.lower()  # noqa: PLW2901
                if name not in _ASGI_WANTED:
                    continue
            text = value.decode("latin-1")
            found[name] = f"{found[name]},{text}" if name in found else text
        length = found.get(b"content-length")
        refusal = self._endpoint.refuse(
            scope.get("method", "GET"),
            scope.get("scheme", "http"),
            found.get(b"content-type", ""),
            None if length is None else length.strip(),
            found.get(b"origin"),
            found.get(b"host"),
        )
        return refusal, found.get(b"accept")

    async def _read_more(
        self, message: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]]
    ) -> _Response | bytes | None:
        """The body whose first message is ``message``, in pieces (``None``: the client went away)."""
        chunks: list[bytes] = []
        size = 0
        while True:  # the server ends the body (more_body false) or reports a disconnect
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._max:
                return self._endpoint.too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
            message = await receive()


_ASGI_WANTED = frozenset({b"content-type", b"content-length", b"origin", b"host", b"accept"})
_ASGI_EVENT_HEADERS = [(name.lower().encode(), value.encode()) for name, value in _EVENT_HEADERS]


_ASGI_JSON = (b"content-type", b"application/json")


async def _send(response: _Response, send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    await send(response.asgi_start())
    await send({"type": "http.response.body", "body": response.body})


async def _run_async(
    endpoint: _Endpoint, body: bytes, put: Callable[[tuple[str, Any]], None], running: _Running
) -> None:
    """``run_streamed`` for an async handler, as a task on the loop."""
    try:
        answer = await endpoint.answer_async(body, _EventSink(lambda kind, value: put((kind, value))), running)
    except BaseException as exc:  # raised again by _stream, if it still listens
        put((_FAILED, exc))
    else:
        put((_ANSWERED, answer))


async def _disconnected(receive: Callable[[], Awaitable[dict[str, Any]]]) -> None:
    """Returns once the server reports the client gone (after the body, ``receive`` waits for nothing else), or
    ``receive`` fails (the connection is no longer usable either way)."""
    with contextlib.suppress(Exception):
        while (await receive())["type"] != "http.disconnect":
            pass
