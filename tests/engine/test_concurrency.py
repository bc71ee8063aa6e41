"""The concurrent engine (docs/semantics.md, "Concurrency"): requests in flight together on threads and on
asyncio, the request context, progress and cancellation in the MCP and LSP dialects.

Every test is deterministic: handlers wait for events that other handlers, notifications or the output
stream set, never for time to pass. A wait that times out (5 s) is a failure, not a slow pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
import rpcwire
from support.messages import answers, err, ok, request
from support.serving import MODES, serve_in_mode
from support.streams import BrokenOutput

WAIT = 5.0  # seconds: only ever reached when the behaviour under test is broken


def cancel_lsp(id_: Any) -> bytes:
    return request("$/cancelRequest", {"id": id_}, id=...)


def cancel_mcp(id_: Any) -> bytes:
    return request("notifications/cancelled", {"requestId": id_, "reason": "test"}, id=...)


class Watched(io.BytesIO):
    """An output that calls ``on_line(line)`` for every line written (after it is written)."""

    def __init__(self) -> None:
        super().__init__()
        self.on_line: Callable[[bytes], None] = lambda line: None

    def write(self, data: Any) -> int:
        written = super().write(data)
        for line in bytes(data).splitlines():
            self.on_line(line)
        return written


def serve_in(mode: str, impl: ModuleType, handler: Callable[[str, Any], Any], data: bytes, n: int = 4) -> Watched:
    """Serve ``data`` in ``mode``; ``handler`` is sync, and wrapped in an ``async def`` for asyncio-async."""
    return serve_into(mode, impl, handler, data, Watched(), n=n)


def serve_into(
    mode: str,
    impl: ModuleType,
    handler: Callable[[str, Any], Any],
    data: bytes,
    out: Any,
    *,
    n: int = 4,
    stdin: Any = None,
) -> Any:
    serve_in_mode(mode, impl, handler, impl.StdioTransport(io.BytesIO(data) if stdin is None else stdin, out), n=n)
    return out


def by_id(out: Watched) -> dict[Any, Any]:
    return {answer["id"]: answer for answer in answers(out.getvalue())}


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# --- requests in flight together ---------------------------------------------------------------------


def test_two_slow_requests_overlap(impl: ModuleType, mode: str) -> None:
    """Each waits for the other to have started: only possible if both run at once."""
    barrier = threading.Barrier(2, timeout=WAIT)

    def handler(method: str, params: Any) -> Any:
        barrier.wait()
        return params

    out = serve_in(mode, impl, handler, request("m", [1], id=1) + request("m", [2], id=2))
    assert by_id(out) == {1: ok(1, [1]), 2: ok(2, [2])}


def test_a_fast_answer_arrives_while_a_slow_request_is_blocked(impl: ModuleType, mode: str) -> None:
    fast_written = threading.Event()
    out = Watched()
    out.on_line = lambda line: fast_written.set() if b'"id":2' in line else None

    def handler(method: str, params: Any) -> Any:
        if method == "slow":
            return fast_written.wait(WAIT)  # True only if the fast answer was written meanwhile
        return "fast"

    serve_into(mode, impl, handler, request("slow", id=1) + request("fast", id=2), out)
    assert answers(out.getvalue()) == [ok(2, "fast"), ok(1, True)]


@pytest.mark.parametrize("n", [1, 2, 3])
def test_never_more_than_n_handlers_at_once(impl: ModuleType, mode: str, n: int) -> None:
    lock = threading.Lock()
    active = [0]
    most = [0]
    full = threading.Event()

    def handler(method: str, params: Any) -> Any:
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
            if active[0] == n:
                full.set()
        full.wait(WAIT)  # the first n wait until n run together; the rest find it set
        with lock:
            active[0] -= 1
        return params

    out = serve_in(mode, impl, handler, b"".join(request("m", [i], id=i) for i in range(12)), n=n)
    assert sorted(by_id(out)) == list(range(12))
    assert most[0] == n


def test_notifications_run_in_order_before_what_follows(impl: ModuleType, mode: str) -> None:
    """LSP's didChange: each notification is handled before any later message is dispatched."""
    seen: list[Any] = []

    def handler(method: str, params: Any) -> Any:
        if method == "didChange":
            seen.append(params[0])
            return None
        return list(seen)

    data = b"".join(request("didChange", [i], id=...) for i in range(3)) + request("read", id="a")
    data += request("didChange", [3], id=...) + request("read", id="b")
    got = by_id(serve_in(mode, impl, handler, data))
    # "a" runs concurrently with what follows it, so it may see didChange 3 as well, but never misses 0-2
    assert got["a"]["result"][:3] == [0, 1, 2]
    assert got["b"] == ok("b", [0, 1, 2, 3])


