"""Writes from several threads are whole lines: 8 threads send notifications while ``serve`` answers requests,
all on one real pipe whose read end a thread drains; and 16 threads against 100,000 requests in a child process.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from types import ModuleType
from typing import Any

import pytest
from support.messages import request
from support.processes import child_env

THREADS = 8
NOTIFICATIONS = 500
REQUESTS = 2_000
PAD = "é" + "x" * 2_046  # about 2 KiB per notification


def drain(fd: int, chunks: list[bytes]) -> None:
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("buffering", [0, -1], ids=["raw", "buffered"])
def test_concurrent_writers_never_interleave(impl: ModuleType, buffering: int) -> None:
    read_fd, write_fd = os.pipe()
    chunks: list[bytes] = []
    drainer = threading.Thread(target=drain, args=(read_fd, chunks), daemon=True)
    drainer.start()
    stdout = os.fdopen(write_fd, "wb", buffering=buffering)
    stdin = io.BytesIO(b"".join(request("echo", [i, "r" * (i % 300)], id=i) for i in range(REQUESTS)))
    transport = impl.StdioTransport(stdin, stdout)
    start = threading.Barrier(THREADS + 1)
    failures: list[BaseException] = []

    def notify(thread: int) -> None:
        try:
            start.wait(timeout=30)
            for seq in range(NOTIFICATIONS):
                transport.write_notification("progress", {"thread": thread, "seq": seq, "pad": PAD})
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)

    def handler(method: str, params: Any) -> Any:
        return params

    writers = [threading.Thread(target=notify, args=(t,), daemon=True) for t in range(THREADS)]
    try:
        for writer in writers:
            writer.start()
        start.wait(timeout=30)
        transport.serve(handler)
        for writer in writers:
            writer.join(timeout=30)
        assert not any(writer.is_alive() for writer in writers), "a writer thread is stuck (deadlock?)"
    finally:
        stdout.close()
        drainer.join(timeout=30)
        os.close(read_fd)
    assert not drainer.is_alive()
    assert failures == []

    output = b"".join(chunks)
    assert output.endswith(b"\n")
    responses = []
    seqs: dict[int, list[int]] = {t: [] for t in range(THREADS)}
    for line in output.split(b"\n")[:-1]:
        message = json.loads(line)  # a torn or interleaved line fails here
        if "method" in message:
            assert message["params"]["pad"] == PAD
            seqs[message["params"]["thread"]].append(message["params"]["seq"])
        else:
            responses.append(message)
    assert seqs == {t: list(range(NOTIFICATIONS)) for t in range(THREADS)}
    assert [r["id"] for r in responses] == list(range(REQUESTS))
    assert all(r["result"] == [r["id"], "r" * (r["id"] % 300)] for r in responses)


@pytest.mark.timeout(60)
def test_handler_progress_from_worker_threads(impl: ModuleType) -> None:
    """A handler that fans work out to threads, each reporting progress, before answering."""
    read_fd, write_fd = os.pipe()
    chunks: list[bytes] = []
    drainer = threading.Thread(target=drain, args=(read_fd, chunks), daemon=True)
    drainer.start()
    stdout = os.fdopen(write_fd, "wb")
    transport = impl.StdioTransport(io.BytesIO(b"".join(request("fan", id=i) for i in range(20))), stdout)

    def handler(method: str, params: Any) -> Any:
        def work(n: int) -> None:
            for _ in range(10):
                transport.write_notification("step", {"worker": n, "pad": PAD})

        workers = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=30)
        return "ok"

    try:
        transport.serve(handler)
    finally:
        stdout.close()
        drainer.join(timeout=30)
        os.close(read_fd)
    messages = [json.loads(line) for line in b"".join(chunks).split(b"\n")[:-1]]
    assert len(messages) == 20 * (40 + 1)
    for i in range(20):
        block = messages[i * 41 : (i + 1) * 41]
        assert all(m["method"] == "step" for m in block[:40])
        assert block[40] == {"jsonrpc": "2.0", "id": i, "result": "ok"}


MANY_CHILD = """
import importlib, json, os, sys, threading

impl = importlib.import_module(sys.argv[1])
REQUESTS, THREADS, EACH = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
in_read, in_write = os.pipe()
out_read, out_write = os.pipe()
chunks = []


def drain():
    while chunk := os.read(out_read, 1 << 16):
        chunks.append(chunk)


def feed():
    with os.fdopen(in_write, "wb") as pipe:
        for i in range(REQUESTS):
            pipe.write(b'{"jsonrpc":"2.0","method":"echo","params":[%d,"%s"],"id":%d}\\n' % (i, b"r" * (i % 50), i))


start = threading.Barrier(THREADS + 2)
failures = []


