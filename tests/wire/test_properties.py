"""Properties of whole streams (issues 4 and 30), Hypothesis: requests, notifications and batches written token by
token (escaped member names, duplicate members, unusual ids and numbers, JSON whitespace anywhere), then mutated as
bytes (truncation, byte flips, inserted line breaks, invalid UTF-8, huge numbers, nesting around the depth limit,
more duplicates, whitespace JSON does not allow), served by both cores. One file for what both cores do with a
generated stream; each property is checked once (the differential tests that lived beside these are merged here).

(a) ``rpcwire`` (native) and ``rpcwire.pure`` write the same bytes and raise alike, also with small limits and
    when the native transport reads the stream a few bytes at a time; they read the same lines (the documented
    framing) and ``parse_request`` gives the same for each line, as bytes and as text.
(b) Every line written is one compact JSON object or array.
(c) What is written is what an oracle written here from docs/semantics.md predicts, line by line:
    ``json.loads`` for the decoding rules plus the envelope rules, never rpcwire. In particular every
    line that is a request with a valid id gets exactly one answer, carrying that id (a number as it was
    written, a string in canonical form), notifications get none, and a handler's own notifications
    (``progress``) come before its answer.
(d) Content-Length frames around the same lines, valid and broken: both cores write the same bytes and read the
    same bodies, whole or a few bytes at a time.

How many examples each property runs is the Hypothesis profile's (tests/conftest.py: ``ci`` by default, ``deep``
under ``make test-deep``), scaled by ``support.properties.examples``.
"""

from __future__ import annotations

import io
import itertools
import json
import math
import re
from dataclasses import dataclass
from typing import Any

import pytest
import rpcwire
import rpcwire._pure.envelope
import rpcwire.pure
from hypothesis import example, given
from hypothesis import strategies as st
from support.messages import LONG_INT_DIGITS, echo
from support.properties import examples
from support.serving import served
from support.streams import Trickle

IMPLS = {"native": rpcwire, "pure": rpcwire.pure}
DEFAULT_DEPTH = 128
JSON_WHITESPACE = b" \t\r\n"


# --- JSON written token by token ------------------------------------------------------------------


@dataclass(frozen=True)
class Obj:
    """A JSON object as written: its members in order, duplicates allowed."""

    members: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Raw:
    """A JSON number exactly as written (``-0``, ``1E+2``, ``1.0``, ``1e400``, 5,000 digits)."""

    text: str


def as_obj(members: list[tuple[str, Any]]) -> Obj:
    return Obj(tuple(members))


SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def render_string(draw: st.DrawFn, text: str) -> str:
    """``text`` as a JSON string, each character written plainly or escaped (lone surrogates always escaped)."""
    out = ['"']
    for char in text:
        code = ord(char)
        style = draw(st.integers(0, 5))  # 0-3: plain where allowed
        if 0xD800 <= code < 0xE000 or code < 0x20 or char in '"\\' or style == 4:
            if char in SHORT_ESCAPES and style != 4:
                out.append(SHORT_ESCAPES[char])
            elif code > 0xFFFF:  # a surrogate pair
                high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
                out.append(f"\\u{high:04x}\\u{low:04X}")
            else:
                out.append(f"\\u{code:04x}" if draw(st.booleans()) else f"\\u{code:04X}")
        elif char == "/" and style == 5:
            out.append("\\/")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def render(draw: st.DrawFn, value: Any) -> str:
    """``value`` as JSON text with JSON whitespace drawn between the tokens."""

    def ws() -> str:
        return draw(st.sampled_from(["", "", "", "", " ", "\t", "\r", " \r\t "]))

    if isinstance(value, Obj):
        if not value.members:
            return "{" + ws() + "}"
        members = (
            f"{ws()}{render_string(draw, key)}{ws()}:{ws()}{render(draw, item)}{ws()}" for key, item in value.members
        )
        return "{" + ",".join(members) + "}"
    if isinstance(value, list):
        if not value:
            return "[" + ws() + "]"
        return "[" + ",".join(f"{ws()}{render(draw, item)}{ws()}" for item in value) + "]"
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, str):
        return render_string(draw, value)
    if isinstance(value, float):
        return repr(value)
    return json.dumps(value)  # None, bools, ints


