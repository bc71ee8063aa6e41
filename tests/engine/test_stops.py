"""How ``serve`` stops and refuses (docs/semantics.md, "Concurrency"): a handler's ``SystemExit`` ends the
server while its input is still open, in every mode, so that a peer sees the end at once; a second ``serve``
on a transport is refused before it touches anything, so the first one's guard of fd 1 stays whole.

Real processes on real pipes: what a peer of the server sees (its exit, its answers, what lands on fd 1).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from support.messages import ok, request
from support.processes import ServerProcess, child_env

EXITS = 10.0  # seconds: a server that stops exits well within this; only reached when it hangs

DYING_SERVER = """
import argparse, asyncio, importlib, sys

impl = importlib.import_module(sys.argv[1])
mode = sys.argv[2]


def handler(method, params):
    if method == "die":
        argparse.ArgumentParser(prog="tool").error("bad arguments")  # raises SystemExit(2)
    return params


async def async_handler(method, params):
    return handler(method, params)


transport = impl.StdioTransport()
if mode == "asyncio":
    impl.serve(async_handler, transport, max_concurrency=2)
else:
    impl.serve(handler, transport, max_concurrency=2 if mode == "threads" else 1)
"""

MODES = ["sequential", "threads", "asyncio"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_system_exit_ends_the_server_while_its_input_is_open(impl: ModuleType, mode: str, tmp_path: Path) -> None:
    """The reader, blocked on the open pipe, does not hold the exit: the process leaves with the status the
    handler raised, after answering what came before."""
    server = ServerProcess(tmp_path, DYING_SERVER, [impl.__name__, mode], 60)
    try:
        server.send(request("echo", [1], id=1))
        assert server.receive() == ok(1, [1])
        server.send(request("die", id=2))  # stdin stays open
        assert server.wait(timeout=EXITS) == 2, server.errors()
        assert "bad arguments" in server.errors()
        assert server.stdout.read() == b""  # the request that raised gets no answer
    finally:
        server.close()


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_a_client_of_a_server_that_exits_gets_connection_closed(impl: ModuleType, mode: str, tmp_path: Path) -> None:
    """Not its call's timeout: the server's exit is the end of the connection."""
    script = tmp_path / "server.py"
    script.write_text(DYING_SERVER)
    client = impl.Client.spawn([sys.executable, str(script), impl.__name__, mode], env=child_env(), timeout=30)
    with client:
        assert client.call("echo", [1]) == [1]
        with pytest.raises(impl.ConnectionClosed):
            client.call("die")


# --- two serves on one transport ----------------------------------------------------------------------

TWO_SERVES = """
import importlib, os, sys, threading

impl = importlib.import_module(sys.argv[1])
WAIT = 5.0
read_fd, write_fd = os.pipe()
transport = impl.StdioTransport(os.fdopen(read_fd, "rb"), sys.stdout.buffer)  # the wire is fd 1
handled, refused, in_property = threading.Event(), threading.Event(), threading.Event()
outcomes = []


def handler(method, params):
    handled.set()
    refused.wait(WAIT)  # the other serve has been turned away by now
    print("stray from the handler", flush=True)  # must not land on the wire
    return "ok"


class SlowToInspect:
    # The first look at whether it is async waits until the other serve is serving or refused, so that
    # each serve is seen at every step of the other's start.

    def __call__(self, method, params):
        return handler(method, params)

    @property
    def rpcwire_async(self):
        if not in_property.is_set():
            in_property.set()
            for _ in range(int(WAIT / 0.01)):
                if handled.is_set() or refused.is_set():
                    break
                threading.Event().wait(0.01)
        return False


def run(handler):
    try:
        impl.serve(handler, transport)
        outcomes.append("served")
    except RuntimeError as exc:
        outcomes.append("refused")
        refused.set()


first = threading.Thread(target=run, args=(SlowToInspect(),))
first.start()
in_property.wait(WAIT)
second = threading.Thread(target=run, args=(handler,))
second.start()
os.write(write_fd, sys.argv[2].encode())
refused.wait(WAIT)
handled.wait(WAIT)
os.close(write_fd)
first.join(WAIT * 4)
second.join(WAIT * 4)
print("outcomes", sorted(outcomes), file=sys.stderr)
sys.stdout.flush()
os.write(1, b"fd 1 is the wire again\\n")
"""


@pytest.mark.slow
def test_a_second_serve_is_refused_before_it_touches_fd_1(impl: ModuleType, tmp_path: Path) -> None:
    """The one that serves keeps its guard of fd 1: its handler's ``print`` goes to stderr, not between the
    answers, whichever of the two gets the transport; both leave fd 1 and ``sys.stdout`` as they were."""
    script = tmp_path / "server.py"
    script.write_text(TWO_SERVES)
    process = subprocess.run(
        [sys.executable, str(script), impl.__name__, request("m", id=1).decode()],
        capture_output=True,
        env=child_env(),
        timeout=60,
        check=False,
    )
    errors = process.stderr.decode(errors="replace")
    assert process.returncode == 0, errors
    assert "outcomes ['refused', 'served']" in errors
    assert "stray from the handler" in errors
    lines = process.stdout.splitlines()
    assert lines[-1] == b"fd 1 is the wire again", lines
    assert [json.loads(line) for line in lines[:-1]] == [ok(1, "ok")], lines
