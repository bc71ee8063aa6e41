"""The lone caller's path of ``Client`` (the core's ``_ClientPipe``: the stdout pipe read by the client itself,
a call made in one call into the core), asked of both cores alike: the pipe's own steps, then a real server
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
from rpcwire._contract import ErrorAnswer, ReadOn, Unsent
from support.nothing_waits import nothing_waits
from support.processes import run_script

MIB = 1024 * 1024

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


class Output:
    """What ``_ClientPipe._call`` asks of the client's output: its lock (a held one: nothing is written)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._locked = self._lock.locked

    def _release_quick(self) -> None:
        self._lock.release()


def free_reading(pipe: Any) -> bool:
    """Whether the reading lock is free (taken and given back to find out)."""
    if not pipe._take_reading():
        return False
    pipe._leave_reading()
    return True


@pytest.mark.parametrize("framing", ["newline", "content-length"])
def test_a_call_writes_the_request_framed_and_returns_its_result(impl: ModuleType, framing: str) -> None:
    pipes = Pipes(impl, framing)
    try:
        answer = b'{"jsonrpc":"2.0","id":7,"result":{"a":[1]}}'
        framed_answer = impl.Client._core._encode_frame(answer) if framing == "content-length" else answer + b"\n"
        os.write(pipes.server_out, framed_answer)
        assert pipes.pipe._since_read() == float("inf")
        assert pipes.pipe._call("echo", {"a": [1]}, 7, 1 << 16, 32, 5.0, Output()) == {"a": [1]}
        line = impl.Client._core._encode_request("echo", {"a": [1]}, 7)
        framed = impl.Client._core._encode_frame(line) if framing == "content-length" else line + b"\n"
        assert os.read(pipes.server_in, 1 << 16) == framed
        assert free_reading(pipes.pipe)  # released with its result
        assert 0 <= pipes.pipe._since_read() < 10
    finally:
        pipes.close()


def test_a_call_that_cannot_be_written_whole_at_once_writes_nothing(impl: ModuleType, pipes: Pipes) -> None:
    """Longer than ``quick_bytes``, more brackets than ``quick_depth``, longer than one write a pipe never splits
    (``PIPE_BUF``), the output's lock held, or another thread reading: ``Unsent(line)``, nothing written, the reading
    not held; a full pipe likewise."""
    pipe, output = pipes.pipe, Output()
    line = impl.Client._core._encode_request("echo", [[1]], 3)
    assert pipe._call("echo", [[1]], 3, 1 << 16, 2, 5.0, output) == Unsent(line)
    assert pipe._call("echo", [[1]], 3, len(line) - 1, 32, 5.0, output) == Unsent(line)
    long = ["y" * select.PIPE_BUF]
    long_line = impl.Client._core._encode_request("echo", long, 3)
    assert pipe._call("echo", long, 3, 1 << 20, 32, 5.0, output) == Unsent(long_line)
    with output._lock:
        assert pipe._call("echo", [[1]], 3, 1 << 16, 32, 5.0, output) == Unsent(line)
    assert pipe._take_reading()
    assert pipe._reading_taken()
    assert pipe._call("echo", [[1]], 3, 1 << 16, 32, 5.0, output) == Unsent(line)
    assert pipe._reading_taken()  # still the other reader's
    pipe._leave_reading()
    assert select.select([pipes.server_in], [], [], 0)[0] == []
    try:
        while True:
            os.write(pipes.in_write, b"x" * 512)
    except BlockingIOError:
        pass
    assert pipe._call("echo", [[1]], 3, 1 << 16, 32, 5.0, output) == Unsent(line)
    assert free_reading(pipe) and not output._lock.locked()


def test_a_call_hands_back_anything_but_its_result(impl: ModuleType, pipes: Pipes) -> None:
    """Another message first: ``ReadOn(message)``, the reading held; its answer an error: ``ErrorAnswer(response)``,
    the reading released; another call's answer, or an id that is no int (as ``_take_answer`` matches): ``ReadOn``."""
    pipe, output = pipes.pipe, Output()
    os.write(pipes.server_out, b'{"jsonrpc":"2.0","method":"log","params":[1]}\n{"jsonrpc":"2.0","id":4,"result":5}\n')
    assert pipe._call("echo", None, 4, 1 << 16, 32, 5.0, output) == ReadOn(impl.Request("log", [1], None, True))
    assert not free_reading(pipe)
    pipe._leave_reading()
    assert pipe._call("echo", None, 4, 1 << 16, 32, 5.0, output) == 5
    error = {"code": -32601, "message": "no"}
    os.write(pipes.server_out, b'{"jsonrpc":"2.0","id":6,"error":{"code":-32601,"message":"no"}}\n')
    assert pipe._call("echo", None, 6, 1 << 16, 32, 5.0, output) == ErrorAnswer(impl.Response(6, None, error))
    assert free_reading(pipe)
    os.write(pipes.server_out, b'{"jsonrpc":"2.0","id":3,"result":5}\n{"jsonrpc":"2.0","id":1.0,"result":5}\n')
    assert pipe._call("echo", None, 4, 1 << 16, 32, 5.0, output) == ReadOn(impl.Response(3, 5, None))
    pipe._leave_reading()
    other = pipe._call("echo", None, 1, 1 << 16, 32, 5.0, output)
    assert type(other) is ReadOn and type(other.message.id) is float and other.message.result == 5
    pipe._leave_reading()
    os.write(pipes.server_out, b"not json\n")
    bad = pipe._call("echo", None, 8, 1 << 16, 32, 5.0, output)
    assert type(bad) is ReadOn
    why, data = bad.message
    assert why.startswith("parse error") and data == b"not json"


