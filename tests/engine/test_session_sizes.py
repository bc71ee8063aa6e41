"""What a held request counts in the read-ahead's bytes (docs/semantics.md, "Concurrency"): the bytes of the message
it was read from, which each core's reader gives the ``Request`` it reads (``_wire_size``; a batch entry: its share
of the batch's), not its params encoded again. Run on both cores."""

from __future__ import annotations

import io
import json
from types import ModuleType

import rpcwire
import rpcwire.pure
from rpcwire._session import PauseReading, Session, Start

CORES = {"native": rpcwire._core, "pure": rpcwire.pure}


def request_line(id_: int, params: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": "work", "params": params}).encode()


def read(impl: ModuleType, line: bytes) -> object:
    return impl.StdioTransport(io.BytesIO(line + b"\n"), io.BytesIO())._read_message()


def test_a_request_read_carries_its_message_bytes(impl: ModuleType) -> None:
    line = b'  {"jsonrpc": "2.0", "id": 1, "method": "a", "params": ["\\u00e9"]}  '
    request = read(impl, line)
    assert request._wire_size == len(line)  # type: ignore[attr-defined]
    assert request == rpcwire.Request("a", ["\u00e9"], 1, False)  # no part in comparisons...
    assert "_wire_size" not in repr(request)  # ...nor in the repr


def test_a_batch_entry_carries_its_share_of_the_batch(impl: ModuleType) -> None:
    line = b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"},3]'
    entries = read(impl, line)
    assert isinstance(entries, list)
    assert [getattr(entry, "_wire_size", None) for entry in entries] == [len(line) // 3, len(line) // 3, None]


def test_a_body_read_carries_its_bytes() -> None:
    body = b' {"jsonrpc": "2.0", "id": 1,\n "method": "a"} '
    for core in CORES.values():
        assert core._read_text(body, 1000, 128, None)._wire_size == len(body)


def test_a_held_request_counts_its_message_bytes_not_its_params_encoded(impl: ModuleType) -> None:
    """600 bytes of ``\\u00e9`` escapes encode as 200 bytes of UTF-8: the message's bytes are what is held."""
    core = impl.StdioTransport(io.BytesIO(), io.BytesIO())
    session = Session(core, 1, read_ahead_requests=100, read_ahead_bytes=400)
    started = [session.received(read(impl, request_line(id_, [id_]))) for id_ in (1, 2)]
    assert [type(action) for actions in started for action in actions] == [Start, Start]
    escaped = request_line(3, {"text": "\u00e9" * 100})
    assert len(escaped) > 600 and len(core._answer_result(b"0", {"text": "\u00e9" * 100})) < 400
    assert session.received(read(impl, escaped)) == [PauseReading()]
    assert not session.reading


def test_a_request_made_otherwise_counts_its_params_encoded(impl: ModuleType) -> None:
    core = impl.StdioTransport(io.BytesIO(), io.BytesIO())
    session = Session(core, 1, read_ahead_requests=100, read_ahead_bytes=400)
    for id_ in (1, 2):
        session.received(rpcwire.Request("work", [id_], id_, False, str(id_).encode()))
    assert session.received(rpcwire.Request("work", ["x" * 300], 3, False, b"3")) == []
    assert session.received(rpcwire.Request("work", ["x" * 300], 4, False, b"4")) == [PauseReading()]
