"""``rpcwire.otel``: a span per call with the RPC semantic conventions, continuing the request's ``traceparent``,
exported by the OpenTelemetry SDK's in-memory exporter from requests really served (stdio ``serve`` in each
core, ``WSGIApp`` under ``wsgiref``, ``ASGIApp`` under uvicorn)."""

from __future__ import annotations

import asyncio
import io
import threading
import time
import wsgiref.simple_server
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from support.messages import answers, request

pytest.importorskip("opentelemetry.sdk")
requests = pytest.importorskip("requests")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from rpcwire import JsonRpcError, methods, otel  # noqa: E402
from rpcwire.http import ASGIApp, WSGIApp  # noqa: E402

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _handler(provider: TracerProvider, *, with_async: bool = False) -> Any:
    """``add``, ``fail`` and, ``with_async``, ``add_async`` (the registry then async: served on an event loop)."""
    tracer = provider.get_tracer("test")

    def add(a: int, b: int) -> int:
        with tracer.start_as_current_span("inner"):  # the handler's own span: a child of the call's
            return a + b

    def fail() -> None:
        raise ValueError("broken")

    async def add_async(a: int, b: int) -> int:
        await asyncio.sleep(0)
        return add(a, b)

    return methods({"add": add, "fail": fail, **({"add_async": add_async} if with_async else {})})


def _by_name(exporter: InMemorySpanExporter) -> dict[str, Any]:
    return {span.name: span for span in exporter.get_finished_spans()}


