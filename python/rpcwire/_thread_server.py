"""``max_concurrency=N > 1`` with a sync handler: a threads driver of the serving session (:mod:`rpcwire._session`).

The session decides everything about what is in flight (admission, the read-ahead, cancellations, notifications
after the answers before them, backpressure, the stop and its grace); this module only moves events in and
carries actions out, on three kinds of thread:

- **The calling thread** dispatches: it reads while the session says ``reading``, feeds each message in, runs the
  notifications the session hands it (``RunNotification``: one at a time, before anything after them is read),
  and ends when a ``Stop`` comes (waiting for ``Settled`` within the stop's grace, then ``abandon``).
- **N worker threads** (:mod:`rpcwire._workers`) run the requests (``Start``), each answered as it finishes (any
  order, as the specification allows); a worker runs the next held request the session starts on its answer
  itself, without a hop.
- **The writer thread** (:mod:`rpcwire._answer_writer`) writes the answers (``Write``, handed over under the
  session's lock, so that the writer's order is the session's) and reports what it wrote (``written``).

The session is called under one lock; actions for the calling thread (a notification to run, reading resumed, a
stop, settled) reach it through its inbox. A message already buffered is taken on the calling thread, and so is
any message while nothing is in flight; a read that may wait while requests run or answers are being written is
made by a reader thread (started the first time one is needed), when the calling thread asks for it, and the
calling thread waits for the message *or* an action: a read blocked on an input that stays open never stands
between a stop and ``serve`` returning (the reader, a daemon thread, is left in its read).
"""

from __future__ import annotations

import functools
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from rpcwire._answer import call
from rpcwire._answer_writer import AnswerWriter
from rpcwire._contract import Transport
from rpcwire._session import Action, Cancel, Grace, RunNotification, Session, Settled, Start, Stop, Write
from rpcwire._types import Handler
from rpcwire._workers import Workers, leave_signals_to_the_main_thread

__all__ = ["ThreadServer"]


