"""Every implementation measured, as a function serving one binary input stream into one binary output.

Each `serve_*` reads newline-delimited JSON-RPC from `inp` until EOF and writes its answers to `out`,
calling the same handler (it returns `params`) the way that library is meant to be used. The
in-memory workloads call them on `io.BytesIO`; bench/pipe_server.py calls them on the process's
stdin and stdout. What each one does exactly is in bench/README.md.
"""

from __future__ import annotations

import asyncio
import functools
import io
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

import anyio
import jsonrpc
import jsonrpcserver
import mcp_types
import orjson
import orjson_transport
import pylsp_jsonrpc.streams as lsp_streams
import rpcwire
import rpcwire.pure
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pylsp_jsonrpc.endpoint import Endpoint

# Every library here logs bad input (pylsp with a traceback per malformed line); the benchmark
# measures serving, not logging, so logging is off for all of them alike.
logging.disable(logging.CRITICAL)


def handler(method: str, params: Any) -> Any:
    return params


async def async_handler(method: str, params: Any) -> Any:
    return params


def serve_native(inp: BinaryIO, out: BinaryIO) -> None:
    rpcwire.serve(handler, rpcwire.StdioTransport(inp, out))


def serve_pure(inp: BinaryIO, out: BinaryIO) -> None:
    rpcwire.pure.serve(handler, rpcwire.pure.StdioTransport(inp, out))


def serve_orjson(inp: BinaryIO, out: BinaryIO) -> None:
    orjson_transport.serve(handler, inp, out)


class _LineReader(lsp_streams.JsonRpcStreamReader):
    """pylsp-jsonrpc's reader with newline framing instead of Content-Length headers."""

    def _read_message(self) -> bytes | None:
        return self._rfile.readline() or None


class _LineWriter(lsp_streams.JsonRpcStreamWriter):
    """pylsp-jsonrpc's writer (same lock, same ujson call) with newline framing."""

    def write(self, message: Any) -> None:
        with self._wfile_lock:
            if self._wfile.closed:
                return
            body = lsp_streams.json.dumps(message, **self._json_dumps_args)
            self._wfile.write(body.encode("utf-8") + b"\n")
            self._wfile.flush()


def serve_pylsp(inp: BinaryIO, out: BinaryIO) -> None:
    endpoint = Endpoint({"echo": lambda params: handler("echo", params)}, _LineWriter(out).write)
    try:
        _LineReader(inp).listen(endpoint.consume)
    finally:
        endpoint.shutdown()


def _jrs_echo(**params: Any) -> Any:
    return jsonrpcserver.Success(handler("echo", params))


def serve_jsonrpcserver(inp: BinaryIO, out: BinaryIO) -> None:
    methods = {"echo": _jrs_echo}
    for line in iter(inp.readline, b""):
        answer = jsonrpcserver.dispatch(line.decode("utf-8"), methods=methods)
        if answer:
            out.write(answer.encode("utf-8") + b"\n")
            out.flush()


def serve_json_rpc(inp: BinaryIO, out: BinaryIO) -> None:
    dispatcher = jsonrpc.Dispatcher({"echo": lambda **params: handler("echo", params)})
    for line in iter(inp.readline, b""):
        answer = jsonrpc.JSONRPCResponseManager.handle(line, dispatcher)
        if answer is not None:
            out.write(answer.json.encode("utf-8") + b"\n")
            out.flush()


def _mcp_answer(message: Any) -> SessionMessage | None:
    """What an MCP server session sends back for a request it has handled."""
    if not isinstance(message, mcp_types.JSONRPCRequest):
        return None
    result = handler(message.method, message.params)
    return SessionMessage(mcp_types.JSONRPCResponse(jsonrpc="2.0", id=message.id, result=result))


