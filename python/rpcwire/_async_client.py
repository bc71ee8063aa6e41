"""The asyncio client, :class:`rpcwire.AsyncClient`: coroutine calls over asyncio streams, or a spawned server.

What every client shares (ids, matching answers, the server's own traffic, the dialects) is the
:class:`~rpcwire._peer._Peer` it builds on; here is how a client on an event loop writes and reads. Any number
of calls may be in flight at once: each message goes into the transport's buffer whole (a call waits, within
its deadline, while the buffer is full). Notification callbacks run on a dispatcher task (an ``async def``
callback awaited), the server's own requests on tasks, a bounded number at once. ``rpcwire.AsyncClient`` and
``rpcwire.pure.AsyncClient`` are this class bound to either core.

A spawned server is read where its output arrives: the protocol of its stdout pipe (``_async_client_pipes``) feeds
each chunk to the core's framing decoder and delivers every message in it at once, so an answer resolves its
call's future in the event loop's iteration that read it, and the call's task resumes in the next one (two
iterations a call; asyncio's subprocess protocol would hand each chunk on one iteration later, and a reader
task reading a ``StreamReader`` takes one more). Over a caller's own streams a task reads the
``StreamReader`` and feeds the same routine (:meth:`AsyncClient._received`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import logging
import os
import subprocess
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable, Sequence
from types import TracebackType
from typing import Any, TypeVar, cast

from rpcwire import _answer, _engine
from rpcwire._async_client_pipes import _EOF, _end_pipes, _ServerPipes
from rpcwire._context import running_request
from rpcwire._contract import Core
from rpcwire._id_null_ledger import _Sent
from rpcwire._peer import (
    _CLOSE_JOIN_S,
    _HANDLERS,
    _HANDLERS_WAITING,
    _REMAINS_S,
    ProgressCallback,
    _batch_outcome,
    _Callbacks,
    _check_dialect,
    _check_outgoing,
    _closed_error,
    _current_call,
    _deadline,
    _left,
    _outcome,
    _Peer,
    _run_callback,
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
    Refused,
    Request,
    Response,
)

__all__ = ["AsyncClient"]

logger: logging.Logger = logging.getLogger("rpcwire.client")

_WRITE_BUFFER = 64 * 1024  # AsyncClient: a call waits (within its deadline) for the buffer to drain below this


def _checked_limits(
    core: Core, max_message_bytes: int, max_depth: int, max_batch: int | None, framing: Framing
) -> tuple[int, int, int | None]:
    """The limits (and framing) checked by the core's own ``StdioTransport``, so with its very errors."""
    return core.StdioTransport(
        io.BytesIO(),
        io.BytesIO(),
        max_message_bytes=max_message_bytes,
        max_depth=max_depth,
        max_batch=max_batch,
        framing=framing,
    )._limits


