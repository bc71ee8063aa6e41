"""Whether a client still holds a call waiting for its answer, asked as a user sees it: a server answers calls
again (the test server's ``answer_again``, or a scripted server's own), and the client drops each of those
answers with a warning naming its id ("dropped an answer to no call waiting for it"); a call still waiting
would take its answer silently."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable
from typing import Any

import pytest

DROPPED = re.compile(r"dropped an answer to no call waiting for it \(id (\d+)\)")


def dropped_ids(records: list[logging.LogRecord]) -> set[int]:
    """The ids of the answers the client dropped as answering no call, from its warnings."""
    return {int(found[1]) for record in records if (found := DROPPED.search(record.getMessage()))}


def nothing_waits(client: Any, caplog: pytest.LogCaptureFixture) -> None:
    """No call of ``client`` waits for its answer any more: the server answers every call made before again
    (``answer_again``: ids 1 to its own less one, then how many), and the client drops each of those answers."""
    start = len(caplog.records)
    with caplog.at_level(logging.WARNING, "rpcwire.client"):
        earlier = client.call("answer_again")
    assert earlier > 0 and set(range(1, earlier + 1)) <= dropped_ids(caplog.records[start:])


async def nothing_waits_async(client: Any, caplog: pytest.LogCaptureFixture) -> None:
    """``nothing_waits`` for an ``AsyncClient``."""
    start = len(caplog.records)
    with caplog.at_level(logging.WARNING, "rpcwire.client"):
        earlier = await client.call("answer_again")
    assert earlier > 0 and set(range(1, earlier + 1)) <= dropped_ids(caplog.records[start:])


def on_closing(client: Any) -> threading.Event:
    """An event set once ``client`` runs its callbacks of the server's ``closing`` notification (a scripted
    server's last word, written after the answers it gives again)."""
    closing = threading.Event()
    client.on_notification("closing", lambda params: closing.set())
    return closing


def answers_dropped(ids: Iterable[int], caplog: pytest.LogCaptureFixture, start: int, closing: threading.Event) -> None:
    """Once the server's ``closing`` came (every answer it gave again was read before it: ``on_closing``), the
    client dropped an answer to each of ``ids`` (the warnings logged since record ``start``). Waits at most
    40 s (a loaded machine); it stops waiting early when every one was dropped already (as a user sees it, the
    same)."""
    deadline = time.monotonic() + 40
    while not closing.wait(0.05) and not set(ids) <= dropped_ids(caplog.records[start:]):
        assert time.monotonic() < deadline, "the server's closing notification never came"
    missing = set(ids) - dropped_ids(caplog.records[start:])
    assert not missing, f"answers to calls {sorted(missing)} were taken by a call still waiting"
