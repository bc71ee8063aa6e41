"""HTTP/1.1 without I/O, as the HTTP clients read it: a response's head and body from the bytes of each read
(:class:`_ResponseReader`), what a POST's answer says (a JSON body or an event stream: :class:`_Events`,
:class:`_Reply`, each bounded by ``max_message_bytes``), one POST's exchange (:class:`_Exchange`), and
:class:`HttpError`. Both clients (threads and asyncio) feed the same objects."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from rpcwire._types import ConnectionFailed, Response, TransportError

logger: logging.Logger = logging.getLogger("rpcwire.client")

_Answers = dict["int | None", Response]  # the answers in a body by id; None: an error with id null


class _HttpPeer(Protocol):
    """What a body's reader asks of its client (``rpcwire._http_client._HttpPeer``): its limits and its reading of
    a body's answers. A protocol here, so that this module imports nothing above it."""

    _limits: tuple[int, int, int | None]

    def _answers(self, body: bytes) -> tuple[_Answers, bool]: ...


_EVENTS = "text/event-stream"
_MAX_LINE = 65536  # a status line, header line or chunk-size line longer than this: not a server to talk to
_MAX_HEAD = 256 * 1024  # all the header lines of a response together
_MAX_ERROR_BODY = 65536  # what HttpError keeps of a refusal's body
_FIELD = len(b"data: \r")  # what an event-stream line may hold beyond its data: the field's name and a \r


class HttpError(TransportError):
    """The server answered with an HTTP status other than 200, 202 or 204 (``status``, ``reason``, ``body``: the
    body's bytes). Its text shows the body decoded (UTF-8, an undecodable byte replaced), its first 200
    characters: ``HTTP 415 Unsupported Media Type: expected application/json``."""

    def __init__(self, status: int, reason: str, body: bytes) -> None:
        text = body[:800].decode("utf-8", "replace").strip()  # 800 bytes: 200 characters of any width
        if len(text) > 200:
            text = text[:200] + "…"
        super().__init__(f"HTTP {status} {reason}" + (f": {text}" if text else ""))
        self.status = status
        self.reason = reason
        self.body = body


def _sent_but_unanswered(cause: str) -> ConnectionFailed:
    return ConnectionFailed(f"{cause}; the request was sent and may have run, so it is not sent again")


def _over_limit(limit: int) -> ConnectionFailed:
    """An answer longer than ``max_message_bytes``: raised as soon as it is known, the rest left unread."""
    return _sent_but_unanswered(f"the answer is over max_message_bytes ({limit}), its connection closed unread")


# --- HTTP/1.1 without I/O --------------------------------------------------------------------------------


