"""``AsyncClient`` on uvloop's event loop: what the asyncio tests check of a spawned server and of a caller's own
streams holds there too (uvloop's pipe transports are no ``asyncio.WriteTransport``; its subprocess pipes take the
client's own stdout protocol as asyncio's do). Skipped where uvloop is not installed (Windows, an interpreter it
has no wheel for)."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
from collections.abc import Coroutine
from types import ModuleType
from typing import Any

import pytest
from support.processes import CLIENT_SERVER, child_env

uvloop = pytest.importorskip("uvloop", reason="uvloop is not installed on this interpreter")

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def child_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spawned servers import this checkout's rpcwire."""
    for name, value in child_env().items():
        monkeypatch.setenv(name, value)


def argv(impl: ModuleType) -> list[str]:
    return [sys.executable, CLIENT_SERVER, impl.__name__, "8"]


def on_uvloop(main: Coroutine[Any, Any, Any]) -> Any:
    """Run ``main`` on a new uvloop event loop (and check that it is one)."""

    async def checked() -> Any:
        assert isinstance(asyncio.get_running_loop(), uvloop.Loop)
        return await asyncio.wait_for(main, 60)

    return uvloop.run(checked())


def test_calls_batches_and_notifications_to_a_spawned_server(impl: ModuleType) -> None:
    async def main() -> list[Any]:
        async with impl.AsyncClient.spawn(argv(impl), timeout=30) as client:
            seen: list[Any] = []
            client.on_notification("log", seen.append)
            outcomes = [await client.call("add", [1, 2]), await client.call("announce", ["hi"])]
            outcomes.append(await asyncio.gather(*(client.call("add", [i, 1_000]) for i in range(500))))
            batch = await client.batch([("add", [1, 2]), ("nope", None)])
            outcomes += [batch[0], type(batch[1]).__name__]
            await client.notify("add", [1, 2])
            with pytest.raises(impl.MethodNotFound):
                await client.call("nope")
            outcomes.append(await client.call("progress", {"steps": 2}, on_progress=lambda *event: seen.append(event)))
            outcomes.append(seen)
            return outcomes

    outcomes = on_uvloop(main())
    assert outcomes[:2] == [3, "hi"]
    assert outcomes[2] == [i + 1_000 for i in range(500)]
    assert outcomes[3:6] == [3, "MethodNotFound", 2]
    assert outcomes[6] == [{"text": "hi"}, (1, 2, "step 1"), (2, 2, "step 2")]


def test_a_timeout_and_a_cancelled_task_cancel_the_call_on_the_server(impl: ModuleType) -> None:
    async def main() -> list[Any]:
        async with impl.AsyncClient.spawn(argv(impl), timeout=30) as client:
            assert await client.call("add", [0, 0]) == 0
            with pytest.raises(TimeoutError):
                await client.call("sleep", [20], timeout=0.5)
            task = asyncio.ensure_future(client.call("sleep", [20]))
            await asyncio.sleep(0.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            for _ in range(500):
                if len(ids := await client.call("cancelled_ids")) == 2:
                    return ids
                await asyncio.sleep(0.02)
            return await client.call("cancelled_ids")

    assert len(on_uvloop(main())) == 2


def test_a_server_that_exits_closes_the_client_with_its_exit_code(impl: ModuleType) -> None:
    script = "import sys; sys.stdin.readline(); sys.stderr.write('bye\\n'); raise SystemExit(7)"

    async def main() -> Any:
        client = await impl.AsyncClient.spawn([sys.executable, "-c", script], timeout=30, stderr="tail")
        try:
            with pytest.raises(impl.ConnectionClosed) as closed:
                await client.call("anything")
            return closed.value, client.returncode
        finally:
            await client.close()

    closed, returncode = on_uvloop(main())
    assert (closed.returncode, returncode) == (7, 7)
    assert closed.stderr_tail == ["bye"]


def test_a_callers_own_streams(impl: ModuleType) -> None:
    """Over a socket pair, a thread playing the server answers each call with its params."""
    ours, theirs = socket.socketpair()

    def serve() -> None:
        with theirs, theirs.makefile("rb") as lines:
            for line in lines:
                id_ = int(line.split(b'"id":')[1].split(b",")[0])
                theirs.sendall(b'{"jsonrpc":"2.0","id":%d,"result":%d}\n' % (id_, id_ * 10))

    server = threading.Thread(target=serve, daemon=True)
    server.start()

    async def main() -> list[Any]:
        reader, writer = await asyncio.open_connection(sock=ours)
        client = impl.AsyncClient(reader, writer, timeout=30)
        try:
            return list(await asyncio.gather(*(client.call("echo", [i]) for i in range(50))))
        finally:
            await client.close()

    results = on_uvloop(main())
    server.join(10)
    assert results == [id_ * 10 for id_ in range(1, 51)]
