"""The serving bounds the session (:mod:`rpcwire._session`) applies, and how it tells a cancellation and compares
ids. The session is the one registry of what is in flight (its drivers: threads, asyncio, the WebSocket connection);
the sequential loop needs none: nothing is read while its one request runs.
"""

from __future__ import annotations

from typing import Any

from rpcwire._dialects import CANCEL_ID_KEYS, Dialect
from rpcwire._types import Request

__all__ = ["EXIT_GRACE", "READ_AHEAD_BYTES", "READ_AHEAD_REQUESTS", "cancellation_of", "id_key"]

EXIT_GRACE = 2.0
"""When a handler ends the server (SystemExit, or another BaseException that is not an Exception), the
requests in flight get this long to finish and be answered; stopping, the writer gets this long to write
what finished (it may be blocked on a peer that does not read)."""


def id_key(id_: Any) -> Any:
    """Ids compare as JSON values: ``1`` and ``1.0`` are one id, ``1`` and ``"1"`` two. Python's own equality of
    the ids a reader gives (a str, an int, a float, ``None``; never a bool) says just that, so the id is its own
    key (the session looks it up twice per request)."""
    return id_


def cancellation_of(request: Request) -> tuple[Dialect, Any] | None:
    """``None`` if ``request`` is not a cancellation; else its dialect and the :func:`id_key` of the id it names
    (``None`` when it names none: a missing member, or one that cannot be an id, a bool, an object)."""
    cancellation = CANCEL_ID_KEYS.get(request.method)
    if cancellation is None:
        return None
    dialect, member = cancellation
    params = request.params
    if isinstance(params, dict) and member in params and type(params[member]) in (str, int, float):  # not a bool
        return dialect, id_key(params[member])
    return dialect, None


# Reading goes on past the pause (2N requests read and unanswered), so that the cancellations behind the
# requests waiting are acted on at once, while the requests read past it, held, are fewer than these
# (docs/semantics.md, "Concurrency"): a peer that sends more than the server takes costs at most this much.
READ_AHEAD_REQUESTS = 1024
READ_AHEAD_BYTES = 1 << 20
