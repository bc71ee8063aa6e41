"""The guard of the process's stdout (docs/semantics.md, "The process's stdout"): while ``rpcwire.serve``
writes the wire to fd 1, a handler's ``print``, ``os.write(1, ...)`` and a child process's output go to
stderr, and fd 1 and ``sys.stdout`` are the wire's again afterwards; ``guard_stdout=False`` (and the CLI's
``--no-stdout-guard``) leave them alone. Real processes on real pipes, in every engine and both cores.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support.messages import request
from support.processes import child_env, run_rpcwire

TIMEOUT = 60

SERVER = """
import asyncio, importlib, os, subprocess, sys

impl = importlib.import_module(sys.argv[1])
mode, guard = sys.argv[2], sys.argv[3] == "guard"


def stray(method):
    print("print from", method)  # no flush: sys.stdout is block-buffered on a pipe
    os.write(1, b"os.write from " + method.encode() + b"\\n")
    if method == "child":
        subprocess.run([sys.executable, "-c", "print('child process')"], check=True)


def handler(method, params):
    stray(method)
    return params


async def async_handler(method, params):
    stray(method)
    return params


print("before serve")  # buffered: goes out first, where it was printed
transport = impl.StdioTransport()
if mode == "asyncio":
    impl.serve(async_handler, transport, guard_stdout=guard)
else:
    impl.serve(handler, transport, max_concurrency=4 if mode == "threads" else 1, guard_stdout=guard)
print("after serve", flush=True)  # sys.stdout and fd 1 are the wire's again
os.write(1, b"restored\\n")
"""

REQUESTS = request("m", [1], id=1) + request("child", [2], id=2) + request("n", id=...) + request("m", [3], id=3)
STRAYS = [b"print from m", b"os.write from m", b"os.write from child", b"child process", b"print from n"]


def run_server(tmp_path: Path, impl: ModuleType, mode: str, guard: str) -> subprocess.CompletedProcess[bytes]:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    process = subprocess.run(
        [sys.executable, str(script), impl.__name__, mode, guard],
        input=REQUESTS,
        capture_output=True,
        env=child_env(),
        timeout=TIMEOUT,
        check=False,
    )
    assert process.returncode == 0, process.stderr.decode(errors="replace")
    return process


@pytest.mark.parametrize("mode", ["sequential", "threads", "asyncio"])
def test_stray_output_goes_to_stderr_while_serving(impl: ModuleType, mode: str, tmp_path: Path) -> None:
    process = run_server(tmp_path, impl, mode, "guard")
    lines = process.stdout.splitlines()
    assert lines[0] == b"before serve"
    assert lines[-2:] == [b"after serve", b"restored"]
    answers = sorted((json.loads(line) for line in lines[1:-2]), key=lambda answer: answer["id"])
    assert answers == [{"jsonrpc": "2.0", "id": i, "result": [i]} for i in (1, 2)] + [
        {"jsonrpc": "2.0", "id": 3, "result": [3]}
    ]
    for stray in STRAYS:
        assert stray in process.stderr
        assert stray not in process.stdout


@pytest.mark.parametrize("mode", ["sequential", "threads", "asyncio"])
def test_guard_stdout_false_leaves_fd_1_alone(impl: ModuleType, mode: str, tmp_path: Path) -> None:
    """The opt-out: what the handler writes to fd 1 lands between the answers (as before the guard)."""
    process = run_server(tmp_path, impl, mode, "none")
    for stray in [b"os.write from m", b"os.write from child", b"child process"]:
        assert stray in process.stdout
    assert b"print from m" not in process.stderr


HANDLERS = """
import os

from rpcwire import methods


def shout(text):
    print("stray", text)
    os.write(1, b"stray write\\n")
    return text


handler = methods({"shout": shout})
"""


@pytest.mark.parametrize("flag", [[], ["--no-stdout-guard"]])
@pytest.mark.parametrize("concurrency", [[], ["--max-concurrency", "4"]])
def test_the_cli_stdio_guards_stdout(tmp_path: Path, flag: list[str], concurrency: list[str]) -> None:
    (tmp_path / "handlers.py").write_text(HANDLERS)
    process = run_rpcwire(
        "serve",
        "handlers:handler",
        "--app-dir",
        str(tmp_path),
        *concurrency,
        *flag,
        input=request("shout", ["hi"], id=1) + request("shout", ["ho"], id=2),
    )
    assert process.returncode == 0, process.stderr.decode(errors="replace")
    if flag:
        assert b"stray write" in process.stdout
    else:
        assert sorted(json.loads(line)["id"] for line in process.stdout.splitlines()) == [1, 2]
        assert process.stderr.count(b"stray write\n") == 2
        assert b"stray hi\n" in process.stderr


def test_nothing_is_done_when_the_transport_writes_elsewhere(impl: ModuleType) -> None:
    """A transport over its own streams: ``sys.stdout`` (and fd 1) are left as they are while serving."""
    seen: list[Any] = []

    def handler(method: str, params: Any) -> Any:
        seen.append(sys.stdout)
        return params

    before = sys.stdout
    out = io.BytesIO()
    for n in (1, 4):
        impl.serve(handler, impl.StdioTransport(io.BytesIO(request("m", [1], id=1)), out), max_concurrency=n)
    assert seen == [before, before]
    assert out.getvalue().count(b'"result":[1]') == 2


def test_swap_output_writes_to_the_new_stream_and_returns_the_old(impl: ModuleType) -> None:
    """The core's ``_swap_output`` (both cores): every later write goes to the new stream."""
    first, second = io.BytesIO(), io.BytesIO()
    transport = impl.StdioTransport(io.BytesIO(), first)
    transport.write_notification("a")
    assert transport._swap_output(second) is first
    transport.write_notification("b")
    text = io.TextIOWrapper(first)
    assert transport._swap_output(text) is second  # a text stream: its .buffer
    transport.write_notification("c")
    text.detach()
    assert first.getvalue() == b'{"jsonrpc":"2.0","method":"a"}\n{"jsonrpc":"2.0","method":"c"}\n'
    assert second.getvalue() == b'{"jsonrpc":"2.0","method":"b"}\n'

    class BadFlush(io.BytesIO):
        flush = None  # type: ignore[assignment]

    with pytest.raises(TypeError, match="flush must be callable"):
        transport._swap_output(BadFlush())
    with pytest.raises(TypeError):
        transport._swap_output(object())
