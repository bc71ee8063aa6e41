"""The pure-Python twin of the native transport: same API, same bytes out for the same bytes in.

It is the fallback where the native module cannot be built, the reference of the differential
tests and the baseline of every benchmark. It is written the way a careful Python developer would
write it with the standard library (``json``, a ``bytearray`` to frame), not tuned beyond that.

The rules both implementations follow are in ``docs/semantics.md``. This package is the public face: the
same public names as ``rpcwire``, over the pure core :mod:`rpcwire._pure` (the twin of the native module
``rpcwire._rpcwire``: transport, framing, codec, envelope), whose names it re-exports. Nothing below the face
imports it.

The clients (``Client``, ``AsyncClient``, ``HttpClient``, ``AsyncHttpClient``, ``AsyncWebSocketClient``) and
``HttpError`` are made on first use, so that importing this package never imports the clients.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The rest of the core's contract (rpcwire._contract.Core), beside the public names (the underscored ones).
from rpcwire import _pure
from rpcwire._engine import RequestContext, current_request, serve, serve_async
from rpcwire._engine import serve_sequential as _serve_sequential
from rpcwire._http_info import HTTPHeaders, HTTPRequestInfo
from rpcwire._methods import methods
from rpcwire._observe import CallInfo, observe
from rpcwire._pure import (
    FrameDecoder,
    StdioTransport,
    _ClientPipe,
    _encode_frame,
    _encode_request,
    _nests_deeper,
    _parse_incoming,
    _read_text,
    dispatch,
    parse_request,
)
from rpcwire._types import (
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_MESSAGE_BYTES,
    ERR_INTERNAL,
    ERR_INVALID_PARAMS,
    ERR_INVALID_REQUEST,
    ERR_METHOD_NOT_FOUND,
    ERR_PARSE,
    ERR_REQUEST_CANCELLED,
    CallTimeout,
    ConnectionClosed,
    ConnectionFailed,
    InvalidParams,
    JsonRpcError,
    MethodNotFound,
    NotSent,
    Refused,
    Request,
    RequestCancelled,
    Response,
    TransportError,
)

if TYPE_CHECKING:
    from rpcwire._contract import Core
    from rpcwire._http_client import HttpError
    from rpcwire.pure._clients import AsyncClient, AsyncHttpClient, AsyncWebSocketClient, Client, HttpClient

    _pure_core: Core = _pure  # `make lint` runs mypy over this module: the pure core must type-check as a Core.

# What the core calls above itself (the engine's serve and sequential loop), handed to it as rpcwire hands the native
# module its callbacks: the core imports nothing above it.
_pure._bind(serve=serve, serve_sequential=_serve_sequential)

__all__ = [
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "ERR_INTERNAL",
    "ERR_INVALID_PARAMS",
    "ERR_INVALID_REQUEST",
    "ERR_METHOD_NOT_FOUND",
    "ERR_PARSE",
    "ERR_REQUEST_CANCELLED",
    "AsyncClient",
    "AsyncHttpClient",
    "AsyncWebSocketClient",
    "CallInfo",
    "CallTimeout",
    "Client",
    "ConnectionClosed",
    "ConnectionFailed",
    "FrameDecoder",
    "HTTPHeaders",
    "HTTPRequestInfo",
    "HttpClient",
    "HttpError",
    "InvalidParams",
    "JsonRpcError",
    "MethodNotFound",
    "NotSent",
    "Refused",
    "Request",
    "RequestCancelled",
    "RequestContext",
    "Response",
    "StdioTransport",
    "TransportError",
    "_ClientPipe",  # the rest of the core's contract, as the native module's stub lists it
    "_encode_frame",
    "_encode_request",
    "_nests_deeper",
    "_parse_incoming",
    "_read_text",
    "current_request",
    "dispatch",
    "methods",
    "observe",
    "parse_request",
    "serve",
    "serve_async",
]

# Made on first use (PEP 562): the module that defines each.
_LAZY = {
    "Client": "rpcwire.pure._clients",
    "AsyncClient": "rpcwire.pure._clients",
    "HttpClient": "rpcwire.pure._clients",
    "AsyncHttpClient": "rpcwire.pure._clients",
    "AsyncWebSocketClient": "rpcwire.pure._clients",
    "HttpError": "rpcwire._http_client",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
