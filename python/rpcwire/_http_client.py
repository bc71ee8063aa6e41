"""The HTTP clients: JSON-RPC over HTTP POST (``rpcwire.http``'s apps, or any server of the same convention).

Sync over the standard library's ``http.client`` (one keep-alive connection per thread, so calls from
many threads run at once), async over asyncio streams (a pool of keep-alive connections). Each call is
one POST; a call with ``on_progress`` also accepts ``text/event-stream`` and reads the events as they
arrive (each notification goes to its callbacks, the answer ends the stream). Requests are encoded and
answers classified by the same core as the stream clients (``_encode_request``, ``_parse_incoming``).

On a timeout the connection is closed (the server sees the client go; an rpcwire app stops sending) and
``TimeoutError`` is raised. A status other than 200/202/204 raises :class:`HttpError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import logging
import threading
import urllib.parse
from collections.abc import AsyncIterator, Iterable, Iterator
from types import TracebackType
from typing import Any

from rpcwire._client import ProgressCallback, _batch_outcome, _outcome, _outgoing_traceparent, _Peer
from rpcwire._types import Request, Response

__all__ = ["AsyncHttpClient", "HttpClient", "HttpError"]

logger = logging.getLogger("rpcwire.client")

_JSON = "application/json"
_Answers = dict["int | None", Response]  # the answers in a body by id; None: an error to the body as a whole
_EVENTS = "text/event-stream"


class HttpError(OSError):
    """The server answered with an HTTP status other than 200, 202 or 204 (``status``, ``body``)."""

    def __init__(self, status: int, reason: str, body: bytes) -> None:
        super().__init__(f"HTTP {status} {reason}: {body[:200]!r}")
        self.status = status
        self.reason = reason
        self.body = body


class _HttpPeer(_Peer):
    """What both HTTP clients share: the URL, the request's headers, and reading an answer."""

    def __init__(self, url: str, headers: dict[str, str] | None, timeout: float | None, dialect: str) -> None:
        super().__init__(None, dialect, timeout)
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"an http:// or https:// URL, not {url!r}")
        self._url = url
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or (443 if self._https else 80)
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._headers = dict(headers or {})

    def _request_headers(self, body: bytes, events: bool) -> dict[str, str]:
        headers = {"Content-Type": _JSON, "Accept": f"{_JSON}, {_EVENTS}" if events else _JSON}
        traceparent = _outgoing_traceparent()
        if traceparent is not None:
            headers["traceparent"] = traceparent
        headers.update(self._headers)
        headers["Content-Length"] = str(len(body))
        return headers

    def _answers(self, body: bytes) -> _Answers:
        """The answers in a body (one, or a batch's), by id; anything else is delivered or logged."""
        answers: _Answers = {}
        message = self._core._parse_incoming(body)
        for entry in message if isinstance(message, list) else [message]:
            if isinstance(entry, Response) and (type(entry.id) is int or entry.id is None):
                answers[entry.id] = entry  # None: the server's error to the body as a whole (-32700, -32600)
            elif isinstance(entry, Request):
                self._deliver(entry)
            else:
                logger.warning("dropped a message from the server: %s", entry if isinstance(entry, str) else entry.id)
        return answers

    def _event(self, data: bytes, answers: _Answers) -> None:
        """One SSE ``message`` event's data: a notification (to its callbacks) or an answer."""
        answers.update(self._answers(data))

    def _resolve(self, waiter: Any, response: Any) -> None:  # HTTP answers come back in their own response
        raise NotImplementedError

    def _serve_request(self, request: Request) -> None:
        logger.warning("dropped a request from the server over HTTP (%r): not supported", request.method)


def _is_event_stream(content_type: str | None) -> bool:
    return (content_type or "").split(";")[0].strip().lower() == _EVENTS


