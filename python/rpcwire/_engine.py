"""The engine: how requests are scheduled, written once for both implementations.

A transport (native or :mod:`rpcwire.pure`) is the *core*: it reads and classifies messages
(``_read_message``), builds answer bytes (``_answer_result``, ``_answer_error``) and writes whole lines
(``_write_line``, ``write_notification``). Everything above that lives here, in Python, shared by both:

- **Sequential** (``max_concurrency=1``, a sync handler): one message at a time, in order, in the core's
  own loop (``_serve_sequential``: Rust's in the native module, :func:`serve_sequential` in
  :mod:`rpcwire.pure`). Both write the same bytes.
- **Threads** (``max_concurrency=N > 1``): the calling thread reads; each request runs on one of N
  daemon worker threads and is answered as soon as it finishes (any order, as the specification
  allows). Notifications run on the reading thread, one at a time and in arrival order, before
  anything after them is read (LSP's ``didChange`` is seen by the next request).
- **asyncio** (:func:`serve_async`): a reader thread hands each message to the event loop, which never
  blocks on input; a request runs as a task (an ``async def`` handler is awaited, a sync one runs on a
  worker thread).

In both, at most N handlers run at once, and reading goes on while up to N more requests wait their
turn (so that a cancellation or a notification behind them is still read; a request cancelled while it
waits is never run). With 2N requests read and unanswered, or more answers waiting to be written than
``_UNWRITTEN_ANSWERS``/``_UNWRITTEN_BYTES`` (a peer that does not read), reading pauses: nothing is queued
without bound. Answers go out through one writer thread (:class:`_AnswerWriter`); every answer finished
before a notification's handler starts is written before it starts. A handler's ``BaseException`` stops
the server: what is in flight gets ``_EXIT_GRACE`` to finish, what finished is written, then it is raised.

:func:`serve` and :func:`serve_async` keep stray output off the process's stdout while they write the wire
there (``rpcwire._stdout_guard``).

Every request runs with a :class:`RequestContext` (:func:`current_request`): its id and method, whether
it was cancelled (LSP's ``$/cancelRequest``, MCP's ``notifications/cancelled``, consumed here and never
passed to the handler), progress in the dialect its params ask for, and the W3C ``traceparent`` its
``_meta`` carries (added to the ``rpcwire`` logger's records while it runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import logging
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from rpcwire._answer import answer_message, call, cancelled_answer, each_request, failure_answer, result_answer
from rpcwire._context import RequestContext, _current, current_request
from rpcwire._dialects import LSP_CANCEL, MCP_CANCEL
from rpcwire._stdout_guard import guarded_stdout
from rpcwire._types import Handler, Request

__all__ = ["RequestContext", "current_request", "serve", "serve_async", "serve_sequential"]

logger: logging.Logger = logging.getLogger("rpcwire")


def _id_key(id_: Any) -> tuple[bool, Any]:
    """Ids compare as JSON values: ``1`` and ``1.0`` are one id, ``1`` and ``"1"`` two."""
    return (isinstance(id_, str), id_)


def serve_sequential(handler: Handler, transport: Any) -> None:
    """One message at a time, in order, on the calling thread (``rpcwire.pure``'s ``serve``)."""

    def call_one(request: Request) -> bytes | None:
        return call(transport, request, handler, RequestContext(request, transport))

    while (message := transport._read_message()) is not None:
        if (answer := answer_message(message, call_one)) is not None:
            transport._write_line(answer)


# --- cancellation ----------------------------------------------------------------------------------


class _InFlight:
    """The requests read and not yet answered, by id, for cancellations to find."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[tuple[bool, Any], RequestContext] = {}

    def add(self, context: RequestContext) -> None:
        with self._lock:
            self._by_id[_id_key(context.id)] = context

    def remove(self, context: RequestContext) -> None:
        with self._lock:
            if self._by_id.get(_id_key(context.id)) is context:
                del self._by_id[_id_key(context.id)]

    def contexts(self) -> list[RequestContext]:
        with self._lock:
            return list(self._by_id.values())

    def cancel(self, request: Request) -> bool:
        """If ``request`` is a cancellation (either dialect), apply it and return True."""
        if request.method == LSP_CANCEL:
            dialect, key = "lsp", "id"
        elif request.method == MCP_CANCEL:
            dialect, key = "mcp", "requestId"
        else:
            return False
        params = request.params
        if isinstance(params, dict) and key in params and type(params[key]) in (str, int, float):  # not a bool
            with self._lock:
                context = self._by_id.get(_id_key(params[key]))
            if context is not None:  # unknown and finished ids are ignored
                context._cancel(dialect)
        return True


# --- threads ---------------------------------------------------------------------------------------


def _leave_signals_to_the_main_thread() -> None:
    """Called first on each of the engine's threads. A signal sent to the process is delivered to any
    thread that does not block it; delivered to a worker, SIGINT would leave the main thread blocked in
    its read (only a signal delivered to the reading thread interrupts the system call), and
    Ctrl-C would stop nothing until more input came. Blocked here, it reaches the main thread."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


class _Workers:
    """Up to N daemon threads running submitted calls; a stuck handler never keeps the process alive. A thread
    starts when a call is submitted and none is idle, so that a server that never gets a request (an idle
    ``--listen`` connection) holds none; once started, a thread stays until ``stop``."""

    def __init__(self, count: int) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._count = count
        self._started = 0
        self._idle = 0  # started threads waiting for a job that no submitted job has claimed yet
        self._lock = threading.Lock()

    def _work(self) -> None:
        _leave_signals_to_the_main_thread()
        while (job := self._jobs.get()) is not None:
            job()
            with self._lock:
                self._idle += 1

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._idle:
                self._idle -= 1
            elif self._started < self._count:
                self._started += 1
                threading.Thread(target=self._work, name=f"rpcwire-worker-{self._started - 1}", daemon=True).start()
        self._jobs.put(job)

    def stop(self) -> None:
        with self._lock:
            started, self._count = self._started, 0  # none started after this
        for _ in range(started):
            self._jobs.put(None)


# Reading pauses while more answers than these wait to be written (docs/semantics.md, "Concurrency"): a
# peer that does not read holds the engine to this much memory, not to all the answers to what it sends.
_UNWRITTEN_ANSWERS = 1024
_UNWRITTEN_BYTES = 1 << 20
# When a handler ends the server (SystemExit, or another BaseException that is not an Exception), the
# requests in flight get this long to finish and be answered; stopping, the writer gets this long to
# write what finished (it may be blocked on a peer that does not read).
_EXIT_GRACE = 2.0


class _AnswerWriter:
    """The answers of the concurrent modes go out through one thread of their own, which never waits
    for a handler: what finished while it was writing goes out together in the next ``write``.

    Workers (and the event loop) only hand their answer over, so neither contends for the output nor
    blocks on a full pipe; a burst of answers costs one ``write`` and one ``flush``, not one each.
    A request's own notifications (progress) are written at once by its handler, so they always
    precede its answer. If writing fails, the failure is kept for ``serve`` to raise, ``on_failure`` is
    called (on the writer's thread) and whatever is handed over after it is dropped.

    The server asks it when everything handed over so far is written (before a notification's handler
    runs) and whether the answers not yet written are within ``_UNWRITTEN_ANSWERS``/``_UNWRITTEN_BYTES``
    (before each read): waiting on its thread (threads), or with a callback (asyncio).
    """

    def __init__(self, transport: Any, on_failure: Callable[[], None] | None = None) -> None:
        self._transport = transport
        self._on_failure = on_failure
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)  # the writer's thread waits here for answers
        self._progress = threading.Condition(self._lock)  # the server's thread waits here for writes
        self._pending: list[bytes] = []
        self._handed = 0  # answers handed over
        self._written = 0  # answers written, or dropped after a failure
        self._unwritten_bytes = 0  # pending, or being written
        self._waiters: list[tuple[Callable[[], bool], Callable[[], None]]] = []
        self._closed = False
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="rpcwire-writer", daemon=True)
        self._thread.start()

    def put(self, answer: bytes | None) -> None:
        if answer is None:
            return
        with self._lock:
            if self._closed:  # a handler that outlived serve: nothing is written any more
                return
            self._pending.append(answer)
            self._handed += 1
            self._unwritten_bytes += len(answer)
            if len(self._pending) == 1:
                self._work.notify()

    def _run(self) -> None:
        _leave_signals_to_the_main_thread()
        while True:
            with self._lock:
                while not self._pending and not self._closed:
                    self._work.wait()
                answers, self._pending = self._pending, []
            if not answers:
                return
            failed = False
            if self.failure is None:  # after a failure, nothing more is written
                try:
                    self._transport._write_line(b"\n".join(answers))
                except BaseException as exc:
                    self.failure = exc
                    failed = True
            with self._lock:
                self._written += len(answers)
                self._unwritten_bytes -= sum(map(len, answers))
                self._progress.notify_all()
                ready = [callback for test, callback in self._waiters if test()]
                if ready:
                    self._waiters = [(test, callback) for test, callback in self._waiters if not test()]
            for callback in ready:
                callback()
            if failed and self._on_failure is not None:
                self._on_failure()

    def _over_bound(self) -> bool:  # with the lock held
        unwritten = self._handed - self._written
        return self.failure is None and (unwritten > _UNWRITTEN_ANSWERS or self._unwritten_bytes > _UNWRITTEN_BYTES)

    def all_written(self) -> bool:
        """Whether every answer handed over is written (read without the lock: a hint, for a fast path)."""
        return self._written >= self._handed

    def has_room(self) -> bool:
        """Whether the answers not yet written are within the bounds (a hint, as :meth:`all_written`)."""
        return not self._over_bound()

    def wait_written(self, stopping: Callable[[], bool]) -> None:
        """Until every answer handed over so far is written (or dropped after a failure), or ``stopping()``
        (checked again whenever :meth:`poke` is called)."""
        with self._lock:
            target = self._handed
            while self._written < target and not stopping():
                self._progress.wait()

    def wait_room(self, stopping: Callable[[], bool]) -> None:
        """Until the answers not yet written are within the bounds (or writing failed), or ``stopping()``."""
        with self._lock:
            while self._over_bound() and not stopping():
                self._progress.wait()

    def poke(self) -> None:
        """Have the threads in :meth:`wait_written` and :meth:`wait_room` look at ``stopping()`` again."""
        with self._lock:
            self._progress.notify_all()

    def when_written(self, callback: Callable[[], None]) -> bool:
        """:meth:`wait_written` for the event loop: ``False`` if nothing is left to write, else ``callback``
        is called (on the writer's thread) once it is written."""
        with self._lock:
            target = self._handed
            return self._when(lambda: self._written >= target, callback)

    def when_room(self, callback: Callable[[], None]) -> bool:
        """:meth:`wait_room` for the event loop, as :meth:`when_written`."""
        with self._lock:
            return self._when(lambda: not self._over_bound(), callback)

    def _when(self, test: Callable[[], bool], callback: Callable[[], None]) -> bool:
        if test():
            return False
        self._waiters.append((test, callback))
        return True

    def close(self, timeout: float | None = None) -> bool:
        """Write what is pending, then stop; wait until it is written, ``timeout`` seconds at most
        (``None``: however long it takes). Whether it is written."""
        with self._lock:
            self._closed = True
            self._work.notify()
        self._thread.join(timeout)
        return not self._thread.is_alive()


