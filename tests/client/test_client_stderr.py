"""Where a spawned server's stderr goes: ``Client.spawn(stderr=...)`` and ``AsyncClient.spawn(stderr=...)``.

By default it reaches the caller's ``sys.stderr`` (as the MCP SDK's ``stdio_client`` passes it on); ``"tail"``
keeps it for ``ConnectionClosed`` only; a path, an open file (text or binary) or a callable take it instead.
Whatever the option, its last lines still go into ``ConnectionClosed``. Each case is a real server that prints,
logs and prints a traceback on its stderr, then answers, then exits with a last line."""

from __future__ import annotations

import asyncio
import inspect
import io
import logging
import select
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import rpcwire

pytestmark = pytest.mark.timeout(60)

NOISY = r"""
import json, logging, sys
print("printed on stderr", file=sys.stderr, flush=True)
logging.basicConfig(level=logging.INFO, format="%(levelname)s:%(name)s:%(message)s")
logging.getLogger("server").warning("a logging line")
try:
    1 / 0
except ZeroDivisionError:
    logging.getLogger("server").exception("it failed")
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": message["method"]}) + "\n")
    sys.stdout.flush()
    if message["method"] == "exit":
        sys.stderr.write("the last line")  # no newline: the end of the pipe ends it
        sys.exit(3)
"""

LINES = [
    "printed on stderr",
    "WARNING:server:a logging line",
    "ERROR:server:it failed",
    "Traceback (most recent call last):",
]
"""What the server's stderr holds (in this order, among the traceback's other lines), before its last line."""


@pytest.fixture
def server(tmp_path: Path) -> list[str]:
    script = tmp_path / "noisy.py"
    script.write_text(NOISY)
    return [sys.executable, str(script)]


def in_order(text: str, lines: list[str]) -> bool:
    at = 0
    for line in lines:
        at = text.find(line + "\n", at)
        if at < 0:
            return False
    return True


def run_sync(impl: ModuleType, argv: list[str], **options: Any) -> rpcwire.ConnectionClosed:
    """Call the server, make it exit, and return the ``ConnectionClosed`` of the next call (the client closed)."""
    with impl.Client.spawn(argv, timeout=30, **options) as client:
        assert client.call("hello") == "hello"
        assert client.call("exit") == "exit"
        with pytest.raises(rpcwire.ConnectionClosed) as closed:
            client.call("after")
    return closed.value


def run_async(impl: ModuleType, argv: list[str], **options: Any) -> rpcwire.ConnectionClosed:
    async def main() -> rpcwire.ConnectionClosed:
        async with impl.AsyncClient.spawn(argv, timeout=30, **options) as client:
            assert await client.call("hello") == "hello"
            assert await client.call("exit") == "exit"
            with pytest.raises(rpcwire.ConnectionClosed) as closed:
                await client.call("after")
        return closed.value

    return asyncio.run(asyncio.wait_for(main(), 50))


Run = Callable[..., rpcwire.ConnectionClosed]


