"""An MCP tool server from a ``methods()`` registry, in a line, without the MCP SDK.

``serve_tools(registry, name="calc")`` serves the registry's functions as MCP tools over stdin/stdout;
``tools_handler(registry, name="calc")`` is the same server as a plain rpcwire handler, for ``serve`` on any
transport or for ``rpcwire.http.ASGIApp`` (MCP's streamable HTTP, stateless: every POST is answered on its own).
Both run through rpcwire's engine: concurrency, ``notifications/cancelled`` (a cancelled call gets no answer),
``current_request().progress()`` as ``notifications/progress``. What the server answers:

- ``initialize``: the client's ``protocolVersion`` when it is one of :data:`PROTOCOL_VERSIONS`, else the newest;
  capabilities ``{"tools": {"listChanged": false}, "logging": {}}``; ``serverInfo``; ``instructions`` if given.
  ``notifications/initialized`` (and every other notification) is taken and ignored; ``ping`` is ``{}``.
  ``server/discover`` (MCP 2026-07-28's stateless probe) is -32601: the SDK's client then falls back to the
  ``initialize`` handshake.
- ``tools/list``: ``registry.mcp_tools()`` (``inputSchema``, and ``outputSchema`` for an annotated return), made
  once per set of functions.
- ``tools/call``: ``{"content": [{"type": "text", "text": ...}], "isError": false}``, the text the result itself
  when it is a ``str``, else its JSON; ``structuredContent`` when the tool has an ``outputSchema`` (the result,
  or ``{"result": ...}`` when the schema wraps it, as the SDK does) or, without one, when the result is an object.
  A tool that fails is still a result, ``isError: true``, which the model can read (MCP's rule): arguments that
  do not fit the tool's parameters or annotations (the registry's -32602) say why; a :class:`ToolError` or a
  ``ValueError`` raised by the tool is its message (the errors a tool means its caller to see); any other
  exception says only that the tool failed, its details logged on the server (logger ``rpcwire``), never sent.
  An unknown tool is a JSON-RPC error, -32602 (MCP's rule).
- ``logging/setLevel``: the lowest level :func:`log` sends as ``notifications/message`` (all, until it is set).

A tool reports progress with ``current_request().progress(done, total, message)`` and sees a cancellation as
``current_request().cancelled`` (a sync tool checks it between steps; an ``async def`` tool is cancelled at its
next ``await``). Over HTTP, progress and log messages reach a client that accepts ``text/event-stream`` (the
SDK's does) as events before the answer; a cancellation is the client closing the request.
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Awaitable
from typing import Any

from rpcwire import StdioTransport  # the core rpcwire serves with (rpcwire.pure's without the native module)
from rpcwire._context import current_request, request_context
from rpcwire._engine import serve
from rpcwire._methods import Methods
from rpcwire._typed import cut
from rpcwire._types import InvalidParams, JsonRpcError, MethodNotFound, RequestCancelled

__all__ = ["LOG_LEVELS", "PROTOCOL_VERSIONS", "ToolError", "ToolServer", "log", "serve_tools", "tools_handler"]

logger: logging.Logger = logging.getLogger("rpcwire")

PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The MCP revisions whose ``initialize`` handshake this server speaks, oldest first."""

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""MCP's log levels (RFC 5424's), lowest first."""

_SERVING: contextvars.ContextVar[ToolServer] = contextvars.ContextVar("rpcwire_mcp_tool_server")


class ToolError(Exception):
    """Raised by a tool: its message is what the client reads (``isError: true``), as a ``ValueError``'s is."""


# The exceptions whose message a tool means its caller to read; any other is logged and sent as "failed".
_MEANT = (ToolError, ValueError)


