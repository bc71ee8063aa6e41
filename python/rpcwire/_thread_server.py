"""``max_concurrency=N > 1`` with a sync handler: the calling thread dispatches, N worker threads run requests.

Each request runs on a worker and is answered as soon as it finishes (any order, as the specification
allows). Notifications run on the dispatching thread, one at a time and in arrival order, before anything after
them is read, and only once every answer finished before them is written (LSP's ``didChange`` is seen by the
next request). At most 2N requests are admitted: N running, N waiting for a worker (a request cancelled while it
waits never runs). Reading goes on past that, the requests read then held (:class:`rpcwire._in_flight.ReadAhead`)
so that cancellations behind them are acted on at once (a held request cancelled is answered at once and never
runs), and pauses once the held ones reach their bounds.

A message already buffered is taken on the calling thread, and so is any message while nothing is in flight;
a read that may wait while requests run or answers are being written is made by a reader thread of the server's
(started the first time one is needed), when the calling thread asks for it, and the calling thread waits for
the message *or* a stop (a worker's ``SystemExit``, a failed output): a read blocked on an input that stays open
never stands between a stop and ``serve`` returning (the reader, a daemon thread, is left in its read).
"""

from __future__ import annotations

import functools
import queue
import sys
import threading
import time
from typing import Any

from rpcwire._answer import Deliver, call, cancelled_answer, each_request
from rpcwire._answer_writer import AnswerWriter
from rpcwire._context import RequestContext
from rpcwire._contract import Message, Transport
from rpcwire._in_flight import EXIT_GRACE, InFlight, ReadAhead
from rpcwire._types import Handler, Request
from rpcwire._workers import Workers, leave_signals_to_the_main_thread

__all__ = ["ThreadServer"]

_WAKE = object()  # in the inbox: look at ``stopping`` (or at the room held requests left) again
_STOPPED: Any = object()  # next_message's answer when the server stops while it waits


