"""The fixtures every folder shares: each behaviour test runs against both implementations.

``impl`` is ``rpcwire`` (``native``: the Rust module, or ``rpcwire.pure`` when it is not built, in which case
``rpcwire.NATIVE`` is false and the header of the run says so) or ``rpcwire.pure`` (``pure``). The helpers the
tests call (request lines, decoded answers, streams, servers) live in ``support/`` (tests/README.md).
"""

from __future__ import annotations

from types import ModuleType

import pytest
import rpcwire
from support.messages import IMPLEMENTATIONS


def pytest_report_header() -> str:
    return f"rpcwire.NATIVE = {rpcwire.NATIVE} (the 'native' tests run {rpcwire.StdioTransport.__module__})"


@pytest.fixture(params=list(IMPLEMENTATIONS.values()), ids=list(IMPLEMENTATIONS))
def impl(request: pytest.FixtureRequest) -> ModuleType:
    """The module under test: ``rpcwire`` (native) or ``rpcwire.pure``."""
    return request.param
