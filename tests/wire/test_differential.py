"""Differential tests: generated streams, valid and broken, must give byte-identical output from ``rpcwire``
(native) and ``rpcwire.pure``. Both also agree on ``read_line`` and ``parse_request`` for every line.
"""

from __future__ import annotations

import io
import itertools
import json
from typing import Any

import pytest
import rpcwire
import rpcwire.pure
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.messages import LONG_INT_DIGITS, echo
from support.streams import Trickle

IMPLS = {"native": rpcwire, "pure": rpcwire.pure}
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- building blocks --------------------------------------------------------------------------------

texts = st.text(
    st.one_of(st.characters(), st.characters(categories=["Cs"]), st.sampled_from('"\\/\x00\x1f\x7f\u2028é😀')),
    max_size=8,
)
numbers = st.one_of(
    st.integers(-1000, 1000),
    st.integers(),
    st.integers(-(2**128), 2**128),
    st.integers(-(10**20), 10**20),  # around the native scanner's own 18 digits
    st.floats(allow_nan=False, allow_infinity=False),
    # short decimals and measurements: the native decoder's exact path (below 2^53, up to 10^22) and its edges
    st.builds(round, st.floats(-1e6, 1e6), st.integers(0, 8)),
    st.builds(lambda m, e: m * 10.0**e, st.integers(-(2**54), 2**54), st.integers(-24, 24)),
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers, texts),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(texts, children, max_size=4)),
    max_leaves=12,
)
ids = st.one_of(st.integers(), st.integers(-(2**100), 2**100), texts, st.none())
bad_ids = st.sampled_from([True, False, 1.5, 1e3, -0.0, [], [1], {}, {"a": 1}])
methods = st.sampled_from(["echo", "missing", "boom", "progress", "rpc.discover", "é", ""])
params = st.one_of(st.lists(json_values, max_size=4), st.dictionaries(texts, json_values, max_size=4))

MISSING = object()


