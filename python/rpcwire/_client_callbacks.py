"""The threaded client's callbacks: the server's notifications run one at a time on a dispatcher thread of the
client's own (:class:`_Dispatcher`), the server's own requests on a bounded pool of threads (:class:`_HandlerPool`),
so that a caller's thread never runs one and a callback or handler may call the client."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from rpcwire._peer import _HANDLERS, _HANDLERS_WAITING, _Callbacks, _left, _run_callback
from rpcwire._types import Request

logger: logging.Logger = logging.getLogger("rpcwire.client")


class _Dispatcher:
    """The sync client's callbacks, run one at a time in arrival order on a thread of the client's own
    (started with the first), where a callback may call the client: a caller's thread never runs one."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._callbacks = _Callbacks()
        self._thread: threading.Thread | None = None
        self._busy = False
        self._stopping = False

    def on_thread(self) -> bool:
        """Whether the calling thread is the dispatcher (a callback calling the client)."""
        return self._thread is not None and threading.current_thread() is self._thread

    def add(self, callback: Callable[..., Any], args: tuple[Any, ...], call: int | None) -> None:
        with self._cond:
            if self._stopping or not self._callbacks.add(callback, args, call):
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rpcwire-client-callbacks", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._callbacks.items:
                    self._busy = False
                    self._cond.notify_all()  # for wait_idle and wait_for_progress
                    if self._stopping:
                        return
                    self._cond.wait()
                callback, args, call = self._callbacks.items.popleft()
                self._busy = True
            try:
                _run_callback(callback, args)
            finally:
                with self._cond:
                    self._callbacks.done(call)
                    self._cond.notify_all()

    def wait_for_progress(self, call: int, deadline: float | None) -> None:
        """Until the progress callbacks of ``call`` queued before its answer have run (or ``deadline``)."""
        if call not in self._callbacks.progress or self.on_thread():
            return
        with self._cond:
            while call in self._callbacks.progress and (left := _left(deadline)) != 0:
                self._cond.wait(left)

    def stop(self, timeout: float) -> None:
        """Run what is queued (for at most ``timeout`` seconds), then end the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            if self.on_thread():
                return
            deadline = time.monotonic() + timeout
            while (self._callbacks.items or self._busy) and (left := _left(deadline)) != 0:
                self._cond.wait(left)


class _HandlerPool:
    """The sync client's threads for the server's own requests: at most ``_HANDLERS`` at once, started as
    requests come and ended when none waits; up to ``_HANDLERS_WAITING`` more wait, in order."""

    def __init__(self, run: Callable[[Request], None]) -> None:
        self._run = run
        self._lock = threading.Lock()
        self._waiting: collections.deque[Request] = collections.deque()
        self._workers = 0

    def submit(self, request: Request) -> bool:
        """``False``: no room (every thread busy and the queue full)."""
        with self._lock:
            if self._workers >= _HANDLERS and len(self._waiting) >= _HANDLERS_WAITING:
                return False
            self._waiting.append(request)
            if self._workers >= _HANDLERS:
                return True
            self._workers += 1
        threading.Thread(target=self._work, name="rpcwire-client-handler", daemon=True).start()
        return True

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._waiting:
                    self._workers -= 1
                    return
                request = self._waiting.popleft()
            try:
                self._run(request)
            except Exception:
                logger.exception("answering the server's request %r failed", request.method)