class _Events:
    """Server-sent events, a line at a time: ``line`` returns an event's data (its ``data:`` lines joined by
    ``\\n``) when the blank line that ends it arrives; ``end`` returns an event the stream left unended."""

    def __init__(self) -> None:
        self._data: list[bytes] = []

    def line(self, raw: bytes) -> bytes | None:
        line = raw.rstrip(b"\r\n")
        if not line:
            return self.end()
        if line.startswith(b"data:"):
            value = line[5:]
            self._data.append(value[1:] if value.startswith(b" ") else value)
        return None

    def end(self) -> bytes | None:
        data, self._data = self._data, []
        return b"\n".join(data) if data else None


def _sse_data(lines: Iterable[bytes]) -> Iterator[bytes]:
    """The data of each event in a stream of SSE lines, as each event ends."""
    events = _Events()
    for line in lines:
        if (data := events.line(line)) is not None:
            yield data
    if (data := events.end()) is not None:
        yield data


def _results(ids: list[int], answers: _Answers, batch: bool) -> Any:
    if not batch:
        answer = answers.get(ids[0], answers.get(None))
        if answer is None:
            raise ConnectionError(f"the server's answer holds no answer to id {ids[0]}")
        return _outcome(answer)
    outcomes: list[Any] = []
    for id_ in ids:
        answer = answers.get(id_)
        missing = ConnectionError(f"the server's answer holds no answer to id {id_}")
        outcomes.append(missing if answer is None else _batch_outcome(answer))
    return outcomes