def test_a_batch_is_one_line_once_every_entry_is_done(impl: ModuleType, mode: str) -> None:
    barrier = threading.Barrier(2, timeout=WAIT)

    def handler(method: str, params: Any) -> Any:
        if method == "pair":
            barrier.wait()  # the two entries run at once
        return params

    entries = [request("pair", [1], id=1), request("note", [0], id=...), b"7\n", request("pair", [2], id=2)]
    data = b"[" + b",".join(entry.strip() for entry in entries) + b"]\n" + request("after", ["x"], id=3)
    lines = answers(serve_in(mode, impl, handler, data).getvalue())
    batch = next(line for line in lines if isinstance(line, list))
    assert batch == [ok(1, [1]), err(None, -32600, "Invalid Request"), ok(2, [2])]
    assert ok(3, ["x"]) in lines


def test_end_of_input_waits_for_the_requests_in_flight(impl: ModuleType, mode: str) -> None:
    release = threading.Event()

    def handler(method: str, params: Any) -> Any:
        if method == "release":
            release.set()
            return None
        return release.wait(WAIT)

    data = b"".join(request("wait", id=i) for i in range(3)) + request("release", id=...)
    out = serve_in(mode, impl, handler, data)
    assert by_id(out) == {i: ok(i, True) for i in range(3)}


def test_a_handler_raising_in_a_worker_is_answered(impl: ModuleType, mode: str) -> None:
    def handler(method: str, params: Any) -> Any:
        if method == "missing":
            raise rpcwire.MethodNotFound()
        raise ValueError("boom")

    out = serve_in(mode, impl, handler, request("missing", id=1) + request("boom", id=2))
    assert by_id(out) == {
        1: err(1, -32601, "Method not found"),
        2: err(2, -32603, "Internal error", {"exception": "ValueError", "detail": "boom"}),
    }


def test_malformed_lines_are_answered_in_concurrent_modes(impl: ModuleType, mode: str) -> None:
    out = serve_in(mode, impl, lambda m, p: p, b"{bad\n[]\n" + request("m", [1], id=1e3 if False else "x"))
    assert answers(out.getvalue()) == [
        err(None, -32700, "Parse error"),
        err(None, -32600, "Invalid Request"),
        ok("x", [1]),
    ]


# --- the request context ------------------------------------------------------------------------------


def test_current_request_outside_a_handler_is_a_lookup_error(impl: ModuleType) -> None:
    with pytest.raises(LookupError):
        impl.current_request()


def test_the_sequential_serve_gives_the_same_context(impl: ModuleType) -> None:
    """max_concurrency=1: the same context (one object per call), progress before the answer, LSP's end."""
    seen: list[Any] = []

    def handler(method: str, params: Any) -> Any:
        context = impl.current_request()
        assert impl.current_request() is context
        seen.append((context.id, context.method, context.is_notification, context.cancelled))
        context.progress(1, 2)
        context.progress(2, 2)
        return "done"

    data = request("m", {"_meta": {"progressToken": "t"}}, id=1) + request("n", id=...)
    data += b"[" + request("lsp", {"workDoneToken": "w"}, id="x").strip() + b"]\n"
    out = io.BytesIO()
    impl.serve(handler, impl.StdioTransport(io.BytesIO(data), out))
    lines = answers(out.getvalue())
    assert seen == [(1, "m", False, False), (None, "n", True, False), ("x", "lsp", False, False)]
    assert lines == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "t", "progress": 1, "total": 2},
        },
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "t", "progress": 2, "total": 2},
        },
        ok(1, "done"),
        {
            "jsonrpc": "2.0",
            "method": "$/progress",
            "params": {"token": "w", "value": {"kind": "begin", "title": "lsp", "percentage": 50}},
        },
        {
            "jsonrpc": "2.0",
            "method": "$/progress",
            "params": {"token": "w", "value": {"kind": "report", "percentage": 100}},
        },
        {"jsonrpc": "2.0", "method": "$/progress", "params": {"token": "w", "value": {"kind": "end"}}},
        [ok("x", "done")],
    ]
    with pytest.raises(LookupError):  # and none once the call is over
        impl.current_request()


