"""Shared fixtures and helpers: every behaviour test runs against both implementations.

``native`` is ``import rpcwire`` (the Rust module, or ``rpcwire.pure`` when it is not built, in
which case ``rpcwire.NATIVE`` is false and the header of the run says so); ``pure`` is
``rpcwire.pure``. The helpers are deliberately small: serve bytes, get bytes, decode lines.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
import rpcwire
import rpcwire.pure

IMPLEMENTATIONS = {"native": rpcwire, "pure": rpcwire.pure}

# How many digits int() accepts; 0 where there is no limit: CPython 3.10.0 to 3.10.6 have neither the limit
# nor sys.get_int_max_str_digits (0 is also what sys.set_int_max_str_digits(0) sets: no limit).
INT_MAX_STR_DIGITS: int = getattr(sys, "get_int_max_str_digits", lambda: 0)()
# Inputs "as long as the limit allows" where there is none: long enough to go through int() as text.
LONG_INT_DIGITS = INT_MAX_STR_DIGITS or 4_300
needs_int_digit_limit = pytest.mark.skipif(
    INT_MAX_STR_DIGITS == 0, reason="int() has no digit limit here (CPython 3.10.0 to 3.10.6, or set to 0)"
)

Handler = Callable[[str, Any], Any]


def pytest_report_header() -> str:
    return f"rpcwire.NATIVE = {rpcwire.NATIVE} (the 'native' tests run {rpcwire.StdioTransport.__module__})"


@pytest.fixture(params=list(IMPLEMENTATIONS.values()), ids=list(IMPLEMENTATIONS))
def impl(request: pytest.FixtureRequest) -> ModuleType:
    """The module under test: ``rpcwire`` (native) or ``rpcwire.pure``."""
    return request.param


def transport_for(impl: ModuleType, data: bytes) -> tuple[Any, io.BytesIO]:
    """A transport reading ``data`` and writing into the returned ``BytesIO``."""
    out = io.BytesIO()
    return impl.StdioTransport(io.BytesIO(data), out), out


def run(impl: ModuleType, data: bytes, handler: Handler) -> bytes:
    """Serve ``data`` with ``handler`` (through the module-level ``serve``) and return what was written."""
    transport, out = transport_for(impl, data)
    impl.serve(handler, transport)
    return out.getvalue()


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
