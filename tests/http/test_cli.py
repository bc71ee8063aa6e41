"""``python -m rpcwire``: the demo, and ``serve MODULE:HANDLER`` in a real subprocess over stdio (pipes) and over
HTTP on 127.0.0.1 (port 0: the server says its port on stderr), each stopped by the test."""

from __future__ import annotations

import contextlib
import http.client
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.processes import QUIET_STDERR, announced_server, rpcwire_command, run_rpcwire

HANDLERS = """
import asyncio
import threading

from rpcwire import methods


def add(a, b):
    return a + b


def where():
    return threading.current_thread().name


async def slow_add(a, b):
    await asyncio.sleep(0)
    return a + b


handler = methods({"add": add, "where": where})
async_handler = methods({"add": slow_add})
"""
ADD = b'{"jsonrpc":"2.0","method":"add","params":[10,15],"id":1}'


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    (tmp_path / "handlers.py").write_text(HANDLERS)
    return tmp_path


def test_demo_still_runs() -> None:
    demo = run_rpcwire("demo", check=True)
    assert demo.stdout.decode().startswith("rpcwire demo: ")
    assert '<-- {"jsonrpc":"2.0","id":1,"result":5}' in demo.stdout.decode()


@pytest.mark.parametrize(
    ("args", "handler"),
    [
        ((), "handlers:handler"),
        (("--stdio", "--max-concurrency", "4"), "handlers:handler"),
        ((), "handlers:async_handler"),
    ],
)
def test_serve_over_stdio(app_dir: Path, args: tuple[str, ...], handler: str) -> None:
    lines = b"".join(ADD.replace(b'"id":1', b'"id":%d' % i) + b"\n" for i in range(20))
    served = run_rpcwire(
        "serve", handler, *args, input=lines + b'{"jsonrpc":"2.0","method":"nope","id":"x"}\n', cwd=app_dir
    )
    assert served.returncode == 0, served.stderr.decode(errors="replace")
    answers = {answer["id"]: answer for answer in map(json.loads, served.stdout.splitlines())}
    assert answers == {
        **{i: {"jsonrpc": "2.0", "id": i, "result": 25} for i in range(20)},
        "x": {"jsonrpc": "2.0", "id": "x", "error": {"code": -32601, "message": "Method not found"}},
    }
    assert served.stderr == QUIET_STDERR.encode()


@contextlib.contextmanager
def http_server(app_dir: Path, *args: str) -> Iterator[int]:
    """``serve --http 127.0.0.1:0 *args``; yields the port it says on stderr; terminates it at the end."""
    command = rpcwire_command("serve", *args, "--http", "127.0.0.1:0")
    with announced_server(command, app_dir, "listening on http://127.0.0.1:", 60) as port:
        yield port


def post(port: int, body: bytes, **headers: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/rpc", body=body, headers={"Content-Type": "application/json", **headers})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("server", "handler"),
    [
        pytest.param("auto", "handlers:async_handler", id="auto-uvicorn-async"),
        pytest.param("uvicorn", "handlers:handler", id="uvicorn"),
        pytest.param("wsgiref", "handlers:handler", id="wsgiref"),
    ],
)
def test_serve_over_http(app_dir: Path, server: str, handler: str) -> None:
    if server != "wsgiref":
        pytest.importorskip("uvicorn")
    with http_server(app_dir, handler, "--server", server) as port:
        assert post(port, ADD) == (200, b'{"jsonrpc":"2.0","id":1,"result":25}')
        assert post(port, b'{"jsonrpc":"2.0","method":"add","params":[1,2]}') == (204, b"")
        assert post(port, b"[" + ADD + b"," + ADD.replace(b'"id":1', b'"id":2') + b"]")[1] == (
            b'[{"jsonrpc":"2.0","id":1,"result":25},{"jsonrpc":"2.0","id":2,"result":25}]'
        )


def test_wsgiref_refuses_an_async_handler(app_dir: Path) -> None:
    served = run_rpcwire("serve", "handlers:async_handler", "--http", "127.0.0.1:0", "--server", "wsgiref", cwd=app_dir)
    assert served.returncode == 2
    assert b"install uvicorn to serve an async handler" in served.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("handlers:",), b"expected MODULE or MODULE:HANDLER"),
        (("nowhere:handler",), b"could not import module 'nowhere'"),
        (("handlers:missing",), b"module 'handlers' has no attribute 'missing'"),
        (("handlers:asyncio",), b"handlers:asyncio is not callable"),
        (("handlers:handler", "--http", "host:port"), b"expected [HOST]:PORT"),
        (("handlers:handler", "--max-concurrency", "0"), b"--max-concurrency must be at least 1"),
        (("handlers:handler", "--listen", "127.0.0.1:0", "--max-connections", "0"), b"must be at least 1"),
        (("handlers:handler", "--listen", "127.0.0.1:0", "--idle-timeout", "-1"), b"0 or more"),
        (("handlers:handler", "--listen", "127.0.0.1:0", "--idle-timeout", "nan"), b"0 or more"),
        (("handlers:handler", "--http", "127.0.0.1:0", "--max-connections", "4"), b"are --listen's"),
        (("handlers:handler", "--idle-timeout", "4"), b"are --listen's"),
        (("handlers:handler", "--listen", "127.0.0.1:0", "--run-sync-inline"), b"is --http's"),
        (("handlers:handler", "--http", "127.0.0.1:0", "--server", "wsgiref", "--run-sync-inline"), b"uvicorn"),
        (("handlers:handler", "--allowed-hosts", "localhost"), b"are --http's and --listen's"),
        (("handlers:handler", "--expose-errors"), b"are --http's and --listen's"),
        (("handlers:handler", "--http", "127.0.0.1:0", "--allowed-hosts", "a b"), b"--allowed-hosts: "),
    ],
)
def test_serve_usage_errors(app_dir: Path, args: tuple[str, ...], message: bytes) -> None:
    served = run_rpcwire("serve", *args, cwd=app_dir)
    assert (served.returncode, served.stdout) == (2, b"")
    assert message in served.stderr, served.stderr.decode(errors="replace")


