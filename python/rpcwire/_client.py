"""The client: calls to a JSON-RPC server over a stream pair (a subprocess's pipes) or HTTP, sync and async.

Written once for both implementations: a *core* (the native module or :mod:`rpcwire.pure`) encodes each
request (``_encode_request``) and reads and classifies what comes back (``_read_incoming`` on a
transport, ``_parse_incoming`` on a body); everything above that is here. ``rpcwire.Client`` and
``rpcwire.pure.Client`` are the same class bound to either core.

The client generates integer ids and matches answers to them exactly (an answer whose id is not an
``int`` it is waiting for is logged and dropped, so is a line that is no message). Server-initiated
traffic: notifications go to the callbacks of :meth:`on_notification` (progress to the ``on_progress``
of the call it belongs to), on the reading thread (or the event loop), in arrival order; the server's
own requests are answered by the ``handler`` given to the client (-32601 without one), each on a thread
of its own (an ``async def`` handler as a task), so that a handler may itself call the server.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import io
import itertools
import logging
import os
import secrets
import select
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from types import ModuleType, TracebackType
from typing import Any

from rpcwire import _engine
from rpcwire._types import (
    DEFAULT_MAX_MESSAGE_BYTES,
    ConnectionClosed,
    MethodNotFound,
    Request,
    Response,
    error_from_object,
)

__all__ = ["AsyncClient", "Client", "ProgressCallback"]

logger = logging.getLogger("rpcwire.client")

ProgressCallback = Callable[[float, "float | None", "str | None"], Any]
"""``on_progress(progress, total, message)``, as the MCP SDK's progress callbacks are called."""

DIALECTS = ("mcp", "lsp")
_MCP_CANCEL = "notifications/cancelled"
_LSP_CANCEL = "$/cancelRequest"
_MCP_PROGRESS = "notifications/progress"
_LSP_PROGRESS = "$/progress"
_STDERR_TAIL = 20  # lines of a spawned server's stderr kept for ConnectionClosed
_IDLE_S = 0.005  # how long nobody reads before the client's own reader does
# A spawned server's pipes' buffer: smaller than the native reader's 64 KiB reads, so that each read goes
# past it and leaves nothing in it (what lets a timed reader wait on the descriptor; see _pollable_fd).
_PIPE_BUFFER = 8192


def _check_dialect(dialect: str) -> str:
    if dialect not in DIALECTS:
        raise ValueError(f"dialect must be 'mcp' or 'lsp', not {dialect!r}")
    return dialect


def _new_traceparent() -> str:
    """A fresh W3C ``traceparent`` (version 00, sampled)."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def _outgoing_traceparent() -> str | None:
    """Inside a handler rpcwire runs: the request's ``traceparent``, made (and kept on the request) when it
    had none, so that every call the handler makes carries one trace. Outside one: ``None``."""
    context = _engine._request_context()
    if context is None:
        return None
    if context.traceparent is None:
        context._traceparent = _new_traceparent()
    return context.traceparent


def _with_meta(params: Any, dialect: str, token: int | None, traceparent: str | None) -> Any:
    """``params`` (never changed in place) with the progress token and the trace context added: MCP's in
    ``_meta`` (``progressToken``, ``traceparent``), LSP's progress token as ``workDoneToken``."""
    if token is None and traceparent is None:
        return params
    if params is None:
        params = {}
    elif type(params) is not dict:
        if token is not None:
            raise TypeError("on_progress needs params that are an object (a dict) or None, to carry the token")
        return params  # an array has no room for _meta: the trace context is not forwarded
    params = dict(params)
    meta: dict[str, Any] = {}
    if token is not None and dialect == "lsp":
        params["workDoneToken"] = token
    elif token is not None:
        meta["progressToken"] = token
    if traceparent is not None:
        meta["traceparent"] = traceparent
    if meta:
        existing = params.get("_meta")
        params["_meta"] = {**existing, **meta} if type(existing) is dict else meta
    return params