class _ResponseReader:
    """One HTTP/1.1 response, without I/O. ``feed`` each read's bytes and get back the body's bytes that
    came whole (chunked coding removed); ``end`` when the connection has closed. ``head`` is set once the
    status line and headers are read (``status``, ``reason``, ``headers`` with lower-case names, repeated
    ones joined by ``", "``), ``done`` once the body is whole; ``reusable`` says whether the connection may
    then carry another request. Interim (1xx) responses are skipped. A malformed response raises
    ``ConnectionError``."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._state = "status"  # status, headers, length, chunk-size, chunk, chunk-end, trailers, close, done
        self._left = 0  # bytes left of the body (length) or of the chunk
        self._head_bytes = 0
        self._version = ""
        self.head = False
        self.done = False
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}

    @property
    def reusable(self) -> bool:
        """The body ended where its framing said, nothing came after it, and neither side asked to close."""
        if not self.done or self._buffer or self._state != "done":
            return False
        if "transfer-encoding" in self.headers and "content-length" in self.headers:
            return False  # RFC 9112 §6.3: the coding wins, but the mark of response splitting: never reused
        tokens = {token.strip().lower() for token in self.headers.get("connection", "").split(",")}
        if self._version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens

    def feed(self, data: bytes) -> bytes:
        """The body's bytes in ``data`` (and what was left of earlier reads)."""
        self._buffer += data
        body: list[bytes] = []
        while self._step(body):
            pass
        return b"".join(body)

    def end(self) -> bytes:
        """The connection closed: the end of a body delimited by it; else ``ConnectionError``."""
        if self._state == "close":
            self._state, self.done = "close-done", True
            body, self._buffer = bytes(self._buffer), bytearray()
            return body
        if self.done:
            return b""
        if self._state == "status" and not self._buffer and not self._head_bytes:
            raise ConnectionFailed("the server closed the connection without answering")
        raise ConnectionFailed("the server closed the connection in the middle of its answer")

    def _line(self) -> bytes | None:
        end = self._buffer.find(b"\n")
        if end < 0:
            if len(self._buffer) > _MAX_LINE:
                raise ConnectionFailed("a malformed HTTP response: a line over 64 KiB")
            return None
        line = bytes(self._buffer[:end]).rstrip(b"\r")
        del self._buffer[: end + 1]
        return line

    def _step(self, body: list[bytes]) -> bool:
        """One step of the state machine; ``False`` when it needs more bytes (or is done)."""
        state = self._state
        if state in ("length", "chunk"):
            if not self._buffer:
                return False
            take = bytes(self._buffer[: self._left])
            del self._buffer[: len(take)]
            self._left -= len(take)
            body.append(take)
            if not self._left:
                if state == "length":
                    self._finish()
                else:
                    self._state = "chunk-end"
            return True
        if state == "close":
            if self._buffer:
                body.append(bytes(self._buffer))
                self._buffer.clear()
            return False
        if state == "done":
            return False
        line = self._line()
        if line is None:
            return False
        if state == "status":
            self._status_line(line)
        elif state == "headers":
            self._head_bytes += len(line) + 2
            if self._head_bytes > _MAX_HEAD:
                raise ConnectionFailed("a malformed HTTP response: headers over 256 KiB")
            if line:
                self._header(line)
            else:
                self._end_of_head()
        elif state == "chunk-size":
            size = line.split(b";")[0].strip()
            if not 0 < len(size) <= 16 or size.translate(None, b"0123456789abcdefABCDEF"):
                raise ConnectionFailed(f"a malformed HTTP response: chunk size {size[:40]!r}")
            self._left = int(size, 16)
            self._state = "chunk" if self._left else "trailers"
        elif state == "chunk-end":
            if line:
                raise ConnectionFailed("a malformed HTTP response: a chunk longer than its size")
            self._state = "chunk-size"
        elif state == "trailers" and not line:
            self._finish()
        return True

    def _finish(self) -> None:
        self._state, self.done = "done", True

    def _status_line(self, line: bytes) -> None:
        if not line and not self._head_bytes:
            return  # a blank line before the status line is tolerated (RFC 9112 §2.2)
        parts = line.decode("latin-1").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not (parts[1].isdigit() and len(parts[1]) == 3):
            raise ConnectionFailed(f"a malformed HTTP response: status line {line[:80]!r}")
        self._version, self.status, self.reason = parts[0], int(parts[1]), (parts[2] if len(parts) > 2 else "")
        self._head_bytes += len(line) + 2
        self.headers = {}
        self._state = "headers"

    def _header(self, line: bytes) -> None:
        name, colon, value = line.decode("latin-1").partition(":")
        if not colon or not name or name != name.strip():
            raise ConnectionFailed(f"a malformed HTTP response: header line {line[:80]!r}")
        name, value = name.lower(), value.strip()
        self.headers[name] = f"{self.headers[name]}, {value}" if name in self.headers else value

    def _end_of_head(self) -> None:
        if 100 <= self.status < 200:  # an interim response (100 Continue, 103 Early Hints): the real one follows
            self._head_bytes = 0
            self._state = "status"
            return
        self.head = True
        codings = [c.strip().lower() for c in self.headers.get("transfer-encoding", "").split(",") if c.strip()]
        if self.status in (204, 304):
            self._finish()
        elif codings:
            if codings[-1] != "chunked":
                self._state = "close"  # RFC 9112 §6.3: a coding other than chunked last: read until the close
            else:
                self._state = "chunk-size"
        elif "content-length" in self.headers:
            values = {v.strip() for v in self.headers["content-length"].split(",")}
            if len(values) != 1 or not ((value := values.pop()).isascii() and value.isdigit()):
                raise ConnectionFailed(f"a malformed HTTP response: Content-Length {self.headers['content-length']!r}")
            self._left = int(value)
            if self._left:
                self._state = "length"
            else:
                self._finish()
        else:
            self._state = "close"


# --- what a POST's answer says ---------------------------------------------------------------------------


def _is_event_stream(content_type: str | None) -> bool:
    return (content_type or "").split(";")[0].strip().lower() == _EVENTS


