"""Faults: input that ends mid-line, a writer or a reader that fails, interrupts, and handlers whose results
misbehave while they are encoded.

The rules are in docs/semantics.md ("Failures of the streams", "Encoding"). Whatever could crash the
interpreter (deep or circular results, containers mutated while they are encoded) runs in a child process,
so that a segfault fails the test instead of killing pytest; so does everything that needs a real process
(a closed stdout, SIGINT). Timeouts only catch hangs: every assertion is about what happened, never how fast.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import select
import signal
import subprocess
import sys
import sysconfig
import textwrap
import threading
import time
from collections.abc import Iterator
from enum import IntEnum
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import rpcwire
from support.messages import INT_MAX_STR_DIGITS, PARSE_ERROR, answers, echo, err, needs_native, ok, request
from support.processes import QUIET_STDERR, ServerProcess, child_env
from support.serving import served
from support.streams import BrokenOutput, ReadlineOnly, RecordingOutput

CHILD_TIMEOUT = 120  # seconds; only there to turn a hang into a failure


def internal(id: Any, exception: str, detail: str) -> dict[str, Any]:
    return err(id, -32603, "Internal error", {"exception": exception, "detail": detail})


# --- end of input in the middle of a line ----------------------------------------------------------------


@pytest.mark.parametrize("ending", [b"", b"\r"], ids=["bare", "cr"])
def test_complete_last_request_without_newline_is_answered(impl: ModuleType, ending: bytes) -> None:
    data = request("echo", [1], id=1) + request("echo", ["last"], id=2).rstrip(b"\n") + ending
    assert answers(served(impl, data, echo)) == [ok(1, [1]), ok(2, ["last"])]


@pytest.mark.parametrize("cut", [1, 10, 30, -1], ids=lambda cut: f"cut{cut}")
def test_truncated_last_line_is_one_parse_error(impl: ModuleType, cut: int) -> None:
    """A request cut anywhere at end of input is answered once, with -32700; nothing is dropped silently."""
    calls: list[str] = []

    def handler(method: str, params: Any) -> Any:
        calls.append(method)
        return params

    last = request("echo", ["cut"], id=2).rstrip(b"\n")[:cut]
    assert answers(served(impl, request("echo", [1], id=1) + last, handler)) == [ok(1, [1]), PARSE_ERROR]
    assert calls == ["echo"]


def test_whitespace_after_the_last_newline_is_not_a_message(impl: ModuleType) -> None:
    assert answers(served(impl, request("echo", [1], id=1) + b" \t ", echo)) == [ok(1, [1])]


@pytest.mark.parametrize("complete", [True, False], ids=["complete", "truncated"])
def test_last_line_longer_than_a_read_chunk(impl: ModuleType, complete: bool) -> None:
    """A 300 KB last line without newline spans several 64 KiB reads and is still served whole (or -32700)."""
    big = ["é" * 150_000]
    last = request("echo", big, id=7).rstrip(b"\n")
    expected = ok(7, big) if complete else PARSE_ERROR
    assert answers(served(impl, last if complete else last[:-1], echo)) == [expected]


def test_read_line_returns_the_partial_last_line(impl: ModuleType) -> None:
    transport = impl.StdioTransport(io.BytesIO(b'one\r\ntwo\n{"half'), io.BytesIO())
    assert [transport.read_line() for _ in range(4)] == [b"one", b"two", b'{"half', None]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("buffering", [0, -1], ids=["raw", "buffered"])
@pytest.mark.parametrize("complete", [True, False], ids=["complete", "truncated"])
def test_pipe_closed_mid_line(impl: ModuleType, buffering: int, complete: bool) -> None:
    """A real pipe whose writer closes in the middle of a line, after a pause that makes serve block on it."""
    read_fd, write_fd = os.pipe()
    stdin = os.fdopen(read_fd, "rb", buffering=buffering)
    out = io.BytesIO()
    failures: list[BaseException] = []

    def serve() -> None:
        try:
            impl.serve(echo, impl.StdioTransport(stdin, out))
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    last = request("echo", ["tail"], id=2).rstrip(b"\n")
    try:
        os.write(write_fd, request("echo", [1], id=1) + last[:20])
        time.sleep(0.1)  # serve now waits for the rest of the line
        os.write(write_fd, last[20:] if complete else last[20:-2])
    finally:
        os.close(write_fd)
    server.join(timeout=30)
    assert not server.is_alive(), "serve did not return at end of input"
    stdin.close()
    assert failures == []
    assert answers(out.getvalue()) == [ok(1, [1]), ok(2, ["tail"]) if complete else PARSE_ERROR]


# --- the writer is gone ------------------------------------------------------------------------------------


class WatchedInput(io.BytesIO):
    """Input that counts the reads made after ``failed`` was set (by the output that failed)."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.failed = False
        self.reads_after_failure = 0

    def _watch(self) -> None:
        if self.failed:
            self.reads_after_failure += 1

    def readinto1(self, buffer: Any) -> int:
        self._watch()
        return super().readinto1(buffer)

    def readinto(self, buffer: Any) -> int:
        self._watch()
        return super().readinto(buffer)

    def read1(self, size: int = -1) -> bytes:
        self._watch()
        return super().read1(size)

    def read(self, size: int | None = -1) -> bytes:
        self._watch()
        return super().read(size)

    def readline(self, size: int | None = -1) -> bytes:
        self._watch()
        return super().readline(size)


class FailingOutput:
    """An output whose ``write`` (or ``flush``) raises ``error``; it remembers how often each was called."""

    def __init__(self, error: BaseException, stdin: WatchedInput, *, in_flush: bool = False) -> None:
        self.error = error
        self.stdin = stdin
        self.in_flush = in_flush
        self.writes: list[bytes] = []
        self.flushes = 0
        self.calls_when_failed: int | None = None
        self.calls = 0

    def fail(self) -> None:
        if self.calls_when_failed is None:
            self.calls_when_failed = self.calls
        self.stdin.failed = True
        raise self.error

    def write(self, data: bytes) -> int:
        self.writes.append(bytes(data))
        if not self.in_flush:
            self.fail()
        return len(data)

    def flush(self) -> None:
        self.flushes += 1
        if self.in_flush:
            self.fail()


