"""``python -m rpcwire`` as uvicorn's and flask's command lines behave: ``--http 8000``, ``MODULE`` alone, Ctrl-C
in every mode, ``--workers``, ``--log-level`` and ``--access-log``, the wsgiref fallback's notice, a ``Server``
header without Python's version, a help of options first, and the demo's transcript in order. Each server is
a real child process on 127.0.0.1 (port 0), stopped by the test."""

from __future__ import annotations

import contextlib
import http.client
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.processes import announced_port, child_env, rpcwire_command, run_rpcwire

HANDLERS = """
import os

from rpcwire import methods


def add(a, b):
    return a + b


async def async_add(a, b):
    return a + b


handler = methods({"add": add, "pid": os.getpid})
async_handler = methods({"add": async_add})
"""
APP_ONLY = "from rpcwire import methods\n\napp = methods({'name': lambda: 'app'})\n"
BOTH = "from rpcwire import methods\n\nhandler = methods({'name': lambda: 'handler'})\napp = handler\n"
ADD = b'{"jsonrpc":"2.0","method":"add","params":[10,15],"id":1}'


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    (tmp_path / "handlers.py").write_text(HANDLERS)
    (tmp_path / "apponly.py").write_text(APP_ONLY)
    (tmp_path / "both.py").write_text(BOTH)
    (tmp_path / "neither.py").write_text("x = 1\n")
    return tmp_path


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as a terminal's child has it (a background job's ignores it)


@contextlib.contextmanager
def child(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """``command`` with pipes for stdin, stdout and stderr; killed by a watchdog after 60 s, and at the end."""
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=child_env() if env is None else env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_default_sigint,  # noqa: PLW1509 (no threads in the child before exec)
    )
    watchdog = threading.Timer(60, process.kill)
    watchdog.start()
    try:
        yield process
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()
        process.communicate()


def stopped(process: subprocess.Popen[bytes], sig: int = signal.SIGINT) -> tuple[int, bytes, bytes]:
    """Send ``sig`` (Ctrl-C by default); the exit status, the rest of stdout and of stderr."""
    process.send_signal(sig)
    stdout, stderr = process.communicate(timeout=30)
    return process.returncode, stdout, stderr


