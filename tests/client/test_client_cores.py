"""Each client works through its own core alone: ``rpcwire.pure.Client`` and ``rpcwire.pure.AsyncClient`` call no
function of the native module where it exists (framing, the depth check of what they send), as ``rpcwire.Client``
calls the native ones. Seen from a profile of every C function the client's threads call, over a session that
takes each path (a lone call, a deep call, a notification, a batch; ``Content-Length`` frames)."""

from __future__ import annotations

import asyncio
import collections
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType, ModuleType
from typing import Any

import pytest
import rpcwire
import rpcwire.pure
from support.messages import needs_native, nested_list

pytestmark = [pytest.mark.timeout(60), needs_native("the pure client is compared with the native module's functions")]

# A server on Content-Length frames that echoes the params (pure: nothing native in the test's own process).
SERVER = (
    "import sys, rpcwire.pure as r; "
    "r.serve(lambda m, p: p, r.StdioTransport(sys.stdin.buffer, sys.stdout.buffer, framing='content-length'))"
)
# What any client asks the native module whatever its core: whether the native sequential serve is calling a
# handler on this thread (rpcwire._context), for the trace context a call inside a handler carries.
REQUEST_CONTEXT = {"_current_call", "_current_context", "_set_current_context"}
DEEP = [nested_list(40)]  # more brackets than the quick check lets by: the depth is counted


def _native_name(function: Any) -> str | None:
    """The name of ``function`` if the native module defines it (a function, or a method of its classes)."""
    owner = getattr(function, "__self__", None)
    native = rpcwire._rpcwire
    if owner is native or getattr(function, "__module__", None) == native.__name__:
        return function.__name__
    if owner is not None and type(owner).__module__ == native.__name__:
        return f"{type(owner).__name__}.{function.__name__}"
    return None


@contextmanager
def native_calls() -> Iterator[collections.Counter[str]]:
    """The native module's functions called meanwhile, on this thread and on every thread started meanwhile."""
    called: collections.Counter[str] = collections.Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call" and (name := _native_name(arg)) is not None:
            called[name] += 1

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        yield called
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def _sync_session(impl: ModuleType) -> None:
    with impl.Client.spawn([sys.executable, "-c", SERVER], framing="content-length", timeout=30) as client:
        assert client.call("echo", [1]) == [1]
        assert client.call("echo", DEEP) == DEEP
        client.notify("note", DEEP)
        assert client.batch([("echo", [1]), ("echo", DEEP)]) == [[1], DEEP]


def _async_session(impl: ModuleType) -> None:
    async def main() -> None:
        argv = [sys.executable, "-c", SERVER]
        async with await impl.AsyncClient.spawn(argv, framing="content-length", timeout=30) as client:
            assert await client.call("echo", [1]) == [1]
            assert await client.call("echo", DEEP) == DEEP
            await client.notify("note", DEEP)
            assert await client.batch([("echo", [1]), ("echo", DEEP)]) == [[1], DEEP]

    asyncio.run(asyncio.wait_for(main(), 50))


@pytest.mark.parametrize("session", [_sync_session, _async_session], ids=["Client", "AsyncClient"])
def test_the_pure_clients_call_nothing_of_the_native_module(session: Callable[[ModuleType], None]) -> None:
    with native_calls() as called:
        session(rpcwire.pure)
    assert set(called) <= REQUEST_CONTEXT, dict(called)


@pytest.mark.parametrize("session", [_sync_session, _async_session], ids=["Client", "AsyncClient"])
def test_the_native_clients_frame_and_check_through_the_native_module(session: Callable[[ModuleType], None]) -> None:
    """The profile sees the native module's functions (the test above can fail)."""
    with native_calls() as called:
        session(rpcwire)
    assert {"_encode_frame", "_nests_deeper", "_encode_request"} <= set(called), dict(called)