class _ThreadServer:
    """``max_concurrency=N > 1`` on threads: the calling thread reads, N workers run requests."""

    def __init__(self, handler: Handler, transport: Any, max_concurrency: int) -> None:
        self.handler = handler
        self.transport = transport
        self.max_concurrency = max_concurrency
        # Read and not yet answered: N running and N waiting for a worker, at most. A token each, in a
        # SimpleQueue: taking and giving one back costs 56 ns against 1.25 µs for a BoundedSemaphore,
        # and waiting for one is interrupted by SIGINT alike.
        self.admitted: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(2 * max_concurrency):
            self.admitted.put(None)
        self.held = 0  # tokens the reading thread took back once reading stopped
        self.in_flight = _InFlight()
        self.failures: list[BaseException] = []  # raised by handlers on the workers
        self.writer = _AnswerWriter(transport, on_failure=self.wake)

    def wake(self) -> None:
        """The output failed: a reading thread waiting for a token stops waiting (and sees the failure)."""
        self.admitted.put(None)

    @property
    def stopping(self) -> bool:
        return bool(self.failures) or self.writer.failure is not None

    def serve(self) -> None:
        workers = _Workers(self.max_concurrency)
        try:
            stopped: BaseException | None = None
            try:
                while not self.stopping:
                    if not self.writer.has_room():  # too many answers not yet written: reading pauses
                        self.writer.wait_room(lambda: self.stopping)
                        continue  # woken to stop (a worker's BaseException, the output failed): read no more
                    message = self.transport._read_message()
                    if message is None:
                        break
                    for request, deliver in each_request(message, self.writer.put):
                        self.dispatch(request, deliver, workers)
                if not self.stopping:  # end of input: the requests in flight finish and are answered
                    self.wait_in_flight(None)
            except BaseException as exc:  # on this thread: an interrupt, a notification's handler, the reader
                stopped = exc
            self.end(stopped)
        finally:
            workers.stop()

    def end(self, stopped: BaseException | None) -> None:
        """Stop: raise what stopped the server, if anything, once the answers it allows are written."""
        writer = self.writer
        stop = stopped if stopped is not None else (self.failures[0] if self.failures else None)
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
            self.wait_in_flight(_EXIT_GRACE)
        self.cancel_in_flight()
        writer.close(_EXIT_GRACE)
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

    def dispatch(self, request: Request, deliver: Callable[[bytes | None], None], workers: _Workers) -> None:
        if request.is_notification:  # on this thread, before anything after it is read
            if not self.in_flight.cancel(request):
                if not self.writer.all_written():  # every answer finished before it is out before its handler runs
                    self.writer.wait_written(lambda: self.stopping)
                if self.stopping:  # a handler raised, or the output failed, meanwhile: nothing more is run
                    return
                call(self.transport, request, self.handler, RequestContext(request, self.transport))
            deliver(None)
            return
        self.admitted.get()  # 2N read and unanswered: reading pauses
        if self.stopping:  # a handler raised, or the output failed, meanwhile: nothing more is run
            self.admitted.put(None)
            return
        context = RequestContext(request, self.transport)
        self.in_flight.add(context)
        workers.submit(functools.partial(self.run, request, context, deliver))

    def run(self, request: Request, context: RequestContext, deliver: Callable[[bytes | None], None]) -> None:
        try:
            deliver(call(self.transport, request, self.handler, context))
        except BaseException as exc:  # KeyboardInterrupt, SystemExit or another BaseException in the handler
            self.failures.append(exc)
            self.writer.poke()  # the reading thread may wait for the writer: it stops instead
        finally:
            self.in_flight.remove(context)
            self.admitted.put(None)


