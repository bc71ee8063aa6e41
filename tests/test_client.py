"""The clients against real servers: a child process serving on its stdin/stdout (``client_server.py``,
on the same implementation as the client), a hand-written server for the server's own requests and for
garbage, and ``rpcwire.http``'s ASGI app under the real uvicorn for the HTTP clients."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import rpcwire
import rpcwire.pure
from child import child_env

pytestmark = pytest.mark.timeout(120)

SERVER = str(Path(__file__).resolve().parent / "client_server.py")
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture(autouse=True)
def child_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spawned servers import this checkout's rpcwire."""
    for name, value in child_env().items():
        monkeypatch.setenv(name, value)


def argv(impl: ModuleType, concurrency: int = 8) -> list[str]:
    return [sys.executable, SERVER, impl.__name__, str(concurrency)]


def invalid(reason: str, id_: Any = 1) -> rpcwire.Response:
    """What both cores read from a response that names an id but is invalid: that call fails with -32603."""
    return rpcwire.Response(id_, None, {"code": rpcwire.ERR_INTERNAL, "message": "Invalid response", "data": reason})


BOTH = invalid("a response with both result and error")
NO_CODE = invalid("error has no integer code or no string message")


def test_both_cores_classify_what_a_client_reads_alike(impl: ModuleType) -> None:
    lines = {
        b'{"jsonrpc":"2.0","id":1,"result":{"a":[1,2.5,null]}}': rpcwire.Response(1, {"a": [1, 2.5, None]}),
        b'{"jsonrpc":"2.0","id":2,"error":{"code":-32001,"message":"m","data":[1]}}': rpcwire.Response(
            2, None, {"code": -32001, "message": "m", "data": [1]}
        ),
        b'{"jsonrpc":"2.0","id":3,"result":null}': rpcwire.Response(3, None),
        b'{"id":1e3,"result":0,"jsonrpc":"2.0"}': rpcwire.Response(1000.0, 0),
        b'{"jsonrpc":"2.0","method":"log","params":{"x":1}}': rpcwire.Request("log", {"x": 1}, None, True),
        b'{"jsonrpc":"2.0","method":"ask","id":"s1"}': rpcwire.Request("ask", None, "s1", False),
        b'{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}': BOTH,
        b'{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}}': NO_CODE,
        b'{"jsonrpc":"2.0","id":1,"error":{"code":true,"message":"m"}}': NO_CODE,
        b'{"jsonrpc":"2.0","id":1,"error":"boom"}': invalid("error is not an object"),
        b'{"jsonrpc":"2.0","result":1}': "a response without an id",
        b'{"jsonrpc":"1.0","id":1,"result":1}': invalid('jsonrpc is not "2.0"'),
        b'{"jsonrpc":"2.0","id":[1],"result":1}': "id is not a string, a number or null",
        b'{"jsonrpc":"2.0","id":1}': "method is not a string",
        b"[]": "an empty batch",
    }
    for line, expected in lines.items():
        assert impl.Client._core._parse_incoming(line) == expected, line
    batch = impl.Client._core._parse_incoming(b'[{"jsonrpc":"2.0","id":1,"result":1}, 7]')
    assert batch == [rpcwire.Response(1, 1), "not an object"]
    assert impl.Client._core._parse_incoming(b'{"jsonrpc":"2.0","id":1,"result":').startswith("parse error")
    assert impl.Client._core._parse_incoming(b'{"jsonrpc":"2.0","id":1,"result":"\xff"}').startswith("parse error")


def test_both_cores_encode_requests_alike(impl: ModuleType) -> None:
    assert (
        impl.Client._core._encode_request("add", [1, 2], 7) == b'{"jsonrpc":"2.0","id":7,"method":"add","params":[1,2]}'
    )
    assert impl.Client._core._encode_request("ping", None, "x") == b'{"jsonrpc":"2.0","id":"x","method":"ping"}'
    assert (
        impl.Client._core._encode_request("log", {"t": "\u00e9"})
        == '{"jsonrpc":"2.0","method":"log","params":{"t":"\u00e9"}}'.encode()
    )
    with pytest.raises(TypeError):
        impl.Client._core._encode_request("bad", [object()], 1)