def test_current_request_inside_a_handler(impl: ModuleType, mode: str) -> None:
    def handler(method: str, params: Any) -> Any:
        context = impl.current_request()
        with pytest.raises(AttributeError):
            context.id = 5
        return [context.id, context.method, context.is_notification, context.cancelled, context.traceparent]

    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    data = request("m", {"_meta": {"traceparent": trace}}, id=7) + request("n", {"_meta": {"traceparent": "bad"}}, id=8)
    assert by_id(serve_in(mode, impl, handler, data)) == {
        7: ok(7, [7, "m", False, False, trace]),
        8: ok(8, [8, "n", False, False, None]),
    }


# --- cancellation ---------------------------------------------------------------------------------------


class Started:
    """Handlers say they started; the notification ``started`` waits (on the reading side, so before
    anything after it is read) until ``count`` of them did."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.lock = threading.Lock()
        self.all = threading.Event()

    def handler(self, method: str, params: Any) -> Any:
        if method == "started":
            assert self.all.wait(WAIT)
            return None
        if method == "other":
            return params
        with self.lock:
            self.count -= 1
            if self.count == 0:
                self.all.set()
        return wait_until_cancelled(method, params)


def wait_until_cancelled(method: str, params: Any) -> Any:
    """Runs until its request is cancelled; ``finish`` then returns a result, anything else raises."""
    context = rpcwire.current_request()
    for _ in range(int(WAIT / 0.005)):
        if context.cancelled:
            if method == "finish":
                return "finished anyway"
            context.raise_if_cancelled()
        threading.Event().wait(0.005)
    return "never cancelled"


def test_lsp_cancel_of_a_request_in_flight(impl: ModuleType, mode: str) -> None:
    """Still answered: -32800 when the handler gives up, its result when it finishes anyway."""
    data = request("work", id=1) + request("finish", id=2) + request("started", id=...) + cancel_lsp(1) + cancel_lsp(2)
    out = serve_in(mode, impl, Started(2).handler, data)
    # An async handler's task is cancelled wherever it awaits, so it cannot finish anyway.
    finished = err(2, -32800, "Request cancelled") if mode == "asyncio-async" else ok(2, "finished anyway")
    assert by_id(out) == {1: err(1, -32800, "Request cancelled"), 2: finished}


def test_mcp_cancel_of_a_request_in_flight_gets_no_answer(impl: ModuleType, mode: str) -> None:
    data = request("work", id="a") + request("finish", id="b") + request("started", id=...)
    data += cancel_mcp("a") + cancel_mcp("b") + request("other", [1], id="c")
    out = serve_in(mode, impl, Started(2).handler, data)
    assert answers(out.getvalue()) == [ok("c", [1])]


def test_unknown_and_finished_ids_are_ignored_and_cancellations_never_reach_the_handler(
    impl: ModuleType, mode: str
) -> None:
    seen: list[str] = []

    def handler(method: str, params: Any) -> Any:
        seen.append(method)
        return params

    data = request("m", [1], id=1) + cancel_lsp(99) + cancel_mcp("nope") + cancel_lsp({"bad": 1}) + cancel_lsp(True)
    data += request("$/cancelRequest", None, id=...) + request("m", [2], id=2)
    out = serve_in(mode, impl, handler, data, n=2)
    assert by_id(out) == {1: ok(1, [1]), 2: ok(2, [2])}
    assert seen == ["m", "m"]


@pytest.mark.parametrize("dialect", ["lsp", "mcp"])
def test_a_request_cancelled_before_it_started_is_never_run(impl: ModuleType, mode: str, dialect: str) -> None:
    """N = 2: "queued" waits behind two running requests; its cancellation is read, then "release" lets the
    two end."""
    release = threading.Event()
    ran: list[str] = []

    def handler(method: str, params: Any) -> Any:
        if method == "release":
            release.set()
            return None
        ran.append(method)
        return release.wait(WAIT)

    cancel = cancel_lsp("q") if dialect == "lsp" else cancel_mcp("q")
    data = request("first", id=1) + request("first", id=2) + request("queued", id="q") + cancel
    data += request("release", id=...)
    out = serve_in(mode, impl, handler, data, n=2)
    expected = {1: ok(1, True), 2: ok(2, True)}
    if dialect == "lsp":
        expected["q"] = err("q", -32800, "Request cancelled")
    assert by_id(out) == expected
    assert ran == ["first", "first"]


def test_an_async_handler_runs_in_a_task_of_its_own(impl: ModuleType) -> None:
    """Whether it waits or not (an eager start included), an async handler's ``current_task()`` is its own,
    not the server's, so that cancelling it (as a timeout or a task group it opens would) cancels it alone;
    a task it spawns sees its ``current_request()``."""
    server_tasks: list[Any] = []

    async def spawned() -> Any:
        return impl.current_request().id

    async def handler(method: str, params: Any) -> Any:
        mine = asyncio.current_task()
        if method == "cancel-self":  # before its first wait: an eager start has it run inline by then
            asyncio.get_running_loop().call_soon(mine.cancel)  # type: ignore[union-attr]
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(WAIT)
        spawned_id = await asyncio.create_task(spawned()) if method == "spawn" else None
        return [mine is not None and mine not in server_tasks, mine is asyncio.current_task(), spawned_id]

    async def main() -> io.BytesIO:
        server_tasks.append(asyncio.current_task())
        out = io.BytesIO()
        data = request("quick", id=1) + request("cancel-self", id=2) + request("spawn", id=3)
        await impl.serve_async(handler, impl.StdioTransport(io.BytesIO(data), out))
        return out

    assert by_id(asyncio.run(main())) == {
        1: ok(1, [True, True, None]),
        2: ok(2, [True, True, None]),
        3: ok(3, [True, True, 3]),
    }


def test_an_async_handler_is_cancelled_as_a_task(impl: ModuleType) -> None:
    """Its task is cancelled wherever it awaits (before or after it started): -32800, not its result."""

    async def handler(method: str, params: Any) -> Any:
        await asyncio.sleep(WAIT)
        return "not cancelled"

    out = io.BytesIO()
    data = request("cancel-me", id=1) + cancel_lsp(1)
    asyncio.run(impl.serve_async(handler, impl.StdioTransport(io.BytesIO(data), out)))
    assert answers(out.getvalue()) == [err(1, -32800, "Request cancelled")]


# --- progress -------------------------------------------------------------------------------------------


def progressing(method: str, params: Any) -> Any:
    context = rpcwire.current_request()
    context.progress(1, 4)
    context.progress(2, 4, "halfway")
    context.notify("log", {"text": "hi"})
    return "done"


def test_mcp_progress_goes_out_before_the_answer(impl: ModuleType, mode: str) -> None:
    data = request("tool", {"_meta": {"progressToken": "tok"}}, id=1)
    lines = answers(serve_in(mode, impl, progressing, data).getvalue())
    assert lines == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "tok", "progress": 1, "total": 4},
        },
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "tok", "progress": 2, "total": 4, "message": "halfway"},
        },
        {"jsonrpc": "2.0", "method": "log", "params": {"text": "hi"}},
        ok(1, "done"),
    ]


def test_lsp_work_done_progress_begins_reports_and_ends_before_the_answer(impl: ModuleType, mode: str) -> None:
    data = request("textDocument/references", {"workDoneToken": 5}, id=1)
    lines = answers(serve_in(mode, impl, progressing, data).getvalue())
    progress = [line["params"] for line in lines if line.get("method") == "$/progress"]
    assert progress == [
        {"token": 5, "value": {"kind": "begin", "title": "textDocument/references", "percentage": 25}},
        {"token": 5, "value": {"kind": "report", "message": "halfway", "percentage": 50}},
        {"token": 5, "value": {"kind": "end"}},
    ]
    assert lines[-1] == ok(1, "done")


def test_no_token_no_progress(impl: ModuleType, mode: str) -> None:
    lines = answers(serve_in(mode, impl, progressing, request("m", {"x": 1}, id=1)).getvalue())
    assert lines == [{"jsonrpc": "2.0", "method": "log", "params": {"text": "hi"}}, ok(1, "done")]


# --- both implementations ---------------------------------------------------------------------------------


def test_native_and_pure_write_the_same_lines(mode: str) -> None:
    data = b"{bad\n" + request("m", [1], id=1.5) + request("note", id=...) + b"[1," + request("m", id="x").strip()
    data += b"]\n" + request("m", {"_meta": {"progressToken": 1}}, id=2) + request("missing", id=3)

    def handler(method: str, params: Any) -> Any:
        if method == "missing":
            raise rpcwire.MethodNotFound()
        rpcwire.current_request().progress(1)
        return params

    outputs = [sorted(serve_in(mode, impl, handler, data).getvalue().splitlines()) for impl in (rpcwire, rpcwire.pure)]
    assert outputs[0] == outputs[1]
    assert len(outputs[0]) == 6


def test_max_concurrency_must_be_a_positive_int(impl: ModuleType) -> None:
    transport = impl.StdioTransport(io.BytesIO(), io.BytesIO())
    for bad, error in [(0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError)]:
        with pytest.raises(error):
            impl.serve(lambda m, p: p, transport, max_concurrency=bad)


def test_progress_values_are_json(impl: ModuleType) -> None:
    """A float total and progress: the notification is compact JSON like every other line."""
    data = request("m", {"_meta": {"progressToken": "t"}}, id=1)

    def handler(method: str, params: Any) -> Any:
        rpcwire.current_request().progress(0.5, 1.0)
        return None

    out = serve_in("threads", impl, handler, data)
    assert json.loads(out.getvalue().splitlines()[0])["params"] == {"progressToken": "t", "progress": 0.5, "total": 1.0}


# --- real processes on real pipes -----------------------------------------------------------------------

ASYNC_SERVER = """
import asyncio, importlib, sys

