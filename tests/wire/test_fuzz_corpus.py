"""Replays tests/fuzz_corpus through both implementations: the inputs the fuzzers of fuzz/ kept because
they reached new code, or once broke something, plus hand-written seeds (``make fuzz-smoke`` replays the
same files through the Rust targets).

- ``transport/`` (atheris, fuzz/atheris_transport.py): first byte picks the limits and the framing, the rest is
  a stream.
- ``envelope/`` (fuzz_targets/envelope.rs): first byte picks ``max_depth`` and ``max_batch``, the rest is one line.
- ``framing/`` (fuzz_targets/framing.rs): any bytes, served as a stream with a small limit, in either framing.
- ``float_repr/`` (fuzz_targets/float_repr.rs): the first 8 bytes are a double, echoed in a result.

Native and pure must write the same bytes (also when the native transport reads the stream in pieces),
and the answers to a newline stream must be what the oracle of test_properties.py predicts: one per request with
a valid id.
"""

from __future__ import annotations

import io
import json
import math
import re
import struct
from pathlib import Path
from typing import Any

import pytest
import rpcwire
import rpcwire.pure
from support import ROOT, TESTS
from support.streams import Trickle
from test_properties import check_against_oracle, outcome

CORPUS = TESTS / "fuzz_corpus"
FUZZ_DIR = ROOT / "fuzz"


def files(kind: str) -> list[Path]:
    return sorted((CORPUS / kind).iterdir())


def ids(paths: list[Path]) -> list[str]:
    return [path.name for path in paths]


def replay(data: bytes, framing: str = "newline", **limits: Any) -> None:
    """Serve ``data`` with the handler the oracle predicts (test_properties.handler_for)."""
    pure = outcome(rpcwire.pure, data, framing=framing, **limits)
    assert outcome(rpcwire, data, framing=framing, **limits) == pure
    trickled = io.BufferedReader(Trickle(data, [1, 7, 3]), buffer_size=64)
    assert outcome(rpcwire, trickled, framing=framing, **limits) == pure
    assert pure[1] is None, pure
    if framing != "newline":
        return  # the oracle reads lines
    check_against_oracle(
        data,
        pure[0],
        limits.get("max_depth", rpcwire.DEFAULT_MAX_DEPTH),
        limits.get("max_message_bytes", rpcwire.DEFAULT_MAX_MESSAGE_BYTES),
        limits.get("max_batch", rpcwire.DEFAULT_MAX_BATCH),
    )


def atheris_limits(selector: int) -> dict[str, Any]:
    """The limits fuzz/atheris_transport.py derives from an input's first byte (kept in step with it)."""
    return {
        "max_message_bytes": [rpcwire.DEFAULT_MAX_MESSAGE_BYTES, 1, 16, 64][selector & 3],
        "max_depth": [rpcwire.DEFAULT_MAX_DEPTH, 1, 2, 127][(selector >> 2) & 3],
        "max_batch": [None, None, 1, 2][(selector >> 4) & 3],
        "framing": ["newline", "content-length"][(selector >> 6) & 1],
    }


@pytest.mark.parametrize("path", files("transport"), ids=ids(files("transport")))
def test_transport(path: Path) -> None:
    data = path.read_bytes()
    if data:
        replay(data[1:], **atheris_limits(data[0]))


@pytest.mark.parametrize("path", files("envelope"), ids=ids(files("envelope")))
def test_envelope(path: Path) -> None:
    data = path.read_bytes()
    if data:
        max_depth = 128 if data[0] & 0x80 else (data[0] & 0x1F) + 1
        max_batch = (data[0] >> 5) & 0x3 or None  # kept in step with the Rust target
        replay(data[1:] + b"\n", max_depth=max_depth, max_batch=max_batch)


@pytest.mark.parametrize("path", files("framing"), ids=ids(files("framing")))
def test_framing(path: Path) -> None:
    data = path.read_bytes()
    if data:
        for framing in ("newline", "content-length"):
            replay(data, framing, max_message_bytes=data[0] % 41 + 1)


@pytest.mark.parametrize("path", files("float_repr"), ids=ids(files("float_repr")))
def test_float_repr(path: Path) -> None:
    data = path.read_bytes()
    if len(data) < 8:
        return
    (value,) = struct.unpack("<d", data[:8])
    if not math.isfinite(value):
        return
    written = {}
    for name, impl in {"native": rpcwire, "pure": rpcwire.pure}.items():
        out = io.BytesIO()
        impl.StdioTransport(io.BytesIO(), out).write_response(1, [value])
        written[name] = out.getvalue()
    assert written["native"] == written["pure"] == b'{"jsonrpc":"2.0","id":1,"result":[%s]}\n' % repr(value).encode()
    assert json.loads(written["native"])["result"] == [value]


# What each target's inputs must reach: a header block past the 8 KiB limit of Content-Length framing
# (framing.rs's HEADER_LIMIT), an integer past Python's digit limit (4,300 digits), and for the transport both.
REACH = {"framing": 8192 + 1, "envelope": 4300 + 1, "float_repr": 8, "transport": 8192 + 1}


@pytest.mark.parametrize("kind", list(REACH))
def test_each_target_takes_inputs_that_reach_its_limits(kind: str) -> None:
    """fuzz/fuzz.mk's -max_len of each target holds every seed of it (a longer one is cut before it runs, and the
    limit it was written to reach is never fuzzed) and what reaches the target's limits."""
    max_lens = {
        name: int(value)
        for name, value in re.findall(r"^FUZZ_MAX_LEN_(\w+) := (\d+)$", (FUZZ_DIR / "fuzz.mk").read_text(), re.M)
    }
    assert max_lens[kind] > REACH[kind]
    assert [path.name for path in files(kind) if path.stat().st_size > max_lens[kind]] == []


def test_the_atheris_harness_derives_the_same_limits() -> None:
    """atheris_transport.py and this file read an input's first byte the same way (atheris itself may be absent)."""
    source = (FUZZ_DIR / "atheris_transport.py").read_text()
    for choice in (
        "[rpcwire.DEFAULT_MAX_MESSAGE_BYTES, 1, 16, 64][selector & 3]",
        "[rpcwire.DEFAULT_MAX_DEPTH, 1, 2, 127][(selector >> 2) & 3]",
        "[None, None, 1, 2][(selector >> 4) & 3]",
        '["newline", "content-length"][(selector >> 6) & 1]',
    ):
        assert choice in source
