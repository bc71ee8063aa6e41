"""HTTP bodies are read by the core's ``_read_text`` and notifications written by a writer of notifications, not
through a transport built over the body: every path of the two applications answers a body byte for byte as
``rpcwire.dispatch`` does (the plain path is ``dispatch`` itself), whatever whitespace or bytes it holds."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest
import rpcwire
import rpcwire.http
from rpcwire import current_request
from rpcwire.http import ASGIApp, WSGIApp

LIMITS = {"max_body_bytes": 4096, "max_depth": 8, "max_batch": 4}


def add(a: int, b: int) -> int:
    return a + b


async def async_add(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


def note(text: str) -> None:
    return None


SYNC = rpcwire.methods({"add": add, "note": note})
ASYNC = rpcwire.methods({"add": async_add, "note": note})

BODIES = [
    b'{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}',
    b'{\n"jsonrpc" : "2.0",\r\n"method":"add",\n\t"params":[1,\n2],"id":"\\u00e9"}\n',  # newlines as whitespace
    b'{"jsonrpc":"2.0","method":"add","params":["a\nb",2],"id":2}',  # a raw newline in a string
    b'{"jsonrpc":"2.0","method":"add","params":["a\rb",2],"id":3}',  # a raw carriage return in a string
    b"",
    b" \n\t\r\n",
    b"{bad",
    b"[]",
    b"[1,2]",
    b"[" + b",".join([b'{"jsonrpc":"2.0","method":"add","params":[1,1],"id":4}'] * 5) + b"]",  # over max_batch
    b'[{"jsonrpc":"2.0","method":"add","params":[1,1],"id":5},\n7,\n{"jsonrpc":"2.0","method":"note","params":["x"]}]',
    b'[{"jsonrpc":"2.0","method":"note","params":["x"]}]',
    b'{"jsonrpc":"2.0","method":"add","params":[[[[[[[[[[1]]]]]]]]],2],"id":6}',  # deeper than max_depth
    b'{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1e3}',
    b'{"jsonrpc":"2.0","method":"add","params":[1,2],"id":7}\n{"jsonrpc":"2.0","method":"add","params":[1,2],"id":8}',
]


def expected(body: bytes) -> bytes | None:
    return rpcwire.dispatch(body, SYNC, max_message_bytes=4096, max_depth=8, max_batch=4)


def call_wsgi(app: WSGIApp, body: bytes, accept: str | None = None) -> tuple[int, bytes]:
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "POST",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": "127.0.0.1:8000",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http",
    }
    if accept is not None:
        environ["HTTP_ACCEPT"] = accept
    started: list[str] = []
    chunks = app(environ, lambda status, headers, exc_info=None: started.append(status))
    return int(started[0].split()[0]), b"".join(chunks)


def call_asgi(app: ASGIApp, body: bytes, accept: str | None = None) -> tuple[int, bytes]:
    headers = [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json")]
    headers.append((b"content-length", str(len(body)).encode()))
    if accept is not None:
        headers.append((b"accept", accept.encode()))
    scope = {
        "type": "http",
        "method": "POST",
        "scheme": "http",
        "headers": headers,
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 5000),
    }
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(30)  # the client stays
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(asyncio.wait_for(app(scope, receive, send), 10))
    status = sent[0]["status"]
    return status, b"".join(message.get("body", b"") for message in sent[1:])


def answer_of(status: int, body: bytes) -> bytes | None:
    if status == 204:
        assert body == b""
        return None
    assert status == 200
    return body


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
@pytest.mark.parametrize(
    "path",
    ["wsgi", "wsgi-events", "asgi-sync", "asgi-sync-events", "asgi-async", "asgi-async-events"],
)
def test_every_path_answers_a_body_as_dispatch_does(path: str, body: bytes) -> None:
    events = "text/event-stream" if path.endswith("-events") else None
    if path.startswith("wsgi"):
        reply = call_wsgi(WSGIApp(SYNC, expose_errors=True, **LIMITS), body, events)
    else:
        handler = ASYNC if path.startswith("asgi-async") else SYNC
        reply = call_asgi(ASGIApp(handler, expose_errors=True, **LIMITS), body, events)
    assert answer_of(*reply) == expected(body)


def progress_then_answer(method: str, params: Any) -> Any:
    current_request().progress(1, 2, "half")
    current_request().notify("log", {"text": "a\nb"})
    return "done"


async def async_progress_then_answer(method: str, params: Any) -> Any:
    current_request().progress(1, 2, "half")
    current_request().notify("log", {"text": "a\nb"})
    return "done"


@pytest.mark.parametrize("handler", [progress_then_answer, async_progress_then_answer], ids=["sync", "async"])
def test_notifications_go_out_as_the_core_encodes_them(handler: Any) -> None:
    body = b'{"jsonrpc":"2.0","method":"go","params":{"_meta":{"progressToken":"t"}},"id":1}'
    status, stream = call_asgi(ASGIApp(handler), body, "text/event-stream")
    assert status == 200
    events = [event.removeprefix(b"event: message\ndata: ") for event in stream.split(b"\n\n") if event]
    core = rpcwire._core
    assert events == [
        core._encode_request(
            "notifications/progress", {"progressToken": "t", "progress": 1, "total": 2, "message": "half"}
        ),
        core._encode_request("log", {"text": "a\nb"}),
        b'{"jsonrpc":"2.0","id":1,"result":"done"}',
    ]


def refused_notification(method: str, params: Any) -> Any:
    current_request().notify("log", float("nan"))  # the encoder refuses NaN: the handler fails
    return "unreached"


async def async_refused_notification(method: str, params: Any) -> Any:
    current_request().notify("log", float("nan"))
    return "unreached"


@pytest.mark.parametrize("events", [None, "text/event-stream"], ids=["plain", "events"])
@pytest.mark.parametrize("handler", [refused_notification, async_refused_notification], ids=["sync", "async"])
def test_a_notification_the_encoder_refuses_fails_the_handler_whether_anyone_listens(
    handler: Any, events: str | None
) -> None:
    body = b'{"jsonrpc":"2.0","method":"go","id":1}'
    status, answer = call_asgi(ASGIApp(handler, expose_errors=True), body, events)
    assert status == 200
    assert json.loads(answer)["error"]["code"] == -32603


@pytest.mark.parametrize("module", sorted(Path(rpcwire.http.__file__).parent.glob("*.py")), ids=lambda path: path.name)
def test_no_body_is_read_through_a_transport(module: Path) -> None:
    source = module.read_text(encoding="utf-8")
    assert "BytesIO" not in source
    assert 'replace(b"\\n"' not in source
    assert "StdioTransport(" not in source
