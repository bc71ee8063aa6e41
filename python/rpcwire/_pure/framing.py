"""Framing in Python: bytes in, messages out (:class:`FrameDecoder`), and a message's bytes out (:func:`encode_frame`).

The rules of the native ``Decoder`` (``crates/rpcwire-protocol/src/framing.rs``; ``docs/semantics.md``,
"Framing" and "Content-Length framing"), written once in Python: the pure transport reads through it, and
so do ``rpcwire.lsp``, ``--listen`` and the MCP reader on the pure core; the asyncio client reads through
its core's. The decoder does no I/O (in the style of h11): its owner reads and
:meth:`~FrameDecoder.feed`\\ s what it read, then takes messages out with :meth:`~FrameDecoder.next` until it
says ``None`` (more input needed).

A message dropped unread (over ``max_message_bytes``, or a frame that cannot be read) is handed out as a
:class:`~rpcwire._types.Refused`: why, and the answer a server writes for it. Neither framing ever holds
more than one message, one header block and what one read returned, whatever arrives.
"""

from __future__ import annotations

import re
import threading
from typing import cast

from rpcwire._pure.codec import JSON_WHITESPACE
from rpcwire._pure.envelope import answer_refused, check_limit, refused, too_long
from rpcwire._types import DEFAULT_MAX_MESSAGE_BYTES, FRAMINGS, Framing, Refused

__all__ = ["FRAMINGS", "FrameDecoder", "check_framing", "encode_frame"]


def check_framing(framing: object) -> Framing:
    """``framing`` if it names a framing; else ``ValueError`` (the words of every ``framing=`` keyword)."""
    if framing not in FRAMINGS:
        raise ValueError(f"framing must be 'newline' or 'content-length', not {framing!r}")
    return framing


def encode_frame(body: bytes) -> bytes:
    """One ``Content-Length`` frame: the header LSP's base protocol requires (``N`` counts bytes; no
    ``Content-Type``: the specification's default describes the body) and ``body``."""
    return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


_BLANK = b" \t\r"  # what a blank line is made of


def _is_blank(data: bytes | bytearray) -> bool:
    """A blank line, which a reader of lines skips (and which ends a header block): spaces, tabs and ``\\r``."""
    return not data.strip(_BLANK)


# --- Content-Length framing: the states of a frame being read --------------------------------------------

_HEADER_LIMIT = 8 * 1024
_RESYNC_NAME = re.compile(rb"content-length", re.IGNORECASE)
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_LENGTH = re.compile(rb"[0-9]{1,18}")
_HEADER_SPACE = b" \t\n\x0c\r"  # what Rust's trim_ascii trims
_BAD_HEADER = "a header line that is not 'Name: value' or a bad Content-Length"
_HEADERS_TOO_LONG = "a header block longer than 8192 bytes"
_MISSING_LENGTH = "a header block without Content-Length"
_TRUNCATED = "a frame cut short by the end of input"
_HEADERS, _BODY, _SKIP, _RESYNC = range(4)
_BAD = object()  # a header line that is not one


def _header_length(line: bytes) -> int | object | None:
    """``Content-Length``'s value, ``None`` for another header, ``_BAD`` for a line that is not a header."""
    name, colon, value = line.partition(b":")
    if not colon or not _TOKEN.fullmatch(name):
        return _BAD
    if name.lower() != b"content-length":
        return None
    value = value.strip(_HEADER_SPACE)
    if not _LENGTH.fullmatch(value):
        return _BAD
    return int(value)