impl = importlib.import_module(sys.argv[1])
released = None


async def handler(method, params):
    global released
    if released is None:
        released = asyncio.Event()
    if method == "wait":
        await released.wait()
        return "released"
    if method == "release":
        released.set()
        return "releasing"
    return params


async def main():
    await impl.serve_async(handler, impl.StdioTransport(), max_concurrency=8)


asyncio.run(main())
"""


def test_serve_async_in_a_subprocess_on_real_pipes(impl: ModuleType, tmp_path: Any) -> None:
    """Three calls wait on the event loop while others are answered; one more call releases them."""
    from support.processes import ServerProcess

    server = ServerProcess(tmp_path, ASYNC_SERVER, [impl.__name__], 60)
    try:
        server.send(b"".join(request("wait", id=i) for i in range(3)) + request("echo", [1], id="e"))
        assert server.receive() == ok("e", [1])
        server.send(request("release", id="r"))
        got = [server.receive() for _ in range(4)]
        assert sorted(json.dumps(answer, sort_keys=True) for answer in got) == sorted(
            json.dumps(answer, sort_keys=True)
            for answer in [ok("r", "releasing"), *(ok(i, "released") for i in range(3))]
        )
        server.stdin.close()
        assert server.wait() == 0, server.errors()
    finally:
        server.close()


def test_the_example_tool_server(tmp_path: Any) -> None:
    """examples/tool_server.py: add answered while slow_count reports progress; cancelled, it gets no answer."""
    import subprocess
    import sys

    from support import EXAMPLES
    from support.processes import child_env

    example = EXAMPLES / "tool_server.py"
    process = subprocess.Popen(
        [sys.executable, str(example)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_env(),
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        slow = {"name": "slow_count", "arguments": {"n": 200}, "_meta": {"progressToken": "p1"}}
        process.stdin.write(
            request("tools/call", slow, id=1)
            + request("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}, id=2)
        )
        process.stdin.flush()
        seen: list[Any] = []
        while not (any(line.get("id") == 2 for line in seen) and any(line.get("method") for line in seen)):
            seen.append(json.loads(process.stdout.readline()))
        process.stdin.write(request("notifications/cancelled", {"requestId": 1, "reason": "test"}, id=...))
        process.stdin.close()
        seen += [json.loads(line) for line in process.stdout.read().splitlines()]
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
        process.wait()
        process.stdout.close()
        if not process.stdin.closed:
            process.stdin.close()
    # With its outputSchema (from the return annotation), MCP asks for structuredContent too.
    assert ok(2, {"content": [{"type": "text", "text": "5.0"}], "structuredContent": {"result": 5.0}}) in seen
    progress = [line["params"] for line in seen if line.get("method") == "notifications/progress"]
    assert progress and all(item["progressToken"] == "p1" and item["total"] == 200 for item in progress)
    assert len(progress) < 200  # stopped by the cancellation
    assert not any(line.get("id") == 1 for line in seen)  # MCP: a cancelled call gets no answer


INTERRUPTED_SERVER = """
import asyncio, importlib, signal, sys, threading