def request(port: int, body: bytes, method: str = "POST") -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request(method, "/rpc", body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    response.read()
    connection.close()
    return response


def post(port: int, body: bytes) -> Any:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/rpc", body=body, headers={"Content-Type": "application/json"})
        return json.loads(connection.getresponse().read())
    finally:
        connection.close()


SERVERS = [
    pytest.param(("--http", "--server", "uvicorn"), "http", id="uvicorn"),
    pytest.param(("--http", "--server", "wsgiref"), "http", id="wsgiref"),
    pytest.param(
        ("--listen",),
        "tcp",
        id="listen",
        # Seen twice in three CI dry runs of 2026-12-06, on the native cp310 wheel only, with two suites sharing
        # two cores: `serve --listen` did not exit within 30 s of a SIGINT sent right after it announced its port
        # (nothing on stderr). Not reproduced alone or beside CPU burners; not understood yet.
        marks=pytest.mark.xfail(sys.version_info < (3, 11), reason="known race on 3.10: see the comment", strict=False),
    ),
]


@pytest.mark.parametrize("address", ["0", ":0"])
def test_a_port_alone_is_on_loopback(app_dir: Path, address: str) -> None:
    command = rpcwire_command("serve", "handlers:handler", "--server", "wsgiref", "--http", address)
    with child(command, app_dir) as process:
        port = announced_port(process.stderr, "listening on http://127.0.0.1:")
        assert post(port, ADD)["result"] == 25
        assert stopped(process)[0] == 0


def test_listen_takes_a_port_alone(app_dir: Path) -> None:
    with child(rpcwire_command("serve", "handlers", "--listen", ":0"), app_dir) as process:
        port = announced_port(process.stderr, "listening on tcp://127.0.0.1:")
        assert post(port, ADD)["result"] == 25
        assert stopped(process)[0] == 0


@pytest.mark.parametrize(("module", "found"), [("apponly", "app"), ("both", "handler")])
def test_module_alone_finds_handler_then_app(app_dir: Path, module: str, found: str) -> None:
    served = run_rpcwire("serve", module, input=b'{"jsonrpc":"2.0","method":"name","id":1}\n', cwd=app_dir)
    assert served.returncode == 0, served.stderr.decode(errors="replace")
    assert json.loads(served.stdout)["result"] == found


def test_module_without_handler_or_app_is_a_usage_error(app_dir: Path) -> None:
    served = run_rpcwire("serve", "neither", cwd=app_dir)
    assert (served.returncode, served.stdout) == (2, b"")
    assert b"module 'neither' has no 'handler' nor 'app'" in served.stderr


PURE_CLI = """
import sys

sys.modules["rpcwire._rpcwire"] = None  # serve through rpcwire.pure, as the pure wheel does
from rpcwire.__main__ import main

sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("core", ["native", "pure"])
@pytest.mark.parametrize(
    "args",
    [("handlers:handler",), ("handlers:handler", "--max-concurrency", "4"), ("handlers:async_handler",)],
    ids=["sequential", "threads", "async"],
)
def test_ctrl_c_ends_stdio_quietly(app_dir: Path, args: tuple[str, ...], core: str) -> None:
    command = rpcwire_command("serve", *args) if core == "native" else [sys.executable, "-c", PURE_CLI, "serve", *args]
    with child(command, app_dir) as process:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(ADD + b"\n")
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["result"] == 25  # serving, stdin still open
        status, stdout, stderr = stopped(process)
    assert (status, stdout) == (0, b"")
    assert b"Traceback" not in stderr and b"KeyboardInterrupt" not in stderr, stderr.decode(errors="replace")


@pytest.mark.parametrize(("where", "scheme"), SERVERS)
def test_ctrl_c_ends_a_server_quietly(app_dir: Path, where: tuple[str, ...], scheme: str) -> None:
    if "uvicorn" in where:
        pytest.importorskip("uvicorn")
    command = rpcwire_command("serve", "handlers:handler", *where[1:], where[0], "127.0.0.1:0")
    with child(command, app_dir) as process:
        port = announced_port(process.stderr, f"listening on {scheme}://127.0.0.1:")
        assert post(port, ADD)["result"] == 25
        status, stdout, stderr = stopped(process)
    assert (status, stdout) == (0, b"")
    assert b"Traceback" not in stderr and b"KeyboardInterrupt" not in stderr, stderr.decode(errors="replace")


@pytest.mark.slow
def test_workers_under_uvicorn(app_dir: Path) -> None:
    pytest.importorskip("uvicorn")
    command = rpcwire_command("serve", "handlers", "--http", "127.0.0.1:0", "--workers", "2")
    with child(command, app_dir) as process:
        port = announced_port(process.stderr, "listening on http://127.0.0.1:")
        assert post(port, ADD)["result"] == 25
        pid = post(port, b'{"jsonrpc":"2.0","method":"pid","id":1}')["result"]
        assert pid != process.pid  # answered by a worker process, not the supervisor
        status, stdout, stderr = stopped(process)  # Ctrl-C: the supervisor ends its workers
    assert (status, stdout) == (0, b"")
    assert b"Traceback" not in stderr, stderr.decode(errors="replace")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--http", "127.0.0.1:0", "--server", "wsgiref", "--workers", "2"), b"wsgiref is one process"),
        (("--listen", "127.0.0.1:0", "--workers", "2"), b"--workers is --http's"),
        (("--workers", "2"), b"--workers is --http's"),
        (("--http", "127.0.0.1:0", "--workers", "0"), b"--workers must be at least 1"),
        (("--access-log",), b"--access-log is --http's and --listen's"),
        (("--http", "localhost:x"), b"expected [HOST]:PORT"),
    ],
)
def test_usage_errors(app_dir: Path, args: tuple[str, ...], message: bytes) -> None:
    served = run_rpcwire("serve", "handlers", *args, cwd=app_dir)
    assert (served.returncode, served.stdout) == (2, b"")
    assert message in served.stderr, served.stderr.decode(errors="replace")


NO_UVICORN = """
import sys

sys.modules["uvicorn"] = None  # as if it were not installed
from rpcwire.__main__ import main

sys.exit(main(sys.argv[1:]))
"""


def test_the_stdlib_fallback_says_so(app_dir: Path) -> None:
    command = [sys.executable, "-c", NO_UVICORN, "serve", "handlers", "--http", "127.0.0.1:0"]
    with child(command, app_dir) as process:
        assert process.stderr is not None
        said = process.stderr.readline().decode()
        if said.startswith("rpcwire: native module unavailable"):  # the pure wheel's fallback line comes first
            said = process.stderr.readline().decode()
        port = announced_port(process.stderr, "listening on http://127.0.0.1:")
        assert post(port, ADD)["result"] == 25
        status, stdout, _ = stopped(process)
    assert "uvicorn is not installed" in said and "wsgiref" in said and "pip install uvicorn" in said, said
    assert (status, stdout) == (0, b"")


@pytest.mark.parametrize(("where", "scheme"), SERVERS)
def test_server_header_says_no_python_version(app_dir: Path, where: tuple[str, ...], scheme: str) -> None:
    if "uvicorn" in where:
        pytest.importorskip("uvicorn")
    command = rpcwire_command("serve", "handlers:handler", *where[1:], where[0], "127.0.0.1:0")
    with child(command, app_dir) as process:
        port = announced_port(process.stderr, f"listening on {scheme}://127.0.0.1:")
        responses = [request(port, ADD), request(port, b"", "GET"), request(port, ADD, "PUT")]
        stopped(process)
    for response in responses:
        server = response.getheader("Server", "")
        assert "python" not in server.lower() and sys.version.split()[0] not in server, server
        assert server in ("rpcwire", "uvicorn"), server


@pytest.mark.parametrize(("where", "scheme"), SERVERS)
def test_access_log(app_dir: Path, where: tuple[str, ...], scheme: str) -> None:
    if "uvicorn" in where:
        pytest.importorskip("uvicorn")
    for access_log in (False, True):
        options = ["--access-log"] if access_log else []
        command = rpcwire_command("serve", "handlers:handler", *where[1:], *options, where[0], "127.0.0.1:0")
        with child(command, app_dir) as process:
            port = announced_port(process.stderr, f"listening on {scheme}://127.0.0.1:")
            assert post(port, ADD)["result"] == 25
            status, stdout, stderr = stopped(process)
        assert (status, stdout) == (0, b"")
        assert (b'"POST /rpc HTTP/1.1" 200' in stderr) is access_log, stderr.decode(errors="replace")


LOGGING = """
import logging

from rpcwire import methods


def info():
    logging.getLogger("rpcwire.demo").info("told at INFO")
    return 1


handler = methods({"info": info})
"""


@pytest.mark.parametrize(("level", "shown"), [("warning", False), ("info", True)])
def test_log_level(app_dir: Path, level: str, shown: bool) -> None:
    (app_dir / "logs.py").write_text(LOGGING)
    call = b'{"jsonrpc":"2.0","method":"info","id":1}\n'
    served = run_rpcwire("serve", "logs", "--log-level", level, input=call, cwd=app_dir)
    assert served.returncode == 0 and json.loads(served.stdout)["result"] == 1
    assert (b"told at INFO" in served.stderr) is shown, served.stderr.decode(errors="replace")


def test_help_shows_options_first_in_one_screen() -> None:
    env = {**child_env(), "COLUMNS": "80"}
    shown = subprocess.run(
        rpcwire_command("serve", "--help"), capture_output=True, env=env, timeout=60, check=True
    ).stdout.decode()
    lines = shown.splitlines()
    assert len(lines) <= 55, shown
    first_option = next(i for i, line in enumerate(lines) if line.startswith(("options:", "positional arguments:")))
    assert first_option <= 15, shown  # the usage and one line of description, then the options
    for option in ("--http", "--listen", "--workers", "--log-level", "--access-log"):
        assert f"  {option}" in shown


@pytest.mark.parametrize("core", [(), ("--pure",)], ids=["native", "pure"])
def test_demo_transcript_in_order(core: tuple[str, ...]) -> None:
    """The demo's lines in the order they happen: each request, then what it logged, its progress, its answer;
    nothing on stderr (which would come out of order with the transcript in a log or a pipe)."""
    demo = run_rpcwire("demo", *core, check=True)
    out = demo.stdout.decode()
    assert demo.stderr == b"" or demo.stderr.decode().startswith("rpcwire: native module unavailable")
    failing = out.index('--> {"jsonrpc":"2.0","id":4,"method":"divide"')
    logged = out.index("(logged ERROR: divide failed (id 4")
    answered = out.index('<-- {"jsonrpc":"2.0","id":4,"error":{"code":-32603')
    assert failing < logged < answered
    lsp = [line for line in out.splitlines() if '"token":"index-9"' in line]
    assert [json.loads(line[4:])["params"]["value"]["kind"] for line in lsp] == ["begin", "report", "report", "end"]
    assert out.index('"kind":"end"') < out.index('<-- {"jsonrpc":"2.0","id":9,"result"')
    mcp = [json.loads(line[4:]) for line in out.splitlines() if line.startswith('<-- {"jsonrpc":"2.0","method":"notif')]
    assert [m["params"]["progress"] for m in mcp] == [1, 2] and mcp[0]["params"]["progressToken"] == "p10"
    labels = [line for line in out.splitlines() if line.startswith("# ")]
    assert labels[0] == "# an add" and labels[-1].startswith("# a long call with progress (MCP")


def test_demo_pure_tells_the_same() -> None:
    native, pure = run_rpcwire("demo", check=True), run_rpcwire("demo", "--pure", check=True)
    assert native.stdout.decode().split("\n", 1)[1] == pure.stdout.decode().split("\n", 1)[1]
