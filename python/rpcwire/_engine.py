"""The engine: how requests are scheduled over a core, written once for both cores. :func:`serve` chooses.

A transport (native or :mod:`rpcwire.pure`) is the *core* (``rpcwire._contract.Transport``): it reads and
classifies messages (``_read_message``), builds answer bytes (``_answer_result``, ``_answer_error``) and writes
whole lines (``_write_line``, ``_write_lines``, ``write_notification``). :func:`serve` is the one place that
chooses how requests are run over it:

- **Sequential** (``max_concurrency=1``, a sync handler): one message at a time, in order, in the core's
  own loop (``transport._serve_sequential``: Rust's in the native module, :func:`serve_sequential` for
  :mod:`rpcwire.pure`). Both write the same bytes.
- **Threads** (``max_concurrency=N > 1``, a sync handler): :mod:`rpcwire._thread_server`.
- **asyncio** (an ``async def`` handler, or :func:`serve_async` in a running loop): :mod:`rpcwire._async_server`.

In both concurrent modes, at most N handlers run at once, and reading goes on while up to N more requests
wait their turn (so that a cancellation or a notification behind them is still read: :mod:`rpcwire._in_flight`;
a request cancelled while it waits is never run). With 2N requests read and unanswered, or more answers
waiting to be written than the writer's bounds (a peer that does not read), reading pauses: nothing is queued
without bound. Answers go out through one writer thread (:mod:`rpcwire._answer_writer`); every answer
finished before a notification's handler starts is written before it starts. Handlers run on the worker pool
of :mod:`rpcwire._workers`. A handler's ``BaseException`` stops the server: what is in flight gets
``EXIT_GRACE`` to finish, what finished is written, then it is raised. Each message is answered through
``rpcwire._answer.each_request``, as in every other serving path.

:func:`serve` and :func:`serve_async` keep stray output off the process's stdout while they write the wire
there (``rpcwire._stdout_guard``).

Every request runs with a :class:`RequestContext` (:func:`current_request`): its id and method, whether
it was cancelled (LSP's and MCP's cancellations, consumed by the server and never passed to the handler),
progress in the dialect its params ask for, and the W3C ``traceparent`` its ``_meta`` carries (added to the
``rpcwire`` logger's records while it runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Callable, Iterator
from typing import Any

from rpcwire._answer import answer_message, call
from rpcwire._async_server import AsyncServer
from rpcwire._context import RequestContext, current_request
from rpcwire._contract import Transport
from rpcwire._stdout_guard import guarded_stdout
from rpcwire._thread_server import ThreadServer
from rpcwire._types import Handler, Request

__all__ = [
    "RequestContext",
    "async_asker",
    "current_request",
    "is_async_handler",
    "serve",
    "serve_async",
    "serve_sequential",
]

logger: logging.Logger = logging.getLogger("rpcwire")


def serve_sequential(handler: Handler, transport: Transport) -> None:
    """One message at a time, in order, on the calling thread (``rpcwire.pure``'s ``_serve_sequential``)."""

    def call_one(request: Request) -> bytes | None:
        return call(transport, request, handler, RequestContext(request, transport))

    while (message := transport._read_message()) is not None:
        if (answer := answer_message(message, call_one)) is not None:
            transport._write_line(answer)


async def serve_async(
    handler: Handler, transport: Any, *, max_concurrency: int = 64, guard_stdout: bool = True
) -> None:
    """Serve inside a running event loop until end of input: each request as a task, at most N at once.

    An ``async def`` handler is awaited on the loop; a sync one runs on a worker thread. Reading happens
    on a thread of its own, so the loop never waits for input. At end of input the requests in flight
    are awaited; if this coroutine is cancelled, so are they. ``guard_stdout``: as for :func:`serve`.
    """
    _check_max_concurrency(max_concurrency)
    with _serving(transport), guarded_stdout(transport, guard_stdout):  # before the server starts its workers
        await AsyncServer(handler, transport, max_concurrency, is_async=is_async_handler(handler)).serve()


def serve(handler: Handler, transport: Any, *, max_concurrency: int = 1, guard_stdout: bool = True) -> None:
    """Answer every request with ``handler(method, params)`` until end of input.

    ``max_concurrency=1`` (a sync handler): one request at a time, in order. ``N > 1``: up to N requests
    run at once on worker threads, each answered as it finishes. An ``async def`` handler runs on an
    event loop of its own (:func:`serve_async`, with N or 64 tasks at most).

    ``guard_stdout`` (default true): when the transport writes to the process's fd 1, the wire gets a
    descriptor of its own while serving, and fd 1 and ``sys.stdout`` go to stderr, so that a stray
    ``print`` cannot corrupt it; both are restored on the way out.
    """
    _check_max_concurrency(max_concurrency)
    with _serving(transport):  # a transport served elsewhere is refused before fd 1 is touched
        pass
    with guarded_stdout(transport, guard_stdout):
        if is_async_handler(handler):
            asyncio.run(serve_async(handler, transport, max_concurrency=max_concurrency, guard_stdout=False))
        elif max_concurrency == 1:
            transport._serve_sequential(handler)  # the core's own loop
        else:
            with _serving(transport):
                ThreadServer(handler, transport, max_concurrency).serve()


@contextlib.contextmanager
def _serving(transport: Transport) -> Iterator[None]:
    """While a server runs over ``transport``: a second ``serve`` on it raises ``RuntimeError`` (two readers
    would share the input, and an answer could wait behind the other's read until more input came)."""
    transport._start_serving()
    try:
        yield
    finally:
        transport._stop_serving()


def is_async_handler(handler: Any) -> bool:
    """An ``async def`` handler, or one that says it returns awaitables (``rpcwire.methods`` holding an
    ``async def`` function sets ``rpcwire_async``; ``inspect.markcoroutinefunction`` is 3.12+ only)."""
    return inspect.iscoroutinefunction(handler) or getattr(handler, "rpcwire_async", False) is True


def async_asker(handler: Any) -> Callable[[], bool]:
    """A function telling, each time it is called, whether ``handler`` is async (:func:`is_async_handler`), for a
    caller that asks at every request (the HTTP apps): the answer is fixed once, unless the handler may change
    its mind (an ``rpcwire.methods`` registry made before its functions may gain an ``async def`` one), whose
    ``rpcwire_async`` is then read at each call (``inspect.iscoroutinefunction`` is too slow to ask each time)."""
    if hasattr(handler, "rpcwire_async") and not inspect.iscoroutinefunction(handler):
        return lambda: getattr(handler, "rpcwire_async", False) is True
    fixed = is_async_handler(handler)
    return lambda: fixed


def _check_max_concurrency(max_concurrency: int) -> None:
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int):
        raise TypeError(f"max_concurrency must be an int, not {type(max_concurrency).__name__}")
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency}")