@pytest.fixture(params=["Client", "Client-threads", "AsyncClient"])
def run(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Run:
    """The scenario with either client; ``Client-threads``: without ``select.poll``, the portable path (as the
    ``reading`` fixture takes it), whose stderr is read with blocking reads."""
    if request.param == "Client-threads":
        monkeypatch.delattr(select, "poll")
    return run_async if request.param == "AsyncClient" else run_sync


def check_closed(closed: rpcwire.ConnectionClosed) -> None:
    """Whatever the option, the exit and the last lines are in ``ConnectionClosed``."""
    assert closed.returncode == 3
    assert closed.stderr_tail[-1] == "the last line"
    assert "ZeroDivisionError: division by zero" in closed.stderr_tail
    assert "the last line" in str(closed)


@pytest.mark.parametrize("option", [{}, {"stderr": "inherit"}, {"stderr": None}], ids=["default", "inherit", "None"])
def test_by_default_the_servers_stderr_reaches_the_callers(
    impl: ModuleType, server: list[str], run: Run, option: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    closed = run(impl, server, **option)
    check_closed(closed)
    err = capsys.readouterr().err
    assert in_order(err, [*LINES, "ZeroDivisionError: division by zero", "the last line"]), err


def test_tail_keeps_it_for_connection_closed_only(
    impl: ModuleType,
    server: list[str],
    run: Run,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="rpcwire.client"):
        closed = run(impl, server, stderr="tail")
    check_closed(closed)
    assert capsys.readouterr().err == ""
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("server stderr: ")]
    assert "server stderr: printed on stderr" in logged
    assert "server stderr: the last line" in logged


def test_a_path_is_appended_to(
    impl: ModuleType, server: list[str], run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"before\n")
    check_closed(run(impl, server, stderr=log))
    text = log.read_text()
    assert text.startswith("before\n")
    assert in_order(text, ["before", *LINES, "ZeroDivisionError: division by zero"]), text
    assert text.endswith("\nthe last line")  # the bytes as the server wrote them
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("mode", ["w", "wb"])
def test_an_open_file_is_written_to_and_left_open(
    impl: ModuleType, server: list[str], run: Run, tmp_path: Path, mode: str
) -> None:
    path = tmp_path / "server.log"
    with path.open(mode) as file:
        check_closed(run(impl, server, stderr=file))
        assert not file.closed
        file.write("mine\n" if mode == "w" else b"mine\n")
    text = path.read_text()
    assert in_order(text, [*LINES, "ZeroDivisionError: division by zero"]), text
    assert text.endswith("the last line" + ("\n" if mode == "w" else "") + "mine\n"), text


def test_a_text_stream_without_a_descriptor(
    impl: ModuleType, server: list[str], run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = io.StringIO()
    check_closed(run(impl, server, stderr=stream))
    assert in_order(stream.getvalue(), [*LINES, "the last line"]), stream.getvalue()
    assert capsys.readouterr().err == ""


def test_a_callable_gets_each_line(
    impl: ModuleType, server: list[str], run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    lines: list[str] = []
    check_closed(run(impl, server, stderr=lines.append))
    assert lines[:3] == LINES[:3]
    assert lines[-1] == "the last line"
    assert "ZeroDivisionError: division by zero" in lines
    assert capsys.readouterr().err == ""


def test_a_callable_that_raises_is_dropped_and_the_tail_kept(
    impl: ModuleType, server: list[str], run: Run, caplog: pytest.LogCaptureFixture
) -> None:
    def fails(line: str) -> None:
        raise RuntimeError("nowhere to put it")

    check_closed(run(impl, server, stderr=fails))
    warnings = [r for r in caplog.records if "could not be written" in r.getMessage()]
    assert len(warnings) == 1


@pytest.mark.parametrize(("stderr", "error"), [("loud", ValueError), (42, TypeError)])
def test_an_unknown_option_is_refused_before_anything_starts(
    impl: ModuleType, server: list[str], stderr: Any, error: type[Exception], tmp_path: Path
) -> None:
    started = tmp_path / "started"
    argv = [sys.executable, "-c", f"open({str(started)!r}, 'w').close()"]
    with pytest.raises(error, match="stderr="):
        impl.Client.spawn(argv, stderr=stderr)
    with pytest.raises(error, match="stderr="):
        impl.AsyncClient.spawn(argv, stderr=stderr)
    assert not started.exists()


def test_async_spawn_is_an_async_context_manager_as_is_its_awaited_client(impl: ModuleType, server: list[str]) -> None:
    async def main() -> tuple[int | None, int | None]:
        async with impl.AsyncClient.spawn(server, timeout=30, stderr="tail") as client:
            assert isinstance(client, impl.AsyncClient)
            assert await client.call("hello") == "hello"
        first = client.returncode  # closed at the end of the block: its stdin closed, so it exited
        async with await impl.AsyncClient.spawn(server, timeout=30, stderr="tail") as client:
            assert await client.call("hello") == "hello"
        return first, client.returncode

    assert asyncio.run(asyncio.wait_for(main(), 50)) == (0, 0)


@pytest.mark.parametrize("name", ["Client", "AsyncClient"])
def test_the_public_signatures_have_no_private_parameters(impl: ModuleType, name: str) -> None:
    cls = getattr(impl, name)
    for function in (cls, cls.spawn):
        private = [p for p in inspect.signature(function).parameters if p.startswith("_")]
        assert private == [], f"{name}{'' if function is cls else '.spawn'}: {private}"