texts = st.text(
    st.one_of(st.characters(), st.characters(categories=["Cs"]), st.sampled_from('"\\/\x00\x1f\x7f\u2028é😀')),
    max_size=6,
)
keys = st.one_of(texts, st.sampled_from(["id", "method", "params", "jsonrpc", "ID", "id "]))
numbers = st.one_of(
    st.integers(-(2**64), 2**64),
    st.integers(),
    st.integers(-(10**20), 10**20),  # around the native scanner's own 18 digits
    st.floats(allow_nan=False, allow_infinity=False),
    # short decimals and measurements: the native decoder's exact path (below 2^53, up to 10^22) and its edges
    st.builds(round, st.floats(-1e6, 1e6), st.integers(0, 8)),
    st.builds(lambda m, e: m * 10.0**e, st.integers(-(2**54), 2**54), st.integers(-24, 24)),
    st.sampled_from([Raw("-0"), Raw("1E+2"), Raw("0.5e-3"), Raw("-0.0"), Raw("1e400"), Raw("1" * 30), Raw("4e-330")]),
)
values = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers, texts),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.lists(st.tuples(keys, children), max_size=3).map(as_obj),
    ),
    max_leaves=10,
)
good_ids = st.one_of(
    st.integers(-1000, 1000),
    st.integers(),
    st.sampled_from([2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**60, Raw("-0")]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([Raw("1.0"), Raw("1e3"), Raw("-0.0"), Raw("1E+02"), Raw("1.50"), Raw("1e400")]),
    texts,
    st.none(),
)
bad_ids = st.sampled_from([True, False, [], [1], Obj(()), Obj((("id", 1),))])
methods = st.sampled_from(
    ["echo", "missing", "boom", "progress", "é", "", "rpc.discover", "\x00", "\ud800", "\udfff\ud800"]
)
param_values = st.one_of(st.lists(values, max_size=3), st.lists(st.tuples(keys, values), max_size=3).map(as_obj))

MEMBER_VALUES = {  # what a member may hold, valid or not
    "jsonrpc": st.one_of(st.just("2.0"), st.sampled_from(["2.0", "1.0", "2", "2.0 ", 2.0, None, Raw("2.0")])),
    "method": st.one_of(methods, st.sampled_from([1, None, True, ["echo"]])),
    "params": st.one_of(param_values, st.sampled_from([None, 1, "x", True])),
    "id": st.one_of(good_ids, good_ids, bad_ids),
}


@st.composite
def envelopes(draw: st.DrawFn) -> Obj:
    """A request or notification, usually valid; members in any order, some of them twice (the last wins)."""
    members = [("jsonrpc", "2.0"), ("method", draw(methods))]
    if draw(st.booleans()):
        members.append(("params", draw(param_values)))
    if draw(st.integers(0, 3)):
        members.append(("id", draw(good_ids)))
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.integers(0, 9))
        if kind <= 5:  # 0-5: leave the message as it is
            continue
        name = draw(st.sampled_from(list(MEMBER_VALUES)))
        if kind == 6:  # a member replaced (perhaps with a wrong type)
            members = [member for member in members if member[0] != name]
            members.append((name, draw(MEMBER_VALUES[name])))
        elif kind == 7:  # a duplicate member, before or after the first
            members.insert(draw(st.integers(0, len(members))), (name, draw(MEMBER_VALUES[name])))
        elif kind == 8:  # a member removed
            members = [member for member in members if member[0] != name]
        else:  # a member the envelope ignores
            members.append((draw(keys), draw(values)))
    return Obj(tuple(draw(st.permutations(members))))


messages = st.one_of(envelopes(), envelopes(), envelopes(), values)
payloads = st.one_of(messages, messages, st.lists(messages, max_size=4))


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    """One line, without its line break: a payload's JSON text, then a few byte-level mutations."""
    before, after = draw(st.sampled_from(["", " ", "\t", "\r"])), draw(st.sampled_from(["", " "]))
    text = before + render(draw, draw(payloads)) + after
    raw = text.encode("utf-8")  # surrogates are always escaped by render_string
    for _ in range(draw(st.integers(0, 2))):
        raw = draw(mutations(raw))
    return raw


