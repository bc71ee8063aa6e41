"""The wire's bytes in the tests: build request lines, decode answers, the answers every test expects.

Every behaviour test runs against both cores: ``IMPLEMENTATIONS`` names them (``native`` is ``import
rpcwire``: the Rust module, or ``rpcwire.pure`` when it is not built; ``pure`` is ``rpcwire.pure``), and the
``impl`` fixture of ``tests/conftest.py`` parametrizes over it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import pytest
import rpcwire
import rpcwire.pure

IMPLEMENTATIONS = {"native": rpcwire, "pure": rpcwire.pure}


def needs_native(why: str) -> pytest.MarkDecorator:
    """Skip a test of the native core's own behaviour (``why``) where ``import rpcwire`` serves through
    ``rpcwire.pure`` (the pure wheel, or a source tree without the built module); for a test run against both
    cores whose ``native`` case alone expects it, ``@pytest.mark.native_case(why)`` (``conftest.py``)."""
    return pytest.mark.skipif(not rpcwire.NATIVE, reason=f"rpcwire serves through rpcwire.pure here: {why}")


Handler = Callable[[str, Any], Any]

# How many digits int() accepts; 0 where there is no limit: CPython 3.10.0 to 3.10.6 have neither the limit
# nor sys.get_int_max_str_digits (0 is also what sys.set_int_max_str_digits(0) sets: no limit).
INT_MAX_STR_DIGITS: int = getattr(sys, "get_int_max_str_digits", lambda: 0)()
# Inputs "as long as the limit allows" where there is none: long enough to go through int() as text.
LONG_INT_DIGITS = INT_MAX_STR_DIGITS or 4_300
needs_int_digit_limit = pytest.mark.skipif(
    INT_MAX_STR_DIGITS == 0, reason="int() has no digit limit here (CPython 3.10.0 to 3.10.6, or set to 0)"
)


def compact(value: Any) -> bytes:
    """``value`` the way the wire must carry it: compact UTF-8 JSON, no NaN (as ``json.dumps`` writes it)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def answers(out: bytes) -> list[Any]:
    """Decode every output line, checking that each is one compact JSON text ending in ``\\n``."""
    assert out == b"" or out.endswith(b"\n"), out
    decoded = []
    for line in out.splitlines(keepends=True):
        assert line.endswith(b"\n"), line
        value = json.loads(line)
        assert compact(value) + b"\n" == line, f"not compact JSON: {line!r}"
        decoded.append(value)
    return decoded


def request(method: str, params: Any = None, id: Any = 1, **extra: Any) -> bytes:
    """One request line (params left out when ``None``); ``id=...`` (Ellipsis) makes a notification."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    if id is not ...:
        message["id"] = id
    message.update(extra)
    return compact(message) + b"\n"


def ok(id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "result": result}


def err(id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": id, "error": error}


PARSE_ERROR = err(None, -32700, "Parse error")
INVALID_REQUEST = err(None, -32600, "Invalid Request")


def echo(method: str, params: Any) -> Any:
    """Returns the params; ``missing`` raises MethodNotFound, ``boom`` raises ValueError."""
    if method == "missing":
        raise rpcwire.MethodNotFound()
    if method == "boom":
        raise ValueError("boom")
    return params


def nested_list(depth: int) -> list[Any]:
    """A Python list nested ``depth`` levels deep (``[]`` is one level), built without recursion."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value
