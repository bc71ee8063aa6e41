"""What a client does to a message before it sends it, asked of both cores: its ``Content-Length`` frame
(``_encode_frame``) and whether it nests deeper than a server's ``max_depth`` (``_nests_deeper``). The two
cores must agree on every input, JSON or not (the native one is the protocol crate's ``nesting``, the pure
one ``rpcwire._pure.codec.nests_deeper``), and ``import rpcwire`` takes the native ones: it imports no module
of the pure core ``rpcwire._pure``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import rpcwire
import rpcwire.pure
from hypothesis import given
from hypothesis import strategies as st
from support.messages import nested_list
from support.processes import child_env
from support.properties import examples

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not rpcwire.NATIVE, reason="compares the native core with the pure one"),
]

native = rpcwire._core
pure = rpcwire.pure

# Bytes where the rules have something to do: brackets and braces, quotes, backslashes (runs of them).
_STRUCTURE = st.sampled_from([b"[", b"]", b"{", b"}", b'"', b"\\", b"\\\\", b'\\"', b"a", b" ", b":", b","])
_TEXTS = st.lists(_STRUCTURE, max_size=200).map(b"".join)
_DEPTHS = st.integers(min_value=-2, max_value=40)


@examples(6)  # a check of microseconds: many examples for the price of a few streams
@given(st.one_of(_TEXTS, st.binary(max_size=300)), _DEPTHS)
def test_both_cores_count_nesting_alike_on_any_bytes(text: bytes, max_depth: int) -> None:
    """Texts of the bytes where the rules act (brackets, quotes, runs of backslashes), and random bytes."""
    assert native._nests_deeper(text, max_depth) is pure._nests_deeper(text, max_depth)


_JSON = st.recursive(
    st.none() | st.integers() | st.text(alphabet='[]{}"\\ab\u00e9'),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(alphabet='[]{}"\\k'), children),
    max_leaves=30,
)


@examples(2)
@given(_JSON, st.integers(min_value=0, max_value=12))
def test_both_cores_count_nesting_of_json_alike_and_as_the_value_nests(value: object, max_depth: int) -> None:
    text = json.dumps(value).encode()
    deepest = _depth(value)
    assert native._nests_deeper(text, max_depth) is pure._nests_deeper(text, max_depth) is (deepest > max_depth)


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


@pytest.mark.parametrize("levels", [31, 32, 33, 127, 128, 129, 600])
def test_deep_texts_at_the_limits_the_clients_use(levels: int) -> None:
    for text in (json.dumps(nested_list(levels)).encode(), b"[" * levels, b'{"a":' * levels + b"1" + b"}" * levels):
        for max_depth in (32, 128):
            assert native._nests_deeper(text, max_depth) is pure._nests_deeper(text, max_depth) is (levels > max_depth)


@examples(1)
@given(st.binary(max_size=2000))
def test_both_cores_frame_alike(body: bytes) -> None:
    frame = native._encode_frame(body)
    assert frame == pure._encode_frame(body)
    assert frame == b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


def test_a_large_body_is_framed_whole() -> None:
    body = bytes(range(256)) * 8192  # 2 MiB
    assert native._encode_frame(body) == pure._encode_frame(body)


def test_import_rpcwire_imports_no_module_of_rpcwire_pure() -> None:
    code = (
        "import json, sys, rpcwire, rpcwire.lsp; assert rpcwire.NATIVE;"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('rpcwire.pure', 'rpcwire._pure')))))"
    )
    done = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, check=True, timeout=60)
    assert json.loads(done.stdout) == []
