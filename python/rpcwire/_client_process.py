"""A spawned server's pipes as the threaded client holds them: which descriptor it can wait on with ``poll`` (else
the portable path), its stderr read to the end (or, once the client halts, what is there), the streams closed
quietly."""

from __future__ import annotations

import contextlib
import io
import os
import select
from typing import Any

from rpcwire._server_stderr import _StderrTail

# A spawned server's pipes' buffer: smaller than a core's 64 KiB reads, so that each read goes past it and
# leaves nothing in it (what lets a reader wait on the descriptor; see _pollable_fd).
_PIPE_BUFFER = 8192
_CORE_READ = 64 * 1024  # the most one read of a core (``_read_available``) takes
_REMAINS_BYTES = 1 << 20  # once the server exited: how much of what it left in its pipes is still read


def _pollable_fd(stream: Any) -> int | None:
    """The descriptor under ``stream`` (a spawned server's stdout, never read through ``stream`` itself) that
    the client reads with its core's ``_ClientPipe``, waiting on it with ``poll``. ``None`` where there is no
    ``select.poll`` (Windows, whose ``select`` waits on sockets only): the client then reads and writes with
    blocking calls on threads of its own (the portable path), its callers waiting on those with their deadlines."""
    if not hasattr(select, "poll") or not isinstance(stream, io.BufferedReader):
        return None
    return stream.fileno()


def _drain_pipe(fd: int) -> None:
    with contextlib.suppress(BlockingIOError, OSError):
        while os.read(fd, 4096):
            pass


def _close_quietly(stream: Any) -> None:
    if stream is not None:
        with contextlib.suppress(OSError, ValueError):
            stream.close()


def _drain_stderr(tail: _StderrTail, fd: int, halt_fd: int | None) -> None:
    """Read a spawned server's stderr (``fd``) into ``tail`` to its end, or, once the client halts, what is
    there (a child of the server may hold the pipe open). Without ``halt_fd`` (the portable path: no
    ``poll``), with blocking reads to the end."""
    partial = b""
    left: int | None = None
    try:
        if halt_fd is None:
            while chunk := os.read(fd, 1 << 16):
                partial = tail.feed(partial, chunk)
            return
        os.set_blocking(fd, False)
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.register(halt_fd, select.POLLIN)
        while left is None or left > 0:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                if left is not None:
                    break
                if any(ready == halt_fd for ready, _ in poller.poll()):
                    left = _REMAINS_BYTES
                continue
            if not chunk:
                break
            if left is not None:
                left -= len(chunk)
            partial = tail.feed(partial, chunk)
    except (OSError, ValueError):
        pass
    finally:
        tail.end(partial)
