"""The writer thread of the concurrent servers: every answer goes out through it, in bursts.

Handlers (on worker threads or the event loop) only hand their answer over, through the server's driver of the
session (:mod:`rpcwire._session`); the writer writes what came in while it was writing in one write and one
flush, and reports each burst written (``on_written``), whose counts the driver hands to the session
(:meth:`AnswerWriter.take_written`): the session decides what waits for them (a notification, held requests,
reading paused for a peer that does not read).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from rpcwire._contract import Transport
from rpcwire._workers import leave_signals_to_the_main_thread

__all__ = ["AnswerWriter"]


class AnswerWriter:
    """The answers of the concurrent modes go out through one thread of their own, which never waits
    for a handler: what finished while it was writing goes out together in the next ``write``.

    Workers (and the event loop) only hand their answer over, so neither contends for the output nor
    blocks on a full pipe; a burst of answers costs one ``write`` and one ``flush``, not one each.
    A request's own notifications (progress) are written at once by its handler, so they always
    precede its answer. If writing fails, the failure is kept for ``serve`` to raise, ``on_failure`` is
    called (on the writer's thread) and whatever is handed over after it is dropped (and counted as written).
    After each burst, ``on_written`` is called on the writer's thread (without the writer's lock held).
    """

    def __init__(
        self,
        transport: Transport,
        on_failure: Callable[[], None] | None = None,
        on_written: Callable[[], None] | None = None,
    ) -> None:
        self._transport = transport
        self._on_failure = on_failure
        self._on_written = on_written
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)  # the writer's thread waits here for answers
        self._pending: list[bytes] = []
        self._written = 0  # answers written (or dropped after a failure) and not yet taken
        self._written_bytes = 0
        self._closed = False
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="rpcwire-writer", daemon=True)
        self._thread.start()

    def put_many(self, answers: list[bytes]) -> None:
        """Answer lines to write, in order: one hand-off, at most one wake-up."""
        with self._lock:
            if self._closed:  # a handler that outlived serve: nothing is written any more
                return
            idle = not self._pending
            self._pending += answers
            if idle:
                self._work.notify()

    def take_written(self) -> tuple[int, int]:
        """The answers written (or dropped) since the last call, and their bytes together."""
        with self._lock:
            written = self._written, self._written_bytes
            self._written = self._written_bytes = 0
        return written

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
            size = sum(map(len, answers))
            with self._lock:
                self._written += len(answers)
                self._written_bytes += size
            if failed and self._on_failure is not None:
                self._on_failure()
            if self._on_written is not None:
                self._on_written()

    def close(self, timeout: float | None = None) -> bool:
        """Write what is pending, then stop; wait until it is written, ``timeout`` seconds at most
        (``None``: however long it takes). Whether it is written."""
        with self._lock:
            self._closed = True
            self._work.notify()
        self._thread.join(timeout)
        return not self._thread.is_alive()
