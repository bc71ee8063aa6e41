"""``rpcwire.http`` under real servers: the Flask example under gunicorn with the client example against it,
and ``ASGIApp`` under uvicorn. Each server listens on a socket this test binds (127.0.0.1, an ephemeral
port) and hands over as a file descriptor, so no port is guessed (granian takes none: see
``support.processes.real_server``); the server is stopped by the test, its worker processes with it. Last, the
"Scaling" recipes of docs/guides/http.md with two workers each."""

from __future__ import annotations

import http.client
import importlib.util
import json
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support import EXAMPLES
from support.processes import child_env
from support.servers import real_server

pytest.importorskip("gunicorn")
pytest.importorskip("uvicorn")
pytest.importorskip("flask")
requests = pytest.importorskip("requests")
pytestmark = pytest.mark.slow  # every test starts a real server process (gunicorn, uvicorn, granian)

ADD = b'{"jsonrpc":"2.0","method":"add","params":[10,15],"id":1}'
JSON = {"Content-Type": "application/json"}


def test_the_flask_example_under_gunicorn_with_the_client_example() -> None:
    gunicorn = [sys.executable, "-m", "gunicorn", "--bind", "fd://{fd}", "--workers", "1", "flask_server:app"]
    with real_server(gunicorn, cwd=EXAMPLES) as url:
        client = subprocess.run(
            [sys.executable, str(EXAMPLES / "http_client.py"), f"{url}/rpc"],
            capture_output=True,
            timeout=60,
            env=child_env(),
            check=True,
        )
        assert client.stdout.decode().splitlines() == [  # what the example's docstring says it prints
            "add(10, 15) = 25",
            "subtract(minuend=10, subtrahend=15) = -5",
            "batch: [3, 2]",
            "divide: -32601 Method not found",
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
    with real_server([*uvicorn, "--log-level", "warning", "asgi_server:app"]) as url:
        client = subprocess.run(
            [sys.executable, str(EXAMPLES / "http_client.py"), f"{url}/rpc"],
            capture_output=True,
            timeout=60,
            env=child_env(),
            check=True,
        )
        assert client.stdout.decode().splitlines()[0] == "add(10, 15) = 25"
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
    with real_server([*uvicorn, "asgi_server:app"]) as url:
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


# --- scaling: docs/guides/http.md's recipes with two worker processes ----------------------------------

SCALED_MODULE = """
import os

from rpcwire import methods
from rpcwire.http import ASGIApp, WSGIApp


def add(a, b):
    return {"sum": a + b, "pid": os.getpid()}


handler = methods({"add": add})
wsgi_app = WSGIApp(handler)
asgi_app = ASGIApp(handler)
"""
CLIENTS, REQUESTS_EACH = 5, 10  # 50 requests, each client on its own keep-alive connection


def scaled_servers() -> list[object]:
    gunicorn = [sys.executable, "-m", "gunicorn", "--bind", "fd://{fd}", "--chdir", "{dir}"]
    uvicorn = [sys.executable, "-m", "uvicorn", "--fd", "{fd}", "--app-dir", "{dir}", "--log-level", "warning"]
    granian = [sys.executable, "-m", "granian", "--host", "127.0.0.1", "--port", "{port}", "--working-dir", "{dir}"]
    # A worker that refuses to stop is killed after 10 s (once, in a full run on a loaded machine, a granian
    # worker outlived the test's 30 s after SIGTERM, holding its stderr open).
    granian_options = ["--workers", "2", "--log-level", "warning", "--workers-kill-timeout", "10"]
    needs_granian = pytest.mark.skipif(
        importlib.util.find_spec("granian") is None, reason="granian is not installed (requirements-dev.txt)"
    )
    return [
        pytest.param([*gunicorn, "-w", "2", "scaled:wsgi_app"], id="gunicorn-w2"),
        pytest.param(
            [*gunicorn, "-w", "2", "--worker-class", "gthread", "--threads", "4", "scaled:wsgi_app"],
            id="gunicorn-w2-gthread",
        ),
        pytest.param([*uvicorn, "--workers", "2", "scaled:asgi_app"], id="uvicorn-workers2"),
        pytest.param(
            [*granian, "--interface", "wsgi", "--blocking-threads", "4", *granian_options, "scaled:wsgi_app"],
            id="granian-wsgi-w2",
            marks=needs_granian,
        ),
        pytest.param(
            [*granian, "--interface", "asgi", *granian_options, "scaled:asgi_app"],
            id="granian-asgi-w2",
            marks=needs_granian,
        ),
    ]


@pytest.mark.parametrize("command", scaled_servers())
def test_scaling_recipes_with_two_workers(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "scaled.py").write_text(SCALED_MODULE)
    command = [part.replace("{dir}", str(tmp_path)) for part in command]
    answers: list[tuple[int, bytes]] = []
    lock = threading.Lock()

    def client(port: int, first_id: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            for id_ in range(first_id, first_id + REQUESTS_EACH):
                body = b'{"jsonrpc":"2.0","method":"add","params":[%d,1],"id":%d}' % (id_, id_)
                connection.request("POST", "/rpc", body=body, headers=JSON)
                response = connection.getresponse()
                with lock:
                    answers.append((response.status, response.read()))
        finally:
            connection.close()

    # granian on a free-threaded interpreter runs its workers as threads of its one process (its MTServer)
    threads = command[2] == "granian" and not getattr(sys, "_is_gil_enabled", lambda: True)()
    workers: set[int] = set()
    with real_server(command, workers=workers, min_workers=0 if threads else 2) as url:
        port = int(url.rpartition(":")[2])
        clients = [threading.Thread(target=client, args=(port, n * REQUESTS_EACH)) for n in range(CLIENTS)]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join(60)
    assert {status for status, _ in answers} == {200}
    decoded = sorted((json.loads(body) for _, body in answers), key=lambda answer: answer["id"])
    assert [(a["jsonrpc"], a["id"], a["result"]["sum"]) for a in decoded] == [
        ("2.0", i, i + 1) for i in range(CLIENTS * REQUESTS_EACH)
    ]
    if threads:
        assert not workers and len({a["result"]["pid"] for a in decoded}) == 1, workers
        return
    assert len(workers) >= 2, workers
    assert {a["result"]["pid"] for a in decoded} <= workers  # answered by the workers, whichever the kernel chose


# --- slow clients and clients that go away ------------------------------------------------------------------

CLIENTS_MODULE = """
import asyncio
import time

from rpcwire import current_request, methods
from rpcwire.http import ASGIApp, WSGIApp

seen = []  # what the ticking handlers saw, in this worker process


def ticks():
    # Progress every 50 ms until cancelled (30 s at most).
    context = current_request()
    for tick in range(600):
        context.progress(tick)
        if context.cancelled:
            seen.append("cancelled")
            return "cancelled"
        time.sleep(0.05)
    seen.append("never cancelled")
    return "done"


async def ticks_async():
    context = current_request()
    try:
        for tick in range(600):
            context.progress(tick)
            await asyncio.sleep(0.05)
    except asyncio.CancelledError:
        seen.append("cancelled" if context.cancelled else "task cancelled, context not")
        raise
    seen.append("never cancelled")
    return "done"


def add(a, b):
    return a + b


def report():
    return seen


wsgi_app = WSGIApp(methods({"ticks": ticks, "add": add, "report": report}))
asgi_app = ASGIApp(methods({"ticks": ticks, "add": add, "report": report}))
asgi_inline_app = ASGIApp(methods({"ticks": ticks, "add": add, "report": report}), run_sync_inline=True)
asgi_async_app = ASGIApp(methods({"ticks": ticks_async, "add": add, "report": report}))
"""


def client_servers() -> list[object]:
    gunicorn = [sys.executable, "-m", "gunicorn", "--bind", "fd://{fd}", "--chdir", "{dir}", "-w", "1"]
    gunicorn += ["--worker-class", "gthread", "--threads", "4"]
    uvicorn = [sys.executable, "-m", "uvicorn", "--fd", "{fd}", "--app-dir", "{dir}", "--log-level", "warning"]
    granian = [sys.executable, "-m", "granian", "--host", "127.0.0.1", "--port", "{port}", "--working-dir", "{dir}"]
    granian += ["--workers", "1", "--log-level", "warning", "--workers-kill-timeout", "10"]
    needs_granian = pytest.mark.skipif(
        importlib.util.find_spec("granian") is None, reason="granian is not installed (requirements-dev.txt)"
    )
    return [
        pytest.param([*gunicorn, "clients:wsgi_app"], id="WSGIApp-gunicorn-gthread"),
        pytest.param([*uvicorn, "clients:asgi_app"], id="ASGIApp-uvicorn"),
        pytest.param([*uvicorn, "clients:asgi_inline_app"], id="ASGIApp-inline-uvicorn"),
        pytest.param([*uvicorn, "clients:asgi_async_app"], id="ASGIApp-async-uvicorn"),
        pytest.param([*granian, "--interface", "wsgi", "clients:wsgi_app"], id="WSGIApp-granian", marks=needs_granian),
        pytest.param(
            [*granian, "--interface", "asgi", "clients:asgi_async_app"], id="ASGIApp-async-granian", marks=needs_granian
        ),
    ]


def raw_post(port: int, body: bytes, *, pieces: int = 1, pause: float = 0.0, chunked: bool = False) -> bytes:
    """POST ``body`` over a raw socket in ``pieces`` sends ``pause`` seconds apart; the whole response."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        framing = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: %d" % len(body)
        head = b"POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n%s\r\n" % framing
        connection.sendall(head + b"Connection: close\r\n\r\n")
        size = -(-len(body) // pieces)
        for start in range(0, len(body), size):
            time.sleep(pause)
            piece = body[start : start + size]
            connection.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
        if chunked:
            connection.sendall(b"0\r\n\r\n")
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    return received


def call(url: str, method: str, params: object = None) -> object:
    body = {"jsonrpc": "2.0", "method": method, "id": 1, **({} if params is None else {"params": params})}
    response = requests.post(f"{url}/rpc", json=body, timeout=30)
    assert response.status_code == 200, response.content
    return response.json()["result"]


@pytest.mark.parametrize("command", client_servers())
def test_a_slow_client_trickling_its_body(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "clients.py").write_text(CLIENTS_MODULE)
    body = b'{"jsonrpc":"2.0","method":"add",\n"params":[10,15],\n"id":"slow"}'
    with real_server([part.replace("{dir}", str(tmp_path)) for part in command]) as url:
        port = int(url.rpartition(":")[2])
        for chunked in (False, True):
            response = raw_post(port, body, pieces=6, pause=0.1, chunked=chunked)
            head, _, content = response.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), response
            if b"transfer-encoding: chunked" in head.lower():  # granian may chunk its answer
                content = content.split(b"\r\n")[1]
            assert content == b'{"jsonrpc":"2.0","id":"slow","result":25}', response
        assert call(url, "add", [1, 2]) == 3  # and the server serves on


@pytest.mark.parametrize("command", client_servers())
def test_a_client_gone_mid_stream_cancels_the_request(tmp_path: Path, command: list[str]) -> None:
    """The client reads two progress events, then closes its connection: the handler's context is cancelled
    (an async handler's task too), nothing is left running, no traceback, and the server serves on."""
    (tmp_path / "clients.py").write_text(CLIENTS_MODULE)
    ticks = b'{"jsonrpc":"2.0","method":"ticks","params":{"_meta":{"progressToken":1}},"id":1}'
    with real_server([part.replace("{dir}", str(tmp_path)) for part in command]) as url:
        port = int(url.rpartition(":")[2])
        connection = socket.create_connection(("127.0.0.1", port), timeout=30)
        head = b"POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        head += b"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(ticks)
        connection.sendall(head + ticks)
        received = b""
        while received.count(b"event: message") < 2:
            chunk = connection.recv(65536)
            assert chunk, received
            received += chunk
        assert b"200" in received.split(b"\r\n")[0] and b"text/event-stream" in received.lower()
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset, at once
        connection.close()
        deadline = time.monotonic() + 30
        while not (seen := call(url, "report")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert seen == ["cancelled"]
        assert call(url, "add", [1, 2]) == 3


# --- DNS rebinding: the Host check under real servers ---------------------------------------------------------

HOSTS_MODULE = """
from rpcwire import methods
from rpcwire.http import ASGIApp, WSGIApp

handler = methods({"add": lambda a, b: a + b})
wsgi_app = WSGIApp(handler)
asgi_app = ASGIApp(handler)
listed_wsgi_app = WSGIApp(handler, allowed_hosts=["rpc.example.com", "localhost"])
listed_asgi_app = ASGIApp(handler, allowed_hosts=["rpc.example.com", "localhost"])
"""


def host_servers() -> list[object]:
    gunicorn = [sys.executable, "-m", "gunicorn", "--bind", "fd://{fd}", "--chdir", "{dir}", "-w", "1"]
    uvicorn = [sys.executable, "-m", "uvicorn", "--fd", "{fd}", "--app-dir", "{dir}", "--log-level", "warning"]
    granian = [sys.executable, "-m", "granian", "--host", "127.0.0.1", "--port", "{port}", "--working-dir", "{dir}"]
    granian += ["--workers", "1", "--log-level", "warning", "--workers-kill-timeout", "10"]
    needs_granian = pytest.mark.skipif(
        importlib.util.find_spec("granian") is None, reason="granian is not installed (requirements-dev.txt)"
    )
    return [
        pytest.param(gunicorn, "wsgi_app", id="WSGIApp-gunicorn"),
        pytest.param(uvicorn, "asgi_app", id="ASGIApp-uvicorn"),
        pytest.param([*granian, "--interface", "wsgi"], "wsgi_app", id="WSGIApp-granian", marks=needs_granian),
        pytest.param([*granian, "--interface", "asgi"], "asgi_app", id="ASGIApp-granian", marks=needs_granian),
    ]


def post_as(port: int, host: str, origin: str | None = None) -> int:
    """The status of an ``add`` POST to 127.0.0.1:``port`` that names ``host`` (and ``origin``)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        headers = {**JSON, "Host": host, **({} if origin is None else {"Origin": origin})}
        connection.request("POST", "/rpc", body=ADD, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


@pytest.mark.parametrize(("command", "app"), host_servers())
def test_a_rebound_name_is_refused_under_real_servers(tmp_path: Path, command: list[str], app: str) -> None:
    """A page of evil.example whose name now resolves to 127.0.0.1 posts to a server on 127.0.0.1: its Host and
    Origin are both evil.example's. The server's address (scope["server"], SERVER_NAME) or the client's tells
    the request came over loopback, so only loopback names are answered; a list names the hosts instead."""
    (tmp_path / "hosts.py").write_text(HOSTS_MODULE)
    command = [part.replace("{dir}", str(tmp_path)) for part in command]
    with real_server([*command, f"hosts:{app}"]) as url:
        port = int(url.rpartition(":")[2])
        assert post_as(port, f"127.0.0.1:{port}") == 200
        assert post_as(port, f"localhost:{port}", f"http://localhost:{port}") == 200
        assert post_as(port, f"evil.example:{port}", f"http://evil.example:{port}") == 421
        assert post_as(port, "evil.example") == 421
    with real_server([*command, f"hosts:listed_{app}"]) as url:
        port = int(url.rpartition(":")[2])
        assert post_as(port, "rpc.example.com") == 200
        assert post_as(port, f"localhost:{port}") == 200
        assert post_as(port, f"127.0.0.1:{port}") == 421


# --- a refused body: read and dropped when small, else the connection closed ------------------------------------

REFUSING_MODULE = """
from rpcwire import methods
from rpcwire.http import ASGIApp, WSGIApp

handler = methods({"add": lambda a, b: a + b})
wsgi_app = WSGIApp(handler, max_body_bytes=1000)
asgi_app = ASGIApp(handler, max_body_bytes=1000)
"""


def refusing_servers(*, honours_connection_close: bool = False) -> list[object]:
    """The servers of ``REFUSING_MODULE``'s apps; with ``honours_connection_close``, only those that act on an
    app's ``Connection: close`` (gunicorn drops it: PEP 3333 keeps the connection the server's)."""
    gunicorn = [sys.executable, "-m", "gunicorn", "--bind", "fd://{fd}", "--chdir", "{dir}", "-w", "1"]
    uvicorn = [sys.executable, "-m", "uvicorn", "--fd", "{fd}", "--app-dir", "{dir}", "--log-level", "warning"]
    granian = [sys.executable, "-m", "granian", "--host", "127.0.0.1", "--port", "{port}", "--working-dir", "{dir}"]
    granian += ["--workers", "1", "--log-level", "warning", "--workers-kill-timeout", "10"]
    needs_granian = pytest.mark.skipif(
        importlib.util.find_spec("granian") is None, reason="granian is not installed (requirements-dev.txt)"
    )
    servers = [
        pytest.param([*uvicorn, "refusing:asgi_app"], id="ASGIApp-uvicorn"),
        pytest.param([*granian, "--interface", "wsgi", "refusing:wsgi_app"], id="WSGIApp-granian", marks=needs_granian),
        pytest.param([*granian, "--interface", "asgi", "refusing:asgi_app"], id="ASGIApp-granian", marks=needs_granian),
    ]
    if not honours_connection_close:
        servers += [
            pytest.param([*gunicorn, "refusing:wsgi_app"], id="WSGIApp-gunicorn-sync"),
            pytest.param(
                [*gunicorn, "--worker-class", "gthread", "--threads", "2", "refusing:wsgi_app"],
                id="WSGIApp-gunicorn-gthread",
            ),
        ]
    return servers


class _SmallSendBuffer(http.client.HTTPConnection):
    """``http.client`` with a small socket send buffer: a body the server does not read stops at once, as over a
    real network, instead of vanishing into loopback's large buffers."""

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)
        self.sock.settimeout(self.timeout)
        self.sock.connect((self.host, self.port))


@pytest.mark.parametrize("command", refusing_servers())
def test_a_refused_body_keeps_the_connection_in_step(tmp_path: Path, command: list[str]) -> None:
    """A body of 512 KiB over ``max_body_bytes`` (1000), sent by ``http.client`` on a kept-alive connection: the
    413 comes (the app reads and drops the rest, at most 1 MiB, before it answers), and the next request on that
    connection is answered. The app used to answer without reading: gunicorn's sync worker then closed under the
    client still sending (a broken pipe instead of the 413), its gthread worker and granian said keep-alive and
    closed (the next request: "Remote end closed connection")."""
    (tmp_path / "refusing.py").write_text(REFUSING_MODULE)
    big = b'{"jsonrpc":"2.0","method":"add","params":["' + b"x" * 512 * 1024 + b'"],"id":2}'
    with real_server([part.replace("{dir}", str(tmp_path)) for part in command]) as url:
        client = _SmallSendBuffer("127.0.0.1", int(url.rpartition(":")[2]), timeout=30)
        try:
            for _ in range(2):
                client.request("POST", "/rpc", body=ADD, headers=JSON)
                response = client.getresponse()
                assert (response.status, response.read()) == (200, b'{"jsonrpc":"2.0","id":1,"result":25}')
                client.request("POST", "/rpc", body=big, headers=JSON)
                response = client.getresponse()
                assert response.status == 413
                assert response.read().startswith(b"413 Content Too Large")
        finally:
            client.close()


@pytest.mark.parametrize("command", refusing_servers(honours_connection_close=True))
def test_a_refused_body_too_large_to_read_says_connection_close(tmp_path: Path, command: list[str]) -> None:
    """A body of 8 MiB announced (64 KiB of it sent): more than the app reads to drop it, so it is left unread, and
    the 413 says ``Connection: close`` (the server closes after it) instead of letting the client send its next
    request on a connection the server is about to close."""
    (tmp_path / "refusing.py").write_text(REFUSING_MODULE)
    with real_server([part.replace("{dir}", str(tmp_path)) for part in command]) as url:
        port = int(url.rpartition(":")[2])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
            head = b"POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            connection.sendall(head + b"Content-Length: %d\r\n\r\n" % (8 * 1024 * 1024) + b"x" * 65536)
            received = b""
            while b"\r\n\r\n" not in received:
                chunk = connection.recv(65536)
                assert chunk, received
                received += chunk
        status, _, headers = received.partition(b"\r\n\r\n")[0].partition(b"\r\n")
        assert status.startswith(b"HTTP/1.1 413 "), received
        assert b"connection: close" in headers.lower().split(b"\r\n"), received
