"""The writer thread of the concurrent servers: every answer goes out through it, in bursts.

Handlers (on worker threads or the event loop) only hand their answer over; the writer writes what came in
while it was writing in one write and one flush. The server asks it when everything handed over is written
(before a notification's handler runs) and whether the answers not yet written are within bounds (before
each read), so that a peer that does not read holds the server to bounded memory.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from rpcwire._contract import Transport
from rpcwire._workers import leave_signals_to_the_main_thread

__all__ = ["UNWRITTEN_ANSWERS", "UNWRITTEN_BYTES", "AnswerWriter"]

# Reading pauses while more answers than these wait to be written (docs/semantics.md, "Concurrency"): a
# peer that does not read holds the engine to this much memory, not to all the answers to what it sends.
UNWRITTEN_ANSWERS = 1024
UNWRITTEN_BYTES = 1 << 20


class AnswerWriter:
    """The answers of the concurrent modes go out through one thread of their own, which never waits
    for a handler: what finished while it was writing goes out together in the next ``write``.

    Workers (and the event loop) only hand their answer over, so neither contends for the output nor
    blocks on a full pipe; a burst of answers costs one ``write`` and one ``flush``, not one each.
    A request's own notifications (progress) are written at once by its handler, so they always
    precede its answer. If writing fails, the failure is kept for ``serve`` to raise, ``on_failure`` is
    called (on the writer's thread) and whatever is handed over after it is dropped.

    The server asks it when everything handed over so far is written (before a notification's handler
    runs) and whether the answers not yet written are within ``UNWRITTEN_ANSWERS``/``UNWRITTEN_BYTES``
    (before each read): waiting on its thread (threads), or with a callback (asyncio).
    """

    def __init__(self, transport: Transport, on_failure: Callable[[], None] | None = None) -> None:
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

    def put_many(self, answers: list[bytes]) -> None:
        """:meth:`put` of several answers at once (none of them ``None``): one hand-off, at most one wake-up."""
        with self._lock:
            if self._closed:
                return
            idle = not self._pending
            self._pending += answers
            self._handed += len(answers)
            self._unwritten_bytes += sum(map(len, answers))
            if idle:
                self._work.notify()

    def _run(self) -> None:
        leave_signals_to_the_main_thread()
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
                    self._transport._write_lines(answers)
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

    def _over_bound(self, answers: int = 0, size: int = 0) -> bool:  # with the lock held, or as a hint
        unwritten, unwritten_bytes = self._handed - self._written + answers, self._unwritten_bytes + size
        return self.failure is None and (unwritten > UNWRITTEN_ANSWERS or unwritten_bytes > UNWRITTEN_BYTES)

    def all_written(self) -> bool:
        """Whether every answer handed over is written (read without the lock: a hint, for a fast path)."""
        return self._written >= self._handed

    def has_room(self, answers: int = 0, size: int = 0) -> bool:
        """Whether the answers not yet written, with ``answers`` more of ``size`` bytes together that the caller
        holds for a :meth:`put_many`, are within the bounds (a hint, as :meth:`all_written`)."""
        return not self._over_bound(answers, size)

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
