"""``serve_async`` (and ``serve`` with an ``async def`` handler): requests as tasks on the running event loop.

The loop never blocks on input: a message already buffered is taken on the loop itself, and a read that may
wait is made by a reader thread, when the loop asks for it, so the two threads meet once per read of the stream
(a whole pipe's worth of pipelined requests), not once per message. A request runs as a task: an ``async def``
handler is awaited on the loop (at most N at once; on Python 3.12+ the task starts eagerly, so a handler that
never waits is answered without a turn of the loop), a sync one runs on one of N worker threads (notifications
on a worker of their own). Notifications are awaited before anything after them is dispatched, once every
answer finished before them is written. At most 2N requests are admitted (read and unanswered); reading goes on
past that, the requests read then held (:class:`rpcwire._in_flight.ReadAhead`) so that cancellations behind them
are acted on at once, and pauses once the held ones reach their bounds. The answers finished in one turn of the
loop go to the writer thread together: one wake-up of it per burst, not per answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import sys
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from rpcwire._answer import Deliver, call, call_async, cancelled_answer, each_request, failure_answer
from rpcwire._answer_writer import AnswerWriter
from rpcwire._context import RequestContext
from rpcwire._contract import Transport
from rpcwire._in_flight import EXIT_GRACE, InFlight, ReadAhead
from rpcwire._types import Handler, Request
from rpcwire._workers import Workers, leave_signals_to_the_main_thread

__all__ = ["AsyncServer"]

_ENDED = object()  # the reader's item at end of input
_OUTBOX = 64  # answers held for the writer before they are handed over in the middle of a turn


class AsyncServer:
    """:func:`serve_async`: the loop dispatches what a reader thread hands it, one message at a time.

    Everything but the hand-offs between threads lives on the loop's thread and needs no lock: the counts
    of requests admitted and running, the answers not yet handed to the writer (``outbox``).
    """

    def __init__(self, handler: Handler, transport: Transport, max_concurrency: int, *, is_async: bool) -> None:
        self.handler = handler
        self.transport = transport
        self.loop = asyncio.get_running_loop()
        self.is_async = is_async  # an async def handler is awaited here, a sync one runs on the workers
        self.max_admitted = 2 * max_concurrency  # read and not yet answered
        self.admitted = 0
        self.admission: asyncio.Future[None] | None = None  # the serving coroutine waits for a request to end
        self.max_running = max_concurrency  # async handlers running
        self.running = 0
        self.turns: deque[asyncio.Future[None]] = deque()  # requests waiting to run, in arrival order
        self.in_flight = InFlight(locked=False)  # used on the loop's thread only
        self.read_ahead = ReadAhead(transport)  # requests read past the 2N admitted: on the loop's thread only
        self.held_scheduled = False  # start_held is to run soon on the loop
        self.ended = False  # serve is ending: no held request starts any more
        self.tasks: set[asyncio.Task[None]] = set()
        self.workers = None if self.is_async else Workers(max_concurrency)
        # Notifications on a thread of their own: never behind requests that may wait for one of them.
        self.notification_worker = None if self.is_async else Workers(1)
        # The reader thread reads only when the loop asks (``read_asked``, under ``handoff``): a message already
        # buffered is taken on the loop, so the threads meet once per read that may wait, not once per message.
        self.handoff = threading.Lock()
        self.reader_turn = threading.Condition(self.handoff)
        self.read_asked: asyncio.Future[Any] | None = None
        self.reader_released = False
        # Sync handlers' outcomes, handed back by the worker threads in bursts, as the reader's messages.
        self.finished: list[tuple[asyncio.Future[bytes | None], bytes | None, BaseException | None]] = []
        # Answers finished and not yet handed to the writer: handed together, at the end of the loop's turn or
        # before the serving coroutine waits.
        self.outbox: list[bytes] = []
        self.outbox_bytes = 0
        self.flush_scheduled = False
        self.writer = AnswerWriter(transport, on_failure=functools.partial(self.soon, self.wake))
        self.failure: BaseException | None = None  # a handler's BaseException: the server stops with it
        self.waiting: asyncio.Future[None] | None = None  # what the serving coroutine awaits, for wake()
        self.start_task: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]] = self.loop.create_task
        if self.loop.get_task_factory() is None:  # the task the loop would make, without its method's checks
            if sys.version_info >= (3, 12):  # the handler runs up to its first wait when the task is made
                self.start_task = functools.partial(asyncio.Task, loop=self.loop, eager_start=True)
            else:
                self.start_task = functools.partial(asyncio.Task, loop=self.loop)

    @property
    def stopping(self) -> bool:
        return self.failure is not None or self.writer.failure is not None

    def soon(self, function: Callable[..., Any], *args: Any) -> None:
        """Call ``function`` on the loop, from another thread (nothing, once the loop is closed)."""
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(function, *args)

    def wake(self) -> None:
        """On the loop: the serving coroutine stops waiting, wherever it waits, and sees why."""
        if self.waiting is not None and not self.waiting.done():
            self.waiting.set_result(None)

    async def wait(self, future: asyncio.Future[None]) -> None:
        """Until ``future`` is done, or :meth:`wake`."""
        self.waiting = future
        try:
            await future
        finally:
            self.waiting = None

    async def serve(self) -> None:
        reader = threading.Thread(target=self.read, name="rpcwire-reader", daemon=True)
        reader.start()
        try:
            stopped: BaseException | None = None
            try:
                await self.serve_messages()
            except BaseException as exc:  # an interrupt or cancellation, a notification's handler, the reader
                stopped = exc
            await self.end(stopped)
        finally:
            self.release_reader()
            for workers in (self.workers, self.notification_worker):
                if workers is not None:
                    workers.stop()

    async def serve_messages(self) -> None:
        transport, writer = self.transport, self.writer
        while not self.stopping:
            if not writer.has_room(len(self.outbox), self.outbox_bytes):  # answers not yet written: reading pauses
                self.flush()
                await self.until(writer.when_room)
                continue
            if self.read_ahead:
                self.start_held()  # held while the writer had no room
                if self.read_ahead.full():  # as many requests held as the bounds allow: reading pauses
                    await self.wait_admission()
                    continue
            if len(self.outbox) >= _OUTBOX:
                self.flush()
            if transport._has_buffered_message():  # taken on the loop (the reader thread reads only when asked)
                message = transport._read_message()
                if message is None:
                    break
            else:
                message = await self.read_next()
                if message is None:  # woken: stopping
                    continue
                if message is _ENDED:
                    break
                if isinstance(message, BaseException):
                    raise message
            if (
                type(message) is Request
                and not message.is_notification
                and self.admitted < self.max_admitted
                and not self.read_ahead
            ):
                self.start(message, self.put)  # the common case, without a coroutine of its own
                continue
            for request, deliver in each_request(message, self.put):
                await self.dispatch(request, deliver)
        if not self.stopping:  # end of input: the requests in flight finish and are answered
            while self.read_ahead and not self.stopping:  # the held ones start as the others end
                self.start_held()
                if not self.read_ahead:
                    break
                if writer.has_room(len(self.outbox), self.outbox_bytes):
                    await self.wait_admission()
                else:
                    self.flush()
                    await self.until(writer.when_room)
            await self.settle(None)

    async def wait_admission(self) -> None:
        """Until a request admitted ends (or a held one is dropped), or :meth:`wake`."""
        self.flush()
        self.admission = self.loop.create_future()
        await self.wait(self.admission)

    async def end(self, stopped: BaseException | None) -> None:
        """Stop: raise what stopped the server, if anything, once the answers it allows are written."""
        writer = self.writer
        stop = stopped if stopped is not None else self.failure
        if stop is not None or writer.failure is not None:
            self.ended = True  # the requests held are not started
        if writer.failure is not None:  # nothing more can be written: no handler is waited for
            self.cancel_in_flight()
            writer.close(0)
            raise stopped if stopped is not None else writer.failure  # an interrupt is still one
        if stop is None:
            self.flush()
            await self.loop.run_in_executor(None, writer.close)
            if writer.failure is not None:
                raise writer.failure
            return
        if not isinstance(stop, (KeyboardInterrupt, asyncio.CancelledError)):
            await self.settle(EXIT_GRACE)  # SystemExit and the like: what is in flight may finish
        self.cancel_in_flight()
        self.flush()
        writer.close(EXIT_GRACE)  # on the loop's thread: the server is stopping
        raise stop

    async def until(self, when: Callable[[Callable[[], None]], bool]) -> None:
        """Until the writer calls back (``when`` registers the callback; ``False``: no need), or :meth:`wake`."""
        future = self.loop.create_future()
        if when(functools.partial(self.soon, _settle, future, None, None)):
            await self.wait(future)

    async def settle(self, timeout: float | None) -> None:
        """Until every task is done, ``timeout`` seconds at most; without a timeout, only until a handler
        raises a ``BaseException``. Either way, only until the output fails."""
        deadline = None if timeout is None else self.loop.time() + timeout
        while self.tasks and self.writer.failure is None and (timeout is not None or self.failure is None):
            remaining = None if deadline is None else deadline - self.loop.time()
            if remaining is not None and remaining <= 0:
                return
            self.waiting = woken = self.loop.create_future()
            try:
                await asyncio.wait({*self.tasks, woken}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            finally:
                self.waiting = None
                woken.cancel()

    def cancel_in_flight(self) -> None:
        for task in self.tasks:
            task.cancel()
        for context in self.in_flight.contexts():
            context._cancel("lsp")

    # --- reading --------------------------------------------------------------------------------------------

    async def read_next(self) -> Any:
        """The next message, read by the reader thread (a read that may wait for input): ``_ENDED`` at end of
        input, what the read raised, or ``None`` if :meth:`wake` came first."""
        self.flush()  # what finished goes out before the loop waits for input
        read: asyncio.Future[Any] = self.loop.create_future()
        with self.handoff:
            self.read_asked = read
            self.reader_turn.notify()
        await self.wait(read)
        return read.result()

    def read(self) -> None:
        """On the reader thread: each time the loop asks, one message, read as it comes (the loop's turn again)."""
        # Interrupted (Ctrl-C), the process exits while this thread is still blocked in a read, holding
        # the input's buffer lock; the interpreter would then abort ("could not acquire lock for
        # <stdin> at interpreter shutdown") closing sys.stdin on its way out. Holding the standard
        # streams here keeps them alive, so they are never closed under this thread.
        standard_streams = (sys.stdin, sys.__stdin__)  # noqa: F841
        leave_signals_to_the_main_thread()  # the loop's thread handles SIGINT
        while True:
            with self.handoff:
                while self.read_asked is None and not self.reader_released:
                    self.reader_turn.wait()
                read = self.read_asked
                if read is None:  # serve has returned
                    return
            message: Any
            try:
                message = self.transport._read_message()
            except BaseException as exc:  # raised on the loop
                message = exc
            with self.handoff:
                self.read_asked = None
            self.soon(_settle, read, _ENDED if message is None else message, None)
            if message is None or isinstance(message, BaseException):
                return

    def release_reader(self) -> None:
        """The reader thread ends, unless it is blocked in a read (it is a daemon thread)."""
        with self.handoff:
            self.reader_released = True
            self.reader_turn.notify()

    # --- answers to the writer ----------------------------------------------------------------------------

    def put(self, answer: bytes | None) -> None:
        """On the loop: an answer line for the writer, handed over with the others of this turn of the loop."""
        if answer is None:
            return
        self.outbox.append(answer)
        self.outbox_bytes += len(answer)
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Hand the answers finished so far to the writer, in one hand-off."""
        self.flush_scheduled = False
        if self.outbox:
            answers, self.outbox, self.outbox_bytes = self.outbox, [], 0
            self.writer.put_many(answers)

    # --- requests -----------------------------------------------------------------------------------------

    async def dispatch(self, request: Request, deliver: Deliver) -> None:
        if request.is_notification:  # awaited here, before anything after it is dispatched
            if not self.in_flight.cancel(request, self.drop_held):
                self.flush()
                if not self.writer.all_written():  # every answer finished before it is out before its handler runs
                    await self.until(self.writer.when_written)
                if self.stopping:  # a handler raised, or the output failed, meanwhile: nothing more is run
                    return
                await self.call_notification(request, RequestContext(request, self.transport))
            deliver(None)
            return
        if self.stopping:  # a handler raised, or the output failed, meanwhile: nothing more is run
            return
        if self.admitted < self.max_admitted and not self.read_ahead:
            self.start(request, deliver)
            return
        context = RequestContext(request, self.transport)  # 2N admitted: held until one of them ends
        self.in_flight.add(context)
        self.read_ahead.hold(request, context, deliver)

    def drop_held(self, context: RequestContext) -> None:
        """A cancellation found ``context``: if its request is held (not started), it is answered now and never
        runs (LSP: -32800; MCP: no answer)."""
        held = self.read_ahead.drop(context)
        if held is not None:
            request, context, deliver = held
            self.in_flight.remove(context)
            deliver(cancelled_answer(self.transport, request, context))
            self.admit()

    def start_held(self) -> None:
        """The held requests there is room for start, in arrival order, while the unwritten answers are within
        bounds (else once they are)."""
        self.held_scheduled = False
        started = False
        while self.read_ahead and self.admitted < self.max_admitted and not self.ended and not self.stopping:
            if not self.writer.has_room(len(self.outbox), self.outbox_bytes):
                self.flush()
                self.writer.when_room(functools.partial(self.soon, self.schedule_start_held))
                break
            held = self.read_ahead.take()
            if held is None:
                break
            request, context, deliver = held
            self.start(request, deliver, context)
            started = True
        if started:
            self.admit()  # reading may go on: the read-ahead has room

    def schedule_start_held(self) -> None:
        if not self.held_scheduled and self.read_ahead:
            self.held_scheduled = True
            self.loop.call_soon(self.start_held)

    def admit(self) -> None:
        """The serving coroutine, waiting for a request to end, goes on."""
        admission, self.admission = self.admission, None
        if admission is not None and not admission.done():
            admission.set_result(None)

    def start(self, request: Request, deliver: Deliver, context: RequestContext | None = None) -> None:
        """A request admitted: its task, started (eagerly where the interpreter can)."""
        self.admitted += 1
        if context is None:
            context = RequestContext(request, self.transport)
            self.in_flight.add(context)
        task = self.start_task(self.run(request, context, deliver))
        if not task.done():  # an eager task may be done already: nothing is left to cancel or wait for
            context._task = task if self.is_async else None
            self.tasks.add(task)

    async def run(self, request: Request, context: RequestContext, deliver: Deliver) -> None:
        try:
            if not self.is_async:
                answer = await self.in_worker(request, context)  # N worker threads: at most N run at once
            else:
                try:
                    if self.running < self.max_running and not self.turns:
                        self.running += 1
                    else:
                        await self.turn()  # a task cancelled while it waits here never runs its handler
                    try:
                        answer = await call_async(self.transport, request, self.handler, context)
                    finally:
                        self.running -= 1
                        if self.turns:
                            self.next_turn()
                except (Exception, asyncio.CancelledError) as exc:  # cancelled: answered -32800 (MCP: not at all)
                    answer = failure_answer(self.transport, request, context, exc)
            deliver(answer)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the handler's own BaseException: the server stops with it
            # Kept from the task (a SystemExit leaving a task would leave the loop at once, answers unwritten).
            if self.failure is None:
                self.failure = exc
            self.wake()
        finally:
            self.in_flight.remove(context)
            task = asyncio.current_task(self.loop)
            if task is not None:
                self.tasks.discard(task)  # (an eager task not added yet is never added: it is done)
            self.admitted -= 1
            if self.read_ahead:
                self.schedule_start_held()  # on the loop, not in this task (an eager start would nest)
            self.admit()

    async def call_notification(self, request: Request, context: RequestContext) -> None:
        """A notification's handler, awaited (not held back by the requests running)."""
        if not self.is_async:
            await self.in_worker(request, context)
            return
        try:
            await call_async(self.transport, request, self.handler, context)
        except (Exception, asyncio.CancelledError) as exc:
            failure_answer(self.transport, request, context, exc)

    async def turn(self) -> None:
        """Until one of the N async handlers running ends and this request's turn comes (``running`` counts it)."""
        turn: asyncio.Future[None] = self.loop.create_future()
        self.turns.append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.cancelled():
                with contextlib.suppress(ValueError):
                    self.turns.remove(turn)
            else:  # the turn came, and the cancellation with it: the turn goes to the next request
                self.running -= 1
                self.next_turn()
            raise

    def next_turn(self) -> None:
        while self.turns and self.running < self.max_running:
            turn = self.turns.popleft()
            if not turn.done():
                self.running += 1
                turn.set_result(None)

    def in_worker(self, request: Request, context: RequestContext) -> asyncio.Future[bytes | None]:
        """A sync handler's call on a worker thread (notifications on their own), never on the loop."""
        done: asyncio.Future[bytes | None] = self.loop.create_future()
        call_context = contextvars.copy_context()

        def job() -> None:
            try:
                answer = call_context.run(call, self.transport, request, self.handler, context)
            except BaseException as exc:
                self.finish(done, None, exc)
            else:
                self.finish(done, answer, None)

        workers = self.notification_worker if request.is_notification else self.workers
        assert workers is not None
        workers.submit(job)
        return done

    def finish(self, done: asyncio.Future[bytes | None], answer: bytes | None, error: BaseException | None) -> None:
        """On a worker thread: a handler's outcome to the loop; the first of a burst wakes it for all of them
        (nothing once the loop is closed: a handler that outlived serve)."""
        with self.handoff:
            self.finished.append((done, answer, error))
            first = len(self.finished) == 1
        if first:
            self.soon(self.take_finished)

    def take_finished(self) -> None:
        with self.handoff:
            finished, self.finished = self.finished, []
        for done, answer, error in finished:
            _settle(done, answer, error)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
