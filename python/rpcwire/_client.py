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

import contextlib
import logging
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any

from rpcwire._client_callbacks import _Dispatcher, _HandlerPool
from rpcwire._client_output import _Output
from rpcwire._client_process import _PIPE_BUFFER, _close_quietly, _drain_stderr, _pollable_fd
from rpcwire._client_reading import _PipeReading, _Waiter
from rpcwire._context import running_request
from rpcwire._contract import ClientPipe, ErrorAnswer, LoneOutcome, ReadFailed, ReadOn, Transport, Unsent
from rpcwire._id_null_ledger import _Sent
from rpcwire._peer import (
    _CLOSE_JOIN_S,
    _REMAINS_S,
    ProgressCallback,
    _batch_outcome,
    _check_dialect,
    _check_outgoing,
    _closed_error,
    _current_call,
    _deadline,
    _left,
    _outcome,
    _Peer,
)
from rpcwire._server_stderr import StderrOption, _stderr_tail, _StderrTail
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

# The lone caller's path looks at the output's lock and writes without taking it, and reads the ledger unlocked:
# sound while the GIL is held from that look to the end of the write. A free-threaded interpreter running without
# the GIL (it cannot be turned off once on) has every call go the general way, under the locks.
_LONE_PATH: bool = getattr(sys, "_is_gil_enabled", lambda: True)()


class Client(_PipeReading, _Peer):
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
    Over a transport's own streams, the reading thread waits for a pipe or socket's descriptor in the native
    core's own ``poll`` (the GIL released) before each read, so that on CPython 3.11 a process may exit with the
    client open; on 3.10, 3.12 and 3.13, over other streams, and before its first read, a message that wakes the
    thread while the interpreter finalizes crashes the process: end the stream before the interpreter exits.
    ``close`` does not end a read or wait under way (docs/semantics.md, "A ``Client`` at the interpreter's exit").
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
            _LONE_PATH
            and pipe is not None
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
            except BaseException as exc:  # nothing written: the line could not be made, the pipe is gone, an interrupt
                self._lone_unwritten(exc)  # (one clause, its work in a method: the lone path's jumps stay short)
                raise
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
            self._reading_given_back()
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

    def _lone_unwritten(self, exc: BaseException) -> None:
        """A lone call's core raised ``exc`` with nothing written (the reading released): the reading is given back;
        an ``OSError`` (the pipe is gone) closes the client, and its ``ConnectionClosed`` is raised instead."""
        self._reading_given_back()
        if isinstance(exc, OSError):
            raise self._write_failed(exc) from None

    def _reading_given_back(self) -> None:
        """A lone call whose core released the reading unread (nothing written: ``Unsent``, or an exception): the
        core may have held it for a while (it encodes the line first, which can run Python code and let other
        threads run), and the idle reader, finding it taken then, parked without its turn, relying on the holder
        to give it back when it leaves (``_after_reading``). Given back here unless another thread reads now (it
        gives it back when it leaves); at worst the idle reader wakes once for nothing. Without it, a call that
        then never reads (its write timed out, the output busy: a server that reads nothing) left nobody reading:
        the server's late answers and notifications were never read, and its pipe filled."""
        if not self._read_taken() and (self._sleepers or not self._idle_turn or self._idle_parked):
            self._after_reading()

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