class FrameDecoder:
    """Framing without I/O (:class:`rpcwire._contract.FrameDecoder`): :meth:`feed` the bytes read,
    :meth:`close` at the end of input, take messages out with :meth:`next`.

    ``framing="newline"``: a message per line, ending at ``\\n`` (a ``\\r`` before it dropped); blank lines
    are skipped (``skip_blank=False``, a ``bool``, hands them out instead, as ``read_line`` does, for a reader that must
    see each one: the MCP reader); after :meth:`close` a last line without ``\\n`` is a message.
    ``"content-length"``: LSP's header block and body, read tolerantly (``docs/semantics.md``; a body is
    never skipped, even empty, so ``skip_blank`` changes nothing there). A message longer than
    ``max_message_bytes`` is dropped as it arrives, never held whole, and handed out as a
    :class:`~rpcwire._types.Refused`, as is a frame that cannot be read (the decoder then resynchronises
    at the next ``Content-Length``).

    Threads may share one: :meth:`feed`, :meth:`close` and :meth:`next` take turns on a lock, so that each
    message is handed out once, whole, to one caller (as the native core's ``FrameDecoder`` does).
    """

    def __init__(
        self,
        framing: Framing = "newline",
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        skip_blank: bool = True,
    ) -> None:
        self._lines = check_framing(framing) == "newline"
        self._max = check_limit("max_message_bytes", max_message_bytes)
        if type(skip_blank) is not bool:  # a truthy "no" or a falsy [] would mean the opposite of what it says
            raise TypeError(f"skip_blank must be a bool, not {type(skip_blank).__name__}")
        self._skip_blank = skip_blank  # newline framing: blank lines skipped, or handed out
        self._closed = False
        self._ready: bytes | Refused | None = None  # taken out ahead by ``_buffered``
        # newline: the lines cut so far (a "\r" not yet dropped), from ``_next`` on; the start of the line not
        # ended yet; once that is over the limit, the first significant byte of the line being dropped instead
        self._queue: list[bytes | Refused] = []
        self._next = 0
        self._parts: list[bytes] = []
        self._parts_size = 0
        self._discarding = False
        self._first = b""
        # content-length: the bytes not handed out yet (from ``_pos`` on), and the frame being read
        self._data = bytearray()
        self._pos = 0
        self._state = _HEADERS
        self._length: int | None = None
        self._started = False  # a header line of this block was read
        self._used = 0  # bytes of this header block read
        self._left = 0  # bytes of body still to read (or to drop)
        self._take = self._take_line if self._lines else self._take_frame
        self._lock = threading.Lock()  # feed, close and next, from several threads: one at a time

    @property
    def framing(self) -> Framing:
        """``"newline"`` or ``"content-length"``."""
        return "newline" if self._lines else "content-length"

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add bytes read from the stream (``b""`` is not the end of input: see :meth:`close`)."""
        with self._lock:
            self._feed(data)

    def _feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._closed:
            raise ValueError("feed() after close(): the input has ended")
        if not self._lines:
            if self._pos:  # only what is not handed out yet is kept
                del self._data[: self._pos]
                self._pos = 0
            self._data += data
            return
        # All the lines a read holds are cut at once (in C), and handed out one by one.
        pieces = (data if type(data) is bytes else memoryview(data).tobytes()).split(b"\n")
        rest = pieces.pop()
        if pieces:
            lines = cast("list[bytes | Refused]", pieces)  # a refusal may take the first one's place
            if self._parts or self._discarding:
                lines[0] = self._end_line(pieces[0])
            if self._next == len(self._queue):
                self._queue, self._next = lines, 0
            else:
                self._queue += lines
        if rest:
            self._add_to_line(rest)

    def close(self) -> None:
        """The end of input: :meth:`next` then hands out what is left (a last line without ``\\n`` is a
        message; an unfinished frame is a :class:`~rpcwire._types.Refused`) and ``None`` after it."""
        with self._lock:
            if self._lines and not self._closed and (self._parts or self._discarding):
                self._queue.append(self._end_line(b""))
            self._closed = True

    def next(self) -> bytes | Refused | None:
        """The next message's bytes, a :class:`~rpcwire._types.Refused` for one that was dropped (logged at
        DEBUG as a server logs its answer), or ``None`` when more input is needed (or, after :meth:`close`,
        when nothing is left). A blank line is skipped, or handed out with ``skip_blank=False``."""
        with self._lock:
            message = self._next_message(self._skip_blank)
        if isinstance(message, Refused):
            answer_refused(message)
        return message

    # --- for the transport, which logs a refusal only where it answers it ------------------------------------

    def _next_message(self, skip_blank: bool = True) -> bytes | Refused | None:
        """As :meth:`next`, nothing logged; blank lines skipped only if ``skip_blank`` (``read_line`` keeps them)."""
        while True:
            message = self._ready
            if message is None:
                message = self._take()
            else:
                self._ready = None
            # A blank line (spaces, tabs, "\r") is skipped; a frame's body never is: its header said it is there.
            if message is None or not skip_blank or not self._lines or type(message) is not bytes:
                return message
            if message.strip(_BLANK):
                return message

    def _buffered(self, skip_blank: bool = False) -> bool:
        """Whether ``_next_message(skip_blank)`` returns without more input: a message is buffered, or the input
        ended. The message is taken out ahead (and handed out next), so with ``skip_blank`` the blank lines
        before it are dropped, as that reader would drop them (a blank line alone is no message to it)."""
        self._ready = self._next_message(skip_blank)
        return self._ready is not None or self._closed

    def _held(self) -> int:
        """How many bytes of a message not handed out yet are held (the lines already cut aside)."""
        return self._parts_size + len(self._data) - self._pos

    # --- newline framing --------------------------------------------------------------------------------

    def _take_line(self) -> bytes | Refused | None:
        at = self._next
        if at == len(self._queue):
            return None
        self._next = at + 1
        line = self._queue[at]
        if type(line) is bytes:
            if line.endswith(b"\r"):
                line = line[:-1]
            if len(line) > self._max:
                return too_long(line.lstrip(JSON_WHITESPACE)[:1], self._max)
        return line

    def _add_to_line(self, piece: bytes) -> None:
        """The start (or more) of a line whose ``\\n`` has not come yet: kept while it may still be within the
        limit (one byte of slack: a ``\\r`` before the ``\\n`` is not part of the line), dropped after."""
        if not self._discarding:
            self._parts.append(piece)
            self._parts_size += len(piece)
            if self._parts_size <= self._max + 1:
                return
            piece = b"".join(self._parts)
            self._parts, self._parts_size, self._discarding = [], 0, True
        self._first = self._first or piece.lstrip(JSON_WHITESPACE)[:1]

    def _end_line(self, end: bytes) -> bytes | Refused:
        """The line that ``end`` ends: its bytes, or, for one that was dropped, its refusal."""
        if self._discarding:
            first = self._first or end.lstrip(JSON_WHITESPACE)[:1]
            self._discarding, self._first = False, b""
            return too_long(first, self._max)
        self._parts.append(end)
        line = b"".join(self._parts)
        self._parts, self._parts_size = [], 0
        return line

    # --- Content-Length framing -----------------------------------------------------------------------

    def _new_block(self) -> None:
        self._state = _HEADERS
        self._length = None
        self._started = False
        self._used = 0

    def _fail(self, position: int, reason: str) -> Refused:
        """A frame that cannot be read (-32700): what follows is read from ``position`` on, resynchronising."""
        self._pos = position
        self._state = _RESYNC
        return refused(reason, False)

    def _take_frame(self) -> bytes | Refused | None:
        data = self._data
        while True:
            if self._state == _HEADERS:
                newline = data.find(b"\n", self._pos)
                if newline < 0:
                    if self._used + len(data) - self._pos > _HEADER_LIMIT:
                        return self._fail(self._pos + _HEADER_LIMIT - self._used, _HEADERS_TOO_LONG)
                    if not self._closed:
                        return None
                    clean = not self._started and _is_blank(data[self._pos :])
                    self._pos = len(data)
                    self._state = _RESYNC
                    return None if clean else refused(_TRUNCATED, False)
                size = newline + 1 - self._pos
                if self._used + size > _HEADER_LIMIT:
                    return self._fail(self._pos + _HEADER_LIMIT - self._used, _HEADERS_TOO_LONG)
                line = bytes(data[self._pos : newline])
                if _is_blank(line):
                    self._pos = newline + 1
                    if not self._started:
                        self._new_block()
                    elif self._length is None:
                        return self._fail(self._pos, _MISSING_LENGTH)
                    elif self._length <= self._max:
                        self._state, self._left = _BODY, self._length
                    else:  # refused as soon as the block ends; its body is dropped as it arrives
                        self._state, self._left = _SKIP, self._length
                        return refused(f"a Content-Length ({self._length}) over max_message_bytes ({self._max})", True)
                    continue
                found = _header_length(line)
                if found is _BAD or (found is not None and self._length not in (None, found)):
                    return self._fail(newline + 1, _BAD_HEADER)
                if found is not None:
                    self._length = found  # type: ignore[assignment]  # an int: _BAD is gone
                self._started = True
                self._used += size
                self._pos = newline + 1
            elif self._state == _BODY:
                if len(data) - self._pos >= self._left:
                    body = bytes(data[self._pos : self._pos + self._left])
                    self._pos += self._left
                    self._new_block()
                    return body
                if not self._closed:
                    return None
                return self._fail(len(data), _TRUNCATED)
            elif self._state == _SKIP:
                dropped = min(len(data) - self._pos, self._left)
                self._pos += dropped
                self._left -= dropped
                if self._left:
                    return None
                self._new_block()
            else:  # _RESYNC: up to the next "content-length", in any case, wherever it starts
                found_name = _RESYNC_NAME.search(data, self._pos)
                if found_name is not None:
                    self._pos = found_name.start()
                    self._new_block()
                    continue
                keep = 0 if self._closed else len(b"content-length") - 1  # a name cut by a read
                self._pos = max(self._pos, len(data) - keep)
                return None
