"""JSON in and out: the bytes written equal ``json.dumps(..., ensure_ascii=False, separators=(",", ":"),
allow_nan=False)`` (a lone surrogate as its ``\\udxxx`` escape), native and pure alike; numbers and
strings are decoded as ``json.loads`` decodes them.
"""

from __future__ import annotations

import ctypes
import io
import json
import math
import random
import re
import struct
import sys
import sysconfig
import tracemalloc
import unittest.mock
from typing import Any

import pytest
import rpcwire
import rpcwire.pure
from hypothesis import given
from hypothesis import strategies as st
from support.messages import LONG_INT_DIGITS, answers, compact, echo, err, request
from support.properties import examples
from support.serving import served

IMPLS = (rpcwire, rpcwire.pure)

MAX_DIGITS = LONG_INT_DIGITS

SPECIAL_CHARS = '"\\/\x00\x01\x08\x09\x0a\x0c\x0d\x1f\x20\x7f\x80\xa0\xff\u2028\u2029\ufeff\uffff\U0001f600\U0010ffff'
characters = st.one_of(
    st.characters(),
    st.characters(categories=["Cs"]),  # lone surrogates
    st.sampled_from(SPECIAL_CHARS),
)
texts = st.text(characters, max_size=20)

integers = st.one_of(
    st.integers(),
    st.integers(min_value=-(2**300), max_value=2**300),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 10 ** (MAX_DIGITS - 1), 1 - 10**MAX_DIGITS]),
)
# Short decimals (0.5, -12.25, 593366088.09029) are what payloads carry, and what the native decoder
# computes exactly without a parse (Clinger's path: below 2^53, up to 10^22); its boundaries are in
# TARGETED_FLOATS and FLOAT_TEXTS.
short_decimals = st.builds(
    lambda digits, decimals: digits / 10**decimals, st.integers(-(10**17), 10**17), st.integers(0, 9)
)
floats = st.one_of(
    short_decimals,
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True, min_value=-1e-300, max_value=1e-300),
    st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e16, 1e-7]),
)
scalars = st.one_of(st.none(), st.booleans(), integers, floats, texts)
keys = st.one_of(texts, texts, st.integers(-1000, 1000), floats, st.booleans(), st.none())

values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=5).map(tuple),
        st.dictionaries(keys, children, max_size=5),
    ),
    max_leaves=25,
)

_SURROGATE = re.compile("[\ud800-\udfff]")


