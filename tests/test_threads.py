"""Writes from several threads are whole lines: 8 threads send notifications while ``serve`` answers requests,
all on one real pipe whose read end a thread drains.
"""

from __future__ import annotations

import io
import json
import os
import threading
from types import ModuleType
from typing import Any

import pytest
from conftest import request

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
