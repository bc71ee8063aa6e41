"""JSON-RPC over HTTP: a WSGI and an ASGI application, plain callables with no framework dependency.

One POST carries one JSON text (a request, a notification or a batch) answered by :func:`rpcwire.dispatch`:

- POST with ``application/json`` (or ``application/json-rpc``, ``application/jsonrequest``; parameters such
  as ``; charset=utf-8`` allowed): 200 ``application/json`` with the answer (JSON-RPC errors too);
- only notifications: 204, no body;
- a ``Host`` the server is not known by: 421 (``allowed_hosts``; default: a request that came over loopback
  must name a loopback host, the DNS-rebinding defence);
- another method: 405 with ``Allow: POST``;
- an ``Origin`` header that is not allowed: 403 (default: only the server's own host and port);
- another content type, or a ``charset`` other than UTF-8: 415;
- a body over ``max_body_bytes``: 413, the body not read whole (``Content-Length`` first, else counted);
- WSGI, no ``Content-Length`` and a server that does not end the input (``wsgi.input_terminated``): 411.
- ``Accept: text/event-stream`` and the handler writes a notification (``current_request().progress()``,
  ``.notify()``) before its answer: 200 ``text/event-stream``, each notification a ``message`` event sent as it
  is written, the answer the last event. Without a notification first, the plain answer as above.

- A client that goes away mid-stream: the requests still running are cancelled (``current_request().cancelled``).

The checks run in that order (421, 405, 403, 415, 413/411), then ``authenticate`` if the app has one (still
before the body is read: a :class:`Refusal` it raises, ``Unauthorized`` 401 or ``Forbidden`` 403, or ``False``
it returns, refuses the request; what else it returns is ``current_request().http.user``). A refused body with
at most 1 MiB left is then read and dropped, never decoded (the connection stays in step); a longer one is left
unread, and the refusal says ``Connection: close`` (:func:`_refused_wsgi`, :func:`_refused_asgi`). Every handler call
has a request context (``current_request()``), whose ``traceparent`` is the ``traceparent`` header's when it
is valid, else ``params._meta``'s, and whose ``http`` is the request (``rpcwire.HTTPRequestInfo``, built when
read). Mounting: ``WSGIApp`` is a WSGI application (gunicorn, granian, ``wsgiref``; in Flask,
:func:`flask_view`), ``ASGIApp`` an ASGI one (uvicorn, granian; Starlette and FastAPI
``app.mount("/rpc", ASGIApp(handler))``); where a sync handler runs under ASGI: ``run_sync_inline``.
See docs/guides/http.md (the guide) and docs/semantics.md, "HTTP" (every rule).

The hot path (a small request, a sync handler, no events) is kept close to a constant reply (``make bench-http``
measures both in process): only the headers used are read, the refusals are made once, the answer goes out
with no response object in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import inspect
import ipaddress
import logging
import queue
import re
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from rpcwire import (
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_DEPTH,
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
from rpcwire._engine import async_asker, is_async_handler
from rpcwire._http_info import INFO_KEY, HTTPRequestInfo, request_info
from rpcwire._websocket import DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_QUEUED_BYTES, WebSocketServer, refuse

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "JSON_CONTENT_TYPES",
    "ASGIApp",
    "Forbidden",
    "Refusal",
    "Unauthorized",
    "WSGIApp",
    "flask_view",
]

logger: logging.Logger = logging.getLogger("rpcwire")

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
"""16 MiB: a body is held whole before it is decoded (a line is not: ``serve`` drops an over-long one as
it arrives), once per request in flight, so the transport's 64 MiB times a server's concurrent requests
would be too much to accept by default; 16 MiB is still far above any JSON-RPC call in practice."""

JSON_CONTENT_TYPES = frozenset({"application/json", "application/json-rpc", "application/jsonrequest"})
"""The media types a POST's ``Content-Type`` may name (with a ``charset`` of UTF-8 at most); another is a 415."""