signal.signal(signal.SIGINT, signal.default_int_handler)  # a background shell may have ignored it
impl = importlib.import_module(sys.argv[1])
transport = impl.StdioTransport()


def handler(method, params):
    impl.current_request().notify("started")
    threading.Event().wait()  # stuck for good: only an interrupt ends the server


async def async_handler(method, params):
    impl.current_request().notify("started")
    await asyncio.Event().wait()


if sys.argv[2] == "threads":
    impl.serve(handler, transport, max_concurrency=4)
else:
    asyncio.run(impl.serve_async(async_handler, transport))
"""


@pytest.mark.parametrize("kind", ["threads", "asyncio"])
def test_keyboard_interrupt_stops_a_concurrent_server_promptly(impl: ModuleType, kind: str, tmp_path: Any) -> None:
    """Two handlers stuck for good, the reader blocked on an idle pipe: SIGINT ends the process."""
    import signal

    from support.processes import ServerProcess

    server = ServerProcess(tmp_path, INTERRUPTED_SERVER, [impl.__name__, kind], 60)
    try:
        server.send(request("stuck", id=1) + request("stuck", id=2))
        assert [server.receive(), server.receive()] == [{"jsonrpc": "2.0", "method": "started"}] * 2
        # Let the reader block in its read, as the SIGINT tests of test_faults.py do: a signal that lands
        # in the instant between the interpreter's last check and the read system call is only seen at
        # the next input (docs/semantics.md, "Failures of the streams"), as for any blocking read.
        time.sleep(0.3)
        server.process.send_signal(signal.SIGINT)
        status = server.wait(timeout=60)  # only a guard against a hang: a loaded machine is slow
        assert status == -signal.SIGINT, server.errors()
        assert server.errors().rstrip().endswith("KeyboardInterrupt"), server.errors()
    finally:
        server.close()


def test_the_request_context_is_in_the_loggers_records(impl: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    def handler(method: str, params: Any) -> Any:
        logging.getLogger("rpcwire").warning("inside %s", method)
        return None

    with caplog.at_level(logging.WARNING, logger="rpcwire"):
        serve_in("threads", impl, handler, request("m", {"_meta": {"traceparent": trace}}, id=4))
    [record] = [record for record in caplog.records if record.getMessage() == "inside m"]
    assert (record.traceparent, record.request_id) == (trace, 4)  # type: ignore[attr-defined]


# --- issue 17: answers before a notification, handlers' BaseExceptions, progress after the answer -------


def serve_pipe_in_thread(
    mode: str, impl: ModuleType, handler: Callable[[str, Any], Any], out: Any, n: int = 4
) -> tuple[Any, threading.Thread, list[BaseException]]:
    """Serve a real pipe's read end in a thread; returns the pipe's write end (binary, unbuffered), the thread
    and the list that gets what ``serve`` raised."""
    read_fd, write_fd = os.pipe()
    stdin = os.fdopen(read_fd, "rb")
    feed = os.fdopen(write_fd, "wb", buffering=0)
    raised: list[BaseException] = []

    def run() -> None:
        try:
            serve_into(mode, impl, handler, b"", out, n=n, stdin=stdin)
        except BaseException as exc:
            raised.append(exc)
        finally:
            stdin.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return feed, thread, raised


def test_answers_finished_before_a_notification_are_written_before_its_handler_runs(
    impl: ModuleType, mode: str
) -> None:
    """``fast``'s answer is handed to the writer, whose ``write`` is held; a notification read then waits for
    that write to end before its handler runs (the handler finds the answer on the wire)."""
    handed_over = threading.Event()
    release = threading.Event()
    seen: list[bytes] = []

    class Held(Watched):
        def write(self, data: Any) -> int:
            handed_over.set()
            assert release.wait(WAIT)
            return super().write(data)

    out = Held()

    def handler(method: str, params: Any) -> Any:
        if method == "sync":
            seen.append(out.getvalue())
            return None
        return "fast"

    feed, server, raised = serve_pipe_in_thread(mode, impl, handler, out)
    try:
        feed.write(request("fast", id=1))
        assert handed_over.wait(WAIT)  # finished: the answer is being written
        feed.write(request("sync", id=...))
        time.sleep(0.2)  # room for the notification's handler to run too early (it must not)
        release.set()
    finally:
        release.set()
        feed.close()
        server.join(WAIT * 4)
    assert not server.is_alive() and raised == []
    assert [answers(value) for value in seen] == [[ok(1, "fast")]]


class HandlerStop(BaseException):
    """A handler's own BaseException subclass (neither Exception nor SystemExit)."""