def _expire(waiter: asyncio.Future[Any]) -> None:
    """A call's deadline passed: its waiter ends with ``TimeoutError`` (unless it was answered)."""
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class AsyncClient(_Peer):
    """The asyncio client: ``AsyncClient(reader, writer)`` over asyncio streams, or :meth:`spawn`. Calls
    are coroutines; any number may be in flight at once. ``max_message_bytes``, ``max_depth``, ``max_batch``
    and ``framing`` are those of ``StdioTransport`` (checked alike, with the same errors): what the client
    reads (through the core's own framing decoder, ``FrameDecoder``: the transport's very rules), and what it
    checks its messages against before it sends them."""

    _output: asyncio.WriteTransport  # where messages are written: the stream's transport, or the stdin pipe's
    _output_drained: Callable[[], Coroutine[Any, Any, None]]  # until that transport's buffer drained

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        handler: Handler | None = None,
        dialect: str = "mcp",
        timeout: float | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_batch: int | None = DEFAULT_MAX_BATCH,
        framing: Framing = "newline",
    ) -> None:
        self._prepare(
            handler,
            dialect,
            timeout,
            max_message_bytes=max_message_bytes,
            max_depth=max_depth,
            max_batch=max_batch,
            framing=framing,
        )
        self._output = writer.transport
        self._output_drained = writer.drain
        self._keep(self._loop.create_task(self._read_stream(reader)))

    def _prepare(
        self,
        handler: Handler | None,
        dialect: str,
        timeout: float | None,
        *,
        max_message_bytes: int,
        max_depth: int,
        max_batch: int | None,
        framing: Framing,
    ) -> None:
        """What every client on a loop starts with, before it is given its way to write and read."""
        super().__init__(handler, dialect, timeout)
        self._set_limits(_checked_limits(self._core, max_message_bytes, max_depth, max_batch, framing))
        # The calls written that a server reads whatever its limits, not yet in the ledger (id -> the ``sent``
        # list their place goes into, in the order of writing, which is the order of their ids), and the
        # greatest id of one answered since: recorded (_settle) only once anything else is written, read or
        # given up, so that a call answered before that costs the ledger nothing.
        self._unrecorded: dict[int, list[_Sent]] = {}
        self._passed = 0
        # How a message is framed as it is written: None, a line (``+ b"\n"``, the usual case, inline); else the
        # function that frames it (a Content-Length frame; the WebSocket client's frames, as they are).
        self._frame: Callable[[bytes], bytes] | None = None if framing == "newline" else self._core._encode_frame
        # At least what the output's buffer holds: what it held when last asked, and every byte written since
        # (it only shrinks on its own). While that is at most _WRITE_BUFFER, a call need not ask the transport.
        self._buffered = 0
        core = self._core
        self._decoder = core.FrameDecoder(framing, max_message_bytes=self._limits[0])
        # (the core's functions a call uses, an attribute look less each; the nesting count: one call, where
        # two bytes.count cost the native core's several times)
        self._encode, self._parse, self._deeper = core._encode_request, core._parse_incoming, core._nests_deeper
        self._loop = asyncio.get_running_loop()
        self._process: asyncio.subprocess.Process | None = None
        self._exited: asyncio.Future[None] | None = None
        self._stderr_tail: _StderrTail | None = None
        self._stderr_ended: asyncio.Future[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._callbacks = _Callbacks()
        self._dispatching: asyncio.Task[None] | None = None
        self._callback_done = asyncio.Event()  # set (and replaced) as each callback ends
        self._handler_slots = asyncio.Semaphore(_HANDLERS)
        self._serving = 0  # the server's requests handled or waiting for a slot
        self._draining: asyncio.Task[None] | None = None
        self._read_over = False  # the server's output ended (or reading it failed): what comes is ignored
        self._reading: asyncio.Future[None] = self._loop.create_future()  # done once that end closed the client

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
    ) -> Opening[AsyncClient]:
        """Start ``argv`` and talk to it over its stdin and stdout (see :meth:`Client.spawn`, ``stderr``
        included: a callable is called on the event loop, so it must not block). Awaited, the client
        (``client = await AsyncClient.spawn(argv)``); or ``async with AsyncClient.spawn(argv) as client:``,
        closed at the end of the block (``async with await ...`` works too)."""
        _check_dialect(dialect)
        limits: dict[str, Any] = {
            "max_message_bytes": max_message_bytes,
            "max_depth": max_depth,
            "max_batch": max_batch,
            "framing": framing,
        }
        _checked_limits(cls._core, **limits)
        tail = _stderr_tail(stderr)  # (a path opened before the server starts, as Client.spawn does)
        starting = cls._spawn(
            argv, cwd=cwd, env=env, handler=handler, dialect=dialect, timeout=timeout, tail=tail, **limits
        )
        return Opening(starting)

    @classmethod
    async def _spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None,
        env: dict[str, str] | None,
        handler: Handler | None,
        dialect: str,
        timeout: float | None,
        tail: _StderrTail,
        **limits: Any,
    ) -> AsyncClient:
        loop = asyncio.get_running_loop()
        try:
            transport, pipes = await loop.subprocess_exec(
                lambda: _ServerPipes(loop, tail),
                *argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
            )
        except BaseException:
            tail.end(b"")  # a path's file closed
            raise
        client = cls.__new__(cls)  # not __init__: no streams, the pipes below instead
        client._prepare(handler, dialect, timeout, **limits)
        client._process = asyncio.subprocess.Process(transport, pipes, loop)  # its wait(), kill(), returncode
        client._exited = pipes.exited
        client._stderr_tail = tail
        client._stderr_ended = pipes.stderr_ended
        stdin = transport.get_pipe_transport(0)
        assert stdin is not None  # (uvloop's pipe transports do not derive from asyncio.WriteTransport)
        client._output = cast(asyncio.WriteTransport, stdin)
        client._output_drained = pipes.drained
        pipes.attach(client, transport.get_pipe_transport(1))
        client._keep(loop.create_task(client._watch_exit()))
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
        """As :meth:`Client.call`, awaited: ``timeout`` bounds the whole call, waiting to write included.
        Cancelling the awaiting task cancels the call on the server too."""
        if self._closed is not None:
            raise self._closed_error()
        timeout = self._timeout if timeout is None else timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        plain = (  # no progress token and no trace context to add: what _request_line makes, made here
            on_progress is None
            and running_request.get(None) is None
            and (_current_call is None or _current_call() is None)
        )
        if plain:
            id_ = next(self._ids)
            line = self._encode(method, params, id_)
        else:
            id_, line = self._request_line(method, params, on_progress)
        future: asyncio.Future[Response | ConnectionClosed] = self._loop.create_future()
        self._pending[id_] = future
        sent: list[_Sent] = []
        timer = None
        try:
            # _checked's quick look inline (the usual line: short and shallow, no server refuses it unread), and
            # the transport asked how full its buffer is only once it may be full (_buffered)
            if ((len(line) > self._quick_bytes or self._deeper(line, self._quick_depth)) and self._checked(line)) or (
                self._buffered > _WRITE_BUFFER and self._full()
            ):  # (a suspect: in the ledger now)
                await self._send(line, deadline, [id_], sent)
            else:  # the usual case, without a coroutine (or a frame) of its own: _put's work, here
                # (no await since its id was taken: the ids of these calls follow their order of writing)
                self._unrecorded[id_] = sent
                data = line + b"\n" if self._frame is None else self._frame(line)
                self._buffered += len(data)
                try:
                    self._output.write(data)
                except (ConnectionError, RuntimeError) as exc:  # RuntimeError: a closed transport
                    await self._input_closed(exc)
            if deadline is not None:  # a timer, not wait_for: that would take one more loop iteration
                timer = self._loop.call_later(_left(deadline), _expire, future)
            response = await future
        except BaseException as exc:
            timed_out = isinstance(exc, (asyncio.TimeoutError, TimeoutError))
            self._abandon([id_], sent, "timeout" if timed_out else "cancelled")
            if timed_out:
                detail = f" ({exc})" if str(exc) else ""
                raise CallTimeout(f"no answer to {method!r} (id {id_}) within {timeout} s{detail}") from None
            raise
        finally:
            if timer is not None:
                timer.cancel()
        if on_progress is not None:
            await self._progress_reported(id_, deadline)
        if type(response) is Response and response.error is None:
            return response.result
        if isinstance(response, ConnectionClosed):
            raise response
        return _outcome(response)

    def _full(self) -> bool:
        """Whether the output's buffer holds more than ``_WRITE_BUFFER`` (the transport asked)."""
        self._buffered = self._output.get_write_buffer_size()
        return self._buffered > _WRITE_BUFFER

    def _settle(self) -> None:
        """The calls written but not yet in the ledger take their places there, after everything in it, in the
        order of writing, with the frontier the answers to any of them moved (something else is written, read
        or given up)."""
        if self._unrecorded or self._passed:
            unrecorded, self._unrecorded = self._unrecorded, {}
            passed, self._passed = self._passed, 0
            self._ledger.caught_up(unrecorded, passed)

    def _written(self, line: bytes, ids: Sequence[int], sent: list[_Sent]) -> None:
        self._settle()
        super()._written(line, ids, sent)

    def _abandon(self, ids: Sequence[int], sent: list[_Sent], reason: str) -> None:
        self._settle()
        super()._abandon(ids, sent, reason)

    def _take_answer(self, response: Response) -> None:
        id_ = response.id
        if type(id_) is int:
            sent = self._unrecorded.pop(id_, None)
            if sent is not None:  # a call the ledger does not know yet: the frontier passes it, on record
                if id_ > self._passed:  # noqa: PLR1730  (not max(): no call on the answer's path)
                    self._passed = id_
                waiter = self._pending.pop(id_, None)
                if waiter is not None:
                    if self._progress:
                        self._progress.pop(id_, None)
                    if not waiter.done():
                        waiter.set_result(response)
                    return
            elif id_ in self._pending:  # (_Peer._take_answer's usual case, without its calls)
                matched = self._ledger.answered(id_)
                waiter = self._pending.pop(id_)
                if self._progress:
                    self._progress.pop(id_, None)
                if not waiter.done():
                    waiter.set_result(response)
                if not matched:
                    return
                for sent_, error in matched:
                    for entry in sent_.ids:
                        other = self._pending.pop(entry, None)
                        if other is not None:
                            self._progress.pop(entry, None)
                            self._resolve(other, Response(entry, None, error.error))
                return
        self._settle()
        super()._take_answer(response)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no answer); as :meth:`Client.notify`."""
        if self._closed is not None:
            raise self._closed_error()
        line = self._core._encode_request(method, params)
        _check_outgoing(self._core, line, self._limits)
        await self._send(line, _deadline(self._timeout), [], [])

    async def batch(self, calls: Iterable[tuple[str, Any]], *, timeout: float | None = None) -> list[Any]:
        """As :meth:`Client.batch`, awaited."""
        if self._closed is not None:
            raise self._closed_error()
        timeout = self._timeout if timeout is None else timeout
        deadline = _deadline(timeout)
        ids, line = self._batch_lines(calls)
        if not ids:
            return []
        futures = [self._loop.create_future() for _ in ids]
        self._pending.update(zip(ids, futures, strict=True))
        sent: list[_Sent] = []
        try:
            _check_outgoing(self._core, line, self._limits, len(ids))
            await self._send(line, deadline, ids, sent)
            await asyncio.wait(futures, timeout=_left(deadline))
        except BaseException as exc:  # cancelled (or not sent): so are the entries still running
            timed_out = isinstance(exc, (asyncio.TimeoutError, TimeoutError))
            self._abandon(ids, sent, "timeout" if timed_out else "cancelled")
            if timed_out:
                raise CallTimeout(f"no answer to the batch within {timeout} s ({exc})") from None
            raise
        outcomes: list[Any] = []
        late: list[int] = []
        for id_, future in zip(ids, futures, strict=True):
            if not future.done():
                late.append(id_)
                outcomes.append(CallTimeout(f"no answer to batch entry {id_} within {timeout} s"))
                continue
            outcomes.append(_batch_outcome(future.result()))
        if late:
            self._abandon(late, sent, "timeout")
        return outcomes

    async def _send(self, line: bytes, deadline: float | None, ids: Sequence[int], sent: list[_Sent]) -> None:
        """Hand one message to the transport, once its buffer holds less than ``_WRITE_BUFFER`` (waiting for
        that until ``deadline``: ``TimeoutError``, nothing sent); ``ids``: the calls it makes."""
        if self._closed is not None:
            raise self._closed_error()
        try:
            if self._full():
                await self._drained(deadline)
                self._full()
            self._put(line, ids, sent)
        except (ConnectionError, RuntimeError) as exc:  # RuntimeError: a closed transport
            await self._input_closed(exc)

    async def _input_closed(self, exc: BaseException) -> None:
        """The server's input is gone: the client closes (with the server's exit, if it is one) and raises."""
        self._close_with(await self._connection_closed(f"the server's input is closed ({exc})"))
        assert self._closed is not None
        raise self._closed_error() from None

    async def _drained(self, deadline: float | None) -> None:
        """Until the transport's buffer drained (one wait shared by every waiter), or ``TimeoutError``; a
        server whose input is gone closes the client (``ConnectionClosed``)."""
        if self._draining is None or self._draining.done():
            self._draining = self._loop.create_task(self._output_drained())
            self._draining.add_done_callback(lambda task: task.cancelled() or task.exception())
        try:
            await asyncio.wait_for(asyncio.shield(self._draining), _left(deadline))
        except asyncio.TimeoutError:
            raise CallTimeout("not sent: the server read nothing until the deadline") from None
        if self._closed is not None:
            raise self._closed_error()

    def _send_cancel(self, line: bytes) -> None:
        """Into the transport's buffer: it never waits."""
        with contextlib.suppress(Exception):
            self._put(line, [], [])

    def _put(self, line: bytes, ids: Sequence[int], sent: list[_Sent]) -> None:
        """Hand one message to the transport's buffer (never waits), after its place in the ledger."""
        self._written(line, ids, sent)
        data = line + b"\n" if self._frame is None else self._frame(line)
        self._buffered += len(data)
        self._output.write(data)

    # --- reading ---------------------------------------------------------------------------------

    def _received(self, chunk: bytes) -> None:
        """Feed a chunk of the server's output to the core's framing decoder (``StdioTransport``'s rules:
        lines, or ``framing="content-length"`` frames read tolerantly) and deliver every message it hands
        out, at once: an answer resolves its call's future here. A failure to deliver ends the client."""
        if self._read_over:
            return
        decoder, parse, max_depth = self._decoder, self._parse, self._max_depth
        try:
            if chunk:
                decoder.feed(chunk)
            else:
                decoder.close()
            while (message := decoder.next()) is not None:
                if type(message) is not bytes and isinstance(message, Refused):  # over max_message_bytes: unread
                    logger.warning("dropped a message from the server: %s", message.reason)
                    continue
                parsed = parse(message, max_depth)
                if type(parsed) is Response:
                    # _take_answer's usual case here, a frame less: the answer to a call not in the ledger yet
                    id_ = parsed.id
                    if type(id_) is int and self._unrecorded.pop(id_, None) is not None:
                        if id_ > self._passed:  # noqa: PLR1730  (not max(): no call on the answer's path)
                            self._passed = id_
                        waiter = self._pending.pop(id_, None)
                        if waiter is not None:
                            if self._progress:
                                self._progress.pop(id_, None)
                            if not waiter.done():
                                waiter.set_result(parsed)
                            continue
                    self._take_answer(parsed)
                else:
                    self._deliver((parsed, message) if isinstance(parsed, str) else parsed)
        except Exception as exc:  # a delivery that fails: the client cannot go on
            logger.exception("the client's reader stopped")
            self._output_ended(f"reading from the server failed: {exc!r}")

    def _output_ended(self, cause: str) -> None:
        """The server's output ended (``_EOF``) or reading it failed: what the decoder still holds is
        delivered (the end fed as ``b""``), then the client closes with ``cause``."""
        if self._read_over:
            return
        if cause == _EOF:
            self._received(b"")
            if self._read_over:  # that failed, and closed the client with why
                return
        self._read_over = True
        self._keep(self._loop.create_task(self._close_reading(cause)))

    async def _close_reading(self, cause: str) -> None:
        try:
            self._close_with(await self._connection_closed(cause))
        finally:
            if not self._reading.done():
                self._reading.set_result(None)

    async def _read_stream(self, reader: asyncio.StreamReader) -> None:
        """A caller's own stream: its chunks as they come, to :meth:`_received`."""
        try:
            while not self._read_over and (chunk := await reader.read(1 << 16)):
                self._received(chunk)
        except Exception as exc:  # a stream that fails
            logger.exception("the client's reader stopped")
            self._output_ended(f"reading from the server failed: {exc!r}")
        else:
            self._output_ended(_EOF)

    async def _watch_exit(self) -> None:
        """A spawned server's exit: what it left in its pipes is read (for at most ``_REMAINS_S``), then its
        pipes are closed, so that the reading ends even while a child of the server still holds them."""
        assert self._process is not None and self._exited is not None
        await asyncio.shield(self._exited)
        await asyncio.wait({self._reading}, timeout=_REMAINS_S)
        if not self._reading.done():
            _end_pipes(self._process)

    async def _exit(self, timeout: float | None) -> bool:
        """Whether the spawned server exited within ``timeout`` seconds."""
        assert self._exited is not None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._exited), timeout)
        return self._exited.done()

    def _resolve(
        self, waiter: asyncio.Future[Response | ConnectionClosed], response: Response | ConnectionClosed
    ) -> None:
        if not waiter.done():
            waiter.set_result(response)

    # --- callbacks, and the server's requests ----------------------------------------------------

    def _run_later(self, callback: Callable[..., Any], args: tuple[Any, ...], call: int | None) -> None:
        if self._callbacks.add(callback, args, call) and (self._dispatching is None or self._dispatching.done()):
            self._dispatching = self._loop.create_task(self._dispatch())

    async def _dispatch(self) -> None:
        """The client's dispatcher: the queued callbacks, one at a time, in order (an ``async def`` one awaited)."""
        callbacks = self._callbacks
        while callbacks.items:
            callback, args, call = callbacks.items.popleft()
            try:
                result = _run_callback(callback, args)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.exception("a notification callback raised")
            finally:
                callbacks.done(call)
                self._callback_done.set()
                self._callback_done = asyncio.Event()

    async def _progress_reported(self, call: int, deadline: float | None) -> None:
        """Until the progress callbacks of ``call`` queued before its answer have run (or ``deadline``)."""
        if self._dispatching is not None and asyncio.current_task() is self._dispatching:
            return
        while call in self._callbacks.progress and (left := _left(deadline)) != 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._callback_done.wait(), left)

    def _serve_request(self, request: Request) -> None:
        if self._serving >= _HANDLERS + _HANDLERS_WAITING:
            answer = self._refusal(request)
            if answer is not None:
                with contextlib.suppress(Exception):
                    self._put(answer, [], [])
            return
        self._serving += 1
        task = self._loop.create_task(self._answer_request(request))
        self._keep(task)
        task.add_done_callback(self._served)

    def _served(self, task: asyncio.Task[None]) -> None:
        self._serving -= 1

    async def _answer_request(self, request: Request) -> None:
        """Answer the server's request through the one answer routine: an ``async def`` handler awaited on the
        loop, a sync one (or none: -32601) called on a thread, never on the loop."""
        handler = self._handler
        async with self._handler_slots:
            if handler is not None and _engine.is_async_handler(handler):
                answer = await _answer.call_async(self._core.StdioTransport, request, handler, None)
            else:
                answer = await asyncio.to_thread(self._answer_to, request)
        if answer is not None:
            with contextlib.suppress(Exception):
                await self._send(answer, _deadline(self._timeout), [], [])

    async def _connection_closed(self, cause: str) -> ConnectionClosed:
        returncode = None
        if self._process is not None:
            if self._exited is None:
                with contextlib.suppress(asyncio.TimeoutError):
                    returncode = await asyncio.wait_for(self._process.wait(), 0.5)
            elif await self._exit(0.5):
                returncode = self._process.returncode
        if returncode is not None and self._stderr_ended is not None:
            await asyncio.wait({self._stderr_ended}, timeout=0.5)  # its last lines, written as it exited
        return _closed_error(cause, returncode, self._stderr_tail)

    async def close(self, grace: float = 5.0) -> None:
        """As :meth:`Client.close`, awaited."""
        with contextlib.suppress(Exception):
            self._output.close()
        process = self._process
        if process is not None and not await self._ended(process, grace):
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            if not await self._ended(process, grace):
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await self._ended(process, None)
        self._close_with(ConnectionClosed("the client was closed"))
        dispatching = self._dispatching
        if dispatching is not None and dispatching is not asyncio.current_task():
            await asyncio.wait({dispatching}, timeout=grace)  # the callbacks already queued
            dispatching.cancel()  # one still running after that
        if process is not None:
            _end_pipes(process)
        await asyncio.wait({self._reading}, timeout=_CLOSE_JOIN_S)
        for task in list(self._tasks):
            if task is not asyncio.current_task():
                task.cancel()

    async def _ended(self, process: asyncio.subprocess.Process, timeout: float | None) -> bool:
        """Whether ``process`` exited within ``timeout`` seconds (its exit, not the end of its pipes)."""
        if self._exited is not None:
            return await self._exit(timeout)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(process.wait(), timeout)
        return process.returncode is not None

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


OpenedClient = TypeVar("OpenedClient", bound=AsyncClient)


class Opening(Awaitable[OpenedClient]):
    """What :meth:`AsyncClient.spawn` and ``AsyncWebSocketClient.connect`` return: awaited, the client; as
    ``async with``, the client, closed at the end."""

    def __init__(self, opening: Awaitable[OpenedClient]) -> None:
        self._opening = opening
        self._client: OpenedClient | None = None

    def __await__(self) -> Generator[Any, None, OpenedClient]:
        return self._opening.__await__()

    async def __aenter__(self) -> OpenedClient:
        self._client = await self._opening
        return self._client

    async def __aexit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._client is not None:
            await self._client.close()
