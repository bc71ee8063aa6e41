"""The request a handler serves: :class:`RequestContext` and :func:`current_request`, in every serving mode.

A context knows its request's id and method, whether a cancellation arrived (either dialect), the
progress token its params carry, and the W3C ``traceparent`` of ``params._meta`` (added to the
``rpcwire`` logger's records while its handler runs).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import re
from _thread import RLock as _RLock  # threading.RLock's own class, without its factory's call
from typing import Any

from rpcwire._dialects import LSP_PROGRESS, MCP_PROGRESS, Dialect
from rpcwire._http_info import HTTPRequestInfo, request_info
from rpcwire._types import Request, RequestCancelled

__all__ = ["RequestContext", "current_request", "request_context", "running_request", "valid_traceparent"]

logger: logging.Logger = logging.getLogger("rpcwire")

running_request: contextvars.ContextVar[RequestContext] = contextvars.ContextVar("rpcwire_request")
"""The context of the request whose handler runs (set by whoever calls the handler; the native sequential loop
sets none and is asked by :func:`request_context`)."""

# W3C Trace Context: version-traceid-parentid-flags, lowercase hex; version ff and all-zero ids are invalid.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


def valid_traceparent(value: Any) -> str | None:
    """``value`` if it is a valid W3C ``traceparent``, else ``None``."""
    if not isinstance(value, str):
        return None
    match = _TRACEPARENT.fullmatch(value)
    if match is None or match[1] == "ff" or set(match[2]) == {"0"} or set(match[3]) == {"0"}:
        return None
    return value


class RequestContext:
    """The request a handler is serving (see :func:`current_request`). Immutable but for ``cancelled``."""

    __slots__ = (
        "_cancel_dialect",
        "_done",
        "_http",
        "_lock",
        "_lsp_begun",
        "_request",
        "_task",
        "_token",
        "_traceparent",
        "_transport",
    )

    def __init__(self, request: Request, transport: Any) -> None:
        self._request = request
        self._transport = transport
        self._token: tuple[Dialect, Any] | None = None
        self._traceparent: str | None = None
        params = request.params
        if type(params) is dict:  # the token and the trace context are looked for only where they can be
            meta = params.get("_meta")
            if type(meta) is dict:
                if "progressToken" in meta:
                    self._token = ("mcp", meta["progressToken"])
                self._traceparent = valid_traceparent(meta.get("traceparent"))
            if self._token is None and "workDoneToken" in params:
                self._token = ("lsp", params["workDoneToken"])
        self._cancel_dialect: Dialect | None = None
        self._lsp_begun = False
        # Held while a line about this request is written and while it is finished, so that no line of
        # it can follow its answer (reentrant: a stream that reports its own writes reaches the
        # transport's refusal of a reentrant write, not a deadlock).
        self._lock = _RLock()
        self._done = False
        self._task: asyncio.Task[Any] | None = None
        # The WSGI environ or ASGI scope of the HTTP request (None elsewhere): the info is built when asked.
        self._http: dict[str, Any] | None = None

    @property
    def id(self) -> Any:
        """The request's id (``None`` for a notification)."""
        return self._request.id

    @property
    def method(self) -> str:
        """The method called."""
        return self._request.method

    @property
    def is_notification(self) -> bool:
        """Whether the request has no id (no answer will be written)."""
        return self._request.is_notification

    def __repr__(self) -> str:
        return f"RequestContext(id={self.id!r}, method={self.method!r}, cancelled={self.cancelled})"

    @property
    def cancelled(self) -> bool:
        """True once a cancellation for this request arrived (either dialect)."""
        return self._cancel_dialect is not None

    @property
    def traceparent(self) -> str | None:
        """The W3C ``traceparent`` of ``params._meta.traceparent`` when it is valid, else ``None``."""
        return self._traceparent

    @property
    def http(self) -> HTTPRequestInfo | None:
        """The HTTP request this call came in (:class:`~rpcwire.HTTPRequestInfo`: method, path, headers, client
        address, the authenticated ``user``), built on the first look; ``None`` over stdio, pipes and sockets."""
        source = self._http
        return None if source is None else request_info(source)

    def raise_if_cancelled(self) -> None:
        """Raise :class:`RequestCancelled` if a cancellation for this request arrived."""
        if self.cancelled:
            raise RequestCancelled()

    def notify(self, method: str, params: Any = None) -> None:
        """Write a notification now, before this request's answer; once the request is answered (or its
        handler returned, for a notification), nothing is written (logged at DEBUG)."""
        with self._lock:
            if self._done:
                self._dropped(method)
                return
            self._transport.write_notification(method, params)

    def _dropped(self, method: str) -> None:
        logger.debug("%s dropped: it came after the answer to request %r (%s)", method, self.id, self.method)

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress in the dialect the request asked for, before its answer.

        MCP (``params._meta.progressToken``): ``notifications/progress``. LSP (``params.workDoneToken``):
        ``$/progress`` with ``begin`` first and ``report`` after (``end`` is written before the answer);
        ``percentage`` is ``progress / total`` in percent, or ``progress`` itself without a total.
        Neither token: nothing is written. After the answer (from another thread): nothing is written
        either, and the call is logged at DEBUG.
        """
        if self._token is None:
            return
        with self._lock:
            if self._done:
                self._dropped("progress")
                return
            self._write_progress(self._token, progress, total, message)

    def _write_progress(
        self, token_: tuple[Dialect, Any], progress: float, total: float | None, message: str | None
    ) -> None:
        dialect, token = token_
        if dialect == "mcp":
            params: dict[str, Any] = {"progressToken": token, "progress": progress}
            if total is not None:
                params["total"] = total
            if message is not None:
                params["message"] = message
            self._transport.write_notification(MCP_PROGRESS, params)
            return
        value: dict[str, Any]
        if self._lsp_begun:
            value = {"kind": "report"}
            if message is not None:
                value["message"] = message
        else:
            value = {"kind": "begin", "title": message if message is not None else self.method}
            self._lsp_begun = True
        percentage = progress if total is None else (progress / total * 100 if total else 0)
        value["percentage"] = max(0, min(100, round(percentage)))
        self._transport.write_notification(LSP_PROGRESS, {"token": token, "value": value})

    def _finish(self) -> None:
        """Before the answer: LSP's ``end``; nothing about this request is written after this returns."""
        with self._lock:
            if self._done:
                return
            self._done = True
            if self._lsp_begun and self._token is not None:
                self._transport.write_notification(LSP_PROGRESS, {"token": self._token[1], "value": {"kind": "end"}})

    def _cancel(self, dialect: Dialect) -> None:
        if self._cancel_dialect is None:
            self._cancel_dialect = dialect
        if self._task is not None:
            self._task.get_loop().call_soon_threadsafe(self._task.cancel)

    @property
    def _answer_suppressed(self) -> bool:
        """MCP: a cancelled request gets no answer at all."""
        return self._cancel_dialect == "mcp"


