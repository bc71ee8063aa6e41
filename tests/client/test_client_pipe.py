"""The lone caller's path of ``Client`` (the core's ``_ClientPipe``: the stdout pipe read by the client itself,
a call made in two calls into the core), asked of both cores alike: the pipe's own steps, then a real server
that interleaves what a lone call reads before its answer, ends mid-call, or never answers."""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not hasattr(select, "poll"), reason="the client reads a pipe itself only with select.poll"),
]


class Pipes:
    """A ``_ClientPipe`` over fresh pipes: ``server_out`` is written as a server writes its stdout,
    ``server_in`` read as a server reads its stdin, ``halt`` the client's halt pipe."""

    def __init__(self, impl: ModuleType, framing: str = "newline") -> None:
        self.out_read, self.server_out = os.pipe()
        self.server_in, self.in_write = os.pipe()
        self.halt_read, self.halt = os.pipe()
        os.set_blocking(self.in_write, False)
        self.pipe = impl.Client._core._ClientPipe(
            self.out_read, self.in_write, self.halt_read, framing=framing, max_message_bytes=1 << 20, max_depth=16
        )

    def close(self) -> None:
        for fd in (self.out_read, self.server_out, self.server_in, self.in_write, self.halt_read, self.halt):
            with contextlib.suppress(OSError):
                os.close(fd)


@pytest.fixture
def pipes(impl: ModuleType) -> Iterator[Pipes]:
    made = Pipes(impl)
    yield made
    made.close()


def test_the_pipe_reads_as_a_transport_does(impl: ModuleType, pipes: Pipes) -> None:
    """Blank lines alone are no message, a message is classified as ``_read_incoming`` does, the end is ``None``."""
    pipe = pipes.pipe
    os.write(pipes.server_out, b"\n \r\n")
    pipe._read_available()
    assert pipe._has_buffered_message() is False
    os.write(pipes.server_out, b'{"jsonrpc":"2.0","id":1,"result":2}\nnot json\n')
    pipe._read_available()
    assert pipe._read_incoming() == impl.Response(1, 2, None)
    why, data = pipe._read_incoming()
    assert why.startswith("parse error") and data == b"not json"
    os.close(pipes.server_out)
    pipe._read_available()
    assert pipe._has_buffered_message() is True
    assert pipe._read_incoming() is None


@pytest.mark.parametrize("framing", ["newline", "content-length"])
def test_send_call_writes_the_request_framed(impl: ModuleType, framing: str) -> None:
    pipes = Pipes(impl, framing)
    try:
        assert pipes.pipe._send_call("echo", {"a": [1]}, 7, 1 << 16, 32) is None
        line = impl.Client._core._encode_request("echo", {"a": [1]}, 7)
        framed = impl.Client._core._encode_frame(line) if framing == "content-length" else line + b"\n"
        assert os.read(pipes.server_in, 1 << 16) == framed
    finally:
        pipes.close()


def test_send_call_beyond_the_quick_limits_writes_nothing(impl: ModuleType, pipes: Pipes) -> None:
    """Longer than ``quick_bytes``, or more brackets than ``quick_depth``: the line comes back, unwritten."""
    line = impl.Client._core._encode_request("echo", [[1]], 3)
    assert pipes.pipe._send_call("echo", [[1]], 3, 1 << 16, 2) == line
    assert pipes.pipe._send_call("echo", [[1]], 3, len(line) - 1, 32) == line
    assert select.select([pipes.server_in], [], [], 0)[0] == []


def test_send_call_that_the_pipe_takes_in_part_says_how_much(impl: ModuleType, pipes: Pipes) -> None:
    """A full pipe takes part of the message (or none): ``(written, frame)``, the written part really out."""
    try:
        while True:
            os.write(pipes.in_write, b"x" * 512)
    except BlockingIOError:
        pass
    params = {"text": "y" * 100_000}
    sent = pipes.pipe._send_call("echo", params, 1, 1 << 20, 32)
    assert isinstance(sent, tuple)
    written, frame = sent
    assert frame == impl.Client._core._encode_request("echo", params, 1) + b"\n"
    assert 0 <= written < len(frame)


def test_read_answer_returns_its_answer_and_hands_back_anything_else(impl: ModuleType, pipes: Pipes) -> None:
    pipe = pipes.pipe
    os.write(pipes.server_out, b'{"jsonrpc":"2.0","method":"log","params":[1]}\n{"jsonrpc":"2.0","id":4,"result":5}\n')
    (first,) = pipe._read_answer(4, 5.0)
    assert first == impl.Request("log", [1], None, True)
    assert pipe._read_answer(4, 5.0) == impl.Response(4, 5, None)
    os.write(pipes.server_out, b'{"jsonrpc":"2.0","id":3,"result":5}\n{"jsonrpc":"2.0","id":1.0,"result":5}\n')
    assert pipe._read_answer(4, 5.0) == (impl.Response(3, 5, None),)  # another call's answer
    (other,) = pipe._read_answer(1, 5.0)  # an id that is no int answers no call (as _take_answer matches)
    assert type(other.id) is float


def test_read_answer_ends_at_its_deadline_at_the_halt_and_at_the_end(impl: ModuleType, pipes: Pipes) -> None:
    pipe = pipes.pipe
    os.write(pipes.server_out, b'{"jsonrpc":"2.0","id":1,')  # half a message never holds it past its time
    started = time.monotonic()
    assert pipe._read_answer(1, 0.2) is None
    assert 0.15 < time.monotonic() - started < 10
    threading.Timer(0.2, os.write, (pipes.halt, b"!")).start()
    assert pipe._read_answer(1, None) is None  # the halt pipe, without a deadline
    os.read(pipes.halt_read, 1)
    os.write(pipes.server_out, b'"result":2}\n')
    assert pipe._read_answer(1, None) == impl.Response(1, 2, None)
    os.close(pipes.server_out)
    assert pipe._read_answer(1, None) is None  # the end of input: buffered, for _read_incoming to say
    assert pipe._has_buffered_message() is True
    assert pipe._read_incoming() is None