REQUESTS = 5_000  # about 350 KB of input: several 64 KiB reads, so there is always more to read after a failure


def many_requests() -> bytes:
    return b"".join(request("echo", [i, "x" * 20], id=i) for i in range(REQUESTS))


@pytest.mark.parametrize("in_flush", [False, True], ids=["write", "flush"])
def test_broken_pipe_stops_serve_once(impl: ModuleType, in_flush: bool) -> None:
    """write (or flush) raises BrokenPipeError: serve raises it, writes nothing again, reads and dispatches no more."""
    stdin = WatchedInput(many_requests())
    error = BrokenPipeError(errno.EPIPE, "Broken pipe")
    out = FailingOutput(error, stdin, in_flush=in_flush)

    def handler(method: str, params: Any) -> Any:
        out.calls += 1
        return params

    with pytest.raises(BrokenPipeError) as raised:
        impl.StdioTransport(stdin, out).serve(handler)
    assert raised.value is error
    assert len(out.writes) == 1, "written again after the pipe broke"
    assert out.flushes == (1 if in_flush else 0)
    assert out.calls == out.calls_when_failed, "the handler was called after the pipe broke"
    assert 0 < out.calls < REQUESTS
    assert stdin.reads_after_failure == 0
    # what was handed to write is whole lines, the answers to the first requests in order
    assert answers(out.writes[0]) == [ok(i, [i, "x" * 20]) for i in range(len(answers(out.writes[0])))]


def test_closed_bytesio_output_raises_value_error_once(impl: ModuleType) -> None:
    stdin = WatchedInput(many_requests())
    out = io.BytesIO()
    calls: list[int] = []
    transport = impl.StdioTransport(stdin, out)
    out.close()

    def handler(method: str, params: Any) -> Any:
        calls.append(params[0])
        return params

    with pytest.raises(ValueError, match="closed file"):
        transport.serve(handler)
    position = stdin.tell()
    assert 0 < len(calls) < REQUESTS
    assert calls == list(range(len(calls)))
    assert position < len(stdin.getvalue()), "serve read on after the output failed"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("buffering", [0, -1], ids=["raw", "buffered"])
def test_pipe_whose_reader_closed(impl: ModuleType, buffering: int) -> None:
    """A real pipe whose read end is closed: EPIPE (SIGPIPE is ignored by Python) is one BrokenPipeError."""
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    stdout = os.fdopen(write_fd, "wb", buffering=buffering)
    calls: list[int] = []

    def handler(method: str, params: Any) -> Any:
        calls.append(params[0])
        return params

    try:
        with pytest.raises(BrokenPipeError):
            impl.serve(handler, impl.StdioTransport(io.BytesIO(many_requests()), stdout))
    finally:
        with contextlib.suppress(BrokenPipeError):  # a buffered writer still holds what it could not write
            stdout.close()
    assert 0 < len(calls) < REQUESTS


SERVER = """
import importlib, os, signal, sys, threading, time

# A process started in the background by a non-interactive shell (as CI may start the suite) inherits
# SIGINT ignored, and Python then leaves it ignored; the tests are about Python's usual handling.
signal.signal(signal.SIGINT, signal.default_int_handler)
impl = importlib.import_module(sys.argv[1])
mode = sys.argv[2]
stdin = open(0, "rb", buffering=0, closefd=False) if mode == "raw-stdin" else None
stdout = open(1, "wb", buffering=0, closefd=False) if mode in ("raw-stdout", "lock-held") else None
transport = impl.StdioTransport(stdin, stdout)


def handler(method, params):
    if method == "big":
        return "x" * params[0]
    if method == "hold":  # another thread holds the writer, blocked on the full pipe, while serve answers
        threading.Thread(target=transport.write_notification, args=("big", "x" * params[0]), daemon=True).start()
        time.sleep(0.2)
    return params


transport.write_notification("ready")
if mode == "quiet":
    try:
        impl.serve(handler, transport)
    except BrokenPipeError:
        # What docs/semantics.md recommends (after the Python documentation on SIGPIPE).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(3)
else:
    impl.serve(handler, transport)
"""


class Server(ServerProcess):
    """``SERVER`` in ``mode``, once it has said it is ready."""

    def __init__(self, tmp_path: Path, module: str, mode: str = "default") -> None:
        super().__init__(tmp_path, SERVER, [module, mode], CHILD_TIMEOUT)
        assert self.receive() == {"jsonrpc": "2.0", "method": "ready"}


@pytest.fixture
def spawn(impl: ModuleType, tmp_path: Path) -> Iterator[Any]:
    servers: list[Server] = []

    def start(mode: str = "default") -> Server:
        servers.append(Server(tmp_path, impl.__name__, mode))
        return servers[-1]

    try:
        yield start
    finally:
        for server in servers:
            server.close()


def flood(server: Server, count: int = 20_000) -> threading.Thread:
    """Send ``count`` requests from a thread until the server stops reading (its stdin then breaks)."""

    def send() -> None:
        with contextlib.suppress(BrokenPipeError):
            for i in range(count):
                server.stdin.write(request("echo", [i], id=i))
            server.stdin.flush()

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    return sender


@pytest.mark.timeout(CHILD_TIMEOUT + 30)
@pytest.mark.parametrize("mode", ["default", "raw-stdout"])
def test_server_whose_stdout_reader_is_gone_exits_with_one_traceback(spawn: Any, mode: str) -> None:
    server = spawn(mode)
    server.send(request("echo", ["first"], id=0))
    assert server.receive() == ok(0, ["first"])
    server.stdout.close()
    sender = flood(server)
    assert server.wait() in (1, 120)  # 120: Python's status when flushing sys.stdout at exit failed too
    sender.join(timeout=CHILD_TIMEOUT)
    stderr = server.errors()
    assert stderr.count("Traceback (most recent call last)") == 1, stderr
    # Python may add one "Exception ignored in: <stdout>" when it flushes sys.stdout at exit (documented;
    # "Exception ignored on flushing sys.stdout:" since 3.13).
    assert stderr.count("BrokenPipeError") - stderr.count("Exception ignored ") == 1, stderr
    assert stderr.rstrip().endswith("BrokenPipeError: [Errno 32] Broken pipe"), stderr


