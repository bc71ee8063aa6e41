"""``rpcwire.mcp_tools``: a ``methods()`` registry served as an MCP tool server, driven by the MCP SDK's own clients.

Over stdio (a child process serving with either core, its tools sync or ``async def``) at every protocol version the
SDK speaks: ``stdio_client`` and ``ClientSession`` at each version of its handshake, its ``Client`` pinned to
2026-07-28 (no handshake: each request's ``_meta``) and in ``mode="auto"`` (the ``server/discover`` probe); over
HTTP (``ASGIApp`` under uvicorn on 127.0.0.1, port 0) with the SDK's streamable HTTP client in each era.
"""

from __future__ import annotations

import contextlib
import json
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP Python SDK (rpcwire[mcp]) is not installed")

import mcp.client.session
from mcp.client.client import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from support.processes import child_env

TIMEOUT = 30

# Every protocol version the SDK speaks, and "auto": its Client probing server/discover and taking what it says.
VERSIONS = [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS, "auto"]
MODERN = MODERN_PROTOCOL_VERSIONS[-1]

# logging/setLevel is deprecated from MCP 2026-07-28 on; the handshake's revisions still have it.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

# The tools every test serves: {KIND} is "def" or "async def" for the long one (an async def tool makes the
# whole registry async: the engine's asyncio server), {CORE} the module whose transport serves.
TOOLS = '''
import asyncio, sys, threading
from typing import TypedDict

import rpcwire
from rpcwire import current_request, methods, RequestCancelled
from rpcwire.mcp_tools import ToolError, current_caller, log, serve_tools, tools_handler

STATE = sys.argv[1] if len(sys.argv) > 1 else None
tools = methods()


class Point(TypedDict):
    x: int
    y: int


@tools.method
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tools.method
def point(x: int, y: int) -> Point:
    """A point."""
    return {"x": x, "y": y}


@tools.method
def untyped(text):
    return {"echo": text}


@tools.method
def divide(a: float, b: float) -> float:
    if b == 0:
        raise ToolError("cannot divide by zero")
    return a / b


@tools.method
def boom() -> str:
    raise RuntimeError("secret internal detail")


@tools.method
def caller():
    client = current_caller()
    if client is None:
        return {"caller": None}
    return {"version": client.protocol_version, "name": (client.info or {}).get("name"), "level": client.log_level}


def _note(text):
    if STATE:
        with open(STATE, "a") as f:
            f.write(text + "\\n")


if "{KIND}" == "async def":
    @tools.method
    async def slow(n: int) -> str:
        """Count to n slowly."""
        request = current_request()
        try:
            for i in range(1, n + 1):
                await asyncio.sleep(0.02)
                request.progress(i, n, f"step {i}")
                log("info", f"step {i}", logger="slow")
        except asyncio.CancelledError:
            _note("cancelled")
            raise
        return "done"
else:
    @tools.method
    def slow(n: int) -> str:
        """Count to n slowly."""
        request = current_request()
        tick = threading.Event()
        for i in range(1, n + 1):
            if request.cancelled:
                _note("cancelled")
                raise RequestCancelled()
            tick.wait(0.02)
            request.progress(i, n, f"step {i}")
            log("info", f"step {i}", logger="slow")
        return "done"
'''

STDIO_SERVER = (
    TOOLS
    + """
import {CORE}
serve_tools(tools, name="calc", version="1.2", transport={CORE}.StdioTransport())
"""
)

KINDS = ["def", "async def"]
CORES = ["rpcwire", "rpcwire.pure"]


def _script(tmp_path: Path, template: str, kind: str, core: str) -> Path:
    path = tmp_path / "tool_server.py"
    path.write_text(textwrap.dedent(template).replace("{KIND}", kind).replace("{CORE}", core))
    return path


def _run(coroutine: Any, *args: Any) -> Any:
    return anyio.run(coroutine, *args)


