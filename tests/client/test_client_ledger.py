"""The id-null ledger (``rpcwire._id_null_ledger._Ledger``) and the lone caller's path: a lone call's entry, made
only once something else comes before its answer, takes the place of its write in the order of writing, before
what other threads wrote while it read (a notification's refusal then finds the notification)."""

from __future__ import annotations

import logging
import select
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any

import pytest
import rpcwire
import rpcwire._client_reading
from rpcwire._id_null_ledger import _Ledger

pytestmark = pytest.mark.timeout(60)

# Reads a request per line; "after_notice" says "waiting" on stderr, reads one more line (a notification of the
# client's), then writes a notification of its own, the call's answer and an error whose id is null (the
# client's notification refused); anything else is echoed, a notification ignored.
SCRIPTED = r"""
import json, sys
out = sys.stdout.buffer
for raw in sys.stdin.buffer:
    message = json.loads(raw)
    method, id_ = message["method"], message.get("id")
    if id_ is None:
        continue
    if method == "after_notice":
        sys.stderr.write("waiting\n"); sys.stderr.flush()
        sys.stdin.buffer.readline()
        out.write(b'{"jsonrpc":"2.0","method":"log","params":{"n":1}}\n')
        out.write(json.dumps({"jsonrpc": "2.0", "id": id_, "result": "noticed"}).encode() + b"\n")
        out.write(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}\n')
    else:
        out.write(json.dumps({"jsonrpc": "2.0", "id": id_, "result": message.get("params")}).encode() + b"\n")
    out.flush()
"""


def _refusal() -> rpcwire.Response:
    return rpcwire.Response(None, None, {"code": -32600, "message": "Invalid Request"})


def test_an_entry_made_after_its_write_takes_its_place_in_the_order_of_writing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ledger = _Ledger()
    at = ledger.position()  # the lone call (id 1) is written here
    ledger.written([], False)  # a notification, written after it
    ledger.written([2], False)  # and a call
    ledger.written([1], False, at)  # the lone call's entry, made once something else came before its answer
    # The lone call's place is before the notification and call 2, as the answers and the refusal show: its
    # answer moves the frontier past it only, so that the refusal still has the notification and call 2 to go to.
    assert ledger.answered(1) == []  # the frontier passes the lone call only
    with caplog.at_level(logging.WARNING, "rpcwire.client"):
        assert ledger.refused(_refusal()) == []  # the notification's or call 2's: held
        assert ledger.answered(2) == []  # the notification's, then
    assert "refused a notification" in caplog.text, caplog.text
    assert "answers no message" not in caplog.text, caplog.text


@pytest.mark.skipif(not hasattr(select, "poll"), reason="the lone caller's path needs select.poll")
def test_a_notification_written_during_a_lone_call_comes_after_it(
    impl: ModuleType, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lone call is written, then (while it reads) a notification from another thread; the server answers
    the call after a notification of its own, then refuses the client's notification with an error whose id is
    null. That error answers the notification: the call's answer, read after the call took its place in the
    ledger, does not pass it by (it was logged as answering no message, or failed the next lone call)."""
    monkeypatch.setattr(rpcwire._client_reading, "_IDLE_S", 60.0)  # the client's own reader stays off: callers read
    client: Any = impl.Client.spawn([sys.executable, "-c", SCRIPTED], timeout=30)
    with client, caplog.at_level(logging.WARNING, "rpcwire.client"), ThreadPoolExecutor(1) as pool:
        assert client._pipe is not None  # the lone caller's path is there

        def notify_once_the_call_is_read() -> None:
            deadline = time.monotonic() + 20
            while "waiting" not in client._stderr_tail:
                assert time.monotonic() < deadline, "the server never read the call"
                time.sleep(0.01)
            client.notify("notice")

        notifier = pool.submit(notify_once_the_call_is_read)
        assert client.call("after_notice") == "noticed"  # the lone caller's path: nothing else in flight
        notifier.result(20)
        assert client.call("echo", 1) == 1  # its reading takes the error with id null, written before its answer
    assert "refused a notification" in caplog.text, caplog.text
    assert "answers no message" not in caplog.text, caplog.text
