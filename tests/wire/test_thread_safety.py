"""What the cores promise threads that share their objects (issue 32), checked on any build.

- One ``FrameDecoder`` shared by threads: a call waits for another thread's call, never fails for it, and the
  decoder is not held while a dropped message is logged (Python code: a log handler), so another thread's call
  made meanwhile is served.
- ``rpcwire.pure``'s encoder on a free-threaded interpreter encodes a copy of the caller's containers where they
  hold only plain values (json's C encoder reads their members borrowed), and the containers themselves where
  they hold more: that path writes the bytes and raises the errors the usual one does, for every case of the
  table below (here forced on, on any build).

The crashes these prevent need a free-threaded interpreter and threads that change what is encoded:
``tests/wire/test_free_threading.py`` runs those.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections import OrderedDict
from types import ModuleType
from typing import Any

import pytest
import rpcwire._pure.codec as pure_codec
from rpcwire._types import Refused

REQUEST = b'{"jsonrpc":"2.0","method":"a","id":1}'


class _Blocking(logging.Handler):
    """Holds the first record of a dropped message until ``let_go`` is set, saying when it got it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.holding = threading.Event()
        self.let_go = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if not self.holding.is_set():
            self.holding.set()
            self.let_go.wait(30)


def test_a_frame_decoder_serves_a_thread_while_another_logs_a_dropped_message(impl: ModuleType) -> None:
    decoder = impl.FrameDecoder(max_message_bytes=64)
    decoder.feed(b'{"too long for the limit": "%s"}\n' % (b"x" * 64) + REQUEST + b"\n")
    logger = logging.getLogger("rpcwire")
    handler = _Blocking()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    taken: list[object] = []
    try:
        first = threading.Thread(target=lambda: taken.append(decoder.next()))
        first.start()
        assert handler.holding.wait(30), "the dropped message was not logged"
        # The first thread is inside next(), logging: this one's call is served meanwhile.
        try:
            second = decoder.next()
        finally:
            handler.let_go.set()
            first.join(30)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert not first.is_alive()
    assert second == REQUEST
    assert len(taken) == 1 and isinstance(taken[0], Refused)
    assert decoder.next() is None


def test_a_frame_decoder_fed_and_read_by_threads_hands_each_line_out_once(impl: ModuleType) -> None:
    decoder = impl.FrameDecoder()
    readers, lines = 4, 2_000
    taken: list[list[bytes]] = [[] for _ in range(readers)]
    errors: list[BaseException] = []

    def feed_and_take(reader: int) -> None:
        try:
            for i in range(lines):
                decoder.feed(b'{"r":%d,"i":%d}\n' % (reader, i))
                while (message := decoder.next()) is not None:
                    taken[reader].append(message)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=feed_and_take, args=(reader,)) for reader in range(readers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    every = sorted(message for messages in taken for message in messages)
    assert every == sorted(b'{"r":%d,"i":%d}' % (r, i) for r in range(readers) for i in range(lines))


# --- rpcwire.pure's encoder on a free-threaded interpreter ---------------------------------------------------


class Items(dict):  # type: ignore[type-arg]
    def items(self) -> Any:
        return [("b", 2), ("a", [1, 2])]


class BadItems(dict):  # type: ignore[type-arg]
    def items(self) -> Any:
        return [("a", 1), "not a pair"]


class Sequence(list):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        return iter([3, 2, 1])


class IntKey(int):
    def __repr__(self) -> str:
        return "not how json writes it"


class Text(str):
    pass


def _circular() -> list[Any]:
    loop: list[Any] = [1]
    loop.append({"again": loop})
    return loop


def _nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


CASES: dict[str, Any] = {
    "str": "café\ud800",
    "int": 10**30,
    "dict": {"a": [1, 2.5, None, True], "b": {"c": "é"}, 3: "int key", 1.5: "float key", None: "null key"},
    "tuple": (1, (2, 3), {"t": ()}),
    "empty": {"d": {}, "l": [], "t": ()},
    "ordered": OrderedDict([("z", 1), ("a", 2)]),
    "items()": {"x": Items({"ignored": 0})},
    "bad items()": {"x": BadItems({"a": 1})},
    "list subclass": Sequence([1, 2, 3]),
    "nan": {"ok": 1, "bad": float("nan")},
    "bad key": {(1, 2): "tuple key"},
    "object": {"ok": [1], "bad": object()},
    "int subclass key": {IntKey(5): 1, "a": 2},
    "str subclass value": {"a": Text("b"), "c": [Text("d")]},
    "circular": _circular(),
    "deep": _nested(1_999),
    "too deep": _nested(2_001),
}


def _outcome(value: Any, payload: Any) -> tuple[str, Any]:
    try:
        return "bytes", pure_codec.encode(value, payload)
    except Exception as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("where", ["payload", "member", "message"])
def test_pure_free_threaded_encoding_writes_and_fails_as_the_usual_one(
    name: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = CASES[name]
    value = {"jsonrpc": "2.0", "id": 1, "result": payload} if where != "payload" else payload
    # "message": a whole message with no payload named (``send``), encoded as given.
    named = None if where == "message" else payload
    monkeypatch.setattr(sys, "getrecursionlimit", lambda: 1_000)  # the usual path: json itself, no copy
    monkeypatch.setattr(pure_codec, "_FREE_THREADED", False)
    usual = _outcome(value, named)
    monkeypatch.setattr(pure_codec, "_FREE_THREADED", True)
    assert _outcome(value, named) == usual
    if usual[0] == "bytes" and name not in ("str", "int"):
        json.loads(usual[1])