def _progress_arguments(method: str, params: Any) -> tuple[Any, tuple[float, float | None, str | None]] | None:
    """A progress notification's token and ``on_progress`` arguments; ``None`` if it is not one, or LSP's ``end``."""
    if type(params) is not dict:
        return None
    if method == _MCP_PROGRESS:
        return params.get("progressToken"), (params.get("progress", 0), params.get("total"), params.get("message"))
    value = params.get("value")
    if type(value) is not dict or value.get("kind") not in ("begin", "report"):
        return None
    percentage = value.get("percentage")
    return params.get("token"), (
        0 if percentage is None else percentage,
        None if percentage is None else 100,
        value.get("message", value.get("title")),
    )


def _cancel_notification(dialect: str, id_: int, reason: str) -> tuple[str, dict[str, Any]]:
    if dialect == "lsp":
        return _LSP_CANCEL, {"id": id_}
    return _MCP_CANCEL, {"requestId": id_, "reason": reason}


def _outcome(response: Response) -> Any:
    if response.error is not None:
        raise error_from_object(response.error)
    return response.result


def _batch_outcome(response: Response | ConnectionClosed) -> Any:
    """A batch entry's result, or the exception it would raise."""
    if isinstance(response, ConnectionClosed):
        return response
    return response.result if response.error is None else error_from_object(response.error)


class _Peer:
    """What every client shares: ids, the calls waiting for an answer, and the server's own traffic."""

    _core: ModuleType  # the native module or rpcwire.pure

    def __init__(self, handler: Callable[[str, Any], Any] | None, dialect: str, timeout: float | None) -> None:
        self._handler = handler
        self._dialect = _check_dialect(dialect)
        self._timeout = timeout
        self._ids = itertools.count(1)
        self._pending: dict[int, Any] = {}  # id -> the waiter of the call (the subclass's kind)
        self._progress: dict[int, ProgressCallback] = {}  # progress token (the call's id) -> callback
        self._listeners: dict[str, list[Callable[[Any], Any]]] = {}
        self._closed: ConnectionClosed | None = None

    def on_notification(self, method: str, callback: Callable[[Any], Any]) -> None:
        """Call ``callback(params)`` for each notification ``method`` the server sends (in arrival order, on
        the thread or loop that reads; an exception it raises is logged)."""
        self._listeners.setdefault(method, []).append(callback)

    def _request_line(self, method: str, params: Any, on_progress: ProgressCallback | None) -> tuple[int, bytes]:
        id_ = next(self._ids)
        params = _with_meta(params, self._dialect, None if on_progress is None else id_, _outgoing_traceparent())
        line = self._core._encode_request(method, params, id_)
        if on_progress is not None:
            self._progress[id_] = on_progress
        return id_, line

    def _cancel_line(self, id_: int, reason: str) -> bytes:
        return self._core._encode_request(*_cancel_notification(self._dialect, id_, reason))

    def _deliver(self, message: Any) -> None:
        """One message the reader classified (``_read_incoming``/``_parse_incoming``)."""
        if isinstance(message, Response):
            waiter = self._pending.pop(message.id, None) if type(message.id) is int else None
            if waiter is None:
                logger.warning("dropped an answer to no call waiting for it (id %r)", message.id)
            else:
                self._progress.pop(message.id, None)
                self._resolve(waiter, message)
        elif isinstance(message, Request):
            if message.is_notification:
                self._notified(message)
            else:
                self._serve_request(message)
        elif isinstance(message, list):
            for entry in message:
                self._deliver(entry)
        else:
            logger.warning("dropped a message from the server: %s", message)

    def _notified(self, request: Request) -> None:
        if request.method in (_MCP_PROGRESS, _LSP_PROGRESS):
            progress = _progress_arguments(request.method, request.params)
            callback = None if progress is None else self._progress_callback(progress[0])
            if callback is not None and progress is not None:
                self._run_callback(callback, *progress[1])
        for listener in self._listeners.get(request.method, ()):
            self._run_callback(listener, request.params)

    def _progress_callback(self, token: Any) -> ProgressCallback | None:
        return self._progress.get(token) if type(token) is int else None

    @staticmethod
    def _run_callback(callback: Callable[..., Any], *args: Any) -> None:
        try:
            callback(*args)
        except Exception:
            logger.exception("a notification callback raised")

    def _answer(self, transport: Any, request: Request) -> bytes | None:
        """The answer's bytes to the server's own request, built by the core as ``serve`` builds them."""
        handler = self._handler or _no_handler
        return _engine._call(transport, request, handler, None)

    def _batch_lines(self, calls: Iterable[tuple[str, Any]]) -> tuple[list[int], bytes]:
        """The ids of a batch's calls and its line (empty when there are none)."""
        entries = [self._request_line(method, params, None) for method, params in calls]
        return [id_ for id_, _ in entries], b"[" + b",".join(line for _, line in entries) + b"]" if entries else b""

    def _close_with(self, closed: ConnectionClosed) -> None:
        """Fail every waiting call with ``closed``, and every later one (the first cause wins)."""
        if self._closed is None:
            self._closed = closed
        while self._pending:
            with contextlib.suppress(KeyError):  # another thread took the last one
                self._resolve(self._pending.popitem()[1], self._closed)
        self._progress.clear()

    def _resolve(self, waiter: Any, response: Response | ConnectionClosed) -> None:
        raise NotImplementedError

    def _serve_request(self, request: Request) -> None:
        raise NotImplementedError


