"""``serve_async`` (and ``serve`` with an ``async def`` handler): requests as tasks on the running event loop.

A reader thread hands each message to the loop, which never blocks on input. A request runs as a task: an
``async def`` handler is awaited on the loop (at most N at once), a sync one runs on one of N worker threads
(notifications on a worker of their own). Notifications are awaited before anything after them is
dispatched, once every answer finished before them is written. At most 2N requests are read and unanswered.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import sys
import threading
from collections.abc import Callable
from typing import Any

from rpcwire._answer import Deliver, call, call_async, each_request, failure_answer
from rpcwire._answer_writer import AnswerWriter
from rpcwire._context import RequestContext
from rpcwire._contract import Transport
from rpcwire._in_flight import EXIT_GRACE, InFlight
from rpcwire._types import Handler, Request
from rpcwire._workers import Workers, leave_signals_to_the_main_thread

__all__ = ["AsyncServer"]

_ENDED = object()  # the reader's item at end of input
_WOKEN = object()  # wake()'s item: the serving coroutine looks at why
_READ_AHEAD = 16  # messages the reader thread reads ahead of the loop


class AsyncServer:
    """:func:`serve_async`: the loop dispatches what a reader thread hands it, one message at a time."""

    def __init__(self, handler: Handler, transport: Transport, max_concurrency: int, *, is_async: bool) -> None:
        self.handler = handler
        self.transport = transport
        self.loop = asyncio.get_running_loop()
        self.is_async = is_async  # an async def handler is awaited here, a sync one runs on the workers
        self.admitted = asyncio.Semaphore(2 * max_concurrency)  # read and not yet answered
        self.running = asyncio.Semaphore(max_concurrency)  # async handlers running
        self.in_flight = InFlight()
        self.tasks: set[asyncio.Task[None]] = set()
        self.workers = None if self.is_async else Workers(max_concurrency)
        # Notifications on a thread of their own: never behind requests that may wait for one of them.
        self.notification_worker = None if self.is_async else Workers(1)
        # Read ahead of the loop by a few messages: a handoff per message would cost a round trip between the
        # threads for each one.
        self.messages: asyncio.Queue[Any] = asyncio.Queue()
        self.read_ahead = threading.Semaphore(_READ_AHEAD)
        self.writer = AnswerWriter(transport, on_failure=functools.partial(self.soon, self.wake))
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
            await self.settle(EXIT_GRACE)  # SystemExit and the like: what is in flight may finish
        self.cancel_in_flight()
        writer.close(EXIT_GRACE)  # on the loop's thread: the server is stopping
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
        leave_signals_to_the_main_thread()  # the loop's thread handles SIGINT
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

    async def dispatch(self, request: Request, deliver: Deliver) -> None:
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

    async def run(self, request: Request, context: RequestContext, deliver: Deliver) -> None:
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
                return await call_async(self.transport, request, self.handler, context)
            async with self.running:  # a task cancelled while it waits here never runs its handler
                return await call_async(self.transport, request, self.handler, context)
        except (Exception, asyncio.CancelledError) as exc:  # cancelled: answered -32800 (MCP: not at all)
            return failure_answer(self.transport, request, context, exc)

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


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
