"""The serving session: the one owner of what is in flight on a connection, sans-IO (as h11's ``Connection`` is
one layer up, and lsp-server's request queue). It reads nothing, writes nothing, starts no thread and never
waits: a driver feeds it events and carries out the actions it returns.

Events (methods): :meth:`Session.received` (a message read), :meth:`Session.finished` (a request's answer is
ready), :meth:`Session.failed` (a handler raised a ``BaseException``), :meth:`Session.notified` (a notification's
handler returned), :meth:`Session.written` (the writer wrote answers), :meth:`Session.input_ended` (end of input,
or the peer's write side closed), :meth:`Session.peer_gone` (the connection is gone both ways: a WebSocket's
disconnect), :meth:`Session.queued` (the driver queued a message of its own for the peer: a handler's notification),
:meth:`Session.stop` (an interrupt, a failure of the driver's), :meth:`Session.output_failed`,
:meth:`Session.abandon` (the stop's grace is over). Actions (frozen dataclasses but for the two made per request,
``Start`` and ``Write``: slots classes the session fills, without an ``__init__``): :class:`Start`,
:class:`RunNotification`, :class:`Write`, :class:`Cancel`, :class:`PauseReading`, :class:`ResumeReading`,
:class:`Drop`, :class:`Stop`, :class:`Settled`. Whether the driver may read now: :attr:`Session.reading`; whether
anything is in flight: :attr:`Session.busy` (and with every answer written: :attr:`Session.idle`).

The rules it owns (docs/semantics.md, "Concurrency"), each written here once:

1. **Admission.** At most ``2N`` requests are admitted (read and not yet answered): ``Start`` is returned for
   each, and the driver runs at most ``N`` of them at once (its worker pool or its N turns); the others wait for
   a slot there, already started from the session's view (one cancelled while it waits is answered by
   ``rpcwire._answer.call`` without running).
2. **Read-ahead.** Past ``2N``, reading goes on and the requests read are held, in arrival order, never started
   while held; each starts (``Start``) when an admitted one ends and the unwritten answers are within their
   bounds (rule 6). A request read while others are held is held behind them, whatever the room.
3. **Cancellation, by dialect.** ``$/cancelRequest`` (LSP, ``params.id``) and ``notifications/cancelled`` (MCP,
   ``params.requestId``) are consumed here and never run as notifications. The id (a str or a number: ``1`` and
   ``1.0`` are one id, ``1`` and ``"1"`` two) names a request read and not yet answered; an unknown or finished
   one is ignored. A held request cancelled leaves at once, never runs, and is answered at once (LSP: -32800;
   MCP: no answer). A started one gets ``Cancel`` (its context is marked, its task cancelled).
4. **Notifications in order.** A notification (not a cancellation) runs alone (``RunNotification``): nothing after
   it is read or dispatched until the driver says :meth:`notified`, and it runs only once every answer finished
   before it was read has been written (:meth:`written` says so). A batch's entries are dispatched in order under
   the same rule: those after a notification wait for it.
5. **Batches.** A batch's answers go out as one line when its last request is answered
   (``rpcwire._answer.each_request``); each entry is admitted, held or cancelled as a lone request is.
6. **Backpressure.** Reading pauses (``PauseReading``; :attr:`reading` false) while ``READ_AHEAD_REQUESTS``
   requests or ``READ_AHEAD_BYTES`` are held, or while more than ``UNWRITTEN_ANSWERS`` answers or
   ``UNWRITTEN_BYTES`` wait to be written (a peer that does not read); held requests do not start meanwhile. It
   resumes (``ResumeReading``) once both are within bounds: a peer costs bounded memory, never a drop. The
   driver's own messages (:meth:`Session.queued`) count in the bytes waiting to be written.
7. **Stop.** ``Stop(reason, grace, write_grace)`` tells the driver to read no more; the requests in flight get
   ``grace`` seconds to finish (``None``: as long as they take), then :meth:`abandon` cancels the rest, and the
   writer gets ``write_grace`` to write what finished; then ``reason`` is raised (``None``: return). End of input
   (or the peer gone): no grace limit, the held requests still start. A handler's ``SystemExit`` or other
   ``BaseException`` (not an ``Exception``), or a failure of the driver's own: ``EXIT_GRACE`` for both, nothing
   held starts and no notification runs any more; the first such reason is the one raised. An interrupt
   (``KeyboardInterrupt``, ``asyncio.CancelledError``): no grace, ``EXIT_GRACE`` to write. The output failed:
   nothing can be written, no grace for either; its error is raised unless an interrupt came first. ``Settled``
   follows a ``Stop`` once nothing is in flight, held, or waiting to run.
8. **A peer too slow** (only where the driver asks for it, ``drop_bytes``: the WebSocket connection's
   ``max_queued_bytes``). Past ``drop_bytes`` waiting to be written (answers and the driver's own messages, more
   than one message: one frame may hold as much), the connection is dropped: ``Drop`` (the driver closes it),
   then a stop without grace (nothing more can be written). The peer gone both ways (:meth:`Session.peer_gone`)
   stops the same way, without the ``Drop``. Both keep a reason given before; what is in flight is cancelled by
   :meth:`Session.abandon`, and what is held never starts.
9. **After an answer.** Once a request is answered it leaves the registry: a cancellation for it is ignored, and
   its answer, once given, is never written twice; a handler's progress is the context's (``RequestContext``),
   written before its answer, not the session's business.

Not thread-safe: a driver calls it from one thread at a time (the threads driver under one lock, asyncio on the
loop's thread).
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from rpcwire._answer import Deliver, cancelled_answer, each_request
from rpcwire._context import RequestContext
from rpcwire._contract import AnswerBuilder, Message
from rpcwire._dialects import Dialect
from rpcwire._in_flight import EXIT_GRACE, READ_AHEAD_BYTES, READ_AHEAD_REQUESTS, cancellation_of, id_key
from rpcwire._types import Request

__all__ = [
    "UNWRITTEN_ANSWERS",
    "UNWRITTEN_BYTES",
    "Action",
    "Cancel",
    "Drop",
    "Grace",
    "PauseReading",
    "ResumeReading",
    "RunNotification",
    "Session",
    "Settled",
    "Start",
    "Stop",
    "Write",
]

# Reading pauses while more answers than these wait to be written (docs/semantics.md, "Concurrency"): a peer that
# does not read holds the engine to this much memory, not to all the answers to what it sends.
UNWRITTEN_ANSWERS = 1024
UNWRITTEN_BYTES = 1 << 20


class Start:
    """Run this request's handler in ``context``; tell :meth:`Session.finished` (or ``failed``) with this object.

    Made by the session only, one per request: without an ``__init__`` (``Start()``, then its four slots
    stored), whose Python frame would cost about as much again."""

    __slots__ = ("context", "deliver", "held", "request")

    request: Request
    context: RequestContext
    deliver: Deliver | None  # where its answer goes (a batch's place); None: a lone request's, written as it is
    held: int  # the session's: the bytes it counts while held (rule 2); 0 once started or dropped

    def __repr__(self) -> str:
        return f"Start(request={self.request!r}, held={self.held})"


@dataclass(frozen=True, slots=True, eq=False)
class RunNotification:
    """Run this notification's handler now, nothing else read meanwhile; then :meth:`Session.notified`."""

    request: Request
    context: RequestContext
    deliver: Deliver