@st.composite
def envelopes(draw: st.DrawFn) -> Any:
    """A request or notification, usually valid, sometimes broken in one member."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": draw(methods)}
    if draw(st.booleans()):
        message["params"] = draw(params)
    if draw(st.integers(0, 3)):
        message["id"] = draw(ids)
    breakage = draw(st.integers(0, 15))  # 0-9: left valid (hypothesis favours small numbers)
    if breakage == 10:
        message["jsonrpc"] = draw(st.sampled_from(["1.0", 2.0, "2.0 ", None, "2"]))
    elif breakage == 11:
        message["method"] = draw(st.one_of(st.integers(), st.none(), st.lists(st.integers(), max_size=1)))
    elif breakage == 12:
        message["params"] = draw(st.one_of(st.none(), st.integers(), texts, st.booleans()))
    elif breakage == 13:
        message["id"] = draw(bad_ids)
    elif breakage == 14:
        del message[draw(st.sampled_from(["jsonrpc", "method"]))]
    elif breakage == 15:
        message["extra"] = draw(json_values)
    keys = draw(st.permutations(list(message)))
    return {key: message[key] for key in keys}


# mostly envelopes (sampled_from shrinks towards its first element); sometimes any JSON value
messages = st.sampled_from(["envelope"] * 5 + ["value"]).flatmap(
    lambda kind: envelopes() if kind == "envelope" else json_values
)
batches = st.lists(messages, max_size=5)
payloads = st.one_of(messages, messages, batches)

SEPARATORS = [(",", ":"), (", ", ": "), (" ,\t", "\r:\t "), ("\t,", ":\r\r")]


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    """One line (without its newline): a payload as JSON text, then perhaps one mutation of its bytes."""
    payload = draw(payloads)
    ascii_only = draw(st.booleans())
    text = json.dumps(payload, ensure_ascii=ascii_only, separators=draw(st.sampled_from(SEPARATORS)))
    raw = text.encode("utf-8", "surrogatepass")  # a raw surrogate becomes invalid UTF-8 (ED A0 80 ...)
    raw = draw(st.sampled_from([b"", b" ", b"\t", b"\r", b" \t "])) + raw + draw(st.sampled_from([b"", b" ", b"\t\r"]))
    return draw(mutations(raw))


@st.composite
def mutations(draw: st.DrawFn, raw: bytes) -> bytes:
    kind = draw(st.integers(0, 14))  # 0-5: left alone
    if kind <= 5 or not raw:
        return raw
    position = draw(st.integers(0, len(raw)))
    if kind == 6:  # truncation
        return raw[:position]
    if kind == 7:  # byte flip
        if position == len(raw):
            return raw
        return raw[:position] + bytes([draw(st.integers(0, 255))]) + raw[position + 1 :]
    if kind == 8:  # an inserted newline splits the line in two
        return raw[:position] + draw(st.sampled_from([b"\n", b"\r\n", b"\r"])) + raw[position:]
    if kind == 9:  # invalid UTF-8
        bad = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xef\xbb"]))
        return raw[:position] + bad + raw[position:]
    if kind == 10:  # a huge number where a digit was
        digits = [i for i, byte in enumerate(raw) if 0x30 <= byte <= 0x39]
        if not digits:
            return raw
        at = draw(st.sampled_from(digits))
        limit = LONG_INT_DIGITS
        huge = draw(st.sampled_from([b"9" * limit, b"9" * (limit + 1), b"1e400", b"1" * 400 + b".5", b"2.5e-324"]))
        return raw[:at] + huge + raw[at + 1 :]
    if kind == 11:  # deep nesting around the params or the whole line
        depth = draw(st.integers(120, 135))
        wrapped = b"[" * depth + b"1" + b"]" * depth
        if b'"params"' in raw:
            return b'{"jsonrpc":"2.0","method":"echo","id":1,"params":' + wrapped + b"}"
        return b"[" * depth + raw + b"]" * depth
    if kind == 12:  # duplicate keys
        if not raw.lstrip().startswith(b"{"):
            return raw
        start = raw.index(b"{") + 1
        members = [b'"id":1,', b'"id":true,', b'"method":"boom",', b'"jsonrpc":"1.0",', b'"params":7,']
        member = draw(st.sampled_from(members))
        return raw[:start] + member + raw[start:]
    if kind == 13:  # unusual whitespace: only some of it is JSON whitespace
        space = draw(st.sampled_from([b" ", b"\t", b"\r", b"\x0c", b"\x0b", b"\xc2\xa0", b"\xe2\x80\xa8", b"\x00"]))
        return raw[:position] + space + raw[position:]
    return draw(st.sampled_from([b"NaN", b"[]", b"[ ]", b"{}", b"null", b"[[]]", b"\xef\xbb\xbf{}", b"//", b"[1,]"]))


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    parts = draw(st.lists(lines(), min_size=1, max_size=6))
    data = b""
    for part in parts:
        data += part + draw(st.sampled_from([b"\n", b"\n", b"\r\n", b"\n\n", b"\n \t\n"]))
    if draw(st.booleans()):
        data = data.rstrip(b"\n")  # the last line without its newline
    return data


# --- running both --------------------------------------------------------------------------------


def outcome(impl: Any, data: bytes) -> tuple[bytes, str | None]:
    """What serving ``data`` writes, and the name of the exception it raised, if any."""
    out = io.BytesIO()
    transport = impl.StdioTransport(io.BytesIO(data), out)

    def handler(method: str, params: Any) -> Any:
        if method == "missing":
            raise rpcwire.MethodNotFound(data=params)
        if method == "boom":
            raise ValueError(params)
        if method == "progress":
            transport.write_notification("progress", params)
        return params

    try:
        impl.serve(handler, transport)
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


@pytest.mark.slow
@SETTINGS
@given(streams())
def test_streams_give_identical_bytes(data: bytes) -> None:
    """Serving, and reading line by line, give the same from both (one generated stream for both checks)."""
    native, pure = (outcome(impl, data) for impl in IMPLS.values())
    assert native == pure, data
    check_read_line(data)


def check_read_line(data: bytes) -> None:
    native, pure = (read_all_lines(impl, data) for impl in IMPLS.values())
    assert native == pure
    # and with the documented framing: split at \n, drop a \r at the end of a line (also of a last line
    # without \n), serve the last line without \n
    pieces = data.split(b"\n")
    if not pieces[-1]:
        pieces.pop()
    expected = [piece.removesuffix(b"\r") for piece in pieces]
    assert pure == [*expected, None]


@pytest.mark.slow
@SETTINGS
@given(lines())
def test_parse_request_agrees(raw: bytes) -> None:
    native, pure = (parse_outcome(impl, raw) for impl in IMPLS.values())
    assert native == pure, raw
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return
    assert parse_outcome(rpcwire, text) == parse_outcome(rpcwire.pure, text) == native


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(st.lists(envelopes(), min_size=1, max_size=30))
def test_long_batches_give_identical_bytes(entries: list[Any]) -> None:
    data = json.dumps(entries).encode() + b"\n"
    native, pure = (outcome(impl, data) for impl in IMPLS.values())
    assert native == pure


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
    number_text = rpcwire.pure.envelope._NumberText

    def counted(text: str) -> Any:
        nonlocal made
        made += 1
        return number_text(text)

    monkeypatch.setattr(rpcwire.pure.envelope, "_NumberText", counted)
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
@SETTINGS
@given(frame_streams(), st.sampled_from([30, 200, 2**20]), st.lists(st.integers(1, 7), min_size=1, max_size=4))
def test_content_length_streams_give_identical_bytes(data: bytes, max_message_bytes: int, sizes: list[int]) -> None:
    """Both cores write the same bytes and read the same bodies, whether the stream is read whole or a few bytes
    at a time (where a frame's headers and body end up split across reads)."""
    whole = framed_outcome(rpcwire, (io.BytesIO(data), io.BytesIO(data)), max_message_bytes)
    for impl in IMPLS.values():
        trickled = framed_outcome(impl, (Trickle(data, sizes), Trickle(data, sizes)), max_message_bytes)
        assert trickled == whole, (impl.__name__, data)
    assert framed_outcome(rpcwire.pure, (io.BytesIO(data), io.BytesIO(data)), max_message_bytes) == whole, data
