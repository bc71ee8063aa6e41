"""What ``AsyncWebSocketClient`` puts in a frame: one message, its JSON text alone, whichever way it was written
(a call's own quick path, a notification, a batch, a cancellation). A server of the ``websockets`` library on
127.0.0.1 (an ephemeral port) records each frame as it arrived and answers the calls."""

from __future__ import annotations

import asyncio
import json
from types import ModuleType
from typing import Any

import pytest

websockets = pytest.importorskip("websockets")
from websockets.asyncio.server import ServerConnection, serve  # noqa: E402

WAIT = 30.0  # every wait is bounded by this


async def recording_server(frames: list[bytes | str]) -> Any:
    """A JSON-RPC server over WebSocket that keeps every frame it is sent: a call to ``echo`` is answered with
    its params, one to ``slow`` never; a batch is answered entry by entry."""

    async def answer(message: dict[str, Any]) -> dict[str, Any] | None:
        if "id" not in message or message.get("method") == "slow":
            return None
        return {"jsonrpc": "2.0", "id": message["id"], "result": message.get("params")}

    async def session(connection: ServerConnection) -> None:
        async for frame in connection:
            frames.append(frame)
            message = json.loads(frame)
            if isinstance(message, list):
                answers = [a for entry in message if (a := await answer(entry)) is not None]
                if answers:
                    await connection.send(json.dumps(answers))
            elif (one := await answer(message)) is not None:
                await connection.send(json.dumps(one))

    return await serve(session, "127.0.0.1", 0, subprotocols=["jsonrpc"])  # type: ignore[list-item]


def test_each_frame_is_the_message_alone_without_a_line_end(impl: ModuleType) -> None:
    frames: list[bytes | str] = []

    async def main() -> list[Any]:
        server = await recording_server(frames)
        port = server.sockets[0].getsockname()[1]
        try:
            async with impl.AsyncWebSocketClient.connect(f"ws://127.0.0.1:{port}/", timeout=WAIT) as client:
                outcomes = [await client.call("echo", {"text": "hello", "n": 1})]
                outcomes.append(await asyncio.gather(*(client.call("echo", [i]) for i in range(3))))
                await client.notify("note", {"seen": True})
                outcomes.append(await client.batch([("echo", [1]), ("echo", [2])]))
                with pytest.raises(impl.CallTimeout):
                    await client.call("slow", timeout=0.2)  # given up: a cancellation follows, in a frame
                outcomes.append(await client.call("echo", "last"))  # the server read the cancellation before it
                return outcomes
        finally:
            server.close()
            await asyncio.wait_for(server.wait_closed(), WAIT)

    outcomes = asyncio.run(asyncio.wait_for(main(), 2 * WAIT))
    assert outcomes == [{"text": "hello", "n": 1}, [[0], [1], [2]], [[1], [2]], "last"]
    assert len(frames) == 9  # 5 calls and the slow one, the notification, the batch, the cancellation
    for frame in frames:
        text = frame if isinstance(frame, str) else frame.decode()
        assert text == text.strip(), f"a frame with white space around its message: {text!r}"
    methods = [message.get("method") for message in map(json.loads, frames) if isinstance(message, dict)]
    assert methods == ["echo", "echo", "echo", "echo", "note", "slow", "notifications/cancelled", "echo"]
