"""``authenticate``: the refusals it raises (:class:`Refusal`, :class:`Unauthorized`, :class:`Forbidden`) and
what its outcome answers, before the request's body is read.

``authenticate(info)`` returns the user (``current_request().http.user``; ``None`` leaves it unset), ``False``
(403), or raises a :class:`Refusal` (its status, message and headers); anything else it raises is a 500, logged.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rpcwire._http_info import INFO_KEY, HTTPRequestInfo
from rpcwire.http._responses import HTTPResponse, refusal, status_line

__all__ = ["Authenticate", "Forbidden", "Refusal", "Unauthorized", "authenticated", "authentication_failed"]

logger: logging.Logger = logging.getLogger("rpcwire")

# RFC 9110: a token, and a value of latin-1 without control characters (tab allowed) or DEL.
_HEADER = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+:[^\x00-\x08\x0a-\x1f\x7f\u0100-\U0010ffff]*")
# Written by the app itself: a refusal's own would contradict them.
_OWN_HEADERS = frozenset({"content-type", "content-length"})

_AUTH_FORBIDDEN = refusal(403, "403 Forbidden")
_AUTH_FAILED = refusal(500, "500 Internal Server Error")


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
        super().__init__(message or status_line(status))

    def response(self) -> HTTPResponse:
        """The HTTP answer of this refusal: its status, a ``text/plain`` body (the status line and the message)
        and its headers."""
        text = status_line(self.status)
        return refusal(self.status, f"{text}: {self.message}" if self.message else text, self.headers)


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


def authenticated(source: dict[str, Any], info: HTTPRequestInfo, user: Any) -> HTTPResponse | None:
    """What ``authenticate`` returning ``user`` answers: the 403 for ``False``, else ``None`` to go on, the user
    kept in ``source`` (the WSGI ``environ`` or ASGI ``scope``) as the request's info's ``user``."""
    if user is False:
        return _AUTH_FORBIDDEN
    if user is not None:
        source[INFO_KEY] = dataclasses.replace(info, user=user)
    return None


def authentication_failed(exc: BaseException) -> HTTPResponse:
    """What ``authenticate`` raising ``exc`` answers: a :class:`Refusal`'s own response, else a 500 (logged)."""
    if isinstance(exc, Refusal):
        return exc.response()
    logger.error("authenticate failed; answered 500", exc_info=exc)
    return _AUTH_FAILED