class ThreadServer:
    """``max_concurrency=N > 1`` on threads: the calling thread dispatches, N workers run requests."""

    def __init__(self, handler: Handler, transport: Transport, max_concurrency: int) -> None:
        self.handler = handler
        self.transport = transport
        self.max_concurrency = max_concurrency
        # Admitted and not yet answered: N running and N waiting for a worker, at most. A token each, in a
        # SimpleQueue: taking and giving one back costs a fraction of a BoundedSemaphore's acquire and release,
        # and waiting for one is interrupted by SIGINT alike.
        self.admitted: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(2 * max_concurrency):
            self.admitted.put(None)
        self.held = 0  # tokens the dispatching thread took back once reading stopped
        self.in_flight = InFlight()
        self.lock = threading.Lock()  # read_ahead, the hand-over of tokens to it, waiting_room
        self.read_ahead = ReadAhead(transport)
        self.waiting_room = False  # the dispatching thread waits for the read-ahead to have room
        self.ended = False  # serve is ending: no held request starts any more
        # What the dispatching thread waits for: the reader's messages, as (message, exception), and _WAKE.
        self.inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.asks: queue.SimpleQueue[bool] = queue.SimpleQueue()  # True: read one message; False: end
        self.reader: threading.Thread | None = None
        self.workers: Workers
        self.failures: list[BaseException] = []  # raised by handlers on the workers
        self.writer = AnswerWriter(transport, on_failure=self.wake)

    def wake(self) -> None:
        """The output failed, or a handler raised a ``BaseException``: the dispatching thread stops waiting, for
        a token or for input, and sees why."""
        self.admitted.put(None)
        self.inbox.put(_WAKE)

    @property
    def stopping(self) -> bool:
        return bool(self.failures) or self.writer.failure is not None

    def serve(self) -> None:
        self.workers = workers = Workers(self.max_concurrency)
        try:
            stopped: BaseException | None = None
            try:
                while not self.stopping:
                    if not self.writer.has_room():  # too many answers not yet written: reading pauses
                        self.writer.wait_room(lambda: self.stopping)
                        continue  # woken to stop (a worker's BaseException, the output failed): read no more
                    self.start_held()  # held while the writer had no room
                    if self.read_ahead_full():  # as many requests held as the bounds allow: reading pauses
                        self.wait_for_room()
                        continue
                    message = self.next_message()
                    if message is None or message is _STOPPED:
                        break
                    for request, deliver in each_request(message, self.writer.put):
                        self.dispatch(request, deliver, workers)
                if not self.stopping:  # end of input: the requests in flight finish and are answered
                    self.drain_held()
                    self.wait_in_flight(None)
            except BaseException as exc:  # on this thread: an interrupt, a notification's handler, the reader
                stopped = exc
            self.end(stopped)
        finally:
            self.asks.put(False)  # the reader ends, unless it is blocked in a read (a daemon thread)
            workers.stop()

    # --- reading ---------------------------------------------------------------------------------------------

    def next_message(self) -> Message | None:
        """The next message (``None`` at end of input), or ``_STOPPED`` if the server stops while a read waits."""
        if self.transport._has_buffered_message() or self.idle():  # no read that may wait, or nothing to stop it
            return self.transport._read_message()
        if self.reader is None:
            self.reader = threading.Thread(target=self.read, name="rpcwire-reader", daemon=True)
            self.reader.start()
        self.asks.put(True)
        while True:
            item = self.inbox.get()
            if item is _WAKE:
                if self.stopping:
                    return _STOPPED  # type: ignore[no-any-return] # the reader stays in its read: nothing more is served
                self.start_held()  # the writer has room again for what they will answer
                continue
            message, error = item
            if error is not None:
                raise error
            return message  # type: ignore[no-any-return]

    def idle(self) -> bool:
        """Nothing in flight and every answer written: nothing can stop the server while this thread waits for
        input (so it reads itself, and an idle connection of ``--listen`` holds no reader thread)."""
        return self.admitted.qsize() == 2 * self.max_concurrency and self.writer.all_written()

    def read(self) -> None:
        """On the reader thread: each time the dispatching thread asks, one message, read as it comes."""
        # As the asyncio server's reader: holding the standard streams keeps them from being closed under
        # this thread, blocked in a read, when the process leaves (its interpreter would abort).
        standard_streams = (sys.stdin, sys.__stdin__)  # noqa: F841
        leave_signals_to_the_main_thread()  # the dispatching thread handles SIGINT
        while self.asks.get():
            try:
                message = self.transport._read_message()
            except BaseException as exc:  # raised on the dispatching thread
                self.inbox.put((None, exc))
                return
            self.inbox.put((message, None))
            if message is None:
                return

    def read_ahead_full(self) -> bool:
        with self.lock:
            if self.read_ahead.full():
                self.waiting_room = True
                return True
            return False

    def wait_for_room(self) -> None:
        """Until a held request starts or is dropped (a worker then wakes this thread), the writer has room for
        held ones to start, or the server stops."""
        while not self.stopping:
            if self.inbox.get() is _WAKE:
                return

    def drain_held(self) -> None:
        """At end of input: until every held request has started (or the server stops)."""
        while not self.stopping:
            self.start_held()
            with self.lock:
                if not self.read_ahead:
                    return
                self.waiting_room = True  # a held request taking a worker, or room in the writer, wakes this thread
            self.inbox.get()

    def start_held(self) -> None:
        """The held requests that tokens are free for start, while the unwritten answers are within bounds."""
        while True:
            with self.lock:
                if not self.read_ahead or self.ended or self.stopping or not self.writer.has_room():
                    return
                try:
                    self.admitted.get_nowait()
                except queue.Empty:
                    return
                held = self.read_ahead.take()
                self.room_made()
            if held is None:  # (none left: only dropped ones were queued)
                self.admitted.put(None)
                return
            self.workers.submit(functools.partial(self.run, *held))

    # --- stopping --------------------------------------------------------------------------------------------

    def end(self, stopped: BaseException | None) -> None:
        """Stop: raise what stopped the server, if anything, once the answers it allows are written."""
        writer = self.writer
        stop = stopped if stopped is not None else (self.failures[0] if self.failures else None)
        if stop is not None or writer.failure is not None:
            with self.lock:
                self.ended = True  # the requests held are not started
        if writer.failure is not None:  # nothing more can be written: no handler is waited for
            self.cancel_in_flight()
            writer.close(0)
            raise stopped if stopped is not None else writer.failure  # an interrupt is still one
        if stop is None:
            writer.close()
            if writer.failure is not None:
                raise writer.failure
            return
        if not isinstance(stop, KeyboardInterrupt):  # SystemExit and the like: what is in flight may finish
            self.wait_in_flight(EXIT_GRACE)
        self.cancel_in_flight()
        writer.close(EXIT_GRACE)
        raise stop

    def wait_in_flight(self, timeout: float | None) -> None:
        """Until every request read is answered, ``timeout`` seconds at most; without a timeout, only until
        the output fails or a handler raises a ``BaseException``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.held < 2 * self.max_concurrency:
            if self.writer.failure is not None or (timeout is None and self.failures):
                return
            if deadline is None:
                self.admitted.get()
            else:
                try:
                    self.admitted.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    return
            self.held += 1

    def cancel_in_flight(self) -> None:
        for context in self.in_flight.contexts():
            context._cancel("lsp")

    # --- requests --------------------------------------------------------------------------------------------

    def dispatch(self, request: Request, deliver: Deliver, workers: Workers) -> None:
        if request.is_notification:  # on this thread, before anything after it is read
            if not self.in_flight.cancel(request, self.drop_held):
                if not self.writer.all_written():  # every answer finished before it is out before its handler runs
                    self.writer.wait_written(lambda: self.stopping)
                if self.stopping:  # a handler raised, or the output failed, meanwhile: nothing more is run
                    return
                call(self.transport, request, self.handler, RequestContext(request, self.transport))
            deliver(None)
            return
        if self.stopping:  # a handler raised, or the output failed, meanwhile: nothing more is run
            return
        context = RequestContext(request, self.transport)
        self.in_flight.add(context)
        with self.lock:
            if not self.read_ahead:  # nothing held before it: it starts if a token is free
                try:
                    self.admitted.get_nowait()
                except queue.Empty:
                    pass
                else:
                    workers.submit(functools.partial(self.run, request, context, deliver))
                    return
            self.read_ahead.hold(request, context, deliver)  # 2N admitted: it waits for a token, held

    def drop_held(self, context: RequestContext) -> None:
        """A cancellation found ``context``: if its request is held (not started), it is answered now and never
        runs (LSP: -32800; MCP: no answer)."""
        with self.lock:
            held = self.read_ahead.drop(context)
            self.room_made()
        if held is not None:
            request, context, deliver = held
            self.in_flight.remove(context)
            deliver(cancelled_answer(self.transport, request, context))

    def wake_to_start(self) -> None:
        """On the writer's thread: room again for held requests' answers, which the dispatching thread starts."""
        self.inbox.put(_WAKE)

    def room_made(self) -> None:  # with the lock held, once a held request left
        if self.waiting_room and not self.read_ahead.full():
            self.waiting_room = False
            self.inbox.put(_WAKE)

    def run(self, request: Request, context: RequestContext, deliver: Deliver) -> None:
        """On a worker: the request, then each request held while it ran, in arrival order (its token passes to
        them), until none is held; then the token goes back."""
        while True:
            try:
                deliver(call(self.transport, request, self.handler, context))
            except BaseException as exc:  # KeyboardInterrupt, SystemExit or another BaseException in the handler
                self.failures.append(exc)
                self.writer.poke()  # the dispatching thread may wait for the writer: it stops instead
                self.inbox.put(_WAKE)  # or for input, or for room: it stops instead
            finally:
                self.in_flight.remove(context)
            with self.lock:
                held = None
                if self.read_ahead and not self.ended and not self.stopping:
                    if self.writer.has_room():
                        held = self.read_ahead.take()
                        self.room_made()
                    elif not self.writer.when_room(self.wake_to_start):  # the dispatching thread starts it then
                        self.inbox.put(_WAKE)
                if held is None:
                    self.admitted.put(None)
            if held is None:
                return
            request, context, deliver = held