async def _exercise(session: ClientSession, state: Path | None, *, modern: bool = False) -> dict[str, Any]:
    """What a client meets: the tools listed, calls that succeed and fail, progress, logging, cancellation (and
    before 2026-07-28, ping: that revision has none)."""
    seen: dict[str, Any] = {}
    tools = (await session.list_tools()).tools
    seen["tools"] = {tool.name: tool for tool in tools}
    seen["add"] = await session.call_tool("add", {"a": 2, "b": 3})
    seen["point"] = await session.call_tool("point", {"x": 1, "y": 2})
    seen["untyped"] = await session.call_tool("untyped", {"text": "hé"})
    seen["divide"] = await session.call_tool("divide", {"a": 1, "b": 0})
    seen["boom"] = await session.call_tool("boom", {})
    seen["bad_type"] = await session.call_tool("add", {"a": "two", "b": 3})
    seen["missing"] = await session.call_tool("add", {"a": 2})
    seen["unknown"] = None
    try:
        await session.call_tool("nope", {})
    except Exception as exc:
        seen["unknown"] = exc
    seen["caller"] = (await session.call_tool("caller", {})).structured_content
    if not modern:
        await session.send_ping()
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    seen["slow"] = await session.call_tool("slow", {"n": 3}, progress_callback=on_progress)
    seen["progress"] = progress
    if state is not None:
        seen["cancelled"] = await _cancel(session, state)
        seen["after_cancel"] = await session.call_tool("add", {"a": 1, "b": 1})
    return seen


async def _cancel(session: ClientSession, state: Path) -> bool:
    """Cancel a long call once it has reported progress; whether the tool saw the cancellation."""
    started = anyio.Event()

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        started.set()

    async with anyio.create_task_group() as group:
        group.start_soon(lambda: session.call_tool("slow", {"n": 100_000}, progress_callback=on_progress))
        await started.wait()
        group.cancel_scope.cancel()
    for _ in range(200):  # the tool stops at its next step: bounded wait for its note
        if state.exists() and "cancelled" in state.read_text():
            return True
        await anyio.sleep(0.05)
    return False


def _check(seen: dict[str, Any]) -> None:
    tools = seen["tools"]
    assert set(tools) == {"add", "point", "untyped", "divide", "boom", "caller", "slow"}
    assert tools["add"].input_schema["required"] == ["a", "b"]
    assert tools["add"].output_schema == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
    }
    assert tools["untyped"].output_schema is None
    add = seen["add"]
    assert not add.is_error
    assert add.content[0].text == "5"
    assert add.structured_content == {"result": 5}
    assert seen["point"].structured_content == {"x": 1, "y": 2}  # an object: not wrapped
    assert json.loads(seen["point"].content[0].text) == {"x": 1, "y": 2}
    assert seen["untyped"].structured_content == {"echo": "hé"}
    divide = seen["divide"]
    assert divide.is_error
    assert divide.content[0].text == "cannot divide by zero"
    boom = seen["boom"]
    assert boom.is_error
    assert "boom" in boom.content[0].text
    assert "secret" not in boom.content[0].text  # logged on the server, not sent
    for key in ("bad_type", "missing"):
        assert seen[key].is_error, key
        assert seen[key].content[0].text.startswith("Invalid arguments for tool add"), seen[key]
    unknown = seen["unknown"]
    assert unknown is not None
    assert unknown.error.code == -32602
    assert "nope" in unknown.error.message
    assert seen["slow"].structured_content == {"result": "done"}
    assert [done for done, _, _ in seen["progress"]] == [1, 2, 3]
    assert seen["progress"][0][1:] == (3, "step 1")
    if "cancelled" in seen:
        assert seen["cancelled"], "the tool never saw the cancellation"
        assert seen["after_cancel"].structured_content == {"result": 2}


