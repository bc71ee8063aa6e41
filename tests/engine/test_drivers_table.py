"""One table of (input lines -> answers) run through every driver of the serving session and the sequential loops:
the same bytes in, the same answers out, whether the core's own loop serves them (native or pure), the threads
server, the asyncio server (sync and async handlers), a ``--listen`` connection (a real server on 127.0.0.1) or
a WebSocket connection (``ASGIApp`` under a real uvicorn on 127.0.0.1, as tests/http/test_websocket.py runs it; each
line a frame, each answer a frame).

Lone answers may come in any order in the concurrent drivers, so they are compared sorted; a batch's line is one
answer, its entries in the batch's order. The session's rules themselves are tests/engine/test_session_rules.py.
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import rpcwire
from support.messages import echo
from support.processes import announced_server, rpcwire_command
from support.servers import real_server
from support.serving import serve_in_mode

WAIT = 30.0  # seconds: a --listen answer comes well within this; only reached when the driver hangs


def line(method: str, params: Any = None, id_: Any = ...) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    if id_ is not ...:
        message["id"] = id_
    return json.dumps(message)


# (name, input lines, the answers: each line decoded, lone answers sorted by their JSON text)
CASES: list[tuple[str, list[str], list[Any]]] = [
    (
        "requests are each answered",
        [line("echo", [1], 1), line("echo", {"a": 2}, "two"), line("missing", None, 3)],
        [
            {"jsonrpc": "2.0", "id": 1, "result": [1]},
            {"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "Method not found"}},
            {"jsonrpc": "2.0", "id": "two", "result": {"a": 2}},
        ],
    ),
    (
        "a batch is one line in its entries' order, its notifications and invalid entries in their places",
        [f"[{line('echo', [1], 'a')},{line('echo', [2])},1,{line('missing', None, 'b')}]"],
        [
            [
                {"jsonrpc": "2.0", "id": "a", "result": [1]},
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}},
                {"jsonrpc": "2.0", "id": "b", "error": {"code": -32601, "message": "Method not found"}},
            ]
        ],
    ),
    (
        "notifications, a batch of them, and cancellations of ids not in flight answer nothing",
        [
            line("echo", [1]),
            f"[{line('echo', [2])},{line('echo', [3])}]",
            line("$/cancelRequest", {"id": 7}),
            line("notifications/cancelled", {"requestId": 7}),
            line("echo", [4], 4),
        ],
        [{"jsonrpc": "2.0", "id": 4, "result": [4]}],
    ),
    (
        "what cannot be read is refused in place, and serving goes on",
        ["{nope", "[]", line("echo", [5], 5)],
        [
            {"jsonrpc": "2.0", "id": 5, "result": [5]},
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}},
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}},
        ],
    ),
    (
        "past 2N admitted, the requests read ahead are all answered",
        [line("echo", [i], i) for i in range(40)],
        [{"jsonrpc": "2.0", "id": i, "result": [i]} for i in range(40)],
    ),
]

DRIVERS = ["sequential", "threads", "asyncio-sync", "asyncio-async", "listen", "websocket"]

LISTEN_HANDLER = """
def handler(method, params):
    if method == "missing":
        import rpcwire
        raise rpcwire.MethodNotFound()
    return params
"""


@pytest.fixture(scope="module")
def listen_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    app_dir: Path = tmp_path_factory.mktemp("table")
    (app_dir / "table_handler.py").write_text(LISTEN_HANDLER)
    command = rpcwire_command("serve", "table_handler:handler", "--listen", "127.0.0.1:0", "--max-concurrency", "2")
    with announced_server(command, app_dir, "listening on tcp://127.0.0.1:", 200) as port:
        yield port


WEBSOCKET_APP = """
from rpcwire.http import ASGIApp
from support.messages import echo

app = ASGIApp(echo, websocket=True, max_concurrency=2)
"""


@pytest.fixture(scope="module")
def websocket_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if importlib.util.find_spec("uvicorn") is None or importlib.util.find_spec("websockets") is None:
        pytest.skip("uvicorn and websockets are needed for the WebSocket driver")
    app_dir: Path = tmp_path_factory.mktemp("table-websocket")
    (app_dir / "table_app.py").write_text(WEBSOCKET_APP)
    support = str(Path(__file__).resolve().parents[1])  # tests/, where support/ is
    command = [sys.executable, "-m", "uvicorn", "--fd", "{fd}", "--app-dir", str(app_dir), "--log-level", "warning"]
    with real_server([*command, "table_app:app"], cwd=Path(support)) as url:
        yield "ws" + url.removeprefix("http") + "/"


async def over_websocket(url: str, lines: list[bytes], answers: int) -> list[bytes]:
    """Each line sent as a frame on one connection; the ``answers`` frames that come back, then any that came
    before the answer to a last request sent once they are in (none should)."""
    from websockets.asyncio.client import connect

    async with connect(url) as ws:
        for frame in lines:
            await ws.send(frame.decode())
        received = [await asyncio.wait_for(ws.recv(), WAIT) for _ in range(answers)]
        await ws.send(line("echo", ["end"], "end"))
        while (last := await asyncio.wait_for(ws.recv(), WAIT)) != '{"jsonrpc":"2.0","id":"end","result":["end"]}':
            received.append(last)
    return [text.encode() if isinstance(text, str) else text for text in received]


def served(impl: ModuleType, driver: str, data: bytes, request: pytest.FixtureRequest, answers: int) -> bytes:
    if driver == "websocket":
        if impl is not rpcwire:
            pytest.skip("ASGIApp serves with `import rpcwire`'s core: its pure case is the pure wheel's")
        url = request.getfixturevalue("websocket_url")
        return b"\n".join(asyncio.run(over_websocket(url, data.splitlines(), answers)))
    if driver == "listen":
        if impl is not rpcwire:
            pytest.skip("--listen serves with `import rpcwire`: its pure case is the pure wheel's")
        port = request.getfixturevalue("listen_port")
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)  # end of input: the connection ends once everything is answered
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks)
    out = io.BytesIO()
    transport = impl.StdioTransport(io.BytesIO(data), out)
    if driver == "sequential":
        impl.serve(echo, transport)
    else:
        serve_in_mode(driver, impl, echo, transport, n=2)
    return out.getvalue()


def _sorted(answers: list[Any]) -> list[Any]:
    return sorted(answers, key=lambda answer: json.dumps(answer, sort_keys=True))


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize(("lines", "expected"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_every_driver_answers_alike(
    impl: ModuleType, driver: str, lines: list[str], expected: list[Any], request: pytest.FixtureRequest
) -> None:
    output = served(impl, driver, "".join(f"{text}\n" for text in lines).encode(), request, len(expected))
    answers = [json.loads(text) for text in output.splitlines()]
    assert _sorted(answers) == _sorted(expected)