def test_calls_notifications_batches_and_errors(impl: ModuleType) -> None:
    with impl.Client.spawn(argv(impl), timeout=30) as client:
        assert client.call("add", [1, 2]) == 3
        assert client.call("add", {"a": "x", "b": "y"}) == "xy"
        assert client.call("echo", {"n": 1, "_meta": {"keep": True}}) == {"n": 1, "_meta": {"keep": True}}
        client.notify("add", [1, 2])  # answered by nothing; the connection goes on
        with pytest.raises(rpcwire.MethodNotFound) as not_found:
            client.call("nope")
        assert not_found.value.code == rpcwire.ERR_METHOD_NOT_FOUND
        with pytest.raises(rpcwire.InvalidParams) as invalid:
            client.call("invalid", ["bad shape"])
        assert invalid.value.message == "bad shape"
        with pytest.raises(rpcwire.JsonRpcError) as custom:
            client.call("fail", [-32001, {"why": "because"}])
        assert (custom.value.code, custom.value.message, custom.value.data) == (
            -32001,
            "custom failure",
            {"why": "because"},
        )
        assert type(custom.value) is rpcwire.JsonRpcError
        outcomes = client.batch([("add", [1, 2]), ("nope", None), ("add", [3, 4])])
        assert outcomes[0] == 3 and outcomes[2] == 7
        assert isinstance(outcomes[1], rpcwire.MethodNotFound)
        assert client.batch([]) == []


def test_a_thousand_calls_from_sixteen_threads_each_get_their_own_answer(impl: ModuleType) -> None:
    with impl.Client.spawn(argv(impl), timeout=60) as client:
        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(lambda i: client.call("add", [i, 1_000_000]), range(1_000)))
        assert results == [i + 1_000_000 for i in range(1_000)]


def test_a_thousand_concurrent_async_calls_each_get_their_own_answer(impl: ModuleType) -> None:
    async def main() -> list[Any]:
        async with await impl.AsyncClient.spawn(argv(impl), timeout=60) as client:
            return await asyncio.gather(*(client.call("add", [i, 1_000_000]) for i in range(1_000)))

    assert asyncio.run(main()) == [i + 1_000_000 for i in range(1_000)]


@pytest.mark.parametrize("dialect", ["mcp", "lsp"])
def test_a_timeout_cancels_the_call_on_the_server(
    impl: ModuleType, dialect: str, caplog: pytest.LogCaptureFixture
) -> None:
    with impl.Client.spawn(argv(impl), dialect=dialect, timeout=30) as client:
        assert client.call("add", [0, 0]) == 0  # the server is up: the call below starts before it times out
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            client.call("sleep", [20], timeout=1.0)
        assert time.monotonic() - started < 10
        deadline = time.monotonic() + 10
        while not (ids := client.call("cancelled_ids")) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(ids) == 1  # the server saw the cancellation in the client's dialect
        assert client.call("add", [2, 2]) == 4  # a late answer (LSP: -32800) was dropped, nothing broke