@contextlib.asynccontextmanager
async def _stdio_session(
    version: str,
    params: StdioServerParameters,
    errlog: Any,
    on_log: Any,
    monkeypatch: pytest.MonkeyPatch,
    **options: Any,
) -> AsyncIterator[tuple[ClientSession, str | None]]:
    """The SDK's client connected at ``version``: a handshake version through ``ClientSession.initialize`` (the
    handshake offers the newest; patched to each it speaks), else its ``Client`` with ``mode=version``. Yields the
    session and the version agreed."""
    if version in HANDSHAKE_PROTOCOL_VERSIONS:
        monkeypatch.setattr(mcp.client.session, "LATEST_HANDSHAKE_VERSION", version)
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, logging_callback=on_log) as session,
        ):
            initialized = await session.initialize()
            assert initialized.server_info.name == "calc"
            assert initialized.server_info.version == "1.2"
            if options.get("log_level") is not None:
                await session.set_logging_level(options["log_level"])
            yield session, initialized.protocol_version
        return
    async with Client(stdio_client(params, errlog=errlog), mode=version, logging_callback=on_log, **options) as client:
        yield client.session, client.protocol_version


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("core", CORES)
def test_the_sdks_stdio_client_at_every_version(
    core: str, kind: str, version: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's client at every version it speaks: each of its handshake's, 2026-07-28 pinned (each request's
    ``_meta`` says it) and ``mode="auto"`` (its ``server/discover`` probe, answered: 2026-07-28 agreed, the server
    named in the result's ``_meta``)."""
    script = _script(tmp_path, STDIO_SERVER, kind, core)
    state = tmp_path / "state"
    logs: list[Any] = []
    modern = version not in HANDSHAKE_PROTOCOL_VERSIONS

    async def on_log(params: Any) -> None:
        logs.append(params)

    async def main() -> dict[str, Any]:
        params = StdioServerParameters(command=sys.executable, args=[str(script), str(state)], env=child_env())
        with (tmp_path / "stderr").open("w") as errlog, anyio.fail_after(TIMEOUT):
            # the tool logs at info: at warning, nothing reaches the client
            async with _stdio_session(version, params, errlog, on_log, monkeypatch, log_level="warning") as (
                session,
                agreed,
            ):
                assert agreed == (MODERN if modern else version)
                if version == "auto":  # what discover said; a pinned Client knows nothing of the server
                    assert session.server_info is not None
                    assert (session.server_info.name, session.server_info.version) == ("calc", "1.2")
                    assert session.server_capabilities.tools is not None
                    assert session.server_capabilities.logging is not None
                elif not modern:
                    assert session.server_capabilities.tools is not None
                    assert session.server_capabilities.logging is not None
                seen = await _exercise(session, state, modern=modern)
                seen["logs"] = list(logs)
                return seen

    seen = _run(main)
    _check(seen)
    assert seen["logs"] == []
    assert seen["caller"] == {"version": MODERN if modern else version, "name": "mcp", "level": "warning"}
    stderr = (tmp_path / "stderr").read_text()
    assert "secret internal detail" in stderr  # the failure's details are in the server's log


@pytest.mark.slow
@pytest.mark.parametrize(
    ("version", "log_level", "sent"),
    [
        ("2025-11-25", None, ["step 1", "step 2"]),  # every level until logging/setLevel
        (MODERN, "info", ["step 1", "step 2"]),  # the request's _meta asks for info and above
        (MODERN, "notice", []),
        (MODERN, None, []),  # a 2026-07-28 request that asks for no level gets no log messages
    ],
)
@pytest.mark.parametrize("kind", KINDS)
def test_log_messages_reach_the_client(
    kind: str, version: str, *, log_level: str | None, sent: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _script(tmp_path, STDIO_SERVER, kind, "rpcwire")
    logs: list[Any] = []

    async def on_log(params: Any) -> None:
        logs.append(params)

    async def main() -> None:
        params = StdioServerParameters(command=sys.executable, args=[str(script)], env=child_env())
        options = {} if version != MODERN else {"log_level": log_level}
        with (tmp_path / "stderr").open("w") as errlog, anyio.fail_after(TIMEOUT):
            async with _stdio_session(version, params, errlog, on_log, monkeypatch, **options) as (session, _):
                await session.call_tool("slow", {"n": 2})

    _run(main)
    assert [(entry.level, entry.logger, entry.data) for entry in logs] == [("info", "slow", text) for text in sent]


# --- HTTP ------------------------------------------------------------------------------------------

HTTP_APP = (
    TOOLS
    + """
import logging
from rpcwire.http import ASGIApp


class _NoTraceback(logging.Filter):  # the harness refuses a traceback on stderr: boom's is logged on purpose
    def filter(self, record):
        record.exc_info = None
        return True


logging.getLogger("rpcwire").addFilter(_NoTraceback())

app = ASGIApp(tools_handler(tools, name="calc"))
"""
)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", *MODERN_PROTOCOL_VERSIONS, "auto"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_sdks_streamable_http_client(kind: str, mode: str, tmp_path: Path) -> None:
    """``ASGIApp(tools_handler(tools))`` under uvicorn: the SDK's streamable HTTP client, with the handshake, pinned
    to 2026-07-28 and probing, lists and calls (progress as events of the call's response; cancellation over HTTP
    is the client closing the request). A 2026-07-28 POST whose headers disagree with its body is refused."""
    pytest.importorskip("uvicorn")
    import httpx
    from support.servers import real_server

    (tmp_path / "tools_app.py").write_text(textwrap.dedent(HTTP_APP).replace("{KIND}", kind))
    uvicorn = [sys.executable, "-m", "uvicorn", "--fd", "{fd}", "--app-dir", str(tmp_path), "--log-level", "warning"]
    modern = mode != "legacy"
    with real_server([*uvicorn, "tools_app:app"]) as url:

        async def main() -> dict[str, Any]:
            with anyio.fail_after(TIMEOUT):
                async with Client(url + "/", mode=mode) as client:
                    assert client.protocol_version == (MODERN if modern else HANDSHAKE_PROTOCOL_VERSIONS[-1])
                    if mode != MODERN:  # a pinned client asks nothing about the server
                        assert client.server_info is not None
                        assert client.server_info.name == "calc"
                    return await _exercise(client.session, None, modern=modern)

        seen = _run(main)
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add", "_meta": meta}}
        headers = {"Accept": "application/json", "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call"}
        refused = {
            "no headers": {"Accept": "application/json"},
            "another version": {**headers, "MCP-Protocol-Version": "2025-11-25", "Mcp-Name": "add"},
            "another method": {**headers, "Mcp-Method": "tools/list", "Mcp-Name": "add"},
            "another tool": {**headers, "Mcp-Name": "divide"},
        }
        for why, sent in refused.items():
            answer = httpx.post(url + "/", json=body, headers=sent, timeout=TIMEOUT).json()
            assert answer["error"]["code"] == -32020, why
        encoded = {**headers, "Mcp-Name": "=?base64?YWRk?="}  # "add", as MCP wraps a name a header cannot carry
        body["params"]["arguments"] = {"a": 1, "b": 2}
        answer = httpx.post(url + "/", json=body, headers=encoded, timeout=TIMEOUT).json()
        assert answer["result"]["structuredContent"] == {"result": 3}
    _check(seen)
    # over HTTP, before 2026-07-28, no request says who sends it
    assert seen["caller"] == ({"version": MODERN, "name": "mcp", "level": None} if modern else {"caller": None})


# --- in process: what the SDK's client never sends ----------------------------------------------------


def _answer(impl: ModuleType, handler: Any, method: str, params: Any = None) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        body["params"] = params
    return json.loads(impl.dispatch(json.dumps(body), handler))


def _registry(impl: ModuleType) -> Any:
    registry = impl.methods()

    @registry.method
    def add(a: int, b: int) -> int:
        return a + b

    @registry.method
    def keyed() -> dict[str, int]:
        return {"k": 1}

    @registry.method
    def not_json() -> Any:
        return {1, 2}

    return registry


def test_initialize_negotiates_the_version(impl: ModuleType) -> None:
    from rpcwire.mcp_tools import HANDSHAKE_VERSIONS, tools_handler

    handler = tools_handler(_registry(impl), name="calc", version="2", title="Calc", instructions="Add things.")
    for version in HANDSHAKE_VERSIONS:
        params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        assert _answer(impl, handler, "initialize", params)["result"] == {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}, "logging": {}},
            "serverInfo": {"name": "calc", "version": "2", "title": "Calc"},
            "instructions": "Add things.",
        }
    for unknown in ("1999-01-01", None, 5, MODERN):  # 2026-07-28 has no handshake: the newest that has one
        answer = _answer(impl, handler, "initialize", {"protocolVersion": unknown})
        assert answer["result"]["protocolVersion"] == HANDSHAKE_VERSIONS[-1]
    assert _answer(impl, handler, "ping")["result"] == {}
    assert _answer(impl, handler, "server/discover", {})["error"]["code"] == -32601  # without 2026-07-28's _meta
    assert _answer(impl, handler, "resources/list", {})["error"]["code"] == -32601
    assert impl.dispatch(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', handler) is None


def _envelope(version: Any = MODERN, **more: Any) -> dict[str, Any]:
    """A 2026-07-28 request's ``_meta``, as the SDK's client stamps it."""
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
        **more,
    }


STAMP = {"io.modelcontextprotocol/serverInfo": {"name": "calc", "version": "2", "title": "Calc"}}


def test_discover(impl: ModuleType) -> None:
    """``server/discover`` as the SDK's server answers it: the revisions served by each request's ``_meta``, the
    capabilities, the caching fields and ``resultType`` that 2026-07-28 requires, the server named in ``_meta``."""
    from rpcwire.mcp_tools import tools_handler

    handler = tools_handler(_registry(impl), name="calc", version="2", title="Calc", instructions="Add things.")
    assert _answer(impl, handler, "server/discover", {"_meta": _envelope()})["result"] == {
        "supportedVersions": [MODERN],
        "capabilities": {"tools": {"listChanged": False}, "logging": {}},
        "instructions": "Add things.",
        "ttlMs": 0,
        "cacheScope": "private",
        "resultType": "complete",
        "_meta": STAMP,
    }


def test_2026_results_are_tagged(impl: ModuleType) -> None:
    """At 2026-07-28 every result says ``resultType`` and names the server; ``tools/list`` is cacheable (for no
    time: the registry may change); before it, the results are as they were."""
    from rpcwire.mcp_tools import tools_handler

    handler = tools_handler(_registry(impl), name="calc", version="2", title="Calc")
    listed = _answer(impl, handler, "tools/list", {"_meta": _envelope()})["result"]
    assert [tool["name"] for tool in listed.pop("tools")] == ["add", "keyed", "not_json"]
    assert listed == {"ttlMs": 0, "cacheScope": "private", "resultType": "complete", "_meta": STAMP}
    called = _answer(impl, handler, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}, "_meta": _envelope()})
    assert called["result"] == {
        "content": [{"type": "text", "text": "3"}],
        "isError": False,
        "structuredContent": {"result": 3},
        "resultType": "complete",
        "_meta": STAMP,
    }
    failed = _answer(impl, handler, "tools/call", {"name": "add", "arguments": {}, "_meta": _envelope()})["result"]
    assert (failed["isError"], failed["resultType"], failed["_meta"]) == (True, "complete", STAMP)
    for method, params in (("tools/list", {}), ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})):
        assert "resultType" not in _answer(impl, handler, method, params)["result"], method