class Write:
    """Hand these whole answer lines to the writer, in this order.

    Made by the session only, one per answer on a pipelining peer's path: without an ``__init__`` (see
    :class:`Start`)."""

    __slots__ = ("lines",)

    lines: list[bytes]

    def __repr__(self) -> str:
        return f"Write(lines={self.lines!r})"


@dataclass(frozen=True, slots=True)
class Cancel:
    """A started request was cancelled: mark its context (and cancel its task, if it has one)."""

    context: RequestContext
    dialect: Dialect


@dataclass(frozen=True, slots=True)
class PauseReading:
    """Read nothing more until :class:`ResumeReading`."""


@dataclass(frozen=True, slots=True)
class ResumeReading:
    """Reading may go on."""


@dataclass(frozen=True, slots=True)
class Drop:
    """The peer reads too slowly (rule 8): close its connection. ``unwritten`` messages of ``size`` bytes waited to
    be written; nothing more is written (a :class:`Stop` without grace follows)."""

    unwritten: int
    size: int


@dataclass(frozen=True, slots=True)
class Stop:
    """Read no more. What is in flight gets ``grace`` seconds (``None``: as long as it takes) to finish, then
    :meth:`Session.abandon`; the writer gets ``write_grace`` (``None``: however long); then raise ``reason``."""

    reason: BaseException | None
    grace: float | None
    write_grace: float | None