def expected_bytes(value: Any) -> bytes:
    """The documented encoding: ``json.dumps`` compact UTF-8, with each surrogate written as ``\\udxxx``."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def serve_result(impl: Any, value: Any) -> bytes:
    return served(impl, request("m", id=1), lambda m, p: value)


def write_all(impl: Any, value: Any) -> bytes:
    out = io.BytesIO()
    transport = impl.StdioTransport(io.BytesIO(), out)
    transport.write_response(7, value)
    transport.write_error("e", -32000, "m", data=value)
    transport.write_notification("n", value)
    return out.getvalue()


@pytest.mark.slow
@examples(1)
@given(values)
def test_values_are_written_as_json_dumps_writes_them(value: Any) -> None:
    """A handler's result, and each write method's value: native == pure == json.dumps (surrogates escaped)."""
    native, pure = (serve_result(impl, value) for impl in IMPLS)
    assert native == pure
    assert native == b'{"jsonrpc":"2.0","id":1,"result":' + expected_bytes(value) + b"}\n"
    native, pure = (write_all(impl, value) for impl in IMPLS)
    assert native == pure
    notification = {"jsonrpc": "2.0", "method": "n"}
    if value is not None:
        notification["params"] = value
    error: dict[str, Any] = {"code": -32000, "message": "m"}
    if value is not None:
        error["data"] = value
    assert native.split(b"\n") == [
        expected_bytes({"jsonrpc": "2.0", "id": 7, "result": value}),
        expected_bytes({"jsonrpc": "2.0", "id": "e", "error": error}),
        expected_bytes(notification),
        b"",
    ]


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), integers, floats, texts),
    lambda children: st.one_of(st.lists(children, max_size=5), st.dictionaries(texts, children, max_size=5)),
    max_leaves=25,
)


def exact(value: Any) -> str:
    """A text that tells apart what ``==`` does not (``1`` and ``1.0``, ``0.0`` and ``-0.0``, ``True`` and ``1``)."""
    return json.dumps(value, ensure_ascii=True)


@pytest.mark.slow
@examples(1)
@given(json_values, st.booleans())
def test_decode_then_encode_round_trip(value: Any, ascii_only: bool) -> None:
    """params sent as JSON (escaped or raw UTF-8) reach the handler as ``json.loads`` gives them, and come back
    canonical."""
    if _SURROGATE.search(json.dumps(value, ensure_ascii=False)):
        ascii_only = True  # a raw surrogate cannot be sent as UTF-8
    line = json.dumps({"jsonrpc": "2.0", "method": "m", "params": [value], "id": 1}, ensure_ascii=ascii_only)
    received = json.loads(json.dumps(value))  # what json.loads makes of it (an escaped surrogate pair is one character)
    outputs = []
    for impl in IMPLS:
        seen: list[Any] = []
        out = io.BytesIO()
        impl.StdioTransport(io.BytesIO(line.encode() + b"\n"), out).serve(lambda m, p, seen=seen: seen.append(p) or p)
        assert len(seen) == 1
        assert exact(seen[0]) == exact([received])
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1]
    assert outputs[0] == b'{"jsonrpc":"2.0","id":1,"result":' + expected_bytes([received]) + b"}\n"


TARGETED_FLOATS = [
    *[0.1, 1e16, 1e15, 1e-5, 1e-4, 5e-324, 1.7976931348623157e308, -0.0, 123456789.123],
    # where Python's layout changes (positional from 1e-4 up to 1e16, Żmij's own layout taken there)
    *[9.999999999999999e-05, 0.00015, 1.5e-06, 2.0**50, 2.0**50 - 1, (2.0**50 - 1) / 10, 1125899906842623.5],
    *[0.123456, 0.1234567, 593366088.09029, 0.1 + 0.2, 1e-06, 999999.999999],
    *[9999999999999998.0, 1.0000000000000002e16, 1.5e-07, 1.2345678901234567e-05, 1e22, 1e-22, 1e100, 1.5e-300],
    *[2.0**53, 2.0**53 + 2, 123.45678901234568, -598.1234567890123, 0.30000000000000004, 4.35, 2.675],
]


@pytest.mark.parametrize("value", TARGETED_FLOATS, ids=[repr(f) for f in TARGETED_FLOATS])
def test_float_results_are_written_as_repr(impl: Any, value: float) -> None:
    out = serve_result(impl, value)
    assert out == b'{"jsonrpc":"2.0","id":1,"result":' + repr(value).encode() + b"}\n"
    assert serve_result(impl, [value, -value]) == b'{"jsonrpc":"2.0","id":1,"result":[%s,%s]}\n' % (
        repr(value).encode(),
        repr(-value).encode(),
    )


def random_doubles(seed: int, count: int, exponents: range | None = None) -> list[float]:
    """Finite doubles of random bits; with ``exponents``, their binary exponent (unbiased) drawn from it."""
    rng = random.Random(seed)
    values = []
    while len(values) < count:
        bits = rng.getrandbits(64)
        if exponents is not None:
            bits = (bits & ~(0x7FF << 52)) | ((rng.choice(exponents) + 1023) << 52)
        value = struct.unpack("<d", bits.to_bytes(8, "little"))[0]
        if math.isfinite(value):
            values.append(value)
    return values


def test_floats_of_random_bits_are_written_as_repr(impl: Any) -> None:
    """Every finite double as ``repr`` writes it: random bits over every exponent (subnormals too), random bits
    across the positional range (1e-4 to 1e16, with the binades either side of its edges), and the edges."""
    edges = [5e-324, 2.2250738585072014e-308, 1e16, 9999999999999998.0, 1e-05, 0.0001, -0.0, 9.999999999999999e-05]
    values = [*random_doubles(20, 50_000), *random_doubles(21, 100_000, range(-16, 56)), *edges]
    expected = "[" + ",".join(map(repr, values)) + "]"
    assert serve_result(impl, values) == b'{"jsonrpc":"2.0","id":1,"result":' + expected.encode() + b"}\n"


FLOAT_TEXTS = [
    "0.1",
    "1e16",
    "1E16",
    "1.0e1",
    "0.1e1",
    "1e-7",
    "0.000001",
    "5e-324",
    "5E-324",
    "2.5e-324",
    "4.9406564584124654e-324",
    "2.2250738585072011e-308",
    "2.2250738585072012e-308",
    "2.2250738585072014e-308",
    "1.7976931348623157e308",
    "1.7976931348623158e308",
    "8.98846567431158e307",
    "0.30000000000000004",
    "1e23",
    "9007199254740993.0",
    "9007199254740993e0",
    "123456789012345678901234567890.0",
    "3.14159265358979323846264338327950288419716939937510582097494459",
    "0." + "0" * 400 + "1",
    "1" + "0" * 300 + ".5",
    "1e-400",
    "-1e-400",
    "-0.0",
    "-0e10",
    "0e-10",
    "1.5e+3",
    "100e-2",
    "7e22",
    "7.0e-10",
    "0.1234567890123456789e-300",
    "1" * 400 + "e-300",
    # the native decoder's exact path (a mantissa below 2^53 scaled by at most 10^22) and its edges
    "9007199254740992.0",
    "9007199254740991e-3",
    "90071992547409921e-1",
    "1e22",
    "1e-22",
    "1e-23",
    "4.35",
    "2.675",
    "1234567890123456789e-22",
    "12345678901234567890e-10",
    "0.0000000000000000000000123",
    "12345678.12345678",
    "-12345678.123456789",
    "1.00000000000000000000000000001",
    # full precision (17 digits, as repr writes them): the native decoder's Eisel-Lemire path, and its edges
    "-831.2297419384171",
    "123.45678901234568",
    "0.1234567890123456789",
    "9999999999999999999.0",
    "99999999999999999999.0",
    "1e308",
    "-1e308",
    "2e-324",
    "3e-324",
    "2.4703282292062327e-324",
    "2.4703282292062328e-324",
    "2.2250738585072009e-308",
    "4.4501477170144023e-308",
    "9007199254740993e-308",
    "7.2057594037927933e16",
    "1234567890123456789e-330",
]


@pytest.mark.parametrize("text", FLOAT_TEXTS, ids=[t if len(t) < 40 else t[:37] + "..." for t in FLOAT_TEXTS])
def test_float_decoding_is_correctly_rounded(impl: Any, text: str) -> None:
    """A number with a fraction or exponent becomes the ``float`` that ``float(text)`` gives (correctly rounded)."""
    seen: list[Any] = []
    out = io.BytesIO()
    line = b'{"jsonrpc":"2.0","method":"m","params":[%s],"id":1}\n' % text.encode()
    impl.StdioTransport(io.BytesIO(line), out).serve(lambda m, p: seen.append(p) or p)
    assert len(seen) == 1
    [value] = seen[0]
    assert type(value) is float
    assert repr(value) == repr(float(text))
    assert out.getvalue() == b'{"jsonrpc":"2.0","id":1,"result":[' + repr(float(text)).encode() + b"]}\n"


@examples(3)
@given(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["{!r}", "{:.17g}", "{:.17e}", "{:.20f}", "{:.3e}", "{:.1E}"]),
)
def test_float_text_round_trip(value: float, form: str) -> None:
    """Any float text comes back as ``repr(float(text))``; one that overflows to inf is a -32603."""
    text = form.format(value)
    if not any(c in text for c in ".eE"):
        text += ".0"  # keep it a float
    line = b'{"jsonrpc":"2.0","method":"m","params":[%s],"id":1}\n' % text.encode()
    outputs = []
    for impl in IMPLS:
        out = io.BytesIO()
        impl.StdioTransport(io.BytesIO(line), out).serve(echo)
        outputs.append(out.getvalue())
    if math.isinf(float(text)):
        data = {"exception": "ValueError", "detail": "Out of range float values are not JSON compliant"}
        expected = compact(err(1, -32603, "Internal error", data))
    else:
        expected = b'{"jsonrpc":"2.0","id":1,"result":[' + repr(float(text)).encode() + b"]}"
    assert outputs[0] == outputs[1] == expected + b"\n"


@examples(1)
@given(st.one_of(st.integers(), st.integers(min_value=-(10**MAX_DIGITS) + 1, max_value=10**MAX_DIGITS - 1)))
def test_integer_round_trip(value: int) -> None:
    line = b'{"jsonrpc":"2.0","method":"m","params":[%d],"id":%d}\n' % (value, value)
    for impl in IMPLS:
        out = io.BytesIO()
        seen: list[Any] = []
        impl.StdioTransport(io.BytesIO(line), out).serve(lambda m, p, seen=seen: seen.append(p) or p)
        assert seen == [[value]]
        assert type(seen[0][0]) is int
        assert out.getvalue() == b'{"jsonrpc":"2.0","id":%d,"result":[%d]}\n' % (value, value)


@pytest.mark.parametrize(
    ("escaped", "decoded"),
    [
        (r"\"", '"'),
        (r"\\", "\\"),
        (r"\/", "/"),
        (r"\b\f\n\r\t", "\b\f\n\r\t"),
        (r"\u0000", "\x00"),
        (r"\u001F", "\x1f"),
        (r"\u00e9\u00C9", "éÉ"),
        (r"\u20ac", "€"),
        (r"\ud83d\ude00", "\U0001f600"),
        (r"\uD83D\uDE00", "\U0001f600"),
        (r"\ud800", "\ud800"),
        (r"\udc00\ud800", "\udc00\ud800"),
        (r"\ud800x", "\ud800x"),
        (r"\ud800\u0041", "\ud800A"),
        (r"\ud83d\ud83d\ude00", "\ud83d\U0001f600"),
        ("é€😀", "é€😀"),
        ("\x7f", "\x7f"),
    ],
)
def test_string_escapes_decode_like_json_loads(impl: Any, escaped: str, decoded: str) -> None:
    assert json.loads(f'"{escaped}"') == decoded  # the reference agrees with the table
    seen: list[Any] = []
    line = '{"jsonrpc":"2.0","method":"m","params":["' + escaped + '"],"id":1}\n'
    out = io.BytesIO()
    impl.StdioTransport(io.BytesIO(line.encode()), out).serve(lambda m, p: seen.append(p) or p)
    assert seen == [[decoded]]
    assert out.getvalue() == b'{"jsonrpc":"2.0","id":1,"result":[' + expected_bytes(decoded) + b"]}\n"


# Long strings with escapes: the native decoder writes one of more than 4 KiB (escapes resolved) straight
# into the str after measuring it, and a shorter one through its buffer; each width, escapes at the ends and
# across, lone surrogates, just below and just above that length.
LONG_PIECES = {
    "ascii": ("a\\n", "a\n"),
    "latin1": ("\\u00e9x\\t", "éx\t"),
    "latin1-raw": ('é\\"', 'é"'),
    "ucs2": ("\\u2014—\\/", "——/"),
    "ucs4": ("😀\\ud83d\\ude00", "😀😀"),
    "surrogate": ("\\ud800é", "\ud800é"),
}


@pytest.mark.parametrize("width", list(LONG_PIECES))
@pytest.mark.parametrize("length", [4_000, 4_090, 4_096, 4_100, 5_000, 70_000])
def test_long_escaped_strings_decode_like_json_loads(impl: Any, width: str, length: int) -> None:
    escaped, decoded = LONG_PIECES[width]
    for plain_run in ("", "p" * 13, "q" * 40):
        repeat = length // (len(escaped) + len(plain_run)) + 1
        text = "\\n" + (plain_run + escaped) * repeat + "\\u0041"
        expected = "\n" + (plain_run + decoded) * repeat + "A"
        assert json.loads(f'"{text}"') == expected  # the reference agrees
        seen: list[Any] = []
        line = '{"jsonrpc":"2.0","method":"m","params":["' + text + '", "\\n"],"id":1}\n'
        impl.StdioTransport(io.BytesIO(line.encode(errors="surrogatepass")), io.BytesIO()).serve(
            lambda m, p, seen=seen: seen.append(p)
        )
        assert seen == [[expected, "\n"]], (width, length, len(plain_run))


def test_long_escaped_string_errors_are_the_scanners(impl: Any) -> None:
    """A long string that turns out bad past the native decoder's buffer limit: -32700, as for a short one."""
    for bad in ("\\x", "\x01", "\\u12G4"):
        line = '{"jsonrpc":"2.0","method":"m","params":["' + "a\\n" * 3_000 + bad + '"],"id":1}\n'
        out = io.BytesIO()
        impl.StdioTransport(io.BytesIO(line.encode()), out).serve(echo)
        assert answers(out.getvalue())[0]["error"]["code"] == -32700, bad


