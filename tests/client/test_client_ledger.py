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
from hypothesis import example, given
from hypothesis import strategies as st
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


def test_an_abandoned_call_passed_by_the_frontier_still_settles_a_held_error_with_its_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A refusal held between an abandoned call and a notification; a later call's answer moves the frontier past
    both; then the abandoned call's answer comes: the server read it, so the refusal was the notification's (it
    stayed held for good, the call's entry forgotten when the frontier passed it)."""
    ledger = _Ledger()
    ledger.written([1], True)  # a call a server may refuse unread (too long, too deep)
    ledger.written([], True)  # and a notification
    with caplog.at_level(logging.WARNING, "rpcwire.client"):
        assert ledger.refused(_refusal()) == []  # the call's or the notification's: held
        ledger.written([2], False)
        ledger.abandoned([1])  # its caller stops waiting
        assert ledger.answered(2) == []  # the frontier passes both
        assert "refused a notification" not in caplog.text, caplog.text
        assert ledger.answered(1) == []  # the server read the call: the refusal is the notification's
    assert "refused a notification" in caplog.text, caplog.text
    assert "dropped" not in caplog.text, caplog.text


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


class _LazyRecorder:
    """A ledger fed as ``AsyncClient`` feeds it: short calls kept out of it (``unrecorded``) until anything else
    is written, read or given up, then recorded with :meth:`_Ledger.caught_up`."""

    def __init__(self) -> None:
        self.ledger = _Ledger()
        self.unrecorded: dict[int, list[Any]] = {}
        self.passed = 0

    def settle(self) -> None:
        if self.unrecorded or self.passed:
            unrecorded, self.unrecorded = self.unrecorded, {}
            passed, self.passed = self.passed, 0
            self.ledger.caught_up(unrecorded, passed)

    def call(self, id_: int, suspect: bool) -> None:
        if suspect:
            self.settle()
            self.ledger.written((id_,), True)
        else:
            self.unrecorded[id_] = []

    def answered(self, id_: int) -> list[Any]:
        if self.unrecorded.pop(id_, None) is not None:
            self.passed = max(self.passed, id_)
            return []
        return self.ledger.answered(id_)


_EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("call"), st.booleans()),
        st.tuples(st.just("notification"), st.booleans()),
        st.tuples(st.just("answer"), st.integers(0, 40)),
        st.tuples(st.just("abandon"), st.integers(0, 40)),
        st.tuples(st.just("refusal"), st.just(0)),
    ),
    max_size=60,
)


@given(_EVENTS)
@example(  # a call abandoned and passed by the frontier, then answered: its answer tells where a held error goes
    [
        ("call", True),
        ("notification", True),
        ("refusal", 0),
        ("call", False),
        ("call", False),
        ("call", False),
        ("abandon", 0),
        ("call", False),
        ("answer", 24),
        ("answer", 0),
    ]
)
def test_calls_recorded_lazily_are_matched_as_calls_recorded_at_once(events: list[tuple[str, Any]]) -> None:
    """What an error with id null answers, and what is logged, is the same whether every call is recorded as it
    is written or the short ones only once something else comes (``caught_up``, with the frontier their answers
    moved): the same calls fail with each error, the same notifications are logged as refused."""
    eager, lazy = _Ledger(), _LazyRecorder()
    logged: dict[str, list[str]] = {"eager": [], "lazy": []}
    outstanding: list[int] = []  # calls written that no answer or error has ended yet
    ids = iter(range(1, 1_000))

    class Record(logging.Handler):
        side = "eager"

        def emit(self, record: logging.LogRecord) -> None:
            logged[self.side].append(record.getMessage())

    record = Record()
    logger = logging.getLogger("rpcwire.client")
    logger.addHandler(record)
    try:
        for step, (kind, arg) in enumerate(events):
            outcomes = []
            for side in ("eager", "lazy"):
                record.side = side
                if kind == "call":
                    id_ = next(ids) if side == "eager" else outstanding[-1]
                    if side == "eager":
                        outstanding.append(id_)
                        eager.written((id_,), arg)
                    else:
                        lazy.call(id_, arg)
                    outcomes.append([])
                elif kind == "notification":
                    if side == "lazy":
                        lazy.settle()
                    (eager if side == "eager" else lazy.ledger).written((), arg)
                    outcomes.append([])
                elif kind == "answer" and outstanding:
                    id_ = outstanding[arg % len(outstanding)]
                    outcomes.append(eager.answered(id_) if side == "eager" else lazy.answered(id_))
                elif kind == "abandon" and outstanding:
                    id_ = outstanding[arg % len(outstanding)]
                    if side == "lazy":
                        lazy.settle()
                    (eager if side == "eager" else lazy.ledger).abandoned([id_])
                    outcomes.append([])
                elif kind == "refusal":
                    error = rpcwire.Response(None, None, {"code": -32600, "message": f"refusal {step}"})
                    if side == "lazy":
                        lazy.settle()
                    outcomes.append((eager if side == "eager" else lazy.ledger).refused(error))
                else:
                    outcomes.append([])
            matched = [[(sent.ids, error.error["message"]) for sent, error in outcome] for outcome in outcomes]
            assert matched[0] == matched[1], (step, kind)
            assert logged["eager"] == logged["lazy"], (step, kind)
            if kind == "answer" and outstanding:
                outstanding.remove(outstanding[arg % len(outstanding)])
            for ended, _ in matched[0]:
                outstanding[:] = [id_ for id_ in outstanding if id_ not in ended]
    finally:
        logger.removeHandler(record)
