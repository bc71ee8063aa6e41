"""``serve_async`` (and ``serve`` with an ``async def`` handler): an asyncio driver of the serving session
(:mod:`rpcwire._session`), requests as tasks on the running event loop.

The session decides everything about what is in flight (admission, the read-ahead, cancellations, notifications
after the answers before them, backpressure, the stop and its grace); it is called on the loop's thread only, and
this module moves events in and carries actions out:

- **Reading.** The loop never blocks on input: a message already buffered is taken on the loop itself, and a read
  that may wait is made by a reader thread, when the loop asks for it, so the two threads meet once per read of
  the stream (a whole pipe's worth of pipelined requests), not once per message. The serving coroutine reads
  while the session says ``reading``, and otherwise waits for an action meant for it.
- **Requests** (``Start``) run as tasks: an ``async def`` handler is awaited on the loop (at most N at once; on
  Python 3.12+ the task starts eagerly, so a handler that never waits is answered without a turn of the loop), a
  sync one runs on one of N worker threads. **Notifications** (``RunNotification``) are awaited by the serving
  coroutine, a sync handler's on a worker of its own.
- **Answers** (``Write``) finished in one turn of the loop go to the writer thread together (one wake-up of it per
  burst); the writer's counts of what it wrote reach the session when it waits for them (reading paused, a
  notification waiting): otherwise the writer does not wake the loop.
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

from rpcwire._answer import call, call_async, failure_answer
from rpcwire._answer_writer import AnswerWriter
from rpcwire._context import RequestContext
from rpcwire._contract import Transport
from rpcwire._session import (
    Action,
    Cancel,
    Grace,
    PauseReading,
    ResumeReading,
    RunNotification,
    Session,
    Settled,
    Start,
    Stop,
    Write,
)
from rpcwire._types import Handler, Request
from rpcwire._workers import Workers, leave_signals_to_the_main_thread

__all__ = ["AsyncServer", "Turns"]

_ENDED = object()  # the reader's item at end of input
_WOKEN = object()  # read_next's answer when an action came first
_OUTBOX = 64  # answers held for the writer before they are handed over in the middle of a turn


class AsyncServer:
    """:func:`serve_async`: the loop drives the session with what a reader thread hands it, one message at a time.

    Everything but the hand-offs between threads lives on the loop's thread and needs no lock.
    """

    def __init__(self, handler: Handler, transport: Transport, max_concurrency: int, *, is_async: bool) -> None:
        self.handler = handler
        self.transport = transport
        self.loop = asyncio.get_running_loop()
        self.is_async = is_async  # an async def handler is awaited here, a sync one runs on the workers
        self.session = Session(transport, max_concurrency)
        self.turns = Turns(max_concurrency, self.loop)  # async handlers running
        self.tasks: set[asyncio.Task[None]] = set()
        self.workers = None if self.is_async else Workers(max_concurrency)
        # Notifications on a thread of their own: never behind requests that may wait for one of them.
        self.notification_worker = None if self.is_async else Workers(1)
        # The reader thread reads only when the loop asks (``read_asked``, under ``handoff``): a message already
        # buffered is taken on the loop, so the threads meet once per read that may wait, not once per message.
        self.handoff = threading.Lock()
        self.reader_turn = threading.Condition(self.handoff)
        self.read_asked: asyncio.Future[Any] | None = None
        self.reading: asyncio.Future[Any] | None = None  # the read asked and not yet taken
        self.reader_released = False
        # Sync handlers' outcomes, handed back by the worker threads in bursts, as the reader's messages.
        self.finished: list[tuple[asyncio.Future[bytes | None], bytes | None, BaseException | None]] = []
        # Answers finished and not yet handed to the writer: handed together, at the end of the loop's turn or
        # before the serving coroutine waits.
        self.outbox: list[bytes] = []
        self.flush_scheduled = False
        self.want_written = False  # the serving coroutine waits: the writer's counts are to reach the session
        self.writer = AnswerWriter(
            transport, on_failure=functools.partial(self.soon, self.output_failed), on_written=self.on_written
        )
        self.controls: deque[Action] = deque()  # actions for the serving coroutine
        self.deferred: list[Start] = []  # requests started by a request's end: started on the loop, not nested
        self.stop: Stop | None = None
        self.settled = False
        self.waiting: asyncio.Future[None] | None = None  # what the serving coroutine awaits, for wake()
        self.start_task: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]] = self.loop.create_task
        if self.loop.get_task_factory() is None:  # the task the loop would make, without its method's checks
            if sys.version_info >= (3, 12):  # the handler runs up to its first wait when the task is made
                self.start_task = functools.partial(asyncio.Task, loop=self.loop, eager_start=True)
            else:
                self.start_task = functools.partial(asyncio.Task, loop=self.loop)

    def soon(self, function: Callable[..., Any], *args: Any) -> None:
        """Call ``function`` on the loop, from another thread (nothing, once the loop is closed)."""
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(function, *args)

    def wake(self) -> None:
        """On the loop: the serving coroutine stops waiting, wherever it waits, and looks at its actions."""
        if self.waiting is not None and not self.waiting.done():
            self.waiting.set_result(None)

    async def wait(self, future: asyncio.Future[Any] | None = None, timeout: float | None = None) -> None:
        """Until ``future`` is done, or :meth:`wake` (or ``timeout`` seconds)."""
        woken = self.waiting = self.loop.create_future()
        done = functools.partial(_settle_with, woken)
        if future is not None:
            future.add_done_callback(done)
        timer = None if timeout is None else self.loop.call_later(timeout, done)
        try:
            await woken
        finally:
            self.waiting = None
            if future is not None:
                future.remove_done_callback(done)
            if timer is not None:
                timer.cancel()

    async def serve(self) -> None:
        reader = threading.Thread(target=self.read, name="rpcwire-reader", daemon=True)
        reader.start()
        try:
            try:
                await self.dispatch()
            except BaseException as exc:  # an interrupt or cancellation, the reader's failure
                self.carry(self.session.stop(exc))
            await self.end()
        finally:
            self.release_reader()
            for workers in (self.workers, self.notification_worker):
                if workers is not None:
                    workers.stop()

    # --- the serving coroutine ------------------------------------------------------------------------------

    async def dispatch(self) -> None:
        """Read and feed the session while it says ``reading``, carry out what comes back, until a ``Stop``."""
        session, transport = self.session, self.transport
        while self.stop is None:
            if self.controls:
                await self.take_controls()
                continue
            if session.reading:
                self.want_written = False
                if len(self.outbox) >= _OUTBOX:
                    self.flush()
                # Taken on the loop when buffered (the reader thread reads only when asked, and is not asked now).
                if self.reading is None and transport._has_buffered_message():
                    message = transport._read_message()
                else:
                    message = await self.read_next()
                    if message is _WOKEN:
                        continue
                    if isinstance(message, BaseException):
                        raise message
                actions = session.received(message) if message is not None else session.input_ended()
                if actions:  # (none for a request held: a pipelining peer's usual case)
                    self.carry(actions)
                continue
            self.flush()  # reading waits: what finished goes out, and the writer's counts come in as they change
            self.want_written = True
            self.sync_written()
            if not self.controls and not session.reading and self.stop is None:
                await self.wait()

    async def take_controls(self) -> None:
        while self.controls:
            action = self.controls.popleft()
            kind = type(action)
            if kind is RunNotification:
                await self.notify(action)  # type: ignore[arg-type]
            elif kind is Stop:
                self.stop = action  # type: ignore[assignment]
            elif kind is Settled:
                self.settled = True

    async def notify(self, notification: RunNotification) -> None:
        """A notification's handler, awaited (not held back by the requests running)."""
        request, context = notification.request, notification.context
        try:
            if not self.is_async:
                await self.in_worker(request, context)
            else:
                try:
                    await call_async(self.transport, request, self.handler, context)
                except (Exception, asyncio.CancelledError) as exc:
                    failure_answer(self.transport, request, context, exc)
        except BaseException as exc:  # SystemExit and the like: the server stops with it
            self.carry(self.session.stop(exc))
        self.carry(self.session.notified(notification))

    async def end(self) -> None:
        """The stop: what is in flight gets its grace, then is cancelled; what finished is written; its reason
        raised."""
        self.want_written = True  # held requests may still start (end of input), as the writer makes room
        self.sync_written()
        grace = Grace()  # the stop in force's (a stricter one may come meanwhile)
        while True:
            await self.take_controls()
            stop = self.stop
            assert stop is not None
            if self.settled or stop.grace == 0:
                break
            remaining = grace.left(stop, self.loop.time())
            if remaining is not None and remaining <= 0:
                break
            self.flush()
            await self.wait(timeout=remaining)
        stop = self.stop
        assert stop is not None
        self.carry(self.session.abandon())
        for task in self.tasks:
            task.cancel()
        self.flush()
        if stop.write_grace is None:
            await self.loop.run_in_executor(None, self.writer.close)
        else:
            self.writer.close(stop.write_grace)  # on the loop's thread: the server is stopping
        if stop.reason is not None:
            raise stop.reason
        if self.writer.failure is not None:
            raise self.writer.failure

    # --- actions and events ---------------------------------------------------------------------------------

    def carry(self, actions: list[Action], *, nested: bool = False) -> None:
        """Carry out the session's actions on the loop (``nested``: in a request's task, whose requests started
        are started on the loop after it, not inside it: an eager start would nest)."""
        for action in actions:
            kind = type(action)
            if kind is Write:
                self.put(action.lines)  # type: ignore[union-attr]
            elif kind is Start:
                if nested:
                    if not self.deferred:
                        self.loop.call_soon(self.start_deferred)
                    self.deferred.append(action)  # type: ignore[arg-type]
                else:
                    self.start(action)  # type: ignore[arg-type]
            elif kind is Cancel:
                action.context._cancel(action.dialect)  # type: ignore[union-attr]
            elif kind is ResumeReading:  # the serving coroutine reads while the session says ``reading``
                self.wake()
            elif kind is PauseReading:  # (a pipelining peer's, once per request held at the read-ahead's bound)
                if self.reading is not None:  # a read asked stays asked: its message is fed once reading resumes
                    self.wake()
            else:
                self.controls.append(action)
                self.wake()

    def start_deferred(self) -> None:
        deferred, self.deferred = self.deferred, []
        for start in deferred:
            self.start(start)

    def on_written(self) -> None:
        """On the writer's thread: answers written; the loop hears of it only while the session waits for it."""
        if self.want_written:
            self.soon(self.sync_written)

    def sync_written(self) -> None:
        count, size = self.writer.take_written()
        if count:
            self.carry(self.session.written(count, size))

    def output_failed(self) -> None:
        failure = self.writer.failure
        assert failure is not None
        self.carry(self.session.output_failed(failure))

    # --- reading --------------------------------------------------------------------------------------------

    async def read_next(self) -> Any:
        """The next message, read by the reader thread (a read that may wait for input): ``None`` at end of
        input, what the read raised, or ``_WOKEN`` if an action came first (the read stays asked)."""
        self.flush()  # what finished goes out before the loop waits for input
        read = self.reading
        if read is None:
            read = self.reading = self.loop.create_future()
            with self.handoff:
                self.read_asked = read
                self.reader_turn.notify()
        await self.wait(read)
        if not read.done():
            return _WOKEN
        self.reading = None
        message = read.result()
        return None if message is _ENDED else message

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

    def put(self, lines: list[bytes]) -> None:
        """On the loop: answer lines for the writer, handed over with the others of this turn of the loop."""
        self.outbox += lines
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Hand the answers finished so far to the writer, in one hand-off."""
        self.flush_scheduled = False
        if self.outbox:
            answers, self.outbox = self.outbox, []
            self.writer.put_many(answers)

    # --- requests -----------------------------------------------------------------------------------------

    def start(self, start: Start) -> None:
        """A request the session started: its task (started eagerly where the interpreter can)."""
        task = self.start_task(self.run(start))
        if not task.done():  # an eager task may be done already: nothing is left to cancel or wait for
            start.context._task = task if self.is_async else None
            self.tasks.add(task)

    async def run(self, start: Start) -> None:
        request, context = start.request, start.context
        try:
            if not self.is_async:
                answer = await self.in_worker(request, context)  # N worker threads: at most N run at once
            else:
                try:
                    turns = self.turns
                    if turns.running < turns.limit and not turns.waiting:  # (the usual case, inline)
                        turns.running += 1
                    else:
                        await turns.wait()  # a task cancelled while it waits here never runs its handler
                    try:
                        answer = await call_async(self.transport, request, self.handler, context)
                    finally:
                        turns.done()
                except (Exception, asyncio.CancelledError) as exc:  # cancelled: answered -32800 (MCP: not at all)
                    answer = failure_answer(self.transport, request, context, exc)
        except asyncio.CancelledError:  # the server ends: nothing is answered any more
            self.ended(start, self.session.finished, None)
            raise
        except BaseException as exc:  # the handler's own BaseException: the server stops with it
            # Kept from the task (a SystemExit leaving a task would leave the loop at once, answers unwritten).
            self.ended(start, self.session.failed, exc)
        else:
            self.ended(start, self.session.finished, answer)

    def ended(self, start: Start, event: Callable[[Start, Any], list[Action]], outcome: Any) -> None:
        task = asyncio.current_task(self.loop)
        if task is not None:
            self.tasks.discard(task)  # (an eager task not added yet is never added: it is done)
        self.carry(event(start, outcome), nested=True)

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


class Turns:
    """At most ``limit`` handlers run at once, the others wait their turn in arrival order: ``asyncio.Semaphore``'s
    rule without its coroutine in the usual case. A caller takes a turn itself while ``running < limit`` and nothing
    is ``waiting`` (``running += 1``, inline), else awaits :meth:`wait`; either way :meth:`done` follows. On the
    loop's thread only."""

    __slots__ = ("limit", "loop", "running", "waiting")

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        self.limit = limit
        self.loop = loop
        self.running = 0  # turns taken (a turn given to a waiter counts from then)
        self.waiting: deque[asyncio.Future[None]] = deque()  # in arrival order

    async def wait(self) -> None:
        """Until a turn ends and this caller's comes (``running`` counts it). Cancelled while it waits: no turn."""
        turn: asyncio.Future[None] = self.loop.create_future()
        self.waiting.append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.cancelled():
                with contextlib.suppress(ValueError):
                    self.waiting.remove(turn)
            else:  # the turn came, and the cancellation with it: the turn goes to the next caller
                self.done()
            raise

    def done(self) -> None:
        """A turn ends: the next waiters get theirs."""
        self.running -= 1
        waiting = self.waiting
        while waiting and self.running < self.limit:
            turn = waiting.popleft()
            if not turn.done():
                self.running += 1
                turn.set_result(None)


def _settle_with(future: asyncio.Future[Any], *_: Any) -> None:
    if not future.done():
        future.set_result(None)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