def test_2026_envelope_refusals(impl: ModuleType) -> None:
    """A request in 2026-07-28's envelope is checked as the SDK's server checks it: the envelope's keys (-32602),
    the version (-32022 naming the ones served), then whether the revision has the method (-32601)."""
    from rpcwire.mcp_tools import tools_handler

    handler = tools_handler(_registry(impl))
    call = {"name": "add", "arguments": {"a": 1, "b": 2}}
    no_capabilities = {"io.modelcontextprotocol/protocolVersion": MODERN}
    for meta in (no_capabilities, _envelope(5), _envelope(**{"io.modelcontextprotocol/logLevel": "loud"})):
        assert _answer(impl, handler, "tools/call", {**call, "_meta": meta})["error"]["code"] == -32602, meta
    for old in ("2025-11-25", "2099-01-01"):
        error = _answer(impl, handler, "tools/call", {**call, "_meta": _envelope(old)})["error"]
        assert (error["code"], error["data"]) == (-32022, {"supported": [MODERN], "requested": old})
    assert _answer(impl, handler, "ping", {"_meta": _envelope("2099-01-01")})["error"]["code"] == -32022
    for method, params in (("ping", {}), ("logging/setLevel", {"level": "info"}), ("resources/list", {})):
        assert _answer(impl, handler, method, {**params, "_meta": _envelope()})["error"]["code"] == -32601, method
    # initialize is the handshake's whatever its _meta says (the SDK's server: the era the client opens with)
    initialize = {"protocolVersion": "2025-06-18", "capabilities": {}, "_meta": _envelope()}
    assert _answer(impl, handler, "initialize", initialize)["result"]["protocolVersion"] == "2025-06-18"
    assert (
        impl.dispatch(
            json.dumps({"jsonrpc": "2.0", "method": "notifications/x", "params": {"_meta": _envelope()}}), handler
        )
        is None
    )


