"""The threaded client, :class:`rpcwire.Client`: calls over a stream pair (a subprocess's pipes: :meth:`Client.spawn`).

What every client shares (ids, matching answers, the server's own traffic, the dialects) is the
:class:`~rpcwire._peer._Peer` it builds on; here is how a client with threads writes and reads. Calls from
many threads are pipelined on one connection: each message is written whole, in order, within its caller's
deadline (:class:`_Output`); the calling threads read for each other, one at a time (leader/follower), and a
thread of the client's reads while nobody calls. Notification callbacks run on a dispatcher thread
(:class:`_Dispatcher`), the server's own requests on a bounded pool of threads (:class:`_HandlerPool`).
``rpcwire.Client`` and ``rpcwire.pure.Client`` are this class bound to either core.
"""

from __future__ import annotations

import collections
import contextlib
import io
import logging
import math
import os
import select
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any

from rpcwire._context import running_request
from rpcwire._contract import ClientPipe, ErrorAnswer, LoneOutcome, ReadFailed, ReadOn, Transport, Unsent
from rpcwire._peer import (
    _CLOSE_JOIN_S,
    _HANDLERS,
    _HANDLERS_WAITING,
    _REMAINS_S,
    ProgressCallback,
    StderrOption,
    _batch_outcome,
    _Callbacks,
    _check_dialect,
    _check_outgoing,
    _closed_error,
    _current_call,
    _deadline,
    _Ledger,
    _left,
    _outcome,
    _Peer,
    _run_callback,
    _Sent,
    _stderr_tail,
    _StderrTail,
)
from rpcwire._types import (
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_MESSAGE_BYTES,
    CallTimeout,
    ConnectionClosed,
    Framing,
    Handler,
    Request,
    Response,
)

__all__ = ["Client"]

logger: logging.Logger = logging.getLogger("rpcwire.client")

_IDLE_S = 0.005  # how long nobody reads, after a read, before the client's own reader does
# A spawned server's pipes' buffer: smaller than a core's 64 KiB reads, so that each read goes past it and
# leaves nothing in it (what lets a reader wait on the descriptor; see _pollable_fd).
_PIPE_BUFFER = 8192
_CORE_READ = 64 * 1024  # the most one read of a core (``_read_available``) takes
_REMAINS_BYTES = 1 << 20  # once the server exited: how much of what it left in its pipes is still read
_JOBS = 1024  # Client: messages sent without waiting (cancellations) queued while the server reads nothing


def _poll_ms(deadline: float | None) -> int | None:
    """``poll``'s timeout until ``deadline`` (rounded up, so that it never wakes just before it)."""
    return None if deadline is None else math.ceil(max(0.0, deadline - time.monotonic()) * 1000)


class _Dispatcher:
    """The sync client's callbacks, run one at a time in arrival order on a thread of the client's own
    (started with the first), where a callback may call the client: a caller's thread never runs one."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._callbacks = _Callbacks()
        self._thread: threading.Thread | None = None
        self._busy = False
        self._stopping = False

    def on_thread(self) -> bool:
        """Whether the calling thread is the dispatcher (a callback calling the client)."""
        return self._thread is not None and threading.current_thread() is self._thread

    def add(self, callback: Callable[..., Any], args: tuple[Any, ...], call: int | None) -> None:
        with self._cond:
            if self._stopping or not self._callbacks.add(callback, args, call):
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rpcwire-client-callbacks", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._callbacks.items:
                    self._busy = False
                    self._cond.notify_all()  # for wait_idle and wait_for_progress
                    if self._stopping:
                        return
                    self._cond.wait()
                callback, args, call = self._callbacks.items.popleft()
                self._busy = True
            try:
                _run_callback(callback, args)
            finally:
                with self._cond:
                    self._callbacks.done(call)
                    self._cond.notify_all()

    def wait_for_progress(self, call: int, deadline: float | None) -> None:
        """Until the progress callbacks of ``call`` queued before its answer have run (or ``deadline``)."""
        if call not in self._callbacks.progress or self.on_thread():
            return
        with self._cond:
            while call in self._callbacks.progress and (left := _left(deadline)) != 0:
                self._cond.wait(left)

    def stop(self, timeout: float) -> None:
        """Run what is queued (for at most ``timeout`` seconds), then end the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            if self.on_thread():
                return
            deadline = time.monotonic() + timeout
            while (self._callbacks.items or self._busy) and (left := _left(deadline)) != 0:
                self._cond.wait(left)


