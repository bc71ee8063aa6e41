"""Observing handler calls: :func:`observe` wraps a handler so that hooks see each call, in every serving mode.

A wrapper, not a serving option: every mode (the native sequential loop, the threads and asyncio engines, the
HTTP apps, ``dispatch``, either core) calls its handler the same way, so a wrapped handler is observed in all
of them, and a server without hooks runs exactly the code it ran before. What a wrapper sees is the handler's
call: parse errors (-32700) and invalid requests (-32600) call no handler and are not observed, nor is a
request cancelled before it started; a method the handler does not know is (it raises ``MethodNotFound``).
The error code is the one the answer carries for the handler's exception (its ``code`` for a
``JsonRpcError`` the core can read, -32800 for a cancelled task, -32603 for any other exception, and for a
``JsonRpcError`` whose ``code``, ``message`` or ``data`` raises when read or is of a type no answer carries); a
result the encoder then refuses is answered -32603 but seen here as a success. A hook never changes what is
answered: the handler's own outcome (result or exception) goes on unchanged whatever a hook does.

:func:`around` is the one mechanism, also under :mod:`rpcwire.otel`: a ``before`` hook whose value an ``after``
hook gets with the call's :class:`CallInfo`, on the same thread (or task) as the handler.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import Any, Generic, NamedTuple, TypeVar

from rpcwire._context import RequestContext, request_context
from rpcwire._types import ERR_INTERNAL, ERR_REQUEST_CANCELLED, Handler
from rpcwire._types import application_error as read_application_error

__all__ = ["CallInfo", "application_error", "around", "error_code", "observe"]

logger: logging.Logger = logging.getLogger("rpcwire")

S = TypeVar("S")
_NO_STATE: Any = object()


class CallInfo(NamedTuple):
    """One handler call, as :func:`observe`'s hooks see it (read-only). ``on_request`` gets it before the call,
    with ``duration`` and ``error_code`` ``None``; ``on_response`` after, complete."""

    method: str
    """The method called."""
    id: Any
    """The request's id (``None`` for a notification, or with no request context)."""
    context: RequestContext | None
    """The call's request context (``http``, ``traceparent``...); ``None`` only for a handler called outside any
    server (``dispatch`` itself gives none)."""
    duration: float | None = None
    """Seconds the handler took (``time.perf_counter``), awaiting included for an async one."""
    error_code: int | None = None
    """The answer's JSON-RPC error code, ``None`` on success (see the module doc: what the handler raised)."""
    exception: BaseException | None = None
    """What the handler raised, if anything."""


def error_code(exc: BaseException) -> int:
    """The JSON-RPC error code the answer to a handler that raised ``exc`` carries."""
    own = application_error(exc)
    if own is not None:
        return own[0]
    return ERR_REQUEST_CANCELLED if isinstance(exc, asyncio.CancelledError) else ERR_INTERNAL


def application_error(exc: BaseException) -> tuple[int, str] | None:
    """The code and message of a ``JsonRpcError`` the answer carries, read as the cores read them
    (``rpcwire._types.application_error``); ``None`` for any other exception and for a ``JsonRpcError`` that is not
    so (one whose property raises included): the answer is then a -32603 (or a -32800 for a cancelled task).
    Never raises an ``Exception``: a hook's view cannot change the answer."""
    try:
        error = read_application_error(exc)
    except Exception:  # the core logs this one as it answers
        return None
    return None if error is None else error[:2]


