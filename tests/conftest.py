"""The fixtures every folder shares: each behaviour test runs against both implementations.

``impl`` is ``rpcwire`` (``native``: the Rust module, or ``rpcwire.pure`` when it is not built, in which case
``rpcwire.NATIVE`` is false and the header of the run says so) or ``rpcwire.pure`` (``pure``). The helpers the
tests call (request lines, decoded answers, streams, servers) live in ``support/`` (tests/README.md).
"""

from __future__ import annotations

from types import ModuleType

import pytest
import rpcwire
from support.messages import (
    IMPLEMENTATIONS,
    INT_MAX_STR_DIGITS,
    INVALID_REQUEST,
    LONG_INT_DIGITS,
    PARSE_ERROR,
    answers,
    compact,
    echo,
    err,
    needs_int_digit_limit,
    ok,
    request,
)
from support.serving import served as run
from support.serving import transport_for

# The helpers stay importable from conftest only for tests written against the flat layout (issue 19's
# tests/test_s19_*.py, until they move into the folders); every other test imports them from support.
__all__ = [
    "INT_MAX_STR_DIGITS",
    "INVALID_REQUEST",
    "LONG_INT_DIGITS",
    "PARSE_ERROR",
    "answers",
    "compact",
    "echo",
    "err",
    "needs_int_digit_limit",
    "ok",
    "request",
    "run",
    "transport_for",
]


def pytest_report_header() -> str:
    return f"rpcwire.NATIVE = {rpcwire.NATIVE} (the 'native' tests run {rpcwire.StdioTransport.__module__})"


@pytest.fixture(params=list(IMPLEMENTATIONS.values()), ids=list(IMPLEMENTATIONS))
def impl(request: pytest.FixtureRequest) -> ModuleType:
    """The module under test: ``rpcwire`` (native) or ``rpcwire.pure``."""
    return request.param
