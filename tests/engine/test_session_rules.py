"""The serving session's rules (``rpcwire._session``), without threads, loops or sleeps: events fed, actions asserted.

Each case is a table of steps: an event, and the actions the session answers it with, written short:

- events: ``read LINE`` (a message the core reads from LINE), ``finish ID`` (its handler returned), ``fail ID
  SystemExit`` (its handler raised), ``notified`` (the notification running returned), ``queue SIZE`` (the driver
  queued a message of its own, a handler's notification), ``written N`` (the writer wrote the N oldest unwritten
  messages), ``eof``, ``gone`` (the peer gone both ways), ``interrupt``, ``read fails``, ``output fails``,
  ``abandon``;
- actions: ``start ID``, ``run METHOD``, ``write ANSWERS`` (each line's ids: ``1`` a result, ``1!-32800`` an error,
  ``[1,2]`` a batch's line), ``cancel ID DIALECT``, ``pause``, ``resume``, ``drop MESSAGES BYTES``,
  ``stop REASON GRACE WRITE_GRACE``, ``settled``.

The bounds are made small (``N = 1``: 2 admitted; 2 held; where a case says so, 1 or 2 unwritten answers) so
that each rule shows in a few steps; the real ones are the same code with larger numbers. Run on both cores (the
core reads the lines and builds the answer bytes).
"""

from __future__ import annotations

import io
import json
from types import ModuleType
from typing import Any

import pytest
from rpcwire._session import (
    Cancel,
    Drop,
    Grace,
    PauseReading,
    ResumeReading,
    RunNotification,
    Session,
    Settled,
    Start,
    Stop,
    Write,
)


def req(id_: Any, method: str = "work") -> str:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": {"id": id_}})


def note(method: str, params: Any = None) -> str:
    return json.dumps({"jsonrpc": "2.0", "method": method, "params": params or {}})


def lsp_cancel(id_: Any) -> str:
    return note("$/cancelRequest", {"id": id_})


def mcp_cancel(id_: Any) -> str:
    return note("notifications/cancelled", {"requestId": id_, "reason": "no"})


class Driver:
    """Feeds a session the table's events and writes its actions short. No I/O: the core only parses lines and
    builds answer bytes."""

    def __init__(self, impl: ModuleType, **bounds: Any) -> None:
        self.core = impl.StdioTransport(io.BytesIO(), io.BytesIO())
        self.session = Session(
            self.core,
            bounds.pop("n", 1),
            read_ahead_requests=bounds.pop("held", 2),
            read_ahead_bytes=bounds.pop("held_bytes", 1 << 20),
            unwritten_answers=bounds.pop("unwritten", 100),
            unwritten_bytes=bounds.pop("unwritten_bytes", 1 << 20),
            drop_bytes=bounds.pop("drop", None),
        )
        self.started: dict[Any, Start] = {}
        self.running: RunNotification | None = None
        self.unwritten: list[tuple[bytes, bool]] = []  # (message, an answer?) in the order handed out

    def event(self, step: str) -> list[Any]:
        session = self.session
        verb, _, rest = step.partition(" ")
        if verb == "read" and rest == "fails":
            return session.stop(OSError("read failed"))
        if verb == "read":
            transport = type(self.core)(io.BytesIO(rest.encode() + b"\n"), io.BytesIO())
            return session.received(transport._read_message())
        if verb == "finish":
            start = self.started.pop(json.loads(rest))
            return session.finished(start, bytes(self.core._answer_result(start.request.id_json, "ok")))
        if verb == "fail":
            id_, name = rest.split()
            return session.failed(self.started.pop(json.loads(id_)), {"SystemExit": SystemExit(2)}[name])
        if verb == "notified":
            running, self.running = self.running, None
            assert running is not None
            return session.notified(running)
        if verb == "queue":
            self.unwritten.append((b"n" * int(rest), False))
            return session.queued(int(rest))
        if verb == "written":
            lines, self.unwritten = self.unwritten[: int(rest)], self.unwritten[int(rest) :]
            answers = sum(answer for _, answer in lines)
            return session.written(answers, sum(len(line) for line, _ in lines), len(lines) - answers)
        if verb == "eof":
            return session.input_ended()
        if verb == "gone":
            return session.peer_gone()
        if verb == "interrupt":
            return session.stop(KeyboardInterrupt())
        if verb == "output" and rest == "fails":
            return session.output_failed(BrokenPipeError())
        if verb == "abandon":
            return session.abandon()
        raise AssertionError(f"unknown event {step!r}")

    def show(self, actions: list[Any]) -> list[str]:
        shown = []
        for action in actions:
            if isinstance(action, Start):
                self.started[action.request.id] = action
                shown.append(f"start {json.dumps(action.request.id)}")
            elif isinstance(action, RunNotification):
                self.running = action
                shown.append(f"run {action.request.method}")
            elif isinstance(action, Write):
                self.unwritten += [(line, True) for line in action.lines]
                shown.append("write " + " ".join(_answers(json.loads(line)) for line in action.lines))
            elif isinstance(action, Cancel):
                shown.append(f"cancel {json.dumps(action.context.id)} {action.dialect}")
            elif isinstance(action, PauseReading):
                shown.append("pause")
            elif isinstance(action, ResumeReading):
                shown.append("resume")
            elif isinstance(action, Drop):
                shown.append(f"drop {action.unwritten} {action.size}")
            elif isinstance(action, Stop):
                reason = None if action.reason is None else type(action.reason).__name__
                shown.append(f"stop {reason} {action.grace} {action.write_grace}")
            elif isinstance(action, Settled):
                shown.append("settled")
            else:
                raise AssertionError(f"not an action: {action!r}")
        return shown


