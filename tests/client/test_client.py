"""The clients against real servers: a child process serving on its stdin/stdout (``client_server.py``,
on the same implementation as the client), a hand-written server for the server's own requests and for
garbage, and ``rpcwire.http``'s ASGI app under the real uvicorn for the HTTP clients."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import io
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import rpcwire
import rpcwire.pure
from support.messages import nested_list
from support.nothing_waits import answers_dropped, nothing_waits, nothing_waits_async, on_closing
from support.processes import CLIENT_SERVER, child_env
from support.servers import client_server_url

pytestmark = pytest.mark.timeout(120)

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture(autouse=True)
def child_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spawned servers import this checkout's rpcwire."""
    for name, value in child_env().items():
        monkeypatch.setenv(name, value)


def argv(impl: ModuleType, concurrency: int = 8) -> list[str]:
    return [sys.executable, CLIENT_SERVER, impl.__name__, str(concurrency)]


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


@pytest.mark.usefixtures("reading")
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


@pytest.mark.usefixtures("reading")
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


@pytest.mark.slow
@pytest.mark.parametrize("dialect", ["mcp", "lsp"])
@pytest.mark.usefixtures("reading")
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


@pytest.mark.slow
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
@pytest.mark.usefixtures("reading")
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


@pytest.mark.usefixtures("reading")
def test_on_progress_needs_object_params(impl: ModuleType) -> None:
    with impl.Client.spawn(argv(impl), timeout=30) as client, pytest.raises(TypeError):
        client.call("add", [1, 2], on_progress=print)


@pytest.mark.usefixtures("reading")
def test_notification_callbacks_run_in_arrival_order(impl: ModuleType) -> None:
    seen: list[Any] = []
    with impl.Client.spawn(argv(impl), timeout=30) as client:
        client.on_notification("log", seen.append)
        for text in ("a", "b", "c"):
            assert client.call("announce", [text]) == text
    assert seen == [{"text": "a"}, {"text": "b"}, {"text": "c"}]


@pytest.mark.usefixtures("reading")
def test_notifications_arrive_while_no_call_is_waiting(impl: ModuleType) -> None:
    arrived = threading.Event()
    seen: list[Any] = []
    with impl.Client.spawn(argv(impl), timeout=30) as client:
        client.on_notification("log", lambda params: (seen.append(params), arrived.set()))
        assert client.call("announce_later", ["later", 0.2]) is None
        assert arrived.wait(20)  # nobody calls: the client's own reader took it
    assert seen == [{"text": "later"}]


@pytest.mark.usefixtures("reading")
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


@pytest.mark.usefixtures("reading")
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


@pytest.mark.usefixtures("reading")
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


@pytest.mark.usefixtures("reading")
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


@pytest.mark.slow
@pytest.mark.usefixtures("reading")
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


@pytest.mark.slow
@pytest.mark.usefixtures("reading")
def test_closing_a_spawned_server_that_will_not_exit_kills_it_and_leaks_nothing(
    impl: ModuleType, tmp_path: Path
) -> None:
    script = tmp_path / "hangs.py"
    script.write_text(HANGS_ON_EOF)
    fds = Path("/proc/self/fd")  # (Linux; elsewhere the open descriptors are not counted)
    fds_before = len(os.listdir(fds)) if fds.exists() else 0
    client = impl.Client.spawn([sys.executable, str(script)])
    started = time.monotonic()
    client.close(grace=0.5)
    assert time.monotonic() - started < 10
    if os.name == "posix":
        assert client.returncode == -9  # ignored SIGTERM, then killed: reaped, no zombie
    else:  # Windows: terminate() is TerminateProcess, which cannot be ignored
        assert client.returncode is not None
    with pytest.raises(rpcwire.ConnectionClosed):
        client.call("add", [1, 2])
    time.sleep(0.2)  # the stderr thread ends once its pipe is closed
    if fds.exists():
        assert len(os.listdir(fds)) <= fds_before


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


