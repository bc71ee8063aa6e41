"""A spawned server's stderr, as every client that spawns one keeps it: where it goes (``spawn(stderr=...)``:
:data:`StderrOption`) and its last lines, kept for ``ConnectionClosed`` whatever the choice (:class:`_StderrTail`).
Read by a thread (``Client``) or the pipe's protocol (``AsyncClient``) of the client's, so that the pipe never
fills."""

from __future__ import annotations

import collections
import contextlib
import io
import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

logger: logging.Logger = logging.getLogger("rpcwire.client")

_STDERR_TAIL = 20  # lines of a spawned server's stderr kept for ConnectionClosed
_STDERR_LINE = 64 * 1024  # a longer stderr line is kept cut to this


StderrOption = str | os.PathLike[str] | IO[Any] | Callable[[str], Any] | None
"""Where a spawned server's stderr goes (``spawn(stderr=...)``): ``None`` or ``"inherit"`` (the caller's
``sys.stderr``), ``"tail"`` (kept for :class:`ConnectionClosed` only, each line logged at DEBUG), a path (a file
appended to), an open file (text or binary, written to and flushed, never closed by the client), or a callable
given each line (without its newline)."""


class _StderrTail(collections.deque[str]):
    """The last lines of a spawned server's stderr, read to its end by a thread (``Client``) or the pipe's
    protocol (``AsyncClient``) of the client's so that the pipe never fills; ``drained`` is set at its end.
    Whatever the ``stderr=`` option, the tail is kept (for :class:`ConnectionClosed`); the option says where
    the output goes besides: each line to ``line`` (text, without its newline), or each chunk as read to
    ``chunk`` (bytes, as the server wrote them). A sink that fails is logged once and dropped."""

    def __init__(
        self,
        line: Callable[[str], Any] | None = None,
        chunk: Callable[[bytes], Any] | None = None,
        close: Callable[[], Any] | None = None,
        name: str = "",
    ) -> None:
        super().__init__(maxlen=_STDERR_TAIL)
        self.drained: threading.Event = threading.Event()
        self._line = line
        self._chunk = chunk
        self._close = close
        self._name = name  # the sink, for the one warning if it fails

    def _failed(self, exc: BaseException) -> None:
        logger.warning(
            "the server's stderr could not be written to %s (%r): it is kept only for ConnectionClosed", self._name, exc
        )
        self._line = self._chunk = None

    def add(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        self.append(line[:_STDERR_LINE])
        if self._line is not None:
            try:
                self._line(line)
            except Exception as exc:
                self._failed(exc)

    def feed(self, partial: bytes, chunk: bytes) -> bytes:
        """Add the lines ``partial + chunk`` ends; what is left of a line (a line that grows past
        ``_STDERR_LINE`` is taken as it stands, and the rest of it is a line of its own)."""
        if self._chunk is not None and chunk:
            try:
                self._chunk(chunk)
            except Exception as exc:
                self._failed(exc)
        *lines, rest = (partial + chunk).split(b"\n")
        for line in lines:
            self.add(line)
        if len(rest) > _STDERR_LINE:
            self.add(rest)
            return b""
        return rest

    def end(self, partial: bytes) -> None:
        """The end of stderr: what is left of its last line is added, the sink closed (a path's file), and
        ``drained`` set."""
        try:
            if partial:
                self.add(partial)
            if self._close is not None:
                with contextlib.suppress(Exception):
                    self._close()
        finally:
            self.drained.set()


def _to_sys_stderr(line: str) -> None:
    """A line of the server's stderr to the caller's ``sys.stderr`` as it is now (``contextlib.redirect_stderr``,
    a notebook's or pytest's stream), flushed; nowhere if there is none (``pythonw``)."""
    stream = sys.stderr
    if stream is not None:
        stream.write(line + "\n")
        stream.flush()


def _log_stderr(line: str) -> None:
    logger.debug("server stderr: %s", line)


def _stderr_tail(stderr: StderrOption) -> _StderrTail:
    """The tail (and where else the server's stderr goes) for ``spawn``'s ``stderr=``; a path is opened here,
    before the server starts, so that a path that cannot be written to fails ``spawn``."""
    if stderr is None or stderr == "inherit":
        return _StderrTail(_to_sys_stderr, name="sys.stderr")
    if isinstance(stderr, str):
        if stderr == "tail":
            return _StderrTail(_log_stderr)
        raise ValueError(
            f"stderr={stderr!r}: expected 'inherit', 'tail', a path (pathlib.Path), an open file or a callable"
        )
    if isinstance(stderr, os.PathLike):
        file = open(stderr, "ab")  # noqa: SIM115 - closed at the end of the server's stderr
        return _StderrTail(chunk=_flushed(file.write, file), close=file.close, name=os.fspath(stderr))
    write = getattr(stderr, "write", None)
    if write is not None:
        binary = isinstance(stderr, (io.RawIOBase, io.BufferedIOBase)) or "b" in str(getattr(stderr, "mode", ""))
        if binary:
            return _StderrTail(chunk=_flushed(write, stderr), name=repr(stderr))
        return _StderrTail(_flushed(lambda line: write(line + "\n"), stderr), name=repr(stderr))
    if callable(stderr):
        return _StderrTail(stderr, name=repr(stderr))
    raise TypeError(f"stderr={stderr!r}: expected 'inherit', 'tail', a path (pathlib.Path), an open file or a callable")


def _flushed(write: Callable[[Any], Any], stream: Any) -> Callable[[Any], None]:
    """``write``, then ``stream.flush()`` if it has one (a log file is current as the server writes it)."""
    flush = getattr(stream, "flush", None)

    def out(data: Any) -> None:
        write(data)
        if flush is not None:
            flush()

    return out
