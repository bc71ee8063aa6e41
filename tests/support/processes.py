"""Child processes for the tests that need a real one: a server on real pipes or one that announces its port
(``rpcwire serve --listen``, ``--http``), the CLI, or a measurement (RSS, a crash) that must not happen inside
pytest's own process. Every child is bounded: a timeout or a watchdog turns a hang into a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
import rpcwire

from support import TESTS

PACKAGE_ROOT = str(Path(rpcwire.__file__).resolve().parent.parent)
CLIENT_SERVER = str(TESTS / "support" / "client_server.py")
"""The server the client tests talk to: ``python CLIENT_SERVER IMPL N`` (see its docstring)."""
FALLBACK_WARNING = (
    "rpcwire: native module unavailable (No module named 'rpcwire._rpcwire'); "
    "serving through the pure-Python rpcwire.pure\n"
)
"""What ``import rpcwire`` (also as ``import rpcwire.pure``) writes on a child's stderr without the native module."""
QUIET_STDERR = "" if rpcwire.NATIVE else FALLBACK_WARNING
"""The whole stderr of a child that has nothing to say: empty, or where ``import rpcwire`` serves through
``rpcwire.pure`` (the pure wheel), exactly its one warning."""


def child_env(*, support: bool = False) -> dict[str, str]:
    """The environment of a child process: our package importable, stdio buffered as by default; with
    ``support``, ``tests/`` on its path too (a child script may then ``import support.measure``)."""
    env = dict(os.environ)
    paths = [PACKAGE_ROOT, str(TESTS) if support else "", env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env.pop("PYTHONUNBUFFERED", None)  # with it, sys.stdout.buffer would be a raw FileIO
    return env


def run_script(script: str, *args: str, timeout: float = 110) -> Any:
    """Run ``python -c script *args`` in a child (which may ``import support``) and return the JSON it prints;
    it must exit 0."""
    child = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        timeout=timeout,
        env=child_env(support=True),
        check=False,
    )
    assert child.returncode == 0, child.stderr.decode(errors="replace")[-2000:]
    return json.loads(child.stdout)


class ServerProcess:
    """``python script *args`` on pipes, stderr into a file, killed by a watchdog if the test hangs."""

    def __init__(self, tmp_path: Path, script: str, args: list[str], timeout: float) -> None:
        path = tmp_path / "server.py"
        path.write_text(script, encoding="utf-8")
        self.timeout = timeout
        self.stderr_path = tmp_path / "stderr.txt"
        with self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, str(path), *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=child_env(),
            )
        self.watchdog = threading.Timer(timeout, self.process.kill)
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
        return self.stderr_path.read_text(errors="replace")

    def wait(self, timeout: float | None = None) -> int:
        """The exit status; a server still running after ``timeout`` seconds fails the test."""
        try:
            return self.process.wait(timeout=self.timeout if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the server did not exit; stderr: {self.errors()}")

    def close(self) -> None:
        self.watchdog.cancel()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None and not stream.closed:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()


def announced_port(stderr: Any, announcement: str) -> int:
    """The port of the stderr line that says ``announcement`` then ``HOST:PORT``, read after at most a few
    other lines (the pure wheel's one warning that the native module is absent)."""
    before: list[str] = []
    while not (line := stderr.readline().decode()).startswith(announcement) and line and len(before) < 4:
        before.append(line)
    assert line.startswith(announcement), "".join(before) + line + stderr.read().decode()
    return int(line.rstrip().rpartition(":")[2])


@contextlib.contextmanager
def announced_server(
    command: list[str],
    cwd: Path,
    announcement: str,
    timeout: float,
    *,
    env: dict[str, str] | None = None,
    open_stdin: bool = False,
) -> Iterator[int]:
    """Run ``command`` in ``cwd`` (environment ``env``, by default ``child_env()``); yield the port its stderr
    announces (a line: ``announcement`` then ``HOST:PORT``, after at most a few others, such as the pure wheel's
    one warning that the native module is absent); terminate it at the end, and check it exited 0, wrote nothing
    on stdout and no traceback. A watchdog kills it after ``timeout`` seconds. Its stdin is empty, or with
    ``open_stdin`` a pipe left open and unwritten (as a terminal's)."""
    # faulthandler: a server that does not stop is sent SIGABRT, and its stderr then shows every thread's stack.
    env = {**(child_env() if env is None else env), "PYTHONFAULTHANDLER": "1"}
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if open_stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    watchdog = threading.Timer(timeout, process.kill)
    watchdog.start()
    try:
        assert process.stderr is not None
        yield announced_port(process.stderr, announcement)
    finally:
        process.terminate()
        try:
            stdout, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            stdout, stderr = process.communicate(timeout=30)
            pytest.fail("still running 30 s after SIGTERM; its threads then:\n" + stderr.decode(errors="replace"))
        finally:
            watchdog.cancel()
    assert process.returncode == 0, stderr.decode(errors="replace")
    assert stdout == b""
    assert b"Traceback" not in stderr, stderr.decode(errors="replace")


# --- the CLI ----------------------------------------------------------------------------------------------


def rpcwire_command(*args: str) -> list[str]:
    """``python -m rpcwire *args`` with the running interpreter."""
    return [sys.executable, "-m", "rpcwire", *args]


def run_rpcwire(
    *args: str, cwd: Path | None = None, input: bytes | None = None, check: bool = False
) -> subprocess.CompletedProcess[bytes]:
    """``python -m rpcwire *args`` run to its end (60 s at most) in ``cwd``, fed ``input``; its output captured."""
    return subprocess.run(
        rpcwire_command(*args), input=input, capture_output=True, cwd=cwd, timeout=60, env=child_env(), check=check
    )
