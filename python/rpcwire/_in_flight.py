"""The requests read and not yet answered, by id: where a cancellation (either dialect) finds its request.

Both concurrent servers (:mod:`rpcwire._thread_server`, :mod:`rpcwire._async_server`) hold one: a request is
added when it is admitted and removed once answered; a cancellation for an id not (or no longer) in it is
ignored. The sequential loop needs none: nothing is read while its one request runs.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from rpcwire._context import RequestContext
from rpcwire._dialects import CANCEL_ID_KEYS
from rpcwire._types import Request

__all__ = ["EXIT_GRACE", "InFlight"]

EXIT_GRACE = 2.0
"""When a handler ends the server (SystemExit, or another BaseException that is not an Exception), the
requests in flight get this long to finish and be answered; stopping, the writer gets this long to write
what finished (it may be blocked on a peer that does not read)."""


def _id_key(id_: Any) -> tuple[bool, Any]:
    """Ids compare as JSON values: ``1`` and ``1.0`` are one id, ``1`` and ``"1"`` two."""
    return (isinstance(id_, str), id_)


class InFlight:
    """The requests read and not yet answered, by id, for cancellations to find. ``locked=False``: for a server
    that uses it on one thread only (the event loop's), which needs no lock."""

    def __init__(self, *, locked: bool = True) -> None:
        self._lock: threading.Lock | contextlib.nullcontext[None] = (
            threading.Lock() if locked else contextlib.nullcontext()
        )
        self._by_id: dict[tuple[bool, Any], RequestContext] = {}
        if not locked:
            self.add, self.remove = self._add, self._remove  # type: ignore[method-assign]

    def add(self, context: RequestContext) -> None:
        with self._lock:
            self._add(context)

    def remove(self, context: RequestContext) -> None:
        with self._lock:
            self._remove(context)

    def _add(self, context: RequestContext) -> None:
        self._by_id[_id_key(context.id)] = context

    def _remove(self, context: RequestContext) -> None:
        key = _id_key(context.id)
        if self._by_id.get(key) is context:
            del self._by_id[key]

    def contexts(self) -> list[RequestContext]:
        with self._lock:
            return list(self._by_id.values())

    def cancel(self, request: Request) -> bool:
        """If ``request`` is a cancellation (either dialect), apply it and return True."""
        cancellation = CANCEL_ID_KEYS.get(request.method)
        if cancellation is None:
            return False
        dialect, key = cancellation
        params = request.params
        if isinstance(params, dict) and key in params and type(params[key]) in (str, int, float):  # not a bool
            with self._lock:
                context = self._by_id.get(_id_key(params[key]))
            if context is not None:  # unknown and finished ids are ignored
                context._cancel(dialect)
        return True