@pytest.mark.parametrize("exception", [HandlerStop, SystemExit])
def test_a_handlers_base_exception_stops_serve_with_it(impl: ModuleType, mode: str, exception: type) -> None:
    """In every engine: ``serve`` raises it (asyncio went on), its request gets no answer, and the answers
    finished before it are written."""
    first_written = threading.Event()
    out = Watched()
    out.on_line = lambda line: first_written.set() if b'"id":1' in line else None

    def handler(method: str, params: Any) -> Any:
        if method == "stop":
            assert first_written.wait(WAIT)
            raise exception()
        return params

    data = request("m", [1], id=1) + request("stop", id=2) + b"".join(request("m", [i], id=i) for i in range(3, 40))
    with pytest.raises(exception):
        serve_into(mode, impl, handler, data, out)
    got = by_id(out)
    assert got[1] == ok(1, [1])
    assert 2 not in got


def spam_after_the_answer(impl: ModuleType, mode: str, ids: list[int]) -> bytes:
    """Serve a request per id; each handler starts a thread that calls ``progress`` and ``notify`` with its
    context until 20 calls after the request's answer was written (3,000 at most), and returns at once."""
    out = Watched()
    answered = {id_: threading.Event() for id_ in ids}
    spammers: list[threading.Thread] = []

    def on_line(line: bytes) -> None:
        message = json.loads(line)
        if "id" in message:
            answered[message["id"]].set()

    out.on_line = on_line

    def spam(context: Any, started: threading.Event) -> None:
        after = 0
        for count in range(3000):
            context.progress(count, 3000)
            context.notify("spam", {"of": context.id})
            started.set()
            if answered[context.id].is_set():
                after += 1
                if after == 20:
                    return

    def handler(method: str, params: Any) -> Any:
        started = threading.Event()
        thread = threading.Thread(target=spam, args=(rpcwire.current_request(), started), daemon=True)
        spammers.append(thread)
        thread.start()
        started.wait(WAIT)
        return "done"

    data = b"".join(
        request("m", {"_meta": {"progressToken": id_}} if id_ % 2 else {"workDoneToken": id_}, id=id_) for id_ in ids
    )
    if mode == "sequential":
        impl.serve(handler, impl.StdioTransport(io.BytesIO(data), out))
    else:
        serve_into(mode, impl, handler, data, out)
    for thread in spammers:
        thread.join(WAIT * 4)
        assert not thread.is_alive()
    return out.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize("mode_", ["sequential", *MODES])
