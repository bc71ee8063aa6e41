"""The clients bound to the pure core: :mod:`rpcwire._client`'s, :mod:`rpcwire._async_client`'s,
:mod:`rpcwire._http_client`'s and :mod:`rpcwire._ws_client`'s classes, whose ``_core`` is :mod:`rpcwire.pure`.
``rpcwire.pure`` imports this module on first use of one of them (the clients import ``rpcwire.pure.framing``, so
the package may not import them while it is made)."""

from __future__ import annotations

import sys
from types import ModuleType

from rpcwire import _async_client, _client, _http_client, _ws_client

__all__ = ["AsyncClient", "AsyncHttpClient", "AsyncWebSocketClient", "Client", "HttpClient"]

_PURE: ModuleType = sys.modules["rpcwire.pure"]


class Client(_client.Client):
    __doc__ = _client.Client.__doc__
    __module__ = "rpcwire.pure"
    _core = _PURE


class AsyncClient(_async_client.AsyncClient):
    __doc__ = _async_client.AsyncClient.__doc__
    __module__ = "rpcwire.pure"
    _core = _PURE


class HttpClient(_http_client.HttpClient):
    __doc__ = _http_client.HttpClient.__doc__
    __module__ = "rpcwire.pure"
    _core = _PURE


class AsyncHttpClient(_http_client.AsyncHttpClient):
    __doc__ = _http_client.AsyncHttpClient.__doc__
    __module__ = "rpcwire.pure"
    _core = _PURE


class AsyncWebSocketClient(_ws_client.AsyncWebSocketClient):
    __doc__ = _ws_client.AsyncWebSocketClient.__doc__
    __module__ = "rpcwire.pure"
    _core = _PURE