class _Events:
    """Server-sent events, a line at a time: ``line`` returns an event's data (its ``data:`` lines joined by
    ``\\n``) when the blank line that ends it arrives; ``end`` returns an event the stream left unended. An
    event's data longer than ``limit`` raises ``ConnectionError`` at the line that passes it."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._data: list[bytes] = []
        self._size = 0  # the event's data so far, the \n that join its lines included

    def line(self, raw: bytes) -> bytes | None:
        line = raw.rstrip(b"\r\n")
        if not line:
            return self.end()
        if line.startswith(b"data:"):
            value = line[5:]
            value = value[1:] if value.startswith(b" ") else value
            self._size += len(value) + (1 if self._data else 0)
            if self._size > self._limit:
                raise _over_limit(self._limit)
            self._data.append(value)
        return None

    def end(self) -> bytes | None:
        data, self._data, self._size = self._data, [], 0
        return b"\n".join(data) if data else None


class _Reply:
    """The body of the answer to one POST, as its bytes arrive: ``body`` each piece, ``answers`` at the end
    (or as soon as ``answered``). ``answered``: an event stream carried the answer to every call of the POST
    (or the server's refusal of it, an error with ``id: null`` alone), so nothing more need be read.

    What it holds is bounded by the peer's ``max_message_bytes`` (plus one piece): a JSON answer longer than
    that (its ``Content-Length`` already, here), an event's data or a line of the stream, raises
    ``ConnectionError`` from the piece that passes it; the caller then closes the connection."""

    def __init__(self, peer: _HttpPeer, ids: Iterable[int], status: int, reason: str, headers: dict[str, str]) -> None:
        self._peer = peer
        self._ids = set(ids)
        self._status = status
        self._reason = reason
        self._limit = limit = peer._limits[0]
        self.stream = status == 200 and _is_event_stream(headers.get("content-type"))
        self._parts: list[bytes] = []
        self._size = 0
        self._line: list[bytes] = []  # the event-stream line begun and not ended yet, in pieces
        self._line_size = 0
        self._events = _Events(limit)
        self._answers: _Answers = {}
        self.answered = False
        if status == 200 and not self.stream and not {"transfer-encoding", "content-encoding"} & headers.keys():
            length = headers.get("content-length", "").strip()
            if length.isascii() and length.isdigit() and int(length) > limit:
                raise _over_limit(limit)  # known at the head: not a byte of the body is read

    def body(self, data: bytes) -> None:
        if not data or self.answered:
            return
        if not self.stream:
            if self._status == 200 or self._size < _MAX_ERROR_BODY:
                self._size += len(data)
                if self._status == 200 and self._size > self._limit:
                    raise _over_limit(self._limit)
                self._parts.append(data)
            return
        if b"\n" not in data:  # a long line in many pieces is joined once, at its end
            self._line_size += len(data)
            if self._line_size > self._limit + _FIELD:
                raise _over_limit(self._limit)
            self._line.append(data)
            return
        lines = data.split(b"\n")
        if self._line:
            lines[0] = b"".join([*self._line, lines[0]])
        tail = lines.pop()
        self._line = [tail] if tail else []
        self._line_size = len(tail)
        if self._line_size > self._limit + _FIELD:
            raise _over_limit(self._limit)
        for line in lines:
            if (event := self._events.line(line)) is not None:
                self._event(event)
                if self.answered:
                    return  # what follows the answer is not read (a later notification is the server's loss)

    def _event(self, data: bytes) -> None:
        answers, refused = self._peer._answers(data)
        self._answers.update(answers)
        self.answered = bool(self._ids) and (refused or self._ids <= self._answers.keys())

    def answers(self) -> _Answers:
        """Every answer read (the body is whole, or ``answered``); ``HttpError`` for a refusal's status."""
        if self._status in (202, 204):
            return {}
        if self._status != 200:
            raise HttpError(self._status, self._reason, b"".join(self._parts)[:_MAX_ERROR_BODY])
        if not self.stream:
            return self._peer._answers(b"".join(self._parts))[0]
        if not self.answered:
            for line in (b"".join(self._line), b""):
                if (event := self._events.line(line)) is not None:
                    self._event(event)
        return self._answers


class _Exchange:
    """One POST's response as the connection gives it: ``feed`` each read's bytes (``b""`` at the
    connection's end) until it returns true; then ``reusable`` and ``answers()``."""

    def __init__(self, peer: _HttpPeer, ids: Iterable[int]) -> None:
        self._peer = peer
        self._ids = ids
        self._response = _ResponseReader()
        self._reply: _Reply | None = None

    def feed(self, data: bytes) -> bool:
        try:
            body = self._response.feed(data) if data else self._response.end()
        except ConnectionError as exc:
            raise _sent_but_unanswered(str(exc)) from None
        response = self._response
        if self._reply is None and response.head:
            self._reply = _Reply(self._peer, self._ids, response.status, response.reason, response.headers)
        if self._reply is not None:
            self._reply.body(body)
            if self._reply.answered:
                return True
        return response.done

    @property
    def reusable(self) -> bool:
        return self._response.reusable

    def answers(self) -> _Answers:
        assert self._reply is not None
        return self._reply.answers()