@pytest.mark.timeout(CHILD_TIMEOUT + 30)
def test_server_catching_broken_pipe_exits_quietly(spawn: Any) -> None:
    """The recipe of docs/semantics.md: catch BrokenPipeError around serve, point stdout at os.devnull."""
    server = spawn("quiet")
    server.send(request("echo", ["first"], id=0))
    assert server.receive() == ok(0, ["first"])
    server.stdout.close()
    sender = flood(server)
    assert server.wait() == 3
    sender.join(timeout=CHILD_TIMEOUT)
    assert server.errors() == QUIET_STDERR


# --- two serve calls on one transport ---------------------------------------------------------------------


async def async_echo(method: str, params: Any) -> Any:
    return echo(method, params)


SERVES = {
    "sequential": lambda impl, transport: impl.serve(echo, transport),
    "transport-serve": lambda impl, transport: transport.serve(echo),
    "threads": lambda impl, transport: impl.serve(echo, transport, max_concurrency=2),
    "async": lambda impl, transport: impl.serve(async_echo, transport),
}


def next_line(fd: int, pending: bytearray, timeout: float = 10.0) -> bytes:
    """The next line written to the pipe ``fd`` (without ``\n``); fails after ``timeout`` seconds without one."""
    deadline = time.monotonic() + timeout
    while b"\n" not in pending:
        left = deadline - time.monotonic()
        assert left > 0, f"no line within {timeout} s"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 65536)
            assert chunk, "the output closed"
            pending += chunk
    line, _, rest = bytes(pending).partition(b"\n")
    pending[:] = rest
    return line


def in_thread(target: Any, *args: Any) -> tuple[threading.Thread, list[BaseException]]:
    """``target(*args)`` started on a daemon thread; the list gets what it raised."""
    raised: list[BaseException] = []

    def run_it() -> None:
        try:
            target(*args)
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run_it, daemon=True)
    thread.start()
    return thread, raised


@pytest.mark.parametrize("second", list(SERVES))
@pytest.mark.parametrize("first", list(SERVES))
def test_a_second_serve_on_one_transport_is_refused(impl: ModuleType, first: str, second: str) -> None:
    """A second serve from another thread, while the first is blocked reading a pipe: RuntimeError at once
    (it used to wait for the input too, and an answer could stay stuck behind its read); the first goes on."""
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    pending = bytearray()
    with open(in_read, "rb") as stdin, open(out_write, "wb") as stdout, open(in_write, "wb", buffering=0) as feed:
        try:
            transport = impl.StdioTransport(stdin, stdout)
            serving, first_raised = in_thread(SERVES[first], impl, transport)
            feed.write(request("echo", [1], id=1))
            assert json.loads(next_line(out_read, pending)) == ok(1, [1])  # serving, and now blocked reading

            refused, second_raised = in_thread(SERVES[second], impl, transport)
            refused.join(10)
            assert not refused.is_alive(), "the second serve waited for input instead of being refused"
            assert len(second_raised) == 1 and isinstance(second_raised[0], RuntimeError), second_raised
            assert "already serving" in str(second_raised[0])

            feed.write(request("echo", [2], id=2))
            assert json.loads(next_line(out_read, pending)) == ok(2, [2])  # the first still answers
        finally:
            feed.close()  # end of input: the first serve returns
            serving.join(10)
        assert not serving.is_alive() and first_raised == []
    assert pending == b"" and os.read(out_read, 65536) == b""  # nothing else was written
    os.close(out_read)


@pytest.mark.parametrize("how", list(SERVES))
def test_serve_can_be_called_again_once_it_returned_or_raised(impl: ModuleType, how: str) -> None:
    transport = impl.StdioTransport(io.BytesIO(request("echo", [1])), BrokenOutput())
    with pytest.raises(BrokenPipeError):
        SERVES[how](impl, transport)
    SERVES[how](impl, transport)  # end of input: returns
    SERVES[how](impl, transport)


# --- streams that break their contract ------------------------------------------------------------------


class CountingOutput(io.BytesIO):
    """A raw-like output whose ``write`` returns ``count(len(data))`` (at most 10 calls, then it stops the test)."""

    def __init__(self, count: Any) -> None:
        super().__init__()
        self.count = count
        self.calls = 0

    def write(self, data: Any) -> Any:
        self.calls += 1
        if self.calls > 10:
            raise AssertionError("write() called again and again")
        super().write(data)
        return self.count(len(data))


@pytest.mark.parametrize("count", [lambda n: -1, lambda n: n + 1, lambda n: -(2**70)], ids=["negative", "more", "huge"])
def test_a_write_count_outside_what_was_given_is_an_error(impl: ModuleType, count: Any) -> None:
    out = CountingOutput(count)
    with pytest.raises(OSError, match="invalid length"):
        impl.serve(echo, impl.StdioTransport(io.BytesIO(request("m", [1]) * 3), out))
    assert out.calls == 1  # raised once, the stream not written again


def test_a_write_count_error_reads_the_same_in_both() -> None:
    messages = []
    for impl in (rpcwire, rpcwire.pure):
        with pytest.raises(OSError) as raised:
            impl.StdioTransport(io.BytesIO(), CountingOutput(lambda n: n + 1)).write_notification("n")
        messages.append(str(raised.value))
    assert messages[0] == messages[1] == "write() returned invalid length 32 (should have been between 0 and 31)"


class OverclaimingInput(io.BufferedIOBase):
    """``readinto1`` fills each buffer with the next chunk and returns the count paired with it (the
    chunk's length, if honest), then reports the end of input."""

    def __init__(self, reads: list[tuple[bytes, int]]) -> None:
        super().__init__()
        self.reads = reads

    def readable(self) -> bool:
        return True

    def readinto1(self, buffer: Any) -> int:
        chunk, count = self.reads.pop(0) if self.reads else (b"", 0)
        buffer[: len(chunk)] = chunk
        return count

    def readline(self, size: int | None = -1) -> bytes:
        raise AssertionError("the native transport reads with readinto1")


