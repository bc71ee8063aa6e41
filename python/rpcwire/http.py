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

The checks run in that order (405, 403, 415, 413/411). Mounting: ``WSGIApp`` is a WSGI application (gunicorn,
``wsgiref``; in Flask, :func:`flask_view`), ``ASGIApp`` an ASGI one (uvicorn; Starlette and FastAPI
``app.mount("/rpc", ASGIApp(handler))``). See README, "HTTP".
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import queue
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from rpcwire import DEFAULT_MAX_BATCH, DEFAULT_MAX_DEPTH, Request, StdioTransport, dispatch
from rpcwire._engine import RequestContext, _batch_line, _call, is_async_handler

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
    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, body: bytes = b"", headers: Headers | None = None) -> None:
        self.status = status
        self.body = body
        self.headers = headers or []


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


def _refusal(status: int, text: str, headers: Headers | None = None) -> _Response:
    return _Response(status, text.encode() + b"\n", [("Content-Type", "text/plain; charset=utf-8"), *(headers or [])])


def _strip_default_port(netloc: str, scheme: str) -> str:
    default = _DEFAULT_PORTS.get(scheme)
    return netloc[: -len(default) - 1] if default and netloc.endswith(":" + default) else netloc


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
        self.limits = {"max_message_bytes": max_body_bytes, "max_depth": max_depth, "max_batch": max_batch}
        dispatch(b"[]", handler, **self.limits)  # the limits checked now, not at the first request

    def refuse(self, method: str, headers: Mapping[str, str], scheme: str) -> _Response | None:
        """The response that refuses the request before its body is read, or ``None`` to go on."""
        if method != "POST":
            return _refusal(405, "405 Method Not Allowed: JSON-RPC takes POST", [("Allow", "POST")])
        origin = headers.get("origin")
        if origin is not None and not self.origin_allowed(origin, headers.get("host"), scheme):
            return _refusal(403, "403 Forbidden: origin not allowed")
        if not _is_json(headers.get("content-type", "")):
            return _refusal(415, "415 Unsupported Media Type: send application/json (UTF-8)")
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit() or not length.isascii():
                return _refusal(400, "400 Bad Request: invalid Content-Length")
            if int(length) > self.max_body_bytes:
                return self.too_large()
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
        return _refusal(413, f"413 Content Too Large: the body is limited to {self.max_body_bytes} bytes")

    def answer(self, body: bytes, handler: Callable[[str, Any], Any] | None = None) -> _Response:
        return _answered(dispatch(body, self.handler if handler is None else handler, **self.limits))

    def run_streamed(self, body: bytes, handler: Callable[[str, Any], Any], emit: Callable[[str, Any], None]) -> None:
        """On a worker thread: answer ``body`` with a request context per request, ``emit(_EVENT, line)`` for
        each notification the handler writes (progress), then ``emit(_ANSWERED, answer or None)``, or
        ``emit(_FAILED, exception)`` for a ``BaseException`` that is not answered."""
        try:
            answer = self._answer_in_context(body, handler, emit)
        except BaseException as exc:  # raised again on the server's side
            emit(_FAILED, exc)
        else:
            emit(_ANSWERED, answer)

    def _answer_in_context(
        self, body: bytes, handler: Callable[[str, Any], Any], emit: Callable[[str, Any], None]
    ) -> bytes | None:
        # The core classifies the body and encodes the notifications: a transport reading the body as one
        # line (a newline is JSON whitespace outside strings and invalid inside them, as "\r" is, and "\r"
        # does not end a line) and writing each notification into an event.
        transport = StdioTransport(io.BytesIO(body.replace(b"\n", b"\r")), _EventSink(emit), **self.limits)
        message = transport._read_message()
        if message is None:  # a blank body: dispatch's -32600
            return dispatch(body, handler, **self.limits)
        if isinstance(message, bytes):
            return message
        if isinstance(message, Request):
            return _call(transport, message, handler, RequestContext(message, transport))
        return _batch_line(
            [e if isinstance(e, bytes) else _call(transport, e, handler, RequestContext(e, transport)) for e in message]
        )