def current_request() -> RequestContext:
    """The request the calling handler serves; ``LookupError`` outside one."""
    context = request_context()
    if context is None:
        raise LookupError("current_request() is only available inside a handler that rpcwire is running")
    return context


def request_context() -> RequestContext | None:
    """:func:`current_request`, or ``None`` outside a handler (no exception: the client asks on every call)."""
    context = running_request.get(None)
    if context is None and _native is not None:
        context = _native_sequential_context(_native)
    return context


def _native_sequential_context(native: Any) -> RequestContext | None:
    """The context of the call the native sequential ``serve`` is making on this thread, made the first
    time its handler asks (the loop notes only where the call's pieces are: see src/current.rs)."""
    context: RequestContext | None = native._current_context()
    if context is None:
        call = native._current_call()
        if call is None:
            return None
        context = RequestContext(*call)
        native._set_current_context(context)
    return context


try:
    from rpcwire import _rpcwire as _native
except ImportError:  # pragma: no cover - a build without the native module
    _native = None


class _TraceFilter(logging.Filter):
    """Adds ``traceparent`` and ``request_id`` to the ``rpcwire`` logger's records made while a request runs."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = running_request.get(None)
        if context is not None:
            record.traceparent = context.traceparent
            record.request_id = context.id
        return True


logger.addFilter(_TraceFilter())