HUGE_NUMBERS = [
    b"9" * LONG_INT_DIGITS,
    b"-" + b"9" * LONG_INT_DIGITS,
    b"9" * (LONG_INT_DIGITS + 1),
    b"-" + b"9" * (LONG_INT_DIGITS + 1),
    b"0" * 2 + b"1",
    b"1" * 5000 + b"e-4990",
    b"1" * 5000 + b".0",
    b"1e400",
    b"-1e400",
    b"1" * 400 + b".5",
    b"2.5e-324",
    b"18446744073709551616",
    b"-9223372036854775809",
]
ODD_SPACES = [b"\x0b", b"\x0c", b"\xc2\xa0", b"\xe2\x80\xa8", b"\xef\xbb\xbf", b"\x00", b"\xc2\x85", b" ", b"\t", b"\r"]
INVALID_UTF8 = [
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b"\xed\xb0\x80",
    b"\xc0\xaf",
    b"\xf4\x90\x80\x80",
    b"\xe2\x82",
    b"\xef\xbb",
]
SPECIAL_LINES = [b"", b" \t\r", b"[]", b"[ ]", b"{}", b"[{}]", b"[[]]", b"null", b"[1,]", b'{"a":1,}', b"NaN"]
SPECIAL_LINES += [b"-Infinity", b"[1]x", b"\xef\xbb\xbf[]", b"//", b"'x'", b"01", b"1.", b'"\\ud800"', b'"\\x"']


@st.composite
def mutations(draw: st.DrawFn, raw: bytes) -> bytes:
    kind = draw(st.integers(0, 10))
    at = draw(st.integers(0, len(raw)))
    if kind == 0:  # truncation
        return raw[:at]
    if kind == 1 and raw:  # a byte flipped
        at = min(at, len(raw) - 1)
        return raw[:at] + bytes([draw(st.integers(0, 255))]) + raw[at + 1 :]
    if kind == 2:  # a line break: the line is split in two (or a lone \r inside it)
        return raw[:at] + draw(st.sampled_from([b"\n", b"\r\n", b"\r", b"\n\n"])) + raw[at:]
    if kind == 3:
        return raw[:at] + draw(st.sampled_from(INVALID_UTF8)) + raw[at:]
    if kind == 4:  # a huge number in place of a digit
        digits = [i for i, byte in enumerate(raw) if 0x30 <= byte <= 0x39]
        if digits:
            at = draw(st.sampled_from(digits))
            return raw[:at] + draw(st.sampled_from(HUGE_NUMBERS)) + raw[at + 1 :]
        return raw
    if kind == 5:  # nesting around the limit: the params or the whole line
        depth = draw(st.integers(DEFAULT_DEPTH - 3, DEFAULT_DEPTH + 2))
        inner = draw(st.sampled_from([b"1", b"[]", b"{}", b'{"a":[]}']))
        if draw(st.booleans()):
            open_, close = draw(st.sampled_from([(b"[", b"]"), (b'{"k":', b"}")]))
            nested = open_ * depth + inner + close * depth
            return b'{"jsonrpc":"2.0","method":"echo","id":"deep","params":[' + nested + b"]}"
        return b"[" * depth + raw + b"]" * depth
    if kind == 6 and raw.lstrip(JSON_WHITESPACE).startswith(b"{"):  # a duplicate member at the front
        start = raw.index(b"{") + 1
        member = draw(
            st.sampled_from([b'"id":1,', b'"id":true,', b'"id":"x",', b'"method":"boom",', b'"jsonrpc":"1.0",'])
        )
        return raw[:start] + member + raw[start:]
    if kind == 6 and raw.rstrip(JSON_WHITESPACE).endswith(b"}"):  # ... or at the end
        end = raw.rindex(b"}")
        member = draw(st.sampled_from([b',"id":2', b',"id":null', b',"id":1.5', b',"params":[1]', b',"params":3']))
        return raw[:end] + member + raw[end:]
    if kind == 7:  # whitespace, JSON's own or not
        return raw[:at] + draw(st.sampled_from(ODD_SPACES)) + raw[at:]
    if kind == 8:
        return draw(st.sampled_from(SPECIAL_LINES))
    if kind == 9:  # two messages on one line, or one line twice
        return raw + draw(st.sampled_from([b"", b" ", b"\n"])) + raw
    return raw


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    data = b""
    for line in draw(st.lists(lines(), min_size=1, max_size=6)):
        data += line + draw(st.sampled_from([b"\n", b"\n", b"\r\n", b"\n\n", b"\n \t\n"]))
    if draw(st.booleans()):
        data = data.rstrip(b"\n")  # the last line without its line break
    return data


