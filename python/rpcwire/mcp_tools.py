"""An MCP tool server from a ``methods()`` registry, in a line, without the MCP SDK.

``serve_tools(registry, name="calc")`` serves the registry's functions as MCP tools over stdin/stdout;
``tools_handler(registry, name="calc")`` is the same server as a plain rpcwire handler, for ``serve`` on any
transport or for ``rpcwire.http.ASGIApp`` (MCP's streamable HTTP, stateless: every POST is answered on its own).
Both run through rpcwire's engine: concurrency, ``notifications/cancelled`` (a cancelled call gets no answer),
``current_request().progress()`` as ``notifications/progress``. It speaks every MCP revision the SDK's clients
do (:data:`PROTOCOL_VERSIONS`), each request in the era it is written in, as the SDK's server does:

- ``initialize`` (the handshake, :data:`HANDSHAKE_VERSIONS`): the client's ``protocolVersion`` when it is one of
  them, else the newest; capabilities ``{"tools": {"listChanged": false}, "logging": {}}``; ``serverInfo``;
  ``instructions`` if given. ``notifications/initialized`` (and every other notification) is taken and ignored;
  ``ping`` is ``{}``.
- A request whose ``params._meta`` holds ``io.modelcontextprotocol/protocolVersion`` is MCP 2026-07-28's
  (:data:`MODERN_VERSIONS`: no handshake, each request says its version, ``clientInfo``, ``clientCapabilities``
  and ``logLevel``). Checked as the SDK's server checks it: ``_meta`` without the version or the capabilities, or
  a version that is no string, is -32602; over HTTP, an ``MCP-Protocol-Version``, ``Mcp-Method`` or ``Mcp-Name``
  header that disagrees with the body is -32020; a version not served is -32022 with ``{"supported": [...],
  "requested": ...}``; a method that revision lacks (``ping``, ``logging/setLevel``) is -32601. ``server/discover``
  answers ``supportedVersions``, the capabilities, ``instructions``, ``ttlMs: 0`` and ``cacheScope: "private"``;
  every result carries ``resultType: "complete"`` and the server's ``io.modelcontextprotocol/serverInfo`` in its
  ``_meta``; ``tools/list``'s is cacheable for no time (the registry may change). Without that ``_meta``,
  ``server/discover`` is -32601, as at the handshake's revisions.
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
- Logging: :func:`log` sends ``notifications/message`` at or above the level the client asked for: before
  2026-07-28 the one ``logging/setLevel`` set (the server's, all levels until it is set); at 2026-07-28 the one
  the request's ``_meta`` names (``io.modelcontextprotocol/logLevel``), and nothing to a request that names none.

A tool sees who called it with :func:`current_caller` (the version, ``clientInfo``, capabilities and log level).

A tool reports progress with ``current_request().progress(done, total, message)`` and sees a cancellation as
``current_request().cancelled`` (a sync tool checks it between steps; an ``async def`` tool is cancelled at its
next ``await``). Over HTTP, progress and log messages reach a client that accepts ``text/event-stream`` (the
SDK's does) as events before the answer; a cancellation is the client closing the request.
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import json
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from typing import Any

from rpcwire import StdioTransport  # the core rpcwire serves with (rpcwire.pure's without the native module)
from rpcwire._context import current_request, request_context
from rpcwire._engine import serve
from rpcwire._methods import Methods
from rpcwire._typed import cut
from rpcwire._types import InvalidParams, JsonRpcError, MethodNotFound, RequestCancelled

__all__ = [
    "HANDSHAKE_VERSIONS",
    "LOG_LEVELS",
    "MODERN_VERSIONS",
    "PROTOCOL_VERSIONS",
    "Caller",
    "ToolError",
    "ToolServer",
    "current_caller",
    "log",
    "serve_tools",
    "tools_handler",
]

logger: logging.Logger = logging.getLogger("rpcwire")

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The MCP revisions this server speaks through the ``initialize`` handshake, oldest first."""

