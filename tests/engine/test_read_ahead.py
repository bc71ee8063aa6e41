"""Reading past the pause (docs/semantics.md, "Concurrency"): with 2N requests read and unanswered, the concurrent
engines go on reading, holding the requests (up to 1,024 of them or 1 MiB), so that a cancellation behind them is
acted on at once: a request cancelled before it started never runs, and an LSP one is answered -32800 at once.

Counts, not time: handlers wait for events the test sets once what it sent has been seen.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from support.messages import err, ok, request
from support.serving import MODES, serve_in_mode

WAIT = 5.0  # seconds: only ever reached when the behaviour under test is broken
N = 2


class Watched(io.BytesIO):
    """An output that calls ``on_line(line)`` for every line written."""

    def __init__(self) -> None:
        super().__init__()
        self.on_line: Callable[[bytes], None] = lambda line: None

    def write(self, data: Any) -> int:
        written = super().write(data)
        for line in bytes(data).splitlines():
            self.on_line(line)
        return written


class Server:
    """``serve`` in ``mode`` on a thread of the test's, over ``data``; ``slow`` requests block until
    :attr:`release`, a ``probe`` notification says it was read, every other request is counted in :attr:`ran`."""

    def __init__(
        self, impl: ModuleType, mode: str, data: bytes, on_line: Callable[[bytes], None] = lambda line: None
    ) -> None:
        self.release = threading.Event()
        self.probed = threading.Event()
        self.ran: list[Any] = []
        self.lock = threading.Lock()
        self.out = Watched()
        self.out.on_line = on_line
        self.raised: list[BaseException] = []
        transport = impl.StdioTransport(io.BytesIO(data), self.out)
        self.thread = threading.Thread(target=self.run, args=(mode, impl, transport), daemon=True)
        self.thread.start()

    def handler(self, method: str, params: Any) -> Any:
        if method == "probe":
            self.probed.set()
            return None
        with self.lock:
            self.ran.append(params)
        if method == "slow":
            assert self.release.wait(WAIT * 4)
        return params

    def run(self, mode: str, impl: ModuleType, transport: Any) -> None:
        try:
            serve_in_mode(mode, impl, self.handler, transport, n=N)
        except BaseException as exc:
            self.raised.append(exc)

    def finish(self) -> dict[Any, Any]:
        self.release.set()
        self.thread.join(WAIT * 4)
        assert not self.thread.is_alive() and self.raised == []
        return {answer["id"]: answer for answer in map(json.loads, self.out.getvalue().splitlines())}


def cancel(dialect: str, id_: Any) -> bytes:
    if dialect == "lsp":
        return request("$/cancelRequest", {"id": id_}, id=...)
    return request("notifications/cancelled", {"requestId": id_, "reason": "test"}, id=...)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dialect", ["lsp", "mcp"])
def test_cancellations_behind_the_pause_are_acted_on_at_once(impl: ModuleType, mode: str, dialect: str) -> None:
    """N slow requests run, N more wait (the pause), 20 more are read past it; the cancellations of all the
    waiting ones come after them, then a fresh request. None of the cancelled requests runs; the fresh one
    does, and is answered."""
    queued = [f"q{i}" for i in range(N + 20)]
    data = b"".join(request("slow", [i], id=i) for i in range(N))
    data += b"".join(request("queued", [id_], id=id_) for id_ in queued)
    data += b"".join(cancel(dialect, id_) for id_ in queued)
    data += request("probe", id=...) + request("fresh", ["fresh"], id="fresh")
    server = Server(impl, mode, data)
    try:
        assert server.probed.wait(WAIT), "the cancellations and what follows them were not read"
    finally:
        got = server.finish()
    assert sorted(map(str, server.ran)) == sorted(map(str, [[0], [1], ["fresh"]]))  # nothing cancelled ran
    expected = {i: ok(i, [i]) for i in range(N)} | {"fresh": ok("fresh", ["fresh"])}
    if dialect == "lsp":
        expected |= {id_: err(id_, -32800, "Request cancelled") for id_ in queued}
    assert got == expected


@pytest.mark.parametrize("mode", MODES)
def test_a_held_lsp_request_cancelled_is_answered_before_the_slow_ones_end(impl: ModuleType, mode: str) -> None:
    """Its -32800 goes out while every handler is still busy: nothing waits for a worker to say it."""
    data = b"".join(request("slow", [i], id=i) for i in range(2 * N))  # N run, N wait: reading would pause here
    data += request("queued", id="held") + cancel("lsp", "held")
    answered = threading.Event()
    server = Server(impl, mode, data, lambda line: answered.set() if b'"id":"held"' in line else None)
    try:
        assert answered.wait(WAIT), "the held request's cancellation waited for the slow ones"
        assert not server.release.is_set()
    finally:
        got = server.finish()
    assert got["held"] == err("held", -32800, "Request cancelled")
    assert "held" not in map(str, server.ran)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_requests_past_the_read_aheads_bound_are_all_answered(impl: ModuleType, mode: str) -> None:
    """More than the read-ahead holds (1,024 requests): reading pauses at the bound and goes on as requests end,
    nothing lost, every request answered once, in the engine's bounds."""
    count = 1200
    data = b"".join(request("slow", [i], id=i) for i in range(N)) + b"".join(
        request("m", [i], id=i) for i in range(N, count)
    )
    server = Server(impl, mode, data)
    server.release.wait(0.2)  # (the slow ones end soon after reading has reached the bound, or before)
    got = server.finish()
    assert got == {i: ok(i, [i]) for i in range(count)}
    assert sorted(x for [x] in server.ran) == list(range(count))
