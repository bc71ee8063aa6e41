"""The clients' error tree: every transport failure is a ``TransportError`` (an ``OSError``) and keeps the
built-in type it had before as a base, so that ``except TimeoutError``, ``except ConnectionError`` and
``except ValueError`` catch what they caught; the server's error answers (``JsonRpcError``) are never one.
Each case raises the error through a real client against a child server (the HTTP clients' cases are in
``test_http_client.py``, beside the scripted servers that misbehave)."""

from __future__ import annotations

import asyncio
import sys
from types import ModuleType

import pytest
import rpcwire

# A server that reads every line and answers none: each call's deadline passes.
SILENT = [sys.executable, "-c", "import sys\nfor _ in sys.stdin: pass"]
# A server that exits at once: every call finds the client closed.
EXITS = [sys.executable, "-c", "import sys; sys.exit(3)"]
# Echoes params; "nope" is answered -32601.
ECHO_SERVER = """
import sys

import rpcwire

def handler(method, params):
    if method == "nope":
        raise rpcwire.MethodNotFound()
    return params

rpcwire.serve(handler, rpcwire.StdioTransport(sys.stdin.buffer, sys.stdout.buffer))
"""
ECHO = [sys.executable, "-c", ECHO_SERVER]

TREE = {
    "ConnectionClosed": (ConnectionError,),
    "ConnectionFailed": (ConnectionError,),
    "CallTimeout": (TimeoutError,),
    "NotSent": (ValueError,),
    "HttpError": (),
}


@pytest.mark.parametrize("name", sorted(TREE))
def test_each_transport_failure_has_the_base_and_keeps_its_type(impl: ModuleType, name: str) -> None:
    error = getattr(impl, name)
    assert error is getattr(rpcwire, name)  # defined once: either core raises the same classes
    assert issubclass(error, impl.TransportError)
    assert issubclass(impl.TransportError, OSError)
    for kept in TREE[name]:
        assert issubclass(error, kept)
    assert not issubclass(error, impl.JsonRpcError)
    assert name in impl.__all__ and "TransportError" in impl.__all__


def test_a_json_rpc_error_is_not_a_transport_failure(impl: ModuleType) -> None:
    with impl.Client.spawn(ECHO, stderr="tail", timeout=30) as client:
        with pytest.raises(impl.MethodNotFound) as caught:
            client.call("nope")
        assert not isinstance(caught.value, impl.TransportError)


def test_a_call_timeout_is_caught_as_timeout_error_and_transport_error(impl: ModuleType) -> None:
    with impl.Client.spawn(SILENT, stderr="tail") as client:
        with pytest.raises(TimeoutError) as caught:
            client.call("ping", timeout=0.2)
        assert type(caught.value) is impl.CallTimeout
        assert isinstance(caught.value, impl.TransportError)
        # A batch's entry without an answer is the same type, in its place.
        (entry,) = client.batch([("ping", None)], timeout=0.2)
        assert type(entry) is impl.CallTimeout


def test_an_async_call_timeout_is_caught_as_timeout_error_and_transport_error(impl: ModuleType) -> None:
    async def main() -> tuple[BaseException, list[object]]:
        async with impl.AsyncClient.spawn(SILENT, stderr="tail") as client:
            try:
                await client.call("ping", timeout=0.2)
            except TimeoutError as exc:
                raised: BaseException = exc
            else:
                raise AssertionError("no timeout")
            return raised, await client.batch([("ping", None)], timeout=0.2)

    raised, entries = asyncio.run(main())
    assert type(raised) is impl.CallTimeout
    assert isinstance(raised, impl.TransportError)
    assert [type(entry) for entry in entries] == [impl.CallTimeout]


def test_a_message_over_the_limits_is_not_sent_and_a_value_error(impl: ModuleType) -> None:
    with impl.Client.spawn(ECHO, stderr="tail", timeout=30, max_message_bytes=1000, max_batch=2) as client:
        for attempt in (
            lambda: client.call("echo", "x" * 2000),
            lambda: client.notify("echo", "x" * 2000),
            lambda: client.batch([("echo", 1)] * 3),
        ):
            with pytest.raises(ValueError, match="not sent") as caught:
                attempt()
            assert type(caught.value) is impl.NotSent
            assert isinstance(caught.value, impl.TransportError)
        assert client.call("echo", [1]) == [1]  # nothing was sent: the connection goes on


def test_connection_closed_is_a_transport_error(impl: ModuleType) -> None:
    with impl.Client.spawn(EXITS, stderr="tail", timeout=30) as client, pytest.raises(impl.TransportError) as caught:
        client.call("ping")
    assert type(caught.value) is impl.ConnectionClosed
    assert isinstance(caught.value, ConnectionError)
    assert caught.value.returncode == 3


def test_an_except_clause_of_the_old_types_still_catches(impl: ModuleType) -> None:
    """What a caller wrote before the tree came (``except TimeoutError``, ``except ConnectionError``,
    ``except ValueError``, ``except OSError``) catches the same failures."""
    with impl.Client.spawn(SILENT, stderr="tail", max_message_bytes=100) as client:
        for old, attempt in (
            (TimeoutError, lambda: client.call("ping", timeout=0.1)),
            (ValueError, lambda: client.call("ping", "x" * 200)),
            (OSError, lambda: client.call("ping", timeout=0.1)),
        ):
            try:
                attempt()
            except old:
                pass
            else:
                raise AssertionError(f"{old.__name__} not raised")
    with impl.Client.spawn(EXITS, stderr="tail", timeout=30) as client:
        try:
            client.call("ping")
        except ConnectionError:
            pass
        else:
            raise AssertionError("ConnectionError not raised")
