"""The client folder's fixtures: ``reading``, the two ways ``Client.spawn`` waits on its server's pipes."""

from __future__ import annotations

import select

import pytest


@pytest.fixture(params=["poll", "threads"])
def reading(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How a spawned server's pipes are waited on: ``poll`` (POSIX: the callers read, a caller's write waits for
    room), or ``threads``, the portable path taken where ``select.poll`` is missing (Windows, whose ``select``
    waits on sockets only): blocking reads and writes on threads of the client's, the callers waiting on them
    with their deadlines. ``threads`` takes ``select.poll`` away for the test, as on Windows, so that a call
    to it left on that path fails the test."""
    if request.param == "threads":
        monkeypatch.delattr(select, "poll")
    elif not hasattr(select, "poll"):
        pytest.skip("no select.poll here")
    return request.param
