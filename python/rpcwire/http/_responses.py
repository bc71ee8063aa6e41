"""The HTTP responses the apps send that are not a handler's answer streamed: a refusal (``text/plain``, its status
line and why), a plain answer (200 ``application/json``, or 204), and their status lines.

A refusal the apps share (405, 403, 421, 415, 400, 411) is made once, here, at import: the hot path hands out the
same object, its headers encoded once for ASGI (:meth:`HTTPResponse.asgi_start`).
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

__all__ = [
    "BAD_LENGTH",
    "FORBIDDEN",
    "LENGTH_REQUIRED",
    "METHOD_NOT_ALLOWED",
    "MISDIRECTED",
    "NO_CONTENT",
    "UNSUPPORTED",
    "HTTPResponse",
    "Headers",
    "answered",
    "refusal",
    "status_line",
]

Headers = list[tuple[str, str]]


class HTTPResponse:
    """A whole response: its status, its body and its headers (names as written; lowered for ASGI)."""

    __slots__ = ("_asgi_headers", "_closing", "body", "headers", "status")

    def __init__(self, status: int, body: bytes = b"", headers: Headers | None = None) -> None:
        self.status = status
        self.body = body
        self.headers = headers or []
        self._asgi_headers: list[tuple[bytes, bytes]] | None = None
        self._closing: HTTPResponse | None = None

    def closing(self) -> HTTPResponse:
        """This response with ``Connection: close``: for a refusal that left the request's body unread (made once
        for a shared refusal)."""
        if self._closing is None:
            self._closing = HTTPResponse(self.status, self.body, [*self.headers, ("Connection", "close")])
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


def status_line(status: int) -> str:
    """``"<status> <reason>"``, as WSGI's ``start_response`` takes it and a refusal's text opens."""
    line = _STATUS_LINES.get(status)
    if line is None:
        try:
            line = f"{status} {HTTPStatus(status).phrase}"
        except ValueError:
            line = f"{status} Refused"
    return line


def refusal(status: int, text: str, headers: Headers | None = None) -> HTTPResponse:
    """A refusal: ``text`` as a ``text/plain`` body of one line, with ``headers`` added."""
    body = text.encode() + b"\n"
    return HTTPResponse(
        status,
        body,
        [("Content-Type", "text/plain; charset=utf-8"), *(headers or []), ("Content-Length", str(len(body)))],
    )


METHOD_NOT_ALLOWED = refusal(405, "405 Method Not Allowed: JSON-RPC takes POST", [("Allow", "POST")])
FORBIDDEN = refusal(403, "403 Forbidden: origin not allowed")
MISDIRECTED = refusal(421, "421 Misdirected Request: this server is not known by that Host (allowed_hosts)")
UNSUPPORTED = refusal(415, "415 Unsupported Media Type: send application/json (UTF-8)")
BAD_LENGTH = refusal(400, "400 Bad Request: invalid Content-Length")
LENGTH_REQUIRED = refusal(411, "411 Length Required")
NO_CONTENT = HTTPResponse(204)


def answered(answer: bytes | None) -> HTTPResponse:
    """A body's answer as a plain response: 200 ``application/json``, or 204 for none (only notifications)."""
    if answer is None:
        return NO_CONTENT
    return HTTPResponse(200, answer, [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))])
