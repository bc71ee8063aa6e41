"""The fixtures every folder shares: each behaviour test runs against both implementations; and the Hypothesis
profiles (``ci`` by default, ``deep`` with ``HYPOTHESIS_PROFILE=deep``, as ``make test-deep`` sets).

``impl`` is ``rpcwire`` (``native``: the Rust module, or ``rpcwire.pure`` when it is not built, in which case
``rpcwire.NATIVE`` is false, the header of the run says so and every ``native`` case is skipped: it would run
rpcwire.pure's code a second time) or ``rpcwire.pure`` (``pure``). The helpers the
tests call (request lines, decoded answers, streams, servers) live in ``support/`` (tests/README.md).
"""

from __future__ import annotations

import os
from types import ModuleType

import pytest
import rpcwire
from hypothesis import HealthCheck, settings
from support.messages import IMPLEMENTATIONS

# The Hypothesis profiles: how many examples a property runs (times its weight, support.properties.examples).
# "ci" is the default, for `make test` and CI alike: a quick run whose failures print the blob that replays
# them. "deep" runs ten times as many, for `make test-deep` (HYPOTHESIS_PROFILE=deep): before a release, after
# a change to the scanner, the envelope or the framing. No deadline in either (two cores shared by many
# workers make a slow example a fact of the machine, not of the code).
settings.register_profile(
    "ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("deep", settings.get_profile("ci"), max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# The HTTP clients honour the environment's proxies as requests and httpx do: the tests' servers are on loopback,
# reached directly whatever the machine that runs the suite sets (tests/client/test_http_client.py sets its own).
for _variable in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
    os.environ.pop(_variable, None)
    os.environ.pop(_variable.upper(), None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "native_case(why): the native case of a test run against both cores expects the native core's own "
        "behaviour (why): skipped where `import rpcwire` serves through rpcwire.pure (the pure wheel)",
    )


def pytest_report_header() -> str:
    return f"rpcwire.NATIVE = {rpcwire.NATIVE} (the 'native' tests run {rpcwire.StdioTransport.__module__})"


@pytest.fixture(params=list(IMPLEMENTATIONS.values()), ids=list(IMPLEMENTATIONS))
def impl(request: pytest.FixtureRequest) -> ModuleType:
    """The module under test: ``rpcwire`` (native) or ``rpcwire.pure``. Where ``rpcwire`` serves through
    ``rpcwire.pure`` (the pure wheel), the ``native`` case is skipped: its names are rpcwire.pure's (the clients'
    ``_core`` is rpcwire.pure), so it would repeat the ``pure`` case, and a test marked ``native_case`` expects what
    only the native core does (a test of that alone: ``support.messages.needs_native``). What the fallback itself
    wires is checked by ``tests/integrations/test_installed.py``."""
    if request.param is rpcwire and not rpcwire.NATIVE:
        native_case = request.node.get_closest_marker("native_case")
        why = native_case.args[0] if native_case is not None else "the pure case runs the same code"
        pytest.skip(f"rpcwire serves through rpcwire.pure here: {why}")
    return request.param
