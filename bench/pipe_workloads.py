"""The pipe workloads: a real server process (bench/pipe_server.py IMPL) on real OS pipes.

The client lives in the benchmark process and talks to the pipes' file descriptors with `os.read`
and `os.write` (no Python buffering on its side). Server start-up is not timed: one round trip
warms each server up before the clock starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import implementations
import workloads

SERVER = Path(__file__).with_name("pipe_server.py")
TIMEOUT_S = 300.0


@dataclass
class PipeRun:
    seconds: float
    messages: int
    checked: workloads.Checked
    latencies_ns: list[int] | None = None  # ping-pong: one per round trip
    stderr: str = ""


class Server:
    """One server process; killed by a watchdog if it hangs, so a read never blocks forever."""

    def __init__(self, impl: str) -> None:
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        env = None
        if impl == implementations.BASELINE:  # the same server code, importing rpcwire from another build
            baseline = os.environ[implementations.BASELINE_PATH_VARIABLE]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([baseline, os.environ.get("PYTHONPATH", "")])}
            impl = "rpcwire"
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER), impl],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.wfd = self.proc.stdin.fileno()
        self.rfd = self.proc.stdout.fileno()
        self.watchdog = threading.Timer(TIMEOUT_S, self.proc.kill)
        self.watchdog.start()

    def round_trip(self, line: bytes) -> bytes:
        os.write(self.wfd, line)
        data = os.read(self.rfd, 65536)
        while data and not data.endswith(b"\n"):
            more = os.read(self.rfd, 65536)
            if not more:
                break
            data += more
        return data

    def close(self) -> str:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.stdout.read()  # type: ignore[union-attr]
        self.proc.stdout.close()  # type: ignore[union-attr]
        self.proc.wait()
        self.watchdog.cancel()
        self.stderr.seek(0)
        text = self.stderr.read().decode("utf-8", "replace")
        self.stderr.close()
        return text


def _expect(name: str, ids: list[int]) -> workloads.Workload:
    return workloads.Workload(name, b"", len(ids), ids, 0)


def ping_pong(impl: str, n: int) -> PipeRun:
    """One request, wait for its answer, n times; client and server pinned to one CPU.

    Unpinned, a round trip here costs either ~4 µs or ~60 µs depending on whether the scheduler
    put both processes on one vCPU (a direct switch) or on two (waking an idle vCPU of the VM): a
    coin toss per run that drowns the transports' own cost. Pinned, the figure is their cost.
    """
    server = Server(impl)
    mask = os.sched_getaffinity(0)
    cpu = {max(mask)}
    os.sched_setaffinity(server.proc.pid, cpu)
    os.sched_setaffinity(0, cpu)
    try:
        return _ping_pong(server, n)
    finally:
        os.sched_setaffinity(0, mask)


def _ping_pong(server: Server, n: int) -> PipeRun:
    server.round_trip(workloads.request(-1) + b"\n")
    lines = [workloads.request(i) + b"\n" for i in range(n)]
    answers = []
    latencies = []
    clock = time.perf_counter_ns
    round_trip = server.round_trip
    start = clock()
    for line in lines:
        t0 = clock()
        answers.append(round_trip(line))
        latencies.append(clock() - t0)
    seconds = (clock() - start) / 1e9
    stderr = server.close()
    checked = workloads.check(_expect("ping-pong", list(range(n))), b"".join(answers))
    return PipeRun(seconds, n, checked, latencies, stderr)


def pipelined(impl: str, n: int) -> PipeRun:
    """Write n requests from a thread while the main thread reads the answers as they come."""
    server = Server(impl)
    server.round_trip(workloads.request(-1) + b"\n")
    payload = memoryview(b"".join(workloads.request(i) + b"\n" for i in range(n)))

    def write_all() -> None:
        offset = 0
        while offset < len(payload):
            offset += os.write(server.wfd, payload[offset : offset + 65536])

    chunks = []
    count = 0
    writer = threading.Thread(target=write_all, daemon=True)
    start = time.perf_counter()
    writer.start()
    while count < n:
        data = os.read(server.rfd, 1 << 20)
        if not data:
            break
        chunks.append(data)
        count += data.count(b"\n")
    seconds = time.perf_counter() - start
    writer.join()
    stderr = server.close()
    checked = workloads.check(_expect("pipelined", list(range(n))), b"".join(chunks))
    return PipeRun(seconds, n, checked, None, stderr)