def _answers(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ",".join(_answers(item) for item in value) + "]"
    id_ = json.dumps(value["id"])
    return id_ if "result" in value else f"{id_}!{value['error']['code']}"


# (name, bounds, [(event, [actions]), ...])
RULES: list[tuple[str, dict[str, Any], list[tuple[str, list[str]]]]] = [
    (
        "admission: 2N admitted, the next held until one ends",
        {},
        [
            (f"read {req(1)}", ["start 1"]),
            (f"read {req(2)}", ["start 2"]),
            (f"read {req(3)}", []),
            ("finish 1", ["write 1", "start 3"]),
            ("finish 2", ["write 2"]),
            ("finish 3", ["write 3"]),
        ],
    ),
    (
        "read-ahead: reading pauses with the held ones at their bound, resumes as they start",
        {},
        [
            (f"read {req(1)}", ["start 1"]),
            (f"read {req(2)}", ["start 2"]),
            (f"read {req(3)}", []),
            (f"read {req(4)}", ["pause"]),
            ("finish 2", ["write 2", "start 3", "resume"]),
        ],
    ),
    (
        "read-ahead: a request read behind held ones is held, whatever the room",
        {"n": 2},
        [
            *[(f"read {req(i)}", [f"start {i}"]) for i in range(1, 5)],
            (f"read {req(5)}", []),
            ("finish 1", ["write 1", "start 5"]),
        ],
    ),
    (
        "LSP cancel of a held request: answered -32800 at once, never started",
        {},
        [
            (f"read {req(1)}", ["start 1"]),
            (f"read {req(2)}", ["start 2"]),
            (f"read {req(3)}", []),
            (f"read {lsp_cancel(3)}", ["write 3!-32800"]),
            ("finish 1", ["write 1"]),
        ],
    ),
    (
        "MCP cancel of a held request: no answer, never started",
        {},
        [
            (f"read {req(1)}", ["start 1"]),
            (f"read {req(2)}", ["start 2"]),
            (f"read {req('x')}", []),
            (f"read {mcp_cancel('x')}", []),
            ("finish 1", ["write 1"]),
        ],
    ),
    (
        "cancel of a started request: its context cancelled, in the cancellation's dialect",
        {},
        [
            (f"read {req(1)}", ["start 1"]),
            (f"read {req('b')}", ['start "b"']),
            (f"read {lsp_cancel(1)}", ["cancel 1 lsp"]),
            (f"read {mcp_cancel('b')}", ['cancel "b" mcp']),
        ],
    ),
    (
        "cancel ids compare as JSON values; unknown, finished, bool and missing ids are ignored",
        {"n": 2},
        [
            (f"read {req(1)}", ["start 1"]),
            (f"read {req('2')}", ['start "2"']),
            (f"read {lsp_cancel(2)}", []),
            (f"read {lsp_cancel(True)}", []),
            (f"read {note('$/cancelRequest', {})}", []),
            (f"read {lsp_cancel(1.0)}", ["cancel 1 lsp"]),
            ("finish 1", ["write 1"]),
            (f"read {lsp_cancel(1)}", []),
        ],
    ),
    (
        "a notification runs alone, at once when every answer is written",
        {},
        [
            (f"read {note('log')}", ["run log", "pause"]),
            ("notified", ["resume"]),
        ],
    ),
    (
        "a notification waits until every answer finished before it is written",
        {},
        [
            (f"read {req(1)}", ["start 1"]),
            ("finish 1", ["write 1"]),
            (f"read {note('didChange')}", ["pause"]),
            ("written 1", ["run didChange"]),
            ("notified", ["resume"]),
        ],
    ),
    (
        "a notification does not wait for answers finished after it was read",
        {},
        [
            (f"read {req(1)}", ["start 1"]),
            (f"read {req(2)}", ["start 2"]),
            ("finish 1", ["write 1"]),
            (f"read {note('didChange')}", ["pause"]),
            ("finish 2", ["write 2"]),
            ("written 1", ["run didChange"]),
        ],
    ),
    (
        "a batch: entries in order, those after a notification wait for it; one line, in the entries' order",
        {"n": 2},
        [
            (f"read [{req(1)},{note('log')},{req(2)}]", ["start 1", "run log", "pause"]),
            ("notified", ["start 2", "resume"]),
            ("finish 2", []),
            ("finish 1", ["write [1,2]"]),
        ],
    ),
    (
        "a batch's entries are admitted and held as lone requests; an invalid entry answered in its place",
        {},
        [
            (f"read [{req(1)},{req(2)},1,{req(3)}]", ["start 1", "start 2"]),
            ("finish 2", ["start 3"]),
            ("finish 3", []),
            ("finish 1", ["write [1,2,null!-32600,3]"]),
        ],
    ),
    (
        "a refusal's bytes are written at once",
        {},
        [
            ("read {nope", ["write null!-32700"]),
            (f"read {req(1)}", ["start 1"]),
        ],
    ),
    (
        "backpressure: answers unwritten past their bound pause reading and hold the held ones back",
        {"n": 2, "held": 4, "unwritten": 2},
        [
            *[(f"read {req(i)}", [f"start {i}"]) for i in range(1, 5)],
            (f"read {req(5)}", []),
            ("finish 1", ["write 1", "start 5"]),
            ("finish 2", ["write 2"]),
            ("finish 3", ["write 3", "pause"]),
            (f"read {req(6)}", None),  # None: a driver does not read now, as ``reading`` says
            ("written 3", ["resume"]),
        ],
    ),
    (
        "backpressure: a held request starts once the writer has room again",
        {"n": 1, "held": 4, "unwritten": 1},
        [
            (f"read {req(1)}", ["start 1"]),
            (f"read {req(2)}", ["start 2"]),
            (f"read {req(3)}", []),
            (f"read {req(4)}", []),
            ("finish 1", ["write 1", "start 3"]),
            ("finish 2", ["write 2", "pause"]),
            ("finish 3", ["write 3"]),
            ("written 2", ["start 4", "resume"]),
            ("written 1", []),
        ],
    ),
    (
        "end of input: what is in flight finishes, held ones still start, then settled",
        {},
        [
            (f"read {req(1)}", ["start 1"]),
            (f"read {req(2)}", ["start 2"]),
            (f"read {req(3)}", []),
            ("eof", ["stop None None None"]),
            ("finish 1", ["write 1", "start 3"]),
            ("finish 2", ["write 2"]),
            ("finish 3", ["write 3", "settled"]),
        ],
    ),
    (
        "end of input with nothing in flight: settled at once",
        {},
        [("eof", ["stop None None None", "settled"])],
    ),
    (
        "a handler's SystemExit: the grace, nothing held starts, no notification runs, the first reason wins",
        {},
        [
            (f"read {req(1)}", ["start 1"]),
            (f"read {req(2)}", ["start 2"]),
            (f"read {req(3)}", []),
            ("fail 1 SystemExit", ["stop SystemExit 2.0 2.0"]),
            ("interrupt", []),
            (f"read {note('log')}", []),
            ("finish 2", ["write 2", "settled"]),
        ],
    ),
    (
        "a SystemExit after the end of input stops with it",
        {},
        [
            (f"read {req(1)}", ["start 1"]),
            ("eof", ["stop None None None"]),
            ("fail 1 SystemExit", ["stop SystemExit 2.0 2.0", "settled"]),
        ],
    ),
    (
        "an interrupt: no grace; abandon cancels what is still in flight",
        {},
        [
            (f"read {req(1)}", ["start 1"]),
            ("interrupt", ["stop KeyboardInterrupt 0 2.0"]),
            ("abandon", ["cancel 1 lsp"]),
        ],
    ),
    (
        "a failed read stops with the grace",
        {},
        [
            (f"read {req(1)}", ["start 1"]),
            ("read fails", ["stop OSError 2.0 2.0"]),
        ],
    ),
    (
        "the output failed: no grace to finish nor to write; an interrupt that came first is still raised",
        {},
        [
            (f"read {req(1)}", ["start 1"]),
            ("interrupt", ["stop KeyboardInterrupt 0 2.0"]),
            ("output fails", ["stop KeyboardInterrupt 0 0"]),
            ("fail 1 SystemExit", ["settled"]),
        ],
    ),
    (
        "the output failed: its error stops the session, over a handler's SystemExit",
        {},
        [
            (f"read {req(1)}", ["start 1"]),
            (f"read {req(2)}", ["start 2"]),
            ("fail 1 SystemExit", ["stop SystemExit 2.0 2.0"]),
            ("output fails", ["stop BrokenPipeError 0 0"]),
            ("interrupt", []),
        ],
    ),
    (
        "the driver's own messages count in the bytes unwritten: reading pauses, and resumes as they are written",
        {"unwritten_bytes": 100},
        [
            ("queue 60", []),
            ("queue 60", ["pause"]),
            ("written 1", ["resume"]),
        ],
    ),
    (
        "a peer too slow: past the drop bound unwritten, Drop, then a stop without grace; held ones never start",
        {"drop": 100, "unwritten_bytes": 1000},
        [
            (f"read {req(1)}", ["start 1"]),
            (f"read {req(2)}", ["start 2"]),
            (f"read {req(3)}", []),
            ("queue 60", []),
            ("queue 60", ["drop 2 120", "stop None 0 0"]),
            ("queue 60", []),
            ("abandon", ["cancel 1 lsp", "cancel 2 lsp"]),
            ("finish 1", ["write 1"]),
            ("finish 2", ["write 2", "settled"]),
        ],
    ),
    (
        "a peer too slow: one message alone past the bound is not a drop; answers count too",
        {"drop": 100, "unwritten_bytes": 1000},
        [
            ("queue 150", []),
            ("written 1", []),
            (f"read {req(1)}", ["start 1"]),
            ("queue 90", []),
            ("finish 1", ["write 1", "drop 2 128", "stop None 0 0", "settled"]),
        ],
    ),
    (
        "a peer too slow keeps the reason given before (a handler's SystemExit)",
        {"drop": 100, "unwritten_bytes": 1000},
        [
            (f"read {req(1)}", ["start 1"]),
            (f"read {req(2)}", ["start 2"]),
            ("fail 1 SystemExit", ["stop SystemExit 2.0 2.0"]),
            ("queue 60", []),
            ("queue 60", ["drop 2 120", "stop SystemExit 0 0"]),
        ],
    ),
    (
        "without a drop bound (streams) a peer is never dropped, only read no further",
        {"unwritten_bytes": 100},
        [
            ("queue 5000", ["pause"]),
            ("queue 5000", []),
        ],
    ),
    (
        "the peer gone both ways: a stop without grace, held ones never start, abandon cancels what runs",
        {},
        [
            (f"read {req(1)}", ["start 1"]),
            (f"read {req(2)}", ["start 2"]),
            (f"read {req(3)}", []),
            ("gone", ["stop None 0 0"]),
            (f"read {req(4)}", []),
            ("abandon", ["cancel 1 lsp", "cancel 2 lsp"]),
            ("finish 1", ["write 1"]),
            ("finish 2", ["write 2", "settled"]),
            ("gone", []),
        ],
    ),
]


@pytest.mark.parametrize(
    ("bounds", "steps"), [(bounds, steps) for _, bounds, steps in RULES], ids=[r[0] for r in RULES]
)
def test_session_rule(impl: ModuleType, bounds: dict[str, Any], steps: list[tuple[str, list[str] | None]]) -> None:
    driver = Driver(impl, **bounds)
    for number, (event, expected) in enumerate(steps):
        if expected is None:  # a step a driver never takes there: the session's reading says so
            assert not driver.session.reading, f"step {number}: {event}"
            continue
        assert driver.show(driver.event(event)) == expected, f"step {number}: {event}"


def test_reading_follows_pause_and_resume(impl: ModuleType) -> None:
    """``reading`` is what the last ``pause``/``resume`` said, and false once stopped."""
    driver = Driver(impl)
    session = driver.session
    assert session.reading
    for line in (req(1), req(2), req(3)):
        driver.show(driver.event(f"read {line}"))
        assert session.reading
    assert driver.show(driver.event(f"read {req(4)}")) == ["pause"]
    assert not session.reading
    driver.show(driver.event("finish 1"))
    assert session.reading
    driver.show(driver.event("eof"))
    assert not session.reading


def test_a_held_request_counts_its_size(impl: ModuleType) -> None:
    """The held requests' bytes bound reading too (each as the core encodes its params)."""
    driver = Driver(impl, held=100, held_bytes=200)
    big = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "work", "params": {"text": "x" * 300}})
    assert driver.show(driver.event(f"read {req(1)}")) == ["start 1"]
    assert driver.show(driver.event(f"read {req(2)}")) == ["start 2"]
    assert driver.show(driver.event(f"read {big}")) == ["pause"]
    assert driver.show(driver.event(f"read {lsp_cancel(9)}")) == ["write 9!-32800", "resume"]