def notify(thread):
    try:
        start.wait()
        for seq in range(EACH):
            transport.write_notification("progress", {"thread": thread, "seq": seq, "pad": "é" * (seq * 37 % 6000)})
    except BaseException as exc:
        failures.append(repr(exc))


stdin, stdout = os.fdopen(in_read, "rb"), os.fdopen(out_write, "wb")
transport = impl.StdioTransport(stdin, stdout)
drainer = threading.Thread(target=drain)
feeder = threading.Thread(target=lambda: (start.wait(), feed()))
writers = [threading.Thread(target=notify, args=(t,)) for t in range(THREADS)]
for thread in [drainer, feeder, *writers]:
    thread.start()
start.wait()
transport.serve(lambda method, params: params)
for thread in [feeder, *writers]:
    thread.join()
stdin.close()
stdout.close()
drainer.join()
os.close(out_read)

output = b"".join(chunks)
lines = output.split(b"\\n")
summary = {"tail": lines.pop().decode(errors="replace"), "torn": [], "ids": [], "notes": [], "failures": failures}
for line in lines:
    try:
        message = json.loads(line)
    except ValueError:
        summary["torn"].append(line[:200].decode(errors="replace"))
        continue
    if "method" in message:
        params = message["params"]
        assert params["pad"] == "é" * (params["seq"] * 37 % 6000), "a notification's content changed"
        summary["notes"].append([params["thread"], params["seq"]])
    else:
        assert message["result"] == [message["id"], "r" * (message["id"] % 50)], message
        summary["ids"].append(message["id"])
json.dump(summary, sys.stdout)
"""

MANY_REQUESTS = 100_000
MANY_THREADS = 16
MANY_EACH = 1_000


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_16_threads_notify_while_serve_answers_100000_requests_on_real_pipes(impl: ModuleType) -> None:
    """In a child process (a deadlock is then a timeout, not a stuck pytest): requests arrive on a pipe fed by a
    thread, answers and 16 threads' notifications (up to 12 KB each, beyond PIPE_BUF) share one pipe drained by
    another thread. Every line parses, every answer and every (thread, seq) notification is there exactly once."""
    requests = MANY_REQUESTS
    try:
        done = subprocess.run(
            [sys.executable, "-c", MANY_CHILD, impl.__name__, str(requests), str(MANY_THREADS), str(MANY_EACH)],
            capture_output=True,
            env=child_env(),
            timeout=240,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the child did not finish: a deadlock between serve and the writer threads?")
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    summary = json.loads(done.stdout)
    assert summary["failures"] == []
    assert summary["torn"] == []
    assert summary["tail"] == ""
    assert sorted(summary["ids"]) == list(range(requests))
    assert sorted(map(tuple, summary["notes"])) == [(t, s) for t in range(MANY_THREADS) for s in range(MANY_EACH)]


# --- a stream that calls back into its own transport ---------------------------------------------------


class ForwardingOutput(io.BytesIO):
    """An output whose ``write`` reports each write through the transport it belongs to (as a log handler
    that forwards records as notifications would): a re-entrant write, refused with ``RuntimeError``."""

    def __init__(self) -> None:
        super().__init__()
        self.transport: Any = None
        self.refusals: list[str] = []

    def write(self, data: Any) -> int:
        if self.transport is not None:
            try:
                self.transport.write_notification("wrote", len(data))
            except RuntimeError as refused:
                self.refusals.append(str(refused))
        return super().write(data)


def test_a_reentrant_write_is_refused_not_a_deadlock(impl: ModuleType) -> None:
    out = ForwardingOutput()
    transport = impl.StdioTransport(io.BytesIO(request("m", [1], id=1) + request("m", [2], id=2)), out)
    out.transport = transport
    server = threading.Thread(target=transport.serve, args=(lambda m, p: p,), daemon=True)
    server.start()
    server.join(timeout=30)
    assert not server.is_alive(), "serve deadlocked on its own output stream"
    assert out.getvalue() == b'{"jsonrpc":"2.0","id":1,"result":[1]}\n{"jsonrpc":"2.0","id":2,"result":[2]}\n'
    expected = "reentrant write: the output stream called back into the transport it belongs to"
    assert out.refusals == [expected, expected]


def test_the_same_lock_is_free_again_for_other_calls(impl: ModuleType) -> None:
    """The refusal is for the thread inside the stream's write only: later writes from it go through."""
    out = ForwardingOutput()
    transport = impl.StdioTransport(io.BytesIO(), out)
    out.transport = transport
    transport.write_notification("first")
    out.transport = None
    transport.write_notification("second")
    assert out.getvalue().count(b"\n") == 2
    assert len(out.refusals) == 1
