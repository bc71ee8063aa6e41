"""Memory: serving many messages leaves RSS flat and no objects or references behind.

The RSS test runs in a child process (native memory is invisible to ``tracemalloc``, and the parent's
pytest state would blur the figure): it serves 1,000,000 messages of every kind (requests,
notifications, batches, malformed and over-long lines, handler errors, unencodable results) from a
stream that generates its lines as it is read, into a sink that only counts them, so that neither
input nor output takes memory. RSS is sampled after a warm-up and at the end.

The reference test runs in-process: after a warm-up, it serves the same mix again and checks that the
number of allocated interpreter blocks did not grow and that objects the handler hands out (its
result, its exception, the exception's data) have the reference counts they had before.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
import rpcwire
from support.messages import answers
from support.processes import QUIET_STDERR, child_env, run_script

MIB = 1024 * 1024

# The generator of messages and the handler, shared by the child process (run as a script) and the
# in-process test (exec'd into a namespace). Each message of a cycle of 20 is a different case; the
# comment says what is answered.
WORKLOAD = r'''
import io, logging

MAX_MESSAGE_BYTES = 4096
CYCLE = 20
OVER_LONG = b'{"jsonrpc":"2.0","method":"echo","params":["' + b"x" * 5000 + b'"],"id":1}'
TOO_DEEP = b'{"jsonrpc":"2.0","method":"echo","params":' + b"[" * 200 + b"]" * 200 + b',"id":1}'


def message(i):
    """The i-th line of the stream and how many answer lines it gets (0 or 1)."""
    kind = i % CYCLE
    if kind in (0, 10):  # a request with array params
        return b'{"jsonrpc":"2.0","method":"echo","params":[%d,"\xc3\xa9t\xc3\xa9",1.5,null],"id":%d}' % (i, i), 1
    if kind in (1, 11):  # a request with object params and a string id
        return b'{"jsonrpc":"2.0","method":"echo","params":{"n":%d,"k":[true,false]},"id":"s%d"}' % (i, i), 1
    if kind == 2:  # a notification
        return b'{"jsonrpc":"2.0","method":"echo","params":[%d]}' % i, 0
    if kind == 3:  # broken JSON: -32700
        return b'{"jsonrpc":"2.0","method":"echo","params":[%d' % i, 1
    if kind == 4:  # a batch: request, notification, invalid entry, handler error -> one array line
        return (
            b'[{"jsonrpc":"2.0","method":"echo","params":[%d],"id":%d},{"jsonrpc":"2.0","method":"echo"},'
            b'7,{"jsonrpc":"2.0","method":"raise","id":%d}]' % (i, i, i)
        ), 1
    if kind == 5:  # the handler raises ValueError: -32603 with data
        return b'{"jsonrpc":"2.0","method":"raise","params":[%d],"id":%d}' % (i, i), 1
    if kind == 6:  # the handler raises MethodNotFound with data: -32601
        return b'{"jsonrpc":"2.0","method":"missing","id":%d}' % i, 1
    if kind == 7:  # an invalid envelope: -32600
        return b'{"jsonrpc":"1.0","method":"echo","id":%d}' % i, 1
    if kind == 8:  # a notification whose handler raises (logged at ERROR with its traceback)
        return b'{"jsonrpc":"2.0","method":"raise"}', 0
    if kind == 9:  # an unencodable result: -32603 (TypeError)
        return b'{"jsonrpc":"2.0","method":"unencodable","id":%d}' % i, 1
    if kind == 12:  # a self-referencing result: -32603 (ValueError)
        return b'{"jsonrpc":"2.0","method":"cycle","id":%d}' % i, 1
    if kind == 13:  # invalid UTF-8: -32700
        return b'{"jsonrpc":"2.0","method":"\xff","id":%d}' % i, 1
    if kind == 14:  # blank, skipped
        return b"  \t", 0
    if kind == 15:  # an empty batch: -32600
        return b"[]", 1
    if kind == 16 and i % (10 * CYCLE) == 16:  # an over-long line: -32600
        return OVER_LONG, 1
    if kind == 17 and i % (10 * CYCLE) == 17:  # nesting past max_depth: -32700
        return TOO_DEEP, 1
    if kind == 18 and i % (10 * CYCLE) == 18:  # a result nested past the encoder's limit: -32603 (RecursionError)
        return b'{"jsonrpc":"2.0","method":"deep","id":%d}' % i, 1
    # a request with a CRLF line end, a big integer id and a shared result
    return b'{"jsonrpc":"2.0","method":"shared","id":%d}\r' % (i * 10**30), 1


def expected_answers(count):
    return sum(message(i)[1] for i in range(count))


SHARED_RESULT = {"shared": [1, 2, "three"]}
SHARED_DATA = {"why": ["shared", "data"]}
CYCLIC = []
CYCLIC.append(CYCLIC)
DEEP = []
for _ in range(3000):
    DEEP = [DEEP]
UNENCODABLE = {"set": {1, 2}}


def make_handler(impl):
    def handler(method, params):
        if method == "echo":
            return params
        if method == "raise":
            raise ValueError("handler failed")
        if method == "missing":
            raise impl.MethodNotFound("no such method", data=SHARED_DATA)
        if method == "unencodable":
            return UNENCODABLE
        if method == "cycle":
            return CYCLIC
        if method == "deep":
            return DEEP
        return SHARED_RESULT

    return handler


class Generated(io.RawIOBase):
    """``count`` messages (from ``first`` on), made as they are read; ``on_message(i)`` is called as each is made.

    Read through an ``io.BufferedReader``: ``rpcwire.pure`` would read a raw stream a byte at a time.
    """

    def __init__(self, count, first=0, on_message=None):
        super().__init__()
        self.next, self.end = first, first + count
        self.pending = memoryview(b"")
        self.on_message = on_message

    def readable(self):
        return True

    def readinto(self, b):
        if not self.pending:
            lines = []
            for i in range(self.next, min(self.next + 256, self.end)):
                if self.on_message is not None:
                    self.on_message(i)
                lines.append(message(i)[0])
            self.next += len(lines)
            self.pending = memoryview(b"\n".join(lines) + b"\n" if lines else b"")
        count = min(len(b), len(self.pending))
        b[:count] = self.pending[:count]
        self.pending = self.pending[count:]
        return count


class Sink:
    """Counts the answer lines written and keeps nothing."""

    def __init__(self):
        self.lines = 0
        self.writes = 0

    def write(self, data):
        self.lines += bytes(data).count(b"\n")
        self.writes += 1
        return len(data)

    def flush(self):
        pass


def quiet_logger():
    """Failing notifications are logged at ERROR: build the records, but drop them."""
    logger = logging.getLogger("rpcwire")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
'''

RSS_CHILD = r"""
import importlib, io, json, sys