# --- asyncio ---------------------------------------------------------------------------------------


async def serve_async(
    handler: Handler, transport: Any, *, max_concurrency: int = 64, guard_stdout: bool = True
) -> None:
    """Serve inside a running event loop until end of input: each request as a task, at most N at once.

    An ``async def`` handler is awaited on the loop; a sync one runs on a worker thread. Reading happens
    on a thread of its own, so the loop never waits for input. At end of input the requests in flight
    are awaited; if this coroutine is cancelled, so are they. ``guard_stdout``: as for :func:`serve`.
    """
    _check_max_concurrency(max_concurrency)
    with _serving(transport), guarded_stdout(transport, guard_stdout):  # before the server starts its workers
        await _AsyncServer(handler, transport, max_concurrency).serve()


class _AsyncServer:
    """:func:`serve_async`: the loop dispatches what a reader thread hands it, one message at a time."""

    def __init__(self, handler: Handler, transport: Any, max_concurrency: int) -> None:
        self.handler = handler
        self.transport = transport
        self.loop = asyncio.get_running_loop()
        self.is_async = is_async_handler(handler)
        self.admitted = asyncio.Semaphore(2 * max_concurrency)  # read and not yet answered
        self.running = asyncio.Semaphore(max_concurrency)  # async handlers running
        self.in_flight = _InFlight()
        self.tasks: set[asyncio.Task[None]] = set()
        self.workers = None if self.is_async else _Workers(max_concurrency)
        # Notifications on a thread of their own: never behind requests that may wait for one of them.
        self.notification_worker = None if self.is_async else _Workers(1)
        # Read ahead of the loop by a few messages: a handoff per message costs a round trip between the
        # threads (pure, pipelined: 219 -> 89 µs a message with 64 ahead, measured by a helper script).
        self.messages: asyncio.Queue[Any] = asyncio.Queue()
        self.read_ahead = threading.Semaphore(_READ_AHEAD)
        self.writer = _AnswerWriter(transport, on_failure=functools.partial(self.soon, self.wake))
        self.failure: BaseException | None = None  # a handler's BaseException: the server stops with it
        self.waiting: asyncio.Future[None] | None = None  # what the serving coroutine awaits, for wake()

    @property
    def stopping(self) -> bool:
        return self.failure is not None or self.writer.failure is not None

    def soon(self, function: Callable[..., Any], *args: Any) -> None:
        """Call ``function`` on the loop, from another thread (nothing, once the loop is closed)."""
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(function, *args)

    def wake(self) -> None:
        """On the loop: the serving coroutine stops waiting, wherever it waits, and sees why."""
        self.messages.put_nowait(_WOKEN)
        self.admitted.release()
        if self.waiting is not None and not self.waiting.done():
            self.waiting.set_result(None)

    async def serve(self) -> None:
        reader = threading.Thread(target=self.read, name="rpcwire-reader", daemon=True)
        reader.start()
        try:
            stopped: BaseException | None = None
            try:
                while not self.stopping:
                    if not self.writer.has_room():  # too many answers not yet written: reading pauses
                        await self.until(self.writer.when_room)
                    message = await self.messages.get()
                    if message is _ENDED:
                        break
                    if message is _WOKEN:
                        continue
                    self.read_ahead.release()
                    if isinstance(message, BaseException):
                        raise message
                    for request, deliver in each_request(message, self.writer.put):
                        await self.dispatch(request, deliver)
                if not self.stopping:  # end of input: the requests in flight finish and are answered
                    await self.settle(None)
            except BaseException as exc:  # an interrupt or cancellation, a notification's handler, the reader
                stopped = exc
            await self.end(stopped)
        finally:
            for workers in (self.workers, self.notification_worker):
                if workers is not None:
                    workers.stop()

    async def end(self, stopped: BaseException | None) -> None:
        """Stop: raise what stopped the server, if anything, once the answers it allows are written."""
        writer = self.writer
        stop = stopped if stopped is not None else self.failure
        if writer.failure is not None:  # nothing more can be written: no handler is waited for
            self.cancel_in_flight()
            writer.close(0)
            raise stopped if stopped is not None else writer.failure  # an interrupt is still one
        if stop is None:
            await self.loop.run_in_executor(None, writer.close)
            if writer.failure is not None:
                raise writer.failure
            return
        if not isinstance(stop, (KeyboardInterrupt, asyncio.CancelledError)):
            await self.settle(_EXIT_GRACE)  # SystemExit and the like: what is in flight may finish
        self.cancel_in_flight()
        writer.close(_EXIT_GRACE)  # on the loop's thread: the server is stopping
        raise stop

    async def until(self, when: Callable[[Callable[[], None]], bool]) -> None:
        """Until the writer calls back (``when`` registers the callback; ``False``: no need), or :meth:`wake`."""
        future = self.loop.create_future()
        if when(functools.partial(self.soon, _settle, future, None, None)):
            self.waiting = future
            try:
                await future
            finally:
                self.waiting = None

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

    def read(self) -> None:
        """On the reader thread: at most ``_READ_AHEAD`` messages ahead of what the loop has taken."""
        # Interrupted (Ctrl-C), the process exits while this thread is still blocked in a read, holding
        # the input's buffer lock; the interpreter would then abort ("could not acquire lock for
        # <stdin> at interpreter shutdown") closing sys.stdin on its way out. Holding the standard
        # streams here keeps them alive, so they are never closed under this thread.
        standard_streams = (sys.stdin, sys.__stdin__)  # noqa: F841
        _leave_signals_to_the_main_thread()  # the loop's thread handles SIGINT
        try:
            while True:
                self.read_ahead.acquire()
                message = self.transport._read_message()
                self.loop.call_soon_threadsafe(self.messages.put_nowait, _ENDED if message is None else message)
                if message is None:
                    return
        except BaseException as exc:
            with contextlib.suppress(RuntimeError):  # the loop is gone
                self.loop.call_soon_threadsafe(self.messages.put_nowait, exc)

    async def dispatch(self, request: Request, deliver: Callable[[bytes | None], None]) -> None:
        if request.is_notification:  # awaited here, before anything after it is dispatched
            if not self.in_flight.cancel(request):
                if not self.writer.all_written():  # every answer finished before it is out before its handler runs
                    await self.until(self.writer.when_written)
                if self.stopping:  # a handler raised, or the output failed, meanwhile: nothing more is run
                    return
                await self.call(request, RequestContext(request, self.transport))
            deliver(None)
            return
        await self.admitted.acquire()
        if self.stopping:  # a handler raised, or the output failed, meanwhile: nothing more is run
            self.admitted.release()
            return
        context = RequestContext(request, self.transport)
        self.in_flight.add(context)
        task = self.loop.create_task(self.run(request, context, deliver))
        context._task = task if self.is_async else None
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def run(self, request: Request, context: RequestContext, deliver: Callable[[bytes | None], None]) -> None:
        try:
            deliver(await self.call(request, context))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the handler's own BaseException: the server stops with it
            # Kept from the task (a SystemExit leaving a task would leave the loop at once, answers unwritten).
            if self.failure is None:
                self.failure = exc
            self.wake()
        finally:
            self.in_flight.remove(context)
            self.admitted.release()

    async def call(self, request: Request, context: RequestContext) -> bytes | None:
        if not self.is_async:
            return await self.in_worker(request, context)  # N worker threads: at most N run at once
        try:
            if request.is_notification:  # not held back by the requests running
                return await self.await_handler(request, context)
            async with self.running:  # a task cancelled while it waits here never runs its handler
                return await self.await_handler(request, context)
        except (Exception, asyncio.CancelledError) as exc:
            return failure_answer(self.transport, request, context, exc)

    async def await_handler(self, request: Request, context: RequestContext) -> bytes | None:
        if context.cancelled:
            return cancelled_answer(self.transport, request, context)
        token = _current.set(context)
        try:
            result = await self.handler(request.method, request.params)
        finally:
            _current.reset(token)
        return result_answer(self.transport, request, context, result)

    def in_worker(self, request: Request, context: RequestContext) -> asyncio.Future[bytes | None]:
        """A sync handler's call on a worker thread (notifications on their own), never on the loop."""
        done: asyncio.Future[bytes | None] = self.loop.create_future()
        call_context = contextvars.copy_context()

        def job() -> None:
            try:
                answer = call_context.run(call, self.transport, request, self.handler, context)
            except BaseException as exc:
                self.soon(_settle, done, None, exc)
            else:
                self.soon(
                    _settle, done, answer, None
                )  # nothing once the loop is closed (a handler that outlived serve)

        workers = self.notification_worker if request.is_notification else self.workers
        assert workers is not None
        workers.submit(job)
        return done


