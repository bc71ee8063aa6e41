"""JSON strings with escapes decoded as ``json.loads`` decodes them, on both cores: ``\\uXXXX`` escapes (either
case of hex digit), surrogate pairs, lone surrogates (kept, as ``json.loads`` keeps them), the short escapes and
raw non-ASCII, placed anywhere around the native decoder's 16-byte chunks and across its 4 KiB switch from its
buffer to writing a long string straight into the ``str`` (what a language server reads: a ``didOpen`` frame's
source text, escaped by the client's ``json.dumps``), whose storage is widened as wider characters come and grown
past 16 Mi characters: the ``str`` is then stored as ``json.loads`` stores it (its narrowest kind, no spare room).
"""

from __future__ import annotations

import io
import json
import sys
from typing import Any

import pytest
import rpcwire
import rpcwire.pure
from hypothesis import example, given
from hypothesis import strategies as st
from support.properties import examples

CORES = {"native": rpcwire, "pure": rpcwire.pure}

# Pieces of a string's content, as written between the quotes.
PIECES = [
    "a",
    "0123456789abcde",  # 15 bytes: the next piece starts one byte before a chunk's end
    "\\n",
    "\\t",
    '\\"',
    "\\\\",
    "\\/",
    "\\b\\f\\r",
    "\\u0000",
    "\\u001f",
    "\\u0041",
    "\\u00e9",
    "\\u00E9",
    "\\u00ff",
    "\\u0100",
    "\\u2014",
    "\\uFFFF",
    "\\ud83d\\ude00",  # a surrogate pair: one character
    "\\uD83D\\uDE00",
    "\\udbff\\udfff",  # U+10FFFF
    "\\ud800",  # a lone high surrogate
    "\\udfff",  # a lone low surrogate
    "\\udc00\\ud800",  # low then high: two lone surrogates
    "\\ud800\\u0041",  # a high surrogate before an escape that is not a low one
    "\\ud800\\\\u0041",  # a high surrogate before an escaped backslash: not a pair
    "\\ud800\\n",
    "\u00e9",
    "\u2014",
    "\U0001f600",
    "\\\\u0041",  # an escaped backslash, then text that looks like an escape
]


def body_of(content: str) -> bytes:
    return ('{"jsonrpc":"2.0","method":"textDocument/didOpen","params":{"text":"' + content + '"}}').encode()


def read_frames(core: Any, body: bytes) -> list[Any]:
    """Two copies of the frame read by ``core``'s transport (what ``rpcwire.lsp``'s reader reads), then the end."""
    frame = b"Content-Length: %d\r\n\r\n" % len(body) + body
    transport = core.StdioTransport(io.BytesIO(frame * 2), io.BytesIO(), framing="content-length")
    return [transport._read_value(), transport._read_value(), transport._read_value()]


@st.composite
def contents(draw: st.DrawFn) -> str:
    """A string's content: pieces after a pad of 0-17 bytes, repeated past 4 KiB or not."""
    pieces = draw(st.lists(st.sampled_from(PIECES), min_size=1, max_size=12))
    pad = "p" * draw(st.integers(0, 17))
    unit = pad + "".join(pieces)
    repeat = draw(st.sampled_from([1, 2, 4096 // len(unit), 4096 // len(unit) + 1, 5000 // len(unit) + 1]))
    return unit * max(repeat, 1) + draw(st.sampled_from(PIECES))


@given(contents())
@example("\\ud83d\\ude00" * 700)  # all escapes, pairs, past 4 KiB
@example("p" * 4090 + "\\ud83d\\ude00")  # a pair across the 4 KiB switch
@example("p" * 15 + "\\ud800" + "\\ude00" * 800)  # lone halves, long
@example("\\u00e9" * 1000 + "\\u2014")  # Latin-1 up to the last character
@examples(2)
def test_escaped_strings_decode_as_json_loads_does(content: str) -> None:
    body = body_of(content)
    expected = json.loads(body)
    for name, core in CORES.items():
        got = read_frames(core, body)
        assert got == [expected, expected, None], name
        text = got[0]["params"]["text"]
        assert text == expected["params"]["text"] and len(text) == len(expected["params"]["text"]), name


@given(contents(), st.sampled_from(["\\x", "\\u12G4", "\\u12", "\x01", "\\"]))
@examples(1)
def test_a_bad_escape_anywhere_is_refused(content: str, bad: str) -> None:
    """A bad escape (or control character) after good ones, in a short string or a long one: not JSON, on both cores."""
    body = body_of(content + bad)
    for name, core in CORES.items():
        frame = b"Content-Length: %d\r\n\r\n" % len(body) + body
        transport = core.StdioTransport(io.BytesIO(frame), io.BytesIO(), framing="content-length")
        try:
            transport._read_value()
        except ValueError:
            continue
        raise AssertionError(f"{name}: {content + bad!r} was read")


# Long strings whose widest character comes late, or in steps: the native core's storage starts ASCII and is
# widened (what was written copied over) when a wider character comes.
LONG_WIDENINGS = {
    "ascii": "x\\n" * 3000,
    "latin-1 last": "x\\n" * 3000 + "\\u00e9",
    "ucs-2 last": "x\\n" * 3000 + "\\u0100",
    "pair last": "x\\n" * 3000 + "\\ud83d\\ude00",
    "lone surrogate last": "x\\n" * 3000 + "\\udc00",
    "each width in turn": "x\\n" * 1500 + "\\u00e9" * 900 + "\u2014" * 900 + "\\ud83d\\ude00" * 900 + "\\t",
    "widest first": "\U0001f600" + "x\\n" * 3000,
    "raw cjk": "\u6f22\u5b57\\n" * 2000,
}


@pytest.mark.parametrize("content", list(LONG_WIDENINGS.values()), ids=list(LONG_WIDENINGS))
def test_a_long_string_is_stored_as_json_loads_stores_it(content: str) -> None:
    """The same characters in the same storage: the narrowest kind, and no spare room (``sys.getsizeof``)."""
    body = body_of(content)
    expected = json.loads(body)["params"]["text"]
    for name, core in CORES.items():
        text = read_frames(core, body)[0]["params"]["text"]
        assert text == expected and hash(text) == hash(expected), name
        assert sys.getsizeof(text) == sys.getsizeof(expected), name


@pytest.mark.slow
def test_a_string_longer_than_the_first_room_grows_then_widens() -> None:
    """Past 16 Mi characters the native core's storage grows (the room it starts with is full), then a wider last
    character widens it: the text is still ``json.loads``'s, stored as it stores it."""
    body = body_of("a\\n" * (8 * 1024 * 1024 + 1000) + "\\u0101")
    expected = json.loads(body)["params"]["text"]
    for name, core in CORES.items():
        text = read_frames(core, body)[0]["params"]["text"]
        assert len(text) == len(expected) and text[-3:] == expected[-3:] and text == expected, name
        assert sys.getsizeof(text) == sys.getsizeof(expected), name
        del text