def test_busy_is_what_is_in_flight_not_what_waits_to_be_written(impl: ModuleType) -> None:
    """``busy`` (what a ``--listen`` connection's idle timeout asks): a request admitted or held, a notification
    waiting or running; an answer not yet written is not."""
    driver = Driver(impl)
    session = driver.session
    assert not session.busy
    for line in (req(1), req(2), req(3)):
        driver.show(driver.event(f"read {line}"))
    assert session.busy
    for event in ("finish 1", "finish 2", "finish 3"):
        driver.show(driver.event(event))
    assert not session.busy and not session.idle  # three answers unwritten
    assert driver.show(driver.event(f"read {note('log')}")) == ["pause"]
    assert session.busy  # a notification waiting for the answers before it
    assert driver.show(driver.event("written 3")) == ["run log"]
    assert session.busy
    driver.show(driver.event("notified"))
    assert not session.busy and session.idle


def test_the_grace_is_the_stop_in_force() -> None:
    """``Grace``: the seconds left of the stop in force on the driver's clock; a stricter stop starts its own."""
    grace = Grace()
    graced = Stop(SystemExit(2), 2.0, 2.0)
    assert grace.left(graced, 10.0) == 2.0
    assert grace.left(graced, 11.5) == 0.5
    assert grace.left(Stop(None, None, None), 12.0) is None
    assert grace.left(Stop(KeyboardInterrupt(), 0, 2.0), 12.0) == 0
