"""``methods()``: a handler from functions (shared Python), through ``dispatch`` and ``serve`` of both cores."""

from __future__ import annotations

import asyncio
import functools
import json
import threading
from types import ModuleType
from typing import Any

import pytest
import rpcwire
from rpcwire._engine import is_async_handler
from support.messages import answers, err, ok, request
from support.serving import transport_for


def add(a: int, b: int) -> int:
    return a + b


def subtract(minuend: int, subtrahend: int = 0) -> int:
    return minuend - subtrahend


def fails(kind: str) -> None:
    if kind == "type":
        raise TypeError("inside the function")
    raise rpcwire.JsonRpcError("application error", data={"kind": kind})


def answer(impl: ModuleType, handler: Any, message: bytes) -> Any:
    body = impl.dispatch(message, handler)
    return None if body is None else json.loads(body)


REGISTRY = rpcwire.methods({"add": add, "subtract": subtract, "fails": fails, "ping": lambda: "pong"})


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ([10, 15], 25),
        ({"a": 10, "b": 15}, 25),
        ([10], [{"path": ["b"], "expected": "int", "got": "missing"}]),
        ([1, 2, 3], [{"path": [2], "expected": "no such parameter", "got": "3"}]),
        ({"a": 1, "b": 2, "c": 3}, [{"path": ["c"], "expected": "no such parameter", "got": "3"}]),
        ({"a": 1}, [{"path": ["b"], "expected": "int", "got": "missing"}]),
        (
            None,
            [
                {"path": ["a"], "expected": "int", "got": "missing"},
                {"path": ["b"], "expected": "int", "got": "missing"},
            ],
        ),
    ],
)
def test_params_bind_positionally_or_by_name(impl: ModuleType, params: Any, expected: Any) -> None:
    got = answer(impl, REGISTRY, request("add", params))
    if isinstance(expected, int):
        assert got == ok(1, expected)
    else:
        assert got == err(1, rpcwire.ERR_INVALID_PARAMS, "Invalid params", expected)


def test_defaults_and_absent_params(impl: ModuleType) -> None:
    assert answer(impl, REGISTRY, request("subtract", {"minuend": 42})) == ok(1, 42)
    assert answer(impl, REGISTRY, request("subtract", [42, 23])) == ok(1, 19)
    assert answer(impl, REGISTRY, request("ping")) == ok(1, "pong")
    assert answer(impl, REGISTRY, request("ping", [])) == ok(1, "pong")
    assert answer(impl, REGISTRY, request("ping", {})) == ok(1, "pong")


def test_an_unknown_method_is_method_not_found(impl: ModuleType) -> None:
    assert answer(impl, REGISTRY, request("multiply", [1, 2])) == err(
        1, rpcwire.ERR_METHOD_NOT_FOUND, "Method not found"
    )
    assert answer(impl, rpcwire.methods(), request("add", [1, 2]))["error"]["code"] == rpcwire.ERR_METHOD_NOT_FOUND


def test_an_exception_inside_the_function_is_not_invalid_params(impl: ModuleType) -> None:
    """Only the binding is -32602: a TypeError raised by the function's own code is -32603."""
    assert answer(impl, REGISTRY, request("fails", ["type"])) == err(
        1, rpcwire.ERR_INTERNAL, "Internal error", {"exception": "TypeError", "detail": "inside the function"}
    )
    assert answer(impl, REGISTRY, request("fails", ["app"])) == err(1, -32603, "application error", {"kind": "app"})


def test_params_that_do_not_bind_through_a_wrapper_are_invalid_params(impl: ModuleType) -> None:
    """A sync function is called before its binding is checked: a decorator's wrapper (its signature the
    function's, by functools.wraps) runs, the function raises TypeError, and the answer is still -32602."""
    calls: list[str] = []

    def logged(function: Any) -> Any:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(function.__name__)
            return function(*args, **kwargs)

        return wrapper

    registry = rpcwire.methods({"add": logged(add)})
    assert answer(impl, registry, request("add", [1, 2])) == ok(1, 3)
    missing = err(
        1, rpcwire.ERR_INVALID_PARAMS, "Invalid params", [{"path": ["b"], "expected": "int", "got": "missing"}]
    )
    assert answer(impl, registry, request("add", [1])) == missing
    assert answer(impl, registry, request("add", {"a": 1, "c": 2}))["error"]["code"] == rpcwire.ERR_INVALID_PARAMS
    assert calls == ["add"] * 3