def test_tools_call_refusals(impl: ModuleType) -> None:
    from rpcwire.mcp_tools import tools_handler

    handler = tools_handler(_registry(impl))
    for params in (None, [], {"arguments": {}}, {"name": 3}):
        assert _answer(impl, handler, "tools/call", params)["error"]["code"] == -32602, params
    unknown = _answer(impl, handler, "tools/call", {"name": "x" * 10_000})["error"]
    assert unknown["code"] == -32602
    assert len(unknown["message"]) < 500  # the name is not echoed whole
    positional = _answer(impl, handler, "tools/call", {"name": "add", "arguments": [1, 2]})["result"]
    assert positional["isError"] is True
    assert _answer(impl, handler, "tools/call", {"name": "add"})["result"]["isError"] is True  # no arguments
    keyed = _answer(impl, handler, "tools/call", {"name": "keyed", "arguments": {}})["result"]
    assert keyed["structuredContent"] == {"k": 1}  # an object schema: not wrapped
    not_json = _answer(impl, handler, "tools/call", {"name": "not_json", "arguments": {}})["result"]
    assert not_json["isError"] is True


def test_set_level(impl: ModuleType) -> None:
    from rpcwire.mcp_tools import tools_handler

    handler = tools_handler(_registry(impl))
    assert _answer(impl, handler, "logging/setLevel", {"level": "error"})["result"] == {}
    assert _answer(impl, handler, "logging/setLevel", {"level": "loud"})["error"]["code"] == -32602


