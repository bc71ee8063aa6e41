"""How the threaded client reads a spawned server's pipe (:class:`_PipeReading`, a part of
:class:`rpcwire._client.Client`): the calling threads read for each other, one at a time (leader/follower), each
waiting with its :class:`_Waiter`; a thread of the client's reads while nobody calls (the idle reader); over any
other stream, a thread reads all the time (``_read_all``). Once the server ended, what it left is read and every
call fails with ``ConnectionClosed``."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import select
import subprocess
import threading
import time
from typing import Any

from rpcwire._client_process import _CORE_READ, _REMAINS_BYTES, _drain_pipe
from rpcwire._contract import ClientPipe, Transport
from rpcwire._peer import _REMAINS_S, _left
from rpcwire._types import ConnectionClosed, Response

logger: logging.Logger = logging.getLogger("rpcwire.client")

_IDLE_S = 0.005  # how long nobody reads, after a read, before the client's own reader does


class _Waiter:
    """One sync call waiting for its answer. ``lock`` is held until the waiter is *signalled* (released
    once, under the client's ``_signals`` lock): when ``response`` is set, or when it is asked to ``lead``
    (to read for every caller; see :class:`Client`). A caller that reads its own answer never sleeps, so
    ``lock`` is made only when the waiter first goes to sleep (``Client._arm``), and the class has no
    ``__init__``: the attributes start as the class's."""

    lock: threading.Lock | None = None
    response: Response | ConnectionClosed | None = None
    lead = False
    signalled = False


class _PipeReading:
    """The reading part of :class:`rpcwire._client.Client` (its state is made in ``Client._begin`` and
    ``_start_threads``): who reads when, over a pipe it can wait on (the callers, then the idle reader), and the
    reading thread of the other streams."""

    _pipe: ClientPipe | None
    _transport: Transport
    _fd: int | None
    _closed: ConnectionClosed | None
    _exited: bool
    _pending: dict[int, Any]
    _signals: threading.Lock
    _leading: _Waiter | None
    _sleepers: dict[int, _Waiter]
    _pipes_lock: threading.Lock
    _pipes: dict[str, tuple[int, int]]
    _process: subprocess.Popen[bytes] | None

    # --- waiting, and reading ----------------------------------------------------------------------

    def _wait(self, waiter: _Waiter, id_: int, deadline: float | None, resumed: tuple[Any, ...] | None = None) -> bool:
        """Until ``waiter`` has its response (``True``) or ``deadline`` passed (``False``: the call is no
        longer pending, and any reading handed to it was handed on). An exception (an interrupt) leaves
        nothing of the waiter behind either. ``resumed``: the caller holds the reading lock already, and has
        read that (``(message,)``, or ``()``)."""
        if resumed is not None or (self._fd is not None and self._take_read()):
            self._read_for(waiter, deadline, resumed or ())  # nobody else reads: this caller does
            if waiter.response is not None:
                return True
            if self._pending.pop(id_, None) is not None:
                return False
        try:
            return self._wait_for(waiter, id_, deadline)
        except BaseException:
            if self._fd is not None:
                with self._signals:
                    self._sleepers.pop(id(waiter), None)
                    handed, waiter.lead = waiter.lead, False
                if handed:
                    self._after_reading()
            raise

    def _wait_for(self, waiter: _Waiter, id_: int, deadline: float | None) -> bool:
        while waiter.response is None:
            if self._fd is not None and self._take_read():
                self._read_for(waiter, deadline)
                if waiter.response is None and self._pending.pop(id_, None) is not None:
                    return False
                continue
            if self._fd is not None:
                with self._signals:
                    self._arm(waiter)
                    self._sleepers[id(waiter)] = waiter
                # Registered first, then looked: a reader that stops after this look hands on to a sleeper.
                if not self._read_taken():
                    self._unsleep(waiter)
                    continue
                if self._idle_reading:
                    self._wake_idle_reader()
            else:
                with self._signals:
                    self._arm(waiter)
            assert waiter.lock is not None
            left = _left(deadline)
            woken = waiter.lock.acquire(timeout=-1 if left is None else left)
            if self._fd is not None:
                with self._signals:
                    self._sleepers.pop(id(waiter), None)
            if woken:
                with self._signals:
                    waiter.signalled = False  # the lock is held again: the waiter can be signalled again
                waiter.lead = False  # asked to read (or answered): either way, look again
                continue
            if self._pending.pop(id_, None) is not None:  # timed out, and no answer is being delivered
                with self._signals:
                    handed, waiter.lead = waiter.lead, False
                if handed:
                    self._after_reading()
                return False
            waiter.lock.acquire()  # the answer is being delivered: its signal is on the way
            with self._signals:
                waiter.signalled = False
        return True

    @staticmethod
    def _arm(waiter: _Waiter) -> None:
        """Give ``waiter`` its lock before it first sleeps (under ``_signals``): held, unless it was signalled."""
        if waiter.lock is None:
            waiter.lock = threading.Lock()
            if not waiter.signalled:
                waiter.lock.acquire()

    def _unsleep(self, waiter: _Waiter) -> None:
        with self._signals:
            self._sleepers.pop(id(waiter), None)
            if waiter.signalled and waiter.lock is not None:  # handed the reading meanwhile: re-arm (the lock is free)
                waiter.lock.acquire()
                waiter.signalled = False
                waiter.lead = False

    def _signal(self, waiter: _Waiter) -> None:
        with self._signals:
            if not waiter.signalled:
                waiter.signalled = True
                if waiter.lock is not None:  # (else it is made free: _arm)
                    waiter.lock.release()

    def _read_for(self, waiter: _Waiter, deadline: float | None, first: tuple[Any, ...] = ()) -> None:
        """``_read_until`` by a caller that took the reading lock (and read ``first``: ``(message,)``, delivered
        first), then the reading handed on."""
        self._leading = waiter
        try:
            if first:
                self._last_read = time.monotonic()
                self._deliver(first[0])
            self._read_until(waiter, deadline)
        finally:
            self._leading = None
            self._leave_read()
            self._after_reading()

    def _read_until(self, waiter: _Waiter | None, deadline: float | None) -> None:
        """Read for everyone until ``waiter`` has its response (``None``: until a caller needs the reading,
        the idle reader) or ``deadline`` passed, or the client closed or the server ended. Waits with
        ``poll`` on the pipe and the client's halt pipe, and reads only what has come, a read at a time,
        until a whole message is here: half a message never holds a reader past its time.

        The path of a lone caller (one poll, one read, its own answer) is the one a ping-pong takes on every
        call: ``poll``'s timeout computed inline, the one event of the pipe taken without a look at the
        others, an answer given to ``_take_answer`` without ``_deliver``'s dispatch."""
        transport = self._pipe
        assert transport is not None
        poller = self._poller if waiter is not None else self._idle_poller
        fd, wake = self._fd, self._wake_fd
        while waiter is None or waiter.response is None:
            if self._closed is not None:
                return
            if self._exited:
                self._read_remains()
                return
            try:
                if not transport._has_buffered_message():
                    if deadline is None:
                        events = poller.poll()
                    else:
                        timeout = math.ceil(max(0.0, deadline - time.monotonic()) * 1000)  # never just before it
                        if timeout == 0:
                            return
                        events = poller.poll(timeout)
                        if not events:
                            return
                    if len(events) == 1 and events[0][0] == fd:
                        transport._read_available()
                        continue
                    readable = False
                    for ready, _ in events:
                        if ready == wake:
                            _drain_pipe(wake)
                            if waiter is None:
                                return
                        elif ready == fd:
                            readable = True
                    if readable:
                        transport._read_available()
                    continue
                message = transport._read_incoming()
            except Exception as exc:  # a stream that fails: the connection is as good as closed
                self._close_with(self._connection_closed(f"reading from the server failed: {exc!r}"))
                return
            self._last_read = time.monotonic()
            if message is None:
                self._close_with(self._connection_closed("the server closed its output"))
                return
            if type(message) is Response:
                self._take_answer(message)
            else:
                self._deliver(message)

    def _read_remains(self) -> None:
        """The server ended: deliver what it left in its pipe (for at most ``_REMAINS_S`` and about
        ``_REMAINS_BYTES``: a child of its may hold the pipe open and write on), then fail every call with
        ``ConnectionClosed``."""
        transport, fd = self._pipe, self._fd
        assert transport is not None and fd is not None  # only a reader that waits on the descriptor reads it
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        until = time.monotonic() + _REMAINS_S
        reads_left = _REMAINS_BYTES // _CORE_READ  # each read takes at most one of the core's reads
        try:
            while self._closed is None and time.monotonic() < until:
                if not transport._has_buffered_message():
                    if not poller.poll(0) or reads_left == 0:
                        break
                    transport._read_available()
                    reads_left -= 1
                    continue
                message = transport._read_incoming()
                if message is None:
                    break
                self._deliver(message)
        except Exception as exc:
            logger.debug("reading what the server left failed: %r", exc)
        self._close_with(self._connection_closed("the server process ended"))

    def _release_read(self) -> None:
        self._leave_read()
        self._after_reading()

    def _after_reading(self) -> None:
        """Nobody reads now: hand the reading to a caller still waiting, else to the idle reader.

        Looked at without the locks first, as the one reader leaving: a caller that registers as a sleeper
        after the look finds the reading lock free and reads itself (``_wait_for``); a turn still set (the idle
        reader has not taken it: it reads once it does, after this release) needs setting no more."""
        if self._sleepers and self._hand_on():
            return
        if self._idle_turn and not self._idle_parked:
            return
        with self._idle_lock:
            self._idle_turn = True
            if self._idle_parked:
                self._idle.notify()

    def _hand_on(self) -> bool:
        """Ask one waiting caller to read; ``False`` if none waits."""
        with self._signals:
            for waiter in self._sleepers.values():
                if not waiter.signalled and waiter.lock is not None:
                    waiter.lead = True
                    waiter.signalled = True
                    waiter.lock.release()
                    return True
        return False

    def _wake_idle_reader(self) -> None:
        self._poke("wake")

    def _poke(self, name: str) -> None:
        """Write a byte into one of the client's pipes (``halt`` and ``stop`` stay readable for good)."""
        with self._pipes_lock:
            pipe = self._pipes.get(name)
            if pipe is not None:
                with contextlib.suppress(BlockingIOError):
                    os.write(pipe[1], b"!")

    def _read_when_idle(self) -> None:
        """The client's own reader (over a pipe it can wait on). Parked (blocked, no timer) while a caller
        reads; when the last one leaves, it reads once nobody has read for ``_IDLE_S``, blocking on the pipe
        until something comes or a caller needs the reading."""
        idle = self._idle
        while True:
            with idle:
                while self._closed is None and not self._idle_turn:
                    self._idle_parked = True
                    idle.wait()
                self._idle_parked = False
                while self._closed is None and (quiet := self._quiet()) < _IDLE_S:
                    idle.wait(_IDLE_S - quiet)
                # Taken only now, just before the reading lock is tried: a caller that leaves meanwhile
                # finds the turn still set and need not set it (the lone caller's path leaves so).
                self._idle_turn = False
            if self._closed is not None:
                return
            if not self._take_read():
                continue  # a caller reads: it gives the turn back when it leaves
            self._idle_reading = True
            try:
                self._read_until(None, None)
            except Exception as exc:  # a delivery that fails: the client cannot go on
                logger.exception("the client's reader stopped")
                self._close_with(self._connection_closed(f"reading from the server failed: {exc!r}"))
            finally:
                self._idle_reading = False
                self._release_read()

    def _quiet(self) -> float:
        """Seconds since anything was last read (by a reader here, or by a lone caller's ``_ClientPipe._call``)."""
        return min(time.monotonic() - self._last_read, self._since_read())

    # --- the reading thread ----------------------------------------------------------------------

    def _read_all(self) -> None:
        cause = "the server closed its output"
        try:
            while self._closed is None and (message := self._transport._read_incoming()) is not None:
                self._deliver(message)
        except Exception as exc:  # a stream that fails: the connection is as good as closed
            cause = f"reading from the server failed: {exc!r}"
            logger.debug("%s", cause)
        if self._exited:
            cause = "the server process ended"
        self._close_with(self._connection_closed(cause))
        if self._process is not None:
            self._stream_ended(self._process.stdout)

    def _resolve(self, waiter: _Waiter, response: Response | ConnectionClosed) -> None:
        waiter.response = response  # first: a caller that leads looks at it before it stops leading
        if waiter is not self._leading:  # the caller reading now sees it when its read returns
            self._signal(waiter)
