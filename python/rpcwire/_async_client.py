"""The asyncio client, :class:`rpcwire.AsyncClient`: coroutine calls over asyncio streams, or a spawned server.

What every client shares (ids, matching answers, the server's own traffic, the dialects) is the
:class:`~rpcwire._peer._Peer` it builds on; here is how a client on an event loop writes and reads. Any number
of calls may be in flight at once: each message goes into the stream's buffer whole (a call waits, within its
deadline, while the buffer is full); one task reads every message and delivers it. Notification callbacks run
on a dispatcher task (an ``async def`` callback awaited), the server's own requests on tasks, a bounded number
at once. ``rpcwire.AsyncClient`` and ``rpcwire.pure.AsyncClient`` are this class bound to either core.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import logging
import os
import subprocess
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any

from rpcwire import _answer, _engine
from rpcwire._contract import Core
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
    _deadline,
    _left,
    _outcome,
    _Peer,
    _run_callback,
    _Sent,
    _StderrTail,
)
from rpcwire._types import (
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_MESSAGE_BYTES,
    ConnectionClosed,
    Framing,
    Handler,
    Refused,
    Request,
    Response,
)
from rpcwire.pure.framing import encode_frame

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


class AsyncClient(_Peer):
    """The asyncio client: ``AsyncClient(reader, writer)`` over asyncio streams, or :meth:`spawn`. Calls
    are coroutines; any number may be in flight at once. ``max_message_bytes``, ``max_depth``, ``max_batch``
    and ``framing`` are those of ``StdioTransport`` (checked alike, with the same errors): what the client
    reads (through the core's own framing decoder, ``FrameDecoder``: the transport's very rules), and what it
    checks its messages against before it sends them."""

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
        _process: asyncio.subprocess.Process | None = None,
        _exited: asyncio.Future[None] | None = None,
        _stderr_tail: _StderrTail | None = None,
    ) -> None:
        super().__init__(handler, dialect, timeout)
        self._exited = _exited
        self._limits = _checked_limits(self._core, max_message_bytes, max_depth, max_batch, framing)
        self._max_depth = self._limits[1]
        self._framing = framing
        self._stream_reader = reader
        self._writer = writer
        self._process = _process
        self._stderr_tail = _stderr_tail
        self._stderr_task: asyncio.Task[None] | None = None
        self._loop = asyncio.get_running_loop()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._callbacks = _Callbacks()
        self._dispatching: asyncio.Task[None] | None = None
        self._callback_done = asyncio.Event()  # set (and replaced) as each callback ends
        self._handler_slots = asyncio.Semaphore(_HANDLERS)
        self._serving = 0  # the server's requests handled or waiting for a slot
        self._draining: asyncio.Task[None] | None = None
        self._reading = self._loop.create_task(self._read_all())
        if _exited is not None:
            self._keep(self._loop.create_task(self._watch_exit()))

    @classmethod
    async def spawn(
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
    ) -> AsyncClient:
        """Start ``argv`` and talk to it over its stdin and stdout (see :meth:`Client.spawn`)."""
        _check_dialect(dialect)
        _checked_limits(cls._core, max_message_bytes, max_depth, max_batch, framing)
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.subprocess_exec(
            lambda: _ProcessProtocol(loop),
            *argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
        )
        process = asyncio.subprocess.Process(transport, protocol, loop)  # what create_subprocess_exec makes
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        tail = _StderrTail()
        client = cls(
            process.stdout,
            process.stdin,
            handler=handler,
            dialect=dialect,
            timeout=timeout,
            max_message_bytes=max_message_bytes,
            max_depth=max_depth,
            max_batch=max_batch,
            framing=framing,
            _process=process,
            _exited=protocol.exited,
            _stderr_tail=tail,
        )
        client._stderr_task = loop.create_task(_drain_stderr(tail, process.stderr))
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
        """As :meth:`Client.call`, awaited: ``timeout`` bounds the whole call, waiting to write included.
        Cancelling the awaiting task cancels the call on the server too."""
        if self._closed is not None:
            raise self._closed
        timeout = self._timeout if timeout is None else timeout
        deadline = _deadline(timeout)
        id_, line = self._request_line(method, params, on_progress)
        future: asyncio.Future[Response | ConnectionClosed] = self._loop.create_future()
        self._pending[id_] = future
        sent: list[_Sent] = []
        try:
            _check_outgoing(line, self._limits)
            await self._send(line, deadline, [id_], sent)
            response = await asyncio.wait_for(future, _left(deadline))
        except BaseException as exc:
            timed_out = isinstance(exc, (asyncio.TimeoutError, TimeoutError))
            self._abandon([id_], sent, "timeout" if timed_out else "cancelled")
            if timed_out:
                detail = f" ({exc})" if str(exc) else ""
                raise TimeoutError(f"no answer to {method!r} (id {id_}) within {timeout} s{detail}") from None
            raise
        if on_progress is not None:
            await self._progress_reported(id_, deadline)
        if isinstance(response, ConnectionClosed):
            raise response
        return _outcome(response)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no answer); as :meth:`Client.notify`."""
        if self._closed is not None:
            raise self._closed
        line = self._core._encode_request(method, params)
        _check_outgoing(line, self._limits)
        await self._send(line, _deadline(self._timeout), [], [])

    async def batch(self, calls: Iterable[tuple[str, Any]], *, timeout: float | None = None) -> list[Any]:
        """As :meth:`Client.batch`, awaited."""
        if self._closed is not None:
            raise self._closed
        timeout = self._timeout if timeout is None else timeout
        deadline = _deadline(timeout)
        ids, line = self._batch_lines(calls)
        if not ids:
            return []
        futures = [self._loop.create_future() for _ in ids]
        self._pending.update(zip(ids, futures, strict=True))
        sent: list[_Sent] = []
        try:
            _check_outgoing(line, self._limits, len(ids))
            await self._send(line, deadline, ids, sent)
            await asyncio.wait(futures, timeout=_left(deadline))
        except BaseException as exc:  # cancelled (or not sent): so are the entries still running
            timed_out = isinstance(exc, (asyncio.TimeoutError, TimeoutError))
            self._abandon(ids, sent, "timeout" if timed_out else "cancelled")
            if timed_out:
                raise TimeoutError(f"no answer to the batch within {timeout} s ({exc})") from None
            raise
        outcomes: list[Any] = []
        late: list[int] = []
        for id_, future in zip(ids, futures, strict=True):
            if not future.done():
                late.append(id_)
                outcomes.append(TimeoutError(f"no answer to batch entry {id_} within {timeout} s"))
                continue
            outcomes.append(_batch_outcome(future.result()))
        if late:
            self._abandon(late, sent, "timeout")
        return outcomes

    async def _send(self, line: bytes, deadline: float | None, ids: Sequence[int], sent: list[_Sent]) -> None:
        """Hand one message to the stream, once its buffer holds less than ``_WRITE_BUFFER`` (waiting for
        that until ``deadline``: ``TimeoutError``, nothing sent); ``ids``: the calls it makes."""
        if self._closed is not None:
            raise self._closed
        try:
            if self._writer.transport.get_write_buffer_size() > _WRITE_BUFFER:
                await self._drained(deadline)
            self._put(line, ids, sent)
        except (ConnectionError, RuntimeError) as exc:  # RuntimeError: a closed transport
            self._close_with(await self._connection_closed(f"the server's input is closed ({exc})"))
            assert self._closed is not None
            raise self._closed from None

    async def _drained(self, deadline: float | None) -> None:
        """Until the stream's buffer drained (one ``drain`` shared by every waiter), or ``TimeoutError``."""
        if self._draining is None or self._draining.done():
            self._draining = self._loop.create_task(self._writer.drain())
            self._draining.add_done_callback(lambda task: task.cancelled() or task.exception())
        try:
            await asyncio.wait_for(asyncio.shield(self._draining), _left(deadline))
        except asyncio.TimeoutError:
            raise TimeoutError("not sent: the server read nothing until the deadline") from None

    def _send_cancel(self, line: bytes) -> None:
        """Into the stream's buffer: it never waits."""
        with contextlib.suppress(Exception):
            self._put(line, [], [])

    def _put(self, line: bytes, ids: Sequence[int], sent: list[_Sent]) -> None:
        """Hand one message to the stream's buffer (never waits), after its place in the ledger."""
        self._on_start(line, ids, sent)()
        self._writer.write(encode_frame(line) if self._framing == "content-length" else line + b"\n")

    # --- reading ---------------------------------------------------------------------------------

    async def _read_all(self) -> None:
        cause = "the server closed its output"
        try:
            await self._read_messages()
        except Exception as exc:  # a stream that fails, or a delivery that does: the client cannot go on
            cause = f"reading from the server failed: {exc!r}"
            logger.exception("the client's reader stopped")
        self._close_with(await self._connection_closed(cause))

    async def _read_messages(self) -> None:
        """Feed what the stream gives to the core's framing decoder (``StdioTransport``'s rules: lines, or
        ``framing="content-length"`` frames read tolerantly) and deliver every message it hands out: one
        wake-up of this task per chunk, not per message, which is what many answers in flight at once cost.
        A message the decoder drops (over ``max_message_bytes``, as it arrives; a frame that cannot be read)
        is logged."""
        decoder = self._core.FrameDecoder(self._framing, max_message_bytes=self._limits[0])
        while True:
            chunk = await self._stream_reader.read(1 << 16)
            if chunk:
                decoder.feed(chunk)
            else:
                decoder.close()
            while (message := decoder.next()) is not None:
                if isinstance(message, Refused):
                    logger.warning("dropped a message from the server: %s", message.reason)
                    continue
                parsed = self._core._parse_incoming(message, self._max_depth)
                self._deliver((parsed, message) if isinstance(parsed, str) else parsed)
            if not chunk:
                return

    async def _watch_exit(self) -> None:
        """A spawned server's exit: what it left in its pipes is read (for at most ``_REMAINS_S``), then its
        pipes are closed, so that the reader ends even while a child of the server still holds them."""
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
        if returncode is not None and self._stderr_task is not None:
            await asyncio.wait({self._stderr_task}, timeout=0.5)  # its last lines, written as it exited
        return _closed_error(cause, returncode, self._stderr_tail)

    async def close(self, grace: float = 5.0) -> None:
        """As :meth:`Client.close`, awaited."""
        with contextlib.suppress(Exception):
            self._writer.close()
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
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(self._reading, _CLOSE_JOIN_S)
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


class _ProcessProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's protocol for a spawned server (what ``create_subprocess_exec`` uses), which also tells when
    the process exited (``exited``): ``Process.wait()`` waits for its pipes to close too, and a child of
    the server may hold them open."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=1 << 16, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


def _end_pipes(process: asyncio.subprocess.Process) -> None:
    """Close the pipes of an ended server (asyncio's subprocess transport, which ``Process`` keeps as
    ``_transport``): its readers get their end of input even while a child of it holds the pipes open."""
    transport = getattr(process, "_transport", None)
    if transport is not None:
        with contextlib.suppress(Exception):
            transport.close()


async def _drain_stderr(tail: _StderrTail, stderr: asyncio.StreamReader) -> None:
    """Read a spawned server's stderr into ``tail`` to its end."""
    partial = b""
    try:
        with contextlib.suppress(Exception):
            while chunk := await stderr.read(1 << 16):
                partial = tail.feed(partial, chunk)
    finally:
        tail.end(partial)
