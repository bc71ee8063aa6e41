"""rpcwire: a JSON-RPC 2.0 transport for Python with a Rust core.

``StdioTransport``, ``serve`` and ``parse_request`` come from the native module ``rpcwire._rpcwire``;
``rpcwire.pure`` offers the same names in pure Python. Existing code switches by changing one import.
"""

import logging

from rpcwire._types import (
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_MESSAGE_BYTES,
    ERR_INTERNAL,
    ERR_INVALID_PARAMS,
    ERR_INVALID_REQUEST,
    ERR_METHOD_NOT_FOUND,
    ERR_PARSE,
    InvalidParams,
    JsonRpcError,
    MethodNotFound,
    Request,
)

try:
    from rpcwire._rpcwire import StdioTransport, parse_request, serve

    NATIVE = True
    """Whether the native (Rust) transport is in use; ``False`` only when it could not be imported."""
except ImportError as exc:  # pragma: no cover - a build without the native module
    logging.getLogger("rpcwire").warning("native module unavailable (%s); using rpcwire.pure", exc)
    from rpcwire.pure import StdioTransport, parse_request, serve

    NATIVE = False

__all__ = [
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "ERR_INTERNAL",
    "ERR_INVALID_PARAMS",
    "ERR_INVALID_REQUEST",
    "ERR_METHOD_NOT_FOUND",
    "ERR_PARSE",
    "NATIVE",
    "InvalidParams",
    "JsonRpcError",
    "MethodNotFound",
    "Request",
    "StdioTransport",
    "parse_request",
    "serve",
]