# --- a real server ------------------------------------------------------------------------------------------------

# Reads a request per line and answers it per its method: "notify_first" writes a notification, an answer to
# no call, and a line that is no JSON before its answer; "refuse" answers with an error whose id is null;
# "exit" exits unanswered; "never" answers nothing; "close_input" closes its stdin and answers nothing for a while;
# anything else is echoed.
SCRIPTED = r"""
import json, os, sys
out = sys.stdout.buffer
for raw in sys.stdin.buffer:
    message = json.loads(raw)
    method, id_ = message["method"], message.get("id")
    if id_ is None:
        sys.stderr.write("notified " + method + "\n"); sys.stderr.flush()
        continue
    if method == "notify_first":
        out.write(b'{"jsonrpc":"2.0","method":"log","params":{"n":1}}\n')
        out.write(b'{"jsonrpc":"2.0","id":999999,"result":0}\nnot json\n')
    if method == "refuse":
        out.write(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}\n')
    elif method == "exit":
        os._exit(3)
    elif method == "close_input":  # alive, but it reads no more and answers nothing (for 20 s)
        os.close(0)
        import time
        time.sleep(20)
        os._exit(0)
    elif method != "never":
        out.write(json.dumps({"jsonrpc": "2.0", "id": id_, "result": message.get("params")}).encode() + b"\n")
    out.flush()
"""


def spawn(impl: ModuleType, **options: Any) -> Any:
    return impl.Client.spawn([sys.executable, "-c", SCRIPTED], **options)


def test_a_lone_call_delivers_what_comes_before_its_answer(impl: ModuleType) -> None:
    seen = threading.Event()
    with spawn(impl, timeout=30) as client:
        assert client._pipe is not None
        client.on_notification("log", lambda params: seen.set())
        assert client.call("notify_first", [1, 2]) == [1, 2]
        assert seen.wait(10)
        assert client.call("echo", {"a": 1}) == {"a": 1}  # the ledger left as a call that went the long way
        assert not client._ledger._calls and not client._pending


def test_a_lone_call_refused_with_an_id_null_error_fails_with_it(impl: ModuleType) -> None:
    """The error can only answer the lone call: it takes its place in the ledger when the error comes."""
    with spawn(impl, timeout=30) as client:
        with pytest.raises(impl.JsonRpcError) as caught:
            client.call("refuse")
        assert caught.value.code == -32600
        assert client.call("echo", 1) == 1


def test_a_lone_call_whose_server_exits_mid_read_raises_at_once(impl: ModuleType) -> None:
    with spawn(impl, timeout=60) as client:
        started = time.monotonic()
        with pytest.raises(impl.ConnectionClosed) as caught:
            client.call("exit")
        assert time.monotonic() - started < 30  # the exit, not the deadline
        assert caught.value.returncode == 3


def test_a_lone_call_past_its_deadline_is_cancelled(impl: ModuleType) -> None:
    with spawn(impl, timeout=30) as client:
        with pytest.raises(TimeoutError):
            client.call("never", timeout=0.3)
        assert client.call("echo", "after") == "after"  # the late answer never came; the stream is whole
        client.close()
    assert "notified notifications/cancelled" in "\n".join(client._stderr_tail)


def test_a_lone_call_ends_when_the_client_is_closed_meanwhile(impl: ModuleType) -> None:
    client = spawn(impl, timeout=30)
    threading.Timer(0.3, client.close, kwargs={"grace": 0.2}).start()
    started = time.monotonic()
    with pytest.raises(impl.ConnectionClosed):
        client.call("never")
    assert time.monotonic() - started < 20


def test_a_lone_call_ends_when_another_callers_write_fails(impl: ModuleType) -> None:
    """The server closed its input and lives on: the next write fails, which closes the client, and the lone
    call reading meanwhile (in no list the close goes through) is woken and fails with it, not at its deadline."""
    with spawn(impl, timeout=60) as client:
        failed: list[BaseException] = []

        def lone() -> None:
            try:
                client.call("close_input")
            except BaseException as exc:
                failed.append(exc)

        reader = threading.Thread(target=lone)
        reader.start()
        time.sleep(0.5)  # the lone call is reading; the server has closed its input
        started = time.monotonic()
        with pytest.raises(impl.ConnectionClosed):
            client.call("echo", 1)
        reader.join(30)
        assert not reader.is_alive()
        assert time.monotonic() - started < 15  # woken by the close, not by the server's exit 20 s on
        assert len(failed) == 1 and isinstance(failed[0], impl.ConnectionClosed)


def test_lone_and_concurrent_calls_mix(impl: ModuleType) -> None:
    """Threads that call at once (some going the lone way, some not, as the client is busy or not)."""
    errors: list[BaseException] = []

    def calls(n: int) -> None:
        try:
            for i in range(100):
                assert client.call("echo", [n, i]) == [n, i]
                if i % 25 == 0:
                    client.notify("tick")
        except BaseException as exc:
            errors.append(exc)

    with spawn(impl, timeout=30) as client:
        threads = [threading.Thread(target=calls, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(50)
        assert not errors
        assert not client._pending
