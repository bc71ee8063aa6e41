"""The WebSocket client, :class:`rpcwire.AsyncWebSocketClient`: the asyncio client over one WebSocket connection.

It is :class:`~rpcwire._async_client.AsyncClient` (so :class:`~rpcwire._peer._Peer`: ids, matching answers, the
ledger, the dialects, notification callbacks on a dispatcher task, the server's own requests answered by
``handler``) with a WebSocket connection instead of a byte stream, made by the ``websockets`` library (the extra
``rpcwire[websocket]``; imported when a client connects, so ``import rpcwire`` never needs it):

- **Frames, not lines.** Each message is one text frame; each frame the server sends is one message (an answer,
  a batch's answers, a notification, a request of the server's), classified by the core (``_parse_incoming``).
  A frame over ``max_message_bytes`` closes the connection (the library refuses it before it is held whole:
  close code 1009) and the calls waiting fail with :class:`~rpcwire.ConnectionClosed`.
- **Writing** never blocks a caller's coroutine while the connection has room: a message goes into the client's
  own queue, which a sender task hands to the library one frame at a time (the library waits while its transport's
  buffer is full). A call waits (within its deadline) while more than 64 KiB wait in that queue, as
  ``AsyncClient`` waits for its stream's buffer.
- **The end.** When the server closes the connection (or it drops), every call waiting fails with
  :class:`~rpcwire.ConnectionClosed` whose message holds the close code and reason; :meth:`close` closes it
  (code 1000) and fails what still waits.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import ssl
import urllib.parse
from collections.abc import Sequence
from typing import Any, NoReturn

from rpcwire import _async_client
from rpcwire._http_client_tls import Verify, _tls_context, _untrusted
from rpcwire._http_client_wire import HttpError
from rpcwire._types import DEFAULT_MAX_BATCH, DEFAULT_MAX_DEPTH, DEFAULT_MAX_MESSAGE_BYTES, Handler, Response

__all__ = ["AsyncWebSocketClient"]

logger: logging.Logger = logging.getLogger("rpcwire.client")

_SUBPROTOCOL = "jsonrpc"
_NO_LIBRARY = "AsyncWebSocketClient needs the websockets library: pip install 'rpcwire[websocket]'"


def _as_is(line: bytes) -> bytes:
    """A message as its frame carries it: the JSON text alone (a frame needs no line terminator)."""
    return line


class _Frames:
    """The client's outgoing frames, as :class:`AsyncClient` writes to a transport: ``write`` never waits (the
    message is queued), ``get_write_buffer_size`` says how much waits, :meth:`drained` waits until little does.
    A sender task hands each message to the connection as one text frame."""

    def __init__(self, connection: Any, loop: asyncio.AbstractEventLoop, low_water: int) -> None:
        self._connection = connection
        self._queue: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._low_water = low_water
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._failure: BaseException | None = None
        self.sender = loop.create_task(self._send())

    def write(self, data: bytes) -> None:
        if self._failure is not None:
            raise ConnectionResetError(f"the WebSocket connection is closed ({self._failure})")
        self._queue.append(data)
        self._size += len(data)
        self._wake.set()
        if self._size > self._low_water:
            self._room.clear()

    def get_write_buffer_size(self) -> int:
        return self._size

    async def drained(self) -> None:
        """Until at most 64 KiB wait to be sent; ``ConnectionResetError`` once the connection failed."""
        await self._room.wait()
        if self._failure is not None:
            raise ConnectionResetError(f"the WebSocket connection is closed ({self._failure})")

    def close(self) -> None:
        """Nothing more is written (what is queued is dropped: the connection closes)."""
        if self._failure is None:
            self._failure = ConnectionResetError("the client was closed")
        self._queue.clear()
        self._room.set()
        self.sender.cancel()

    async def _send(self) -> None:
        queue, connection = self._queue, self._connection
        try:
            while True:
                while not queue:
                    self._wake.clear()
                    await self._wake.wait()
                data = queue.popleft()
                self._size -= len(data)
                if self._size <= self._low_water:
                    self._room.set()
                await connection.send(data, text=True)  # a text frame, the bytes as they are (UTF-8 JSON)
        except Exception as exc:  # the connection closed or failed: the reader says why, and ends the client
            self._failure = exc
            queue.clear()
            self._room.set()


class AsyncWebSocketClient(_async_client.AsyncClient):
    """The asyncio client over a WebSocket (``ws://`` or ``wss://``): ``await AsyncWebSocketClient.connect(url)``,
    or ``async with AsyncWebSocketClient.connect(url) as client``. ``call``, ``notify``, ``batch``,
    ``on_notification``, ``on_progress``, ``timeout`` and ``dialect`` as :class:`AsyncClient`'s: any number of
    calls in flight on the one connection, answered in any order; cancelling a call (or its timeout) sends the
    server a cancellation in the client's dialect. Needs the ``websockets`` library (``rpcwire[websocket]``)."""

    _connection: Any  # websockets.asyncio.client.ClientConnection
    _frames: _Frames

    def __init__(self) -> None:
        raise TypeError("use `await AsyncWebSocketClient.connect(url)` (or `async with ... .connect(url)`)")

    @classmethod
    def spawn(cls, *args: Any, **kwargs: Any) -> NoReturn:  # no docstring: not in the reference
        # AsyncClient's, which starts a process: a WebSocket client only connects to a URL.
        raise TypeError("AsyncWebSocketClient connects to a URL: `await AsyncWebSocketClient.connect(url)`")

    @classmethod
    def connect(
        cls,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        origin: str | None = None,
        subprotocols: Sequence[str] = (_SUBPROTOCOL,),
        handler: Handler | None = None,
        dialect: str = "mcp",
        timeout: float | None = None,
        open_timeout: float | None = 10.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_batch: int | None = DEFAULT_MAX_BATCH,
        verify: Verify = True,
        **options: Any,
    ) -> _async_client.Opening[AsyncWebSocketClient]:
        """Open a connection to ``url`` (awaited, or used as ``async with``). ``headers``: sent with the handshake
        (``Authorization``...); ``origin``: the ``Origin`` header (a browser's; none by default); ``subprotocols``:
        offered (``jsonrpc``); ``open_timeout``: for the handshake (a refused one raises
        :class:`~rpcwire.HttpError` with the server's status). ``handler`` answers the server's own requests
        (-32601 without one). The limits are :class:`AsyncClient`'s; a frame over ``max_message_bytes`` from the
        server closes the connection. ``verify`` (wss://) as :class:`~rpcwire.HttpClient`'s: ``True`` (the
        system's trust store), a CA bundle's path, an ``ssl.SSLContext``, or ``False`` (no check). Proxies are
        the library's (``proxy=``; by default ``HTTPS_PROXY``, ``NO_PROXY``... from the environment). Other
        keywords go to ``websockets.asyncio.client.connect`` (``ping_interval``, ``compression``...)."""
        return _async_client.Opening(
            cls._open(
                url,
                headers=headers,
                origin=origin,
                subprotocols=subprotocols,
                handler=handler,
                dialect=dialect,
                timeout=timeout,
                open_timeout=open_timeout,
                max_message_bytes=max_message_bytes,
                max_depth=max_depth,
                max_batch=max_batch,
                verify=verify,
                options=options,
            )
        )

    @classmethod
    async def _open(
        cls,
        url: str,
        *,
        headers: dict[str, str] | None,
        origin: str | None,
        subprotocols: Sequence[str],
        handler: Handler | None,
        dialect: str,
        timeout: float | None,
        open_timeout: float | None,
        max_message_bytes: int,
        max_depth: int,
        max_batch: int | None,
        verify: Verify,
        options: dict[str, Any],
    ) -> AsyncWebSocketClient:
        try:
            from websockets.asyncio.client import connect  # noqa: PLC0415  (the optional extra, when a client connects)
        except ImportError as missing:
            raise ImportError(_NO_LIBRARY) from missing
        if url[:6].lower() == "wss://":
            if "ssl" in options and verify is not True:
                raise ValueError("ssl= and verify= are the same setting: give one")
            options.setdefault("ssl", _tls_context(verify))
        client = cls.__new__(cls)  # not __init__: the connection below is the client's stream
        client._prepare(
            handler,
            dialect,
            timeout,
            max_message_bytes=max_message_bytes,
            max_depth=max_depth,
            max_batch=max_batch,
            framing="newline",
        )
        from websockets.exceptions import InvalidStatus  # noqa: PLC0415  (the extra)

        try:
            connection = await connect(
                url,
                additional_headers=headers,
                origin=origin,  # type: ignore[arg-type]
                subprotocols=list(subprotocols) or None,  # type: ignore[arg-type]
                open_timeout=open_timeout,
                max_size=client._limits[0],
                **options,
            )
        except InvalidStatus as refused:  # the handshake refused (403, 421...): as the HTTP clients report a status
            response = refused.response
            raise HttpError(response.status_code, response.reason_phrase, bytes(response.body or b"")) from None
        except ssl.SSLCertVerificationError as exc:
            raise _untrusted(exc, urllib.parse.urlsplit(url).hostname or url) from None
        client._connection = connection
        client._frames = _Frames(connection, client._loop, _async_client._WRITE_BUFFER)
        client._output = client._frames  # type: ignore[assignment]
        client._frame = _as_is  # one message, one frame: no line's end
        client._output_drained = client._frames.drained
        client._keep(client._loop.create_task(client._read_frames()))
        return client

    @property
    def subprotocol(self) -> str | None:
        """The subprotocol the server accepted (``"jsonrpc"``), or ``None``."""
        subprotocol: str | None = self._connection.subprotocol
        return subprotocol

    async def _read_frames(self) -> None:
        """Each frame, as it comes, delivered at once (an answer resolves its call's future here)."""
        from websockets.exceptions import ConnectionClosed as WebSocketClosed  # noqa: PLC0415  (the extra)

        connection, core, max_depth = self._connection, self._core, self._max_depth
        cause = "the server closed the connection"
        try:
            while True:
                data = await connection.recv(decode=False)
                parsed = core._parse_incoming(data, max_depth)
                if type(parsed) is Response:
                    self._take_answer(parsed)
                else:
                    self._deliver((parsed, data) if isinstance(parsed, str) else parsed)
        except WebSocketClosed as closed:
            received = closed.rcvd if closed.rcvd is not None else closed.sent
            if received is not None:
                cause += f" (code {received.code}{': ' + received.reason if received.reason else ''})"
            else:
                cause += " (no close frame: the connection dropped)"
        except Exception as exc:  # a delivery that fails: the client cannot go on
            logger.exception("the client's reader stopped")
            cause = f"reading from the server failed: {exc!r}"
        self._read_over = True
        self._keep(self._loop.create_task(self._close_reading(cause)))

    async def close(self, grace: float = 5.0) -> None:
        """Close the connection (code 1000, waiting ``grace`` seconds at most for the server's reply); every call
        still waiting fails with :class:`~rpcwire.ConnectionClosed`."""
        self._frames.close()
        with contextlib.suppress(Exception, asyncio.TimeoutError):
            await asyncio.wait_for(self._connection.close(), grace)
        await super().close(grace)

    async def __aenter__(self) -> AsyncWebSocketClient:  # (the type; AsyncClient's __aexit__ closes)
        return self
