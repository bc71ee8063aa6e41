"""rpcwire.mcp: the MCP Python SDK's own client against real server processes on rpcwire's stdio transport.

Run as a script, this file is the server: ``app LAUNCHER [--pure]`` serves an ``MCPServer`` (LAUNCHER
``run_stdio``, ``stdio_server`` or ``sdk`` for ``app.run("stdio")``); ``mirror TRANSPORT STREAMS [--pure]``
sends back every message it reads and, for a read ``Exception``, a notification naming it, so that
its output can be compared byte for byte with the SDK's transport doing the same. ``--pure`` makes
``rpcwire.mcp`` read with ``rpcwire.pure`` (as when the native module is missing).
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP Python SDK (rpcwire[mcp]) is not installed")

from mcp.server.mcpserver import Context, MCPServer

HERE = Path(__file__).resolve()
TIMEOUT = 60


# --- the server side (this file run as a script) ----------------------------------------------------


def _serve_app(launcher: str) -> None:
    import rpcwire.mcp

    app = MCPServer("rpcwire-test", version="1.0")
    markers = Path(os.environ.get("MARKERS", "."))

    @app.tool()
    def echo(text: str) -> str:
        return text

    @app.tool()
    async def count(steps: int, ctx: Context) -> str:
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
        return f"counted {steps}"

    @app.tool()
    async def wait_forever() -> str:
        (markers / "started").write_text("started")
        try:
            await anyio.sleep(TIMEOUT)
        except anyio.get_cancelled_exc_class():
            (markers / "cancelled").write_text("cancelled")
            raise
        return "not cancelled"

    @app.tool()
    def stray() -> str:
        # fd 1 goes to stderr and fd 0 reads the null device while the transport serves.
        print("stray print", flush=True)
        os.write(1, b"stray write\n")
        return repr(os.read(0, 100))

    @app.tool()
    def stray_buffered() -> str:
        print("stray buffered")  # no flush: still in sys.stdout's buffer when the transport ends
        return "printed"

    @app.tool()
    async def second_transport() -> list[str]:
        import mcp.server.stdio

        refusals = []
        for stdio_server in (rpcwire.mcp.stdio_server, mcp.server.stdio.stdio_server):
            try:
                async with stdio_server():
                    refusals.append("not refused")
            except RuntimeError as exc:
                refusals.append(str(exc))
        return refusals

    if launcher == "sdk":
        app.run("stdio")
    elif launcher == "run_stdio":
        rpcwire.mcp.run_stdio(app)
    else:

        async def main() -> None:
            lowlevel = app._lowlevel_server
            async with rpcwire.mcp.stdio_server() as (read_stream, write_stream):
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

        anyio.run(main)


def _serve_mirror(transport: str, streams: str) -> None:
    import mcp.server.stdio
    import rpcwire.mcp
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCNotification, JSONRPCRequest

    stdio_server: Any = mcp.server.stdio.stdio_server if transport == "sdk" else rpcwire.mcp.stdio_server
    kwargs: dict[str, Any] = {}
    if streams == "binary":
        kwargs = {"stdin": sys.stdin.buffer, "stdout": sys.stdout.buffer}
    elif streams == "async":
        kwargs = {
            "stdin": anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")),
            "stdout": anyio.wrap_file(io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8")),
        }

    async def main() -> None:
        async with stdio_server(**kwargs) as (read_stream, write_stream):
            async for item in read_stream:
                reply = item
                if isinstance(item, Exception):
                    params = {"type": type(item).__name__, "text": str(item)}
                    reply = SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="exception", params=params))
                elif isinstance(item.message, JSONRPCRequest) and item.message.method == "stray":
                    print("stray print", flush=True)
                    os.write(1, b"stray write\n")
                    stdin = repr(os.read(0, 100))
                    reply = SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="stray", params={"stdin": stdin}))
                elif isinstance(item.message, JSONRPCRequest) and item.message.method == "stray_buffered":
                    print("stray buffered")  # no flush: still in sys.stdout's buffer when the transport ends
                await write_stream.send(reply)
            await write_stream.aclose()
        if streams == "fd":
            os.write(1, b"restored\n")  # fd 1 is the wire again

    anyio.run(main)


if __name__ == "__main__":
    if "--pure" in sys.argv:
        import rpcwire.mcp
        import rpcwire.pure

        rpcwire.mcp._FrameDecoder = rpcwire.pure.FrameDecoder
    if sys.argv[1] == "app":
        _serve_app(sys.argv[2])
    else:
        _serve_mirror(sys.argv[2], sys.argv[3])
    sys.exit(0)


# --- the client side: the SDK's client --------------------------------------------------------------

READERS = ["native", "pure"]


@pytest.fixture(params=READERS)
def reader(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _extra(reader: str) -> list[str]:
    return ["--pure"] if reader == "pure" else []


async def _session_checks(launcher: str, reader: str, tmp_path: Path) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=[str(HERE), "app", launcher, *_extra(reader)], env={"MARKERS": str(tmp_path)}
    )
    with (tmp_path / "stderr").open("w") as errlog, anyio.fail_after(TIMEOUT):
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            initialized = await session.initialize()
            assert initialized.server_info.name == "rpcwire-test"

            tools = await session.list_tools()
            assert {tool.name for tool in tools.tools} == {
                "echo",
                "count",
                "wait_forever",
                "stray",
                "stray_buffered",
                "second_transport",
            }

            result = await session.call_tool("echo", {"text": "héllo ✓ \n\r\\"})
            assert not result.is_error and result.structured_content == {"result": "héllo ✓ \n\r\\"}

            progress: list[tuple[float, float | None, str | None]] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append((value, total, message))

            result = await session.call_tool("count", {"steps": 3}, progress_callback=on_progress)
            assert result.structured_content == {"result": "counted 3"}
            assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]

            # Cancellation: once the tool runs, the client gives up on the call (the SDK then sends
            # notifications/cancelled) and the tool's scope is cancelled in the server.
            async with anyio.create_task_group() as group:
                group.start_soon(session.call_tool, "wait_forever", {})
                await _appears(tmp_path / "started")
                group.cancel_scope.cancel()
            await _appears(tmp_path / "cancelled")

            # Stray output misses the wire (the session goes on) and stdin reads the null device.
            result = await session.call_tool("stray", {})
            assert result.structured_content == {"result": "b''"}

            result = await session.call_tool("second_transport", {})
            refusals = result.structured_content["result"]  # type: ignore[index]
            assert refusals == ["another stdio_server() in this process has already claimed fd 0"] * 2

            # Many calls at once, answered in whatever order they finish.
            results: dict[int, Any] = {}

            async def call(index: int) -> None:
                results[index] = (await session.call_tool("echo", {"text": str(index)})).structured_content

            async with anyio.create_task_group() as group:
                for index in range(50):
                    group.start_soon(call, index)
            assert results == {index: {"result": str(index)} for index in range(50)}
    stderr = (tmp_path / "stderr").read_text()
    assert "stray print\nstray write\n" in stderr
    assert "Traceback" not in stderr, stderr


async def _appears(path: Path) -> None:
    with anyio.fail_after(20):
        while not path.exists():
            await anyio.sleep(0.01)


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["run_stdio", "stdio_server"])
def test_sdk_client_against_rpcwire_server(launcher: str, reader: str, tmp_path: Path) -> None:
    anyio.run(_session_checks, launcher, reader, tmp_path)


@pytest.mark.slow
def test_sdk_client_against_sdk_server(tmp_path: Path) -> None:
    """The same checks pass against the SDK's own transport (what the others are held to)."""
    anyio.run(_session_checks, "sdk", "native", tmp_path)


