"""The engine: how requests are scheduled over a core, written once for both cores. :func:`serve` chooses.

A transport (native or :mod:`rpcwire.pure`) is the *core* (``rpcwire._contract.Transport``): it reads and
classifies messages (``_read_message``), builds answer bytes (``_answer_result``, ``_answer_error``) and writes
whole lines (``_write_line``, ``_write_lines``, ``write_notification``). :func:`serve` is the one place that
chooses how requests are run over it:

- **Sequential** (``max_concurrency=1``, the default for a sync handler): one message at a time, in order, in the core's
  own loop (``transport._serve_sequential``: Rust's in the native module, :func:`serve_sequential` for
  :mod:`rpcwire.pure`). Both write the same bytes.
- **Threads** (``max_concurrency=N > 1``, a sync handler): :mod:`rpcwire._thread_server`.
- **asyncio** (an ``async def`` handler, 64 tasks at most unless ``max_concurrency`` says otherwise, or
  :func:`serve_async` in a running loop): :mod:`rpcwire._async_server`.

In both concurrent modes, the rules about what is in flight are the serving session's (:mod:`rpcwire._session`,
sans-IO), and the two servers are its drivers: at most N handlers run at once, and up to N more requests wait
their turn; reading goes on past them, the requests read then held (up to 1,024 of them or 1 MiB), so that a
cancellation or a notification behind them is still read and acted on at once (a request cancelled before it
started is never run). With the held requests at their bounds, or more answers waiting to be written than the
session's bounds (a peer that does not read), reading pauses: nothing is queued without bound. A read that may
wait for input is made by a reader thread in both, so a stop never waits for more input. Answers go out through
one writer thread (:mod:`rpcwire._answer_writer`); every answer finished before a notification's handler starts
is written before it starts. Handlers run on the worker pool of :mod:`rpcwire._workers`. A handler's
``BaseException`` stops the server: what is in flight gets ``EXIT_GRACE`` to finish, what finished is written,
then it is raised. Each message is answered through ``rpcwire._answer.each_request``, as in every other serving
path.

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
import threading
from collections.abc import Callable, Iterator
from typing import Any

from rpcwire._answer import answer_message, call
from rpcwire._async_server import AsyncServer
from rpcwire._context import RequestContext, current_request
from rpcwire._contract import Transport
from rpcwire._session import Session
from rpcwire._stdout_guard import guarded_stdout
from rpcwire._thread_server import ThreadServer
from rpcwire._types import ASYNC_MAX_CONCURRENCY, BY_HANDLER, Handler, Request
from rpcwire._types import ByHandler as _ByHandler

__all__ = [
    "ASYNC_MAX_CONCURRENCY",
    "BY_HANDLER",
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
    handler: Handler, transport: Any, *, max_concurrency: int = ASYNC_MAX_CONCURRENCY, guard_stdout: bool = True
) -> None:
    """Serve inside a running event loop until end of input: each request as a task, at most N at once.

    An ``async def`` handler is awaited on the loop; a sync one runs on a worker thread. Reading happens
    on a thread of its own, so the loop never waits for input. At end of input the requests in flight
    are awaited; if this coroutine is cancelled, so are they. ``guard_stdout``: as for :func:`serve`.
    """
    _check_max_concurrency(max_concurrency)
    with _serving(transport), guarded_stdout(transport, guard_stdout):  # before the server starts its workers
        await _serve_async(handler, transport, max_concurrency)


async def _serve_async(
    handler: Handler, transport: Any, max_concurrency: int, watch: Callable[[Session], None] | None = None
) -> None:
    server = AsyncServer(handler, transport, max_concurrency, is_async=is_async_handler(handler))
    if watch is not None:
        watch(server.session)
    await server.serve()


def serve(handler: Handler, transport: Any, *, max_concurrency: int = BY_HANDLER, guard_stdout: bool = True) -> None:
    """Answer every request with ``handler(method, params)`` until end of input.

    A sync handler: one request at a time, in order (``max_concurrency=1``, the default); with ``N > 1``, up
    to N requests run at once on worker threads, each answered as it finishes. An ``async def`` handler runs
    on an event loop of its own (:func:`serve_async`), each request a task, at most N at once: by default 64
    (``ASYNC_MAX_CONCURRENCY``), as :func:`serve_async`; ``max_concurrency=1`` runs one at a time.

    ``guard_stdout`` (default true): when the transport writes to the process's fd 1, the wire gets a
    descriptor of its own while serving, and fd 1 and ``sys.stdout`` go to stderr, so that a stray
    ``print`` cannot corrupt it; both are restored on the way out.

    ``RuntimeError`` if a ``serve`` already runs over ``transport``, raised before anything is touched.
    """
    serve_watched(handler, transport, max_concurrency, guard_stdout=guard_stdout)


def serve_watched(
    handler: Handler,
    transport: Any,
    max_concurrency: int,
    *,
    guard_stdout: bool,
    watch: Callable[[Session], None] | None = None,
) -> None:
    """:func:`serve`, its concurrent driver's session handed to ``watch`` before it starts (``--listen``'s idle
    timeout asks it whether anything is in flight; the sequential loop has none: nothing is in flight while it
    reads)."""
    _check_max_concurrency(max_concurrency)
    is_async = is_async_handler(handler)
    if is_async and type(max_concurrency) is _ByHandler:
        max_concurrency = ASYNC_MAX_CONCURRENCY
    sequential = not is_async and max_concurrency == 1
    # The transport is claimed before fd 1 (a serve refused never touches the guard another one holds), and
    # held until the guard is given back.
    with _serving(transport, core=not sequential), guarded_stdout(transport, guard_stdout):
        if is_async:
            asyncio.run(_serve_async(handler, transport, max_concurrency, watch))
        elif sequential:
            transport._serve_sequential(handler)  # the core's own loop, which marks the core served itself
        else:
            server = ThreadServer(handler, transport, max_concurrency)
            if watch is not None:
                watch(server.session)
            server.serve()


_ALREADY_SERVING = "this transport is already serving: serve() was called on it again before the first call returned"
_claims = threading.Lock()
_served: set[int] = set()  # the ids of the transports a serve of this process holds


@contextlib.contextmanager
def _serving(transport: Transport, *, core: bool = True) -> Iterator[None]:
    """While a server runs over ``transport``: a second ``serve`` on it raises ``RuntimeError`` (two readers
    would share the input, and an answer could wait behind the other's read until more input came).

    One check, under one lock, before anything else is done: the engine's own mark, then the core's
    (``_start_serving``). ``core=False``: the core's mark is only looked at, for the core's sequential loop,
    which sets it itself (no other ``serve`` can come in between: the engine's mark is held)."""
    key = id(transport)  # unique while it is held: the transport lives at least as long as its serve
    with _claims:
        if key in _served:
            raise RuntimeError(_ALREADY_SERVING)
        transport._start_serving()  # RuntimeError if the core is served without the engine
        if not core:
            transport._stop_serving()
        _served.add(key)
    try:
        yield
    finally:
        with _claims:
            if core:
                transport._stop_serving()
            _served.discard(key)


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
