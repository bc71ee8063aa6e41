"""How ``serve`` reads its input: lines split across reads at every position, lines longer than a read, reads of
one byte, through every kind of stream the native reader treats differently (``BytesIO`` and pipes opened as
``FileIO`` or ``BufferedReader`` are read straight into its buffer; other streams through a chunk it copies).
Whatever the reads, the answers are the ones ``rpcwire.pure`` gives the same bytes read at once.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest
import rpcwire
import rpcwire.pure
from support.messages import answers, echo, request
from support.streams import Trickle

WAIT = 10.0  # seconds; only there to turn a hang into a failure

LINES = [
    request("echo", {"text": "héllo", "n": 1}, id=1),
    b'{"jsonrpc":"2.0","method":"echo","params":{"text":"hel',  # cut short: -32700
    request("echo", [1, 2], id=...),  # a notification
    b"  \t",  # blank: skipped
    request("echo", ["crlf"], id="s") + b"\r",
    b'{"jsonrpc" : "2.0", "meth\\u006fd":"echo","params":[3], "id" :3}',  # names spaced and escaped
    b'{"id":4,"params":[4],"method":"echo","jsonrpc":"2.0"}',  # members in another order
    b'{"jsonrpc":"2.0","method":"echo","id":5,"result":1}',  # a member a server ignores
    b'{"jsonrpc":"2.0","jsonrpc":"1.0","method":"echo","id":6}',  # the last duplicate wins: -32600
]
DATA = b"\n".join(LINES) + b"\n"


def reference(data: bytes, **options: Any) -> bytes:
    """What ``rpcwire.pure`` answers to ``data`` read at once."""
    out = io.BytesIO()
    rpcwire.pure.serve(echo, rpcwire.pure.StdioTransport(io.BytesIO(data), out, **options))
    return out.getvalue()


def served(impl: ModuleType, stream: Any, **options: Any) -> bytes:
    out = io.BytesIO()
    impl.serve(echo, impl.StdioTransport(stream, out, **options))
    return out.getvalue()


def unread(fd: int) -> int:
    """How many bytes wait in the pipe whose read end is ``fd``."""
    import fcntl  # POSIX only: the pipe tests are skipped elsewhere
    import termios

    return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0])


def feed_in_pieces(read_end: int, write_end: int, pieces: list[bytes], errors: list[BaseException]) -> None:
    """Write each piece once the reader has taken all of the one before (so that each read returns one
    piece), then close the pipe."""
    try:
        for piece in pieces:
            deadline = time.monotonic() + WAIT
            while unread(read_end) and time.monotonic() < deadline:
                time.sleep(0.0002)
            os.write(write_end, piece)
    except BaseException as error:  # reported by the test
        errors.append(error)
    finally:
        os.close(write_end)


@pytest.fixture(params=["fileio", "buffered"])
def pipe_reader(request: pytest.FixtureRequest) -> Iterator[Callable[[list[bytes]], Any]]:
    """``open_pipe(pieces)``: the read end of a pipe (as ``FileIO`` or as the ``BufferedReader`` ``open``
    gives) whose reads return ``pieces`` one by one, then the end of input."""
    if sys.platform == "win32":
        pytest.skip("the pipe's unread bytes are counted with FIONREAD (POSIX)")
    threads: list[threading.Thread] = []
    errors: list[BaseException] = []
    streams: list[Any] = []

    def open_pipe(pieces: list[bytes]) -> Any:
        read_end, write_end = os.pipe()
        stream = io.FileIO(read_end, "rb") if request.param == "fileio" else open(read_end, "rb")  # noqa: SIM115
        streams.append(stream)
        thread = threading.Thread(target=feed_in_pieces, args=(read_end, write_end, pieces, errors), daemon=True)
        thread.start()
        threads.append(thread)
        return stream

    yield open_pipe
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive()
    for stream in streams:
        stream.close()
    assert not errors


def pieces_cut_at(data: bytes, cut: int) -> list[bytes]:
    return [data[:cut], data[cut:]]


def test_split_at_every_position_through_a_copying_reader(impl: ModuleType) -> None:
    expected = reference(DATA)
    assert len(answers(expected)) == 7
    for cut in range(1, len(DATA)):
        assert served(impl, Trickle(DATA, [cut, len(DATA)])) == expected, cut
        buffered = io.BufferedReader(Trickle(DATA, [cut, len(DATA)]), buffer_size=16)
        assert served(impl, buffered) == expected, cut


def test_split_at_every_position_through_a_pipe(impl: ModuleType, pipe_reader: Any) -> None:
    expected = reference(DATA)
    for cut in range(1, len(DATA)):
        assert served(impl, pipe_reader(pieces_cut_at(DATA, cut))) == expected, cut


def test_reads_of_one_byte(impl: ModuleType, pipe_reader: Any) -> None:
    expected = reference(DATA)
    assert served(impl, Trickle(DATA, 1)) == expected
    assert served(impl, pipe_reader([DATA[i : i + 1] for i in range(len(DATA))])) == expected


LONG = request("echo", ["x" * 150_000], id=7)  # longer than a read (64 KiB)
LONG_DATA = DATA + LONG + b"\n" + DATA + LONG  # the last line without its newline


@pytest.mark.parametrize("max_message_bytes", [200_000, 100_000], ids=["accepted", "over-the-limit"])
def test_lines_longer_than_a_read(impl: ModuleType, pipe_reader: Any, max_message_bytes: int) -> None:
    expected = reference(LONG_DATA, max_message_bytes=max_message_bytes)
    assert len(answers(expected)) == 16
    options = {"max_message_bytes": max_message_bytes}
    assert served(impl, io.BytesIO(LONG_DATA), **options) == expected
    assert served(impl, Trickle(LONG_DATA, [5_000, 70_000, 1]), **options) == expected
    pieces = [LONG_DATA[i : i + 40_000] for i in range(0, len(LONG_DATA), 40_000)]
    assert served(impl, pipe_reader(pieces), **options) == expected


def test_a_bytesio_is_read_from_where_it_stands_to_its_end(impl: ModuleType) -> None:
    """An exact ``BytesIO`` (read with its own ``readinto`` by the native reader) is read from its position on."""
    stream = io.BytesIO(LONG + b"\n" + LONG_DATA)
    stream.seek(len(LONG) + 1)
    assert served(impl, stream) == reference(LONG_DATA)
    assert stream.tell() == len(LONG) + 1 + len(LONG_DATA)


def test_answers_are_written_before_a_read_that_waits(impl: ModuleType) -> None:
    """The answer to a line read is out before the reader waits for the next piece of a pipe."""
    read_end, write_end = os.pipe()
    first, second = request("echo", [1], id=1), request("echo", [2], id=2)
    out = io.BytesIO()
    with open(read_end, "rb") as stream:
        server = threading.Thread(target=impl.serve, args=(echo, impl.StdioTransport(stream, out)), daemon=True)
        server.start()
        os.write(write_end, first + b"\n" + second[:10])
        deadline = time.monotonic() + WAIT
        while not out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.001)
        assert out.getvalue() == reference(first + b"\n")
        os.write(write_end, second[10:] + b"\n")
        os.close(write_end)
        server.join(WAIT)
        assert not server.is_alive()
    assert out.getvalue() == reference(first + b"\n" + second + b"\n")


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_debug_records_follow_the_level_as_it_changes(impl: ModuleType) -> None:
    """A -32700's detail is logged at DEBUG exactly when the logger takes DEBUG records, however often the
    level or ``logging.disable`` changes while serving."""
    logger = logging.getLogger("rpcwire")
    records = Records()
    level, propagate = logger.level, logger.propagate
    logger.addHandler(records)
    logger.propagate = False
    malformed = b'{"jsonrpc":"2.0","method":"echo","params":[1\n'
    expected = reference(malformed * 3)
    try:
        for setting, logged in [
            (lambda: logger.setLevel(logging.WARNING), False),
            (lambda: logger.setLevel(logging.DEBUG), True),
            (lambda: logging.disable(logging.DEBUG), False),
            (lambda: logging.disable(logging.NOTSET), True),
            (lambda: logger.setLevel(logging.INFO), False),
        ]:
            setting()
            records.messages.clear()
            assert served(impl, io.BytesIO(malformed * 3)) == expected
            parse_errors = [message for message in records.messages if message.startswith("parse error: ")]
            assert len(parse_errors) == (3 if logged else 0), records.messages
    finally:
        logging.disable(logging.NOTSET)
        logger.setLevel(level)
        logger.propagate = propagate
        logger.removeHandler(records)


class KeepingWriter:
    """An output that keeps every object ``write`` is given (as a list of chunks would): what it keeps must
    stay readable and unchanged (never a view of memory the transport reuses or releases)."""

    def __init__(self) -> None:
        self.kept: list[Any] = []

    def write(self, data: Any) -> int:
        self.kept.append(data)
        return len(data)

    def flush(self) -> None:
        pass


class KeepingRaw(io.RawIOBase):
    """A raw stream that keeps what its ``write`` is given, under a ``BufferedWriter`` (which hands large
    writes to it from the caller's buffer)."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: list[Any] = []

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.kept.append(bytes(data))  # copied within the call, as the io contract asks
        return len(data)


@pytest.mark.parametrize("output", ["bytesio", "fileio", "buffered", "random", "buffered-custom-raw", "keeping"])
def test_answers_of_every_size_reach_every_kind_of_output(impl: ModuleType, tmp_path: Any, output: str) -> None:
    """Small answers and answers far larger than the point where the native writer lends its buffer (a
    ``memoryview``, to the ``io`` streams that copy during the call) rather than copying it into ``bytes``:
    the same bytes on every kind of output, and what an output keeps stays readable after the serve."""
    texts = ["s", "é" * 3000, "x" * 4096, "ü" * 70_000, "y" * 200_000, "z"]
    data = b"".join(request("echo", [text], id=i) + b"\n" for i, text in enumerate(texts))
    expected = reference(data)
    path = tmp_path / "out"
    if output == "bytesio":
        stream: Any = io.BytesIO()
    elif output == "fileio":
        stream = io.FileIO(path, "w")
    elif output == "buffered":
        stream = open(path, "wb")  # noqa: SIM115
    elif output == "random":
        stream = open(path, "w+b")  # noqa: SIM115
    elif output == "buffered-custom-raw":
        raw = KeepingRaw()
        stream = io.BufferedWriter(raw, buffer_size=1024)
    else:
        stream = KeepingWriter()
    with contextlib.ExitStack() as stack:
        if isinstance(stream, io.IOBase):
            stack.callback(stream.close)
        impl.serve(echo, impl.StdioTransport(io.BytesIO(data), stream))
        if output == "bytesio":
            written = stream.getvalue()
        elif output == "buffered-custom-raw":
            stream.flush()
            written = b"".join(raw.kept)
        elif output == "keeping":
            written = b"".join(bytes(chunk) for chunk in stream.kept)  # a released view would raise
        else:
            stream.flush()
            written = path.read_bytes()
    assert written == expected
