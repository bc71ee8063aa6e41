"""Real pipes: a server process on its own stdin/stdout (the ``StdioTransport()`` defaults), and in-process
pipes. The client sends one request and reads one answer before the next, so a reader that waits for
more input than one line needs hangs, and the watchdog turns the hang into a failure.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support.messages import echo, request
from support.processes import ServerProcess

SERVER = """
import importlib, os, sys, time

impl = importlib.import_module(sys.argv[1])
transport = impl.StdioTransport()


def handler(method, params):
    if method == "echo":
        return params
    if method == "wait_for":  # until the test creates the file params[0] names
        deadline = time.monotonic() + 60
        while not os.path.exists(params[0]) and time.monotonic() < deadline:
            time.sleep(0.01)
        return "released"
    if method == "exit":  # LSP's exit notification: the process ends at once
        os._exit(0)
    if method == "long":
        for step in range(params["steps"]):
            transport.write_notification("progress", {"step": step})
        return {"done": params["steps"]}
    raise impl.MethodNotFound()


impl.serve(handler, transport)
"""

WATCHDOG_SECONDS = 60


@pytest.fixture
def server(impl: ModuleType, tmp_path: Path) -> Iterator[ServerProcess]:
    running = ServerProcess(tmp_path, SERVER, [impl.__name__], WATCHDOG_SECONDS)
    try:
        yield running
    finally:
        running.close()


def test_lockstep_round_trips(server: ServerProcess) -> None:
    """200 requests, each answered before the next is sent."""
    for i in range(200):
        params = [i, "é" * (i % 7), {"k": "x" * (i * 37 % 5000)}]
        server.send(request("echo", params, id=i))
        assert server.receive() == {"jsonrpc": "2.0", "id": i, "result": params}


def test_lockstep_with_errors_and_crlf(server: ServerProcess) -> None:
    server.send(b"not json\r\n")
    assert server.receive()["error"]["code"] == -32700
    server.send(b"[]\n")
    assert server.receive()["error"]["code"] == -32600
    server.send(request("nope", id="x").replace(b"\n", b"\r\n"))
    assert server.receive() == {"jsonrpc": "2.0", "id": "x", "error": {"code": -32601, "message": "Method not found"}}
    server.send(request("echo", [1], id=...) + b"\n  \n" + request("echo", [2], id=2))
    assert server.receive() == {"jsonrpc": "2.0", "id": 2, "result": [2]}


def test_two_requests_in_one_write_and_a_split_request(server: ServerProcess) -> None:
    server.send(request("echo", [1], id=1) + request("echo", [2], id=2))
    assert [server.receive(), server.receive()] == [
        {"jsonrpc": "2.0", "id": 1, "result": [1]},
        {"jsonrpc": "2.0", "id": 2, "result": [2]},
    ]
    line = request("echo", ["split"], id=3)
    server.send(line[:10])
    time.sleep(0.05)
    server.send(line[10:])
    assert server.receive() == {"jsonrpc": "2.0", "id": 3, "result": ["split"]}


def test_long_call_sends_progress_before_its_result(server: ServerProcess) -> None:
    for round_ in range(3):
        server.send(request("long", {"steps": 25}, id=round_))
        received = [server.receive() for _ in range(26)]
        assert received[:25] == [{"jsonrpc": "2.0", "method": "progress", "params": {"step": s}} for s in range(25)]
        assert received[25] == {"jsonrpc": "2.0", "id": round_, "result": {"done": 25}}


def test_a_finished_answer_is_not_held_behind_a_later_handler(server: ServerProcess, tmp_path: Path) -> None:
    """A fast and a slow request in one write: the fast answer arrives while the slow handler still runs
    (held back, the read below would wait until the watchdog kills the server)."""
    release = tmp_path / "release"
    server.send(request("echo", ["fast"], id=1) + request("wait_for", [str(release)], id=2))
    assert server.receive() == {"jsonrpc": "2.0", "id": 1, "result": ["fast"]}
    release.touch()
    assert server.receive() == {"jsonrpc": "2.0", "id": 2, "result": "released"}


def test_an_answer_is_out_before_a_later_handler_ends_the_process(server: ServerProcess) -> None:
    """LSP's shutdown request then exit notification in one write: the shutdown answer is not lost."""
    server.send(request("echo", ["shutdown"], id=1) + request("exit", id=...))
    assert server.wait() == 0
    assert server.stdout.read() == b'{"jsonrpc":"2.0","id":1,"result":["shutdown"]}\n'


