"""``AsyncClient.spawn`` reads the server's stdout in the pipe's own protocol, from the moment asyncio connects
it: what the server writes before ``spawn`` returns (kept until the client is made), and an end that comes
that early, reach the client as later output does."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import rpcwire

pytestmark = pytest.mark.timeout(60)

SPEAKS_FIRST = r"""
import json, sys
out = sys.stdout.buffer
out.write(b'{"jsonrpc":"2.0","id":"s1","method":"hello","params":[1]}\n{"jsonrpc":"2.0","method":"log","params":{"text":"hi"}}\n')
out.flush()
answer = None
for line in sys.stdin.buffer:
    message = json.loads(line)
    if "method" not in message:
        answer = message
        continue
    out.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": answer}).encode() + b"\n")
    out.flush()
"""

SAYS_GOODBYE = r"""
import sys
sys.stdout.buffer.write(b'{"jsonrpc":"2.0","method":"log","params":{"text":"bye"}}\n')
sys.stdout.buffer.flush()
sys.stderr.write("leaving at once\n")
raise SystemExit(9)
"""


def test_what_the_server_writes_before_spawn_returns_is_read(impl: ModuleType, tmp_path: Path) -> None:
    script = tmp_path / "speaks_first.py"
    script.write_text(SPEAKS_FIRST)

    async def main() -> Any:
        asked = asyncio.Event()

        async def handler(method: str, params: Any) -> Any:
            asked.set()
            return [method, params]

        client = await impl.AsyncClient.spawn([sys.executable, str(script)], handler=handler, timeout=30)
        try:
            await asyncio.wait_for(asked.wait(), 20)  # its answer is written as the handler returns
            return await client.call("what")
        finally:
            await client.close(grace=1)

    assert asyncio.run(asyncio.wait_for(main(), 50)) == {"jsonrpc": "2.0", "id": "s1", "result": ["hello", [1]]}


def test_a_server_gone_before_the_first_call_fails_it_with_its_exit(impl: ModuleType, tmp_path: Path) -> None:
    script = tmp_path / "says_goodbye.py"
    script.write_text(SAYS_GOODBYE)

    async def main() -> rpcwire.ConnectionClosed:
        client = await impl.AsyncClient.spawn([sys.executable, str(script)], timeout=30)
        try:
            await asyncio.wait_for(asyncio.shield(client._reading), 20)  # the end was read, and closed the client
            with pytest.raises(rpcwire.ConnectionClosed) as closed:
                await client.call("anything")
            return closed.value
        finally:
            await client.close(grace=1)

    closed = asyncio.run(asyncio.wait_for(main(), 50))
    assert closed.returncode == 9
    assert closed.stderr_tail == ["leaving at once"]