def test_serve_help_says_which_http_server_and_why() -> None:
    shown = run_rpcwire("serve", "--help", check=True).stdout.decode()
    assert "uvicorn if installed" in shown
    assert "wsgiref" in shown


@pytest.mark.parametrize(
    ("args", "main_thread"),
    [
        (("--server", "uvicorn"), False),  # a sync handler on a worker thread
        (("--server", "uvicorn", "--run-sync-inline"), True),  # on the loop, uvicorn's main thread
    ],
)
def test_run_sync_inline(app_dir: Path, args: tuple[str, ...], main_thread: bool) -> None:
    pytest.importorskip("uvicorn")
    with http_server(app_dir, "handlers:handler", *args) as port:
        status, body = post(port, b'{"jsonrpc":"2.0","method":"where","id":1}')
    assert status == 200
    assert (json.loads(body)["result"] == "MainThread") is main_thread, body


@pytest.mark.slow
@pytest.mark.parametrize("server", ["uvicorn", "wsgiref"])
def test_http_checks_the_host(app_dir: Path, server: str) -> None:
    """DNS rebinding: on 127.0.0.1, a request naming another host (the attacker's, now resolving to 127.0.0.1)
    is refused before the handler runs; --allowed-hosts names the hosts instead."""
    if server == "uvicorn":
        pytest.importorskip("uvicorn")
    with http_server(app_dir, "handlers:handler", "--server", server) as port:
        assert post(port, ADD, Host=f"localhost:{port}")[0] == 200
        assert post(port, ADD, Host=f"[::1]:{port}")[0] == 200
        rebound = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
        assert post(port, ADD, **rebound)[0] == 421
    with http_server(app_dir, "handlers:handler", "--server", server, "--allowed-hosts", "rpc.example.com") as port:
        assert post(port, ADD, Host="rpc.example.com")[0] == 200
        assert post(port, ADD, Host=f"127.0.0.1:{port}")[0] == 421
    with http_server(app_dir, "handlers:handler", "--server", server, "--allowed-hosts", "*") as port:
        assert post(port, ADD, Host=f"evil.example:{port}")[0] == 200


LOGGED = """
import logging

from rpcwire import methods

# The server's log in a file of its own, where the test reads it (and out of stderr, which must hold no traceback).
log = logging.getLogger("rpcwire")
log.propagate = False
file = logging.FileHandler("server.log")
file.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
log.addHandler(file)


def broken():
    raise ValueError("the database password is hunter2")


handler = methods({"broken": broken})
"""
BROKEN = b'{"jsonrpc":"2.0","method":"broken","id":1}'


@pytest.mark.parametrize(
    "where",
    [("--http", "--server", "uvicorn"), ("--http", "--server", "wsgiref"), ("--listen",)],
    ids=["uvicorn", "wsgiref", "listen"],
)
@pytest.mark.parametrize("expose", [False, True], ids=["default", "expose-errors"])
def test_errors_over_http(app_dir: Path, where: tuple[str, ...], expose: bool) -> None:
    """Over HTTP a handler's exception is -32603 alone (--expose-errors: with its class and text), and logged on
    the server with its traceback."""
    if "uvicorn" in where:
        pytest.importorskip("uvicorn")
    (app_dir / "logged.py").write_text(LOGGED)
    command = rpcwire_command("serve", "logged:handler", *where[1:], *(["--expose-errors"] if expose else []))
    command += [where[0], "127.0.0.1:0"]
    scheme = "tcp" if where[0] == "--listen" else "http"
    with announced_server(command, app_dir, f"listening on {scheme}://127.0.0.1:", 60) as port:
        status, body = post(port, BROKEN)
    assert status == 200
    error = json.loads(body)["error"]
    assert (error["code"], error["message"]) == (-32603, "Internal error")
    if expose:
        assert error["data"] == {"exception": "ValueError", "detail": "the database password is hunter2"}
    else:
        assert "data" not in error and b"hunter2" not in body
    logged = (app_dir / "server.log").read_text()
    assert logged.startswith("ERROR broken failed (id 1, traceparent None)"), logged
    assert "Traceback" in logged and "ValueError: the database password is hunter2" in logged


def test_version_names_the_version_and_the_core() -> None:
    import rpcwire

    done = subprocess.run(
        [sys.executable, "-m", "rpcwire", "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    core = "native" if rpcwire.NATIVE else "pure"
    assert done.stdout.strip() == f"rpcwire {rpcwire.__version__} ({core})"
    assert rpcwire.__version__ != "0+unknown"


def test_help_names_http_and_listen() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rpcwire", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m rpcwire")
    assert "--http" in done.stdout and "--listen" in done.stdout