# --- byte for byte against the SDK's transport ------------------------------------------------------


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


MIRROR_INPUT = b"".join(
    [
        b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n',
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n',
        _line({"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": {"name": "echo", "arguments": {}}}),
        '{"jsonrpc":"2.0","id":2,"method":"caf\u00e9 \u2713 \U0001f600"}\n'.encode(),
        b"not json\n",
        b"\n",
        b"   \n",
        b'{"jsonrpc":"2.0","id":3,"result":{"a":[1,2.5,null,true]}}\r\n',
        b'{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"m","data":{"x":1}}}\n',
        b'{"jsonrpc":"2.0","id":5,"method":"a"}\r{"jsonrpc":"2.0","id":6,"method":"b"}\n',  # a lone \r ends a line
        b'{"jsonrpc":"2.0","id":7,"method":"bad \xff\xfe utf-8"}\n',
        b"\xff\xfe\n",
        b'{"jsonrpc":"1.0","id":8,"method":"x"}\n',
        b'[{"jsonrpc":"2.0","id":9,"method":"x"}]\n',
        _line({"jsonrpc": "2.0", "id": 11, "method": "big", "params": {"text": "x\u00e9" * 150_000}}),
        b'{"jsonrpc":"2.0","id":12,"method":"x","params":{"n":12345678901234567890123}}\n',
    ]
)
LAST_LINE = b'{"jsonrpc":"2.0","id":13,"method":"last, without a newline"}'
# Only where fd 0 and 1 are claimed: the stray read then takes nothing from the wire.
STRAY_LINE = b'{"jsonrpc":"2.0","id":10,"method":"stray"}\n'