MODERN_VERSIONS = ("2026-07-28",)
"""The MCP revisions this server speaks through each request's own ``_meta`` (no handshake), oldest first."""

PROTOCOL_VERSIONS = HANDSHAKE_VERSIONS + MODERN_VERSIONS
"""Every MCP revision this server speaks, oldest first."""

# The reserved keys of a 2026-07-28 request's and result's ``_meta`` (mcp_types' *_META_KEY).
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"

UNSUPPORTED_PROTOCOL_VERSION = -32022
"""MCP 2026-07-28's error for a request whose ``_meta`` names a revision the server does not speak; its data is
``{"supported": [...], "requested": ...}``."""

HEADER_MISMATCH = -32020
"""MCP 2026-07-28's error for an HTTP request whose ``MCP-Protocol-Version``, ``Mcp-Method`` or ``Mcp-Name``
header disagrees with its body (or is missing)."""


class _UnsupportedVersion(JsonRpcError):
    code = UNSUPPORTED_PROTOCOL_VERSION


class _HeaderMismatch(JsonRpcError):
    code = HEADER_MISMATCH


# The methods a 2026-07-28 request may name (the rest of this server's are the handshake's: -32601 there).
_MODERN_METHODS = frozenset({"server/discover", "tools/list", "tools/call"})

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""MCP's log levels (RFC 5424's), lowest first."""


class ToolError(Exception):
    """Raised by a tool: its message is what the client reads (``isError: true``), as a ``ValueError``'s is."""


# The exceptions whose message a tool means its caller to read; any other is logged and sent as "failed".
_MEANT = (ToolError, ValueError)


@dataclass(frozen=True)
class Caller:
    """The client of the call running now, as :func:`current_caller` gives it."""

    protocol_version: str
    """The MCP revision the call speaks (``"2026-07-28"``, or the one ``initialize`` agreed)."""
    info: dict[str, Any] | None
    """Its ``clientInfo`` (``{"name": ..., "version": ...}``), ``None`` when it sent none."""
    capabilities: dict[str, Any]
    """Its ``clientCapabilities`` (``{}`` when it sent none)."""
    log_level: str | None
    """The lowest level :func:`log` sends it, ``None`` when it asked for no log messages (2026-07-28: a request
    without ``io.modelcontextprotocol/logLevel``)."""


@dataclass(frozen=True)
class _Call:
    """A tool call in flight: its server, and its client when the request said who it is (2026-07-28)."""

    server: ToolServer
    client: Caller | None  # None: a handshake-era call, whose client and level are the server's