def _answered(answer: bytes | None) -> _Response:
    if answer is None:
        return _Response(204)
    return _Response(200, answer, [("Content-Type", "application/json")])


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


def _event(line: bytes) -> bytes:
    """One SSE ``message`` event; compact JSON never holds a raw newline, so one ``data`` line is enough."""
    return b"event: message\ndata: " + line + b"\n\n"


def _wants_events(headers: Mapping[str, str]) -> bool:
    accepted = (media_range.partition(";")[0].strip().lower() for media_range in headers.get("accept", "").split(","))
    return "text/event-stream" in accepted


def _is_json(content_type: str) -> bool:
    media_type, _, parameters = content_type.partition(";")
    if media_type.strip().lower() not in JSON_CONTENT_TYPES:
        return False
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() not in ("utf-8", "utf8"):
            return False  # JSON is UTF-8 (RFC 8259)
    return True


def _with_length(response: _Response) -> Headers:
    if response.status == 204:
        return response.headers
    return [*response.headers, ("Content-Length", str(len(response.body)))]


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
            events = self._events(read[0])
            kind, value = next(events)
            if kind == _EVENT:  # progress came first: the answer is streamed
                start_response("200 OK", _EVENT_HEADERS)
                return _event_stream(value, events)
            response = _answered(value)
        else:
            response = self._endpoint.answer(read[0])
        start_response(f"{response.status} {_REASONS[response.status]}", _with_length(response))
        return [response.body] if response.body else []

    def _events(self, body: bytes) -> Iterator[tuple[str, Any]]:
        """The events of ``run_streamed`` on a thread of its own, each as soon as it is emitted."""
        items: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        emit = lambda kind, value: items.put((kind, value))  # noqa: E731
        thread = threading.Thread(
            target=self._endpoint.run_streamed, args=(body, self._endpoint.handler, emit), name="rpcwire-http-events"
        )
        thread.daemon = True
        thread.start()
        while True:
            kind, value = items.get()
            if kind == _FAILED:
                raise value
            yield kind, value
            if kind == _ANSWERED:
                return

    def _read(self, environ: dict[str, Any]) -> _Response | tuple[bytes, dict[str, str]]:
        headers = {
            "content-type": environ.get("CONTENT_TYPE", ""),
            **{
                name[5:].replace("_", "-").lower(): value for name, value in environ.items() if name.startswith("HTTP_")
            },
        }
        if environ.get("CONTENT_LENGTH"):  # wsgiref gives "" for none
            headers["content-length"] = environ["CONTENT_LENGTH"].strip()
        if "host" not in headers and "SERVER_NAME" in environ:
            headers["host"] = f"{environ['SERVER_NAME']}:{environ.get('SERVER_PORT', '')}".rstrip(":")
        endpoint = self._endpoint
        refusal = endpoint.refuse(environ.get("REQUEST_METHOD", "GET"), headers, environ.get("wsgi.url_scheme", "http"))
        if refusal is not None:
            return refusal
        stream = environ["wsgi.input"]
        if "content-length" in headers:
            body = _read_exactly(stream, int(headers["content-length"]))
        elif environ.get("wsgi.input_terminated"):  # chunked, the server ends the input: count while reading
            chunks: list[bytes] = []
            size = 0
            while chunk := stream.read(_READ_CHUNK):
                size += len(chunk)
                if size > endpoint.max_body_bytes:
                    return endpoint.too_large()
                chunks.append(chunk)
            body = b"".join(chunks)
        else:  # PEP 3333: without a length the input may not be read
            return _refusal(411, "411 Length Required")
        return body, headers