def test_nothing_about_a_request_is_written_after_its_answer(impl: ModuleType, mode_: str) -> None:
    """Threads keep calling ``progress``/``notify`` with a request's context while its handler returns and after:
    no line of a request follows its answer (LSP: no ``report`` after ``end``), in every engine, the sequential
    one included; 3 runs of 40 requests."""
    ids = list(range(40))
    for run in range(3):
        done: set[Any] = set()
        ended: set[Any] = set()
        for line in answers(spam_after_the_answer(impl, mode_, ids)):
            if "id" in line:
                done.add(line["id"])
                continue
            params = line["params"]
            owner = params.get("of", params.get("progressToken", params.get("token")))
            assert owner not in done, (run, line)
            if line["method"] == "$/progress":
                assert owner not in ended, (run, line)
                if params["value"]["kind"] == "end":
                    ended.add(owner)
        assert done == set(ids)


def test_late_progress_is_logged_at_debug(impl: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    contexts: list[Any] = []

    def handler(method: str, params: Any) -> Any:
        contexts.append(rpcwire.current_request())
        return None

    out = serve_in("threads", impl, handler, request("m", {"_meta": {"progressToken": "t"}}, id=1))
    with caplog.at_level(logging.DEBUG, logger="rpcwire"):
        contexts[0].progress(1)
        contexts[0].notify("late")
    assert answers(out.getvalue()) == [ok(1, None)]
    assert [record.levelno for record in caplog.records if "after" in record.getMessage()] == [logging.DEBUG] * 2


# --- issue 17: an output that is not read, an output that fails ------------------------------------------

ANSWER_BYTES = 64 * 1024
UNREAD_REQUESTS = 400  # 25 MiB of answers if they were all queued


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_reading_pauses_while_answers_wait_to_be_written(impl: ModuleType, mode: str) -> None:
    """The output is a real pipe that nobody reads: the engine stops taking requests once the unwritten
    answers pass the bound (1 MiB), instead of running every request and queueing its 64 KiB answer.
    Once the pipe is drained, every request is answered."""
    read_fd, write_fd = os.pipe()
    out = os.fdopen(write_fd, "wb")
    calls = [0]
    lock = threading.Lock()

    def handler(method: str, params: Any) -> Any:
        with lock:
            calls[0] += 1
        return "x" * ANSWER_BYTES

    data = b"".join(request("big", id=i) for i in range(UNREAD_REQUESTS))
    raised: list[BaseException] = []

    def run() -> None:
        try:
            serve_into(mode, impl, handler, data, out)  # type: ignore[arg-type]
        except BaseException as exc:
            raised.append(exc)
        finally:
            out.close()

    server = threading.Thread(target=run, daemon=True)
    server.start()
    # Wait for the engine to settle (calls stop growing), within a bound: not a timing assertion.
    last, still = -1, 0
    for _ in range(400):
        time.sleep(0.05)
        if calls[0] == last:
            still += 1
            if still == 20:
                break
        else:
            last, still = calls[0], 0
    settled = calls[0]
    chunks: list[bytes] = []
    drainer = threading.Thread(target=lambda: [chunks.append(c) for c in iter(lambda: os.read(read_fd, 1 << 16), b"")])
    drainer.start()
    server.join(90)
    drainer.join(30)
    os.close(read_fd)
    assert not server.is_alive() and raised == []
    # 1 MiB of unwritten answers is 16 of them; with the 2N = 8 in flight, the one being written and what the
    # asyncio reader reads ahead (16), far below the 400 a reader that never pauses runs.
    assert settled <= 16 + 8 + 2 + 16 + 4, settled
    assert len(b"".join(chunks).splitlines()) == UNREAD_REQUESTS


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_stop_while_reading_pauses_for_unwritten_answers_reads_no_more(impl: ModuleType) -> None:
    """Reading has paused (an answer over the 1 MiB bound waits for a peer that does not read) and nothing
    more is to be read, when a handler raises SystemExit: the threads engine stops there and re-raises,
    rather than block in one more read of an input that is still open."""
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    release = threading.Event()
    answered = threading.Event()

    def handler(method: str, params: Any) -> Any:
        if method == "stop":
            release.wait(60)
            raise SystemExit(3)
        answered.set()
        return "x" * (2 << 20)  # alone over the bound of unwritten bytes

    os.write(in_write, request("stop", id=0) + request("big", id=1))  # the reading thread then waits for input
    raised: list[BaseException] = []
    returned = threading.Event()
    stdin, stdout = os.fdopen(in_read, "rb"), os.fdopen(out_write, "wb", buffering=0)

    def run() -> None:
        try:
            impl.serve(handler, impl.StdioTransport(stdin, stdout), max_concurrency=2, guard_stdout=False)
        except BaseException as exc:
            raised.append(exc)
        returned.set()

    server = threading.Thread(target=run, daemon=True)
    server.start()
    assert answered.wait(30)
    time.sleep(0.5)  # the 2 MiB answer reaches the writer, over the bound (not a timing assertion)
    os.write(in_write, request("big", id=2))  # read, then reading pauses, with nothing more to read
    time.sleep(0.5)
    release.set()
    stopped = returned.wait(30)
    os.close(in_write)  # lets an engine blocked in a read go, so that the test never leaves it behind
    drained = threading.Thread(target=lambda: list(iter(lambda: os.read(out_read, 1 << 16), b"")), daemon=True)
    drained.start()
    server.join(30)
    stdout.close()
    drained.join(30)
    stdin.close()
    os.close(out_read)
    assert stopped, "serve went on reading after a handler raised SystemExit"
    assert len(raised) == 1 and isinstance(raised[0], SystemExit) and raised[0].code == 3


def test_a_failed_output_ends_serve_without_waiting_for_a_stuck_handler(impl: ModuleType, mode: str) -> None:
    """The output fails while a handler is stuck: ``serve`` raises the failure at once (the stuck handler is
    marked cancelled and left to its daemon thread), instead of waiting for it."""
    release = threading.Event()

    def handler(method: str, params: Any) -> Any:
        if method == "stuck":
            release.wait(60)
            return None
        return params

    async def async_handler(method: str, params: Any) -> Any:
        if method == "stuck":
            await asyncio.sleep(60)
        return params

    transport = impl.StdioTransport(io.BytesIO(request("stuck", id=1) + request("m", [2], id=2)), BrokenOutput())
    raised: list[BaseException] = []

    def run() -> None:
        try:
            serve_in_mode(mode, impl, handler, transport, async_handler=async_handler)
        except BaseException as exc:
            raised.append(exc)

    server = threading.Thread(target=run, daemon=True)
    server.start()
    server.join(30)
    stuck = server.is_alive()
    release.set()
    assert not stuck, "serve waited for the stuck handler after its output failed"
    assert len(raised) == 1 and isinstance(raised[0], BrokenPipeError)
