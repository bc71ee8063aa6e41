"""The clients bound to the pure core: :mod:`rpcwire._client`'s, :mod:`rpcwire._async_client`'s,
:mod:`rpcwire._http_client`'s and :mod:`rpcwire._ws_client`'s classes, whose ``_core`` is the pure core
:mod:`rpcwire._pure` (as ``rpcwire``'s are bound to the native module). ``rpcwire.pure`` imports this module on
first use of one of them, so that importing the face does not import the clients."""

from __future__ import annotations

from rpcwire import _async_client, _client, _http_client, _pure, _ws_client

__all__ = ["AsyncClient", "AsyncHttpClient", "AsyncWebSocketClient", "Client", "HttpClient"]


class Client(_client.Client):
    __doc__ = _client.Client.__doc__
    __module__ = "rpcwire.pure"
    _core = _pure


class AsyncClient(_async_client.AsyncClient):
    __doc__ = _async_client.AsyncClient.__doc__
    __module__ = "rpcwire.pure"
    _core = _pure


class HttpClient(_http_client.HttpClient):
    __doc__ = _http_client.HttpClient.__doc__
    __module__ = "rpcwire.pure"
    _core = _pure


class AsyncHttpClient(_http_client.AsyncHttpClient):
    __doc__ = _http_client.AsyncHttpClient.__doc__
    __module__ = "rpcwire.pure"
    _core = _pure


class AsyncWebSocketClient(_ws_client.AsyncWebSocketClient):
    __doc__ = _ws_client.AsyncWebSocketClient.__doc__
    __module__ = "rpcwire.pure"
    _core = _pure
