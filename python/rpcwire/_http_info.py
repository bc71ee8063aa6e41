"""What a handler may know of the HTTP request it serves: :class:`HTTPRequestInfo` (``current_request().http``).

Built from a WSGI ``environ`` or an ASGI ``scope`` (``http`` or ``websocket``) only when asked for: the HTTP apps
hand the request context the ``environ``/``scope`` itself, and :func:`request_info` builds the info the first
time a handler (or ``authenticate``, or a hook) reads it, then keeps it in that same dict under
``"rpcwire.http"``, so that every request of a batch, and every look, shares one. A request that never asks
pays nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HTTPHeaders", "HTTPRequestInfo", "request_info"]

INFO_KEY = "rpcwire.http"
"""Where the built info is kept in its ``environ`` or ``scope`` (a server-specific key, as PEP 3333 and the
ASGI specification allow)."""


class HTTPHeaders(Mapping[str, str]):
    """A request's headers, read-only: names are lower-case, looked up in any case. A name sent several times
    maps to its values joined with ``", "`` (RFC 9110's combination); :meth:`getlist` gives them apart (a WSGI
    server has already joined them). ``len`` and iteration count each name once, in the order first sent."""

    __slots__ = ("_joined", "_pairs")

    def __init__(self, pairs: Iterable[tuple[str, str]]) -> None:
        self._pairs: tuple[tuple[str, str], ...] = tuple((name.lower(), value) for name, value in pairs)
        joined: dict[str, str] = {}
        for name, value in self._pairs:
            joined[name] = f"{joined[name]}, {value}" if name in joined else value
        self._joined = joined

    def __getitem__(self, name: str) -> str:
        return self._joined[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._joined

    def __iter__(self) -> Iterator[str]:
        return iter(self._joined)

    def __len__(self) -> int:
        return len(self._joined)

    def getlist(self, name: str) -> list[str]:
        """Every value sent under ``name`` (any case), in order; ``[]`` when none."""
        name = name.lower()
        return [value for header, value in self._pairs if header == name]

    def raw(self) -> tuple[tuple[str, str], ...]:
        """The ``(name, value)`` pairs as received, names lower-cased."""
        return self._pairs

    def __repr__(self) -> str:
        return f"HTTPHeaders({list(self._pairs)!r})"


@dataclass(frozen=True)
class HTTPRequestInfo:
    """The HTTP request a call came in (``current_request().http``; ``None`` over stdio, pipes and sockets).

    Read-only. For a WebSocket, the upgrade request (``method`` ``"GET"``, ``scheme`` ``"ws"``/``"wss"``).
    """

    method: str
    """The request method (``"POST"``)."""
    path: str
    """The path, percent-decoded, without the query: WSGI's ``SCRIPT_NAME`` + ``PATH_INFO``, ASGI's ``path``
    (under a mount, both are the whole path)."""
    query: str
    """The raw query string, without ``?`` (``""`` when none)."""
    scheme: str
    """``"http"`` or ``"https"`` (``"ws"``/``"wss"`` for a WebSocket), as the server says."""
    headers: HTTPHeaders
    """The request's headers (:class:`HTTPHeaders`: lower-case names, case-insensitive look-ups)."""
    client: tuple[str, int | None] | None
    """The peer's ``(address, port)`` as the server says (a proxy's, behind one); ``None`` when unknown, the
    port ``None`` when a WSGI server gives none."""
    user: Any = field(default=None, compare=False)
    """What the app's ``authenticate`` returned when it accepted the request (``None`` without one)."""


def request_info(source: dict[str, Any]) -> HTTPRequestInfo:
    """The info of the request whose WSGI ``environ`` or ASGI ``scope`` is ``source``, built once and kept in it."""
    info: HTTPRequestInfo | None = source.get(INFO_KEY)
    if info is None:
        # An environ always has REQUEST_METHOD (PEP 3333); a scope never does (nor always "asgi": Starlette's
        # TestClient leaves it out).
        info = from_wsgi(source) if "REQUEST_METHOD" in source else from_asgi(source)
        source[INFO_KEY] = info
    return info


def from_wsgi(environ: Mapping[str, Any]) -> HTTPRequestInfo:
    """The info of a WSGI request (PEP 3333's ``environ``)."""
    pairs: list[tuple[str, str]] = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            pairs.append((key[5:].replace("_", "-"), value))
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            pairs.append((key.replace("_", "-"), value))
    path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
    # PEP 3333: the path's bytes as latin-1 characters; a URL's path is UTF-8.
    path = path.encode("latin-1", "replace").decode("utf-8", "replace")
    address = environ.get("REMOTE_ADDR")
    port = environ.get("REMOTE_PORT")
    return HTTPRequestInfo(
        method=environ.get("REQUEST_METHOD", "GET"),
        path=path,
        query=environ.get("QUERY_STRING", ""),
        scheme=environ.get("wsgi.url_scheme", "http"),
        headers=HTTPHeaders(pairs),
        client=None if not address else (address, int(port) if isinstance(port, str) and port.isdigit() else None),
    )


def from_asgi(scope: Mapping[str, Any]) -> HTTPRequestInfo:
    """The info of an ASGI ``http`` or ``websocket`` scope (a WebSocket's handshake is a ``GET``)."""
    client = scope.get("client")
    query = scope.get("query_string", b"")
    websocket = scope.get("type") == "websocket"
    return HTTPRequestInfo(
        method="GET" if websocket else scope.get("method", "GET"),
        path=scope.get("path", ""),
        query=query.decode("latin-1") if isinstance(query, bytes) else str(query),
        scheme=scope.get("scheme", "ws" if websocket else "http"),
        headers=HTTPHeaders((name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"]),
        client=None if not client else (str(client[0]), None if client[1] is None else int(client[1])),
    )
