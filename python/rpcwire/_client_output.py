"""How the threaded client writes (:class:`_Output`): one message at a time, each whole, in the order they start,
each within its caller's deadline wherever the stream allows it; what a caller leaves half-written at its deadline,
and the cancellations sent without waiting, are finished by a writer thread of the client's (:class:`_Job`)."""

from __future__ import annotations

import collections
import contextlib
import logging
import math
import os
import select
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from rpcwire._contract import Transport
from rpcwire._id_null_ledger import _Ledger
from rpcwire._peer import _left
from rpcwire._types import CallTimeout

logger: logging.Logger = logging.getLogger("rpcwire.client")

_JOBS = 1024  # messages sent without waiting (cancellations) queued while the server reads nothing


def _poll_ms(deadline: float | None) -> int | None:
    """``poll``'s timeout until ``deadline`` (rounded up, so that it never wakes just before it)."""
    return None if deadline is None else math.ceil(max(0.0, deadline - time.monotonic()) * 1000)


_QUEUED, _STARTED, _DONE = range(3)


class _Job:
    """A message (or the rest of one) for the output's thread to write."""

    __slots__ = ("data", "error", "locked", "on_start", "state", "withdrawn")

    def __init__(self, data: Any, on_start: Callable[[], Any] | None, locked: bool) -> None:
        self.data = data
        self.on_start = on_start
        self.locked = locked  # the output's lock is already held for it
        self.state = _QUEUED
        self.withdrawn = False
        self.error: BaseException | None = None


