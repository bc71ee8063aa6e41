"""Answering: a handler's outcome turned into answer bytes, and one walk that answers a whole message.

A message as a core reads it (``_read_message``, ``_read_text``) is its own answer (a refusal's bytes), a
request, or a batch's entries. :func:`each_request` is the one walk of it: it hands out each request with
where its answer goes, writes a refusal at once and joins a batch's answers into one line when the last one
is in, in whatever order and on whatever thread they arrive. Every serving path answers through it: the
sequential loop of :mod:`rpcwire.pure` and ``dispatch`` through :func:`answer_message` (each request called
in turn), the engine's threads and asyncio servers (requests run concurrently, answered as they finish) and
the HTTP apps (a body's requests awaited in turn). A client answers its server's requests one at a time
through :func:`call`. The bytes come from the core's ``_answer_result`` / ``_answer_error``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from rpcwire._context import RequestContext, running_request, valid_traceparent
from rpcwire._contract import AnswerBuilder, Message
from rpcwire._types import Handler, JsonRpcError, Request, RequestCancelled

__all__ = [
    "Deliver",
    "answer_message",
    "answer_message_async",
    "call",
    "call_async",
    "cancelled_answer",
    "each_request",
    "failure_answer",
    "log_failure",
    "result_answer",
]

logger: logging.Logger = logging.getLogger("rpcwire")

Deliver = Callable[[bytes | None], None]
"""Where an answer goes: called with the answer's bytes, or ``None`` when there is none (a notification's,
a suppressed one's)."""


def each_request(message: Message, write: Deliver) -> Iterator[tuple[Request, Deliver]]:
    """The requests ``message`` holds, each with where its answer goes (its ``deliver``); ``write`` gets the
    message's answer line once it is complete (``None``: nothing to write).

    A refusal's bytes are written at once and a lone request's answer is written as delivered. A batch's
    answers are joined in the entries' order whatever order they are delivered in, from any thread, its
    invalid entries' answers (the core's bytes) in their places; its line is written when the last one is in,
    its notifications' and suppressed answers left out, and nothing when none remains.
    """
    if isinstance(message, bytes):
        write(message)
    elif isinstance(message, Request):
        yield message, write
    else:
        put = _Batch(write, len(message)).put
        for index, entry in enumerate(message):
            if isinstance(entry, bytes):
                put(index, entry)
            else:
                yield entry, functools.partial(put, index)


def answer_message(message: Message, call_one: Callable[[Request], bytes | None]) -> bytes | None:
    """The answer line to ``message`` (``None``: nothing to write), calling ``call_one`` for each request in
    turn (:func:`each_request`, with each answer delivered before the next request is called)."""
    answers: list[bytes | None] = []
    for request, deliver in each_request(message, answers.append):
        deliver(call_one(request))
    return answers[0] if answers else None


async def answer_message_async(
    message: Message, call_one: Callable[[Request], Awaitable[bytes | None]]
) -> bytes | None:
    """:func:`answer_message` with each request's answer awaited (on the event loop) before the next is called."""
    answers: list[bytes | None] = []
    for request, deliver in each_request(message, answers.append):
        deliver(await call_one(request))
    return answers[0] if answers else None


class _Batch:
    """The answers of one batch's entries; the array line is written when the last one is in."""

    __slots__ = ("_answers", "_left", "_write")

    def __init__(self, write: Deliver, count: int) -> None:
        self._write = write
        self._answers: list[bytes | None] = [None] * count
        # One item per entry, popped as its answer comes in (from any thread, in any order): a pop is atomic,
        # so exactly one put pops the ``True`` at the bottom, the last one, and writes the line. Cheaper than
        # a lock on the sequential path, where every entry's answer passes here.
        self._left = [True] + [False] * (count - 1)

    def put(self, index: int, answer: bytes | None) -> None:
        self._answers[index] = answer
        if self._left.pop():
            given = [answer for answer in self._answers if answer is not None]
            self._write(b"[" + b",".join(given) + b"]" if given else None)


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
    token = None if context is None else running_request.set(context)
    try:
        try:
            result = handler(request.method, request.params)
        except Exception as exc:
            return failure_answer(core, request, context, exc, expose_errors=expose_errors)
        return result_answer(core, request, context, result, expose_errors=expose_errors)
    finally:
        if token is not None:
            running_request.reset(token)


async def call_async(
    core: AnswerBuilder,
    request: Request,
    handler: Handler,
    context: RequestContext | None,
    *,
    expose_errors: bool = True,
) -> bytes | None:
    """As :func:`call`, for an async handler: awaited on the caller's loop (what it returns is awaited when it
    is awaitable). A cancellation of the awaiting task is not an answer here: it propagates (a server answers
    it with :func:`failure_answer`, a client does not)."""
    if context is not None and context.cancelled:  # cancelled before it started: never run
        return cancelled_answer(core, request, context)
    token = None if context is None else running_request.set(context)
    try:
        try:
            result = handler(request.method, request.params)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            return failure_answer(core, request, context, exc, expose_errors=expose_errors)
        return result_answer(core, request, context, result, expose_errors=expose_errors)
    finally:
        if token is not None:
            running_request.reset(token)


def result_answer(
    core: AnswerBuilder, request: Request, context: RequestContext | None, result: Any, *, expose_errors: bool = True
) -> bytes | None:
    """The answer to a handler that returned ``result``: ``None`` for a notification or an answer the context
    suppresses (MCP's cancelled request); the context is finished first (nothing of it is written after)."""
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
    context = running_request.get(None)
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
    return valid_traceparent(meta.get("traceparent")) if type(meta) is dict else None


def failure_answer(
    core: AnswerBuilder,
    request: Request,
    context: RequestContext | None,
    exc: BaseException,
    *,
    expose_errors: bool = True,
) -> bytes | None:
    """The answer to a handler that raised ``exc``; one that is not a ``JsonRpcError`` is logged (:func:`log_failure`).
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
    """The answer to a request cancelled before its handler ran: -32800, or ``None`` for a notification or
    when the dialect suppresses it (MCP)."""
    if request.is_notification or context._answer_suppressed:
        return None
    return bytes(core._answer_error(request.id_json, RequestCancelled()))