def serve_mcp_codec(inp: BinaryIO, out: BinaryIO) -> None:
    """The per-line work of mcp.server.stdio.stdio_server, without its anyio tasks and thread hops."""
    validate_json = mcp_types.jsonrpc_message_adapter.validate_json
    stdin = io.TextIOWrapper(inp, encoding="utf-8", errors="replace")
    stdout = io.TextIOWrapper(out, encoding="utf-8")
    try:
        for line in stdin:
            try:
                message = SessionMessage(validate_json(line, by_name=False))
            except Exception:  # stdio_server hands the exception to the session, which answers nothing
                continue
            answer = _mcp_answer(message.message)
            if answer is not None:
                stdout.write(answer.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n")
                stdout.flush()
    finally:
        stdin.detach()
        stdout.detach()


async def _mcp_session(read_stream: Any, write_stream: Any) -> None:
    async with write_stream:
        async for item in read_stream:
            if isinstance(item, Exception):
                continue
            answer = _mcp_answer(item.message)
            if answer is not None:
                await write_stream.send(answer)


async def _mcp_stdio(stdin: Any = None, stdout: Any = None) -> None:
    async with stdio_server(stdin, stdout) as (read_stream, write_stream):
        await _mcp_session(read_stream, write_stream)


def serve_mcp_stdio(inp: BinaryIO, out: BinaryIO) -> None:
    """mcp.server.stdio.stdio_server itself (anyio; each line read and written through a worker thread)."""
    stdin = io.TextIOWrapper(inp, encoding="utf-8", errors="replace")
    stdout = io.TextIOWrapper(out, encoding="utf-8")
    try:
        anyio.run(_mcp_stdio, anyio.wrap_file(stdin), anyio.wrap_file(stdout))
    finally:
        stdout.flush()
        stdin.detach()
        stdout.detach()


def serve_mcp_stdio_process() -> None:
    """On the process's own stdin/stdout, as an MCP server runs it."""
    anyio.run(_mcp_stdio)


def serve_orjson_loop(inp: BinaryIO, out: BinaryIO, handler: Callable[[str, Any], Any] = handler) -> None:
    """The plain loop issue 11 measures against: `orjson.loads`, the handler, `orjson.dumps` of the answer.

    No envelope check, no batches, no error answers: the least a Python loop on orjson does per line.
    """
    loads, dumps, write, newline = orjson.loads, orjson.dumps, out.write, orjson.OPT_APPEND_NEWLINE
    for line in inp:
        msg = loads(line)
        result = handler(msg["method"], msg.get("params"))
        write(dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}, option=newline))


def serve_floor(inp: BinaryIO, out: BinaryIO) -> None:
    write = out.write
    flush = out.flush
    for line in iter(inp.readline, b""):
        write(line)
        flush()


@dataclass(frozen=True)
class Impl:
    name: str
    serve: Callable[[BinaryIO, BinaryIO], None]
    batches: bool = True  # answers a batch line with an array
    parse_errors: bool = True  # answers a malformed line with -32700
    # Slow peers run the first N messages of a workload (per workload name); µs per message is
    # measured on those and the report says so.
    subset: tuple[tuple[str, int], ...] = ()
    serve_process: Callable[[], None] | None = None
    # The concurrent variants of rpcwire and rpcwire.pure (see concurrent_variant): which package, which mode.
    base: str = ""
    mode: str = ""
    max_concurrency: int = 1

    def limit(self, workload: str) -> int | None:
        return dict(self.subset).get(workload)

    def serve_stdio(self) -> None:
        if self.serve_process is not None:
            self.serve_process()
        else:
            self.serve(sys.stdin.buffer, sys.stdout.buffer)


IMPLS: dict[str, Impl] = {
    impl.name: impl
    for impl in (
        Impl("rpcwire", serve_native),
        Impl("rpcwire.pure", serve_pure),
        Impl("orjson", serve_orjson),
        Impl("pylsp-jsonrpc", serve_pylsp, batches=False, parse_errors=False, subset=(("large", 40),)),
        Impl(
            "jsonrpcserver",
            serve_jsonrpcserver,
            subset=(("stream", 20_000), ("batch", 20_000), ("large", 40), ("pipelined", 20_000)),
        ),
        Impl("json-rpc", serve_json_rpc, subset=(("large", 40),)),
        Impl("mcp-codec", serve_mcp_codec, batches=False, parse_errors=False, subset=(("large", 40),)),
        Impl(
            "mcp-stdio",
            serve_mcp_stdio,
            batches=False,
            parse_errors=False,
            subset=(
                ("stream", 10_000),
                ("large", 40),
                ("ping-pong", 5_000),
                ("pipelined", 10_000),
                ("pipelined-concurrent", 10_000),
            ),
            serve_process=serve_mcp_stdio_process,
        ),
        Impl("floor", serve_floor),
        Impl("orjson-loop", serve_orjson_loop, batches=False, parse_errors=False),
    )
}

# --- the payload workloads (workloads.PAYLOADS, issue 11) ------------------------------------------------

# Who runs them: rpcwire against its pure twin and the two orjson loops (the other peers are 5-50x slower
# on the small messages already, and would make the run minutes longer).
PAYLOAD_IMPLS = ("rpcwire", "rpcwire.pure", "orjson", "orjson-loop")


def payload_handler(mode: str, payload: Any) -> Callable[[str, Any], Any]:
    """The handler of one mode of a payload workload (workloads.PAYLOAD_MODES)."""
    if mode == "decode":
        return lambda method, params: None
    if mode == "encode":
        return lambda method, params: payload
    return handler


