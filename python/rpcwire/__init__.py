"""rpcwire: a JSON-RPC 2.0 transport for Python with a Rust core.

``StdioTransport``, ``serve``, ``dispatch`` and ``parse_request`` come from the native module ``rpcwire._rpcwire``;
``rpcwire.pure`` offers the same names in pure Python (its core ``rpcwire._pure`` serves here too where the native
module is not built). Existing code switches by changing one import.
The clients (``Client``, ``AsyncClient``, ``HttpClient``, ``AsyncHttpClient``, ``AsyncWebSocketClient``) read and
write through the same core.
"""

# ruff: noqa: E402 - the native module is imported before the package's modules (see below)
import importlib
import importlib.metadata
import logging
import sys
from types import ModuleType

# The native module is imported here first, before the modules below that use it when it is there. It may be
# missing (ImportError: the pure wheel, a source tree never built), or its import may warn and the caller's filters
# raise the warning (-W error, pytest's filterwarnings = ["error"]): a free-threaded interpreter warns when it turns
# the GIL back on for a module that declares it needs it. A warning falls back as a missing module does, never
# failing `import rpcwire`; and the module is then marked missing (None in sys.modules) so that the modules below
# fall back too, instead of importing it silently on a second try (the interpreter warns only once).
_native_missing: Exception | None = None
try:
    # Not `from rpcwire import _rpcwire`: in a package still initialising, its error for a missing module
    # says "most likely due to a circular import"; this one says "No module named 'rpcwire._rpcwire'".
    importlib.import_module("rpcwire._rpcwire")
except ImportError as _missing:  # pragma: no cover - a build without the native module
    _native_missing = _missing
except Warning as _warned:
    _native_missing = _warned
    sys.modules["rpcwire._rpcwire"] = None  # type: ignore[assignment]

from rpcwire import _answer, _async_client, _client, _contract, _http_client, _ws_client
from rpcwire._engine import RequestContext, current_request, serve, serve_async
from rpcwire._http_client import HttpError
from rpcwire._http_info import HTTPHeaders, HTTPRequestInfo
from rpcwire._methods import methods
from rpcwire._observe import CallInfo, observe
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

try:
    __version__: str = importlib.metadata.version("rpcwire")
    """The installed distribution's version: Cargo.toml's, which maturin gives the package."""
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree on sys.path, never installed
    __version__ = "0+unknown"

_core: ModuleType
if _native_missing is None:
    import rpcwire._rpcwire as _core
    from rpcwire._rpcwire import FrameDecoder, StdioTransport, dispatch, parse_request

    _core._bind(  # the Python objects the native module calls back: it imports none of the package's modules
        serve=serve,
        request=Request,
        response=Response,
        json_rpc_error=JsonRpcError,
        refused=Refused,
        log_failure=_answer.log_failure,
        meta_traceparent=_answer.meta_traceparent,
        lone_outcomes=(_contract.Unsent, _contract.ErrorAnswer, _contract.ReadOn, _contract.ReadFailed),
    )
    NATIVE = True
    """Whether the native (Rust) transport is in use; ``False`` only when it could not be imported (missing, or
    its import warned and the warning filters made that an error)."""
else:  # pragma: no cover - a build without the native module
    logging.getLogger("rpcwire").warning(
        "rpcwire: native module unavailable (%s); serving through the pure-Python rpcwire.pure", _native_missing
    )
    import rpcwire._pure as _core
    from rpcwire._engine import serve_sequential as _serve_sequential
    from rpcwire._pure import FrameDecoder, StdioTransport, dispatch, parse_request

    _core._bind(serve=serve, serve_sequential=_serve_sequential)  # the engine's, which the pure core calls back
    NATIVE = False


# The public clients: the class that holds the code, bound to this core. Each docstring is written once, on that
# class; the API reference reads these assignments too (docs/tools/griffe_rpcwire.py).
class Client(_client.Client):
    __doc__ = _client.Client.__doc__
    _core = _core


class AsyncClient(_async_client.AsyncClient):
    __doc__ = _async_client.AsyncClient.__doc__
    _core = _core


class HttpClient(_http_client.HttpClient):
    __doc__ = _http_client.HttpClient.__doc__
    _core = _core


class AsyncHttpClient(_http_client.AsyncHttpClient):
    __doc__ = _http_client.AsyncHttpClient.__doc__
    _core = _core


class AsyncWebSocketClient(_ws_client.AsyncWebSocketClient):
    __doc__ = _ws_client.AsyncWebSocketClient.__doc__
    _core = _core


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
    "NATIVE",
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
    "current_request",
    "dispatch",
    "methods",
    "observe",
    "parse_request",
    "serve",
    "serve_async",
]