class _HandlerPool:
    """The sync client's threads for the server's own requests: at most ``_HANDLERS`` at once, started as
    requests come and ended when none waits; up to ``_HANDLERS_WAITING`` more wait, in order."""

    def __init__(self, run: Callable[[Request], None]) -> None:
        self._run = run
        self._lock = threading.Lock()
        self._waiting: collections.deque[Request] = collections.deque()
        self._workers = 0

    def submit(self, request: Request) -> bool:
        """``False``: no room (every thread busy and the queue full)."""
        with self._lock:
            if self._workers >= _HANDLERS and len(self._waiting) >= _HANDLERS_WAITING:
                return False
            self._waiting.append(request)
            if self._workers >= _HANDLERS:
                return True
            self._workers += 1
        threading.Thread(target=self._work, name="rpcwire-client-handler", daemon=True).start()
        return True

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._waiting:
                    self._workers -= 1
                    return
                request = self._waiting.popleft()
            try:
                self._run(request)
            except Exception:
                logger.exception("answering the server's request %r failed", request.method)


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


class Client(_Peer):
    """A JSON-RPC client over a transport's stream pair: ``Client(StdioTransport(server_out, server_in))``,
    or :meth:`spawn` for a subprocess. Thread-safe: calls from many threads are pipelined on the one
    connection, each answered as soon as its answer arrives.

    Who reads: over a spawned server's pipe (either core), the calling threads themselves, one
    at a time (leader/follower): a caller that finds nobody reading reads for everyone until its own answer
    arrives, then hands the reading to a caller still waiting. A lone caller so reads its own answer, with
    no thread switch. When the last caller leaves, a thread of the client's takes the reading over once
    nobody has read for 5 ms, and blocks on the pipe until something comes or a caller needs it (so that
    notifications and the server's end are seen while nobody calls; an idle client never wakes on a
    timer). Over any other stream (which cannot be waited on with a timeout), and over a spawned server's
    pipe where there is no ``select.poll`` (Windows: the portable path), a thread of the client's reads all
    the time, blocked on the stream, and callers wait for their answers with their deadlines. A thread of
    the client's waits for a spawned server's exit: when it ends, what it left in its pipe is read and every
    call fails with :class:`ConnectionClosed`, even while a child of the server still holds the pipe open.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        handler: Handler | None = None,
        dialect: str = "mcp",
        timeout: float | None = None,
    ) -> None:
        self._begin(transport, handler, dialect, timeout, None, None)

    def _begin(
        self,
        transport: Transport,
        handler: Handler | None,
        dialect: str,
        timeout: float | None,
        _process: subprocess.Popen[bytes] | None,
        _stderr_tail: _StderrTail | None,
    ) -> None:
        """What ``__init__`` does, given also what :meth:`spawn` knows: the server's process and its stderr."""
        super().__init__(handler, dialect, timeout)
        self._transport = transport
        self._process = _process
        self._stderr_tail = _stderr_tail
        self._set_limits(transport._limits)
        self._dispatcher = _Dispatcher()
        self._handlers = _HandlerPool(self._answer_request)
        self._exited = False
        # The client's own pipes: _halt (readers stop: the client closed, or the server ended), _stop
        # (writers stop), _wake (the idle reader gives way to a caller). Written under _pipes_lock, closed once.
        self._pipes_lock = threading.Lock()
        self._pipes: dict[str, tuple[int, int]] = {}
        self._fd = _pollable_fd(_process.stdout) if _process is not None else None
        out_fd = None
        if self._fd is not None:  # waited on with poll: the pipes the waits also watch, a non-blocking stdin
            assert _process is not None and _process.stdin is not None
            self._pipes["halt"] = os.pipe()
            self._pipes["stop"] = os.pipe()
            out_fd = _process.stdin.fileno()
            os.set_blocking(out_fd, False)
        stop_fd = self._pipes["stop"][0] if "stop" in self._pipes else None
        self._output = _Output(transport, out_fd, stop_fd, self._ledger, self._core._encode_frame)
        # Over a pipe it waits on, the client reads the descriptor itself (the core's _ClientPipe), and a lone
        # caller makes its call there in two steps (``call``).
        self._pipe: ClientPipe | None = None
        if self._fd is not None and out_fd is not None:
            self._pipe = self._core._ClientPipe(
                self._fd,
                out_fd,
                self._pipes["halt"][0],
                framing=transport.framing,
                max_message_bytes=self._limits[0],
                max_depth=self._limits[1],
            )
        # The portable path (no poll): the streams whose blocking reader ended, and whether close() gave up
        # waiting for the others (a child of the server holds them): each then closes its own as it ends.
        self._read_to_end: list[Any] = []
        self._left_to_readers = False
        self._signals = threading.Lock()  # guards each waiter's signalled flag, and _sleepers
        self._leading: _Waiter | None = None  # the waiter of the caller reading now (set and cleared by it)
        self._sleepers: dict[int, _Waiter] = {}  # followers blocked on their waiter (by id), to hand reading to
        self._start_threads()

    def _start_threads(self) -> None:
        """The reader (the idle reader over a pipe it can wait on, else one that reads all the time), and
        for a spawned server the stderr reader and the exit watcher."""
        _process, _stderr_tail = self._process, self._stderr_tail
        if self._fd is None:
            self._reader = threading.Thread(target=self._read_all, name="rpcwire-client-reader", daemon=True)
        else:
            # The reading lock (held by the one thread reading; only ever tried): the pipe's, as its lone
            # caller's path takes it there.
            assert self._pipe is not None
            self._take_read: Callable[[], bool] = self._pipe._take_reading
            self._leave_read: Callable[[], None] = self._pipe._leave_reading
            self._read_taken: Callable[[], bool] = self._pipe._reading_taken
            self._since_read: Callable[[], float] = self._pipe._since_read
            self._last_read = time.monotonic()
            self._idle_reading = False
            self._idle_lock = threading.Lock()
            self._idle = threading.Condition(self._idle_lock)  # the idle reader's turn (_idle_turn) and its parking
            self._idle_turn = True
            self._idle_parked = False
            self._pipes["wake"] = os.pipe()
            for fd in self._pipes["wake"]:
                os.set_blocking(fd, False)
            self._wake_fd = self._pipes["wake"][0]
            self._poller = select.poll()  # a caller's, while it reads (one at a time: _read_lock)
            self._idle_poller = select.poll()  # the idle reader's
            for poller in (self._poller, self._idle_poller):
                poller.register(self._fd, select.POLLIN)
                poller.register(self._pipes["halt"][0], select.POLLIN)
            self._idle_poller.register(self._pipes["wake"][0], select.POLLIN)
            self._reader = threading.Thread(target=self._read_when_idle, name="rpcwire-client-reader", daemon=True)
        self._reader.start()
        self._threads = [self._reader]
        if _process is not None:
            if _stderr_tail is not None and _process.stderr is not None:
                drain = threading.Thread(
                    target=self._read_stderr,
                    args=(_stderr_tail, _process.stderr),
                    name="rpcwire-client-stderr",
                    daemon=True,
                )
                drain.start()
                self._threads.append(drain)
            watcher = threading.Thread(target=self._watch_exit, name="rpcwire-client-exit", daemon=True)
            watcher.start()
            self._threads.append(watcher)

    @classmethod
    def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
        handler: Handler | None = None,
        dialect: str = "mcp",
        timeout: float | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_batch: int | None = DEFAULT_MAX_BATCH,
        framing: Framing = "newline",
        stderr: StderrOption = "inherit",
    ) -> Client:
        """Start ``argv`` and talk to it over its stdin and stdout. ``max_message_bytes``, ``max_depth`` and
        ``max_batch`` are the transport's (what the client reads, and what it checks its own messages against
        before it sends them); ``framing="content-length"`` speaks LSP's base protocol.

        The server's stderr is read by a thread of the client's, and its last lines go into
        :class:`ConnectionClosed` whatever ``stderr`` says; ``stderr`` says where it goes besides:
        ``"inherit"`` (the default, also ``None``), to the caller's ``sys.stderr``, a line at a time;
        ``"tail"``, nowhere else (each line logged to ``rpcwire.client`` at DEBUG); a path
        (``pathlib.Path``), appended to that file; an open file, text or binary, written to and flushed
        (not closed); a callable, called with each line (without its newline) on that thread."""
        _check_dialect(dialect)
        tail = _stderr_tail(stderr)
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                bufsize=_PIPE_BUFFER,
            )
        except BaseException:
            tail.end(b"")  # a path's file closed
            raise
        assert process.stdin is not None and process.stdout is not None
        try:
            transport = cls._core.StdioTransport(
                process.stdout,
                process.stdin,
                max_message_bytes=max_message_bytes,
                max_depth=max_depth,
                max_batch=max_batch,
                framing=framing,
            )
            client = cls.__new__(cls)
            client._begin(transport, handler, dialect, timeout, process, tail)
            return client
        except BaseException:
            process.kill()
            process.wait()
            for stream in (process.stdin, process.stdout, process.stderr):
                _close_quietly(stream)
            tail.end(b"")
            raise

    # --- calls -----------------------------------------------------------------------------------

    def call(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        """Call ``method`` and return its result; a JSON-RPC error is raised (``MethodNotFound``,
        ``InvalidParams``, ``RequestCancelled`` or ``JsonRpcError`` with the server's ``code``, ``message``
        and ``data``). ``timeout`` seconds (default: the client's) bound the whole call, its writing
        included: then ``TimeoutError`` is raised and, if the request was sent (or began to be), the server
        is told to cancel (in the client's ``dialect``); a late answer is dropped. A request that the
        client's own limits refuse raises ``ValueError`` and is not sent."""
        if self._closed is not None:
            raise self._closed_error()
        if timeout is None:
            timeout = self._timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        pipe, ledger = self._pipe, self._ledger
        if (
            pipe is not None
            and on_progress is None
            and not (ledger._calls or ledger._others or ledger._held)
            and running_request.get(None) is None
            and (_current_call is None or _current_call() is None)
            and not (self._output.stopped or self._output._jobs)
        ):
            # The lone caller's path: nothing else in flight, nobody reading, the output free. One call into the
            # core takes the reading, writes the request and reads until a whole message is here, the GIL
            # released, with no Python frame but this one (see ``_ClientPipe._call``); the call takes its place
            # in the ledger (and in _pending) only if anything but its own answer comes first (_call,
            # ``resumed``), as nothing else can need it before. Every other case (another reader, the output
            # busy, a long or deep line, a full pipe) goes on as any call.
            id_ = next(self._ids)
            try:
                answer = pipe._call(method, params, id_, self._quick_bytes, self._quick_depth, timeout, self._output)
            except OSError as exc:  # nothing written: the pipe is gone
                raise self._write_failed(exc) from None
            if not isinstance(answer, LoneOutcome):  # its result (a decoded value); the reading released
                if self._sleepers or not self._idle_turn or self._idle_parked:
                    self._after_reading()
                return answer
            return self._lone_goes_on(method, id_, answer, timeout, deadline)
        id_, line = self._request_line(method, params, on_progress)
        return self._call(method, id_, line, timeout=timeout, deadline=deadline, on_progress=on_progress)

    def _lone_goes_on(
        self, method: str, id_: int, outcome: LoneOutcome, timeout: float | None, deadline: float | None
    ) -> Any:
        """A lone call whose one call into the core ended otherwise than with its result: each outcome goes on
        as the general path would have from there."""
        if type(outcome) is Unsent:  # nothing written, the reading not held
            return self._call(method, id_, outcome.line, timeout=timeout, deadline=deadline)
        if type(outcome) is ErrorAnswer:  # its answer, an error; the reading released
            if self._sleepers or not self._idle_turn or self._idle_parked:
                self._after_reading()
            return _outcome(outcome.response)
        if type(outcome) is ReadOn:  # written; anything else first, or nothing yet: the call goes on reading
            resumed = () if outcome.message is None else (outcome.message,)
            return self._call(method, id_, b"", timeout=timeout, deadline=deadline, resumed=resumed)
        assert type(outcome) is ReadFailed  # written, the reading held: the call is given up
        self._abandon([id_], [self._ledger.written((id_,), False, self._output.lone_at)], "interrupted")
        self._release_read()
        raise outcome.error

    def _call(
        self,
        method: str,
        id_: int,
        line: bytes,
        *,
        timeout: float | None,
        deadline: float | None,
        on_progress: ProgressCallback | None = None,
        resumed: tuple[Any, ...] | None = None,
    ) -> Any:
        """``call`` once its id and line are made. From the lone caller's path: ``resumed``, the call written
        whole and the reading lock held, with what was read instead of its answer (``(message,)``, or ``()``:
        nothing yet)."""
        waiter = _Waiter()
        self._pending[id_] = waiter
        sent: list[_Sent] = []
        try:
            if resumed is not None:  # its place in the order of writing: where it was written, not now
                sent.append(self._ledger.written((id_,), False, self._output.lone_at))
                if self._closed is not None and self._pending.pop(id_, None) is not None:
                    waiter.response = self._closed_error()  # closed while it read: not pending then, so not told
                answered = self._wait(waiter, id_, deadline, resumed)
            else:
                answered = self._send(line, deadline, (id_,), sent, self._checked(line)) and self._wait(
                    waiter, id_, deadline
                )
        except TimeoutError as exc:  # nothing was sent
            self._abandon([id_], sent, "timeout")
            raise CallTimeout(f"no answer to {method!r} (id {id_}) within {timeout} s ({exc})") from None
        except BaseException:
            self._abandon([id_], sent, "interrupted")
            raise
        if not answered:
            self._abandon([id_], sent, "timeout")
            raise CallTimeout(f"no answer to {method!r} (id {id_}) within {timeout} s")
        if on_progress is not None:
            self._dispatcher.wait_for_progress(id_, deadline)
        response = waiter.response
        if type(response) is Response and response.error is None:
            return response.result
        if isinstance(response, ConnectionClosed):
            raise response
        assert response is not None
        return _outcome(response)

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no answer); bounded by the client's ``timeout`` (``TimeoutError`` if none of
        it could be written by then); ``ValueError`` (not sent) beyond the client's limits."""
        if self._closed is not None:
            raise self._closed_error()
        line = self._core._encode_request(method, params)
        _check_outgoing(self._core, line, self._limits)
        self._send(line, _deadline(self._timeout), [], [])

    def batch(self, calls: Iterable[tuple[str, Any]], *, timeout: float | None = None) -> list[Any]:
        """Send ``(method, params)`` calls as one batch; their results, or the exception each raised, in
        order. ``timeout`` bounds the whole batch (an entry without an answer by then is a ``TimeoutError``);
        a batch over the client's limits (``max_batch`` calls, ``max_message_bytes``, ``max_depth``) raises
        ``ValueError`` and is not sent."""
        if self._closed is not None:
            raise self._closed_error()
        timeout = self._timeout if timeout is None else timeout
        deadline = _deadline(timeout)
        ids, line = self._batch_lines(calls)
        if not ids:
            return []
        waiters = [_Waiter() for _ in ids]
        self._pending.update(zip(ids, waiters, strict=True))
        sent: list[_Sent] = []
        outcomes: list[Any] = []
        late: list[int] = []
        try:
            _check_outgoing(self._core, line, self._limits, len(ids))
            whole = self._send(line, deadline, ids, sent)
            for id_, waiter in zip(ids, waiters, strict=True):
                if not whole or not self._wait(waiter, id_, deadline):
                    late.append(id_)
                    outcomes.append(CallTimeout(f"no answer to batch entry {id_} within {timeout} s"))
                    continue
                assert waiter.response is not None
                outcomes.append(_batch_outcome(waiter.response))
        except TimeoutError as exc:  # nothing was sent
            self._abandon(ids, sent, "timeout")
            raise CallTimeout(f"no answer to the batch (ids {ids[0]}-{ids[-1]}) within {timeout} s ({exc})") from None
        except BaseException:  # an interrupt (or a limit, or the server gone): nothing of it stays pending
            self._abandon(ids, sent, "interrupted")
            raise
        if late:
            self._abandon(late, sent, "timeout")
        return outcomes

    def _send(
        self,
        line: bytes,
        deadline: float | None,
        ids: Sequence[int],
        sent: list[_Sent],
        suspect: bool | None = None,
    ) -> bool:
        """Write one message (as ``_Output.send``); ``sent`` gets its place in the ledger
        (``ids``: the calls it makes) once it begins (``suspect``: whether a server could refuse it unread, if
        already known). When the server is gone, ``ConnectionClosed``."""
        if self._closed is not None:
            raise self._closed_error()
        if suspect is None:
            on_start = self._on_start(line, ids, sent)
        else:
            ledger = self._ledger
            on_start = lambda: sent.append(ledger.written(ids, suspect))  # noqa: E731
        try:
            return self._output.send(line, deadline, on_start)
        except TimeoutError:
            if sent:
                self._ledger.withdrawn(sent.pop())
            raise
        except (OSError, ValueError) as exc:  # ValueError: a closed file
            raise self._write_failed(exc) from None

    def _write_failed(self, exc: Exception) -> ConnectionClosed:
        """Writing to the server failed: the client closes (with the server's exit, if it is one)."""
        logger.debug("writing to the server failed: %r", exc)
        self._close_with(self._connection_closed(f"the server's input is closed ({exc})"))
        # Readers stop: a lone call reading (in no list the close goes through) fails with the client now.
        self._poke("halt")
        return self._closed_error()

    def _send_cancel(self, line: bytes) -> None:
        """Without waiting: in the background if the output is busy."""
        self._output.send_soon(line, self._on_start(line, [], []))

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

    def _watch_exit(self) -> None:
        """A spawned server's exit: writers stop, readers read what it left and fail every call."""
        assert self._process is not None
        with contextlib.suppress(Exception):
            self._process.wait()
        self._exited = True
        self._output.stop()
        if self._fd is None:  # the reader blocks on the pipe: it reads what the server left, to the end
            self._reader.join(_REMAINS_S)  # (unless a child of the server holds the pipe open)
            self._close_with(self._connection_closed("the server process ended"))
            return
        self._poke("stop")
        self._poke("halt")
        if self._take_read():
            try:
                if self._closed is None:
                    self._read_remains()
            finally:
                self._release_read()

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

    def _read_stderr(self, tail: _StderrTail, stream: Any) -> None:
        try:
            _drain_stderr(tail, stream.fileno(), self._pipes.get("halt", (None,))[0])
        finally:
            if self._fd is None:
                self._stream_ended(stream)

    def _stream_ended(self, stream: Any) -> None:
        """The portable path: a blocking reader read ``stream`` to its end; it closes it if ``close`` could not."""
        with self._pipes_lock:
            self._read_to_end.append(stream)
            if self._left_to_readers:
                _close_quietly(stream)

    def _resolve(self, waiter: _Waiter, response: Response | ConnectionClosed) -> None:
        waiter.response = response  # first: a caller that leads looks at it before it stops leading
        if waiter is not self._leading:  # the caller reading now sees it when its read returns
            self._signal(waiter)

    def _run_later(self, callback: Callable[..., Any], args: tuple[Any, ...], call: int | None) -> None:
        self._dispatcher.add(callback, args, call)

    def _serve_request(self, request: Request) -> None:
        if not self._handlers.submit(request):
            answer = self._refusal(request)
            if answer is not None:
                self._output.send_soon(answer, self._on_start(answer, [], []))

    def _answer_request(self, request: Request) -> None:
        answer = self._answer_to(request)
        if answer is not None:
            with contextlib.suppress(ConnectionClosed, TimeoutError):
                self._send(answer, _deadline(self._timeout), [], [])

    def _connection_closed(self, cause: str) -> ConnectionClosed:
        returncode = None
        if self._process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                returncode = self._process.wait(timeout=0.5)
        if returncode is not None and self._stderr_tail is not None:
            self._stderr_tail.drained.wait(0.5)  # its last lines, written as it exited
        return _closed_error(cause, returncode, self._stderr_tail)

    # --- closing ---------------------------------------------------------------------------------

    def close(self, grace: float = 5.0) -> None:
        """Close the connection; for a spawned server: close its stdin, wait up to ``grace`` seconds for it
        to exit, then terminate it (and kill it after ``grace`` more). Calls still waiting fail with
        :class:`ConnectionClosed`; callbacks already queued run first (for at most ``grace`` seconds). Returns
        within that, plus a bounded wait for the client's threads, even while a child of the server holds
        its pipes open."""
        process = self._process
        if process is not None:
            self._output.stop()
            self._poke("stop")
            with self._output.exclusive(_CLOSE_JOIN_S) as idle:
                if idle:  # no write is under way, and none will start: the pipe can go
                    _close_quietly(process.stdin)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                process.terminate()
                try:
                    process.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self._output.stop()
        self._close_with(ConnectionClosed("the client was closed"))
        self._poke("halt")
        if self._fd is not None:
            self._wake_idle_reader()
            with self._idle:
                self._idle.notify_all()
        self._dispatcher.stop(grace)
        if process is None:
            return
        ended = True
        until = time.monotonic() + _CLOSE_JOIN_S  # one bound for all: blocked on a pipe a child of the server
        for thread in self._threads:  # holds, each would wait it out (threads that block in a read)
            if thread is not threading.current_thread():
                thread.join(_left(until))
                ended = ended and not thread.is_alive()
        written = self._output.join(_left(until))
        ended = written and ended
        if self._fd is None:  # the portable path: stdin, if no blocked write holds it (the first try failed)
            with self._output.exclusive(0) as idle:
                if idle and written:
                    _close_quietly(process.stdin)
            if not ended:  # blocked reads on pipes a child of the server holds open
                with self._pipes_lock:
                    self._left_to_readers = True  # each closes its stream as it ends (_stream_ended)
                    for stream in self._read_to_end:
                        _close_quietly(stream)
        if ended:  # nothing of the client's uses its descriptors any more
            _close_quietly(process.stdout)
            _close_quietly(process.stderr)
            with self._pipes_lock:
                pipes, self._pipes = self._pipes, {}
            for pipe in pipes.values():
                for fd in pipe:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._fd = None

    @property
    def returncode(self) -> int | None:
        """A spawned server's exit code, once it exited (else ``None``)."""
        return None if self._process is None else self._process.poll()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