class ThreadServer:
    """``max_concurrency=N > 1`` on threads: the calling thread dispatches, N workers run requests."""

    def __init__(self, handler: Handler, transport: Transport, max_concurrency: int) -> None:
        self.handler = handler
        self.transport = transport
        self.session = Session(transport, max_concurrency)
        self.lock = threading.Lock()  # the session's, and the hand-over of its answers to the writer
        # What the calling thread waits for: the reader's messages, as (message, exception), and lists of actions.
        self.inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.asks: queue.SimpleQueue[bool] = queue.SimpleQueue()  # True: read one message; False: end
        self.reader: threading.Thread | None = None
        self.workers = Workers(max_concurrency)
        self.writer = AnswerWriter(transport, on_failure=self.output_failed, on_written=self.written)
        self.stop: Stop | None = None
        self.settled = False

    def event(self, happened: Callable[..., list[Action]], *args: Any) -> list[Action]:
        """Tell the session what happened (under the lock, its answers handed to the writer there); the other
        actions are returned, to carry out."""
        with self.lock:
            return self.hand_over(happened(*args))

    def hand_over(self, actions: list[Action]) -> list[Action]:
        """With the lock held: the answers to the writer, in the session's order."""
        for action in actions:
            if type(action) is Write:
                self.writer.put_many(action.lines)
        return actions

    def serve(self) -> None:
        try:
            try:
                self.dispatch()
            except BaseException as exc:  # on this thread: an interrupt, a failed read
                self.take(self.event(self.session.stop, exc))
            self.end()
        finally:
            self.asks.put(False)  # the reader ends, unless it is blocked in a read (a daemon thread)
            self.workers.stop()

    # --- the calling thread ----------------------------------------------------------------------------------

    def dispatch(self) -> None:
        """Read and feed the session while it says ``reading``, carry out what comes back, until a ``Stop``."""
        session, transport = self.session, self.transport
        asked = False  # the reader thread is reading
        while self.stop is None:
            if session.reading and not asked:
                if transport._has_buffered_message() or session.idle:  # no read that may wait, or nothing to stop it
                    self.received(transport._read_message())
                    continue
                if self.reader is None:
                    self.reader = threading.Thread(target=self.read, name="rpcwire-reader", daemon=True)
                    self.reader.start()
                self.asks.put(True)
                asked = True
            item = self.inbox.get()
            if type(item) is tuple:  # the reader's
                asked = False
                message, error = item
                if error is not None:
                    raise error
                self.received(message)
            else:
                self.take(item)

    def received(self, message: Any) -> None:
        session = self.session
        with self.lock:  # (event, inline: once per message; a pipelining peer's held request has no action)
            actions = session.received(message) if message is not None else session.input_ended()
            if actions:
                self.hand_over(actions)
        if actions:
            self.take(actions)

    def take(self, actions: list[Action]) -> None:
        """Carry out actions on the calling thread: the notifications run here, in turn."""
        work = deque(actions)
        while work:
            action = work.popleft()
            kind = type(action)
            if kind is Start:
                self.workers.submit(functools.partial(self.run, action))
            elif kind is Cancel:
                action.context._cancel(action.dialect)  # type: ignore[union-attr]
            elif kind is RunNotification:
                work += self.notify(action)  # type: ignore[arg-type]
            elif kind is Stop:
                self.stop = action  # type: ignore[assignment]
            elif kind is Settled:
                self.settled = True

    def notify(self, notification: RunNotification) -> list[Action]:
        session = self.session
        try:
            call(self.transport, notification.request, self.handler, notification.context)
        except BaseException as exc:  # SystemExit and the like: the server stops with it
            return self.event(session.stop, exc) + self.event(session.notified, notification)
        return self.event(session.notified, notification)

    def read(self) -> None:
        """On the reader thread: each time the calling thread asks, one message, read as it comes."""
        # As the asyncio server's reader: holding the standard streams keeps them from being closed under
        # this thread, blocked in a read, when the process leaves (its interpreter would abort).
        standard_streams = (sys.stdin, sys.__stdin__)  # noqa: F841
        leave_signals_to_the_main_thread()  # the calling thread handles SIGINT
        while self.asks.get():
            try:
                message = self.transport._read_message()
            except BaseException as exc:  # raised on the calling thread
                self.inbox.put((None, exc))
                return
            self.inbox.put((message, None))
            if message is None:
                return

    def end(self) -> None:
        """The stop: what is in flight gets its grace, then is cancelled; what finished is written; its reason
        raised."""
        grace = Grace()  # the stop in force's (a stricter one may come meanwhile)
        while True:
            stop = self.stop
            assert stop is not None
            if self.settled or stop.grace == 0:
                break
            timeout = grace.left(stop, time.monotonic())
            if timeout is not None and timeout <= 0:
                break
            try:
                item = self.inbox.get(timeout=timeout)
            except queue.Empty:
                break
            if type(item) is not tuple:  # a late read is dropped: nothing more is served
                self.take(item)
        stop = self.stop
        assert stop is not None
        self.take(self.event(self.session.abandon))
        self.writer.close(stop.write_grace)
        if stop.reason is not None:
            raise stop.reason
        if self.writer.failure is not None:
            raise self.writer.failure

    # --- the other threads -----------------------------------------------------------------------------------

    def run(self, start: Start | None) -> None:
        """On a worker: the request, then each one the session starts on its answer, until none."""
        session, transport, handler, lock, writer = self.session, self.transport, self.handler, self.lock, self.writer
        while start is not None:
            try:
                answer = call(transport, start.request, handler, start.context)
            except BaseException as exc:  # KeyboardInterrupt, SystemExit or another BaseException in the handler
                actions = self.event(session.failed, start, exc)
            else:
                with lock:  # (event, inline: once per request)
                    actions = session.finished(start, answer)
                    for action in actions:
                        if type(action) is Write:
                            writer.put_many(action.lines)  # type: ignore[union-attr]
            start = self.carry(actions, inline=True)

    def carry(self, actions: list[Action], *, inline: bool = False) -> Start | None:
        """Carry out actions off the calling thread: requests to the workers (``inline``: the first one returned,
        for this worker to run), cancellations here, the rest to the calling thread."""
        first: Start | None = None
        control: list[Action] | None = None
        for action in actions:
            kind = type(action)
            if kind is Write:
                continue  # handed to the writer under the lock
            if kind is Start:
                if inline and first is None:
                    first = action  # type: ignore[assignment]
                else:
                    self.workers.submit(functools.partial(self.run, action))
            elif kind is Cancel:
                action.context._cancel(action.dialect)  # type: ignore[union-attr]
            elif control is None:
                control = [action]
            else:
                control.append(action)
        if control is not None:
            self.inbox.put(control)
        return first

    def written(self) -> None:
        """On the writer's thread: answers written."""
        with self.lock:
            actions = self.hand_over(self.session.written(*self.writer.take_written()))
        self.carry(actions)

    def output_failed(self) -> None:
        """On the writer's thread: writing failed."""
        failure = self.writer.failure
        assert failure is not None
        self.carry(self.event(self.session.output_failed, failure))
