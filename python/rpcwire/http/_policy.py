"""The request policy: what is refused before a request's body is read, and in which order.

:meth:`Policy.refuse` checks the headers in the order the apps answer them (421 ``Host``, 405 method, 403
``Origin``, 415 content type, 400/413 ``Content-Length``); ``authenticate`` is asked after them
(:meth:`Policy.authenticated`, :meth:`Policy.authenticated_async`). The limits a body is held to are checked here
too (``max_body_bytes``; :data:`DRAIN_MOST`, what is left of a refused body that is read and dropped).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from rpcwire._http_info import request_info
from rpcwire.http._auth import Authenticate, authenticated, authentication_failed
from rpcwire.http._hosts import Hosts
from rpcwire.http._responses import (
    BAD_LENGTH,
    FORBIDDEN,
    METHOD_NOT_ALLOWED,
    MISDIRECTED,
    UNSUPPORTED,
    HTTPResponse,
    refusal,
)

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DRAIN_MOST", "JSON_CONTENT_TYPES", "Policy"]

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
"""16 MiB: a body is held whole before it is decoded (a line is not: ``serve`` drops an over-long one as
it arrives), once per request in flight, so the transport's 64 MiB times a server's concurrent requests
would be too much to accept by default; 16 MiB is still far above any JSON-RPC call in practice."""

JSON_CONTENT_TYPES = frozenset({"application/json", "application/json-rpc", "application/jsonrequest"})
"""The media types a POST's ``Content-Type`` may name (with a ``charset`` of UTF-8 at most); another is a 415."""

DRAIN_MOST = 1024 * 1024  # a refused body with at most this left is read and dropped: the connection stays usable

_DEFAULT_PORTS = {"http": "80", "https": "443", "ws": "80", "wss": "443"}


class Policy:
    """What an app refuses before a body is read: its ``allowed_hosts``, ``allowed_origins``, ``max_body_bytes``
    and ``authenticate``, each checked when the app is made."""

    def __init__(
        self,
        max_body_bytes: int,
        allowed_origins: Iterable[str] | str | None,
        allowed_hosts: Iterable[str] | str | None,
        authenticate: Authenticate | None,
    ) -> None:
        if authenticate is not None and not callable(authenticate):
            raise TypeError("authenticate must be callable")
        self.authenticate = authenticate
        if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
            raise ValueError(f"max_body_bytes must be a positive int, not {max_body_bytes!r}")
        self.max_body_bytes = max_body_bytes
        if allowed_origins is None or allowed_origins == "*":
            self.allowed_origins: frozenset[str] | str | None = allowed_origins
        elif isinstance(allowed_origins, str):
            raise ValueError('allowed_origins is a list of origins, "*" or None')
        else:
            self.allowed_origins = frozenset(allowed_origins)
        self.hosts = Hosts(allowed_hosts)
        self._too_large = refusal(413, f"413 Content Too Large: the body is limited to {max_body_bytes} bytes")

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
    ) -> HTTPResponse | None:
        """The response that refuses the request before its body is read, or ``None`` to go on. Only the headers
        used are read, each ``None`` when absent: gathering every header into a dict would cost more than the rest.
        ``server`` and ``client`` are the addresses the request came to and from (``None``: unknown)."""
        if not self.hosts.allowed(host, server, client):
            return MISDIRECTED
        if method != "POST":
            return METHOD_NOT_ALLOWED
        if origin is not None and not self.origin_allowed(origin, host, scheme):
            return FORBIDDEN
        if not _is_json(content_type):
            return UNSUPPORTED
        if length is not None:
            if not length.isdigit() or not length.isascii():
                return BAD_LENGTH
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

    def too_large(self) -> HTTPResponse:
        return self._too_large

    def authenticated(self, source: dict[str, Any]) -> HTTPResponse | None:
        """``authenticate`` asked about the request of this WSGI ``environ`` (or ASGI ``scope``): the refusal,
        or ``None`` to go on (what it returned then kept as the info's ``user``)."""
        assert self.authenticate is not None
        info = request_info(source)
        try:
            user = self.authenticate(info)
        except Exception as exc:
            return authentication_failed(exc)
        if inspect.isawaitable(user):
            # A sync callable that returned a coroutine (a lambda or wrapper around an async function): never a
            # user. Refused (500, logged) rather than awaited nowhere and taken as an acceptance.
            if inspect.iscoroutine(user):
                user.close()
            return authentication_failed(
                TypeError("authenticate returned an awaitable where the app calls it synchronously (use ASGIApp)")
            )
        return authenticated(source, info, user)

    async def authenticated_async(self, source: dict[str, Any]) -> HTTPResponse | None:
        """:meth:`authenticated` on the event loop: an ``async def`` ``authenticate`` awaited there (a sync one
        called there too, so it must not block). Takes an ASGI ``http`` or ``websocket`` scope."""
        assert self.authenticate is not None
        info = request_info(source)
        try:
            user = self.authenticate(info)
            if inspect.isawaitable(user):
                user = await user
        except Exception as exc:
            return authentication_failed(exc)
        return authenticated(source, info, user)


def _strip_default_port(netloc: str, scheme: str) -> str:
    default = _DEFAULT_PORTS.get(scheme)
    return netloc[: -len(default) - 1] if default and netloc.endswith(":" + default) else netloc


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