def _pollable_fd(stream: Any) -> int | None:
    """The descriptor under ``stream`` (a spawned server's stdout, never read through ``stream`` itself) that
    the client reads with its core's ``_ClientPipe``, waiting on it with ``poll``. ``None`` where there is no
    ``select.poll`` (Windows, whose ``select`` waits on sockets only): the client then reads and writes with
    blocking calls on threads of its own (the portable path), its callers waiting on those with their deadlines."""
    if not hasattr(select, "poll") or not isinstance(stream, io.BufferedReader):
        return None
    return stream.fileno()


def _drain_pipe(fd: int) -> None:
    with contextlib.suppress(BlockingIOError, OSError):
        while os.read(fd, 4096):
            pass


def _close_quietly(stream: Any) -> None:
    if stream is not None:
        with contextlib.suppress(OSError, ValueError):
            stream.close()


def _drain_stderr(tail: _StderrTail, fd: int, halt_fd: int | None) -> None:
    """Read a spawned server's stderr (``fd``) into ``tail`` to its end, or, once the client halts, what is
    there (a child of the server may hold the pipe open). Without ``halt_fd`` (the portable path: no
    ``poll``), with blocking reads to the end."""
    partial = b""
    left: int | None = None
    try:
        if halt_fd is None:
            while chunk := os.read(fd, 1 << 16):
                partial = tail.feed(partial, chunk)
            return
        os.set_blocking(fd, False)
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.register(halt_fd, select.POLLIN)
        while left is None or left > 0:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                if left is not None:
                    break
                if any(ready == halt_fd for ready, _ in poller.poll()):
                    left = _REMAINS_BYTES
                continue
            if not chunk:
                break
            if left is not None:
                left -= len(chunk)
            partial = tail.feed(partial, chunk)
    except (OSError, ValueError):
        pass
    finally:
        tail.end(partial)