@needs_native("the native transport's reads with readinto1 into its own buffer")
def test_native_never_serves_stale_bytes_of_a_reused_buffer() -> None:
    """A read that fills nothing but claims a line's worth: the line before is not served again."""
    line = request("m", ["once"], id=1)
    calls: list[Any] = []
    out = io.BytesIO()
    stream = OverclaimingInput([(line, len(line)), (b"", len(line))])
    rpcwire.serve(lambda m, p: calls.append(p), rpcwire.StdioTransport(stream, out))
    assert calls == [["once"]]
    assert answers(out.getvalue()) == [ok(1, None), PARSE_ERROR]  # the claimed bytes were not JSON


@needs_native("the native transport's reads with readinto1 into its own buffer")
@pytest.mark.parametrize("count", [64 * 1024 + 1, -1], ids=["beyond", "negative"])
def test_native_refuses_a_read_count_outside_its_buffer(count: int) -> None:
    stream = OverclaimingInput([(request("m", [1]), count)])
    with pytest.raises(OSError, match=r"readinto1\(\) returned invalid length"):
        rpcwire.serve(echo, rpcwire.StdioTransport(stream, io.BytesIO()))


class FlushAttribute(io.BytesIO):
    flush = None  # type: ignore[assignment]


def test_a_flush_that_is_not_callable_is_refused_at_once(impl: ModuleType) -> None:
    with pytest.raises(TypeError, match=r"stdout.flush must be callable"):
        impl.StdioTransport(io.BytesIO(), FlushAttribute())


def test_a_stream_without_flush_is_written_unflushed(impl: ModuleType) -> None:
    class WriteOnly:
        def __init__(self) -> None:
            self.data = b""

        def write(self, data: bytes) -> int:
            self.data += bytes(data)
            return len(data)

    out = WriteOnly()
    impl.serve(echo, impl.StdioTransport(io.BytesIO(request("m", [1])), out))
    assert answers(out.data) == [ok(1, [1])]


# --- the reader raises -------------------------------------------------------------------------------------


class ResetStream(io.RawIOBase):
    """A raw stream (think socket.makefile) that returns ``data`` in pieces, then raises ECONNRESET for good."""

    def __init__(self, data: bytes, piece: int) -> None:
        self.data = data
        self.piece = piece
        self.position = 0
        self.error: OSError | None = None
        self.reads_after_error = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.error is not None:
            self.reads_after_error += 1
        if self.position >= len(self.data):
            self.error = ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
            raise self.error
        count = min(len(buffer), self.piece, len(self.data) - self.position)
        buffer[:count] = self.data[self.position : self.position + count]
        self.position += count
        return count


@pytest.mark.parametrize("kind", ["raw", "buffered", "readline"])
@pytest.mark.parametrize("piece", [7_000, 100_000], ids=["small-reads", "large-reads"])
def test_reader_error_after_whole_lines(impl: ModuleType, kind: str, piece: int) -> None:
    """Lines, then half a line, then ECONNRESET: every whole line is answered and flushed, then serve raises once."""
    whole = 2_000
    data = b"".join(request("echo", [i], id=i) for i in range(whole)) + request("echo", ["half"], id="h")[:25]
    raw = ResetStream(data, piece)
    stdin: Any = (
        raw if kind == "raw" else io.BufferedReader(raw) if kind == "buffered" else ReadlineOnly(io.BufferedReader(raw))
    )
    out = RecordingOutput()
    with pytest.raises(ConnectionResetError) as raised:
        impl.StdioTransport(stdin, out).serve(echo)
    assert raised.value is raw.error
    assert raw.reads_after_error == 0
    assert all(write.endswith(b"\n") for write in out.writes), "a write that is not whole lines"
    assert out.unflushed == 0, "answers written but not flushed"
    assert answers(out.getvalue()) == [ok(i, [i]) for i in range(whole)]


# --- interrupts --------------------------------------------------------------------------------------------


def test_keyboard_interrupt_in_handler_writes_the_answers_gathered_before(impl: ModuleType) -> None:
    """Native gathers answers while lines are buffered: they are written before KeyboardInterrupt propagates."""
    calls: list[int] = []

    def handler(method: str, params: Any) -> Any:
        calls.append(params[0])
        if params[0] == 5:
            raise KeyboardInterrupt
        return params

    out = RecordingOutput()
    data = b"".join(request("echo", [i], id=i) for i in range(10))
    with pytest.raises(KeyboardInterrupt):
        impl.StdioTransport(io.BytesIO(data), out).serve(handler)
    assert calls == [0, 1, 2, 3, 4, 5]
    assert out.unflushed == 0
    assert answers(out.getvalue()) == [ok(i, [i]) for i in range(5)]


INTERRUPT_TIMEOUT = 20  # seconds: "promptly", generously, on a noisy machine
BIG_REQUEST = request("big", [1_000_000], id=1)  # a 1 MB answer: far more than a pipe holds


def interrupt(server: Server) -> int:
    time.sleep(0.3)  # let serve block in its read (or write); the test passes either way, it only must not hang
    server.process.send_signal(signal.SIGINT)
    return server.wait(timeout=INTERRUPT_TIMEOUT)


@pytest.mark.slow
@pytest.mark.timeout(CHILD_TIMEOUT + 30)
@pytest.mark.parametrize("mode", ["default", "raw-stdin"])
@pytest.mark.parametrize("served", [0, 3], ids=["idle", "after-requests"])
def test_sigint_while_blocked_reading(spawn: Any, mode: str, served: int) -> None:
    """SIGINT reaches a server blocked reading an idle pipe (stdin stays open): it stops with KeyboardInterrupt."""
    server = spawn(mode)
    for i in range(served):
        server.send(request("echo", [i], id=i))
        assert server.receive() == ok(i, [i])
    status = interrupt(server)
    stderr = server.errors()
    assert status == -signal.SIGINT, stderr
    assert stderr.count("Traceback (most recent call last)") == 1, stderr
    assert stderr.rstrip().endswith("KeyboardInterrupt"), stderr