def _mirror_input(streams: str) -> bytes:
    return MIRROR_INPUT + (STRAY_LINE if streams == "fd" else b"") + LAST_LINE


def _run_mirror(args: list[str], data: bytes, stdin_kind: str, tmp_path: Path) -> tuple[bytes, bytes]:
    """Run the mirror server on ``data``; its stdout and stderr."""
    command = [sys.executable, str(HERE), "mirror", *args]
    if stdin_kind == "pipe":
        process = subprocess.run(command, input=data, capture_output=True, timeout=TIMEOUT, check=False)
        assert process.returncode == 0, process.stderr.decode()
        return process.stdout, process.stderr
    if stdin_kind == "file":
        path = tmp_path / "input"
        path.write_bytes(data)
        with path.open("rb") as stdin:
            process = subprocess.run(command, stdin=stdin, capture_output=True, timeout=TIMEOUT, check=False)
        assert process.returncode == 0, process.stderr.decode()
        return process.stdout, process.stderr
    # Sockets, as libuv (Node) gives its children for stdio.
    ours_in, theirs_in = socket.socketpair()
    ours_out, theirs_out = socket.socketpair()
    with ours_in, ours_out:
        with theirs_in, theirs_out:
            child = subprocess.Popen(command, stdin=theirs_in, stdout=theirs_out, stderr=subprocess.PIPE)

        def feed() -> None:
            ours_in.sendall(data)
            ours_in.shutdown(socket.SHUT_WR)

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        ours_out.settimeout(TIMEOUT)
        chunks = []
        while chunk := ours_out.recv(65536):
            chunks.append(chunk)
        feeder.join(TIMEOUT)
        assert child.stderr is not None
        stderr = child.stderr.read()
        child.stderr.close()
        assert child.wait(TIMEOUT) == 0, stderr.decode()
    return b"".join(chunks), stderr


@pytest.fixture(scope="module")
def sdk_mirror(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, bytes]]:
    """The SDK's transport on the input with the stray line ("fd") and without it ("streams")."""
    return {
        kind: _run_mirror(["sdk", "fd"], _mirror_input(kind), "pipe", tmp_path_factory.mktemp("sdk"))
        for kind in ("fd", "streams")
    }


@pytest.mark.slow
def test_sdk_mirror_output(sdk_mirror: dict[str, tuple[bytes, bytes]]) -> None:
    """What the byte-for-byte tests compare with: every message back, each bad line as its exception."""
    stdout, stderr = sdk_mirror["fd"]
    lines = stdout.split(b"\n")
    assert lines[-2:] == [b"restored", b""]
    messages = [json.loads(line) for line in lines[:-2]]
    exceptions = [message["params"]["type"] for message in messages if message.get("method") == "exception"]
    assert exceptions == ["ValidationError"] * 6  # not json, "", "   ", \xff\xfe, jsonrpc 1.0, a batch
    assert [message.get("id") for message in messages if "id" in message] == [1, "x", 2, 3, 4, 5, 6, 7, 11, 12, 13]
    assert messages[-2] == {"jsonrpc": "2.0", "method": "stray", "params": {"stdin": "b''"}}
    bad_utf8 = next(message for message in messages if message.get("id") == 7)
    assert bad_utf8["method"] == "bad \ufffd\ufffd utf-8"  # invalid UTF-8 read as the SDK reads it
    assert b"stray print\nstray write\n" in stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("streams", "stdin_kind"),
    [("fd", "pipe"), ("fd", "file"), ("fd", "socket"), ("binary", "pipe"), ("async", "pipe")],
)
def test_output_is_the_sdks_byte_for_byte(
    streams: str, stdin_kind: str, reader: str, sdk_mirror: dict[str, tuple[bytes, bytes]], tmp_path: Path
) -> None:
    data = _mirror_input(streams)
    stdout, stderr = _run_mirror(["rpcwire", streams, *_extra(reader)], data, stdin_kind, tmp_path)
    if streams == "fd":
        assert stdout == sdk_mirror["fd"][0]
        assert b"stray print\nstray write\n" in stderr
    else:  # explicit streams: no claim of fd 0/1, so no "restored" line after the transport exits
        assert stdout == sdk_mirror["streams"][0].removesuffix(b"restored\n")