def serve_payload(name: str, data: bytes, payload_handler: Callable[[str, Any], Any]) -> bytes:
    """Serve `data` with implementation `name` and `payload_handler`; the output."""
    inp, out = io.BytesIO(data), io.BytesIO()
    if name == "rpcwire":
        rpcwire.serve(payload_handler, rpcwire.StdioTransport(inp, out))
    elif name == "rpcwire.pure":
        rpcwire.pure.serve(payload_handler, rpcwire.pure.StdioTransport(inp, out))
    elif name == "orjson":
        orjson_transport.serve(payload_handler, inp, out)
    elif name == "orjson-loop":
        serve_orjson_loop(inp, out, payload_handler)
    else:
        raise ValueError(name)
    return out.getvalue()


BASELINE = "rpcwire@baseline"
"""Another build of rpcwire (``run.py --baseline DIR``): its pipe server imports ``rpcwire`` from DIR."""
BASELINE_PATH_VARIABLE = "RPCWIRE_BENCH_BASELINE"


# --- the concurrent engine (rpcwire.serve(..., max_concurrency=N), rpcwire.serve_async) ---------------

CONCURRENT_BASES = {"rpcwire": rpcwire, "rpcwire.pure": rpcwire.pure}
MODES = {
    "threads": "threads (`serve`, sync handler)",
    "asyncio": "asyncio (`serve_async`, async def handler)",
    "asyncio-sync": "asyncio (`serve_async`, sync handler on worker threads)",
}
PIPE_CONCURRENCY = 16  # max_concurrency of the concurrent variants on pipes (a trivial echo)
SLEEP_CONCURRENCY = 100  # max_concurrency of "concurrent-sleep"
SLEEP_SECONDS = 0.01  # what each handler of "concurrent-sleep" sleeps


def sleep_handler(method: str, params: Any) -> Any:
    time.sleep(SLEEP_SECONDS)
    return params


async def async_sleep_handler(method: str, params: Any) -> Any:
    await asyncio.sleep(SLEEP_SECONDS)
    return params


def serve_concurrent(
    inp: BinaryIO,
    out: BinaryIO,
    *,
    base: str,
    mode: str,
    max_concurrency: int,
    sync_handler: Callable[[str, Any], Any],
    coroutine_handler: Callable[[str, Any], Any],
) -> None:
    package = CONCURRENT_BASES[base]
    transport = package.StdioTransport(inp, out)
    if mode == "threads":
        package.serve(sync_handler, transport, max_concurrency=max_concurrency)
    else:
        chosen = coroutine_handler if mode == "asyncio" else sync_handler
        asyncio.run(package.serve_async(chosen, transport, max_concurrency=max_concurrency))


def concurrent_variant(
    base: str,
    mode: str,
    max_concurrency: int,
    sync_handler: Callable[[str, Any], Any] = handler,
    coroutine_handler: Callable[[str, Any], Any] = async_handler,
) -> Impl:
    """rpcwire or rpcwire.pure served by the engine in one mode, named "BASE/MODE"."""
    serve = functools.partial(
        serve_concurrent,
        base=base,
        mode=mode,
        max_concurrency=max_concurrency,
        sync_handler=sync_handler,
        coroutine_handler=coroutine_handler,
    )
    return Impl(f"{base}/{mode}", serve, base=base, mode=mode, max_concurrency=max_concurrency)


# On pipes (bench/pipe_server.py looks them up by name): the trivial echo, threads and asyncio.
PIPE_VARIANTS: dict[str, Impl] = {
    impl.name: impl
    for base in CONCURRENT_BASES
    for impl in (
        concurrent_variant(base, "threads", PIPE_CONCURRENCY),
        concurrent_variant(base, "asyncio", PIPE_CONCURRENCY),
    )
}


def sleep_variants(base: str) -> list[Impl]:
    """The three modes of "concurrent-sleep" for one package: handlers sleeping SLEEP_SECONDS."""
    return [concurrent_variant(base, mode, SLEEP_CONCURRENCY, sleep_handler, async_sleep_handler) for mode in MODES]


def get(name: str) -> Impl:
    return IMPLS[name] if name in IMPLS else PIPE_VARIANTS[name]


def run(impl: Impl, data: bytes) -> bytes:
    out = io.BytesIO()
    impl.serve(io.BytesIO(data), out)
    return out.getvalue()


def unavailable(impl: Impl, data: bytes) -> str | None:
    """Why `impl` cannot serve on this build (a transport without the engine's core methods), else None.

    Runs it once on `data` (a warm-up too). The native transport gains `_read_message` & co. in another
    branch; until then its concurrent modes raise AttributeError, reported as "not available".
    """
    try:
        run(impl, data)
    except AttributeError as exc:
        return f"not available on this build: {exc}"
    return None