def test_decorators(impl: ModuleType) -> None:
    registry = rpcwire.methods()

    @registry.method
    def echo(*args: Any, **kwargs: Any) -> Any:
        return [list(args), kwargs]

    @registry.method("math.add")
    def named(a: int, b: int) -> int:
        return a + b

    assert echo(1) == [[1], {}]  # the decorators give the function back
    assert "echo" in registry and "math.add" in registry and "named" not in registry
    assert answer(impl, registry, request("echo", [1, 2])) == ok(1, [[1, 2], {}])
    assert answer(impl, registry, request("echo", {"_meta": {}, "x": 1})) == ok(1, [[], {"_meta": {}, "x": 1}])
    assert answer(impl, registry, request("math.add", [2, 3])) == ok(1, 5)


def test_registration_errors() -> None:
    with pytest.raises(TypeError, match="not callable"):
        rpcwire.methods({"x": 1})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="method name is a str"):
        rpcwire.methods().add(add, 1)  # type: ignore[arg-type]
    assert rpcwire.pure.methods is rpcwire.methods


# --- async def functions -------------------------------------------------------------------------


async def slow_add(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


def test_a_registry_with_an_async_function_is_an_async_handler() -> None:
    registry = rpcwire.methods({"add": add})
    assert not is_async_handler(registry)
    registry.add(slow_add, "slow_add")
    assert is_async_handler(registry)
    registry.add(add, "slow_add")  # replaced by a sync one
    assert not is_async_handler(registry)


def test_async_functions_under_serve(impl: ModuleType) -> None:
    """``serve`` (both implementations, and the transport's own ``serve``) runs an async registry on a loop;
    its sync functions run on threads, never on the loop."""
    loop_threads: set[int] = set()
    sync_threads: set[int] = set()

    async def where() -> None:
        loop_threads.add(threading.get_ident())

    def sync_add(a: int, b: int) -> int:
        sync_threads.add(threading.get_ident())
        return a + b

    registry = rpcwire.methods({"slow_add": slow_add, "sync_add": sync_add, "where": where})
    data = (
        request("slow_add", [1, 2], id=1)
        + request("slow_add", {"a": 1}, id=2)
        + request("sync_add", [3, 4], id=3)
        + request("where", id=4)
    )
    for serve in (impl.serve, lambda handler, transport: transport.serve(handler)):
        transport, out = transport_for(impl, data)
        serve(registry, transport)
        got = sorted(answers(out.getvalue()), key=lambda answer: answer["id"])
        assert got == [
            ok(1, 3),
            err(
                2, rpcwire.ERR_INVALID_PARAMS, "Invalid params", [{"path": ["b"], "expected": "int", "got": "missing"}]
            ),
            ok(3, 7),
            ok(4, None),
        ]
    assert loop_threads and sync_threads and not loop_threads & sync_threads


def test_async_functions_under_serve_async_see_their_request(impl: ModuleType) -> None:
    async def who() -> Any:
        return rpcwire.current_request().id

    transport, out = transport_for(impl, request("who", id="a") + request("who", id="b"))
    asyncio.run(rpcwire.serve_async(rpcwire.methods({"who": who}), transport, max_concurrency=2))
    assert sorted(answers(out.getvalue()), key=lambda answer: answer["id"]) == [ok("a", "a"), ok("b", "b")]


def test_mcp_meta_goes_only_to_functions_that_take_it(impl: ModuleType) -> None:
    def plain(x: int) -> int:
        return x

    def with_meta(x: int, _meta: Any = None) -> Any:
        return [x, _meta]

    registry = rpcwire.methods({"plain": plain, "with_meta": with_meta})
    params = {"x": 1, "_meta": {"progressToken": "t"}}
    assert answer(impl, registry, request("plain", params)) == ok(1, 1)
    assert answer(impl, registry, request("with_meta", params)) == ok(1, [1, {"progressToken": "t"}])
    assert answer(impl, registry, request("plain", {"_meta": {}}))["error"]["data"] == [
        {"path": ["x"], "expected": "int", "got": "missing"}
    ]


def test_lsp_work_done_token_goes_only_to_functions_that_take_it(impl: ModuleType) -> None:
    def plain(x: int) -> int:
        return x

    def with_token(x: int, workDoneToken: Any = None) -> Any:  # LSP's member name
        return [x, workDoneToken]

    registry = rpcwire.methods({"plain": plain, "with_token": with_token})
    params = {"x": 1, "workDoneToken": "t", "_meta": {}}
    assert answer(impl, registry, request("plain", params)) == ok(1, 1)
    assert answer(impl, registry, request("with_token", params)) == ok(1, [1, "t"])
