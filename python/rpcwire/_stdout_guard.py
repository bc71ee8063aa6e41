"""The guard of the process's stdout while ``serve`` writes the wire there (docs/semantics.md, "The
process's stdout").

A handler's ``print``, an ``os.write(1, ...)``, a C library's ``printf`` or a child process that inherits
fd 1 would put bytes between the answers. While ``rpcwire.serve`` (or ``serve_async``) runs with
``guard_stdout=True``, the default, over a transport whose output is the process's fd 1, it does what
``rpcwire.mcp`` (the MCP SDK's claim of fd 1) does:

- the wire gets a descriptor of its own (a duplicate of fd 1, above 2, close-on-exec) and the transport
  writes to it from then on (``_swap_output``, under its writer's lock);
- fd 1 points at stderr (a duplicate of fd 2, or the null device), and ``sys.stdout`` is ``sys.stderr``,
  so that ``print`` output shows at once, in order with the logs;
- on the way out, whatever ``print`` left in a buffer is flushed into the diversion, then fd 1 points at the
  wire again, ``sys.stdout`` is put back and the transport writes to its own stream again (not when an
  interrupt or ``SystemExit`` ends ``serve``: the process is leaving, and the transport keeps the wire's
  duplicate, the same pipe).

Nothing is done when the transport writes anywhere else (a pipe or socket of its own, a file), when fd 1
cannot be duplicated, or while another ``serve`` of the process holds the guard (that one's holds).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

_lock = threading.Lock()
_claimed: set[int] = set()  # 1 while a serve of the process guards fd 1

# How long giving the transport its own stream back may wait for its writer's lock (a write blocked on a
# peer that does not read holds it); meanwhile the wire's duplicate, which is the same pipe as fd 1 by then,
# serves, and it is given back as soon as the lock is free.
_GIVE_BACK = 2.0


@contextlib.contextmanager
def guarded_stdout(transport: Any, enabled: bool = True) -> Iterator[None]:
    """While the block runs, keep everything but ``transport`` off fd 1 (if its output is fd 1)."""
    restore = _claim(transport) if enabled else None
    leaving = False
    try:
        yield
    except (KeyboardInterrupt, SystemExit):
        leaving = True
        raise
    finally:
        if restore is not None:
            restore(leaving=leaving)


def _claim(transport: Any) -> Callable[..., None] | None:
    swap = getattr(transport, "_swap_output", None)
    if swap is None:
        return None
    with _lock:
        if 1 in _claimed:
            return None
        try:
            wire_fd = _duplicate_above_std(1)
        except OSError:
            return None
        wire = os.fdopen(wire_fd, "wb")
        _flush(sys.stdout)  # what was printed before serving goes where it was printed
        try:
            previous = swap(wire)
        except Exception:
            wire.close()
            raise
        if not _is_fd(previous, 1):
            swap(previous)
            wire.close()
            return None
        _flush(previous)
        try:
            diversion = _open_diversion()
            try:
                os.dup2(diversion, 1)
            finally:
                os.close(diversion)
        except OSError:
            swap(previous)
            wire.close()
            return None
        saved_stdout, replacement = sys.stdout, sys.stderr
        sys.stdout = replacement
        _claimed.add(1)

    def restore(*, leaving: bool) -> None:
        with _lock:
            for stream in {id(s): s for s in (sys.stdout, saved_stdout, previous) if s is not None}.values():
                _flush(stream)  # into the diversion, never later onto the wire
            if sys.stdout is replacement:
                sys.stdout = saved_stdout
            os.dup2(wire_fd, 1)
            _claimed.discard(1)

        if leaving:
            # The process is on its way out (an interrupt, SystemExit): the transport keeps writing to the
            # wire's duplicate, the same pipe as fd 1 again. A thread waiting for a writer blocked on a full
            # pipe would still be in the core when the interpreter finalizes (3.13 crashed there).
            return

        def give_back() -> None:
            with contextlib.suppress(Exception):  # the wire failed (a BrokenPipeError is serve's to raise)
                swap(previous)
            with contextlib.suppress(Exception):
                wire.close()

        giver = threading.Thread(target=give_back, name="rpcwire-stdout-guard", daemon=True)
        giver.start()
        giver.join(_GIVE_BACK)

    return restore


def _duplicate_above_std(fd: int) -> int:
    """A close-on-exec duplicate of ``fd`` that is not 0, 1 or 2."""
    try:
        import fcntl  # noqa: PLC0415 (POSIX only)
    except ImportError:  # pragma: no cover - Windows
        duplicate = os.dup(fd)
        if duplicate <= 2:
            os.close(duplicate)
            raise OSError(f"a duplicate of fd {fd} landed on {duplicate}") from None
        return duplicate
    if hasattr(fcntl, "F_DUPFD_CLOEXEC"):
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    # PyPy 7.3's fcntl has no F_DUPFD_CLOEXEC: the same in two steps.
    duplicate = fcntl.fcntl(fd, fcntl.F_DUPFD, 3)
    os.set_inheritable(duplicate, False)
    return duplicate


def _open_diversion() -> int:
    try:
        return os.dup(2)
    except OSError:
        return os.open(os.devnull, os.O_WRONLY)


def _is_fd(stream: Any, fd: int) -> bool:
    try:
        return bool(stream.fileno() == fd)
    except (AttributeError, OSError, ValueError):
        return False


def _flush(stream: Any) -> None:
    with contextlib.suppress(Exception):
        stream.flush()
