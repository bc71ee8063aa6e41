"""The hand-written asyncio + orjson client the async clients are measured against (bench/client_bench.py,
bench/client_instructions.py): one class, so both benchmarks time the same floor."""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any

import orjson


class AsyncOrjsonClient:
    """A hand-written asyncio client: the server's stdout read by a protocol (``data_received`` splits lines,
    ``orjson.loads``, resolves the call's future), ``orjson.dumps`` written to the stdin pipe's transport:
    what asyncio itself costs a call, the floor of any asyncio client."""

    def __init__(self, process: subprocess.Popen[bytes], write: Any, pending: dict[int, Any]) -> None:
        self._process = process
        self._write = write
        self._pending = pending
        self._ids = iter(range(1, 1 << 62))

    @classmethod
    async def spawn(cls, argv: list[str]) -> AsyncOrjsonClient:
        loop = asyncio.get_running_loop()
        process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        pending: dict[int, asyncio.Future[Any]] = {}

        class Answers(asyncio.Protocol):
            rest = b""

            def data_received(self, data: bytes) -> None:
                lines = (self.rest + data).split(b"\n")
                self.rest = lines.pop()
                for line in lines:
                    answer = orjson.loads(line)
                    pending.pop(answer["id"]).set_result(answer["result"])

        await loop.connect_read_pipe(Answers, process.stdout)
        stdin, _ = await loop.connect_write_pipe(asyncio.Protocol, process.stdin)
        return cls(process, stdin.write, pending)

    async def call(self, method: str, params: Any) -> Any:
        id_ = next(self._ids)
        future = self._pending[id_] = asyncio.get_running_loop().create_future()
        self._write(orjson.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + b"\n")
        return await future

    async def close(self) -> None:
        self._process.kill()
        await asyncio.to_thread(self._process.wait)