def unreadable(outcome: Any) -> bool:
    """Whether ``outcome`` hands back a line that could not be read: ``ReadOn((reason, line))``, a parse error."""
    return type(outcome) is ReadOn and type(outcome.message) is tuple and outcome.message[0].startswith("parse error")


def test_a_call_reads_its_answer_as_any_message_is_read(impl: ModuleType, pipes: Pipes) -> None:
    """Its answer as servers write it is read as the general way reads it: the depth counts the envelope (the
    pipe's max_depth is 16), and what follows the result, or trails the line, is looked at."""
    pipe, output = pipes.pipe, Output()

    def call(line: bytes) -> Any:
        os.write(pipes.server_out, line + b"\n")
        answer = pipe._call("echo", None, 4, 1 << 16, 32, 5.0, output)
        if type(answer) is ReadOn:
            pipe._leave_reading()
        return answer

    assert call(b'{"jsonrpc":"2.0","id":4,"result":' + b"[" * 15 + b"]" * 15 + b"}") == [[[[[[[[[[[[[[[]]]]]]]]]]]]]]]
    assert unreadable(call(b'{"jsonrpc":"2.0","id":4,"result":' + b"[" * 16 + b"]" * 16 + b"}"))
    assert call(b'{"jsonrpc":"2.0","id":4,"result":{"a":"\\u00e9"}}  \t') == {"a": "\u00e9"}
    invalid = call(b'{"jsonrpc":"2.0","id":4,"result":1,"error":null}')  # both: no valid response
    assert type(invalid) is ErrorAnswer and invalid.response.error["code"] == -32603
    assert call(b'{"jsonrpc":"2.0","id":4,"result":1,"result":2}') == 2  # (the last member, as json.loads)
    assert unreadable(call(b'{"jsonrpc":"2.0","id":4,"result":1}x'))
    assert type(call(b'{"jsonrpc":"2.0","id":40,"result":1}')) is ReadOn  # another call's (its id begins as 4's does)
    assert unreadable(call(b'{"jsonrpc":"2.0","id":04,"result":1}'))  # no JSON number


def test_a_call_ends_at_its_deadline_at_the_halt_and_at_the_end(impl: ModuleType, pipes: Pipes) -> None:
    """Nothing taken: ``ReadOn(None)``, the call written and the reading held."""
    pipe, output = pipes.pipe, Output()
    os.write(pipes.server_out, b'{"jsonrpc":"2.0","id":1,')  # half a message never holds it past its time
    started = time.monotonic()
    assert pipe._call("echo", None, 1, 1 << 16, 32, 0.2, output) == ReadOn(None)
    assert 0.15 < time.monotonic() - started < 10
    pipe._leave_reading()
    threading.Timer(0.2, os.write, (pipes.halt, b"!")).start()
    assert pipe._call("echo", None, 1, 1 << 16, 32, None, output) == ReadOn(None)  # the halt pipe, without a deadline
    pipe._leave_reading()
    os.read(pipes.halt_read, 1)
    os.write(pipes.server_out, b'"result":2}\n')
    assert pipe._call("echo", None, 1, 1 << 16, 32, None, output) == 2
    os.close(pipes.server_out)
    assert pipe._call("echo", None, 1, 1 << 16, 32, None, output) == ReadOn(None)  # the end of input
    pipe._leave_reading()
    assert pipe._has_buffered_message() is True
    assert pipe._read_incoming() is None
    assert os.read(pipes.server_in, 1 << 16).count(b"\n") == 4  # each call was written, once


# --- a real server ------------------------------------------------------------------------------------------------

