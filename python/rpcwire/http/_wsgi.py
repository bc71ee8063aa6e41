"""``WSGIApp``: the WSGI application (PEP 3333), its body read from ``wsgi.input`` and what is left of a refused
one read and dropped (:func:`_refused_wsgi`).

The hot path (a small request, a sync handler, no events) reads only the ``environ`` keys it uses, hands out the
shared refusals, and starts the answer with no response object in between.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from rpcwire import DEFAULT_MAX_BATCH, DEFAULT_MAX_DEPTH
from rpcwire._engine import is_async_handler
from rpcwire.http._auth import Authenticate
from rpcwire.http._endpoint import Buffered, Endpoint, header_traceparent
from rpcwire.http._events import asks_for_notifications, wants_events, wsgi_buffered, wsgi_events
from rpcwire.http._policy import DEFAULT_MAX_BODY_BYTES, DRAIN_MOST
from rpcwire.http._responses import LENGTH_REQUIRED, HTTPResponse, status_line

__all__ = ["WSGIApp"]

_READ_CHUNK = 64 * 1024


class WSGIApp:
    """A WSGI application answering JSON-RPC POSTs with ``handler(method, params)`` (see the module doc).

    ``max_body_bytes`` (default 16 MiB) bounds a body, and is passed to ``dispatch`` as ``max_message_bytes``;
    ``allowed_origins``: ``None`` (same host only), ``"*"``, or a list of exact origins
    (``"https://app.example"``). ``allowed_hosts``: the names the server is known by, checked against the
    ``Host`` header (421 otherwise): ``"auto"`` (the default: a request that came over loopback must name a
    loopback host, ``localhost``, ``127.0.0.1`` or ``[::1]``, any port; other requests any host), a list
    (``["rpc.example.com", "*.example.com", "localhost:8000"]``: only those), or ``None``/``"*"`` (any: behind
    a proxy that checks it). ``max_depth`` and ``max_batch`` as for ``dispatch``. ``expose_errors=False``: a
    handler's unexpected exception is answered -32603 "Internal error" with no ``data`` (any client would read
    its class and text otherwise); it is logged on the server either way, with its traceback (logger
    ``rpcwire``). The handler is called on the server's thread, as ``dispatch`` calls it, with a request
    context (``current_request()``; its notifications go nowhere without server-sent events). A handler that
    is async when the app is made is a ``TypeError``; one that becomes async later (an ``rpcwire.methods``
    registry that gains an ``async def`` function) is refused at each call: -32603, logged. ``authenticate``:
    called with the request's ``rpcwire.HTTPRequestInfo`` before the body is read (see the module doc and
    docs/guides/hooks.md); sync here.
    """

    def __init__(
        self,
        handler: Callable[[str, Any], Any],
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        allowed_origins: Iterable[str] | str | None = None,
        allowed_hosts: Iterable[str] | str | None = "auto",
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_batch: int | None = DEFAULT_MAX_BATCH,
        expose_errors: bool = False,
        authenticate: Authenticate | None = None,
    ) -> None:
        if is_async_handler(handler):
            raise TypeError("WSGIApp calls its handler synchronously: use ASGIApp for an async handler")
        if authenticate is not None and inspect.iscoroutinefunction(authenticate):
            raise TypeError("WSGIApp calls authenticate synchronously: use ASGIApp for an async one")
        self._endpoint = Endpoint(
            handler, max_body_bytes, allowed_origins, max_depth, max_batch, allowed_hosts, expose_errors, authenticate
        )

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        read = self._read(environ)
        if isinstance(read, HTTPResponse):
            response = read
        else:
            endpoint = self._endpoint
            # Asked at each call: a registry made before its functions may gain an async one later.
            handler = _async_refused if endpoint.is_async() else endpoint.handler
            accept = read[1]
            if accept is not None and handler is endpoint.handler and wants_events(accept):
                # A client that accepts events (MCP's always do): a body that asks for notifications (progress, log
                # messages) is answered on a thread of its own, its events sent as they come; another here, as the
                # plain path answers it.
                if asks_for_notifications(read[0]):
                    return wsgi_events(endpoint, read[0], start_response, read[2], environ)
                buffered = Buffered()
                answer = endpoint.dispatch(read[0], read[2], handler, environ, notifications=buffered)
                if buffered.lines:  # notify() on this thread: its events, then the answer
                    return wsgi_buffered(start_response, buffered.lines, answer)
            else:
                answer = endpoint.dispatch(read[0], read[2], handler, environ)
            if answer is None:
                start_response("204 No Content", [])
                return []
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))])
            return [answer]
        start_response(status_line(response.status), list(response.headers))  # a refusal's are shared
        return [response.body] if response.body else []

    def _read(self, environ: dict[str, Any]) -> HTTPResponse | tuple[bytes, str | None, str | None]:
        """The body, the ``Accept`` header and the valid ``traceparent`` header, or the refusal."""
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
            get("SERVER_NAME"),
            get("REMOTE_ADDR"),
        )
        if refusal is None and endpoint.authenticate is not None:
            refusal = endpoint.authenticated(environ)
        if refusal is not None:
            return _refused_wsgi(refusal, environ, length)
        stream = environ["wsgi.input"]
        if length is not None:
            body = _read_exactly(stream, int(length))
        elif get("wsgi.input_terminated"):  # chunked, the server ends the input: count while reading
            chunks: list[bytes] = []
            size = 0
            while chunk := stream.read(_READ_CHUNK):
                size += len(chunk)
                if size > endpoint.max_body_bytes:
                    return _refused_wsgi(endpoint.too_large(), environ, None)
                chunks.append(chunk)
            body = b"".join(chunks)
        else:  # PEP 3333: without a length the input may not be read
            return _refused_wsgi(LENGTH_REQUIRED, environ, None)
        return body, get("HTTP_ACCEPT"), header_traceparent(get("HTTP_TRACEPARENT"))


def _async_refused(method: str, params: Any) -> Any:
    """The handler of a ``WSGIApp`` whose handler became async after the app was made: each call -32603, logged
    with this exception by the core, as every -32603 is."""
    raise TypeError(_ASYNC_REFUSED)


_ASYNC_REFUSED = (
    "WSGIApp calls its handler synchronously, and the handler is async now (an rpcwire.methods registry that "
    "gained an async def function after the app was made): serve it with ASGIApp"
)


def _refused_wsgi(refusal: HTTPResponse, environ: dict[str, Any], length: str | None) -> HTTPResponse:
    """``refusal``, once what is left of the request's body is read and dropped (at most ``DRAIN_MOST``: the
    connection stays in step, so that a server that keeps it alive is right to); a longer rest is left unread,
    and the refusal says ``Connection: close`` (a server that keeps the connection would read the rest as the
    next request, or drop the connection under a client about to reuse it). Not under ``wsgiref``, which refuses
    the header (PEP 3333 leaves the connection to the server; gunicorn drops it) and closes every connection."""
    if not _wsgi_body_left(environ, length) or environ.get("SERVER_SOFTWARE", "").startswith("WSGIServer/"):
        return refusal
    return refusal.closing()


def _wsgi_body_left(environ: dict[str, Any], length: str | None) -> bool:
    """Whether some of a refused request's body is left unread, once a rest of at most ``DRAIN_MOST`` was read
    and dropped (``length``: its ``Content-Length``, ``None`` without one; nothing of it read yet)."""
    stream = environ.get("wsgi.input")
    if stream is None:
        return False
    if length is not None:
        if not length.isdigit() or not length.isascii():
            return True  # where the body ends cannot be told
        left = int(length)
        if left > DRAIN_MOST:
            return True
        while left > 0 and (chunk := stream.read(min(left, _READ_CHUNK))):
            left -= len(chunk)
        return False
    if environ.get("wsgi.input_terminated"):  # chunked, ended by the server: read on, up to the bound
        read = 0
        while chunk := stream.read(_READ_CHUNK):
            read += len(chunk)
            if read > DRAIN_MOST:
                return True
        return False
    return environ.get("HTTP_TRANSFER_ENCODING") is not None  # a body the server leaves to the app: not read


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
