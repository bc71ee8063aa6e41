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


def test_spawn_waits_on_the_pipe_with_either_core(impl: ModuleType) -> None:
    """Both cores take the same reading path (the descriptor waited on), none a fallback of its own."""
    script = "import sys\nfor line in sys.stdin.buffer: pass\n"
    with impl.Client.spawn([sys.executable, "-c", script], timeout=20) as client:
        assert client._fd is not None
        client.notify("anything")