def test_stdio_serve_in_each_core(impl: ModuleType, spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    data = b"".join(
        [
            request("add", {"a": 1, "b": 2, "_meta": {"traceparent": TRACEPARENT}}, id=7),
            request("missing", id="m"),
            request("fail", id=None),
            request("add", [2, 2], id=...),
        ]
    )
    out = io.BytesIO()
    impl.serve(
        otel.instrument(_handler(provider), tracer_provider=provider), impl.StdioTransport(io.BytesIO(data), out)
    )
    assert [answer.get("error", {}).get("code") for answer in answers(out.getvalue())] == [None, -32601, -32603]
    finished = exporter.get_finished_spans()
    assert [span.name for span in finished] == ["inner", "add", "missing", "fail", "inner", "add"]
    inner, add, missing, fail, _, notified = finished
    assert add.kind == trace.SpanKind.SERVER
    assert dict(add.attributes) == {
        "rpc.system": "jsonrpc",
        "rpc.method": "add",
        "rpc.jsonrpc.version": "2.0",
        "rpc.jsonrpc.request_id": "7",
    }
    assert format(add.context.trace_id, "032x") == TRACE_ID  # continues the caller's trace
    assert format(add.parent.span_id, "016x") == PARENT_ID
    assert add.parent.is_remote
    assert inner.parent.span_id == add.context.span_id
    assert add.status.status_code == trace.StatusCode.UNSET
    assert missing.attributes["rpc.jsonrpc.error_code"] == -32601
    assert missing.attributes["rpc.jsonrpc.error_message"] == "Method not found"
    assert missing.status.status_code == trace.StatusCode.ERROR
    assert missing.parent is None  # no traceparent: a trace of its own
    assert format(missing.context.trace_id, "032x") != TRACE_ID
    assert fail.attributes["rpc.jsonrpc.request_id"] == ""  # "id": null
    assert fail.attributes["rpc.jsonrpc.error_code"] == -32603
    assert [event.name for event in fail.events] == ["exception"]
    assert "rpc.jsonrpc.request_id" not in notified.attributes  # a notification has no id
    assert trace.get_current_span() is trace.INVALID_SPAN  # nothing left attached after the calls


def _served_under_wsgiref(provider: TracerProvider, body: bytes, **headers: str) -> None:
    """``body`` POSTed (with ``headers``) to the instrumented handler under wsgiref; its answer is 3."""
    app = WSGIApp(otel.instrument(_handler(provider), tracer_provider=provider))
    server = wsgiref.simple_server.make_server("127.0.0.1", 0, app, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        response = requests.post(
            f"http://127.0.0.1:{server.server_port}/rpc",
            data=body,
            headers={"Content-Type": "application/json", **headers},
            timeout=30,
        )
        assert response.json()["result"] == 3
    finally:
        server.shutdown()
        server.server_close()


def test_wsgi_under_wsgiref_continues_the_traceparent_header(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    _served_under_wsgiref(provider, request("add", [1, 2], id=1), traceparent=TRACEPARENT, tracestate="vendor=x")
    add = _by_name(exporter)["add"]
    assert format(add.context.trace_id, "032x") == TRACE_ID
    assert format(add.parent.span_id, "016x") == PARENT_ID
    assert add.context.trace_state.get("vendor") == "x"


def test_a_tracestate_header_goes_only_with_the_traceparent_header(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """The trace context of ``params._meta`` is continued without the headers' ``tracestate`` (another trace's)."""
    provider, exporter = spans
    body = request("add", {"a": 1, "b": 2, "_meta": {"traceparent": TRACEPARENT}}, id=1)
    _served_under_wsgiref(provider, body, tracestate="vendor=x")
    add = _by_name(exporter)["add"]
    assert format(add.context.trace_id, "032x") == TRACE_ID
    assert add.context.trace_state.get("vendor") is None


class _Quiet(wsgiref.simple_server.WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.slow
def test_asgi_under_uvicorn_with_an_async_handler(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    uvicorn = pytest.importorskip("uvicorn")
    provider, exporter = spans
    app = ASGIApp(otel.instrument(_handler(provider, with_async=True), tracer_provider=provider))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    try:
        port = server.servers[0].sockets[0].getsockname()[1]
        response = requests.post(
            f"http://127.0.0.1:{port}/rpc",
            data=request("add_async", [1, 2], id="a"),
            headers={"Content-Type": "application/json", "traceparent": TRACEPARENT},
            timeout=30,
        )
        assert response.json()["result"] == 3
    finally:
        server.should_exit = True
        thread.join(30)
    spans_by_name = _by_name(exporter)
    call = spans_by_name["add_async"]
    assert call.attributes["rpc.jsonrpc.request_id"] == "a"
    assert format(call.context.trace_id, "032x") == TRACE_ID
    assert spans_by_name["inner"].parent.span_id == call.context.span_id


class _Unreadable(JsonRpcError):
    """A ``JsonRpcError`` whose ``code`` or ``message`` (``broken``) raises when read: answered -32603."""

    broken = ""  # nothing broken while JsonRpcError.__init__ runs

    def __init__(self, broken: str) -> None:
        super().__init__("readable")
        self.broken = broken

    def __getattribute__(self, name: str) -> Any:
        if name == object.__getattribute__(self, "broken"):
            raise RuntimeError(f"no {name}")
        return object.__getattribute__(self, name)


@pytest.mark.parametrize("broken", ["code", "message"])
def test_an_error_that_cannot_be_read_is_a_span_like_any_internal_error(
    impl: ModuleType, spans: tuple[TracerProvider, InMemorySpanExporter], broken: str
) -> None:
    """The span ends with the code and message the answer carries (-32603), and the answer is the one given without
    the instrumentation."""
    provider, exporter = spans

    def handler(method: str, params: Any) -> Any:
        raise _Unreadable(broken)

    line = request("m", id=1)
    plain = impl.dispatch(line, handler)
    out = io.BytesIO()
    impl.serve(otel.instrument(handler, tracer_provider=provider), impl.StdioTransport(io.BytesIO(line), out))
    assert out.getvalue() == plain + b"\n"
    (span,) = exporter.get_finished_spans()
    assert span.attributes["rpc.jsonrpc.error_code"] == -32603
    assert span.attributes["rpc.jsonrpc.error_message"] == "Internal error"
    assert span.status.status_code == trace.StatusCode.ERROR
    assert [event.name for event in span.events] == ["exception"]
    assert trace.get_current_span() is trace.INVALID_SPAN