class _Around(Generic[S]):
    """A handler with ``before(method, context) -> state`` and ``after(state, info)`` around each call. It says
    it is async exactly when its handler does (``rpcwire_async``, which the engine and the HTTP apps read), and
    an awaitable result is awaited inside the hooks. A hook that raises is logged, never the call's outcome."""

    __slots__ = ("_after", "_before", "_fixed_async", "handler")

    def __init__(
        self,
        handler: Handler,
        before: Callable[[str, RequestContext | None], S],
        after: Callable[[S, CallInfo], None],
    ) -> None:
        if not callable(handler):
            raise TypeError("handler must be callable")
        self.handler = handler
        self._before = before
        self._after = after
        # A registry (rpcwire.methods) may become async later: asked each time. Else fixed now.
        self._fixed_async: bool | None = (
            None
            if hasattr(handler, "rpcwire_async") and not inspect.iscoroutinefunction(handler)
            else inspect.iscoroutinefunction(handler)
        )

    @property
    def rpcwire_async(self) -> bool:
        """Whether the wrapped handler is async (the engine reads it as it reads an ``rpcwire.methods``')."""
        fixed = self._fixed_async
        return fixed if fixed is not None else getattr(self.handler, "rpcwire_async", False) is True

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.handler!r})"

    def __call__(self, method: str, params: Any) -> Any:
        context = request_context()
        state: Any
        try:
            state = self._before(method, context)
        except Exception:
            logger.exception("a hook before %s failed", method)
            state = _NO_STATE  # its after hook is not called: it would find nothing of what before made
        start = perf_counter()
        try:
            result = self.handler(method, params)
        except BaseException as exc:
            self._report(state, method, context, start, exc)
            raise
        # A plain sync function's result is not awaited by anyone: no need to ask.
        if self._fixed_async is not False and inspect.isawaitable(result):
            return self._awaited(result, state, method, context, start)
        self._report(state, method, context, start, None)
        return result

    async def _awaited(
        self, result: Awaitable[Any], state: Any, method: str, context: RequestContext | None, start: float
    ) -> Any:
        try:
            value = await result
        except BaseException as exc:
            self._report(state, method, context, start, exc)
            raise
        self._report(state, method, context, start, None)
        return value

    def _report(
        self, state: Any, method: str, context: RequestContext | None, start: float, exc: BaseException | None
    ) -> None:
        """Call the after hook; called from the handler's ``except`` too, so nothing here may raise an
        ``Exception``: it would replace the handler's own, and so change the answer."""
        duration = perf_counter() - start
        if state is _NO_STATE:
            return
        try:
            info = CallInfo(
                method,
                None if context is None else context.id,
                context,
                duration,
                None if exc is None else error_code(exc),
                exc,
            )
            self._after(state, info)
        except Exception:
            logger.exception("a hook after %s failed", method)


def around(
    handler: Handler, before: Callable[[str, RequestContext | None], S], after: Callable[[S, CallInfo], None]
) -> Handler:
    """``handler`` with ``before(method, context)`` called before each call and ``after(its value, CallInfo)``
    after it, on the call's thread (its task, for an async handler)."""
    return _Around(handler, before, after)


def observe(
    handler: Handler,
    *,
    on_request: Callable[[CallInfo], None] | None = None,
    on_response: Callable[[CallInfo], None] | None = None,
) -> Handler:
    """``handler``, observed: ``on_request(info)`` before each call (``info.duration`` and ``info.error_code``
    ``None``), ``on_response(info)`` after it with the call's duration and error code (``None``: a success).

    Serve the result as the handler itself, in any mode (``serve``, ``serve_async``, ``WSGIApp``, ``ASGIApp``,
    ``dispatch``, ``rpcwire.pure``): an async handler stays async. Without hooks a server pays nothing: it is
    the unwrapped handler that runs. Hooks run on the handler's thread (or its task), so keep them quick; one
    that raises is logged (logger ``rpcwire``) and the call goes on (``on_response`` runs after every call, even
    when ``on_request`` raised); a hook never changes what is answered. Handler calls only: a -32700 or -32600
    the transport answers itself calls no handler (see docs/guides/hooks.md).
    """

    def before(method: str, context: RequestContext | None) -> None:
        # The two hooks are independent: one on_request that raises is logged here, and on_response still runs.
        if on_request is not None:
            try:
                on_request(CallInfo(method, None if context is None else context.id, context))
            except Exception:
                logger.exception("a hook before %s failed", method)

    def after(_: None, info: CallInfo) -> None:
        if on_response is not None:
            on_response(info)

    return _Around(handler, before, after)