@pytest.mark.timeout(CHILD_TIMEOUT + 30)
@pytest.mark.parametrize("mode", ["default", "raw-stdout"])
def test_sigint_while_blocked_writing(spawn: Any, impl: ModuleType, mode: str) -> None:
    """A 1 MB answer to a client that does not read: serve blocks in write, SIGINT must still stop it.

    A pipe write interrupted after part of the data went out returns that part, not EINTR, so whoever
    loops over partial writes must check for signals (io.BufferedWriter does; rpcwire.pure's loop is
    Python code, which does).
    """
    server = spawn(mode)
    server.send(BIG_REQUEST)
    status = interrupt(server)
    stderr = server.errors()
    assert status == -signal.SIGINT, stderr
    assert stderr.rstrip().endswith("KeyboardInterrupt"), stderr


@pytest.mark.timeout(CHILD_TIMEOUT + 30)
def test_sigint_while_waiting_for_the_writer(spawn: Any) -> None:
    """serve waits to write an answer while another thread holds the writer, blocked on a full pipe (a raw
    stdout, the client reading nothing): SIGINT must stop the wait."""
    server = spawn("lock-held")
    server.send(request("hold", [1_000_000], id=1))
    status = interrupt(server)
    stderr = server.errors()
    assert status == -signal.SIGINT, stderr
    assert stderr.rstrip().endswith("KeyboardInterrupt"), stderr


# --- handlers that misbehave: in-process cases -------------------------------------------------------------


def serve_result(impl: ModuleType, make: Any) -> Any:
    """The answer to one request whose result is ``make()``; a second request checks that the stream goes on."""

    def handler(method: str, params: Any) -> Any:
        return make() if method == "case" else params

    first, second = answers(served(impl, request("case", id=1) + request("echo", ["after"], id=2), handler))
    assert second == ok(2, ["after"])
    return first


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")


class StrReturnsInt(Exception):
    def __str__(self) -> Any:
        return 5  # noqa: PLE0307


class BadData(rpcwire.JsonRpcError):
    code = 42


def raise_runtime_error(*args: Any) -> Any:
    raise RuntimeError("unreadable")


class CodeRaises(rpcwire.JsonRpcError):
    code = property(raise_runtime_error)  # type: ignore[assignment]


class MessageRaises(rpcwire.JsonRpcError):
    message = property(raise_runtime_error, lambda self, value: None)  # type: ignore[assignment]

    def __init__(self) -> None:
        Exception.__init__(self, "no message")


class DataRaises(rpcwire.JsonRpcError):
    data = property(raise_runtime_error, lambda self, value: None)  # type: ignore[assignment]


class Armed:
    """A mixin for keys whose ``__eq__``/``__hash__``/``__str__``/``__repr__`` raise once they are in a dict."""

    armed = False

    def __eq__(self, other: object) -> bool:
        if Armed.armed:
            raise RuntimeError("eq")
        return super().__eq__(other)

    def __hash__(self) -> int:
        if Armed.armed:
            raise RuntimeError("hash")
        return super().__hash__()

    def __str__(self) -> str:
        raise RuntimeError("str")

    def __repr__(self) -> str:
        raise RuntimeError("repr")


class ArmedStr(Armed, str):
    pass


class ArmedInt(Armed, int):
    pass


class ArmedFloat(Armed, float):
    pass


class ArmedObject(Armed):
    pass


class Color(IntEnum):
    RED = 1


class ItemsOnly(dict):
    """A dict subclass encoded through its items() (as json does), never through keys() or iteration."""

    def items(self) -> Any:
        return [("x", 1), (2, "two")]

    def keys(self) -> Any:
        raise AssertionError("keys() called")

    def __iter__(self) -> Any:
        raise AssertionError("__iter__ called")

    def __len__(self) -> int:
        return 2


class EmptyItemsRaise(dict):
    def items(self) -> Any:
        raise AssertionError("items() of an empty dict called")


class ItemsRaise(dict):
    def items(self) -> Any:
        raise KeyError("nope")


class ItemsNotPairs(dict):
    def items(self) -> Any:
        return [["a", 1]]


class ItemsNotIterable(dict):
    def items(self) -> Any:
        return 5


class ItemsLazy(dict):
    def items(self) -> Any:
        yield ("a", object())
        raise KeyError("late")


class ReversedList(list):
    def __iter__(self) -> Any:
        return iter(list(reversed(list(super().__iter__()))))


class OtherTuple(tuple):
    def __iter__(self) -> Any:
        return iter(["other"])


def raises(exc: BaseException) -> Any:
    def make() -> Any:
        raise exc

    return make


LIMIT_DIGITS = INT_MAX_STR_DIGITS


def int_limit_detail() -> str:
    with pytest.raises(ValueError) as raised:
        json.dumps(10**10_000)
    return str(raised.value)


# Where int() has a digit limit (not on CPython 3.10.0 to 3.10.6): an int past it cannot be written.
DIGIT_LIMIT_CASES = (
    {
        "int-at-digit-limit": (lambda: 10 ** (LIMIT_DIGITS - 1), ok(1, 10 ** (LIMIT_DIGITS - 1))),
        "huge-int": (lambda: [1, 10**10_000], internal(1, "ValueError", int_limit_detail())),
        "huge-negative-int-key": (lambda: {-(10**10_000): 1}, internal(1, "ValueError", int_limit_detail())),
    }
    if LIMIT_DIGITS
    else {}
)


