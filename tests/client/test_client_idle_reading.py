"""Who reads a spawned server's pipe while no call of the client's reads: the client's idle reader, whatever a
call that gave up did before (``rpcwire._client_reading``). Seen as a user sees it: the server's notifications
reach their callbacks, and the answers it gives late are dropped, while nothing is in flight."""

from __future__ import annotations

import sys
import threading
import time
from types import ModuleType
from typing import Any

import pytest
from support.processes import CLIENT_SERVER, child_env

NOTICED_S = 20  # the bound of a wait for what the idle reader reads: a hang fails the test, not a slow machine


@pytest.fixture(autouse=True)
def child_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spawned servers import this checkout's rpcwire."""
    for name, value in child_env().items():
        monkeypatch.setenv(name, value)


class SlowParams(list[Any]):
    """Params whose encoding runs Python code (a list subclass's ``__iter__``: both encoders call it, as ``json``
    does): it sleeps, so that the client's idle reader tries to read meanwhile (a lone caller's core holds the
    reading while it encodes), then fails: the call ends with nothing written and nothing read."""

    def __iter__(self) -> Any:
        time.sleep(0.1)  # the GIL released: the other threads run
        raise RuntimeError("not encodable")


def test_the_idle_reader_reads_after_a_lone_call_gave_up_unwritten(impl: ModuleType) -> None:
    """A lone call whose core took the reading and gave the call up unwritten (here: its params could not be
    encoded) gives the reading back: the idle reader, which found it taken meanwhile, reads the server's next
    notification. Each round starts just after a call the caller read itself (the idle reader's turn given back,
    waiting for the pipe to be quiet), where a lone call takes the reading first."""
    client = impl.Client.spawn([sys.executable, CLIENT_SERVER, impl.__name__, "2"], timeout=30, stderr="tail")
    logged = threading.Event()
    client.on_notification("log", lambda params: logged.set())
    try:
        for round_ in range(3):
            logged.clear()
            assert client.call("add", [round_, 1]) == round_ + 1
            with pytest.raises(RuntimeError, match="not encodable"):
                client.call("echo", SlowParams())
            client.notify("announce_later", ["late", 0.05])  # a notification: nothing of the client's reads for it
            assert logged.wait(NOTICED_S), f"round {round_}: nobody read the server's notification"
    finally:
        client.close(0.5)
