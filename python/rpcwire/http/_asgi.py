"""``ASGIApp``: the ASGI application, its scopes routed (``http`` answered here, ``websocket`` to
:class:`rpcwire._websocket.WebSocketServer` when it is on, ``lifespan`` acknowledged), its body received in one
message or in pieces, and what is left of a refused one read and dropped (:func:`_refused_asgi`).

The hot path (a body in one message, a sync handler, no events) reads only the headers it uses and sends the
answer with no response object in between.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from rpcwire import DEFAULT_MAX_BATCH, DEFAULT_MAX_DEPTH
from rpcwire._websocket import DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_QUEUED_BYTES, WebSocketServer, refuse
from rpcwire.http._auth import Authenticate
from rpcwire.http._endpoint import DISCARD, Buffered, Endpoint, header_traceparent
from rpcwire.http._events import (
    STREAMED,
    Streamed,
    asgi_async,
    asgi_threaded,
    asks_for_notifications,
    send_buffered,
    wants_events,
)
from rpcwire.http._policy import DEFAULT_MAX_BODY_BYTES, DRAIN_MOST
from rpcwire.http._responses import FORBIDDEN, MISDIRECTED, HTTPResponse

__all__ = ["ASGIApp"]

_ASGI_WANTED = frozenset({b"content-type", b"content-length", b"origin", b"host", b"accept", b"traceparent"})
_ASGI_JSON = (b"content-type", b"application/json")


class ASGIApp:
    """An ASGI application answering JSON-RPC POSTs with ``handler(method, params)`` (see the module doc).

    Keywords as :class:`WSGIApp`'s, and ``run_sync_inline``. A sync handler is called on a worker thread
    (``asyncio.to_thread``) by default, so a handler that blocks never stalls the event loop, at the price of a
    thread hop per request (tens to hundreds of µs on a busy machine: ``make bench-http``);
    ``run_sync_inline=True`` calls it on the loop itself, for handlers that never block (pure computation,
    in-memory look-ups): the loop serves nothing else while one runs. An ``async def`` handler (or
    ``rpcwire.methods`` holding one, asked at each request) is awaited on the loop, with no thread. Every call
    has a request context (``current_request()``; its notifications go nowhere without server-sent events).
    Lifespan events are acknowledged; other scope types are refused.

    With ``websocket=True`` a ``websocket`` scope is served too (off by default: refused, 403, so that an app
    mounted behind ASGI middleware that checks only ``http`` scopes gains no entry point it skips): one JSON-RPC
    message or batch per frame, requests run concurrently (at most ``max_concurrency`` per connection) and
    answered as they finish, with notifications and progress sent while a request runs, cancellation in both
    dialects, the same limits and ``Host``/``Origin`` checks as a POST; beyond ``max_queued_bytes`` waiting to be
    sent to a client that does not read, the connection is closed (1008). See docs/guides/websocket.md.

    ``authenticate`` may be ``async def`` here (a sync one runs on the loop: it must not block).
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
        run_sync_inline: bool = False,
        expose_errors: bool = False,
        websocket: bool = False,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
        authenticate: Authenticate | None = None,
    ) -> None:
        self._endpoint = Endpoint(
            handler, max_body_bytes, allowed_origins, max_depth, max_batch, allowed_hosts, expose_errors, authenticate
        )
        if not isinstance(run_sync_inline, bool):
            raise TypeError(f"run_sync_inline must be a bool, not {type(run_sync_inline).__name__}")
        self._inline = run_sync_inline
        self._max = max_body_bytes
        if not isinstance(websocket, bool):
            raise TypeError(f"websocket must be a bool, not {type(websocket).__name__}")
        self._websocket = WebSocketServer(
            self._endpoint,
            (MISDIRECTED, FORBIDDEN),
            max_concurrency=max_concurrency,
            max_queued_bytes=max_queued_bytes,
            run_sync_inline=run_sync_inline,
        )
        self._websocket_on = websocket
        self._authenticate = authenticate

    async def __call__(  # noqa: PLR0915  (the hot path in one frame: no coroutine call in between)
        self,
        scope: dict[str, Any],
        receive: Callable[[], Awaitable[dict[str, Any]]],
        send: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                if self._websocket_on:
                    await self._websocket(scope, receive, send)
                elif (await receive())["type"] == "websocket.connect":
                    await refuse(scope, send, None)
                return
            if scope["type"] == "lifespan":
                while (await receive())["type"] != "lifespan.shutdown":
                    await send({"type": "lifespan.startup.complete"})
                await send({"type": "lifespan.shutdown.complete"})
                return
            raise ValueError(f"rpcwire.http.ASGIApp serves HTTP and WebSocket, not {scope['type']!r}")
        refusal, accept, traceparent, length = self._check(scope)
        if refusal is None and self._authenticate is not None:
            refusal = await self._endpoint.authenticated_async(scope)
        if refusal is not None:  # nothing of the body read yet
            refusal = await _refused_asgi(refusal, receive, length)
            if refusal is None:  # the client went away
                return
        else:
            message = await receive()  # most bodies come whole, in one message (no coroutine in between)
            if message["type"] == "http.request" and not message.get("more_body", False):
                body = message.get("body", b"")
                if len(body) > self._max:
                    refusal = self._endpoint.too_large()
            else:
                read = await self._read_more(message, receive)
                if read is None:  # the client went away
                    return
                if isinstance(read, HTTPResponse):
                    refusal = read
                else:
                    body = read
        if refusal is not None:
            await _send(refusal, send)
            return
        endpoint = self._endpoint
        # A client that accepts events (MCP's always do) is answered as the others, where the plain path answers,
        # until its handler writes a notification before the answer: the stream starts there (_events).
        events = accept is not None and wants_events(accept)
        answer: bytes | Streamed | None
        if endpoint.is_async():
            if events:
                answer = await asgi_async(endpoint, body, send, receive, traceparent, scope)
            else:
                answer = await endpoint.answer_async(body, DISCARD, traceparent, source=scope)
        elif self._inline and not (events and asks_for_notifications(body)):  # else its events go out as it runs
            if events:
                buffered = Buffered()
                answer = endpoint.dispatch(body, traceparent, endpoint.handler, scope, notifications=buffered)
                if buffered.lines:  # notify() on the loop: sent now, before the answer (nothing went out meanwhile)
                    await send_buffered(send, buffered.lines, answer)
                    return
            else:
                answer = endpoint.dispatch(body, traceparent, endpoint.handler, scope)
        elif events:
            answer = await asgi_threaded(endpoint, body, send, receive, traceparent, scope)
        else:
            answer = await asyncio.to_thread(endpoint.dispatch, body, traceparent, endpoint.handler, scope)
        if answer is STREAMED:
            return
        if answer is None:
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        answer_length = (b"content-length", str(len(answer)).encode())
        await send({"type": "http.response.start", "status": 200, "headers": [_ASGI_JSON, answer_length]})
        await send({"type": "http.response.body", "body": answer})

    def _check(self, scope: dict[str, Any]) -> tuple[HTTPResponse | None, str | None, str | None, str | None]:
        """The refusal before the body is read (or ``None``), the ``Accept`` header, the ``traceparent``
        header when it is valid, and the ``Content-Length`` (``None``: none)."""
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
        if length is not None:
            length = length.strip()
        server, client = scope.get("server"), scope.get("client")
        refusal = self._endpoint.refuse(
            scope.get("method", "GET"),
            scope.get("scheme", "http"),
            found.get(b"content-type", ""),
            length,
            found.get(b"origin"),
            found.get(b"host"),
            None if server is None else server[0],
            None if client is None else client[0],
        )
        return refusal, found.get(b"accept"), header_traceparent(found.get(b"traceparent")), length

    async def _read_more(
        self, message: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]]
    ) -> HTTPResponse | bytes | None:
        """The body whose first message is ``message``, in pieces (``None``: the client went away), or the 413
        once it is too large (:func:`_refused_asgi`: the rest read and dropped, or left unread)."""
        chunks: list[bytes] = []
        size = 0
        while True:  # the server ends the body (more_body false) or reports a disconnect
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._max:
                if not message.get("more_body", False):
                    return self._endpoint.too_large()
                return await _refused_asgi(self._endpoint.too_large(), receive, None)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
            message = await receive()


async def _refused_asgi(
    refusal: HTTPResponse, receive: Callable[[], Awaitable[dict[str, Any]]], length: str | None
) -> HTTPResponse | None:
    """``refusal``, once what is left of the request's body is read and dropped (at most ``DRAIN_MOST``: the
    connection stays in step); a longer rest is left unread, and the refusal says ``Connection: close`` (uvicorn
    and granian close after it; a server that kept the connection would drop it under a client about to reuse
    it). ``length``: the ``Content-Length`` when nothing of the body was read yet, else ``None`` (the rest is
    counted as it comes). ``None``: the client went away."""
    if length is not None:
        if not length.isdigit() or not length.isascii() or int(length) > DRAIN_MOST:
            return refusal.closing()  # where the body ends cannot be told, or it is too long to read for nothing
        if length == "0" or int(length) == 0:
            return refusal
    read = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        read += len(message.get("body", b""))
        if not message.get("more_body", False):
            return refusal
        if read > DRAIN_MOST:
            return refusal.closing()


async def _send(response: HTTPResponse, send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    await send(response.asgi_start())
    await send({"type": "http.response.body", "body": response.body})