MISBEHAVING = {
    "unprintable-result": (
        Unprintable,
        internal(1, "TypeError", "Object of type Unprintable is not JSON serializable"),
    ),
    "unprintable-exception": (
        raises(UnprintableError()),
        internal(1, "UnprintableError", "<unprintable UnprintableError object>"),
    ),
    "str-returns-int": (raises(StrReturnsInt()), internal(1, "StrReturnsInt", "<unprintable StrReturnsInt object>")),
    "unencodable-error-data": (
        raises(BadData("m", data=Unprintable())),
        internal(1, "TypeError", "Object of type Unprintable is not JSON serializable"),
    ),
    "error-data-int-keys": (raises(BadData("m", data={1: [2]})), err(1, 42, "m", {"1": [2]})),
    # An error whose code, message or data cannot be read is answered as any other exception.
    "error-code-raises": (raises(CodeRaises("m")), internal(1, "CodeRaises", "m")),
    "error-message-raises": (raises(MessageRaises()), internal(1, "MessageRaises", "no message")),
    "error-data-raises": (raises(DataRaises("m")), internal(1, "DataRaises", "m")),
    "subclasses-with-raising-dunders": (
        lambda: {ArmedStr("k"): [ArmedStr("v\n"), ArmedInt(7), ArmedFloat(1.5), ArmedInt(10**30)]},
        ok(1, {"k": ["v\n", 7, 1.5, 10**30]}),
    ),
    "int-subclass-keys": (
        lambda: {ArmedInt(5): 1, ArmedFloat(2.5): 2, Color.RED: Color.RED},
        ok(1, {"5": 1, "2.5": 2, "1": 1}),
    ),
    "object-key-raising-eq-hash": (
        lambda: {ArmedObject(): 1},
        internal(1, "TypeError", "keys must be str, int, float, bool or None, not ArmedObject"),
    ),
    "int-keys": (lambda: {1: "a", -2: "b", 10**30: "c"}, ok(1, {"1": "a", "-2": "b", str(10**30): "c"})),
    "float-keys": (lambda: {1.5: "a", -0.0: "b", 1e300: "c"}, ok(1, {"1.5": "a", "-0.0": "b", "1e+300": "c"})),
    "bool-none-keys": (lambda: {True: 1, False: 2, None: 3}, ok(1, {"true": 1, "false": 2, "null": 3})),
    "nan-key": (
        lambda: {float("nan"): 1},
        internal(1, "ValueError", "Out of range float values are not JSON compliant"),
    ),
    "tuple-key": (
        lambda: {(1, 2): 1},
        internal(1, "TypeError", "keys must be str, int, float, bool or None, not tuple"),
    ),
    "dict-subclass-items": (lambda: ItemsOnly(a=1), ok(1, {"x": 1, "2": "two"})),
    "empty-dict-subclass": (EmptyItemsRaise, ok(1, {})),
    "items-raises": (lambda: ItemsRaise(a=1), internal(1, "KeyError", "'nope'")),
    "items-not-pairs": (lambda: ItemsNotPairs(a=1), internal(1, "ValueError", "items must return 2-tuples")),
    **DIGIT_LIMIT_CASES,
}


ARMED = {"subclasses-with-raising-dunders", "int-subclass-keys", "object-key-raising-eq-hash"}


@pytest.mark.parametrize("case", list(MISBEHAVING))
def test_misbehaving_result(impl: ModuleType, case: str) -> None:
    make, expected = MISBEHAVING[case]
    if case in ARMED:
        built = make()  # the keys go into the dict while their __hash__ still works
        make = lambda: built  # noqa: E731
    Armed.armed = case in ARMED
    try:
        assert serve_result(impl, make) == expected
    finally:
        Armed.armed = False


def test_huge_int_without_digit_limit(impl: ModuleType) -> None:
    set_limit = getattr(sys, "set_int_max_str_digits", None)  # none, and no limit, before 3.10.7
    if set_limit is not None:
        set_limit(0)
    try:
        assert serve_result(impl, lambda: 10**10_000) == ok(1, 10**10_000)
    finally:
        if set_limit is not None:
            set_limit(LIMIT_DIGITS)


EXOTIC_SUBCLASSES = {
    # json takes items() whole (PyMapping_Items) with CPython's own error for a non-iterable ...
    "items-not-iterable": lambda: ItemsNotIterable(a=1),
    # ... so an error part-way through items() wins over one in an item already yielded
    "items-lazy": lambda: ItemsLazy(a=1),
    # list and tuple subclasses are encoded through their __iter__ (PySequence_Fast)
    "list-subclass-iter": lambda: [ReversedList([1, 2, 3]), OtherTuple((1, 2))],
}


@pytest.mark.parametrize("case", list(EXOTIC_SUBCLASSES))
def test_native_and_pure_agree_on_exotic_subclasses(case: str) -> None:
    make = EXOTIC_SUBCLASSES[case]
    assert serve_result(rpcwire, make) == serve_result(rpcwire.pure, make)


class CountsIter(list):
    calls = 0

    def __iter__(self) -> Any:
        CountsIter.calls += 1
        return super().__iter__()


class CountsItems(dict):
    calls = 0

    def items(self) -> Any:
        CountsItems.calls += 1
        return [("k", CountsIter([1, CountsIter([])]))]


class ItemsRaiseLater(dict):
    def items(self) -> Any:
        raise KeyError("items")


class DuplicateItems(dict):
    """items() may give keys a dict could not hold together (1, True, 1.0): json writes each pair."""

    def items(self) -> Any:
        return [("a", 1), (1, "int"), (True, "bool"), (1.0, "float"), (None, [])]


def circular() -> Any:
    x: list[Any] = [1]
    x.append(x)
    return x


# json fails at the first of these in its order of encoding; whatever else the result holds is never looked at
ORDERED_FAILURES = {
    "object-then-cycle": lambda: [object(), circular()],
    "cycle-then-object": lambda: [circular(), object()],
    "object-then-items-raises": lambda: [object(), ItemsRaiseLater(a=1)],
    "items-raises-then-object": lambda: [ItemsRaiseLater(a=1), object()],
    "nan-then-items-raises": lambda: {"a": float("nan"), "b": ItemsRaiseLater(a=1)},
    "bad-key-then-items-raises": lambda: {(1,): ItemsRaiseLater(a=1)},
    "bad-item-then-items-raises": lambda: [ItemsNotPairs(a=1), ItemsRaiseLater(a=1)],
    "duplicate-and-colliding-keys": lambda: DuplicateItems(a=1),
}


@pytest.mark.parametrize("case", [*MISBEHAVING, *EXOTIC_SUBCLASSES, *ORDERED_FAILURES])
def test_raised_recursion_limit_encodes_as_json_does(impl: ModuleType, case: str) -> None:
    """With the limit raised past 2,000, rpcwire.pure encodes a copy made as json reads the result: same bytes."""
    if case in ARMED:
        return
    make = (MISBEHAVING.get(case) or (None,))[0] or EXOTIC_SUBCLASSES.get(case) or ORDERED_FAILURES[case]
    expected = serve_result(rpcwire, make)
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(5_000)
    try:
        assert serve_result(impl, make) == expected
    finally:
        sys.setrecursionlimit(previous)