from support.measure import rss

impl = importlib.import_module(sys.argv[1])
count, warm_up, every = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
exec(sys.argv[5])

samples = {}


def on_message(i):
    if i % every == 0 and i >= warm_up:
        samples[i] = rss()


quiet_logger()
handler = make_handler(impl)
sink = Sink()
stream = io.BufferedReader(Generated(count, on_message=on_message))
transport = impl.StdioTransport(stream, sink, max_message_bytes=MAX_MESSAGE_BYTES)
transport.serve(handler)
samples[count] = rss()
print(json.dumps({"samples": samples, "lines": sink.lines, "expected": expected_answers(count), "writes": sink.writes}))
"""


# 1,000,000 messages native (about 2 s), 400,000 pure (about 4 s), RSS sampled every 50,000 from 100,000 on. A
# leak of 12 bytes per message (native; 35 pure) would already be 10 MiB after the warm-up; a leaked answer, line,
# exception or reference to any object far more. (Measured: growth 0.0 MiB native, 0.0 MiB pure.)
RSS_RUNS = {"native": ("rpcwire", 1_000_000), "pure": ("rpcwire.pure", 400_000)}
RSS_WARM_UP = 100_000


@pytest.mark.slow
# The pure run takes ~25 s alone and up to 110 s on a machine loaded 30 deep: the bounds only catch a hang.
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", list(RSS_RUNS))
def test_rss_stays_flat_while_serving_many_messages(name: str) -> None:
    (module, count), warm_up, every = RSS_RUNS[name], RSS_WARM_UP, 50_000
    child = subprocess.run(
        [sys.executable, "-c", RSS_CHILD, module, str(count), str(warm_up), str(every), WORKLOAD],
        capture_output=True,
        timeout=280,
        env=child_env(support=True),
        check=False,
    )
    assert child.returncode == 0, child.stderr.decode(errors="replace")[-3000:]
    assert child.stderr == QUIET_STDERR.encode()
    report = json.loads(child.stdout)
    # Everything was served: one answer line per message that gets one.
    assert report["lines"] == report["expected"]
    samples = {int(i): rss for i, rss in report["samples"].items()}
    after_warm_up, at_end = samples[warm_up], samples[count]
    figures = ", ".join(f"{i:,}: {rss / MIB:.1f} MiB" for i, rss in sorted(samples.items()))
    assert at_end - after_warm_up < 10 * MIB, f"RSS grew by {(at_end - after_warm_up) / MIB:.1f} MiB ({figures})"
    # And not in steps that happen to fall back by the end.
    assert max(samples.values()) - after_warm_up < 10 * MIB, figures


@pytest.fixture
def workload() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(WORKLOAD, namespace)
    return namespace


@contextlib.contextmanager
def records_dropped() -> Iterator[None]:
    """pytest's log capture (attached to the ``rpcwire`` logger itself during each test phase) keeps
    every record, which would count as growth: for the measured part, the records go to a
    ``NullHandler`` instead (they are still made). Restored before the phase ends, so that pytest
    detaches its own handler as usual."""
    logger = logging.getLogger("rpcwire")
    handlers, propagate = logger.handlers, logger.propagate
    logger.handlers, logger.propagate = [logging.NullHandler()], False
    try:
        yield
    finally:
        logger.handlers, logger.propagate = handlers, propagate


def serve_generated(impl: ModuleType, workload: dict[str, Any], handler: Any, first: int, count: int) -> int:
    sink = workload["Sink"]()
    stream = io.BufferedReader(workload["Generated"](count, first))
    impl.StdioTransport(stream, sink, max_message_bytes=workload["MAX_MESSAGE_BYTES"]).serve(handler)
    return int(sink.lines)


def test_the_workload_gets_the_documented_answers(impl: ModuleType, workload: dict[str, Any]) -> None:
    """The mix is what the comments in WORKLOAD say (so the memory tests measure all of it)."""
    handler = workload["make_handler"](impl)
    sink = io.BytesIO()
    cycle = workload["CYCLE"]
    impl.StdioTransport(workload["Generated"](10 * cycle), sink, max_message_bytes=workload["MAX_MESSAGE_BYTES"]).serve(
        handler
    )
    got = answers(sink.getvalue())
    assert len(got) == workload["expected_answers"](10 * cycle)
    errors = [a["error"] for a in got if isinstance(a, dict) and "error" in a]
    assert sorted({error["code"] for error in errors}) == [-32700, -32603, -32601, -32600]
    internal = {error["data"]["exception"] for error in errors if error["code"] == -32603}
    assert internal == {"ValueError", "TypeError", "RecursionError"}
    assert {"code": -32601, "message": "no such method", "data": workload["SHARED_DATA"]} in errors
    batches = [a for a in got if isinstance(a, list)]
    assert len(batches) == 10
    assert [entry.get("error", {}).get("code") for entry in batches[0]] == [None, -32600, -32603]
    assert got.count({"jsonrpc": "2.0", "id": 10**30 * 19, "result": workload["SHARED_RESULT"]}) == 1


# Served after the warm-up, the mix must leave at most LEAK_TOLERANCE more allocated blocks. A leak of
# one object per message of even one of the 20 kinds would be MEASURED // 20 = 1,500 blocks or more
# (every object takes at least one block; a leaked answer, line or exception takes several), twice
# the tolerance; a leak on every message would be 30,000. What is left is noise: free lists and
# caches that settle during the warm-up (measured: 5 to 160 blocks, native and pure).
WARM_UP = 20_000
MEASURED = 30_000
LEAK_TOLERANCE = 750


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_no_objects_or_references_left_behind(impl: ModuleType, workload: dict[str, Any]) -> None:
    handler = workload["make_handler"](impl)
    watched = {
        "handler": handler,
        "shared result": workload["SHARED_RESULT"],
        "shared data": workload["SHARED_DATA"],
        "cyclic result": workload["CYCLIC"],
        "deep result": workload["DEEP"],
        "unencodable result": workload["UNENCODABLE"],
    }
    with records_dropped():
        assert serve_generated(impl, workload, handler, 0, WARM_UP) == workload["expected_answers"](WARM_UP)
        gc.collect()
        blocks_before = sys.getallocatedblocks()
        refs_before = {name: sys.getrefcount(value) for name, value in watched.items()}

        lines = serve_generated(impl, workload, handler, WARM_UP, MEASURED)

        gc.collect()
        blocks_after = sys.getallocatedblocks()
        refs_after = {name: sys.getrefcount(value) for name, value in watched.items()}
    assert lines == workload["expected_answers"](WARM_UP + MEASURED) - workload["expected_answers"](WARM_UP)
    # Each of these is handed to (or raised through) the transport thousands of times: one lost
    # reference per use would show as thousands here.
    assert refs_after == refs_before
    assert blocks_after - blocks_before < LEAK_TOLERANCE, f"{blocks_after - blocks_before} blocks more"


def traceback_length(exc: BaseException) -> int:
    length, tb = 0, exc.__traceback__
    while tb is not None:
        length, tb = length + 1, tb.tb_next
    return length


@pytest.mark.parametrize(
    "impl_name",
    ["native", "pure"],
)
def test_a_handler_raising_the_same_exception_instance_leaves_nothing_behind(impl_name: str) -> None:
    impl = {"native": rpcwire, "pure": rpcwire.pure}[impl_name]
    not_found = impl.MethodNotFound("no such method")  # a module-level constant, say

    def handler(method: str, params: Any) -> Any:
        raise not_found

    data = b'{"jsonrpc":"2.0","method":"m","id":1}\n' * 5_000
    impl.serve(handler, impl.StdioTransport(io.BytesIO(data), io.BytesIO()))
    gc.collect()
    before = sys.getallocatedblocks(), sys.getrefcount(handler)
    out = io.BytesIO()
    impl.serve(handler, impl.StdioTransport(io.BytesIO(data), out))
    gc.collect()
    after = sys.getallocatedblocks(), sys.getrefcount(handler)
    assert out.getvalue().count(b'"code":-32601') == 5_000
    # One request's worth of traceback may stay (as after any ``except``), not one per request.
    assert traceback_length(not_found) < 10
    assert after[1] - before[1] < 10, "each frame left in the traceback holds the handler"
    assert after[0] - before[0] < LEAK_TOLERANCE


# --- batches ---------------------------------------------------------------------------------------

BATCH_CHILD = r"""
import io, importlib, json, sys

