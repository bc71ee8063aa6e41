"""What ``Client`` needs of a core, asked of both cores alike (no ``hasattr`` above a core).

``Client.spawn`` reads a server's pipe by waiting on its descriptor with ``poll`` and reading with
``_read_available`` only when ``_has_buffered_message`` says no whole message is buffered. That works only
if a core's read leaves nothing in the ``io.BufferedReader``'s own buffer (``rpcwire._contract.Transport``):
bytes left there would be neither behind the descriptor nor in the core's buffer, and the reader would wait
for them forever.
"""

from __future__ import annotations

import io
import os
import select
import sys
import time
from types import ModuleType

import pytest
from support.messages import request

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("framing", ["newline", "content-length"])
def test_a_read_leaves_nothing_in_the_streams_own_buffer(impl: ModuleType, framing: str) -> None:
    messages = [request("m", ["x" * size], id=index) for index, size in enumerate([10, 9_000, 3_000, 20])]
    if framing == "content-length":
        messages = [b"Content-Length: %d\r\n\r\n%b" % (len(line), line) for line in messages]
    data = b"".join(messages)
    assert 8192 < len(data) < 64 * 1024  # more than the stream's buffer, less than one of a core's reads
    read_fd, write_fd = os.pipe()
    stream = io.BufferedReader(io.FileIO(read_fd, "rb"), 8192)  # as Client.spawn's pipe (bufsize 8192)
    transport = impl.StdioTransport(stream, io.BytesIO(), framing=framing)
    try:
        os.write(write_fd, data)
        assert not transport._has_buffered_message()
        transport._read_available()
        ids = []
        while transport._has_buffered_message():
            ids.append(transport._read_incoming().id)
        assert ids == [0, 1, 2, 3]  # every message came with one read, and none was left in the stream's buffer
        poller = select.poll()
        poller.register(read_fd, select.POLLIN)
        assert poller.poll(0) == []
        os.close(write_fd)
        write_fd = -1
        assert not transport._has_buffered_message()
        transport._read_available()
        assert transport._has_buffered_message()  # the end of input is buffered: the next read returns at once
        assert transport._read_incoming() is None
    finally:
        if write_fd >= 0:
            os.close(write_fd)
        stream.close()


def test_spawn_waits_on_the_pipe_with_either_core(impl: ModuleType, reading: str) -> None:
    """Both cores take the same reading path (the descriptor waited on where there is ``poll``, else the
    portable one), none a fallback of its own."""
    script = "import sys\nfor line in sys.stdin.buffer: pass\n"
    with impl.Client.spawn([sys.executable, "-c", script], timeout=20) as client:
        assert (client._fd is not None) == (reading == "poll")
        assert ("halt" in client._pipes) == (reading == "poll")  # the portable path makes no pipes of its own
        client.notify("anything")


def test_a_blank_line_alone_is_no_buffered_message(impl: ModuleType) -> None:
    """A timed client reads only when ``_has_buffered_message`` says no: a blank line alone must say no (the
    read that follows skips it and would block on the stream past the caller's deadline), and is dropped."""
    read_end, write_end = os.pipe()
    with open(read_end, "rb") as stdin:
        transport = impl.StdioTransport(stdin, io.BytesIO())
        os.write(write_end, b"\n \r\n\t\n")
        transport._read_available()
        assert transport._has_buffered_message() is False
        os.write(write_end, b'{"jsonrpc":"2.0","id":1,"result":2}\n\n')
        transport._read_available()
        assert transport._has_buffered_message() is True
        assert transport._read_incoming() == impl.Response(1, 2, None)
        assert transport._has_buffered_message() is False
        os.close(write_end)
        transport._read_available()
        assert transport._has_buffered_message() is True  # the end of input
        assert transport._read_incoming() is None


@pytest.mark.usefixtures("reading")
def test_a_timed_call_is_not_held_past_its_deadline_by_a_blank_line(impl: ModuleType) -> None:
    """A server that writes a blank line and then nothing: the call times out at its deadline."""
    script = "import sys, time; sys.stdin.readline(); sys.stdout.write('\\n'); sys.stdout.flush(); time.sleep(30)"
    with impl.Client.spawn([sys.executable, "-c", script], timeout=1.0) as client:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            client.call("ping")
        assert time.monotonic() - started < 10  # a generous bound: before the fix it waited out the 30 s sleep
