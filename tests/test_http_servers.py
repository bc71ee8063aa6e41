"""``rpcwire.http`` under real servers: the Flask example under gunicorn with the client example against it,
and ``ASGIApp`` under uvicorn. Each server listens on a socket this test binds (127.0.0.1, an ephemeral
port) and hands over as a file descriptor, so no port is guessed; the server is stopped by the test."""

from __future__ import annotations

import contextlib
import http.client
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from child import child_env

pytest.importorskip("gunicorn")
pytest.importorskip("uvicorn")
pytest.importorskip("flask")
requests = pytest.importorskip("requests")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
ADD = b'{"jsonrpc":"2.0","method":"add","params":[10,15],"id":1}'
JSON = {"Content-Type": "application/json"}


@contextlib.contextmanager
def server(command: list[str], *, cwd: Path | None = None) -> Iterator[str]:
    """Run ``command`` (``{fd}`` replaced by a listening socket's descriptor) and yield its base URL."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.set_inheritable(True)
    port = listener.getsockname()[1]
    fd = listener.fileno()
    process = subprocess.Popen(
        [part.replace("{fd}", str(fd)) for part in command],
        pass_fds=(fd,),
        cwd=cwd,
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    listener.close()  # the server has its own copy
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(port, process)
        yield url
    finally:
        process.terminate()
        try:
            _, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate(timeout=30)
    assert b"Traceback" not in stderr, stderr.decode(errors="replace")


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


def test_the_flask_example_under_gunicorn_with_the_client_example() -> None:
    gunicorn = [sys.executable, "-m", "gunicorn", "--bind", "fd://{fd}", "--workers", "1", "flask_server:app"]
    with server(gunicorn, cwd=EXAMPLES) as url:
        client = subprocess.run(
            [sys.executable, str(EXAMPLES / "http_client.py"), f"{url}/rpc"],
            capture_output=True,
            timeout=60,
            env=child_env(),
            check=True,
        )
        assert client.stdout.decode().splitlines() == [
            "Status: 200",
            "Response: {'jsonrpc': '2.0', 'id': 1, 'result': 25}",  # the members in the order of our bytes
        ]
        response = requests.post(f"{url}/rpc", data=ADD, headers=JSON, timeout=30)
        assert (response.status_code, response.content) == (200, b'{"jsonrpc":"2.0","id":1,"result":25}')
        assert response.headers["Content-Type"] == "application/json"
        chunked = requests.post(f"{url}/rpc", data=iter([ADD[:10], ADD[10:]]), headers=JSON, timeout=30)
        assert chunked.request.headers.get("Transfer-Encoding") == "chunked"
        assert chunked.json() == {"jsonrpc": "2.0", "id": 1, "result": 25}
        notification = requests.post(
            f"{url}/rpc", json={"jsonrpc": "2.0", "method": "subtract", "params": [1, 2]}, timeout=30
        )
        assert (notification.status_code, notification.content) == (204, b"")
        assert (
            requests.post(f"{url}/rpc", data=ADD, headers={"Content-Type": "text/plain"}, timeout=30).status_code == 415
        )
        assert requests.get(f"{url}/rpc", timeout=30).status_code == 405


ASGI_MODULE = """
import asyncio

from rpcwire import current_request, methods
from rpcwire.http import ASGIApp

released = None


async def waits():
    # Reports progress, then waits (30 s at most) until another request calls release.
    global released
    released = released or asyncio.Event()
    current_request().progress(1)
    await asyncio.wait_for(released.wait(), 30)
    current_request().progress(2)
    return "done"


async def release():
    global released
    released = released or asyncio.Event()
    released.set()


async def add(a, b):
    await asyncio.sleep(0)
    return a + b


def subtract(minuend, subtrahend):
    return minuend - subtrahend


app = ASGIApp(methods({"add": add, "subtract": subtract, "waits": waits, "release": release}), max_body_bytes=1000)
"""


def test_the_asgi_app_under_uvicorn(tmp_path: Path) -> None:
    (tmp_path / "asgi_server.py").write_text(ASGI_MODULE)
    uvicorn = [sys.executable, "-m", "uvicorn", "--fd", "{fd}", "--app-dir", str(tmp_path), "--lifespan", "on"]
    with server([*uvicorn, "--log-level", "warning", "asgi_server:app"]) as url:
        client = subprocess.run(
            [sys.executable, str(EXAMPLES / "http_client.py"), f"{url}/rpc"],
            capture_output=True,
            timeout=60,
            env=child_env(),
            check=True,
        )
        assert client.stdout.decode().splitlines()[0] == "Status: 200"
        batch = b'[{"jsonrpc":"2.0","method":"subtract","params":[5,3],"id":"s"},\n' + ADD + b"]"
        response = requests.post(f"{url}/rpc", data=batch, headers=JSON, timeout=30)
        assert (response.status_code, response.content) == (
            200,
            b'[{"jsonrpc":"2.0","id":"s","result":2},{"jsonrpc":"2.0","id":1,"result":25}]',
        )
        notification = requests.post(
            f"{url}/rpc", json={"jsonrpc": "2.0", "method": "add", "params": [1, 2]}, timeout=30
        )
        assert (notification.status_code, notification.content) == (204, b"")
        assert requests.post(f"{url}/rpc", data=b" " * 1001, headers=JSON, timeout=30).status_code == 413
        chunked = requests.post(f"{url}/rpc", data=iter([b" " * 600, b" " * 600]), headers=JSON, timeout=30)
        assert chunked.status_code == 413
        assert requests.post(f"{url}/rpc", data=b"", headers=JSON, timeout=30).json()["error"]["code"] == -32600
        cross_site = {**JSON, "Origin": "http://evil.example"}
        assert requests.post(f"{url}/rpc", data=ADD, headers=cross_site, timeout=30).status_code == 403
        same_host = {**JSON, "Origin": url}
        assert requests.post(f"{url}/rpc", data=ADD, headers=same_host, timeout=30).status_code == 200
        assert requests.put(f"{url}/rpc", data=ADD, headers=JSON, timeout=30).headers["Allow"] == "POST"


def test_events_under_uvicorn_are_not_held_back(tmp_path: Path) -> None:
    """The first progress event reaches the client while the handler still waits, for a second request."""
    (tmp_path / "asgi_server.py").write_text(ASGI_MODULE)
    uvicorn = [sys.executable, "-m", "uvicorn", "--fd", "{fd}", "--app-dir", str(tmp_path), "--log-level", "warning"]
    waits = b'{"jsonrpc":"2.0","method":"waits","params":{"_meta":{"progressToken":7}},"id":1}'
    release = b'{"jsonrpc":"2.0","method":"release","id":2}'
    with server([*uvicorn, "asgi_server:app"]) as url:
        headers = {**JSON, "Accept": "application/json, text/event-stream"}
        with requests.post(f"{url}/rpc", data=waits, headers=headers, stream=True, timeout=30) as response:
            assert response.headers["Content-Type"] == "text/event-stream"
            lines = response.iter_lines()
            assert next(lines) == b"event: message"
            progress = b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,'
            assert next(lines) == progress + b'"progress":1}}'
            released = requests.post(f"{url}/rpc", data=release, headers=JSON, timeout=30)
            assert released.json() == {"jsonrpc": "2.0", "id": 2, "result": None}
            rest = [line for line in lines if line]
        assert rest == [
            b"event: message",
            progress + b'"progress":2}}',
            b"event: message",
            b'data: {"jsonrpc":"2.0","id":1,"result":"done"}',
        ]