# Reads a request per line and answers it per its method: "notify_first" writes a notification, an answer to
# no call, and a line that is no JSON before its answer; "refuse" answers with an error whose id is null;
# "exit" exits unanswered; "never" answers nothing; "close_input" closes its stdin and answers nothing for a while;
# "answer_again" answers every earlier call again (ids 1 to its own less one, each "again"), then how many; anything
# else is echoed.
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
        sys.stderr.write("input closed\n"); sys.stderr.flush()
        import time
        time.sleep(20)
        os._exit(0)
    elif method == "answer_again":
        for earlier in range(1, id_):
            out.write(json.dumps({"jsonrpc": "2.0", "id": earlier, "result": "again"}).encode() + b"\n")
        out.write(json.dumps({"jsonrpc": "2.0", "id": id_, "result": id_ - 1}).encode() + b"\n")
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
        # Nothing of those calls is left a candidate in the ledger: an error with id null can only be the next
        # call's (with another candidate beside it, the error would be held, and the call would end at its deadline).
        with pytest.raises(impl.JsonRpcError) as refused:
            client.call("refuse", timeout=10)
        assert refused.value.code == -32600


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
    input_closed = threading.Event()

    def stderr_line(line: str) -> None:
        if line == "input closed":
            input_closed.set()

    with spawn(impl, timeout=60, stderr=stderr_line) as client:
        failed: list[BaseException] = []

        def lone() -> None:
            try:
                client.call("close_input")
            except BaseException as exc:
                failed.append(exc)

        reader = threading.Thread(target=lone)
        reader.start()
        assert input_closed.wait(30)  # the server has closed its input
        time.sleep(0.2)  # and the lone call is reading (or the echo's write fails first: the same outcome)
        started = time.monotonic()
        with pytest.raises(impl.ConnectionClosed):
            client.call("echo", 1)
        reader.join(30)
        assert not reader.is_alive()
        assert time.monotonic() - started < 15  # woken by the close, not by the server's exit 20 s on
        assert len(failed) == 1 and isinstance(failed[0], impl.ConnectionClosed)


def test_lone_and_concurrent_calls_mix(impl: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
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
        nothing_waits(client, caplog)


# --- an over-long answer line is dropped as it arrives (child process, peak RSS) ----------------------------------

# The client, in a child of its own (its peak RSS is its alone): a server that answers the first request with a
# line of "{" and line_bytes - 1 bytes of "a" (written as it goes, never held), then the request's real answer.
# The call is made the lone way (one call into the core, ``_ClientPipe._call``) or the general way (``on_progress``
# sends it through ``_read_until``: ``_has_buffered_message``, ``_read_available``, ``_read_incoming``).
OVER_LONG_CHILD = r'''
import importlib, json, logging, sys

from support.measure import peak_rss

impl = importlib.import_module(sys.argv[1])
line_bytes, limit, way = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
SERVER = """
import json, sys
request = json.loads(sys.stdin.buffer.readline())
out, block, left = sys.stdout.buffer, b"a" * 65536, %d
out.write(b"{")
while left:
    out.write(block[:left])
    left -= len(block[:left])
out.write(b"\\n" + json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": "after"}).encode() + b"\\n")
out.flush()
sys.stdin.buffer.read()
""" % (line_bytes - 1)


class Kept(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


kept = Kept()
logging.getLogger("rpcwire").addHandler(kept)
with impl.Client.spawn([sys.executable, "-c", SERVER], max_message_bytes=limit, timeout=60) as client:
    before = peak_rss()
    if way == "lone":
        result = client.call("big")
    else:
        result = client.call("big", on_progress=lambda *progress: None)
    after = peak_rss()
print(json.dumps({"growth": after - before, "result": result, "logged": kept.messages}))
'''


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("way", ["lone", "general"])
def test_an_over_long_answer_line_is_dropped_as_it_arrives(impl: ModuleType, way: str) -> None:
    """A 64 MiB line against max_message_bytes = 1 MiB: the client's peak RSS grows by far less than the line
    (held whole, by at least 64 MiB; the bound is 1 MiB plus a read's 64 KiB, the allocator's slack and the
    pipe's buffer), it is dropped with a warning, and the call gets the answer that follows it."""
    line_bytes, limit = 64 * MIB, MIB
    report = run_script(OVER_LONG_CHILD, impl.__name__, str(line_bytes), str(limit), way)
    assert report["result"] == "after"
    assert report["logged"] == [f"dropped a message from the server: a line longer than max_message_bytes ({limit})"]
    assert report["growth"] < 16 * MIB, f"peak RSS grew by {report['growth'] / MIB:.1f} MiB"


def test_without_the_gil_every_call_goes_the_general_way(impl: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a free-threaded interpreter running without the GIL the lone path (an unlocked look at the output's lock
    and the ledger) is never taken: its calls are answered the general way, under the locks."""
    monkeypatch.setattr("rpcwire._client._LONE_PATH", False)
    lone_calls: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        # The native pipe's _call (a C function), or the pure core's (rpcwire._pure.client_pipe).
        if (event == "c_call" and getattr(arg, "__name__", "") == "_call") or (
            event == "call" and frame.f_code.co_name == "_call" and frame.f_code.co_filename.endswith("client_pipe.py")
        ):
            lone_calls.append(event)

    with spawn(impl, timeout=30) as client:
        sys.setprofile(profile)
        try:
            results = [client.call("echo", [i]) for i in range(20)]
        finally:
            sys.setprofile(None)
    assert results == [[i] for i in range(20)]
    assert lone_calls == []