@pytest.mark.slow
def test_large_messages_with_a_slow_reader(tmp_path: Path) -> None:
    """Answers bigger than the pipe are written in parts as the client drains it (the writer waits, not the loop)."""
    messages = [{"jsonrpc": "2.0", "id": index, "method": "m", "params": {"text": "y" * 400_000}} for index in range(5)]
    data = b"".join(_line(message) for message in messages)
    process = subprocess.Popen(
        [sys.executable, str(HERE), "mirror", "rpcwire", "fd"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    threading.Thread(target=lambda: (process.stdin.write(data), process.stdin.close()), daemon=True).start()  # type: ignore[union-attr]
    received = bytearray()
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        chunk = process.stdout.read1(8192)
        if not chunk:
            break
        received += chunk
        time.sleep(0.0005)
    assert process.wait(TIMEOUT) == 0, process.stderr.read().decode()
    process.stdout.close()
    process.stderr.close()
    lines = bytes(received).split(b"\n")
    assert lines[-2:] == [b"restored", b""]
    assert [json.loads(line) for line in lines[:-2]] == messages


@pytest.mark.slow
def test_an_mcp_exchange_is_the_sdks_byte_for_byte(tmp_path: Path) -> None:
    """initialize, tools/list, tools/call with progress, written line by line to run_stdio and to app.run("stdio")."""
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "count", "arguments": {"steps": 2}, "_meta": {"progressToken": "p"}},
        },
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "é"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "no/such/method"},
    ]
    transcripts = {}
    for launcher in ("sdk", "run_stdio"):
        process = subprocess.Popen(
            [sys.executable, str(HERE), "app", launcher],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "MARKERS": str(tmp_path)},
        )
        assert process.stdin is not None and process.stdout is not None
        transcript = []
        try:
            for request in requests:
                process.stdin.write(_line(request))
                process.stdin.flush()
                if "id" in request:
                    while True:  # every line up to the answer (progress notifications first)
                        line = _readline(process.stdout)
                        transcript.append(line)
                        if b'"id":%d' % request["id"] in line and b'"progressToken"' not in line:
                            break
            process.stdin.close()
            assert process.wait(TIMEOUT) == 0
            transcript.append(process.stdout.read())
        finally:
            process.kill()
            process.wait(TIMEOUT)
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
        transcripts[launcher] = b"".join(transcript)
    assert b'"method":"notifications/progress"' in transcripts["sdk"]
    assert transcripts["run_stdio"] == transcripts["sdk"]