INTEGER_TEXTS = [
    *["0", "-0", "7", "-12", "12345678", "123456789", "1234567890123456", "12345678901234567"],
    # 18 digits are read by the native scanner itself, 19 and more by int()
    *["999999999999999999", "-999999999999999999", "1000000000000000000", "9223372036854775807"],
    *["-9223372036854775808", "9223372036854775808", "-9223372036854775809", "18446744073709551616"],
]


@pytest.mark.parametrize("text", INTEGER_TEXTS)
def test_integer_decoding_at_the_fast_paths_edges(impl: Any, text: str) -> None:
    seen: list[Any] = []
    out = io.BytesIO()
    line = b'{"jsonrpc":"2.0","method":"m","params":[%s, {"k": %s}],"id":1}\n' % (text.encode(), text.encode())
    impl.StdioTransport(io.BytesIO(line), out).serve(lambda m, p: seen.append(p) or p)
    assert seen == [[int(text), {"k": int(text)}]]
    assert type(seen[0][0]) is int
    assert out.getvalue() == b'{"jsonrpc":"2.0","id":1,"result":[%d,{"k":%d}]}\n' % (int(text), int(text))


# Digit runs of every length across the native scanner's eight-byte steps (and the one to seven digits it
# reads from the same load), ended by each byte that can follow a number.
DIGIT_RUNS = "98765432109876543210987"
NUMBER_TEXTS = [
    number
    for length in range(1, len(DIGIT_RUNS) + 1)
    for number in (
        DIGIT_RUNS[:length],
        "-" + DIGIT_RUNS[:length],
        "0." + DIGIT_RUNS[:length],
        "-" + DIGIT_RUNS[: (length + 1) // 2] + "." + DIGIT_RUNS[: length // 2 + 1],
        DIGIT_RUNS[:length] + "e-" + str(length),
    )
]
# Floats at the edges of a double: signed zeros, the largest, the smallest normal and subnormal, long mantissas.
EDGE_FLOATS = ["0.0", "-0.0", "-0e0", "0e-5", "5e-324", "-5e-324", "4.9406564584124654e-324", "1e-320"]
EDGE_FLOATS += ["2.2250738585072014e-308", "2.2250738585072011e-308", "1.7976931348623157e308", "-1e308"]
EDGE_FLOATS += ["3.14159265358979323846264338327950288419716939937510", "0.30000000000000001665", "1" * 30 + ".5"]


def test_numbers_of_every_length_decode_like_json_loads(impl: Any) -> None:
    numbers = NUMBER_TEXTS + EDGE_FLOATS + ["-" + "9" * 25, "-" + "9" * 19, "-" + "1" + "0" * 40]
    seen: list[Any] = []
    lines = [
        b'{"jsonrpc":"2.0","method":"m","params":%s,"id":1}\n' % params.encode()
        for params in (
            "[" + ",".join(numbers) + "]",
            "[" + " , ".join(numbers) + " ]",
            "{" + ",".join(f'"{k}":{number}' for k, number in enumerate(numbers)) + "}",
            "[" + ",".join(f"[{number}]" for number in numbers) + "]",
        )
    ]
    impl.StdioTransport(io.BytesIO(b"".join(lines)), io.BytesIO()).serve(lambda m, p: seen.append(p))
    expected = [json.loads(number) for number in numbers]
    assert [exact(value) for value in seen[0]] == [exact(value) for value in expected]
    assert [exact(value) for value in seen[1]] == [exact(value) for value in expected]
    assert [exact(value) for value in seen[2].values()] == [exact(value) for value in expected]
    assert [exact(value) for [value] in seen[3]] == [exact(value) for value in expected]


# Runs of numbers in an array (`1,2,3`), which the native decoder reads in a loop of their own, broken by every
# kind of item and separator, and ended by every malformed continuation: read as json.loads reads them, or -32700.
NUMBER_RUNS = [
    '[1,2,"a",3,4,[5,6],-7,8.5,true,9,null,{"k":10},11]',
    "[1,2 ,3, 4,\t5,-0,0,-0.0,1e2,12345678901234567890,-6]",
    "[[1,2],[3,[4,5]],6]",
    "[0,-1,9007199254740993,1.5,-2.5e-3]",
    # The run starts after an array's first item, when that is a number: every kind of first item and what follows.
    "[7]",
    '[-7,"a"]',
    "[2.5,[1,2]]",
    "[1 ,2,3]",
    "[ 1,2]",
    "[1, 2,3]",
    "[12345678901234567890,1,2]",
    "[1e400,-1e400,1]",
    '["a",1,2]',
    "[true,1,2]",
    "[null,1.5,2]",
    "[[1],2,3]",
    '[{"a":1},2,3]',
]
BROKEN_RUNS = [b"[1,2,x]", b"[1,-]", b"[1,01]", b"[1,2,]", b"[1,2 3]", b"[1,3.5e,4]", b"[1,2", b"[1,-a,2]"]
BROKEN_RUNS += [b"[01,2]", b"[-,1]", b"[1.,2]", b"[1", b"[1,]", b"[1 2]"]
BROKEN_RUNS += [b"[1,%s,2]" % (b"9" * (MAX_DIGITS + 1))]


def test_runs_of_numbers_decode_like_json_loads(impl: Any) -> None:
    lines = [b'{"jsonrpc":"2.0","method":"m","params":%s,"id":1}\n' % text.encode() for text in NUMBER_RUNS]
    lines += [b'{"jsonrpc":"2.0","method":"m","params":%s,"id":2}\n' % text for text in BROKEN_RUNS]
    seen: list[Any] = []
    out = io.BytesIO()
    impl.StdioTransport(io.BytesIO(b"".join(lines)), out).serve(lambda m, p: seen.append(p))
    assert seen == [json.loads(text) for text in NUMBER_RUNS]
    assert [type(value) for value in seen[1]] == [type(value) for value in json.loads(NUMBER_RUNS[1])]
    codes = [answer["error"]["code"] for answer in answers(out.getvalue()) if "error" in answer]
    assert codes == [-32700] * len(BROKEN_RUNS)


# Arrays of sizes around the native decoder's storage kept from one message to the next (2**15 items), inside
# and beside each other: each line's lists hold what json.loads reads, including after a line that failed.
ARRAY_SIZES = [0, 1, 2, 7, 8, 9, 16, 17, 1000, 2**15 - 1, 2**15, 2**15 + 1, 40_000]


def test_arrays_of_every_size_and_nesting_decode_like_json_loads(impl: Any) -> None:
    def array(size: int) -> str:
        return "[" + ",".join(str(k) if k % 3 else f'["s{k}",{{"k":[{k}.5]}},[]]' for k in range(size)) + "]"

    texts = [array(size) for size in ARRAY_SIZES]
    texts += ["[" + ",".join(texts[:6]) + "]", "[" + array(9)[1:-1] + "," + array(2**15 + 1) + "," + array(3)[1:]]
    # Items left unfinished by a malformed line: the next lines still decode.
    bad = [b"[[1,2,[3,4,[5,", b"[[1,2],[3," + b"7," * 40_000 + b"x]]", b"[" + b"[1]," * 100 + b"]"]
    lines = [b'{"jsonrpc":"2.0","method":"m","params":%s,"id":1}\n' % text.encode() for text in texts]
    lines[3:3] = [b'{"jsonrpc":"2.0","method":"m","params":%s,"id":2}\n' % text for text in bad]
    seen: list[Any] = []
    out = io.BytesIO()
    impl.StdioTransport(io.BytesIO(b"".join(lines)), out).serve(lambda m, p: seen.append(p))
    assert seen == [json.loads(text) for text in texts]
    assert [answer["error"]["code"] for answer in answers(out.getvalue()) if "error" in answer] == [-32700] * 3


def test_items_of_unfinished_arrays_are_released(impl: Any) -> None:
    """A line that fails inside nested arrays releases the items read so far (the native decoder holds them
    on a stack until each array ends): serving many such lines leaves no memory behind."""
    items = b"1234567890123," * 5_000
    bad = b'{"jsonrpc":"2.0","method":"m","params":[[' + items + b'"x",[1.5,x]]]}\n'
    good = b'{"jsonrpc":"2.0","method":"m","params":[[' + items + b'1]],"id":1}\n'

    def serve(lines: int) -> None:
        impl.StdioTransport(io.BytesIO((bad + good) * lines), io.BytesIO()).serve(lambda m, p: None)

    serve(5)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        serve(100)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # 100 lines' 5,000 ints, were they kept, would be about 16 MB.
    assert grown < 1_000_000, grown


# Every length up to past the native encoder's short-string path (32 bytes, words of 8), with a character
# to escape (or a plain one) at every place: the bytes are json's.
SHORT_STRINGS = [
    "abcdefghijklmnopqrstuvwxyz0123456789"[:length][:at] + special + "abcdefghijklmnopqrstuvwxyz0123456789"[at:length]
    for length in range(36)
    for at in range(length + 1)
    for special in ['"', "\\", "\n", "\x1f", "\x7f", " ", "~"]
]


def test_short_strings_are_written_as_json_writes_them(impl: Any) -> None:
    value = {text: [text] for text in SHORT_STRINGS} | {"": "", "plain": "plain"}
    assert serve_result(impl, value) == b'{"jsonrpc":"2.0","id":1,"result":' + expected_bytes(value) + b"}\n"


# Strings of each storage width (the native encoder escapes a `str`'s Latin-1, UCS-2 or UCS-4 units 16 at a
# time, the last ones of a long string as one block over the units before them): one special or wide character
# at each place, in texts shorter than a block, of a block and a bit, of two blocks and a bit.
WIDE_STRINGS = [
    base * (length // len(base) + 1)
    for base in ("abcdefgh", "abcdéfgh", "abcd\u2014fgh", "abcd\U0001f600fgh")
    for length in (5, 16, 17, 31, 33, 47)
]
WIDE_STRINGS = [
    text[:at] + special + text[at + 1 : length]
    for text in WIDE_STRINGS
    for length in (5, 16, 17, 31, 33, 47)
    for at in range(0, length, 3)
    for special in ['"', "\n", "\x00", "\xff", "\u07ff", "\ud800", "\uffff", "\U0010ffff"]
]


def test_strings_of_every_width_are_written_as_json_writes_them(impl: Any) -> None:
    value = [WIDE_STRINGS, {text: len(text) for text in WIDE_STRINGS}]
    assert serve_result(impl, value) == b'{"jsonrpc":"2.0","id":1,"result":' + expected_bytes(value) + b"}\n"


MIXED_TEXT = 'def f(q: str) -> "r\\n":  # \u2014 caf\xe9\t\U0001f600\n'


def keep_utf8(text: str) -> str:
    """A copy of ``text`` on which CPython keeps its UTF-8 form, as ``PyUnicode_AsUTF8AndSize`` leaves it (another
    encoder, a C API parse of the string): the native encoder escapes a non-ASCII ``str`` from those bytes then."""
    copy = (text + "_")[:-1]
    if sys.implementation.name == "cpython":
        size = sys.getsizeof(copy)
        as_utf8 = ctypes.pythonapi.PyUnicode_AsUTF8AndSize
        as_utf8.argtypes, as_utf8.restype = [ctypes.py_object, ctypes.c_void_p], ctypes.c_void_p
        as_utf8(copy, None)
        assert sys.getsizeof(copy) > size or copy.isascii()  # (the kept UTF-8 counts in its size)
    return copy


def test_strings_whose_utf8_python_keeps_are_written_as_json_writes_them(impl: Any) -> None:
    kept = [keep_utf8(text) for text in WIDE_STRINGS if not _SURROGATE.search(text)]
    value = [kept, {text: len(text) for text in kept}, keep_utf8(MIXED_TEXT * 300)]
    assert serve_result(impl, value) == b'{"jsonrpc":"2.0","id":1,"result":' + expected_bytes(value) + b"}\n"


class ResizesItsParent(dict):
    """A dict whose ``items()`` changes the dict it is a value of (``PARENT``), while that one is encoded."""

    def items(self) -> Any:
        PARENT.clear()
        PARENT.update({"late": True})
        return [("m", 1)]


PARENT: dict[str, Any] = {}


@pytest.mark.native_case("the native encoder's snapshot of a dict (json walks it live from 3.12)")
def test_plain_members_before_a_container_come_from_the_snapshot(impl: Any) -> None:
    """The native encoder writes plain members (str, int, float, bool, None) straight from a dict and takes its
    snapshot at the first other value: what is written is still the dict as it was before its first member."""
    PARENT.clear()
    PARENT.update({"s": "x", "i": 1, "f": 0.5, "b": True, "n": None, "d": ResizesItsParent(x=0), "after": [2], "z": 3})
    result = json.loads(serve_result(impl, PARENT))["result"]
    before = {"s": "x", "i": 1, "f": 0.5, "b": True, "n": None, "d": {"m": 1}}
    # json walks a dict live since 3.12 (the dict ended when it was cleared), but not on a free-threaded interpreter,
    # where rpcwire.pure encodes a snapshot (docs/semantics.md, "Encoding")
    if impl is rpcwire.pure and sys.version_info >= (3, 12) and not sysconfig.get_config_var("Py_GIL_DISABLED"):
        assert result == before
    else:
        assert result == before | {"after": [2], "z": 3}


def test_long_strings_and_wide_containers(impl: Any) -> None:
    value = {"s": "é" * 100_000, "l": list(range(10_000)), "d": {str(i): i for i in range(2_000)}}
    out = serve_result(impl, value)
    assert out == b'{"jsonrpc":"2.0","id":1,"result":' + compact(value) + b"}\n"
    assert answers(out) == [{"jsonrpc": "2.0", "id": 1, "result": value}]


# --- errors on exotic results: the detail is json's own, to the byte -------------------------------------


def json_error(value: Any) -> BaseException:
    """What ``json.dumps`` raises for ``value``."""
    with pytest.raises(Exception) as raised:
        json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return raised.value


def internal_error_line(exc: BaseException) -> bytes:
    data = {"exception": type(exc).__name__, "detail": str(exc)}
    return compact(err(1, -32603, "Internal error", data)) + b"\n"


def key_of_type_named(name: str) -> Any:
    return type(name, (), {"__hash__": lambda self: 1})()


# json's C encoder formats the key's type name with %.100s: its first 100 bytes of UTF-8, a character cut in
# two becoming U+FFFD (CPython 3.14: left out); "é" is 2 bytes, so 59 + 41 bytes cuts the 21st "é", 60 + 40 does not.
# PyPy's json encoder is Python code, which writes the whole name.
LONG_TYPE_NAMES = {"cut-utf8": "K" * 59 + "é" * 30, "whole-utf8": "K" * 60 + "é" * 30, "ascii": "T" * 150}
CUT_CHARACTER = "ignore" if sys.version_info >= (3, 14) else "replace"


def json_type_name(name: str) -> str:
    """A key's type name as json's error writes it."""
    if sys.implementation.name == "pypy":
        return name
    return name.encode()[:100].decode(errors=CUT_CHARACTER)


@pytest.mark.parametrize("name", list(LONG_TYPE_NAMES.values()), ids=list(LONG_TYPE_NAMES))
def test_key_of_a_type_with_a_long_name(impl: Any, name: str) -> None:
    value = {"ok": 1, key_of_type_named(name): 2}
    exc = json_error(value)
    assert str(exc).endswith(" not " + json_type_name(name))
    assert serve_result(impl, value) == internal_error_line(exc)


class Claimed:
    """What a ``Mock(spec=Claimed)`` claims to be through its ``__class__``."""


class ClassRaises:
    @property  # type: ignore[misc]
    def __class__(self) -> Any:
        raise LookupError("no class here")


class Name:
    """A class ``__name__`` that is not a ``str``: an f-string formats it."""

    def __format__(self, spec: str) -> str:
        return "formatted"


NOT_SERIALIZABLE = {
    "mock-spec": lambda: [1, unittest.mock.Mock(spec=Claimed)],
    "non-callable-mock": lambda: {"a": unittest.mock.NonCallableMagicMock(spec=dict)},
    "class-raises": lambda: [ClassRaises()],
    "class-name-formatted": lambda: [unittest.mock.Mock(__class__=unittest.mock.Mock(__name__=Name()))],
}


@pytest.mark.parametrize("case", list(NOT_SERIALIZABLE))
def test_object_named_by_its_class_attribute(impl: Any, case: str) -> None:
    """json's ``default`` names ``o.__class__.__name__``, not the type; an error on the way is raised as is."""
    value = NOT_SERIALIZABLE[case]()
    exc = json_error(value)
    assert serve_result(impl, value) == internal_error_line(exc)
    if case == "mock-spec":
        assert str(exc) == "Object of type Claimed is not JSON serializable"


class IterNotIterator(list):
    def __iter__(self) -> Any:
        return 5


class IterRaisesTypeError(tuple):
    def __iter__(self) -> Any:
        raise TypeError("mine")


@pytest.mark.parametrize("make", [lambda: IterNotIterator([1]), lambda: [IterRaisesTypeError((1,))]])
def test_sequence_subclass_that_cannot_be_iterated(impl: Any, make: Any) -> None:
    """json takes a list or tuple subclass with PySequence_Fast, which replaces a TypeError with its own."""
    value = make()
    exc = json_error(value)
    assert str(exc) == "_iterencode_list needs a sequence"
    assert serve_result(impl, value) == internal_error_line(exc)
