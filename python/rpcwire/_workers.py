"""The worker threads of the concurrent servers: a pool of up to N daemon threads, started as calls come."""

from __future__ import annotations

import queue
import signal
import threading
from collections.abc import Callable

__all__ = ["Workers", "leave_signals_to_the_main_thread"]


def leave_signals_to_the_main_thread() -> None:
    """Called first on each of the engine's threads. A signal sent to the process is delivered to any
    thread that does not block it; delivered to a worker, SIGINT would leave the main thread blocked in
    its read (only a signal delivered to the reading thread interrupts the system call), and
    Ctrl-C would stop nothing until more input came. Blocked here, it reaches the main thread. SIGTERM
    likewise (``--listen`` stops on it: delivered to an engine's thread while its connections closed, it left
    the main thread in ``accept``)."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


class Workers:
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
        leave_signals_to_the_main_thread()
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