class IterRaises(list):
    def __iter__(self) -> Any:
        raise KeyError("iter")


def test_depth_is_checked_before_a_list_subclass_is_iterated(impl: ModuleType) -> None:
    """As json: past 2,000 levels, the RecursionError comes before the container's ``__iter__`` is called."""
    value: Any = IterRaises([1])
    for _ in range(2_000):
        value = [value]
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(5_000)
    try:
        got = serve_result(impl, lambda: value)
    finally:
        sys.setrecursionlimit(previous)
    assert got == internal(1, "RecursionError", "maximum recursion depth exceeded while encoding a JSON object")


def test_raised_recursion_limit_calls_items_and_iter_once(impl: ModuleType) -> None:
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(5_000)
    CountsItems.calls = CountsIter.calls = 0
    try:
        result = serve_result(impl, lambda: [CountsItems(a=1), CountsIter([CountsIter([])])])
    finally:
        sys.setrecursionlimit(previous)
    assert result == ok(1, [{"k": [1, []]}, [[]]])
    assert (CountsItems.calls, CountsIter.calls) == (1, 4)


# --- handlers that misbehave: in a child process -----------------------------------------------------------

CASE_CHILD = """
import importlib, io, sys, threading, time

impl = importlib.import_module(sys.argv[1])
REPEAT = {repeat}
{setup}


def handler(method, params):
    return result() if method == "case" else params


requests = b"".join(b'{{"jsonrpc":"2.0","method":"case","id":%d}}\\n' % i for i in range(REPEAT))
requests += b'{{"jsonrpc":"2.0","method":"echo","params":["after"],"id":"after"}}\\n'
impl.serve(handler, impl.StdioTransport(io.BytesIO(requests), sys.stdout.buffer))
{teardown}
"""