def test_closing_stdin_ends_the_server_with_status_0(server: ServerProcess) -> None:
    server.send(request("echo", [1], id=1))
    assert server.receive()["result"] == [1]
    server.stdin.close()
    assert server.process.wait(timeout=WATCHDOG_SECONDS) == 0, server.errors()
    assert server.stdout.read() == b""


def test_last_request_without_newline_is_answered_at_eof(server: ServerProcess) -> None:
    server.send(request("echo", ["tail"], id=9).rstrip(b"\n"))
    server.stdin.close()
    assert server.receive() == {"jsonrpc": "2.0", "id": 9, "result": ["tail"]}
    assert server.process.wait(timeout=WATCHDOG_SECONDS) == 0, server.errors()


def test_large_messages_both_ways(server: ServerProcess) -> None:
    """A 2 MB request and its 2 MB answer: more than a pipe buffer in each direction."""
    params = ["é" * 1_000_000]
    line = request("echo", params, id=1)
    writer = threading.Thread(target=server.send, args=(line,))
    writer.start()
    answer = server.receive()
    writer.join(timeout=WATCHDOG_SECONDS)
    assert answer == {"jsonrpc": "2.0", "id": 1, "result": params}


# --- in-process pipes ---------------------------------------------------------------------------


class PipeClient:
    """``serve`` in a thread on os.pipe() file objects; the client side is plain file descriptors."""

    def __init__(self, impl: ModuleType, buffering: int = -1) -> None:
        in_read, self._in_write = os.pipe()
        self._out_read, out_write = os.pipe()
        self.server_in = os.fdopen(in_read, "rb", buffering=buffering)
        self.server_out = os.fdopen(out_write, "wb", buffering=buffering)
        self.transport = impl.StdioTransport(self.server_in, self.server_out)
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.failure: list[BaseException] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.server = threading.Thread(target=self._serve, daemon=True)
        self.server.start()

    def _read(self) -> None:
        pending = b""
        while chunk := os.read(self._out_read, 65536):
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for line in complete:
                self.lines.put(line + b"\n")
        if pending:
            self.lines.put(pending)

    def _serve(self) -> None:
        try:
            self.transport.serve(echo)
        except BaseException as exc:  # reported by the test thread
            self.failure.append(exc)

    def send(self, data: bytes) -> None:
        os.write(self._in_write, data)

    def receive(self) -> Any:
        return json.loads(self.lines.get(timeout=20))

    def close(self) -> None:
        """End of input; the server must stop, then everything is closed."""
        if self._in_write >= 0:
            os.close(self._in_write)
            self._in_write = -1
        self.server.join(timeout=20)
        stopped = not self.server.is_alive()
        if stopped:
            self.server_out.close()
            self.server_in.close()
        self._reader.join(timeout=20)
        if not self._reader.is_alive():
            os.close(self._out_read)
        assert stopped, "serve did not return at end of input"
        assert self.failure == []


@pytest.mark.parametrize("buffering", [0, -1], ids=["raw", "buffered"])
def test_in_process_pipe_lockstep(impl: ModuleType, buffering: int) -> None:
    """``serve`` on os.pipe() file objects (raw ``FileIO`` or ``BufferedReader``), one line at a time."""
    client = PipeClient(impl, buffering)
    try:
        for i in range(50):
            client.send(request("echo", [i, "é"], id=i))
            assert client.receive() == {"jsonrpc": "2.0", "id": i, "result": [i, "é"]}
        client.send(b"[]\n" + request("echo", id=...) + request("missing", id="last"))
        assert client.receive()["error"]["code"] == -32600
        assert client.receive()["error"]["code"] == -32601
        line = request("echo", ["in pieces"], id="p")
        for byte in range(len(line)):
            client.send(line[byte : byte + 1])
        assert client.receive() == {"jsonrpc": "2.0", "id": "p", "result": ["in pieces"]}
    finally:
        client.close()
    assert client.lines.empty()


def test_in_process_pipe_notification_while_serve_waits(impl: ModuleType) -> None:
    """A notification written from another thread goes out while ``serve`` is blocked reading."""
    client = PipeClient(impl)
    try:
        time.sleep(0.05)  # serve is now blocked reading
        client.transport.write_notification("tick", [1])
        assert client.receive() == {"jsonrpc": "2.0", "method": "tick", "params": [1]}
        client.send(request("echo", [2], id=2))
        assert client.receive() == {"jsonrpc": "2.0", "id": 2, "result": [2]}
    finally:
        client.close()
