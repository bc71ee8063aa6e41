"""OpenTelemetry for rpcwire: :func:`instrument` opens a span per handler call (the extra ``rpcwire[otel]``).

``serve(rpcwire.otel.instrument(handler), transport)``, or any other serving mode (``ASGIApp``, ``WSGIApp``,
``serve_async``, ``rpcwire.pure``): the wrapper is :func:`rpcwire.observe`'s mechanism, so it works wherever a
handler does. Each call is a span of kind ``SERVER`` named after the method, with the semantic conventions'
RPC attributes (``rpc.system`` ``"jsonrpc"``, ``rpc.method``, ``rpc.jsonrpc.version`` ``"2.0"``,
``rpc.jsonrpc.request_id``, and on an error ``rpc.jsonrpc.error_code`` and ``rpc.jsonrpc.error_message`` with
the span's status ``ERROR``). Its parent is the request's W3C trace context (``current_request().traceparent``:
the ``traceparent`` header over HTTP, else ``params._meta.traceparent``; over HTTP with its ``tracestate``
header), read with OpenTelemetry's W3C propagator; without one, the span continues whatever span is current
(a framework's own). The span is current while the handler runs, so the handler's spans are its children.

Only ``opentelemetry-api`` is needed (an SDK, or any other implementation, decides where spans go).
"""

from __future__ import annotations

from typing import Any

from rpcwire._context import RequestContext
from rpcwire._observe import CallInfo, application_error, around
from rpcwire._types import ERR_REQUEST_CANCELLED, Handler

__all__ = ["instrument"]

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as _missing:  # pragma: no cover - the extra not installed
    raise ImportError("rpcwire.otel needs opentelemetry-api: pip install 'rpcwire[otel]'") from _missing

_PROPAGATOR = TraceContextTextMapPropagator()


def instrument(handler: Handler, *, tracer_provider: Any = None) -> Handler:
    """``handler`` with a span per call (see the module doc). ``tracer_provider``: the provider to take the tracer
    from (default: OpenTelemetry's global one, read at each call until one is set)."""
    from rpcwire import __version__  # noqa: PLC0415  (rpcwire imports nothing of this module)

    tracer = trace.get_tracer("rpcwire", __version__, tracer_provider=tracer_provider)

    def before(method: str, context: RequestContext | None) -> tuple[Any, object]:
        parent = None
        attributes: dict[str, Any] = {"rpc.system": "jsonrpc", "rpc.method": method, "rpc.jsonrpc.version": "2.0"}
        if context is not None:
            if not context.is_notification:
                request_id = context.id
                attributes["rpc.jsonrpc.request_id"] = "" if request_id is None else str(request_id)
            traceparent = context.traceparent
            if traceparent is not None:
                carrier = {"traceparent": traceparent}
                http = context.http
                # tracestate goes with the traceparent of the same headers, not with one from params._meta.
                if http is not None and "tracestate" in http.headers and http.headers.get("traceparent") == traceparent:
                    carrier["tracestate"] = http.headers["tracestate"]
                parent = _PROPAGATOR.extract(carrier)
        span = tracer.start_span(method, context=parent, kind=trace.SpanKind.SERVER, attributes=attributes)
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        return span, token

    def after(state: tuple[Any, object], info: CallInfo) -> None:
        span, token = state
        try:
            if info.error_code is not None:
                exc = info.exception
                # The code and message the answer carries: a JsonRpcError the core cannot read is an internal
                # error, and an unexpected exception, like any other (its properties are not read again here).
                own = None if exc is None else application_error(exc)
                if own is not None:
                    message = own[1]
                elif info.error_code == ERR_REQUEST_CANCELLED:
                    message = "Request cancelled"
                else:
                    message = "Internal error"
                span.set_attribute("rpc.jsonrpc.error_code", info.error_code)
                span.set_attribute("rpc.jsonrpc.error_message", message)
                if exc is not None and own is None:
                    span.record_exception(exc)
                span.set_status(trace.Status(trace.StatusCode.ERROR, f"{info.error_code} {message}"))
            span.end()
        finally:
            otel_context.detach(token)  # type: ignore[arg-type]

    return around(handler, before, after)