class _Output:
    """How a ``Client`` writes: one message at a time, each whole, in the order they start, each within
    its caller's deadline wherever the stream allows it.

    Over a spawned server's stdin (``fd``, made non-blocking) the caller writes itself and waits for room
    with ``poll`` until its deadline. What a caller leaves half-written when its deadline passes (or an
    interrupt comes) is finished by a thread of the client's, as are the cancellations of timed-out calls,
    so that a message is never cut short (the stream would be broken) and a caller never waits past its
    deadline. Over a transport's own stream (which cannot be waited on), and over a spawned server's stdin
    where there is no ``poll`` (the portable path: Windows), a write with a deadline is made by that thread,
    with a blocking write, its caller waiting for it until the deadline. ``stop`` ends every write at once (``fd``'s
    waits watch ``stop_fd``), so that ``close`` can close the pipe."""

    def __init__(
        self,
        transport: Transport,
        fd: int | None,
        stop_fd: int | None,
        ledger: _Ledger,
        encode_frame: Callable[[bytes], bytes],
    ) -> None:
        self._transport = transport
        self._fd = fd
        self._stop_fd = stop_fd
        self._frames = transport.framing == "content-length"
        self._encode_frame = encode_frame  # the client's core's
        self._lock = threading.Lock()  # held while one message is written
        self._is_locked = self._lock.locked
        self._ledger = ledger
        self.lone_at = 0  # the ledger's position when a lone call was last written (see _locked)
        self._cond = threading.Condition()  # the jobs; notified at each release of _lock
        self._jobs: collections.deque[_Job] = collections.deque()
        self._handed: _Job | None = None  # a job _lock is held for
        self._thread: threading.Thread | None = None
        self.stopped = False

    def _locked(self) -> bool:
        """Whether a write holds the output. A lone caller's ``_ClientPipe._call`` asks it last before its own
        write: the native core with the output free and the GIL held from here to the end of that write, the pure
        one once it holds the lock itself. Every other writer takes its place in the ledger under the lock, so
        the ledger's position now is the lone call's place in the order of writing (``lone_at``), which its
        entry takes if it is made later (``Client.call``)."""
        self.lone_at = self._ledger._seq  # (its position(), inline: every lone call comes here)
        return self._is_locked()

    def _framed(self, line: bytes) -> bytes:
        return self._encode_frame(line) if self._frames else line + b"\n"

    def send(self, line: bytes, deadline: float | None, on_start: Callable[[], Any]) -> bool:
        """Write ``line`` as one message; ``on_start()`` just before its first byte. ``True`` once it is written
        whole; ``False`` when ``deadline`` passed with part of it written (the rest goes out in the
        background: it was sent); ``TimeoutError`` when it passed before any of it was (nothing was sent)."""
        if not self._lock.acquire(timeout=-1 if deadline is None else _left(deadline)):
            raise CallTimeout("not sent: the output stayed busy until the deadline")
        if self.stopped:
            self._release()
            raise BrokenPipeError("the client stopped writing")
        if self._fd is None:
            if deadline is None:
                try:
                    on_start()
                    self._transport._write_line(line)
                    return True
                finally:
                    self._release()
            job = _Job(line, on_start, locked=True)
            self._hand(job)  # the lock goes with it
            return self._wait(job, deadline)
        framed = self._encode_frame(line) if self._frames else line + b"\n"
        try:
            on_start()
            written = os.write(self._fd, framed)  # a pipe with room takes a message of up to its size whole
        except BlockingIOError:
            written = 0
        except BaseException:
            self._release_quick()
            raise
        if written == len(framed):
            self._lock.release()  # (_release_quick, inline: every call comes here)
            if self._jobs:
                with self._cond:
                    self._cond.notify_all()
            return True
        data, done = memoryview(framed), [written]
        try:
            self._write_fd(data, deadline, done)
        finally:
            self._leave(data, done[0])
        if done[0] == 0:
            raise CallTimeout("not sent: the server read nothing until the deadline")
        return done[0] == len(data)

    def send_soon(self, line: bytes, on_start: Callable[[], Any]) -> None:
        """Write ``line`` without waiting: now if the output is free and has room, else in the background."""
        if self.stopped:
            return
        if self._fd is None or not self._lock.acquire(blocking=False):
            self._queue(_Job(line if self._fd is None else self._framed(line), on_start, locked=False))
            return
        data = memoryview(self._framed(line))
        done = [0]
        try:
            on_start()
            self._write_fd(data, time.monotonic(), done)
        except OSError as exc:
            logger.debug("writing to the server failed: %r", exc)
            self._release_quick()
            return
        except BaseException:
            self._leave(data, done[0])
            raise
        if done[0] == 0 and not self.stopped:  # its place in the ledger is taken: it goes out next
            self._hand(_Job(data, None, locked=True))
        else:
            self._leave(data, done[0])

    def _leave(self, data: memoryview, done: int) -> None:
        """Release the output after ``done`` bytes of ``data`` were written: a message cut short is finished
        by the output's thread first (the lock goes with it)."""
        if 0 < done < len(data) and not self.stopped:
            self._hand(_Job(data[done:], None, locked=True))
        else:
            self._release_quick()

    def _write_fd(self, data: memoryview, deadline: float | None, done: list[int]) -> None:
        """Write ``data`` to ``fd`` until it is all written or ``deadline`` passed (``done[0]``: how much was)."""
        assert self._fd is not None
        poller = None
        while done[0] < len(data):
            if self.stopped:
                raise BrokenPipeError("the client stopped writing")
            try:
                done[0] += os.write(self._fd, data[done[0] :])
                continue
            except BlockingIOError:
                pass
            timeout = _poll_ms(deadline)
            if timeout == 0:
                return
            if poller is None:
                poller = select.poll()
                poller.register(self._fd, select.POLLOUT)
                if self._stop_fd is not None:
                    poller.register(self._stop_fd, select.POLLIN)
            poller.poll(timeout)

    def _release(self) -> None:
        self._lock.release()
        with self._cond:
            self._cond.notify_all()

    def _release_quick(self) -> None:
        """Release after a caller's own write: the only thread that waits for the lock's release on ``_cond`` is
        the output's, when jobs are queued (it looks at them under ``_cond`` before it waits, and ``_queue``
        notifies it), so without jobs nobody is to be told."""
        self._lock.release()
        if self._jobs:
            with self._cond:
                self._cond.notify_all()

    def _hand(self, job: _Job) -> None:
        """Give ``job`` (and the lock held for it) to the output's thread."""
        with self._cond:
            self._handed = job
            self._start()
            self._cond.notify_all()

    def _queue(self, job: _Job) -> None:
        with self._cond:
            if self.stopped:
                return
            if len(self._jobs) >= _JOBS:  # a server that reads nothing while it keeps asking: a bound
                logger.warning("dropped a message to the server: %d wait for it to read", len(self._jobs))
                return
            self._jobs.append(job)
            self._start()
            self._cond.notify_all()

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():  # (it ends once stopped with nothing handed)
            self._thread = threading.Thread(target=self._finish, name="rpcwire-client-writer", daemon=True)
            self._thread.start()

    def _wait(self, job: _Job, deadline: float) -> bool:
        """As ``send`` for a job given to the output's thread."""
        with self._cond:
            try:
                while job.state != _DONE:
                    left = _left(deadline)
                    if left == 0:
                        if job.state == _QUEUED:
                            job.withdrawn = True
                            raise CallTimeout("not sent: the output stayed busy until the deadline")
                        return False
                    self._cond.wait(left)
            except BaseException:
                if job.state == _QUEUED:
                    job.withdrawn = True
                raise
        if job.error is not None:
            raise job.error
        return True

    def _finish(self) -> None:
        """The output's thread: the jobs handed to it, then the queued ones, each under the lock."""
        while True:
            with self._cond:
                while True:
                    if self._handed is not None:
                        job, self._handed = self._handed, None
                        break
                    if self.stopped:
                        return
                    if self._jobs and self._lock.acquire(blocking=False):
                        job = self._jobs.popleft()
                        break
                    self._cond.wait()
                if job.withdrawn:
                    self._release()
                    continue
                job.state = _STARTED
            try:
                if self.stopped:
                    raise BrokenPipeError("the client stopped writing")
                if job.on_start is not None:
                    job.on_start()
                if self._fd is not None:
                    self._write_fd(memoryview(job.data), None, [0])
                else:
                    self._transport._write_line(job.data)
            except Exception as exc:
                job.error = exc
                logger.debug("writing to the server failed: %r", exc)
            finally:
                with self._cond:
                    job.state = _DONE
                self._release()

    def stop(self) -> None:
        """End every write now (what is queued is dropped); the caller then signals ``stop_fd``."""
        with self._cond:
            self.stopped = True
            self._jobs.clear()
            self._cond.notify_all()

    def join(self, timeout: float) -> bool:
        """Whether the output's thread (if any) ended within ``timeout``."""
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    @contextlib.contextmanager
    def exclusive(self, timeout: float) -> Iterator[bool]:
        """Hold the output (once stopped: no write is under way, and none will start after), so that ``close``
        can close the pipe; ``False`` if it stayed busy for ``timeout`` seconds."""
        taken = self._lock.acquire(timeout=timeout)
        try:
            yield taken
        finally:
            if taken:
                self._release()