_SERVING: contextvars.ContextVar[_Call] = contextvars.ContextVar("rpcwire_mcp_tool_call")


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
        self._log_level = 0  # the index in LOG_LEVELS of the lowest level sent (handshake era)
        self._initialized: Caller | None = None  # what the last initialize said (handshake era, a stream's client)
        self._listed: tuple[Any, dict[str, Any], dict[str, dict[str, Any]]] | None = None

    @property
    def rpcwire_async(self) -> bool:
        """Whether the registry holds an ``async def`` tool: the engine then serves this handler on a loop."""
        return self.registry.rpcwire_async

    def __call__(self, method: str, params: Any) -> Any:
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta and method != "initialize":
            return self._modern(method, params, meta)
        if method == "tools/call":
            return self._call(params, None)
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

    # --- 2026-07-28: every request carries its version, client and log level in its _meta ------------------------

    def _modern(self, method: str, params: dict[str, Any], meta: dict[str, Any]) -> Any:
        """A request in MCP 2026-07-28's envelope, checked as the SDK's server checks it (``_meta`` first, then
        the HTTP headers, then the version, then the method), its result tagged ``resultType`` and stamped with
        ``serverInfo``."""
        if method.startswith("notifications/"):
            return None  # notifications/cancelled is the engine's; the revision defines no other
        missing = [key for key in (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY) if key not in meta]
        if missing:
            raise InvalidParams(f"params._meta is missing the required envelope key(s): {', '.join(missing)}")
        version = meta[PROTOCOL_VERSION_KEY]
        _check_headers(method, params, version)
        if not isinstance(version, str):
            raise InvalidParams("the protocol-version envelope value must be a string")
        if version not in MODERN_VERSIONS:
            raise _UnsupportedVersion(
                "Unsupported protocol version",
                {"supported": list(MODERN_VERSIONS), "requested": cut(version)},
            )
        info = meta.get(CLIENT_INFO_KEY)
        capabilities = meta[CLIENT_CAPABILITIES_KEY]
        level = meta.get(LOG_LEVEL_KEY)
        if info is not None and not isinstance(info, dict):
            raise InvalidParams(f"params._meta[{CLIENT_INFO_KEY!r}] must be an object")
        if not isinstance(capabilities, dict):
            raise InvalidParams(f"params._meta[{CLIENT_CAPABILITIES_KEY!r}] must be an object")
        if level is not None and level not in LOG_LEVELS:
            raise InvalidParams(f"params._meta[{LOG_LEVEL_KEY!r}] must be one of {list(LOG_LEVELS)}")
        if method not in _MODERN_METHODS:
            raise MethodNotFound()  # ping, logging/setLevel, initialize's era: not in this revision
        if method == "server/discover":
            return self._stamp(self._discover())
        if method == "tools/list":
            return self._stamp({**self._tools()[1], "ttlMs": 0, "cacheScope": "private"})
        result = self._call(params, Caller(version, info, capabilities, level))
        if isinstance(result, Awaitable):
            return self._stamped(result)
        return self._stamp(result)

    def _discover(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "supportedVersions": list(MODERN_VERSIONS),
            "capabilities": {"tools": {"listChanged": False}, "logging": {}},
            "ttlMs": 0,
            "cacheScope": "private",
        }
        if self._instructions is not None:
            result["instructions"] = self._instructions
        return result

    def _stamp(self, result: dict[str, Any]) -> dict[str, Any]:
        """A 2026-07-28 result: ``resultType`` (required there) and the ``serverInfo`` stamp of its ``_meta``."""
        return {**result, "resultType": "complete", "_meta": {SERVER_INFO_KEY: dict(self._server_info)}}

    async def _stamped(self, result: Awaitable[dict[str, Any]]) -> dict[str, Any]:
        return self._stamp(await result)

    # --- the handshake era ------------------------------------------------------------------------------------

    def _initialize(self, params: Any) -> dict[str, Any]:
        requested = params.get("protocolVersion") if isinstance(params, dict) else None
        version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}, "logging": {}},
            "serverInfo": self._server_info,
        }
        if self._instructions is not None:
            result["instructions"] = self._instructions
        info = params.get("clientInfo") if isinstance(params, dict) else None
        capabilities = params.get("capabilities") if isinstance(params, dict) else None
        self._initialized = Caller(
            version,
            info if isinstance(info, dict) else None,
            capabilities if isinstance(capabilities, dict) else {},
            None,
        )
        return result

    def _set_level(self, params: Any) -> dict[str, Any]:
        level = params.get("level") if isinstance(params, dict) else None
        if level not in LOG_LEVELS:
            raise InvalidParams(data=f"level must be one of {list(LOG_LEVELS)}")
        self._log_level = LOG_LEVELS.index(level)
        return {}

    # --- tools ------------------------------------------------------------------------------------------------

    def _tools(self) -> tuple[Any, dict[str, Any], dict[str, dict[str, Any]]]:
        """``(key, tools/list's answer, each tool by name)``, made again only when the registry's functions change."""
        key = tuple(self.registry._functions.items())
        listed = self._listed
        if listed is None or listed[0] != key:
            tools = self.registry.mcp_tools()
            listed = self._listed = (key, {"tools": tools}, {tool["name"]: tool for tool in tools})
        return listed

    def _call(self, params: Any, client: Caller | None) -> Any:
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
        call = _Call(self, client)
        token = _SERVING.set(call)
        try:
            value = self.registry(name, arguments)
        except Exception as exc:
            return _failure(name, exc)
        finally:
            _SERVING.reset(token)
        if isinstance(value, Awaitable):
            return self._finish(call, tool, value)
        return _success(tool, value)

    async def _finish(self, call: _Call, tool: dict[str, Any], awaitable: Awaitable[Any]) -> dict[str, Any]:
        token = _SERVING.set(call)
        try:
            value = await awaitable
        except Exception as exc:
            return _failure(tool["name"], exc)
        finally:
            _SERVING.reset(token)
        return _success(tool, value)

    def log(self, level: str, data: Any, *, logger: str | None = None) -> None:
        """Send ``notifications/message`` to the client of the call running now, if ``level`` is at or above the
        one it asked for: on 2026-07-28 the call's own ``io.modelcontextprotocol/logLevel`` (nothing is sent to a
        call without one), before it the level set with ``logging/setLevel`` (every level until then). Outside a
        call, or after its answer: nothing is sent."""
        if level not in LOG_LEVELS:
            raise ValueError(f"level must be one of {list(LOG_LEVELS)}, not {level!r}")
        call = _SERVING.get(None)
        if call is not None and call.server is self and call.client is not None:
            wanted = call.client.log_level
            if wanted is None or LOG_LEVELS.index(level) < LOG_LEVELS.index(wanted):
                return
        elif LOG_LEVELS.index(level) < self._log_level:
            return
        context = request_context()
        if context is None:
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        context.notify("notifications/message", params)