def _readline(stream: Any) -> bytes:
    """One line from a child's stdout, or fail after TIMEOUT."""
    result: list[bytes] = []
    reader = threading.Thread(target=lambda: result.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(TIMEOUT)
    assert result and result[0].endswith(b"\n"), f"no line within {TIMEOUT} s: {result}"
    return result[0]


def test_run_stdio_needs_a_server() -> None:
    import rpcwire.mcp

    with pytest.raises(TypeError, match="expected an MCPServer"):
        anyio.run(rpcwire.mcp.serve_stdio, object())


def test_nothing_else_imports_mcp() -> None:
    """``mcp`` is an optional extra: importing rpcwire (and its other modules) must not need it."""
    code = "import sys, rpcwire, rpcwire.pure, rpcwire.http; assert 'mcp' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=TIMEOUT)


# --- buffered stray output at exit (issue 17) ---------------------------------------------------------


def _buffered_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # sys.stdout block-buffered, as when a client spawns the server
    return env


@pytest.mark.slow
def test_buffered_stray_output_never_reaches_the_wire_after_the_transport_ends(reader: str) -> None:
    """A ``print`` without flush inside ``stdio_server()``: flushed into the diversion (stderr) before fd 1
    is restored, so it never follows the server's last message on the real stdout."""
    line = b'{"jsonrpc":"2.0","id":1,"method":"stray_buffered"}\n'
    process = subprocess.run(
        [sys.executable, str(HERE), "mirror", "rpcwire", "fd", *_extra(reader)],
        input=line,
        capture_output=True,
        timeout=TIMEOUT,
        env=_buffered_env(),
        check=False,
    )
    assert process.returncode == 0, process.stderr.decode()
    assert process.stdout == line + b"restored\n"
    assert b"stray buffered\n" in process.stderr


@pytest.mark.slow
def test_buffered_stray_output_of_a_tool_under_run_stdio(reader: str, tmp_path: Path) -> None:
    """The same through ``run_stdio(app)``: a tool prints without flush; after the session, stdout holds only
    the messages (the SDK's client would log the stray line as a parse failure)."""
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "stray_buffered", "arguments": {}}},
    ]
    process = subprocess.Popen(
        [sys.executable, str(HERE), "app", "run_stdio", *_extra(reader)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**_buffered_env(), "MARKERS": str(tmp_path)},
    )
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    try:
        for request in requests:
            process.stdin.write(_line(request))
            process.stdin.flush()
            if "id" in request:
                assert b'"id":%d' % request["id"] in _readline(process.stdout)
        process.stdin.close()
        assert process.wait(TIMEOUT) == 0
        rest = process.stdout.read()
        stderr = process.stderr.read()
    finally:
        process.kill()
        process.wait(TIMEOUT)
        for stream in (process.stdin, process.stdout, process.stderr):
            stream.close()
    assert rest == b""
    assert b"stray buffered\n" in stderr


# --- the client gone mid-call ---------------------------------------------------------------------------------


def _initialize(process: subprocess.Popen[bytes]) -> None:
    assert process.stdin is not None and process.stdout is not None
    for request in (
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ):
        process.stdin.write(_line(request))
        process.stdin.flush()
    assert b'"id":0' in _readline(process.stdout)


def _ends_quietly(process: subprocess.Popen[bytes]) -> None:
    """The server exits 0 with nothing on stderr (no traceback, no ``Exception ignored``)."""
    assert process.stderr is not None
    try:
        returncode = process.wait(TIMEOUT)
        stderr = process.stderr.read().decode(errors="replace")
    finally:
        process.kill()
        process.wait(TIMEOUT)
        process.stderr.close()
    assert returncode == 0, stderr
    from support.processes import QUIET_STDERR  # (here: this file also runs as the server's script)

    assert stderr == QUIET_STDERR, stderr  # the pure wheel's one line: its fallback's warning


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["run_stdio", "stdio_server"])
def test_a_client_gone_mid_call_ends_the_server_quietly(launcher: str, reader: str, tmp_path: Path) -> None:
    """A tools/call under way when the client closes both its pipes: the answer (the SDK's, once its session
    ends) meets a broken pipe, and the server exits 0, quietly (the SDK's transport: 1, with a traceback)."""
    process = subprocess.Popen(
        [sys.executable, str(HERE), "app", launcher, *_extra(reader)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "MARKERS": str(tmp_path)},
    )
    assert process.stdin is not None and process.stdout is not None
    _initialize(process)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "wait_forever", "arguments": {}}}
    process.stdin.write(_line(call))
    process.stdin.flush()
    anyio.run(_appears, tmp_path / "started")  # the call is under way
    process.stdout.close()
    process.stdin.close()
    _ends_quietly(process)


@pytest.mark.slow
@pytest.mark.parametrize("streams", ["binary", "async"])
def test_a_client_gone_ends_a_transport_on_explicit_streams_quietly(streams: str, reader: str) -> None:
    """The same with the streams given to ``stdio_server`` (blocking writes): the message written after the
    client closed its end of stdout meets a broken pipe, and the transport ends when stdin does, quietly."""
    process = subprocess.Popen(
        [sys.executable, str(HERE), "mirror", "rpcwire", streams, *_extra(reader)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_buffered_env(),
    )
    assert process.stdin is not None and process.stdout is not None
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    process.stdin.write(ping)
    process.stdin.flush()
    assert _readline(process.stdout) == ping  # serving
    process.stdout.close()
    process.stdin.write(ping.replace(b'"id":1', b'"id":2'))  # its echo meets the broken pipe
    process.stdin.close()
    _ends_quietly(process)
