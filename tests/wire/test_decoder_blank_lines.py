"""``FrameDecoder(skip_blank=False)``: blank lines handed out instead of skipped (the MCP reader's need).

Both cores (``rpcwire._rpcwire`` and ``rpcwire.pure``): with the option, every line is handed out as
``read_line`` hands it out, however the bytes are split; without it (the default), blank lines are skipped;
for ``"content-length"`` the option changes nothing. The two cores hand out the same things.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable
from types import ModuleType
from typing import Any

import pytest
import rpcwire
import rpcwire.pure
from rpcwire._types import Refused

CORES = {"native": rpcwire._core, "pure": rpcwire.pure}


@pytest.fixture(params=list(CORES.values()), ids=list(CORES))
def core(request: pytest.FixtureRequest) -> ModuleType:
    module: ModuleType = request.param
    return module


def decode(core: ModuleType, pieces: Iterable[bytes], **options: Any) -> list[Any]:
    """What a decoder hands out for ``pieces`` fed one by one, then closed (a refusal as a tuple)."""
    decoder = core.FrameDecoder(**options)
    out: list[Any] = []

    def drain() -> None:
        for _ in range(10_000):
            item = decoder.next()
            if item is None:
                return
            out.append(("refused", item.reason, item.answer) if isinstance(item, Refused) else item)
        raise AssertionError("the decoder never said None")

    for piece in pieces:
        decoder.feed(piece)
        drain()
    decoder.close()
    drain()
    return out


def splits(data: bytes) -> Iterable[list[bytes]]:
    """``data`` whole, byte by byte, and cut at every pair of places."""
    yield [data]
    yield [data[i : i + 1] for i in range(len(data))]
    for i, j in itertools.combinations_with_replacement(range(len(data) + 1), 2):
        yield [data[:i], data[i:j], data[j:]]


# Blank lines of every kind: empty, spaces, a tab, "\r\n" (empty), " \r\n"; then a last line without "\n".
STREAM = b'{"a":1}\n\n   \n\t\r\n\r\n{"b":2}\r\n \r\n' + b"tail"
WITH_BLANKS = [b'{"a":1}', b"", b"   ", b"\t", b"", b'{"b":2}', b" ", b"tail"]
WITHOUT_BLANKS = [b'{"a":1}', b'{"b":2}', b"tail"]


def test_blank_lines_are_handed_out_with_the_option_in_every_split(core: ModuleType) -> None:
    for pieces in splits(STREAM):
        assert decode(core, pieces, skip_blank=False) == WITH_BLANKS, pieces


def test_blank_lines_are_skipped_by_default_and_with_skip_blank_true(core: ModuleType) -> None:
    for pieces in splits(STREAM):
        assert decode(core, pieces) == WITHOUT_BLANKS, pieces
    assert decode(core, [STREAM], skip_blank=True) == WITHOUT_BLANKS


def test_a_blank_last_line_without_newline(core: ModuleType) -> None:
    assert decode(core, [b"a\n  "], skip_blank=False) == [b"a", b"  "]
    assert decode(core, [b"a\n\r"], skip_blank=False) == [b"a", b""]
    assert decode(core, [b"a\n  "]) == [b"a"]
    assert decode(core, [b""], skip_blank=False) == []  # no input: no line, not an empty one


def test_only_the_carriage_return_before_newline_is_dropped_from_a_blank_line(core: ModuleType) -> None:
    assert decode(core, [b"\r\r\n \r\n\r \n"], skip_blank=False) == [b"\r", b" ", b"\r "]


def test_a_blank_line_over_the_limit_is_refused_with_or_without_the_option(core: ModuleType) -> None:
    refused = ("refused", "a line longer than max_message_bytes (4)")
    for skip_blank in (True, False):
        got = decode(core, [b" " * 10 + b"\nok\n"], max_message_bytes=4, skip_blank=skip_blank)
        assert [item[:2] if isinstance(item, tuple) else item for item in got] == [refused, b"ok"]


def test_content_length_is_the_same_with_the_option(core: ModuleType) -> None:
    # An empty body and a blank one are messages; blank lines between frames are not.
    stream = b"Content-Length: 0\r\n\r\n\r\n\r\nContent-Length: 2\r\n\r\n  \nContent-Length: 2\r\n\r\n{}"
    expected = [b"", b"  ", b"{}"]
    for pieces in [[stream], [stream[i : i + 1] for i in range(len(stream))]]:
        for skip_blank in (True, False):
            assert decode(core, pieces, framing="content-length", skip_blank=skip_blank) == expected


def test_the_option_is_keyword_only(core: ModuleType) -> None:
    with pytest.raises(TypeError):
        core.FrameDecoder("newline", 100, False)


@pytest.mark.parametrize("value", [1, 0, None, "", "no", 1.0, [], [False]])
def test_the_option_is_a_bool_and_nothing_else(core: ModuleType, value: object) -> None:
    """One rule on both cores: a bool, as the HTTP apps' flags are (a truthy ``"no"``
    or a falsy ``[]`` would quietly mean the opposite of what it says), refused before anything is read."""
    for framing in ("newline", "content-length"):  # refused also where it changes nothing
        with pytest.raises(TypeError) as caught:
            core.FrameDecoder(framing, skip_blank=value)
        assert caught.value.args == (f"skip_blank must be a bool, not {type(value).__name__}",)


def test_the_cores_agree_on_random_streams() -> None:
    rng = random.Random(19)
    alphabet = [b"\n", b"\r", b"\r\n", b" ", b"\t", b"x", b"{", b"[1]"]
    for _ in range(300):
        data = b"".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30)))
        cuts = sorted(rng.randrange(len(data) + 1) for _ in range(rng.randrange(0, 4)))
        pieces = [data[i:j] for i, j in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        for skip_blank in (True, False):
            options = {"max_message_bytes": rng.choice([3, 8, 100]), "skip_blank": skip_blank}
            native = decode(CORES["native"], pieces, **options)
            assert native == decode(CORES["pure"], pieces, **options), (pieces, options)
