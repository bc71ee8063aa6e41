"""Answering: a handler's outcome turned into answer bytes, and one routine that answers a whole message.

Every serving path answers through :func:`answer_message` (the sequential loop of :mod:`rpcwire.pure`,
the engine's threads and asyncio servers, ``dispatch``, the HTTP apps and a client answering its
server's requests); the bytes come from the core's ``_answer_result`` / ``_answer_error``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from rpcwire._context import RequestContext, _current, _valid_traceparent
from rpcwire._contract import AnswerBuilder, Message
from rpcwire._types import Handler, JsonRpcError, Request, RequestCancelled

__all__ = ["answer_message", "batch_line", "call", "call_async", "failure_answer", "log_failure", "result_answer"]

logger: logging.Logger = logging.getLogger("rpcwire")


def answer_message(message: Message, call_one: Callable[[Request], bytes | None]) -> bytes | None:
    """The answer line to ``message`` (``None``: nothing to write), calling ``call_one`` for each request.

    ``bytes`` is already the answer (a refusal); a batch's answers are joined in order, its
    notifications and suppressed answers left out, and nothing is written when none remains.
    """
    if type(message) is bytes:
        return message
    if isinstance(message, Request):
        return call_one(message)
    return batch_line([entry if type(entry) is bytes else call_one(entry) for entry in message])  # type: ignore[arg-type]


def call(
    core: AnswerBuilder,
    request: Request,
    handler: Handler,
    context: RequestContext | None,
    *,
    expose_errors: bool = True,
) -> bytes | None:
    """Run ``handler`` for ``request`` (in ``context``, if any) and return its answer's bytes, ``None`` if none.

    ``expose_errors=False``: a -32603 is "Internal error" alone, without the exception's name and text."""
    if context is not None and context.cancelled:  # cancelled before it started: never run
        return cancelled_answer(core, request, context)
    token = None if context is None else _current.set(context)
    try:
        try:
            result = handler(request.method, request.params)
        except Exception as exc:
            return failure_answer(core, request, context, exc, expose_errors=expose_errors)
        return result_answer(core, request, context, result, expose_errors=expose_errors)
    finally:
        if token is not None:
            _current.reset(token)


async def call_async(
    core: AnswerBuilder,
    request: Request,
    handler: Handler,
    context: RequestContext | None,
    *,
    expose_errors: bool = True,
) -> bytes | None:
    """As :func:`call`, for an ``async def`` handler: awaited on the caller's loop (a cancellation of the
    awaiting task is not an answer: it propagates)."""
    if context is not None and context.cancelled:  # cancelled before it started: never run
        return cancelled_answer(core, request, context)
    token = None if context is None else _current.set(context)
    try:
        try:
            result = await handler(request.method, request.params)
        except Exception as exc:
            return failure_answer(core, request, context, exc, expose_errors=expose_errors)
        return result_answer(core, request, context, result, expose_errors=expose_errors)
    finally:
        if token is not None:
            _current.reset(token)


def result_answer(
    core: AnswerBuilder, request: Request, context: RequestContext | None, result: Any, *, expose_errors: bool = True
) -> bytes | None:
    if context is not None:
        context._finish()
        if context._answer_suppressed:
            return None
    if request.is_notification:
        return None
    return bytes(core._answer_result(request.id_json, result, expose_errors=expose_errors))


def log_failure(request_id: Any, method: str, traceparent: str | None, exc: BaseException) -> None:
    """Log a handler's exception answered -32603 at ERROR with its traceback; the request's id, method and
    trace context are in the message and the record (``request_id``, ``method``, ``traceparent``). The native
    sequential loop and ``dispatch`` call it too, so that every mode logs the same record."""
    context = _current.get(None)
    if context is not None and context.id == request_id and context.method == method:
        traceparent = context.traceparent  # the call's own context (over HTTP, its traceparent header wins)
    logger.error(
        "%s failed (id %r, traceparent %s); answered -32603 Internal error",
        method,
        request_id,
        traceparent,
        exc_info=exc,
        extra={"request_id": request_id, "method": method, "traceparent": traceparent},
    )


def meta_traceparent(params: Any) -> str | None:
    """The valid W3C ``traceparent`` of ``params._meta``, else ``None`` (as :class:`RequestContext` reads it)."""
    meta = params.get("_meta") if type(params) is dict else None
    return _valid_traceparent(meta.get("traceparent")) if type(meta) is dict else None


def failure_answer(
    core: AnswerBuilder,
    request: Request,
    context: RequestContext | None,
    exc: BaseException,
    *,
    expose_errors: bool = True,
) -> bytes | None:
    """The answer to a handler that raised ``exc``; one that is not a ``JsonRpcError`` is logged (``_log_failure``).
    ``expose_errors=False``: a -32603 is "Internal error" alone, without the exception's name and text."""
    try:
        if context is not None:
            context._finish()
        if request.is_notification:
            if isinstance(exc, JsonRpcError):
                logger.debug("notification %r answered nothing: %s", request.method, exc)
            else:
                logger.error("notification %r failed", request.method, exc_info=exc)
            return None
        if context is not None and context._answer_suppressed:
            return None
        if isinstance(exc, asyncio.CancelledError):
            exc = RequestCancelled()
        elif not isinstance(exc, JsonRpcError):  # a JsonRpcError is meant for the client
            traceparent = context.traceparent if context is not None else meta_traceparent(request.params)
            log_failure(request.id, request.method, traceparent, exc)
        return bytes(core._answer_error(request.id_json, exc, expose_errors=expose_errors))
    finally:
        # A handler may raise one exception instance again and again; each raise would add its frames
        # to the traceback kept on it, holding them (and all they refer to).
        exc.__traceback__ = None


def cancelled_answer(core: AnswerBuilder, request: Request, context: RequestContext) -> bytes | None:
    if request.is_notification or context._answer_suppressed:
        return None
    return bytes(core._answer_error(request.id_json, RequestCancelled()))


def batch_line(answers: list[bytes | None]) -> bytes | None:
    given = [answer for answer in answers if answer is not None]
    return b"[" + b",".join(given) + b"]" if given else None
