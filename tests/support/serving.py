"""Serve bytes and collect what was written: the in-process server of most tests, in each serving mode.

``served`` is the sequential ``serve`` over a ``StdioTransport`` reading the given bytes (through a stream
of the test's choice) and writing into memory; ``serve_in_mode`` runs a transport under one of the
concurrent engines (``MODES``: worker threads, asyncio with a sync handler, asyncio with an async one).
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from types import ModuleType
from typing import Any

from support.messages import Handler, echo

MODES = ["threads", "asyncio-sync", "asyncio-async"]


def transport_for(impl: ModuleType, data: bytes, **options: Any) -> tuple[Any, io.BytesIO]:
    """A transport of ``impl`` reading ``data`` and writing into the returned ``BytesIO``."""
    out = io.BytesIO()
    return impl.StdioTransport(io.BytesIO(data), out, **options), out


def served(
    impl: ModuleType,
    data: bytes | Any,
    handler: Handler = echo,
    stream: Callable[[bytes], Any] = io.BytesIO,
    *,
    max_concurrency: int = 1,
    **options: Any,
) -> bytes:
    """What ``impl.serve(handler, ...)`` writes for ``data``: bytes, read through ``stream(data)``, or an input
    stream already made. ``options`` go to the ``StdioTransport`` (limits, framing)."""
    stdin = stream(data) if isinstance(data, bytes) else data
    out = io.BytesIO()
    impl.serve(handler, impl.StdioTransport(stdin, out, **options), max_concurrency=max_concurrency)
    return out.getvalue()


def serve_in_mode(
    mode: str,
    impl: ModuleType,
    handler: Handler,
    transport: Any,
    *,
    n: int = 4,
    async_handler: Callable[[str, Any], Any] | None = None,
) -> None:
    """Serve ``transport`` in ``mode`` (one of ``MODES``) with at most ``n`` requests at once. For
    ``asyncio-async`` the handler is ``async_handler``, by default ``handler`` run by ``asyncio.to_thread`` (in
    the request's context)."""
    if mode == "threads":
        impl.serve(handler, transport, max_concurrency=n)
    elif mode == "asyncio-sync":
        asyncio.run(impl.serve_async(handler, transport, max_concurrency=n))
    else:
        assert mode == "asyncio-async", mode
        if async_handler is None:

            async def async_handler(method: str, params: Any) -> Any:
                return await asyncio.to_thread(handler, method, params)

        asyncio.run(impl.serve_async(async_handler, transport, max_concurrency=n))
