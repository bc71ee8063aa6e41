"""Real pipes: a server process on its own stdin/stdout (the ``StdioTransport()`` defaults), and in-process
pipes. The client sends one request and reads one answer before the next, so a reader that waits for
more input than one line needs hangs, and the watchdog turns the hang into a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import IO, Any

import pytest
import rpcwire
from conftest import echo, request

SERVER = """
import importlib, sys

impl = importlib.import_module(sys.argv[1])
transport = impl.StdioTransport()


def handler(method, params):
    if method == "echo":
        return params
    if method == "long":
        for step in range(params["steps"]):
            transport.write_notification("progress", {"step": step})
        return {"done": params["steps"]}
    raise impl.MethodNotFound()


impl.serve(handler, transport)
"""

WATCHDOG_SECONDS = 60


class Server:
    """A server process with a watchdog that kills it if the test takes too long."""

    def __init__(self, tmp_path: Path, module: str) -> None:
        script = tmp_path / "server.py"
        script.write_text(SERVER)
        package_root = str(Path(rpcwire.__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in [package_root, env.get("PYTHONPATH", "")] if p)
        env.pop("PYTHONUNBUFFERED", None)  # the defaults must work with ordinary buffered streams
        self.stderr = (tmp_path / "stderr.txt").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, str(script), module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
        )
        self.stderr_path = tmp_path / "stderr.txt"
        self.watchdog = threading.Timer(WATCHDOG_SECONDS, self.process.kill)
        self.watchdog.start()

    @property
    def stdin(self) -> IO[bytes]:
        assert self.process.stdin is not None
        return self.process.stdin

    @property
    def stdout(self) -> IO[bytes]:
        assert self.process.stdout is not None
        return self.process.stdout

    def send(self, data: bytes) -> None:
        self.stdin.write(data)
        self.stdin.flush()

    def receive(self) -> Any:
        line = self.stdout.readline()
        assert line.endswith(b"\n"), f"no answer line (server hung or died): {line!r}; stderr: {self.errors()}"
        return json.loads(line)

    def errors(self) -> str:
        self.stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def close(self) -> None:
        self.watchdog.cancel()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()
        self.stderr.close()


@pytest.fixture
def server(impl: ModuleType, tmp_path: Path) -> Iterator[Server]:
    running = Server(tmp_path, impl.__name__)
    try:
        yield running
    finally:
        running.close()


def test_lockstep_round_trips(server: Server) -> None:
    """200 requests, each answered before the next is sent."""
    for i in range(200):
        params = [i, "é" * (i % 7), {"k": "x" * (i * 37 % 5000)}]
        server.send(request("echo", params, id=i))
        assert server.receive() == {"jsonrpc": "2.0", "id": i, "result": params}


def test_lockstep_with_errors_and_crlf(server: Server) -> None:
    server.send(b"not json\r\n")
    assert server.receive()["error"]["code"] == -32700
    server.send(b"[]\n")
    assert server.receive()["error"]["code"] == -32600
    server.send(request("nope", id="x").replace(b"\n", b"\r\n"))
    assert server.receive() == {"jsonrpc": "2.0", "id": "x", "error": {"code": -32601, "message": "Method not found"}}
    server.send(request("echo", [1], id=...) + b"\n  \n" + request("echo", [2], id=2))
    assert server.receive() == {"jsonrpc": "2.0", "id": 2, "result": [2]}


def test_two_requests_in_one_write_and_a_split_request(server: Server) -> None:
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


def test_long_call_sends_progress_before_its_result(server: Server) -> None:
    for round_ in range(3):
        server.send(request("long", {"steps": 25}, id=round_))
        received = [server.receive() for _ in range(26)]
        assert received[:25] == [{"jsonrpc": "2.0", "method": "progress", "params": {"step": s}} for s in range(25)]
        assert received[25] == {"jsonrpc": "2.0", "id": round_, "result": {"done": 25}}


def test_closing_stdin_ends_the_server_with_status_0(server: Server) -> None:
    server.send(request("echo", [1], id=1))
    assert server.receive()["result"] == [1]
    server.stdin.close()
    assert server.process.wait(timeout=WATCHDOG_SECONDS) == 0, server.errors()
    assert server.stdout.read() == b""


def test_last_request_without_newline_is_answered_at_eof(server: Server) -> None:
    server.send(request("echo", ["tail"], id=9).rstrip(b"\n"))
    server.stdin.close()
    assert server.receive() == {"jsonrpc": "2.0", "id": 9, "result": ["tail"]}
    assert server.process.wait(timeout=WATCHDOG_SECONDS) == 0, server.errors()


def test_large_messages_both_ways(server: Server) -> None:
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
