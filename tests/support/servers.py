"""Real HTTP servers for the tests: a server command (gunicorn, uvicorn, granian) run on a socket the test binds
and hands over, stopped with its workers at the end; ``client_server.py``'s handler served that way for the HTTP
clients.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from support import TESTS
from support.processes import child_env


@contextlib.contextmanager
def real_server(
    command: list[str], *, cwd: Path | None = None, workers: set[int] | None = None, min_workers: int = 0
) -> Iterator[str]:
    """Run ``command`` (``{fd}`` replaced by a listening socket's descriptor) and yield its base URL.

    A server that takes no descriptor (granian) gets ``{port}``: a port the kernel just gave and this test
    freed again, so another process could take it in between (unlikely on 127.0.0.1, and the test then fails
    loudly, never silently). ``workers`` gets the server's child processes as they are at the end; the URL
    comes once there are ``min_workers`` of them (30 s at most)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.set_inheritable(True)
    port = listener.getsockname()[1]
    fd = listener.fileno()
    binds_itself = any("{port}" in part for part in command)
    if binds_itself:
        listener.close()
    process = subprocess.Popen(
        [part.replace("{fd}", str(fd)).replace("{port}", str(port)) for part in command],
        pass_fds=() if binds_itself else (fd,),
        cwd=cwd,
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    listener.close()  # the server has its own copy
    workers = set() if workers is None else workers
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(port, process)
        deadline = time.monotonic() + 30
        while len(descendants(process.pid)) < min_workers and time.monotonic() < deadline:
            time.sleep(0.1)  # gunicorn and granian start their workers one after the other
        yield url
    finally:
        workers |= descendants(process.pid)
        process.terminate()
        try:
            _, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            for pid in workers:  # a worker that outlives its server holds stderr open: communicate would wait
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            _, stderr = process.communicate(timeout=30)
        left = workers
        deadline = time.monotonic() + 10
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = {pid for pid in workers if running(pid)}
        for pid in left:  # never leave a worker behind, even when the test fails
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert not left, f"worker processes left running after the server stopped: {sorted(left)}"
    assert b"Traceback" not in stderr, stderr.decode(errors="replace")


def descendants(pid: int) -> set[int]:
    """The processes under ``pid`` (its workers), from /proc (empty where there is none)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            parents[int(stat.parent.name)] = int(stat.read_text().rpartition(")")[2].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def wait_until_serving(port: int, process: subprocess.Popen[bytes]) -> None:
    """The socket listens from the start; wait (60 s at most) until the server answers on it."""
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, process.communicate()[1].decode(errors="replace")
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            connection.request("GET", "/rpc")
            connection.getresponse().read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
        finally:
            connection.close()


CLIENT_SERVER_APP = """
import sys
import {impl} as rpc
from rpcwire.http import ASGIApp

sys.path.insert(0, {support!r})
import client_server
app = ASGIApp(client_server.handler(rpc){options})
"""


@contextlib.contextmanager
def client_server_url(impl: ModuleType, tmp_path: Path, **app_options: Any) -> Iterator[str]:
    """``client_server.handler(impl)`` as rpcwire's ASGI app (``ASGIApp(handler, **app_options)``) under uvicorn
    on a loopback port; yields the URL of its endpoint."""
    pytest.importorskip("uvicorn")
    options = "".join(f", {name}={value!r}" for name, value in app_options.items())
    source = CLIENT_SERVER_APP.format(impl=impl.__name__, support=str(TESTS / "support"), options=options)
    (tmp_path / "client_server_app.py").write_text(source)
    uvicorn = [sys.executable, "-m", "uvicorn", "--fd", "{fd}", "--app-dir", str(tmp_path), "--log-level", "warning"]
    with real_server([*uvicorn, "client_server_app:app"]) as url:
        yield url + "/rpc"