@pytest.fixture
def http_url(impl: ModuleType, tmp_path: Path) -> Any:
    with client_server_url(impl, tmp_path) as url:
        yield url


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.usefixtures("reading")
def test_half_an_answer_does_not_hold_a_timed_call_past_its_deadline(impl: ModuleType, tmp_path: Path) -> None:
    script = tmp_path / "half.py"
    script.write_text(HALF_AN_ANSWER)
    with impl.Client.spawn([sys.executable, str(script)]) as client:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            client.call("anything", timeout=1.0)
        assert time.monotonic() - started < 10
        client.close(grace=0.2)


# --- limits, and errors with id null ------------------------------------------------------------


def same(value: Any, expected: Any) -> bool:
    """``value == expected``, for values too deep for pytest to show when they differ."""
    if value != expected:
        pytest.fail(f"{str(value)[:200]} != {str(expected)[:200]}")
    return True


def refused_by_nobody(caplog: pytest.LogCaptureFixture) -> bool:
    return not any("id null" in record.getMessage() for record in caplog.records)


@pytest.mark.usefixtures("reading")
def test_a_message_over_the_clients_limits_fails_at_once_and_is_not_sent(
    impl: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    """rpcwire's server answers such messages with id null: the client refuses them before they are sent."""
    with caplog.at_level(logging.WARNING, "rpcwire.client"), impl.Client.spawn(argv(impl), timeout=30) as client:
        started = time.monotonic()
        with pytest.raises(ValueError, match="max_depth"):
            client.call("echo", {"deep": nested_list(200)})
        with pytest.raises(ValueError, match="max_batch"):
            client.batch([("add", [i, i]) for i in range(1_001)])
        with pytest.raises(ValueError, match="max_depth"):
            client.notify("echo", {"deep": nested_list(200)})
        assert time.monotonic() - started < 10
        assert same(client.call("echo", {"deep": nested_list(120)}), {"deep": nested_list(120)})  # within the limit
        assert len(client.batch([("add", [i, i]) for i in range(1_000)])) == 1_000
        nothing_waits(client, caplog)
    assert refused_by_nobody(caplog)  # the server never saw them (it would have answered with id null)
    with impl.Client.spawn(argv(impl), timeout=30, max_message_bytes=1_000) as small:
        with pytest.raises(ValueError, match="max_message_bytes"):
            small.call("echo", {"text": "x" * 1_000})
        assert small.call("add", [1, 2]) == 3


def test_async_client_checks_its_limits_before_sending(impl: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        async with await impl.AsyncClient.spawn(argv(impl), timeout=30) as client:
            with pytest.raises(ValueError, match="max_depth"):
                await client.call("echo", {"deep": nested_list(200)})
            with pytest.raises(ValueError, match="max_batch"):
                await client.batch([("add", [i, i]) for i in range(1_001)])
            assert await client.call("add", [1, 2]) == 3
            await nothing_waits_async(client, caplog)

    with caplog.at_level(logging.WARNING, "rpcwire.client"):
        asyncio.run(asyncio.wait_for(main(), 60))
    assert refused_by_nobody(caplog)


def finishes(seconds: float, function: Any, *args: Any) -> Any:
    """``function(*args)``'s result (or the exception it raised, returned) on a thread; the test fails if it
    has not finished within ``seconds`` (so that a hang fails it instead of holding the suite)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(function(*args))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{function} did not finish within {seconds} s"
    return outcome[0]


@pytest.mark.slow
@pytest.mark.usefixtures("reading")
def test_an_error_with_id_null_fails_the_call_or_batch_it_answers(
    impl: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    """A client with limits above its server's: rpcwire's server refuses with id null, and the client knows
    which call that answers (one written after the last answer and unanswered)."""
    with (
        caplog.at_level(logging.WARNING, "rpcwire.client"),
        impl.Client.spawn(argv(impl), timeout=30, max_depth=300, max_batch=None) as client,
    ):
        refused = finishes(20, client.call, "echo", {"deep": nested_list(200)})
        assert isinstance(refused, rpcwire.JsonRpcError) and refused.code == rpcwire.ERR_PARSE, refused
        outcomes = finishes(20, client.batch, [("add", [i, i]) for i in range(1_001)])
        assert len(outcomes) == 1_001
        assert all(isinstance(o, rpcwire.JsonRpcError) and o.code == rpcwire.ERR_INVALID_REQUEST for o in outcomes)
        assert client.call("add", [1, 2]) == 3
        # Pipelined: two calls in flight when the error comes; it is held until they are answered.
        with ThreadPoolExecutor(3) as pool:
            naps = [pool.submit(client.call, "nap", [0.5]) for _ in range(2)]
            time.sleep(0.1)
            deep = pool.submit(client.call, "echo", {"deep": nested_list(200)})
            assert [nap.result(20) for nap in naps] == ["napped", "napped"]
            with pytest.raises(rpcwire.JsonRpcError) as held:
                deep.result(20)
        assert held.value.code == rpcwire.ERR_PARSE
        client.notify("echo", {"deep": nested_list(200)})  # refused too: an error that answers no call
        assert client.call("add", [2, 2]) == 4
        nothing_waits(client, caplog)
    assert "refused a notification" in caplog.text


def test_the_ledger_gives_an_error_with_id_null_to_the_message_it_can_only_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from rpcwire._id_null_ledger import _Ledger

    def error(code: int) -> rpcwire.Response:
        return rpcwire.Response(None, None, {"code": code, "message": "m"})

    ledger = _Ledger()
    ledger.written([1], False)
    ledger.written([2], True)
    bigger = ledger.written([3, 4], True)
    assert ledger.refused(error(-32700)) == []  # two suspects: held
    assert ledger.answered(1) == []  # not a suspect anyway
    assert ledger.answered(2) == [(bigger, error(-32700))]  # the batch is left: every entry gets it
    assert ledger.answered(3) == []  # answered already (refused)
    with caplog.at_level(logging.WARNING, "rpcwire.client"):
        ledger.written([], True)  # a notification that a server could refuse
        ledger.written([5], False)
        assert ledger.refused(error(-32600)) == []  # the notification's: logged, the call goes on
        assert "refused a notification" in caplog.text
        assert ledger.answered(5) == []
        assert ledger.refused(error(-32600)) == []  # nothing written since the last answer
        assert "answers no message" in caplog.text
    first, second = ledger.written([6], True), ledger.written([7], True)
    assert ledger.refused(error(1)) == []
    assert ledger.refused(error(2)) == [(first, error(1)), (second, error(2))]  # as many as left: in order
    lone = ledger.written([8], False)
    assert ledger.refused(error(3)) == [(lone, error(3))]  # no suspect: the only candidate


@pytest.mark.slow
def test_async_error_with_id_null_fails_the_call_or_batch_it_answers(impl: ModuleType) -> None:
    async def main() -> None:
        async with await impl.AsyncClient.spawn(argv(impl), timeout=30, max_depth=300, max_batch=None) as client:
            with pytest.raises(rpcwire.JsonRpcError) as refused:
                await client.call("echo", {"deep": nested_list(200)})
            assert refused.value.code == rpcwire.ERR_PARSE
            outcomes = await client.batch([("add", [i, i]) for i in range(1_001)])
            assert all(isinstance(o, rpcwire.JsonRpcError) and o.code == rpcwire.ERR_INVALID_REQUEST for o in outcomes)
            outcomes = await asyncio.gather(
                client.call("nap", [0.5]),
                client.call("nap", [0.5]),
                client.call("echo", {"deep": nested_list(200)}),
                return_exceptions=True,
            )
            assert outcomes[:2] == ["napped", "napped"]
            assert isinstance(outcomes[2], rpcwire.JsonRpcError) and outcomes[2].code == rpcwire.ERR_PARSE
            assert await client.call("add", [1, 2]) == 3

    asyncio.run(asyncio.wait_for(main(), 60))


# --- deep results ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("reading")
def test_a_deep_result_is_read_up_to_the_clients_max_depth(impl: ModuleType) -> None:
    with impl.Client.spawn(argv(impl), timeout=30, max_depth=300) as client:
        assert same(finishes(20, client.call, "deep", [200]), nested_list(200))
    with impl.Client.spawn(argv(impl), timeout=30) as client:  # the default, 128: the answer cannot be read
        unreadable = finishes(20, client.call, "deep", [200])
        assert isinstance(unreadable, rpcwire.JsonRpcError), unreadable
        assert (unreadable.code, unreadable.message) == (rpcwire.ERR_INTERNAL, "Invalid response")
        assert "nesting" in unreadable.data and "max_depth=128" in unreadable.data
        assert same(client.call("deep", [100]), nested_list(100))


def test_async_deep_result_is_read_up_to_the_clients_max_depth(impl: ModuleType) -> None:
    async def main() -> None:
        async with await impl.AsyncClient.spawn(argv(impl), timeout=30, max_depth=300) as client:
            assert same(await client.call("deep", [200]), nested_list(200))
        async with await impl.AsyncClient.spawn(argv(impl), timeout=30) as client:
            with pytest.raises(rpcwire.JsonRpcError) as unreadable:
                await client.call("deep", [200])
            assert unreadable.value.code == rpcwire.ERR_INTERNAL and "max_depth=128" in unreadable.value.data
            assert await client.call("add", [1, 2]) == 3

    asyncio.run(asyncio.wait_for(main(), 60))


def test_the_calls_an_unreadable_answer_names_are_found_in_its_bytes() -> None:
    from rpcwire._peer import _named_calls

    deep = b"[" * 200 + b"]" * 200
    assert _named_calls(b'{"jsonrpc":"2.0","id":7,"result":' + deep + b"}") == [7]
    assert _named_calls(b'{"result":' + deep + b',"id":8,"jsonrpc":"2.0"}') == [8]
    assert _named_calls(b'[{"id":1,"result":' + deep + b'},{"id":2,"error":{"code":1}},{"id":3,"method":"m"}]') == [
        1,
        2,
    ]
    assert _named_calls(b'{"id":"7","result":1,"x":\xff}') == []  # not an integer id
    assert _named_calls(b'{"method":"m","id":7,"result":' + deep + b"}") == []  # a request of the server's
    assert _named_calls(b'{"x":"\\"id\\":5,","id":9,"result":[}') == [9]  # brackets and quotes in strings
    assert _named_calls(b"this is not json") == []
    assert _named_calls(b'{"id":4,"result":"unterminated') == []


# --- timeouts are deadlines ---------------------------------------------------------------------

# Reads nothing; once the file named by its argument exists, answers ids 1 to 3 (each "again") and sends a
# "closing" notification: a client that still holds one of those calls waiting takes its answer silently.
DEAF_SERVER = r"""
import os, sys, time
print("deaf", file=sys.stderr, flush=True)
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.02)
if os.path.exists(sys.argv[1]):
    for id_ in (1, 2, 3):
        sys.stdout.buffer.write(b'{"jsonrpc":"2.0","id":%d,"result":"again"}\n' % id_)
    sys.stdout.buffer.write(b'{"jsonrpc":"2.0","method":"closing"}\n')
    sys.stdout.buffer.flush()
time.sleep(60)
"""

BIG = "x" * (4 << 20)  # far more than a pipe holds


@pytest.mark.slow
@pytest.mark.usefixtures("reading")
def test_a_timeout_bounds_the_write_to_a_server_that_does_not_read(
    impl: ModuleType, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script, trigger = tmp_path / "deaf.py", tmp_path / "answer"
    script.write_text(DEAF_SERVER)
    client = impl.Client.spawn([sys.executable, str(script), str(trigger)])
    closing = on_closing(client)
    try:
        started = time.monotonic()
        outcome = finishes(30, lambda: client.call("echo", {"text": BIG}, timeout=1.0))
        assert isinstance(outcome, TimeoutError), outcome
        outcome = finishes(30, lambda: client.call("add", [1, 2], timeout=0.5))  # the pipe is still full
        assert isinstance(outcome, TimeoutError) and "not sent" in str(outcome), outcome
        outcome = finishes(30, lambda: client.batch([("add", [1, 2])], timeout=0.5))
        assert isinstance(outcome, TimeoutError), outcome
        assert time.monotonic() - started < 20
        start = len(caplog.records)
        with caplog.at_level(logging.WARNING, "rpcwire.client"):
            trigger.touch()  # the server answers the three calls late: nothing in flight, the client drops them
            answers_dropped([1, 2, 3], caplog, start, closing)
    finally:
        started = time.monotonic()
        finishes(30, client.close, 0.5)
    assert time.monotonic() - started < 10


@pytest.mark.slow
def test_a_timeout_bounds_the_write_over_any_stream(impl: ModuleType) -> None:
    """A transport over a socket whose other end reads nothing: the write is bounded too."""
    server_end, client_end = socket.socketpair()
    streams = client_end.makefile("rb"), client_end.makefile("wb")
    client = impl.Client(impl.StdioTransport(*streams))
    try:
        outcome = finishes(30, lambda: client.call("echo", {"text": BIG}, timeout=1.0))
        assert isinstance(outcome, TimeoutError), outcome
        outcome = finishes(30, lambda: client.call("add", [1, 2], timeout=0.5))
        assert isinstance(outcome, TimeoutError), outcome
    finally:
        server_end.close()  # the write blocked in the background now fails
        client_end.shutdown(socket.SHUT_RDWR)
        finishes(30, client.close, 0.5)
        client._output.join(10)
        for stream in streams:
            with contextlib.suppress(OSError):
                stream.close()
        client_end.close()


@pytest.mark.slow
def test_async_timeout_bounds_the_write_and_the_cancellation(
    impl: ModuleType, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script, trigger = tmp_path / "deaf.py", tmp_path / "answer"
    script.write_text(DEAF_SERVER)

    async def main() -> None:
        client = await impl.AsyncClient.spawn([sys.executable, str(script), str(trigger)])
        closing = on_closing(client)
        try:
            with pytest.raises(TimeoutError):  # written, then its cancellation: neither waits on the pipe
                await client.call("echo", {"text": BIG}, timeout=1.0)
            with pytest.raises(TimeoutError, match="not sent"):
                await client.call("add", [1, 2], timeout=0.5)
            task = asyncio.create_task(client.call("add", [3, 4]))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            start = len(caplog.records)
            with caplog.at_level(logging.WARNING, "rpcwire.client"):
                trigger.touch()  # the server answers the three calls: none waits for its answer any more
                await asyncio.to_thread(answers_dropped, [1, 2, 3], caplog, start, closing)
        finally:
            await client.close(grace=0.5)

    asyncio.run(asyncio.wait_for(main(), 60))


# --- the server gone, its pipes held by a child of its -------------------------------------------


def kill_pid_in(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError, ProcessLookupError, ValueError):
        os.kill(int(path.read_text()), 9)


@pytest.mark.usefixtures("reading")
def test_a_server_that_exits_while_its_child_holds_its_pipes_fails_the_calls(impl: ModuleType, tmp_path: Path) -> None:
    pid_file = tmp_path / "sleeper.pid"
    client = impl.Client.spawn(argv(impl), timeout=60)
    try:
        assert client.call("spawn_sleeper", [str(pid_file)]) > 0
        waiting = ThreadPoolExecutor(1).submit(client.call, "sleep", [50])
        time.sleep(0.3)
        started = time.monotonic()
        outcome = finishes(20, client.call, "crash", [5])
        assert isinstance(outcome, rpcwire.ConnectionClosed), outcome
        assert outcome.returncode == 5
        assert isinstance(waiting.exception(20), rpcwire.ConnectionClosed)
        assert time.monotonic() - started < 15
        started = time.monotonic()
        finishes(30, client.close, 0.5)
        assert time.monotonic() - started < 5  # its grace, and a small bound
    finally:
        kill_pid_in(pid_file)


@pytest.mark.usefixtures("reading")
def test_an_idle_client_notices_its_server_exit_while_a_child_holds_its_pipes(impl: ModuleType, tmp_path: Path) -> None:
    pid_file = tmp_path / "sleeper.pid"
    client = impl.Client.spawn(argv(impl), timeout=60)
    try:
        client.call("spawn_sleeper", [str(pid_file)])
        client.notify("crash", [6])
        deadline = time.monotonic() + 20
        while client._closed is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert isinstance(client._closed, rpcwire.ConnectionClosed) and client._closed.returncode == 6
        with pytest.raises(rpcwire.ConnectionClosed):
            client.call("add", [1, 2])
        finishes(30, client.close, 0.5)
    finally:
        kill_pid_in(pid_file)


@pytest.mark.slow
def test_async_server_that_exits_while_its_child_holds_its_pipes(impl: ModuleType, tmp_path: Path) -> None:
    pid_file = tmp_path / "sleeper.pid"

    async def main() -> None:
        client = await impl.AsyncClient.spawn(argv(impl), timeout=60)
        try:
            await client.call("spawn_sleeper", [str(pid_file)])
            waiting = asyncio.ensure_future(client.call("sleep", [50]))
            await asyncio.sleep(0.3)
            with pytest.raises(rpcwire.ConnectionClosed) as closed:
                await asyncio.wait_for(client.call("crash", [7]), 20)
            assert closed.value.returncode == 7
            with pytest.raises(rpcwire.ConnectionClosed):
                await asyncio.wait_for(waiting, 20)
        finally:
            started = time.monotonic()
            await asyncio.wait_for(client.close(grace=0.5), 30)
            assert time.monotonic() - started < 5

    try:
        asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        kill_pid_in(pid_file)


# --- callbacks, and the server's own requests -----------------------------------------------------


@pytest.mark.usefixtures("reading")
def test_a_callback_may_call_the_client(impl: ModuleType) -> None:
    """MCP's "on list_changed, call tools/list": the callback runs on the client's dispatcher, not on a caller's
    thread or the reader's."""
    answered = threading.Event()
    seen: list[Any] = []
    with impl.Client.spawn(argv(impl), timeout=30) as client:

        def on_log(params: Any) -> None:
            seen.append((params, threading.current_thread().name, client.call("add", [20, 22])))
            answered.set()

        client.on_notification("log", on_log)
        assert finishes(20, client.call, "announce", ["changed"]) == "changed"
        assert answered.wait(20)
    assert seen == [({"text": "changed"}, "rpcwire-client-callbacks", 42)]


def test_async_callback_may_call_the_client(impl: ModuleType) -> None:
    seen: list[Any] = []

    async def main() -> None:
        async with await impl.AsyncClient.spawn(argv(impl), timeout=30) as client:
            answered = asyncio.Event()

            async def on_log(params: Any) -> None:  # awaited by the dispatcher
                seen.append((params, await client.call("add", [20, 22])))
                answered.set()

            client.on_notification("log", on_log)
            client.on_notification("log", lambda params: seen.append(("sync", params)))
            assert await client.call("announce", ["changed"]) == "changed"
            await asyncio.wait_for(answered.wait(), 20)

    asyncio.run(asyncio.wait_for(main(), 60))
    assert seen == [({"text": "changed"}, 42), ("sync", {"text": "changed"})]


SERVER_FLOODS = r"""
import json, sys
out = sys.stdout.buffer
request = json.loads(sys.stdin.buffer.readline())  # the client's "go"
out.write(b"".join(
    json.dumps({"jsonrpc": "2.0", "id": f"s{i}", "method": "work", "params": [i]}).encode() + b"\n" for i in range(100)
))
out.flush()
answers = [json.loads(sys.stdin.buffer.readline()) for _ in range(28)]  # only the refused answer before the release
out.write(b'{"jsonrpc":"2.0","method":"release"}\n')
out.flush()
answers += [json.loads(sys.stdin.buffer.readline()) for _ in range(72)]
summary = {
    "refused_first": sum("error" in a for a in answers[:28]),
    "answered_after": sum("result" in a for a in answers[28:]),
}
out.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": summary}).encode() + b"\n")
out.flush()
"""

FLOOD_SUMMARY = {"refused_first": 28, "answered_after": 72}


@pytest.mark.usefixtures("reading")
def test_the_servers_requests_run_on_a_bounded_pool(impl: ModuleType, tmp_path: Path) -> None:
    script = tmp_path / "floods.py"
    script.write_text(SERVER_FLOODS)
    release = threading.Event()
    lock = threading.Lock()
    running = [0, 0]  # now, most

    def handler(method: str, params: Any) -> Any:
        with lock:
            running[0] += 1
            running[1] = max(running)
        release.wait(30)
        with lock:
            running[0] -= 1
        return params

    with impl.Client.spawn([sys.executable, str(script)], handler=handler, timeout=60) as client:
        client.on_notification("release", lambda params: release.set())
        assert finishes(60, client.call, "go") == FLOOD_SUMMARY
    assert running[1] == 8


def test_async_client_runs_the_servers_requests_on_a_bounded_pool(impl: ModuleType, tmp_path: Path) -> None:
    script = tmp_path / "floods.py"
    script.write_text(SERVER_FLOODS)
    running = [0, 0]

    async def main() -> Any:
        release = asyncio.Event()

        async def handler(method: str, params: Any) -> Any:
            running[0] += 1
            running[1] = max(running)
            await release.wait()
            running[0] -= 1
            return params

        async with await impl.AsyncClient.spawn([sys.executable, str(script)], handler=handler, timeout=60) as client:
            client.on_notification("release", lambda params: release.set())
            return await client.call("go")

    assert asyncio.run(asyncio.wait_for(main(), 90)) == FLOOD_SUMMARY
    assert running[1] == 8


# --- an idle client sleeps ------------------------------------------------------------------------


def context_switches(threads: list[threading.Thread]) -> int:
    total = 0
    for thread in threads:
        with contextlib.suppress(FileNotFoundError):
            for line in Path(f"/proc/self/task/{thread.native_id}/status").read_text().splitlines():
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    total += int(line.split()[1])
    return total


def settle(threads: list[threading.Thread], within: float) -> None:
    """Until ``threads`` switched fewer than 3 times in 0.2 s (or ``within`` seconds passed): what they had to
    do is done. A thread that starts to wait on a lock may switch ~40 times on its way to sleep where other
    threads run (free-threaded CPython's mutex spins with ``sched_yield`` first), once; a timer never settles."""
    deadline = time.monotonic() + within
    before = context_switches(threads)
    while time.monotonic() < deadline:
        time.sleep(0.2)
        if (now := context_switches(threads)) - before < 3:
            return
        before = now


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="counts a thread's wake-ups in /proc (Linux)")
@pytest.mark.usefixtures("reading")
def test_an_idle_client_does_not_wake(impl: ModuleType) -> None:
    """Nothing on the wire, with no call and with one call waiting long: the client's threads sleep."""
    with impl.Client.spawn(argv(impl), timeout=30) as client:
        assert client.call("add", [1, 2]) == 3
        client.on_notification("log", lambda params: None)
        assert client.call("announce", ["x"]) == "x"  # the dispatcher thread exists too
        threads = [t for t in threading.enumerate() if t.name.startswith("rpcwire-client")]
        settle(threads, 5.0)  # the idle reader takes over after 5 ms, then blocks
        before = context_switches(threads)
        time.sleep(1.0)
        assert (woken := context_switches(threads) - before) < 10, woken  # polling every 5 ms would be ~200
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(client.call, "nap", [3.0])  # its caller reads, blocked on the pipe
            time.sleep(0.1)
            settle(threads, 1.5)
            before = context_switches(threads)
            time.sleep(1.0)
            woken = context_switches(threads) - before
            assert waiting.result(20) == "napped"
        assert woken < 10, woken
        assert client.call("add", [2, 2]) == 4


# --- AsyncClient: its limits and its frames, as the core's ----------------------------------------


@pytest.mark.parametrize(
    "keywords",
    [
        {"max_message_bytes": 0},
        {"max_message_bytes": -1},
        {"max_message_bytes": 2**63},
        {"max_depth": 0},
        {"max_depth": 513},
        {"max_batch": 0},
        {"framing": "lines"},
    ],
)
def test_async_client_checks_its_limits_as_stdio_transport_does(impl: ModuleType, keywords: dict[str, Any]) -> None:
    with pytest.raises((ValueError, OverflowError)) as expected:
        impl.StdioTransport(io.BytesIO(), io.BytesIO(), **keywords)

    async def main() -> None:
        reader = asyncio.StreamReader()
        with pytest.raises(type(expected.value)) as made:
            impl.AsyncClient(reader, None, **keywords)  # type: ignore[arg-type]
        assert str(made.value) == str(expected.value)
        with pytest.raises(type(expected.value)):
            await impl.AsyncClient.spawn([sys.executable, "-c", "raise SystemExit(3)"], **keywords)

    asyncio.run(main())


FRAMES_SERVER = r"""
import json, sys
data = sys.stdin.buffer
out = sys.stdout.buffer
def frame(message):
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body
while True:
    header = data.readline()
    if not header:
        break
    length = int(header.split(b":")[1])
    data.readline()
    request = json.loads(data.read(length))
    out.write(b"X-Long: " + b"a" * 100_000 + b"\r\n\r\n")  # a header block over 8 KiB: -32700 and resync
    out.write(b"garbage that is no header\n")
    out.write(b"content-LENGTH:  %d\n\n" % len(b"[]") + b"[]")  # read (an empty batch: logged)
    out.write(frame({"jsonrpc": "2.0", "id": request["id"], "result": request["params"]}))
    out.flush()
"""


