"""The server the client tests talk to: ``python client_server.py [IMPL] [N]`` serves ``handler(IMPL)`` on
stdin/stdout (IMPL ``rpcwire`` or ``rpcwire.pure``, the client's own; N the engine's ``max_concurrency``,
default 8); the HTTP tests serve the same ``handler`` with ``rpcwire.http.ASGIApp``. ``CHAIN_TO`` in the
environment: the argv (JSON) of a second server that ``relay`` calls with a ``Client``.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import threading
import time
from types import ModuleType
from typing import Any


def answer_again_on(rpc: ModuleType) -> Any:
    """The method ``answer_again`` on implementation ``rpc`` (stdio only)."""

    def answer_again() -> int:
        """Answers again every call made before this one (ids 1 to this one's less one, each ``"again"``), then
        answers how many: a client with nothing in flight drops each as an answer to no call."""
        own = rpc.current_request().id
        again = [json.dumps({"jsonrpc": "2.0", "id": id_, "result": "again"}).encode() for id_ in range(1, own)]
        transport._write_lines(again)
        return len(again)

    return answer_again


def handler(rpc: ModuleType) -> Any:
    """The test methods, on implementation ``rpc``."""
    cancelled: list[Any] = []

    def add(a: Any, b: Any) -> Any:
        return a + b

    def sleep(seconds: float) -> str:
        """Sleeps, watching for its cancellation (recorded for ``cancelled_ids``)."""
        context = rpc.current_request()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if context.cancelled:
                cancelled.append(context.id)
                raise rpc.RequestCancelled()
            time.sleep(0.005)
        return "slept"

    def nap(seconds: float) -> str:
        time.sleep(seconds)
        return "napped"

    def cancelled_ids() -> list[Any]:
        return cancelled

    def progress(steps: int) -> int:
        context = rpc.current_request()
        for step in range(1, steps + 1):
            context.progress(step, steps, f"step {step}")
        return steps

    def fail(code: int, data: Any = None) -> None:
        error = rpc.JsonRpcError("custom failure", data)
        error.code = code
        raise error

    def invalid(reason: str) -> None:
        raise rpc.InvalidParams(reason)

    def announce(text: str) -> str:
        rpc.current_request().notify("log", {"text": text})
        return text

    def announce_later(text: str, delay: float) -> None:
        """Answers now, then notifies ``log`` after ``delay`` seconds (while the client may be idle): a
        notification of the server's own (stdio only), since nothing about a request follows its answer."""
        threading.Timer(delay, transport.write_notification, ("log", {"text": text})).start()

    def crash(code: int) -> None:
        print("about to crash: the server's last words", file=sys.stderr, flush=True)
        os._exit(code)

    def trace() -> Any:
        return rpc.current_request().traceparent

    def relay() -> list[Any]:
        """Calls ``trace`` on the chained server: [this request's traceparent, the chained server's]."""
        with rpc.Client.spawn(json.loads(os.environ["CHAIN_TO"]), timeout=30) as downstream:
            theirs = downstream.call("trace")
        return [rpc.current_request().traceparent, theirs]

    def echo(**params: Any) -> Any:
        return params

    def deep(levels: int) -> Any:
        """A result of ``levels`` nested arrays."""
        result: Any = []
        for _ in range(levels - 1):
            result = [result]
        return result

    def spawn_sleeper(pid_file: str) -> int:
        """Starts a grandchild that sleeps, holding this server's stdin, stdout and stderr; its pid goes to
        ``pid_file`` (the test kills it)."""
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        with open(pid_file, "w") as file:
            file.write(str(sleeper.pid))
        return sleeper.pid

    functions = [
        add,
        nap,
        sleep,
        cancelled_ids,
        progress,
        fail,
        invalid,
        announce,
        announce_later,
        answer_again_on(rpc),
        crash,
        trace,
        relay,
        echo,
        deep,
        spawn_sleeper,
    ]
    return rpc.methods({function.__name__: function for function in functions})


if __name__ == "__main__":
    implementation = importlib.import_module(sys.argv[1] if len(sys.argv) > 1 else "rpcwire")
    transport = implementation.StdioTransport(sys.stdin.buffer, sys.stdout.buffer)
    implementation.serve(
        handler(implementation), transport, max_concurrency=int(sys.argv[2]) if len(sys.argv) > 2 else 8
    )