_ENDED = object()
_WOKEN = object()
_READ_AHEAD = 16


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


# --- the entry point ---------------------------------------------------------------------------------


def serve(handler: Handler, transport: Any, *, max_concurrency: int = 1, guard_stdout: bool = True) -> None:
    """Answer every request with ``handler(method, params)`` until end of input.

    ``max_concurrency=1`` (a sync handler): one request at a time, in order. ``N > 1``: up to N requests
    run at once on worker threads, each answered as it finishes. An ``async def`` handler runs on an
    event loop of its own (:func:`serve_async`, with N or 64 tasks at most).

    ``guard_stdout`` (default true): when the transport writes to the process's fd 1, the wire gets a
    descriptor of its own while serving, and fd 1 and ``sys.stdout`` go to stderr, so that a stray
    ``print`` cannot corrupt it; both are restored on the way out.
    """
    _check_max_concurrency(max_concurrency)
    with _serving(transport):  # a transport served elsewhere is refused before fd 1 is touched
        pass
    with guarded_stdout(transport, guard_stdout):
        if is_async_handler(handler):
            asyncio.run(serve_async(handler, transport, max_concurrency=max_concurrency, guard_stdout=False))
        elif max_concurrency == 1:
            transport._serve_sequential(handler)  # the core's own loop
        else:
            with _serving(transport):
                _ThreadServer(handler, transport, max_concurrency).serve()


@contextlib.contextmanager
def _serving(transport: Any) -> Iterator[None]:
    """While a server runs over ``transport``: a second ``serve`` on it raises ``RuntimeError`` (two readers
    would share the input, and an answer could wait behind the other's read until more input came)."""
    transport._start_serving()
    try:
        yield
    finally:
        transport._stop_serving()


def is_async_handler(handler: Any) -> bool:
    """An ``async def`` handler, or one that says it returns awaitables (``rpcwire.methods`` holding an
    ``async def`` function sets ``rpcwire_async``; ``inspect.markcoroutinefunction`` is 3.12+ only)."""
    return inspect.iscoroutinefunction(handler) or getattr(handler, "rpcwire_async", False) is True


def _check_max_concurrency(max_concurrency: int) -> None:
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int):
        raise TypeError(f"max_concurrency must be an int, not {type(max_concurrency).__name__}")
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency}")
