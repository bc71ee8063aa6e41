"""``max_concurrency``'s default follows the handler (docs/semantics.md, "Concurrency"): a sync handler is served
one request at a time, in order; an ``async def`` one as tasks, 64 at most, through every entry point
(``serve``, ``StdioTransport.serve``, ``serve_async``, the CLI), unless ``max_concurrency`` says otherwise.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support.messages import ok, request
from support.processes import run_rpcwire

WAIT = 5.0  # seconds: only reached when fewer tasks run at once than the test needs


class Peak:
    """An async handler whose calls each wait until ``target`` of them run at once (or ``WAIT`` passes); it
    records the most that ran at once."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.running = 0
        self.peak = 0
        self.reached: asyncio.Event | None = None

    async def handler(self, method: str, params: Any) -> Any:
        if self.reached is None:
            self.reached = asyncio.Event()
        self.running += 1
        self.peak = max(self.peak, self.running)
        if self.running >= self.target:
            self.reached.set()
        try:
            await asyncio.wait_for(self.reached.wait(), WAIT)
        finally:
            self.running -= 1
        return params


ENTRIES: dict[str, Callable[[ModuleType, Any, Any], None]] = {
    "serve": lambda impl, handler, transport: impl.serve(handler, transport),
    "StdioTransport.serve": lambda impl, handler, transport: transport.serve(handler),
    "serve_async": lambda impl, handler, transport: asyncio.run(impl.serve_async(handler, transport)),
}


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_an_async_handler_runs_64_tasks_at_once_by_default(impl: ModuleType, entry: str) -> None:
    peak = Peak(64)
    data = b"".join(request("m", [i], id=i) for i in range(100))
    out = io.BytesIO()
    ENTRIES[entry](impl, peak.handler, impl.StdioTransport(io.BytesIO(data), out))
    got = sorted((json.loads(line) for line in out.getvalue().splitlines()), key=lambda answer: answer["id"])
    assert got == [ok(i, [i]) for i in range(100)]
    assert peak.peak == 64


def test_max_concurrency_given_is_the_async_handlers_bound(impl: ModuleType) -> None:
    peak = Peak(3)
    data = b"".join(request("m", [i], id=i) for i in range(10))
    out = io.BytesIO()
    impl.serve(peak.handler, impl.StdioTransport(io.BytesIO(data), out), max_concurrency=3)
    assert len(out.getvalue().splitlines()) == 10
    assert peak.peak == 3


def test_a_sync_handler_is_still_served_one_request_at_a_time(impl: ModuleType) -> None:
    running: list[int] = []
    peak = 0

    def handler(method: str, params: Any) -> Any:
        nonlocal peak
        running.append(1)
        peak = max(peak, len(running))
        running.pop()
        return params

    data = b"".join(request("m", [i], id=i) for i in range(20))
    out = io.BytesIO()
    impl.StdioTransport(io.BytesIO(data), out).serve(handler)
    assert out.getvalue().splitlines() == [json.dumps(ok(i, [i]), separators=(",", ":")).encode() for i in range(20)]
    assert peak == 1


ASYNC_HANDLERS = """
import asyncio

from rpcwire import methods

released = None


async def first():
    global released
    released = released or asyncio.Event()
    try:
        await asyncio.wait_for(released.wait(), 5)
    except asyncio.TimeoutError:
        return "alone"
    return "together"


async def second():
    global released
    released = released or asyncio.Event()
    released.set()
    return "released"


handler = methods({"first": first, "second": second})
"""


def test_the_cli_serves_an_async_handler_concurrently_by_default(tmp_path: Path) -> None:
    (tmp_path / "handlers.py").write_text(ASYNC_HANDLERS)
    process = run_rpcwire(
        "serve", "handlers:handler", "--app-dir", str(tmp_path), input=request("first", id=1) + request("second", id=2)
    )
    assert process.returncode == 0, process.stderr.decode(errors="replace")
    got = sorted((json.loads(line) for line in process.stdout.splitlines()), key=lambda answer: answer["id"])
    assert got == [ok(1, "together"), ok(2, "released")]