@dataclass(frozen=True, slots=True)
class Settled:
    """After a :class:`Stop`: nothing is in flight, held or waiting to run any more."""


class Grace:
    """A stop's grace as a driver counts it on its own clock: :meth:`left` for the stop in force; a stricter stop
    that comes meanwhile starts its own grace from when it is first looked at."""

    __slots__ = ("_deadline", "_stop")

    def __init__(self) -> None:
        self._stop: Stop | None = None
        self._deadline: float | None = None

    def left(self, stop: Stop, now: float) -> float | None:
        """Seconds left of ``stop``'s grace at ``now`` (``None``: no limit; at most 0 once it is over)."""
        if stop is not self._stop:
            self._stop, self._deadline = stop, None if stop.grace is None else now + stop.grace
        return None if self._deadline is None else self._deadline - now


def _started(request: Request, context: RequestContext, deliver: Deliver | None) -> Start:
    start = Start()
    start.request, start.context, start.deliver, start.held = request, context, deliver, 0
    return start


Action = Start | RunNotification | Write | Cancel | PauseReading | ResumeReading | Drop | Stop | Settled

_PAUSE = PauseReading()
_RESUME = ResumeReading()
_SETTLED = Settled()
_INTERRUPTS = (KeyboardInterrupt, asyncio.CancelledError)


