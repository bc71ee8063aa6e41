"""``max_concurrency=N > 1`` with a sync handler: the calling thread reads, N worker threads run requests.

Each request runs on a worker and is answered as soon as it finishes (any order, as the specification
allows). Notifications run on the reading thread, one at a time and in arrival order, before anything after
them is read, and only once every answer finished before them is written (LSP's ``didChange`` is seen by the
next request). At most 2N requests are read and unanswered: N running, N waiting for a worker (a request
cancelled while it waits never runs).
"""

from __future__ import annotations

import functools
import queue
import time

from rpcwire._answer import Deliver, call, each_request
from rpcwire._answer_writer import AnswerWriter
from rpcwire._context import RequestContext
from rpcwire._contract import Transport
from rpcwire._in_flight import EXIT_GRACE, InFlight
from rpcwire._types import Handler, Request
from rpcwire._workers import Workers

__all__ = ["ThreadServer"]


class ThreadServer:
    """``max_concurrency=N > 1`` on threads: the calling thread reads, N workers run requests."""

    def __init__(self, handler: Handler, transport: Transport, max_concurrency: int) -> None:
        self.handler = handler
        self.transport = transport
        self.max_concurrency = max_concurrency
        # Read and not yet answered: N running and N waiting for a worker, at most. A token each, in a
        # SimpleQueue: taking and giving one back costs a fraction of a BoundedSemaphore's acquire and release,
        # and waiting for one is interrupted by SIGINT alike.
        self.admitted: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(2 * max_concurrency):
            self.admitted.put(None)
        self.held = 0  # tokens the reading thread took back once reading stopped
        self.in_flight = InFlight()
        self.failures: list[BaseException] = []  # raised by handlers on the workers
        self.writer = AnswerWriter(transport, on_failure=self.wake)

    def wake(self) -> None:
        """The output failed: a reading thread waiting for a token stops waiting (and sees the failure)."""
        self.admitted.put(None)

    @property
    def stopping(self) -> bool:
        return bool(self.failures) or self.writer.failure is not None

    def serve(self) -> None:
        workers = Workers(self.max_concurrency)
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

    def dispatch(self, request: Request, deliver: Deliver, workers: Workers) -> None:
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

    def run(self, request: Request, context: RequestContext, deliver: Deliver) -> None:
        try:
            deliver(call(self.transport, request, self.handler, context))
        except BaseException as exc:  # KeyboardInterrupt, SystemExit or another BaseException in the handler
            self.failures.append(exc)
            self.writer.poke()  # the reading thread may wait for the writer: it stops instead
        finally:
            self.in_flight.remove(context)
            self.admitted.put(None)
