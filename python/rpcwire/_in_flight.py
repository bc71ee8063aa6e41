"""The requests read and not yet answered, by id: where a cancellation (either dialect) finds its request;
and the requests read past the pause, held until there is room for them (:class:`ReadAhead`).

Both concurrent servers (:mod:`rpcwire._thread_server`, :mod:`rpcwire._async_server`) hold one of each: a request
is added when it is read and removed once answered; a cancellation for an id not (or no longer) in it is
ignored. The sequential loop needs neither: nothing is read while its one request runs.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from rpcwire._answer import Deliver
from rpcwire._context import RequestContext
from rpcwire._dialects import CANCEL_ID_KEYS
from rpcwire._types import Request

__all__ = ["EXIT_GRACE", "READ_AHEAD_BYTES", "READ_AHEAD_REQUESTS", "InFlight", "ReadAhead"]

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

    def cancel(self, request: Request, found: Callable[[RequestContext], None] | None = None) -> bool:
        """If ``request`` is a cancellation (either dialect), apply it and return True; ``found`` is then called
        with the context it cancelled, if any (without this object's lock held)."""
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
                if found is not None:
                    found(context)
        return True


# Reading goes on past the pause (2N requests read and unanswered), so that the cancellations behind the
# requests waiting are acted on at once, while the requests read past it, held, are fewer than these
# (docs/semantics.md, "Concurrency"): a peer that sends more than the server takes costs at most this much.
READ_AHEAD_REQUESTS = 1024
READ_AHEAD_BYTES = 1 << 20

Held = tuple[Request, RequestContext, Deliver]


class ReadAhead:
    """The requests read past the pause, held in arrival order, not started: each one starts when a request
    admitted before it ends (:meth:`take`); a cancelled one leaves at once (:meth:`drop`), never run. Not locked:
    the threads server uses it under its own lock, the asyncio one on the loop's thread only.

    :meth:`full` says when reading pauses: with ``READ_AHEAD_REQUESTS`` held, or ``READ_AHEAD_BYTES`` of them
    together (each counted as the core encodes its params: what a request holds, near enough)."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self._queue: deque[Held] = deque()  # in arrival order; dropped ones are skipped when they come up
        self._held: dict[int, tuple[Held, int]] = {}  # by the context's id: the held ones not dropped, their sizes
        self.size = 0

    def __len__(self) -> int:
        return len(self._held)

    def full(self) -> bool:
        return len(self._held) >= READ_AHEAD_REQUESTS or self.size >= READ_AHEAD_BYTES

    def hold(self, request: Request, context: RequestContext, deliver: Deliver) -> None:
        held = (request, context, deliver)
        size = self._size(request)
        self._queue.append(held)
        self._held[id(context)] = (held, size)  # the queue keeps the context alive: its id is not reused
        self.size += size

    def take(self) -> Held | None:
        """The first request held and not dropped, out of the queue; ``None`` if there is none."""
        while self._queue:
            held = self._queue.popleft()
            kept = self._held.pop(id(held[1]), None)
            if kept is not None:
                self.size -= kept[1]
                return held
        return None

    def drop(self, context: RequestContext) -> Held | None:
        """The held request of ``context``, out of the queue (``None`` if it is not held): cancelled, it is answered
        by the caller at once and never run."""
        kept = self._held.pop(id(context), None)
        if kept is None:
            return None
        self.size -= kept[1]
        if len(self._queue) > 2 * len(self._held) + 64:  # dropped ones no longer hold their requests' memory
            self._queue = deque(held for held in self._queue if id(held[1]) in self._held)
        return kept[0]

    def _size(self, request: Request) -> int:
        try:
            return len(request.method) + len(self._transport._answer_result(b"0", request.params))
        except Exception:  # a size is only a bound's measure: params the core cannot encode count little
            return len(request.method)