# --- the oracle ----------------------------------------------------------------------------------


class ParseFailed(Exception):
    pass


def reject_constant(name: str) -> Any:
    raise ParseFailed(name)


JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def text_nesting(text: str) -> int:
    """How deeply arrays and objects nest in a valid JSON text, as written: members that a later
    duplicate replaces count too (the limit is on the line, docs/semantics.md)."""
    depth = deepest = 0
    for char in JSON_STRING.sub("", text):
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def nesting(value: Any) -> int:
    """How deeply lists and dicts nest in a decoded value (what is left once duplicates are dropped)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def error(id_: Any, code: int, message: str | None = None) -> tuple[str, Any, int, str | None]:
    return ("error", id_, code, message)


PARSE_ERROR = error(None, -32700, "Parse error")
INVALID_REQUEST = error(None, -32600, "Invalid Request")


def encodable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:  # 1e400 became inf
        return False
    return True


def expected_entry(message: Any) -> tuple[list[Any], Any]:
    """What docs/semantics.md makes of one message (or batch entry) with ``handler_for``'s handler: the
    notifications the handler writes while it runs, and the answer (None if none)."""
    if type(message) is not dict:
        return [], INVALID_REQUEST
    id_ = message.get("id")
    if id_ is not None and type(id_) not in (int, float, str):
        return [], INVALID_REQUEST
    if message.get("jsonrpc") != "2.0" or type(message.get("jsonrpc")) is not str:
        return [], error(id_, -32600, "Invalid Request")
    method = message.get("method")
    if type(method) is not str:
        return [], error(id_, -32600, "Invalid Request")
    if "params" in message and type(message["params"]) not in (list, dict):
        return [], error(id_, -32600, "Invalid Request")
    params = message.get("params")
    # an answer whose result or error data cannot be encoded (1e400 became inf) is a -32603, as is a
    # progress notification that cannot be: the handler's write raises
    written = [("notification", "progress", params)] if method == "progress" and encodable(params) else []
    if method == "missing":
        answer = error(id_, -32601, "Method not found") if encodable(params) else error(id_, -32603, "Internal error")
    elif method == "boom" or not encodable(params):
        answer = error(id_, -32603, "Internal error")
    else:
        answer = ("result", id_, params)
    return written, answer if "id" in message else None  # a notification is never answered


def expected_line(line: bytes, max_depth: int, max_bytes: int, max_batch: int | None) -> list[Any]:
    """What is written for one line (without its line break), in order: notifications and answers, a batch's
    answers as one list."""
    if len(line) > max_bytes:
        return [INVALID_REQUEST if line.lstrip(JSON_WHITESPACE)[:1] in (b"{", b"[") else PARSE_ERROR]
    if not line.strip(JSON_WHITESPACE):
        return []
    try:
        text = line.decode("utf-8")
        cut = batch_cut(text, max_batch)
        if cut is not None:  # read no further than where the entry past max_batch begins
            return [PARSE_ERROR if text_nesting(text[:cut]) > max_depth else INVALID_REQUEST]
        value = json.loads(text, parse_constant=reject_constant)
    except (ValueError, RecursionError, ParseFailed):  # UnicodeDecodeError is a ValueError
        return [PARSE_ERROR]
    if text_nesting(text) > max_depth:
        return [PARSE_ERROR]
    if type(value) is not list:
        written, answer = expected_entry(value)
        return written if answer is None else [*written, answer]
    if not value:
        return [INVALID_REQUEST]
    written, answers = [], []
    for entry in value:
        notifications, answer = expected_entry(entry)
        written += notifications
        if answer is not None:
            answers.append(answer)
    return [*written, answers] if answers else written


def batch_cut(text: str, max_batch: int | None) -> int | None:
    """Where the entry past ``max_batch`` begins if ``text`` opens a batch with more entries, each valid
    JSON up to there (what follows is not read); ``None`` otherwise."""
    whitespace = re.compile(r"[ \t\n\r]*")
    start = whitespace.match(text).end()  # type: ignore[union-attr]
    if max_batch is None or not text.startswith("[", start):
        return None
    decoder = json.JSONDecoder(parse_constant=reject_constant)
    position = whitespace.match(text, start + 1).end()  # type: ignore[union-attr]
    for _ in range(max_batch):
        try:
            _, end = decoder.raw_decode(text, position)
        except (ValueError, RecursionError, ParseFailed):
            return None
        position = whitespace.match(text, end).end()  # type: ignore[union-attr]
        if not text.startswith(",", position):
            return None
        position = whitespace.match(text, position + 1).end()  # type: ignore[union-attr]
    return position


def framed(data: bytes) -> list[bytes]:
    """The lines of a stream as docs/semantics.md frames them."""
    pieces = data.split(b"\n")
    if not pieces[-1]:
        pieces.pop()
    return [piece.removesuffix(b"\r") for piece in pieces]


def same(a: Any, b: Any) -> bool:
    """Equal, with the same types and the same member order (so 1 is not 1.0 and -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return bool(a == b)


def matches(answer: Any, expected: Any) -> bool:
    if expected[0] == "notification":
        wanted = {"jsonrpc": "2.0", "method": expected[1]}
        if expected[2] is not None:
            wanted["params"] = expected[2]
        return same(answer, wanted)
    if not isinstance(answer, dict) or answer.get("jsonrpc") != "2.0" or "id" not in answer:
        return False
    if not same(answer["id"], expected[1]):  # the id, exactly (an int keeps every digit)
        return False
    if expected[0] == "result":
        return set(answer) == {"jsonrpc", "id", "result"} and same(answer["result"], expected[2])
    if set(answer) != {"jsonrpc", "id", "error"} or answer["error"]["code"] != expected[2]:
        return False
    return expected[3] is None or answer["error"]["message"] == expected[3]


class NumberText(str):
    """A number in an answer line, as written there."""


def canonical(value: Any, id_as_written: bool = False) -> str:
    """``value`` (decoded with numbers as ``NumberText``) as ``json.dumps`` writes it compactly, but for
    an answer's id (a member ``id`` of the line's object, or of an object in its array): as written."""
    if isinstance(value, NumberText):
        if id_as_written:
            return str(value)
        number = float(value) if any(c in value for c in ".eE") else int(value)
        return json.dumps(number, allow_nan=False)
    if isinstance(value, dict):
        return (
            "{"
            + ",".join(f"{canonical(k)}:{canonical(v, id_as_written and k == 'id')}" for k, v in value.items())
            + "}"
        )
    if isinstance(value, list):
        return "[" + ",".join(canonical(item, id_as_written) for item in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def decoded_lines(out: bytes) -> list[Any]:
    """Property (b): each output line is one compact JSON object or array (lone surrogates as ``\\udxxx``)."""
    assert out == b"" or out.endswith(b"\n"), out
    decoded = []
    for line in out.split(b"\n")[:-1]:
        value = json.loads(line)
        assert isinstance(value, (dict, list)), line
        as_written = json.loads(line, parse_int=NumberText, parse_float=NumberText)
        compact = canonical(as_written, id_as_written=True)
        assert compact.encode("utf-8", "backslashreplace") == line, f"not compact JSON: {line!r}"
        decoded.append(value)
    return decoded


def check_against_oracle(data: bytes, out: bytes, max_depth: int, max_bytes: int, max_batch: int | None) -> None:
    expected = [written for line in framed(data) for written in expected_line(line, max_depth, max_bytes, max_batch)]
    got = decoded_lines(out)
    assert len(got) == len(expected), (got, expected)
    for answer, wanted in zip(got, expected, strict=True):
        if isinstance(wanted, list):
            assert isinstance(answer, list), (answer, wanted)
            assert len(answer) == len(wanted) and all(map(matches, answer, wanted)), (answer, wanted)
        else:
            assert matches(answer, wanted), (answer, wanted)


# --- serving -------------------------------------------------------------------------------------


def handler_for(transport: Any) -> Any:
    """The handler the oracle predicts: ``missing`` raises MethodNotFound with the params as its data, ``boom``
    raises ValueError, ``progress`` writes a notification on ``transport`` before it answers; each returns the
    params."""

    def handler(method: str, params: Any) -> Any:
        if method == "missing":
            raise rpcwire.MethodNotFound(data=params)
        if method == "boom":
            raise ValueError(params)
        if method == "progress":
            transport.write_notification("progress", params)
        return params

    return handler


def outcome(impl: Any, stdin: Any, **options: Any) -> tuple[bytes, str | None]:
    """What serving ``stdin`` (bytes, or a stream) writes, and the name of the exception it raised, if any."""
    out = io.BytesIO()
    transport = impl.StdioTransport(io.BytesIO(stdin) if isinstance(stdin, bytes) else stdin, out, **options)
    try:
        impl.serve(handler_for(transport), transport, max_concurrency=1)
    except Exception as exc:
        return out.getvalue(), type(exc).__name__
    return out.getvalue(), None


def read_all_lines(impl: Any, data: bytes) -> list[bytes | None]:
    transport = impl.StdioTransport(io.BytesIO(data), io.BytesIO())
    result = []
    while True:
        line = transport.read_line()
        result.append(line)
        if line is None:
            return result


def parse_outcome(impl: Any, raw: bytes | str) -> Any:
    try:
        return impl.parse_request(raw)
    except Exception as exc:
        return type(exc).__name__


# --- the properties ------------------------------------------------------------------------------


@pytest.mark.slow
@examples(1)
@given(streams())
@example(b'{"id":true,"jsonrpc":"2.0","method":"echo","id":7}\n{"id":7,"jsonrpc":"2.0","method":"echo","id":1.5}\n')
@example(b'{"jsonrpc":"2.0","method":"echo","params":{"a":1,"b":2,"a":3},"\\u0069d":"\\u00e9\\ud800"}\r\n')
@example(b'{"jsonrpc":"2.0","method":"echo","id":-0,"params":[1],"params":7}\n{"jsonrpc":"2.0","method":"x"}')
@example(b'[{"jsonrpc":"2.0","method":"echo","id":' + b"9" * 4300 + b'},{"jsonrpc":"2.0","method":"n"},1]\n')
@example(  # what the handler writes or raises cannot be encoded (1e400 is inf), and a progress without params
    b'[{"jsonrpc":"2.0","method":"progress","params":[1e400],"id":1},{"jsonrpc":"2.0","method":"progress"}]\n'
    b'{"jsonrpc":"2.0","method":"missing","params":{"a":-1e400},"id":2}\n{"jsonrpc":"2.0","method":"progress","id":3}'
)
def test_native_and_pure_agree_and_answer_as_specified(data: bytes) -> None:
    """(a), (b), (c) with the default limits; and for the same stream, both cores read the same lines (the
    documented framing) and ``parse_request`` gives the same for each of them, as bytes and as text."""
    native, pure = (outcome(impl, data) for impl in IMPLS.values())
    assert native == pure, data
    assert native[1] is None, native
    check_against_oracle(data, native[0], DEFAULT_DEPTH, rpcwire.DEFAULT_MAX_MESSAGE_BYTES, rpcwire.DEFAULT_MAX_BATCH)
    lines_read = read_all_lines(rpcwire.pure, data)
    assert read_all_lines(rpcwire, data) == lines_read
    assert lines_read == [*framed(data), None]
    for line in lines_read[:-1]:
        assert line is not None
        parsed = parse_outcome(rpcwire, line)
        assert parse_outcome(rpcwire.pure, line) == parsed, line
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            continue
        assert parse_outcome(rpcwire, text) == parse_outcome(rpcwire.pure, text) == parsed, line


@pytest.mark.slow
@examples(1)
@given(
    streams(),
    st.integers(1, 300),
    st.one_of(st.integers(1, 6), st.integers(DEFAULT_DEPTH - 2, DEFAULT_DEPTH + 2)),
    st.one_of(st.none(), st.integers(1, 3)),
    st.lists(st.integers(1, 40), min_size=1, max_size=5),
)
@example(b"   " * 40 + b"\n{}\n", 20, 1, None, [7])  # an over-long line of whitespace: answered
@example(b' \t[1,2,3]\r\n[{"jsonrpc":"2.0","method":"m"}]\n', 8, 2, 1, [3])
def test_limits_and_reads_in_pieces(
    data: bytes, max_bytes: int, max_depth: int, max_batch: int | None, sizes: list[int]
) -> None:
    """Small limits (over-long lines, shallow nesting, short batches) and the native reader fed in pieces."""
    limits = {"max_message_bytes": max_bytes, "max_depth": max_depth, "max_batch": max_batch}
    pure = outcome(rpcwire.pure, data, **limits)
    assert outcome(rpcwire, data, **limits) == pure, data
    assert outcome(rpcwire, io.BufferedReader(Trickle(data, sizes), buffer_size=64), **limits) == pure, data
    assert outcome(rpcwire, Trickle(data, sizes), **limits) == pure, data  # raw: no readinto1, no read1
    assert pure[1] is None, pure
    check_against_oracle(data, pure[0], max_depth, max_bytes, max_batch)


@st.composite
def long_batches(draw: st.DrawFn) -> bytes:
    """A batch of up to 30 requests and notifications (a stream's batches have up to 4 entries), on one line."""
    return render(draw, draw(st.lists(envelopes(), min_size=1, max_size=30))).encode("utf-8") + b"\n"


@pytest.mark.slow
@examples(0.5)
@given(long_batches())
def test_long_batches_agree_and_answer_as_specified(data: bytes) -> None:
    native, pure = (outcome(impl, data) for impl in IMPLS.values())
    assert native == pure, data
    assert native[1] is None, native
    check_against_oracle(data, native[0], DEFAULT_DEPTH, rpcwire.DEFAULT_MAX_MESSAGE_BYTES, rpcwire.DEFAULT_MAX_BATCH)


# --- what the properties found ---------------------------------------------------------------------

DEEP_BUT_REPLACED = b'{"jsonrpc":"2.0","method":"echo","id":1,"params":' + b"[" * 128 + b"]" * 128 + b',"params":[]}\n'
PARSE_ERROR_LINE = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n'


def test_nesting_inside_a_replaced_duplicate_counts(impl: Any) -> None:
    """The depth limit is on the line (docs/semantics.md), so a member a later duplicate replaces still counts.
    (Found by these properties with a small ``max_depth``: ``rpcwire.pure`` measured the decoded value.)"""
    assert served(impl, io.BytesIO(DEEP_BUT_REPLACED)) == PARSE_ERROR_LINE
    assert impl.parse_request(DEEP_BUT_REPLACED)[1] == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }
    shallow = b'{"jsonrpc":"2.0","method":"echo","params":[1],"params":3,"id":2}\n'
    assert served(impl, io.BytesIO(shallow), max_depth=1) == PARSE_ERROR_LINE


# --- batches of many number ids --------------------------------------------------------------------


def test_a_batch_of_1000_number_ids_gives_identical_bytes() -> None:
    """Float and zero ids come back as written; ``rpcwire.pure`` reads their text once per line (it read the
    whole batch again for each such id: seconds for a batch of 1,000, where the native module takes 1 ms)."""
    id_texts = [b"1.5", b"-0", b"0", b"1e3", b"2.50", b"-0.0", b"1E+03", b"7", b'"s"', b"0.1e-2"]
    entries = [
        b'{"jsonrpc":"%s","method":"echo","params":[%d],"id":%s}' % (b"1.0" if i % 7 == 0 else b"2.0", i, id_text)
        for i, id_text in zip(range(1000), itertools.cycle(id_texts))
    ]
    data = b"[" + b",".join(entries) + b"]\n"
    native, pure = (outcome(impl, data) for impl in IMPLS.values())
    assert native == pure
    answers = json.loads(native[0])
    assert len(answers) == 1000 and native[1] is None
    for id_text in id_texts:  # each written as it came, in answers and -32600s alike
        assert native[0].count(b'"id":%s,"result"' % id_text) + native[0].count(b'"id":%s,"error"' % id_text) == 100
    assert rpcwire.dispatch(data, echo) == rpcwire.pure.dispatch(data, echo)


def test_pure_reads_the_numbers_text_of_a_batch_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Linear, counted rather than timed: each number of the line is kept as text at most once (the quadratic
    reading made one for every number of the batch, for each of its float ids: 2 million here)."""
    made = 0
    number_text = rpcwire._pure.envelope._NumberText

    def counted(text: str) -> Any:
        nonlocal made
        made += 1
        return number_text(text)

    monkeypatch.setattr(rpcwire._pure.envelope, "_NumberText", counted)
    data = (
        b"[" + b",".join(b'{"jsonrpc":"2.0","method":"m","params":[%d],"id":%d.5}' % (i, i) for i in range(1000)) + b"]"
    )
    answer = rpcwire.pure.dispatch(data, echo)
    assert answer is not None and answer.count(b'.5,"result":[') == 1000
    assert made <= 2 * 1000  # two numbers an entry


# --- Content-Length framing: generated frames, valid and broken, read whole or a few bytes at a time -------

HEADER_NAMES = [b"Content-Length", b"content-length", b"CONTENT-LENGTH", b"Content-length"]
BAD_HEADERS = [b"garbage", b"Content-Length: x", b"Content-Length: 99999", b": no name", b"X Y: z", b"Content-Length:"]


@st.composite
def frame_streams(draw: st.DrawFn) -> bytes:
    """Frames around generated lines: headers in any order and case, either line end, and sometimes a
    wrong or missing length, a bad header, junk between frames, or a stream cut short."""
    data = b""
    for _ in range(draw(st.integers(1, 5))):
        body = draw(lines())
        breakage = draw(st.integers(0, 14))  # 0-9: a valid frame
        length = len(body) + (draw(st.integers(-3, 3)) if breakage == 10 else 0)
        headers = [draw(st.sampled_from(HEADER_NAMES)) + draw(st.sampled_from([b": ", b":", b":  "])) + b"%d" % length]
        if draw(st.booleans()):
            headers.insert(draw(st.integers(0, 1)), b"Content-Type: application/vscode-jsonrpc; charset=utf-8")
        if breakage == 11:
            headers = [header for header in headers if not header.lower().startswith(b"content-length")]
        if breakage == 12:
            headers.insert(draw(st.integers(0, len(headers))), draw(st.sampled_from(BAD_HEADERS)))
        end = draw(st.sampled_from([b"\r\n", b"\n"]))
        data += end.join(headers) + end + end + body
        if breakage == 13:
            data += draw(st.sampled_from([b"\r\n", b"\n\n", b" ", b"junk\n", b"content-length"]))
    if draw(st.integers(0, 9)) == 0:
        data = data[: draw(st.integers(0, len(data)))]
    return data


def framed_outcome(impl: Any, stdin: Any, max_message_bytes: int) -> tuple[bytes, str | None, list[Any]]:
    """What serving writes, the exception serving raised, and what read_line gives on a second stream."""
    out = io.BytesIO()
    transport = impl.StdioTransport(stdin[0], out, framing="content-length", max_message_bytes=max_message_bytes)

    def handler(method: str, params: Any) -> Any:
        if method == "boom":
            raise ValueError(params)
        return params

    raised = None
    try:
        impl.serve(handler, transport)
    except Exception as exc:
        raised = type(exc).__name__
    reader = impl.StdioTransport(stdin[1], io.BytesIO(), framing="content-length", max_message_bytes=max_message_bytes)
    bodies: list[Any] = []
    while True:
        try:
            body = reader.read_line()
        except ValueError as exc:
            bodies.append(str(exc))
            continue
        bodies.append(body)
        if body is None:
            return out.getvalue(), raised, bodies


@pytest.mark.slow
@examples(1)
@given(frame_streams(), st.sampled_from([30, 200, 2**20]), st.lists(st.integers(1, 7), min_size=1, max_size=4))
def test_content_length_streams_give_identical_bytes(data: bytes, max_message_bytes: int, sizes: list[int]) -> None:
    """Both cores write the same bytes and read the same bodies, whether the stream is read whole or a few bytes
    at a time (where a frame's headers and body end up split across reads)."""
    whole = framed_outcome(rpcwire, (io.BytesIO(data), io.BytesIO(data)), max_message_bytes)
    for impl in IMPLS.values():
        trickled = framed_outcome(impl, (Trickle(data, sizes), Trickle(data, sizes)), max_message_bytes)
        assert trickled == whole, (impl.__name__, data)
    assert framed_outcome(rpcwire.pure, (io.BytesIO(data), io.BytesIO(data)), max_message_bytes) == whole, data