class HttpClient(_HttpPeer):
    """A JSON-RPC client over HTTP: ``HttpClient("http://127.0.0.1:8000/rpc")``; ``call``, ``notify`` and
    ``batch`` as :class:`rpcwire.Client`'s. Thread-safe: each thread uses its own keep-alive connection.
    ``session``: a caller's own ``httpx.Client`` to post with instead (its pool, proxies, TLS and auth)."""

    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        dialect: str = "mcp",
        session: Any = None,
    ) -> None:
        super().__init__(url, headers, timeout, dialect)
        self._session = session
        self._local = threading.local()
        self._connections: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def call(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        """Call ``method`` and return its result (errors raised as :meth:`rpcwire.Client.call` raises them)."""
        id_, body = self._request_line(method, params, on_progress)
        try:
            return _results([id_], self._post(body, timeout, events=on_progress is not None), batch=False)
        finally:
            self._progress.pop(id_, None)

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (the server answers 202 or 204, no body)."""
        self._post(self._core._encode_request(method, params), None, events=False)

    def batch(self, calls: Iterable[tuple[str, Any]], *, timeout: float | None = None) -> list[Any]:
        """Send ``(method, params)`` calls as one batch; their results, or the exception each raised, in order."""
        ids, body = self._batch_lines(calls)
        if not ids:
            return []
        result: list[Any] = _results(ids, self._post(body, timeout, events=False), batch=True)
        return result

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection, and whether it was used before (a kept-alive one may be stale)."""
        connection: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        if connection is not None:
            return connection, True
        kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        connection = kind(self._host, self._port)
        self._local.connection = connection
        with self._lock:
            self._connections.append(connection)
        return connection, False

    def _drop_connection(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None
            with self._lock, contextlib.suppress(ValueError):
                self._connections.remove(connection)

    def _post(self, body: bytes, timeout: float | None, events: bool) -> _Answers:
        headers = self._request_headers(body, events)
        timeout = self._timeout if timeout is None else timeout
        if self._session is not None:
            return self._post_with_session(body, headers, timeout)
        for attempt in (1, 2):
            connection, reused = self._connection()
            connection.timeout = timeout
            if connection.sock is not None:
                connection.sock.settimeout(timeout)
            try:
                connection.request("POST", self._path, body, headers)
                response = connection.getresponse()
                return self._read(response)
            except TimeoutError:
                self._drop_connection()
                raise TimeoutError(f"no answer from {self._url} within {timeout} s") from None
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self._drop_connection()
                if not reused or attempt == 2:  # a fresh connection that fails: the server is at fault
                    raise
            except BaseException:
                self._drop_connection()
                raise
        raise AssertionError("unreachable")

    def _post_with_session(self, body: bytes, headers: dict[str, str], timeout: float | None) -> _Answers:
        """The same exchange through the caller's ``httpx.Client``."""
        try:
            with self._session.stream("POST", self._url, content=body, headers=headers, timeout=timeout) as response:
                if response.status_code in (202, 204):
                    response.read()
                    return {}
                if response.status_code != 200:
                    raise HttpError(response.status_code, response.reason_phrase, response.read())
                if _is_event_stream(response.headers.get("content-type")):
                    answers: _Answers = {}
                    for data in _sse_data(line.encode() for line in response.iter_lines()):
                        self._event(data, answers)
                    return answers
                return self._answers(response.read())
        except Exception as exc:
            if type(exc).__name__.endswith("Timeout") and type(exc).__module__.startswith("httpx"):
                raise TimeoutError(f"no answer from {self._url} within {timeout} s") from None
            raise

    def _read(self, response: http.client.HTTPResponse) -> _Answers:
        if response.status in (202, 204):
            response.read()
            return {}
        if response.status != 200:
            raise HttpError(response.status, response.reason, response.read())
        if _is_event_stream(response.getheader("Content-Type")):
            answers: _Answers = {}
            for data in _sse_data(iter(response.readline, b"")):
                self._event(data, answers)
            return answers
        return self._answers(response.read())

    def close(self) -> None:
        """Close every connection."""
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


class _AsyncConnection:
    """One keep-alive HTTP/1.1 connection of :class:`AsyncHttpClient`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def status_and_headers(self) -> tuple[int, str, dict[str, str]]:
        status_line = await self.reader.readline()
        if not status_line:
            raise http.client.RemoteDisconnected("the server closed the connection")
        _, status, reason = [*status_line.decode("latin-1").rstrip("\r\n").split(" ", 2), ""][:3]
        headers: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return int(status), reason, headers

    async def body(self, headers: dict[str, str]) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (``Content-Length``, chunked, or until the connection closes)."""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while size := int((await self.reader.readline()).split(b";")[0].strip() or b"0", 16):
                yield await self.reader.readexactly(size)
                await self.reader.readline()
            while (await self.reader.readline()) not in (b"\r\n", b"\n", b""):  # trailers
                pass
        elif "content-length" in headers:
            length = int(headers["content-length"])
            if length:
                yield await self.reader.readexactly(length)
        else:
            while chunk := await self.reader.read(65536):
                yield chunk

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class AsyncHttpClient(_HttpPeer):
    """The asyncio HTTP client: ``AsyncHttpClient(url)``; ``call``, ``notify`` and ``batch`` awaited. Up to
    ``max_connections`` keep-alive connections serve the calls in flight. ``session``: a caller's own
    ``httpx.AsyncClient`` to post with instead (then https:// works too)."""

    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        dialect: str = "mcp",
        max_connections: int = 16,
        session: Any = None,
    ) -> None:
        super().__init__(url, headers, timeout, dialect)
        self._session = session
        if self._https and session is None:
            raise ValueError("AsyncHttpClient speaks plain http:// only (put TLS in front of the server)")
        self._idle: list[_AsyncConnection] = []
        self._slots = asyncio.Semaphore(max_connections)

    async def call(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        """As :meth:`HttpClient.call`, awaited."""
        id_, body = self._request_line(method, params, on_progress)
        try:
            return _results([id_], await self._post(body, timeout, events=on_progress is not None), batch=False)
        finally:
            self._progress.pop(id_, None)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification."""
        await self._post(self._core._encode_request(method, params), None, events=False)

    async def batch(self, calls: Iterable[tuple[str, Any]], *, timeout: float | None = None) -> list[Any]:
        """As :meth:`HttpClient.batch`, awaited."""
        ids, body = self._batch_lines(calls)
        if not ids:
            return []
        result: list[Any] = _results(ids, await self._post(body, timeout, events=False), batch=True)
        return result

    async def _post(self, body: bytes, timeout: float | None, events: bool) -> _Answers:
        timeout = self._timeout if timeout is None else timeout
        try:
            return await asyncio.wait_for(self._exchange(body, events), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"no answer from {self._url} within {timeout} s") from None

    async def _exchange(self, body: bytes, events: bool) -> _Answers:
        if self._session is not None:
            return await self._exchange_with_session(body, self._request_headers(body, events))
        head = [f"POST {self._path} HTTP/1.1", f"Host: {self._host}:{self._port}"]
        head += [f"{name}: {value}" for name, value in self._request_headers(body, events).items()]
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        async with self._slots:
            for attempt in (1, 2):
                connection, reused = (self._idle.pop(), True) if self._idle else (await self._open(), False)
                try:
                    # Retried once on a kept-alive connection that fails before any byte of the response came
                    # (the server closed it while idle): the request cannot have been served. Never after.
                    try:
                        connection.writer.write(request)
                        status, reason, headers = await connection.status_and_headers()
                    except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                        connection.close()
                        if not reused or attempt == 2:
                            raise
                        continue
                    answers = await self._read(connection, status, reason, headers)
                except BaseException:  # a timeout (cancellation) included: the connection is mid-exchange
                    connection.close()
                    raise
                chunked = "chunked" in headers.get("transfer-encoding", "")
                delimited = status == 204 or "content-length" in headers or chunked
                if headers.get("connection", "").lower() == "close" or not delimited:
                    connection.close()  # (a body read to the connection's end leaves nothing to reuse)
                else:
                    self._idle.append(connection)
                return answers
        raise AssertionError("unreachable")

    async def _exchange_with_session(self, body: bytes, headers: dict[str, str]) -> _Answers:
        """The same exchange through the caller's ``httpx.AsyncClient`` (``_post`` bounds it in time)."""
        async with self._session.stream("POST", self._url, content=body, headers=headers, timeout=None) as response:
            if response.status_code in (202, 204):
                await response.aread()
                return {}
            if response.status_code != 200:
                raise HttpError(response.status_code, response.reason_phrase, await response.aread())
            if not _is_event_stream(response.headers.get("content-type")):
                return self._answers(await response.aread())
            answers: _Answers = {}
            events = _Events()
            async for line in response.aiter_lines():
                if (data := events.line(line.encode())) is not None:
                    self._event(data, answers)
            if (data := events.end()) is not None:
                self._event(data, answers)
            return answers

    async def _open(self) -> _AsyncConnection:
        reader, writer = await asyncio.open_connection(self._host, self._port, limit=1 << 26)
        return _AsyncConnection(reader, writer)

    async def _read(self, connection: _AsyncConnection, status: int, reason: str, headers: dict[str, str]) -> _Answers:
        if status == 204:  # never a body
            return {}
        if status == 202:
            async for _ in connection.body(headers):
                pass
            return {}
        body = connection.body(headers)
        if status != 200:
            raise HttpError(status, reason, b"".join([chunk async for chunk in body]))
        if not _is_event_stream(headers.get("content-type")):
            return self._answers(b"".join([chunk async for chunk in body]))
        answers: _Answers = {}
        events = _Events()
        pending = b""  # a line begun in one chunk and not ended yet
        async for chunk in body:
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                if (data := events.line(line)) is not None:
                    self._event(data, answers)
        for line in (pending, b""):
            if (data := events.line(line)) is not None:
                self._event(data, answers)
        return answers

    async def close(self) -> None:
        """Close every idle connection."""
        while self._idle:
            self._idle.pop().close()

    async def __aenter__(self) -> AsyncHttpClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.close()
