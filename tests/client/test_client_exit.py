"""A process that exits with a ``Client`` still open while its server talks: it exits as it would have (status 0,
nothing on stderr about it), however its reading threads sit when the interpreter finalizes. On CPython 3.10-3.13
a thread that wakes while the interpreter finalizes is ended by unwinding its stack, which aborts the process
("FATAL: exception not rethrown") if the native core's frames are on it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from support.processes import child_env

# Writes notifications without pause until its output is closed.
CHATTY_SERVER = r"""
import sys, time
line = b'{"jsonrpc":"2.0","method":"tick","params":[1]}\n'
try:
    while True:
        sys.stdout.buffer.write(line * 8)
        sys.stdout.buffer.flush()
        time.sleep(0.0002)
except OSError:
    pass
"""

# argv: IMPL, the server's script, how the client is made ("spawn", or "transport": over the server's pipes). Exits
# with the client open once its notifications are read.
LEAVES_OPEN = r"""
import importlib, subprocess, sys, threading
impl = importlib.import_module(sys.argv[1])
server = [sys.executable, sys.argv[2]]
if sys.argv[3] == "spawn":
    client = impl.Client.spawn(server)
else:
    process = subprocess.Popen(server, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    client = impl.Client(impl.StdioTransport(process.stdout, process.stdin))
ticks = threading.Semaphore(0)
client.on_notification("tick", lambda params: ticks.release())
for _ in range(200):
    assert ticks.acquire(timeout=20), "no notification came"
print("leaving", flush=True)
"""


def exits(impl: ModuleType, tmp_path: Path, how: str) -> None:
    """A child that leaves a client made ``how`` open at its exit ends with status 0 (twice: the timing varies)."""
    server, child = tmp_path / "chatty.py", tmp_path / "leaves_open.py"
    server.write_text(CHATTY_SERVER)
    child.write_text(LEAVES_OPEN)
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, str(child), impl.__name__, str(server), how],
            capture_output=True,
            timeout=60,
            env=child_env(),
            check=False,
        )
        assert (done.returncode, done.stdout) == (0, b"leaving\n"), done.stderr.decode(errors="replace")[-2000:]


def test_a_spawned_client_left_open_at_exit(impl: ModuleType, tmp_path: Path) -> None:
    """Over a spawned server's pipe (POSIX), the idle reader waits in ``poll``, outside the native core, and the
    core's own reads return at once: nothing of the core is on a thread's stack while it waits."""
    if not hasattr(__import__("select"), "poll"):
        pytest.skip("no select.poll here: a spawned server is read with blocking reads (the portable path)")
    exits(impl, tmp_path, "spawn")


def test_a_client_over_a_transport_left_open_at_exit(impl: ModuleType, tmp_path: Path) -> None:
    """Over a transport's own streams (a pipe, under a ``BufferedReader``), the client's thread waits for input
    outside the stream's ``readinto1`` (the native core waits in its own ``poll``, the GIL released, before each
    read), so that a thread woken while the interpreter finalizes is parked, not unwound through the core."""
    if impl.__name__ == "rpcwire" and sys.version_info < (3, 14) and sys.version_info[:2] != (3, 11):
        # Seen on 3.10.13, 3.12.1 and 3.13.0 (their wheels): the process still crashes at finalization (SIGSEGV in
        # the main thread, no Python frame), not yet understood; 3.11 exits cleanly.
        pytest.xfail("known on CPython 3.10, 3.12, 3.13: the native client over a transport's pipe crashes at exit")
    exits(impl, tmp_path, "transport")
