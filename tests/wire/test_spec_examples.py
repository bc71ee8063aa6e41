"""The examples of section 7 of the JSON-RPC 2.0 specification, one line each (batches collapsed onto one line).

Answers are compared as JSON values: the specification lists members in another order than the wire does.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
import rpcwire
from support.messages import answers
from support.serving import served

# (request line, expected answers); a multi-line example of the specification is joined with spaces.
EXAMPLES: dict[str, tuple[str, list[Any]]] = {
    "positional 42,23": (
        '{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}',
        [{"jsonrpc": "2.0", "result": 19, "id": 1}],
    ),
    "positional 23,42": (
        '{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}',
        [{"jsonrpc": "2.0", "result": -19, "id": 2}],
    ),
    "named subtrahend first": (
        '{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}',
        [{"jsonrpc": "2.0", "result": 19, "id": 3}],
    ),
    "named minuend first": (
        '{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}',
        [{"jsonrpc": "2.0", "result": 19, "id": 4}],
    ),
    "notification update": ('{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}', []),
    "notification foobar": ('{"jsonrpc": "2.0", "method": "foobar"}', []),
    "non-existent method": (
        '{"jsonrpc": "2.0", "method": "foobar", "id": "1"}',
        [{"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "1"}],
    ),
    "invalid JSON": (
        '{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]',
        [{"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": None}],
    ),
    "invalid Request object": (
        '{"jsonrpc": "2.0", "method": 1, "params": "bar"}',
        [{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": None}],
    ),
    "batch, invalid JSON": (
        '[ {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"}, {"jsonrpc": "2.0", "method" ]',
        [{"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": None}],
    ),
    "empty Array": (
        "[]",
        [{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": None}],
    ),
    "invalid batch [1]": (
        "[1]",
        [[{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": None}]],
    ),
    "invalid batch [1,2,3]": (
        "[1,2,3]",
        [[{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": None}] * 3],
    ),
    "batch": (
        "[ "
        '{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"}, '
        '{"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}, '
        '{"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"}, '
        '{"foo": "boo"}, '
        '{"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"}, '
        '{"jsonrpc": "2.0", "method": "get_data", "id": "9"} '
        "]",
        [
            [
                {"jsonrpc": "2.0", "result": 7, "id": "1"},
                {"jsonrpc": "2.0", "result": 19, "id": "2"},
                {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": None},
                {"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "5"},
                {"jsonrpc": "2.0", "result": ["hello", 5], "id": "9"},
            ]
        ],
    ),
    "batch, all notifications": (
        "[ "
        '{"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]}, '
        '{"jsonrpc": "2.0", "method": "notify_hello", "params": [7]} '
        "]",
        [],
    ),
}

# The calls each example must make to the handler, in order.
CALLS: dict[str, list[tuple[str, Any]]] = {
    "positional 42,23": [("subtract", [42, 23])],
    "positional 23,42": [("subtract", [23, 42])],
    "named subtrahend first": [("subtract", {"subtrahend": 23, "minuend": 42})],
    "named minuend first": [("subtract", {"minuend": 42, "subtrahend": 23})],
    "notification update": [("update", [1, 2, 3, 4, 5])],
    "notification foobar": [("foobar", None)],
    "non-existent method": [("foobar", None)],
    "batch": [
        ("sum", [1, 2, 4]),
        ("notify_hello", [7]),
        ("subtract", [42, 23]),
        ("foo.get", {"name": "myself"}),
        ("get_data", None),
    ],
    "batch, all notifications": [("notify_sum", [1, 2, 4]), ("notify_hello", [7])],
}


class SpecHandler:
    """The methods the specification's examples call; anything else is MethodNotFound. Records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def __call__(self, method: str, params: Any) -> Any:
        self.calls.append((method, params))
        if method == "subtract":
            if isinstance(params, dict):
                return params["minuend"] - params["subtrahend"]
            minuend, subtrahend = params
            return minuend - subtrahend
        if method == "sum":
            return sum(params)
        if method == "get_data":
            return ["hello", 5]
        if method in ("notify_hello", "notify_sum", "update"):
            return None
        raise rpcwire.MethodNotFound()


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_specification_example(impl: ModuleType, name: str) -> None:
    line, expected = EXAMPLES[name]
    handler = SpecHandler()
    assert answers(served(impl, line.encode() + b"\n", handler)) == expected
    assert handler.calls == CALLS.get(name, [])


def test_all_examples_in_one_stream(impl: ModuleType) -> None:
    """The examples back to back on one connection: answers in the same order, nothing lost."""
    data = b"".join(line.encode() + b"\n" for line, _ in EXAMPLES.values())
    expected = [answer for _, answers_ in EXAMPLES.values() for answer in answers_]
    handler = SpecHandler()
    assert answers(served(impl, data, handler)) == expected
    assert handler.calls == [call for name in EXAMPLES for call in CALLS.get(name, [])]