_READ_CHUNK = 64 * 1024
_DRAIN_MOST = 1024 * 1024  # a refused body with at most this left is read and dropped: the connection stays usable
_DEFAULT_PORTS = {"http": "80", "https": "443", "ws": "80", "wss": "443"}

Headers = list[tuple[str, str]]


class _Response:
    __slots__ = ("_asgi_headers", "_closing", "body", "headers", "status")

    def __init__(self, status: int, body: bytes = b"", headers: Headers | None = None) -> None:
        self.status = status
        self.body = body
        self.headers = headers or []
        self._asgi_headers: list[tuple[bytes, bytes]] | None = None
        self._closing: _Response | None = None

    def closing(self) -> _Response:
        """This response with ``Connection: close``: for a refusal that left the request's body unread (made once
        for a shared refusal)."""
        if self._closing is None:
            self._closing = _Response(self.status, self.body, [*self.headers, ("Connection", "close")])
        return self._closing

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
    421: "Misdirected Request",
}
_STATUS_LINES = {status: f"{status} {reason}" for status, reason in _REASONS.items()}


def _status_line(status: int) -> str:
    line = _STATUS_LINES.get(status)
    if line is None:
        try:
            line = f"{status} {HTTPStatus(status).phrase}"
        except ValueError:
            line = f"{status} Refused"
    return line


def _refusal(status: int, text: str, headers: Headers | None = None) -> _Response:
    body = text.encode() + b"\n"
    return _Response(
        status,
        body,
        [("Content-Type", "text/plain; charset=utf-8"), *(headers or []), ("Content-Length", str(len(body)))],
    )


_METHOD_NOT_ALLOWED = _refusal(405, "405 Method Not Allowed: JSON-RPC takes POST", [("Allow", "POST")])
_FORBIDDEN = _refusal(403, "403 Forbidden: origin not allowed")
_MISDIRECTED = _refusal(421, "421 Misdirected Request: this server is not known by that Host (allowed_hosts)")
_UNSUPPORTED = _refusal(415, "415 Unsupported Media Type: send application/json (UTF-8)")
_BAD_LENGTH = _refusal(400, "400 Bad Request: invalid Content-Length")
_LENGTH_REQUIRED = _refusal(411, "411 Length Required")
_NO_CONTENT = _Response(204)
_AUTH_FORBIDDEN = _refusal(403, "403 Forbidden")
_AUTH_FAILED = _refusal(500, "500 Internal Server Error")


# --- authenticate: refusing a caller before the body is read ---------------------------------------------


# RFC 9110: a token, and a value of latin-1 without control characters (tab allowed) or DEL.
_HEADER = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+:[^\x00-\x08\x0a-\x1f\x7f\u0100-\U0010ffff]*")
# Written by the app itself: a refusal's own would contradict them.
_OWN_HEADERS = frozenset({"content-type", "content-length"})