@pytest.mark.parametrize("dialect", ["mcp", "lsp"])
def test_async_timeout_and_task_cancellation_cancel_on_the_server(impl: ModuleType, dialect: str) -> None:
    async def main() -> list[Any]:
        async with await impl.AsyncClient.spawn(argv(impl), dialect=dialect, timeout=30) as client:
            assert await client.call("add", [0, 0]) == 0  # the server is up: the calls below start in time
            with pytest.raises(TimeoutError):
                await client.call("sleep", [20], timeout=1.0)
            task = asyncio.create_task(client.call("sleep", [20]))
            await asyncio.sleep(1.0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            deadline = time.monotonic() + 10
            while len(ids := await client.call("cancelled_ids")) < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            return ids

    assert len(asyncio.run(main())) == 2


@pytest.mark.parametrize("dialect", ["mcp", "lsp"])
def test_progress_reaches_the_callers_callback(impl: ModuleType, dialect: str) -> None:
    events: list[tuple[Any, ...]] = []
    with impl.Client.spawn(argv(impl), dialect=dialect, timeout=30) as client:
        assert client.call("progress", {"steps": 3}, on_progress=lambda *event: events.append(event)) == 3
    if dialect == "mcp":
        assert events == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    else:  # LSP's begin/report carry a percentage (the title first), end calls nothing
        assert events == [(33, 100, "step 1"), (67, 100, "step 2"), (100, 100, "step 3")]


def test_async_progress_and_notification_callbacks(impl: ModuleType) -> None:
    events: list[Any] = []

    async def main() -> None:
        async with await impl.AsyncClient.spawn(argv(impl), timeout=30) as client:
            client.on_notification("log", events.append)
            assert await client.call("announce", ["hello"]) == "hello"
            assert await client.call("progress", {"steps": 2}, on_progress=lambda *e: events.append(e)) == 2

    asyncio.run(main())
    assert events == [{"text": "hello"}, (1, 2, "step 1"), (2, 2, "step 2")]


def test_on_progress_needs_object_params(impl: ModuleType) -> None:
    with impl.Client.spawn(argv(impl), timeout=30) as client, pytest.raises(TypeError):
        client.call("add", [1, 2], on_progress=print)


def test_notification_callbacks_run_in_arrival_order(impl: ModuleType) -> None:
    seen: list[Any] = []
    with impl.Client.spawn(argv(impl), timeout=30) as client:
        client.on_notification("log", seen.append)
        for text in ("a", "b", "c"):
            assert client.call("announce", [text]) == text
    assert seen == [{"text": "a"}, {"text": "b"}, {"text": "c"}]


def test_notifications_arrive_while_no_call_is_waiting(impl: ModuleType) -> None:
    arrived = threading.Event()
    seen: list[Any] = []
    with impl.Client.spawn(argv(impl), timeout=30) as client:
        client.on_notification("log", lambda params: (seen.append(params), arrived.set()))
        assert client.call("announce_later", ["later", 0.2]) is None
        assert arrived.wait(20)  # nobody calls: the client's own reader took it
    assert seen == [{"text": "later"}]


def test_timed_and_untimed_calls_from_many_threads_each_end_as_they_should(impl: ModuleType) -> None:
    """Readers come and go (a caller reads until its own answer, then hands on): none is left unread."""
    with impl.Client.spawn(argv(impl, 32), timeout=60) as client:

        def one(i: int) -> Any:
            if i % 4 == 0:  # times out, as a reader or a waiter
                try:
                    return client.call("sleep", [3], timeout=0.05 * (i % 8 + 1))
                except TimeoutError:
                    return "timeout"
            if i % 4 == 1:
                return client.call("nap", [0.01 * (i % 5)])
            return client.call("add", [i, i], timeout=30)

        with ThreadPoolExecutor(24) as pool:
            outcomes = list(pool.map(one, range(96)))
    for i, outcome in enumerate(outcomes):
        assert outcome == ("timeout" if i % 4 == 0 else "napped" if i % 4 == 1 else 2 * i), (i, outcome)


def test_a_server_crash_fails_every_pending_call_at_once(impl: ModuleType) -> None:
    with impl.Client.spawn(argv(impl), timeout=60) as client:
        failures: list[BaseException] = []

        def wait_long() -> None:
            try:
                client.call("sleep", [50])
            except BaseException as exc:
                failures.append(exc)

        waiters = [threading.Thread(target=wait_long) for _ in range(3)]
        for waiter in waiters:
            waiter.start()
        time.sleep(0.3)
        started = time.monotonic()
        with pytest.raises(rpcwire.ConnectionClosed) as closed:
            client.call("crash", [3])
        for waiter in waiters:
            waiter.join(30)
        assert time.monotonic() - started < 20
        assert len(failures) == 3 and all(isinstance(f, rpcwire.ConnectionClosed) for f in failures)
        assert closed.value.returncode == 3
        assert "the server's last words" in closed.value.stderr_tail[-1]
        assert "exited with code 3" in str(closed.value)
        with pytest.raises(rpcwire.ConnectionClosed):
            client.call("add", [1, 2])  # later calls fail at once too


def test_async_server_crash_fails_pending_calls(impl: ModuleType) -> None:
    async def main() -> list[Any]:
        async with await impl.AsyncClient.spawn(argv(impl), timeout=60) as client:
            pending = [asyncio.ensure_future(client.call("sleep", [50])) for _ in range(3)]
            await asyncio.sleep(0.3)
            crash = asyncio.ensure_future(client.call("crash", [4]))
            return await asyncio.gather(*pending, crash, return_exceptions=True)

    outcomes = asyncio.run(main())
    assert all(isinstance(outcome, rpcwire.ConnectionClosed) for outcome in outcomes), outcomes
    assert outcomes[-1].returncode == 4
    assert "the server's last words" in str(outcomes[-1])


GARBAGE_SERVER = r"""
import json, sys
for line in sys.stdin.buffer:
    request = json.loads(line)
    out = sys.stdout.buffer
    out.write(b"this is not json\n\xff\xfe\n{\"jsonrpc\":\"2.0\",\"id\":99999,\"result\":1}\n[]\n")
    if request["method"] == "bad":
        out.write(b'{"jsonrpc":"2.0","id":%d,"error":"not an object"}\n' % request["id"])
    out.write(b'{"jsonrpc":"2.0","id":%d,"result":%s}\n' % (request["id"], json.dumps(request["params"]).encode()))
    out.flush()
"""


def test_garbage_from_the_server_is_logged_and_other_calls_go_on(
    impl: ModuleType, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = tmp_path / "garbage.py"
    script.write_text(GARBAGE_SERVER)
    with (
        caplog.at_level(logging.WARNING, "rpcwire.client"),
        impl.Client.spawn([sys.executable, str(script)], timeout=30) as client,
    ):
        assert client.call("echo", [1, 2]) == [1, 2]
        with pytest.raises(rpcwire.JsonRpcError) as malformed:  # an invalid answer naming the call fails it
            client.call("bad", ["x"])
        assert (malformed.value.code, malformed.value.data) == (rpcwire.ERR_INTERNAL, "error is not an object")
        with ThreadPoolExecutor(4) as pool:
            assert list(pool.map(lambda i: client.call("echo", [i]), range(50))) == [[i] for i in range(50)]
    messages = "\n".join(record.getMessage() for record in caplog.records)
    assert "parse error" in messages
    assert "id 99999" in messages
    assert "id 2" in messages  # the good answer to "bad", after its invalid one, came for no waiting call


SERVER_ASKS = r"""
import json, sys
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    request = json.loads(line)
    if "id" not in request:
        continue
    out.write(b'{"jsonrpc":"2.0","id":"server-1","method":"workspace/configuration","params":{"items":[1]}}\n')
    out.flush()
    answer = json.loads(sys.stdin.buffer.readline())
    out.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": answer}).encode() + b"\n")
    out.flush()
"""


def test_the_servers_own_requests_are_answered_by_the_handler(impl: ModuleType, tmp_path: Path) -> None:
    script = tmp_path / "asks.py"
    script.write_text(SERVER_ASKS)

    def handler(method: str, params: Any) -> Any:
        return {"method": method, "items": params["items"]}

    with impl.Client.spawn([sys.executable, str(script)], handler=handler, timeout=30) as client:
        answer = client.call("go")
    assert answer == {"jsonrpc": "2.0", "id": "server-1", "result": {"method": "workspace/configuration", "items": [1]}}
    with impl.Client.spawn([sys.executable, str(script)], timeout=30) as client:  # no handler: -32601
        answer = client.call("go")
    assert answer["id"] == "server-1" and answer["error"]["code"] == rpcwire.ERR_METHOD_NOT_FOUND


def test_async_client_answers_the_servers_requests_with_an_async_handler(impl: ModuleType, tmp_path: Path) -> None:
    script = tmp_path / "asks.py"
    script.write_text(SERVER_ASKS)

    async def handler(method: str, params: Any) -> Any:
        await asyncio.sleep(0)
        return [method]

    async def main() -> Any:
        async with await impl.AsyncClient.spawn([sys.executable, str(script)], handler=handler, timeout=30) as client:
            return await client.call("go")

    assert asyncio.run(main())["result"] == ["workspace/configuration"]


def test_the_trace_context_is_forwarded_through_a_chain_of_two_servers(impl: ModuleType) -> None:
    os.environ["CHAIN_TO"] = json.dumps(argv(impl, 1))
    with impl.Client.spawn(argv(impl, 1), timeout=60) as client:
        made, forwarded = client.call("relay")  # no trace context: the first server makes one
        assert made is not None and made == forwarded
        traced = client.call("relay", {"_meta": {"traceparent": TRACEPARENT}})
        assert traced == [TRACEPARENT, TRACEPARENT]
        assert client.call("trace") is None  # a call made outside any handler adds none


HANGS_ON_EOF = r"""
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
sys.stdin.read()
time.sleep(60)
"""


def test_closing_a_spawned_server_that_will_not_exit_kills_it_and_leaks_nothing(
    impl: ModuleType, tmp_path: Path
) -> None:
    script = tmp_path / "hangs.py"
    script.write_text(HANGS_ON_EOF)
    fds_before = len(os.listdir("/proc/self/fd"))
    client = impl.Client.spawn([sys.executable, str(script)])
    started = time.monotonic()
    client.close(grace=0.5)
    assert time.monotonic() - started < 10
    assert client.returncode == -9  # ignored SIGTERM, then killed: reaped, no zombie
    with pytest.raises(rpcwire.ConnectionClosed):
        client.call("add", [1, 2])
    time.sleep(0.2)  # the stderr thread ends once its pipe is closed
    assert len(os.listdir("/proc/self/fd")) <= fds_before


def test_a_client_over_any_stream_pair(impl: ModuleType) -> None:
    process = subprocess.Popen(argv(impl), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    client = impl.Client(impl.StdioTransport(process.stdout, process.stdin), timeout=30)
    try:
        assert client.call("add", [20, 22]) == 42
    finally:
        process.stdin.close()
        assert process.wait(30) == 0
        client.close()
        process.stdout.close()


# --- HTTP ---------------------------------------------------------------------------------------

ASGI_SERVER = """
import sys
import {impl} as rpc
from rpcwire.http import ASGIApp

sys.path.insert(0, {tests!r})
import client_server
app = ASGIApp(client_server.handler(rpc))
"""


@pytest.fixture
def http_url(impl: ModuleType, tmp_path: Path) -> Any:
    pytest.importorskip("uvicorn")
    from test_http_servers import server

    (tmp_path / "asgi_client_app.py").write_text(
        ASGI_SERVER.format(impl=impl.__name__, tests=str(Path(__file__).resolve().parent))
    )
    uvicorn = [sys.executable, "-m", "uvicorn", "--fd", "{fd}", "--app-dir", str(tmp_path), "--log-level", "warning"]
    with server([*uvicorn, "asgi_client_app:app"]) as url:
        yield url + "/rpc"


def test_http_client_against_uvicorn(impl: ModuleType, http_url: str) -> None:
    with impl.HttpClient(http_url, timeout=30) as client:
        assert client.call("add", [1, 2]) == 3
        client.notify("add", [1, 2])
        with pytest.raises(rpcwire.MethodNotFound):
            client.call("nope")
        outcomes = client.batch([("add", [1, 2]), ("nope", None)])
        assert outcomes[0] == 3 and isinstance(outcomes[1], rpcwire.MethodNotFound)
        events: list[Any] = []
        assert client.call("progress", {"steps": 2}, on_progress=lambda *e: events.append(e)) == 2
        assert events == [(1, 2, "step 1"), (2, 2, "step 2")]
        with ThreadPoolExecutor(8) as pool:
            assert list(pool.map(lambda i: client.call("add", [i, i]), range(200))) == [2 * i for i in range(200)]
        with pytest.raises(TimeoutError):
            client.call("nap", [1.2], timeout=0.3)
        assert client.call("add", [2, 3]) == 5  # a fresh connection after the timed-out one
        with (
            pytest.raises(rpcwire.HttpError) as refused,
            impl.HttpClient(http_url, headers={"Content-Type": "text/plain"}) as wrong_type,
        ):
            wrong_type.call("add", [1, 2])
        assert refused.value.status == 415


def test_async_http_client_against_uvicorn(impl: ModuleType, http_url: str) -> None:
    async def main() -> None:
        async with impl.AsyncHttpClient(http_url, timeout=30) as client:
            assert await client.call("add", [1, 2]) == 3
            await client.notify("add", [1, 2])
            results = await asyncio.gather(*(client.call("add", [i, i]) for i in range(300)))
            assert results == [2 * i for i in range(300)]
            outcomes = await client.batch([("add", [1, 2]), ("nope", None)])
            assert outcomes[0] == 3 and isinstance(outcomes[1], rpcwire.MethodNotFound)
            events: list[Any] = []
            assert await client.call("progress", {"steps": 3}, on_progress=lambda *e: events.append(e)) == 3
            assert events == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
            with pytest.raises(TimeoutError):
                await client.call("nap", [1.2], timeout=0.3)
            assert await client.call("add", [2, 3]) == 5

    asyncio.run(main())


def test_async_client_over_any_asyncio_stream_pair(impl: ModuleType) -> None:
    """A socket pair: the server end served in a thread, the client end as asyncio streams."""
    server_end, client_end = socket.socketpair()
    transport = impl.StdioTransport(server_end.makefile("rb"), server_end.makefile("wb"))
    serving = threading.Thread(target=impl.serve, args=(impl.methods({"add": lambda a, b: a + b}), transport))
    serving.start()

    async def main() -> list[Any]:
        reader, writer = await asyncio.open_connection(sock=client_end)
        client = impl.AsyncClient(reader, writer, timeout=30)
        try:
            return await asyncio.gather(*(client.call("add", [i, 1]) for i in range(200)))
        finally:
            await client.close()

    try:
        assert asyncio.run(main()) == [i + 1 for i in range(200)]
    finally:
        server_end.shutdown(socket.SHUT_RDWR)
        serving.join(30)
        server_end.close()
    assert not serving.is_alive()


def test_http_clients_post_through_a_callers_own_httpx_client(impl: ModuleType, http_url: str) -> None:
    httpx = pytest.importorskip("httpx")
    events: list[Any] = []
    with httpx.Client() as session:
        client = impl.HttpClient(http_url, session=session, timeout=30)
        assert client.call("add", [1, 2]) == 3
        client.notify("add", [1, 2])
        assert client.call("progress", {"steps": 2}, on_progress=lambda *e: events.append(e)) == 2
        outcomes = client.batch([("add", [1, 2]), ("nope", None)])
        assert outcomes[0] == 3 and isinstance(outcomes[1], rpcwire.MethodNotFound)
        with pytest.raises(TimeoutError):
            client.call("nap", [1.2], timeout=0.3)
    assert events == [(1, 2, "step 1"), (2, 2, "step 2")]

    async def main() -> Any:
        async with httpx.AsyncClient() as session:
            client = impl.AsyncHttpClient(http_url, session=session, timeout=30)
            progress: list[Any] = []
            results = await asyncio.gather(*(client.call("add", [i, i]) for i in range(50)))
            assert await client.call("progress", {"steps": 1}, on_progress=lambda *e: progress.append(e)) == 1
            with pytest.raises(rpcwire.MethodNotFound):
                await client.call("nope")
            return results, progress

    assert asyncio.run(main()) == ([2 * i for i in range(50)], [(1, 1, "step 1")])


HALF_AN_ANSWER = r"""
import sys, time
sys.stdin.buffer.readline()
sys.stdout.buffer.write(b'{"jsonrpc":"2.0","id":1,"res')
sys.stdout.buffer.flush()
time.sleep(60)
"""


def test_half_an_answer_does_not_hold_a_timed_call_past_its_deadline(impl: ModuleType, tmp_path: Path) -> None:
    script = tmp_path / "half.py"
    script.write_text(HALF_AN_ANSWER)
    with impl.Client.spawn([sys.executable, str(script)]) as client:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            client.call("anything", timeout=1.0)
        assert time.monotonic() - started < 10
        client.close(grace=0.2)