def _event_stream(first: bytes, events: Iterator[tuple[str, Any]]) -> Iterator[bytes]:
    yield _event(first)
    for kind, value in events:
        if value is not None:  # the answer comes last; notifications only have none
            yield _event(value)
        if kind == _ANSWERED:
            return


def _read_exactly(stream: Any, length: int) -> bytes:
    """Up to ``length`` bytes (fewer if the client stopped sending), read in chunks."""
    chunks: list[bytes] = []
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

    Keywords as :class:`WSGIApp`'s. The body is answered on a worker thread (``asyncio.to_thread``), so a
    sync handler never blocks the event loop; an ``async def`` handler (or ``rpcwire.methods`` holding one)
    is awaited on the loop. Lifespan events are acknowledged; other scope types are refused.
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
        self._endpoint = _Endpoint(handler, max_body_bytes, allowed_origins, max_depth, max_batch)

    async def __call__(
        self,
        scope: dict[str, Any],
        receive: Callable[[], Awaitable[dict[str, Any]]],
        send: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            raise ValueError(f"rpcwire.http.ASGIApp serves HTTP, not {scope['type']!r}")
        read = await self._read(scope, receive)
        if read is None:  # the client went away
            return
        if isinstance(read, _Response):
            response = read
        else:
            body, request_headers = read
            handler = self._endpoint.handler
            if is_async_handler(handler):
                handler = _on_loop(handler, asyncio.get_running_loop())
            if _wants_events(request_headers):
                streamed = await self._stream(body, handler, send)
                if streamed is None:
                    return
                response = streamed
            else:
                response = await asyncio.to_thread(self._endpoint.answer, body, handler)
        headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in _with_length(response)]
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": response.body})

    async def _stream(
        self, body: bytes, handler: Callable[[str, Any], Any], send: Callable[[dict[str, Any]], Awaitable[None]]
    ) -> _Response | None:
        """With ``Accept: text/event-stream``: if a notification comes before the answer, send the events as
        they come (``None``: done); else the plain response to send."""
        loop = asyncio.get_running_loop()
        items: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        def emit(kind: str, value: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone
                loop.call_soon_threadsafe(items.put_nowait, (kind, value))

        worker = asyncio.ensure_future(asyncio.to_thread(self._endpoint.run_streamed, body, handler, emit))
        started = False
        try:
            while True:
                kind, value = await items.get()
                if kind == _FAILED:
                    raise value
                if kind == _ANSWERED and not started:
                    return _answered(value)
                if not started:
                    headers = [(name.lower().encode(), value.encode()) for name, value in _EVENT_HEADERS]
                    await send({"type": "http.response.start", "status": 200, "headers": headers})
                    started = True
                last = kind == _ANSWERED
                chunk = b"" if value is None else _event(value)
                await send({"type": "http.response.body", "body": chunk, "more_body": not last})
                if last:
                    return None
        finally:
            await worker

    async def _read(
        self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]]
    ) -> _Response | tuple[bytes, dict[str, str]] | None:
        headers: dict[str, str] = {}
        for name, value in scope.get("headers", ()):
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]},{text}" if key in headers else text
        endpoint = self._endpoint
        refusal = endpoint.refuse(scope.get("method", "GET"), headers, scope.get("scheme", "http"))
        if refusal is not None:
            return refusal
        chunks: list[bytes] = []
        size = 0
        while True:  # the server ends the body (more_body false) or reports a disconnect
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > endpoint.max_body_bytes:
                return endpoint.too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks), headers


def _on_loop(handler: Callable[[str, Any], Any], loop: asyncio.AbstractEventLoop) -> Callable[[str, Any], Any]:
    """A sync handler (for ``dispatch`` on a worker thread) that awaits ``handler``'s result on ``loop``."""

    def call(method: str, params: Any) -> Any:
        result = handler(method, params)
        if not inspect.isawaitable(result):
            return result
        return asyncio.run_coroutine_threadsafe(_awaited(result), loop).result()

    return call


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable
