"""LSP: ``StdioTransport(framing="content-length")`` in both implementations (each rule of docs/semantics.md,
"Content-Length framing"), the clients over it, and ``rpcwire.lsp`` against the real libraries: python-lsp-jsonrpc's
own ``Endpoint`` over its reader and writer's drop-ins, and a pygls ``LanguageServer`` over ``rpcwire.lsp.start_io``.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import math
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import rpcwire
import rpcwire.lsp
from pylsp_jsonrpc import streams
from pylsp_jsonrpc.endpoint import Endpoint
from pylsp_jsonrpc.exceptions import JsonRpcMethodNotFound
from support import serving
from support.messages import INVALID_REQUEST, PARSE_ERROR, compact
from support.processes import child_env, rpcwire_command


def frame(body: bytes, header: bytes = b"Content-Length: %d\r\n\r\n") -> bytes:
    """``body`` after ``header``, in which ``%d`` (if any) is the body's length."""
    return (header % len(body) if b"%d" in header else header) + body


def call(method: str, params: Any, id: Any) -> bytes:
    return compact({"jsonrpc": "2.0", "method": method, "params": params, "id": id})


def echo(method: str, params: Any) -> Any:
    return params


def frames(out: bytes) -> list[Any]:
    """Decode written frames, checking each is exactly ``Content-Length: N\\r\\n\\r\\n`` + N bytes of compact JSON."""
    decoded = []
    while out:
        head, separator, rest = out.partition(b"\r\n\r\n")
        assert separator and head.startswith(b"Content-Length: "), out
        length = int(head[len(b"Content-Length: ") :])
        body, out = rest[:length], rest[length:]
        value = json.loads(body)
        assert compact(value) == body, body
        decoded.append(value)
    return decoded


def served(impl: ModuleType, data: bytes, max_concurrency: int = 1, **options: Any) -> list[Any]:
    out = serving.served(impl, data, echo, max_concurrency=max_concurrency, framing="content-length", **options)
    return frames(out)


def result(id: Any, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "result": value}


# --- the framing, in both implementations ------------------------------------------------------------


def test_writes_content_length_in_bytes_and_compact_utf8_json(impl: ModuleType) -> None:
    out = io.BytesIO()
    transport = impl.StdioTransport(io.BytesIO(frame(call("echo", ["é😀"], 1))), out, framing="content-length")
    impl.serve(echo, transport)
    body = '{"jsonrpc":"2.0","id":1,"result":["é😀"]}'.encode()
    assert out.getvalue() == b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
    assert transport.framing == "content-length"
    transport.write_notification("window/logMessage", {"message": "x"})
    assert out.getvalue().endswith(
        b'Content-Length: 71\r\n\r\n{"jsonrpc":"2.0","method":"window/logMessage","params":{"message":"x"}}'
    )


def test_headers_in_any_order_and_case_with_either_line_end(impl: ModuleType) -> None:
    data = (
        frame(call("echo", [1], 1))
        + frame(
            call("echo", [2], 2),
            b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length: %d\r\n\r\n",
        )
        + frame(call("echo", [3], 3), b"CONTENT-LENGTH:%d\nX-Anything: else\n\n")
        + b"\r\n\r\n"  # blank lines between frames are skipped
        + frame(call("echo", [4], 4), b"Content-Length:   %d   \r\n\r\n")
    )
    assert served(impl, data) == [result(1, [1]), result(2, [2]), result(3, [3]), result(4, [4])]


def test_a_bad_header_is_answered_with_a_parse_error_and_the_reader_resyncs(impl: ModuleType) -> None:
    data = (
        call("echo", ["newline-delimited"], 0)  # a line with no header form: name `{"jsonrpc"` is no token
        + b"\n"
        + frame(call("echo", [1], 1))
        + frame(call("echo", [2], 2), b"Content-Length: 12x\r\n\r\n")  # not a number: dropped up to the next frame
        + frame(call("echo", [3], 3), b"Content-Length: 1\r\nContent-Length: %d\r\n\r\n")  # two lengths
        + frame(call("echo", [4], 4))
    )
    assert served(impl, data) == [PARSE_ERROR, result(1, [1]), PARSE_ERROR, PARSE_ERROR, result(4, [4])]


def test_a_missing_content_length_is_answered_and_its_frame_skipped(impl: ModuleType) -> None:
    data = frame(call("echo", [1], 1), b"Content-Type: application/json\r\n\r\n") + frame(call("echo", [2], 2))
    assert served(impl, data) == [PARSE_ERROR, result(2, [2])]


def test_an_oversized_content_length_is_answered_and_its_body_skipped(impl: ModuleType) -> None:
    big = call("echo", ["x" * 500], 1)
    data = frame(big) + frame(call("echo", [2], 2))
    assert served(impl, data, max_message_bytes=100) == [INVALID_REQUEST, result(2, [2])]
    assert served(impl, data, max_message_bytes=len(big))[0] == result(1, ["x" * 500])


def test_headers_are_bounded(impl: ModuleType) -> None:
    data = b"X-Long: " + b"a" * 20_000 + b"\r\n\r\n" + frame(call("echo", [1], 1))
    assert served(impl, data) == [PARSE_ERROR, result(1, [1])]


def test_an_empty_body_and_a_frame_cut_short_are_parse_errors(impl: ModuleType) -> None:
    data = b"Content-Length: 0\r\n\r\n" + frame(call("echo", [1], 1)) + b"Content-Length: 50\r\n\r\n{"
    assert served(impl, data) == [PARSE_ERROR, result(1, [1]), PARSE_ERROR]
    assert served(impl, b"Content-Length: 5\r\n") == [PARSE_ERROR]
    assert served(impl, b"\r\n  \r\n") == []


def test_never_reads_to_the_end_of_input(impl: ModuleType) -> None:
    """Over a pipe that stays open: a bad header and an oversized frame are answered at once (before the
    over-long body is even sent), then the body is dropped as it arrives and the next frame is answered."""
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    with (
        open(read_in, "rb") as stdin,
        open(write_out, "wb") as stdout,
        open(write_in, "wb", buffering=0) as feed,
        open(read_out, "rb") as answers,
    ):
        transport = impl.StdioTransport(stdin, stdout, framing="content-length", max_message_bytes=1000)
        server = threading.Thread(target=impl.serve, args=(echo, transport), daemon=True)
        server.start()

        def next_answer() -> Any:
            head = answers.readline() + answers.readline()
            return json.loads(answers.read(int(head.split(b":")[1])))

        feed.write(b"junk without a colon\n")
        assert next_answer() == PARSE_ERROR
        feed.write(b"Content-Length: 100000\r\n\r\n")
        assert next_answer() == INVALID_REQUEST
        for _ in range(10):
            feed.write(b"y" * 10_000)
        feed.write(frame(call("echo", [1], 1)))
        assert next_answer() == result(1, [1])
        feed.close()
        server.join(timeout=30)
        assert not server.is_alive()


def test_read_line_and_read_incoming_give_bodies_and_say_why_a_frame_was_dropped(impl: ModuleType) -> None:
    data = frame(b"{}") + b"junk\n" + frame(b"[1]", b"content-length:%d\n\n") + frame(b"x" * 50)
    transport = impl.StdioTransport(io.BytesIO(data), io.BytesIO(), framing="content-length", max_message_bytes=10)
    assert transport.read_line() == b"{}"
    with pytest.raises(ValueError, match="not 'Name: value'"):
        transport.read_line()
    assert transport.read_line() == b"[1]"
    with pytest.raises(ValueError, match=r"a Content-Length \(50\) over max_message_bytes \(10\)"):
        transport.read_line()
    assert transport.read_line() is None
    incoming = impl.StdioTransport(io.BytesIO(b"Content-Length: 5\r\n\r\n{"), io.BytesIO(), framing="content-length")
    assert incoming._read_incoming() == "a frame cut short by the end of input"
    with pytest.raises(ValueError, match="framing must be 'newline' or 'content-length'"):
        impl.StdioTransport(io.BytesIO(), io.BytesIO(), framing="lsp")


def test_the_concurrent_engine_writes_each_answer_as_its_own_frame(impl: ModuleType) -> None:
    data = b"".join(frame(call("echo", [i], i)) for i in range(50)) + frame(b"[" + call("echo", [1], "b") + b"]")
    answers = served(impl, data, max_concurrency=4)
    assert sorted(answers[:-1] + answers[-1:], key=str) == sorted(
        [result(i, [i]) for i in range(50)] + [[result("b", [1])]], key=str
    )


def test_serve_async_over_content_length(impl: ModuleType) -> None:
    async def handler(method: str, params: Any) -> Any:
        await asyncio.sleep(0)
        return params

    out = io.BytesIO()
    data = b"".join(frame(call("echo", [i], i)) for i in range(5))
    transport = impl.StdioTransport(io.BytesIO(data), out, framing="content-length")
    asyncio.run(impl.serve_async(handler, transport))
    assert sorted(frames(out.getvalue()), key=str) == sorted((result(i, [i]) for i in range(5)), key=str)


# --- the clients, against `python -m rpcwire serve --framing content-length` ----------------------------

HANDLERS = """
from rpcwire import methods

handler = methods({"add": lambda a, b: a + b})
"""


@pytest.fixture
def server_argv(tmp_path: Path) -> list[str]:
    (tmp_path / "handlers.py").write_text(HANDLERS)
    return rpcwire_command("serve", "handlers:handler", "--framing", "content-length", "--app-dir", str(tmp_path))


def test_client_over_content_length(impl: ModuleType, server_argv: list[str]) -> None:
    with impl.Client.spawn(server_argv, env=child_env(), framing="content-length", timeout=30) as client:
        assert client.call("add", [1, 2]) == 3
        assert client.batch([("add", [1, 1]), ("add", [2, 2])]) == [2, 4]


def test_async_client_over_content_length(impl: ModuleType, server_argv: list[str]) -> None:
    async def main() -> list[Any]:
        async with await impl.AsyncClient.spawn(
            server_argv, env=child_env(), framing="content-length", timeout=30
        ) as client:
            return [await client.call("add", [1, 2]), *await client.batch([("add", [3, 4])])]

    assert asyncio.run(main()) == [3, 7]


# --- rpcwire.lsp against python-lsp-jsonrpc's Endpoint -------------------------------------------------


class Pipe:
    """One direction of a connection: an OS pipe's two ends as binary files."""

    def __init__(self) -> None:
        read, write = os.pipe()
        self.read = open(read, "rb")  # noqa: SIM115 (closed by close())
        self.write = open(write, "wb")  # noqa: SIM115

    def close(self) -> None:
        for end in (self.write, self.read):
            if not end.closed:
                end.close()


@pytest.fixture
def pipes() -> Iterator[tuple[Pipe, Pipe]]:
    to_server, to_client = Pipe(), Pipe()
    yield to_server, to_client
    to_server.close()
    to_client.close()


def start(endpoint_reader: Any, endpoint: Endpoint) -> threading.Thread:
    thread = threading.Thread(target=endpoint_reader.listen, args=(endpoint.consume,), daemon=True)
    thread.start()
    return thread


DISPATCHER = {"echo": lambda params: params, "fail": lambda params: 1 / 0}


@pytest.mark.parametrize("ours", ["server", "client"])
def test_python_lsp_jsonrpc_endpoints_talk_through_rpcwire_lsp(pipes: tuple[Pipe, Pipe], ours: str) -> None:
    """Its own ``Endpoint`` on both sides; rpcwire.lsp's reader and writer on one, its own on the other."""
    to_server, to_client = pipes
    server_streams = rpcwire.lsp if ours == "server" else streams
    client_streams = rpcwire.lsp if ours == "client" else streams
    notified: list[Any] = []
    server = Endpoint(DISPATCHER, server_streams.JsonRpcStreamWriter(to_client.write).write)
    client = Endpoint({"window/logMessage": notified.append}, client_streams.JsonRpcStreamWriter(to_server.write).write)
    threads = [
        start(server_streams.JsonRpcStreamReader(to_server.read), server),
        start(client_streams.JsonRpcStreamReader(to_client.read), client),
    ]
    params = {"text": "é 😀 \u2028", "n": [1, 2.5, None, True], "deep": {"a": {"b": []}}}
    assert client.request("echo", params).result(timeout=30) == params
    with pytest.raises(JsonRpcMethodNotFound):
        client.request("missing").result(timeout=30)
    with pytest.raises(Exception, match="division by zero"):
        client.request("fail").result(timeout=30)
    futures = [client.request("echo", [i]) for i in range(100)]
    assert [future.result(timeout=30) for future in futures] == [[i] for i in range(100)]
    server.notify("window/logMessage", {"type": 3, "message": "hello"})
    for _ in range(3000):
        if notified:
            break
        threading.Event().wait(0.01)
    assert notified == [{"type": 3, "message": "hello"}]
    to_server.write.close()
    to_client.write.close()
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()
    server.shutdown()
    client.shutdown()


def test_the_reader_reads_frames_python_lsp_jsonrpc_cannot_and_skips_bad_ones(caplog: pytest.LogCaptureFixture) -> None:
    messages = [{"jsonrpc": "2.0", "method": "m", "params": [i]} for i in range(3)]
    bodies = [json.dumps(message).encode() for message in messages]
    data = (
        frame(bodies[0], b"Content-Type: application/vscode-jsonrpc\r\nContent-Length: %d\r\n\r\n")
        + b"Content-Length: 7\r\n\r\nnotjson"
        + frame(bodies[1], b"content-length: %d\n\n")
        + b"garbage\r\n"
        + frame(bodies[2])
    )
    got: list[Any] = []
    with caplog.at_level(logging.ERROR, logger="rpcwire.lsp"):
        rpcwire.lsp.JsonRpcStreamReader(io.BytesIO(data)).listen(got.append)
    assert got == messages
    assert len(caplog.records) == 2  # the body that is not JSON, the garbage header: logged, then read on
    # python-lsp-jsonrpc's own reader wants "Content-Length: " first: without it, it reads to the end of input.
    theirs: list[Any] = []
    with caplog.at_level(logging.CRITICAL, logger="pylsp_jsonrpc"):
        streams.JsonRpcStreamReader(io.BytesIO(data)).listen(theirs.append)
    assert theirs == []


def test_the_reader_takes_deep_nesting() -> None:
    """Up to the transport's most (512 levels), not its default 128: json.loads, which the original uses, goes
    near 1,000."""
    params = json.loads("[" * 300 + "]" * 300)
    body = compact({"jsonrpc": "2.0", "method": "m", "params": params})
    got: list[Any] = []
    rpcwire.lsp.JsonRpcStreamReader(io.BytesIO(frame(body))).listen(got.append)
    assert got == [{"jsonrpc": "2.0", "method": "m", "params": params}]


def test_close_from_the_consumer_stops_listen() -> None:
    message = frame(b'{"jsonrpc":"2.0","method":"exit"}')
    rfile = io.BytesIO(message * 3)
    reader = rpcwire.lsp.JsonRpcStreamReader(rfile)
    got: list[Any] = []

    def consume(value: Any) -> None:
        got.append(value)
        reader.close()

    reader.listen(consume)
    assert got == [{"jsonrpc": "2.0", "method": "exit"}]


def test_the_writer_behaves_as_python_lsp_jsonrpc_s(caplog: pytest.LogCaptureFixture) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"é": [1, 2]}}
    out = io.BytesIO()
    rpcwire.lsp.JsonRpcStreamWriter(out).write(message)
    assert out.getvalue() == frame(compact(message))
    # json_dumps_args, and what the strict encoder refuses (NaN), go through json.dumps as there
    pretty = io.BytesIO()
    rpcwire.lsp.JsonRpcStreamWriter(pretty, indent=2, sort_keys=True).write(message)
    assert pretty.getvalue() == frame(json.dumps(message, indent=2, sort_keys=True).encode())
    nan = io.BytesIO()
    rpcwire.lsp.JsonRpcStreamWriter(nan).write({"x": math.nan})
    assert nan.getvalue() == frame(b'{"x": NaN}')
    # a failure is logged, not raised; a closed stream is written nothing
    with caplog.at_level(logging.ERROR, logger="rpcwire.lsp"):
        rpcwire.lsp.JsonRpcStreamWriter(io.BytesIO()).write({"x": object()})
    assert "Failed to write message" in caplog.text
    closed = io.BytesIO()
    writer = rpcwire.lsp.JsonRpcStreamWriter(closed)
    writer.close()
    writer.write(message)
    assert closed.closed


# --- rpcwire.lsp with pygls ------------------------------------------------------------------------

PYGLS_SERVER = """
import sys

from lsprotocol import types
from pygls.lsp.server import LanguageServer

import rpcwire.lsp

server = LanguageServer("rpcwire-test", "v1")


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(ls, params):
    return types.Hover(contents=f"hover at {params.position.line}:{params.position.character}")


@server.feature("custom/add")
def add(ls, params):
    return params.a + params.b


if sys.argv[1] == "rpcwire":
    rpcwire.lsp.start_io(server)
else:
    server.start_io()
"""

INITIALIZE = {"processId": None, "rootUri": None, "capabilities": {}}
HOVER = {"textDocument": {"uri": "file:///x.py"}, "position": {"line": 3, "character": 7}}


@pytest.fixture
def pygls_server(tmp_path: Path) -> Path:
    pytest.importorskip("pygls")
    script = tmp_path / "pygls_server.py"
    script.write_text(PYGLS_SERVER)
    return script


@pytest.mark.slow
@pytest.mark.parametrize("io_", ["rpcwire", "pygls"])
def test_a_pygls_language_server_over_rpcwire_lsp(pygls_server: Path, io_: str) -> None:
    """The same server over rpcwire.lsp.start_io and over pygls's own start_io, driven by rpcwire's client."""
    argv = [sys.executable, str(pygls_server), io_]
    with rpcwire.Client.spawn(argv, env=child_env(), framing="content-length", dialect="lsp", timeout=60) as client:
        initialized = client.call("initialize", INITIALIZE)
        assert initialized["serverInfo"] == {"name": "rpcwire-test", "version": "v1"}
        assert initialized["capabilities"]["hoverProvider"] is True
        client.notify("initialized", {})
        hover = client.call("textDocument/hover", HOVER)
        assert hover["contents"] == "hover at 3:7"
        assert client.call("custom/add", {"a": 2, "b": 3}) == 5
        with pytest.raises(rpcwire.MethodNotFound):
            client.call("nope/nothing", {})
        assert client.call("shutdown") is None
        client.notify("exit")


def test_pygls_over_rpcwire_lsp_reads_what_its_own_reader_does_not(pygls_server: Path) -> None:
    """Headers in another case and order, ``\\n`` line ends, a bad frame before: pygls's own reader wants
    exactly ``Content-Length: N\\r\\n``; through rpcwire.lsp.AsyncReader the server answers."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE}).encode()
    data = b"garbage\r\n" + frame(body, b"content-type: application/vscode-jsonrpc\ncontent-length: %d\n\n")
    process = subprocess.run(
        [sys.executable, str(pygls_server), "rpcwire"],
        input=data,
        capture_output=True,
        env=child_env(),
        timeout=60,
        check=False,
    )
    assert process.returncode == 0, process.stderr.decode(errors="replace")
    (answer,) = frames_loose(process.stdout)
    assert answer["id"] == 1
    assert answer["result"]["serverInfo"]["name"] == "rpcwire-test"


def frames_loose(out: bytes) -> list[Any]:
    """Bodies of frames as pygls writes them (its own JSON spacing)."""
    decoded = []
    while out:
        head, _, rest = out.partition(b"\r\n\r\n")
        length = int(head.split(b":")[1])
        decoded.append(json.loads(rest[:length]))
        out = rest[length:]
    return decoded


# --- shutdown then exit under the concurrent engine (issue 17) -------------------------------------------

SHUTDOWN_THEN_EXIT = frame(compact({"jsonrpc": "2.0", "id": 1, "method": "shutdown"})) + frame(
    compact({"jsonrpc": "2.0", "method": "exit"})
)
EXIT_RUNS = 100  # the loss was a race: every run must get the answer


def lsp_exit_handler(method: str, params: Any) -> Any:
    if method == "exit":
        raise SystemExit(0)
    return None


async def async_lsp_exit_handler(method: str, params: Any) -> Any:
    return lsp_exit_handler(method, params)  # on the loop: SystemExit raised in the task


def serve_lsp(impl: ModuleType, mode: str, data: bytes, out: io.BytesIO) -> None:
    transport = impl.StdioTransport(io.BytesIO(data), out, framing="content-length")
    serving.serve_in_mode(mode, impl, lsp_exit_handler, transport, n=4, async_handler=async_lsp_exit_handler)


@pytest.mark.parametrize("mode", serving.MODES)
def test_shutdown_then_exit_in_one_write_gets_the_shutdown_answer_under_concurrency(
    impl: ModuleType, mode: str
) -> None:
    """``exit``'s handler raises SystemExit right after ``shutdown`` was dispatched: ``serve`` writes the
    ``shutdown`` answer before it re-raises, in every run (the race lost it in nearly every one)."""
    for run in range(EXIT_RUNS):
        out = io.BytesIO()
        with pytest.raises(SystemExit):
            serve_lsp(impl, mode, SHUTDOWN_THEN_EXIT, out)
        assert frames(out.getvalue()) == [result(1, None)], f"run {run}"


EXIT_SERVER = """
import importlib, sys

impl = importlib.import_module(sys.argv[1])


def handler(method, params):
    if method == "exit":
        sys.exit(0)
    return None


async def async_handler(method, params):
    return handler(method, params)


chosen = async_handler if sys.argv[2] == "asyncio" else handler
impl.serve(chosen, impl.StdioTransport(framing="content-length"), max_concurrency=4)
"""


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["threads", "asyncio"])
def test_shutdown_then_exit_in_a_real_process(impl: ModuleType, engine: str) -> None:
    """The same exchange with a real process on real pipes: exit code 0 and the ``shutdown`` answer."""
    for run in range(5):
        process = subprocess.run(
            [sys.executable, "-c", EXIT_SERVER, impl.__name__, engine],
            input=SHUTDOWN_THEN_EXIT,
            capture_output=True,
            env=child_env(),
            timeout=60,
            check=False,
        )
        assert process.returncode == 0, process.stderr.decode(errors="replace")
        assert frames(process.stdout) == [result(1, None)], f"run {run}"