def test_tools_list_follows_the_registry(impl: ModuleType) -> None:
    from rpcwire.mcp_tools import tools_handler

    registry = _registry(impl)
    handler = tools_handler(registry)
    assert [tool["name"] for tool in _answer(impl, handler, "tools/list")["result"]["tools"]] == [
        "add",
        "keyed",
        "not_json",
    ]
    registry.add(lambda: 1, "later")
    assert "later" in [tool["name"] for tool in _answer(impl, handler, "tools/list")["result"]["tools"]]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_example_serves_the_sdks_client(mode: str, tmp_path: Path) -> None:
    """``examples/mcp_tools_server.py`` as its docstring says: started by the SDK's ``Client`` over stdio, with the
    handshake or probing (2026-07-28 taken)."""
    from support import EXAMPLES

    async def main() -> None:
        script = str(EXAMPLES / "mcp_tools_server.py")
        params = StdioServerParameters(command=sys.executable, args=[script], env=child_env())
        logs: list[Any] = []

        async def on_log(params: Any) -> None:
            logs.append(params.data)

        with (tmp_path / "stderr").open("w") as errlog, anyio.fail_after(TIMEOUT):
            transport = stdio_client(params, errlog=errlog)
            async with Client(transport, mode=mode, logging_callback=on_log, log_level="info") as client:
                assert client.protocol_version == (MODERN if mode == "auto" else HANDSHAKE_PROTOCOL_VERSIONS[-1])
                assert {tool.name for tool in (await client.list_tools()).tools} == {"add", "divide", "slow_count"}
                assert (await client.call_tool("add", {"a": 2, "b": 3})).structured_content == {"result": 5}
                divide = await client.call_tool("divide", {"a": 1, "b": 0})
                assert divide.is_error
                assert divide.content[0].text == "cannot divide by zero"
                progress: list[float] = []

                async def on_progress(done: float, total: float | None, message: str | None) -> None:
                    progress.append(done)

                counted = await client.call_tool("slow_count", {"n": 2}, progress_callback=on_progress)
                assert counted.content[0].text == "counted to 2"
                assert progress == [1, 2]
        assert logs == ["counted to 2"]

    _run(main)