from support.measure import peak_rss

impl = importlib.import_module(sys.argv[1])
line_bytes = int(sys.argv[2])

line = b"[" + b"1," * (line_bytes // 2 - 1) + b"1]\n"
data = line + b'{"jsonrpc":"2.0","method":"next","id":2}\n'
del line
out = io.BytesIO()
transport = impl.StdioTransport(io.BytesIO(data), out, max_message_bytes=len(data))
before = peak_rss()
transport.serve(lambda method, params: method)
after = peak_rss()
print(json.dumps({"growth": after - before, "out": out.getvalue().decode()}))
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("module", ["rpcwire", "rpcwire.pure"])
@pytest.mark.parametrize("line_mib", [8, 63])
def test_a_huge_batch_costs_a_few_times_its_line_not_an_answer_per_entry(module: str, line_mib: int) -> None:
    """``[1,1,1,…]`` of 8 and 63 MiB (4 and 33 million entries) with the default ``max_batch``: one -32600,
    and the child's peak RSS grows by a few times the line (the line, its text, the first 1,000 entries),
    not by an answer per entry (unbounded, 8 MiB made a 320 MiB answer and +655 MiB of RSS)."""
    line_bytes = line_mib * MIB
    report = run_script(BATCH_CHILD, module, str(line_bytes))
    assert answers(report["out"].encode()) == [
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}},
        {"jsonrpc": "2.0", "id": 2, "result": "next"},
    ]
    assert report["growth"] < 3 * line_bytes + 16 * MIB, f"peak RSS grew by {report['growth'] / MIB:.1f} MiB"