class ToolServer:
    """An MCP tool server as an rpcwire handler ``(method, params)``: see :func:`tools_handler`."""

    def __init__(
        self,
        registry: Methods,
        *,
        name: str = "rpcwire",
        version: str = "0.0.0",
        title: str | None = None,
        instructions: str | None = None,
    ) -> None:
        if not isinstance(registry, Methods):
            raise TypeError(f"expected a methods() registry, got {type(registry).__name__}")
        self.registry = registry
        info: dict[str, Any] = {"name": name, "version": version}
        if title is not None:
            info["title"] = title
        self._server_info = info
        self._instructions = instructions
        self._log_level = 0  # the index in LOG_LEVELS of the lowest level sent
        self._listed: tuple[Any, dict[str, Any], dict[str, dict[str, Any]]] | None = None

    @property
    def rpcwire_async(self) -> bool:
        """Whether the registry holds an ``async def`` tool: the engine then serves this handler on a loop."""
        return self.registry.rpcwire_async

    def __call__(self, method: str, params: Any) -> Any:
        if method == "tools/call":
            return self._call(params)
        if method == "tools/list":
            return self._tools()[1]
        if method == "ping":
            return {}
        if method == "initialize":
            return self._initialize(params)
        if method == "logging/setLevel":
            return self._set_level(params)
        if method.startswith("notifications/"):
            return None  # notifications/initialized and the like (cancellations are the engine's, never here)
        raise MethodNotFound()

    def _initialize(self, params: Any) -> dict[str, Any]:
        requested = params.get("protocolVersion") if isinstance(params, dict) else None
        result: dict[str, Any] = {
            "protocolVersion": requested if requested in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1],
            "capabilities": {"tools": {"listChanged": False}, "logging": {}},
            "serverInfo": self._server_info,
        }
        if self._instructions is not None:
            result["instructions"] = self._instructions
        return result

    def _set_level(self, params: Any) -> dict[str, Any]:
        level = params.get("level") if isinstance(params, dict) else None
        if level not in LOG_LEVELS:
            raise InvalidParams(data=f"level must be one of {list(LOG_LEVELS)}")
        self._log_level = LOG_LEVELS.index(level)
        return {}

    def _tools(self) -> tuple[Any, dict[str, Any], dict[str, dict[str, Any]]]:
        """``(key, tools/list's answer, each tool by name)``, made again only when the registry's functions change."""
        key = tuple(self.registry._functions.items())
        listed = self._listed
        if listed is None or listed[0] != key:
            tools = self.registry.mcp_tools()
            listed = self._listed = (key, {"tools": tools}, {tool["name"]: tool for tool in tools})
        return listed

    def _call(self, params: Any) -> Any:
        if not isinstance(params, dict) or not isinstance(params.get("name"), str):
            raise InvalidParams(data="tools/call takes {name: str, arguments?: object}")
        name = params["name"]
        tool = self._tools()[2].get(name)
        if tool is None:
            raise InvalidParams(f"Unknown tool: {cut(name)}")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        elif not isinstance(arguments, dict):
            return _failed("Invalid arguments for tool " + name + ": arguments must be an object")
        token = _SERVING.set(self)
        try:
            value = self.registry(name, arguments)
        except Exception as exc:
            return _failure(name, exc)
        finally:
            _SERVING.reset(token)
        if isinstance(value, Awaitable):
            return self._finish(name, tool, value)
        return _success(tool, value)

    async def _finish(self, name: str, tool: dict[str, Any], awaitable: Awaitable[Any]) -> dict[str, Any]:
        token = _SERVING.set(self)
        try:
            value = await awaitable
        except Exception as exc:
            return _failure(name, exc)
        finally:
            _SERVING.reset(token)
        return _success(tool, value)

    def log(self, level: str, data: Any, *, logger: str | None = None) -> None:
        """Send ``notifications/message`` to the client of the call running now, if ``level`` is at or above the
        one it set (``logging/setLevel``). Outside a call, or after its answer: nothing is sent."""
        if level not in LOG_LEVELS:
            raise ValueError(f"level must be one of {list(LOG_LEVELS)}, not {level!r}")
        if LOG_LEVELS.index(level) < self._log_level:
            return
        context = request_context()
        if context is None:
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        context.notify("notifications/message", params)


def log(level: str, data: Any, *, logger: str | None = None) -> None:
    """From inside a tool: send the client a log message (``notifications/message``), see :meth:`ToolServer.log`."""
    server = _SERVING.get(None)
    if server is None:
        current_request()  # LookupError outside a handler
        return
    server.log(level, data, logger=logger)


def _success(tool: dict[str, Any], value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            logger.error("tool %s returned a value that is not JSON", tool["name"], exc_info=exc)
            return _failed(f"Error executing tool {tool['name']}: its result is not JSON")
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
    schema = tool.get("outputSchema")
    if schema is not None:
        result["structuredContent"] = {"result": value} if _wraps(schema) else value
    elif isinstance(value, dict):
        result["structuredContent"] = value
    return result


def _wraps(schema: dict[str, Any]) -> bool:
    """Whether an ``outputSchema`` is the ``{"result": ...}`` wrapper ``mcp_tool`` makes for a non-object."""
    return (
        schema.get("required") == ["result"]
        and set(schema.get("properties", ())) == {"result"}
        and set(schema) <= {"type", "properties", "required", "$defs"}
    )


def _failed(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _failure(name: str, exc: Exception) -> dict[str, Any]:
    """A tool's exception as the result the client reads (a cancellation is not a failure: it goes on up)."""
    if isinstance(exc, RequestCancelled):
        raise exc
    if isinstance(exc, InvalidParams):  # the registry's: arguments that do not bind or fit the annotations
        reason = exc.data if isinstance(exc.data, str) else json.dumps(exc.data, ensure_ascii=False, default=str)
        return _failed(f"Invalid arguments for tool {name}: {reason}")
    if isinstance(exc, _MEANT):
        return _failed(str(exc))
    if isinstance(exc, JsonRpcError):
        return _failed(exc.message)
    logger.error("tool %s failed", name, exc_info=exc)
    return _failed(f"Error executing tool {name}: it failed (the details are in the server's log)")


def tools_handler(
    registry: Methods,
    *,
    name: str = "rpcwire",
    version: str = "0.0.0",
    title: str | None = None,
    instructions: str | None = None,
) -> ToolServer:
    """The MCP tool server of ``registry`` as a handler: ``serve(tools_handler(tools), StdioTransport(),
    max_concurrency=8)``, or ``rpcwire.http.ASGIApp(tools_handler(tools))`` for MCP's streamable HTTP.

    ``name``, ``version`` and ``title`` are ``initialize``'s ``serverInfo``; ``instructions`` its instructions.
    """
    return ToolServer(registry, name=name, version=version, title=title, instructions=instructions)


def serve_tools(
    registry: Methods,
    *,
    name: str = "rpcwire",
    version: str = "0.0.0",
    title: str | None = None,
    instructions: str | None = None,
    transport: Any = None,
    max_concurrency: int = 8,
) -> None:
    """Serve ``registry``'s functions as MCP tools over stdin/stdout until the client closes stdin.

    Up to ``max_concurrency`` calls run at once (so that a long call can be cancelled, and pings and other calls
    are answered meanwhile). ``transport``: ``rpcwire.StdioTransport()`` by default (``rpcwire.pure``'s to serve
    with the pure-Python core). See :func:`tools_handler` for the other arguments.
    """
    if transport is None:
        transport = StdioTransport()
    handler = tools_handler(registry, name=name, version=version, title=title, instructions=instructions)
    serve(handler, transport, max_concurrency=max_concurrency)