class Refusal(Exception):
    """Raised by an app's ``authenticate`` to refuse the request with an HTTP ``status`` (4xx or 5xx) before its
    body is read: the answer is ``text/plain``, ``"<status> <reason>: <message>"``, with ``headers`` added (a
    mapping or ``(name, value)`` pairs: ``Retry-After`` for a 429, say). No JSON-RPC answer: the body, and so
    the request's id, is never read."""

    status: int = 400

    def __init__(
        self,
        status: int,
        message: str | None = None,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> None:
        if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
            raise ValueError(f"a refusal's status is an int from 400 to 599, not {status!r}")
        self.status = status
        self.message = message
        pairs = list(headers.items() if isinstance(headers, Mapping) else headers or ())
        for name, value in pairs:
            if not (isinstance(name, str) and isinstance(value, str) and _HEADER.fullmatch(name + ":" + value)):
                raise ValueError(
                    f"a refusal's header is a (str, str) pair of latin-1, no control characters, not {(name, value)!r}"
                )
            if name.lower() in _OWN_HEADERS:
                raise ValueError(f"a refusal's {name} is the app's to write")
        self.headers: list[tuple[str, str]] = pairs
        super().__init__(message or _status_line(status))

    def response(self) -> _Response:
        """The HTTP answer of this refusal: its status, a ``text/plain`` body (the status line and the message)
        and its headers."""
        text = _status_line(self.status)
        return _refusal(self.status, f"{text}: {self.message}" if self.message else text, self.headers)


class Unauthorized(Refusal):
    """401: no credentials, or not valid ones. ``challenge`` is the ``WWW-Authenticate`` header's value (RFC 9110
    requires one on a 401: ``'Bearer realm="rpc"'``, ``'Basic realm="rpc"'``)."""

    def __init__(
        self,
        message: str | None = None,
        *,
        challenge: str | None = None,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> None:
        pairs = list(headers.items() if isinstance(headers, Mapping) else headers or ())
        if challenge is not None:
            pairs.insert(0, ("WWW-Authenticate", challenge))
        super().__init__(401, message, pairs)


class Forbidden(Refusal):
    """403: the caller is known and not allowed (what ``authenticate`` returning ``False`` answers, message-less)."""

    def __init__(
        self, message: str | None = None, *, headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None
    ) -> None:
        super().__init__(403, message, headers)


Authenticate = Callable[[HTTPRequestInfo], Any]
"""``authenticate(info)``: what it returns (anything but ``False``) accepts the request and becomes
``current_request().http.user``; ``False`` refuses it (403), a :class:`Refusal` raised refuses it with its status.
``async def`` under ASGI."""


def _authenticated(source: dict[str, Any], info: HTTPRequestInfo, user: Any) -> _Response | None:
    if user is False:
        return _AUTH_FORBIDDEN
    if user is not None:
        source[INFO_KEY] = dataclasses.replace(info, user=user)
    return None


def _authentication_failed(exc: BaseException) -> _Response:
    if isinstance(exc, Refusal):
        return exc.response()
    logger.error("authenticate failed; answered 500", exc_info=exc)
    return _AUTH_FAILED


def _strip_default_port(netloc: str, scheme: str) -> str:
    default = _DEFAULT_PORTS.get(scheme)
    return netloc[: -len(default) - 1] if default and netloc.endswith(":" + default) else netloc


# --- Host: the names the server is known by (DNS rebinding) ---------------------------------------------
#
# Under DNS rebinding a page of the attacker's site reaches a server on 127.0.0.1 under the attacker's own
# name: the Origin and the Host are both that name, so the same-host Origin check passes. The Host is what
# gives it away: a request that came over loopback must name a loopback host. The verdicts below are cached
# (a few distinct values in practice; an lru_cache stays bounded whatever a client sends).


def _split_host(host: str) -> tuple[str, str | None] | None:
    """``(name, port)`` of a ``Host`` value (``name`` lowercased, an IPv6 literal without its brackets,
    ``port`` ``None`` when absent), or ``None`` when it is not ``host[:port]``."""
    host = host.strip(" \t").lower()
    if host.startswith("["):
        name, bracket, rest = host[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port: str | None = rest[1:] if rest else None
    else:
        name, colon, port = host.partition(":")
        if not colon:
            port = None
    if not name or (port is not None and not (port.isdigit() and port.isascii())):
        return None
    return name, port


@functools.lru_cache(maxsize=256)
def _is_loopback(name: str) -> bool:
    """Whether ``name`` (an address, ``localhost``, or a ``Host`` value with its port) is a loopback one."""
    bare_ipv6 = not name.startswith("[") and name.count(":") > 1  # an address, never with a port
    split = (name.lower(), None) if bare_ipv6 else _split_host(name)
    if split is None:
        return False
    if split[0] == "localhost":
        return True
    try:
        address = ipaddress.ip_address(split[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1, an IPv4 client of a dual-stack socket
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


_HOST_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?")


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=256)
def _may_be_loopback(address: str) -> bool:
    """Whether a socket address a server reports (its own or the client's) may be a loopback one: a loopback
    address or ``localhost``, or one that cannot be read. Fails closed: PyPy's sockets made from an inherited
    file descriptor (``uvicorn --fd``, ``gunicorn -b fd://``, systemd socket activation) report undecoded bytes,
    and such an address must not let a rebound name through. An IP address, a host name, a Unix socket's path
    and ``""`` (a Unix socket's peer, as gunicorn reports it) are read as what they are."""
    if _is_loopback(address):
        return True
    readable = (
        address == ""
        or address.startswith("/")
        or _is_address(address)
        or _HOST_NAME.fullmatch(address.lower()) is not None
    )
    return not readable


class _HostRule:
    """One entry of ``allowed_hosts``: ``name`` (any port), ``name:port`` (that port only), ``*.domain``
    (any name under ``domain``, not ``domain`` itself, any port), IPv6 literals in brackets (``[::1]:8000``)."""

    __slots__ = ("name", "port", "subdomains")

    def __init__(self, entry: str) -> None:
        if not isinstance(entry, str):
            raise TypeError(f"allowed_hosts holds str, not {type(entry).__name__}")
        self.subdomains = entry.startswith("*.")
        host = entry[2:] if self.subdomains else entry
        split = _split_host(host)
        if split is None or not (
            (":" in split[0] and _is_address(split[0])) if host.startswith("[") else _HOST_NAME.fullmatch(split[0])
        ):
            raise ValueError(f"allowed_hosts: {entry!r} is not a host name, host:port, [IPv6]:port or *.domain")
        self.name, self.port = split

    def matches(self, name: str, port: str | None) -> bool:
        if self.port is not None and port != self.port:
            return False
        return name.endswith("." + self.name) if self.subdomains else name == self.name


class _Hosts:
    """``allowed_hosts``: ``"auto"`` (a request that came over loopback, the server's or the client's address
    a loopback one, must name a loopback host: ``localhost``, ``127.0.0.1``, ``[::1]``, any port; other requests
    any host), a list of names (only those), or ``None``/``"*"`` (any)."""

    def __init__(self, allowed_hosts: Iterable[str] | str | None) -> None:
        self.any = allowed_hosts is None or allowed_hosts == "*"
        self.auto = allowed_hosts == "auto"
        self.rules: tuple[_HostRule, ...] = ()
        if isinstance(allowed_hosts, str) and not (self.any or self.auto):
            raise ValueError('allowed_hosts is a list of host names, "auto", "*" or None')
        if not (self.any or self.auto):
            assert allowed_hosts is not None and not isinstance(allowed_hosts, str)
            self.rules = tuple(_HostRule(entry) for entry in allowed_hosts)
            self._listed = functools.lru_cache(maxsize=256)(self._listed_uncached)

    def allowed(self, host: str | None, server: str | None, client: str | None) -> bool:
        """Whether a request with this ``Host`` (``None``: none sent), that came to the address ``server`` from
        ``client`` (each ``None`` when unknown), may be answered."""
        if self.any:
            return True
        if self.auto:
            local = (server is not None and _may_be_loopback(server)) or (
                client is not None and _may_be_loopback(client)
            )
            # No Host at all: not a browser (which always sends one), so not a rebinding.
            return not local or host is None or _is_loopback(host)
        return host is not None and self._listed(host)

    def _listed_uncached(self, host: str) -> bool:
        split = _split_host(host)
        return split is not None and any(rule.matches(*split) for rule in self.rules)


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
        if authenticate is not None and not callable(authenticate):
            raise TypeError("authenticate must be callable")
        self.authenticate = authenticate
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
        self.hosts = _Hosts(allowed_hosts)
        if not isinstance(expose_errors, bool):
            raise TypeError(f"expose_errors must be a bool, not {type(expose_errors).__name__}")
        self.expose_errors = expose_errors
        self.max_depth = max_depth
        self.max_batch = max_batch
        # The limits checked now, not at the first request.
        dispatch(b"[]", handler, max_message_bytes=max_body_bytes, max_depth=max_depth, max_batch=max_batch)
        # Asked at each request: a registry made before its functions may gain an async one later.
        self.is_async: Callable[[], bool] = async_asker(handler)
        self._too_large = _refusal(413, f"413 Content Too Large: the body is limited to {max_body_bytes} bytes")

    def refuse(  # noqa: PLR0917  (on every request: positional, no keyword parsing)
        self,
        method: str,
        scheme: str,
        content_type: str,
        length: str | None,
        origin: str | None,
        host: str | None,
        server: str | None,
        client: str | None,
    ) -> _Response | None:
        """The response that refuses the request before its body is read, or ``None`` to go on. Only the headers
        used are read, each ``None`` when absent: gathering every header into a dict would cost more than the rest.
        ``server`` and ``client`` are the addresses the request came to and from (``None``: unknown)."""
        if not self.hosts.allowed(host, server, client):
            return _MISDIRECTED
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

    def authenticated(self, source: dict[str, Any]) -> _Response | None:
        """``authenticate`` asked about the request of this WSGI ``environ`` (or ASGI ``scope``): the refusal,
        or ``None`` to go on (what it returned then kept as the info's ``user``)."""
        assert self.authenticate is not None
        info = request_info(source)
        try:
            user = self.authenticate(info)
        except Exception as exc:
            return _authentication_failed(exc)
        if inspect.isawaitable(user):
            # A sync callable that returned a coroutine (a lambda or wrapper around an async function): never a
            # user. Refused (500, logged) rather than awaited nowhere and taken as an acceptance.
            if inspect.iscoroutine(user):
                user.close()
            return _authentication_failed(
                TypeError("authenticate returned an awaitable where the app calls it synchronously (use ASGIApp)")
            )
        return _authenticated(source, info, user)

    async def authenticated_async(self, source: dict[str, Any]) -> _Response | None:
        """:meth:`authenticated` on the event loop: an ``async def`` ``authenticate`` awaited there (a sync one
        called there too, so it must not block). Takes an ASGI ``http`` or ``websocket`` scope."""
        assert self.authenticate is not None
        info = request_info(source)
        try:
            user = self.authenticate(info)
            if inspect.isawaitable(user):
                user = await user
        except Exception as exc:
            return _authentication_failed(exc)
        return _authenticated(source, info, user)

    def dispatch(
        self,
        body: bytes,
        traceparent: str | None,
        handler: Callable[[str, Any], Any],
        source: dict[str, Any] | None = None,
    ) -> bytes | None:
        """``body`` answered by :func:`rpcwire.dispatch` with ``handler`` (``self.handler``, or one that refuses),
        each call with a request context made only if it is asked for (:class:`_PlainCalls`). ``source``: the
        WSGI ``environ`` or ASGI ``scope``, for ``current_request().http``."""
        calls = _PlainCalls(self, body, handler, traceparent, source)
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

    def run_streamed(
        self,
        body: bytes,
        emit: Callable[[str, Any], None],
        running: _Running,
        traceparent: str | None,
        source: dict[str, Any] | None = None,
    ) -> None:
        """On a worker thread: answer ``body`` with a request context per request (each added to ``running``
        as it starts, for a client that goes away to cancel), ``emit(_EVENT, line)`` for each notification
        the handler writes (progress), then ``emit(_ANSWERED, answer or None)``, or ``emit(_FAILED, exception)``
        for a ``BaseException`` that is not answered. ``traceparent``: the header's, valid, or ``None``."""
        notifications = _Notifications(emit)

        def call_one(request: Request) -> bytes | None:
            context = _context(request, notifications, traceparent, source)
            running.add(context)
            return call(StdioTransport, request, self.handler, context, expose_errors=self.expose_errors)

        try:
            answer = answer_message(self.read(body), call_one)
        except BaseException as exc:  # raised again on the server's side
            emit(_FAILED, exc)
        else:
            emit(_ANSWERED, answer)

    async def answer_async(
        self,
        body: bytes,
        notifications: _Notifications,
        traceparent: str | None,
        running: _Running | None = None,
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
        notifications: _Notifications,
        request: Request,
        running: _Running | None,
        traceparent: str | None,
        source: dict[str, Any] | None,
    ) -> bytes | None:
        context = _context(request, notifications, traceparent, source)
        if running is not None:
            running.add(context)
        if context.cancelled:  # the client went away before this request of its batch started
            return cancelled_answer(StdioTransport, request, context)
        context._task = asyncio.current_task()  # cancelled when the client goes away
        try:
            return await call_async(StdioTransport, request, self.handler, context, expose_errors=self.expose_errors)
        except asyncio.CancelledError as exc:  # answered -32800 (MCP: not at all), as the engine answers it
            return failure_answer(StdioTransport, request, context, exc, expose_errors=self.expose_errors)


def _context(
    request: Request, notifications: _Notifications, traceparent: str | None, source: dict[str, Any] | None = None
) -> RequestContext:
    """A request's context; the ``traceparent`` header, when valid, wins over ``params._meta.traceparent``.
    ``source``: the WSGI ``environ`` or ASGI ``scope`` (``current_request().http``)."""
    context = RequestContext(request, notifications)
    if traceparent is not None:
        context._traceparent = traceparent
    context._http = source
    return context


def _header_traceparent(value: str | None) -> str | None:
    return None if value is None else valid_traceparent(value.strip(" \t"))


def _async_refused(method: str, params: Any) -> Any:
    """The handler of a ``WSGIApp`` whose handler became async after the app was made: each call -32603, logged
    with this exception by the core, as every -32603 is."""
    raise TypeError(_ASYNC_REFUSED)


_ASYNC_REFUSED = (
    "WSGIApp calls its handler synchronously, and the handler is async now (an rpcwire.methods registry that "
    "gained an async def function after the app was made): serve it with ASGIApp"
)


class _PlainCalls:
    """The handler ``dispatch`` calls for one body on the plain path: each call runs with a request context
    (``current_request()``) that is made only if it is asked for. Making one costs the body read again by the
    core, several times the rest of a small request, so a call only sets a :class:`_LazyContext` that knows
    which call it is (``dispatch`` calls the handler for each valid request of the body, in order) and reads
    the body on the first look inside."""

    __slots__ = ("_body", "_calls", "_endpoint", "_handler", "_requests", "source", "token", "traceparent")

    def __init__(
        self,
        endpoint: _Endpoint,
        body: bytes,
        handler: Callable[[str, Any], Any],
        traceparent: str | None,
        source: dict[str, Any] | None,
    ) -> None:
        self._endpoint = endpoint
        self.source = source
        self._body = body
        self._handler = handler
        self.traceparent = traceparent
        self._calls = 0
        self._requests: list[Request] | None = None
        self.token: contextvars.Token[RequestContext] | None = None  # reset by _Endpoint.dispatch at the end

    def __call__(self, method: str, params: Any) -> Any:
        context = _LazyContext.__new__(_LazyContext)
        context._plain = self
        context._index = self._calls
        self._calls += 1
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
    is serving. ``_index`` is then ``-1``. Its notifications go nowhere (no server-sent events)."""

    __slots__ = ("_index", "_plain")

    _plain: _PlainCalls
    _index: int

    def __getattr__(self, name: str) -> Any:
        if name not in _CONTEXT_SLOTS or self._index < 0:
            raise AttributeError(name)
        calls = self._plain
        RequestContext.__init__(self, calls.request(self._index), _DISCARD)
        if calls.traceparent is not None:
            self._traceparent = calls.traceparent
        self._http = calls.source
        self._index = -1
        return object.__getattribute__(self, name)

    @property
    def http(self) -> HTTPRequestInfo | None:
        """As :attr:`RequestContext.http`, without making the context (the request is the body's, not a call's)."""
        source = self._plain.source if self._index >= 0 else self._http
        return None if source is None else request_info(source)


_CONTEXT_SLOTS = frozenset(RequestContext.__slots__)


def _answered(answer: bytes | None) -> _Response:
    if answer is None:
        return _NO_CONTENT
    return _Response(200, answer, [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))])


# --- server-sent events ---------------------------------------------------------------------------------

_EVENT, _ANSWERED, _FAILED = "event", "answered", "failed"
_EVENT_HEADERS: Headers = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]


class _Notifications:
    """Where a request context writes its notifications (progress) over HTTP: each one encoded by the core
    (the bytes a transport writes) and emitted as an event, or dropped without server-sent events. Encoded
    either way, so that a notification the encoder refuses raises in the handler whether anyone listens."""

    __slots__ = ("_emit",)

    def __init__(self, emit: Callable[[str, Any], None] | None) -> None:
        self._emit = emit

    def write_notification(self, method: str, params: Any = None) -> None:
        line = _core._encode_request(method, params)
        if self._emit is not None:
            self._emit(_EVENT, line)


_DISCARD = _Notifications(None)


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
        self._endpoint = _Endpoint(
            handler, max_body_bytes, allowed_origins, max_depth, max_batch, allowed_hosts, expose_errors, authenticate
        )

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        read = self._read(environ)
        if isinstance(read, _Response):
            response = read
        elif _wants_events(read[1]) and not self._endpoint.is_async():
            return self._events(read[0], start_response, read[2], environ)
        else:
            endpoint = self._endpoint
            # Asked at each call: a registry made before its functions may gain an async one later.
            handler = _async_refused if endpoint.is_async() else endpoint.handler
            answer = endpoint.dispatch(read[0], read[2], handler, environ)
            if answer is None:
                start_response("204 No Content", [])
                return []
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))])
            return [answer]
        start_response(_status_line(response.status), list(response.headers))  # a refusal's are shared
        return [response.body] if response.body else []

    def _events(
        self, body: bytes, start_response: Callable[..., Any], traceparent: str | None, environ: dict[str, Any]
    ) -> Iterable[bytes]:
        """``run_streamed`` on a thread of its own: the events as they come once a notification came first,
        else the plain response."""
        items: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        running = _Running()
        thread = threading.Thread(
            target=self._endpoint.run_streamed,
            args=(body, lambda kind, value: items.put((kind, value)), running, traceparent, environ),
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

    def _read(self, environ: dict[str, Any]) -> _Response | tuple[bytes, str | None, str | None]:
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
            return _refused_wsgi(_LENGTH_REQUIRED, environ, None)
        return body, get("HTTP_ACCEPT"), _header_traceparent(get("HTTP_TRACEPARENT"))


def _refused_wsgi(refusal: _Response, environ: dict[str, Any], length: str | None) -> _Response:
    """``refusal``, once what is left of the request's body is read and dropped (at most ``_DRAIN_MOST``: the
    connection stays in step, so that a server that keeps it alive is right to); a longer rest is left unread,
    and the refusal says ``Connection: close`` (a server that keeps the connection would read the rest as the
    next request, or drop the connection under a client about to reuse it). Not under ``wsgiref``, which refuses
    the header (PEP 3333 leaves the connection to the server; gunicorn drops it) and closes every connection."""
    if not _wsgi_body_left(environ, length) or environ.get("SERVER_SOFTWARE", "").startswith("WSGIServer/"):
        return refusal
    return refusal.closing()


def _wsgi_body_left(environ: dict[str, Any], length: str | None) -> bool:
    """Whether some of a refused request's body is left unread, once a rest of at most ``_DRAIN_MOST`` was read
    and dropped (``length``: its ``Content-Length``, ``None`` without one; nothing of it read yet)."""
    stream = environ.get("wsgi.input")
    if stream is None:
        return False
    if length is not None:
        if not length.isdigit() or not length.isascii():
            return True  # where the body ends cannot be told
        left = int(length)
        if left > _DRAIN_MOST:
            return True
        while left > 0 and (chunk := stream.read(min(left, _READ_CHUNK))):
            left -= len(chunk)
        return False
    if environ.get("wsgi.input_terminated"):  # chunked, ended by the server: read on, up to the bound
        read = 0
        while chunk := stream.read(_READ_CHUNK):
            read += len(chunk)
            if read > _DRAIN_MOST:
                return True
        return False
    return environ.get("HTTP_TRANSFER_ENCODING") is not None  # a body the server leaves to the app: not read


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
        self._endpoint = _Endpoint(
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
            (_MISDIRECTED, _FORBIDDEN),
            max_concurrency=max_concurrency,
            max_queued_bytes=max_queued_bytes,
            run_sync_inline=run_sync_inline,
        )
        self._websocket_on = websocket
        self._authenticate = authenticate

    async def __call__(
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
            streamed = await self._stream(body, send, receive, is_async, traceparent, scope=scope)
            if streamed is not None:
                await _send(streamed, send)
            return
        if is_async:
            answer = await endpoint.answer_async(body, _DISCARD, traceparent, source=scope)
        elif self._inline:
            answer = endpoint.dispatch(body, traceparent, endpoint.handler, scope)
        else:
            answer = await asyncio.to_thread(endpoint.dispatch, body, traceparent, endpoint.handler, scope)
        if answer is None:
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        answer_length = (b"content-length", str(len(answer)).encode())
        await send({"type": "http.response.start", "status": 200, "headers": [_ASGI_JSON, answer_length]})
        await send({"type": "http.response.body", "body": answer})

    async def _stream(
        self,
        body: bytes,
        send: Callable[[dict[str, Any]], Awaitable[None]],
        receive: Callable[[], Awaitable[dict[str, Any]]],
        is_async: bool,
        traceparent: str | None,
        *,
        scope: dict[str, Any] | None = None,
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
            worker = loop.create_task(_run_async(endpoint, body, items.put_nowait, running, traceparent, scope=scope))
        else:

            def emit(kind: str, value: Any) -> None:
                with contextlib.suppress(RuntimeError):  # the loop is gone
                    loop.call_soon_threadsafe(items.put_nowait, (kind, value))

            # On a thread even with run_sync_inline: the events go out while the handler runs.
            worker = asyncio.ensure_future(
                asyncio.to_thread(endpoint.run_streamed, body, emit, running, traceparent, scope)
            )
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

    def _check(self, scope: dict[str, Any]) -> tuple[_Response | None, str | None, str | None, str | None]:
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
        return refusal, found.get(b"accept"), _header_traceparent(found.get(b"traceparent")), length

    async def _read_more(
        self, message: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]]
    ) -> _Response | bytes | None:
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


_ASGI_WANTED = frozenset({b"content-type", b"content-length", b"origin", b"host", b"accept", b"traceparent"})
_ASGI_EVENT_HEADERS = [(name.lower().encode(), value.encode()) for name, value in _EVENT_HEADERS]


_ASGI_JSON = (b"content-type", b"application/json")


async def _refused_asgi(
    refusal: _Response, receive: Callable[[], Awaitable[dict[str, Any]]], length: str | None
) -> _Response | None:
    """``refusal``, once what is left of the request's body is read and dropped (at most ``_DRAIN_MOST``: the
    connection stays in step); a longer rest is left unread, and the refusal says ``Connection: close`` (uvicorn
    and granian close after it; a server that kept the connection would drop it under a client about to reuse
    it). ``length``: the ``Content-Length`` when nothing of the body was read yet, else ``None`` (the rest is
    counted as it comes). ``None``: the client went away."""
    if length is not None:
        if not length.isdigit() or not length.isascii() or int(length) > _DRAIN_MOST:
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
        if read > _DRAIN_MOST:
            return refusal.closing()


async def _send(response: _Response, send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    await send(response.asgi_start())
    await send({"type": "http.response.body", "body": response.body})


async def _run_async(
    endpoint: _Endpoint,
    body: bytes,
    put: Callable[[tuple[str, Any]], None],
    running: _Running,
    traceparent: str | None,
    *,
    scope: dict[str, Any] | None = None,
) -> None:
    """``run_streamed`` for an async handler, as a task on the loop."""
    try:
        notifications = _Notifications(lambda kind, value: put((kind, value)))
        answer = await endpoint.answer_async(body, notifications, traceparent, running, source=scope)
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