def _check_headers(method: str, params: dict[str, Any], version: Any) -> None:
    """Over HTTP, a 2026-07-28 request's ``MCP-Protocol-Version`` and ``Mcp-Method`` headers say what its body
    says, and ``Mcp-Name`` the tool's name for ``tools/call`` (-32020 otherwise, as the SDK's server answers)."""
    context = request_context()
    http = None if context is None else context.http
    if http is None:
        return
    headers = http.headers
    sent = headers.get("mcp-protocol-version")
    if sent is None or sent != version:
        raise _HeaderMismatch("mcp-protocol-version header does not match the request envelope's version")
    if headers.get("mcp-method") != method:
        raise _HeaderMismatch("mcp-method header does not match the request body's method")
    name = params.get("name") if method == "tools/call" else None
    if name is not None and _header_value(headers.get("mcp-name")) != name:
        raise _HeaderMismatch("mcp-name header does not match the request body's 'name' parameter")


def _header_value(value: str | None) -> str | None:
    """A header's value, decoded when MCP's ``=?base64?...?=`` wraps it (``None`` when that is not canonical)."""
    if value is None or not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    payload = value[9:-2]
    try:
        decoded = base64.b64decode(payload, validate=True)
        if base64.b64encode(decoded).decode("ascii") != payload:
            return None
        return decoded.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def current_caller() -> Caller | None:
    """Inside a tool: who called it. On 2026-07-28 what the request's ``_meta`` says; before it, what the
    ``initialize`` handshake said, over a stream (stdio) where one client is served, and ``None`` over HTTP, where
    each POST is its own and the handshake's does not say who sends the next. ``None`` outside a tool's call."""
    call = _SERVING.get(None)
    if call is None:
        return None
    if call.client is not None:
        return call.client
    context = request_context()
    if context is not None and context.http is not None:
        return None
    initialized = call.server._initialized
    if initialized is None:
        return None
    return replace(initialized, log_level=LOG_LEVELS[call.server._log_level])


def log(level: str, data: Any, *, logger: str | None = None) -> None:
    """From inside a tool: send the client a log message (``notifications/message``), see :meth:`ToolServer.log`."""
    call = _SERVING.get(None)
    if call is None:
        current_request()  # LookupError outside a handler
        return
    call.server.log(level, data, logger=logger)


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