def test_async_client_reads_frames_with_the_cores_tolerant_reader(impl: ModuleType, tmp_path: Path) -> None:
    script = tmp_path / "frames.py"
    script.write_text(FRAMES_SERVER)

    async def main() -> list[Any]:
        async with await impl.AsyncClient.spawn(
            [sys.executable, str(script)], framing="content-length", timeout=30
        ) as client:
            return [await client.call("echo", [i]) for i in range(3)]

    assert asyncio.run(asyncio.wait_for(main(), 60)) == [[0], [1], [2]]
    with impl.Client.spawn([sys.executable, str(script)], framing="content-length", timeout=30) as client:
        assert [client.call("echo", [i]) for i in range(3)] == [[0], [1], [2]]


# --- an interrupt while waiting -------------------------------------------------------------------


class Progress:
    """An ``on_progress`` callback a test can watch being released (a weak reference to it)."""

    def __call__(self, *event: Any) -> None:
        return None


class Interrupted(BaseException):
    """What the test's signal handler raises (a KeyboardInterrupt that pytest would take for its own)."""


@pytest.fixture
def interrupt_in() -> Any:
    """``interrupt_in(seconds)``: raise ``Interrupted`` in the main thread after ``seconds``, from a signal."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    if not hasattr(signal, "SIGUSR1") or not hasattr(signal, "pthread_kill"):
        pytest.skip("sends SIGUSR1 to a thread (POSIX)")

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGUSR1, handler)
    timers: list[threading.Timer] = []

    def arm(seconds: float) -> None:
        timer = threading.Timer(seconds, signal.pthread_kill, (threading.main_thread().ident, signal.SIGUSR1))
        timers.append(timer)
        timer.start()

    yield arm
    for timer in timers:
        timer.cancel()
    signal.signal(signal.SIGUSR1, previous)


@pytest.mark.slow
@pytest.mark.usefixtures("reading")
def test_an_interrupt_while_waiting_leaves_nothing_pending(
    impl: ModuleType, interrupt_in: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "rpcwire.client"), impl.Client.spawn(argv(impl), timeout=30) as client:
        interrupt_in(0.5)
        with pytest.raises(Interrupted):
            client.batch([("nap", [1.5]), ("nap", [1.5]), ("add", [1, 2])])
        interrupt_in(0.5)
        on_progress = Progress()
        released = weakref.ref(on_progress)
        with pytest.raises(Interrupted):
            client.call("nap", {"seconds": 1.5}, on_progress=on_progress)
        del on_progress
        gc.collect()
        assert released() is None  # the interrupted call keeps nothing of its caller's
        assert client.call("nap", [2.0]) == "napped"  # the interrupted ones' late answers came meanwhile
        assert client.call("add", [1, 2]) == 3
        nothing_waits(client, caplog)
