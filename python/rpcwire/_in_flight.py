"""The serving bounds the engine's session (:mod:`rpcwire._session`) applies, and :class:`InFlight`, the registry
of the requests read and not yet answered by id that the WebSocket connection (:mod:`rpcwire._websocket`) still
keeps beside the session: a request is added when it is read and removed once answered; a cancellation for an id
not (or no longer) in it is ignored. The sequential loop needs neither: nothing is read while its one request
runs.
"""

from __future__ import annotations

from typing import Any

from rpcwire._context import RequestContext
from rpcwire._dialects import CANCEL_ID_KEYS, Dialect
from rpcwire._types import Request

__all__ = ["EXIT_GRACE", "READ_AHEAD_BYTES", "READ_AHEAD_REQUESTS", "InFlight", "cancellation_of", "id_key"]

EXIT_GRACE = 2.0
"""When a handler ends the server (SystemExit, or another BaseException that is not an Exception), the
requests in flight get this long to finish and be answered; stopping, the writer gets this long to write
what finished (it may be blocked on a peer that does not read)."""


def id_key(id_: Any) -> tuple[bool, Any]:
    """Ids compare as JSON values: ``1`` and ``1.0`` are one id, ``1`` and ``"1"`` two."""
    return (isinstance(id_, str), id_)


class InFlight:
    """The requests read and not yet answered, by id, for cancellations to find (on the event loop's thread)."""

    def __init__(self) -> None:
        self._by_id: dict[tuple[bool, Any], RequestContext] = {}

    def add(self, context: RequestContext) -> None:
        self._by_id[id_key(context.id)] = context

    def remove(self, context: RequestContext) -> None:
        key = id_key(context.id)
        if self._by_id.get(key) is context:
            del self._by_id[key]

    def contexts(self) -> list[RequestContext]:
        return list(self._by_id.values())

    def cancel(self, request: Request) -> bool:
        """If ``request`` is a cancellation (either dialect), apply it and return True."""
        cancellation = cancellation_of(request)
        if cancellation is None:
            return False
        dialect, key = cancellation
        context = None if key is None else self._by_id.get(key)
        if context is not None:  # unknown and finished ids are ignored
            context._cancel(dialect)
        return True


def cancellation_of(request: Request) -> tuple[Dialect, tuple[bool, Any] | None] | None:
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