class Session:
    """What is in flight on one connection, and every rule about it (the module doc). ``core`` builds answer
    bytes (a cancelled held request's) and measures held requests; ``make_context`` makes a request's context
    (default: ``RequestContext(request, core)``); ``drop_bytes``: rule 8's bound (``None``: never dropped)."""

    def __init__(
        self,
        core: AnswerBuilder,
        max_concurrency: int,
        *,
        make_context: Callable[[Request], RequestContext] | None = None,
        read_ahead_requests: int = READ_AHEAD_REQUESTS,
        read_ahead_bytes: int = READ_AHEAD_BYTES,
        unwritten_answers: int = UNWRITTEN_ANSWERS,
        unwritten_bytes: int = UNWRITTEN_BYTES,
        drop_bytes: int | None = None,
    ) -> None:
        self._core = core
        self._make_context = make_context or functools.partial(RequestContext, transport=core)
        self._own_context = make_context is None  # RequestContext(request, core) made inline (no partial's kwargs)
        self._measure = core._answer_result  # a held request's size (_size)
        self._max_admitted = 2 * max_concurrency
        self._admitted = 0  # started and not yet answered
        # Admitted or held, what cancellations find (by the id's key): a held one's ``held`` is its size, not 0.
        self._by_id: dict[Any, Start] = {}
        # Held past the 2N admitted, in arrival order; dropped ones (``held`` 0) are skipped when they come up.
        # One entry a held request in one container besides _by_id: a pipelining peer's every request is held.
        self._queue: deque[Start] = deque()
        self._held = 0  # how many of the queue's are held (not dropped)
        self._held_bytes = 0
        self._read_ahead_requests = read_ahead_requests
        self._read_ahead_bytes = read_ahead_bytes
        self._unwritten_answers = unwritten_answers
        self._unwritten_bytes_bound = unwritten_bytes
        self._emitted = 0  # answer lines handed out in Write actions...
        self._written = 0  # ...and written (or dropped by a failed output)
        self._unwritten_bytes = 0  # answers' and the driver's own messages'
        self._unwritten_queued = 0  # the driver's own messages not yet written
        self._drop_bytes = sys.maxsize if drop_bytes is None else drop_bytes
        self._entries: Iterator[tuple[Request, Deliver]] | None = None  # a message's entries not yet dispatched
        self._notification: RunNotification | None = None  # waiting for earlier answers to be written, or running
        self._notification_target = 0  # the answers to be written before it runs
        self._notification_running = False
        self._output: list[Action] = []  # the actions of the event being handled
        self._lines: list[bytes] | None = None  # the Write being filled
        self._paused = False
        self._ended = False  # end of input
        self._stopping = False  # stopped with a reason: nothing more starts
        self._stop: Stop | None = None
        self._settled = False

    # --- what a driver asks -----------------------------------------------------------------------------

    @property
    def reading(self) -> bool:
        """Whether the driver may read the next message now (what the last pause or resume said; false once
        stopped)."""
        return not self._paused

    def _can_read(self) -> bool:
        return (
            self._stop is None
            and self._entries is None
            and self._notification is None
            and not self._read_ahead_full()
            and not self._over_written_bounds()
        )

    @property
    def idle(self) -> bool:
        """Nothing admitted, held or waiting to run, and every answer written (read without a lock: a hint)."""
        return not self._admitted and not self._held and self._written >= self._emitted and self._notification is None

    @property
    def busy(self) -> bool:
        """A request admitted or held, or a notification waiting to run or running: what keeps a connection from
        being idle (answers waiting to be written do not count: a writer's counts may reach the session late).
        Read without a lock, from any thread: a hint, to be looked at again."""
        return bool(self._admitted or self._held or self._notification is not None)

    @property
    def stopped(self) -> Stop | None:
        """The stop in force, if any."""
        return self._stop

    # --- events -------------------------------------------------------------------------------------------

    def received(self, message: Message) -> list[Action]:
        """A message read (a request, a batch's entries, or a refusal's bytes)."""
        if self._stop is not None:
            return []
        if type(message) is Request and not message.is_notification:  # the common case, without each_request's walk
            start = Start()  # (_started, inline: once per request)
            start.request = message
            start.context = RequestContext(message, self._core) if self._own_context else self._make_context(message)
            start.deliver = None
            id_ = message.id
            if not self._held and self._admitted < self._max_admitted:
                start.held = 0
                self._admitted += 1  # (_admit, inline: once per request)
                self._by_id[id_] = start  # (id_key: the id itself)
                return [start]
            # (_hold, inline: a pipelining peer's every request is held; only the read-ahead can change what the
            # session says)
            try:  # (_size, inline: the size its reader gave it)
                start.held = size = message._wire_size  # type: ignore[attr-defined]
            except AttributeError:
                start.held = size = self._size(message)
            self._queue.append(start)
            self._by_id[id_] = start
            self._held += 1
            self._held_bytes += size
            if not self._paused and (
                self._held >= self._read_ahead_requests or self._held_bytes >= self._read_ahead_bytes
            ):
                self._paused = True
                return [_PAUSE]
            return []
        self._entries = each_request(message, self._write)
        self._dispatch_entries()
        return self._actions()

    def finished(self, start: Start, answer: bytes | None) -> list[Action]:
        """A started request's answer (``None``: none to write)."""
        self._admitted -= 1  # (_leave, inline: once per request)
        by_id, id_ = self._by_id, start.request.id
        if by_id.get(id_) is start:
            del by_id[id_]
        if start.deliver is not None or self._stop is not None or self._notification is not None:
            self._deliver(start, answer)
            self._start_held()
            return self._actions()
        # A lone request's answer, nothing waiting to run or stopping (the common case, kept short; a pipelining
        # peer keeps requests held and reading paused at the read-ahead's bound): the answer out, then what rule 2
        # starts (as _start_held), then reading resumes if both bounds allow (as _actions says).
        if answer is None:
            actions: list[Action] = []
            unwritten = self._unwritten_bytes
        else:
            self._emitted += 1
            self._unwritten_bytes = unwritten = self._unwritten_bytes + len(answer)
            write = Write()
            write.lines = [answer]
            actions = [write]
            if unwritten > self._drop_bytes and self._too_slow():
                return actions + self._actions()
        # (_over_written_bounds, inline: once per answer)
        if self._emitted - self._written > self._unwritten_answers or unwritten > self._unwritten_bytes_bound:
            if not self._paused:
                self._paused = True
                actions.append(_PAUSE)
            return actions
        held = self._held
        if held:  # (_take, inline: a pipelining peer's every request; one ended, so there is room for one)
            queue, admitted, room = self._queue, self._admitted, self._max_admitted
            while held and admitted < room:
                next_start = queue.popleft()  # (held ones are in the queue: never empty here)
                size = next_start.held
                if size:  # (not dropped)
                    next_start.held = 0
                    held -= 1
                    self._held_bytes -= size
                    admitted += 1
                    actions.append(next_start)
            self._held, self._admitted = held, admitted
        if self._paused and held < self._read_ahead_requests and self._held_bytes < self._read_ahead_bytes:
            self._paused = False  # (_can_read: nothing stops, waits to run or is being dispatched here)
            actions.append(_RESUME)
        return actions

    def failed(self, start: Start, error: BaseException) -> list[Action]:
        """A started request's handler raised ``error``, a ``BaseException`` that is not an ``Exception``: it is
        not answered, and the session stops with it."""
        self._leave(start)
        self._stop_with(error, output=False)
        return self._actions()

    def notified(self, notification: RunNotification) -> list[Action]:
        """The notification's handler returned (whatever it did): what came after it is dispatched."""
        self._notification = None
        self._notification_running = False
        notification.deliver(None)
        self._dispatch_entries()
        return self._actions()

    def written(self, count: int, size: int, queued: int = 0) -> list[Action]:
        """The writer wrote ``count`` answers and ``queued`` of the driver's own messages (:meth:`queued`), of
        ``size`` bytes together (or dropped them: the output failed)."""
        self._written += count
        self._unwritten_bytes -= size
        self._unwritten_queued -= queued
        if not self._paused and self._stop is None and not self._held and self._notification is None:
            return []  # less to write changes nothing here: reading goes on, nothing waits to start or run
        self._run_notification_if_written()
        self._start_held()
        return self._actions()

    def queued(self, size: int) -> list[Action]:
        """The driver queued a message of its own for the peer (a handler's notification), ``size`` bytes: it counts
        as waiting to be written until :meth:`written` says so (rules 6 and 8)."""
        self._unwritten_queued += 1
        self._unwritten_bytes += size
        if self._unwritten_bytes > self._drop_bytes:
            self._too_slow()
        return self._actions()

    def input_ended(self) -> list[Action]:
        """End of input (the peer's write side closed): what is in flight (held too) still runs and is answered."""
        self._ended = True
        if self._stop is None:
            self._set_stop(Stop(None, None, None))
        return self._actions()

    def peer_gone(self) -> list[Action]:
        """The connection is gone both ways (a WebSocket's disconnect, its send failing): nothing more is read or
        written, what is held never starts, and what is in flight is abandoned at once (rule 8)."""
        self._halt()
        return self._actions()

    def stop(self, reason: BaseException) -> list[Action]:
        """Stop with ``reason``: an interrupt, a failed read, a notification's ``BaseException``."""
        self._stop_with(reason, output=False)
        return self._actions()

    def output_failed(self, error: BaseException) -> list[Action]:
        """Writing failed: nothing more can be written."""
        self._stop_with(error, output=True)
        return self._actions()

    def abandon(self) -> list[Action]:
        """The stop's grace is over: each request still in flight is cancelled (it is answered no more)."""
        self._stopping = True
        for start in list(self._by_id.values()):
            if not start.held:
                self._output.append(Cancel(start.context, "lsp"))
        return self._actions()

    # --- the rules ----------------------------------------------------------------------------------------

    def _dispatch_entries(self) -> None:
        """Rule 4: the entries of the message being read, in order, until a notification has to run."""
        entries = self._entries
        if entries is None:
            return
        for request, deliver in entries:
            if request.is_notification:
                if self._cancellation(request):
                    deliver(None)
                    continue
                if self._stop is not None:  # stopping: no notification runs any more
                    continue
                self._notification = RunNotification(request, self._make_context(request), deliver)
                self._notification_target = self._emitted + (len(self._lines) if self._lines else 0)
                self._run_notification_if_written()
                return
            start = _started(request, self._make_context(request), deliver)
            if self._admitted < self._max_admitted and not self._held:
                self._admit(start)
                self._output.append(start)
            else:
                self._hold(start)
        self._entries = None

    def _run_notification_if_written(self) -> None:
        notification = self._notification
        if notification is None or self._notification_running:
            return
        if self._stopping:  # a handler raised, or the output failed, meanwhile: it never runs
            self._notification = None
            self._entries = None
            return
        if self._written >= self._notification_target:  # (the target counts the lines not yet handed out)
            self._notification_running = True
            self._output.append(notification)

    def _cancellation(self, request: Request) -> bool:
        """Rule 3: whether ``request`` is a cancellation (either dialect); if so, it is applied."""
        cancellation = cancellation_of(request)
        if cancellation is None:
            return False
        dialect, key = cancellation
        start = None if key is None else self._by_id.get(key)
        if start is None:  # unknown and finished ids are ignored
            return True
        if not start.held:
            self._output.append(Cancel(start.context, dialect))
        else:
            self._drop(start, key, dialect)
        return True

    def _admit(self, start: Start) -> None:
        self._admitted += 1
        self._by_id[id_key(start.request.id)] = start

    def _leave(self, start: Start) -> None:
        self._admitted -= 1
        key = id_key(start.request.id)  # (the context's id, without its property: once per request)
        if self._by_id.get(key) is start:
            del self._by_id[key]

    def _hold(self, start: Start) -> None:
        request = start.request
        try:
            start.held = size = request._wire_size  # type: ignore[attr-defined]
        except AttributeError:
            start.held = size = self._size(request)
        self._queue.append(start)
        self._held += 1
        self._held_bytes += size
        self._by_id[id_key(start.request.id)] = start

    def _drop(self, start: Start, key: Any, dialect: Dialect) -> None:
        """A held request cancelled: out of the queue, answered now (LSP: -32800; MCP: none), never run."""
        self._held -= 1
        self._held_bytes -= start.held
        start.held = 0  # skipped when the queue comes to it
        if len(self._queue) > 2 * self._held + 64:  # dropped ones no longer hold their requests' memory
            self._queue = deque(held for held in self._queue if held.held)
        del self._by_id[key]
        context = start.context
        context._cancel(dialect)  # held: no task to cancel, only the mark its answer reads
        self._deliver(start, cancelled_answer(self._core, start.request, context))

    def _start_held(self) -> None:
        """Rule 2: the held requests there is room for start, in arrival order, while answers are within bounds."""
        while self._held and self._admitted < self._max_admitted and not self._stopping:
            if self._over_written_bounds(self._lines):
                return
            start = self._take()
            if start is None:
                return
            self._admitted += 1
            self._output.append(start)

    def _take(self) -> Start | None:
        queue = self._queue
        while queue:
            start = queue.popleft()
            size = start.held
            if size:  # (not dropped)
                start.held = 0
                self._held -= 1
                self._held_bytes -= size
                return start
        return None

    def _size(self, request: Request) -> int:
        """A held request's bytes when its reader gave it none (``_wire_size``: those of the message it was read
        from, which both cores' readers give each request they read): as the core encodes its params (in an
        answer's envelope: never 0)."""
        try:
            return len(request.method) + len(self._measure(b"0", request.params))
        except Exception:  # a size is only a bound's measure: params the core cannot encode count little
            return len(request.method) + 1

    def _read_ahead_full(self) -> bool:
        return self._held >= self._read_ahead_requests or self._held_bytes >= self._read_ahead_bytes

    def _over_written_bounds(self, pending: list[bytes] | None = None) -> bool:
        unwritten = self._emitted - self._written
        size = self._unwritten_bytes
        if pending:
            unwritten += len(pending)
            size += sum(map(len, pending))
        return unwritten > self._unwritten_answers or size > self._unwritten_bytes_bound

    def _stop_with(self, reason: BaseException, *, output: bool) -> None:
        """Rule 7: which stop, and which reason wins."""
        current = self._stop
        if current is not None and current.write_grace == 0:
            return  # the output failed already: nothing is stricter
        if output:  # an interrupt that came first is still the one raised
            interrupted = current is not None and isinstance(current.reason, _INTERRUPTS)
            stop = Stop(current.reason if interrupted and current is not None else reason, 0, 0)
        elif current is not None and current.reason is not None:
            return  # the first reason is the one raised
        elif isinstance(reason, _INTERRUPTS):
            stop = Stop(reason, 0, EXIT_GRACE)
        else:
            stop = Stop(reason, EXIT_GRACE, EXIT_GRACE)
        self._stopping = True
        self._set_stop(stop)

    def _too_slow(self) -> bool:
        """Rule 8, with more than ``drop_bytes`` waiting to be written: a ``Drop`` and the stop, unless one message
        alone holds that much or nothing more can be written anyway."""
        unwritten = self._emitted - self._written + self._unwritten_queued
        stop = self._stop
        if unwritten <= 1 or (stop is not None and stop.write_grace == 0):
            return False
        self._output.append(Drop(unwritten, self._unwritten_bytes))
        self._halt()
        return True

    def _halt(self) -> None:
        """Nothing more can be written: no grace to finish nor to write; a reason given before is kept."""
        current = self._stop
        if current is not None and current.write_grace == 0:
            return
        self._stopping = True
        self._set_stop(Stop(None if current is None else current.reason, 0, 0))

    def _set_stop(self, stop: Stop) -> None:
        self._stop = stop
        self._output.append(stop)
        if self._stopping:
            self._entries = None
            if self._notification is not None and not self._notification_running:
                self._notification = None

    # --- answers and actions ------------------------------------------------------------------------------

    def _write(self, line: bytes | None) -> None:
        """Where each answer line goes: into the Write of the event being handled."""
        if line is None:
            return
        if self._lines is None:
            self._lines = [line]
        else:
            self._lines.append(line)

    def _deliver(self, start: Start, answer: bytes | None) -> None:
        if start.deliver is None:
            self._write(answer)
        else:
            start.deliver(answer)

    def _actions(self) -> list[Action]:
        """The actions of the event just handled: the Write of its answers first, then the others in order, with
        the changes of reading and, once stopped, of being settled."""
        lines = self._lines
        if lines is not None:
            self._lines = None
            self._emitted += len(lines)
            self._unwritten_bytes += sum(map(len, lines))
            if self._unwritten_bytes > self._drop_bytes:
                self._too_slow()
            write = Write()
            write.lines = lines
            self._output.insert(0, write)
        output, self._output = self._output, []
        reading = self._can_read()
        if reading == self._paused:  # it changed (once stopped, reading never resumes: nothing to say)
            self._paused = not reading
            if self._stop is None:
                output.append(_PAUSE if self._paused else _RESUME)
        if (
            self._stop is not None
            and not self._settled
            and not self._admitted
            and (not self._held or self._stopping)  # stopping, held ones never start
            and self._notification is None
            and self._entries is None
        ):
            self._settled = True
            output.append(_SETTLED)
        return output