def _closed_error(cause: str, returncode: int | None, stderr_tail: Iterable[str] | None) -> ConnectionClosed:
    tail = list(stderr_tail or ())
    message = cause
    if returncode is not None:
        message += f"; it exited with code {returncode}"
    if tail:
        message += "; the last lines of its stderr:\n" + "\n".join(tail)
    return ConnectionClosed(message, returncode, tail)


def _no_handler(method: str, params: Any) -> Any:
    raise MethodNotFound(f"the client has no handler for {method!r}")


class _Waiter:
    """One sync call waiting for its answer. ``lock`` is held until the waiter is *signalled* (released
    once, under the client's ``_signals`` lock): when ``response`` is set, or when it is asked to ``lead``
    (to read for every caller; see :class:`Client`)."""

    __slots__ = ("lead", "lock", "response", "signalled")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        self.response: Response | ConnectionClosed | None = None
        self.lead = False
        self.signalled = False


class Client(_Peer):
    """A JSON-RPC client over a transport's stream pair: ``Client(StdioTransport(server_out, server_in))``,
    or :meth:`spawn` for a subprocess. Thread-safe: calls from many threads are pipelined on the one
    connection, each answered as soon as its answer arrives.

    Who reads: over a spawned server's pipe (with the native core), the calling threads themselves, one
    at a time (leader/follower): a caller that finds nobody reading reads for everyone until its own answer
    arrives, then hands the reading to a caller still waiting. A lone caller so reads its own answer, with
    no thread switch (ping-pong: 22.8 -> 12 µs a call here, against 8 µs for raw ``os.read``/``os.write``).
    A thread of the client's reads only after 5 ms with no reader (so that notifications and the server's
    end are still seen while nobody calls), and gives way to the next caller. Over any other stream (which
    cannot be waited on with a timeout), a thread of the client's reads all the time.
    """

    def __init__(
        self,
        transport: Any,
        *,
        handler: Callable[[str, Any], Any] | None = None,
        dialect: str = "mcp",
        timeout: float | None = None,
        _process: subprocess.Popen[bytes] | None = None,
        _stderr_tail: _StderrTail | None = None,
    ) -> None:
        super().__init__(handler, dialect, timeout)
        self._transport = transport
        self._process = _process
        self._stderr_tail = _stderr_tail
        self._signals = threading.Lock()  # guards each waiter's signalled flag, and _sleepers
        self._sleepers: dict[int, _Waiter] = {}  # followers blocked on their waiter (by id), to hand reading to
        self._fd = _pollable_fd(transport, _process.stdout) if _process is not None else None
        if self._fd is None:
            self._reader = threading.Thread(target=self._read_all, name="rpcwire-client-reader", daemon=True)
        else:
            self._read_lock = threading.Lock()  # held by the one thread reading
            self._last_read = time.monotonic()
            self._idle_reading = False
            self._wake_read, self._wake_write = os.pipe()
            os.set_blocking(self._wake_write, False)  # a full pipe already wakes the reader
            self._reader = threading.Thread(target=self._read_when_idle, name="rpcwire-client-reader", daemon=True)
        self._reader.start()

    @classmethod
    def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
        handler: Callable[[str, Any], Any] | None = None,
        dialect: str = "mcp",
        timeout: float | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        framing: str = "newline",
    ) -> Client:
        """Start ``argv`` and talk to it over its stdin and stdout (its stderr is kept: the last lines name
        the cause in :class:`ConnectionClosed`). Use it as a context manager: leaving closes the server's
        stdin, waits for it to exit, then terminates and kills it after a grace period."""
        _check_dialect(dialect)
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            bufsize=_PIPE_BUFFER,
        )
        assert process.stdin is not None and process.stdout is not None
        tail = _StderrTail()
        threading.Thread(target=tail.drain, args=(process.stderr,), name="rpcwire-client-stderr", daemon=True).start()
        transport = cls._core.StdioTransport(
            process.stdout, process.stdin, max_message_bytes=max_message_bytes, framing=framing
        )
        return cls(transport, handler=handler, dialect=dialect, timeout=timeout, _process=process, _stderr_tail=tail)

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
        and ``data``). After ``timeout`` seconds (default: the client's), ``TimeoutError`` is raised and the
        server is told to cancel (in the client's ``dialect``); a late answer is dropped."""
        id_, line = self._request_line(method, params, on_progress)
        waiter = _Waiter()
        self._pending[id_] = waiter
        self._send(line, id_)
        timeout = self._timeout if timeout is None else timeout
        if not self._wait(waiter, id_, None if timeout is None else time.monotonic() + timeout):
            self._send_quietly(self._cancel_line(id_, "timeout"))
            raise TimeoutError(f"no answer to {method!r} (id {id_}) within {timeout} s")
        response = waiter.response
        if isinstance(response, ConnectionClosed):
            raise response
        assert response is not None
        return _outcome(response)

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no answer)."""
        self._send(self._core._encode_request(method, params), None)

    def batch(self, calls: Iterable[tuple[str, Any]], *, timeout: float | None = None) -> list[Any]:
        """Send ``(method, params)`` calls as one batch; their results, or the exception each raised, in order."""
        ids, line = self._batch_lines(calls)
        if not ids:
            return []
        waiters = [_Waiter() for _ in ids]
        self._pending.update(zip(ids, waiters, strict=True))
        self._send(line, *ids)
        timeout = self._timeout if timeout is None else timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        outcomes: list[Any] = []
        for id_, waiter in zip(ids, waiters, strict=True):
            if not self._wait(waiter, id_, deadline):
                self._send_quietly(self._cancel_line(id_, "timeout"))
                outcomes.append(TimeoutError(f"no answer to batch entry {id_} within {timeout} s"))
                continue
            assert waiter.response is not None
            outcomes.append(_batch_outcome(waiter.response))
        return outcomes

    # --- waiting, and reading ----------------------------------------------------------------------

    def _wait(self, waiter: _Waiter, id_: int, deadline: float | None) -> bool:
        """Until ``waiter`` has its response (``True``) or ``deadline`` passed (``False``: the call is no
        longer pending, and any reading handed to it was handed on)."""
        while waiter.response is None:
            if self._fd is not None and self._read_lock.acquire(blocking=False):
                try:
                    self._lead(waiter, deadline)
                finally:
                    self._release_read()
                if waiter.response is None and self._pending.pop(id_, None) is not None:
                    return False
                continue
            if self._fd is not None:
                with self._signals:
                    self._sleepers[id(waiter)] = waiter
                # Registered first, then looked: a reader that stops after this look hands on to a sleeper.
                if not self._read_lock.locked():
                    self._unsleep(waiter)
                    continue
                if self._idle_reading:
                    self._wake_idle_reader()
            left = -1 if deadline is None else max(0.0, deadline - time.monotonic())
            woken = waiter.lock.acquire(timeout=left)
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
                    handed = waiter.lead
                if handed:
                    self._hand_on()
                return False
            waiter.lock.acquire()  # the answer is being delivered: its signal is on the way
            with self._signals:
                waiter.signalled = False
        return True

    def _unsleep(self, waiter: _Waiter) -> None:
        with self._signals:
            self._sleepers.pop(id(waiter), None)
            if waiter.signalled:  # handed the reading meanwhile: re-arm (the lock is free)
                waiter.lock.acquire()
                waiter.signalled = False
                waiter.lead = False

    def _signal(self, waiter: _Waiter) -> None:
        with self._signals:
            if not waiter.signalled:
                waiter.signalled = True
                waiter.lock.release()

    def _lead(self, waiter: _Waiter | None, deadline: float | None) -> None:
        """Read for everyone until ``waiter`` has its response (``None``: until woken, the idle reader)
        or ``deadline`` passed."""
        transport = self._transport
        while waiter is None or waiter.response is None:
            if self._closed is not None:
                return
            try:
                if deadline is not None or waiter is None:
                    # Read only what has come, a read at a time, until a whole message is here: half a
                    # message must not hold a timed caller (or the idle reader) past its time.
                    while not transport._has_buffered_message():
                        wait_for = [self._fd] if waiter is not None else [self._fd, self._wake_read]
                        left = None if deadline is None else deadline - time.monotonic()
                        if left is not None and left <= 0:
                            return
                        ready, _, _ = select.select(wait_for, [], [], left)
                        if not ready:
                            return
                        if self._wake_read in ready:
                            os.read(self._wake_read, 4096)
                            return
                        transport._read_available()
                message = transport._read_incoming()
            except Exception as exc:  # a stream that fails: the connection is as good as closed
                self._close_with(self._connection_closed(f"reading from the server failed: {exc!r}"))
                return
            self._last_read = time.monotonic()
            if message is None:
                self._close_with(self._connection_closed("the server closed its output"))
                return
            self._deliver(message)

    def _release_read(self) -> None:
        self._read_lock.release()
        self._hand_on()

    def _hand_on(self) -> None:
        """Ask one waiting caller to read (nobody reads otherwise until the idle reader steps in)."""
        with self._signals:
            for waiter in self._sleepers.values():
                if not waiter.signalled:
                    waiter.lead = True
                    waiter.signalled = True
                    waiter.lock.release()
                    return

    def _wake_idle_reader(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_write, b"!")

    def _read_when_idle(self) -> None:
        """The client's own reader: reads whenever nobody has read for ``_IDLE_S``, until a caller comes."""
        while self._closed is None:
            time.sleep(_IDLE_S)
            if time.monotonic() - self._last_read < _IDLE_S or not self._read_lock.acquire(blocking=False):
                continue
            self._idle_reading = True
            try:
                self._lead(None, None)
            except Exception as exc:  # a delivery that fails (no thread for a handler): the client cannot go on
                logger.exception("the client's reader stopped")
                self._close_with(self._connection_closed(f"reading from the server failed: {exc!r}"))
            finally:
                self._idle_reading = False
                self._release_read()

    def _send(self, line: bytes, *ids: int | None) -> None:
        """Write one line; when the server is gone, the calls of ``ids`` fail with ``ConnectionClosed``."""
        if self._closed is None:
            try:
                self._transport._write_line(line)
                return
            except (BrokenPipeError, ValueError, OSError) as exc:  # ValueError: a closed file
                logger.debug("writing to the server failed: %r", exc)
                self._close_with(self._connection_closed(f"the server's input is closed ({exc})"))
        for id_ in ids:
            if id_ is not None:
                self._pending.pop(id_, None)
                self._progress.pop(id_, None)
        assert self._closed is not None
        raise self._closed

    def _send_quietly(self, line: bytes) -> None:
        with contextlib.suppress(ConnectionClosed):
            self._send(line)

    # --- the reading thread ----------------------------------------------------------------------

    def _read_all(self) -> None:
        cause = "the server closed its output"
        try:
            while (message := self._transport._read_incoming()) is not None:
                self._deliver(message)
        except Exception as exc:  # a stream that fails: the connection is as good as closed
            cause = f"reading from the server failed: {exc!r}"
            logger.debug("%s", cause)
        self._close_with(self._connection_closed(cause))

    def _resolve(self, waiter: _Waiter, response: Response | ConnectionClosed) -> None:
        waiter.response = response
        self._signal(waiter)

    def _serve_request(self, request: Request) -> None:
        threading.Thread(
            target=self._answer_request, args=(request,), name="rpcwire-client-handler", daemon=True
        ).start()

    def _answer_request(self, request: Request) -> None:
        answer = self._answer(self._transport, request)
        if answer is not None:
            self._send_quietly(answer)

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
        :class:`ConnectionClosed`."""
        process = self._process
        if process is not None:
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
        self._close_with(ConnectionClosed("the client was closed"))
        if self._fd is not None:
            self._wake_idle_reader()
        if process is not None:
            self._reader.join(timeout=grace)
            _close_quietly(process.stdout)
            _close_quietly(process.stderr)
        if self._fd is not None and not self._reader.is_alive():
            for fd in (self._wake_read, self._wake_write):
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


def _pollable_fd(transport: Any, stream: Any) -> int | None:
    """The descriptor under ``stream`` (the transport's input) that a reader can wait on with a timeout,
    when the core can say whether a message is already buffered. The native core's reads leave nothing in
    the stream's own buffer (each asks for more than that buffer holds, which ``readinto1`` reads past
    it), so whatever it has not buffered itself is still behind the descriptor."""
    if not hasattr(transport, "_has_buffered_message") or not isinstance(stream, io.BufferedReader):
        return None
    return stream.fileno()


def _close_quietly(stream: Any) -> None:
    if stream is not None:
        with contextlib.suppress(OSError, ValueError):
            stream.close()


class _StderrTail(collections.deque):  # type: ignore[type-arg]  # of str
    """The last lines of a spawned server's stderr, read to its end by a thread (or task) of the client's so
    that the pipe never fills; ``drained`` is set at its end."""

    def __init__(self) -> None:
        super().__init__(maxlen=_STDERR_TAIL)
        self.drained = threading.Event()

    def add(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        self.append(line)
        logger.debug("server stderr: %s", line)

    def drain(self, stderr: Any) -> None:
        try:
            with contextlib.suppress(OSError, ValueError):
                for raw in stderr:
                    self.add(raw)
        finally:
            self.drained.set()

    async def drain_async(self, stderr: asyncio.StreamReader) -> None:
        try:
            with contextlib.suppress(Exception):
                while raw := await stderr.readline():
                    self.add(raw)
        finally:
            self.drained.set()


# --- asyncio ------------------------------------------------------------------------------------


def _frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


async def _read_frame(reader: asyncio.StreamReader, limit: int) -> bytes | str | None:
    """The next ``Content-Length`` frame's body (headers in any order and case, ``\\n`` or ``\\r\\n``), why
    a header block is bad (the next one is read after it), or ``None`` at end of input."""
    length: int | None = None
    bad = False
    started = False
    while line := await reader.readline():
        if not line.strip():
            if not started:
                continue
            if bad or length is None:
                return "a header block without a valid Content-Length"
            try:
                if length <= limit:
                    return await reader.readexactly(length)
                while length:  # over the limit: dropped as it arrives
                    length -= len(await reader.readexactly(min(length, 65536)))
            except asyncio.IncompleteReadError:
                return None
            return "a frame over max_message_bytes"
        started = True
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            value = value.strip()
            bad = bad or not value.isdigit()
            length = int(value) if value.isdigit() else length
    return None


class AsyncClient(_Peer):
    """The asyncio client: ``AsyncClient(reader, writer)`` over asyncio streams, or :meth:`spawn`. Calls
    are coroutines; any number may be in flight at once."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        handler: Callable[[str, Any], Any] | None = None,
        dialect: str = "mcp",
        timeout: float | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        framing: str = "newline",
        _process: asyncio.subprocess.Process | None = None,
        _stderr_tail: _StderrTail | None = None,
    ) -> None:
        super().__init__(handler, dialect, timeout)
        self._max_message_bytes = max_message_bytes
        if framing not in ("newline", "content-length"):
            raise ValueError(f"framing must be 'newline' or 'content-length', not {framing!r}")
        self._content_length = framing == "content-length"
        self._stream_reader = reader
        self._writer = writer
        self._process = _process
        self._stderr_tail = _stderr_tail
        self._stderr_task: asyncio.Task[None] | None = None
        self._loop = asyncio.get_running_loop()
        self._reading = self._loop.create_task(self._read_all())
        self._tasks: set[asyncio.Task[Any]] = set()

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
        handler: Callable[[str, Any], Any] | None = None,
        dialect: str = "mcp",
        timeout: float | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        framing: str = "newline",
    ) -> AsyncClient:
        """Start ``argv`` and talk to it over its stdin and stdout (see :meth:`Client.spawn`)."""
        _check_dialect(dialect)
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
        )
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        tail = _StderrTail()
        client = cls(
            process.stdout,
            process.stdin,
            handler=handler,
            dialect=dialect,
            timeout=timeout,
            max_message_bytes=max_message_bytes,
            framing=framing,
            _process=process,
            _stderr_tail=tail,
        )
        client._stderr_task = asyncio.get_running_loop().create_task(tail.drain_async(process.stderr))
        client._keep(client._stderr_task)
        return client

    def _keep(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def call(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        """As :meth:`Client.call`, awaited. Cancelling the awaiting task cancels the call on the server too."""
        if self._closed is not None:
            raise self._closed
        id_, line = self._request_line(method, params, on_progress)
        future: asyncio.Future[Response | ConnectionClosed] = self._loop.create_future()
        self._pending[id_] = future
        timeout = self._timeout if timeout is None else timeout
        try:
            await self._write(line)
            response = await asyncio.wait_for(future, timeout) if timeout is not None else await future
        except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
            if self._pending.pop(id_, None) is not None and self._closed is None:
                self._progress.pop(id_, None)
                reason = "timeout" if isinstance(exc, asyncio.TimeoutError) else "cancelled"
                with contextlib.suppress(Exception):
                    await self._write(self._cancel_line(id_, reason))
            if isinstance(exc, asyncio.TimeoutError):
                raise TimeoutError(f"no answer to {method!r} (id {id_}) within {timeout} s") from None
            raise
        if isinstance(response, ConnectionClosed):
            raise response
        return _outcome(response)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no answer)."""
        if self._closed is not None:
            raise self._closed
        await self._write(self._core._encode_request(method, params))

    async def batch(self, calls: Iterable[tuple[str, Any]], *, timeout: float | None = None) -> list[Any]:
        """As :meth:`Client.batch`, awaited."""
        if self._closed is not None:
            raise self._closed
        ids, line = self._batch_lines(calls)
        if not ids:
            return []
        futures = [self._loop.create_future() for _ in ids]
        self._pending.update(zip(ids, futures, strict=True))
        await self._write(line)
        timeout = self._timeout if timeout is None else timeout
        try:
            await asyncio.wait(futures, timeout=timeout)
        except asyncio.CancelledError:  # the awaiting task was cancelled: so are the entries still running
            for id_, future in zip(ids, futures, strict=True):
                if not future.done() and self._pending.pop(id_, None) is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.shield(self._write(self._cancel_line(id_, "cancelled")))
            raise
        outcomes: list[Any] = []
        for id_, future in zip(ids, futures, strict=True):
            if not future.done():
                self._pending.pop(id_, None)
                with contextlib.suppress(Exception):
                    await self._write(self._cancel_line(id_, "timeout"))
                outcomes.append(TimeoutError(f"no answer to batch entry {id_} within {timeout} s"))
                continue
            outcomes.append(_batch_outcome(future.result()))
        return outcomes

    async def _write(self, line: bytes) -> None:
        try:
            self._writer.write(_frame(line) if self._content_length else line + b"\n")
            if self._writer.transport.get_write_buffer_size() > 64 * 1024:
                await self._writer.drain()
        except (ConnectionError, RuntimeError) as exc:  # RuntimeError: a closed transport
            self._close_with(await self._connection_closed(f"the server's input is closed ({exc})"))
            assert self._closed is not None
            raise self._closed from None

    async def _read_all(self) -> None:
        """Read chunks as they come and deliver every whole line in them: one wake-up of this task per
        chunk, not per line (``readline``), which is what many answers in flight at once cost."""
        if self._content_length:
            await self._read_all_frames()
            return
        parse, limit = self._core._parse_incoming, self._max_message_bytes
        cause = "the server closed its output"
        parts: list[bytes] = []  # the line begun and not ended yet
        size = 0
        skipping = False  # inside a line over max_message_bytes: dropped up to its end
        try:
            while chunk := await self._stream_reader.read(1 << 16):
                if b"\n" not in chunk:
                    size += len(chunk)
                    if size > limit and not skipping:
                        skipping, parts = True, []
                    if not skipping:
                        parts.append(chunk)
                    continue
                lines = chunk.split(b"\n")
                if skipping:
                    logger.warning(
                        "dropped a message from the server: a line longer than max_message_bytes (%d)", limit
                    )
                    lines[0], skipping = b"", False
                elif parts:
                    lines[0] = b"".join([*parts, lines[0]])
                tail = lines.pop()
                parts, size = ([tail], len(tail)) if tail else ([], 0)
                for line in lines:
                    if len(line) > limit:
                        logger.warning(
                            "dropped a message from the server: a line longer than max_message_bytes (%d)", limit
                        )
                    elif line.strip():
                        self._deliver(parse(line))
        except Exception as exc:  # a stream that fails, or a delivery that does: the client cannot go on
            cause = f"reading from the server failed: {exc!r}"
            logger.exception("the client's reader stopped")
        self._close_with(await self._connection_closed(cause))

    async def _read_all_frames(self) -> None:
        """``framing="content-length"``: deliver each frame's body as it is read whole."""
        parse = self._core._parse_incoming
        cause = "the server closed its output"
        try:
            while (body := await _read_frame(self._stream_reader, self._max_message_bytes)) is not None:
                self._deliver(body if isinstance(body, str) else parse(body))
        except ValueError:  # a header line over the stream's own limit: it cannot be read on
            cause = "the server wrote a header line over the stream's limit"
        except Exception as exc:  # a stream that fails, or a delivery that does: the client cannot go on
            cause = f"reading from the server failed: {exc!r}"
            logger.exception("the client's reader stopped")
        self._close_with(await self._connection_closed(cause))

    def _resolve(
        self, waiter: asyncio.Future[Response | ConnectionClosed], response: Response | ConnectionClosed
    ) -> None:
        if not waiter.done():
            waiter.set_result(response)

    def _serve_request(self, request: Request) -> None:
        self._keep(self._loop.create_task(self._answer_request(request)))

    async def _answer_request(self, request: Request) -> None:
        handler = self._handler or _no_handler
        core = self._core.StdioTransport  # builds the answer's bytes (static methods)
        if _engine.is_async_handler(handler):
            try:
                result = await handler(request.method, request.params)
            except Exception as exc:
                answer = _engine._failure_answer(core, request, None, exc)
            else:
                answer = _engine._result_answer(core, request, None, result)
        else:
            answer = await asyncio.to_thread(self._answer, core, request)
        if answer is not None:
            with contextlib.suppress(Exception):
                await self._write(answer)

    async def _connection_closed(self, cause: str) -> ConnectionClosed:
        returncode = None
        if self._process is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                returncode = await asyncio.wait_for(self._process.wait(), 0.5)
        if returncode is not None and self._stderr_task is not None:
            await asyncio.wait({self._stderr_task}, timeout=0.5)  # its last lines, written as it exited
        return _closed_error(cause, returncode, self._stderr_tail)

    async def close(self, grace: float = 5.0) -> None:
        """As :meth:`Client.close`, awaited."""
        with contextlib.suppress(Exception):
            self._writer.close()
        process = self._process
        if process is not None:
            try:
                await asyncio.wait_for(process.wait(), grace)
            except asyncio.TimeoutError:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), grace)
                except asyncio.TimeoutError:
                    process.kill()
                    await process.wait()
        self._close_with(ConnectionClosed("the client was closed"))
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(self._reading, grace)
        for task in list(self._tasks):
            task.cancel()

    @property
    def returncode(self) -> int | None:
        """A spawned server's exit code, once it exited (else ``None``)."""
        return None if self._process is None else self._process.returncode

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.close()