def serve_in_child(impl: ModuleType, setup: str, repeat: int = 1, teardown: str = "") -> list[Any]:
    """Answers of a child process serving ``repeat`` requests whose result is ``result()`` (defined by ``setup``)."""
    script = CASE_CHILD.format(repeat=repeat, setup=textwrap.dedent(setup), teardown=textwrap.dedent(teardown))
    done = subprocess.run(
        [sys.executable, "-c", script, impl.__name__],
        capture_output=True,
        env=child_env(),
        timeout=CHILD_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"child died with {done.returncode}: {done.stderr.decode(errors='replace')}"
    got = answers(done.stdout)
    assert got[-1] == ok("after", ["after"])
    return got[:-1]


DEEP_LIST = """
deep = []
for _ in range(100_000):
    deep = [deep]
result = lambda: deep
"""

DEEP_DICT = """
deep = {}
for _ in range(100_000):
    deep = {"k": deep}
result = lambda: deep
"""

DEEP_DICT_SUBCLASS = """
class Items(dict):
    def items(self):
        return list(dict.items(self))
deep = Items()
for _ in range(100_000):
    deep = Items(k=deep)
result = lambda: deep
"""

DEEP_BEHIND_ITEMS = """
class Items(dict):
    def items(self):
        deep = []
        for _ in range(100_000):
            deep = [deep]
        yield ("k", deep)
result = lambda: [Items(a=1)]
"""

ENCODING_DEPTH = internal(0, "RecursionError", "maximum recursion depth exceeded while encoding a JSON object")
CALL_DEPTH = internal(0, "RecursionError", "maximum recursion depth exceeded while calling a Python object")


@pytest.mark.slow
@pytest.mark.timeout(CHILD_TIMEOUT + 30)
@pytest.mark.parametrize("setup", [DEEP_LIST, DEEP_DICT, DEEP_DICT_SUBCLASS], ids=["list", "dict", "dict-subclass"])
@pytest.mark.parametrize("limit", [None, 1_000_000], ids=["default-limit", "raised-limit"])
def test_deeply_nested_result_is_an_internal_error(impl: ModuleType, setup: str, limit: int | None) -> None:
    """100,000 levels: RecursionError (at the recursion check, or at 2,000 levels), no crash; both alike."""
    prefix = "" if limit is None else f"sys.setrecursionlimit({limit})\n"
    # items() is a Python call: where the interpreter's recursion check trips before the 2,000-level cap,
    # its check on that call is the one that trips. That check is the recursion limit up to 3.11, a C
    # recursion limit of its own from 3.12 (1,500 on 3.12, whatever the limit; 10,000 on 3.13).
    check_first = limit is None if sys.version_info < (3, 12) else sys.version_info < (3, 13)
    expected = CALL_DEPTH if setup is DEEP_DICT_SUBCLASS and check_first else ENCODING_DEPTH
    assert serve_in_child(impl, prefix + setup) == [expected]


@pytest.mark.timeout(CHILD_TIMEOUT + 30)
def test_deep_value_behind_a_dict_subclass_items(impl: ModuleType) -> None:
    """What ``items()`` gives is what is encoded, so that is what the depth guard must walk (pure crashed)."""
    assert serve_in_child(impl, "sys.setrecursionlimit(1_000_000)\n" + DEEP_BEHIND_ITEMS) == [ENCODING_DEPTH]


CIRCULAR = {
    "list": "x = []\nx.append(x)\nresult = lambda: x",
    "dict": "x = {}\nx['me'] = x\nresult = lambda: x",
    "deep-cycle": "x = [1]\ny = {'a': (x, 2)}\nx.append([y])\nresult = lambda: [x]",
    "dict-subclass-items": """
        class Loop(dict):
            def items(self):
                return [("me", self)]
        result = lambda: Loop(a=1)
        """,
}


@pytest.mark.timeout(CHILD_TIMEOUT + 30)
@pytest.mark.parametrize("case", list(CIRCULAR))
def test_self_referencing_result_is_an_internal_error(impl: ModuleType, case: str) -> None:
    assert serve_in_child(impl, CIRCULAR[case]) == [internal(0, "ValueError", "Circular reference detected")]


MUTATE_OUTER_DICT = """
class Grows(dict):
    def items(self):
        outer["new"] = 1  # the dict being encoded changes size under the encoder
        return [("m", 1)]
def result():
    global outer
    outer = {"a": Grows(x=1), "b": 2}
    return outer
"""

REPLACE_OUTER_KEY = """
class Swaps(dict):
    def items(self):
        del outer["b"]  # same size, other key
        outer["c"] = 3
        return [("m", 1)]
def result():
    global outer
    outer = {"a": Swaps(x=1), "b": 2}
    return outer
"""

FREE_ITSELF = """
class Frees(dict):
    def items(self):
        holder.clear()  # drops the last reference to the dict being encoded, and to the next one
        return [("m", [1] * 3)]
def result():
    global holder
    holder = [Frees(x=1), Frees(y=2), "tail"]
    return holder
"""

FREE_DICT_VALUES = """
class Frees(dict):
    def items(self):
        outer.clear()  # drops every value of the dict being encoded
        return [("m", 1)]
def result():
    global outer
    outer = {"a": Frees(x=1), "b": [object()]}
    return outer
"""


def walks_dicts_live(impl: ModuleType) -> bool:
    """Whether ``impl`` encodes a dict as it is when each member is reached, not from a snapshot of its items:
    ``rpcwire.pure`` on 3.12 and later, whose ``json`` walks a dict live (docs/semantics.md, "Encoding"), except on
    a free-threaded interpreter, where it encodes a snapshot (another thread could free what json reads live)."""
    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    return impl.__name__ == "rpcwire.pure" and sys.version_info >= (3, 12) and not free_threaded


@pytest.mark.native_case("the native encoder's snapshot of a dict (json walks it live from 3.12)")
@pytest.mark.timeout(CHILD_TIMEOUT + 30)
def test_dict_resized_while_encoded(impl: ModuleType) -> None:
    """The native module encodes a snapshot of a dict's items, taken before the first is written, as json did
    up to 3.11; json from 3.12 (so rpcwire.pure) shows the member added meanwhile."""
    expected = {"a": {"m": 1}, "b": 2, "new": 1} if walks_dicts_live(impl) else {"a": {"m": 1}, "b": 2}
    assert serve_in_child(impl, MUTATE_OUTER_DICT) == [ok(0, expected)]


@pytest.mark.native_case("the native encoder's snapshot of a dict (json walks it live from 3.12)")
@pytest.mark.timeout(CHILD_TIMEOUT + 30)
def test_dict_key_replaced_while_encoded(impl: ModuleType) -> None:
    """Same size, another key: the snapshot taken before encoding is what is written (live: the new key)."""
    expected = {"a": {"m": 1}, "c": 3} if walks_dicts_live(impl) else {"a": {"m": 1}, "b": 2}
    assert serve_in_child(impl, REPLACE_OUTER_KEY) == [ok(0, expected)]


@pytest.mark.timeout(CHILD_TIMEOUT + 30)
def test_list_emptied_while_encoded(impl: ModuleType) -> None:
    """The list being encoded is emptied by code its encoding runs: both stop at its new end, no use after free
    (rpcwire.pure on a free-threaded interpreter encodes its snapshot, taken before: docs/semantics.md, "Encoding")."""
    expected = [{"m": [1, 1, 1]}]
    if impl.__name__ == "rpcwire.pure" and sysconfig.get_config_var("Py_GIL_DISABLED"):
        expected = [{"m": [1, 1, 1]}, {"m": [1, 1, 1]}, "tail"]
    assert serve_in_child(impl, FREE_ITSELF) == [ok(0, expected)]


@pytest.mark.native_case("the native encoder's snapshot of a dict (json walks it live from 3.12)")
@pytest.mark.timeout(CHILD_TIMEOUT + 30)
def test_dict_emptied_while_encoded(impl: ModuleType) -> None:
    """The dict being encoded is emptied (its values freed): both go on with the snapshot, which holds its own
    references (and meet the object() in it); no use after free. Walked live, the emptied dict ends there."""
    expected = internal(0, "TypeError", "Object of type object is not JSON serializable")
    if walks_dicts_live(impl):
        expected = ok(0, {"a": {"m": 1}})
    assert serve_in_child(impl, FREE_DICT_VALUES) == [expected]


MUTATED_FROM_A_THREAD = """
import random

sys.setswitchinterval(1e-5)


class Yields(dict):
    \"\"\"Encoded through items(), which lets other threads run in the middle of the encoding.\"\"\"

    def items(self):
        time.sleep(0)
        return list(dict.items(self))


shared_dict = {f"k{i}": Yields(v=i) for i in range(50)}
shared_list = [Yields(v=i) for i in range(50)]
stop = threading.Event()


def mutate():
    rnd = random.Random(1)
    n = 0
    while not stop.is_set():
        n += 1
        op = rnd.randrange(6)
        try:
            if op == 0 and len(shared_dict) < 100:
                shared_dict[f"n{n}"] = Yields(v=n)
            elif op == 1:
                shared_dict.pop(next(iter(shared_dict)))
            elif op == 2 and len(shared_list) < 100:
                shared_list.append(Yields(v=n))
            elif op == 3:
                shared_list.pop(rnd.randrange(len(shared_list)))
            elif op == 4:
                shared_list[rnd.randrange(len(shared_list))] = [Yields(v=n), "x" * (n % 100)]
            else:  # the dict grows past a resize and shrinks back to its size
                for j in range(50):
                    shared_dict[f"t{j}"] = j
                for j in range(50):
                    shared_dict.pop(f"t{j}", None)
        except (IndexError, KeyError, RuntimeError, StopIteration, ValueError):
            pass


mutator = threading.Thread(target=mutate)
mutator.start()
result = lambda: {"d": shared_dict, "l": shared_list}
"""


@pytest.mark.slow
@pytest.mark.timeout(CHILD_TIMEOUT + 30)
def test_result_mutated_from_another_thread(impl: ModuleType) -> None:
    """A thread adds, removes and replaces entries while 300 results holding them are encoded."""
    got = serve_in_child(impl, MUTATED_FROM_A_THREAD, repeat=300, teardown="stop.set()\nmutator.join()")
    assert [answer["id"] for answer in got] == list(range(300))
    for answer in got:
        assert set(answer["result"]) == {"d", "l"}, "each dict is encoded from a snapshot, as json does"
